/* SPDX-License-Identifier: MIT */
/*
 * reply.c - reading etcd's answers as untrusted input, and building its
 * requests.
 *
 * The gateway writes protobuf's JSON mapping: 64-bit numbers as decimal
 * strings, bytes as base64, and omits every field that is zero, false or
 * empty.  So an absent field reads as zero; a present one of the wrong type,
 * a number that is not a plain decimal within int64, or bad base64 is
 * -EPROTO with a message naming the endpoint, the request and the field.
 * Nothing here trusts a length, a count or a nesting it was given.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

static int fl__bad(const struct fl__etcd_reply *rp, const char *field, const char *what)
{
    return fl__etcd_fail(-EPROTO, "etcd %s %s: bad answer: field '%s' %s", rp->endpoint,
                         rp->op ? rp->op : "request", field, what);
}

int fl__etcd_u64(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                 uint64_t *out)
{
    *out = 0;
    json_t *v = obj ? json_object_get(obj, field) : NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0)
            return fl__bad(rp, field, "is negative");
        *out = (uint64_t)i;
        return 0;
    }
    if (!json_is_string(v))
        return fl__bad(rp, field, "is not a decimal string");
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0 || n > 19)
        return fl__bad(rp, field, "is not a decimal number within int64");
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return fl__bad(rp, field, "is not a decimal string");
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    if (x > (uint64_t)INT64_MAX)
        return fl__bad(rp, field, "is beyond int64");
    *out = x;
    return 0;
}

int fl__etcd_bool(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                  bool *out)
{
    *out = false;
    json_t *v = obj ? json_object_get(obj, field) : NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return fl__bad(rp, field, "is not a boolean");
    *out = json_is_true(v);
    return 0;
}

int fl__etcd_obj(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                 json_t **out)
{
    *out = NULL;
    json_t *v = obj ? json_object_get(obj, field) : NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return fl__bad(rp, field, "is not an object");
    *out = v;
    return 0;
}

int fl__etcd_arr(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                 json_t **out)
{
    *out = NULL;
    json_t *v = obj ? json_object_get(obj, field) : NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return fl__bad(rp, field, "is not an array");
    *out = v;
    return 0;
}

static int fl__bytes(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                     size_t max, unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return fl__bad(rp, field, "is not a base64 string");
    size_t n = json_string_length(v);
    if (n / 4 * 3 > max + 2)
        return fl__bad(rp, field, "is longer than any value fencelock writes");
    int err = fl__b64_decode(json_string_value(v), n, out, len);
    if (err == -ENOMEM)
        return fl__etcd_fail(-ENOMEM, "etcd %s: out of memory", rp->op);
    if (err)
        return fl__bad(rp, field, "is not base64");
    if (*len > max) {
        free(*out);
        *out = NULL;
        *len = 0;
        return fl__bad(rp, field, "is longer than any value fencelock writes");
    }
    return 0;
}

int fl__etcd_kv_parse(const struct fl__etcd_reply *rp, const json_t *obj, size_t value_max,
                      struct fl__etcd_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    if (!json_is_object(obj))
        return fl__bad(rp, "kvs[]", "is not an object");
    int err = fl__bytes(rp, obj, "key", FL__ETCD_KEY_MAX, &kv->key, &kv->key_len);
    if (!err)
        err = fl__bytes(rp, obj, "value", value_max, &kv->value, &kv->value_len);
    if (!err)
        err = fl__etcd_u64(rp, obj, "create_revision", &kv->create_revision);
    if (!err)
        err = fl__etcd_u64(rp, obj, "mod_revision", &kv->mod_revision);
    if (!err)
        err = fl__etcd_u64(rp, obj, "version", &kv->version);
    if (!err)
        err = fl__etcd_u64(rp, obj, "lease", &kv->lease);
    if (!err && (kv->create_revision == 0 || kv->mod_revision < kv->create_revision))
        err = fl__bad(rp, "kvs[].create_revision", "is not a revision of a live key");
    if (err)
        fl__etcd_kv_free(kv);
    return err;
}

void fl__etcd_kv_free(struct fl__etcd_kv *kv)
{
    free(kv->key);
    free(kv->value);
    kv->key = kv->value = NULL;
    kv->key_len = kv->value_len = 0;
}

void fl__etcd_kvs_free(struct fl__etcd_kv *kvs, uint32_t n)
{
    if (!kvs)
        return;
    for (uint32_t i = 0; i < n; i++)
        fl__etcd_kv_free(&kvs[i]);
    free(kvs);
}

int fl__etcd_range_first(const struct fl__etcd_reply *rp, const json_t *range, size_t value_max,
                         struct fl__etcd_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    json_t *kvs = NULL;
    int err = fl__etcd_arr(rp, range, "kvs", &kvs);
    if (err)
        return err;
    if (!kvs || json_array_size(kvs) == 0)
        return 0;
    if (json_array_size(kvs) != 1)
        return fl__bad(rp, "kvs", "has more than the one key asked for");
    err = fl__etcd_kv_parse(rp, json_array_get(kvs, 0), value_max, kv);
    return err ? err : 1;
}

int fl__etcd_txn_result(const struct fl__etcd_reply *rp, const json_t *txn, bool *succeeded)
{
    return fl__etcd_bool(rp, txn, "succeeded", succeeded);
}

int fl__etcd_txn_resp(const struct fl__etcd_reply *rp, const json_t *txn, size_t i,
                      const char *kind, json_t **out)
{
    *out = NULL;
    json_t *arr = NULL;
    int err = fl__etcd_arr(rp, txn, "responses", &arr);
    if (err)
        return err;
    if (!arr || i >= json_array_size(arr))
        return fl__bad(rp, "responses", "lacks a response of the transaction");
    json_t *r = json_array_get(arr, i);
    if (!json_is_object(r))
        return fl__bad(rp, "responses[]", "is not an object");
    json_t *v = json_object_get(r, kind);
    if (!json_is_object(v)) {
        char what[96];
        snprintf(what, sizeof what, "is not the %s the transaction asked for", kind);
        return fl__bad(rp, "responses[]", what);
    }
    *out = v;
    return 0;
}

/* ---- building ---- */

