/* SPDX-License-Identifier: MIT */
/*
 * etcd_queue.c - the fair queue of issue 28 (section 2) on a real
 * three-member cluster, with real processes: what the etcd lock protocol
 * must do when many processes wait on one key and nothing fails.
 *
 *   - FIFO: waiters are served in arrival order.  A waiter has arrived
 *     once fl_lock_info_get() of the key counts it in `waiters` (the
 *     processes queued behind the holder); the test starts the next one
 *     only then.
 *   - 16 waiter processes looping acquire (FL_WAIT_FOREVER), strict commit,
 *     release: never two holders (a counter in shared memory), every strict
 *     commit accepted, tokens strictly increasing in acquisition order; and
 *     the etcd requests and watch messages per acquisition stay small (no
 *     herd), counted by etcd's own metrics (ec_metric_sum).
 *
 * The same queue under faults: etcd_queue_faults.c, etcd_queue_netns.c.
 * The agents are queue_agent.c; the checks, the invariants that fail a test
 * at once and the queue's contract reported at its end, queue_util.c.
 *
 * I1 I2 I6 I13
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <cmocka.h>

#include "queue_util.h"

/* What the 16-process phase measured, for test_requests_bounded. */
static struct {
    bool measured;
    uint32_t acquisitions;
    double requests, keepalives, txns, watch_sent, watch_received, leases, seconds;
} herd;

#define WATCH_FILTER "grpc_method=\"Watch\",grpc_service=\"etcdserverpb.Watch\""
#define KEEPALIVE_FILTER "grpc_method=\"LeaseKeepAlive\""
#define GRANT_FILTER "grpc_method=\"LeaseGrant\""
#define REVOKE_FILTER "grpc_method=\"LeaseRevoke\""

/* I1 I2 I13: 16 processes loop acquire (forever), strict commit, release on
 * one key: never two holders, every strict commit accepted, tokens strictly
 * increasing in acquisition order; etcd's counters around the phase. */
static void test_sixteen_waiters(void **state)
{
    (void)state;
    enum { N = 16, ROUNDS = 6 };
    shared_reset();
    contract_reset();
    const char *uri = uri_of("queue-16");
    qa a[N];
    for (int i = 0; i < N; i++)
        qa_start(&a[i], i, uri, NULL, NULL);
    /* The key made once (its first entry takes one request more, and 16
     * first acquisitions at once may race for it), and every handle open:
     * what follows is the acquisitions' own traffic. */
    {
        fl_region *w = NULL;
        fl_lease l;
        assert_int_equal(fl_open(uri, &w), 0);
        assert_int_equal(fl_acquire(w, "k", LONG_LEASE, FL_WAIT_FOREVER, &l), 0);
        assert_int_equal(fl_release(w, &l), 0);
        fl_close(w);
    }
    double rx0 = ec_metric_sum(&cluster, "grpc_server_msg_received_total", NULL);
    double ka0 = ec_metric_sum(&cluster, "grpc_server_msg_received_total", KEEPALIVE_FILTER);
    double tx0 = ec_metric_sum(&cluster, "grpc_server_msg_received_total",
                               "grpc_method=\"Txn\"");
    double ws0 = ec_metric_sum(&cluster, "grpc_server_msg_sent_total", WATCH_FILTER);
    double wr0 = ec_metric_sum(&cluster, "grpc_server_msg_received_total", WATCH_FILTER);
    double ls0 = ec_metric_sum(&cluster, "grpc_server_msg_received_total", GRANT_FILTER) +
                 ec_metric_sum(&cluster, "grpc_server_msg_received_total", REVOKE_FILTER);
    uint64_t t0 = th_now_ns();
    for (int i = 0; i < N; i++)
        qa_send(&a[i], "loop k %" PRIu64 " %d", LONG_LEASE, ROUNDS);
    for (int i = 0; i < N; i++) {
        qr q = qa_wait(&a[i], 180000, "loop");
        assert_int_equal(q.kind, 'd');
        if (q.other || q.stale || q.rel_stale || q.net_acq || q.net_commit || q.net_rel)
            fail_msg("agent %d, without faults: %d other errors (last %s), %d strict commits "
                     "refused, network errors: %d acquire, %d commit, %d release: %s",
                     i, q.other, fl_err_name(q.other_rc), q.stale, q.net_acq, q.net_commit,
                     q.net_rel, q.text);
        assert_int_equal(q.rounds, ROUNDS);
    }
    uint64_t took = th_now_ns() - t0;
    /* fl_close drains the handles' revokes: they count too. */
    for (int i = 0; i < N; i++)
        qa_stop(&a[i]);
    double rx = ec_metric_sum(&cluster, "grpc_server_msg_received_total", NULL) - rx0;
    double ka = ec_metric_sum(&cluster, "grpc_server_msg_received_total", KEEPALIVE_FILTER) -
                ka0;
    double tx = ec_metric_sum(&cluster, "grpc_server_msg_received_total",
                              "grpc_method=\"Txn\"") - tx0;
    double ws = ec_metric_sum(&cluster, "grpc_server_msg_sent_total", WATCH_FILTER) - ws0;
    double wr = ec_metric_sum(&cluster, "grpc_server_msg_received_total", WATCH_FILTER) - wr0;
    double ls = ec_metric_sum(&cluster, "grpc_server_msg_received_total", GRANT_FILTER) +
                ec_metric_sum(&cluster, "grpc_server_msg_received_total", REVOKE_FILTER) - ls0;

    uint32_t n = atomic_load(&sh->nacq);
    assert_int_equal(n, N * ROUNDS);
    check_exclusion_and_tokens();
    assert_int_equal(atomic_load(&sh->max_holders), 1);
    for (uint32_t i = 0; i < n; i++)
        if (sh->acq[i].commit_rc != 0 || sh->acq[i].accepted != sh->acq[i].token)
            fail_msg("I2: the strict commit of acquisition #%u (agent %d, token %" PRIu64
                     ") was %s (accepted %" PRIu64 ")",
                     i, sh->acq[i].who, sh->acq[i].token, fl_err_name(sh->acq[i].commit_rc),
                     sh->acq[i].accepted);
    herd.measured = true;
    herd.acquisitions = n;
    herd.requests = rx - ka;
    herd.keepalives = ka;
    herd.txns = tx;
    herd.watch_sent = ws;
    herd.watch_received = wr;
    herd.leases = ls;
    herd.seconds = secs(took);
    printf("# %d processes x %d rounds: %u acquisitions in %.2f s (%.1f ms each), one holder "
           "at a time, tokens increasing, every strict commit accepted\n",
           N, ROUNDS, n, herd.seconds, 1000 * herd.seconds / n);
    contract_report("test_sixteen_waiters");
}

