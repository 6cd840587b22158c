/* SPDX-License-Identifier: MIT */
/*
 * etcd_latency.c - what each call costs on etcd: three members on
 * loopback, one client, kept-alive connections; medians and 99th
 * percentiles of the raw etcd requests (lease grant, keepalive) and of the
 * public calls (acquire = one Txn on a reused lease, fenced commit = one Txn,
 * release = one Txn, renew = keepalive + read, read, check).  Prints a table; fails
 * only if a call fails (timings on a shared machine are reported, not
 * judged).  Not a benchmark suite: issue 15's benchmarks build on it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cluster_harness.h"
#include "etcd/etcd.h"

#define N 300

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, int n)
{
    qsort(ns, (size_t)n, sizeof *ns, cmp_u64);
    printf("# %-28s p50 %7.3f ms   p99 %7.3f ms   (n=%d)\n", what, ns[n / 2] / 1e6,
           ns[n * 99 / 100] / 1e6, n);
}

static void test_latency(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 3);
    char uri[1024];
    ec_uri(&c, 0, "latency", uri, sizeof uri);
    static uint64_t t[8][N];

    /* Raw requests through the client. */
    struct fl__etcd_client *cl = calloc(1, sizeof *cl);
    assert_non_null(cl);
    assert_int_equal(fl__etcd_client_init(cl, uri), 0);
    uint64_t id = 0, ttl = 0;
    for (int i = 0; i < N; i++) {
        uint64_t t0 = th_now_ns();
        assert_int_equal(fl__etcd_grant(cl, 10, &id, &ttl), 0);
        t[0][i] = th_now_ns() - t0;
        t0 = th_now_ns();
        assert_int_equal(fl__etcd_keepalive(cl, id, &ttl), 0);
        t[1][i] = th_now_ns() - t0;
        assert_int_equal(fl__etcd_revoke(cl, id), 0);
    }
    report("lease grant", t[0], N);
    report("lease keepalive", t[1], N);
    fl__etcd_client_destroy(cl);
    free(cl);

    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    for (int i = 0; i < N; i++) {
        fl_lease l;
        uint64_t t0 = th_now_ns();
        assert_int_equal(fl_acquire(r, "k", 10 * TH_S, 0, &l), 0);
        t[2][i] = th_now_ns() - t0;
        t0 = th_now_ns();
        assert_int_equal(fl_commit(r, &l, "rec", "value", 5, 0, NULL), 0);
        t[3][i] = th_now_ns() - t0;
        t0 = th_now_ns();
        assert_int_equal(fl_renew(r, &l, 10 * TH_S), 0);
        t[4][i] = th_now_ns() - t0;
        t0 = th_now_ns();
        assert_int_equal(fl_check(r, &l), 0);
        t[5][i] = th_now_ns() - t0;
        char buf[16];
        size_t len;
        uint64_t fence;
        t0 = th_now_ns();
        assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), 0);
        t[6][i] = th_now_ns() - t0;
        t0 = th_now_ns();
        assert_int_equal(fl_release(r, &l), 0);
        t[7][i] = th_now_ns() - t0;
    }
    report("fl_acquire (one Txn)", t[2], N);
    report("fl_commit (one Txn)", t[3], N);
    report("fl_renew (keepalive + read)", t[4], N);
    report("fl_check (one read)", t[5], N);
    report("fl_read (one read)", t[6], N);
    report("fl_release (one Txn)", t[7], N);
    fl_close(r);
    ec_stop_all(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_latency)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
