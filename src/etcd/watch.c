/* SPDX-License-Identifier: MIT */
/*
 * watch.c - sleeping until one key changes: one streaming POST to
 * /v3/watch through curl's multi interface, polled together with a file
 * descriptor of the caller's (the wake fd of an fl_cancel) by
 * curl_multi_poll, so the waiting thread sleeps in poll(2) and never spins.
 *
 * The gateway answers a watch with one JSON object per line: first
 * {"result":{"created":true,...}}, then one per batch of events.  The
 * caller learns of the key's deletion (FL__WATCH_DELETED, with its
 * revision) and of the value of each put (FL__WATCH_PUT, one at a time, in
 * order).  A watch whose start revision was compacted away is cancelled by
 * etcd with compact_revision set: FL__WATCH_COMPACTED, "look again".  Every
 * line is untrusted; one that cannot be read ends the watch (FL__WATCH_LOST)
 * and the caller looks at the key with a read, which is the authority.
 *
 * The stream carries the client's auth token (auth.c).  etcd refuses a
 * watch by cancelling it with a reason: a token it no longer takes ends the
 * watch as lost after a new token was obtained (the caller's next watch
 * carries it); a permission it lacks, or a password no longer good, is
 * FL__WATCH_REFUSED with the reason in the error (-EACCES for the caller).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define FL__WATCH_LINE_MAX (1u << 20)
#define FL__WATCH_VALUE_MAX 128

struct fl__etcd_watch {
    struct fl__etcd_client *c;
    CURLM *multi;
    CURL *easy;
    char *body;
    char *buf;
    size_t n, cap;
    bool deleted, lost, compacted;
    uint64_t deleted_rev;
    /* The puts not yet returned, oldest first: each value's first bytes. */
    struct fl__watch_put {
        unsigned char v[FL__WATCH_VALUE_MAX];
        size_t n;
    } puts[8];
    unsigned nputs;
    struct curl_slist *hdrs;
    uint64_t auth_gen;  /* the token the stream carries */
    bool auth_stale;    /* etcd refused that token */
    bool refused;       /* etcd refused us: reason[] */
    char reason[256];
};

/* A cancellation's or an error's reason: what it says of our credentials. */
static void fl__watch_refusal(struct fl__etcd_watch *w, const char *why)
{
    w->lost = true;
    if (strstr(why, "invalid auth token") || strstr(why, "auth store is old") ||
        strstr(why, "user name is empty"))
        w->auth_stale = true;
    else if (strstr(why, "permission denied") || strstr(why, "authentication failed")) {
        w->refused = true;
        snprintf(w->reason, sizeof w->reason, "%s", why);
    }
}

