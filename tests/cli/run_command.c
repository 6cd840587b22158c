/* SPDX-License-Identifier: MIT */
/*
 * run_command.c - `fencelock run` with real processes, a real fencelockd and
 * real signals: the command's environment and process group, exit statuses
 * passed through, signals forwarded, and what happens when the lease is lost
 * (fencelock run stopped with SIGSTOP past its lease while another process
 * takes the key): the command's whole process group gets SIGTERM, SIGKILL
 * after --kill-after, and fencelock run exits 76.
 *
 * The command is run_probe (see run_probe.c), which reports on a pipe what
 * it sees and obeys lines on its stdin (fencelock run passes stdin on).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_util.h"
#include "fencelock.h"
#include "harness.h"
#include "spawn.h"

#ifndef RUN_PROBE_PATH
#define RUN_PROBE_PATH "run_probe"
#endif

#define T_LINE 20000 /* ms: generous; nothing waits this long unless broken */

static th_daemon daemon_;
static fl_region *region_; /* the test's own client, to hold and inspect keys */

static int setup(void **state)
{
    (void)state;
    if (th_daemon_start(&daemon_, th_path("region"), NULL) != 0)
        return -1;
    return fl_open(daemon_.region, &region_) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fl_close(region_);
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

struct probe_run {
    sp_proc p;          /* fencelock run */
    pid_t probe;        /* the command */
    pid_t probe_pgid;
    char key[128], token[32], region[512];
    int extra_fds;
    char fds_line[1024];
};

/* Start `fencelock run OPTIONS... KEY -- run_probe PROBE_ARGS...` and read the
 * probe's first reports; broken_stderr: fencelock run's stderr is a pipe
 * whose reader is gone. */
static void start_probe_with(struct probe_run *pr, const char *const *options, const char *key,
                             const char *const *probe_args, bool broken_stderr)
{
    const char *argv[32] = {FENCELOCK_TOOL_PATH, "run"};
    int n = 2;
    for (int i = 0; options && options[i]; i++)
        argv[n++] = options[i];
    argv[n++] = key;
    argv[n++] = "--";
    argv[n++] = RUN_PROBE_PATH;
    for (int i = 0; probe_args && probe_args[i]; i++)
        argv[n++] = probe_args[i];
    argv[n] = NULL;
    sp_opts o = {.region = daemon_.region, .stdin_pipe = true, .report_pipe = true,
                 .stderr_broken_pipe = broken_stderr};
    sp_start(&pr->p, &o, argv);
    char buf[1024];
    int pid, pgid;
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, "ready");
    assert_int_equal(sscanf(buf, "ready %d %d", &pid, &pgid), 2);
    pr->probe = pid;
    pr->probe_pgid = pgid;
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, "env");
    assert_int_equal(sscanf(buf, "env %127s %31s %511s", pr->key, pr->token, pr->region), 3);
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, "fds");
    assert_int_equal(sscanf(buf, "fds %d", &pr->extra_fds), 1);
    snprintf(pr->fds_line, sizeof pr->fds_line, "%s", buf);
}

static void start_probe(struct probe_run *pr, const char *const *options, const char *key,
                        const char *const *probe_args)
{
    start_probe_with(pr, options, key, probe_args, false);
}

/* "detached PID SID" from the report pipe (run_probe --setsid, --detach):
 * the pid of a descendant in a session of its own. */
static pid_t expect_detached(struct probe_run *pr)
{
    char buf[256];
    int pid, sid;
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, "detached");
    assert_int_equal(sscanf(buf, "detached %d %d", &pid, &sid), 2);
    assert_true(sid != getsid(pr->probe)); /* it left the command's session and group */
    assert_true(getpgid(pid) != pr->probe_pgid);
    return pid;
}

/* pid is gone, reaped: not even a zombie.  Kills it if not, so that a
 * failing test leaves nothing behind. */
static bool reaped(pid_t pid)
{
    bool gone = kill(pid, 0) != 0 && errno == ESRCH;
    if (!gone)
        kill(pid, SIGKILL);
    return gone;
}

static fl_lock_info lock_info(const char *key)
{
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(region_, &ri), 0);
    fl_lock_info li;
    memset(&li, 0, sizeof li);
    for (uint32_t i = 0; i < ri.locks_used; i++)
        if (fl_lock_info_get(region_, i, &li) == 0 && strcmp(li.key, key) == 0)
            return li;
    fail_msg("no key %s", key);
    return li;
}

/* "signal PID SIG" from the report pipe. */
static void expect_signal(struct probe_run *pr, pid_t pid, int sig)
{
    char buf[256], want[64];
    snprintf(want, sizeof want, "signal %d %d", (int)pid, sig);
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, want);
    assert_string_equal(buf, want);
}

/* Acquire key in this process, waiting as long as it takes (the holder's
 * lease must run out first); returns the lease. */
static fl_lease take_over(const char *key)
{
    fl_lease l;
    int err = fl_acquire(region_, key, 30 * TH_S, 20 * (int64_t)TH_S, &l);
    if (err)
        fail_msg("acquire %s: %s", key, fl_strerror(err));
    return l;
}

static bool key_free(const char *key)
{
    fl_lease l;
    int err = fl_acquire(region_, key, 1 * TH_S, 0, &l);
    if (err == 0)
        assert_int_equal(fl_release(region_, &l), 0);
    return err == 0;
}

/* The probe's descriptors besides 0..3 may only be ones this test process
 * itself inherited without close-on-exec (from whoever started the test);
 * none of fencelock run's own (region, socket, signalfd, eventfd, pipes). */
