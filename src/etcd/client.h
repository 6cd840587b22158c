/* SPDX-License-Identifier: MIT */
/*
 * client.h - a small client of etcd v3's JSON gateway, with no fencelock
 * state: the region URI, base64, requests over libcurl with per-request
 * timeouts and endpoint rotation, untrusted-answer accessors (jansson), the
 * watch stream, and the token epoch kept in the cluster.  Not installed.
 *
 * Two programs link it: the library (src/etcd/backend.c and the files beside
 * it build the lock and record semantics on top) and the fencelock tool
 * (`fencelock etcd-epoch`, which bumps the epoch).  It reports a failure's
 * detail through fl__etcd_error(), which each of them defines: the library
 * forwards it to fl_last_error(), the tool to its own message.
 *
 * THE ANSWER CLASSES.  A request ends one of these ways (each call returns
 * 0 or a negative errno, never anything else):
 *   0              an endpoint answered 200 with a JSON object (reply->body)
 *   -EREMOTEIO     an endpoint answered a definite refusal: a gRPC error
 *                  that means the request had no effect (reply->grpc_code,
 *                  reply->message); the caller decides what it means
 *   -EHOSTUNREACH  no endpoint answered in time and the request had no
 *                  effect: it was never sent (refused or unreachable
 *                  connections), or a lost attempt of it leaves nothing that
 *                  matters (FL__ETCD_IDEMPOTENT: reads, lease requests)
 *   -EAGAIN        the outcome is unknown: the request reached an endpoint,
 *                  which did not answer in time (or answered "timed out",
 *                  "leader changed"), and it may not be sent again
 *   -EPROTO        an answer that is not what etcd answers (no JSON object, a
 *                  field of the wrong type, a bad number, bad base64)
 *   -ENOTRECOVERABLE  the cluster's revision went back in time under the same
 *                  token epoch (restored from a snapshot without
 *                  `fencelock etcd-epoch --bump`): see epoch.c
 *   -EACCES        refused for who we are or are not, before any effect: a
 *                  server certificate that does not verify, a client
 *                  certificate the server rejects, a wrong password, a user
 *                  without the permission, a cluster that wants a user
 *                  (auth.c re-authenticates once when a token expired)
 *   -ENOMEM
 *
 * THREADS.  A client may be used by several threads at once: its endpoint
 * list is immutable after fl__etcd_client_init(); the curl handles come from
 * a small pool under a mutex (one handle per request in flight, each keeping
 * its connection alive for the next request); the preferred endpoint, the
 * epoch and the history mark are atomics.
 */
#ifndef FL_ETCD_CLIENT_H
#define FL_ETCD_CLIENT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

/* ---- errors ---- */
/* Defined by the program that links the client (see above). */
void fl__etcd_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define fl__etcd_fail(err, ...) (fl__etcd_error(__VA_ARGS__), (err))

/* ---- the region URI (uri.c) ----
 *   etcd://[USER@]HOST:PORT[,HOST:PORT...]/PREFIX[?KEY=VALUE&...]   plain HTTP
 *   etcds://...                                                    TLS */
#define FL__ETCD_SCHEME "etcd://"
#define FL__ETCD_TLS_SCHEME "etcds://"
#define FL__ETCD_MAX_ENDPOINTS 16
#define FL__ETCD_HOST_MAX 253 /* a DNS name */
/* PREFIX: segments of [A-Za-z0-9._-] joined by single '/', none of them
 * "." or ".." or a name the layout uses under a prefix (lock, last, rec,
 * epoch): so no prefix's keys can be another prefix's (etcd.h, LAYOUT). */
