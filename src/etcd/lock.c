/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the transactions of leased locks on etcd: acquire (its waiting:
 * wait.c), release, check and renew.  The keys they write are laid out in
 * etcd.h (LAYOUT); the handle's key table is keys.c, its leases lease.c.
 *
 * ACQUIRE is one Txn, after a lease grant:
 *
 *   compare  lock/KEY create_revision == 0       (nobody holds KEY)
 *            epoch value == "E"                   (the epoch we number with)
 *            last/KEY create_revision == 0        (KEY's first holding)
 *   success  TAKE: put lock/KEY "E PID HOST" lease L
 *                  put last/KEY "%07E H" prev_kv  (how the last holding ended)
 *   failure  Txn: compare  lock/KEY create_revision == 0
 *                          epoch value == "E"
 *                          last/KEY value < "%07(E+1)"   (its epoch is E or less)
 *                 success  TAKE
 *                 failure  range lock/KEY, range epoch, range last/KEY
 *
 * Its revision r is the lock key's create_revision, and the token is
 * E << 40 | r: strictly increasing per key (I1), since every later creation
 * of lock/KEY happens at a greater revision, and every later epoch is
 * greater.  Every marker starts with the epoch of the holding it tells of,
 * in seven digits, so the value compare says in the same step that KEY
 * never issued a token of a later epoch: an epoch an operator set back
 * (etcdctl put PREFIX/epoch, smaller) numbers nothing, whatever answers are
 * lost (-ENOTRECOVERABLE until the bump).  A holding's deadline: lease.c.
 *
 * A Txn whose answer was lost may be sent again to the next endpoint
 * (FL__ETCD_REPEATABLE): a repetition that finds lock/KEY held by our own
 * lease L knows the first attempt took effect, and returns that holding
 * (L is unique to this call).  A lease left over from an attempt the caller
 * never learned of ends by itself: at most one lease of waiting for others.
 *
 * RELEASE is one Txn:
 *
 *   compare  lock/KEY create_revision == r, lease == L
 *   success  delete lock/KEY; put last/KEY "%07E R %020T"
 *   failure  Txn: compare  lock/KEY create_revision == 0  (gone: lease ended)
 *                          last/KEY mod_revision == r      (nobody acquired since)
 *                          last/KEY value == "%07E H"
 *                 success  put last/KEY "... R T"   (released normally, as on
 *                                                shared memory: no other
 *                                                holder can have overlapped)
 *                 failure  range lock/KEY, range last/KEY
 *
 * then revokes L.  RENEW keeps L alive (keepalive, which renews to L's
 * granted TTL) and then checks that lock/KEY is still this holding; when the
 * caller asks for another length, it grants L2 and moves the key to it in a
 * Txn comparing create_revision == r and lease == L, then revokes L.  If that
 * Txn's answer is lost, the key is on L or on L2 and nobody knows which:
 * revoking either could end the holding under its holder.  So both stay
 * (the handle notes L2 as moving_lease), the caller's deadline becomes the
 * earlier of the two leases' (the holding lasts at least that long either
 * way), renew answers -EAGAIN, and the next renew, release or check reads
 * the key, keeps the lease it is on and lets the other go.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

static uint64_t fl__rev(uint64_t token) { return token & (FL__ETCD_REV_LIMIT - 1); }
static uint64_t fl__epoch_of(uint64_t token) { return token >> FL__ETCD_EPOCH_SHIFT; }

/* ---- values ---- */

static int fl__lock_value(const struct fl__etcd *e, uint64_t epoch, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%" PRIu64 " %" PRIu32 " %s", epoch, e->h.pid, e->host);
}

