/* SPDX-License-Identifier: MIT */
/*
 * record.c - fenced records on etcd: one key, PREFIX/rec/NAME, whose value
 * is
 *
 *     KEY NUL %020(T) %020(S) DATA
 *
 * KEY the lock key that fences it (its binding, I8), T the greatest token
 * it accepted and S that commit's sequence number (20 decimal digits each,
 * so that byte order is number order), DATA the committed bytes.  A commit
 * with token T and sequence S is one nested Txn, so the check and the write
 * are one atomic step in etcd (I2):
 *
 *   compare  rec create_revision == 0             (never committed)
 *   success  put rec "KEY NUL %020(T) %020(S) DATA" (created and bound to KEY)
 *   failure  Txn: compare  rec value >  "KEY NUL"
 *                          rec value <  BOUND
 *                 success  put rec "KEY NUL %020(T) %020(S) DATA"
 *                 failure  range rec
 *
 * The two value compares hold together exactly when the value starts with
 * "KEY NUL" (any byte string between a string p and p + s starts with p)
 * and the accepted (F, S') is below BOUND: binding and fence in one round
 * trip.  A value compare on a missing key is always false in etcd, hence
 * the outer compare for the first commit.  When refused, the range tells
 * which: a value bound to KEY whose token is greater (or equal, strict)
 * means -ESTALE with F, any other binding -EXDEV.  A read is one range: the
 * value of one accepted commit, whole (I3).
 *
 * SEQUENCE.  A commit can be stuck in a member (stopped by SIGSTOP, a frozen
 * VM) past its answer, and take effect later: its caller got -EAGAIN, read
 * the record, committed newer data with the same lease, and would see that
 * replaced by the older commit when the stuck one arrives.  So every commit
 * of a holding carries S, from the handle's counter (commits of one holding
 * come from one handle: a lease of another handle is refused), and BOUND
 * orders the commits of one token by it:
 *
 *   fl_commit            BOUND "KEY NUL %020(T) %020(S)": F < T, or F = T, S' < S
 *   fl_commit strict     BOUND "KEY NUL %020(T)":         F < T
 *   fl_commit_token      BOUND "KEY NUL %020(T+1)", S = 0: F <= T (strict: F < T)
 *
 * A commit of the holding that finds a later commit of the same holding
 * (F = T, S' > S) was overtaken by its own successor; it returns 0, as if it
 * had taken effect just before it (it was invoked first, and answers after:
 * that order is a linearization).  fl_commit_token has no holding: by a
 * token alone, commits are fenced by the token only, as on a region file.
 * So an answer of -EAGAIN means: the commit may still take effect, until
 * a later commit of the same lease or a commit of a newer token has been
 * accepted; from then on it never will.
 *
 * WHICH TOKENS A KEY ISSUED.  fl_commit takes a lease's token as issued when
 * this handle has seen the key reach it (its acquisitions, the holders it
 * met); otherwise, and for fl_commit_token, it reads PREFIX/last/KEY (the
 * newest token of KEY: lock.c) and refuses a token beyond it, and the
 * commit Txn compares the marker's mod_revision with the one read, so the
 * check holds when the commit takes effect.  (The newest token only grows:
 * if the marker moved meanwhile, the check still holds, and after a few
 * such rounds the commit goes without the compare.)
 *
 * A commit is never sent twice: when its answer is lost the outcome is
 * unknown (-EAGAIN); the caller reads the record back to learn it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/* Rounds of marker-checked commits before the check alone is relied on. */
#define FL__ETCD_MARK_ROUNDS 4

