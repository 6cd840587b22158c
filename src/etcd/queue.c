/* SPDX-License-Identifier: MIT */
/*
 * queue.c - a key's queue on etcd (etcd.h, LAYOUT): entered (the acquire
 * Txn), looked at and left.  A holding's own Txns (release, renew, check)
 * are lock.c's; the waiting between these is wait.c's; the words of the
 * layout are entry.c's; the leases pool.c's.
 *
 * QUEUE.  Every acquisition of KEY puts an entry in KEY's queue; the oldest
 * live entry holds KEY.  The token is E << 40 | c, c the entry's
 * create_revision: entries are served in the order of c, and a later entry
 * has a greater c, so a key's tokens strictly increase in the order its
 * holdings begin (I1).  The epochs along the queue never decrease: every
 * acquire Txn compares the marker (the epoch of KEY's newest entry) to be at
 * most its own E, and writes E into it.  An epoch an operator set back
 * (etcdctl put PREFIX/epoch, smaller) numbers nothing, whatever answers are
 * lost (-ENOTRECOVERABLE until the bump).
 *
 * A holding ends one of three ways, each one write to its entry:
 *   released   the release Txn rewrites it "R E T", without a lease;
 *   abandoned  fl_close does the same with "D E T";
 *   expired    etcd deletes it when its lease ends (its holder stopped,
 *              died, or was cut off; or it never renewed).
 * The entry behind it watches it (wait.c): an "R" or a "D" tells that one
 * waiter, and only it, that it holds KEY now and how the holding before
 * ended; a deletion of the entry it knew to hold KEY, that the holding
 * before expired (FL_LEASE_EXPIRED).  No request is needed for either: an
 * acquisition under contention costs its enqueue Txn, its watch and its
 * release Txn.  A released entry stays until the release of the holding
 * after it deletes it (its holder knows its name), so that a waiter that was
 * not watching it can still learn how the holding before its own ended.
 *
 * ACQUIRE is one Txn (fl__etcd_enqueue), in the usual case:
 *
 *   compare  epoch == "E", our entry absent,
 *            "q" < last < "q%07(E+1)"              (KEY's newest entry: E or earlier)
 *   success  ENQUEUE
 *   ENQUEUE  range the two newest entries (before ours: our predecessor,
 *            and whether it holds the key)
 *            put our entry "W E PID HOST" lease L
 *            put last "qE" prev_kv
 *
 * with nothing in its failure branch: etcd reads every byte of a Txn, the
 * branches it does not run too, so the rare cases go in a second request
 * only when the first did not go ahead: KEY's first entry (last absent),
 * else the usual case again (another client may have made the first entry
 * since), whose failure branch reads the epoch, the marker, our entry and
 * the two oldest entries to say why (the epoch moved or was set back, our
 * earlier attempt is there, the layout before 0.2).  A try (timeout 0) adds "the
 * queue is free" to the compares (every entry's value below "W": released
 * ones; or no entry, in a nested level whose failure reads the two oldest:
 * the holder, for -EBUSY at once), so that a held key gets no entry: a
 * failed try leaves nothing.  We hold the key when no entry is before
 * ours, or a released one is.  A Txn whose answer was lost may be sent
 * again (FL__ETCD_REPEATABLE): a repetition that finds our entry (its ID is
 * unique to the call) knows an earlier attempt took effect, and looks at
 * the queue around it.

 * HOW THE HOLDING BEFORE ENDED, when we hold KEY at once: no entry before
 * ours and no marker: KEY's first holding (flags 0); no entry and a marker:
 * the last holding vanished unreleased (etcd ended its lease: EXPIRED); a
 * released entry before ours: its state, unless an entry made after it held
 * KEY after it was released and vanished since -- known from the marker the
 * Txn replaced when it is certain, else from etcd's history of the queue at
 * the revision of that release (one more read, rare; a history compacted
 * away is taken as EXPIRED, the cautious answer).
 *
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

static uint32_t fl__flags_of(char state)
{
    return state == 'D' ? FL_LEASE_OWNER_DIED : 0; /* 'R': released normally */
}

/* ---- reading the queue ---- */

/* Whether an entry of k's queue made after after_c and before our c existed
 * at revision `at` (the release of the entry made at after_c): one such
 * held the key after that release.  A history etcd compacted away answers
 * yes (the cautious answer: EXPIRED). */
