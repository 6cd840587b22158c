/* SPDX-License-Identifier: MIT */
/*
 * etcd_netns.c - a member cut off from the network (issue 15).
 *
 * Three members: m0 and m1 on this host's end of a veth pair, m2 inside a
 * network namespace of its own, on the other end.  The namespace is then
 * cut off (its end of the veth down: packets are dropped silently, as when
 * a cable is pulled) while
 *   - a stream of clients on m0 and m1 keeps acquiring, committing
 *     (strict) and releasing one key: tokens keep increasing strictly;
 *   - a holder inside the namespace, on m2 only (a leaderless minority
 *     member that still answers TCP), and a client outside that names only
 *     m2 (unreachable) get -EHOSTUNREACH or -EAGAIN for everything, never
 *     a success;
 *   - a client on m0/m1 takes the cut-off holder's key once its lease ends,
 *     with a greater token.
 * Then the namespace is joined again: the old holder's commit is -ESTALE
 * naming the new token, both m2 clients acquire again with tokens above
 * every token handed out during the cut, and the record holds the newer
 * holder's bytes.
 *
 * Needs root and ip (iproute2).  Without them the test exits 77 (ctest
 * SKIP) with the reason, unless FL_REQUIRE_NETNS=1 (.ci/run and tools/test
 * set it): then it fails.
 *
 * I1 I2 I3 I13
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

#define S(x) ((uint64_t)((uint64_t)(x) * TH_S))
#define AGENT_MS 30000

static ec_netns ns;

static bool network_error(int rc)
{
    return rc == -EHOSTUNREACH || rc == -EAGAIN;
}

static void pause_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* A stream of acquire-commit(strict)-release rounds on one key. */
struct stream {
    const char *uri;
    _Atomic bool stop;
    _Atomic int n;
    uint64_t tokens[8192];
    int net_errors, other_errors, other_rc;
    char other_why[512];
};