#define FL__ETCD_PREFIX_MAX 128
#define FL__ETCD_USER_MAX 128     /* etcd user name, bytes */
#define FL__ETCD_FILE_MAX 4095    /* a file name of the query or the environment */
#define FL__ETCD_URI_MAX 4096     /* the region string, with its NUL */
/* Where credentials come from when the URI does not say (credentials.c). */
#define FL__ETCD_CACERT_ENV "FENCELOCK_ETCD_CACERT"
#define FL__ETCD_CERT_ENV "FENCELOCK_ETCD_CERT"
#define FL__ETCD_KEY_ENV "FENCELOCK_ETCD_KEY"
#define FL__ETCD_USER_ENV "FENCELOCK_ETCD_USER"
#define FL__ETCD_PASSWORD_FILE_ENV "FENCELOCK_ETCD_PASSWORD_FILE"
#define FL__ETCD_PASSWORD_ENV "FENCELOCK_ETCD_PASSWORD"

struct fl__etcd_endpoint {
    char name[FL__ETCD_HOST_MAX + 8]; /* "host:port", for messages */
    char url[FL__ETCD_HOST_MAX + 17]; /* "http://host:port" or "https://host:port" */
};

struct fl__etcd_uri {
    struct fl__etcd_endpoint ep[FL__ETCD_MAX_ENDPOINTS];
    unsigned n;
    char prefix[FL__ETCD_PREFIX_MAX + 1];
    size_t prefix_len;
    bool tls;                             /* etcds:// */
    char shown[FL__ETCD_URI_MAX];         /* the string, any password masked: for messages */
    char user[FL__ETCD_USER_MAX + 1];     /* "" : none (decoded) */
    /* The query's files ("": not given; credentials.c fills them from the
     * environment then). */
    char cacert[FL__ETCD_FILE_MAX + 1];
    char cert[FL__ETCD_FILE_MAX + 1];
    char key[FL__ETCD_FILE_MAX + 1];
    char password_file[FL__ETCD_FILE_MAX + 1];
};

/* True if name starts with "etcd://" or "etcds://". */
bool fl__etcd_is_uri(const char *name);
/* Parse uri: 0, or -EINVAL saying what is wrong (fl__etcd_error).  Reads no
 * environment and no file. */
int fl__etcd_uri_parse(const char *uri, struct fl__etcd_uri *out);

/* ---- base64 (RFC 4648, with padding: what the gateway speaks) ---- */
/* A NUL-terminated encoding of n bytes (malloc'd), or NULL (out of memory). */
char *fl__b64_encode(const void *p, size_t n);
/* Decode text of length n into a malloc'd buffer (plus a NUL after the
 * bytes, not counted).  0, -EINVAL (not base64), -ENOMEM. */
int fl__b64_decode(const char *text, size_t n, unsigned char **out, size_t *len);

/* ---- the client ---- */
#define FL__ETCD_POOL 8 /* idle curl handles kept, each with its connection */
/* Per-request timeout (connect included), unless $FENCELOCK_ETCD_TIMEOUT_MS
 * says otherwise (100 .. 60000). */
#define FL__ETCD_TIMEOUT_MS 2000u
#define FL__ETCD_TIMEOUT_ENV "FENCELOCK_ETCD_TIMEOUT_MS"
/* Largest answer read (an inspection range of a big prefix): beyond, -EPROTO. */
#define FL__ETCD_BODY_MAX (64u << 20)

struct fl__etcd_client {
    struct fl__etcd_uri uri;
    unsigned timeout_ms, connect_ms;
    /* The endpoint tried first: the last one that answered.  relaxed: a
     * hint; every request is complete on whichever endpoint it reaches. */
    _Atomic unsigned current;
    pthread_mutex_t pool_lock; /* guards idle[] and n_idle */
    CURL *idle[FL__ETCD_POOL];
    unsigned n_idle;

    /* The token epoch (epoch.c): the value of PREFIX/epoch last read, 0
     * before it was read.  Only grows: an epoch that went down fails closed.
     * relaxed: each reader compares it inside its own Txn, which etcd
     * checks; the value is a cache, never the authority. */
    _Atomic uint64_t epoch;
    /* The history mark (epoch.c, RESTORES): the greatest epoch << 40 |
     * revision a linearizable kv answer has shown this client.  A kv answer
     * below it under the same epoch means the cluster went back. */
    _Atomic uint64_t seen;

