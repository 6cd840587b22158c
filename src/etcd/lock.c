/* SPDX-License-Identifier: MIT */
/*
 * lock.c - leased locks on etcd: acquire (try, timeout, wait forever,
 * cancelable), renew, release, check, and the handle's key table.  The keys
 * this code writes are laid out in etcd.h (LAYOUT).
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
 * lost (-ENOTRECOVERABLE until the bump).  The deadline is the local CLOCK_MONOTONIC time taken before the
 * grant (or the latest keepalive) was sent, plus the TTL etcd granted: the
 * lease cannot end at etcd before it, as etcd starts counting later (a
 * leader change only restarts the count).  Clock rate differences between
 * hosts are assumed negligible against a lease of whole seconds.
 *
 * A Txn whose answer was lost may be sent again to the next endpoint
 * (FL__ETCD_REPEATABLE): a repetition that finds lock/KEY held by our own
 * lease L knows the first attempt took effect, and returns that holding
 * (L is unique to this call).  A lease left over from an attempt the caller
 * never learned of ends by itself: at most one lease of waiting for others.
 *
 * WAITING.  A waiter keeps its lease L (renewed each time it wakes, or
 * granted again when it ran out) and sleeps on a watch of lock/KEY's
 * deletion from the revision after the failed Txn (watch.c): a release
 * deletes the key, and so does etcd when the holder's lease ends.  Every
 * waiter wakes (as on shared memory) and sends the Txn again.  The watch is
 * an alarm clock only: the sleep also ends after a third of L's TTL (to
 * renew L) and at most every FL__ETCD_SLICE_MS, and the Txn decides.  An
 * fl_cancel's wake fd is polled with the watch: fl_cancel_trigger ends the
 * sleep at once.
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
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "etcd.h"

/* The longest a waiter sleeps before it looks at the key itself, in case a
 * watch event was lost (a member stopped under the watch). */
#define FL__ETCD_SLICE_MS 5000
/* After a watch that could not be set up, or broke: wait this long, then
 * this much more each time (up to the slice), before the next look. */
#define FL__ETCD_BACKOFF_MS 20

static uint64_t fl__rev(uint64_t token) { return token & (FL__ETCD_REV_LIMIT - 1); }
static uint64_t fl__epoch_of(uint64_t token) { return token >> FL__ETCD_EPOCH_SHIFT; }

uint32_t fl__etcd_tid(void)
{
    static _Thread_local uint32_t tid;
    if (!tid)
        tid = (uint32_t)syscall(SYS_gettid);
    return tid;
}

/* ---- the key table ---- */

static uint32_t fl__hash(const char *key, size_t len)
{
    uint64_t h = fl__checksum(key, len);
    return (uint32_t)(h ^ (h >> 32));
}

/* Find key (under e->lock): its index, or -ENOENT. */
static int fl__find_locked(struct fl__etcd *e, const char *key, size_t len, uint32_t *idx)
{
    if (!e->index_cap)
        return -ENOENT;
    uint32_t mask = e->index_cap - 1;
    for (uint32_t i = fl__hash(key, len) & mask;; i = (i + 1) & mask) {
        uint32_t v = e->index[i];
        if (!v)
            return -ENOENT;
        struct fl__etcd_key *k = e->keys[v - 1];
        if (k->len == len && memcmp(k->name, key, len) == 0) {
            *idx = v - 1;
            return 0;
        }
    }
}

static int fl__grow_index_locked(struct fl__etcd *e)
{
    uint32_t cap = e->index_cap ? e->index_cap * 2 : 64;
    uint32_t *idx = calloc(cap, sizeof *idx);
    if (!idx)
        return -ENOMEM;
    for (uint32_t k = 0; k < e->nkeys; k++) {
        struct fl__etcd_key *key = e->keys[k];
        uint32_t i = fl__hash(key->name, key->len) & (cap - 1);
        while (idx[i])
            i = (i + 1) & (cap - 1);
        idx[i] = k + 1;
    }
    free(e->index);
    e->index = idx;
    e->index_cap = cap;
    return 0;
}