static void *stream_main(void *arg)
{
    struct stream *s = arg;
    fl_region *r = NULL;
    while (fl_open(s->uri, &r) != 0)
        pause_ms(50);
    while (!atomic_load(&s->stop) && atomic_load(&s->n) < 8192) {
        fl_lease l;
        int rc = fl_acquire(r, "k", S(10), S(10), &l);
        if (rc == 0) {
            s->tokens[atomic_load(&s->n)] = l.token;
            atomic_fetch_add(&s->n, 1);
            rc = fl_commit(r, &l, "k-rec", &l.token, sizeof l.token, FL_COMMIT_STRICT, NULL);
            if (network_error(rc))
                s->net_errors++;
            rc = network_error(rc) ? 0 : rc;
            /* A release without a definite answer leaves the key perhaps
             * held (this thread's next acquire would be -EDEADLK): it is
             * called again until it says (docs/etcd.md), as a user would.
             * -ESTALE after the lease's deadline: it ran out meanwhile. */
            int rel = fl_release(r, &l);
            while (network_error(rel) && !atomic_load(&s->stop)) {
                s->net_errors++;
                pause_ms(50);
                rel = fl_release(r, &l);
                if (rel == -ESTALE && th_now_ns() >= l.deadline_ns)
                    rel = 0;
            }
            rc = rc ? rc : rel;
        }
        if (rc == 0)
            continue;
        if (network_error(rc) || rc == -ETIMEDOUT) {
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

static void wait_rounds(struct stream *s, int more, int timeout_s, const char *when)
{
    int want = atomic_load(&s->n) + more;
    for (uint64_t end = th_now_ns() + S(timeout_s); atomic_load(&s->n) < want;) {
        if (th_now_ns() > end)
            fail_msg("%s: the stream on m0/m1 made %d of %d rounds in %d s", when,
                     atomic_load(&s->n) - (want - more), more, timeout_s);
        pause_ms(20);
    }
}

/* Every answer to a client of the cut-off member is a network error. */
static void expect_cut(ec_agent *a, const char *who, const char *cmd, uint64_t below)
{
    ec_reply rp = ec_agent_do(a, AGENT_MS, "%s", cmd);
    if (!network_error(rp.rc))
        fail_msg("%s: '%s' during the cut returned %s (token %" PRIu64 ", below %" PRIu64
                 "): %s",
                 who, cmd, fl_err_name(rp.rc), rp.token, below, rp.text);
    printf("# cut: %s %-28s -> %s\n", who, cmd, fl_err_name(rp.rc));
}

/* I1 I2 I3 I13 */
static void test_member_cut_off(void **state)
{
    (void)state;
    const char *hosts[3] = {ns.host_addr, ns.host_addr, ns.ns_addr};
    const char *where[3] = {NULL, NULL, ns.name};
    ec_cluster c;
    ec_start_on(&c, 3, hosts, where);
    char u01[1024], u2[1024];
    ec_uri(&c, EC_ONLY(0) | EC_ONLY(1), "netns", u01, sizeof u01);
    ec_uri(&c, EC_ONLY(2), "netns", u2, sizeof u2);
    printf("# members: m0 %s:%d, m1 %s:%d, m2 %s:%d in namespace %s\n", c.m[0].host,
           c.m[0].client_port, c.m[1].host, c.m[1].client_port, c.m[2].host,
           c.m[2].client_port, ns.name);

    /* A: inside the namespace, on m2 only (its own host's member);
     * O: outside, naming only m2. */
    ec_agent a, o;
    ec_agent_start_in(&a, u2, ns.name);
    assert_int_equal(a.open_rc, 0);
    ec_agent_start(&o, u2);
    assert_int_equal(o.open_rc, 0);
    ec_reply ra = ec_agent_do(&a, AGENT_MS, "acq held %" PRIu64 " 0", S(2));
    assert_int_equal(ra.rc, 0);
    ec_reply rp = ec_agent_do(&a, AGENT_MS, "commit rec A-before");
    assert_int_equal(rp.rc, 0);
    rp = ec_agent_do(&o, AGENT_MS, "read rec");
    assert_int_equal(rp.rc, 0);
    assert_string_equal(rp.text, "A-before");
    assert_int_equal(rp.value, ra.token);

    struct stream *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->uri = u01;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stream_main, s), 0);
    wait_rounds(s, 10, 30, "before the cut");

    /* ---- the cut ---- */
    int leader = ec_leader(&c, 10000);
    printf("# leader before the cut: m%d\n", leader);
    ec_netns_cut(&ns);
    int at_cut = atomic_load(&s->n);
    uint64_t max_before = s->tokens[at_cut - 1];
    /* The majority goes on (after electing a leader if m2 led). */
    wait_rounds(s, 15, 40, "during the cut");

    /* The cut-off side: nothing succeeds, nothing returns a token. */
    expect_cut(&a, "inside", "renew 2000000000", 0);
    expect_cut(&a, "inside", "commit rec A-during", 0);
    expect_cut(&a, "inside", "acq k 2000000000 0", max_before);
    expect_cut(&a, "inside", "read rec", 0);
    expect_cut(&o, "outside", "acq k 2000000000 0", max_before);
    expect_cut(&o, "outside", "read rec", 0);

    /* B, on the majority, takes the cut-off holder's key when its lease
     * ends (a leader change may restart the TTL: later, never earlier). */
    fl_region *rb = NULL;
    assert_int_equal(fl_open(u01, &rb), 0);
    fl_lease b;
    int rc = fl_acquire(rb, "held", S(30), S(40), &b);
    if (rc)
        fail_msg("B's acquire during the cut: %s: %s", fl_err_name(rc), fl_last_error());
    assert_true(b.token > ra.token);
    assert_int_equal(b.flags, FL_LEASE_EXPIRED);
    assert_int_equal(fl_commit(rb, &b, "rec", "B", 1, FL_COMMIT_STRICT, NULL), 0);
    wait_rounds(s, 5, 40, "after the takeover");
    int during = atomic_load(&s->n) - at_cut;

    /* Still cut: the old holder is refused nothing it could stand behind. */
    expect_cut(&a, "inside", "commit rec A-late", 0);

    /* ---- heal ---- */
    ec_netns_heal(&ns);
    if (!ec_wait_ready(&c, 2, 60000))
        fail_msg("m2 did not answer within 60 s of the heal");
    /* The old holder, back on the network: refused, told the new token. */
    for (uint64_t end = th_now_ns() + S(30);;) {
        rp = ec_agent_do(&a, AGENT_MS, "commit rec A-after");
        if (!network_error(rp.rc) || th_now_ns() > end)
            break;
        pause_ms(100);
    }
    if (rp.rc != -ESTALE)
        fail_msg("the cut-off holder's commit after the heal: %s (%s)", fl_err_name(rp.rc),
                 rp.text);
    assert_int_equal(rp.value, b.token);
    rp = ec_agent_do(&a, AGENT_MS, "read rec");
    assert_int_equal(rp.rc, 0);
    assert_string_equal(rp.text, "B");
    assert_int_equal(rp.value, b.token);
    assert_int_equal(fl_release(rb, &b), 0);

    atomic_store(&s->stop, true);
    pthread_join(th, NULL);
    int n = atomic_load(&s->n);
    if (s->other_errors)
        fail_msg("%d errors other than the network's on m0/m1, the last %s: %s",
                 s->other_errors, fl_err_name(s->other_rc), s->other_why);
    for (int i = 1; i < n; i++)
        if (s->tokens[i] <= s->tokens[i - 1])
            fail_msg("token %d (%" PRIu64 ") not above token %d (%" PRIu64 ")", i,
                     s->tokens[i], i - 1, s->tokens[i - 1]);
    uint64_t max = s->tokens[n - 1] > b.token ? s->tokens[n - 1] : b.token;

    /* Both clients of m2 acquire again, above everything handed out. */
    for (int who = 0; who < 2; who++) {
        ec_agent *g = who ? &o : &a;
        for (uint64_t end = th_now_ns() + S(30);;) {
            rp = ec_agent_do(g, AGENT_MS, "acq k %" PRIu64 " %" PRIu64, S(5), S(10));
            if (rp.rc == 0 || th_now_ns() > end)
                break;
            if (!network_error(rp.rc))
                fail_msg("%s after the heal: %s (%s)", who ? "outside" : "inside",
                         fl_err_name(rp.rc), rp.text);
            pause_ms(100);
        }
        assert_int_equal(rp.rc, 0);
        if (rp.token <= max)
            fail_msg("token %" PRIu64 " after the heal is not above %" PRIu64, rp.token, max);
        max = rp.token;
        assert_int_equal(ec_agent_do(g, AGENT_MS, "strict k-rec x").rc, 0);
        assert_int_equal(ec_agent_do(g, AGENT_MS, "rel").rc, 0);
    }
    printf("# %d rounds on m0/m1 (%d while m2 was cut off), %d network errors\n", n, during,
           s->net_errors);
    free(s);
    fl_close(rb);
    ec_agent_stop(&a);
    ec_agent_stop(&o);
    ec_stop_all(&c);
}

int main(void)
{
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "1000", 1);
    char why[1024];
    if (ec_netns_create(&ns, why, sizeof why) != 0) {
        if (ec_netns_required()) {
            fprintf(stderr, "etcd_netns: FAIL: FL_REQUIRE_NETNS=1 and no network namespace: %s\n",
                    why);
            return 1;
        }
        fprintf(stderr, "etcd_netns: SKIPPED (exit 77): %s (CI sets FL_REQUIRE_NETNS=1 and fails "
                        "here)\n", why);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_cut_off),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ec_netns_destroy(&ns); /* also at exit, after a failure */
    return rc;
}