    /* The user's password (credentials.c): NULL without a user; wiped and
     * freed by fl__etcd_client_destroy.  Never in a message. */
    char *password;
    /* The TLS files' bytes, read at init (credentials.c): curl takes them
     * from memory (http.c).  data NULL: not given.  The key is wiped. */
    struct fl__etcd_pem {
        unsigned char *data;
        size_t len;
    } cacert_pem, cert_pem, key_pem;
    /* etcd's auth token for the user (auth.c), under auth_lock: NULL until
     * the first request (or after etcd refused it); auth_gen counts the
     * tokens obtained, so that of several threads refused with one token only
     * the first asks for a new one; auth_off is set when the cluster answered
     * that authentication is not enabled (no token is sent then). */
    pthread_mutex_t auth_lock;
    char *token;
    uint64_t auth_gen;
    bool auth_off;

    /* fl_close's deadline (CLOCK_MONOTONIC ns, 0: none): no attempt of a
     * request outlasts it, and none starts after it (fl__etcd_client_closing).
     * relaxed: a time, read by each attempt; nothing else is ordered by it. */
    _Atomic uint64_t close_deadline;
};

/* Parse uri, take the credentials it and the environment name (TLS files,
 * user, password: credentials.c), and set up c.  No request is sent.  0,
 * -EINVAL (a malformed URI, an option out of range, a user without a
 * password), -ENOENT/-EACCES/... (a file named that cannot be read, with
 * its name), -ENOMEM. */
int fl__etcd_client_init(struct fl__etcd_client *c, const char *uri);
/* Free the pooled handles and the credentials.  No request may be in
 * flight. */
void fl__etcd_client_destroy(struct fl__etcd_client *c);
/* From now on every request ends within one request timeout of this call
 * (fl_close: requests of other threads in flight too). */
void fl__etcd_client_closing(struct fl__etcd_client *c);

/* ---- credentials (credentials.c) and the auth token (auth.c) ---- */
/* Fill c->uri's files and user from the environment where the URI left them
 * out, check that each file can be read, and read the password.  See
 * client_init for the errors. */
int fl__etcd_creds_load(struct fl__etcd_client *c);
/* The header line "Authorization: TOKEN" to send (malloc'd; NULL when no
 * token is needed) and the token's generation; authenticates first when no
 * token is held.  0, -EACCES (refused: wrong password, ...), or the
 * request's error. */
int fl__etcd_auth_header(struct fl__etcd_client *c, char **line, uint64_t *gen);
/* etcd refused the token of generation gen (expired, or the auth store
 * moved on): authenticate again, unless another thread did since. */
int fl__etcd_auth_refresh(struct fl__etcd_client *c, uint64_t gen);
/* A request with the token of generation gen had no answer in time: drop
 * the token, if still the current one, so that the next header gets
 * another.  True when the next attempt should take a new header. */
bool fl__etcd_auth_suspect(struct fl__etcd_client *c, uint64_t gen);

/* A request's answer; every field is the caller's to read after the call,
 * and fl__etcd_reply_free() releases it (also after a failed call). */
struct fl__etcd_reply {
    json_t *body;        /* the answer's JSON object (0 returned), else NULL */
    const char *op;      /* what was asked ("txn", "range", ...): for messages */
    char endpoint[FL__ETCD_HOST_MAX + 8]; /* who answered (or was tried last) */
    bool ambiguous;      /* an earlier attempt of this same call timed out after
                            it was sent: it may have taken effect */
    int grpc_code;       /* -EREMOTEIO: etcd's gRPC status code */
    char message[256];   /* -EREMOTEIO: etcd's message */
    uint64_t revision;   /* header.revision of a kv answer (0: none) */
};
void fl__etcd_reply_free(struct fl__etcd_reply *rp);

/* Request flags. */
#define FL__ETCD_REPEATABLE 0x1u /* may be sent again to the next endpoint after a
                                    timeout: a write whose repetition the caller
                                    recognises (rp->ambiguous tells it to look) */