static void assert_fds_not_leaked(const struct probe_run *pr)
{
    const char *p = strchr(pr->fds_line + 4, ' ');
    while (p && *p == ' ') {
        int fd = atoi(p + 1);
        const char *target = strchr(p, '=');
        assert_non_null(target);
        int flags = fcntl(fd, F_GETFD);
        if (flags < 0 || (flags & FD_CLOEXEC) || strstr(target, "signalfd") ||
            strstr(target, "eventfd") || strstr(target, "socket:") ||
            strstr(target, daemon_.region))
            fail_msg("descriptor leaked into the command: %s", pr->fds_line);
        p = strchr(p + 1, ' ');
    }
}

/* ---- the command's world ---------------------------------------------------- */

static void test_environment_group_and_status(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, NULL, "run/env", NULL);
    /* Its own process group, not fencelock run's. */
    assert_int_equal(pr.probe_pgid, pr.probe);
    assert_int_equal(getpgid(pr.p.pid), getpgrp());
    assert_true(pr.probe_pgid != getpgid(pr.p.pid));
    /* The environment: the key, the token of the current holding, the region. */
    assert_string_equal(pr.key, "run/env");
    assert_string_equal(pr.region, daemon_.region);
    fl_lock_info li = lock_info("run/env");
    char tok[32];
    snprintf(tok, sizeof tok, "%" PRIu64, li.token);
    assert_string_equal(pr.token, tok);
    assert_int_equal(li.state, FL_LOCK_HELD);
    assert_int_equal(li.holder_pid, (uint32_t)pr.p.pid);
    /* None of fencelock run's descriptors (region, socket, signalfd,
     * eventfd, pipes) leaks into the command. */
    assert_fds_not_leaked(&pr);
    assert_false(key_free("run/env"));
    /* The command's exit status is fencelock run's; the key is released. */
    sp_write(&pr.p, "exit 42\n");
    assert_int_equal(sp_wait(&pr.p, T_LINE), 42);
    char *err = sp_stderr(&pr.p);
    assert_string_equal(err, "");
    free(err);
    assert_true(key_free("run/env"));
    li = lock_info("run/env");
    assert_int_equal(li.last_release, 0); /* released, not reaped after a death */
    sp_free(&pr.p);
}

static void test_exit_statuses_passed_through(void **state)
{
    (void)state;
    run_opts o = {.region_env = daemon_.region};
    const struct {
        const char *script;
        int want;
    } cases[] = {
        {"exit 0", 0}, {"exit 1", 1}, {"exit 2", 2}, {"exit 75", 75},
        {"exit 255", 255}, {"kill -USR1 $$", 128 + SIGUSR1}, {"kill -KILL $$", 128 + SIGKILL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r;
        run_tool(&r, &o,
                 (const char *const[]){"run", "run/status", "--", "sh", "-c", cases[i].script,
                                       NULL});
        if (r.status != cases[i].want)
            fail_msg("'%s': status %d, want %d; stderr: %s", cases[i].script, r.status,
                     cases[i].want, r.err);
        assert_string_equal(r.err, "");
        run_result_free(&r);
    }
    /* Output passes through untouched. */
    run_result r;
    run_tool(&r, &o,
             (const char *const[]){"run", "run/status", "--", "sh", "-c",
                                   "echo out; echo err >&2", NULL});
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "out\n");
    assert_string_equal(r.err, "err\n");
    run_result_free(&r);
    assert_true(key_free("run/status"));
}

static void test_command_cannot_run(void **state)
{
    (void)state;
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o, (const char *const[]){"run", "run/exec", "--", "/nonexistent/command", NULL});
    assert_int_equal(r.status, 127);
    sp_assert_contains(r.err, "fencelock run: cannot run '/nonexistent/command'");
    run_result_free(&r);
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("not-executable"));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);
    chmod(path, 0644);
    run_tool(&r, &o, (const char *const[]){"run", "run/exec", "--", path, NULL});
    assert_int_equal(r.status, 126);
    sp_assert_contains(r.err, "Permission denied");
    run_result_free(&r);
    assert_true(key_free("run/exec"));
}

/* ---- waiting for the key ---------------------------------------------------- */

static void test_could_not_acquire(void **state)
{
    (void)state;
    fl_lease held;
    assert_int_equal(fl_acquire(region_, "run/busy", 60 * TH_S, 0, &held), 0);
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o, (const char *const[]){"run", "--no-wait", "run/busy", "--", "true", NULL});
    assert_int_equal(r.status, 75);
    assert_string_equal(r.out, "");
    sp_assert_contains(r.err, "fencelock run: 'run/busy' is held by another process");
    run_result_free(&r);

    run_tool(&r, &o, (const char *const[]){"run", "--wait", "0", "run/busy", "--", "true", NULL});
    assert_int_equal(r.status, 75);
    run_result_free(&r);

    uint64_t t0 = th_now_ns();
    run_tool(&r, &o,
             (const char *const[]){"run", "--wait", "200ms", "run/busy", "--", "sh", "-c",
                                   "echo ran", NULL});
    uint64_t waited = th_now_ns() - t0;
    assert_int_equal(r.status, 75);
    assert_string_equal(r.out, ""); /* the command never ran */
    sp_assert_contains(r.err, "fencelock run: 'run/busy' is still held after waiting 200ms");
    assert_true(waited >= 200 * TH_MS);
    run_result_free(&r);
    assert_int_equal(fl_release(region_, &held), 0);
}

