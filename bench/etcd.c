/* SPDX-License-Identifier: MIT */
/*
 * etcd.c - question 9 (issue 15): what fencelock on etcd costs against the
 * etcd requests it is made of, against `etcdctl lock`, and how fast a
 * waiter takes over after a holder's lease ends.
 *
 * A three-member etcd cluster on loopback, started here (the tests'
 * tests/lib/cluster.c: private data directories, ports of this process's
 * own, stopped by pid).  In the same run, interleaved so that a noisy
 * moment hits every case alike:
 *   (a) raw requests through one kept-alive libcurl connection to the
 *       member fencelock talks to (the URI's first): lease grant, a Txn
 *       shaped like the acquire's, one like the release's, lease revoke, one
 *       like the fenced commit's;
 *   (b) fl_acquire + fl_release on an etcd region (what the first two raw
 *       requests plus the last two make), and fl_acquire alone;
 *   (c) `etcdctl lock NAME true` per acquisition (one process per
 *       acquisition, as a shell script uses it: start, connect, session
 *       lease, lock, run true, unlock, revoke, exit), beside `fencelock run
 *       --region URI KEY -- true` (the same thing with fencelock's tool) and
 *       etcd's lock service through the JSON gateway (grant, /v3/lock/lock,
 *       /v3/lock/unlock, revoke on the kept-alive connection);
 *   (d) fl_commit against the raw commit Txn;
 *   (e) takeover after expiry: a holder with a 2 s lease is stopped
 *       (SIGSTOP) and a waiter in fl_acquire(FL_WAIT_FOREVER) takes the key
 *       when etcd ends the lease.  The lease's end is observed by polling
 *       /v3/lease/timetolive every 2 ms: from the first answer that says
 *       the lease is gone to the waiter's return (etcd revokes expired
 *       leases on a 500 ms tick, so "gone" is etcd's own end of the lease),
 *       and from the holder's deadline_ns (the client's conservative end).
 *       Each holder starts after a random 0..500 ms, so that the lease's end
 *       falls anywhere between two of etcd's expiry ticks;
 *   (f) afterwards, in a phase of its own (so that nothing above shares the
 *       machine with a second cluster): fl_acquire, fl_commit and fl_release
 *       on etcds:// against a second three-member cluster run the way
 *       production clusters run (tests/lib/cluster.c's secured cluster: TLS
 *       to clients and between members, client certificates, RBAC with a
 *       least-privilege role, 3 s auth tokens), rounds alternating with the
 *       same calls on the plain cluster: what TLS and authentication cost.
 */
#include "benchutil.h"
#include "cluster_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#ifndef FENCELOCK_TOOL_PATH
#define FENCELOCK_TOOL_PATH "fencelock"
#endif

void ec_fail(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fb_die("etcd cluster: %s", msg);
}

/* ---- raw requests through one kept-alive connection ---- */

struct raw {
    CURL *h;
    char base[128];
    char *buf;
    size_t n, cap;
};

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

static void raw_init(struct raw *r, const char *host, int port)
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
static json_t *raw_post(struct raw *r, const char *path, const char *body)
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

static uint64_t jnum(json_t *j, const char *a, const char *b)
{
    json_t *x = json_object_get(j, a);
    if (b)
        x = json_object_get(x, b);
    const char *s = json_string_value(x);
    return s ? strtoull(s, NULL, 10) : 0;
}

static void b64(const void *src, size_t n, char *out)
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

static void b64s(const char *s, char *out)
{
    b64(s, strlen(s), out);
}

/* The keys of the raw requests (their own prefix, beside fencelock's). */
static char K_LOCK[64], K_LAST[64], K_EPOCH[64], K_REC[64], V_HOLD[64], V_LASTH[64],
    V_EPOCH[16], K_LOCKNAME[64], V_BOUND[32];

static void raw_keys(void)
{
    b64s("bench-raw/lock/k", K_LOCK);
    b64s("bench-raw/last/k", K_LAST);
    b64s("bench-raw/epoch", K_EPOCH);
    b64s("bench-raw/rec/r", K_REC);
    b64s("1 12345 benchhost", V_HOLD);
    b64s("0000001 H", V_LASTH);
    b64s("0000002", V_BOUND);
    b64s("1", V_EPOCH);
    b64s("bench-raw/v3lock", K_LOCKNAME);
}