#define FL__ETCD_KV 0x2u         /* a linearizable kv answer: its header revision
                                    raises the history mark (epoch.c) */
#define FL__ETCD_GUARD 0x8u      /* a kv answer that numbers a token (an acquire):
                                    below the history mark under the same epoch it
                                    fails closed, -ENOTRECOVERABLE (epoch.c) */
#define FL__ETCD_NOAUTH 0x10u    /* carries no token and is never re-authenticated
                                    (the authentication request itself) */
#define FL__ETCD_SECRET 0x20u    /* the body holds a secret: wiped after the request */
#define FL__ETCD_IDEMPOTENT 0x4u /* may be sent again, and an attempt lost after it was
                                    sent leaves nothing that matters: a read, a lease
                                    grant (a lease nobody uses ends by itself), a
                                    keepalive or a revoke.  Never ambiguous: when no
                                    endpoint answers, -EHOSTUNREACH */
#define FL__ETCD_GONE 0x40u     /* fl__etcd_request: a refusal with gRPC NotFound (5:
                                    "requested lease not found") is -ENOENT, with no
                                    message, for the caller to say what it means */

/* POST req (a JSON object; the reference is kept by the caller) to path
 * ("/v3/kv/txn") of the endpoints in turn, from the preferred one.  See THE
 * ANSWER CLASSES for what it returns.  Without FL__ETCD_KV or FL__ETCD_GUARD
 * the answer's revision is not checked (epoch.c's reads: the check calls
 * them).  Most callers want fl__etcd_request (after the accessors, below). */
int fl__etcd_post(struct fl__etcd_client *c, const char *path, const char *op, json_t *req,
                  unsigned flags, struct fl__etcd_reply *rp);

/* Map a definite refusal (-EREMOTEIO) to the error a caller returns when it
 * has no more specific meaning for it, with the message set: ENOSPC for
 * "database space exceeded", EMSGSIZE for "request is too large", EACCES
 * for permissions and authentication, EPROTO for anything else. */
int fl__etcd_refusal(const struct fl__etcd_reply *rp);

/* ---- untrusted answers (reply.c) ----
 * Each accessor fails with -EPROTO and a message naming the endpoint, the
 * request and the field.  Absent fields are zero, as the gateway omits them. */
/* An int64 field written as a decimal string: absent is 0; a JSON integer is
 * accepted too; anything else, a sign, or a value beyond INT64_MAX: -EPROTO. */
int fl__etcd_u64(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                 uint64_t *out);
/* A bool field: absent is false. */
int fl__etcd_bool(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                  bool *out);
/* An object field: absent is *out = NULL (0 returned); not an object: -EPROTO. */
int fl__etcd_obj(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                 json_t **out);
/* An array field: absent is *out = NULL (0 returned); not an array: -EPROTO. */
int fl__etcd_arr(const struct fl__etcd_reply *rp, const json_t *obj, const char *field,
                 json_t **out);

/* One key-value of an answer (decoded). */
struct fl__etcd_kv {
    unsigned char *key, *value; /* malloc'd, NUL after the bytes; NULL when empty */
    size_t key_len, value_len;
    uint64_t create_revision, mod_revision, version, lease;
};
/* Parse a kv object; values longer than value_max are -EPROTO. */
int fl__etcd_kv_parse(const struct fl__etcd_reply *rp, const json_t *obj, size_t value_max,
                      struct fl__etcd_kv *kv);
void fl__etcd_kv_free(struct fl__etcd_kv *kv);
/* The first kv of a range answer (an object with "kvs"): 1 found, 0 absent. */
int fl__etcd_range_first(const struct fl__etcd_reply *rp, const json_t *range, size_t value_max,
                         struct fl__etcd_kv *kv);
/* A Txn answer's "succeeded" and its i-th response of kind
 * ("response_range", "response_put", "response_delete_range",
 * "response_txn"): -EPROTO if missing or of another kind. */