/* n digits at p as a number (at most INT64_MAX): 0, or -1. */
static int fl__digits(const unsigned char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = p[i];
        if (ch < '0' || ch > '9' || v > ((uint64_t)INT64_MAX - (uint64_t)(ch - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(ch - '0');
    }
    *out = v;
    return 0;
}

int fl__etcd_record_parse(const struct fl__etcd_reply *rp, const unsigned char *v, size_t n,
                          struct fl__etcd_record *out)
{
    const unsigned char *nul = v ? memchr(v, '\0', n < FL_KEY_MAX + 1 ? n : FL_KEY_MAX + 1)
                                 : NULL;
    if (!nul || nul == v ||
        n - (size_t)(nul - v) - 1 < FL__ETCD_TOKEN_DIGITS + FL__ETCD_SEQ_DIGITS)
        goto bad;
    size_t kl = (size_t)(nul - v);
    uint64_t t = 0, seq = 0;
    if (fl__digits(v + kl + 1, FL__ETCD_TOKEN_DIGITS, &t) != 0 || t == 0 ||
        fl__digits(v + kl + 1 + FL__ETCD_TOKEN_DIGITS, FL__ETCD_SEQ_DIGITS, &seq) != 0)
        goto bad;
    *out = (struct fl__etcd_record){.key_len = kl,
                                    .token = t,
                                    .seq = seq,
                                    .data_off = kl + 1 + FL__ETCD_TOKEN_DIGITS +
                                                FL__ETCD_SEQ_DIGITS};
    return 0;
bad:
    return fl__fail(-EPROTO, "etcd %s %s: a record value that is not \"KEY NUL TOKEN SEQUENCE "
                             "DATA\"",
                    rp->endpoint, rp->op);
}

static int fl__record_args(struct fl__etcd *e, const char *fn, const char *record,
                           const void *data, size_t len, unsigned flags)
{
    if (e->h.readonly)
        return fl__fail(-EINVAL, "%s: read-only region handle", fn);
    if (flags & ~FL_COMMIT_STRICT)
        return fl__fail(-EINVAL, "%s: unknown flags 0x%x", fn, flags & ~FL_COMMIT_STRICT);
    if (!data && len > 0)
        return fl__fail(-EINVAL, "%s: data is NULL", fn);
    int rlen = fl__key_check(record);
    if (rlen < 0)
        return rlen;
    if (len > FL__ETCD_RECORD_MAX)
        return fl__fail(-EMSGSIZE, "%s: %zu bytes exceed the etcd backend's record size (%u)",
                        fn, len, FL__ETCD_RECORD_MAX);
    return 0;
}

/* One commit Txn of token with sequence seq (0: by token alone); mark_rev
 * != 0 adds the marker compare.  Returns 0, 1 (the marker moved: nothing
 * done), or an error. */
static int fl__commit_txn(struct fl__etcd *e, const char *key, size_t klen, uint64_t token,
                          uint64_t seq, const char *record, const void *data, size_t len,
                          unsigned flags, uint64_t mark_rev, uint64_t *accepted)
{
    char rec[FL__ETCD_KEY_MAX], last[FL__ETCD_KEY_MAX];
    size_t rec_len = fl__etcd_key(&e->c, "rec", record, strlen(record), rec);
    size_t last_len = fl__etcd_key(&e->c, "last", key, klen, last);
    size_t tok_end = klen + 1 + FL__ETCD_TOKEN_DIGITS, hdr = tok_end + FL__ETCD_SEQ_DIGITS;
    unsigned char *value = malloc(hdr + len + 1);
    if (!value)
        return fl__fail(-ENOMEM, "out of memory");
    /* digits: the token's 20 and the sequence's 20, and snprintf's NUL */
    char digits[FL__ETCD_TOKEN_DIGITS + FL__ETCD_SEQ_DIGITS + 1];
    memcpy(value, key, klen);
    value[klen] = '\0';
    snprintf(digits, sizeof digits, "%020" PRIu64 "%020" PRIu64, token, seq);
    memcpy(value + klen + 1, digits, FL__ETCD_TOKEN_DIGITS + FL__ETCD_SEQ_DIGITS);
    if (len)
        memcpy(value + hdr, data, len);
    /* BOUND (see SEQUENCE): "KEY NUL" < value < BOUND. */
    bool strict = (flags & FL_COMMIT_STRICT) != 0;
    unsigned char upper[FL__ETCD_RECORD_HDR_MAX + 1];
    size_t upper_len;
    memcpy(upper, key, klen);
    upper[klen] = '\0';
    if (seq && !strict) {
        memcpy(upper + klen + 1, digits, FL__ETCD_TOKEN_DIGITS + FL__ETCD_SEQ_DIGITS);
        upper_len = hdr;
    } else {
        snprintf(digits, sizeof digits, "%020" PRIu64, strict ? token : token + 1);
        memcpy(upper + klen + 1, digits, FL__ETCD_TOKEN_DIGITS);
        upper_len = tok_end;
    }
    json_t *inner = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_value(rec, rec_len, "GREATER", upper, klen + 1),
                      fl__etcd_cmp_value(rec, rec_len, "LESS", upper, upper_len), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_put(rec, rec_len, value, hdr + len, 0, false), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_range(rec, rec_len), FL__ETCD_END));
    json_t *req = fl__etcd_txn(
        fl__etcd_list(fl__etcd_cmp_rev(rec, rec_len, "CREATE", "EQUAL", 0), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_put(rec, rec_len, value, hdr + len, 0, false), FL__ETCD_END),
        fl__etcd_list(fl__etcd_op_txn(inner), FL__ETCD_END));
    free(value);
    if (req && mark_rev)
        req = fl__etcd_txn(
            fl__etcd_list(fl__etcd_cmp_rev(last, last_len, "MOD", "EQUAL", mark_rev), FL__ETCD_END),
            fl__etcd_list(fl__etcd_op_txn(req), FL__ETCD_END), NULL);
    struct fl__etcd_reply rp;
    /* Never repeated (see the top of the file). */
    bool ok = false;
    int err = fl__etcd_request(&e->c, "/v3/kv/txn", "commit txn", req, FL__ETCD_KV, &rp, &ok);
    if (err == -EAGAIN) {
        char why[512];
        snprintf(why, sizeof why, "%s", fl_last_error());
        err = fl__fail(-EAGAIN, "%s; the commit to \"%s\" may or may not have taken effect, "
                                "and may still, until a later commit of this lease or of a "
                                "newer token is accepted: read it back (fl_read) to learn",
                       why, record);
    }
    if (err)
        goto out;
    const json_t *txn = rp.body;
    json_t *sub = NULL;
    if (mark_rev) { /* the outer Txn (the marker's compare), then the commit's */
        if (!ok) {
            err = 1;
            goto out;
        }
        err = fl__etcd_txn_resp(&rp, txn, 0, "response_txn", &sub);
        if (!err)
            err = fl__etcd_txn_result(&rp, sub, &ok);
        txn = sub;
    }
    if (err || ok)
        goto out;
    err = fl__etcd_txn_resp(&rp, txn, 0, "response_txn", &sub);
    if (!err)
        err = fl__etcd_txn_result(&rp, sub, &ok);
    if (err || ok)
        goto out;
    json_t *range = NULL;
    err = fl__etcd_txn_resp(&rp, sub, 0, "response_range", &range);
    if (err)
        goto out;
    struct fl__etcd_kv kv;
    int found = fl__etcd_range_first(&rp, range, FL__ETCD_RECORD_HDR_MAX + FL__ETCD_RECORD_MAX,
                                     &kv);
    if (found <= 0) {
        err = found < 0 ? found
                        : fl__fail(-EPROTO, "etcd %s commit txn: refused, yet the record is "
                                            "absent",
                                   rp.endpoint);
        goto out;
    }
    struct fl__etcd_record have;
    err = fl__etcd_record_parse(&rp, kv.value, kv.value_len, &have);
    if (!err && (have.key_len != klen || memcmp(kv.value, key, klen) != 0))
        err = fl__fail(-EXDEV, "record \"%s\" is fenced by key \"%.*s\", not \"%s\"", record,
                       (int)have.key_len, (const char *)kv.value, key);
    else if (!err && (have.token > token || (strict && have.token == token))) {
        if (accepted)
            *accepted = have.token;
        err = fl__fail(-ESTALE,
                       "record \"%s\" accepted token %" PRIu64 ", newer than %" PRIu64
                       ": ownership lost (do not retry with this token)",
                       record, have.token, token);
    } else if (!err && seq && have.token == token && have.seq > seq) {
        /* Overtaken by a later commit of this very holding (SEQUENCE). */
        err = 0;
    } else if (!err)
        err = fl__fail(-EPROTO, "etcd %s commit txn: refused a token the record would take",
                       rp.endpoint);
    fl__etcd_kv_free(&kv);
out:
    fl__etcd_reply_free(&rp);
    if (!err && accepted)
        *accepted = token;
    return err;
}

