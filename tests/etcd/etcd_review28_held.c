/* SPDX-License-Identifier: MIT */
/* I1 I4 I6 I13: what the attacks below could not break */
/*
 * etcd_review28_held.c - attacks of issue 28's hostile review that the
 * queue withstood, kept as regression tests (the defects it found are in
 * etcd_review28.c).  On a real member, with real handles and processes:
 *
 *   1. compaction (logical, then --physical) and a defrag while three
 *      waiters sleep on their watches, one of them SIGSTOPped across it:
 *      everybody is served, in arrival order, tokens rising (I1, I6);
 *   2. a holder whose lease ran out unreleased, its release revision then
 *      compacted away: the next acquisition still says FL_LEASE_EXPIRED
 *      (the queue history read fails cautious, never "released");
 *   3. the epoch bumped while waiters wait: the ones queued under the old
 *      epoch are served first, with the smaller tokens (I1);
 *   4. keys of every byte 0x01..0xff, 127 bytes long, and a key that is
 *      another's prefix ("a", "a\x01"): separate queues, exact inspection;
 *   5. a holder SIGSTOPped: its waiter gets the key within the holder's
 *      lease and some slack, FL_LEASE_EXPIRED; the holder, resumed, is
 *      refused (release, commit) (I2, I4).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cluster_harness.h"

#define S(x) ((uint64_t)(x) * TH_S)
#define MS(x) ((uint64_t)(x) * TH_MS)
#define SLACK S(4)

static ec_cluster cl;

static void pause_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

static const char *uri_of(const char *prefix, char *buf, size_t cap)
{
    return ec_uri(&cl, 0, prefix, buf, cap);
}

/* The key's waiters count through a read-only handle (-1: not listed). */
static int waiters_of(fl_region *ro, const char *key)
{
    fl_region_info ri;
    if (fl_region_info_get(ro, &ri) != 0)
        return -1;
    for (uint32_t i = 0; i < ri.locks_used; i++) {
        fl_lock_info li;
        if (fl_lock_info_get(ro, i, &li) == 0 && strcmp(li.key, key) == 0)
            return li.state == FL_LOCK_FREE ? -2 : (int)li.waiters;
    }
    return -1;
}

static bool wait_waiters(fl_region *ro, const char *key, int n)
{
    for (uint64_t end = th_now_ns() + S(20); th_now_ns() < end; pause_ms(20))
        if (waiters_of(ro, key) == n)
            return true;
    return false;
}

/* The cluster's revision now (from etcdctl's JSON header). */
static uint64_t revision_now(void)
{
    char out[4096];
    assert_int_equal(ec_etcdctl(&cl, 0, out, sizeof out, "get", "x", "-w", "json", NULL), 0);
    const char *p = strstr(out, "\"revision\":");
    assert_non_null(p);
    return strtoull(p + 11, NULL, 10);
}

static void compact_now(bool physical)
{
    char rev[32], out[4096];
    snprintf(rev, sizeof rev, "%" PRIu64, revision_now());
    int st = physical ? ec_etcdctl(&cl, 0, out, sizeof out, "compaction", "--physical", rev, NULL)
                      : ec_etcdctl(&cl, 0, out, sizeof out, "compaction", rev, NULL);
    if (st != 0)
        fail_msg("etcdctl compaction %s: %d %s", rev, st, out);
}

/* ---- a waiter thread with a handle of its own ---- */

struct waiter {
    char uri[1024];
    const char *key;
    uint64_t lease_ns;
    fl_region *r;
    fl_lease l;
    int rc;
    uint64_t t_acq;
    _Atomic int done;
    _Atomic bool release; /* set by the test: release and finish */
    pthread_t t;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = fl_acquire(w->r, w->key, w->lease_ns, (int64_t)S(60), &w->l);
    w->t_acq = th_now_ns();
    atomic_store(&w->done, 1);
    while (w->rc == 0 && !atomic_load(&w->release))
        pause_ms(5);
    if (w->rc == 0)
        fl_release(w->r, &w->l);
    atomic_store(&w->done, 2);
    return NULL;
}