int fl__etcd_txn_result(const struct fl__etcd_reply *rp, const json_t *txn, bool *succeeded);
int fl__etcd_txn_resp(const struct fl__etcd_reply *rp, const json_t *txn, size_t i,
                      const char *kind, json_t **out);

/* What almost every request is: fl__etcd_post, a definite refusal mapped by
 * fl__etcd_refusal (or, with FL__ETCD_GONE, a NotFound as -ENOENT), and,
 * with succeeded non-NULL, the Txn answer's "succeeded"
 * (fl__etcd_txn_result).  req is consumed.  0 with rp->body, or the error
 * with its message set; *rp is to be freed with fl__etcd_reply_free in
 * every case.  Inline, so that clang-analyzer follows the callers' paths
 * through it as it did through the five lines it replaces. */
static inline int fl__etcd_request(struct fl__etcd_client *c, const char *path, const char *op,
                                   json_t *req, unsigned flags, struct fl__etcd_reply *rp,
                                   bool *succeeded)
{
    if (succeeded)
        *succeeded = false;
    int err = fl__etcd_post(c, path, op, req, flags, rp);
    json_decref(req);
    if (err == -EREMOTEIO && (flags & FL__ETCD_GONE) && rp->grpc_code == 5)
        return -ENOENT; /* NotFound: the lease is gone (the caller's to say) */
    if (err == -EREMOTEIO)
        err = fl__etcd_refusal(rp);
    if (!err && succeeded)
        err = fl__etcd_txn_result(rp, rp->body, succeeded);
    return err;
}

/* ---- building requests (reply.c) ----
 * Every builder returns a new reference, or NULL when out of memory (or
 * when given a NULL part: NULLs propagate, so a request built from parts is
 * NULL if any part failed, and the caller tests once).  Numbers are written
 * as decimal strings from uint64_t values, never from something missing: a
 * request can never carry "null" (which the gateway reads as 0: a put with
 * lease 0 would make a lock key that never expires). */
json_t *fl__etcd_b64(const void *p, size_t n);
json_t *fl__etcd_num(uint64_t v);
/* Compares: target CREATE/MOD revision, VALUE, LEASE; result "EQUAL",
 * "GREATER", "LESS", "NOT_EQUAL". */
json_t *fl__etcd_cmp_rev(const void *key, size_t klen, const char *target, const char *result,
                         uint64_t rev);
/* The same compare over every key of [key, end): true when each key of the
 * range passes it, and when the range is empty (a missing key's revisions
 * are 0: CREATE EQUAL 0 over a range says "no key in it"). */
json_t *fl__etcd_cmp_rev_range(const void *key, size_t klen, const void *end, size_t elen,
                               const char *target, const char *result, uint64_t rev);
json_t *fl__etcd_cmp_value(const void *key, size_t klen, const char *result, const void *v,
                           size_t vlen);
/* A value compare over every key of [key, end): true when each key's value
 * passes it; false for an empty range (etcd: a value compare on no key is
 * false). */
json_t *fl__etcd_cmp_value_range(const void *key, size_t klen, const void *end, size_t elen,
                                 const char *result, const void *v, size_t vlen);
json_t *fl__etcd_cmp_lease(const void *key, size_t klen, const char *result, uint64_t lease);
/* Operations inside a Txn. */
json_t *fl__etcd_op_put(const void *key, size_t klen, const void *v, size_t vlen, uint64_t lease,
                        bool prev_kv);
/* A put that keeps the value and moves the key to lease (must be > 0). */
json_t *fl__etcd_op_put_lease(const void *key, size_t klen, uint64_t lease);
json_t *fl__etcd_op_range(const void *key, size_t klen);
/* A range of [key, end) sorted by create revision, oldest first (or
 * newest_first), at most limit keys, only those created at or before
 * max_create (0: any). */
json_t *fl__etcd_op_range_sorted(const void *key, size_t klen, const void *end, size_t elen,
                                 bool newest_first, unsigned limit, uint64_t max_create);
