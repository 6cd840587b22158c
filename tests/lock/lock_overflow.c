/* SPDX-License-Identifier: MIT */
/*
 * lock_overflow.c - tokens never wrap; deadlines that do not fit are refused.
 *
 * I1: when a key's token counter is spent for the current epoch (and no
 * supervisor advances the epoch), or FL_TOKEN_MAX is reached, acquisition
 * fails with -EOVERFLOW and a message, changing nothing; a token never wraps
 * to a smaller one.  Deadlines are 48-bit microseconds: a lease that ends
 * beyond that (or whose end overflows) is -EOVERFLOW for acquire and renew,
 * and changes nothing; one that ends between microseconds is rounded up.
 * The slot's state words are set directly here (the way 2^40 acquisitions
 * would leave them) through the internal mapping.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

static const struct fl__params small = {.locks = 16, .records = 4, .record_size = 64,
                                        .clients = 8, .spare_buffers = 4};

static fl_region *fresh(const char *name)
{
    fl_region *r;
    const char *p = th_path(name);
    assert_int_equal(fl__test_region_create_ready(p, &small), 0);
    assert_int_equal(fl_open(p, &r), 0);
    return r;
}

static void set_pair(fl_region *r, uint32_t slot, uint64_t s, uint64_t l)
{
    struct fl__slot *sl = fl__slot_at(fl__shm_of(r), slot);
    atomic_store(&sl->pair.state, s);
    atomic_store(&sl->pair.lease, l);
}

static void get_pair(fl_region *r, uint32_t slot, uint64_t *s, uint64_t *l)
{
    struct fl__slot *sl = fl__slot_at(fl__shm_of(r), slot);
    *s = atomic_load(&sl->pair.state);
    *l = atomic_load(&sl->pair.lease);
}

/* I1 */
static void test_counter_spent_without_supervisor(void **state)
{
    (void)state;
    fl_region *r = fresh("spent.region");
    fl_lease l, other;
    assert_int_equal(fl_acquire(r, "spent", TH_S, 0, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);
    uint32_t slot = l.slot;
    const uint64_t last = (1ull << FL_TOKEN_EPOCH_SHIFT) - 1; /* last counter of epoch 0 */

    /* one token left */
    set_pair(r, slot, (last - 1) << FL__TOKEN_SHIFT, 0);
    assert_int_equal(fl_acquire(r, "spent", TH_S, 0, &l), 0);
    assert_int_equal(l.token, last);
    assert_int_equal(fl_release(r, &l), 0);

    /* none left: refused, nothing changes, nothing wraps */
    for (int i = 0; i < 3; i++) {
        int rc = fl_acquire(r, "spent", TH_S, 0, &l);
        assert_int_equal(rc, -EOVERFLOW);
        assert_true(fl_last_error()[0] != '\0');
        assert_int_equal(fl_acquire(r, "spent", TH_S, (int64_t)(10 * TH_MS), &l), -EOVERFLOW);
    }
    uint64_t s, w;
    get_pair(r, slot, &s, &w);
    assert_int_equal(s, last << FL__TOKEN_SHIFT);
    assert_int_equal(w, 0);

    /* an expired holding at the last token cannot be taken over either */
    set_pair(r, slot, last << FL__TOKEN_SHIFT | FL__HELD, 1 /* deadline 1 us: long past */);
    assert_int_equal(fl_acquire(r, "spent", TH_S, 0, &l), -EOVERFLOW);
    get_pair(r, slot, &s, &w);
    assert_int_equal(s, last << FL__TOKEN_SHIFT | FL__HELD);
    assert_int_equal(w, 1);

    /* other keys are unaffected */
    assert_int_equal(fl_acquire(r, "other", TH_S, 0, &other), 0);
    assert_int_equal(other.token, 1);
    assert_int_equal(fl_release(r, &other), 0);
    fl_close(r);
}

/* I1 */
static void test_token_max(void **state)
{
    (void)state;
    fl_region *r = fresh("max.region");
    fl_lease l;
    assert_int_equal(fl_acquire(r, "max", TH_S, 0, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);
    /* the last epoch, as a supervisor would have raised it */
    atomic_store(&fl__shm_of(r)->hdr->token_floor, FL_EPOCH_MAX << FL_TOKEN_EPOCH_SHIFT | 1);
    set_pair(r, l.slot, (FL_TOKEN_MAX - 1) << FL__TOKEN_SHIFT, 0);
    assert_int_equal(fl_acquire(r, "max", TH_S, 0, &l), 0);
    assert_int_equal(l.token, FL_TOKEN_MAX);
    assert_true(l.token <= (uint64_t)INT64_MAX); /* fits a SQL BIGINT */
    assert_int_equal(fl_release(r, &l), 0);
    assert_int_equal(fl_acquire(r, "max", TH_S, 0, &l), -EOVERFLOW);
    assert_true(fl_last_error()[0] != '\0');
    uint64_t s, w;
    get_pair(r, l.slot, &s, &w);
    assert_int_equal(s >> FL__TOKEN_SHIFT, FL_TOKEN_MAX);
    assert_int_equal(s & FL__HELD, 0);
    fl_close(r);
}

struct fake {
    uint64_t now;
};

static uint64_t fake_clock(void *ctx) { return ((struct fake *)ctx)->now; }

/* I11: deadlines beyond 48-bit microseconds are refused, not truncated */
static void test_deadline_overflow(void **state)
{
    (void)state;
    fl_region *r = fresh("deadline.region");
    fl_lease l;
    assert_int_equal(fl_acquire(r, "dl", UINT64_MAX, 0, &l), -EOVERFLOW);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_acquire(r, "dl", TH_S, 0, &l), 0); /* nothing was taken */
    uint64_t token = l.token, deadline = l.deadline_ns;
    assert_int_equal(fl_renew(r, &l, UINT64_MAX), -EOVERFLOW);
    assert_int_equal(l.deadline_ns, deadline);
    assert_int_equal(fl_check(r, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);

    /* a clock near the end of the 48-bit range */
    struct fake f = {.now = (FL__DEADLINE_MASK - 1000) * 1000ull};
    fl__region_set_clock(fl__shm_of(r), fake_clock, &f);
    assert_int_equal(fl_acquire(r, "dl", 2 * TH_MS, 0, &l), -EOVERFLOW);
    assert_int_equal(fl_acquire(r, "dl", 500 * 1000, 0, &l), 0); /* 500 us still fits */
    assert_int_equal(l.token, token + 1);
    assert_int_equal(l.deadline_ns, f.now + 500 * 1000);
    deadline = l.deadline_ns;
    assert_int_equal(fl_renew(r, &l, 2 * TH_MS), -EOVERFLOW);
    assert_int_equal(l.deadline_ns, deadline);
    assert_int_equal(fl_check(r, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);

    /* the last microsecond a lease word holds, and a nanosecond past it,
     * which rounds up beyond it */
    const uint64_t end_ns = FL__DEADLINE_MASK * 1000ull - f.now;
    assert_int_equal(fl_acquire(r, "dl", end_ns + 1, 0, &l), -EOVERFLOW);
    assert_int_equal(fl_acquire(r, "dl", end_ns, 0, &l), 0);
    assert_int_equal(l.deadline_ns, FL__DEADLINE_MASK * 1000ull);
    assert_int_equal(fl_release(r, &l), 0);
    /* a deadline between microseconds is rounded up, never down */
    f.now += 1;
    assert_int_equal(fl_acquire(r, "dl", 1, 0, &l), 0);
    assert_int_equal(l.deadline_ns, f.now - 1 + 1000);
    assert_int_equal(fl_release(r, &l), 0);
    assert_int_equal(fl_acquire(r, "dl", 999, 0, &l), 0);
    assert_int_equal(l.deadline_ns, f.now - 1 + 1000);
    assert_int_equal(fl_release(r, &l), 0);
    assert_int_equal(fl_acquire(r, "dl", 1000, 0, &l), 0);
    assert_int_equal(l.deadline_ns, f.now - 1 + 2000);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_spent_without_supervisor),
        cmocka_unit_test(test_token_max),
        cmocka_unit_test(test_deadline_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
