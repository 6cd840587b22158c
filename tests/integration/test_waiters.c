/* SPDX-License-Identifier: MIT */
/*
 * test_waiters.c - waiting: no lost wakeups, no busy waiting.
 *
 * I6: waiters asleep on a held key; one is killed with SIGKILL while asleep,
 * one times out, one is interrupted by a signal; when the key is released
 * every remaining waiter still gets it in turn.
 * I7: a waiter blocked for about 2 s on a key held with a long lease, and
 * one waiting (FL_WAIT_FOREVER) for a stopped holder's lease to run out,
 * use at most a few clock ticks of CPU.
 * A timed sleep narrows the thread's timer slack (takeover lateness, I4)
 * and gives the caller back the slack it had.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"

#define LONG_LEASE AG_S(60)
#define CPU_TICKS_MAX 10 /* 100 ms at 100 Hz: "no measurable CPU", generously */

/* I6 */
static void test_killed_waiter_does_not_strand_others(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("waiters.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);

    ag H, W[3];
    ag_start(&H, region);
    assert_int_equal(H.open_rc, 0);
    ag_reply rh = ag_do(&H, "acq h w/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    for (int i = 0; i < 3; i++) {
        ag_start(&W[i], region);
        assert_int_equal(W[i].open_rc, 0);
        ag_send(&W[i], "acq w w/key %llu %lld", (unsigned long long)LONG_LEASE,
                (long long)AG_S(50));
    }
    assert_true(ag_wait_waiters(ro, "w/key", 3, 20000));
    for (int i = 0; i < 3; i++)
        assert_true(ag_wait_sleeping(W[i].c.pid, 20000));

    /* kill the middle one in its sleep */
    int st = ag_kill(&W[1]);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    assert_int_equal(ag_do(&H, "rel h").rc, 0);

    ag *left[2] = {&W[0], &W[2]};
    int n = 2;
    uint64_t expect = rh.token + 1;
    while (n > 0) {
        ag_reply r;
        int i = ag_read_any(left, n, &r, 30000);
        assert_true(i >= 0); /* nobody left asleep on a free key */
        assert_int_equal(r.rc, 0);
        assert_int_equal(r.token, expect);
        assert_int_equal(r.flags, 0);
        expect++;
        assert_int_equal(ag_do(left[i], "rel w").rc, 0);
        left[i] = left[--n];
    }
    assert_int_equal(ag_stop(&W[0]), 0);
    assert_int_equal(ag_stop(&W[2]), 0);
    assert_int_equal(ag_stop(&H), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I6: a waiter that times out and one interrupted by a signal strand nobody;
 * the interrupted one keeps waiting and gets the key too. */
static void test_timeout_and_signal_do_not_strand_others(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("waiters2.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);

    ag H, A, B, T, S;
    ag_start(&H, region);
    ag_reply rh = ag_do(&H, "acq h w2/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    ag_start(&A, region);
    ag_start(&B, region);
    ag_start(&S, region);
    ag_start(&T, region);
    ag_send(&A, "acq w w2/key %llu %lld", (unsigned long long)LONG_LEASE, (long long)AG_S(50));
    ag_send(&B, "acq w w2/key %llu %lld", (unsigned long long)LONG_LEASE, (long long)AG_S(50));
    ag_send(&S, "acq w w2/key %llu -1", (unsigned long long)LONG_LEASE);
    assert_true(ag_wait_waiters(ro, "w2/key", 3, 20000));
    ag_send(&T, "acq w w2/key %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_MS(300));
    ag_reply rt;
    assert_int_equal(ag_read(&T, &rt, 20000), 0);
    assert_int_equal(rt.rc, -ETIMEDOUT);
    assert_true(rt.t_end - rt.t_start >= AG_MS(300));

    assert_true(ag_wait_sleeping(S.c.pid, 20000));
    assert_int_equal(kill(S.c.pid, SIGUSR1), 0);
    /* S must not return: fl_acquire re-examines and sleeps again */
    assert_true(ag_wait_waiters(ro, "w2/key", 3, 20000));
    for (int i = 0; i < 3; i++) {
        ag *w = i == 0 ? &A : i == 1 ? &B : &S;
        assert_true(ag_wait_sleeping(w->c.pid, 20000));
    }

    assert_int_equal(ag_do(&H, "rel h").rc, 0);
    ag *left[3] = {&A, &B, &S};
    int n = 3;
    uint64_t expect = rh.token + 1;
    while (n > 0) {
        ag_reply r;
        int i = ag_read_any(left, n, &r, 30000);
        assert_true(i >= 0);
        assert_int_equal(r.rc, 0); /* in particular S did not return -EINTR */
        assert_int_equal(r.token, expect);
        expect++;
        assert_int_equal(ag_do(left[i], "rel w").rc, 0);
        left[i] = left[--n];
    }
    assert_true(ag_do(&S, "sigs").token >= 1); /* the signal did arrive */
    /* the timed-out try consumed no token */
    ag_reply r = ag_do(&T, "acq w w2/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.token, expect);
    assert_int_equal(ag_do(&T, "rel w").rc, 0);
    ag_stop(&A);
    ag_stop(&B);
    ag_stop(&S);
    ag_stop(&T);
    ag_stop(&H);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I7 */
static void test_waiter_uses_no_cpu(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("cpu.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    ag H, W;
    ag_start(&H, region);
    ag_start(&W, region);
    assert_int_equal(H.open_rc, 0);
    assert_int_equal(W.open_rc, 0);
    assert_int_equal(ag_do(&H, "acq h cpu/key %llu 0", (unsigned long long)LONG_LEASE).rc, 0);

    /* blocked about 2 s on a key held with a long lease */
    uint64_t before = th_cpu_ticks(W.c.pid);
    ag_reply r = ag_do(&W, "acq w cpu/key %llu %lld", (unsigned long long)LONG_LEASE,
                       (long long)AG_S(2));
    uint64_t after = th_cpu_ticks(W.c.pid);
    assert_int_equal(r.rc, -ETIMEDOUT);
    assert_true(r.t_end - r.t_start >= AG_S(2));
    print_message("waiter: %llu ticks of CPU in %.2f s of waiting\n",
                  (unsigned long long)(after - before), (double)(r.t_end - r.t_start) / 1e9);
    assert_true(after - before <= CPU_TICKS_MAX);
    assert_int_equal(ag_do(&H, "rel h").rc, 0);

    /* waiting for a stopped holder's 2 s lease to run out (FL_WAIT_FOREVER) */
    ag_reply rh = ag_do(&H, "acq h cpu/key2 %llu 0", (unsigned long long)AG_S(2));
    assert_int_equal(rh.rc, 0);
    assert_int_equal(kill(H.c.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(H.c.pid, 10000));
    before = th_cpu_ticks(W.c.pid);
    r = ag_do(&W, "acq w2 cpu/key2 %llu -1", (unsigned long long)LONG_LEASE);
    after = th_cpu_ticks(W.c.pid);
    assert_int_equal(r.rc, 0);
    assert_true(r.flags & FL_LEASE_EXPIRED);
    assert_true(r.t_end >= rh.deadline_ns);
    print_message("waiter: %llu ticks of CPU waiting for a stopped holder\n",
                  (unsigned long long)(after - before));
    assert_true(after - before <= CPU_TICKS_MAX);
    kill(H.c.pid, SIGCONT);
    assert_int_equal(ag_do(&W, "rel w2").rc, 0);
    ag_stop(&H);
    ag_stop(&W);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* The sleep's narrow timer slack is the library's business only. */
static void test_wait_restores_timer_slack(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("slack.region");
    ag_daemon_start(&d, region);
    ag H;
    ag_start(&H, region);
    assert_int_equal(ag_do(&H, "acq h slack/key %llu 0", (unsigned long long)LONG_LEASE).rc, 0);

    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    const int mine = 123457;
    assert_int_equal(prctl(PR_SET_TIMERSLACK, mine, 0, 0, 0), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "slack/key", LONG_LEASE, (int64_t)AG_MS(50), &l), -ETIMEDOUT);
    assert_int_equal(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), mine);
    fl_close(r);
    assert_int_equal(ag_do(&H, "rel h").rc, 0);
    assert_int_equal(ag_stop(&H), 0);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_killed_waiter_does_not_strand_others, ag_teardown),
        cmocka_unit_test_teardown(test_timeout_and_signal_do_not_strand_others, ag_teardown),
        cmocka_unit_test_teardown(test_waiter_uses_no_cpu, ag_teardown),
        cmocka_unit_test_teardown(test_wait_restores_timer_slack, ag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