static uint64_t raw_grant(struct raw *r, int ttl)
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

static void raw_revoke(struct raw *r, uint64_t id)
{
    char body[64];
    snprintf(body, sizeof body, "{\"ID\":\"%" PRIu64 "\"}", id);
    json_decref(raw_post(r, "/v3/lease/revoke", body));
}

/* Like the acquire Txn: its revision (the lock key's create revision). */
static uint64_t raw_acquire_txn(struct raw *r, uint64_t lease)
{
    /* The acquire's shape (src/etcd/lock.c, ACQUIRE): the key's first holding
     * in the outer Txn, any later one in the nested Txn that also compares
     * the marker's epoch. */
    char take[512], body[4096];
    snprintf(take, sizeof take,
             "[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%" PRIu64
             "\"}},{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"prev_kv\":true}}]",
             K_LOCK, V_HOLD, lease, K_LAST, V_LASTH);
    snprintf(body, sizeof body,
             "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"CREATE\","
             "\"create_revision\":\"0\"},{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":"
             "\"VALUE\",\"value\":\"%s\"},{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":"
             "\"CREATE\",\"create_revision\":\"0\"}],\"success\":%s,"
             "\"failure\":[{\"request_txn\":{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\","
             "\"target\":\"CREATE\",\"create_revision\":\"0\"},{\"key\":\"%s\",\"result\":"
             "\"EQUAL\",\"target\":\"VALUE\",\"value\":\"%s\"},{\"key\":\"%s\",\"result\":"
             "\"LESS\",\"target\":\"VALUE\",\"value\":\"%s\"}],\"success\":%s,\"failure\":"
             "[{\"request_range\":{\"key\":\"%s\"}},{\"request_range\":{\"key\":\"%s\"}},"
             "{\"request_range\":{\"key\":\"%s\"}}]}}]}",
             K_LOCK, K_EPOCH, V_EPOCH, K_LAST, take, K_LOCK, K_EPOCH, V_EPOCH, K_LAST, V_BOUND,
             take, K_LOCK, K_EPOCH, K_LAST);
    json_t *j = raw_post(r, "/v3/kv/txn", body);
    bool ok = json_is_true(json_object_get(j, "succeeded"));
    if (!ok) { /* the nested Txn's answer */
        json_t *resp = json_array_get(json_object_get(j, "responses"), 0);
        ok = json_is_true(json_object_get(json_object_get(resp, "response_txn"), "succeeded"));
    }
    uint64_t rev = jnum(j, "header", "revision");
    json_decref(j);
    if (!ok)
        fb_die("raw acquire txn did not succeed");
    return rev;
}

/* Like the release Txn (its common case). */
static void raw_release_txn(struct raw *r, uint64_t rev, uint64_t lease)
{
    char body[1024], last[64], lastv[64];
    snprintf(last, sizeof last, "0000001 R %020" PRIu64, ((uint64_t)1 << 40) | rev);
    b64s(last, lastv);
    snprintf(body, sizeof body,
             "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"CREATE\","
             "\"create_revision\":\"%" PRIu64 "\"},{\"key\":\"%s\",\"result\":\"EQUAL\","
             "\"target\":\"LEASE\",\"lease\":\"%" PRIu64 "\"}],"
             "\"success\":[{\"request_delete_range\":{\"key\":\"%s\"}},{\"request_put\":{"
             "\"key\":\"%s\",\"value\":\"%s\"}}],"
             "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
             K_LOCK, rev, K_LOCK, lease, K_LOCK, K_LAST, lastv, K_LOCK);
    json_t *j = raw_post(r, "/v3/kv/txn", body);
    bool ok = json_is_true(json_object_get(j, "succeeded"));
    json_decref(j);
    if (!ok)
        fb_die("raw release txn did not succeed");
}