static void waiter_start(struct waiter *w, const char *uri, const char *key, uint64_t lease_ns)
{
    memset(w, 0, sizeof *w);
    snprintf(w->uri, sizeof w->uri, "%s", uri);
    w->key = key;
    w->lease_ns = lease_ns;
    assert_int_equal(fl_open(uri, &w->r), 0);
    assert_int_equal(pthread_create(&w->t, NULL, waiter_main, w), 0);
}

static bool waiter_wait(struct waiter *w, int state, int timeout_ms)
{
    for (uint64_t end = th_now_ns() + MS(timeout_ms); th_now_ns() < end; pause_ms(5))
        if (atomic_load(&w->done) >= state)
            return true;
    return atomic_load(&w->done) >= state;
}

static void waiter_finish(struct waiter *w)
{
    atomic_store(&w->release, true);
    pthread_join(w->t, NULL);
    fl_close(w->r);
}

/* 1.  I1 I6 */
static void test_compaction_under_waiting_watches(void **state)
{
    (void)state;
    char uri[1024];
    uri_of("cmp", uri, sizeof uri);
    fl_region *h = NULL, *ro = NULL;
    assert_int_equal(fl_open(uri, &h), 0);
    assert_int_equal(fl_open_readonly(uri, &ro), 0);
    fl_lease hl;
    assert_int_equal(fl_acquire(h, "k", S(60), 0, &hl), 0);
    struct waiter w1, w3;
    waiter_start(&w1, uri, "k", S(30));
    assert_true(wait_waiters(ro, "k", 1));
    ec_agent a; /* W2: a process, stopped across the compaction */
    ec_agent_start(&a, uri);
    assert_int_equal(a.open_rc, 0);
    ec_agent_send(&a, "acq k %llu %llu", (unsigned long long)S(30), (unsigned long long)S(60));
    assert_true(wait_waiters(ro, "k", 2));
    waiter_start(&w3, uri, "k", S(30));
    assert_true(wait_waiters(ro, "k", 3));
    kill(a.c.pid, SIGSTOP);
    char out[4096];
    for (int i = 0; i < 30; i++)
        assert_int_equal(ec_etcdctl(&cl, 0, out, sizeof out, "put", "cmp-junk", "x", NULL), 0);
    compact_now(false);
    for (int i = 0; i < 30; i++)
        assert_int_equal(ec_etcdctl(&cl, 0, out, sizeof out, "put", "cmp-junk", "y", NULL), 0);
    compact_now(true);
    assert_int_equal(ec_etcdctl(&cl, 0, out, sizeof out, "defrag", NULL), 0);
    kill(a.c.pid, SIGCONT);
    assert_int_equal(fl_release(h, &hl), 0);
    assert_true(waiter_wait(&w1, 1, 20000));
    assert_int_equal(w1.rc, 0);
    assert_true(w1.l.token > hl.token);
    atomic_store(&w1.release, true);
    ec_reply rp;
    if (ec_agent_read(&a, &rp, 20000) != 0)
        fail_msg("W2 was not served after W1's release");
    assert_int_equal(rp.rc, 0);
    assert_true(rp.token > w1.l.token);
    assert_false(atomic_load(&w3.done)); /* still behind W2 */
    assert_int_equal(ec_agent_do(&a, 20000, "rel").rc, 0);
    assert_true(waiter_wait(&w3, 1, 20000));
    assert_int_equal(w3.rc, 0);
    assert_true(w3.l.token > rp.token);
    waiter_finish(&w1);
    waiter_finish(&w3);
    ec_agent_stop(&a);
    fl_close(h);
    fl_close(ro);
}

/* 2.  The history read of lock.c, fl__held_between, on a compacted
 * revision: cautious. */