/* With a wait, the command starts once the holder releases. */
static void test_waits_for_release(void **state)
{
    (void)state;
    fl_lease held;
    assert_int_equal(fl_acquire(region_, "run/queue", 60 * TH_S, 0, &held), 0);
    const char *argv[] = {FENCELOCK_TOOL_PATH, "run", "--wait", "1m", "run/queue", "--",
                          "sh", "-c", "echo started $FENCELOCK_TOKEN", NULL};
    sp_opts o = {.region = daemon_.region};
    sp_proc p;
    sp_start(&p, &o, argv);
    /* It is waiting (a waiter on the key) and has not started the command. */
    uint64_t deadline = th_now_ns() + T_LINE * TH_MS;
    while (lock_info("run/queue").waiters == 0 && th_now_ns() < deadline)
        usleep(1000); /* polling the waiter count; the deadline bounds a failure */
    assert_int_equal(lock_info("run/queue").waiters, 1);
    assert_int_equal(fl_release(region_, &held), 0);
    char buf[128], want[64];
    snprintf(want, sizeof want, "started %" PRIu64, held.token + 1);
    assert_string_equal(sp_line(&p, p.out, buf, sizeof buf, T_LINE, "started"), want);
    assert_int_equal(sp_wait(&p, T_LINE), 0);
    sp_free(&p);
}

/* ---- signals ---------------------------------------------------------------- */

static void test_signals_forwarded(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, NULL, "run/signals", (const char *const[]){"--ignore-term", NULL});
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT, SIGALRM, SIGWINCH};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        assert_int_equal(kill(pr.p.pid, sigs[i]), 0);
        expect_signal(&pr, pr.probe, sigs[i]);
    }
    /* Still held, still running: forwarding did not end fencelock run. */
    assert_false(key_free("run/signals"));
    sp_write(&pr.p, "exit 0\n");
    assert_int_equal(sp_wait(&pr.p, T_LINE), 0);
    assert_true(key_free("run/signals"));
    sp_free(&pr.p);
}

/* A forwarded SIGTERM that ends the command: its status is 128+15, and the
 * lease was not lost, so that is fencelock run's status. */
static void test_forwarded_term_ends_command(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, NULL, "run/term", NULL);
    assert_int_equal(kill(pr.p.pid, SIGTERM), 0);
    expect_signal(&pr, pr.probe, SIGTERM);
    assert_int_equal(sp_wait(&pr.p, T_LINE), 128 + SIGTERM);
    char *err = sp_stderr(&pr.p);
    assert_string_equal(err, "");
    free(err);
    assert_true(key_free("run/term"));
    sp_free(&pr.p);
}

/* fencelock run killed: fencelockd frees the key at once, and the command
 * learns of it by SIGTERM. */
static void test_killed_run_terms_command(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, NULL, "run/killed", (const char *const[]){"--ignore-term", NULL});
    assert_int_equal(kill(pr.p.pid, SIGKILL), 0);
    expect_signal(&pr, pr.probe, SIGTERM);
    fl_lease l = take_over("run/killed");
    assert_true(l.flags & FL_LEASE_OWNER_DIED);
    assert_int_equal(fl_release(region_, &l), 0);
    assert_int_equal(sp_wait(&pr.p, T_LINE), 128 + SIGKILL);
    kill(pr.probe, SIGKILL); /* it ignores SIGTERM */
    sp_free(&pr.p);
}

/* ---- the lease lost --------------------------------------------------------- */

/* Stop fencelock run past its lease while this process takes the key over,
 * then continue it.  Returns the new holder's lease. */
static fl_lease stop_across_expiry(struct probe_run *pr, const char *key)
{
    assert_int_equal(kill(pr->p.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(pr->p.pid, T_LINE));
    fl_lease l = take_over(key); /* sleeps until the stopped holder's lease ends */
    assert_true(l.flags & FL_LEASE_EXPIRED);
    char tok[32];
    snprintf(tok, sizeof tok, "%" PRIu64, l.token);
    assert_true(strcmp(tok, pr->token) != 0);
    return l;
}

/* The whole group ignores SIGTERM: SIGKILL after --kill-after. */
static void test_lease_lost_term_then_kill(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, (const char *const[]){"--lease", "1s", "--kill-after", "1s", NULL},
                "run/lost", (const char *const[]){"--ignore-term", "--fork", NULL});
    char buf[256];
    int gpid, gpgid;
    sp_line(&pr.p, pr.p.report, buf, sizeof buf, T_LINE, "grandchild");
    assert_int_equal(sscanf(buf, "grandchild %d %d", &gpid, &gpgid), 2);
    assert_int_equal(gpgid, pr.probe_pgid);

    fl_lease b = stop_across_expiry(&pr, "run/lost");
    assert_int_equal(kill(pr.p.pid, SIGCONT), 0);
    /* Both processes of the group get SIGTERM, in either order. */
    int got_probe = 0, got_grandchild = 0;
    uint64_t term_seen = 0;
    for (int i = 0; i < 2; i++) {
        sp_line(&pr.p, pr.p.report, buf, sizeof buf, T_LINE, "signal 15");
        if (!term_seen)
            term_seen = th_now_ns();
        int pid, sig;
        assert_int_equal(sscanf(buf, "signal %d %d", &pid, &sig), 2);
        assert_int_equal(sig, SIGTERM);
        got_probe += pid == pr.probe;
        got_grandchild += pid == gpid;
    }
    assert_int_equal(got_probe, 1);
    assert_int_equal(got_grandchild, 1);
    assert_int_equal(sp_wait(&pr.p, T_LINE), 76);
    /* SIGKILL came no sooner than --kill-after after SIGTERM (measured from
     * when we saw the SIGTERM, which is after it was sent). */
    assert_true(th_now_ns() - term_seen >= 900 * TH_MS);
    char *err = sp_stderr(&pr.p);
    sp_assert_contains(err, "fencelock run: lost the lease of 'run/lost'");
    sp_assert_contains(err, "sending SIGTERM to");
    sp_assert_contains(err, "still running 1s after SIGTERM; sending SIGKILL");
    assert_int_equal(count_lines(err), 2);
    free(err);
    /* The whole group is gone, reaped by fencelock run: no process holds
     * the report pipe any more. */
    assert_int_equal(kill(-pr.probe_pgid, 0), -1);
    assert_int_equal(errno, ESRCH);
    assert_int_equal(th_recv(pr.p.report, buf, sizeof buf, T_LINE), -1);
    /* The new holder keeps the key. */
    assert_int_equal(fl_check(region_, &b), 0);
    assert_int_equal(fl_release(region_, &b), 0);
    sp_free(&pr.p);
}

