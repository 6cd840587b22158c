/* SPDX-License-Identifier: MIT */
/*
 * etcd_restore.c - tokens never go backwards after an etcd snapshot
 * restore (a real `etcdctl snapshot save` and `etcdctl snapshot restore`).
 *
 * A restore brings the cluster back to the snapshot's revision, so etcd
 * would number new creations with revisions already turned into tokens.
 *   - A client that was running across the restore has seen the later
 *     revisions: it fails closed (-ENOTRECOVERABLE) instead of handing out a
 *     token not above one it saw.
 *   - A client started after the restore cannot know: its tokens would
 *     repeat (shown here, on another key), which is why the procedure is to
 *     bump the epoch before clients resume.
 *   - `fencelock etcd-epoch --bump` makes every later token exceed every
 *     earlier one, for both clients; a holder from before the restore is
 *     refused (-ESTALE) by a record the new epoch has committed to.
 *   - --at-least sets a chosen epoch (a second restore from the same
 *     snapshot).
 *   - fl_etcd_epoch(), what the command calls, reads and bumps the epoch and
 *     says whether the cluster was asked (asked: a bad file is 0, a cluster
 *     that does not answer is 1).
 *
 * I1 (tokens never go backwards), I2, I13.
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

#define S(x) ((uint64_t)(x) * TH_S)

static uint64_t cluster_revision(const ec_cluster *c)
{
    char out[1024];
    assert_int_equal(ec_post(c, 0, "/v3/kv/range", "{\"key\":\"AA==\"}", out, sizeof out), 200);
    const char *p = strstr(out, "\"revision\":\"");
    assert_non_null(p);
    return strtoull(p + 12, NULL, 10);
}

static void tool(const char *uri, const char *const *extra, char *out, size_t cap)
{
    const char *argv[8] = {FENCELOCK_TOOL_PATH, "etcd-epoch", "--region", uri};
    int n = 4;
    for (; extra && *extra && n < 7; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    int st = ec_run(argv, 30000, out, cap);
    if (st != 0)
        fail_msg("fencelock etcd-epoch: status %d: %s", st, out);
}

/* I1 I2 I13 */
static void test_restore_then_bump(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 1);
    char uri[1024];
    ec_uri(&c, 0, "restore", uri, sizeof uri);
    fl_region *h = NULL;
    assert_int_equal(fl_open(uri, &h), 0);
    fl_lease l, old;
    uint64_t tmax = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fl_acquire(h, "k", S(30), 0, &l), 0);
        assert_true(l.token > tmax);
        tmax = l.token;
        assert_int_equal(fl_commit(h, &l, "rec", "before snapshot", 15, 0, NULL), 0);
        assert_int_equal(fl_release(h, &l), 0);
    }
    char snap[600];
    snprintf(snap, sizeof snap, "%s/restore.snap", th_tmpdir());
    ec_snapshot_save(&c, 0, snap);
    uint64_t rev0 = cluster_revision(&c);
    /* Life goes on after the snapshot: 20 more holdings. */
    for (int i = 0; i < 20; i++) {
        assert_int_equal(fl_acquire(h, "k", S(30), 0, &l), 0);
        assert_true(l.token > tmax);
        tmax = l.token;
        assert_int_equal(fl_release(h, &l), 0);
    }
    /* A holder that will wake after the restore with its pre-restore token. */
    assert_int_equal(fl_acquire(h, "k", S(30), 0, &old), 0);
    assert_true(old.token > tmax);
    tmax = old.token;
    assert_true(cluster_revision(&c) > rev0 + 20);

    ec_snapshot_restore(&c, snap);
    assert_true(cluster_revision(&c) <= rev0 + 1); /* the revision went back */

    /* The client that lived through it refuses to number anything. */
    assert_int_equal(fl_acquire(h, "k", S(30), 0, &l), -ENOTRECOVERABLE);
    assert_non_null(strstr(fl_last_error(), "etcd-epoch"));
    assert_int_equal(fl_acquire(h, "other", S(30), 0, &l), -ENOTRECOVERABLE);
    /* A client started now cannot tell: its tokens repeat old ones. */
    fl_region *fresh = NULL;
    assert_int_equal(fl_open(uri, &fresh), 0);
    fl_lease probe;
    assert_int_equal(fl_acquire(fresh, "probe", S(30), 0, &probe), 0);
    assert_true(probe.token <= tmax);
    assert_int_equal(fl_release(fresh, &probe), 0);
    fl_close(fresh);

    /* The operator bumps the epoch before clients resume. */
    char out[512];
    tool(uri, (const char *const[]){"--bump", NULL}, out, sizeof out);
    assert_non_null(strstr(out, "epoch 1 -> 2"));
    tool(uri, NULL, out, sizeof out);
    assert_non_null(strstr(out, "epoch 2"));

    /* The same client goes on, above everything it saw. */
    assert_int_equal(fl_acquire(h, "k", S(30), 0, &l), 0);
    assert_true(l.token > tmax);
    assert_int_equal(l.token >> 40, 2);
    uint64_t acc = 0;
    assert_int_equal(fl_commit(h, &l, "rec", "after restore", 13, 0, &acc), 0);
    /* The holder from before the restore is refused by the record. */
    assert_int_equal(fl_commit(h, &old, "rec", "stale", 5, 0, &acc), -ESTALE);
    assert_int_equal(acc, l.token);
    uint64_t t_after = l.token;
    assert_int_equal(fl_release(h, &l), 0);
    fresh = NULL;
    assert_int_equal(fl_open(uri, &fresh), 0);
    assert_int_equal(fl_acquire(fresh, "k", S(30), 0, &l), 0);
    assert_true(l.token > t_after);
    assert_int_equal(fl_release(fresh, &l), 0);
    fl_close(fresh);

    /* Restored again from the same snapshot: bump past every epoch used. */
    ec_snapshot_restore(&c, snap);
    tool(uri, (const char *const[]){"--bump", "--at-least", "3", NULL}, out, sizeof out);
    assert_non_null(strstr(out, "epoch 1 -> 3"));
    assert_int_equal(fl_acquire(h, "k", S(30), 0, &l), 0);
    assert_true(l.token > t_after);
    assert_int_equal(l.token >> 40, 3);
    assert_int_equal(fl_release(h, &l), 0);
    fl_close(h);
    ec_stop_all(&c);
}