/* Commit with the token check: known is the newest token of key this
 * handle knows (0: none); notfound_err what a key that never issued a
 * token is; seq the commit's sequence (0: by token alone). */
static int fl__commit_checked(struct fl__etcd *e, const char *fn, const char *key, size_t klen,
                              uint64_t token, uint64_t seq, uint64_t known, int notfound_err,
                              const char *record, const void *data, size_t len, unsigned flags,
                              uint64_t *accepted)
{
    if (token == 0)
        return fl__fail(-EINVAL, "%s: token 0 was never issued", fn);
    if (token <= known)
        return fl__commit_txn(e, key, klen, token, seq, record, data, len, flags, 0, accepted);
    for (int round = 0;; round++) {
        uint64_t newest = 0, mark_rev = 0;
        int err = fl__etcd_newest(e, key, klen, &newest, &mark_rev);
        if (err)
            return err;
        if (newest == 0)
            return notfound_err == -ENOENT
                       ? fl__fail(-ENOENT, "%s: key \"%s\" was never acquired in %s", fn, key,
                                  e->c.uri.prefix)
                       : fl__fail(-EINVAL, "%s: token %" PRIu64 " was never issued: key \"%s\" "
                                           "was never acquired",
                                  fn, token, key);
        if (token > newest)
            return fl__fail(-EINVAL, "%s: token %" PRIu64 " was never issued (key \"%s\" "
                                     "issued up to %" PRIu64 ")",
                            fn, token, key, newest);
        err = fl__commit_txn(e, key, klen, token, seq, record, data, len, flags,
                             round < FL__ETCD_MARK_ROUNDS ? mark_rev : 0, accepted);
        if (err != 1)
            return err;
    }
}