/* A command that ends on SIGTERM: no SIGKILL, status 76 all the same. */
static void test_lease_lost_term_suffices(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, (const char *const[]){"--lease", "1s", "--kill-after", "30s", NULL},
                "run/lost-term", NULL);
    fl_lease b = stop_across_expiry(&pr, "run/lost-term");
    uint64_t t0 = th_now_ns();
    assert_int_equal(kill(pr.p.pid, SIGCONT), 0);
    expect_signal(&pr, pr.probe, SIGTERM);
    assert_int_equal(sp_wait(&pr.p, T_LINE), 76);
    assert_true(th_now_ns() - t0 < 15 * TH_S); /* did not wait for --kill-after */
    char *err = sp_stderr(&pr.p);
    sp_assert_contains(err, "fencelock run: lost the lease of 'run/lost-term'");
    assert_null(strstr(err, "SIGKILL"));
    assert_int_equal(count_lines(err), 1);
    free(err);
    assert_int_equal(fl_release(region_, &b), 0);
    sp_free(&pr.p);
}

/* --kill-after 0: SIGKILL at once, no SIGTERM. */
static void test_lease_lost_kill_at_once(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, (const char *const[]){"--lease", "1s", "--kill-after", "0", NULL},
                "run/lost-kill", (const char *const[]){"--ignore-term", NULL});
    fl_lease b = stop_across_expiry(&pr, "run/lost-kill");
    assert_int_equal(kill(pr.p.pid, SIGCONT), 0);
    assert_int_equal(sp_wait(&pr.p, T_LINE), 76);
    char buf[256];
    /* Nothing more was reported: it died without seeing a SIGTERM. */
    assert_int_equal(th_recv(pr.p.report, buf, sizeof buf, T_LINE), -1);
    char *err = sp_stderr(&pr.p);
    sp_assert_contains(err, "lost the lease of 'run/lost-kill'");
    sp_assert_contains(err, "sending SIGKILL to");
    free(err);
    assert_int_equal(fl_release(region_, &b), 0);
    sp_free(&pr.p);
}

/* The command exits by itself while fencelock run is stopped past its
 * lease: the loss is still reported (status 76), never hidden. */
static void test_lease_lost_after_command_exit(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, (const char *const[]){"--lease", "1s", NULL}, "run/lost-late", NULL);
    fl_lease b = stop_across_expiry(&pr, "run/lost-late");
    sp_write(&pr.p, "exit 0\n");
    assert_true(sp_wait_zombie(pr.probe, T_LINE));
    assert_int_equal(kill(pr.p.pid, SIGCONT), 0);
    assert_int_equal(sp_wait(&pr.p, T_LINE), 76);
    char *err = sp_stderr(&pr.p);
    sp_assert_contains(err, "lost the lease of 'run/lost-late'");
    sp_assert_contains(err, "it exited with status 0");
    free(err);
    assert_int_equal(fl_check(region_, &b), 0);
    assert_int_equal(fl_release(region_, &b), 0);
    sp_free(&pr.p);
}

/* Kept alive: a command outliving many lease lengths keeps the key. */
static void test_lease_kept_while_running(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, (const char *const[]){"--lease", "600ms", NULL}, "run/kept", NULL);
    fl_lock_info before = lock_info("run/kept");
    /* Wait for several renewals (each a third of the lease): time passes by
     * the renewal counter, not by a sleep deciding anything. */
    uint64_t deadline = th_now_ns() + T_LINE * TH_MS;
    while (lock_info("run/kept").renewals < before.renewals + 6 && th_now_ns() < deadline)
        usleep(10000);
    fl_lock_info li = lock_info("run/kept");
    assert_true(li.renewals >= before.renewals + 6); /* 1.2s: twice the lease */
    assert_int_equal(li.state, FL_LOCK_HELD);
    assert_int_equal(li.acquisitions, before.acquisitions);
    sp_write(&pr.p, "exit 0\n");
    assert_int_equal(sp_wait(&pr.p, T_LINE), 0);
    sp_free(&pr.p);
}

/* I4: fencelock run's stderr is a pipe whose reader is gone (`2>&1 | true`).
 * The report of the loss must not kill fencelock run by SIGPIPE before it
 * acts: the command, which ignores SIGTERM and so keeps running with a stale
 * token, gets SIGTERM, then SIGKILL after --kill-after, and fencelock run
 * exits 76 once it is reaped. */
static void test_lease_lost_stderr_broken_pipe(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe_with(&pr, (const char *const[]){"--lease", "1s", "--kill-after", "1s", NULL},
                     "run/lost-epipe", (const char *const[]){"--ignore-term", NULL}, true);
    fl_lease b = stop_across_expiry(&pr, "run/lost-epipe");
    assert_int_equal(kill(pr.p.pid, SIGCONT), 0);
    expect_signal(&pr, pr.probe, SIGTERM);
    int st = sp_wait(&pr.p, T_LINE);
    bool gone = reaped(pr.probe);
    assert_int_equal(st, 76);
    assert_true(gone); /* SIGKILLed and reaped before fencelock run exited */
    assert_int_equal(fl_check(region_, &b), 0);
    assert_int_equal(fl_release(region_, &b), 0);
    sp_free(&pr.p);
}

