/* SPDX-License-Identifier: MIT */
/*
 * queue_util.c - the fair queue's tests' cluster, checks and head-waiter
 * scenario (queue_util.h), shared by etcd_queue, etcd_queue_faults and
 * etcd_queue_netns: the contract checks reported at a test's end, the
 * queue as fl_lock_info_get() shows it (the waiters count), the
 * invariants over a test's acquisitions (one holder, tokens rising, strict
 * commits accepted), the order of service, and a head waiter that is
 * stopped, killed or cut off while the holder releases.
 */
#include "queue_util.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

/* ---- the contract checks, reported at the end of each test ---- */

static char contract[8192];
static int ncontract;

void contract_fail(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("# contract: %s\n", line);
    fflush(stdout);
    size_t n = strlen(contract);
    snprintf(contract + n, sizeof contract - n, "\n  %s", line);
    ncontract++;
}

void contract_reset(void)
{
    contract[0] = '\0';
    ncontract = 0;
}

/* Fail the test with every contract check that failed. */
void contract_report(const char *test)
{
    if (ncontract)
        fail_msg("%s: %d check(s) of the promised behaviour failed (the invariants held):%s",
                 test, ncontract, contract);
}

/* ---- the cluster, one for the program; a prefix per test ---- */

ec_cluster cluster;
static char uri_buf[1024];

const char *uri_of(const char *prefix)
{
    return ec_uri(&cluster, 0, prefix, uri_buf, sizeof uri_buf);
}

int teardown_test(void **state)
{
    (void)state;
    for (int i = 0; i < MAXPROC; i++)
        if (live[i].pid > 0) {
            kill(live[i].pid, SIGCONT);
            kill(live[i].pid, SIGKILL);
            th_child_wait(&live[i], 20000);
            live[i].pid = 0;
        }
    /* A member a failed test left killed: the next test needs three. */
    for (int i = 0; i < cluster.n; i++) {
        if (cluster.m[i].paused)
            ec_resume(&cluster, i);
        if (cluster.m[i].pid == 0)
            ec_restart(&cluster, i);
    }
    return 0;
}

int queue_group_setup(void **state)
{
    (void)state;
    queue_shared_map();
    ec_start(&cluster, 3);
    return 0;
}

int queue_group_teardown(void **state)
{
    (void)state;
    ec_stop_all(&cluster);
    return 0;
}

/* ---- the queue as inspection shows it ---- */

/* The key's waiters count (fl_lock_info.waiters), -1 if the key is not
 * listed. */
static int waiters_of(fl_region *ro, const char *key)
{
    fl_region_info ri;
    int rc = fl_region_info_get(ro, &ri);
    if (rc)
        return -1;
    for (uint32_t i = 0; i < ri.locks_used; i++) {
        fl_lock_info li;
        if (fl_lock_info_get(ro, i, &li) == 0 && strcmp(li.key, key) == 0)
            return (int)li.waiters;
    }
    return -1;
}

static bool waiters_unreported; /* a 20 s wait ran out: fall back (queue_util.h) */

/* Wait until the key's waiters count is want (an explicit wait, polled).
 * A count that does not get there is a contract failure. */
bool wait_waiters(fl_region *ro, const char *key, int want, const char *what)
{
    int bound = waiters_unreported ? QUEUE_FALLBACK_MS : QUEUE_WAIT_MS;
    int seen = -1;
    for (uint64_t end = th_now_ns() + (uint64_t)bound * TH_MS;;) {
        seen = waiters_of(ro, key);
        if (seen == want)
            return true;
        if (th_now_ns() >= end)
            break;
        pause_ms(20);
    }
    if (!waiters_unreported) {
        waiters_unreported = true;
        contract_fail("waiters count of \"%s\" %s: %d expected, still %d after %d ms "
                      "(later waits go on after %d ms)",
                      key, what, want, seen, bound, QUEUE_FALLBACK_MS);
    } else
        contract_fail("waiters count of \"%s\" %s: %d expected, %d", key, what, want, seen);
    return false;
}

/* Wait for acquisition number n (0-based, in order) within timeout_ms. */
struct acq_rec *wait_acq(uint32_t n, int timeout_ms, const char *what)
{
    for (uint64_t end = th_now_ns() + (uint64_t)timeout_ms * TH_MS;;) {
        if (atomic_load(&sh->nacq) > n && atomic_load(&sh->acq[n].ready))
            return &sh->acq[n];
        if (th_now_ns() >= end)
            fail_msg("%s: no acquisition #%u within %d ms", what, n, timeout_ms);
        pause_ms(2);
    }
}

/* The invariants over the whole test: never two holders, tokens strictly
 * increasing in acquisition order. */
