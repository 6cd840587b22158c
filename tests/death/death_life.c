/* SPDX-License-Identifier: MIT */
/*
 * death_life.c - a holder's death reaches its waiters through its life word
 * (src/shm/life.c), with fencelockd running and with fencelockd stopped.
 *
 * I5 I10: a registered holder killed with SIGKILL while waiters sleep on
 * two keys it holds (60 s leases): each waiter gets its key with
 * FL_LEASE_OWNER_DIED within 20 s, with fencelockd running and with
 * fencelockd stopped (SIGSTOP, after everybody registered); a waiter that
 * comes after the death does too; execve of the holder is a death.
 * I5: not a death: a holder thread that exits while its process lives, and
 * a new client in the client entry of one that died (entry reuse); an
 * unregistered holder's lock ends at its deadline (death.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"

#define LONG_LEASE AG_S(60)
#define BOUND AG_S(20) /* long before the lease ends; a bound, not a speed */

static void supervisor_stop(th_daemon *d)
{
    assert_int_equal(kill(d->pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(d->pid, 20000));
}

static void supervisor_cont(th_daemon *d) { assert_int_equal(kill(d->pid, SIGCONT), 0); }

/* W got KEY after the holder's death: OWNER_DIED, the next token, soon. */
static void expect_owner_died(ag *w, uint64_t holder_token, uint64_t since)
{
    ag_reply r;
    assert_int_equal(ag_read(w, &r, (int)(BOUND / TH_MS) + 10000), 0);
    if (r.rc != 0)
        fail_msg("waiter's acquire returned %s", fl_err_name(r.rc));
    assert_int_equal(r.token, holder_token + 1);
    assert_true(r.flags & FL_LEASE_OWNER_DIED);
    assert_false(r.flags & FL_LEASE_EXPIRED);
    print_message("waiter took the key %.1f us after the holder's death\n",
                  (double)(r.t_end - since) / 1e3);
    assert_true(r.t_end - since < BOUND);
    assert_int_equal(ag_do(w, "rel w").rc, 0);
}

/* A holder of two keys dies; a waiter sleeps on each.  stop: fencelockd is
 * stopped (after everybody registered) before the death. */
static void holder_of_two_keys_dies(const char *name, bool stop)
{
    th_daemon d;
    const char *region = th_path(name);
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    ag H, W1, W2;
    ag_start(&H, region);
    ag_start(&W1, region);
    ag_start(&W2, region);
    assert_int_equal(H.registered, 1);
    assert_int_equal(W1.registered, 1);
    assert_int_equal(W2.registered, 1);
    ag_reply h1 = ag_do(&H, "acq h1 life/one %llu 0", (unsigned long long)LONG_LEASE);
    ag_reply h2 = ag_do(&H, "acq h2 life/two %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(h1.rc, 0);
    assert_int_equal(h2.rc, 0);
    if (stop)
        supervisor_stop(&d);
    ag_send(&W1, "acq w life/one %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(50));
    ag_send(&W2, "acq w life/two %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(50));
    assert_true(ag_wait_waiters(ro, "life/one", 1, 20000));
    assert_true(ag_wait_waiters(ro, "life/two", 1, 20000));
    assert_true(ag_wait_sleeping(W1.c.pid, 20000));
    assert_true(ag_wait_sleeping(W2.c.pid, 20000));

    uint64_t t_kill = th_now_ns();
    int st = ag_kill(&H);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* both: the kernel wakes one sleeper of the life word, which passes
     * the news on to the other */
    expect_owner_died(&W1, h1.token, t_kill);
    expect_owner_died(&W2, h2.token, t_kill);
    fl_lock_info li;
    assert_int_equal(ag_lock_info(ro, "life/one", &li), 0);
    assert_int_equal(li.deaths, 1);

    if (stop)
        supervisor_cont(&d);
    /* fencelockd logs both, whoever freed them (a waiter posts an event) */
    assert_true(th_daemon_log_wait(&d, "lock_released_by_death", 2, 20000));
    assert_true(th_daemon_log_count(&d, "\"key\":\"life/one\"") >= 1);
    assert_true(th_daemon_log_count(&d, "\"key\":\"life/two\"") >= 1);
    if (stop) /* nobody but the waiters can have freed them */
        assert_int_equal(th_daemon_log_count(&d, "\"freed_by_pid\""), 2);
    assert_int_equal(ag_stop(&W1), 0);
    assert_int_equal(ag_stop(&W2), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I5 */
static void test_holder_killed_supervised(void **state)
{
    (void)state;
    holder_of_two_keys_dies("life-sup.region", false);
}

/* I5 I10 */
static void test_holder_killed_supervisor_stopped(void **state)
{
    (void)state;
    holder_of_two_keys_dies("life-nosup.region", true);
}

/* I5 I10: a waiter that comes after the death (fencelockd stopped) sees
 * the dead life word before it sleeps. */
static void test_waiter_after_death_supervisor_stopped(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("life-after.region");
    ag_daemon_start(&d, region);
    ag H, W;
    ag_start(&H, region);
    ag_start(&W, region);
    assert_int_equal(H.registered, 1);
    ag_reply rh = ag_do(&H, "acq h life/after %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    supervisor_stop(&d);
    int st = ag_kill(&H);
    assert_true(WIFSIGNALED(st));
    uint64_t t0 = th_now_ns();
    ag_send(&W, "acq w life/after %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(50));
    expect_owner_died(&W, rh.token, t0);
    supervisor_cont(&d);
    assert_int_equal(ag_stop(&W), 0);
    th_daemon_stop(&d, SIGTERM);
}

/* I5 I10: execve of the holder ends its handle: a death. */
static void test_exec_is_death(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("life-exec.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    ag H, W;
    ag_start(&H, region);
    ag_start(&W, region);
    assert_int_equal(H.registered, 1);
    ag_reply rh = ag_do(&H, "acq h life/exec %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    supervisor_stop(&d);
    ag_send(&W, "acq w life/exec %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(50));
    assert_true(ag_wait_waiters(ro, "life/exec", 1, 20000));
    assert_true(ag_wait_sleeping(W.c.pid, 20000));
    uint64_t t0 = th_now_ns();
    assert_int_equal(ag_do(&H, "exec").rc, 0);
    expect_owner_died(&W, rh.token, t0);
    /* the process lives on as /bin/sleep (killed at teardown) */
    assert_int_equal(kill(H.c.pid, 0), 0);
    supervisor_cont(&d);
    assert_int_equal(ag_stop(&W), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I5 I4: the thread that acquired exits (pthread_exit) while its process
 * lives: not a death.  The lock stays held; a waiter times out. */
static void test_holder_thread_exit_is_not_death(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("life-thread.region");
    ag_daemon_start(&d, region);
    ag H, W;
    ag_start(&H, region);
    ag_start(&W, region);
    assert_int_equal(H.registered, 1);
    ag_reply rh = ag_do(&H, "tacq h life/thread %llu", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    supervisor_stop(&d); /* only the life word could free it now */
    ag_reply rw = ag_do(&W, "acq w life/thread %llu %lld", (unsigned long long)LONG_LEASE,
                        (long long)AG_S(2));
    assert_int_equal(rw.rc, -ETIMEDOUT);
    /* the process's lease is still good, and its release works */
    assert_int_equal(ag_do(&H, "check h").rc, 0);
    assert_int_equal(ag_do(&H, "rel h").rc, 0);
    rw = ag_do(&W, "acq w life/thread %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rw.rc, 0);
    assert_int_equal(rw.flags, 0);
    assert_int_equal(ag_do(&W, "rel w").rc, 0);
    supervisor_cont(&d);
    assert_int_equal(ag_stop(&H), 0);
    assert_int_equal(ag_stop(&W), 0);
    th_daemon_stop(&d, SIGTERM);
}

/* I5: a client in the entry of one that died (its life word was left
 * OWNER_DIED) does not look dead; its own death does. */
static void test_entry_reuse(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("life-reuse.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    ag A, B, W;
    ag_start(&W, region);
    ag_start(&A, region);
    assert_int_equal(A.registered, 1);
    assert_int_equal(ag_do(&A, "acq a life/reuse %llu 0", (unsigned long long)LONG_LEASE).rc, 0);
    fl_lock_info li;
    assert_int_equal(ag_lock_info(ro, "life/reuse", &li), 0);
    uint32_t entry = li.holder_client;
    assert_true(entry != 0);
    /* A dies; fencelockd reaps it and frees its entry */
    ag_kill(&A);
    assert_true(th_daemon_log_wait(&d, "\"client_gone\"", 1, 20000));
    /* B registers: the lowest free entry, A's */
    ag_start(&B, region);
    assert_int_equal(B.registered, 1);
    ag_reply rb = ag_do(&B, "acq b life/reuse %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rb.rc, 0);
    assert_true(rb.flags & FL_LEASE_OWNER_DIED); /* A's, freed by whoever */
    assert_int_equal(ag_lock_info(ro, "life/reuse", &li), 0);
    assert_int_equal(li.holder_client, entry);
    supervisor_stop(&d);
    ag_reply rw = ag_do(&W, "acq w life/reuse %llu %lld", (unsigned long long)LONG_LEASE,
                        (long long)AG_S(2));
    assert_int_equal(rw.rc, -ETIMEDOUT); /* B lives: its lock stays */
    assert_int_equal(ag_do(&B, "check b").rc, 0);
    /* B's own death frees it */
    ag_send(&W, "acq w life/reuse %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(50));
    assert_true(ag_wait_waiters(ro, "life/reuse", 1, 20000));
    assert_true(ag_wait_sleeping(W.c.pid, 20000));
    uint64_t t0 = th_now_ns();
    ag_kill(&B);
    expect_owner_died(&W, rb.token, t0);
    supervisor_cont(&d);
    assert_int_equal(ag_stop(&W), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_holder_killed_supervised, ag_teardown),
        cmocka_unit_test_teardown(test_holder_killed_supervisor_stopped, ag_teardown),
        cmocka_unit_test_teardown(test_waiter_after_death_supervisor_stopped, ag_teardown),
        cmocka_unit_test_teardown(test_exec_is_death, ag_teardown),
        cmocka_unit_test_teardown(test_holder_thread_exit_is_not_death, ag_teardown),
        cmocka_unit_test_teardown(test_entry_reuse, ag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