/* fencelock run ignores SIGPIPE for itself only: the command gets it as
 * fencelock run got it (here the default), so that `yes | head` in it ends. */
static void test_command_gets_sigpipe_back(void **state)
{
    (void)state;
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o,
             (const char *const[]){"run", "run/sigpipe", "--", "grep", "^SigIgn:",
                                   "/proc/self/status", NULL});
    assert_int_equal(r.status, 0);
    unsigned long long ignored;
    assert_int_equal(sscanf(r.out, "SigIgn: %llx", &ignored), 1);
    assert_int_equal(ignored & (1ull << (SIGPIPE - 1)), 0);
    run_result_free(&r);
}

/* I4: a process the command started in a session of its own (setsid), which
 * ignores SIGTERM, is outside the command's process group; after the loss it
 * gets SIGTERM too, then SIGKILL, and fencelock run exits only once it is
 * dead and reaped. */
static void test_lease_lost_ends_setsid_descendant(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, (const char *const[]){"--lease", "1s", "--kill-after", "1s", NULL},
                "run/lost-setsid", (const char *const[]){"--setsid", NULL});
    pid_t d = expect_detached(&pr);
    fl_lease b = stop_across_expiry(&pr, "run/lost-setsid");
    assert_int_equal(kill(pr.p.pid, SIGCONT), 0);
    /* The command (which dies of it) and the detached one (which ignores it)
     * both get SIGTERM, in either order. */
    int got_probe = 0, got_detached = 0;
    char buf[256];
    for (int i = 0; i < 2; i++) {
        int pid, sig;
        sp_line(&pr.p, pr.p.report, buf, sizeof buf, T_LINE, "signal 15");
        assert_int_equal(sscanf(buf, "signal %d %d", &pid, &sig), 2);
        assert_int_equal(sig, SIGTERM);
        got_probe += pid == pr.probe;
        got_detached += pid == d;
    }
    int st = sp_wait(&pr.p, T_LINE);
    bool gone = reaped(d);
    assert_int_equal(got_probe, 1);
    assert_int_equal(got_detached, 1);
    assert_int_equal(st, 76);
    assert_true(gone);
    assert_true(reaped(pr.probe));
    char *err = sp_stderr(&pr.p);
    sp_assert_contains(err, "lost the lease of 'run/lost-setsid'");
    sp_assert_contains(err, "and 1 process it started outside that group");
    sp_assert_contains(err, "still running 1s after SIGTERM; sending SIGKILL");
    free(err);
    assert_int_equal(fl_check(region_, &b), 0);
    assert_int_equal(fl_release(region_, &b), 0);
    sp_free(&pr.p);
}

/* I4: the lock covers every process the command started.  The command
 * exits and leaves a double-forked, setsid'd process running (reparented to
 * fencelock run): it gets SIGTERM, KEY stays held while it is alive, and is
 * released only after it is gone; the status is the command's. */
static void test_exit_ends_leftovers_before_release(void **state)
{
    (void)state;
    struct probe_run pr;
    start_probe(&pr, (const char *const[]){"--kill-after", "30s", NULL}, "run/leftover",
                (const char *const[]){"--detach", NULL});
    pid_t d = expect_detached(&pr);
    sp_write(&pr.p, "exit 7\n");
    expect_signal(&pr, d, SIGTERM); /* it ignores it */
    bool held = !key_free("run/leftover");
    bool alive = kill(d, 0) == 0;
    kill(d, SIGKILL); /* ended from here: fencelock run must notice, then release */
    assert_true(alive);
    assert_true(held);
    assert_int_equal(sp_wait(&pr.p, T_LINE), 7);
    assert_true(reaped(d));
    assert_true(key_free("run/leftover"));
    char *err = sp_stderr(&pr.p);
    sp_assert_contains(err, "exited and left 1 process running; sending SIGTERM to it before "
                            "releasing 'run/leftover'");
    assert_int_equal(count_lines(err), 1);
    free(err);
    sp_free(&pr.p);

    /* Ignoring SIGTERM, it gets SIGKILL after --kill-after. */
    start_probe(&pr, (const char *const[]){"--kill-after", "1s", NULL}, "run/leftover",
                (const char *const[]){"--detach", NULL});
    d = expect_detached(&pr);
    sp_write(&pr.p, "exit 0\n");
    expect_signal(&pr, d, SIGTERM);
    int st = sp_wait(&pr.p, T_LINE);
    bool gone = reaped(d);
    assert_int_equal(st, 0);
    assert_true(gone);
    assert_true(key_free("run/leftover"));
    err = sp_stderr(&pr.p);
    sp_assert_contains(err, "still running 1s after SIGTERM; sending SIGKILL");
    free(err);
    sp_free(&pr.p);
}

/* ---- bad usage and region errors --------------------------------------------- */

static void expect_usage(const char *const *args, const char *message)
{
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o, args);
    if (r.status != 2)
        fail_msg("expected status 2 for \"%s\", got %d; stderr: %s", message, r.status, r.err);
    assert_string_equal(r.out, "");
    assert_int_equal(count_lines(r.err), 2);
    assert_true(strncmp(r.err, "fencelock run: ", 15) == 0);
    sp_assert_contains(r.err, message);
    sp_assert_contains(r.err, "Try 'fencelock run --help'.");
    run_result_free(&r);
}

