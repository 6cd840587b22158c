/* SPDX-License-Identifier: MIT */
/*
 * rec_seed.c - the seed scenario, in full, with real processes, a real
 * fencelockd and real SIGSTOP/SIGCONT:
 *
 *   A acquires (token t) and is stopped before its commit; its lease runs
 *   out; B acquires (t' > t), commits; A is continued and commits: rejected
 *   with -ESTALE naming t'; the record holds B's bytes with fence t'.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rec_common.h"

#define KEY "seed-key"
#define REC "seed-record"
#define A_LEASE (300 * TH_MS)
#define B_LEASE (30 * TH_S)
static const char A_VALUE[] = "A: value of the holder that was paused past its lease";
static const char B_VALUE[] = "B: value of the holder that took over";

static int child_a(void *arg, int in, int out)
{
    fl_region *r = rc_open(arg);
    fl_lease l;
    int rc = fl_acquire(r, KEY, A_LEASE, 10 * (int64_t)TH_S, &l);
    if (rc) {
        th_sendf(out, "acquire-failed %d", rc);
        return 1;
    }
    th_sendf(out, "token %llu %llu %d", (unsigned long long)l.token,
             (unsigned long long)l.deadline_ns, fl_region_registered(r));
    th_send(out, "ready");
    th_expect(in, "commit", 60000); /* the parent stops us here, then continues us */
    uint64_t acc = 0;
    rc = fl_commit(r, &l, REC, A_VALUE, sizeof A_VALUE, 0, &acc);
    int chk = fl_check(r, &l);
    th_sendf(out, "commit %d %llu %d", rc, (unsigned long long)acc, chk);
    fl_close(r);
    return 0;
}

static int child_b(void *arg, int in, int out)
{
    (void)in;
    fl_region *r = rc_open(arg);
    fl_lease l;
    int rc = fl_acquire(r, KEY, B_LEASE, 30 * (int64_t)TH_S, &l);
    if (rc) {
        th_sendf(out, "acquire-failed %d", rc);
        return 1;
    }
    th_sendf(out, "token %llu %llu %u", (unsigned long long)l.token,
             (unsigned long long)l.deadline_ns, l.flags);
    uint64_t acc = 0;
    rc = fl_commit(r, &l, REC, B_VALUE, sizeof B_VALUE, 0, &acc);
    th_sendf(out, "commit %d %llu", rc, (unsigned long long)acc);
    fl_release(r, &l);
    fl_close(r);
    return 0;
}

/* I1 I2 */
static void test_stale_holder_rejected_by_record(void **state)
{
    (void)state;
    th_daemon d;
    rc_daemon(&d, "seed", NULL);
    char buf[256];

    th_child a;
    rc_child(&a, child_a, d.region);
    unsigned long long ta, a_deadline;
    int a_registered;
    assert_int_equal(sscanf(rc_recv(a.from_child, buf, sizeof buf, 20000), "token %llu %llu %d",
                            &ta, &a_deadline, &a_registered),
                     3);
    assert_int_equal(a_registered, 1);
    th_expect(a.from_child, "ready", 20000);
    assert_int_equal(kill(a.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(a.pid, 20000));

    /* B waits on the key until A's lease runs out, then takes it over. */
    th_child b;
    rc_child(&b, child_b, d.region);
    unsigned long long tb, b_deadline;
    unsigned b_flags;
    assert_int_equal(sscanf(rc_recv(b.from_child, buf, sizeof buf, 30000), "token %llu %llu %u",
                            &tb, &b_deadline, &b_flags),
                     3);
    /* I1: a greater token; within one epoch the next one, t + 1 */
    assert_true(tb > ta);
    assert_int_equal(tb, ta + 1);
    assert_true(b_flags & FL_LEASE_EXPIRED);
    /* taken over only once A's deadline had passed (B's lease starts at or after it) */
    assert_true(b_deadline - B_LEASE >= a_deadline);
    int brc;
    unsigned long long bacc;
    assert_int_equal(sscanf(rc_recv(b.from_child, buf, sizeof buf, 20000), "commit %d %llu",
                            &brc, &bacc),
                     2);
    assert_int_equal(brc, 0);
    assert_int_equal(bacc, tb);
    assert_int_equal(rc_child_exit(&b, 20000), 0);
    /* A is still stopped: it never ran while B acquired and committed. */
    assert_true(th_wait_stopped(a.pid, 1000));

    assert_int_equal(kill(a.pid, SIGCONT), 0);
    th_send(a.to_child, "commit");
    int arc, achk;
    unsigned long long aacc;
    assert_int_equal(sscanf(rc_recv(a.from_child, buf, sizeof buf, 20000), "commit %d %llu %d",
                            &arc, &aacc, &achk),
                     3);
    assert_int_equal(arc, -ESTALE); /* I2 */
    assert_int_equal(aacc, tb);
    assert_int_equal(achk, -ESTALE);
    assert_int_equal(rc_child_exit(&a, 20000), 0);

    fl_region *r = rc_open(d.region);
    char val[1024];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(r, REC, val, sizeof val, &len, &fence), 0);
    assert_int_equal(len, sizeof B_VALUE);
    assert_memory_equal(val, B_VALUE, sizeof B_VALUE);
    assert_int_equal(fence, tb);
    fl_record_info info;
    assert_true(rc_record_info(r, REC, &info));
    assert_string_equal(info.bound_key, KEY);
    assert_int_equal(info.accepted_token, tb);
    assert_int_equal(info.version, 1);
    assert_int_equal(info.commits, 1);
    assert_int_equal(info.rejections, 1);
    assert_int_equal(info.last_rejected_token, ta);
    assert_int_equal(info.size, sizeof B_VALUE);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_holder_rejected_by_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