int fl__etcd_lock_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                        uint64_t *epoch, uint32_t *pid)
{
    const unsigned char *v = kv->value;
    size_t n = kv->value_len, i = 0;
    uint64_t e = 0, p = 0;
    while (i < n && i < 8 && v[i] >= '0' && v[i] <= '9')
        e = e * 10 + (uint64_t)(v[i++] - '0');
    if (i == 0 || i == n || v[i] != ' ' || e == 0 || e >= FL__ETCD_EPOCH_LIMIT)
        goto bad;
    size_t j = ++i;
    while (i < n && i - j < 10 && v[i] >= '0' && v[i] <= '9')
        p = p * 10 + (uint64_t)(v[i++] - '0');
    if (i == j || p > UINT32_MAX)
        goto bad;
    *epoch = e;
    *pid = (uint32_t)p;
    return 0;
bad:
    return fl__fail(-EPROTO, "etcd %s %s: the lock key %.*s holds '%.*s', not \"EPOCH PID HOST\"",
                    rp->endpoint, rp->op, (int)kv->key_len, (const char *)kv->key,
                    (int)(n > 60 ? 60 : n), v ? (const char *)v : "");
}

int fl__etcd_mark_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                        char *state, uint64_t *token)
{
    /* "%07E H" (9 bytes), "%07E R %020T" / "%07E D %020T" (30 bytes) */
    const unsigned char *v = kv->value;
    size_t n = kv->value_len;
    uint64_t e = 0, x = 0;
    if (n < 9 || v[7] != ' ')
        goto bad;
    for (size_t i = 0; i < 7; i++) {
        if (v[i] < '0' || v[i] > '9')
            goto bad;
        e = e * 10 + (uint64_t)(v[i] - '0');
    }
    if (e == 0 || e >= FL__ETCD_EPOCH_LIMIT)
        goto bad;
    char st = (char)v[8];
    if (st == 'H') {
        if (n != 9 || kv->mod_revision >= FL__ETCD_REV_LIMIT)
            goto bad;
        x = e << FL__ETCD_EPOCH_SHIFT | kv->mod_revision;
    } else if (st == 'R' || st == 'D') {
        if (n != 10 + FL__ETCD_TOKEN_DIGITS || v[9] != ' ')
            goto bad;
        for (size_t i = 10; i < n; i++) {
            if (v[i] < '0' || v[i] > '9')
                goto bad;
            x = x * 10 + (uint64_t)(v[i] - '0');
            if (x > (uint64_t)INT64_MAX)
                goto bad;
        }
        if (x == 0 || x >> FL__ETCD_EPOCH_SHIFT != e)
            goto bad;
    } else
        goto bad;
    *state = st;
    *token = x;
    return 0;
bad:
    return fl__fail(-EPROTO, "etcd %s %s: the marker %.*s holds '%.*s', not \"EPOCH H\", "
                             "\"EPOCH R TOKEN\" or \"EPOCH D TOKEN\"",
                    rp->endpoint, rp->op, (int)kv->key_len, (const char *)kv->key,
                    (int)(n > 60 ? 60 : n), v ? (const char *)v : "");
}

/* The token of a lock key's holding (its epoch from the value). */
static int fl__holder_token(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                            uint64_t *token)
{
    uint64_t epoch;
    uint32_t pid;
    int err = fl__etcd_lock_parse(rp, kv, &epoch, &pid);
    if (err)
        return err;
    if (kv->create_revision >= FL__ETCD_REV_LIMIT)
        return fl__fail(-EOVERFLOW, "etcd %s: revision %" PRIu64 " does not fit a token "
                                    "(2^40 or more): bump the epoch and compact",
                        rp->endpoint, kv->create_revision);
    *token = epoch << FL__ETCD_EPOCH_SHIFT | kv->create_revision;
    return 0;
}

/* ---- the acquire Txn (its waiting: wait.c) ---- */

/* A marker's value (etcd.h, LAYOUT): "%07E H", "%07E R %020T", "%07E D %020T". */
static int fl__mark_value(char *buf, size_t cap, uint64_t epoch, char state, uint64_t token)
{
    return state == 'H' ? snprintf(buf, cap, "%07" PRIu64 " H", epoch)
                        : snprintf(buf, cap, "%07" PRIu64 " %c %020" PRIu64, epoch, state, token);
}

/* The acquire Txn's answer when it succeeded: the put of the marker, with
 * the marker it replaced (prev_kv), at responses[put_index] of txn. */
