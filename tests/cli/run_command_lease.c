/* SPDX-License-Identifier: MIT */
/*
 * run_command_lease.c - `fencelock run` and its lease, with real processes,
 * a real fencelockd and real SIGSTOP/SIGCONT: the lease kept while the
 * command runs, and what happens when it is lost (fencelock run stopped with
 * SIGSTOP past its lease while another process takes the key): the
 * command's whole process group gets SIGTERM, SIGKILL after --kill-after,
 * and fencelock run exits 76.  The processes the command started outside its
 * group are ended too, and the key is released only once they are gone.
 *
 * The command is run_probe (see run_probe.c), which reports on a pipe what
 * it sees and obeys lines on its stdin (fencelock run passes stdin on).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_util.h"
#include "fencelock.h"
#include "harness.h"
#include "run_util.h"
#include "spawn.h"

/* ---- helpers ---------------------------------------------------------------- */

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease_lost_term_then_kill),
        cmocka_unit_test(test_lease_lost_term_suffices),
        cmocka_unit_test(test_lease_lost_kill_at_once),
        cmocka_unit_test(test_lease_lost_after_command_exit),
        cmocka_unit_test(test_lease_kept_while_running),
        cmocka_unit_test(test_lease_lost_stderr_broken_pipe),
        cmocka_unit_test(test_lease_lost_ends_setsid_descendant),
        cmocka_unit_test(test_exit_ends_leftovers_before_release),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
