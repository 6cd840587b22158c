/* SPDX-License-Identifier: MIT */
/*
 * http.c - one request to etcd's JSON gateway: a POST of a JSON object to
 * the endpoints in turn, each with a per-request timeout, and the sorting of
 * what comes back into the answer classes of client.h.
 *
 * WHICH FAILURES MAY BE RETRIED ON THE NEXT ENDPOINT.  A request that never
 * left this host (connection refused, host unreachable, a connect that
 * timed out: curl sent no byte of it) had no effect anywhere: the next
 * endpoint is tried, and if none answers the call fails with -EHOSTUNREACH.
 * A request that was sent and then timed out, or whose connection broke, or
 * that etcd answered with "request timed out" or "leader changed", may
 * still take effect (a member stopped by SIGSTOP reads it when it resumes;
 * a proposal may commit after its deadline): only a caller that says
 * FL__ETCD_REPEATABLE gets it sent again, and is told (rp->ambiguous) that
 * the first attempt may have happened; any other caller gets -EAGAIN, the
 * outcome unknown.  etcd's "no leader", "too many requests" and "not
 * capable" refuse a request before it is proposed: the next endpoint is
 * tried.
 *
 * After a timeout the preferred endpoint moves on, so that the next request
 * does not wait on the same dead member first.
 *
 * curl itself sends a request again, on a new connection, when a kept-alive
 * connection turns out dead before any byte of the answer came: harmless
 * for reads and for writes that recognise their own repetition, but a
 * commit, a release or an epoch bump applied twice would answer as if
 * someone else had got there first.  Those (FL__ETCD_ONCE) go on a fresh
 * connection, which curl never retries.
 *
 * Proxies: none, whatever the environment says (CURLOPT_PROXY ""); a lock
 * service reached through a proxy that retries or caches requests would
 * lose the answer classes above.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"

static pthread_once_t fl__curl_once = PTHREAD_ONCE_INIT;
static CURLcode fl__curl_rc = CURLE_FAILED_INIT;

/* curl_global_init once per process (never cleaned up: the library cannot
 * know when its last user is gone, and the global state is a few static
 * tables, not a leak that grows). */
static void fl__curl_global(void) { fl__curl_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

uint64_t fl__etcd_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * FL__ETCD_NS_PER_S + (uint64_t)ts.tv_nsec;
}

int fl__etcd_client_init(struct fl__etcd_client *c, const char *uri)
{
    memset(c, 0, sizeof *c);
    int err = fl__etcd_uri_parse(uri, &c->uri);
    if (err)
        return err;
    pthread_once(&fl__curl_once, fl__curl_global);
    if (fl__curl_rc != CURLE_OK)
        return fl__etcd_fail(-ENOMEM, "etcd: libcurl cannot start: %s",
                             curl_easy_strerror(fl__curl_rc));
    c->timeout_ms = FL__ETCD_TIMEOUT_MS;
    const char *env = getenv(FL__ETCD_TIMEOUT_ENV);
    if (env && *env) {
        char *end = NULL;
        unsigned long v = strtoul(env, &end, 10);
        if (*end || v < 100 || v > 60000)
            return fl__etcd_fail(-EINVAL, "$%s=%s: not a number of milliseconds in 100..60000",
                                 FL__ETCD_TIMEOUT_ENV, env);
        c->timeout_ms = (unsigned)v;
    }
    /* A refused connection answers at once; an unreachable one gets half
     * the budget, so that one blackholed endpoint leaves time for another
     * within the same request timeout. */
    c->connect_ms = c->timeout_ms / 2;
    atomic_init(&c->current, 0);
    atomic_init(&c->epoch, 0);
    atomic_init(&c->seen, 0);
    pthread_mutex_init(&c->pool_lock, NULL);
    return 0;
}

void fl__etcd_client_destroy(struct fl__etcd_client *c)
{
    for (unsigned i = 0; i < c->n_idle; i++)
        curl_easy_cleanup(c->idle[i]);
    c->n_idle = 0;
    pthread_mutex_destroy(&c->pool_lock);
}

