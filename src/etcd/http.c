/* SPDX-License-Identifier: MIT */
/*
 * http.c - one request to etcd's JSON gateway: a POST of a JSON object to
 * the endpoints in turn, each with a per-request timeout, and the sorting of
 * what comes back into the answer classes of client.h.
 *
 * WHICH FAILURES MAY BE RETRIED ON THE NEXT ENDPOINT.  A request of which no
 * byte of the body was handed to curl (a connection refused, a host
 * unreachable, a connect or TLS handshake that failed or timed out) had no
 * effect anywhere: the next endpoint is tried, and if none answers the call
 * fails with -EHOSTUNREACH.  Once any byte of the body went out, the request
 * may take effect even if no answer comes (a member stopped by SIGSTOP reads
 * it when it resumes; a proposal may commit after its deadline), as it may
 * when etcd answered "request timed out" or "leader changed": only a caller
 * that says FL__ETCD_REPEATABLE gets it sent again, and is told
 * (rp->ambiguous) that the first attempt may have happened; any other caller
 * gets -EAGAIN, the outcome unknown.  etcd's "no leader", "too many
 * requests" and "not capable" refuse a request before it is proposed: the
 * next endpoint is tried.
 *
 * curl by itself sends a request again, on a new connection, when a
 * kept-alive connection turns out dead before any byte of the answer came;
 * if that new connection then fails, its error says "could not connect"
 * about a request that did go out the first time.  So curl never gets to
 * resend: the body comes from a read callback whose seek (the rewind a
 * resend needs) fails once a byte was handed out, and "was a byte handed
 * out" is what decides between "not sent" and "unknown" above.  Requests
 * that may be repeated (reads, lease requests, repeatable writes) are sent
 * once more on a fresh connection to the same endpoint in that case;
 * others answer -EAGAIN.  Connections stay kept alive (and TLS sessions
 * with them): no handshake per request.
 *
 * REFUSED FOR WHO WE ARE.  A server certificate that does not verify (chain,
 * host name or IP), a client certificate the server rejects (a TLS alert
 * about it), a certificate with a CommonName that etcd's gateway refuses
 * under RBAC, a wrong password, a user without the permission: -EACCES at
 * once, with etcd's (or TLS's) reason and the endpoint, not after trying
 * every endpoint; nothing was done.  A token that etcd no longer takes
 * (expired, or the auth store moved on) is replaced once (auth.c) and the
 * request sent again: that refusal, too, comes before any effect.
 *
 * After a timeout the preferred endpoint moves on, so that the next request
 * does not wait on the same dead member first.  fl_close sets a deadline
 * (fl__etcd_client_closing): no attempt lasts past it and none starts after.
 *
 * Proxies: none, whatever the environment says (CURLOPT_PROXY ""); a lock
 * service reached through a proxy that retries or caches requests would
 * lose the answer classes above.  HTTP/1.1 only, over TLS too: no stream
 * multiplexing whose refused streams curl would retry on its own.
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
    atomic_init(&c->close_deadline, 0);
    pthread_mutex_init(&c->pool_lock, NULL);
    pthread_mutex_init(&c->auth_lock, NULL);
    err = fl__etcd_creds_load(c);
    if (err)
        fl__etcd_client_destroy(c);
    return err;
}

static void fl__wipe_free(char *s)
{
    if (s)
        explicit_bzero(s, strlen(s));
    free(s);
}

void fl__etcd_client_destroy(struct fl__etcd_client *c)
{
    for (unsigned i = 0; i < c->n_idle; i++)
        curl_easy_cleanup(c->idle[i]);
    c->n_idle = 0;
    pthread_mutex_destroy(&c->pool_lock);
    pthread_mutex_destroy(&c->auth_lock);
    fl__wipe_free(c->password);
    fl__wipe_free(c->token);
    c->password = c->token = NULL;
    struct fl__etcd_pem *pem[] = {&c->cacert_pem, &c->cert_pem, &c->key_pem};
    for (size_t i = 0; i < sizeof pem / sizeof pem[0]; i++) {
        if (pem[i]->data)
            explicit_bzero(pem[i]->data, pem[i]->len);
        free(pem[i]->data);
        pem[i]->data = NULL;
    }
}

void fl__etcd_client_closing(struct fl__etcd_client *c)
{
    atomic_store_explicit(&c->close_deadline,
                          fl__etcd_now_ns() + (uint64_t)c->timeout_ms * FL__ETCD_NS_PER_MS,
                          memory_order_relaxed);
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

/* ---- the request body, which curl can never send twice ---- */
struct fl__body {
    const char *p;
    size_t n, off;
    bool handed; /* a byte went to curl: the request may have reached etcd */
};

