/* SPDX-License-Identifier: MIT */
/*
 * run_command.c - `fencelock run` with real processes, a real fencelockd and
 * real signals: the command's environment and process group, exit statuses
 * passed through, waiting for the key, and signals forwarded.  The lease
 * kept and lost is run_command_lease.c; the command line,
 * run_command_usage.c; what the three share, run_util.h.
 *
 * The command is run_probe (see run_probe.c), which reports on a pipe what
 * it sees and obeys lines on its stdin (fencelock run passes stdin on).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_util.h"
#include "fencelock.h"
#include "harness.h"
#include "run_util.h"
#include "spawn.h"

/* ---- helpers ---------------------------------------------------------------- */

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
        cmocka_unit_test(test_command_gets_sigpipe_back),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