static void fl__watch_line(struct fl__etcd_watch *w, const char *line, size_t n)
{
    json_error_t jerr;
    json_t *j = json_loadb(line, n, 0, &jerr);
    json_t *result = json_is_object(j) ? json_object_get(j, "result") : NULL;
    if (!json_is_object(result)) {
        /* an error object ({"error":{"grpc_code":N,"message":...}}), or garbage */
        json_t *err = json_is_object(j) ? json_object_get(j, "error") : NULL;
        json_t *msg = json_is_object(err) ? json_object_get(err, "message") : NULL;
        if (json_is_string(msg))
            fl__watch_refusal(w, json_string_value(msg));
        w->lost = true;
        json_decref(j);
        return;
    }
    json_t *events = json_object_get(result, "events");
    if (json_is_array(events)) {
        size_t i;
        json_t *ev;
        json_array_foreach(events, i, ev) {
            /* The gateway leaves out default values: no "type" is a PUT. */
            json_t *type = json_is_object(ev) ? json_object_get(ev, "type") : NULL;
            json_t *kv = json_is_object(ev) ? json_object_get(ev, "kv") : NULL;
            if (!json_is_object(kv) || (type && !json_is_string(type))) {
                w->lost = true;
                continue;
            }
            if (type && strcmp(json_string_value(type), "DELETE") == 0) {
                json_t *mod = json_object_get(kv, "mod_revision");
                w->deleted = true;
                w->deleted_rev = json_is_string(mod) ? strtoull(json_string_value(mod), NULL, 10)
                                                     : 0;
                continue;
            }
            if (type && strcmp(json_string_value(type), "PUT") != 0) {
                w->lost = true;
                continue;
            }
            json_t *value = json_object_get(kv, "value");
            const char *b64 = json_is_string(value) ? json_string_value(value) : "";
            unsigned char *bytes = NULL;
            size_t n = 0;
            if (fl__b64_decode(b64, strlen(b64), &bytes, &n) != 0 ||
                w->nputs == sizeof w->puts / sizeof w->puts[0]) {
                w->lost = true; /* unreadable, or more than we keep: look again */
                free(bytes);
                continue;
            }
            struct fl__watch_put *put = &w->puts[w->nputs++];
            put->n = n < sizeof put->v ? n : sizeof put->v;
            if (put->n)
                memcpy(put->v, bytes, put->n);
            free(bytes);
        }
    }
    json_t *canceled = json_object_get(result, "canceled");
    json_t *compact = json_object_get(result, "compact_revision");
    json_t *reason = json_object_get(result, "cancel_reason");
    if (compact && !json_is_null(compact) && !(json_is_string(compact) &&
                                                strcmp(json_string_value(compact), "0") == 0))
        w->compacted = true; /* history gone: look again */
    else if (json_is_true(canceled)) {
        w->lost = true;
        if (json_is_string(reason))
            fl__watch_refusal(w, json_string_value(reason));
    }
    json_decref(j);
}

static size_t fl__watch_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct fl__etcd_watch *w = arg;
    size_t n = size * nmemb;
    if (w->n + n > FL__WATCH_LINE_MAX) {
        w->lost = true;
        return 0;
    }
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n)
            cap *= 2;
        char *p = realloc(w->buf, cap);
        if (!p) {
            w->lost = true;
            return 0;
        }
        w->buf = p;
        w->cap = cap;
    }
    memcpy(w->buf + w->n, data, n);
    w->n += n;
    size_t start = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->buf[i] != '\n')
            continue;
        if (i > start)
            fl__watch_line(w, w->buf + start, i - start);
        start = i + 1;
    }
    memmove(w->buf, w->buf + start, w->n - start);
    w->n -= start;
    return n;
}

void fl__etcd_watch_close(struct fl__etcd_watch *w)
{
    if (!w)
        return;
    if (w->multi && w->easy)
        curl_multi_remove_handle(w->multi, w->easy);
    if (w->easy)
        curl_easy_cleanup(w->easy);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    fl__etcd_headers_free(w->hdrs);
    free(w->body);
    free(w->buf);
    free(w);
}