int fl__etcd_commit(struct fl__etcd *e, const struct fl__etcd_lease *l, const char *record,
                    const void *data, size_t len, unsigned flags, uint64_t *accepted)
{
    int err = fl__record_args(e, "fl_commit", record, data, len, flags);
    if (err)
        return err;
    char key[FL_KEY_MAX + 1];
    uint64_t known = 0;
    if (fl__etcd_slot_key(e, l->slot, key, &known) != 0)
        return fl__fail(-EINVAL, "fl_commit: bad slot %" PRIu32 " (not a key this handle used)",
                        l->slot);
    /* Taken at the call: a later call of this handle gets a greater one. */
    uint64_t seq = atomic_fetch_add_explicit(&e->commit_seq, 1, memory_order_relaxed) + 1;
    return fl__commit_checked(e, "fl_commit", key, strlen(key), l->token, seq, known, -EINVAL,
                              record, data, len, flags, accepted);
}

int fl__etcd_commit_token(struct fl__etcd *e, const char *key, uint64_t token,
                          const char *record, const void *data, size_t len, unsigned flags,
                          uint64_t *accepted)
{
    int klen = fl__key_check(key);
    if (klen < 0)
        return klen;
    int err = fl__record_args(e, "fl_commit_token", record, data, len, flags);
    if (err)
        return err;
    return fl__commit_checked(e, "fl_commit_token", key, (size_t)klen, token, 0, 0, -ENOENT,
                              record, data, len, flags, accepted);
}

int fl__etcd_record_get(struct fl__etcd *e, const char *name, size_t name_len,
                        const char *missing, struct fl__etcd_reply *rp, struct fl__etcd_kv *kv,
                        struct fl__etcd_record *out)
{
    char rec[FL__ETCD_KEY_MAX];
    size_t rec_len = fl__etcd_key(&e->c, "rec", name, name_len, rec);
    json_t *req = json_pack("{s:o}", "key", fl__etcd_b64(rec, rec_len));
    int err = fl__etcd_request(&e->c, "/v3/kv/range", "range record", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_KV, rp, NULL);
    int found = err ? err
                    : fl__etcd_range_first(rp, rp->body,
                                           FL__ETCD_RECORD_HDR_MAX + FL__ETCD_RECORD_MAX, kv);
    if (found == 0)
        return fl__fail(-ENOENT, "record \"%.*s\" %s", (int)name_len, name, missing);
    if (found < 0)
        return found;
    err = fl__etcd_record_parse(rp, kv->value, kv->value_len, out);
    if (err)
        fl__etcd_kv_free(kv);
    return err;
}

int fl__etcd_read(struct fl__etcd *e, const char *record, void *buf, size_t cap, size_t *len,
                  uint64_t *fence)
{
    size_t rlen = strlen(record); /* api.c checked the arguments and the name */
    struct fl__etcd_reply rp;
    struct fl__etcd_kv kv;
    struct fl__etcd_record got;
    int err = fl__etcd_record_get(e, record, rlen, "was never committed", &rp, &kv, &got);
    if (!err) {
        size_t n = kv.value_len - got.data_off;
        *len = n;
        if (n > cap)
            err = fl__fail(-ENOBUFS, "record \"%s\" holds %zu bytes, more than %zu", record, n,
                           cap);
        else {
            if (n)
                memcpy(buf, kv.value + got.data_off, n);
            *fence = got.token;
        }
        fl__etcd_kv_free(&kv);
    }
    fl__etcd_reply_free(&rp);
    return err;
}