/* The slot of key, created on first use: 0, -ENOSPC, -ENOMEM. */
static int fl__intern(struct fl__etcd *e, const char *key, size_t len, uint32_t *slot)
{
    pthread_mutex_lock(&e->lock);
    int err = fl__find_locked(e, key, len, slot);
    if (err != -ENOENT)
        goto out;
    if (e->nkeys >= FL__ETCD_KEYS_MAX) {
        err = fl__fail(-ENOSPC, "etcd %s: this handle has used %u keys, its most: open "
                                "another handle",
                       e->c.uri.prefix, FL__ETCD_KEYS_MAX);
        goto out;
    }
    if (e->nkeys == e->kcap) {
        uint32_t cap = e->kcap ? e->kcap * 2 : 16;
        struct fl__etcd_key **keys = realloc(e->keys, cap * sizeof(struct fl__etcd_key *));
        if (!keys)
            goto nomem;
        e->keys = keys;
        e->kcap = cap;
    }
    if ((e->nkeys + 1) * 2 > e->index_cap && fl__grow_index_locked(e) != 0)
        goto nomem;
    struct fl__etcd_key *k = calloc(1, sizeof *k);
    if (!k)
        goto nomem;
    k->len = (uint32_t)len;
    memcpy(k->name, key, len);
    e->keys[e->nkeys] = k;
    uint32_t mask = e->index_cap - 1;
    uint32_t i = fl__hash(key, len) & mask;
    while (e->index[i])
        i = (i + 1) & mask;
    e->index[i] = e->nkeys + 1;
    *slot = e->nkeys++;
    err = 0;
    goto out;
nomem:
    err = fl__fail(-ENOMEM, "out of memory");
out:
    pthread_mutex_unlock(&e->lock);
    return err;
}

int fl__etcd_resolve(struct fl__etcd *e, const char *key, uint32_t *slot)
{
    int klen = fl__key_check(key);
    if (klen < 0)
        return klen;
    if (e->readonly)
        return fl__fail(-EINVAL, "fl_key_resolve: read-only region handle");
    return fl__intern(e, key, (size_t)klen, slot);
}

int fl__etcd_slot_key(struct fl__etcd *e, uint32_t slot, char key[FL_KEY_MAX + 1],
                      uint64_t *newest)
{
    pthread_mutex_lock(&e->lock);
    int err = 0;
    if (slot >= e->nkeys)
        err = -EINVAL;
    else {
        memcpy(key, e->keys[slot]->name, e->keys[slot]->len + 1);
        if (newest)
            *newest = e->keys[slot]->newest;
    }
    pthread_mutex_unlock(&e->lock);
    return err;
}

void fl__etcd_note_newest(struct fl__etcd *e, const char *key, size_t len, uint64_t token)
{
    uint32_t slot;
    pthread_mutex_lock(&e->lock);
    if (fl__find_locked(e, key, len, &slot) == 0 && e->keys[slot]->newest < token)
        e->keys[slot]->newest = token;
    pthread_mutex_unlock(&e->lock);
}

static void fl__note_slot(struct fl__etcd *e, uint32_t slot, uint64_t newest)
{
    pthread_mutex_lock(&e->lock);
    if (e->keys[slot]->newest < newest)
        e->keys[slot]->newest = newest;
    pthread_mutex_unlock(&e->lock);
}

/* The etcd lease of holding token at slot, as this handle knows it (0:
 * unknown). */
static uint64_t fl__held_lease(struct fl__etcd *e, uint32_t slot, uint64_t token,
                               uint64_t hint)
{
    pthread_mutex_lock(&e->lock);
    uint64_t l = hint;
    if (slot < e->nkeys && e->keys[slot]->held_token == token && e->keys[slot]->held_lease)
        l = e->keys[slot]->held_lease;
    pthread_mutex_unlock(&e->lock);
    return l;
}

static void fl__set_held(struct fl__etcd *e, uint32_t slot, uint64_t token, uint64_t lease)
{
    pthread_mutex_lock(&e->lock);
    struct fl__etcd_key *k = e->keys[slot];
    k->held_token = token;
    k->held_lease = lease;
    k->held_tid = fl__etcd_tid();
    k->release_unsure = false;
    k->moving_lease = 0;
    if (k->newest < token)
        k->newest = token;
    pthread_mutex_unlock(&e->lock);
}

static void fl__clear_held(struct fl__etcd *e, uint32_t slot, uint64_t token)
{
    pthread_mutex_lock(&e->lock);
    if (slot < e->nkeys && e->keys[slot]->held_token == token) {
        e->keys[slot]->held_token = 0;
        e->keys[slot]->held_lease = 0;
        e->keys[slot]->release_unsure = false;
        e->keys[slot]->moving_lease = 0;
    }
    pthread_mutex_unlock(&e->lock);
}

