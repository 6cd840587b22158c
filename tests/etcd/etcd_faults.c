/* SPDX-License-Identifier: MIT */
/*
 * etcd_faults.c - tokens stay strictly increasing per key through the
 * faults of a real cluster, and the errors in between are the documented
 * ones:
 *
 *   - SIGKILL and restart of the only member (a holding made before the
 *     kill is still the holder's after it: etcd keeps leases);
 *   - SIGKILL of the leader of three members, under a stream of
 *     acquire-commit-release rounds;
 *   - SIGSTOP of the member the holder talks to: its renewals fail, its
 *     lease ends, a holder on another member takes over with a greater token,
 *     and the stopped one's commit is -ESTALE once it can talk again.
 *
 * I1 (tokens), I2 (no stale commit lands), I13.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cluster_harness.h"

#define S(x) ((uint64_t)(x) * TH_S)

static int setup(void **state)
{
    (void)state;
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "1000", 1);
    return 0;
}

static bool network_error(int rc)
{
    return rc == -EHOSTUNREACH || rc == -EAGAIN;
}

/* One acquire-commit-release round on key; 0, or the error. */
static int round_trip(fl_region *r, const char *key, uint64_t *token)
{
    fl_lease l;
    int rc = fl_acquire(r, key, S(10), S(10), &l);
    if (rc)
        return rc;
    *token = l.token;
    uint64_t acc = 0;
    rc = fl_commit(r, &l, "rec", &l.token, sizeof l.token, FL_COMMIT_STRICT, &acc);
    /* A release the network ate leaves the key held by this thread's lease
     * (its next wait would be -EDEADLK): a client retries the release until
     * it is answered, at most until the lease has run out (-ESTALE or 0). */
    int rel = fl_release(r, &l);
    for (uint64_t end = th_now_ns() + S(12); network_error(rel) && th_now_ns() < end;) {
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
        rel = fl_release(r, &l);
    }
    return rc ? rc : rel;
}

/* I1 I13 */
static void test_single_member_kill_restart(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 1);
    char uri[1024];
    ec_uri(&c, 0, "faults-one", uri, sizeof uri);
    fl_region *r = NULL, *r2 = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    assert_int_equal(fl_open(uri, &r2), 0);
    uint64_t last = 0, t = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(round_trip(r, "k", &t), 0);
        assert_true(t > last);
        last = t;
    }
    fl_lease held;
    assert_int_equal(fl_acquire(r, "held", S(30), 0, &held), 0);
    ec_kill(&c, 0, SIGKILL);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), -EHOSTUNREACH);
    ec_restart(&c, 0);
    /* The same handles go on; the holding made before the kill is still held. */
    assert_int_equal(fl_check(r, &held), 0);
    assert_int_equal(fl_acquire(r2, "held", S(5), 0, &l), -EBUSY);
    assert_int_equal(fl_renew(r, &held, S(30)), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(round_trip(r2, "k", &t), 0);
        assert_true(t > last);
        last = t;
    }
    assert_int_equal(fl_release(r, &held), 0);
    assert_int_equal(fl_acquire(r2, "held", S(5), 0, &l), 0);
    assert_true(l.token > held.token);
    assert_int_equal(fl_release(r2, &l), 0);
    fl_close(r2);
    fl_close(r);
    ec_stop_all(&c);
}

struct stream {
    const char *uri;
    _Atomic bool stop;
    uint64_t tokens[4096];
    int n, net_errors, other_errors;
    int other_rc;
    char other_why[512];
};

static void *stream_main(void *arg)
{
    struct stream *s = arg;
    fl_region *r = NULL;
    while (fl_open(s->uri, &r) != 0)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    while (!atomic_load(&s->stop) && s->n < 4096) {
        uint64_t t = 0;
        int rc = round_trip(r, "stream", &t);
        if (rc == 0)
            s->tokens[s->n++] = t;
        else if (network_error(rc) || rc == -ETIMEDOUT)
            s->net_errors++;
        else if (rc == -ESTALE && t) {
            /* a release whose lease the pause outlived: no effect, counted */
            s->tokens[s->n++] = t;
            s->net_errors++;
        } else {
            s->other_errors++;
            s->other_rc = rc;
            snprintf(s->other_why, sizeof s->other_why, "%s", fl_last_error());
        }
    }
    fl_close(r);
    return NULL;
}

