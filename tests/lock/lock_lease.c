/* SPDX-License-Identifier: MIT */
/*
 * lock_lease.c - try/timeout semantics, renewal, and stale leases.
 *
 * I1: a failed try or a timed-out wait consumes no token (the next
 * successful token is the previous one + 1).
 * I4: renew extends the deadline, and nothing else does; a stale lease
 * (released, taken over, expired, or never issued) changes nothing through
 * renew, release or check.  FL_WAIT_FOREVER waits until the release.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"
#include "fixture.h"

#define LONG_LEASE AG_S(60)

/* I1: -EBUSY at once, -ETIMEDOUT after the timeout, and no token consumed */
static void test_try_and_timeout(void **state)
{
    fx_env *e = *state; /* a fencelockd, a read-only handle, 2 agents: fixture.h */
    ag *H = &e->a[0], *P = &e->a[1]; /* H holds, P probes */
    ag_reply rh = ag_do(H, "acq h try/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    assert_int_equal(FL_TOKEN_COUNTER(rh.token), 1); /* the key's first token */

    for (int i = 0; i < 10; i++) {
        ag_reply r = ag_do(P, "acq p try/key %llu 0", (unsigned long long)LONG_LEASE);
        assert_int_equal(r.rc, -EBUSY);
        /* it did not wait for the 60 s lease (a generous behavioural bound) */
        assert_true(r.t_end - r.t_start < AG_S(5));
    }
    ag_reply r = ag_do(P, "acq p try/key %llu %lld", (unsigned long long)LONG_LEASE,
                       (long long)AG_MS(200));
    assert_int_equal(r.rc, -ETIMEDOUT);
    assert_true(r.t_end - r.t_start >= AG_MS(200));
    assert_true(r.t_end - r.t_start < AG_S(30));

    fl_lock_info li;
    assert_int_equal(ag_lock_info(e->ro, "try/key", &li), 0);
    assert_int_equal(li.state, FL_LOCK_HELD);
    assert_int_equal(li.token, rh.token);
    assert_int_equal(li.acquisitions, 1);

    assert_int_equal(ag_do(H, "rel h").rc, 0);
    r = ag_do(P, "acq p try/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.token, rh.token + 1); /* the failures consumed nothing */
    assert_int_equal(r.flags, 0);
    assert_int_equal(ag_do(P, "rel p").rc, 0);
}

/* I4: renew moves the deadline, and the lease holds past the original one */
static void test_renew_extends(void **state)
{
    fx_env *e = *state; /* a fencelockd, a read-only handle, 2 agents: fixture.h */
    ag *H = &e->a[0], *P = &e->a[1]; /* H holds, P probes */
    ag_reply ra = ag_do(H, "acq h renew/key %llu 0", (unsigned long long)AG_MS(300));
    assert_int_equal(ra.rc, 0);
    assert_true(ra.deadline_ns >= ra.t_start + AG_MS(300));
    assert_int_equal(ra.deadline_ns % 1000, 0); /* kept in microseconds */
    ag_reply rr = ag_do(H, "renew h %llu", (unsigned long long)LONG_LEASE);
    assert_int_equal(rr.rc, 0);
    assert_true(rr.deadline_ns > ra.deadline_ns);
    assert_true(rr.deadline_ns >= rr.t_start + LONG_LEASE);
    assert_true(rr.deadline_ns <= rr.t_end + LONG_LEASE + AG_MS(1));

    ag_sleep_until(ra.deadline_ns + AG_MS(100)); /* past the original deadline */
    assert_int_equal(ag_do(H, "check h").rc, 0);
    ag_reply r = ag_do(P, "acq p renew/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(r.rc, -EBUSY);
    fl_lock_info li;
    assert_int_equal(ag_lock_info(e->ro, "renew/key", &li), 0);
    assert_int_equal(li.state, FL_LOCK_HELD);
    assert_int_equal(li.renewals, 1);
    assert_true(li.lease_left_ns > (int64_t)AG_S(30));

    /* a second renew can also shorten it: the deadline is now + lease */
    rr = ag_do(H, "renew h %llu", (unsigned long long)AG_S(20));
    assert_int_equal(rr.rc, 0);
    assert_true(rr.deadline_ns >= rr.t_start + AG_S(20));
    assert_true(rr.deadline_ns <= rr.t_end + AG_S(20) + AG_MS(1));
    assert_int_equal(ag_do(H, "rel h").rc, 0);
}

/* Nothing about key changed: free or held by token, with the given counters. */
static void expect_unchanged(fl_region *ro, const char *key, int state, uint64_t token)
{
    fl_lock_info li;
    assert_int_equal(ag_lock_info(ro, key, &li), 0);
    assert_int_equal(li.state, state);
    assert_int_equal(li.token, token);
}

/* I4: stale leases change nothing */
static void test_stale_lease_changes_nothing(void **state)
{
    fx_env *e = *state; /* a fencelockd, a read-only handle, 2 agents: fixture.h */
    ag *H = &e->a[0], *P = &e->a[1]; /* H holds, P probes */
    const unsigned long long L = LONG_LEASE;

    /* a released lease, with the key now held by another */
    ag_reply r1 = ag_do(H, "acq h st/key %llu 0", L);
    assert_int_equal(r1.rc, 0);
    assert_int_equal(ag_do(H, "copy old h").rc, 0);
    assert_int_equal(ag_do(H, "rel h").rc, 0);
    ag_reply r2 = ag_do(P, "acq p st/key %llu 0", L);
    assert_int_equal(r2.rc, 0);
    assert_int_equal(r2.token, r1.token + 1);
    fl_lock_info before;
    assert_int_equal(ag_lock_info(e->ro, "st/key", &before), 0);
    assert_int_equal(ag_do(H, "renew old %llu", L).rc, -ESTALE);
    assert_int_equal(ag_do(H, "check old").rc, -ESTALE);
    assert_int_equal(ag_do(H, "rel old").rc, -ESTALE);
    expect_unchanged(e->ro, "st/key", FL_LOCK_HELD, r2.token);
    fl_lock_info after;
    assert_int_equal(ag_lock_info(e->ro, "st/key", &after), 0);
    assert_int_equal(after.holder_pid, (uint32_t)P->c.pid);
    assert_int_equal(after.renewals, before.renewals);
    assert_int_equal(after.releases, before.releases);
    assert_true(after.lease_left_ns <= before.lease_left_ns); /* not extended */
    assert_int_equal(ag_do(P, "check p").rc, 0);

    /* a lease never issued (a future token) */
    assert_int_equal(ag_do(H, "forge old %llu", (unsigned long long)(r2.token + 5)).rc, 0);
    assert_int_equal(ag_do(H, "renew old %llu", L).rc, -ESTALE);
    assert_int_equal(ag_do(H, "check old").rc, -ESTALE);
    assert_int_equal(ag_do(H, "rel old").rc, -ESTALE);
    expect_unchanged(e->ro, "st/key", FL_LOCK_HELD, r2.token);
    assert_int_equal(ag_do(P, "check p").rc, 0);

    /* stale leases on a free key: nothing re-taken, no token consumed */
    assert_int_equal(ag_do(P, "rel p").rc, 0);
    assert_int_equal(ag_do(H, "forge old %llu", (unsigned long long)r1.token).rc, 0);
    assert_int_equal(ag_do(H, "renew old %llu", L).rc, -ESTALE);
    assert_int_equal(ag_do(H, "rel old").rc, -ESTALE);
    assert_int_equal(ag_do(P, "renew p %llu", L).rc, -ESTALE); /* released: stale too */
    assert_int_equal(ag_do(P, "rel p").rc, -ESTALE);
    assert_int_equal(ag_do(P, "check p").rc, -ESTALE);
    expect_unchanged(e->ro, "st/key", FL_LOCK_FREE, r2.token);
    ag_reply r3 = ag_do(P, "acq p st/key %llu 0", L);
    assert_int_equal(r3.rc, 0);
    assert_int_equal(r3.token, r2.token + 1);
    assert_int_equal(r3.flags, 0);
    assert_int_equal(ag_do(P, "rel p").rc, 0);

    /* an expired lease nobody took over: renew and check fail and change
     * nothing; release frees it normally (nobody can have overlapped it) */
    ag_reply r4 = ag_do(H, "acq h st/exp %llu 0", (unsigned long long)AG_MS(1));
    assert_int_equal(r4.rc, 0);
    ag_sleep_until(r4.deadline_ns + AG_MS(20));
    assert_int_equal(ag_do(H, "renew h %llu", L).rc, -ESTALE);
    assert_int_equal(ag_do(H, "check h").rc, -ESTALE);
    expect_unchanged(e->ro, "st/exp", FL_LOCK_EXPIRED, r4.token);
    assert_int_equal(ag_do(H, "copy exp h").rc, 0);
    assert_int_equal(ag_do(H, "rel h").rc, 0);
    expect_unchanged(e->ro, "st/exp", FL_LOCK_FREE, r4.token);
    assert_int_equal(ag_do(H, "rel exp").rc, -ESTALE); /* twice: still nothing */
    ag_reply r5 = ag_do(P, "acq p st/exp %llu 0", L);
    assert_int_equal(r5.rc, 0);
    assert_int_equal(r5.token, r4.token + 1);

    /* an expired lease taken over by a try */
    assert_int_equal(ag_do(P, "rel p").rc, 0);
    ag_reply r6 = ag_do(H, "acq h st/exp %llu 0", (unsigned long long)AG_MS(1));
    assert_int_equal(r6.rc, 0);
    ag_sleep_until(r6.deadline_ns + AG_MS(20));
    ag_reply r7 = ag_do(P, "acq p st/exp %llu 0", L);
    assert_int_equal(r7.rc, 0);
    assert_int_equal(r7.token, r6.token + 1);
    assert_true(r7.flags & FL_LEASE_EXPIRED);
    assert_int_equal(ag_do(H, "renew h %llu", L).rc, -ESTALE);
    assert_int_equal(ag_do(H, "rel h").rc, -ESTALE);
    expect_unchanged(e->ro, "st/exp", FL_LOCK_HELD, r7.token);
    assert_int_equal(ag_do(P, "check p").rc, 0);
    assert_int_equal(ag_do(P, "rel p").rc, 0);
}

/* FL_WAIT_FOREVER waits until the release (and not for the 60 s lease) */
static void test_wait_forever(void **state)
{
    fx_env *e = *state; /* a fencelockd, a read-only handle, 2 agents: fixture.h */
    ag *H = &e->a[0], *P = &e->a[1]; /* H holds, P probes */
    ag_reply rh = ag_do(H, "acq h fv/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    ag_send(P, "acq p fv/key %llu -1", (unsigned long long)LONG_LEASE);
    assert_true(ag_wait_waiters(e->ro, "fv/key", 1, 20000));
    assert_true(ag_wait_sleeping(P->c.pid, 20000));
    ag_reply rel = ag_do(H, "rel h");
    assert_int_equal(rel.rc, 0);
    ag_reply rp;
    assert_int_equal(ag_read(P, &rp, 30000), 0);
    assert_int_equal(rp.rc, 0);
    assert_int_equal(rp.token, rh.token + 1);
    assert_int_equal(rp.flags, 0);
    assert_true(rp.t_end >= rel.t_start); /* it returned after the release began */
    assert_true(rp.t_end < rh.deadline_ns);
    assert_int_equal(ag_do(P, "rel p").rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        fx_unit_test(test_try_and_timeout, "try.region", 2),
        fx_unit_test(test_renew_extends, "renew.region", 2),
        fx_unit_test(test_stale_lease_changes_nothing, "stale.region", 2),
        fx_unit_test(test_wait_forever, "forever.region", 2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