static int fl__held_between(struct fl__etcd *e, const struct fl__etcd_keys *k, uint64_t after_c,
                            uint64_t c, uint64_t at, bool *yes)
{
    *yes = false;
    if (after_c + 1 >= c)
        return 0;
    /* Not count_only: etcd counts before it applies the create filters. */
    json_t *req = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "key",
                            fl__etcd_b64(k->q0, k->q_len), "range_end",
                            fl__etcd_b64(k->q1, k->q_len), "revision", fl__etcd_num(at),
                            "min_create_revision", fl__etcd_num(after_c + 1),
                            "max_create_revision", fl__etcd_num(c - 1), "limit", fl__etcd_num(1),
                            "keys_only", 1);
    struct fl__etcd_reply rp;
    int err = fl__etcd_post(&e->c, "/v3/kv/range", "range queue history", req,
                            FL__ETCD_IDEMPOTENT | FL__ETCD_KV, &rp);
    json_decref(req);
    json_t *kvs = NULL;
    if (err == -EREMOTEIO && rp.grpc_code == 11) { /* OutOfRange: compacted */
        *yes = true;
        err = 0;
    } else if (err == -EREMOTEIO)
        err = fl__etcd_refusal(&rp);
    else if (!err) {
        err = fl__etcd_arr(&rp, rp.body, "kvs", &kvs);
        *yes = kvs && json_array_size(kvs) > 0;
    }
    fl__etcd_reply_free(&rp);
    return err;
}

/* We hold the key, the entry before ours being pred (state 0: none).
 * had_pred: an entry was before ours when we last looked (so none now
 * means it vanished unreleased); mark_rev: the marker's mod_revision the
 * enqueue replaced (0: none, or unknown).  Sets p->flags and p->pred.  The
 * flags are all the history read is for: when it cannot be made, they take
 * the cautious answer (EXPIRED), and the holding stands. */
static void fl__holding_now(struct fl__etcd *e, const struct fl__etcd_keys *k,
                            const struct fl__etcd_entry *pred, bool had_pred, uint64_t mark_rev,
                            struct fl__etcd_place *p)
{
    p->head = true;
    p->pred = *pred;
    p->pred_is_head = false;
    if (!pred->state) {
        p->flags = had_pred ? FL_LEASE_EXPIRED : 0;
        return;
    }
    p->flags = fl__flags_of(pred->state);
    if (mark_rev && mark_rev <= pred->c)
        return; /* nobody queued after it */
    if (mark_rev > pred->mod_revision) {
        p->flags = FL_LEASE_EXPIRED; /* one queued after its release: it held, and vanished */
        return;
    }
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", fl_last_error());
    bool held = false;
    if (fl__held_between(e, k, pred->c, p->c, pred->mod_revision, &held) != 0 || held)
        p->flags = FL_LEASE_EXPIRED;
    fl__set_error("%s", saved);
}

/* The entries just before ours (a range of at most 2, newest first): the
 * one before ours is p->pred; is it the holder (nothing live before it)?
 * Released entries are only ever at the front of a queue. */
static int fl__before(const struct fl__etcd_reply *rp, const struct fl__etcd_keys *k,
                      const json_t *range, struct fl__etcd_entry before[2], size_t *n)
{
    json_t *kvs = NULL;
    int err = fl__etcd_arr(rp, range, "kvs", &kvs);
    *n = kvs ? json_array_size(kvs) : 0;
    if (!err && *n > 2)
        err = fl__fail(-EPROTO, "etcd %s %s: more entries than the limit asked for",
                       rp->endpoint, rp->op);
    for (size_t i = 0; !err && i < *n; i++) {
        struct fl__etcd_kv kv;
        err = fl__etcd_kv_parse(rp, json_array_get(kvs, i), FL__ETCD_ENTRY_VALUE_MAX, &kv);
        if (!err) {
            err = fl__etcd_entry_parse(rp, k, &kv, &before[i]);
            fl__etcd_kv_free(&kv);
        }
    }
    if (!err && *n == 2 && before[1].c >= before[0].c)
        err = fl__fail(-EPROTO, "etcd %s %s: entries out of order", rp->endpoint, rp->op);
    return err;
}

