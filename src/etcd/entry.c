/* SPDX-License-Identifier: MIT */
/*
 * entry.c - the words of the queue layout (etcd.h, LAYOUT): an entry's ID
 * and key, the values of live and released entries and of the marker, and
 * their parsers.  Every value read from etcd is untrusted: a parser checks
 * each field's digits and bounds and names the key it came from.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

void fl__etcd_new_id(struct fl__etcd *e, char id[FL__ETCD_ID_LEN + 1])
{
    /* relaxed: only the value's uniqueness matters (etcd.h) */
    uint64_t n = atomic_fetch_add_explicit(&e->next_id, 1, memory_order_relaxed);
    snprintf(id, FL__ETCD_ID_LEN + 1, "%016" PRIx64 "%016" PRIx64, e->nonce, n);
}

size_t fl__etcd_entry_key(const struct fl__etcd_keys *k, const char *id,
                          char buf[FL__ETCD_KEY_MAX])
{
    /* q_len <= FL__ETCD_PREFIX_MAX + 6 + FL_KEY_MAX + 1 (keys_of), plus the
     * ID: within FL__ETCD_KEY_MAX. */
    memcpy(buf, k->q0, k->q_len);
    memcpy(buf + k->q_len, id, FL__ETCD_ID_LEN);
    return k->q_len + FL__ETCD_ID_LEN;
}

int fl__etcd_live_value(const struct fl__etcd *e, uint64_t epoch, char *buf, size_t cap)
{
    return snprintf(buf, cap, "W %07" PRIu64 " %" PRIu32 " %s", epoch, e->h.pid, e->host);
}

int fl__etcd_done_value(char state, uint64_t token, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%c %07" PRIu64 " %020" PRIu64, state,
                    (uint64_t)(token >> FL__ETCD_EPOCH_SHIFT), token);
}

int fl__etcd_mark_value(uint64_t epoch, char *buf, size_t cap)
{
    return snprintf(buf, cap, "q%07" PRIu64, epoch);
}

/* n decimal digits at v (exactly n), at most max: 0 or -1. */
static int fl__digits(const unsigned char *v, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (uint64_t)(v[i] - '0');
        if (x > max)
            return -1;
    }
    *out = x;
    return 0;
}

static bool fl__is_id(const unsigned char *p, size_t n)
{
    if (n != FL__ETCD_ID_LEN)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return false;
    return true;
}

int fl__etcd_entry_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_keys *k,
                         const struct fl__etcd_kv *kv, struct fl__etcd_entry *out)
{
    memset(out, 0, sizeof *out);
    const unsigned char *v = kv->value ? kv->value : (const unsigned char *)"";
    size_t n = kv->value_len;
    if (kv->key_len != k->q_len + FL__ETCD_ID_LEN || memcmp(kv->key, k->q0, k->q_len) != 0 ||
        !fl__is_id(kv->key + k->q_len, FL__ETCD_ID_LEN))
        return fl__fail(-EPROTO, "etcd %s %s: a key of the queue %.*s is not KEY NUL ID",
                        rp->endpoint, rp->op, (int)(k->q_len - 1), k->q0);
    memcpy(out->id, kv->key + k->q_len, FL__ETCD_ID_LEN);
    out->id[FL__ETCD_ID_LEN] = '\0';
    if (n > sizeof out->value || n < 10 || v[1] != ' ' || v[9] != ' ')
        goto bad;
    memcpy(out->value, v, n);
    out->value_len = n;
    out->state = (char)v[0];
    if (fl__digits(v + 2, 7, FL__ETCD_EPOCH_LIMIT - 1, &out->epoch) != 0 || out->epoch == 0)
        goto bad;
    out->c = kv->create_revision;
    out->mod_revision = kv->mod_revision;
    out->lease = kv->lease;
    if (out->state == 'W') {
        /* "W %07E PID HOST" */
        size_t i = 10, j = i;
        uint64_t pid = 0;
        while (i < n && v[i] != ' ')
            i++;
        if (i == j || i - j > 10 || i == n || fl__digits(v + j, i - j, UINT32_MAX, &pid) != 0)
            goto bad;
        out->pid = (uint32_t)pid;
        if (kv->create_revision >= FL__ETCD_REV_LIMIT)
            return fl__fail(-EOVERFLOW, "etcd %s: revision %" PRIu64 " does not fit a token "
                                        "(2^40 or more): bump the epoch and compact",
                            rp->endpoint, kv->create_revision);
        out->token = out->epoch << FL__ETCD_EPOCH_SHIFT | kv->create_revision;
        return 0;
    }
    if (out->state == 'R' || out->state == 'D') {
        /* "R %07E %020T": the token of the holding that ended */
        if (n != 10 + FL__ETCD_TOKEN_DIGITS ||
            fl__digits(v + 10, FL__ETCD_TOKEN_DIGITS, (uint64_t)INT64_MAX, &out->token) != 0 ||
            out->token == 0 || out->token >> FL__ETCD_EPOCH_SHIFT != out->epoch)
            goto bad;
        return 0;
    }
bad:
    return fl__fail(-EPROTO, "etcd %s %s: the queue entry %.*s holds '%.*s', not \"W EPOCH "
                             "PID HOST\", \"R EPOCH TOKEN\" or \"D EPOCH TOKEN\"",
                    rp->endpoint, rp->op, (int)(k->q_len - 1), k->q0, (int)(n > 60 ? 60 : n),
                    (const char *)v);
}

int fl__etcd_entry_first(const struct fl__etcd_reply *rp, const struct fl__etcd_keys *k,
                         const json_t *range, struct fl__etcd_entry *out)
{
    memset(out, 0, sizeof *out);
    struct fl__etcd_kv kv;
    int found = fl__etcd_range_first(rp, range, FL__ETCD_ENTRY_VALUE_MAX, &kv);
    if (found != 1)
        return found;
    int err = fl__etcd_entry_parse(rp, k, &kv, out);
    fl__etcd_kv_free(&kv);
    return err ? err : 1;
}

int fl__etcd_mark_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                        uint64_t *epoch, uint64_t *newest)
{
    const unsigned char *v = kv->value ? kv->value : (const unsigned char *)"";
    size_t n = kv->value_len;
    if (n > 0 && v[0] >= '0' && v[0] <= '9')
        return fl__fail(-ENOMSG, "etcd %s: the marker %.*s was written by fencelock's etcd "
                                 "layout before 0.2 (\"%.*s\"), whose clients do not queue: "
                                 "a prefix is used by one layout; use a new prefix, or delete "
                                 "this one once no client of the old layout runs",
                        rp->endpoint, (int)kv->key_len, (const char *)kv->key,
                        (int)(n > 30 ? 30 : n), (const char *)v);
    uint64_t e = 0;
    if (n != 8 || v[0] != 'q' || fl__digits(v + 1, 7, FL__ETCD_EPOCH_LIMIT - 1, &e) != 0 ||
        e == 0)
        return fl__fail(-EPROTO, "etcd %s %s: the marker %.*s holds '%.*s', not \"qEPOCH\"",
                        rp->endpoint, rp->op, (int)kv->key_len, (const char *)kv->key,
                        (int)(n > 60 ? 60 : n), (const char *)v);
    if (kv->mod_revision >= FL__ETCD_REV_LIMIT)
        return fl__fail(-EOVERFLOW, "etcd %s: revision %" PRIu64 " does not fit a token "
                                    "(2^40 or more): bump the epoch and compact",
                        rp->endpoint, kv->mod_revision);
    *epoch = e;
    *newest = e << FL__ETCD_EPOCH_SHIFT | kv->mod_revision;
    return 0;
}
