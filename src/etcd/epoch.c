/* SPDX-License-Identifier: MIT */
/*
 * epoch.c - the token epoch kept in the cluster, and the history check.
 *
 * TOKENS.  A token is epoch << 40 | create_revision (FL_TOKEN_EPOCH_SHIFT,
 * as on shared memory): create_revision is the revision of the Txn that
 * created the acquisition's queue entry, greater than every earlier
 * creation's because etcd's revision only grows; the epoch is the decimal
 * value of PREFIX/epoch, which every acquire Txn compares (queue.c), so a
 * token is never made under an epoch the cluster no longer holds.  A revision of
 * 2^40 or more cannot be encoded: acquisition fails with -EOVERFLOW.
 *
 * RESTORES.  `etcdctl snapshot restore` brings back the data of the moment
 * of the snapshot, revision included: creations after the restore reuse
 * revisions already turned into tokens.  The epoch brings order back: after
 * a restore, and before clients resume, the operator runs
 *
 *     fencelock etcd-epoch --region etcd://.../PREFIX --bump
 *
 * which sets the epoch to one more than the restored value (or to
 * --at-least N when the cluster was restored from the same snapshot before,
 * or its epoch bumped after the snapshot was taken: N must exceed every
 * epoch ever used; `fencelock status` and `fencelock etcd-epoch` print it).
 * Every token of the new epoch exceeds every token of the old one.
 *
 * A client that was running across the restore does not wait for the
 * operator: every linearizable kv answer carries the cluster's revision,
 * and the client keeps the greatest epoch << 40 | revision it has seen (the
 * history mark).  An acquire whose answer is below the mark taken before
 * its request was sent (FL__ETCD_GUARD) means the cluster went back; the
 * client then reads the epoch again, and if it was not bumped the acquire
 * fails with -ENOTRECOVERABLE ("fail closed") rather than hand out a token
 * not greater than one it has seen.  Other answers only raise the mark: a
 * commit or a read on a restored cluster is what etcd's data says.  A client
 * started after the restore has seen nothing: only the bump protects it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

int fl__etcd_epoch_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                         uint64_t *epoch)
{
    *epoch = 0;
    uint64_t v = 0;
    if (kv->value_len == 0 || kv->value_len > 7)
        goto bad;
    for (size_t i = 0; i < kv->value_len; i++) {
        if (kv->value[i] < '0' || kv->value[i] > '9')
            goto bad;
        v = v * 10 + (uint64_t)(kv->value[i] - '0');
    }
    if (v == 0 || v >= FL__ETCD_EPOCH_LIMIT)
        goto bad;
    *epoch = v;
    return 0;
bad:
    return fl__etcd_fail(-EPROTO,
                         "etcd %s: the epoch key holds '%.*s', not an epoch in 1..%llu",
                         rp->endpoint, (int)(kv->value_len > 40 ? 40 : kv->value_len),
                         kv->value ? (const char *)kv->value : "",
                         (unsigned long long)FL__ETCD_EPOCH_LIMIT - 1);
}

int fl__etcd_epoch_note(struct fl__etcd_client *c, uint64_t epoch)
{
    /* relaxed: the epoch is a cache of the cluster's value; etcd compares it */
    uint64_t have = atomic_load_explicit(&c->epoch, memory_order_relaxed);
    while (epoch > have)
        if (atomic_compare_exchange_weak_explicit(&c->epoch, &have, epoch, memory_order_relaxed,
                                                  memory_order_relaxed))
            return 0;
    if (epoch < have)
        return fl__etcd_fail(-ENOTRECOVERABLE,
                             "etcd %s: the token epoch went back from %" PRIu64 " to %" PRIu64
                             " (the cluster was restored from an earlier snapshot?): run "
                             "`fencelock etcd-epoch --region URI --bump --at-least %" PRIu64
                             "` before clients resume",
                             c->uri.prefix, have, epoch, have + 1);
    return 0;
}

/* One linearizable read of PREFIX/epoch (no FL__ETCD_KV, so no history
 * check: the check calls it).  *epoch 0 when absent; *rev the answer's
 * revision. */