static void test_compacted_history_is_cautious(void **state)
{
    (void)state;
    char uri[1024];
    uri_of("hist", uri, sizeof uri);
    fl_region *h = NULL, *x = NULL;
    assert_int_equal(fl_open(uri, &h), 0);
    assert_int_equal(fl_open(uri, &x), 0);
    fl_region *ro = NULL;
    assert_int_equal(fl_open_readonly(uri, &ro), 0);
    fl_lease hl;
    assert_int_equal(fl_acquire(h, "k", S(60), 0, &hl), 0);
    /* W queues (2 s lease), gets the key at H's release, and never renews. */
    struct waiter w;
    waiter_start(&w, uri, "k", S(2));
    assert_true(wait_waiters(ro, "k", 1));
    assert_int_equal(fl_release(h, &hl), 0);
    assert_true(waiter_wait(&w, 1, 20000));
    assert_int_equal(w.rc, 0);
    /* Its holding's end, H's release, compacted away. */
    compact_now(true);
    /* W's lease runs out. */
    fl_lease xl;
    int rc = -EBUSY;
    for (uint64_t end = th_now_ns() + S(2) + SLACK + S(2); rc == -EBUSY && th_now_ns() < end;
         pause_ms(50))
        rc = fl_acquire(x, "k", S(30), 0, &xl);
    assert_int_equal(rc, 0);
    assert_true(xl.token > w.l.token);
    if (xl.flags != FL_LEASE_EXPIRED)
        fail_msg("the holding before ended unreleased (its lease ran out), with the history "
                 "compacted: flags 0x%x, not FL_LEASE_EXPIRED",
                 xl.flags);
    assert_int_equal(fl_release(x, &xl), 0);
    atomic_store(&w.release, true);
    pthread_join(w.t, NULL);
    fl_close(w.r);
    fl_close(h);
    fl_close(x);
    fl_close(ro);
}

/* 3.  I1 */
static void test_epoch_bump_while_waiting(void **state)
{
    (void)state;
    char uri[1024];
    uri_of("ebump", uri, sizeof uri);
    fl_region *h = NULL, *ro = NULL;
    assert_int_equal(fl_open(uri, &h), 0);
    assert_int_equal(fl_open_readonly(uri, &ro), 0);
    fl_lease hl;
    assert_int_equal(fl_acquire(h, "k", S(60), 0, &hl), 0);
    struct waiter w1, w2;
    waiter_start(&w1, uri, "k", S(30));
    assert_true(wait_waiters(ro, "k", 1));
    const char *argv[] = {FENCELOCK_TOOL_PATH, "etcd-epoch", "--region", uri, "--bump", NULL};
    char out[4096];
    int st = ec_run(argv, 30000, out, sizeof out);
    if (st != 0)
        fail_msg("bump: %d %s", st, out);
    waiter_start(&w2, uri, "k", S(30));
    assert_true(wait_waiters(ro, "k", 2));
    assert_int_equal(fl_release(h, &hl), 0);
    assert_true(waiter_wait(&w1, 1, 20000));
    assert_int_equal(w1.rc, 0);
    assert_int_equal(FL_TOKEN_EPOCH(w1.l.token), 1);
    assert_false(atomic_load(&w2.done));
    atomic_store(&w1.release, true);
    assert_true(waiter_wait(&w2, 1, 20000));
    assert_int_equal(w2.rc, 0);
    assert_int_equal(FL_TOKEN_EPOCH(w2.l.token), 2);
    assert_true(w1.l.token > hl.token && w2.l.token > w1.l.token);
    waiter_finish(&w1);
    waiter_finish(&w2);
    fl_close(h);
    fl_close(ro);
}

