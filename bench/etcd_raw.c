/* SPDX-License-Identifier: MIT */
/* etcd_raw.c - see etcd_raw.h. */
#include "etcd_raw.h"
#include "benchutil.h"

#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The cluster code's failure hook (cluster_harness.h), for both question 9
 * programs: the benchmark stops, naming what the cluster did. */
void ec_fail(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fb_die("etcd cluster: %s", msg);
}

static size_t raw_write(char *d, size_t size, size_t nmemb, void *arg)
{
    struct raw *r = arg;
    size_t n = size * nmemb;
    if (r->n + n + 1 > r->cap) {
        r->cap = (r->n + n + 1) * 2;
        r->buf = realloc(r->buf, r->cap);
        if (!r->buf)
            fb_die("out of memory");
    }
    memcpy(r->buf + r->n, d, n);
    r->n += n;
    r->buf[r->n] = '\0';
    return n;
}

void raw_init(struct raw *r, const char *host, int port)
{
    memset(r, 0, sizeof *r);
    r->h = curl_easy_init();
    if (!r->h)
        fb_die("curl_easy_init");
    snprintf(r->base, sizeof r->base, "http://%s:%d", host, port);
    curl_easy_setopt(r->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->h, CURLOPT_PROXY, "");
    curl_easy_setopt(r->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(r->h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, raw_write);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
}

/* POST body to path; the parsed answer (the caller decrefs); dies on failure. */
json_t *raw_post(struct raw *r, const char *path, const char *body)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", r->base, path);
    r->n = 0;
    if (r->buf)
        r->buf[0] = '\0';
    curl_easy_setopt(r->h, CURLOPT_URL, url);
    curl_easy_setopt(r->h, CURLOPT_POSTFIELDS, body);
    CURLcode cc = curl_easy_perform(r->h);
    long status = 0;
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK || status != 200)
        fb_die("raw %s: %s, HTTP %ld: %s", path, curl_easy_strerror(cc), status,
               r->buf ? r->buf : "");
    json_t *j = json_loads(r->buf, 0, NULL);
    if (!j)
        fb_die("raw %s: not JSON: %s", path, r->buf);
    return j;
}

uint64_t jnum(json_t *j, const char *a, const char *b)
{
    json_t *x = json_object_get(j, a);
    if (b)
        x = json_object_get(x, b);
    const char *s = json_string_value(x);
    return s ? strtoull(s, NULL, 10) : 0;
}

void b64(const void *src, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = src;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

void b64s(const char *s, char *out)
{
    b64(s, strlen(s), out);
}

uint64_t raw_grant(struct raw *r, int ttl)
{
    char body[64];
    snprintf(body, sizeof body, "{\"TTL\":\"%d\"}", ttl);
    json_t *j = raw_post(r, "/v3/lease/grant", body);
    const char *ids = json_string_value(json_object_get(j, "ID"));
    uint64_t id = ids ? strtoull(ids, NULL, 10) : 0;
    json_decref(j);
    if (!id)
        fb_die("raw grant: no ID");
    return id;
}

void raw_revoke(struct raw *r, uint64_t id)
{
    char body[64];
    snprintf(body, sizeof body, "{\"ID\":\"%" PRIu64 "\"}", id);
    json_decref(raw_post(r, "/v3/lease/revoke", body));
}

/* ---- a watch ---- */

struct raw_watch {
    CURL *h;
    pthread_t thread;
    char url[128], body[512];
    _Atomic int stop, created;
    _Atomic uint64_t deleted;
};

static size_t watch_write(char *d, size_t size, size_t nmemb, void *arg)
{
    struct raw_watch *w = arg;
    size_t n = size * nmemb;
    uint64_t now = fb_now_ns();
    /* One JSON message per chunk, small: look for the words, without
     * parsing (the moment is what matters). */
    if (memmem(d, n, "\"created\":true", 14))
        atomic_store(&w->created, 1);
    if (memmem(d, n, "\"DELETE\"", 8) && !atomic_load(&w->deleted))
        atomic_store(&w->deleted, now);
    return n;
}

static int watch_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    struct raw_watch *w = arg;
    return atomic_load(&w->stop) || atomic_load(&w->deleted); /* non-zero: end */
}

static void *watch_main(void *arg)
{
    struct raw_watch *w = arg;
    curl_easy_perform(w->h); /* until stopped, or the DELETE came */
    atomic_store(&w->created, 1);
    return NULL;
}