static int fl__acquire_won(struct fl__etcd_reply *rp, const json_t *txn, uint64_t epoch,
                           struct fl__etcd_try *t)
{
    json_t *put = NULL, *prev = NULL;
    int err = fl__etcd_txn_resp(rp, txn, 1, "response_put", &put);
    if (!err)
        err = fl__etcd_obj(rp, put, "prev_kv", &prev);
    if (!err && prev) {
        struct fl__etcd_kv mark;
        err = fl__etcd_kv_parse(rp, prev, FL__ETCD_MARK_MAX, &mark);
        char state = 0;
        uint64_t prev_token = 0;
        if (!err)
            err = fl__etcd_mark_parse(rp, &mark, &state, &prev_token);
        if (!err && state == 'H')
            t->flags = FL_LEASE_EXPIRED; /* the previous holding ended unreleased */
        else if (!err && state == 'D')
            t->flags = FL_LEASE_OWNER_DIED; /* its handle was closed holding it */
        fl__etcd_kv_free(&mark);
    }
    if (err)
        return err;
    if (rp->revision >= FL__ETCD_REV_LIMIT)
        return fl__fail(-EOVERFLOW, "etcd %s: revision %" PRIu64 " does not fit a token "
                                    "(2^40 or more): bump the epoch",
                        rp->endpoint, rp->revision);
    t->won = true;
    t->token = epoch << FL__ETCD_EPOCH_SHIFT | rp->revision;
    return 0;
}

int fl__etcd_acquire_txn(struct fl__etcd *e, const struct fl__etcd_keys *k, uint64_t lease,
                         struct fl__etcd_try *t)
{
    memset(t, 0, sizeof *t);
    uint64_t epoch = atomic_load_explicit(&e->c.epoch, memory_order_relaxed);
    char ev[FL__ETCD_EPOCH_TEXT_MAX], lv[FL__ETCD_LOCK_VALUE_MAX], mv[FL__ETCD_MARK_MAX],
        bound[FL__ETCD_MARK_MAX];
    int evn = snprintf(ev, sizeof ev, "%" PRIu64, epoch);
    int lvn = fl__lock_value(e, epoch, lv, sizeof lv);
    int mvn = fl__mark_value(mv, sizeof mv, epoch, 'H', 0);
    /* Below "%07(E+1)": a marker of epoch E or earlier (see ACQUIRE). */
    int bn = snprintf(bound, sizeof bound, "%07" PRIu64, epoch + 1);
#define FL__TAKE()                                                                            \
    fl__etcd_list(fl__etcd_op_put(k->lock, k->lock_len, lv, (size_t)lvn, lease, false),         \
                  fl__etcd_op_put(k->last, k->last_len, mv, (size_t)mvn, 0, true), FL__ETCD_END)
    json_t *inner = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(k->lock, k->lock_len, "CREATE", "EQUAL", 0),
                      fl__etcd_cmp_value(k->epoch, k->epoch_len, "EQUAL", ev, (size_t)evn),
                      fl__etcd_cmp_value(k->last, k->last_len, "LESS", bound, (size_t)bn),
                      FL__ETCD_END),
        FL__TAKE(),
        fl__etcd_list(fl__etcd_op_range(k->lock, k->lock_len),
                      fl__etcd_op_range(k->epoch, k->epoch_len),
                      fl__etcd_op_range(k->last, k->last_len), FL__ETCD_END));
    json_t *req = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(k->lock, k->lock_len, "CREATE", "EQUAL", 0),
                      fl__etcd_cmp_value(k->epoch, k->epoch_len, "EQUAL", ev, (size_t)evn),
                      fl__etcd_cmp_rev(k->last, k->last_len, "CREATE", "EQUAL", 0),
                      FL__ETCD_END),
        FL__TAKE(), fl__etcd_list(fl__etcd_op_txn(inner), FL__ETCD_END));