int fl__etcd_watch_open(struct fl__etcd_client *c, const void *key, size_t klen,
                        uint64_t start_rev, struct fl__etcd_watch **out)
{
    *out = NULL;
    struct fl__etcd_watch *w = calloc(1, sizeof *w);
    if (!w)
        return fl__etcd_fail(-ENOMEM, "out of memory");
    w->c = c;
    json_t *req = json_pack("{s:{s:o, s:o}}", "create_request", "key", fl__etcd_b64(key, klen),
                            "start_revision", fl__etcd_num(start_rev));
    w->body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    char *auth = NULL;
    int err = fl__etcd_auth_header(c, &auth, &w->auth_gen);
    if (err) {
        fl__etcd_watch_close(w);
        return err;
    }
    w->hdrs = fl__etcd_headers(auth);
    if (auth)
        explicit_bzero(auth, strlen(auth));
    free(auth);
    w->multi = w->hdrs ? curl_multi_init() : NULL;
    /* A handle of its own, not the pool's: it streams for as long as the
     * wait lasts, without the request timeout. */
    w->easy = w->body && w->multi ? fl__etcd_handle_get(c) : NULL;
    if (!w->easy) {
        fl__etcd_watch_close(w);
        return fl__etcd_fail(-ENOMEM, "etcd watch: out of memory");
    }
    /* relaxed: a hint (client.h) */
    unsigned i = atomic_load_explicit(&c->current, memory_order_relaxed) % c->uri.n;
    char url[sizeof c->uri.ep[0].url + 16];
    snprintf(url, sizeof url, "%s/v3/watch", c->uri.ep[i].url);
    curl_easy_setopt(w->easy, CURLOPT_URL, url);
    curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->hdrs);
    /* A watch may be sent twice by curl (a kept-alive connection that died):
     * harmless, it changes nothing. */
    curl_easy_setopt(w->easy, CURLOPT_POSTFIELDS, w->body);
    curl_easy_setopt(w->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(w->body));
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, fl__watch_write);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, 0L);
    if (curl_multi_add_handle(w->multi, w->easy) != CURLM_OK) {
        curl_easy_cleanup(w->easy);
        w->easy = NULL;
        fl__etcd_watch_close(w);
        return fl__etcd_fail(-ENOMEM, "etcd watch: cannot start the stream");
    }
    *out = w;
    return 0;
}

int fl__etcd_watch_wait(struct fl__etcd_watch *w, int extra_fd, int timeout_ms)
{
    uint64_t deadline =
        fl__etcd_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * FL__ETCD_NS_PER_MS;
    for (;;) {
        int running = 0;
        if (curl_multi_perform(w->multi, &running) != CURLM_OK)
            w->lost = true;
        int left;
        CURLMsg *m;
        while ((m = curl_multi_info_read(w->multi, &left)))
            if (m->msg == CURLMSG_DONE)
                w->lost = true; /* the stream ended: etcd never ends a live watch */
        /* In the order etcd made them: the puts before a deletion (a key
         * deleted is never put again under the same watch by fencelock). */
        if (w->nputs)
            return FL__WATCH_PUT;
        if (w->deleted)
            return FL__WATCH_DELETED;
        if (w->compacted)
            return FL__WATCH_COMPACTED;
        if (w->refused) {
            fl__etcd_error("etcd watch refused: %s", w->reason);
            return FL__WATCH_REFUSED;
        }
        if (w->auth_stale) {
            /* A new token for the next watch; if none can be had, refused. */
            w->auth_stale = false;
            if (fl__etcd_auth_refresh(w->c, w->auth_gen) != 0)
                return FL__WATCH_REFUSED;
            return FL__WATCH_LOST;
        }
        if (w->lost || !running)
            return FL__WATCH_LOST;
        uint64_t now = fl__etcd_now_ns();
        if (now >= deadline)
            return FL__WATCH_TIMEOUT;
        int ms = (int)FL__ETCD_CEIL_MS(deadline - now);
        struct curl_waitfd extra = {.fd = extra_fd, .events = CURL_WAIT_POLLIN, .revents = 0};
        int numfds = 0;
        if (curl_multi_poll(w->multi, extra_fd >= 0 ? &extra : NULL, extra_fd >= 0 ? 1 : 0, ms,
                            &numfds) != CURLM_OK)
            return FL__WATCH_LOST;
        if (extra_fd >= 0 && (extra.revents & CURL_WAIT_POLLIN))
            return FL__WATCH_FD;
    }
}

size_t fl__etcd_watch_put(struct fl__etcd_watch *w, unsigned char *buf, size_t cap)
{
    if (!w->nputs)
        return 0;
    size_t n = w->puts[0].n < cap ? w->puts[0].n : cap;
    memcpy(buf, w->puts[0].v, n);
    memmove(w->puts, w->puts + 1, (w->nputs - 1) * sizeof w->puts[0]);
    w->nputs--;
    return n;
}

uint64_t fl__etcd_watch_deleted_rev(const struct fl__etcd_watch *w) { return w->deleted_rev; }
