/* SPDX-License-Identifier: MIT */
/*
 * etcd_errors.c - the errors a network adds, each as documented:
 *
 *   -EINVAL           malformed URIs, prefixes with bad bytes
 *   -EHOSTUNREACH     no endpoint answers (refused, or silent past the
 *                     per-request timeout): the call had no effect
 *   -EAGAIN           a write was sent and no answer came: outcome unknown
 *                     (an acquire, a commit), never a success
 *   -EPROTO           an "etcd" that answers garbage (a fake HTTP server):
 *                     not JSON, wrong types, bad numbers, bad base64, HTTP
 *                     errors without etcd's fields; the message names the
 *                     endpoint
 *   -ENOSPC           etcd's "database space exceeded"
 *   -EOVERFLOW        a revision that does not fit a token (2^40)
 * that a release whose answer was lost is -EAGAIN and a second
 * fl_release of the same lease settles it (0),
 * and that a dead first endpoint is skipped for a live second one.
 *
 * I9 (untrusted input), I13 (errors keep their meaning on etcd).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cluster_harness.h"

#define S(x) ((uint64_t)(x) * TH_S)

/* A port nobody listens on (bound, then closed). */
static int closed_port(void)
{
    int port = 0;
    ec_fake *f = ec_fake_start(NULL, NULL, &port);
    ec_fake_stop(f);
    return port;
}

/* I9 I13 */
static void test_malformed(void **state)
{
    (void)state;
    fl_region *r = NULL;
    static const char *const bad[] = {
        "etcd://127.0.0.1:2379",       "etcd://127.0.0.1:2379/",   "etcd:///p",
        "etcd://127.0.0.1/p",          "etcd://127.0.0.1:99999/p", "etcd://a:1,,b:2/p",
        "etcd://127.0.0.1:1/a b",      "etcd://127.0.0.1:1/a%20b", "etcd://127.0.0.1:1/a//b",
        "etcd://127.0.0.1:1/x/lock",   "etcd://127.0.0.1:1/caf\xc3\xa9",
        "etcd://u:p@127.0.0.1:1/p",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int err = fl_open(bad[i], &r);
        if (err != -EINVAL)
            fail_msg("fl_open(%s) = %d (%s), not -EINVAL", bad[i], err, fl_last_error());
        assert_int_equal(fl_open_readonly(bad[i], &r), -EINVAL);
        assert_non_null(strstr(fl_last_error(), "etcd URI"));
    }
    assert_int_equal(fl_open("nosuch://h:1/p", &r), -EPROTONOSUPPORT);
}

/* I13 */
static void test_no_endpoint(void **state)
{
    (void)state;
    char uri[128];
    int p1 = closed_port(), p2 = closed_port();
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d,127.0.0.1:%d/p", p1, p2);
    fl_region *r = NULL;
    uint64_t t0 = th_now_ns();
    assert_int_equal(fl_open(uri, &r), -EHOSTUNREACH);
    assert_true(th_now_ns() - t0 < S(5)); /* refused connections answer at once */
    char p1s[16], p2s[16];
    snprintf(p1s, sizeof p1s, ":%d", p1);
    snprintf(p2s, sizeof p2s, ":%d", p2);
    assert_non_null(strstr(fl_last_error(), p1s));
    assert_non_null(strstr(fl_last_error(), p2s));
    assert_string_equal(fl_err_name(-EHOSTUNREACH), "EHOSTUNREACH");
}

static int never_answer(void *arg, const char *path, const char *body, char *out, size_t cap)
{
    (void)arg, (void)path, (void)body, (void)out, (void)cap;
    return -1;
}

/* I13 */
static void test_silent_endpoint(void **state)
{
    (void)state;
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "300", 1);
    int port = 0;
    ec_fake *f = ec_fake_start(never_answer, NULL, &port);
    char uri[128];
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d/p", port);
    fl_region *r = NULL;
    uint64_t t0 = th_now_ns();
    /* A read that timed out had no effect: -EHOSTUNREACH, not -EAGAIN. */
    assert_int_equal(fl_open(uri, &r), -EHOSTUNREACH);
    uint64_t took = th_now_ns() - t0;
    assert_true(took >= 250 * TH_MS && took < S(5));
    ec_fake_stop(f);
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "bogus", 1);
    assert_int_equal(fl_open(uri, &r), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "FENCELOCK_ETCD_TIMEOUT_MS"));
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
}