/* Note that an fl_release of holding token at slot had no definite answer
 * (it may have taken effect: its retry's "R T" is its own). */
static void fl__note_release_unsure(struct fl__etcd *e, uint32_t slot, uint64_t token)
{
    pthread_mutex_lock(&e->lock);
    if (slot < e->nkeys && e->keys[slot]->held_token == token)
        e->keys[slot]->release_unsure = true;
    pthread_mutex_unlock(&e->lock);
}

/* Whether an earlier fl_release of holding token at slot had no answer. */
static bool fl__release_was_unsure(struct fl__etcd *e, uint32_t slot, uint64_t token)
{
    pthread_mutex_lock(&e->lock);
    bool unsure = slot < e->nkeys && e->keys[slot]->held_token == token &&
                  e->keys[slot]->release_unsure;
    pthread_mutex_unlock(&e->lock);
    return unsure;
}

/* ---- values ---- */

static int fl__lock_value(const struct fl__etcd *e, uint64_t epoch, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%" PRIu64 " %" PRIu32 " %s", epoch, e->pid, e->host);
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

/* ---- leases ---- */

static int fl__ttl(struct fl__etcd *e, uint64_t lease_ns, uint64_t *ttl)
{
    uint64_t s = lease_ns / FL__NS_PER_S + (lease_ns % FL__NS_PER_S != 0);
    if (s > FL__ETCD_TTL_MAX)
        return fl__fail(-EOVERFLOW, "etcd: a lease of %" PRIu64 " s is longer than etcd's "
                                    "longest (%llu s)",
                        s, (unsigned long long)FL__ETCD_TTL_MAX);
    /* relaxed: a hint (etcd.h) */
    uint64_t min = atomic_load_explicit(&e->min_ttl, memory_order_relaxed);
    *ttl = s > min ? s : min;
    return 0;
}

static void fl__note_granted(struct fl__etcd *e, uint64_t asked, uint64_t granted)
{
    if (granted > asked) /* etcd raised it to its minimum */
        atomic_store_explicit(&e->min_ttl, granted, memory_order_relaxed);
}

/* Grant a lease for ttl: *id, *granted, and *base the local time taken
 * before the request left (the deadline's origin). */
static int fl__grant(struct fl__etcd *e, uint64_t ttl, uint64_t *id, uint64_t *granted,
                     uint64_t *base)
{
    *base = fl__etcd_now_ns();
    int err = fl__etcd_grant(&e->c, ttl, id, granted);
    if (!err)
        fl__note_granted(e, ttl, *granted);
    return err;
}

/* Best effort: a lease we will not use (its key, if any, goes with it). */
static void fl__drop_lease(struct fl__etcd *e, uint64_t id)
{
    if (!id)
        return;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", fl_last_error());
    (void)fl__etcd_revoke(&e->c, id); /* if it fails, the lease ends by itself */
    fl__set_error("%s", saved);
}

/* ---- acquire ---- */

struct fl__keys {
    char lock[FL__ETCD_KEY_MAX], last[FL__ETCD_KEY_MAX], epoch[FL__ETCD_KEY_MAX];
    size_t lock_len, last_len, epoch_len;
};

static void fl__keys_of(const struct fl__etcd *e, const char *key, size_t len,
                        struct fl__keys *k)
{
    k->lock_len = fl__etcd_key(&e->c, "lock", key, len, k->lock);
    k->last_len = fl__etcd_key(&e->c, "last", key, len, k->last);
    k->epoch_len = fl__etcd_key(&e->c, NULL, "epoch", 5, k->epoch);
}

/* What one acquire Txn found.  fl__acquire_txn returns 0 with it, 1 when
 * the lease ran out before the Txn was applied, or an error. */
struct fl__try {
    bool won;
    uint64_t token;        /* won: ours; else the holder's (0: free) */
    uint64_t holder_lease; /* !won: the holder's lease */
    uint32_t flags;        /* won: FL_LEASE_* */
    uint64_t revision;     /* the answer's revision (watch from the next one) */
    bool epoch_moved;      /* !won and free: the epoch changed; try again */
};

/* A marker's value (etcd.h, LAYOUT): "%07E H", "%07E R %020T", "%07E D %020T". */
static int fl__mark_value(char *buf, size_t cap, uint64_t epoch, char state, uint64_t token)
{
    return state == 'H' ? snprintf(buf, cap, "%07" PRIu64 " H", epoch)
                        : snprintf(buf, cap, "%07" PRIu64 " %c %020" PRIu64, epoch, state, token);
}

/* The acquire Txn's answer when it succeeded: the put of the marker, with
 * the marker it replaced (prev_kv), at responses[put_index] of txn. */
static int fl__acquire_won(struct fl__etcd_reply *rp, const json_t *txn, uint64_t epoch,
                           struct fl__try *t)
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

static int fl__acquire_txn(struct fl__etcd *e, const struct fl__keys *k, uint64_t lease,
                           struct fl__try *t)
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

/* The cancel's wake fd, made on first use (struct fl_cancel). */
static int fl__cancel_fd(fl_cancel *c)
{
    int fd = atomic_load(&c->wake_fd);
    if (fd >= 0)
        return fd;
    int mine = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (mine < 0)
        return fl__fail(fl__neg_errno(), "eventfd: %s", strerror(errno));
    int expected = -1;
    /* seq_cst: published before the waiter reads `cancelled` (Dekker with
     * fl_cancel_trigger, which sets it before reading wake_fd) */
    if (!atomic_compare_exchange_strong(&c->wake_fd, &expected, mine)) {
        close(mine);
        return expected;
    }
    return mine;
}

static bool fl__cancelled(fl_cancel *c)
{
    return c && atomic_load(&c->cancelled); /* seq_cst: Dekker (above) */
}

/* The fd woke us: cancelled, or a stale wake left by a reset; in that case
 * drain it, and if a trigger came meanwhile, wake the others again. */
static bool fl__cancel_woke(fl_cancel *c, int fd)
{
    if (fl__cancelled(c))
        return true;
    uint64_t v;
    while (read(fd, &v, sizeof v) == sizeof v) {
    }
    if (fl__cancelled(c)) {
        uint64_t one = 1;
        if (write(fd, &one, sizeof one) != sizeof one) { /* counter full: readable */
        }
        return true;
    }
    return false;
}

/* Sleep on a plain poll of the cancel fd (no watch) for ms. */
static int fl__nap(fl_cancel *c, int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, fd >= 0 ? 1 : 0, ms);
    if (n > 0 && fl__cancel_woke(c, fd))
        return FL__WATCH_FD;
    return FL__WATCH_TIMEOUT;
}