/* The etcd requests per acquisition of that phase: bounded, not a herd
 * (issue 28: <= 3 each).  What an acquisition costs is counted: all
 * requests but the strict commit each round makes (one Txn), the
 * LeaseKeepAlives (per lease and third of its TTL, not per acquisition),
 * and each handle's first lease grant and its revoke at fl_close (per
 * handle; at most two per process are allowed).  Asserted with a little room
 * for the rare look at the queue: <= 3.25. */
static void test_requests_bounded(void **state)
{
    (void)state;
    contract_reset();
    if (!herd.measured)
        skip();
    enum { N = 16 };
    double n = herd.acquisitions;
    double proto = (herd.requests - herd.acquisitions - herd.leases) / n;
    double ws = herd.watch_sent / n;
    printf("# per acquisition (16 waiters, %u acquisitions; each with a strict commit and a "
           "release): %.2f requests of the lock protocol (all methods but LeaseKeepAlive, "
           "the commits' Txns and the handles' lease grants and revokes), %.2f Txn in all; "
           "%.2f LeaseKeepAlive; %.0f lease grants and revokes for %d processes; %.2f watch "
           "messages received, %.2f sent\n",
           herd.acquisitions, proto, herd.txns / n, herd.keepalives / n, herd.leases, N,
           herd.watch_received / n, ws);
    if (proto > 3.25)
        contract_fail("bounded requests: %.2f etcd requests per acquisition with 16 waiters, "
                      "more than 3 (%.2f Txn in all, one of them the commit)",
                      proto, herd.txns / n);
    if (ws > 3.25)
        contract_fail("bounded watch traffic: %.2f watch messages sent per acquisition with "
                      "16 waiters, more than 3",
                      ws);
    if (herd.leases > 2 * N + 2)
        contract_fail("lease grants and revokes: %.0f for %d processes, more than two each",
                      herd.leases, N);
    contract_report("test_requests_bounded");
}

/* I1 I2 I6 I13: 8 waiters queued one after another behind a holder are
 * served in that order. */
static void test_fifo(void **state)
{
    (void)state;
    enum { N = 8 };
    shared_reset();
    contract_reset();
    const char *uri = uri_of("queue-fifo");
    qa h, w[N + 1];
    qa_start(&h, 0, uri, NULL, NULL);
    qa_send(&h, "acq k %" PRIu64 " 0 0", HOLD_LEASE);
    qr hq = qa_wait(&h, AGENT_MS, "the holder's acq");
    assert_int_equal(hq.rc, 0);
    expect_commit_ok(&hq, 0);
    fl_region *ro = open_ro("queue-fifo");
    for (int i = 1; i <= N; i++)
        start_waiter(&w[i], i, uri, NULL, NULL, ro, LONG_LEASE, FL_WAIT_FOREVER, F_AUTOREL, i);
    qa_send(&h, "rel");
    qr rq = qa_wait(&h, AGENT_MS, "rel");
    assert_int_equal(rq.rc, 0);
    for (int i = 1; i <= N; i++) {
        qr q = qa_wait(&w[i], 60000, "acq");
        if (q.rc != 0 || q.rel_rc != 0)
            fail_msg("waiter %d: %s, its release %s: %s", i, fl_err_name(q.rc),
                     fl_err_name(q.rel_rc), q.text);
        expect_commit_ok(&q, i);
    }
    assert_int_equal(atomic_load(&sh->nacq), N + 1);
    check_exclusion_and_tokens();
    int want[N];
    for (int i = 0; i < N; i++)
        want[i] = i + 1;
    check_order(1, want, N, "8 waiters");
    fl_close(ro);
    for (int i = 1; i <= N; i++)
        qa_stop(&w[i]);
    qa_stop(&h);
    contract_report("test_fifo");
}

int main(void)
{
    /* FL_ETCD_QUEUE_ONLY=test_fifo (a cmocka pattern) runs one scenario. */
    const char *only = getenv("FL_ETCD_QUEUE_ONLY");
    if (only && *only)
        cmocka_set_test_filter(only);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sixteen_waiters, teardown_test),
        cmocka_unit_test_teardown(test_requests_bounded, teardown_test),
        cmocka_unit_test_teardown(test_fifo, teardown_test),
    };
    return cmocka_run_group_tests(tests, queue_group_setup, queue_group_teardown);
}