/* ---- a scripted fake etcd ---- */

enum mode {
    M_OK,              /* a plausible etcd */
    M_NOT_JSON,
    M_ARRAY,
    M_REV_OBJECT,      /* header.revision is an object */
    M_REV_HUGE,        /* beyond int64 */
    M_REV_NEGATIVE,
    M_BAD_BASE64,      /* kvs[0].key */
    M_EPOCH_GARBAGE,   /* the epoch key holds "abc" */
    M_HTTP_500_TEXT,
    M_HTTP_404_JSON,   /* an HTTP error without etcd's code */
    M_TXN_GARBAGE,     /* opens; the Txn answers a wrong kind of response */
    M_TXN_SILENT,      /* opens; the Txn never answers */
    M_TXN_TIMED_OUT,   /* opens; the Txn answers etcd's "request timed out" */
    M_TXN_NOSPACE,     /* opens; the Txn answers "database space exceeded" */
    M_TXN_REV_2_40,    /* opens; the Txn succeeds at revision 2^40 */
    M_GRANT_ZERO,      /* opens; the lease grant answers ID 0 */
    M_NO_LEADER,       /* every request: etcd's "no leader" */
};

struct script {
    enum mode mode;
};

static const char *const HDR = "\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\","
                               "\"revision\":\"5\",\"raft_term\":\"2\"}";

static int fake(void *arg, const char *path, const char *body, char *out, size_t cap)
{
    struct script *s = arg;
    (void)body;
    switch (s->mode) {
    case M_NOT_JSON: snprintf(out, cap, "hello, I am not etcd"); return 200;
    case M_ARRAY: snprintf(out, cap, "[1, 2, 3]"); return 200;
    case M_REV_OBJECT: snprintf(out, cap, "{\"header\":{\"revision\":{}}}"); return 200;
    case M_REV_HUGE:
        snprintf(out, cap, "{\"header\":{\"revision\":\"99999999999999999999\"}}");
        return 200;
    case M_REV_NEGATIVE: snprintf(out, cap, "{\"header\":{\"revision\":\"-3\"}}"); return 200;
    case M_BAD_BASE64:
        snprintf(out, cap, "{%s,\"kvs\":[{\"key\":\"@@@\",\"value\":\"MQ==\","
                           "\"create_revision\":\"2\",\"mod_revision\":\"2\"}]}", HDR);
        return 200;
    case M_EPOCH_GARBAGE:
        snprintf(out, cap, "{%s,\"kvs\":[{\"key\":\"cC9lcG9jaA==\",\"value\":\"YWJj\","
                           "\"create_revision\":\"2\",\"mod_revision\":\"2\"}]}", HDR);
        return 200;
    case M_HTTP_500_TEXT: snprintf(out, cap, "Internal Server Error"); return 500;
    case M_HTTP_404_JSON: snprintf(out, cap, "{\"oops\":true}"); return 404;
    case M_NO_LEADER:
        snprintf(out, cap, "{\"error\":\"etcdserver: no leader\",\"message\":\"etcdserver: no "
                           "leader\",\"code\":14}");
        return 503;
    default: break;
    }
    /* A plausible etcd for the open (epoch 1) and the grant. */
    if (strcmp(path, "/v3/kv/range") == 0) {
        snprintf(out, cap, "{%s,\"kvs\":[{\"key\":\"cC9lcG9jaA==\",\"value\":\"MQ==\","
                           "\"create_revision\":\"2\",\"mod_revision\":\"2\",\"version\":\"1\"}],"
                           "\"count\":\"1\"}", HDR);
        return 200;
    }
    if (strcmp(path, "/v3/lease/grant") == 0) {
        snprintf(out, cap, "{%s,\"ID\":\"%s\",\"TTL\":\"5\"}", HDR,
                 s->mode == M_GRANT_ZERO ? "0" : "77");
        return 200;
    }
    if (strcmp(path, "/v3/lease/revoke") == 0) {
        snprintf(out, cap, "{%s}", HDR);
        return 200;
    }
    if (strcmp(path, "/v3/kv/txn") == 0) {
        switch (s->mode) {
        case M_TXN_GARBAGE:
            snprintf(out, cap, "{%s,\"succeeded\":true,\"responses\":[{\"response_range\":{}}]}",
                     HDR);
            return 200;
        case M_TXN_SILENT: return -1;
        case M_TXN_TIMED_OUT:
            snprintf(out, cap, "{\"error\":\"etcdserver: request timed out\",\"message\":"
                               "\"etcdserver: request timed out\",\"code\":14}");
            return 503;
        case M_TXN_NOSPACE:
            snprintf(out, cap, "{\"error\":\"etcdserver: mvcc: database space exceeded\","
                               "\"message\":\"etcdserver: mvcc: database space exceeded\","
                               "\"code\":8}");
            return 429;
        case M_TXN_REV_2_40:
            snprintf(out, cap, "{\"header\":{\"revision\":\"1099511627776\"},\"succeeded\":true,"
                               "\"responses\":[{\"response_put\":{}},{\"response_put\":{}}]}");
            return 200;
        default: break;
        }
    }
    snprintf(out, cap, "{\"error\":\"unexpected\",\"message\":\"unexpected %s\",\"code\":12}",
             path);
    return 501;
}

