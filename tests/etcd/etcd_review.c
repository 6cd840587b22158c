/* SPDX-License-Identifier: MIT */
/*
 * etcd_review.c - the defects a hostile review of the etcd backend
 * reproduced (issue 25, section 3), each as the scenario that showed it,
 * against a real member (and, where an answer must be lost at a chosen
 * moment, a fake that relays to it):
 *
 *   1. the epoch deleted by an operator, or set back: a new client must not
 *      number below the tokens the prefix issued (I1);
 *   2. fl_renew with another length whose answer is lost: the key must stay
 *      held, both etcd leases alive until the outcome is known (I4);
 *   3. a request curl would send again after a kept-alive connection died:
 *      an applied acquire is not "no effect" (-EHOSTUNREACH) but -EAGAIN
 *      (I14);
 *   4. a commit stuck past its -EAGAIN that arrives after a newer commit of
 *      the same lease must not replace it (I2);
 *   5. a lease used with another handle is -EINVAL, never read as whatever
 *      key that handle has at the same index (I8);
 *   6. a keepalive's failure on the streaming endpoint ({"error":{...}})
 *      is etcd's refusal, and the next endpoint is tried (I13);
 *   7. fl_close ends within about one request timeout however many revokes
 *      are queued for endpoints that do not answer (I4).
 */
#include <errno.h>
#include <inttypes.h>
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

static void tool_bump(const char *uri, char *out, size_t cap)
{
    const char *argv[] = {FENCELOCK_TOOL_PATH, "etcd-epoch", "--region", uri, "--bump", NULL};
    int st = ec_run(argv, 30000, out, cap);
    if (st != 0)
        fail_msg("fencelock etcd-epoch --bump: status %d: %s", st, out);
}

struct relay;
static int relay_start(struct relay *rl, const ec_cluster *c, bool keepalive);
static void relay_lose_txn_once(struct relay *rl);
static void relay_stop(struct relay *rl);
static struct relay *relay_new(void);

/* 1.  I1 I13 */
static void test_epoch_deleted(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 1);
    char uri[1024], out[4096];
    ec_uri(&c, 0, "gone", uri, sizeof uri);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    tool_bump(uri, out, sizeof out);
    assert_non_null(strstr(out, "epoch 1 -> 2"));
    fl_lease a;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &a), 0);
    assert_int_equal(FL_TOKEN_EPOCH(a.token), 2);
    assert_int_equal(fl_commit(r, &a, "rec", "x", 1, 0, NULL), 0);
    assert_int_equal(fl_release(r, &a), 0);
    fl_close(r);

    /* An operator deletes the epoch key. */
    assert_int_equal(ec_etcdctl(&c, 0, out, sizeof out, "del", "gone/epoch", NULL), 0);
    /* A new client would number from epoch 1 again, below a.token: refused. */
    int rc = fl_open(uri, &r);
    if (rc != -ENOTRECOVERABLE)
        fail_msg("fl_open after the epoch was deleted: %s (%s), not ENOTRECOVERABLE",
                 fl_err_name(rc), fl_last_error());
    assert_non_null(strstr(fl_last_error(), "etcd-epoch"));
    /* A reader still opens and sees what is there. */
    fl_region *ro = NULL;
    assert_int_equal(fl_open_readonly(uri, &ro), 0);
    fl_region_info info;
    assert_int_equal(fl_region_info_get(ro, &info), 0);
    assert_int_equal(info.epoch, 0);
    assert_int_equal(info.locks_used, 1);
    fl_close(ro);
    /* The bump sets an epoch above every token the prefix holds. */
    tool_bump(uri, out, sizeof out);
    assert_non_null(strstr(out, "epoch 0 -> 3"));
    assert_int_equal(fl_open(uri, &r), 0);
    fl_lease b;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &b), 0);
    assert_true(b.token > a.token);
    assert_int_equal(FL_TOKEN_EPOCH(b.token), 3);
    assert_int_equal(fl_release(r, &b), 0);
    fl_close(r);

    /* An operator sets the epoch back: a new client opens (the epoch is
     * there), but its acquisition would number below b: refused, undone. */
    assert_int_equal(ec_etcdctl(&c, 0, out, sizeof out, "put", "gone/epoch", "1", NULL), 0);
    assert_int_equal(fl_open(uri, &r), 0);
    fl_lease x;
    rc = fl_acquire(r, "k", S(30), 0, &x);
    if (rc != -ENOTRECOVERABLE)
        fail_msg("acquire under an epoch set back: %s (token %" PRIu64 ", was %" PRIu64 "): %s",
                 fl_err_name(rc), rc == 0 ? x.token : 0, b.token, fl_last_error());
    assert_non_null(strstr(fl_last_error(), "set back"));
    fl_close(r);
    /* The same with the acquire's answer lost on the way, through a relay
     * first in the list and through it alone: the check is in etcd's Txn,
     * not in the answer. */
    struct relay *rl = relay_new();
    int rport = relay_start(rl, &c, false);
    char two[256], one[256];
    snprintf(two, sizeof two, "etcd://127.0.0.1:%d,127.0.0.1:%d/gone", rport, c.m[0].client_port);
    snprintf(one, sizeof one, "etcd://127.0.0.1:%d/gone", rport);
    const char *const lossy[] = {two, one};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(fl_open(lossy[i], &r), 0);
        relay_lose_txn_once(rl);
        rc = fl_acquire(r, "k", S(30), 0, &x);
        if (rc == 0 || (rc != -ENOTRECOVERABLE && rc != -EAGAIN))
            fail_msg("acquire under an epoch set back, its answer lost (%s): %s (token %" PRIu64
                     "): %s",
                     lossy[i], fl_err_name(rc), rc == 0 ? x.token : 0, fl_last_error());
        fl_close(r);
    }
    relay_stop(rl);
    assert_int_equal(fl_open(uri, &r), 0);
    /* The marker is as it was (the key's newest entry is of epoch 3), and
     * the newest entry is b's, released. */
    assert_int_equal(ec_etcdctl(&c, 0, out, sizeof out, "get", "--print-value-only", "gone/last/k",
                                NULL), 0);
    assert_non_null(strstr(out, "q0000003"));
    assert_int_equal(ec_etcdctl(&c, 0, out, sizeof out, "get", "--prefix", "--print-value-only",
                                "gone/lock/k", NULL), 0);
    char want[40];
    snprintf(want, sizeof want, "R 0000003 %020" PRIu64, b.token);
    assert_non_null(strstr(out, want));
    fl_close(r);
    tool_bump(uri, out, sizeof out);
    assert_non_null(strstr(out, "epoch 1 -> 4"));
    assert_int_equal(fl_open(uri, &r), 0);
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &x), 0);
    assert_true(x.token > b.token);
    assert_int_equal(fl_release(r, &x), 0);
    fl_close(r);
    ec_stop_all(&c);
}