json_t *fl__etcd_op_delete(const void *key, size_t klen, bool prev_kv);
json_t *fl__etcd_op_txn(json_t *txn);
/* A Txn: compare, success, failure are arrays (stolen; NULL: an empty one). */
json_t *fl__etcd_txn(json_t *compare, json_t *success, json_t *failure);
/* An array of the given new references, ended by FL__ETCD_END (stolen). */
json_t *fl__etcd_list(json_t *first, ...);
#define FL__ETCD_END ((json_t *)NULL) /* a typed end: a bare NULL may be an int */

/* ---- leases ---- */
/* Grant a lease of ttl seconds: *id and *granted (the TTL etcd gave: never
 * below its minimum).  Repeatable (a lost grant is a lease nobody uses). */
int fl__etcd_grant(struct fl__etcd_client *c, uint64_t ttl, uint64_t *id, uint64_t *granted);
/* Renew lease id to its granted TTL: *ttl gets it, 0 when the lease no
 * longer exists. */
int fl__etcd_keepalive(struct fl__etcd_client *c, uint64_t id, uint64_t *ttl);
/* Revoke lease id; a lease that no longer exists is 0. */
int fl__etcd_revoke(struct fl__etcd_client *c, uint64_t id);
/* Time left on lease id (seconds, 0 if gone) and its granted TTL. */
int fl__etcd_timetolive(struct fl__etcd_client *c, uint64_t id, int64_t *left,
                        uint64_t *granted);

/* ---- keys: PREFIX/kind/name (backend.c, LAYOUT) ---- */
#define FL__ETCD_KEY_MAX (FL__ETCD_PREFIX_MAX + 16 + 256)
/* Write PREFIX/kind/name (kind NULL: PREFIX/name) into buf; returns the
 * length.  name is name_len bytes. */
size_t fl__etcd_key(const struct fl__etcd_client *c, const char *kind, const void *name,
                    size_t name_len, char buf[FL__ETCD_KEY_MAX]);

/* ---- range over a prefix, for inspection ---- */
/* Every kv whose key starts with PREFIX/kind/, in key order, at most max:
 * *kvs (malloc'd array, each freed with fl__etcd_kv_free) and *n; value_max
 * 0 asks for the keys only. */
int fl__etcd_range_prefix(struct fl__etcd_client *c, const char *kind, size_t value_max,
                          uint32_t max, struct fl__etcd_kv **kvs, uint32_t *n,
                          uint64_t *revision);
/* The same, one page: the kvs after key `after` (NULL: from the start), and
 * *more whether etcd has more past them. */
int fl__etcd_range_page(struct fl__etcd_client *c, const char *kind, const void *after,
                        size_t after_len, size_t value_max, uint32_t max,
                        struct fl__etcd_kv **kvs, uint32_t *n, bool *more, uint64_t *revision);
void fl__etcd_kvs_free(struct fl__etcd_kv *kvs, uint32_t n);

/* ---- the watch stream (watch.c) ---- */
struct fl__etcd_watch;
/* Watch key's puts and deletion from revision start_rev on, on the
 * preferred endpoint (the next ones if it cannot connect).  0 or an error. */
int fl__etcd_watch_open(struct fl__etcd_client *c, const void *key, size_t klen,
                        uint64_t start_rev, struct fl__etcd_watch **out);
/* What fl__etcd_watch_wait saw. */
#define FL__WATCH_TIMEOUT 0   /* nothing until the timeout */
#define FL__WATCH_DELETED 1   /* the key was deleted (fl__etcd_watch_deleted_rev: when) */
#define FL__WATCH_FD 2        /* extra_fd became readable */
#define FL__WATCH_LOST 3      /* the stream ended or broke: look again later */
#define FL__WATCH_REFUSED 4   /* etcd refused the watch for our credentials (the
                                 reason is in the error): -EACCES */
