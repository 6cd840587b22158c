/* SPDX-License-Identifier: MIT */
/*
 * lock.c - a holding's Txns on etcd: release, renew and check, fl_close's
 * abandon, and the newest token of a key.  The queue the holding came from
 * (how a holding begins and ends, and its token): queue.c.
 *
 * RELEASE is one Txn:
 *
 *   compare  our entry create_revision == c, lease == L      (live, ours)
 *   success  put our entry "R E T" (no lease); delete the released entry
 *            before ours
 *
 * and, only when it is refused (our entry is gone: its lease ended; or a
 * lost attempt of ours released it), a second one:
 *
 *   compare  our entry absent, last mod_revision == c       (nobody queued since)
 *   success  the same puts (released normally, as on shared memory: no
 *            other holder can have overlapped)
 *   failure  range our entry
 *
 * and L, which carries nothing now, goes back to the handle's pool.  A
 * retry after a lost answer finds "R E T" of this very token in our entry,
 * which only this holding's release writes, or, before L's earliest end,
 * our entry no longer live on L (etcd cannot have ended it; the release of
 * the holding after ours deletes it): 0.
 *
 * RENEW keeps L alive (a keepalive renews it to its granted TTL) and reads
 * that our entry is still live on it; for another length, it moves the entry
 * to a lease of that TTL in a Txn comparing create_revision == c and lease
 * == L.  If that Txn's answer is lost, the entry is on L or on L2 and nobody
 * knows which: letting either go could end the holding under its holder.
 * So both stay (the handle notes L2 as moving_lease), the deadline becomes
 * the earlier of the two leases' ends, renew answers -EAGAIN, and the next
 * renew, release or check completes the move (the late Txn could still
 * make it: it is never abandoned) and lets the old lease go.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/* ---- release, check, renew ---- */

/* The key of lease l (held by this handle) and its state in the key table:
 * 0, -EINVAL (bad arguments), or -ESTALE (not this handle's holding now). */
static int fl__lease_args(struct fl__etcd *e, const struct fl__etcd_lease *l, const char *fn,
                          char key[FL_KEY_MAX + 1], struct fl__etcd_key *held)
{
    if (e->h.readonly && strcmp(fn, "fl_check") != 0)
        return fl__fail(-EINVAL, "%s: read-only region handle", fn);
    if (l->token == 0 || fl__etcd_rev(l->token) == 0)
        return fl__fail(-EINVAL, "%s: token %" PRIu64 " was never issued", fn, l->token);
    if (fl__etcd_slot_key(e, l->slot, key, NULL) != 0)
        return fl__fail(-EINVAL, "%s: bad slot %" PRIu32 " (not a key this handle used)", fn,
                        l->slot);
    if (!fl__etcd_held(e, l->slot, l->token, held))
        return fl__fail(-ESTALE, "etcd: \"%s\" is no longer held by token %" PRIu64
                                 " (released, or taken over)",
                        key, l->token);
    return 0;
}

static int fl__settle_move(struct fl__etcd *e, uint32_t slot, const struct fl__etcd_keys *k,
                           struct fl__etcd_key *h);

/* The holding of lease l (fl__lease_args), its key's etcd keys, and a renew's
 * move of unknown outcome settled (RENEW). */
static int fl__holding(struct fl__etcd *e, const struct fl__etcd_lease *l, const char *fn,
                       char key[FL_KEY_MAX + 1], struct fl__etcd_key *h,
                       struct fl__etcd_keys *k)
{
    int err = fl__lease_args(e, l, fn, key, h);
    if (err)
        return err;
    fl__etcd_keys_of(e, key, strlen(key), k);
    return fl__settle_move(e, l->slot, k, h);
}

/* Our entry of holding h at k: the lease it is on (0: none, or gone) and
 * whether it is still the live entry of that holding. */