/* ---- a relay to a real member that loses chosen answers ---- */

enum lose {
    LOSE_NONE,
    LOSE_RENEW_MOVE, /* the renew Txn that moves the key: sent on, its answer lost */
    LOSE_ACQUIRE,    /* the acquire Txn: sent on, the connection closed, no more listening */
    HOLD_COMMIT,     /* the next commit: kept, unanswered, until the test sends it on */
    FAIL_KEEPALIVE,  /* lease keepalives: a streaming error, as etcd's no leader */
    HOLD_REVOKE,     /* lease revokes: never answered */
    LOSE_TXN_ONCE,   /* the next Txn: sent on, the connection closed without its answer */
    HOLD_TXN_AUTH,   /* the next Txn: sent on, its answer held; then authentications:
                        never answered (a timeout, then a re-login that fails) */
};

struct relay {
    ec_fake *fake;
    int member_port;
    _Atomic int lose; /* enum lose */
    _Atomic int hits; /* requests the rule caught */
    char held[1 << 14];
    _Atomic bool holding;
};

static int relay(void *arg, const char *path, const char *body, char *out, size_t cap)
{
    struct relay *rl = arg;
    int lose = atomic_load(&rl->lose);
    bool txn = strcmp(path, "/v3/kv/txn") == 0;
    switch (lose) {
    case LOSE_RENEW_MOVE:
        if (txn && strstr(body, "ignore_value")) {
            atomic_fetch_add(&rl->hits, 1);
            ec_relay(rl->member_port, path, body, out, cap);
            return 0; /* applied; the answer lost */
        }
        break;
    case LOSE_ACQUIRE:
        if (txn && strstr(body, "request_put") && !strstr(body, "request_delete_range") &&
            atomic_fetch_add(&rl->hits, 1) == 0) {
            ec_relay(rl->member_port, path, body, out, cap);
            ec_fake_stop_listening(rl->fake); /* curl's resend finds nobody */
            return 0;
        }
        break;
    case HOLD_COMMIT:
        /* The commit Txn: the one with a compare on a rec/ value. */
        if (txn && strstr(body, "\"VALUE\"") && !atomic_load(&rl->holding)) {
            snprintf(rl->held, sizeof rl->held, "%s", body);
            atomic_store(&rl->holding, true);
            atomic_fetch_add(&rl->hits, 1);
            return -1; /* never answered */
        }
        break;
    case FAIL_KEEPALIVE:
        if (strcmp(path, "/v3/lease/keepalive") == 0) {
            atomic_fetch_add(&rl->hits, 1);
            snprintf(out, cap, "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":"
                               "\"etcdserver: no leader\",\"http_status\":\"Service "
                               "Unavailable\"}}");
            return 200;
        }
        break;
    case HOLD_REVOKE:
        if (strcmp(path, "/v3/lease/revoke") == 0) {
            atomic_fetch_add(&rl->hits, 1);
            return -1;
        }
        break;
    case LOSE_TXN_ONCE:
        if (txn && !atomic_load(&rl->holding)) {
            atomic_store(&rl->holding, true);
            atomic_fetch_add(&rl->hits, 1);
            ec_relay(rl->member_port, path, body, out, cap);
            return 0;
        }
        break;
    case HOLD_TXN_AUTH:
        if (txn && !atomic_load(&rl->holding)) {
            atomic_store(&rl->holding, true);
            atomic_fetch_add(&rl->hits, 1);
            ec_relay(rl->member_port, path, body, out, cap); /* it takes effect */
            return -1;                                       /* no answer: a timeout */
        }
        if (strcmp(path, "/v3/auth/authenticate") == 0)
            return -1;
        break;
    default:
        break;
    }
    int st = ec_relay(rl->member_port, path, body, out, cap);
    return st;
}