#undef FL__TAKE
    struct fl__etcd_reply rp;
    bool ok = false;
    int err = fl__etcd_request(&e->c, "/v3/kv/txn", "acquire txn", req,
                               FL__ETCD_REPEATABLE | FL__ETCD_GUARD | FL__ETCD_GONE, &rp, &ok);
    if (err == -ENOENT) {
        err = 1; /* "requested lease not found": our lease ran out first */
        goto out;
    }
    if (err)
        goto out;
    t->revision = rp.revision;
    if (ok) { /* the key's first holding */
        err = fl__acquire_won(&rp, rp.body, epoch, t);
        goto out;
    }
    json_t *sub = NULL;
    if (!err)
        err = fl__etcd_txn_resp(&rp, rp.body, 0, "response_txn", &sub);
    if (!err)
        err = fl__etcd_txn_result(&rp, sub, &ok);
    if (!err && ok) {
        err = fl__acquire_won(&rp, sub, epoch, t);
        goto out;
    }
    json_t *lock_range = NULL, *epoch_range = NULL, *last_range = NULL;
    if (!err)
        err = fl__etcd_txn_resp(&rp, sub, 0, "response_range", &lock_range);
    if (!err)
        err = fl__etcd_txn_resp(&rp, sub, 1, "response_range", &epoch_range);
    if (!err)
        err = fl__etcd_txn_resp(&rp, sub, 2, "response_range", &last_range);
    if (err)
        goto out;
    struct fl__etcd_kv kv;
    int found = fl__etcd_range_first(&rp, epoch_range, 64, &kv);
    if (found < 0) {
        err = found;
        goto out;
    }
    if (found == 0) {
        err = fl__fail(-ENOTRECOVERABLE,
                       "etcd %s: the epoch key %.*s is gone (deleted?): no token can be "
                       "numbered safely; `fencelock etcd-epoch --region URI --bump` sets one "
                       "above every token the prefix holds",
                       rp.endpoint, (int)k->epoch_len, k->epoch);
        goto out;
    }
    uint64_t now_epoch = 0;
    err = fl__etcd_epoch_parse(&rp, &kv, &now_epoch);
    fl__etcd_kv_free(&kv);
    if (!err && now_epoch != epoch) {
        err = fl__etcd_epoch_note(&e->c, now_epoch); /* -ENOTRECOVERABLE if lower */
        t->epoch_moved = true;
    }
    if (err)
        goto out;
    found = fl__etcd_range_first(&rp, lock_range, FL__ETCD_LOCK_VALUE_MAX, &kv);
    if (found < 0) {
        err = found;
        goto out;
    }
    if (found == 1) {
        err = fl__holder_token(&rp, &kv, &t->token);
        t->holder_lease = kv.lease;
        fl__etcd_kv_free(&kv);
        goto out;
    }
    if (t->epoch_moved)
        goto out;
    /* Free, under the epoch we numbered with: the marker names a later
     * epoch.  The epoch was set back (etcdctl put PREFIX/epoch, a smaller
     * value): no token of it may be handed out (I1). */
    found = fl__etcd_range_first(&rp, last_range, FL__ETCD_MARK_MAX, &kv);
    char state = 0;
    uint64_t prev = 0;
    if (found == 1) {
        err = fl__etcd_mark_parse(&rp, &kv, &state, &prev);
        fl__etcd_kv_free(&kv);
    } else if (found < 0)
        err = found;
    if (!err && found == 1)
        err = fl__fail(-ENOTRECOVERABLE,
                       "etcd %s: key \"%.*s\" issued token %" PRIu64 " under epoch %" PRIu64
                       ", and the prefix's epoch is %" PRIu64 " now: the epoch was set back; "
                       "no token is handed out until `fencelock etcd-epoch --region URI "
                       "--bump` (it sets an epoch above every token the prefix holds)",
                       rp.endpoint, (int)(k->last_len - (e->c.uri.prefix_len + 6)),
                       k->last + e->c.uri.prefix_len + 6, prev,
                       (uint64_t)(prev >> FL__ETCD_EPOCH_SHIFT), epoch);
    else if (!err)
        err = fl__fail(-EPROTO, "etcd %s acquire txn: failed, yet the key is free under the "
                                "same epoch",
                       rp.endpoint);
out:
    fl__etcd_reply_free(&rp);
    return err;
}

/* ---- release, check, renew ---- */

static int fl__lease_args(struct fl__etcd *e, const struct fl__etcd_lease *l, const char *fn,
                          char key[FL_KEY_MAX + 1])
{
    if (e->h.readonly && strcmp(fn, "fl_check") != 0)
        return fl__fail(-EINVAL, "%s: read-only region handle", fn);
    if (l->token == 0 || fl__rev(l->token) == 0)
        return fl__fail(-EINVAL, "%s: token %" PRIu64 " was never issued", fn, l->token);
    if (fl__etcd_slot_key(e, l->slot, key, NULL) != 0)
        return fl__fail(-EINVAL, "%s: bad slot %" PRIu32 " (not a key this handle used)", fn,
                        l->slot);
    return 0;
}

