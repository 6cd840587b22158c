/* SPDX-License-Identifier: MIT */
/*
 * lock_seed.c - the seed scenario, with real processes and real signals.
 *
 * A acquires a key with a short lease and is stopped (SIGSTOP) before it
 * would write; its lease runs out; B, waiting, takes the key over with a
 * greater token and is told the previous lease expired; A is continued and,
 * unaware, renews and releases: both are rejected (-ESTALE) and B's holding
 * is untouched.
 *
 * I1 (B's token > A's), I4 (a stopped holder delays B by its lease at most,
 * and nothing A holds outlives its lease), and the -ESTALE contract of
 * renew/release/check: a stale lease never changes the key.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"
#include "fixture.h"

#define KEY "seed/render-job"
#define SHORT_LEASE AG_MS(300)
#define LONG_LEASE AG_S(60)

/* I1 I4 */
static void test_stopped_holder_loses_key_to_waiter(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("seed.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);

    ag A, B, C;
    ag_start(&A, region);
    assert_int_equal(A.open_rc, 0);
    assert_int_equal(A.registered, 1);

    /* 1. A acquires: token t, 300 ms lease. */
    ag_reply ra = ag_do(&A, "acq a " KEY " %llu 0", (unsigned long long)SHORT_LEASE);
    assert_int_equal(ra.rc, 0);
    uint64_t t = ra.token;
    assert_true(t >= 1);
    assert_int_equal(ra.flags, 0);
    assert_true(ra.deadline_ns >= ra.t_start + SHORT_LEASE);

    /* 2. A reported its token; it is stopped before it would write. */
    assert_int_equal(kill(A.c.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(A.c.pid, 10000));

    /* 3+4. B waits for the key; it can only get it once A's lease is over. */
    ag_start(&B, region);
    assert_int_equal(B.open_rc, 0);
    ag_reply rb = ag_do(&B, "acq b " KEY " %llu %lld", (unsigned long long)LONG_LEASE,
                        (long long)AG_S(20));
    assert_int_equal(rb.rc, 0);
    assert_true(rb.token > t);
    assert_true(rb.flags & FL_LEASE_EXPIRED);
    assert_false(rb.flags & FL_LEASE_OWNER_DIED);
    /* B got the key after A's deadline (same clock: CLOCK_MONOTONIC), not before */
    assert_true(rb.t_end >= ra.deadline_ns);
    /* A never ran meanwhile */
    assert_true(th_wait_stopped(A.c.pid, 0));

    fl_lock_info li;
    assert_int_equal(ag_lock_info(ro, KEY, &li), 0);
    assert_int_equal(li.state, FL_LOCK_HELD);
    assert_int_equal(li.token, rb.token);
    assert_int_equal(li.holder_pid, (uint32_t)B.c.pid);
    assert_int_equal(li.expiries_taken, 1);

    /* 5. A is continued and, unaware, renews and releases: both stale. */
    assert_int_equal(kill(A.c.pid, SIGCONT), 0);
    ag_reply r = ag_do(&A, "renew a %llu", (unsigned long long)SHORT_LEASE);
    assert_int_equal(r.rc, -ESTALE);
    assert_int_equal(r.deadline_ns, ra.deadline_ns); /* the lease was not extended */
    r = ag_do(&A, "check a");
    assert_int_equal(r.rc, -ESTALE);
    r = ag_do(&A, "rel a");
    assert_int_equal(r.rc, -ESTALE);
    /* a stale release, however often repeated, never frees B's lock */
    for (int i = 0; i < 20; i++) {
        assert_int_equal(ag_do(&A, "rel a").rc, -ESTALE);
        assert_int_equal(ag_do(&A, "renew a %llu", (unsigned long long)LONG_LEASE).rc, -ESTALE);
    }

    /* 6. B's lock is untouched. */
    r = ag_do(&B, "check b");
    assert_int_equal(r.rc, 0);
    assert_int_equal(ag_lock_info(ro, KEY, &li), 0);
    assert_int_equal(li.state, FL_LOCK_HELD);
    assert_int_equal(li.token, rb.token);
    assert_int_equal(li.holder_pid, (uint32_t)B.c.pid);
    assert_true(li.lease_left_ns > (int64_t)AG_S(30)); /* A's renew did not touch it */
    ag_start(&C, region);
    assert_int_equal(C.open_rc, 0);
    r = ag_do(&C, "acq c " KEY " %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(r.rc, -EBUSY); /* still held: A's release freed nothing */

    r = ag_do(&B, "rel b");
    assert_int_equal(r.rc, 0);
    r = ag_do(&C, "acq c " KEY " %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.token, rb.token + 1);
    assert_int_equal(r.flags, 0);
    assert_int_equal(ag_do(&C, "rel c").rc, 0);

    assert_int_equal(ag_stop(&A), 0);
    assert_int_equal(ag_stop(&B), 0);
    assert_int_equal(ag_stop(&C), 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I1 I4: the same pause, but the new holder has already released when the
 * stale holder wakes up: its release and renew must not touch the free key
 * (no token consumed, nothing re-taken), and B waits with FL_WAIT_FOREVER. */
static void test_stale_release_on_free_key(void **state)
{
    fx_env *e = *state; /* a fencelockd, a read-only handle, 2 agents: fixture.h */
    fl_region *ro = e->ro;
    ag *A = &e->a[0], *B = &e->a[1];

    ag_reply ra = ag_do(A, "acq a " KEY " %llu 0", (unsigned long long)SHORT_LEASE);
    assert_int_equal(ra.rc, 0);
    assert_int_equal(kill(A->c.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(A->c.pid, 10000));

    ag_reply rb = ag_do(B, "acq b " KEY " %llu -1", (unsigned long long)LONG_LEASE);
    assert_int_equal(rb.rc, 0);
    assert_int_equal(rb.token, ra.token + 1);
    assert_true(rb.flags & FL_LEASE_EXPIRED);
    assert_true(rb.t_end >= ra.deadline_ns);
    assert_int_equal(ag_do(B, "rel b").rc, 0);

    assert_int_equal(kill(A->c.pid, SIGCONT), 0);
    assert_int_equal(ag_do(A, "renew a %llu", (unsigned long long)LONG_LEASE).rc, -ESTALE);
    assert_int_equal(ag_do(A, "rel a").rc, -ESTALE);
    assert_int_equal(ag_do(A, "check a").rc, -ESTALE);

    fl_lock_info li;
    assert_int_equal(ag_lock_info(ro, KEY, &li), 0);
    assert_int_equal(li.state, FL_LOCK_FREE);
    assert_int_equal(li.token, rb.token);
    assert_int_equal(li.last_release, 0);

    ag_reply r = ag_do(B, "acq b " KEY " %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.token, rb.token + 1);
    assert_int_equal(r.flags, 0);
    assert_int_equal(ag_do(B, "rel b").rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stopped_holder_loses_key_to_waiter, ag_teardown),
        fx_unit_test(test_stale_release_on_free_key, "seed2.region", 2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
