/* SPDX-License-Identifier: MIT */
/*
 * etcd_seed.c - the seed scenario across "hosts": a three-member etcd
 * cluster, holder A talking to member 0 only, B to member 1 only, each a
 * process of its own.
 *
 * A acquires with a short lease and is stopped (SIGSTOP) before it writes;
 * etcd ends A's lease; B, waiting, takes the key over with a greater token,
 * told the previous lease expired, and commits; A is continued and commits
 * with its old token: -ESTALE, with B's token as the accepted one; renew and
 * release say -ESTALE too; the record, read through member 2, holds B's
 * data.  The same through `fencelock run` and `fencelock commit` in a shell
 * (tests/cli/commit_seed.sh, with FENCELOCK_REGION naming the cluster).
 *
 * I1 (B's token > A's), I2 (A's stale commit has no effect), I4 (a stopped
 * holder delays B by its lease at most), I13 (all of it on etcd).  And every
 * subcommand that takes --region (status, --json, metrics, read, commit, run)
 * on an etcd URI.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>

#include "cluster_harness.h"

static ec_cluster cluster;

static int setup(void **state)
{
    (void)state;
    ec_start(&cluster, 3);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ec_stop_all(&cluster);
    return 0;
}

/* I1 I2 I4 I13 */
static void test_seed_across_members(void **state)
{
    (void)state;
    char ua[1024], ub[1024], uc[1024];
    ec_uri(&cluster, EC_ONLY(0), "seed", ua, sizeof ua);
    ec_uri(&cluster, EC_ONLY(1), "seed", ub, sizeof ub);
    ec_uri(&cluster, EC_ONLY(2), "seed", uc, sizeof uc);
    ec_agent A, B;
    ec_agent_start(&A, ua);
    assert_int_equal(A.open_rc, 0);
    ec_agent_start(&B, ub);
    assert_int_equal(B.open_rc, 0);

    /* 1. A acquires: the shortest lease etcd grants (1 ns rounds up). */
    ec_reply ra = ec_agent_do(&A, 30000, "acq render-job 1 0");
    assert_int_equal(ra.rc, 0);
    assert_int_equal(ra.flags, 0);
    uint64_t ta = ra.token;

    /* 2. A is stopped before it writes: a GC pause, a stalled VM. */
    assert_int_equal(kill(A.c.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(A.c.pid, 10000));

    /* 3. B waits on another member; it gets the key once etcd ends A's lease. */
    uint64_t t0 = th_now_ns();
    ec_reply rb = ec_agent_do(&B, 60000, "acq render-job 30000000000 30000000000");
    assert_int_equal(rb.rc, 0);
    assert_true(rb.token > ta);
    assert_int_equal(rb.flags, FL_LEASE_EXPIRED);
    assert_true(th_now_ns() - t0 < 20 * TH_S);
    ec_reply cb = ec_agent_do(&B, 30000, "commit render-output frame rendered by B");
    assert_int_equal(cb.rc, 0);
    assert_int_equal(cb.value, rb.token);

    /* 4. A wakes, unaware, and commits its stale result: rejected. */
    assert_int_equal(kill(A.c.pid, SIGCONT), 0);
    ec_reply ca = ec_agent_do(&A, 30000, "commit render-output frame rendered by A");
    assert_int_equal(ca.rc, -ESTALE);
    assert_int_equal(ca.value, rb.token); /* the accepted token is B's */
    assert_int_equal(ec_agent_do(&A, 30000, "renew 5000000000").rc, -ESTALE);
    assert_int_equal(ec_agent_do(&A, 30000, "check").rc, -ESTALE);
    assert_int_equal(ec_agent_do(&A, 30000, "rel").rc, -ESTALE);

    /* 5. B's result survived, as read through the third member. */
    fl_region *ro = NULL;
    assert_int_equal(fl_open_readonly(uc, &ro), 0);
    char buf[64];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(ro, "render-output", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(fence, rb.token);
    assert_int_equal(len, strlen("frame rendered by B"));
    assert_memory_equal(buf, "frame rendered by B", len);
    fl_close(ro);
    assert_int_equal(ec_agent_do(&B, 30000, "rel").rc, 0);
    ec_agent_stop(&A);
    ec_agent_stop(&B);
}

/* I2 I4 I13 */
static void test_seed_shell(void **state)
{
    (void)state;
    char uri[1024];
    ec_uri(&cluster, 0, "seed-shell", uri, sizeof uri);
    setenv(FL_REGION_ENV, uri, 1);
    char script[1024], out[8192];
    snprintf(script, sizeof script, "%s/../cli/commit_seed.sh", SOURCE_DIR);
    const char *argv[] = {"sh", script, FENCELOCK_TOOL_PATH, NULL};
    int st = ec_run(argv, 90000, out, sizeof out);
    if (st != 0)
        fail_msg("commit_seed.sh on %s: status %d:\n%s", uri, st, out);
    assert_non_null(strstr(out, "refused (77)"));
    unsetenv(FL_REGION_ENV);
}

/* Every subcommand that takes --region takes an etcd URI. */
/* I13 */
static void test_tools(void **state)
{
    (void)state;
    char uri[1024], out[16384];
    ec_uri(&cluster, 0, "tools", uri, sizeof uri);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "held/key", 30 * TH_S, 0, &l), 0);
    assert_int_equal(fl_commit(r, &l, "rec", "hello", 5, 0, NULL), 0);
    char token[32];
    snprintf(token, sizeof token, "%llu", (unsigned long long)l.token);

    const char *status[] = {FENCELOCK_TOOL_PATH, "status", "--region", uri, NULL};
    assert_int_equal(ec_run(status, 30000, out, sizeof out), 0);
    assert_non_null(strstr(out, "an etcd cluster"));
    assert_non_null(strstr(out, "held/key"));
    assert_non_null(strstr(out, token));
    const char *json[] = {FENCELOCK_TOOL_PATH, "status", "--region", uri, "--json", NULL};
    assert_int_equal(ec_run(json, 30000, out, sizeof out), 0);
    json_t *j = json_loads(out, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "locks")), 1);
    json_decref(j);
    const char *metrics[] = {FENCELOCK_TOOL_PATH, "metrics", "--region", uri, NULL};
    assert_int_equal(ec_run(metrics, 30000, out, sizeof out), 0);
    assert_non_null(strstr(out, "fencelock_epoch 1"));
    const char *read[] = {FENCELOCK_TOOL_PATH, "read", "--region", uri, "rec", NULL};
    assert_int_equal(ec_run(read, 30000, out, sizeof out), 0);
    assert_non_null(strstr(out, "hello"));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "echo again | '%s' commit --region '%s' --key held/key --token %s rec",
             FENCELOCK_TOOL_PATH, uri, token);
    const char *commit[] = {"sh", "-c", cmd, NULL};
    assert_int_equal(ec_run(commit, 30000, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "echo stale | '%s' commit --region '%s' --key held/key --token %llu rec",
             FENCELOCK_TOOL_PATH, uri, (unsigned long long)l.token + 1);
    assert_int_equal(ec_run(commit, 30000, out, sizeof out), 2); /* never issued */
    const char *run[] = {FENCELOCK_TOOL_PATH, "run", "--region", uri, "--no-wait", "held/key",
                         "-c", "true", NULL};
    int st = ec_run(run, 30000, out, sizeof out);
    assert_true(st != 0); /* held by us */
    assert_int_equal(fl_release(r, &l), 0);
    assert_int_equal(ec_run(run, 30000, out, sizeof out), 0);
    fl_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_across_members),
        cmocka_unit_test(test_seed_shell),
        cmocka_unit_test(test_tools),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