static size_t fl__read_cb(char *dst, size_t size, size_t nmemb, void *arg)
{
    struct fl__body *b = arg;
    size_t n = size * nmemb;
    if (n > b->n - b->off)
        n = b->n - b->off;
    memcpy(dst, b->p + b->off, n);
    b->off += n;
    if (n)
        b->handed = true;
    return n;
}

/* The rewind a resend needs: refused once a byte went out (see the top). */
static int fl__seek_cb(void *arg, curl_off_t offset, int origin)
{
    struct fl__body *b = arg;
    if (b->handed || origin != SEEK_SET || offset != 0)
        return CURL_SEEKFUNC_FAIL;
    b->off = 0;
    return CURL_SEEKFUNC_OK;
}

/* ---- the pool ---- */

CURL *fl__etcd_handle_get(struct fl__etcd_client *c)
{
    pthread_mutex_lock(&c->pool_lock);
    CURL *h = c->n_idle ? c->idle[--c->n_idle] : NULL;
    pthread_mutex_unlock(&c->pool_lock);
    if (h)
        return h;
    h = curl_easy_init();
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads; no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_PROXY, "");    /* never a proxy from the environment */
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    const char *proto = c->uri.tls ? "https" : "http";
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, proto);
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, c->uri.tls ? CURLPROTO_HTTPS : CURLPROTO_HTTP);
    (void)proto;
#endif
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fl__write_cb);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_ms);
    if (c->uri.tls) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L); /* the name or IP in the certificate */
        curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
        /* From memory (credentials.c): curl never opens the files, so
         * none can block a handshake.  NOCOPY: the client outlives its
         * handles. */
        struct curl_blob ca = {c->cacert_pem.data, c->cacert_pem.len, CURL_BLOB_NOCOPY};
        struct curl_blob cert = {c->cert_pem.data, c->cert_pem.len, CURL_BLOB_NOCOPY};
        struct curl_blob key = c->key_pem.data
                                   ? (struct curl_blob){c->key_pem.data, c->key_pem.len,
                                                        CURL_BLOB_NOCOPY}
                                   : cert; /* the key in the certificate's file */
        if (c->cacert_pem.data) {
            /* The cluster's own CA, and only it (no system store beside). */
            curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
            curl_easy_setopt(h, CURLOPT_CAINFO, NULL);
            curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
        }
        if (c->cert_pem.data) {
            curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
            curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
            curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
            curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
            /* An encrypted key fails instead of prompting on the terminal. */
            curl_easy_setopt(h, CURLOPT_KEYPASSWD, "");
        }
    }
    return h;
}

void fl__etcd_handle_put(struct fl__etcd_client *c, CURL *h)
{
    if (!h)
        return;
    /* Nothing of the last request stays pointed at (it is freed). */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_READDATA, NULL);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, NULL);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
    pthread_mutex_lock(&c->pool_lock);
    if (c->n_idle < FL__ETCD_POOL) {
        c->idle[c->n_idle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->pool_lock);
    if (h)
        curl_easy_cleanup(h);
}

struct curl_slist *fl__etcd_headers(const char *auth_line)
{
    /* "Expect:" keeps curl from waiting for a 100-continue on large bodies. */
    static const char *const fixed[] = {"Content-Type: application/json", "Expect:"};
    struct curl_slist *h = NULL;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        struct curl_slist *n = curl_slist_append(h, fixed[i]);
        if (!n)
            goto nomem;
        h = n;
    }
    if (auth_line) {
        struct curl_slist *n = curl_slist_append(h, auth_line);
        if (!n)
            goto nomem;
        h = n;
    }
    return h;
nomem:
    fl__etcd_headers_free(h);
    return NULL;
}

void fl__etcd_headers_free(struct curl_slist *h)
{
    for (struct curl_slist *p = h; p; p = p->next)
        explicit_bzero(p->data, strlen(p->data)); /* a token among them */
    curl_slist_free_all(h);
}

/* ---- one request ---- */