/* Range lock/KEY: 0 and whether it is the holding (token, lease; lease 0:
 * any), with *lease_out its lease. */
static int fl__is_holding(struct fl__etcd *e, const struct fl__etcd_keys *k, uint64_t token,
                          uint64_t lease, bool *ours, uint64_t *lease_out)
{
    *ours = false;
    json_t *req = json_pack("{s:o}", "key", fl__etcd_b64(k->lock, k->lock_len));
    struct fl__etcd_reply rp;
    int err = fl__etcd_request(&e->c, "/v3/kv/range", "range lock", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_KV, &rp, NULL);
    struct fl__etcd_kv kv = {0}; /* clang-analyzer cannot see that err is never above 0 */
    int found = err ? err : fl__etcd_range_first(&rp, rp.body, FL__ETCD_LOCK_VALUE_MAX, &kv);
    if (found == 1) {
        uint64_t holder = 0;
        err = fl__holder_token(&rp, &kv, &holder);
        if (!err && holder == token && (lease == 0 || kv.lease == lease)) {
            *ours = true;
            if (lease_out)
                *lease_out = kv.lease;
        }
        fl__etcd_kv_free(&kv);
    } else if (found < 0)
        err = found;
    fl__etcd_reply_free(&rp);
    return err;
}

/* A renew whose move of the key had no known outcome left two leases (RENEW):
 * read the key, keep the lease it is on, let the other go.  Still unknown
 * (the read failed): both stay, and the error is returned. */
static int fl__settle_move(struct fl__etcd *e, uint32_t slot, uint64_t token,
                           const struct fl__etcd_keys *k)
{
    pthread_mutex_lock(&e->lock);
    struct fl__etcd_key *key = slot < e->nkeys ? e->keys[slot] : NULL;
    uint64_t moving = key && key->held_token == token ? key->moving_lease : 0;
    pthread_mutex_unlock(&e->lock);
    if (!moving)
        return 0;
    bool ours = false;
    uint64_t on = 0;
    int err = fl__is_holding(e, k, token, 0, &ours, &on);
    if (err)
        return err;
    uint64_t drop[2] = {0, 0};
    pthread_mutex_lock(&e->lock);
    if (key->held_token == token && key->moving_lease == moving) {
        uint64_t old = key->held_lease;
        if (ours && on == moving) { /* the move took effect */
            key->held_lease = moving;
            drop[0] = old;
        } else if (ours && on == old) { /* it did not */
            drop[0] = moving;
        } else { /* the holding is over (or on a lease not ours): both go */
            drop[0] = moving;
            drop[1] = ours ? old : 0;
            if (ours)
                key->held_lease = on;
        }
        key->moving_lease = 0;
    }
    pthread_mutex_unlock(&e->lock);
    for (int i = 0; i < 2; i++)
        fl__etcd_revoke_later(e, drop[i]);
    return 0;
}

int fl__etcd_check(struct fl__etcd *e, const struct fl__etcd_lease *l)
{
    char key[FL_KEY_MAX + 1];
    int err = fl__lease_args(e, l, "fl_check", key);
    if (err)
        return err;
    if (fl__etcd_now_ns() >= l->deadline_ns)
        return fl__fail(-ESTALE, "etcd: the lease of \"%s\" (token %" PRIu64 ") is past its "
                                 "deadline",
                        key, l->token);
    struct fl__etcd_keys k;
    fl__etcd_keys_of(e, key, strlen(key), &k);
    err = fl__settle_move(e, l->slot, l->token, &k);
    if (err)
        return err;
    bool ours = false;
    uint64_t lease = fl__etcd_held_lease(e, l->slot, l->token, l->lease_id);
    err = fl__is_holding(e, &k, l->token, lease, &ours, NULL);
    if (err)
        return err;
    return ours ? 0
                : fl__fail(-ESTALE, "etcd: \"%s\" is no longer held by token %" PRIu64, key,
                           l->token);
}