json_t *fl__etcd_b64(const void *p, size_t n)
{
    char *s = fl__b64_encode(p, n);
    if (!s)
        return NULL;
    json_t *j = json_string(s);
    free(s);
    return j;
}

json_t *fl__etcd_num(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return json_string(buf);
}

/* json_pack's "o" steals its argument even when the pack fails (jansson
 * 2.11+), so a NULL part gives NULL with nothing leaked. */
json_t *fl__etcd_cmp_rev(const void *key, size_t klen, const char *target, const char *result,
                         uint64_t rev)
{
    const char *field = strcmp(target, "CREATE") == 0 ? "create_revision" : "mod_revision";
    return json_pack("{s:o, s:s, s:s, s:o}", "key", fl__etcd_b64(key, klen), "target", target,
                     "result", result, field, fl__etcd_num(rev));
}

json_t *fl__etcd_cmp_rev_range(const void *key, size_t klen, const void *end, size_t elen,
                               const char *target, const char *result, uint64_t rev)
{
    json_t *cmp = fl__etcd_cmp_rev(key, klen, target, result, rev);
    if (cmp && json_object_set_new(cmp, "range_end", fl__etcd_b64(end, elen)) != 0) {
        json_decref(cmp);
        return NULL;
    }
    return cmp;
}

json_t *fl__etcd_cmp_value(const void *key, size_t klen, const char *result, const void *v,
                           size_t vlen)
{
    return json_pack("{s:o, s:s, s:s, s:o}", "key", fl__etcd_b64(key, klen), "target", "VALUE",
                     "result", result, "value", fl__etcd_b64(v, vlen));
}

json_t *fl__etcd_cmp_lease(const void *key, size_t klen, const char *result, uint64_t lease)
{
    return json_pack("{s:o, s:s, s:s, s:o}", "key", fl__etcd_b64(key, klen), "target", "LEASE",
                     "result", result, "lease", fl__etcd_num(lease));
}