void check_exclusion_and_tokens(void)
{
    if (atomic_load(&sh->overlaps))
        fail_msg("mutual exclusion: %d acquisition(s) while the key was held (max %d "
                 "holders); the first: %s",
                 atomic_load(&sh->overlaps), atomic_load(&sh->max_holders), sh->overlap_why);
    uint32_t n = atomic_load(&sh->nacq);
    assert_true(n <= MAXACQ);
    for (uint32_t i = 1; i < n; i++)
        if (sh->acq[i].token <= sh->acq[i - 1].token)
            fail_msg("I1: acquisition #%u (agent %d) got token %" PRIu64 ", not above #%u's "
                     "(agent %d) %" PRIu64,
                     i, sh->acq[i].who, sh->acq[i].token, i - 1, sh->acq[i - 1].who,
                     sh->acq[i - 1].token);
}

void expect_commit_ok(const qr *q, int who)
{
    if (q->commit_rc != 0 || q->accepted != q->token)
        fail_msg("agent %d: strict commit of token %" PRIu64 ": %s, accepted %" PRIu64 " (%s)",
                 who, q->token, fl_err_name(q->commit_rc), q->accepted, q->text);
}

/* The order of service against the expected one (agents' numbers). */
void check_order(uint32_t from, const int *want, int n, const char *what)
{
    char got[256] = "", exp[256] = "";
    size_t g = 0, e = 0;
    bool same = true;
    for (int i = 0; i < n; i++) {
        int w = sh->acq[from + (uint32_t)i].who;
        same = same && w == want[i];
        g += (size_t)snprintf(got + g, sizeof got - g, "%s%d", i ? "," : "", w);
        e += (size_t)snprintf(exp + e, sizeof exp - e, "%s%d", i ? "," : "", want[i]);
    }
    printf("# %s: served %s (arrival order %s)\n", what, got, exp);
    if (!same)
        contract_fail("FIFO: %s: served in the order %s, arrived %s", what, got, exp);
}

fl_region *open_ro(const char *prefix)
{
    fl_region *ro = NULL;
    int rc = fl_open_readonly(uri_of(prefix), &ro);
    if (rc)
        fail_msg("fl_open_readonly(%s): %s", uri_of(prefix), fl_last_error());
    return ro;
}

/* Start agent who and send it an acquisition that must wait: it must not
 * answer before the key's waiters count reaches queued (its arrival). */
void start_waiter(qa *a, int who, const char *uri, const char *netns, const char *tmo,
                  fl_region *ro, uint64_t lease, int64_t timeout, int flags, int queued)
{
    qa_start(a, who, uri, netns, tmo);
    qa_send(a, "acq k %" PRIu64 " %" PRId64 " %d", lease, timeout, flags);
    char what[64];
    snprintf(what, sizeof what, "after waiter %d arrived", who);
    wait_waiters(ro, "k", queued, what);
    if (qa_answered(a)) {
        qr q = qa_wait(a, 0, "acq");
        fail_msg("waiter %d answered %s (token %" PRIu64 ") while the key was held: %s", who,
                 fl_err_name(q.rc), q.token, q.text);
    }
}

/* ---- the head waiter ---- */

/* I1 I2 I4 I6 I13: holder H (agent 0), head waiter W1 (2 s lease), W2 and
 * W3 behind it (10 s).  W1 is stopped, killed or cut off, then H releases:
 * W2 must get the key within W1's lease + SLACK of the release, with a
 * greater token; W1, continued or joined again, re-queues and gets the key
 * last, never while another holds it, with a token above every earlier
 * one. */