/* The release Txn, with marker state 'R' (fl_release) or 'D' (fl_close).
 * retry: an earlier call's attempt may have taken effect (its answer was
 * lost), so a marker that says exactly this release is that attempt's. */
static int fl__release_as(struct fl__etcd *e, const char *key, uint64_t token, uint64_t lease,
                          char state, bool retry)
{
    struct fl__etcd_keys k;
    fl__etcd_keys_of(e, key, strlen(key), &k);
    char mv[FL__ETCD_MARK_MAX], hv[FL__ETCD_MARK_MAX];
    int mvn = fl__mark_value(mv, sizeof mv, fl__epoch_of(token), state, token);
    int hvn = fl__mark_value(hv, sizeof hv, fl__epoch_of(token), 'H', 0);
    uint64_t r = fl__rev(token);
    json_t *inner = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(k.lock, k.lock_len, "CREATE", "EQUAL", 0),
                      fl__etcd_cmp_rev(k.last, k.last_len, "MOD", "EQUAL", r),
                      fl__etcd_cmp_value(k.last, k.last_len, "EQUAL", hv, (size_t)hvn), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_put(k.last, k.last_len, mv, (size_t)mvn, 0, false), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_range(k.lock, k.lock_len),
                      fl__etcd_op_range(k.last, k.last_len), FL__ETCD_END));
    json_t *req = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(k.lock, k.lock_len, "CREATE", "EQUAL", r),
                      fl__etcd_cmp_lease(k.lock, k.lock_len, "EQUAL", lease), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_delete(k.lock, k.lock_len, true),
                      fl__etcd_op_put(k.last, k.last_len, mv, (size_t)mvn, 0, false), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_txn(inner), FL__ETCD_END));
    struct fl__etcd_reply rp;
    bool ok = false;
    int err = fl__etcd_request(&e->c, "/v3/kv/txn", "release txn", req,
                               FL__ETCD_REPEATABLE | FL__ETCD_KV, &rp, &ok);
    if (err || ok)
        goto out;
    json_t *txn = NULL, *last_range = NULL;
    err = fl__etcd_txn_resp(&rp, rp.body, 0, "response_txn", &txn);
    if (!err)
        err = fl__etcd_txn_result(&rp, txn, &ok);
    if (err || ok)
        goto out;
    err = fl__etcd_txn_resp(&rp, txn, 1, "response_range", &last_range);
    if (err)
        goto out;
    /* Refused.  After an attempt whose answer was lost (in this call, or in
     * an earlier fl_release of this holding), a marker that says this very
     * release is the lost attempt's work: the holding ended by its release
     * and nobody acquired the key since (an acquire writes "E H"). */
    struct fl__etcd_kv kv;
    int found = fl__etcd_range_first(&rp, last_range, FL__ETCD_MARK_MAX, &kv);
    bool mine = found == 1 && (rp.ambiguous || retry) && kv.value_len == (size_t)mvn &&
                memcmp(kv.value, mv, (size_t)mvn) == 0;
    if (found == 1)
        fl__etcd_kv_free(&kv);
    if (found < 0)
        err = found;
    else if (!mine)
        err = fl__fail(-ESTALE, "etcd: \"%s\" is no longer held by token %" PRIu64
                                " (taken over, or released before)",
                       key, token);
out:
    fl__etcd_reply_free(&rp);
    return err;
}

/* The etcd keys of holding l's key (*k), and its etcd lease: the one this
 * handle recorded (*ours), or, for a lease copied without its etcd lease
 * id, the key's own if the key is still this holding (one read; *ours false
 * and *lease 0 otherwise). */
static int fl__holding_lease(struct fl__etcd *e, const struct fl__etcd_lease *l, const char *key,
                             struct fl__etcd_keys *k, uint64_t *lease, bool *ours)
{
    fl__etcd_keys_of(e, key, strlen(key), k);
    *lease = 0;
    *ours = false;
    int err = fl__settle_move(e, l->slot, l->token, k);
    if (err)
        return err;
    *lease = fl__etcd_held_lease(e, l->slot, l->token, l->lease_id);
    *ours = *lease != 0;
    return *ours ? 0 : fl__is_holding(e, k, l->token, 0, ours, lease);
}