struct raw_watch *raw_watch_start(const char *host, int port, const void *key, size_t klen,
                                  const void *end, size_t elen)
{
    struct raw_watch *w = calloc(1, sizeof *w);
    char k[128], e[128];
    if (!w || klen > 90 || elen > 90)
        fb_die("raw_watch_start");
    b64(key, klen, k);
    b64(end, elen, e);
    snprintf(w->url, sizeof w->url, "http://%s:%d/v3/watch", host, port);
    snprintf(w->body, sizeof w->body,
             "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\",\"filters\":"
             "[\"NOPUT\"]}}",
             k, e);
    w->h = curl_easy_init();
    if (!w->h)
        fb_die("curl_easy_init");
    curl_easy_setopt(w->h, CURLOPT_URL, w->url);
    curl_easy_setopt(w->h, CURLOPT_POSTFIELDS, w->body);
    curl_easy_setopt(w->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(w->h, CURLOPT_PROXY, "");
    curl_easy_setopt(w->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(w->h, CURLOPT_TIMEOUT_MS, 60000L);
    curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(w->h, CURLOPT_XFERINFOFUNCTION, watch_progress);
    curl_easy_setopt(w->h, CURLOPT_XFERINFODATA, w);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0)
        fb_die("pthread_create");
    for (int i = 0; i < 5000 && !atomic_load(&w->created); i++) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!atomic_load(&w->created))
        fb_die("raw watch %s: not created in 5 s", w->url);
    return w;
}

uint64_t raw_watch_deleted(struct raw_watch *w) { return atomic_load(&w->deleted); }

void raw_watch_stop(struct raw_watch *w)
{
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    curl_easy_cleanup(w->h);
    free(w);
}

/* ---- what etcd counted ---- */

const char *const fbm_method_names[FBM_NMETHODS] = {
    [FBM_TXN] = "Txn",          [FBM_RANGE] = "Range",
    [FBM_GRANT] = "LeaseGrant", [FBM_REVOKE] = "LeaseRevoke",
    [FBM_KEEPALIVE] = "LeaseKeepAlive", [FBM_WATCH] = "Watch",
};

struct body {
    char *p;
    size_t n, cap;
};

static size_t take(char *d, size_t size, size_t nmemb, void *arg)
{
    struct body *b = arg;
    size_t n = size * nmemb;
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            fb_die("out of memory");
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

/* The value of a counter line's label, e.g. grpc_method="Txn": into out. */
static bool label(const char *line, const char *name, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "%s=\"", name);
    const char *s = strstr(line, pat);
    if (!s)
        return false;
    s += strlen(pat);
    const char *e = strchr(s, '"');
    if (!e || (size_t)(e - s) >= cap)
        return false;
    memcpy(out, s, (size_t)(e - s));
    out[e - s] = '\0';
    return true;
}

static void add_member(const char *text, fbm_counts *out)
{
    static const char recv[] = "grpc_server_msg_received_total{";
    static const char sent[] = "grpc_server_msg_sent_total{";
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line += !!line) {
        bool is_recv = strncmp(line, recv, sizeof recv - 1) == 0;
        bool is_sent = strncmp(line, sent, sizeof sent - 1) == 0;
        if (!is_recv && !is_sent)
            continue;
        const char *close = strchr(line, '}');
        const char *eol = strchr(line, '\n');
        if (!close || (eol && close > eol))
            continue;
        double v = strtod(close + 1, NULL);
        char method[64], service[64];
        if (!label(line, "grpc_method", method, sizeof method) ||
            !label(line, "grpc_service", service, sizeof service))
            continue;
        bool etcd_watch = strcmp(method, "Watch") == 0 &&
                          strcmp(service, "etcdserverpb.Watch") == 0;
        if (is_sent) {
            if (etcd_watch)
                out->watch_sent += v;
            continue;
        }
        out->received += v;
        for (int i = 0; i < FBM_NMETHODS; i++)
            if (strcmp(method, fbm_method_names[i]) == 0 &&
                (i != FBM_WATCH || etcd_watch))
                out->received_by[i] += v;
    }
}

void fbm_scrape(const ec_cluster *c, fbm_counts *out)
{
    memset(out, 0, sizeof *out);
    CURL *h = curl_easy_init();
    if (!h)
        fb_die("curl_easy_init");
    struct body b = {0};
    for (int i = 0; i < c->n; i++) {
        if (!c->m[i].pid)
            continue;
        char url[128];
        snprintf(url, sizeof url, "http://%s:%d/metrics", c->m[i].host, c->m[i].client_port);
        b.n = 0;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROXY, "");
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, take);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        CURLcode cc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (cc != CURLE_OK || status != 200 || !b.p)
            fb_die("GET %s: %s, HTTP %ld", url, curl_easy_strerror(cc), status);
        add_member(b.p, out);
    }
    free(b.p);
    curl_easy_cleanup(h);
}

void fbm_per(const fbm_counts *before, const fbm_counts *after, double n, fbm_counts *out)
{
    if (n <= 0)
        n = 1;
    out->received = (after->received - before->received) / n;
    out->watch_sent = (after->watch_sent - before->watch_sent) / n;
    for (int i = 0; i < FBM_NMETHODS; i++)
        out->received_by[i] = (after->received_by[i] - before->received_by[i]) / n;
}

void fbm_add(fbm_counts *sum, const fbm_counts *x)
{
    sum->received += x->received;
    sum->watch_sent += x->watch_sent;
    for (int i = 0; i < FBM_NMETHODS; i++)
        sum->received_by[i] += x->received_by[i];
}