static void test_bad_usage(void **state)
{
    (void)state;
    char long_key[200];
    memset(long_key, 'k', 128);
    long_key[128] = '\0';
    char max_key[200];
    memset(max_key, 'k', 127);
    max_key[127] = '\0';
#define U(msg, ...) expect_usage((const char *const[]){"run", __VA_ARGS__, NULL}, msg)
    U("missing KEY and COMMAND", "--lease", "1s");
    U("missing COMMAND after KEY", "k");
    U("expected COMMAND after KEY, found '--lease' (options go before KEY", "k", "--lease", "1s",
      "--", "true");
    U("expected COMMAND after KEY, found '-x'", "k", "-x");
    U("missing COMMAND after '--'", "k", "--");
    U("COMMAND is empty", "k", "--", "");
    U("KEY is empty", "", "--", "true");
    U("KEY is 128 bytes long", long_key, "--", "true");
    U("--lease '5x': unknown unit", "--lease", "5x", "k", "--", "true");
    U("--lease '-1s': negative durations are not allowed", "--lease", "-1s", "k", "--", "true");
    U("--lease '': empty duration", "--lease", "", "k", "--", "true");
    U("--lease '0.1': a lease must be at least 250ms", "--lease", "0.1", "k", "--", "true");
    U("-c/--command given twice", "-c", "true", "-c", "true", "k");
    U("unexpected argument 'true': -c STRING and COMMAND exclude each other", "-c", "true", "k",
      "true");
    U("unexpected argument 'x': -c STRING and COMMAND exclude each other", "k", "-c", "true",
      "x");
    U("option '-c' needs an argument", "k", "-c");
    U("-c: the command STRING is empty", "k", "-c", "");
    U("--conflict-exit-code '256': not an exit status from 0 to 255", "-E", "256", "k", "true");
    U("--conflict-exit-code '-1': not an exit status", "--conflict-exit-code", "-1", "k",
      "true");
    U("--conflict-exit-code '': not an exit status", "-E", "", "k", "true");
    U("--lease '0': a lease must be at least 250ms", "--lease", "0", "k", "--", "true");
    U("--lease '0.5ms': a lease must be at least 250ms", "--lease", "0.5ms", "k", "--", "true");
    U("--wait '1.s': expected digits after the decimal point", "--wait", "1.s", "k", "--",
      "true");
    U("--wait 's': expected a number", "--wait", "s", "k", "--", "true");
    U("--wait '+1s': expected a number", "--wait", "+1s", "k", "--", "true");
    U("--wait '1 s': unknown unit", "--wait", "1 s", "k", "--", "true");
    U("--kill-after '5d': unknown unit", "--kill-after", "5d", "k", "--", "true");
    U("--kill-after '99999999999m': too long", "--kill-after", "99999999999m", "k", "--",
      "true");
    U("--wait and --no-wait exclude each other", "--wait", "1s", "--no-wait", "k", "--",
      "true");
    U("unknown option '--frobnicate'", "--frobnicate", "k", "--", "true");
    U("unknown option '-x'", "-x", "k", "--", "true");
    U("option '--lease' needs an argument", "--lease");
    U("option '--no-wait' takes no argument", "--no-wait=1", "k", "--", "true");
    U("--region: the path is empty", "--region", "", "k", "--", "true");
#undef U
    /* The longest key is fine, and options may be ended by --. */
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o, (const char *const[]){"run", max_key, "--", "true", NULL});
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    run_tool(&r, &o,
             (const char *const[]){"run", "-l", "2s", "-w", "1.5s", "-k", "250ms", "--",
                                   "run/dashdash", "--", "sh", "-c", "exit 9", NULL});
    assert_int_equal(r.status, 9);
    run_result_free(&r);
}

/* flock(1)'s habits: -w with bare seconds, -E for the status when the key
 * is not acquired, -c STRING through sh -c (before or after KEY), and
 * KEY COMMAND without '--'.  I4: a busy key is never waited for past -w. */
static void test_flock_habits(void **state)
{
    (void)state;
    fl_lease held;
    assert_int_equal(fl_acquire(region_, "run/flock", 60 * TH_S, 0, &held), 0);
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o, (const char *const[]){"run", "-n", "-E", "3", "run/flock", "true", NULL});
    assert_int_equal(r.status, 3);
    sp_assert_contains(r.err, "'run/flock' is held by another process");
    run_result_free(&r);
    run_tool(&r, &o,
             (const char *const[]){"run", "--conflict-exit-code", "0", "--no-wait", "run/flock",
                                   "true", NULL});
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    uint64_t t0 = th_now_ns();
    run_tool(&r, &o,
             (const char *const[]){"run", "-w", "0.2", "-E", "9", "run/flock", "-c", "echo ran",
                                   NULL});
    assert_true(th_now_ns() - t0 >= 200 * TH_MS); /* 0.2 is seconds, not ms */
    assert_int_equal(r.status, 9);
    assert_string_equal(r.out, "");
    sp_assert_contains(r.err, "'run/flock' is still held after waiting 200ms");
    run_result_free(&r);
    assert_int_equal(fl_release(region_, &held), 0);

    /* KEY COMMAND without '--'; its arguments may start with '-'. */
    run_tool(&r, &o,
             (const char *const[]){"run", "run/flock", "sh", "-c", "echo $FENCELOCK_KEY; exit 4",
                                   NULL});
    assert_int_equal(r.status, 4);
    assert_string_equal(r.out, "run/flock\n");
    run_result_free(&r);
    /* -c STRING after KEY (flock's form) and before it. */
    run_tool(&r, &o,
             (const char *const[]){"run", "run/flock", "-c", "echo \"$FENCELOCK_TOKEN\" | wc -l",
                                   NULL});
    assert_int_equal(r.status, 0);
    sp_assert_contains(r.out, "1\n");
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"run", "--command=exit 5", "run/flock", NULL});
    assert_int_equal(r.status, 5);
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"run", "run/flock", "--command=exit 6", NULL});
    assert_int_equal(r.status, 6);
    run_result_free(&r);
    assert_true(key_free("run/flock"));
}