/* Our place from the entries before ours (newest first) and whether we
 * hold the key then (how the holding before ended: see fl__holding_now). */
static void fl__place(struct fl__etcd *e, const struct fl__etcd_keys *k,
                      const struct fl__etcd_entry before[2], size_t n, bool had_pred,
                      uint64_t mark_rev, struct fl__etcd_place *p)
{
    static const struct fl__etcd_entry none;
    if (n == 0 || before[0].state != 'W') {
        fl__holding_now(e, k, n ? &before[0] : &none, had_pred, mark_rev, p);
        return;
    }
    p->pred = before[0];
    p->pred_is_head = n == 1 || before[1].state != 'W';
    snprintf(p->pred_pred, sizeof p->pred_pred, "%s",
             p->pred_is_head && n == 2 ? before[1].id : "");
    p->holder = p->pred_is_head ? before[0].token : 0;
}

/* What ranges [i] (our entry) and [i+1] (the two entries before it) of
 * txn say of our place (p->c: what we believe our entry's c). */
static int fl__around(struct fl__etcd *e, struct fl__etcd_reply *rp, const json_t *txn, size_t i,
                      const struct fl__etcd_keys *k, bool had_pred, struct fl__etcd_place *p)
{
    json_t *mine = NULL, *before = NULL;
    int err = fl__etcd_txn_resp(rp, txn, i, "response_range", &mine);
    if (!err)
        err = fl__etcd_txn_resp(rp, txn, i + 1, "response_range", &before);
    struct fl__etcd_entry me = {.state = 0}, b[2]; /* entry_first and fl__before fill them */
    int found = err ? err : fl__etcd_entry_first(rp, k, mine, &me);
    if (found < 0)
        return found;
    uint64_t c = p->c;
    memset(p, 0, sizeof *p);
    p->revision = rp->revision;
    if (found == 0 || me.state != 'W')
        return 0; /* gone (its lease ended), or not ours to wait with: p->c 0 */
    if (c && me.c != c)
        return fl__fail(-EPROTO, "etcd %s %s: our queue entry has create_revision %" PRIu64
                                 ", not %" PRIu64,
                        rp->endpoint, rp->op, me.c, c);
    p->c = me.c;
    p->token = me.token;
    size_t n = 0;
    err = fl__before(rp, k, before, b, &n);
    if (!err && n && b[0].c >= me.c)
        err = fl__fail(-EPROTO, "etcd %s %s: the entry before ours is not older", rp->endpoint,
                       rp->op);
    if (!err)
        fl__place(e, k, b, n, had_pred, 0, p);
    return err;
}

/* The range of the (at most) two entries before our c (0: before none). */
static json_t *fl__before_op(const struct fl__etcd_keys *k, uint64_t c)
{
    return fl__etcd_op_range_sorted(k->q0, k->q_len, k->q1, k->q_len, true, 2, c ? c - 1 : 0);
}

/* The ranges of fl__around for our entry key m (created at c). */
static json_t *fl__around_ops(const struct fl__etcd_keys *k, const char *m, size_t mlen,
                              uint64_t c)
{
    return fl__etcd_list(fl__etcd_op_range(m, mlen), fl__before_op(k, c), FL__ETCD_END);
}

int fl__etcd_look(struct fl__etcd *e, const struct fl__etcd_keys *k, const char *id, uint64_t c,
                  bool had_pred, struct fl__etcd_place *p)
{
    char m[FL__ETCD_KEY_MAX];
    size_t mlen = fl__etcd_entry_key(k, id, m);
    json_t *req = fl__etcd_txn(NULL, fl__around_ops(k, m, mlen, c), NULL);
    struct fl__etcd_reply rp;
    int err = fl__etcd_request(&e->c, "/v3/kv/txn", "look at queue", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_KV | FL__ETCD_GUARD, &rp, NULL);
    p->c = c;
    if (!err)
        err = fl__around(e, &rp, rp.body, 0, k, had_pred, p);
    fl__etcd_reply_free(&rp);
    return err;
}

/* ---- entering the queue ---- */