static int fl__entry_now(struct fl__etcd *e, const struct fl__etcd_keys *k,
                         const struct fl__etcd_key *h, bool *live, uint64_t *on)
{
    *live = false;
    *on = 0;
    char m[FL__ETCD_KEY_MAX];
    size_t mlen = fl__etcd_entry_key(k, h->held_id, m);
    json_t *req = json_pack("{s:o}", "key", fl__etcd_b64(m, mlen));
    struct fl__etcd_reply rp;
    int err = fl__etcd_request(&e->c, "/v3/kv/range", "range entry", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_KV, &rp, NULL);
    struct fl__etcd_kv kv = {0}; /* clang-analyzer cannot see that err is never above 0 */
    int found = err ? err : fl__etcd_range_first(&rp, rp.body, FL__ETCD_ENTRY_VALUE_MAX, &kv);
    if (found == 1) {
        struct fl__etcd_entry en = {.state = 0}; /* entry_first fills it whole */
        err = fl__etcd_entry_parse(&rp, k, &kv, &en);
        if (!err && en.state == 'W' && en.c == fl__etcd_rev(h->held_token)) {
            *live = true;
            *on = en.lease;
        }
        fl__etcd_kv_free(&kv);
    } else if (found < 0)
        err = found;
    fl__etcd_reply_free(&rp);
    return err;
}

/* The Txn that moves holding h's entry m from lease `from` to lease `to`
 * (RENEW): 0 with *moved (the entry is on `to`, by this Txn or an earlier
 * one), or an error (-EAGAIN: unknown). */
static int fl__move(struct fl__etcd *e, const struct fl__etcd_keys *k,
                    const struct fl__etcd_key *h, uint64_t from, uint64_t to, bool *moved)
{
    *moved = false;
    char m[FL__ETCD_KEY_MAX];
    size_t mlen = fl__etcd_entry_key(k, h->held_id, m);
    json_t *req = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(m, mlen, "CREATE", "EQUAL", fl__etcd_rev(h->held_token)),
                      fl__etcd_cmp_lease(m, mlen, "EQUAL", from), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_put_lease(m, mlen, to), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_range(m, mlen), FL__ETCD_END));
    struct fl__etcd_reply rp;
    bool ok = false;
    int err = fl__etcd_request(&e->c, "/v3/kv/txn", "renew txn", req,
                               FL__ETCD_REPEATABLE | FL__ETCD_KV, &rp, &ok);
    if (!err && !ok) {
        /* A repetition after a lost answer finds the entry on `to`. */
        json_t *range = NULL;
        struct fl__etcd_entry en = {.state = 0}; /* entry_first fills it whole */
        err = fl__etcd_txn_resp(&rp, rp.body, 0, "response_range", &range);
        int found = err ? err : fl__etcd_entry_first(&rp, k, range, &en);
        if (found == 1)
            ok = en.state == 'W' && en.lease == to && en.c == fl__etcd_rev(h->held_token);
        else if (found < 0)
            err = found;
    }
    fl__etcd_reply_free(&rp);
    *moved = !err && ok;
    return err;
}

/* A renew whose move of the entry had no known outcome left two leases
 * (RENEW).  Its Txn may still arrive, late (held in a stopped member), and
 * move the entry then: so the move is completed, never abandoned.  The
 * entry on the new lease (moved, or moved now): the old one goes; on
 * neither (the holding is over): the new one goes.  Still unknown (a
 * request failed): both stay, and the error is returned.  *h is updated. */