/* I9: every key the library takes is a KEY on the command line (spaces,
 * UTF-8, control bytes), passed to the command as it is and shown escaped
 * (\xNN, \\) in messages. */
static void test_any_key(void **state)
{
    (void)state;
    const char *keys[] = {"a b", "caf\xc3\xa9", "tab\there", "back\\slash", "'quoted'"};
    const char *shown[] = {"'a b'", "'caf\\xc3\\xa9'", "'tab\\x09here'", "'back\\\\slash'",
                           "''quoted''"};
    run_opts o = {.region_env = daemon_.region};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        run_result r;
        run_tool(&r, &o,
                 (const char *const[]){"run", keys[i], "sh", "-c", "printf %s \"$FENCELOCK_KEY\"",
                                       NULL});
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, keys[i]);
        run_result_free(&r);
        fl_lease held;
        assert_int_equal(fl_acquire(region_, keys[i], 60 * TH_S, 0, &held), 0);
        run_tool(&r, &o, (const char *const[]){"run", "-n", keys[i], "true", NULL});
        assert_int_equal(r.status, 75);
        char want[128];
        snprintf(want, sizeof want, "fencelock run: %s is held by another process", shown[i]);
        sp_assert_contains(r.err, want);
        run_result_free(&r);
        assert_int_equal(fl_release(region_, &held), 0);
    }
}

/* I4, I9: --lease below what renewal keeps on a loaded machine (250ms,
 * docs/run-lease.md) or beyond what a region can record (deadlines are
 * microseconds of CLOCK_MONOTONIC below 2^48) is refused before anything
 * runs, with the limit. */
static void test_lease_limits(void **state)
{
    (void)state;
#define U(msg, ...) expect_usage((const char *const[]){"run", __VA_ARGS__, NULL}, msg)
    U("--lease '249ms': a lease must be at least 250ms", "--lease", "249ms", "k", "--", "true");
    U("--lease '1ms': a lease must be at least 250ms", "--lease", "1ms", "k", "--", "true");
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o,
             (const char *const[]){"run", "--lease", "250ms", "run/min", "--", "true", NULL});
    assert_int_equal(r.status, 0);
    run_result_free(&r);

    /* About 190 years: accepted by the duration parser, not by a region. */
    run_tool(&r, &o,
             (const char *const[]){"run", "--lease", "99999999m", "run/max", "--", "sh", "-c",
                                   "echo ran", NULL});
    assert_int_equal(r.status, 2);
    assert_string_equal(r.out, "");
    sp_assert_contains(r.err, "--lease '99999999m': longer than a region can record: at most ");
    unsigned long long max_m;
    const char *at = strstr(r.err, "at most ");
    assert_int_equal(sscanf(at, "at most %llum now", &max_m), 1);
    run_result_free(&r);
    /* The limit is (2^48 - 1) us less the clock, in whole minutes. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * TH_S + (uint64_t)ts.tv_nsec;
    uint64_t want = (((1ull << 48) - 1) * 1000ull - now) / (60 * TH_S);
    assert_true(max_m == want || max_m == want + 1); /* a minute may have turned since */
    char over[32], under[32];
    snprintf(over, sizeof over, "%llum", max_m + 1);
    snprintf(under, sizeof under, "%llum", max_m - 1);
    U("longer than a region can record: at most", "--lease", over, "k", "--", "true");
    run_tool(&r, &o,
             (const char *const[]){"run", "--lease", under, "run/max", "--", "true", NULL});
    if (r.status != 0)
        fail_msg("--lease %s: status %d; stderr: %s", under, r.status, r.err);
    run_result_free(&r);
#undef U
}