/* The diagnosis ranges of a refused enqueue. */
static json_t *fl__diag_ops(const struct fl__etcd_keys *k, const char *m, size_t mlen)
{
    return fl__etcd_list(
        fl__etcd_op_range(m, mlen), fl__etcd_op_range(k->epoch, k->epoch_len),
        fl__etcd_op_range(k->last, k->last_len),
        fl__etcd_op_range_sorted(k->q0, k->q_len, k->q1, k->q_len, false, 2, 0), FL__ETCD_END);
}

/* The holder's token from the two oldest entries (a range, oldest first):
 * the first live one's (0: none). */
static int fl__front_holder(const struct fl__etcd_reply *rp, const struct fl__etcd_keys *k,
                            const json_t *range, uint64_t *holder)
{
    *holder = 0;
    json_t *kvs = NULL;
    int err = fl__etcd_arr(rp, range, "kvs", &kvs);
    size_t n = kvs ? json_array_size(kvs) : 0;
    for (size_t i = 0; !err && i < n && i < 2 && !*holder; i++) {
        struct fl__etcd_kv kv;
        struct fl__etcd_entry en = {.state = 0}; /* entry_parse fills it whole */
        err = fl__etcd_kv_parse(rp, json_array_get(kvs, i), FL__ETCD_ENTRY_VALUE_MAX, &kv);
        if (!err) {
            err = fl__etcd_entry_parse(rp, k, &kv, &en);
            fl__etcd_kv_free(&kv);
        }
        if (!err && en.state == 'W')
            *holder = en.token;
    }
    return err;
}

/* A refused enqueue (nothing done): why, from the diagnosis at txn.  2
 * when our entry exists (p->c): an earlier attempt of this call made it; 3
 * when nothing is in the way now (a race with another first entry). */
static int fl__refused(struct fl__etcd *e, struct fl__etcd_reply *rp, const json_t *txn,
                       const struct fl__etcd_keys *k, uint64_t epoch, bool try_only,
                       struct fl__etcd_place *p)
{
    json_t *r[4];
    static const size_t n = sizeof r / sizeof r[0];
    int err = 0;
    for (size_t i = 0; !err && i < n; i++)
        err = fl__etcd_txn_resp(rp, txn, i, "response_range", &r[i]);
    if (err)
        return err;
    /* Our entry first: an attempt of this call whose answer was lost made
     * it, whatever moved since (the epoch included). */
    struct fl__etcd_entry me = {.state = 0}; /* entry_first fills it whole */
    int found = fl__etcd_entry_first(rp, k, r[0], &me);
    if (found < 0)
        return found;
    if (found == 1) {
        p->c = me.c;
        return 2;
    }
    struct fl__etcd_kv kv;
    found = fl__etcd_range_first(rp, r[1], 64, &kv);
    if (found < 0)
        return found;
    if (found == 0)
        return fl__fail(-ENOTRECOVERABLE,
                        "etcd %s: the epoch key %.*s is gone (deleted?): no token can be "
                        "numbered safely; `fencelock etcd-epoch --region URI --bump` sets one "
                        "above every token the prefix holds",
                        rp->endpoint, (int)k->epoch_len, k->epoch);
    uint64_t now_epoch = 0;
    err = fl__etcd_epoch_parse(rp, &kv, &now_epoch);
    fl__etcd_kv_free(&kv);
    if (!err && now_epoch != epoch) {
        err = fl__etcd_epoch_note(&e->c, now_epoch); /* -ENOTRECOVERABLE if lower */
        p->epoch_moved = true;
        return err;
    }
    if (err)
        return err;
    found = fl__etcd_range_first(rp, r[2], FL__ETCD_MARK_READ_MAX, &kv);
    if (found < 0)
        return found;
    if (found == 1) {
        uint64_t mark_epoch = 0, newest = 0;
        err = fl__etcd_mark_parse(rp, &kv, &mark_epoch, &newest);
        fl__etcd_kv_free(&kv);
        if (err == -ENOMSG)
            return -EPROTO;
        if (err)
            return err;
        if (mark_epoch > epoch)
            return fl__fail(-ENOTRECOVERABLE,
                            "etcd %s: key \"%.*s\" queued token %" PRIu64 " under epoch %" PRIu64
                            ", and the prefix's epoch is %" PRIu64 " now: the epoch was set "
                            "back; no token is handed out until `fencelock etcd-epoch --region "
                            "URI --bump` (it sets an epoch above every token the prefix holds)",
                            rp->endpoint, FL__KEY_OF(e, k), newest, mark_epoch, epoch);
    }
    if (try_only) {
        err = fl__front_holder(rp, k, r[3], &p->holder);
        if (err)
            return err;
        if (p->holder)
            return fl__fail(-EBUSY, "etcd: key \"%.*s\" is held (token %" PRIu64 ")",
                            FL__KEY_OF(e, k), p->holder);
    }
    /* Nothing in the way now: the marker appeared between the two requests
     * (another client queued KEY's first entry): again. */
    return 3;
}