/* 4.  I8 I9 */
static void test_odd_keys(void **state)
{
    (void)state;
    char uri[1024];
    uri_of("odd", uri, sizeof uri);
    fl_region *r = NULL, *d = NULL, *ro = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    assert_int_equal(fl_open(uri, &d), 0);
    assert_int_equal(fl_open_readonly(uri, &ro), 0);
    char k1[FL_KEY_MAX + 1], k2[FL_KEY_MAX + 1];
    for (int i = 0; i < FL_KEY_MAX; i++) {
        k1[i] = (char)(1 + i);   /* 0x01 .. 0x7f */
        k2[i] = (char)(129 + i); /* 0x81 .. 0xff */
    }
    k1[FL_KEY_MAX] = k2[FL_KEY_MAX] = '\0';
    const char *keys[] = {k1, k2, "a", "a\x01", "a\xff", "\xff"};
    fl_lease l[6], x;
    for (int i = 0; i < 6; i++)
        assert_int_equal(fl_acquire(r, keys[i], S(30), 0, &l[i]), 0);
    for (int i = 0; i < 6; i++)
        assert_int_equal(fl_acquire(d, keys[i], S(30), 0, &x), -EBUSY);
    /* A waiter on "a\x01" is not woken by the release of "a". */
    struct waiter w;
    waiter_start(&w, uri, "a\x01", S(30));
    assert_true(wait_waiters(ro, "a\x01", 1));
    assert_int_equal(waiters_of(ro, "a"), 0);
    assert_int_equal(fl_release(r, &l[2]), 0);
    assert_int_equal(waiters_of(ro, "a"), -2); /* free */
    assert_int_equal(waiters_of(ro, "a\x01"), 1);
    assert_false(atomic_load(&w.done));
    assert_int_equal(fl_release(r, &l[3]), 0);
    assert_true(waiter_wait(&w, 1, 20000));
    assert_int_equal(w.rc, 0);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(ro, &ri), 0);
    assert_int_equal(ri.locks_used, 6);
    for (int i = 0; i < 6; i++)
        if (i != 2 && i != 3)
            assert_int_equal(fl_release(r, &l[i]), 0);
    waiter_finish(&w);
    fl_close(r);
    fl_close(d);
    fl_close(ro);
}

/* 5.  I2 I4 */
static void test_stopped_holder(void **state)
{
    (void)state;
    char uri[1024];
    uri_of("sthold", uri, sizeof uri);
    fl_region *d = NULL;
    assert_int_equal(fl_open(uri, &d), 0);
    ec_agent a;
    ec_agent_start(&a, uri);
    assert_int_equal(a.open_rc, 0);
    ec_reply rp = ec_agent_do(&a, 20000, "acq k %llu 0", (unsigned long long)S(2));
    assert_int_equal(rp.rc, 0);
    assert_int_equal(ec_agent_do(&a, 20000, "commit rec one").rc, 0);
    uint64_t t0 = th_now_ns();
    kill(a.c.pid, SIGSTOP);
    fl_lease l;
    int rc = fl_acquire(d, "k", S(30), (int64_t)(S(2) + SLACK), &l);
    uint64_t took = th_now_ns() - t0;
    assert_int_equal(rc, 0);
    if (took > S(2) + SLACK)
        fail_msg("took %.1f s", (double)took / 1e9);
    assert_int_equal(l.flags, FL_LEASE_EXPIRED);
    assert_true(l.token > rp.token);
    assert_int_equal(fl_commit(d, &l, "rec", "two", 3, 0, NULL), 0);
    kill(a.c.pid, SIGCONT);
    rc = ec_agent_do(&a, 20000, "commit rec late").rc;
    assert_int_equal(rc, -ESTALE);
    rc = ec_agent_do(&a, 20000, "rel").rc;
    assert_int_equal(rc, -ESTALE);
    char buf[16];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(d, "rec", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(fence, l.token);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "two", 3);
    assert_int_equal(fl_release(d, &l), 0);
    ec_agent_stop(&a);
    fl_close(d);
}

static int group_setup(void **state)
{
    (void)state;
    ec_start(&cl, 1);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ec_stop_all(&cl);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compaction_under_waiting_watches),
        cmocka_unit_test(test_compacted_history_is_cautious),
        cmocka_unit_test(test_epoch_bump_while_waiting),
        cmocka_unit_test(test_odd_keys),
        cmocka_unit_test(test_stopped_holder),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