static int fl__epoch_read(struct fl__etcd_client *c, uint64_t *epoch, uint64_t *mod_rev,
                          uint64_t *rev)
{
    char key[FL__ETCD_KEY_MAX];
    size_t klen = fl__etcd_key(c, NULL, "epoch", 5, key);
    json_t *req = json_pack("{s:o}", "key", fl__etcd_b64(key, klen));
    struct fl__etcd_reply rp;
    int err = fl__etcd_request(c, "/v3/kv/range", "range epoch", req, FL__ETCD_IDEMPOTENT, &rp,
                               NULL);
    *epoch = 0;
    *mod_rev = 0;
    *rev = 0;
    json_t *hdr = NULL;
    if (!err)
        err = fl__etcd_obj(&rp, rp.body, "header", &hdr);
    if (!err)
        err = fl__etcd_u64(&rp, hdr, "revision", rev);
    struct fl__etcd_kv kv;
    int found = err ? err : fl__etcd_range_first(&rp, rp.body, 64, &kv);
    if (found == 1) {
        err = fl__etcd_epoch_parse(&rp, &kv, epoch);
        *mod_rev = kv.mod_revision;
        fl__etcd_kv_free(&kv);
    } else if (found < 0)
        err = found;
    fl__etcd_reply_free(&rp);
    return err;
}

static void fl__mark_raise(struct fl__etcd_client *c, uint64_t mark)
{
    /* release: pairs with the acquire load in fl__etcd_post (a mark read
     * before a request is one some earlier answer established) */
    uint64_t have = atomic_load_explicit(&c->seen, memory_order_relaxed);
    while (mark > have)
        if (atomic_compare_exchange_weak_explicit(&c->seen, &have, mark, memory_order_release,
                                                  memory_order_relaxed))
            break;
}

int fl__etcd_history_check(struct fl__etcd_client *c, struct fl__etcd_reply *rp,
                           uint64_t seen_before, bool guard)
{
    uint64_t epoch = atomic_load_explicit(&c->epoch, memory_order_relaxed);
    uint64_t rev = rp->revision;
    if (epoch == 0 || rev >= FL__ETCD_REV_LIMIT)
        return 0; /* no epoch yet (nothing handed out); or acquire says -EOVERFLOW */
    uint64_t mark = epoch << FL__ETCD_EPOCH_SHIFT | rev;
    if (mark >= seen_before) {
        fl__mark_raise(c, mark);
        return 0;
    }
    if (!guard)
        return 0; /* only an answer that numbers a token must not be below */
    /* Below what was seen before the request left.  Either the epoch was
     * bumped (after a restore: revisions restart lower under a greater
     * epoch) and this client has not read it yet, or the cluster went back
     * under the same epoch. */
    uint64_t now_epoch = 0, mod_rev = 0, now_rev = 0;
    int err = fl__epoch_read(c, &now_epoch, &mod_rev, &now_rev);
    if (err)
        return err;
    if (now_epoch > epoch) {
        err = fl__etcd_epoch_note(c, now_epoch);
        if (err)
            return err;
        fl__mark_raise(c, now_epoch << FL__ETCD_EPOCH_SHIFT | rev);
        return 0;
    }
    return fl__etcd_fail(-ENOTRECOVERABLE,
                         "etcd %s: the cluster went back in time: revision %" PRIu64
                         " after %" PRIu64 " under the same token epoch %" PRIu64
                         " (restored from a snapshot?); no token can be handed out safely "
                         "until the epoch is bumped: `fencelock etcd-epoch --region URI "
                         "--bump` (docs/etcd.md, Restoring a snapshot)",
                         rp->endpoint, rev,
                         (uint64_t)(seen_before & (FL__ETCD_REV_LIMIT - 1)), epoch);
}

/* [PREFIX/kind/, PREFIX/kind0): every key of one kind of the layout. */
static void fl__kind_range(const struct fl__etcd_client *c, const char *kind,
                           char key[FL__ETCD_KEY_MAX], size_t *klen, char end[FL__ETCD_KEY_MAX])
{
    *klen = fl__etcd_key(c, kind, "", 0, key);
    memcpy(end, key, *klen);
    end[*klen - 1]++; /* '/' + 1 = '0' */
}

/* The kinds of keys whose presence means tokens were issued under the prefix
 * (etcd.h, LAYOUT): a lock key, a marker, a record. */
static const char *const fl__issued_kinds[] = {"lock", "last", "rec"};
#define FL__ISSUED_KINDS (sizeof fl__issued_kinds / sizeof fl__issued_kinds[0])