/* Like the commit Txn: a record bound to key "k", fenced by token. */
static void raw_commit_txn(struct raw *r, uint64_t token)
{
    char v[96], lo[64], hi[64], val[160], vlo[96], vhi[96];
    /* "k" NUL %020(token) DATA, and the bounds "k" NUL, "k" NUL %020(token + 1) */
    size_t n = (size_t)snprintf(v, sizeof v, "k%c%020" PRIu64 "value", 0, token);
    b64(v, n, val);
    b64("k", 2, vlo);
    n = (size_t)snprintf(hi, sizeof hi, "k%c%020" PRIu64, 0, token + 1);
    b64(hi, n, vhi);
    (void)lo;
    char body[2048];
    snprintf(body, sizeof body,
             "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"CREATE\","
             "\"create_revision\":\"0\"}],"
             "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}],"
             "\"failure\":[{\"request_txn\":{"
             "\"compare\":[{\"key\":\"%s\",\"result\":\"GREATER\",\"target\":\"VALUE\","
             "\"value\":\"%s\"},{\"key\":\"%s\",\"result\":\"LESS\",\"target\":\"VALUE\","
             "\"value\":\"%s\"}],"
             "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}],"
             "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}}]}",
             K_REC, K_REC, val, K_REC, vlo, K_REC, vhi, K_REC, val, K_REC);
    json_t *j = raw_post(r, "/v3/kv/txn", body);
    bool ok = json_is_true(json_object_get(j, "succeeded"));
    if (!ok) {
        json_t *inner = json_object_get(
            json_object_get(json_array_get(json_object_get(j, "responses"), 0), "response_txn"),
            "succeeded");
        ok = json_is_true(inner);
    }
    json_decref(j);
    if (!ok)
        fb_die("raw commit txn was refused (token %" PRIu64 ")", token);
}

/* etcd's lock service through the gateway: lock and unlock with a lease. */
static void raw_v3lock(struct raw *r, uint64_t lease)
{
    char body[256];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"lease\":\"%" PRIu64 "\"}", K_LOCKNAME, lease);
    json_t *j = raw_post(r, "/v3/lock/lock", body);
    const char *key = json_string_value(json_object_get(j, "key"));
    if (!key)
        fb_die("v3lock: no key");
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", key);
    json_decref(j);
    json_decref(raw_post(r, "/v3/lock/unlock", body));
}

/* ---- processes ---- */