/* The words of one acquire Txn. */
struct fl__acq {
    const struct fl__etcd_keys *k;
    char m[FL__ETCD_KEY_MAX]; /* our entry's key */
    size_t mlen;
    uint64_t lease, epoch;
    char ev[FL__ETCD_EPOCH_TEXT_MAX], lv[FL__ETCD_ENTRY_VALUE_MAX], mv[FL__ETCD_MARK_MAX],
        hi[FL__ETCD_MARK_MAX];
    int evn, lvn, mvn, hin;
};

/* The operations of an acquire that goes ahead (ACQUIRE: ENQUEUE). */
static json_t *fl__enqueue_ops(const struct fl__acq *a)
{
    return fl__etcd_list(
        fl__before_op(a->k, 0), fl__etcd_op_put(a->m, a->mlen, a->lv, (size_t)a->lvn, a->lease, false),
        fl__etcd_op_put(a->k->last, a->k->last_len, a->mv, (size_t)a->mvn, 0, true), FL__ETCD_END);
}

/* The compares of a level: the epoch ours, our entry absent, and the
 * marker of epoch E or earlier (mark) or absent; for a try, the queue free:
 * every entry released (released) or none. */
static json_t *fl__level_cmps(const struct fl__acq *a, bool mark, bool try_only, bool released)
{
    const struct fl__etcd_keys *k = a->k;
    json_t *c = fl__etcd_list(
        fl__etcd_cmp_value(k->epoch, k->epoch_len, "EQUAL", a->ev, (size_t)a->evn),
        fl__etcd_cmp_rev(a->m, a->mlen, "CREATE", "EQUAL", 0), FL__ETCD_END);
    json_t *more[2] = {NULL, NULL};
    if (mark) {
        more[0] = fl__etcd_cmp_value(k->last, k->last_len, "GREATER", "q", 1);
        more[1] = fl__etcd_cmp_value(k->last, k->last_len, "LESS", a->hi, (size_t)a->hin);
    } else
        more[0] = fl__etcd_cmp_rev(k->last, k->last_len, "CREATE", "EQUAL", 0);
    json_t *free_q = !try_only ? NULL
                     : released
                         ? fl__etcd_cmp_value_range(k->q0, k->q_len, k->q1, k->q_len, "LESS", "W", 1)
                         : fl__etcd_cmp_rev_range(k->q0, k->q_len, k->q1, k->q_len, "CREATE",
                                                  "EQUAL", 0);
    bool ok = c != NULL;
    json_t *add[3] = {more[0], more[1], free_q};
    for (int i = 0; i < 3; i++) {
        if (!add[i])
            continue;
        if (!ok || json_array_append_new(c, add[i]) != 0)
            ok = false;
    }
    if (!ok || (mark && !more[1]) || (try_only && !free_q)) {
        json_decref(c);
        return NULL;
    }
    return c;
}