static struct relay *relay_new(void)
{
    struct relay *rl = calloc(1, sizeof *rl);
    assert_non_null(rl);
    return rl;
}

static void relay_lose_txn_once(struct relay *rl)
{
    atomic_store(&rl->holding, false);
    atomic_store(&rl->lose, LOSE_TXN_ONCE);
}

static void relay_stop(struct relay *rl)
{
    ec_fake_stop(rl->fake);
    free(rl);
}

/* A relay fake in front of member 0: its port. */
static int relay_start(struct relay *rl, const ec_cluster *c, bool keepalive)
{
    memset(rl, 0, sizeof *rl);
    rl->member_port = c->m[0].client_port;
    int port = 0;
    rl->fake = keepalive ? ec_fake_start_keepalive(relay, rl, &port)
                         : ec_fake_start(relay, rl, &port);
    return port;
}

/* What tests 2 to 4 start from: one member, a relay in front of it, a
 * handle r through the relay and a handle d straight to the member, both on
 * prefix, with a request timeout of 500 ms. */
struct scene {
    ec_cluster c;
    struct relay rl;
    fl_region *r, *d;
};

static void scene_start(struct scene *sc, const char *prefix, bool keepalive)
{
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    ec_start(&sc->c, 1);
    int port = relay_start(&sc->rl, &sc->c, keepalive);
    char uri[256], direct[256];
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d/%s", port, prefix);
    snprintf(direct, sizeof direct, "etcd://127.0.0.1:%d/%s", sc->c.m[0].client_port, prefix);
    assert_int_equal(fl_open(uri, &sc->r), 0);
    assert_int_equal(fl_open(direct, &sc->d), 0);
}

static void scene_stop(struct scene *sc)
{
    fl_close(sc->r);
    fl_close(sc->d);
    ec_fake_stop(sc->rl.fake);
    ec_stop_all(&sc->c);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
}

/* 2.  I4 I13 */
static void test_renew_answer_lost(void **state)
{
    (void)state;
    struct scene sc;
    scene_start(&sc, "renew", false);
    fl_region *r = sc.r, *d = sc.d;
    struct relay *rl = &sc.rl;
    fl_lease l, x;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &l), 0);
    /* Another length: a new etcd lease of 3 s, and the key moved to it; the
     * answer of the move is lost. */
    atomic_store(&rl->lose, LOSE_RENEW_MOVE);
    uint64_t before = th_now_ns();
    int rc = fl_renew(r, &l, S(3));
    atomic_store(&rl->lose, LOSE_NONE);
    if (rc != -EAGAIN)
        fail_msg("a renew whose move was lost: %s (%s), not EAGAIN", fl_err_name(rc),
                 fl_last_error());
    assert_int_equal(atomic_load(&rl->hits), 1);
    /* The key is on the new lease; neither was revoked: still held. */
    assert_int_equal(fl_acquire(d, "k", S(30), 0, &x), -EBUSY);
    /* The deadline is what the shorter lease lasts: never past 3 s. */
    assert_true(l.deadline_ns <= before + S(3) + 500 * TH_MS);
    assert_true(l.deadline_ns > th_now_ns());
    /* The next renew learns which lease the key is on and keeps it. */
    assert_int_equal(fl_renew(r, &l, S(3)), 0);
    assert_int_equal(fl_check(r, &l), 0);
    assert_int_equal(fl_acquire(d, "k", S(30), 0, &x), -EBUSY);
    assert_int_equal(fl_release(r, &l), 0);
    assert_int_equal(fl_acquire(d, "k", S(30), 0, &x), 0);
    assert_int_equal(x.flags, 0); /* released, not expired */
    assert_int_equal(fl_release(d, &x), 0);
    scene_stop(&sc);
}