/* What one attempt on one endpoint came to. */
enum fl__attempt {
    FL__A_ANSWER,    /* 200 and a JSON object */
    FL__A_REFUSED,   /* a definite gRPC refusal */
    FL__A_DENIED,    /* refused for who we are (TLS, certificate): -EACCES */
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

/* What a definite refusal says of our credentials. */
enum fl__auth_class {
    FL__AUTH_NONE,  /* nothing: the caller decides what the refusal means */
    FL__AUTH_STALE, /* the token: get a new one and send again (auth.c) */
    FL__AUTH_DENIED /* who we are: -EACCES */
};

static enum fl__auth_class fl__auth_class(int code, const char *msg)
{
    if (fl__contains(msg, "invalid auth token") || fl__contains(msg, "auth store is old") ||
        fl__contains(msg, "user name is empty") || code == 16 /* Unauthenticated */)
        return FL__AUTH_STALE;
    if (fl__contains(msg, "permission denied") || fl__contains(msg, "authentication failed") ||
        fl__contains(msg, "user name not found") || code == 7 /* PermissionDenied */)
        return FL__AUTH_DENIED;
    return FL__AUTH_NONE;
}

/* A failed transfer that is TLS refusing us: the server's certificate did
 * not verify, ours was rejected (the server's alert names it), a file of
 * ours cannot be used.  Nothing was done: the handshake never completed. */
static bool fl__tls_refusal(CURLcode rc, const char *msg)
{
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
        return true;
    default:
        break;
    }
    return fl__contains(msg, "alert") &&
           (fl__contains(msg, "certificate") || fl__contains(msg, "unknown ca") ||
            fl__contains(msg, "access denied"));
}

/* How long the next attempt may last (ms), 0 if fl_close's deadline passed. */
static long fl__attempt_ms(struct fl__etcd_client *c, unsigned ms)
{
    uint64_t d = atomic_load_explicit(&c->close_deadline, memory_order_relaxed);
    if (!d)
        return (long)ms;
    uint64_t now = fl__etcd_now_ns();
    if (now >= d)
        return 0;
    uint64_t left = FL__ETCD_CEIL_MS(d - now);
    return (long)(left < ms ? left : ms);
}

/* What a failed attempt tells besides its class. */
#define FL__F_RESEND 0x1u  /* curl wished to send the body again on a new connection
                              (a kept-alive one died before any answer) */
#define FL__F_TIMEOUT 0x2u /* no answer within the timeout */