/* I9 */
static void test_garbage(void **state)
{
    (void)state;
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    struct script s = {M_OK};
    int port = 0;
    ec_fake *f = ec_fake_start(fake, &s, &port);
    char uri[128], me[32];
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d/p", port);
    snprintf(me, sizeof me, "127.0.0.1:%d", port);
    fl_region *r = NULL;

    /* The open reads the epoch: every kind of garbage is -EPROTO naming us. */
    static const enum mode open_bad[] = {M_NOT_JSON,   M_ARRAY,         M_REV_OBJECT,
                                         M_REV_HUGE,   M_REV_NEGATIVE,  M_BAD_BASE64,
                                         M_EPOCH_GARBAGE, M_HTTP_500_TEXT, M_HTTP_404_JSON};
    for (size_t i = 0; i < sizeof open_bad / sizeof open_bad[0]; i++) {
        s.mode = open_bad[i];
        int err = fl_open(uri, &r);
        if (err != -EPROTO)
            fail_msg("mode %d: fl_open = %d (%s), not -EPROTO", (int)open_bad[i], err,
                     fl_last_error());
        if (!strstr(fl_last_error(), me))
            fail_msg("mode %d: the message does not name the endpoint: %s", (int)open_bad[i],
                     fl_last_error());
    }
    /* "no leader": refused before anything happened; no other endpoint. */
    s.mode = M_NO_LEADER;
    assert_int_equal(fl_open(uri, &r), -EHOSTUNREACH);
    assert_non_null(strstr(fl_last_error(), "no leader"));

    /* Opens, then each acquire Txn answer. */
    s.mode = M_OK;
    assert_int_equal(fl_open(uri, &r), 0);
    fl_lease l;
    s.mode = M_TXN_GARBAGE;
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), -EPROTO);
    assert_non_null(strstr(fl_last_error(), me));
    s.mode = M_GRANT_ZERO;
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), -EPROTO);
    s.mode = M_TXN_NOSPACE;
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), -ENOSPC);
    assert_non_null(strstr(fl_last_error(), "space"));
    s.mode = M_TXN_REV_2_40;
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), -EOVERFLOW);
    /* Sent, no answer: the outcome is unknown, never a success. */
    s.mode = M_TXN_TIMED_OUT;
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), -EAGAIN);
    s.mode = M_TXN_SILENT;
    uint64_t t0 = th_now_ns();
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), -EAGAIN);
    assert_true(th_now_ns() - t0 < S(10));
    fl_close(r);
    ec_fake_stop(f);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
}

/* A fake whose marker reads say "q0000001" at revision 5 (newest token
 * 1 << 40 | 5), and whose commit Txn never answers. */