int fl__etcd_release(struct fl__etcd *e, const struct fl__etcd_lease *l)
{
    char key[FL_KEY_MAX + 1];
    int err = fl__lease_args(e, l, "fl_release", key);
    if (err)
        return err;
    struct fl__etcd_keys k;
    bool ours;
    uint64_t lease;
    err = fl__holding_lease(e, l, key, &k, &lease, &ours);
    if (err)
        return err;
    err = fl__release_as(e, key, l->token, lease, 'R',
                         fl__etcd_release_was_unsure(e, l->slot, l->token));
    if (!err || err == -ESTALE) {
        /* Over either way; the lease only ever carried this holding.  On
         * any other error the key may still be held: the caller calls
         * fl_release again (fl_close does too). */
        fl__etcd_clear_held(e, l->slot, l->token);
        /* The Txn made the release; revoking the lease, which carries
         * nothing now, is the revoker's (revoker.c): one round trip, not two. */
        fl__etcd_revoke_later(e, lease);
    } else if (err == -EAGAIN || err == -EPROTO)
        fl__etcd_note_release_unsure(e, l->slot, l->token);
    return err;
}

void fl__etcd_abandon_all(struct fl__etcd *e)
{
    for (uint32_t s = 0;; s++) {
        pthread_mutex_lock(&e->lock);
        if (s >= e->nkeys) {
            pthread_mutex_unlock(&e->lock);
            return;
        }
        uint64_t token = e->keys[s]->held_token;
        char key[FL_KEY_MAX + 1];
        memcpy(key, e->keys[s]->name, e->keys[s]->len + 1);
        pthread_mutex_unlock(&e->lock);
        if (!token)
            continue;
        struct fl__etcd_keys k;
        fl__etcd_keys_of(e, key, strlen(key), &k);
        (void)fl__settle_move(e, s, token, &k); /* best effort: else both leases below */
        pthread_mutex_lock(&e->lock);
        struct fl__etcd_key *kk = e->keys[s];
        uint64_t leases[2] = {kk->held_token == token ? kk->held_lease : 0,
                              kk->held_token == token ? kk->moving_lease : 0};
        if (kk->held_token == token)
            kk->held_token = kk->held_lease = kk->moving_lease = 0;
        pthread_mutex_unlock(&e->lock);
        for (int i = 0; i < 2; i++) {
            if (!leases[i])
                continue;
            (void)fl__release_as(e, key, token, leases[i], 'D', false); /* best effort */
            fl__etcd_lease_drop(e, leases[i]);
        }
    }
}