static void test_help(void **state)
{
    (void)state;
    run_result a, b;
    run_tool(&a, NULL, (const char *const[]){"run", "--help", NULL});
    run_tool(&b, NULL, (const char *const[]){"help", "run", NULL});
    assert_int_equal(a.status, 0);
    assert_int_equal(b.status, 0);
    assert_string_equal(a.out, b.out);
    assert_string_equal(a.err, "");
    const char *needles[] = {"Usage:\n  fencelock run", "KEY [--] COMMAND", "--lease DURATION",
                             "--wait DURATION", "--no-wait", "--kill-after DURATION",
                             "--region PATH", "FENCELOCK_TOKEN", "FENCELOCK_KEY",
                             "FENCELOCK_REGION", "default 30s", "at least 250ms", "default 5s",
                             "250ms, 1.5s, 2m", "decimal number of seconds",
                             "--conflict-exit-code N", "--command STRING", "KEY -c STRING",
                             "process group", "SIGTERM", "SIGKILL", "any 1 to 127 bytes",
                             "  75   ", "  76   ", "  2    ", "  3    ", "  125  ", "  126  ",
                             "  127  ", "128+N", "fence_token <= $FENCELOCK_TOKEN",
                             "its absolute path", "so COMMAND may\n"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        sp_assert_contains(a.out, needles[i]);
    run_result_free(&a);
    run_result_free(&b);
    /* The command list names it. */
    run_tool(&a, NULL, (const char *const[]){"--help", NULL});
    sp_assert_contains(a.out, "  run ");
    run_result_free(&a);
    /* Help that cannot be written is run's own failure, 125 (1 would be
     * taken for COMMAND's). */
    run_opts full = {.stdout_path = "/dev/full"};
    run_tool(&a, &full, (const char *const[]){"run", "--help", NULL});
    assert_int_equal(a.status, 125);
    sp_assert_contains(a.err, "cannot write the output");
    run_result_free(&a);
}

/* A relative region, by -r or by $FENCELOCK_REGION, reaches COMMAND as an
 * absolute path: COMMAND that changes directory still commits and reads
 * through it.  A URI is no path: it is passed on as it is. */
static void test_relative_region(void **state)
{
    (void)state;
    char dir[PATH_MAX], want[PATH_MAX + 16];
    assert_non_null(realpath(th_tmpdir(), dir)); /* getcwd() gives the resolved path */
    snprintf(want, sizeof want, "%s/region", dir);
    assert_string_equal(strrchr(daemon_.region, '/'), "/region"); /* the daemon's, in dir */
    /* sh -c SCRIPT DIR TOOL [ARG...]: from DIR, fencelock run ARG...; the
     * command goes to / and uses $FENCELOCK_REGION there. */
    const char *script =
        "cd \"$0\" && export FL_TOOL=\"$1\" && shift && exec \"$FL_TOOL\" run \"$@\"";
    const char *command = "cd / && printf '%s\\n' \"$FENCELOCK_REGION\" && "
                          "printf rel | \"$FL_TOOL\" commit run/relrec && "
                          "\"$FL_TOOL\" read run/relrec";
    const char *forms[][3] = {{"-r", "region", NULL}, {"--region", "./region", NULL},
                              {NULL, NULL, "region"}, {NULL, NULL, "./region"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const char *argv[12] = {"sh", "-c", script, dir, FENCELOCK_TOOL_PATH};
        int n = 5;
        for (int k = 0; k < 2 && forms[i][k]; k++)
            argv[n++] = forms[i][k];
        argv[n++] = "run/rel";
        argv[n++] = "-c";
        argv[n++] = command;
        argv[n] = NULL;
        run_opts o = {.region_env = forms[i][2]}; /* NULL: unset */
        run_result r;
        run_program(&r, &o, argv);
        if (r.status != 0)
            fail_msg("form %zu: status %d; stderr: %s", i, r.status, r.err);
        char out[PATH_MAX + 32];
        snprintf(out, sizeof out, "%s\nrel", want);
        assert_string_equal(r.out, out);
        sp_assert_contains(r.err, "fence ");
        run_result_free(&r);
    }
    assert_true(key_free("run/rel"));
    /* An etcd URI is not joined to the directory: the library is given the
     * URI (no endpoint answers here: status 3, its message names it). */
    const char *uris[] = {"etcd://127.0.0.1:9/fl-rel", "etcds://127.0.0.1:9/fl-rel"};
    for (size_t i = 0; i < sizeof uris / sizeof uris[0]; i++) {
        run_result r;
        run_program(&r, NULL,
                    (const char *const[]){"sh", "-c", script, dir, FENCELOCK_TOOL_PATH, "-r",
                                          uris[i], "run/rel", "--", "true", NULL});
        assert_int_equal(r.status, 3);
        /* "region etcd://127.0.0.1:9/fl-rel: ...", or "region etcd://...:"
         * in a build without etcd */
        char named[32];
        snprintf(named, sizeof named, "region %.*s://", (int)strcspn(uris[i], ":"), uris[i]);
        sp_assert_contains(r.err, named);
        if (strstr(r.err, dir) || strstr(r.err, "does not exist"))
            fail_msg("%s was joined to the directory: %s", uris[i], r.err);
        run_result_free(&r);
    }
}

static void test_region_errors(void **state)
{
    (void)state;
    run_result r;
    /* Missing, by option and by environment. */
    char missing[512];
    snprintf(missing, sizeof missing, "%s", th_path("no-such-region"));
    run_tool(&r, NULL,
             (const char *const[]){"run", "--region", missing, "k", "--", "sh", "-c",
                                   "echo ran", NULL});
    assert_int_equal(r.status, 3);
    assert_string_equal(r.out, "");
    sp_assert_contains(r.err, "fencelock run: ");
    sp_assert_contains(r.err, missing);
    run_result_free(&r);
    run_opts o = {.region_env = missing};
    run_tool(&r, &o, (const char *const[]){"run", "k", "--", "true", NULL});
    assert_int_equal(r.status, 3);
    sp_assert_contains(r.err, missing);
    run_result_free(&r);
    /* Not a region. */
    char garbage[512];
    snprintf(garbage, sizeof garbage, "%s", th_path("garbage-region"));
    FILE *f = fopen(garbage, "w");
    assert_non_null(f);
    for (int i = 0; i < 8192; i++)
        fputc(i * 7 & 0xff, f);
    fclose(f);
    run_tool(&r, NULL,
             (const char *const[]){"run", "--region", garbage, "k", "--", "true", NULL});
    assert_int_equal(r.status, 3);
    sp_assert_contains(r.err, garbage);
    run_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_environment_group_and_status),
        cmocka_unit_test(test_exit_statuses_passed_through),
        cmocka_unit_test(test_command_cannot_run),
        cmocka_unit_test(test_could_not_acquire),
        cmocka_unit_test(test_waits_for_release),
        cmocka_unit_test(test_signals_forwarded),
        cmocka_unit_test(test_forwarded_term_ends_command),
        cmocka_unit_test(test_killed_run_terms_command),
        cmocka_unit_test(test_lease_lost_term_then_kill),
        cmocka_unit_test(test_lease_lost_term_suffices),
        cmocka_unit_test(test_lease_lost_kill_at_once),
        cmocka_unit_test(test_lease_lost_after_command_exit),
        cmocka_unit_test(test_lease_kept_while_running),
        cmocka_unit_test(test_lease_lost_stderr_broken_pipe),
        cmocka_unit_test(test_command_gets_sigpipe_back),
        cmocka_unit_test(test_lease_lost_ends_setsid_descendant),
        cmocka_unit_test(test_exit_ends_leftovers_before_release),
        cmocka_unit_test(test_lease_limits),
        cmocka_unit_test(test_flock_habits),
        cmocka_unit_test(test_any_key),
        cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_region_errors),
        cmocka_unit_test(test_relative_region),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