void head_waiter(enum head_fault fault, const char *prefix, const ec_netns *ns)
{
    static const char *names[] = {"stopped (SIGSTOP)", "killed (SIGKILL)", "cut off"};
    shared_reset();
    contract_reset();
    const char *uri = uri_of(prefix);
    qa h, w[4];
    qa_start(&h, 0, uri, NULL, NULL);
    qa_send(&h, "acq k %" PRIu64 " 0 0", HOLD_LEASE);
    qr hq = qa_wait(&h, AGENT_MS, "the holder's acq");
    assert_int_equal(hq.rc, 0);
    expect_commit_ok(&hq, 0);
    fl_region *ro = open_ro(prefix);
    /* W1 in the namespace (HEAD_CUT) retries the network's errors, as a
     * client would: cut off, its wait may end in one. */
    if (fault == HEAD_CUT)
        start_waiter(&w[1], 1, uri, ns->name, "1000", ro, HEAD_LEASE, FL_WAIT_FOREVER, F_RETRY,
                     1);
    else
        start_waiter(&w[1], 1, uri, NULL, NULL, ro, HEAD_LEASE, FL_WAIT_FOREVER, 0, 1);
    start_waiter(&w[2], 2, uri, NULL, NULL, ro, LONG_LEASE, FL_WAIT_FOREVER, 0, 2);
    start_waiter(&w[3], 3, uri, NULL, NULL, ro, LONG_LEASE, FL_WAIT_FOREVER, 0, 3);

    uint64_t t_fault = th_now_ns();
    switch (fault) {
    case HEAD_STOP:
        assert_int_equal(kill(w[1].c.pid, SIGSTOP), 0);
        assert_true(th_wait_stopped(w[1].c.pid, 10000));
        break;
    case HEAD_KILL:
        qa_kill(&w[1]);
        break;
    case HEAD_CUT:
        ec_netns_cut(ns);
        break;
    }
    qa_send(&h, "rel");
    qr rq = qa_wait(&h, AGENT_MS, "rel");
    assert_int_equal(rq.rc, 0);
    uint64_t t_rel = rq.t0;

    /* The takeover: one of W2, W3 within W1's lease + SLACK. */
    struct acq_rec *x = wait_acq(1, 60000, "after the release");
    uint64_t lat = x->t_acq - t_rel;
    printf("# head waiter %s: agent %d took the key %.3f s after the release (bound %.1f s)\n",
           names[fault], x->who, secs(lat), secs(HEAD_LEASE + SLACK));
    if (x->who != 2 && x->who != 3)
        fail_msg("the key went to agent %d after the release, with W1 %s", x->who,
                 names[fault]);
    if (lat > HEAD_LEASE + SLACK)
        fail_msg("the head waiter %s stranded the queue: the next waiter took the key %.3f s "
                 "after the release, more than W1's lease (%.0f s) + %.0f s",
                 names[fault], secs(lat), secs(HEAD_LEASE), secs(SLACK));
    if (x->who != 2)
        contract_fail("FIFO: W%d took the key before W2 with W1 %s", x->who, names[fault]);
    qa *first = &w[x->who], *second = &w[x->who == 2 ? 3 : 2];
    qr fq = qa_wait(first, AGENT_MS, "acq");
    assert_int_equal(fq.rc, 0);
    expect_commit_ok(&fq, first->who);
    assert_true(fq.token > hq.token);

    /* W1 comes back, after the fault lasted longer than its lease (and
     * etcd's 0.5 s tick of lease expiry), whatever the takeover took: its
     * place is given up, so it must re-queue behind the other waiter.  (A
     * fault's length, not an ordering: nothing waits for it to happen.) */
    if (fault != HEAD_KILL) {
        uint64_t until = t_fault + HEAD_LEASE + MS(1500);
        for (uint64_t now; (now = th_now_ns()) < until;)
            pause_ms((int)((until - now) / TH_MS) + 1);
    }
    if (fault == HEAD_STOP)
        assert_int_equal(kill(w[1].c.pid, SIGCONT), 0);
    if (fault == HEAD_CUT)
        ec_netns_heal(ns);
    if (fault != HEAD_KILL) {
        wait_waiters(ro, "k", 2, "after W1 came back (re-queued behind the other waiter)");
        if (qa_answered(&w[1])) {
            qr q = qa_wait(&w[1], 0, "acq");
            fail_msg("W1 answered %s (token %" PRIu64 ") after it came back, while agent %d "
                     "held the key: %s",
                     fl_err_name(q.rc), q.token, first->who, q.text);
        }
    }
    qa_send(first, "rel");
    assert_int_equal(qa_wait(first, AGENT_MS, "rel").rc, 0);

    /* Then the other waiter and W1 (which came back), each when the one
     * before released; W1 gets the key in the end, above every token
     * before it. */
    int left = fault == HEAD_KILL ? 1 : 2;
    for (uint32_t k = 2; left > 0; k++, left--) {
        struct acq_rec *y = wait_acq(k, 60000, "after the previous holder's release");
        if (y->who != 1 && y->who != second->who)
            fail_msg("acquisition #%u by agent %d", k, y->who);
        if (y->who == 1 && k == 2)
            contract_fail("FIFO: W1, back after it was %s, took the key before W%d, which "
                          "had waited since",
                          names[fault], second->who);
        qa *g = &w[y->who];
        qr q = qa_wait(g, AGENT_MS, "acq");
        if (q.rc != 0)
            fail_msg("W%d%s: %s (%s)", g->who, g->who == 1 ? ", back" : "", fl_err_name(q.rc),
                     q.text);
        expect_commit_ok(&q, g->who);
        if (g->who == 1)
            printf("# W1 (%s) got the key back: token %" PRIu64 ", %d network errors "
                   "retried\n", names[fault], q.token, q.net);
        qa_send(g, "rel");
        qr r = qa_wait(g, AGENT_MS, "rel");
        /* W1's 2 s holding may have run out before its release came: that
         * is -ESTALE of a lease past its deadline, nothing else. */
        if (r.rc != 0 && !(g->who == 1 && r.rc == -ESTALE && r.t0 >= sh->slot[1].deadline))
            fail_msg("W%d's release: %s (%s)", g->who, fl_err_name(r.rc), r.text);
    }
    assert_int_equal(atomic_load(&sh->nacq), fault == HEAD_KILL ? 3 : 4);
    check_exclusion_and_tokens();
    int order[] = {2, 3, 1};
    check_order(1, order, fault == HEAD_KILL ? 2 : 3, names[fault]);
    fl_close(ro);
    for (int i = 1; i <= 3; i++)
        if (fault != HEAD_KILL || i != 1)
            qa_stop(&w[i]);
    qa_stop(&h);
}
