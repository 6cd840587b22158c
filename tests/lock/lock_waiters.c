/* SPDX-License-Identifier: MIT */
/*
 * lock_waiters.c - waiting: no lost wakeups, no busy waiting.
 *
 * I6: waiters asleep on a held key; one is killed with SIGKILL while asleep,
 * one times out, one is interrupted by a signal; when the key is released
 * every remaining waiter still gets it in turn.
 * I7: a waiter blocked for about 2 s on a key held with a long lease, and
 * one waiting (FL_WAIT_FOREVER) for a stopped holder's lease to run out,
 * use at most a few clock ticks of CPU.
 * A timed sleep narrows the thread's timer slack (takeover lateness, I4)
 * for its last stretch only, and gives the caller back the slack it had.
 * I6, I7: a release wakes one sleeper, not all, and the wakes chain on.
 * I4: a woken waiter stopped before it looks holds the one wake; the other
 * waiter gets the key by the deadline it saw.
 * I6: a woken waiter that gives up at its next look, the key held again by
 * a process that never slept, leaves that holder's release a wake to send.
 * I4, I6: a waiter stopped in the spin it claimed behind sleepers (src/shm/slot.c
 * SPINNING) holds nothing the others need: the release wakes a sleeper.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"
#include "tracer.h"

#define LONG_LEASE AG_S(60)
#ifdef SYS_futex_waitv
#define TEST_SYS_FUTEX_WAITV SYS_futex_waitv
#else
#define TEST_SYS_FUTEX_WAITV 449 /* x86-64 and arm64 */
#endif
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
    int before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    assert_int_equal(prctl(PR_SET_TIMERSLACK, mine, 0, 0, 0), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "slack/key", LONG_LEASE, (int64_t)AG_MS(50), &l), -ETIMEDOUT);
    assert_int_equal(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), mine);
    /* back: the agents of later tests inherit it */
    prctl(PR_SET_TIMERSLACK, (unsigned long)before, 0, 0, 0);
    fl_close(r);
    assert_int_equal(ag_do(&H, "rel h").rc, 0);
    assert_int_equal(ag_stop(&H), 0);
    th_daemon_stop(&d, SIGTERM);
}

/* test_far_sleep_keeps_timer_slack: what the waiting thread's slack was
 * while it slept, read by the thread itself in a signal handler (another
 * thread's /proc/PID/task/TID/timerslack_ns needs CAP_SYS_NICE). */
#define FAR_SLACK_NS 123457
/* _Atomic, not volatile sig_atomic_t: written by the waiting thread's
 * handler, read by the test's thread (a lock-free atomic is also safe in a
 * handler). */