#define FL__WATCH_PUT 5       /* the key was put: fl__etcd_watch_put gives the value */
#define FL__WATCH_COMPACTED 6 /* the history from start_rev is gone: look again */
/* Sleep until one of the above, at most timeout_ms; extra_fd (-1: none) is
 * polled alongside.  Puts come first, one per call, then a deletion. */
int fl__etcd_watch_wait(struct fl__etcd_watch *w, int extra_fd, int timeout_ms);
/* The oldest put not yet taken (its first cap bytes at most, into buf): its
 * length, 0 when none. */
size_t fl__etcd_watch_put(struct fl__etcd_watch *w, unsigned char *buf, size_t cap);
uint64_t fl__etcd_watch_deleted_rev(const struct fl__etcd_watch *w);
void fl__etcd_watch_close(struct fl__etcd_watch *w);

/* ---- the token epoch (epoch.c) ---- */
/* Tokens are epoch << FL__ETCD_EPOCH_SHIFT | create_revision. */
#define FL__ETCD_EPOCH_SHIFT 40
#define FL__ETCD_REV_LIMIT (1ull << FL__ETCD_EPOCH_SHIFT)
#define FL__ETCD_EPOCH_LIMIT (1ull << (63 - FL__ETCD_EPOCH_SHIFT)) /* epochs are below */
#define FL__ETCD_EPOCH_TEXT_MAX 24
/* Read PREFIX/epoch into c->epoch; with create, make it 1 if absent.
 * *epoch gets it (0: absent and not created). */
int fl__etcd_epoch_load(struct fl__etcd_client *c, bool create, uint64_t *epoch);
/* Parse an epoch value ("N", 1 .. FL__ETCD_EPOCH_LIMIT - 1): 0 or -EPROTO. */
int fl__etcd_epoch_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                         uint64_t *epoch);
/* Take a newer epoch read from the cluster into c->epoch (never lower):
 * 0, or -ENOTRECOVERABLE if it is lower than the one known. */
int fl__etcd_epoch_note(struct fl__etcd_client *c, uint64_t epoch);
/* The operator's command after a restore: set the epoch to
 * max(current + 1, at_least) (created if absent).  *before and *after get
 * both.  -EOVERFLOW past FL__ETCD_EPOCH_LIMIT - 1. */
int fl__etcd_epoch_bump(struct fl__etcd_client *c, uint64_t at_least, uint64_t *before,
                        uint64_t *after);
/* The history mark and check of a kv answer (rp->revision), against the
 * mark seen_before read before the request was sent (http.c calls it): the
 * mark is raised; with guard, an answer below it under the same epoch is
 * -ENOTRECOVERABLE unless the epoch was bumped meanwhile. */
int fl__etcd_history_check(struct fl__etcd_client *c, struct fl__etcd_reply *rp,
                           uint64_t seen_before, bool guard);
/* The pool: a curl handle with the client's options (NULL: out of memory),
 * and its return. */
CURL *fl__etcd_handle_get(struct fl__etcd_client *c);
void fl__etcd_handle_put(struct fl__etcd_client *c, CURL *h);
/* The headers of a request: the JSON content type, no 100-continue, and
 * auth_line (NULL: none); NULL when out of memory.  Freed (and wiped: a
 * token) by fl__etcd_headers_free. */
struct curl_slist *fl__etcd_headers(const char *auth_line);
void fl__etcd_headers_free(struct curl_slist *h);

/* Monotonic time, ns, and the units the client converts between. */
uint64_t fl__etcd_now_ns(void);
#define FL__ETCD_NS_PER_S 1000000000ull
#define FL__ETCD_NS_PER_MS 1000000ull
#define FL__ETCD_MS_PER_S 1000ull
/* Whole milliseconds in ns, rounded up (a wait never ends early). */
#define FL__ETCD_CEIL_MS(ns) (((ns) + FL__ETCD_NS_PER_MS - 1) / FL__ETCD_NS_PER_MS)

#endif /* FL_ETCD_CLIENT_H */