/* 3.  I14 I13 */
static void test_resend_is_unknown(void **state)
{
    (void)state;
    struct scene sc;
    scene_start(&sc, "resend", true); /* r's connection stays open */
    fl_region *r = sc.r, *d = sc.d;
    struct relay *rl = &sc.rl;
    /* The acquire Txn reaches etcd over the kept-alive connection, which
     * then closes without an answer; a new connection is refused. */
    atomic_store(&rl->lose, LOSE_ACQUIRE);
    fl_lease l, x;
    int rc = fl_acquire(r, "k", S(30), 0, &l);
    if (rc != -EAGAIN)
        fail_msg("an acquire that reached etcd, its answer lost: %s (%s), not EAGAIN",
                 fl_err_name(rc), fl_last_error());
    assert_int_equal(atomic_load(&rl->hits), 1);
    /* It did take effect: the key is held (by a lease the library revokes
     * or that ends by itself). */
    rc = fl_acquire(d, "k", S(30), 0, &x);
    assert_true(rc == -EBUSY || rc == 0); /* 0: the library's revoke got there first */
    if (rc == 0)
        assert_int_equal(fl_release(d, &x), 0);
    scene_stop(&sc);
}

/* 4.  I2 I3 I13 */
static void test_late_commit_never_overwrites(void **state)
{
    (void)state;
    struct scene sc;
    scene_start(&sc, "late", false);
    fl_region *r = sc.r;
    struct relay *rl = &sc.rl;
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &l), 0);
    assert_int_equal(fl_commit(r, &l, "rec", "v0", 2, 0, NULL), 0);
    /* The commit of "old" is stuck: no answer, -EAGAIN. */
    atomic_store(&rl->lose, HOLD_COMMIT);
    assert_int_equal(fl_commit(r, &l, "rec", "old", 3, 0, NULL), -EAGAIN);
    atomic_store(&rl->lose, LOSE_NONE);
    assert_true(atomic_load(&rl->holding));
    char buf[16];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), 0);
    assert_memory_equal(buf, "v0", 2); /* it has not taken effect (yet) */
    /* The holder commits newer data with the same lease: accepted. */
    assert_int_equal(fl_commit(r, &l, "rec", "new", 3, 0, NULL), 0);
    /* Now the stuck commit arrives at etcd. */
    char ans[4096];
    assert_int_equal(ec_relay(sc.c.m[0].client_port, "/v3/kv/txn", rl->held, ans, sizeof ans),
                     200);
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), 0);
    if (len != 3 || memcmp(buf, "new", 3) != 0)
        fail_msg("the late commit replaced the acknowledged one: the record holds '%.*s'",
                 (int)len, buf);
    assert_int_equal(fence, l.token);
    /* The next commit of the lease still goes. */
    assert_int_equal(fl_commit(r, &l, "rec", "next", 4, 0, NULL), 0);
    assert_int_equal(fl_release(r, &l), 0);
    scene_stop(&sc);
}

/* 1b (found by the review of the fixes): on a cluster with users, an
 * attempt that timed out makes the token suspect, and the re-login that
 * follows fails too: the call must still say "unknown" (-EAGAIN), never the
 * re-login's "no endpoint answered", since the first attempt took effect.
 * A renew then keeps both leases; a release is retried.  I14 I4 I13 */