int fl__etcd_acquire(struct fl__etcd *e, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                     fl_cancel *cancel, struct fl__etcd_lease *out)
{
    if (!out)
        return fl__fail(-EINVAL, "fl_acquire: NULL argument");
    int klen = fl__key_check(key);
    if (klen < 0)
        return klen;
    if (e->readonly)
        return fl__fail(-EINVAL, "fl_acquire: read-only region handle");
    if (lease_ns == 0)
        return fl__fail(-EINVAL, "fl_acquire: lease_ns is 0");
    if (timeout_ns < 0 && timeout_ns != FL_WAIT_FOREVER)
        return fl__fail(-EINVAL, "fl_acquire: negative timeout other than FL_WAIT_FOREVER");
    uint64_t ttl;
    int err = fl__ttl(e, lease_ns, &ttl);
    if (err)
        return err;
    uint32_t slot;
    err = fl__intern(e, key, (size_t)klen, &slot);
    if (err)
        return err;
    struct fl__keys k;
    fl__keys_of(e, key, (size_t)klen, &k);
    int cfd = -1;
    if (cancel && timeout_ns != 0) {
        cfd = fl__cancel_fd(cancel);
        if (cfd < 0)
            return cfd;
    }
    uint64_t start = fl__etcd_now_ns();
    uint64_t wait_end = timeout_ns > 0 ? start + (uint64_t)timeout_ns : UINT64_MAX;
    uint64_t lease = 0, granted = 0, base = 0;
    err = fl__grant(e, ttl, &lease, &granted, &base);
    if (err)
        return err;
    int backoff = FL__ETCD_BACKOFF_MS;
    for (int round = 0;; round++) {
        struct fl__try t;
        err = fl__acquire_txn(e, &k, lease, &t);
        if (err == 1 && round < 64) {
            /* Our lease ran out before the Txn (this thread was stopped?):
             * the Txn had no effect; a new lease, and again. */
            err = fl__grant(e, ttl, &lease, &granted, &base);
            if (err)
                return err;
            continue;
        }
        if (err == 1)
            err = fl__fail(-EAGAIN, "etcd: every lease ran out before its acquire Txn");
        if (err)
            break;
        if (t.epoch_moved && round < 64)
            continue; /* numbered with the new epoch now */
        if (!t.won && t.holder_lease == lease && t.token) {
            /* An earlier attempt of ours took effect and its answer was
             * lost: that holding is ours.  (Its flags went with the answer.) */
            t.won = true;
        }
        if (t.won) {
            fl__set_held(e, slot, t.token, lease);
            *out = (struct fl__etcd_lease){.token = t.token,
                                           .deadline_ns = base + granted * FL__NS_PER_S,
                                           .lease_id = lease,
                                           .slot = slot,
                                           .flags = t.flags};
            return 0;
        }
        fl__note_slot(e, slot, t.token);
        if (timeout_ns == 0) {
            err = fl__fail(-EBUSY, "etcd: key \"%s\" is held (token %" PRIu64 ")", key, t.token);
            break;
        }
        pthread_mutex_lock(&e->lock);
        bool own = e->keys[slot]->held_token == t.token &&
                   e->keys[slot]->held_tid == fl__etcd_tid();
        pthread_mutex_unlock(&e->lock);
        if (own) {
            err = fl__fail(-EDEADLK, "etcd: key \"%s\" is held by this thread's own lease "
                                     "(token %" PRIu64 "): waiting would outlast it",
                           key, t.token);
            break;
        }
        if (fl__cancelled(cancel)) {
            err = fl__fail(-ECANCELED, "fl_acquire_cancelable: cancelled while \"%s\" is held",
                           key);
            break;
        }
        uint64_t now = fl__etcd_now_ns();
        if (now >= wait_end) {
            err = fl__fail(-ETIMEDOUT, "etcd: key \"%s\" stayed held (token %" PRIu64 ")", key,
                           t.token);
            break;
        }
        /* Sleep: until the key is deleted, the wait ends, a third of our
         * lease has passed (to renew it), a cancel, or the slice. */
        uint64_t ms = FL__ETCD_CEIL_MS(wait_end - now);
        uint64_t renew_ms = granted * FL__ETCD_MS_PER_S / 3;
        if (ms > renew_ms)
            ms = renew_ms;
        if (ms > FL__ETCD_SLICE_MS)
            ms = FL__ETCD_SLICE_MS;
        struct fl__etcd_watch *w = NULL;
        int got;
        int werr = fl__etcd_watch_open(&e->c, k.lock, k.lock_len, t.revision + 1, &w);
        if (werr == 0) {
            got = fl__etcd_watch_wait(w, cfd, (int)ms);
            fl__etcd_watch_close(w);
        } else if (werr == -EACCES) {
            err = werr;
            break;
        } else
            got = FL__WATCH_LOST;
        if (got == FL__WATCH_FD && !fl__cancel_woke(cancel, cfd))
            got = FL__WATCH_TIMEOUT; /* a stale wake: look again */
        if (got == FL__WATCH_REFUSED) {
            err = fl__fail(-EACCES, "%s", fl_last_error());
            break;
        }
        if (got == FL__WATCH_LOST) {
            /* No alarm clock: nap, a little longer each time. */
            uint64_t nap = (uint64_t)backoff < ms ? (uint64_t)backoff : ms;
            got = fl__nap(cancel, cfd, (int)nap);
            if (backoff < FL__ETCD_SLICE_MS)
                backoff *= 2;
        } else if (got == FL__WATCH_DELETED)
            backoff = FL__ETCD_BACKOFF_MS;
        if (got == FL__WATCH_FD) {
            err = fl__fail(-ECANCELED, "fl_acquire_cancelable: cancelled while \"%s\" is held",
                           key);
            break;
        }
        /* Keep our lease for the next Txn: renewed from now, or a new one. */
        if (fl__etcd_now_ns() - base >= granted * FL__NS_PER_S / 3) {
            uint64_t t1 = fl__etcd_now_ns(), left = 0;
            err = fl__etcd_keepalive(&e->c, lease, &left);
            if (err)
                break;
            if (left) {
                base = t1;
                granted = left;
            } else {
                err = fl__grant(e, ttl, &lease, &granted, &base);
                if (err)
                    return err;
            }
        }
    }
    fl__drop_lease(e, lease);
    return err;
}