/* I1 I2 I13 */
static void test_leader_kill(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 3);
    char uri[1024];
    ec_uri(&c, 0, "faults-leader", uri, sizeof uri);
    struct stream *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->uri = uri;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stream_main, s), 0);
    while (s->n < 10)
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    int leader = ec_leader(&c, 10000);
    assert_true(leader >= 0);
    int before = s->n;
    ec_kill(&c, leader, SIGKILL);
    /* The other two elect a leader; the stream goes on through them. */
    for (uint64_t end = th_now_ns() + S(30); s->n < before + 20 && th_now_ns() < end;)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    assert_true(s->n >= before + 20);
    ec_restart(&c, leader);
    int again = s->n;
    for (uint64_t end = th_now_ns() + S(30); s->n < again + 10 && th_now_ns() < end;)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    atomic_store(&s->stop, true);
    pthread_join(th, NULL);
    if (s->other_errors)
        fail_msg("%d errors other than the network's, the last %s: %s", s->other_errors,
                 fl_err_name(s->other_rc), s->other_why);
    for (int i = 1; i < s->n; i++)
        if (s->tokens[i] <= s->tokens[i - 1])
            fail_msg("token %d (%" PRIu64 ") not above token %d (%" PRIu64 ")", i,
                     s->tokens[i], i - 1, s->tokens[i - 1]);
    /* Every strict commit held: the record has the newest token. */
    fl_region *r = NULL;
    assert_int_equal(fl_open_readonly(uri, &r), 0);
    uint64_t v = 0, fence = 0;
    assert_int_equal(fl_read_u64(r, "rec", &v, &fence), 0);
    assert_int_equal(fence, s->tokens[s->n - 1]);
    fl_close(r);
    printf("# %d rounds, %d network errors around the leader's death\n", s->n, s->net_errors);
    free(s);
    ec_stop_all(&c);
}

/* I1 I2 I4 I13 */
static void test_holders_member_stopped(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 3);
    char ua[1024], ub[1024];
    ec_uri(&c, EC_ONLY(0), "faults-stop", ua, sizeof ua);
    ec_uri(&c, EC_ONLY(1) | EC_ONLY(2), "faults-stop", ub, sizeof ub);
    fl_region *ra = NULL, *rb = NULL;
    assert_int_equal(fl_open(ua, &ra), 0);
    assert_int_equal(fl_open(ub, &rb), 0);
    fl_lease a, b;
    assert_int_equal(fl_acquire(ra, "job", 1, 0, &a), 0); /* etcd's shortest lease */
    assert_int_equal(fl_commit(ra, &a, "out", "A1", 2, 0, NULL), 0);
    ec_pause(&c, 0);
    /* A cannot renew: its only member does not answer (the request may
     * still be read when the member resumes: -EAGAIN or -EHOSTUNREACH). */
    assert_true(network_error(fl_renew(ra, &a, S(2))));
    /* B, on the other two, gets the key once A's lease ends (a leader
     * change may restart its TTL: later, never earlier). */
    assert_int_equal(fl_acquire(rb, "job", S(30), S(40), &b), 0);
    assert_true(b.token > a.token);
    assert_int_equal(b.flags, FL_LEASE_EXPIRED);
    /* B learns of its turn from its watch, with no request: its commit may
     * be the first request after an election the stopped member caused,
     * and meet "no leader" (a network error, no effect): again, bounded. */
    for (uint64_t end = th_now_ns() + S(20);;) {
        int brc = fl_commit(rb, &b, "out", "B", 1, 0, NULL);
        if (!network_error(brc) || th_now_ns() > end) {
            assert_int_equal(brc, 0);
            break;
        }
    }
    ec_resume(&c, 0);
    assert_true(ec_wait_ready(&c, 0, 30000));
    uint64_t acc = 0;
    int rc;
    for (uint64_t end = th_now_ns() + S(20);;) {
        rc = fl_commit(ra, &a, "out", "A2", 2, 0, &acc);
        if (!network_error(rc) || th_now_ns() > end)
            break;
    }
    assert_int_equal(rc, -ESTALE);
    assert_int_equal(acc, b.token);
    char buf[8];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(ra, "out", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(len, 1);
    assert_int_equal(buf[0], 'B');
    assert_int_equal(fence, b.token);
    assert_int_equal(fl_release(rb, &b), 0);
    fl_close(ra);
    fl_close(rb);
    ec_stop_all(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_member_kill_restart),
        cmocka_unit_test(test_leader_kill),
        cmocka_unit_test(test_holders_member_stopped),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