static void test_lost_answer_then_relogin_fails(void **state)
{
    (void)state;
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    ec_cluster c;
    ec_start(&c, 1);
    ec_enable_auth(&c);
    char uri[1024], direct[1024];
    ec_uri(&c, 0, "relogin", direct, sizeof direct); /* grants worker relogin/ */
    struct relay rl;
    int port = relay_start(&rl, &c, false);
    snprintf(uri, sizeof uri, "etcd://" EC_WORKER "@127.0.0.1:%d/relogin?password-file=%s", port,
             c.password_file);
    snprintf(direct, sizeof direct, "etcd://" EC_WORKER "@127.0.0.1:%d/relogin?password-file=%s",
             c.m[0].client_port, c.password_file);
    fl_region *r = NULL, *d = NULL;
    int rc = fl_open(uri, &r);
    if (rc != 0)
        fail_msg("open %s: %s", uri, fl_last_error());
    assert_int_equal(fl_open(direct, &d), 0);
    fl_lease l, x;
    /* A renew with another length: the move takes effect, its answer times
     * out, the re-login gets no answer. */
    assert_int_equal(fl_acquire(r, "k", S(10), 0, &l), 0);
    atomic_store(&rl.lose, HOLD_TXN_AUTH);
    rc = fl_renew(r, &l, S(20));
    atomic_store(&rl.lose, LOSE_NONE);
    if (rc != -EAGAIN)
        fail_msg("renew, its move applied, the answer and the re-login lost: %s (%s), not "
                 "EAGAIN", fl_err_name(rc), fl_last_error());
    assert_int_equal(atomic_load(&rl.hits), 1);
    assert_int_equal(fl_acquire(d, "k", S(10), 0, &x), -EBUSY); /* still held */
    assert_int_equal(fl_renew(r, &l, S(20)), 0);                 /* settled */
    assert_int_equal(fl_acquire(d, "k", S(10), 0, &x), -EBUSY);
    /* A release, the same way: unknown, then the retry says 0. */
    atomic_store(&rl.holding, false);
    atomic_store(&rl.lose, HOLD_TXN_AUTH);
    rc = fl_release(r, &l);
    atomic_store(&rl.lose, LOSE_NONE);
    if (rc != -EAGAIN)
        fail_msg("release, applied, the answer and the re-login lost: %s (%s), not EAGAIN",
                 fl_err_name(rc), fl_last_error());
    rc = fl_release(r, &l);
    if (rc != 0)
        fail_msg("the retried release: %s (%s)", fl_err_name(rc), fl_last_error());
    assert_int_equal(fl_acquire(d, "k", S(10), 0, &x), 0);
    assert_int_equal(x.flags, 0); /* released, not expired */
    assert_int_equal(fl_release(d, &x), 0);
    fl_close(r);
    fl_close(d);
    ec_fake_stop(rl.fake);
    ec_stop_all(&c);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
}

/* 2b (the same review): a stopped member must not hold every commit: after
 * a commit's -EAGAIN the next request goes to the next endpoint.  I13 */
static void test_stopped_member_moves_on(void **state)
{
    (void)state;
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    ec_cluster c;
    ec_start(&c, 3);
    int leader = ec_leader(&c, 10000);
    int stop = (leader + 1) % 3, other = (leader + 2) % 3;
    /* the member to be stopped first in the list */
    char first[1024];
    snprintf(first, sizeof first, "etcd://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/moveon",
             c.m[stop].client_port, c.m[leader].client_port, c.m[other].client_port);
    fl_region *r = NULL;
    assert_int_equal(fl_open(first, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &l), 0);
    ec_pause(&c, stop);
    int eagain = 0;
    for (int i = 0; i < 4; i++) {
        int rc = fl_commit(r, &l, "rec", "x", 1, 0, NULL);
        if (rc == -EAGAIN)
            eagain++;
        else if (rc != 0)
            fail_msg("commit %d with a member stopped: %s (%s)", i, fl_err_name(rc),
                     fl_last_error());
    }
    /* at most the first, sent to the stopped member */
    assert_true(eagain <= 1);
    ec_resume(&c, stop);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    ec_stop_all(&c);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
}