void fl__etcd_reply_free(struct fl__etcd_reply *rp)
{
    if (rp->body)
        json_decref(rp->body);
    rp->body = NULL;
}

/* ---- the answer buffer ---- */
struct fl__buf {
    char *p;
    size_t n, cap;
    bool too_big;
};

static size_t fl__write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    struct fl__buf *b = arg;
    size_t n = size * nmemb;
    if (b->n + n > FL__ETCD_BODY_MAX) {
        b->too_big = true;
        return 0; /* curl fails the transfer: CURLE_WRITE_ERROR */
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

/* ---- the pool ---- */
/* One header list for every handle of the process, built once:
 * "Expect:" keeps curl from waiting for a 100-continue on bodies over 1 KiB.
 * Never freed (like curl's global state). */
static struct curl_slist *fl__header_list;
static void fl__headers_build(void)
{
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (h) {
        struct curl_slist *h2 = curl_slist_append(h, "Expect:");
        if (h2)
            h = h2;
    }
    fl__header_list = h;
}
static pthread_once_t fl__headers_once = PTHREAD_ONCE_INIT;

CURL *fl__etcd_handle_get(struct fl__etcd_client *c)
{
    pthread_mutex_lock(&c->pool_lock);
    CURL *h = c->n_idle ? c->idle[--c->n_idle] : NULL;
    pthread_mutex_unlock(&c->pool_lock);
    if (h)
        return h;
    pthread_once(&fl__headers_once, fl__headers_build);
    h = curl_easy_init();
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads; no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_PROXY, "");    /* never a proxy from the environment */
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
#endif
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, fl__header_list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fl__write_cb);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_ms);
    return h;
}

void fl__etcd_handle_put(struct fl__etcd_client *c, CURL *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&c->pool_lock);
    if (c->n_idle < FL__ETCD_POOL) {
        c->idle[c->n_idle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->pool_lock);
    if (h)
        curl_easy_cleanup(h);
}

/* ---- one request ---- */

/* What one attempt on one endpoint came to. */
enum fl__attempt {
    FL__A_ANSWER,    /* 200 and a JSON object */
    FL__A_REFUSED,   /* a definite gRPC refusal */
    FL__A_NOT_SENT,  /* had no effect: try the next endpoint */
    FL__A_UNKNOWN,   /* sent, no definite answer: may have taken effect */
    FL__A_GARBAGE,   /* not etcd's answer */
    FL__A_NOMEM,
};