static int fl__settle_move(struct fl__etcd *e, uint32_t slot, const struct fl__etcd_keys *k,
                           struct fl__etcd_key *h)
{
    if (!h->moving_lease)
        return 0;
    bool live = false, moved = false;
    uint64_t on = 0;
    int err = fl__entry_now(e, k, h, &live, &on);
    if (!err && live && on == h->held_lease)
        err = fl__move(e, k, h, h->held_lease, h->moving_lease, &moved);
    if (err)
        return err;
    uint64_t drop;
    if ((live && on == h->moving_lease) || moved) {
        drop = h->held_lease;
        h->held_lease = h->moving_lease;
        h->held_ttl = h->moving_ttl;
        h->held_until = h->moving_until;
    } else
        drop = h->moving_lease; /* the holding is over: the entry is on neither */
    h->moving_lease = h->moving_ttl = h->moving_until = 0;
    fl__etcd_set_lease(e, slot, h->held_token, h->held_lease, h->held_ttl, h->held_until, 0, 0,
                       0);
    fl__etcd_revoke_later(e, drop);
    return 0;
}

int fl__etcd_check(struct fl__etcd *e, const struct fl__etcd_lease *l)
{
    char key[FL_KEY_MAX + 1];
    struct fl__etcd_key h;
    struct fl__etcd_keys k;
    int err = fl__holding(e, l, "fl_check", key, &h, &k);
    if (err)
        return err;
    if (fl__etcd_now_ns() >= l->deadline_ns)
        return fl__fail(-ESTALE, "etcd: the lease of \"%s\" (token %" PRIu64 ") is past its "
                                 "deadline",
                        key, l->token);
    bool live = false;
    uint64_t on = 0;
    err = fl__entry_now(e, &k, &h, &live, &on);
    if (err)
        return err;
    return live && (on == h.held_lease || (h.moving_lease && on == h.moving_lease))
               ? 0
               : fl__fail(-ESTALE, "etcd: \"%s\" is no longer held by token %" PRIu64, key,
                          l->token);
}

/* Our entry m rewritten as done (value dv, no lease), and the released
 * entry before it (pk, plen 0: none) deleted. */
static json_t *fl__done_ops(const char *m, size_t mlen, const char *dv, size_t dvn,
                            const char *pk, size_t plen)
{
    json_t *ops = fl__etcd_list(fl__etcd_op_put(m, mlen, dv, dvn, 0, false), FL__ETCD_END);
    if (ops && plen && json_array_append_new(ops, fl__etcd_op_delete(pk, plen, false)) != 0) {
        json_decref(ops);
        return NULL;
    }
    return ops;
}

/* The release Txn of holding h with state 'R' (fl_release) or 'D'
 * (fl_close).  retry: an earlier call's attempt may have taken effect (its
 * answer was lost), so an entry that says exactly this release is that
 * attempt's. */