static int fake_commit(void *arg, const char *path, const char *body, char *out, size_t cap)
{
    (void)arg;
    if (strcmp(path, "/v3/kv/txn") == 0)
        return -1;
    if (strcmp(path, "/v3/kv/range") == 0 && strstr(body, "cC9sYXN0L2s=")) /* p/last/k */
        snprintf(out, cap, "{%s,\"kvs\":[{\"key\":\"cC9sYXN0L2s=\",\"value\":\"cTAwMDAwMDE=\","
                           "\"create_revision\":\"5\",\"mod_revision\":\"5\"}]}", HDR);
    else
        snprintf(out, cap, "{%s,\"kvs\":[{\"key\":\"cC9lcG9jaA==\",\"value\":\"MQ==\","
                           "\"create_revision\":\"2\",\"mod_revision\":\"2\"}]}", HDR);
    return 200;
}

/* I2 I13 */
static void test_commit_outcome_unknown(void **state)
{
    (void)state;
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "300", 1);
    int port = 0;
    ec_fake *f = ec_fake_start(fake_commit, NULL, &port);
    char uri[128];
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d/p", port);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    uint64_t acc = 0;
    unsigned before = ec_fake_requests(f);
    assert_int_equal(fl_commit_token(r, "k", (1ull << 40) | 5, "rec", "x", 1, 0, &acc), -EAGAIN);
    assert_non_null(strstr(fl_last_error(), "fl_read"));
    assert_int_equal(acc, 0);
    /* One marker read and one commit, never sent twice. */
    assert_int_equal(ec_fake_requests(f) - before, 2);
    /* A token beyond the key's newest is refused before any commit. */
    assert_int_equal(fl_commit_token(r, "k", (1ull << 40) | 6, "rec", "x", 1, 0, &acc), -EINVAL);
    fl_close(r);
    ec_fake_stop(f);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
}

/* I13 */
static void test_dead_endpoint_skipped(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 1);
    char uri[256];
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d,127.0.0.1:%d/rot", closed_port(),
             c.m[0].client_port);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), 0);
    assert_int_equal(fl_commit(r, &l, "rec", "x", 1, 0, NULL), 0);
    assert_int_equal(fl_release(r, &l), 0);
    /* The member goes away: no endpoint answers; the call had no effect. */
    ec_kill(&c, 0, SIGKILL);
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &l), -EHOSTUNREACH);
    char buf[4];
    size_t len;
    uint64_t fence;
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), -EHOSTUNREACH);
    fl_close(r);
    ec_stop_all(&c);
}

/* ---- a relay that loses the answer of a release ---- */

struct relay {
    int member_port;
    /* Set by the test; the relay clears it on the next release Txn: */
    _Atomic int lose; /* 1: send it on, lose the answer; 2: drop it unsent */
};

static int relay(void *arg, const char *path, const char *body, char *out, size_t cap)
{
    struct relay *rl = arg;
    /* The release Txn is the one that compares a lease (the acquire Txn
     * does not, and no renew runs here). */
    bool release = strcmp(path, "/v3/kv/txn") == 0 && strstr(body, "\"LEASE\"");
    int lose = release ? atomic_exchange(&rl->lose, 0) : 0;
    if (lose == 2)
        return -1;
    int status = ec_relay(rl->member_port, path, body, out, cap);
    return lose == 1 ? -1 : status;
}

/* A release whose answer was lost is -EAGAIN; the same thread's acquire of
 * the key is then -EDEADLK (the handle still counts it held), and calling
 * fl_release again with the same lease returns 0 whether the lost attempt
 * took effect (its entry "R E T" is recognised, or, before the deadline,
 * its entry no longer live) or not (the retry releases).  A release
 * after that 0 is -ESTALE, as on a region file.
 * I13 */
