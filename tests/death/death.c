/* SPDX-License-Identifier: MIT */
/*
 * death.c - a holder that dies is noticed by the supervisor.
 *
 * I5: a registered holder killed with SIGKILL while holding a 60 s lease
 * has its locks freed by fencelockd long before the lease ends; a waiter
 * blocked in fl_acquire gets the key with FL_LEASE_OWNER_DIED, a later
 * try-acquire of another key it held does too, and the supervisor logs
 * "lock_released_by_death".  fl_close with locks held counts as a death.
 * I10/I4: an unregistered holder (no supervisor) that dies is only freed at
 * its lease deadline, and the next holder sees FL_LEASE_EXPIRED.
 * I5/I6: a releaser killed between its release CAS and its futex wake
 * (stopped there by ptrace) does not leave its waiter asleep on the free
 * lock until the lease deadline: the supervisor's reap wakes it, and so does
 * a supervisor that starts after such a death went unseen.
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
#include "fixture.h"
#include "tracer.h"

#define LONG_LEASE AG_S(60)

/* I5 */
static void test_sigkill_holder_wakes_waiter(void **state)
{
    fx_env *e = *state; /* a fencelockd, a read-only handle, 2 agents: fixture.h */
    fl_region *ro = e->ro;
    ag *H = &e->a[0], *W = &e->a[1];
    assert_int_equal(H->registered, 1);

    ag_reply rh = ag_do(H, "acq h death/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    ag_reply rh2 = ag_do(H, "acq h2 death/other %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh2.rc, 0);

    /* the lock names its registered holder */
    fl_lock_info hi;
    assert_int_equal(ag_lock_info(ro, "death/key", &hi), 0);
    assert_int_equal(hi.holder_pid, (uint32_t)H->c.pid);
    assert_true(hi.holder_client != 0);
    fl_client_info ci;
    assert_int_equal(fl_client_info_get(ro, hi.holder_client, &ci), 0);
    assert_int_equal(ci.pid, (uint32_t)H->c.pid);
    assert_int_equal(ci.client_id, hi.holder_client_id);
    assert_int_equal(ci.attached, 1);

    /* W blocks in fl_acquire with a long timeout */
    ag_send(W, "acq w death/key %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(50));
    assert_true(ag_wait_waiters(ro, "death/key", 1, 20000));
    assert_true(ag_wait_sleeping(W->c.pid, 20000));

    uint64_t t_kill = th_now_ns();
    int st = ag_kill(H);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    ag_reply rw;
    assert_int_equal(ag_read(W, &rw, 40000), 0);
    assert_int_equal(rw.rc, 0);
    assert_int_equal(rw.token, rh.token + 1);
    assert_true(rw.flags & FL_LEASE_OWNER_DIED);
    assert_false(rw.flags & FL_LEASE_EXPIRED);
    /* well within the dead holder's lease (a bound on behaviour, not speed) */
    assert_true(rw.t_end - t_kill < AG_S(10));
    assert_true(rw.t_end < rh.deadline_ns);

    /* the other key it held is free too, and says why */
    assert_true(th_daemon_log_wait(&e->d, "lock_released_by_death", 2, 20000));
    assert_true(th_daemon_log_count(&e->d, "\"key\":\"death/key\"") >= 1);
    assert_true(th_daemon_log_count(&e->d, "\"key\":\"death/other\"") >= 1);
    fl_lock_info li;
    assert_int_equal(ag_lock_info(ro, "death/other", &li), 0);
    assert_int_equal(li.state, FL_LOCK_FREE);
    assert_int_equal(li.last_release, FL_LEASE_OWNER_DIED);
    assert_int_equal(li.deaths, 1);
    ag_reply r = ag_do(W, "acq w2 death/other %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.token, rh2.token + 1);
    assert_true(r.flags & FL_LEASE_OWNER_DIED);
    assert_int_equal(ag_do(W, "rel w2").rc, 0);
    assert_int_equal(ag_do(W, "rel w").rc, 0);

    /* the next holder after a normal release is not told of a death */
    r = ag_do(W, "acq w death/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.flags, 0);
    assert_int_equal(ag_do(W, "rel w").rc, 0);
}

/* I5: fl_close with a lock held releases it as if the process had died. */
static void test_close_releases_as_death(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("close.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    ag H, W;
    ag_start(&H, region);
    ag_start(&W, region);
    assert_int_equal(H.registered, 1);
    assert_int_equal(W.open_rc, 0);
    ag_reply rh = ag_do(&H, "acq h close/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    ag_send(&W, "acq w close/key %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(50));
    assert_true(ag_wait_waiters(ro, "close/key", 1, 20000));
    assert_true(ag_wait_sleeping(W.c.pid, 20000));
    uint64_t t_close = th_now_ns();
    assert_int_equal(ag_do(&H, "close").rc, 0); /* H lives on, without its handle */
    ag_reply rw;
    assert_int_equal(ag_read(&W, &rw, 40000), 0);
    assert_int_equal(rw.rc, 0);
    assert_int_equal(rw.token, rh.token + 1);
    assert_true(rw.flags & FL_LEASE_OWNER_DIED);
    assert_true(rw.t_end - t_close < AG_S(10));
    assert_true(th_daemon_log_wait(&d, "lock_released_by_death", 1, 20000));
    assert_int_equal(ag_do(&W, "rel w").rc, 0);
    assert_int_equal(ag_stop(&W), 0);
    assert_int_equal(ag_stop(&H), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I10 I4: without a supervisor a dead holder's lock ends at its deadline. */
static void test_unregistered_death_falls_back_to_lease(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("nosup.region");
    ag_daemon_start(&d, region); /* creates the region */
    int st = th_daemon_stop(&d, SIGTERM);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    ag H, W;
    ag_start(&H, region);
    assert_int_equal(H.open_rc, 0);
    assert_int_equal(H.registered, 0);
    ag_start(&W, region);
    assert_int_equal(W.open_rc, 0);
    ag_reply rh = ag_do(&H, "acq h nosup/key %llu 0", (unsigned long long)AG_MS(500));
    assert_int_equal(rh.rc, 0);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    fl_lock_info hi;
    assert_int_equal(ag_lock_info(ro, "nosup/key", &hi), 0);
    assert_int_equal(hi.holder_client, 0); /* unregistered */
    assert_int_equal(hi.holder_client_id, 0);
    fl_close(ro);
    ag_kill(&H);
    ag_reply rw = ag_do(&W, "acq w nosup/key %llu %lld", (unsigned long long)LONG_LEASE,
                        (long long)AG_S(20));
    assert_int_equal(rw.rc, 0);
    assert_int_equal(rw.token, rh.token + 1);
    assert_true(rw.flags & FL_LEASE_EXPIRED);
    assert_false(rw.flags & FL_LEASE_OWNER_DIED);
    assert_true(rw.t_end >= rh.deadline_ns);
    assert_int_equal(ag_do(&W, "rel w").rc, 0);
    assert_int_equal(ag_stop(&W), 0);
}

/* I5: a forked child that inherited the handle's registration socket (it
 * never uses fencelock) must not keep the parent's locks alive: neither
 * when the parent dies, nor when it closes its handle (fl_close promises
 * release "as if the process had died"). */
static void test_inherited_socket_does_not_keep_locks(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("fork.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    ag H, W;
    ag_start(&H, region);
    ag_start(&W, region);
    assert_int_equal(H.registered, 1);
    assert_int_equal(W.open_rc, 0);

    /* the parent dies, its forked child lives on */
    ag_reply rh = ag_do(&H, "acq h fork/die %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    ag_reply sp = ag_do(&H, "spawn");
    assert_int_equal(sp.rc, 0);
    ag_track_foreign((pid_t)sp.token);
    ag_send(&W, "acq w fork/die %llu %lld", (unsigned long long)LONG_LEASE, (long long)AG_S(15));
    assert_true(ag_wait_waiters(ro, "fork/die", 1, 20000));
    assert_true(ag_wait_sleeping(W.c.pid, 20000));
    uint64_t t0 = th_now_ns();
    ag_kill(&H);
    ag_reply rw;
    assert_int_equal(ag_read(&W, &rw, 40000), 0);
    assert_int_equal(rw.rc, 0);
    assert_true(rw.flags & FL_LEASE_OWNER_DIED);
    assert_true(rw.t_end - t0 < AG_S(10));
    assert_int_equal(ag_do(&W, "rel w").rc, 0);
    kill((pid_t)sp.token, SIGKILL);

    /* the parent closes its handle, its forked child lives on */
    ag H2;
    ag_start(&H2, region);
    assert_int_equal(H2.registered, 1);
    rh = ag_do(&H2, "acq h fork/close %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    sp = ag_do(&H2, "spawn");
    assert_int_equal(sp.rc, 0);
    ag_track_foreign((pid_t)sp.token);
    ag_send(&W, "acq w fork/close %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(15));
    assert_true(ag_wait_waiters(ro, "fork/close", 1, 20000));
    assert_true(ag_wait_sleeping(W.c.pid, 20000));
    t0 = th_now_ns();
    assert_int_equal(ag_do(&H2, "close").rc, 0);
    assert_int_equal(ag_read(&W, &rw, 40000), 0);
    if (rw.rc != 0)
        fail_msg("fl_close did not release the lock while a forked child holds a copy of "
                 "the registration socket: waiter got %s after %.1f s (lease 60 s)",
                 fl_err_name(rw.rc), (double)(rw.t_end - t0) / 1e9);
    assert_true(rw.flags & FL_LEASE_OWNER_DIED);
    assert_true(rw.t_end - t0 < AG_S(10));
    assert_int_equal(ag_do(&W, "rel w").rc, 0);
    kill((pid_t)sp.token, SIGKILL);
    ag_stop(&H2);
    ag_stop(&W);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* The traced releaser: acquire, report the lease, stop right before
 * fl_release for the parent to single-step. */
struct releaser_arg {
    const char *region;
    bool registered; /* whether a supervisor must have registered it */
};

static int traced_releaser(void *arg, int in, int out)
{
    (void)in;
    const struct releaser_arg *a = arg;
    tr_traceme();
    fl_region *r = NULL;
    if (fl_open(a->region, &r) != 0 || fl_region_registered(r) != a->registered)
        return 2;
    fl_lease l;
    int rc = fl_acquire(r, "death/window", LONG_LEASE, 0, &l);
    char line[96];
    snprintf(line, sizeof line, "%d %llu %llu", rc, (unsigned long long)l.token,
             (unsigned long long)l.deadline_ns);
    th_send(out, line);
    if (rc != 0)
        return 3;
    raise(SIGSTOP); /* the parent steps us from here */
    fl_release(r, &l);
    return 4; /* never: killed inside fl_release */
}

/* A releaser H stopped right after its release CAS, before its wake, and a
 * waiter W asleep on the key it just freed. */
struct stranded {
    th_child H;
    ag W;
    unsigned long long token, deadline; /* H's lease */
};

static void strand_a_sleeper(const char *region, bool registered, fl_region *ro,
                             struct stranded *x)
{
    struct releaser_arg arg = {region, registered};
    assert_int_equal(th_child_start(&x->H, traced_releaser, &arg), 0);
    ag_track_foreign(x->H.pid);
    char line[96];
    assert_int_equal(th_recv(x->H.from_child, line, sizeof line, 20000), 0);
    int rc = -1;
    assert_int_equal(sscanf(line, "%d %llu %llu", &rc, &x->token, &x->deadline), 3);
    assert_int_equal(rc, 0);
    assert_int_equal(tr_wait_sigstop(x->H.pid, 20000), 0);

    /* a waiter asleep in the kernel on the held key, until the lease ends */
    ag_start(&x->W, region);
    assert_int_equal(x->W.open_rc, 0);
    assert_int_equal(x->W.registered, registered);
    ag_send(&x->W, "acq w death/window %llu %lld", (unsigned long long)LONG_LEASE,
            (long long)AG_S(50));
    assert_true(ag_wait_waiters(ro, "death/window", 1, 20000));
    assert_true(ag_wait_sleeping(x->W.c.pid, 20000));

    /* step H into fl_release until its CAS has freed the key: it is then
     * stopped right after that instruction, before it reads `waiters` */
    tr_ctx t;
    assert_int_equal(tr_run_to(&t, x->H.pid, (uintptr_t)&fl_release, 1000000), 0);
    uint8_t last[8] = {0};
    fl_lock_info li;
    for (;;) {
        assert_int_equal(ag_lock_info(ro, "death/window", &li), 0);
        if (li.state == FL_LOCK_FREE)
            break;
        assert_true(t.steps < 10000);
        assert_false(t.returned);
        tr_rip(x->H.pid, last);
        assert_int_equal(tr_step(&t, 1, NULL, NULL), 0);
    }
    assert_true(tr_is_lock_cmpxchg16b(last)); /* the release is one pair CAS */
    assert_int_equal(li.token, x->token);
    /* nobody woke the waiter: it is still asleep on the free lock */
    assert_true(ag_wait_sleeping(x->W.c.pid, 20000));
    ag_reply rw;
    assert_int_equal(ag_read(&x->W, &rw, 0), -1);
}

/* W, woken, holds the key long before the 60 s deadline it slept to, with
 * the next token (same_epoch) or, after a supervisor start opened a new
 * epoch, a greater one (I1). */
static void expect_sleeper_woken(struct stranded *x, uint64_t since, bool same_epoch)
{
    ag_reply rw;
    assert_int_equal(ag_read(&x->W, &rw, 40000), 0);
    if (rw.rc != 0)
        fail_msg("the woken waiter's acquire returned %d (%s)", rw.rc, fl_strerror(rw.rc));
    if (same_epoch)
        assert_int_equal(rw.token, x->token + 1);
    else
        assert_true(rw.token > x->token);
    assert_int_equal(rw.flags, 0); /* released, not freed by death */
    assert_true(rw.t_end - since < AG_S(10));
    assert_true(rw.t_end < x->deadline);
    assert_int_equal(ag_do(&x->W, "rel w").rc, 0);
    assert_int_equal(ag_stop(&x->W), 0);
}

/* I5 I6: the releaser dies after its release CAS and before its wake; the
 * supervisor's reap wakes the sleeper. */
static void test_releaser_killed_before_wake(void **state)
{
    (void)state;
    if (!TR_SUPPORTED)
        skip(); /* steps through fl_release with ptrace: x86-64 only (tracer.h) */
    th_daemon d;
    const char *region = th_path("window.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    struct stranded x;
    strand_a_sleeper(region, true, ro, &x);

    uint64_t t_kill = th_now_ns();
    kill(x.H.pid, SIGKILL);
    int st = th_child_wait(&x.H, 20000);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    expect_sleeper_woken(&x, t_kill, true);
    assert_true(th_daemon_log_wait(&d, "\"client_gone\"", 1, 20000));
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I6 I10: the same death while no supervisor runs (nobody reaps, nothing in
 * the region records it); a supervisor that starts later wakes the sleeper
 * at once, as it does after being killed between a reap and its wake. */
static void test_supervisor_start_wakes_stranded_sleeper(void **state)
{
    (void)state;
    if (!TR_SUPPORTED)
        skip(); /* steps through fl_release with ptrace: x86-64 only (tracer.h) */
    th_daemon d;
    const char *region = th_path("window-nosup.region");
    ag_daemon_start(&d, region); /* creates the region */
    int st = th_daemon_stop(&d, SIGTERM);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    struct stranded x;
    strand_a_sleeper(region, false, ro, &x);
    kill(x.H.pid, SIGKILL);
    st = th_child_wait(&x.H, 20000);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_true(ag_wait_sleeping(x.W.c.pid, 20000)); /* still asleep: nobody knows */

    uint64_t t_start = th_now_ns();
    ag_daemon_start(&d, region);
    expect_sleeper_woken(&x, t_start, false);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        fx_unit_test(test_sigkill_holder_wakes_waiter, "death.region", 2),
        cmocka_unit_test_teardown(test_close_releases_as_death, ag_teardown),
        cmocka_unit_test_teardown(test_unregistered_death_falls_back_to_lease, ag_teardown),
        cmocka_unit_test_teardown(test_inherited_socket_does_not_keep_locks, ag_teardown),
        cmocka_unit_test_teardown(test_releaser_killed_before_wake, ag_teardown),
        cmocka_unit_test_teardown(test_supervisor_start_wakes_stranded_sleeper, ag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