int fl__etcd_epoch_load(struct fl__etcd_client *c, bool create, uint64_t *epoch)
{
    char key[FL__ETCD_KEY_MAX];
    size_t klen = fl__etcd_key(c, NULL, "epoch", 5, key);
    uint64_t e = 0, mod_rev = 0, rev = 0;
    int err = fl__epoch_read(c, &e, &mod_rev, &rev);
    if (err)
        return err;
    if (e == 0 && create) {
        /* The first client of a prefix makes epoch 1; a racing one reads it.
         * Only a prefix where no token was ever issued: an epoch deleted
         * after tokens were handed out (etcdctl del PREFIX/epoch) must never
         * start numbering again at 1, below them (I1).  So the Txn also
         * compares that no lock key, marker or record exists.  Repeatable:
         * a repeated creation fails its compare and reads. */
        json_t *cmp = fl__etcd_list(fl__etcd_cmp_rev(key, klen, "CREATE", "EQUAL", 0),
                                    FL__ETCD_END);
        for (size_t i = 0; cmp && i < FL__ISSUED_KINDS; i++) {
            char from[FL__ETCD_KEY_MAX], to[FL__ETCD_KEY_MAX];
            size_t flen;
            fl__kind_range(c, fl__issued_kinds[i], from, &flen, to);
            json_t *one = fl__etcd_cmp_rev_range(from, flen, to, flen, "CREATE", "EQUAL", 0);
            if (!one || json_array_append_new(cmp, one) != 0) {
                json_decref(cmp);
                cmp = NULL;
            }
        }
        json_t *req = fl__etcd_txn(
            cmp, fl__etcd_list(fl__etcd_op_put(key, klen, "1", 1, 0, false), FL__ETCD_END),
            fl__etcd_list(fl__etcd_op_range(key, klen), FL__ETCD_END));
        struct fl__etcd_reply rp;
        bool ok = false;
        err = fl__etcd_request(c, "/v3/kv/txn", "txn create epoch", req, FL__ETCD_REPEATABLE, &rp,
                               &ok);
        if (!err && ok)
            e = 1;
        else if (!err) {
            json_t *range = NULL;
            struct fl__etcd_kv kv;
            err = fl__etcd_txn_resp(&rp, rp.body, 0, "response_range", &range);
            int found = err ? err : fl__etcd_range_first(&rp, range, 64, &kv);
            if (found == 1) {
                err = fl__etcd_epoch_parse(&rp, &kv, &e);
                fl__etcd_kv_free(&kv);
            } else if (found == 0)
                err = fl__etcd_fail(-ENOTRECOVERABLE,
                                    "etcd %s: the epoch key %s/epoch is missing, but the prefix "
                                    "holds locks or records: tokens were issued under an epoch "
                                    "that is gone (deleted?), and numbering again from 1 could "
                                    "repeat them.  Run `fencelock etcd-epoch --region URI "
                                    "--bump`: it sets an epoch above every token the prefix "
                                    "holds (docs/etcd.md, Tokens)",
                                    rp.endpoint, c->uri.prefix);
            else
                err = found;
        }
        fl__etcd_reply_free(&rp);
        if (err)
            return err;
    }
    if (e) {
        err = fl__etcd_epoch_note(c, e);
        if (err)
            return err;
        if (rev < FL__ETCD_REV_LIMIT)
            fl__mark_raise(c, e << FL__ETCD_EPOCH_SHIFT | rev);
    }
    *epoch = e;
    return 0;
}

/* The epoch a value under the prefix names, as its layout writes it (etcd.h,
 * LAYOUT): a queue entry "W %07E ..." or "R %07E ...", a marker "q%07E", a
 * record "KEY NUL T ...", and the layout before 0.2 (a lock value "E PID
 * HOST", a marker "%07E ..."), whose epochs count too. */
static int fl__value_epoch(const struct fl__etcd_reply *rp, const char *kind,
                           const struct fl__etcd_kv *kv, uint64_t *epoch)
{
    const unsigned char *v = kv->value ? kv->value : (const unsigned char *)"";
    size_t n = kv->value_len, i = 0, digits = 7;
    bool token = false;
    if (strcmp(kind, "rec") == 0) {
        const unsigned char *nul = memchr(v, '\0', n);
        if (!nul)
            goto bad;
        i = (size_t)(nul - v) + 1;
        digits = 20;
        token = true;
    } else if (n >= 2 && (v[0] == 'W' || v[0] == 'R' || v[0] == 'D') && v[1] == ' ')
        i = 2; /* an entry */
    else if (n >= 1 && v[0] == 'q')
        i = 1; /* a marker */
    uint64_t x = 0;
    size_t start = i;
    while (i < n && i - start < digits && v[i] >= '0' && v[i] <= '9')
        x = x * 10 + (uint64_t)(v[i++] - '0');
    if (i == start || (token && i - start != 20) || (!token && x >= FL__ETCD_EPOCH_LIMIT) ||
        (!token && i < n && v[i] != ' ') || (!token && i == n && start != 1))
        goto bad;
    *epoch = token ? x >> FL__ETCD_EPOCH_SHIFT : x;
    return 0;
bad:
    return fl__etcd_fail(-EPROTO, "etcd %s: %.*s holds a value fencelock does not write: its "
                                  "epoch cannot be known",
                         rp->endpoint, (int)(kv->key_len > 200 ? 200 : kv->key_len),
                         (const char *)kv->key);
}