int fl__etcd_renew(struct fl__etcd *e, struct fl__etcd_lease *l, uint64_t lease_ns)
{
    char key[FL_KEY_MAX + 1];
    int err = fl__lease_args(e, l, "fl_renew", key);
    if (err)
        return err;
    if (lease_ns == 0)
        return fl__fail(-EINVAL, "fl_renew: lease_ns is 0");
    uint64_t want;
    err = fl__etcd_ttl(e, lease_ns, &want);
    if (err)
        return err;
    struct fl__etcd_keys k;
    bool ours;
    uint64_t lease;
    err = fl__holding_lease(e, l, key, &k, &lease, &ours);
    if (err)
        return err;
    if (!ours)
        goto stale;
    uint64_t t0 = fl__etcd_now_ns(), ttl = 0;
    err = fl__etcd_keepalive(&e->c, lease, &ttl);
    if (err)
        return err;
    if (ttl == 0)
        goto stale; /* the lease ran out: etcd deleted the key with it */
    if (ttl == want) {
        /* The lease lives on from t0; is the key still on it? */
        err = fl__is_holding(e, &k, l->token, lease, &ours, NULL);
        if (err)
            return err;
        if (!ours)
            goto stale;
        l->deadline_ns = t0 + ttl * FL__NS_PER_S;
        l->lease_id = lease;
        return 0;
    }
    /* Another length: a new lease, and the key moved to it. */
    uint64_t lease2 = 0, granted = 0, base = 0;
    err = fl__etcd_lease_grant(e, want, &lease2, &granted, &base);
    if (err)
        return err;
    if (granted == ttl) {
        /* etcd raised the new one to what the old one has: keep the old. */
        fl__etcd_lease_drop(e, lease2);
        err = fl__is_holding(e, &k, l->token, lease, &ours, NULL);
        if (err)
            return err;
        if (!ours)
            goto stale;
        l->deadline_ns = t0 + ttl * FL__NS_PER_S;
        l->lease_id = lease;
        return 0;
    }
    json_t *req = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(k.lock, k.lock_len, "CREATE", "EQUAL", fl__rev(l->token)),
                      fl__etcd_cmp_lease(k.lock, k.lock_len, "EQUAL", lease), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_put_lease(k.lock, k.lock_len, lease2), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_range(k.lock, k.lock_len), FL__ETCD_END));
    struct fl__etcd_reply rp;
    bool ok = false;
    err = fl__etcd_request(&e->c, "/v3/kv/txn", "renew txn", req,
                           FL__ETCD_REPEATABLE | FL__ETCD_KV, &rp, &ok);
    if (!err && !ok) {
        /* A repetition after a lost answer finds the key on lease2. */
        json_t *range = NULL;
        struct fl__etcd_kv kv;
        err = fl__etcd_txn_resp(&rp, rp.body, 0, "response_range", &range);
        int found = err ? err : fl__etcd_range_first(&rp, range, FL__ETCD_LOCK_VALUE_MAX, &kv);
        if (found == 1) {
            ok = kv.lease == lease2 && kv.create_revision == fl__rev(l->token);
            fl__etcd_kv_free(&kv);
        } else if (found < 0)
            err = found;
    }
    fl__etcd_reply_free(&rp);
    if (err == -EAGAIN || err == -EPROTO) {
        /* Unknown: the key is on lease or on lease2, and both stay (RENEW).
         * The holding lasts at least as long as the shorter of the two. */
        pthread_mutex_lock(&e->lock);
        if (e->keys[l->slot]->held_token == l->token)
            e->keys[l->slot]->moving_lease = lease2;
        pthread_mutex_unlock(&e->lock);
        uint64_t kept = t0 + ttl * FL__NS_PER_S, moved = base + granted * FL__NS_PER_S;
        l->deadline_ns = kept < moved ? kept : moved;
        return err;
    }
    if (err || !ok) {
        fl__etcd_lease_drop(e, lease2); /* the Txn had no effect */
        if (err)
            return err;
        goto stale;
    }
    pthread_mutex_lock(&e->lock);
    if (e->keys[l->slot]->held_token == l->token)
        e->keys[l->slot]->held_lease = lease2;
    pthread_mutex_unlock(&e->lock);
    fl__etcd_lease_drop(e, lease);
    l->deadline_ns = base + granted * FL__NS_PER_S;
    l->lease_id = lease2;
    return 0;
stale:
    return fl__fail(-ESTALE, "etcd: \"%s\" is no longer held by token %" PRIu64
                             " (its lease ran out, or it was taken over or released)",
                    key, l->token);
}

/* ---- the newest token of a key (fl_commit_token) ---- */

int fl__etcd_newest(struct fl__etcd *e, const char *key, size_t len, uint64_t *newest,
                    uint64_t *mark_rev)
{
    *newest = 0;
    *mark_rev = 0;
    char last[FL__ETCD_KEY_MAX];
    size_t llen = fl__etcd_key(&e->c, "last", key, len, last);
    json_t *req = json_pack("{s:o}", "key", fl__etcd_b64(last, llen));
    struct fl__etcd_reply rp;
    int err = fl__etcd_request(&e->c, "/v3/kv/range", "range marker", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_KV, &rp, NULL);
    struct fl__etcd_kv kv;
    int found = err ? err : fl__etcd_range_first(&rp, rp.body, FL__ETCD_MARK_MAX, &kv);
    if (found == 1) {
        char state;
        err = fl__etcd_mark_parse(&rp, &kv, &state, newest);
        *mark_rev = kv.mod_revision;
        fl__etcd_kv_free(&kv);
    } else if (found < 0)
        err = found;
    fl__etcd_reply_free(&rp);
    if (!err && *newest)
        fl__etcd_note_newest(e, key, len, *newest);
    return err;
}