/* The answer of an acquire that went ahead (txn: the level that did). */
static int fl__enqueued(struct fl__etcd *e, struct fl__etcd_reply *rp, const json_t *txn,
                        const struct fl__acq *a, bool try_only, struct fl__etcd_place *p)
{
    if (rp->revision >= FL__ETCD_REV_LIMIT)
        return fl__fail(-EOVERFLOW, "etcd %s: revision %" PRIu64 " does not fit a token "
                                    "(2^40 or more): bump the epoch",
                        rp->endpoint, rp->revision);
    p->c = rp->revision;
    p->token = a->epoch << FL__ETCD_EPOCH_SHIFT | rp->revision;
    p->revision = rp->revision;
    json_t *before = NULL, *put = NULL, *prev = NULL;
    int err = fl__etcd_txn_resp(rp, txn, 0, "response_range", &before);
    if (!err)
        err = fl__etcd_txn_resp(rp, txn, 2, "response_put", &put);
    if (!err)
        err = fl__etcd_obj(rp, put, "prev_kv", &prev);
    uint64_t mark_rev = 0;
    if (!err && prev) {
        struct fl__etcd_kv mark;
        err = fl__etcd_kv_parse(rp, prev, FL__ETCD_MARK_READ_MAX, &mark);
        mark_rev = err ? 0 : mark.mod_revision;
        if (!err)
            fl__etcd_kv_free(&mark);
    }
    struct fl__etcd_entry b[2];
    size_t n = 0;
    if (!err)
        err = fl__before(rp, a->k, before, b, &n);
    if (err)
        return err; /* -EPROTO after a write: its outcome unknown (docs/etcd.md, Errors) */
    if (try_only && n && b[0].state == 'W')
        return fl__fail(-EPROTO, "etcd %s acquire txn: took a key whose queue holds a live "
                                 "entry",
                        rp->endpoint);
    fl__place(e, a->k, b, n, false, prev ? mark_rev : 0, p);
    if (p->head && n == 0 && prev)
        p->flags = FL_LEASE_EXPIRED; /* a marker, no entry: the last one vanished */
    return 0;
}

int fl__etcd_enqueue(struct fl__etcd *e, const struct fl__etcd_keys *k, const char *id,
                     uint64_t lease, bool try_only, struct fl__etcd_place *p)
{
    memset(p, 0, sizeof *p);
    struct fl__acq a = {.k = k, .lease = lease};
    /* relaxed: a cache of the cluster's value, which the Txn compares */
    a.epoch = atomic_load_explicit(&e->c.epoch, memory_order_relaxed);
    a.evn = snprintf(a.ev, sizeof a.ev, "%" PRIu64, a.epoch);
    a.lvn = fl__etcd_live_value(e, a.epoch, a.lv, sizeof a.lv);
    a.mvn = fl__etcd_mark_value(a.epoch, a.mv, sizeof a.mv);
    a.hin = fl__etcd_mark_value(a.epoch + 1, a.hi, sizeof a.hi); /* below it: E or earlier */
    a.mlen = fl__etcd_entry_key(k, id, a.m);
    /* Two requests at most (ACQUIRE): the usual case alone first (etcd
     * reads every byte of a Txn, the branches it does not run too), the
     * key's first entry and the diagnosis only when that one did not go
     * ahead. */
    for (int phase = 0, round = 0; phase < 2; phase++) {
        json_t *req;
        if (phase == 0 && !try_only)
            req = fl__etcd_txn(fl__level_cmps(&a, true, false, false), fl__enqueue_ops(&a), NULL);
        else if (phase == 0) {
            json_t *empty = fl__etcd_txn(
                fl__level_cmps(&a, true, true, false), fl__enqueue_ops(&a),
                fl__etcd_list(fl__etcd_op_range_sorted(k->q0, k->q_len, k->q1, k->q_len, false, 2,
                                                       0),
                              FL__ETCD_END));
            req = fl__etcd_txn(fl__level_cmps(&a, true, true, true), fl__enqueue_ops(&a),
                               fl__etcd_list(fl__etcd_op_txn(empty), FL__ETCD_END));
        } else {
            /* KEY's first entry; or, if another client made that one since
             * (the marker appeared between the requests), the usual case
             * again in the same request; then the diagnosis. */
            json_t *again = fl__etcd_txn(fl__level_cmps(&a, true, try_only, false),
                                         fl__enqueue_ops(&a), fl__diag_ops(k, a.m, a.mlen));
            req = fl__etcd_txn(fl__level_cmps(&a, false, try_only, false), fl__enqueue_ops(&a),
                               fl__etcd_list(fl__etcd_op_txn(again), FL__ETCD_END));
        }
        struct fl__etcd_reply rp;
        bool ok = false;
        int err = fl__etcd_request(&e->c, "/v3/kv/txn", "acquire txn", req,
                                   FL__ETCD_REPEATABLE | FL__ETCD_GUARD | FL__ETCD_GONE, &rp,
                                   &ok);
        p->ambiguous = p->ambiguous || rp.ambiguous;
        const json_t *txn = rp.body;
        if (err == -ENOENT)
            err = 1; /* "requested lease not found": our lease ran out first */
        else if (!err && !ok && phase == 0 && try_only) {
            /* The try's second level: the queue empty. */
            json_t *sub = NULL;
            err = fl__etcd_txn_resp(&rp, rp.body, 0, "response_txn", &sub);
            if (!err)
                err = fl__etcd_txn_result(&rp, sub, &ok);
            txn = sub;
            json_t *front = NULL;
            if (!err && !ok)
                err = fl__etcd_txn_resp(&rp, sub, 0, "response_range", &front);
            if (!err && !ok)
                err = fl__front_holder(&rp, k, front, &p->holder);
            /* Held (by another: after an attempt without an answer, the
             * holder may be our own entry, which phase 1 finds). */
            if (!err && !ok && p->holder && !p->ambiguous) {
                fl__etcd_reply_free(&rp);
                return fl__fail(-EBUSY, "etcd: key \"%.*s\" is held (token %" PRIu64 ")",
                                FL__KEY_OF(e, k), p->holder);
            }
        }
        if (!err && !ok && phase == 1) {
            json_t *sub = NULL;
            err = fl__etcd_txn_resp(&rp, rp.body, 0, "response_txn", &sub);
            if (!err)
                err = fl__etcd_txn_result(&rp, sub, &ok);
            txn = sub;
        }
        if (!err && ok)
            err = fl__enqueued(e, &rp, txn, &a, try_only, p);
        else if (!err && phase == 1) {
            err = fl__refused(e, &rp, txn, k, a.epoch, try_only, p);
            if (err == 2) {
                /* An earlier attempt of ours queued us: where are we?  Nothing
                 * tells how the holding before ended (flags 0 then); and if
                 * this read fails, the acquisition is applied all the same:
                 * its outcome is unknown to the caller, never "no effect". */
                p->ambiguous = true;
                err = fl__etcd_look(e, k, id, p->c, false, p);
                if (err)
                    err = fl__fail(-EAGAIN, "etcd: the acquire Txn was applied (an attempt "
                                            "whose answer was lost), and where it stands "
                                            "could not be read: %s",
                                   fl_last_error());
            }
        }
        fl__etcd_reply_free(&rp);
        if (err == 3 && ++round < 8) {
            phase = -1; /* from the usual case again */
            continue;
        }
        if (err == 3)
            return fl__fail(-EAGAIN, "etcd: the queue of \"%.*s\" kept changing under the "
                                     "acquire Txn",
                            FL__KEY_OF(e, k));
        if (err || ok || phase == 1)
            return err;
    }
    return 0; /* not reached */
}