static int fl__release_as(struct fl__etcd *e, const struct fl__etcd_keys *k,
                          const struct fl__etcd_key *h, uint64_t lease, char state, bool retry)
{
    char m[FL__ETCD_KEY_MAX], pk[FL__ETCD_KEY_MAX], dv[FL__ETCD_ENTRY_VALUE_MAX];
    size_t mlen = fl__etcd_entry_key(k, h->held_id, m);
    size_t plen = h->pred_id[0] ? fl__etcd_entry_key(k, h->pred_id, pk) : 0;
    int dvn = fl__etcd_done_value(state, h->held_token, dv, sizeof dv);
    uint64_t c = fl__etcd_rev(h->held_token);
    /* The usual case alone in the request (etcd reads every byte of a Txn,
     * the branches it does not run too); when it is refused, the expiry
     * case and a read of our entry in a second one (RELEASE). */
    json_t *req = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(m, mlen, "CREATE", "EQUAL", c),
                      fl__etcd_cmp_lease(m, mlen, "EQUAL", lease), FL__ETCD_END),
        fl__done_ops(m, mlen, dv, (size_t)dvn, pk, plen), NULL);
    struct fl__etcd_reply rp;
    bool ok = false;
    int err = fl__etcd_request(&e->c, "/v3/kv/txn", "release txn", req,
                               FL__ETCD_REPEATABLE | FL__ETCD_KV, &rp, &ok);
    bool unsure = retry || rp.ambiguous;
    fl__etcd_reply_free(&rp);
    if (err || ok)
        return err;
    /* Refused: our entry is not live on our lease.  Gone (its lease
     * ended): released normally if nobody queued since (the marker still
     * names our entry), as no other holder can have overlapped. */
    req = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(m, mlen, "CREATE", "EQUAL", 0),
                      fl__etcd_cmp_rev(k->last, k->last_len, "MOD", "EQUAL", c), FL__ETCD_END),
        fl__done_ops(m, mlen, dv, (size_t)dvn, pk, plen),
        fl__etcd_list(fl__etcd_op_range(m, mlen), FL__ETCD_END));
    err = fl__etcd_request(&e->c, "/v3/kv/txn", "release txn", req,
                           FL__ETCD_REPEATABLE | FL__ETCD_KV, &rp, &ok);
    unsure = unsure || rp.ambiguous;
    json_t *range = NULL;
    if (err || ok)
        goto out;
    err = fl__etcd_txn_resp(&rp, rp.body, 0, "response_range", &range);
    if (err)
        goto out;
    /* After an attempt whose answer was lost (in this call, or in an
     * earlier fl_release of this holding), the entry is the lost attempt's
     * work when it says this very release, or when it is no longer live on
     * our lease although the answer came before that lease's earliest end:
     * etcd cannot have ended it, and nothing but our release rewrites it
     * (the release of the holding after ours then deletes it). */
    struct fl__etcd_kv kv;
    int found = fl__etcd_range_first(&rp, range, FL__ETCD_ENTRY_VALUE_MAX, &kv);
    bool said = found == 1 && kv.value_len == (size_t)dvn &&
                memcmp(kv.value, dv, (size_t)dvn) == 0;
    bool live = found == 1 && kv.value_len > 0 && kv.value[0] == 'W' && kv.lease == lease;
    bool mine = unsure && found >= 0 && (said || (!live && fl__etcd_now_ns() < h->held_until));
    if (found == 1)
        fl__etcd_kv_free(&kv);
    if (found < 0)
        err = found;
    else if (!mine)
        err = fl__fail(-ESTALE, "etcd: \"%.*s\" is no longer held by token %" PRIu64
                                " (taken over, or released before)",
                       FL__KEY_OF(e, k), h->held_token);
out:
    fl__etcd_reply_free(&rp);
    return err;
}

int fl__etcd_release(struct fl__etcd *e, const struct fl__etcd_lease *l)
{
    char key[FL_KEY_MAX + 1];
    struct fl__etcd_key h;
    struct fl__etcd_keys k;
    int err = fl__holding(e, l, "fl_release", key, &h, &k);
    if (err)
        return err;
    err = fl__release_as(e, &k, &h, h.held_lease, 'R', h.release_unsure);
    if (!err || err == -ESTALE) {
        /* Over either way, and our entry carries no lease now (or is
         * gone): the lease goes back to the pool for the next acquisition,
         * by the one call that ended the holding in the key table (two
         * threads may release one holding at once).  Unless a request that
         * puts an entry on it may still arrive (an acquire Txn whose answer
         * was lost, applied by a repetition): then it is revoked, and such
         * a late request finds no lease.  On any other error the entry may
         * still be live: the caller calls fl_release again (fl_close does
         * too). */
        if (fl__etcd_clear_held(e, l->slot, l->token)) {
            if (h.tainted)
                fl__etcd_revoke_later(e, h.held_lease);
            else
                fl__etcd_lease_give(e, h.held_lease, h.held_ttl, h.held_until);
        }
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
        struct fl__etcd_key h = *e->keys[s];
        pthread_mutex_unlock(&e->lock);
        if (!h.held_token)
            continue;
        struct fl__etcd_keys k;
        fl__etcd_keys_of(e, h.name, h.len, &k);
        (void)fl__settle_move(e, s, &k, &h); /* best effort: else both leases below */
        fl__etcd_clear_held(e, s, h.held_token);
        uint64_t leases[2] = {h.held_lease, h.moving_lease};
        for (int i = 0; i < 2; i++) {
            if (!leases[i])
                continue;
            (void)fl__release_as(e, &k, &h, leases[i], 'D', h.release_unsure); /* best effort */
            fl__etcd_revoke_later(e, leases[i]);
        }
    }
}