/* The greatest epoch named by any lock key, marker or record of the prefix
 * (0: none), read in pages (records are large). */
static int fl__epoch_floor(struct fl__etcd_client *c, uint64_t *max)
{
    *max = 0;
    struct fl__etcd_reply ctx = {.op = "range (epoch floor)"};
    snprintf(ctx.endpoint, sizeof ctx.endpoint, "%s", c->uri.prefix); /* for messages */
    for (size_t k = 0; k < FL__ISSUED_KINDS; k++) {
        unsigned char last[FL__ETCD_KEY_MAX];
        size_t last_len = 0;
        for (bool more = true; more;) {
            struct fl__etcd_kv *kvs = NULL;
            uint32_t n = 0;
            int err = fl__etcd_range_page(c, fl__issued_kinds[k], last_len ? last : NULL,
                                          last_len, 1u << 20, 32, &kvs, &n, &more, NULL);
            for (uint32_t i = 0; !err && i < n; i++) {
                uint64_t e = 0;
                err = fl__value_epoch(&ctx, fl__issued_kinds[k], &kvs[i], &e);
                if (!err && e > *max)
                    *max = e;
            }
            if (!err && n) { /* the next page starts after the last key */
                last_len = kvs[n - 1].key_len < sizeof last ? kvs[n - 1].key_len : sizeof last;
                memcpy(last, kvs[n - 1].key, last_len);
            }
            fl__etcd_kvs_free(kvs, n);
            if (err)
                return err;
            if (n == 0)
                break;
        }
    }
    return 0;
}

int fl__etcd_epoch_bump(struct fl__etcd_client *c, uint64_t at_least, uint64_t *before,
                        uint64_t *after)
{
    char key[FL__ETCD_KEY_MAX];
    size_t klen = fl__etcd_key(c, NULL, "epoch", 5, key);
    for (int round = 0; round < 16; round++) {
        uint64_t e = 0, mod_rev = 0, rev = 0;
        int err = fl__epoch_read(c, &e, &mod_rev, &rev);
        if (err)
            return err;
        /* Above the current epoch, and above every epoch a key of the prefix
         * names (an epoch deleted, or set back, after tokens were issued). */
        uint64_t floor = 0;
        err = fl__epoch_floor(c, &floor);
        if (err)
            return err;
        uint64_t next = e > floor ? e + 1 : floor + 1;
        if (next < at_least)
            next = at_least;
        if (next >= FL__ETCD_EPOCH_LIMIT)
            return fl__etcd_fail(-EOVERFLOW, "etcd %s: epoch %" PRIu64 " would pass the last "
                                             "one (%llu)", c->uri.prefix, next,
                                 (unsigned long long)FL__ETCD_EPOCH_LIMIT - 1);
        char text[FL__ETCD_EPOCH_TEXT_MAX];
        int tlen = snprintf(text, sizeof text, "%" PRIu64, next);
        /* Only from the value read: two operators bumping at once make two
         * steps, never one value twice.  Not repeated after a timeout (the
         * caller sees -EAGAIN and reads the epoch to learn). */
        json_t *cmp = e ? fl__etcd_cmp_rev(key, klen, "MOD", "EQUAL", mod_rev)
                        : fl__etcd_cmp_rev(key, klen, "CREATE", "EQUAL", 0);
        json_t *req = fl__etcd_txn(fl__etcd_list(cmp, FL__ETCD_END),
                                   fl__etcd_list(fl__etcd_op_put(key, klen, text, (size_t)tlen, 0,
                                                                 false),
                                                 FL__ETCD_END),
                                   NULL);
        struct fl__etcd_reply rp;
        bool ok = false;
        err = fl__etcd_request(c, "/v3/kv/txn", "txn bump epoch", req, 0, &rp, &ok);
        fl__etcd_reply_free(&rp);
        if (err)
            return err;
        if (ok) {
            *before = e;
            *after = next;
            /* The bump is this client's newest knowledge: take it (an
             * epoch read lower than ours would fail closed). */
            atomic_store_explicit(&c->epoch, next, memory_order_relaxed);
            atomic_store_explicit(&c->seen, next << FL__ETCD_EPOCH_SHIFT, memory_order_release);
            return 0;
        }
    }
    return fl__etcd_fail(-EBUSY, "etcd %s: the epoch kept changing while it was bumped",
                         c->uri.prefix);
}