json_t *fl__etcd_op_put(const void *key, size_t klen, const void *v, size_t vlen, uint64_t lease,
                        bool prev_kv)
{
    json_t *put = json_pack("{s:o, s:o}", "key", fl__etcd_b64(key, klen), "value",
                            fl__etcd_b64(v, vlen));
    if (put && lease && json_object_set_new(put, "lease", fl__etcd_num(lease)) != 0) {
        json_decref(put);
        return NULL;
    }
    if (put && prev_kv && json_object_set_new(put, "prev_kv", json_true()) != 0) {
        json_decref(put);
        return NULL;
    }
    return put ? json_pack("{s:o}", "request_put", put) : NULL;
}

json_t *fl__etcd_op_put_lease(const void *key, size_t klen, uint64_t lease)
{
    if (!lease)
        return NULL; /* never a put that drops the key's lease */
    return json_pack("{s:{s:o, s:o, s:b}}", "request_put", "key", fl__etcd_b64(key, klen),
                     "lease", fl__etcd_num(lease), "ignore_value", 1);
}

json_t *fl__etcd_op_range(const void *key, size_t klen)
{
    return json_pack("{s:{s:o}}", "request_range", "key", fl__etcd_b64(key, klen));
}

json_t *fl__etcd_cmp_value_range(const void *key, size_t klen, const void *end, size_t elen,
                                 const char *result, const void *v, size_t vlen)
{
    json_t *cmp = fl__etcd_cmp_value(key, klen, result, v, vlen);
    if (cmp && json_object_set_new(cmp, "range_end", fl__etcd_b64(end, elen)) != 0) {
        json_decref(cmp);
        return NULL;
    }
    return cmp;
}

json_t *fl__etcd_op_range_sorted(const void *key, size_t klen, const void *end, size_t elen,
                                 bool newest_first, unsigned limit, uint64_t max_create)
{
    json_t *r = json_pack("{s:o, s:o, s:s, s:s, s:o}", "key", fl__etcd_b64(key, klen),
                          "range_end", fl__etcd_b64(end, elen), "sort_order",
                          newest_first ? "DESCEND" : "ASCEND", "sort_target", "CREATE", "limit",
                          fl__etcd_num(limit));
    if (r && max_create && json_object_set_new(r, "max_create_revision",
                                               fl__etcd_num(max_create)) != 0) {
        json_decref(r);
        return NULL;
    }
    return r ? json_pack("{s:o}", "request_range", r) : NULL;
}

json_t *fl__etcd_op_delete(const void *key, size_t klen, bool prev_kv)
{
    return json_pack("{s:{s:o, s:b}}", "request_delete_range", "key", fl__etcd_b64(key, klen),
                     "prev_kv", prev_kv);
}

json_t *fl__etcd_op_txn(json_t *txn) { return json_pack("{s:o}", "request_txn", txn); }

json_t *fl__etcd_txn(json_t *compare, json_t *success, json_t *failure)
{
    return json_pack("{s:o, s:o, s:o}", "compare", compare ? compare : json_array(), "success",
                     success ? success : json_array(), "failure",
                     failure ? failure : json_array());
}