int fl__etcd_renew(struct fl__etcd *e, struct fl__etcd_lease *l, uint64_t lease_ns)
{
    char key[FL_KEY_MAX + 1];
    struct fl__etcd_key h;
    struct fl__etcd_keys k;
    if (lease_ns == 0)
        return fl__fail(-EINVAL, "fl_renew: lease_ns is 0");
    uint64_t want;
    int err = fl__etcd_ttl(e, lease_ns, &want);
    if (!err)
        err = fl__holding(e, l, "fl_renew", key, &h, &k);
    if (err)
        return err;
    bool live = false;
    uint64_t on = 0;
    if (want == h.held_ttl) {
        uint64_t until = 0;
        err = fl__etcd_lease_renew(e, h.held_lease, &until);
        if (err)
            return err;
        if (!until)
            goto stale; /* the lease ran out: etcd deleted the entry with it */
        /* The lease lives on; is our entry still live on it? */
        err = fl__entry_now(e, &k, &h, &live, &on);
        if (err)
            return err;
        if (!live || on != h.held_lease)
            goto stale;
        fl__etcd_set_lease(e, l->slot, l->token, h.held_lease, h.held_ttl, until, 0, 0, 0);
        l->deadline_ns = until;
        l->lease_id = h.held_lease;
        return 0;
    }
    /* Another length: a lease of that TTL, fresh, and the entry moved to it. */
    uint64_t lease2 = 0, granted = 0, until2 = 0;
    err = fl__etcd_lease_take(e, want, &lease2, &granted, &until2);
    if (!err && until2 < fl__etcd_now_ns() + want * FL__NS_PER_S / 10 * 9)
        err = fl__etcd_lease_renew(e, lease2, &until2);
    if (!err && !until2)
        err = fl__etcd_lease_grant(e, want, &lease2, &granted, &until2);
    if (err)
        return err;
    bool ok = false;
    err = fl__move(e, &k, &h, h.held_lease, lease2, &ok);
    if (err == -EAGAIN || err == -EPROTO) {
        /* Unknown: the entry is on the old lease or on lease2, and both stay
         * (RENEW).  The holding lasts at least as long as the shorter. */
        fl__etcd_set_lease(e, l->slot, l->token, h.held_lease, h.held_ttl, h.held_until, lease2,
                           want, until2);
        l->deadline_ns = h.held_until < until2 ? h.held_until : until2;
        return err;
    }
    if (err || !ok) {
        fl__etcd_lease_give(e, lease2, want, until2); /* the Txn had no effect */
        if (err)
            return err;
        goto stale;
    }
    fl__etcd_set_lease(e, l->slot, l->token, lease2, want, until2, 0, 0, 0);
    /* The old lease carries nothing now, unless a late acquire Txn may put
     * our entry on it again (tainted). */
    if (h.tainted)
        fl__etcd_revoke_later(e, h.held_lease);
    else
        fl__etcd_lease_give(e, h.held_lease, h.held_ttl, h.held_until);
    l->deadline_ns = until2;
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
    int found = err ? err : fl__etcd_range_first(&rp, rp.body, FL__ETCD_MARK_READ_MAX, &kv);
    if (found == 1) {
        uint64_t epoch = 0;
        err = fl__etcd_mark_parse(&rp, &kv, &epoch, newest);
        if (err == -ENOMSG)
            err = -EPROTO;
        *mark_rev = kv.mod_revision;
        fl__etcd_kv_free(&kv);
    } else if (found < 0)
        err = found;
    fl__etcd_reply_free(&rp);
    if (!err && *newest)
        fl__etcd_note_newest(e, key, len, *newest);
    return err;
}