/* One attempt; *facts gets FL__F_* of a failure. */
static enum fl__attempt fl__attempt(struct fl__etcd_client *c, CURL *h,
                                    const struct fl__etcd_endpoint *ep, const char *path,
                                    const char *body, size_t body_len, bool fresh,
                                    struct fl__etcd_reply *rp, char *why, size_t whycap,
                                    unsigned *facts)
{
    *facts = 0;
    snprintf(rp->endpoint, sizeof rp->endpoint, "%s", ep->name);
    long ms = fl__attempt_ms(c, c->timeout_ms);
    if (ms == 0) {
        snprintf(why, whycap, "not sent: the handle is closing and its time (one request "
                              "timeout) is spent");
        return FL__A_NOT_SENT;
    }
    char url[sizeof ep->url + 64];
    snprintf(url, sizeof url, "%s%s", ep->url, path);
    struct fl__buf b = {0};
    struct fl__body in = {.p = body, .n = body_len};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, fl__read_cb);
    curl_easy_setopt(h, CURLOPT_READDATA, &in);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, fl__seek_cb);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &in);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_ms < ms ? (long)c->connect_ms
                                                                             : ms);
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, fresh ? 1L : 0L);
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    enum fl__attempt a;
    if (rc != CURLE_OK) {
        if (b.too_big) {
            snprintf(why, whycap, "the answer exceeds %u bytes", FL__ETCD_BODY_MAX);
            a = FL__A_GARBAGE;
        } else if (rc == CURLE_OUT_OF_MEMORY || rc == CURLE_WRITE_ERROR) {
            a = FL__A_NOMEM;
        } else {
            snprintf(why, whycap, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
            if (fl__tls_refusal(rc, why))
                a = FL__A_DENIED;
            else /* no byte of the body left this process: no effect (see the top) */
                a = in.handed ? FL__A_UNKNOWN : FL__A_NOT_SENT;
            if (rc == CURLE_SEND_FAIL_REWIND)
                *facts |= FL__F_RESEND;
            if (rc == CURLE_OPERATION_TIMEDOUT)
                *facts |= FL__F_TIMEOUT;
        }
        free(b.p);
        return a;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    json_error_t jerr;
    json_t *j = b.p ? json_loadb(b.p, b.n, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (!j || !json_is_object(j)) {
        if (status == 400 && b.p && fl__contains(b.p, "CommonName")) {
            snprintf(why, whycap, "etcd's gateway refuses a client certificate that carries a "
                                  "CommonName when authentication is on (issue it without a CN: "
                                  "docs/etcd.md): '%.100s'",
                     b.p);
            a = FL__A_DENIED;
        } else {
            snprintf(why, whycap, "HTTP %ld with %s: '%.60s'", status,
                     j ? "a JSON value that is not an object" : "an answer that is not JSON",
                     b.p ? b.p : "");
            a = FL__A_GARBAGE;
        }
        json_decref(j);
        free(b.p);
        return a;
    }
    free(b.p);
    /* An error: {"error": "...", "message": "...", "code": N}; on a streaming
     * endpoint (keepalive), HTTP 200 and {"error": {"grpc_code": N,
     * "message": "..."}}. */
    json_t *err = json_object_get(j, "error");
    json_t *code = NULL, *msg = NULL;
    if (status == 200 && json_is_object(err)) {
        code = json_object_get(err, "grpc_code");
        msg = json_object_get(err, "message");
    } else if (status == 200) {
        rp->body = j;
        return FL__A_ANSWER;
    } else {
        code = json_object_get(j, "code");
        msg = json_object_get(j, "message");
        if (!msg)
            msg = err;
    }
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

/* Whether the request carried a token. */
static bool fl__auth_used(uint64_t gen, unsigned flags, const struct fl__etcd_client *c)
{
    return !(flags & FL__ETCD_NOAUTH) && c->password && gen != 0;
}

/* A definite refusal about credentials: -EACCES with etcd's reason. */
static int fl__denied(const struct fl__etcd_client *c, const struct fl__etcd_reply *rp,
                      const char *op)
{
    const char *hint = "";
    char buf[FL__ETCD_PREFIX_MAX + FL__ETCD_USER_MAX + 160];
    if (!c->password) {
        snprintf(buf, sizeof buf,
                 ": the cluster requires a user (etcds://USER@HOST:PORT/PREFIX or $%s, with "
                 "password-file=FILE, $%s or $%s)",
                 FL__ETCD_USER_ENV, FL__ETCD_PASSWORD_FILE_ENV, FL__ETCD_PASSWORD_ENV);
        hint = buf;
    } else if (fl__contains(rp->message, "permission denied")) {
        snprintf(buf, sizeof buf, ": user \"%s\" needs read-write on %s/ (docs/etcd.md, "
                                  "Securing the connection)",
                 c->uri.user, c->uri.prefix);
        hint = buf;
    }
    return fl__etcd_fail(-EACCES, "etcd %s %s refused: %s (code %d)%s", rp->endpoint, op,
                         rp->message, rp->grpc_code, hint);
}

/* Set h's headers for a request: the fixed ones and, unless NOAUTH, the
 * current token (obtained first when none is held: auth.c); *hdrs (freed
 * when replaced) and *gen get the list and the token's generation. */
static int fl__request_headers(struct fl__etcd_client *c, unsigned flags, CURL *h,
                               struct curl_slist **hdrs, uint64_t *gen)
{
    char *auth = NULL;
    int err = (flags & FL__ETCD_NOAUTH) ? 0 : fl__etcd_auth_header(c, &auth, gen);
    struct curl_slist *list = err ? NULL : fl__etcd_headers(auth);
    fl__wipe_free(auth);
    if (!err && !list)
        err = fl__etcd_fail(-ENOMEM, "out of memory");
    if (err)
        return err;
    fl__etcd_headers_free(*hdrs);
    *hdrs = list;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    return 0;
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
    uint64_t gen = 0;
    struct curl_slist *hdrs = NULL;
    char *body = json_dumps(req, JSON_COMPACT);
    CURL *h = body ? fl__etcd_handle_get(c) : NULL;
    int err = -EHOSTUNREACH;
    if (!h) {
        err = fl__etcd_fail(-ENOMEM, "etcd %s: out of memory building the request", op);
        goto out;
    }
    err = fl__request_headers(c, flags, h, &hdrs, &gen);
    if (err)
        goto out;
    size_t body_len = strlen(body);
    unsigned n = c->uri.n;
    /* relaxed: a hint (see client.h) */
    unsigned first = atomic_load_explicit(&c->current, memory_order_relaxed) % n;
    char tried[1024] = "";
    size_t tlen = 0;
    bool reauthed = false, resent = false, fresh = false, stale_token = false;
    for (unsigned k = 0; k < n; k++) {
        unsigned i = (first + k) % n;
        const struct fl__etcd_endpoint *ep = &c->uri.ep[i];
        char why[320] = "";
        unsigned facts = 0;
        if (stale_token) {
            /* The last attempt's token may be why it got no answer: a new one. */
            stale_token = false;
            err = fl__request_headers(c, flags, h, &hdrs, &gen);
            if (err)
                goto out;
        }
        enum fl__attempt a =
            fl__attempt(c, h, ep, path, body, body_len, fresh, rp, why, sizeof why, &facts);
        bool resend = facts & FL__F_RESEND;
        fresh = false;
        if (a == FL__A_REFUSED && !(flags & FL__ETCD_NOAUTH)) {
            enum fl__auth_class ac = fl__auth_class(rp->grpc_code, rp->message);
            if (ac == FL__AUTH_STALE && c->password && !reauthed) {
                /* A token etcd no longer takes: a new one, and the same
                 * request again (the refusal had no effect: auth.c). */
                err = fl__etcd_auth_refresh(c, gen);
                if (!err)
                    err = fl__request_headers(c, flags, h, &hdrs, &gen);
                if (err)
                    goto out;
                reauthed = true;
                k--;
                continue;
            }
            if (ac != FL__AUTH_NONE) {
                err = fl__denied(c, rp, op);
                goto out;
            }
        }
        if (a == FL__A_ANSWER || a == FL__A_REFUSED) {
            if (i != first)
                atomic_store_explicit(&c->current, i, memory_order_relaxed);
            err = a == FL__A_ANSWER ? 0 : -EREMOTEIO;
            if (err)
                fl__etcd_error("etcd %s %s: %s", ep->name, op, why);
            goto out;
        }
        if (a == FL__A_DENIED) {
            /* This call ends here (a refusal comes back at once), but the
             * next one starts at the next endpoint: one member whose
             * certificate does not verify must not hold a handle that the
             * others would serve. */
            atomic_store_explicit(&c->current, (i + 1) % n, memory_order_relaxed);
            err = fl__etcd_fail(-EACCES, "etcd %s %s: refused: %s", ep->name, op, why);
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
        /* etcd holds a request whose simple token names a raft index it has
         * not reached (a cluster restored from a snapshot, a member behind)
         * until the request's time is up: after a timeout the token is
         * suspect, and the next attempt gets a new one (auth.c). */
        if ((facts & FL__F_TIMEOUT) && fl__auth_used(gen, flags, c))
            stale_token = fl__etcd_auth_suspect(c, gen);
        bool again = flags & (FL__ETCD_IDEMPOTENT | FL__ETCD_REPEATABLE);
        if (a == FL__A_UNKNOWN && !(flags & FL__ETCD_IDEMPOTENT)) {
            if (!(flags & FL__ETCD_REPEATABLE)) {
                /* Move the preferred endpoint past this one (as below). */
                atomic_store_explicit(&c->current, (i + 1) % n, memory_order_relaxed);
                err = fl__etcd_fail(-EAGAIN,
                                    "etcd %s: the outcome is unknown (the request was sent, "
                                    "no answer came in time): %s",
                                    op, tried);
                goto out;
            }
            rp->ambiguous = true;
        }
        if ((resend || (stale_token && k == n - 1)) && again && !resent) {
            /* A kept-alive connection that had died: the same endpoint once
             * more, on a connection of its own.  A token that etcd kept us
             * waiting on, and no other endpoint left to try: the same one
             * once more, with a new token. */
            resent = true;
            fresh = resend;
            k--;
            continue;
        }
        /* Move the preferred endpoint past this one. */
        atomic_store_explicit(&c->current, (i + 1) % n, memory_order_relaxed);
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
    if (err && err != -EAGAIN && rp->ambiguous) {
        /* An earlier attempt was sent and got no answer: it may have taken
         * effect, whatever the later ones came to (a refusal, a token that
         * could not be renewed, a certificate of another endpoint). */
        err = fl__etcd_fail(-EAGAIN,
                            "etcd %s: the outcome is unknown: an attempt was sent and got no "
                            "answer (%s), then the request failed: %s",
                            op, tried, err == -EREMOTEIO ? rp->message : strerror(-err));
    }
    if (h)
        fl__etcd_handle_put(c, h);
    fl__etcd_headers_free(hdrs);
    if (body && (flags & FL__ETCD_SECRET))
        explicit_bzero(body, strlen(body));
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

int fl__etcd_refusal(const struct fl__etcd_reply *rp)
{
    const char *m = rp->message;
    int err = -EPROTO;
    if (fl__contains(m, "database space exceeded"))
        err = -ENOSPC;
    else if (fl__contains(m, "too large"))
        err = -EMSGSIZE;
    else if (fl__auth_class(rp->grpc_code, m) != FL__AUTH_NONE)
        err = -EACCES;
    return fl__etcd_fail(err, "etcd %s %s refused: %s (code %d)", rp->endpoint, rp->op, m,
                         rp->grpc_code);
}