/* Run argv to completion; its wall time in ns (dies if it fails). */
static uint64_t run_timed(const char *const *argv)
{
    uint64_t t0 = fb_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        fb_die("fork: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    uint64_t t = fb_now_ns() - t0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fb_die("%s %s exited with status 0x%x", argv[0], argv[1], st);
    return t;
}

/* ---- takeover after expiry ---- */

struct poller {
    struct raw raw;
    uint64_t lease;
    _Atomic int stop;
    _Atomic uint64_t gone_ns; /* first answer that says the lease is gone */
};

static void *poll_main(void *arg)
{
    struct poller *p = arg;
    char body[64];
    snprintf(body, sizeof body, "{\"ID\":\"%" PRIu64 "\"}", p->lease);
    while (!atomic_load(&p->stop)) {
        json_t *j = raw_post(&p->raw, "/v3/lease/timetolive", body);
        json_t *ttl = json_object_get(j, "TTL");
        const char *s = json_string_value(ttl);
        long long v = s ? strtoll(s, NULL, 10) : (json_is_integer(ttl) ? json_integer_value(ttl) : 0);
        uint64_t now = fb_now_ns();
        json_decref(j);
        if (v < 0) { /* -1: no such lease (revoked by etcd) */
            atomic_store(&p->gone_ns, now);
            break;
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* One takeover: a holder child with a 2 s lease is stopped; the waiter
 * (this process) waits.  Sets *from_gone and *from_deadline (ns, may be
 * negative). */
static void takeover_once(const char *uri, const ec_cluster *c, int i, double *from_gone,
                          double *from_deadline)
{
    char key[32];
    snprintf(key, sizeof key, "takeover-%d", i);
    int p[2];
    if (pipe(p) != 0)
        fb_die("pipe");
    /* etcd ends expired leases on a 500 ms tick: a holder that acquired
     * right after the previous takeover (itself just after a tick) would
     * always expire just after one.  A random start spreads the phase. */
    struct timespec jitter = {0, (long)(random() % 500) * 1000000L};
    nanosleep(&jitter, NULL);
    pid_t holder = fb_fork();
    if (holder == 0) {
        close(p[0]);
        fl_region *r = NULL;
        fl_lease l;
        if (fl_open(uri, &r) != 0 || fl_acquire(r, key, 2 * FB_S, 0, &l) != 0)
            _exit(2);
        char line[128];
        int n = snprintf(line, sizeof line, "%" PRIu64 " %" PRIu64 "\n", l.handle, l.deadline_ns);
        if (write(p[1], line, (size_t)n) != n)
            _exit(3);
        for (;;)
            pause(); /* stopped by the parent; never renews */
    }
    close(p[1]);
    char line[128] = "";
    ssize_t k = read(p[0], line, sizeof line - 1);
    close(p[0]);
    uint64_t lease = 0, deadline = 0;
    if (k <= 0 || sscanf(line, "%" SCNu64 " %" SCNu64, &lease, &deadline) != 2)
        fb_die("takeover holder did not acquire");
    kill(holder, SIGSTOP);
    struct poller *po = calloc(1, sizeof *po);
    if (!po)
        fb_die("out of memory");
    raw_init(&po->raw, c->m[0].host, c->m[0].client_port);
    po->lease = lease;
    pthread_t th;
    pthread_create(&th, NULL, poll_main, po);
    fl_region *r = NULL;
    if (fl_open(uri, &r) != 0)
        fb_die("fl_open: %s", fl_last_error());
    fl_lease l;
    int rc = fl_acquire(r, key, 10 * FB_S, FL_WAIT_FOREVER, &l);
    uint64_t got = fb_now_ns();
    if (rc != 0)
        fb_die("takeover: %s", fl_last_error());
    /* the poller sees the end within 2 ms + a request */
    for (int w = 0; w < 500 && !atomic_load(&po->gone_ns); w++) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&po->stop, 1);
    pthread_join(th, NULL);
    uint64_t gone = atomic_load(&po->gone_ns);
    if (!gone)
        fb_die("the holder's lease did not end");
    *from_gone = (double)got - (double)gone;
    *from_deadline = (double)got - (double)deadline;
    fl_release(r, &l);
    fl_close(r);
    curl_easy_cleanup(po->raw.h);
    free(po->raw.buf);
    free(po);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
}

enum { A_GRANT, A_ACQTXN, A_RELTXN, A_REVOKE, A_COMMITTXN, A_V3LOCK, B_ACQ, B_ACQREL, B_REL,
       D_COMMIT, C_ETCDCTL, C_FLRUN, NCASES };

/* (f): the plain and the TLS round, acquire, commit, release each. */
enum { T_PLAIN_ACQ, T_PLAIN_COMMIT, T_PLAIN_REL, T_TLS_ACQ, T_TLS_COMMIT, T_TLS_REL, NTLS };

static void fl_round(fl_region *r, fb_samples *s)
{
    fl_lease l;
    uint64_t t0 = fb_now_ns();
    if (fl_acquire(r, "k", 10 * FB_S, 0, &l) != 0)
        fb_die("acquire on %s: %s", fl_region_path(r), fl_last_error());
    uint64_t t1 = fb_now_ns();
    if (fl_commit(r, &l, "rec", "value", 5, 0, NULL) != 0)
        fb_die("commit on %s: %s", fl_region_path(r), fl_last_error());
    uint64_t t2 = fb_now_ns();
    if (fl_release(r, &l) != 0)
        fb_die("release on %s: %s", fl_region_path(r), fl_last_error());
    uint64_t t3 = fb_now_ns();
    fb_samples_add(&s[0], (double)(t1 - t0));
    fb_samples_add(&s[1], (double)(t2 - t1));
    fb_samples_add(&s[2], (double)(t3 - t2));
}

/* (f) */
static void tls_phase(fl_region *plain)
{
    ec_cluster sc;
    ec_start_secure(&sc, 3);
    char suri[1024];
    ec_uri(&sc, 0, "bench", suri, sizeof suri);
    fl_region *sr = NULL;
    if (fl_open(suri, &sr) != 0)
        fb_die("fl_open %s: %s", suri, fl_last_error());
    fb_samples s[NTLS];
    for (int i = 0; i < NTLS; i++)
        fb_samples_init(&s[i]);
    fb_samples warm[3];
    for (int i = 0; i < 3; i++)
        fb_samples_init(&warm[i]);
    for (int i = 0; i < 20; i++) /* connections, TLS sessions, the token */
        fl_round(sr, warm);
    int rounds = fb_opt.full ? 1000 : 200, done = 0;
    uint64_t end = fb_now_ns() + (uint64_t)((fb_budget_left() * 0.8) * 1e9);
    for (; done < rounds && fb_now_ns() < end; done++) {
        bool tls_first = done & 1; /* alternate which goes first */
        for (int half = 0; half < 2; half++) {
            if ((half == 0) == tls_first)
                fl_round(sr, &s[T_TLS_ACQ]);
            else
                fl_round(plain, &s[T_PLAIN_ACQ]);
        }
    }
    static const char *const names[NTLS] = {
        [T_PLAIN_ACQ] = "tls phase: etcd:// fl_acquire (free key)",
        [T_PLAIN_COMMIT] = "tls phase: etcd:// fl_commit",
        [T_PLAIN_REL] = "tls phase: etcd:// fl_release",
        [T_TLS_ACQ] = "tls phase: etcds:// (TLS, RBAC) fl_acquire (free key)",
        [T_TLS_COMMIT] = "tls phase: etcds:// (TLS, RBAC) fl_commit",
        [T_TLS_REL] = "tls phase: etcds:// (TLS, RBAC) fl_release",
    };
    fb_stats st[NTLS];
    for (int i = 0; i < NTLS; i++) {
        st[i] = fb_stats_of(&s[i]);
        fb_result_stats(names[i], &st[i], "ns");
    }
    fb_result("ratios (medians)", "etcds:// / etcd:// fl_acquire",
              st[T_TLS_ACQ].median / st[T_PLAIN_ACQ].median, "x");
    fb_result("ratios (medians)", "etcds:// / etcd:// fl_commit",
              st[T_TLS_COMMIT].median / st[T_PLAIN_COMMIT].median, "x");
    fb_result("ratios (medians)", "etcds:// / etcd:// fl_release",
              st[T_TLS_REL].median / st[T_PLAIN_REL].median, "x");
    fb_note("tls phase: %d rounds alternating etcd:// (the first cluster) and etcds:// (a second "
            "three-member cluster: TLS to clients and between members, client certificates, "
            "RBAC, 3 s auth tokens), each over kept-alive connections",
            done);
    fl_close(sr);
    ec_stop_all(&sc);
}

int main(int argc, char **argv)
{
    fb_init(argc, argv, 9, "etcd");
    srandom((unsigned)getpid());
    curl_global_init(CURL_GLOBAL_DEFAULT);
    setenv("ETCDCTL_API", "3", 1);
    ec_cluster c;
    ec_start(&c, 3);
    int leader = ec_leader(&c, 10000);
    char uri[1024], ep[64];
    ec_uri(&c, 0, "bench", uri, sizeof uri);
    snprintf(ep, sizeof ep, "http://%s:%d", c.m[0].host, c.m[0].client_port);
    fb_log("etcd: 3 members on loopback (leader m%d); fencelock and the raw requests talk to m0",
           leader);

    struct raw raw;
    raw_init(&raw, c.m[0].host, c.m[0].client_port);
    raw_keys();
    {
        char body[256];
        snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"%s\"}", K_EPOCH, V_EPOCH);
        json_decref(raw_post(&raw, "/v3/kv/put", body));
    }
    fl_region *r = NULL;
    if (fl_open(uri, &r) != 0)
        fb_die("fl_open %s: %s", uri, fl_last_error());

    fb_samples s[NCASES];
    for (int i = 0; i < NCASES; i++)
        fb_samples_init(&s[i]);
    int rounds = fb_opt.full ? 1000 : 200;
    int cli_every = fb_opt.full ? 10 : 8; /* one CLI run per this many rounds */
    uint64_t budget_end = fb_now_ns() + (uint64_t)((fb_budget_left() * 0.55) * 1e9);
    const char *etcdctl[] = {"etcdctl", "--endpoints", ep, "lock", "bench-etcdctl", "true",
                             NULL};
    const char *flrun[] = {FENCELOCK_TOOL_PATH, "run", "--region", uri, "bench-flrun", "--",
                           "true", NULL};
    /* Warm up: connections, the handle's key table, the programs' pages. */
    for (int i = 0; i < 20; i++) {
        fl_lease l;
        if (fl_acquire(r, "k", 10 * FB_S, 0, &l) != 0 || fl_release(r, &l) != 0)
            fb_die("warm-up: %s", fl_last_error());
        uint64_t id = raw_grant(&raw, 10);
        raw_release_txn(&raw, raw_acquire_txn(&raw, id), id);
        raw_revoke(&raw, id);
    }
    run_timed(etcdctl);
    run_timed(flrun);
    uint64_t token = 1;
    int done = 0;
    for (int i = 0; i < rounds && fb_now_ns() < budget_end; i++, done++) {
        bool fl_first = i & 1; /* alternate which goes first */
        for (int half = 0; half < 2; half++) {
            if ((half == 0) == fl_first) {
                fl_lease l;
                uint64_t t0 = fb_now_ns();
                if (fl_acquire(r, "k", 10 * FB_S, 0, &l) != 0)
                    fb_die("acquire: %s", fl_last_error());
                uint64_t t1 = fb_now_ns();
                if (fl_commit(r, &l, "rec", "value", 5, 0, NULL) != 0)
                    fb_die("commit: %s", fl_last_error());
                uint64_t t2 = fb_now_ns();
                if (fl_release(r, &l) != 0)
                    fb_die("release: %s", fl_last_error());
                uint64_t t3 = fb_now_ns();
                fb_samples_add(&s[B_ACQ], (double)(t1 - t0));
                fb_samples_add(&s[D_COMMIT], (double)(t2 - t1));
                fb_samples_add(&s[B_REL], (double)(t3 - t2));
                fb_samples_add(&s[B_ACQREL], (double)((t1 - t0) + (t3 - t2)));
            } else {
                uint64_t t0 = fb_now_ns();
                uint64_t id = raw_grant(&raw, 10);
                uint64_t t1 = fb_now_ns();
                uint64_t rev = raw_acquire_txn(&raw, id);
                uint64_t t2 = fb_now_ns();
                raw_commit_txn(&raw, token = rev > token ? rev : token + 1);
                uint64_t t3 = fb_now_ns();
                raw_release_txn(&raw, rev, id);
                uint64_t t4 = fb_now_ns();
                raw_revoke(&raw, id);
                uint64_t t5 = fb_now_ns();
                fb_samples_add(&s[A_GRANT], (double)(t1 - t0));
                fb_samples_add(&s[A_ACQTXN], (double)(t2 - t1));
                fb_samples_add(&s[A_COMMITTXN], (double)(t3 - t2));
                fb_samples_add(&s[A_RELTXN], (double)(t4 - t3));
                fb_samples_add(&s[A_REVOKE], (double)(t5 - t4));
                uint64_t lid = raw_grant(&raw, 10);
                uint64_t u0 = fb_now_ns();
                raw_v3lock(&raw, lid);
                uint64_t u1 = fb_now_ns();
                raw_revoke(&raw, lid);
                fb_samples_add(&s[A_V3LOCK], (double)(u1 - u0));
            }
        }
        if (i % cli_every == 0) {
            fb_samples_add(&s[C_ETCDCTL], (double)run_timed(etcdctl));
            fb_samples_add(&s[C_FLRUN], (double)run_timed(flrun));
        }
    }
    fb_log("etcd: %d interleaved rounds, %zu CLI runs each", done, s[C_ETCDCTL].n);

    static const char *const names[NCASES] = {
        [A_GRANT] = "raw: lease grant",
        [A_ACQTXN] = "raw: acquire-shaped Txn",
        [A_RELTXN] = "raw: release-shaped Txn",
        [A_REVOKE] = "raw: lease revoke",
        [A_COMMITTXN] = "raw: commit-shaped Txn",
        [A_V3LOCK] = "raw: etcd lock service lock+unlock (lease aside)",
        [B_ACQ] = "fencelock: fl_acquire (free key)",
        [B_ACQREL] = "fencelock: fl_acquire + fl_release",
        [B_REL] = "fencelock: fl_release",
        [D_COMMIT] = "fencelock: fl_commit",
        [C_ETCDCTL] = "etcdctl lock NAME true (one process per acquisition)",
        [C_FLRUN] = "fencelock run --region URI KEY -- true (one process)",
    };
    fb_stats st[NCASES];
    for (int i = 0; i < NCASES; i++) {
        st[i] = fb_stats_of(&s[i]);
        fb_result_stats(names[i], &st[i], "ns");
    }

    /* (e) takeovers. */
    int ntake = fb_opt.full ? 12 : 4;
    fb_samples tg, td;
    fb_samples_init(&tg);
    fb_samples_init(&td);
    for (int i = 0; i < ntake && fb_budget_left() > 8; i++) {
        double g = 0, d = 0;
        takeover_once(uri, &c, i, &g, &d);
        fb_samples_add(&tg, g);
        fb_samples_add(&td, d);
    }
    fb_stats stg = fb_stats_of(&tg), std_ = fb_stats_of(&td);
    fb_result_stats("takeover: etcd ends the holder's lease -> waiter holds the key", &stg, "ns");
    fb_result("takeover: etcd ends the holder's lease -> waiter holds the key", "max", stg.max,
              "ns");
    fb_result_stats("takeover: holder's deadline_ns -> waiter holds the key", &std_, "ns");
    fb_result("takeover: holder's deadline_ns -> waiter holds the key", "max", std_.max, "ns");

    double two = st[A_GRANT].median + st[A_ACQTXN].median;
    double four = two + st[A_RELTXN].median + st[A_REVOKE].median;
    double r_pair = st[B_ACQREL].median / two;
    double r_acq = st[B_ACQ].median / two;
    double r_four = st[B_ACQREL].median / four;
    double r_cli = st[C_ETCDCTL].median / st[B_ACQREL].median;
    double r_cli2 = st[C_ETCDCTL].median / st[C_FLRUN].median;
    double r_commit = st[D_COMMIT].median / st[A_COMMITTXN].median;
    fb_result("ratios (medians)", "acquire+release / (grant + Txn)", r_pair, "x");
    fb_result("ratios (medians)", "acquire / (grant + Txn)", r_acq, "x");
    fb_result("ratios (medians)", "acquire+release / its 4 raw requests", r_four, "x");
    fb_result("ratios (medians)", "commit / raw commit Txn", r_commit, "x");
    fb_result("ratios (medians)", "etcdctl lock / fencelock acquire+release", r_cli, "x");
    fb_result("ratios (medians)", "etcdctl lock / fencelock run (both CLI)", r_cli2, "x");
    fb_note("3 etcd members on loopback; fencelock's handle and the raw requests use m0 "
            "(leader: m%d), each over kept-alive connections; %d interleaved rounds (the "
            "order alternates); CLI cases every %d rounds (%zu runs), timed from fork to "
            "exit; %zu takeovers with a 2 s lease, the lease's end polled every 2 ms",
            leader, done, cli_every, s[C_ETCDCTL].n, tg.n);
    fb_note("fl_release is a Txn and a lease revoke, so acquire+release is four requests: "
            "the target's two (grant + Txn) are what fl_acquire alone needs");
    fb_target("etcd: acquire+release within 1.5x of grant + Txn",
              "acquire+release / (grant + Txn) (median)", r_pair, "x", "<= 1.5", r_pair <= 1.5);
    fb_target("etcd: at least 10x faster than etcdctl lock per acquisition",
              "etcdctl lock / fencelock acquire+release (median)", r_cli, "x", ">= 10",
              r_cli >= 10);

    /* (f) */
    tls_phase(r);

    fl_close(r);
    curl_easy_cleanup(raw.h);
    free(raw.buf);
    ec_stop_all(&c);
    return 0;
}