static void test_release_answer_lost(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 1);
    struct relay rl = {.member_port = c.m[0].client_port};
    int port = 0;
    ec_fake *f = ec_fake_start(relay, &rl, &port);
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    char uri[128], direct[128];
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d/lost", port);
    snprintf(direct, sizeof direct, "etcd://127.0.0.1:%d/lost", c.m[0].client_port);
    fl_region *r = NULL, *d = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    assert_int_equal(fl_open(direct, &d), 0);
    for (int lose = 1; lose <= 2; lose++) {
        fl_lease l, x;
        assert_int_equal(fl_acquire(r, "k", S(30), 0, &l), 0);
        atomic_store(&rl.lose, lose);
        int rc = fl_release(r, &l);
        if (rc != -EAGAIN)
            fail_msg("release with its answer lost (%s): %s, not -EAGAIN: %s",
                     lose == 1 ? "taken effect" : "never sent", fl_err_name(rc), fl_last_error());
        assert_int_equal(atomic_load(&rl.lose), 0); /* the relay saw it */
        /* Taken effect: the key is free at etcd; never sent: still held. */
        rc = fl_acquire(d, "k", S(30), 0, &x);
        assert_int_equal(rc, lose == 1 ? 0 : -EBUSY);
        if (rc == 0)
            assert_int_equal(fl_release(d, &x), 0);
        /* The thread may still hold it, as far as the handle knows. */
        assert_int_equal(fl_acquire(r, "k", S(30), S(1), &x), lose == 1 ? 0 : -EDEADLK);
        if (lose == 1) {
            /* The key was free: a new holding, released at once. */
            assert_int_equal(fl_release(r, &x), 0);
            continue;
        }
        rc = fl_release(r, &l);
        if (rc != 0)
            fail_msg("the retried release: %s: %s", fl_err_name(rc), fl_last_error());
        assert_int_equal(fl_release(r, &l), -ESTALE);
        assert_int_equal(fl_acquire(d, "k", S(30), 0, &x), 0);
        assert_int_equal(x.flags, 0); /* released, not expired */
        assert_int_equal(fl_release(d, &x), 0);
    }
    /* The lost attempt took effect and nobody acquired since: the retry
     * recognises its own marker. */
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &l), 0);
    atomic_store(&rl.lose, 1);
    assert_int_equal(fl_release(r, &l), -EAGAIN);
    int rc = fl_release(r, &l);
    if (rc != 0)
        fail_msg("the retry of a release that took effect: %s: %s", fl_err_name(rc),
                 fl_last_error());
    assert_int_equal(fl_release(r, &l), -ESTALE);
    fl_lease x;
    assert_int_equal(fl_acquire(d, "k", S(30), 0, &x), 0);
    assert_int_equal(x.flags, 0);
    /* ...also while someone else holds the key after it: the released
     * entry stays until that holder's release... */
    assert_int_equal(fl_acquire(r, "k2", S(30), 0, &l), 0);
    atomic_store(&rl.lose, 1);
    assert_int_equal(fl_release(r, &l), -EAGAIN);
    fl_lease y;
    assert_int_equal(fl_acquire(d, "k2", S(30), 0, &y), 0);
    assert_int_equal(y.flags, 0);
    assert_int_equal(fl_release(r, &l), 0);
    assert_int_equal(fl_release(d, &y), 0);
    /* ...which deletes it: the retry still knows, before the lease's
     * deadline (etcd cannot have ended the entry: only the lost release
     * can have), and cannot tell after it: -ESTALE. */
    assert_int_equal(fl_acquire(r, "k2", S(2), 0, &l), 0);
    atomic_store(&rl.lose, 1);
    assert_int_equal(fl_release(r, &l), -EAGAIN);
    assert_int_equal(fl_acquire(d, "k2", S(30), 0, &y), 0);
    assert_int_equal(fl_release(d, &y), 0);
    fl_lease l2 = l;
    assert_int_equal(fl_release(r, &l2), 0);
    assert_int_equal(fl_release(r, &l2), -ESTALE); /* after a definite 0, as always */
    assert_int_equal(fl_acquire(r, "k2", S(2), 0, &l), 0);
    atomic_store(&rl.lose, 1);
    assert_int_equal(fl_release(r, &l), -EAGAIN);
    assert_int_equal(fl_acquire(d, "k2", S(30), 0, &y), 0);
    assert_int_equal(fl_release(d, &y), 0);
    while (th_now_ns() < l.deadline_ns + 100 * TH_MS)
        usleep(20000); /* past the deadline: the clock is the subject here */
    assert_int_equal(fl_release(r, &l), -ESTALE);
    assert_int_equal(fl_release(d, &x), 0);
    fl_close(r);
    fl_close(d);
    ec_fake_stop(f);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
    ec_stop_all(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_no_endpoint),
        cmocka_unit_test(test_silent_endpoint),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_commit_outcome_unknown),
        cmocka_unit_test(test_dead_endpoint_skipped),
        cmocka_unit_test(test_release_answer_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