/* I1 I13: the admin entry point itself. */
static void test_epoch_entry_point(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 1);
    char uri[1024];
    ec_uri(&c, 0, "entry", uri, sizeof uri);
    fl_etcd_epoch_result res;
    assert_int_equal(fl_etcd_epoch(uri, 0, 0, &res), 0);
    assert_int_equal(res.asked, 1);
    assert_int_equal(res.before, 0); /* none yet, and a read creates none */
    assert_int_equal(res.after, 0);
    assert_int_equal(fl_etcd_epoch(uri, FL_ETCD_EPOCH_BUMP, 0, &res), 0);
    assert_int_equal(res.before, 0);
    assert_int_equal(res.after, 1);
    assert_int_equal(fl_etcd_epoch(uri, FL_ETCD_EPOCH_BUMP, 7, &res), 0);
    assert_int_equal(res.before, 1);
    assert_int_equal(res.after, 7);
    assert_int_equal(fl_etcd_epoch(uri, FL_ETCD_EPOCH_BUMP, 0, &res), 0);
    assert_int_equal(res.after, 8);
    for (size_t i = 0; i < sizeof res.reserved / sizeof res.reserved[0]; i++)
        assert_int_equal(res.reserved[i], 0);
    fl_region *h = NULL;
    assert_int_equal(fl_open(uri, &h), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(h, "k", S(10), 0, &l), 0);
    assert_int_equal(l.token >> 40, 8);
    assert_int_equal(fl_release(h, &l), 0);
    fl_close(h);
    /* A file the URI names that cannot be read: the region's, nothing sent. */
    char bad[1200];
    snprintf(bad, sizeof bad, "etcds://%s:%d/entry?cacert=/nonexistent/ca.pem", c.m[0].host,
             c.m[0].client_port);
    assert_true(fl_etcd_epoch(bad, 0, 0, &res) < 0);
    assert_int_equal(res.asked, 0);
    /* No endpoint answers: the cluster's failure. */
    ec_stop_all(&c);
    assert_int_equal(setenv("FENCELOCK_ETCD_TIMEOUT_MS", "300", 1), 0);
    assert_int_equal(fl_etcd_epoch(uri, FL_ETCD_EPOCH_BUMP, 0, &res), -EHOSTUNREACH);
    assert_int_equal(res.asked, 1);
    assert_int_equal(res.before, 0);
    assert_int_equal(res.after, 0);
    assert_int_equal(unsetenv("FENCELOCK_ETCD_TIMEOUT_MS"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restore_then_bump),
        cmocka_unit_test(test_epoch_entry_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