/* 5.  I8 I13 */
static void test_foreign_lease(void **state)
{
    (void)state;
    ec_cluster c;
    ec_start(&c, 1);
    char uri[1024];
    ec_uri(&c, 0, "foreign", uri, sizeof uri);
    fl_region *h1 = NULL, *h2 = NULL;
    assert_int_equal(fl_open(uri, &h1), 0);
    assert_int_equal(fl_open(uri, &h2), 0);
    /* h2 knows "b" at its index 0, h1 knows "a" there. */
    fl_lease b1, a, b2;
    assert_int_equal(fl_acquire(h2, "b", S(30), 0, &b1), 0);
    assert_int_equal(fl_commit(h2, &b1, "rb", "b1", 2, 0, NULL), 0);
    assert_int_equal(fl_release(h2, &b1), 0);
    assert_int_equal(fl_acquire(h1, "a", S(30), 0, &a), 0);
    assert_int_equal(b1.slot, a.slot);
    assert_int_equal(fl_acquire(h2, "b", S(30), 0, &b2), 0); /* b issued past a's token */
    assert_true(b2.token > a.token);
    /* a's lease given to h2: refused, not read as "b". */
    assert_int_equal(fl_commit(h2, &a, "rb", "a!", 2, 0, NULL), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "another region handle"));
    assert_int_equal(fl_renew(h2, &a, S(30)), -EINVAL);
    assert_int_equal(fl_check(h2, &a), -EINVAL);
    assert_int_equal(fl_release(h2, &a), -EINVAL);
    fl_lease zero;
    memset(&zero, 0, sizeof zero);
    zero.token = a.token;
    assert_int_equal(fl_commit(h1, &zero, "ra", "z", 1, 0, NULL), -EINVAL);
    char buf[8];
    size_t len;
    uint64_t fence;
    assert_int_equal(fl_read(h1, "rb", buf, sizeof buf, &len, &fence), 0);
    assert_memory_equal(buf, "b1", 2);
    /* With its own handle, every call works. */
    assert_int_equal(fl_commit(h1, &a, "ra", "a", 1, 0, NULL), 0);
    assert_int_equal(fl_release(h1, &a), 0);
    assert_int_equal(fl_release(h2, &b2), 0);
    fl_close(h1);
    fl_close(h2);
    ec_stop_all(&c);
}

/* 6.  I13 */
static void test_keepalive_stream_error(void **state)
{
    (void)state;
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    ec_cluster c;
    ec_start(&c, 1);
    struct relay rl;
    int port = relay_start(&rl, &c, false);
    char uri[256];
    /* The fake first, the member itself second. */
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d,127.0.0.1:%d/stream", port,
             c.m[0].client_port);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &l), 0);
    atomic_store(&rl.lose, FAIL_KEEPALIVE);
    int rc = fl_renew(r, &l, S(30)); /* the same length: a keepalive */
    if (rc != 0)
        fail_msg("a keepalive refused by the first endpoint (no leader): %s (%s), not 0 "
                 "from the second", fl_err_name(rc), fl_last_error());
    assert_int_equal(atomic_load(&rl.hits), 1);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    ec_fake_stop(rl.fake);
    ec_stop_all(&c);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
}

/* 7.  I4 I13 */
static void test_close_bounded(void **state)
{
    (void)state;
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "400", 1);
    ec_cluster c;
    ec_start(&c, 1);
    struct relay rl1, rl2;
    int p1 = relay_start(&rl1, &c, false), p2 = relay_start(&rl2, &c, false);
    char uri[256];
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d,127.0.0.1:%d/close", p1, p2);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    /* Revokes are never answered, by either endpoint: each takes 2 x 400 ms
     * in the revoker, and ten of them queue up. */
    atomic_store(&rl1.lose, HOLD_REVOKE);
    atomic_store(&rl2.lose, HOLD_REVOKE);
    for (int i = 0; i < 10; i++) {
        fl_lease l;
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(fl_acquire(r, key, S(30), 0, &l), 0);
        assert_int_equal(fl_release(r, &l), 0);
    }
    fl_lease held;
    assert_int_equal(fl_acquire(r, "held", S(30), 0, &held), 0);
    uint64_t t0 = th_now_ns();
    fl_close(r); /* and one holding to abandon */
    uint64_t took = th_now_ns() - t0;
    /* About one request timeout; the queue alone would take 8 s. */
    if (took > 6 * 400 * TH_MS)
        fail_msg("fl_close took %" PRIu64 " ms with 10 revokes queued (timeout 400 ms)",
                 took / TH_MS);
    ec_fake_stop(rl1.fake);
    ec_fake_stop(rl2.fake);
    ec_stop_all(&c);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch_deleted),
        cmocka_unit_test(test_renew_answer_lost),
        cmocka_unit_test(test_lost_answer_then_relogin_fails),
        cmocka_unit_test(test_stopped_member_moves_on),
        cmocka_unit_test(test_resend_is_unknown),
        cmocka_unit_test(test_late_commit_never_overwrites),
        cmocka_unit_test(test_foreign_lease),
        cmocka_unit_test(test_keepalive_stream_error),
        cmocka_unit_test(test_close_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