static bool fl__contains(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

/* A gRPC error answer: which class.  See WHICH FAILURES MAY BE RETRIED. */
static enum fl__attempt fl__classify_refusal(int code, const char *msg)
{
    if (fl__contains(msg, "no leader") || fl__contains(msg, "too many requests") ||
        fl__contains(msg, "not capable"))
        return FL__A_NOT_SENT;
    switch (code) {
    case 1:  /* Canceled */
    case 2:  /* Unknown */
    case 4:  /* DeadlineExceeded: "request timed out" */
    case 10: /* Aborted */
    case 13: /* Internal */
    case 14: /* Unavailable: "leader changed", "server stopped", ... */
        return FL__A_UNKNOWN;
    default:
        return FL__A_REFUSED;
    }
}

static enum fl__attempt fl__attempt(CURL *h,
                                    const struct fl__etcd_endpoint *ep, const char *path,
                                    const char *body, size_t body_len, struct fl__etcd_reply *rp,
                                    char *why, size_t whycap)
{
    char url[sizeof ep->url + 64];
    snprintf(url, sizeof url, "%s%s", ep->url, path);
    struct fl__buf b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    snprintf(rp->endpoint, sizeof rp->endpoint, "%s", ep->name);
    enum fl__attempt a;
    if (rc != CURLE_OK) {
        long sent = 0;
        curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent);
        if (b.too_big) {
            snprintf(why, whycap, "the answer exceeds %u bytes", FL__ETCD_BODY_MAX);
            a = FL__A_GARBAGE;
        } else if (rc == CURLE_OUT_OF_MEMORY || (rc == CURLE_WRITE_ERROR && !b.too_big)) {
            a = FL__A_NOMEM;
        } else {
            snprintf(why, whycap, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
            /* Nothing of the request left this host: it had no effect. */
            bool not_sent = sent == 0 || rc == CURLE_COULDNT_CONNECT ||
                            rc == CURLE_COULDNT_RESOLVE_HOST;
            a = not_sent ? FL__A_NOT_SENT : FL__A_UNKNOWN;
        }
        free(b.p);
        return a;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    json_error_t jerr;
    json_t *j = b.p ? json_loadb(b.p, b.n, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (!j || !json_is_object(j)) {
        snprintf(why, whycap, "HTTP %ld with %s: '%.60s'", status,
                 j ? "a JSON value that is not an object" : "an answer that is not JSON",
                 b.p ? b.p : "");
        json_decref(j);
        free(b.p);
        return FL__A_GARBAGE;
    }
    free(b.p);
    if (status == 200) {
        rp->body = j;
        return FL__A_ANSWER;
    }
    /* An error: {"error": "...", "message": "...", "code": N} */
    json_t *code = json_object_get(j, "code");
    json_t *msg = json_object_get(j, "message");
    if (!msg)
        msg = json_object_get(j, "error");
    if (!json_is_integer(code) || !json_is_string(msg)) {
        snprintf(why, whycap, "HTTP %ld without etcd's error code and message", status);
        json_decref(j);
        return FL__A_GARBAGE;
    }
    long long cv = json_integer_value(code);
    rp->grpc_code = cv >= 0 && cv <= 100 ? (int)cv : -1;
    snprintf(rp->message, sizeof rp->message, "%s", json_string_value(msg));
    json_decref(j);
    snprintf(why, whycap, "%s (code %d)", rp->message, rp->grpc_code);
    return fl__classify_refusal(rp->grpc_code, rp->message);
}

static int fl__post_raw(struct fl__etcd_client *c, const char *path, const char *op, json_t *req,
                        unsigned flags, struct fl__etcd_reply *rp)
{
    rp->body = NULL;
    rp->op = op;
    rp->endpoint[0] = '\0';
    rp->ambiguous = false;
    rp->grpc_code = 0;
    rp->message[0] = '\0';
    rp->revision = 0;
    if (!req)
        return fl__etcd_fail(-ENOMEM, "etcd %s: out of memory building the request", op);
    char *body = json_dumps(req, JSON_COMPACT);
    if (!body)
        return fl__etcd_fail(-ENOMEM, "etcd %s: out of memory building the request", op);
    size_t body_len = strlen(body);
    CURL *h = fl__etcd_handle_get(c);
    if (!h) {
        free(body);
        return fl__etcd_fail(-ENOMEM, "etcd %s: cannot make a curl handle", op);
    }
    /* A request that must not take effect twice goes on a connection of
     * its own: curl resends a request by itself only on a kept-alive one. */
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, (flags & FL__ETCD_ONCE) ? 1L : 0L);
    unsigned n = c->uri.n;
    /* relaxed: a hint (see client.h) */
    unsigned first = atomic_load_explicit(&c->current, memory_order_relaxed) % n;
    char tried[1024] = "";
    size_t tlen = 0;
    int err = -EHOSTUNREACH;
    for (unsigned k = 0; k < n; k++) {
        unsigned i = (first + k) % n;
        const struct fl__etcd_endpoint *ep = &c->uri.ep[i];
        char why[320] = "";
        enum fl__attempt a = fl__attempt(h, ep, path, body, body_len, rp, why, sizeof why);
        if (a == FL__A_ANSWER || a == FL__A_REFUSED) {
            if (i != first)
                atomic_store_explicit(&c->current, i, memory_order_relaxed);
            err = a == FL__A_ANSWER ? 0 : -EREMOTEIO;
            if (err)
                fl__etcd_error("etcd %s %s: %s", ep->name, op, why);
            goto out;
        }
        if (a == FL__A_GARBAGE) {
            err = fl__etcd_fail(-EPROTO, "etcd %s %s: not an etcd answer: %s", ep->name, op,
                                why);
            goto out;
        }
        if (a == FL__A_NOMEM) {
            err = fl__etcd_fail(-ENOMEM, "etcd %s %s: out of memory", ep->name, op);
            goto out;
        }
        if (tlen < sizeof tried)
            tlen += (size_t)snprintf(tried + tlen, sizeof tried - tlen, "%s%s: %s",
                                     k ? "; " : "", ep->name, why);
        /* Move the preferred endpoint past this one. */
        atomic_store_explicit(&c->current, (i + 1) % n, memory_order_relaxed);
        if (a == FL__A_UNKNOWN && !(flags & FL__ETCD_IDEMPOTENT)) {
            if (!(flags & FL__ETCD_REPEATABLE)) {
                err = fl__etcd_fail(-EAGAIN,
                                    "etcd %s: the outcome is unknown (the request was sent, "
                                    "no answer came in time): %s",
                                    op, tried);
                goto out;
            }
            rp->ambiguous = true;
        }
    }
    if (rp->ambiguous)
        err = fl__etcd_fail(-EAGAIN,
                            "etcd %s: no endpoint answered in time, and an attempt may have "
                            "taken effect: %s",
                            op, tried);
    else
        err = fl__etcd_fail(-EHOSTUNREACH, "etcd %s: no endpoint answered (timeout %u ms): %s",
                            op, c->timeout_ms, tried);
out:
    fl__etcd_handle_put(c, h);
    free(body);
    return err;
}

int fl__etcd_post(struct fl__etcd_client *c, const char *path, const char *op, json_t *req,
                  unsigned flags, struct fl__etcd_reply *rp)
{
    /* The history mark before the request leaves: an answer may only be
     * compared with what was seen before it was asked (epoch.c). */
    uint64_t seen_before = atomic_load_explicit(&c->seen, memory_order_acquire);
    int err = fl__post_raw(c, path, op, req, flags, rp);
    if (err || !(flags & (FL__ETCD_KV | FL__ETCD_GUARD)))
        return err;
    json_t *hdr = NULL;
    err = fl__etcd_obj(rp, rp->body, "header", &hdr);
    if (!err)
        err = fl__etcd_u64(rp, hdr, "revision", &rp->revision);
    if (!err && rp->revision == 0)
        err = fl__etcd_fail(-EPROTO, "etcd %s %s: the answer has no header.revision",
                            rp->endpoint, op);
    if (!err) /* the check may read the epoch again (never with FL__ETCD_KV) */
        err = fl__etcd_history_check(c, rp, seen_before, (flags & FL__ETCD_GUARD) != 0);
    if (err)
        fl__etcd_reply_free(rp);
    return err;
}

int fl__etcd_post_nocheck(struct fl__etcd_client *c, const char *path, const char *op,
                          json_t *req, unsigned flags, struct fl__etcd_reply *rp)
{
    return fl__post_raw(c, path, op, req, flags, rp);
}

int fl__etcd_refusal(const struct fl__etcd_reply *rp)
{
    const char *m = rp->message;
    int err = -EPROTO;
    if (fl__contains(m, "database space exceeded"))
        err = -ENOSPC;
    else if (fl__contains(m, "too large"))
        err = -EMSGSIZE;
    else if (rp->grpc_code == 7 || rp->grpc_code == 16)
        err = -EACCES;
    return fl__etcd_fail(err, "etcd %s %s refused: %s (code %d)", rp->endpoint, rp->op, m,
                         rp->grpc_code);
}