json_t *fl__etcd_list(json_t *first, ...)
{
    json_t *arr = json_array();
    bool ok = arr != NULL;
    va_list ap;
    va_start(ap, first);
    for (json_t *v = first; v; v = va_arg(ap, json_t *)) {
        if (!ok || json_array_append_new(arr, v) != 0) {
            ok = false;
            json_decref(v);
        }
    }
    va_end(ap);
    if (!ok) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

/* ---- keys ---- */

size_t fl__etcd_key(const struct fl__etcd_client *c, const char *kind, const void *name,
                    size_t name_len, char buf[FL__ETCD_KEY_MAX])
{
    /* PREFIX/ and kind/: at most FL__ETCD_PREFIX_MAX + 8 bytes (uri.c, and
     * the layout's kinds). */
    int n = kind ? snprintf(buf, FL__ETCD_KEY_MAX, "%s/%s/", c->uri.prefix, kind)
                 : snprintf(buf, FL__ETCD_KEY_MAX, "%s/", c->uri.prefix);
    /* n <= FL__ETCD_PREFIX_MAX + 8, and callers pass names of at most
     * FL_KEY_MAX bytes: they fit; clamp anyway. */
    size_t room = FL__ETCD_KEY_MAX - FL__ETCD_PREFIX_MAX - 8;
    if (name_len > room)
        name_len = room;
    memcpy(buf + n, name, name_len); /* a key: bytes with a length, no NUL */
    return (size_t)n + name_len;
}

/* ---- leases ---- */

int fl__etcd_grant(struct fl__etcd_client *c, uint64_t ttl, uint64_t *id, uint64_t *granted)
{
    struct fl__etcd_reply rp;
    json_t *req = json_pack("{s:o}", "TTL", fl__etcd_num(ttl));
    int err = fl__etcd_request(c, "/v3/lease/grant", "lease grant", req, FL__ETCD_IDEMPOTENT, &rp,
                               NULL);
    if (!err)
        err = fl__etcd_u64(&rp, rp.body, "ID", id);
    if (!err)
        err = fl__etcd_u64(&rp, rp.body, "TTL", granted);
    if (!err && (*id == 0 || *granted == 0))
        err = fl__etcd_fail(-EPROTO, "etcd %s lease grant: the answer has no lease ID or TTL",
                            rp.endpoint);
    fl__etcd_reply_free(&rp);
    return err;
}

int fl__etcd_keepalive(struct fl__etcd_client *c, uint64_t id, uint64_t *ttl)
{
    struct fl__etcd_reply rp;
    *ttl = 0;
    json_t *req = json_pack("{s:o}", "ID", fl__etcd_num(id));
    int err = fl__etcd_request(c, "/v3/lease/keepalive", "lease keepalive", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_GONE, &rp, NULL);
    if (err == -ENOENT) /* NotFound: the lease is gone */
        return 0;
    json_t *result = NULL;
    if (!err)
        err = fl__etcd_obj(&rp, rp.body, "result", &result);
    if (!err && !result)
        err = fl__etcd_fail(-EPROTO, "etcd %s lease keepalive: the answer has no result",
                            rp.endpoint);
    uint64_t got = 0;
    if (!err)
        err = fl__etcd_u64(&rp, result, "ID", &got);
    /* An answer about another lease is not about ours (ID 0: omitted). */
    if (!err && got != id && got != 0)
        err = fl__etcd_fail(-EPROTO, "etcd %s lease keepalive: the answer is about lease %" PRIu64
                                     ", not %" PRIu64, rp.endpoint, got, id);
    if (!err)
        err = fl__etcd_u64(&rp, result, "TTL", ttl);
    fl__etcd_reply_free(&rp);
    return err;
}

int fl__etcd_revoke(struct fl__etcd_client *c, uint64_t id)
{
    struct fl__etcd_reply rp;
    json_t *req = json_pack("{s:o}", "ID", fl__etcd_num(id));
    int err = fl__etcd_request(c, "/v3/lease/revoke", "lease revoke", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_GONE, &rp, NULL);
    if (err == -ENOENT)
        err = 0; /* gone already */
    fl__etcd_reply_free(&rp);
    return err;
}

int fl__etcd_timetolive(struct fl__etcd_client *c, uint64_t id, int64_t *left, uint64_t *granted)
{
    struct fl__etcd_reply rp;
    *left = 0;
    *granted = 0;
    json_t *req = json_pack("{s:o}", "ID", fl__etcd_num(id));
    int err = fl__etcd_request(c, "/v3/lease/timetolive", "lease timetolive", req,
                               FL__ETCD_IDEMPOTENT | FL__ETCD_GONE, &rp, NULL);
    if (err == -ENOENT)
        err = 0;
    if (!err && rp.body) {
        /* TTL is -1 for an expired lease: a JSON integer or "-1" */
        json_t *t = json_object_get(rp.body, "TTL");
        if (json_is_string(t) && strcmp(json_string_value(t), "-1") == 0)
            *left = -1;
        else {
            uint64_t v = 0;
            err = fl__etcd_u64(&rp, rp.body, "TTL", &v);
            *left = (int64_t)v;
        }
        if (!err)
            err = fl__etcd_u64(&rp, rp.body, "grantedTTL", granted);
    }
    fl__etcd_reply_free(&rp);
    return err;
}

/* ---- ranges over a prefix ---- */

int fl__etcd_range_prefix(struct fl__etcd_client *c, const char *kind, size_t value_max,
                          uint32_t max, struct fl__etcd_kv **kvs, uint32_t *n,
                          uint64_t *revision)
{
    return fl__etcd_range_page(c, kind, NULL, 0, value_max, max, kvs, n, NULL, revision);
}

int fl__etcd_range_page(struct fl__etcd_client *c, const char *kind, const void *after,
                        size_t after_len, size_t value_max, uint32_t max,
                        struct fl__etcd_kv **kvs, uint32_t *n, bool *more, uint64_t *revision)
{
    *kvs = NULL;
    *n = 0;
    if (more)
        *more = false;
    char key[FL__ETCD_KEY_MAX], end[FL__ETCD_KEY_MAX], start[FL__ETCD_KEY_MAX + 1];
    size_t klen = fl__etcd_key(c, kind, "", 0, key); /* PREFIX/kind/ */
    memcpy(end, key, klen);
    end[klen - 1]++; /* '/' + 1 = '0': the end of the range */
    size_t slen = klen;
    memcpy(start, key, klen);
    if (after && after_len > FL__ETCD_KEY_MAX) /* never from an answer (kv_parse) */
        return fl__etcd_fail(-EINVAL, "etcd range: a page after a key too long");
    if (after) { /* the key just after `after` */
        memcpy(start, after, after_len);
        start[after_len] = '\0';
        slen = after_len + 1;
    }
    json_t *req = json_pack("{s:o, s:o, s:o, s:b}", "key", fl__etcd_b64(start, slen),
                            "range_end", fl__etcd_b64(end, klen), "limit", fl__etcd_num(max),
                            "keys_only", value_max == 0);
    struct fl__etcd_reply rp;
    int err = fl__etcd_request(c, "/v3/kv/range", "range", req, FL__ETCD_IDEMPOTENT | FL__ETCD_KV,
                               &rp, NULL);
    if (!err && more)
        err = fl__etcd_bool(&rp, rp.body, "more", more);
    json_t *arr = NULL;
    if (!err)
        err = fl__etcd_arr(&rp, rp.body, "kvs", &arr);
    size_t count = arr ? json_array_size(arr) : 0;
    if (!err && count > max)
        err = fl__etcd_fail(-EPROTO, "etcd %s range: more keys than the limit asked for",
                            rp.endpoint);
    struct fl__etcd_kv *out = NULL;
    if (!err && count) {
        out = calloc(count, sizeof *out);
        if (!out)
            err = fl__etcd_fail(-ENOMEM, "out of memory");
    }
    uint32_t got = 0;
    for (size_t i = 0; !err && i < count; i++) {
        err = fl__etcd_kv_parse(&rp, json_array_get(arr, i), value_max, &out[got]);
        if (err)
            break;
        if (out[got].key_len <= klen || memcmp(out[got].key, key, klen) != 0) {
            fl__etcd_kv_free(&out[got]);
            err = fl__etcd_fail(-EPROTO, "etcd %s range: a key outside the range asked for",
                                rp.endpoint);
            break;
        }
        got++;
    }
    if (revision)
        *revision = rp.revision;
    fl__etcd_reply_free(&rp);
    if (err) {
        fl__etcd_kvs_free(out, got);
        return err;
    }
    *kvs = out;
    *n = got;
    return 0;
}