/* ---- release, check, renew ---- */

static int fl__lease_args(struct fl__etcd *e, const struct fl__etcd_lease *l, const char *fn,
                          char key[FL_KEY_MAX + 1])
{
    if (!l)
        return fl__fail(-EINVAL, "%s: NULL argument", fn);
    if (e->readonly && strcmp(fn, "fl_check") != 0)
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
static int fl__is_holding(struct fl__etcd *e, const struct fl__keys *k, uint64_t token,
                          uint64_t lease, bool *ours, uint64_t *lease_out)
{
    *ours = false;
    json_t *req = json_pack("{s:o}", "key", fl__etcd_b64(k->lock, k->lock_len));
    struct fl__etcd_reply rp;
    int err = fl__etcd_request(&e->c, "/v3/kv/range", "range lock", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_KV, &rp, NULL);
    struct fl__etcd_kv kv;
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
                           const struct fl__keys *k)
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
    struct fl__keys k;
    fl__keys_of(e, key, strlen(key), &k);
    err = fl__settle_move(e, l->slot, l->token, &k);
    if (err)
        return err;
    bool ours = false;
    err = fl__is_holding(e, &k, l->token, fl__held_lease(e, l->slot, l->token, l->lease_id),
                         &ours, NULL);
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
    struct fl__keys k;
    fl__keys_of(e, key, strlen(key), &k);
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

/* The etcd lease of holding l: the one this handle recorded (*ours), or,
 * for a lease copied without its etcd lease id, the key's own if the key is
 * still this holding (one read; *ours false and *lease 0 otherwise). */
static int fl__holding_lease(struct fl__etcd *e, const struct fl__etcd_lease *l,
                             const struct fl__keys *k, uint64_t *lease, bool *ours)
{
    int err = fl__settle_move(e, l->slot, l->token, k);
    if (err)
        return err;
    *lease = fl__held_lease(e, l->slot, l->token, l->lease_id);
    *ours = *lease != 0;
    return *ours ? 0 : fl__is_holding(e, k, l->token, 0, ours, lease);
}

int fl__etcd_release(struct fl__etcd *e, const struct fl__etcd_lease *l)
{
    char key[FL_KEY_MAX + 1];
    int err = fl__lease_args(e, l, "fl_release", key);
    if (err)
        return err;
    struct fl__keys k;
    fl__keys_of(e, key, strlen(key), &k);
    bool ours = false;
    uint64_t lease = 0;
    err = fl__holding_lease(e, l, &k, &lease, &ours);
    if (err)
        return err;
    err = fl__release_as(e, key, l->token, lease, 'R',
                         fl__release_was_unsure(e, l->slot, l->token));
    if (!err || err == -ESTALE) {
        /* Over either way; the lease only ever carried this holding.  On
         * any other error the key may still be held: the caller calls
         * fl_release again (fl_close does too). */
        fl__clear_held(e, l->slot, l->token);
        /* The Txn made the release; revoking the lease, which carries
         * nothing now, is the revoker's (revoker.c): one round trip, not two. */
        fl__etcd_revoke_later(e, lease);
    } else if (err == -EAGAIN || err == -EPROTO)
        fl__note_release_unsure(e, l->slot, l->token);
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
        struct fl__keys k;
        fl__keys_of(e, key, strlen(key), &k);
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
            fl__drop_lease(e, leases[i]);
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
    err = fl__ttl(e, lease_ns, &want);
    if (err)
        return err;
    struct fl__keys k;
    fl__keys_of(e, key, strlen(key), &k);
    bool ours = false;
    uint64_t lease = 0;
    err = fl__holding_lease(e, l, &k, &lease, &ours);
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
    err = fl__grant(e, want, &lease2, &granted, &base);
    if (err)
        return err;
    if (granted == ttl) {
        /* etcd raised the new one to what the old one has: keep the old. */
        fl__drop_lease(e, lease2);
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
        fl__drop_lease(e, lease2); /* the Txn had no effect */
        if (err)
            return err;
        goto stale;
    }
    pthread_mutex_lock(&e->lock);
    if (e->keys[l->slot]->held_token == l->token)
        e->keys[l->slot]->held_lease = lease2;
    pthread_mutex_unlock(&e->lock);
    fl__drop_lease(e, lease);
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