static _Atomic int far_slack_seen = -1;
static void far_note_slack(int sig)
{
    (void)sig;
    atomic_store(&far_slack_seen, prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
}

struct far_waiter {
    fl_region *r;
    _Atomic pid_t tid;
    int rc;
    int slack_after;
};

static void *far_waiter_main(void *arg)
{
    struct far_waiter *w = arg;
    prctl(PR_SET_TIMERSLACK, FAR_SLACK_NS, 0, 0, 0); /* this thread's own */
    atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
    fl_lease l;
    w->rc = fl_acquire(w->r, "far/key", LONG_LEASE, FL_WAIT_FOREVER, &l);
    w->slack_after = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (w->rc == 0)
        fl_release(w->r, &l);
    return NULL;
}

/* A sleep far from its deadline keeps the caller's timer slack: only its
 * last stretch, a millisecond before the deadline, narrows it (wait.c).  So
 * a sleep that a release ends makes no prctl call after the wake, where it
 * would delay every handoff by a system call.  A thread with a slack of its
 * own waits for a key held with a 60 s lease; a signal's handler, run in
 * its sleep, reads the slack the sleep has (a signal does not end a wait);
 * after the release the thread has the key and its own slack. */
static void test_far_sleep_keeps_timer_slack(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("farslack.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    ag H;
    ag_start(&H, region);
    assert_int_equal(ag_do(&H, "acq h far/key %llu 0", (unsigned long long)LONG_LEASE).rc, 0);

    struct sigaction sa = {.sa_handler = far_note_slack}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    struct far_waiter w = {.rc = -1, .slack_after = -1};
    assert_int_equal(fl_open(region, &w.r), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, far_waiter_main, &w), 0);
    assert_true(ag_wait_waiters(ro, "far/key", 1, 20000));
    pid_t tid = atomic_load(&w.tid);
    assert_true(tid > 0);
    assert_true(ag_wait_sleeping(tid, 20000)); /* in its futex sleep */
    assert_int_equal(pthread_kill(t, SIGUSR1), 0);
    uint64_t until = th_now_ns() + 20 * TH_S;
    while (atomic_load(&far_slack_seen) == -1 && th_now_ns() < until)
        usleep(1000); /* polling for the handler's note; the deadline bounds a failure */
    assert_int_equal(atomic_load(&far_slack_seen), FAR_SLACK_NS);

    assert_int_equal(ag_do(&H, "rel h").rc, 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, 0);
    assert_int_equal(w.slack_after, FAR_SLACK_NS);
    sigaction(SIGUSR1, &old, NULL);
    fl_close(w.r);
    assert_int_equal(ag_stop(&H), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* Voluntary context switches of pid (/proc/PID/status): a sleeper that is
 * woken, looks and sleeps again adds one. */
static long vol_switches(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
            break;
    fclose(f);
    return v;
}

/* Agent a waits for stop/key with FL_WAIT_FOREVER (its lease kept as
 * `name`); returns once it is asleep in the kernel, the key's waiter count
 * at `waiters`. */
static void sleep_on_stop_key(ag *a, const char *name, fl_region *ro, uint32_t waiters)
{
    ag_send(a, "acq %s stop/key %llu -1", name, (unsigned long long)LONG_LEASE);
    assert_true(ag_wait_waiters(ro, "stop/key", waiters, 20000));
    assert_true(ag_wait_sleeping(a->c.pid, 20000));
}

/* A release wakes one sleeper, not all (issue: no thundering herd).  Four
 * waiters sleep; the holder releases; one of them takes the key and keeps
 * it.  The other three must not have been woken: their voluntary context
 * switch counts stay as they were for two seconds (with wake-all each would
 * run, see the key held and sleep again, within microseconds).  Then every
 * waiter still gets the key in turn (I6). */
static void test_release_wakes_one(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("wakeone.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);

    ag H, W[4];
    ag_start(&H, region);
    ag_reply rh = ag_do(&H, "acq h one/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    for (int i = 0; i < 4; i++) {
        ag_start(&W[i], region);
        assert_int_equal(W[i].open_rc, 0);
        ag_send(&W[i], "acq w one/key %llu -1", (unsigned long long)LONG_LEASE);
    }
    assert_true(ag_wait_waiters(ro, "one/key", 4, 20000));
    for (int i = 0; i < 4; i++)
        assert_true(ag_wait_sleeping(W[i].c.pid, 20000));
    long before[4];
    for (int i = 0; i < 4; i++)
        before[i] = vol_switches(W[i].c.pid);

    assert_int_equal(ag_do(&H, "rel h").rc, 0);
    ag *list[4] = {&W[0], &W[1], &W[2], &W[3]};
    ag_reply r;
    int won = ag_read_any(list, 4, &r, 30000);
    assert_true(won >= 0);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.token, rh.token + 1);

    uint64_t until = th_now_ns() + AG_S(2);
    while (th_now_ns() < until) {
        for (int i = 0; i < 4; i++) {
            if (i == won)
                continue;
            if (vol_switches(W[i].c.pid) != before[i])
                fail_msg("waiter %d was woken by a release that woke waiter %d", i, won);
        }
        ag_sleep_until(th_now_ns() + AG_MS(10));
    }

    /* and the chain goes on: each release wakes the next */
    int n = 4;
    uint64_t expect = rh.token + 2;
    assert_int_equal(ag_do(list[won], "rel w").rc, 0);
    list[won] = list[--n];
    while (n > 0) {
        int i = ag_read_any(list, n, &r, 30000);
        assert_true(i >= 0);
        assert_int_equal(r.rc, 0);
        assert_int_equal(r.token, expect++);
        assert_int_equal(ag_do(list[i], "rel w").rc, 0);
        list[i] = list[--n];
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(ag_stop(&W[i]), 0);
    assert_int_equal(ag_stop(&H), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* The traced waiter's timeout (set before it is forked). */
static int64_t traced_timeout = FL_WAIT_FOREVER;

/* The traced waiter of the tests below: opens the region, lets the test
 * trace it, then waits for stop/key (traced_timeout) and reports "r RC TOKEN
 * T_END"; when told "rel", releases the key if it got it, and exits (not
 * before: fencelockd wakes every sleeper when a client goes). */
static int traced_waiter(void *arg, int in, int out)
{
    fl_region *r = NULL;
    if (fl_open(arg, &r) != 0)
        return 1;
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0 || raise(SIGSTOP) != 0)
        return 2;
    fl_lease l = {0};
    int rc = fl_acquire(r, "stop/key", LONG_LEASE, traced_timeout, &l);
    dprintf(out, "r %d %llu %llu\n", rc, (unsigned long long)l.token,
            (unsigned long long)th_now_ns());
    char line[64];
    if (th_recv(in, line, sizeof line, 60000) != 0) /* "rel" */
        return 3;
    if (rc != 0) {
        fl_close(r);
        return 0;
    }
    rc = fl_release(r, &l);
    fl_close(r);
    return rc == 0 ? 0 : 4;
}

/* Resume a traced process to its next system-call stop; returns the stop's
 * syscall info (op 0 when it stopped for another reason). */
static struct __ptrace_syscall_info next_syscall_stop(pid_t pid)
{
    assert_int_equal(ptrace(PTRACE_SYSCALL, pid, NULL, NULL), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSTOPPED(st));
    struct __ptrace_syscall_info si;
    memset(&si, 0, sizeof si);
    if (WSTOPSIG(st) == (SIGTRAP | 0x80))
        assert_true(ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si) > 0);
    return si;
}

/* Start traced_waiter as W0 and let it into its futex sleep on stop/key
 * (held by another agent), traced: its next stop is the sleep's return.
 * Returns the time at which it was seen entering the sleep (after its
 * acquisition read the clock for its timeout). */
static uint64_t start_traced_sleeper(th_child *W0, const char *region, fl_region *ro)
{
    assert_int_equal(th_child_start(W0, traced_waiter, (void *)region), 0);
    ag_track_foreign(W0->pid);
    int st;
    assert_int_equal(waitpid(W0->pid, &st, 0), W0->pid);
    assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
    assert_int_equal(ptrace(PTRACE_SETOPTIONS, W0->pid, NULL,
                            (void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)),
                     0);
    /* to the entry of its futex sleep on the key: futex_waitv on the key's
     * word and the holder's life word (src/shm/life.c), or FUTEX_WAIT_BITSET on
     * the key's word alone where the kernel has no futex_waitv */
    for (;;) {
        struct __ptrace_syscall_info si = next_syscall_stop(W0->pid);
        if (si.op == PTRACE_SYSCALL_INFO_ENTRY &&
            ((si.entry.nr == SYS_futex &&
              (si.entry.args[1] & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET) ||
             si.entry.nr == TEST_SYS_FUTEX_WAITV))
            break;
    }
    uint64_t entered = th_now_ns();
    /* into it: the next stop is its return, when something wakes it */
    assert_int_equal(ptrace(PTRACE_SYSCALL, W0->pid, NULL, NULL), 0);
    assert_true(ag_wait_waiters(ro, "stop/key", 1, 20000));
    assert_true(ag_wait_sleeping(W0->pid, 20000));
    return entered;
}

/* The traced W0 stops at its futex sleep's return: woken, not timed out or
 * interrupted (futex_waitv: woken through its first word, the key's). */
static void expect_woken(pid_t pid)
{
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == (SIGTRAP | 0x80));
    struct __ptrace_syscall_info si;
    memset(&si, 0, sizeof si);
    assert_true(ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si) > 0);
    assert_int_equal(si.op, PTRACE_SYSCALL_INFO_EXIT);
    assert_int_equal(si.exit.rval, 0);
}

/* The answer of a traced_waiter that ran on (detached): "r RC TOKEN T_END". */
static void traced_result(th_child *c, int *rc, unsigned long long *token)
{
    char line[128];
    assert_int_equal(th_recv(c->from_child, line, sizeof line, 30000), 0);
    unsigned long long t_end = 0;
    assert_int_equal(sscanf(line, "r %d %llu %llu", rc, token, &t_end), 3);
}

/* W, asleep on a key held with a 60 s lease, gets the key with `token` by
 * the release rr, not by a takeover at that lease's deadline (which `held`
 * had); `who` names the release in the message. */
static void expect_woken_by_release(ag *W, const ag_reply *held, const ag_reply *rr,
                                    uint64_t token, const char *who)
{
    ag_reply rw;
    assert_int_equal(ag_read(W, &rw, 30000), 0);
    assert_int_equal(rw.rc, 0);
    assert_int_equal(rw.token, token);
    assert_int_equal(rw.flags, 0); /* released to it, not taken over */
    /* woken by the release, long before the deadline it slept until */
    assert_true(rw.t_end < held->deadline_ns - AG_S(20));
    print_message("the sleeper got the key %.3f ms after %s began\n",
                  (double)(rw.t_end - rr->t_start) / 1e6, who);
    assert_int_equal(ag_do(W, "rel w").rc, 0);
}

/* I4, I6 (issue: a woken waiter stopped before it takes the lock holds the
 * one wake).  W0 is traced and sleeps first in the key's futex; W1 sleeps
 * after it.  The holder releases: the kernel wakes sleepers of equal
 * priority in the order they slept, so the one wake goes to W0, which the
 * tracer holds at the futex's return, before it looks at the lock.  W1
 * must still get the key, by the deadline of the lease it saw at the
 * latest (it sleeps until then, the bound of a stopped holder); never
 * later.  Released, W0 then gets the key after W1. */
static void test_woken_waiter_stopped(void **state)
{
    (void)state;
#if !defined(__x86_64__)
    skip(); /* traces the waiter with ptrace: qemu-user cannot (x86-64 only, as tracer.h) */
#endif
    th_daemon d;
    const char *region = th_path("wokenstop.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);

    ag H, W1;
    ag_start(&H, region);
    ag_reply rh = ag_do(&H, "acq h stop/key %llu 0", (unsigned long long)AG_S(3));
    assert_int_equal(rh.rc, 0);

    th_child W0;
    traced_timeout = FL_WAIT_FOREVER;
    start_traced_sleeper(&W0, region, ro);

    ag_start(&W1, region);
    assert_int_equal(W1.open_rc, 0);
    sleep_on_stop_key(&W1, "w", ro, 2);

    ag_reply rr = ag_do(&H, "rel h");
    assert_int_equal(rr.rc, 0);
    /* the wake went to W0: it stops at the futex's return */
    expect_woken(W0.pid);

    ag_reply r1;
    assert_int_equal(ag_read(&W1, &r1, 30000), 0);
    assert_int_equal(r1.rc, 0);
    assert_int_equal(r1.token, rh.token + 1);
    /* by the deadline it saw, with generous slack; never later */
    assert_true(r1.t_end < rh.deadline_ns + AG_S(5));
    print_message("W1 took the key %.3f s after the release; the lease it saw ended "
                  "%.3f s after the release\n",
                  (double)(r1.t_end - rr.t_end) / 1e9,
                  (double)(rh.deadline_ns - rr.t_end) / 1e9);
    assert_int_equal(ag_do(&W1, "rel w").rc, 0);

    /* W0 runs on: it gets the key next */
    assert_int_equal(ptrace(PTRACE_DETACH, W0.pid, NULL, NULL), 0);
    int rc0 = -1;
    unsigned long long tok0 = 0;
    traced_result(&W0, &rc0, &tok0);
    assert_int_equal(rc0, 0);
    assert_int_equal(tok0, rh.token + 2);
    th_send(W0.to_child, "rel");
    assert_int_equal(th_child_wait(&W0, 30000), 0);

    assert_int_equal(ag_stop(&W1), 0);
    assert_int_equal(ag_stop(&H), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I6 (the one-wake release's wake_needed, src/shm/slot.c WAITING).  W0
 * (traced, with a 2 s timeout) and then W1 (no timeout) sleep on a key held
 * with a 60 s lease.  The release wakes W0, which the tracer holds at the
 * futex's return.  N takes the free key without sleeping.  Once W0's
 * timeout has passed, W0 runs on: it finds the key held by N and returns
 * -ETIMEDOUT.  The release that woke it cleared wake_needed, and N's
 * acquisition was not contended: W0's give-up must set it again, or N's
 * release would wake nobody and W1 would sleep on the free key until the
 * deadline it saw, 60 s after the start.  W1 must get the key right after
 * N's release. */
static void test_woken_waiter_gives_up_while_held(void **state)
{
    (void)state;
#if !defined(__x86_64__)
    skip(); /* ptrace under qemu-user: as test_woken_waiter_stopped */
#endif
    th_daemon d;
    const char *region = th_path("wokengiveup.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);

    ag H, W1, N;
    ag_start(&H, region);
    ag_reply rh = ag_do(&H, "acq h stop/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);

    th_child W0;
    traced_timeout = (int64_t)AG_S(2);
    uint64_t w0_slept = start_traced_sleeper(&W0, region, ro);
    traced_timeout = FL_WAIT_FOREVER;

    ag_start(&W1, region);
    assert_int_equal(W1.open_rc, 0);
    sleep_on_stop_key(&W1, "w", ro, 2);

    assert_int_equal(ag_do(&H, "rel h").rc, 0);
    expect_woken(W0.pid); /* the one wake went to W0 (first asleep) */

    ag_start(&N, region);
    ag_reply rn = ag_do(&N, "acq n stop/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rn.rc, 0);
    assert_int_equal(rn.token, rh.token + 1);

    /* W0 read the clock for its timeout before it entered the sleep */
    ag_sleep_until(w0_slept + AG_S(2) + AG_MS(100));
    assert_int_equal(ptrace(PTRACE_DETACH, W0.pid, NULL, NULL), 0);
    int rc0 = 0;
    unsigned long long tok0 = 0;
    traced_result(&W0, &rc0, &tok0);
    assert_int_equal(rc0, -ETIMEDOUT);
    /* W0 stays: a client's exit makes fencelockd wake every sleeper */

    ag_reply rr = ag_do(&N, "rel n");
    assert_int_equal(rr.rc, 0);
    expect_woken_by_release(&W1, &rh, &rr, rh.token + 2, "N's release");
    th_send(W0.to_child, "rel");
    assert_int_equal(th_child_wait(&W0, 30000), 0);

    assert_int_equal(ag_stop(&N), 0);
    assert_int_equal(ag_stop(&W1), 0);
    assert_int_equal(ag_stop(&H), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

static void pin_to(pid_t pid, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    assert_int_equal(sched_setaffinity(pid, sizeof set, &set), 0);
}

/* I4, I6 (src/shm/slot.c SPINNING: one waiter per holding may spin behind the
 * sleepers, when the holder took the key on another CPU).  H, pinned to
 * one CPU, and then W sleep on stop/key, held by G; G's release wakes H (a
 * contended acquisition that leaves W asleep: it notes its CPU).  S,
 * pinned to another CPU, is stepped
 * with ptrace into fl_acquire until it has claimed the holding (a locked
 * cmpxchg) and stands at the first pause of its spin, and is left stopped
 * there: a waiter stopped forever in its spin.  H's release must still
 * wake W, which gets the key long before the deadline it slept to (the
 * claim is no part of the wake protocol).  Released, S finishes its spin,
 * sees the change and gets the key next. */
static void test_spinner_stopped_in_its_spin(void **state)
{
    (void)state;
    if (!TR_SUPPORTED)
        skip(); /* steps through fl_acquire with ptrace: x86-64 only (tracer.h) */
    cpu_set_t mine;
    assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
    int cpu[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &mine))
            cpu[n++] = c;
    if (n < 2) {
        print_message("one CPU: a waiter never spins behind sleepers on it\n");
        skip();
    }
    th_daemon d;
    const char *region = th_path("spinstop.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);

    ag G, H, W;
    ag_start(&G, region);
    ag_start(&H, region);
    ag_start(&W, region);
    pin_to(H.c.pid, cpu[0]);
    ag_reply rg = ag_do(&G, "acq g stop/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rg.rc, 0);
    sleep_on_stop_key(&H, "h", ro, 1);
    sleep_on_stop_key(&W, "w", ro, 2);
    /* the one wake goes to H, asleep first; it leaves W asleep behind it */
    assert_int_equal(ag_do(&G, "rel g").rc, 0);
    ag_reply rh;
    assert_int_equal(ag_read(&H, &rh, 30000), 0);
    assert_int_equal(rh.rc, 0);
    assert_int_equal(rh.token, rg.token + 1);
    assert_true(ag_wait_waiters(ro, "stop/key", 1, 20000));
    assert_true(ag_wait_sleeping(W.c.pid, 20000));

    th_child S;
    traced_timeout = FL_WAIT_FOREVER;
    assert_int_equal(th_child_start(&S, traced_waiter, (void *)region), 0);
    ag_track_foreign(S.pid);
    assert_int_equal(tr_wait_sigstop(S.pid, 20000), 0);
    pin_to(S.pid, cpu[1]);
    tr_ctx t;
    assert_int_equal(tr_run_to(&t, S.pid, (uintptr_t)&fl_acquire, 1000000), 0);
    bool claimed = false;
    for (;;) {
        uint8_t insn[8];
        tr_rip(S.pid, insn);
        if (claimed && insn[0] == 0xf3 && insn[1] == 0x90)
            break; /* pause: in its spin, the claim made */
        bool cas = tr_is_lock_cmpxchg(insn);
#if defined(__x86_64__) /* the only architecture it runs on (TR_SUPPORTED) */
        struct user_regs_struct regs;
        if (insn[0] == 0x0f && insn[1] == 0x05) { /* syscall */
            assert_int_equal(ptrace(PTRACE_GETREGS, S.pid, NULL, &regs), 0);
            if (regs.rax == SYS_futex || regs.rax == TEST_SYS_FUTEX_WAITV)
                fail_msg("the spinner went to sleep without spinning (claimed: %d)", claimed);
        }
#endif
        assert_true(t.steps < 200000);
        assert_false(t.returned);
        assert_int_equal(tr_step(&t, 1, NULL, NULL), 0);
#if defined(__x86_64__)
        if (cas) { /* a claim only if that CAS succeeded: ZF set */
            assert_int_equal(ptrace(PTRACE_GETREGS, S.pid, NULL, &regs), 0);
            claimed = claimed || (regs.eflags & 0x40) != 0;
        }
#else
        claimed = claimed || cas;
#endif
    }

    ag_reply rr = ag_do(&H, "rel h");
    assert_int_equal(rr.rc, 0);
    expect_woken_by_release(&W, &rh, &rr, rh.token + 1, "H's release, the spinner stopped,");

    assert_int_equal(tr_detach(S.pid), 0);
    int rcs = -1;
    unsigned long long toks = 0;
    traced_result(&S, &rcs, &toks);
    assert_int_equal(rcs, 0);
    assert_int_equal(toks, rh.token + 2);
    th_send(S.to_child, "rel");
    assert_int_equal(th_child_wait(&S, 30000), 0);

    assert_int_equal(ag_stop(&W), 0);
    assert_int_equal(ag_stop(&H), 0);
    assert_int_equal(ag_stop(&G), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_killed_waiter_does_not_strand_others, ag_teardown),
        cmocka_unit_test_teardown(test_timeout_and_signal_do_not_strand_others, ag_teardown),
        cmocka_unit_test_teardown(test_waiter_uses_no_cpu, ag_teardown),
        cmocka_unit_test_teardown(test_wait_restores_timer_slack, ag_teardown),
        cmocka_unit_test_teardown(test_far_sleep_keeps_timer_slack, ag_teardown),
        cmocka_unit_test_teardown(test_release_wakes_one, ag_teardown),
        cmocka_unit_test_teardown(test_woken_waiter_stopped, ag_teardown),
        cmocka_unit_test_teardown(test_woken_waiter_gives_up_while_held, ag_teardown),
        cmocka_unit_test_teardown(test_spinner_stopped_in_its_spin, ag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