/* ---- leaving the queue ---- */

int fl__etcd_leave(struct fl__etcd *e, const struct fl__etcd_keys *k, const char *id,
                   struct fl__etcd_place *p)
{
    char m[FL__ETCD_KEY_MAX], pk[FL__ETCD_KEY_MAX];
    size_t mlen = fl__etcd_entry_key(k, id, m);
    size_t plen = fl__etcd_entry_key(k, p->pred.id, pk);
    /* Only while the entry before ours is as we knew it (live): else we may
     * hold the key now, and must not leave a holding behind unreleased. */
    json_t *req = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(m, mlen, "CREATE", "EQUAL", p->c),
                      fl__etcd_cmp_value(pk, plen, "EQUAL", p->pred.value, p->pred.value_len),
                      FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_delete(m, mlen, false), FL__ETCD_END),
        fl__around_ops(k, m, mlen, p->c));
    struct fl__etcd_reply rp;
    bool ok = false;
    int err = fl__etcd_request(&e->c, "/v3/kv/txn", "leave queue", req,
                               FL__ETCD_REPEATABLE | FL__ETCD_KV, &rp, &ok);
    if (!err && !ok) {
        /* Our entry is gone (a repetition whose first attempt deleted it, or
         * its lease ended: p->c 0), or the entry before it changed. */
        err = fl__around(e, &rp, rp.body, 0, k, true, p);
        if (!err && p->c)
            err = p->head ? 1 : 2;
    } else if (!err)
        p->c = 0;
    fl__etcd_reply_free(&rp);
    return err;
}
