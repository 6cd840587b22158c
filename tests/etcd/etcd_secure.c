/* SPDX-License-Identifier: MIT */
/*
 * etcd_secure.c - fencelock on a secured cluster (TLS and RBAC, the
 * way production clusters run): three members started by the harness with
 * a CA, member and client certificates made by openssl here, client
 * certificates required, auth on, simple tokens that end after 3 s idle.
 *
 *   - every refusal is -EACCES with the reason and the endpoint, before any
 *     token is handed out, and within the request timeout (the next,
 *     silent endpoint is never waited for): a server certificate of another
 *     CA, one the system store does not know, one for another host, no
 *     client certificate, a client certificate with a CommonName, a wrong
 *     password, no user, a user without a role on the prefix;
 *   - the files, the user and the password come from the query, else the
 *     environment; a file that cannot be read is named;
 *   - the password appears in no output: status (text, JSON), metrics,
 *     read, commit, run and the FENCELOCK_REGION it exports, every message;
 *   - a handle, a waiter and a keepalive thread keep working across the
 *     expiry of their tokens;
 *   - a stricter split of roles: workers that may not write PREFIX/epoch,
 *     an operator role that bumps it.
 *
 * I14 (nobody without credentials), I13, I1 (tokens across re-authentication).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cluster_harness.h"

#define S(x) ((uint64_t)(x) * TH_S)
#define TIMEOUT_MS 1500

static ec_cluster cluster;
static char password[64]; /* worker's */

static int setup(void **state)
{
    (void)state;
    ec_start_secure(&cluster, 3);
    FILE *f = fopen(cluster.password_file, "r");
    if (!f || !fgets(password, sizeof password, f))
        fail_msg("read %s", cluster.password_file);
    fclose(f);
    password[strcspn(password, "\n")] = '\0';
    char buf[16];
    snprintf(buf, sizeof buf, "%d", TIMEOUT_MS);
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", buf, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ec_stop_all(&cluster);
    return 0;
}

/* "etcds://[USER@]127.0.0.1:P0,.../PREFIX[?QUERY]"; extra_port > 0 adds an
 * endpoint after the members; query NULL: none. */
static const char *uri_of(char *buf, size_t cap, const char *user, const char *prefix,
                          int extra_port, const char *query)
{
    size_t o = (size_t)snprintf(buf, cap, "etcds://%s%s", user ? user : "", user ? "@" : "");
    for (int i = 0; i < cluster.n; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s127.0.0.1:%d", i ? "," : "",
                              cluster.m[i].client_port);
    if (extra_port > 0)
        o += (size_t)snprintf(buf + o, cap - o, ",127.0.0.1:%d", extra_port);
    snprintf(buf + o, cap - o, "/%s%s%s", prefix, query ? "?" : "", query ? query : "");
    return buf;
}

/* The full query of the worker, with one file replaced when given. */
static const char *query_of(char *buf, size_t cap, const char *ca, const char *cert,
                            const char *key, const char *pwfile)
{
    size_t o = 0;
    buf[0] = '\0';
    if (ca)
        o += (size_t)snprintf(buf + o, cap - o, "cacert=%s&", ca);
    if (cert)
        o += (size_t)snprintf(buf + o, cap - o, "cert=%s&key=%s&", cert, key);
    if (pwfile)
        o += (size_t)snprintf(buf + o, cap - o, "password-file=%s&", pwfile);
    if (o)
        buf[o - 1] = '\0'; /* the last '&' */
    return buf;
}

static int never_answer(void *arg, const char *path, const char *body, char *out, size_t cap)
{
    (void)arg, (void)path, (void)body, (void)out, (void)cap;
    return -1;
}

/* Open uri and expect -EACCES at once, naming an endpoint and saying why;
 * no password in the message. */
static void expect_refused(const char *what, const char *uri, const char *reason)
{
    fl_region *r = NULL;
    uint64_t t0 = th_now_ns();
    int rc = fl_open(uri, &r);
    uint64_t took = th_now_ns() - t0;
    if (rc != -EACCES)
        fail_msg("%s: fl_open = %s (%s), not EACCES", what, fl_err_name(rc), fl_last_error());
    const char *m = fl_last_error();
    char ep[32];
    snprintf(ep, sizeof ep, "127.0.0.1:%d", cluster.m[0].client_port);
    if (!strstr(m, ep) || !strstr(m, reason))
        fail_msg("%s: the message lacks the endpoint %s or '%s': %s", what, ep, reason, m);
    if (strstr(m, password))
        fail_msg("%s: the message shows the password: %s", what, m);
    /* The silent endpoint after the members was never waited for. */
    if (took >= TIMEOUT_MS * TH_MS)
        fail_msg("%s: refused after %" PRIu64 " ms (timeout %d ms)", what, took / TH_MS,
                 TIMEOUT_MS);
}

/* openssl s_server with cert/key on a free loopback port: its pid, *port. */
static pid_t tls_server(const char *cert, const char *key, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    close(fd);
    char accept[32];
    snprintf(accept, sizeof accept, "127.0.0.1:%d", *port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execlp("openssl", "openssl", "s_server", "-accept", accept, "-cert", cert, "-key", key,
               "-quiet", "-www", (char *)NULL);
        _exit(127);
    }
    /* Ready when it accepts a connection (polled: a condition, not a guess). */
    for (int i = 0; i < 500; i++) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        a.sin_port = htons((uint16_t)*port);
        bool ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
        close(s);
        if (ok)
            return pid;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fail_msg("openssl s_server did not start on %s", accept);
    return -1;
}

/* I14 */
static void test_refusals(void **state)
{
    (void)state;
    int silent = 0;
    ec_fake *f = ec_fake_start(never_answer, NULL, &silent);
    char uri[2048], q[1024], path[3][600];
    const char *tmp = th_tmpdir();

    /* A server certificate of another CA. */
    ec_cluster other = cluster; /* its files, for a CA of its own */
    snprintf(other.ca, sizeof other.ca, "%s/other-ca.pem", tmp);
    char otherkey[640];
    snprintf(otherkey, sizeof otherkey, "%s.key", other.ca);
    const char *mkca[] = {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                          "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", otherkey,
                          "-out", other.ca, "-days", "2", "-subj", "/O=another CA", NULL};
    char out[4096];
    assert_int_equal(ec_run(mkca, 30000, out, sizeof out), 0);
    query_of(q, sizeof q, other.ca, cluster.cert, cluster.key, cluster.password_file);
    expect_refused("another CA", uri_of(uri, sizeof uri, EC_WORKER, "ref", silent, q),
                   "certificate");
    /* No cacert: the system store does not know the test's CA. */
    query_of(q, sizeof q, NULL, cluster.cert, cluster.key, cluster.password_file);
    expect_refused("the system store", uri_of(uri, sizeof uri, EC_WORKER, "ref", silent, q),
                   "certificate");
    /* No client certificate: the members demand one. */
    query_of(q, sizeof q, cluster.ca, NULL, NULL, cluster.password_file);
    expect_refused("no client certificate", uri_of(uri, sizeof uri, EC_WORKER, "ref", silent, q),
                   "alert");
    /* A client certificate with a CommonName: etcd's gateway refuses it. */
    snprintf(path[0], sizeof path[0], "%s/cn-client.pem", tmp);
    snprintf(path[1], sizeof path[1], "%s/cn-client.key", tmp);
    ec_tls_issue(&cluster, path[0], path[1], "/CN=" EC_WORKER, "extendedKeyUsage=clientAuth\n");
    query_of(q, sizeof q, cluster.ca, path[0], path[1], cluster.password_file);
    expect_refused("a CN", uri_of(uri, sizeof uri, EC_WORKER, "ref", silent, q), "CommonName");
    /* A wrong password. */
    snprintf(path[2], sizeof path[2], "%s/wrong.pw", tmp);
    FILE *w = fopen(path[2], "w");
    fputs("not-the-password\n", w);
    fclose(w);
    query_of(q, sizeof q, cluster.ca, cluster.cert, cluster.key, path[2]);
    expect_refused("a wrong password", uri_of(uri, sizeof uri, EC_WORKER, "ref", silent, q),
                   "authentication failed");
    /* No user at all. */
    query_of(q, sizeof q, cluster.ca, cluster.cert, cluster.key, NULL);
    expect_refused("no user", uri_of(uri, sizeof uri, NULL, "ref", silent, q),
                   "user name is empty");
    /* A user without a role on the prefix (never granted). */
    query_of(q, sizeof q, cluster.ca, cluster.cert, cluster.key, cluster.password_file);
    expect_refused("no role", uri_of(uri, sizeof uri, EC_WORKER, "ungranted", silent, q),
                   "permission denied");
    /* No refusal handed out anything: nothing exists under these prefixes. */
    assert_int_equal(ec_etcdctl(&cluster, 0, out, sizeof out, "get", "--prefix", "--keys-only",
                                "ref/", NULL), 0);
    assert_string_equal(out, "");
    assert_int_equal(ec_etcdctl(&cluster, 0, out, sizeof out, "get", "--prefix", "--keys-only",
                                "ungranted/", NULL), 0);
    assert_string_equal(out, "");

    /* A server whose certificate (of the right CA) names another host. */
    snprintf(path[0], sizeof path[0], "%s/elsewhere.pem", tmp);
    snprintf(path[1], sizeof path[1], "%s/elsewhere.key", tmp);
    ec_tls_issue(&cluster, path[0], path[1], "/O=elsewhere",
                 "subjectAltName=IP:10.9.9.9,DNS:elsewhere.invalid\n"
                 "extendedKeyUsage=serverAuth\n");
    int port = 0;
    pid_t srv = tls_server(path[0], path[1], &port);
    snprintf(uri, sizeof uri, "etcds://127.0.0.1:%d/ref?cacert=%s", port, cluster.ca);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), -EACCES);
    if (!strstr(fl_last_error(), "subject name"))
        fail_msg("another host's certificate: %s", fl_last_error());
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
    ec_fake_stop(f);
}

/* I14 */
static void test_files_and_environment(void **state)
{
    (void)state;
    char uri[2048], q[1024];
    fl_region *r = NULL;
    /* Everything from the environment. */
    setenv("FENCELOCK_ETCD_CACERT", cluster.ca, 1);
    setenv("FENCELOCK_ETCD_CERT", cluster.cert, 1);
    setenv("FENCELOCK_ETCD_KEY", cluster.key, 1);
    setenv("FENCELOCK_ETCD_USER", EC_WORKER, 1);
    setenv("FENCELOCK_ETCD_PASSWORD", password, 1);
    ec_uri(&cluster, 0, "env", uri, sizeof uri); /* grants env/ */
    uri_of(uri, sizeof uri, NULL, "env", 0, NULL);
    int rc = fl_open(uri, &r);
    if (rc != 0)
        fail_msg("all from the environment: %s: %s", fl_err_name(rc), fl_last_error());
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(10), 0, &l), 0);
    assert_int_equal(fl_commit(r, &l, "rec", "env", 3, 0, NULL), 0);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    /* The password file before the password variable. */
    setenv("FENCELOCK_ETCD_PASSWORD", "wrong", 1);
    setenv("FENCELOCK_ETCD_PASSWORD_FILE", cluster.password_file, 1);
    assert_int_equal(fl_open(uri, &r), 0);
    fl_close(r);
    /* The query before the environment: a wrong CA in the environment. */
    setenv("FENCELOCK_ETCD_CACERT", cluster.cert, 1); /* not a CA */
    assert_int_equal(fl_open(uri, &r), -EACCES);
    query_of(q, sizeof q, cluster.ca, NULL, NULL, NULL);
    uri_of(uri, sizeof uri, NULL, "env", 0, q);
    assert_int_equal(fl_open(uri, &r), 0);
    fl_close(r);
    /* The TLS variables are ignored by a plain etcd:// URI (it has no TLS). */
    /* A file that cannot be read is named, at fl_open. */
    setenv("FENCELOCK_ETCD_CACERT", "/nonexistent/ca.pem", 1);
    uri_of(uri, sizeof uri, NULL, "env", 0, NULL);
    assert_int_equal(fl_open(uri, &r), -ENOENT);
    assert_non_null(strstr(fl_last_error(), "/nonexistent/ca.pem"));
    assert_non_null(strstr(fl_last_error(), "FENCELOCK_ETCD_CACERT"));
    query_of(q, sizeof q, "/nonexistent/q.pem", NULL, NULL, NULL);
    uri_of(uri, sizeof uri, NULL, "env", 0, q);
    assert_int_equal(fl_open(uri, &r), -ENOENT);
    assert_non_null(strstr(fl_last_error(), "cacert="));
    /* A user without any password; a password without a user. */
    unsetenv("FENCELOCK_ETCD_CACERT");
    unsetenv("FENCELOCK_ETCD_PASSWORD_FILE");
    unsetenv("FENCELOCK_ETCD_PASSWORD");
    query_of(q, sizeof q, cluster.ca, NULL, NULL, NULL);
    uri_of(uri, sizeof uri, NULL, "env", 0, q);
    assert_int_equal(fl_open(uri, &r), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "no password"));
    unsetenv("FENCELOCK_ETCD_USER");
    query_of(q, sizeof q, cluster.ca, NULL, NULL, cluster.password_file);
    uri_of(uri, sizeof uri, NULL, "env", 0, q);
    assert_int_equal(fl_open(uri, &r), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "no user"));
    /* A FIFO named as a file: refused at once, never waited on. */
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/a.fifo", th_tmpdir());
    assert_int_equal(mkfifo(fifo, 0600), 0);
    setenv("FENCELOCK_ETCD_USER", EC_WORKER, 1);
    query_of(q, sizeof q, cluster.ca, NULL, NULL, fifo);
    uri_of(uri, sizeof uri, NULL, "env", 0, q);
    uint64_t t0 = th_now_ns();
    assert_int_equal(fl_open(uri, &r), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "not a regular file"));
    query_of(q, sizeof q, fifo, NULL, NULL, cluster.password_file);
    uri_of(uri, sizeof uri, NULL, "env", 0, q);
    assert_int_equal(fl_open(uri, &r), -EINVAL);
    assert_true(th_now_ns() - t0 < S(5));
    unsetenv("FENCELOCK_ETCD_USER");
    unsetenv("FENCELOCK_ETCD_CERT");
    unsetenv("FENCELOCK_ETCD_KEY");
}

/* Run a command; its output must not hold the password. */
static int run_clean(const char *what, const char *const *argv, char *out, size_t cap)
{
    int st = ec_run(argv, 30000, out, cap);
    if (strstr(out, password))
        fail_msg("%s shows the password: %s", what, out);
    return st;
}

/* I14 */
static void test_password_never_shown(void **state)
{
    (void)state;
    char uri[2048], q[1024], out[16384];
    ec_uri(&cluster, 0, "quiet", uri, sizeof uri);
    /* The password from the environment this time (the region string then
     * holds no file name that could lead to it either). */
    setenv("FENCELOCK_ETCD_PASSWORD", password, 1);
    query_of(q, sizeof q, cluster.ca, cluster.cert, cluster.key, NULL);
    uri_of(uri, sizeof uri, EC_WORKER, "quiet", 0, q);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    assert_null(strstr(fl_region_path(r), password));
    assert_null(strstr(fl_last_error(), password));
    fl_lease l;
    assert_int_equal(fl_acquire(r, "held", S(30), 0, &l), 0);
    assert_int_equal(fl_commit(r, &l, "rec", "v", 1, 0, NULL), 0);
    const char *status[] = {FENCELOCK_TOOL_PATH, "status", "--region", uri, NULL};
    assert_int_equal(run_clean("status", status, out, sizeof out), 0);
    assert_non_null(strstr(out, "held"));
    const char *json[] = {FENCELOCK_TOOL_PATH, "status", "--json", "--region", uri, NULL};
    assert_int_equal(run_clean("status --json", json, out, sizeof out), 0);
    const char *metrics[] = {FENCELOCK_TOOL_PATH, "metrics", "--region", uri, NULL};
    assert_int_equal(run_clean("metrics", metrics, out, sizeof out), 0);
    const char *read[] = {FENCELOCK_TOOL_PATH, "read", "--region", uri, "rec", NULL};
    assert_int_equal(run_clean("read", read, out, sizeof out), 0);
    assert_int_equal(fl_release(r, &l), 0);
    /* run: its warnings, and the FENCELOCK_REGION it gives the command. */
    const char *run[] = {FENCELOCK_TOOL_PATH, "run", "--region", uri, "job", "--",
                         "sh", "-c", "echo \"region=$FENCELOCK_REGION\"", NULL};
    assert_int_equal(run_clean("run", run, out, sizeof out), 0);
    assert_non_null(strstr(out, "region=etcds://"));
    /* A command's refusal, and a wrong password. */
    setenv("FENCELOCK_ETCD_PASSWORD", "wrong-password", 1);
    assert_true(run_clean("status, refused", status, out, sizeof out) != 0);
    assert_non_null(strstr(out, "authentication failed"));
    /* A password written into the URI: refused, and never repeated. */
    char with[2400];
    snprintf(with, sizeof with, "etcds://" EC_WORKER ":%s@127.0.0.1:%d/quiet?%s", password,
             cluster.m[0].client_port, q);
    const char *bad[] = {FENCELOCK_TOOL_PATH, "status", "--region", with, NULL};
    assert_int_equal(run_clean("status with a password in the URI", bad, out, sizeof out), 3);
    assert_non_null(strstr(out, "password-file"));
    const char *badrun[] = {FENCELOCK_TOOL_PATH, "run", "--region", with, "job", "--", "true",
                            NULL};
    assert_true(run_clean("run with a password in the URI", badrun, out, sizeof out) != 0);
    const char *epoch[] = {FENCELOCK_TOOL_PATH, "etcd-epoch", "--region", with, NULL};
    assert_int_equal(run_clean("etcd-epoch with a password in the URI", epoch, out, sizeof out),
                     3);
    fl_region *x = NULL;
    assert_int_equal(fl_open(with, &x), -EINVAL);
    assert_null(strstr(fl_last_error(), password));
    /* Written wrongly in every way a hostile review found: a password with
     * '/' '?' '#' '@' in it, a query key Password=, an escaped '=', a
     * scheme with one slash, a leading space.  No command shows it. */
    static const char *const forms[] = {
        "etcds://" EC_WORKER ":%s/x@127.0.0.1:%d/quiet", "etcds://" EC_WORKER ":%s?x@127.0.0.1:%d/quiet",
        "etcds://" EC_WORKER ":%s#x@127.0.0.1:%d/quiet", "etcds://" EC_WORKER ":p@%s@127.0.0.1:%d/quiet",
        "etcds://127.0.0.1:%.0s%d/quiet?Password=%s", "etcds:/" EC_WORKER ":%s@127.0.0.1:%d/quiet",
        " etcds://" EC_WORKER ":%s@127.0.0.1:%d/quiet",
        "etcds://" EC_WORKER ":%s@etcd_1:%d/quiet", "etcds://" EC_WORKER ":%s@127.0.0.1:%d?x=1",
        "etcds://127.0.0.1:%.0s%d/quiet?password=x#%s",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char u[600];
        if (strstr(forms[i], "%.0s"))
            snprintf(u, sizeof u, forms[i], "", cluster.m[0].client_port, password);
        else
            snprintf(u, sizeof u, forms[i], password, cluster.m[0].client_port);
        const char *cmds[][7] = {
            {FENCELOCK_TOOL_PATH, "status", "--region", u, NULL},
            {FENCELOCK_TOOL_PATH, "status", "--json", "--region", u, NULL},
            {FENCELOCK_TOOL_PATH, "metrics", "--region", u, NULL},
            {FENCELOCK_TOOL_PATH, "read", "--region", u, "rec", NULL},
            {FENCELOCK_TOOL_PATH, "etcd-epoch", "--region", u, NULL},
            {FENCELOCK_TOOL_PATH, "run", "--region", u, "k", "--", "true"},
        };
        for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++)
            assert_true(run_clean(u, cmds[k], out, sizeof out) != 0);
        assert_true(fl_open(u, &x) != 0);
        if (strstr(fl_last_error(), password))
            fail_msg("fl_open(%s) shows the password: %s", u, fl_last_error());
    }
    unsetenv("FENCELOCK_ETCD_PASSWORD");
    fl_close(r);
}

/* A probe of token expiry: a token of worker's, never used until asked. */
static bool token_still_valid(const char *token)
{
    char out[2048], body[256];
    snprintf(body, sizeof body, "{\"key\":\"cHJvYmU=\"}");
    char auth[600];
    snprintf(auth, sizeof auth, "Authorization: %s", token);
    /* a range with that token (ec_post sends root's: build the request) */
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "curl -s --http1.1 --cacert '%s' --cert '%s' --key '%s' -H '%s' -d '%s' "
             "https://127.0.0.1:%d/v3/kv/range",
             cluster.ca, cluster.cert, cluster.key, auth, body, cluster.m[0].client_port);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    ec_run(argv, 10000, out, sizeof out);
    return strstr(out, "invalid auth token") == NULL;
}

static void worker_token(char *tok, size_t cap)
{
    char body[256], out[2048];
    snprintf(body, sizeof body, "{\"name\":\"" EC_WORKER "\",\"password\":\"%s\"}", password);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "curl -s --http1.1 --cacert '%s' --cert '%s' --key '%s' -d '%s' "
             "https://127.0.0.1:%d/v3/auth/authenticate",
             cluster.ca, cluster.cert, cluster.key, body, cluster.m[0].client_port);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    assert_int_equal(ec_run(argv, 10000, out, sizeof out), 0);
    const char *t = strstr(out, "\"token\":\"");
    assert_non_null(t);
    t += 9;
    size_t n = strcspn(t, "\"");
    assert_true(n < cap);
    memcpy(tok, t, n);
    tok[n] = '\0';
}

static int lost;
static void on_lost(void *arg, const fl_lease *l, int err)
{
    (void)arg, (void)l;
    lost = err;
}

/* I14 I13 I1 */
static void test_token_expiry(void **state)
{
    (void)state;
    char uri[2048], probe[256];
    ec_uri(&cluster, 0, "expiry", uri, sizeof uri);
    fl_region *h = NULL;
    assert_int_equal(fl_open(uri, &h), 0);
    fl_lease l;
    /* A 15 s lease, kept alive every 5 s: each renewal comes after the
     * 3 s token went idle past its TTL. */
    assert_int_equal(fl_acquire(h, "k", S(15), 0, &l), 0);
    fl_keepalive *k = NULL;
    assert_int_equal(fl_keepalive_start(h, &l, S(15), on_lost, NULL, &k), 0);
    worker_token(probe, sizeof probe);
    /* A waiter in another process, on another member, with a lease of its own
     * renewed every 5 s while it sleeps. */
    char wuri[2048];
    ec_uri(&cluster, EC_ONLY(1), "expiry", wuri, sizeof wuri);
    ec_agent w;
    ec_agent_start(&w, wuri);
    assert_int_equal(w.open_rc, 0);
    ec_agent_send(&w, "acq k %" PRIu64 " %" PRIu64, (uint64_t)S(15), (uint64_t)S(60));
    /* Time passes: two renewals of the holder, two of the waiter, and the
     * probe token, made after the handle's last request, expires. */
    struct timespec ts = {11, 0};
    nanosleep(&ts, NULL);
    assert_false(token_still_valid(probe));
    fl_lease now;
    assert_int_equal(fl_keepalive_status(k, &now), 0);
    assert_int_equal(lost, 0);
    assert_int_equal(fl_check(h, &now), 0);
    assert_int_equal(fl_commit(h, &now, "rec", "held", 4, 0, NULL), 0);
    assert_int_equal(fl_keepalive_stop(k, &now), 0);
    /* The idle handle's token has expired by now too: its release works. */
    nanosleep(&(struct timespec){5, 0}, NULL);
    assert_int_equal(fl_release(h, &now), 0);
    ec_reply rp;
    assert_int_equal(ec_agent_read(&w, &rp, 30000), 0);
    if (rp.rc != 0)
        fail_msg("the waiter: %s: %s", fl_err_name(rp.rc), rp.text);
    assert_true(rp.token > l.token);
    rp = ec_agent_do(&w, 30000, "commit rec waiter");
    assert_int_equal(rp.rc, 0);
    rp = ec_agent_do(&w, 30000, "rel");
    assert_int_equal(rp.rc, 0);
    ec_agent_stop(&w);
    fl_close(h);
}

/* I14: workers that may not write the epoch, an operator that bumps it. */
static void test_stricter_roles(void **state)
{
    (void)state;
    char out[4096], uri[2048], q[1024];
    const char *const setup_cmds[][8] = {
        {"role", "add", "fl-strict-worker", NULL},
        {"role", "grant-permission", "fl-strict-worker", "read", "strict/epoch", NULL},
        {"role", "grant-permission", "--prefix=true", "fl-strict-worker", "readwrite",
         "strict/lock/", NULL},
        {"role", "grant-permission", "--prefix=true", "fl-strict-worker", "readwrite",
         "strict/last/", NULL},
        {"role", "grant-permission", "--prefix=true", "fl-strict-worker", "readwrite",
         "strict/rec/", NULL},
        {"role", "add", "fl-strict-operator", NULL},
        {"role", "grant-permission", "--prefix=true", "fl-strict-operator", "readwrite",
         "strict/", NULL},
    };
    for (size_t i = 0; i < sizeof setup_cmds / sizeof setup_cmds[0]; i++) {
        const char *const *a = setup_cmds[i];
        int st = ec_etcdctl(&cluster, 0, out, sizeof out, a[0], a[1], a[2], a[3], a[4], a[5],
                            a[6], a[7]);
        if (st != 0)
            fail_msg("etcdctl %s %s: %s", a[0], a[1], out);
    }
    char pwarg[96];
    snprintf(pwarg, sizeof pwarg, "--new-user-password=%s", password);
    assert_int_equal(ec_etcdctl(&cluster, 0, out, sizeof out, "user", "add", "strict-w", pwarg,
                                NULL), 0);
    assert_int_equal(ec_etcdctl(&cluster, 0, out, sizeof out, "user", "grant-role", "strict-w",
                                "fl-strict-worker", NULL), 0);
    assert_int_equal(ec_etcdctl(&cluster, 0, out, sizeof out, "user", "add", "strict-op", pwarg,
                                NULL), 0);
    assert_int_equal(ec_etcdctl(&cluster, 0, out, sizeof out, "user", "grant-role", "strict-op",
                                "fl-strict-operator", NULL), 0);
    query_of(q, sizeof q, cluster.ca, cluster.cert, cluster.key, cluster.password_file);
    char op[2048];
    uri_of(uri, sizeof uri, "strict-w", "strict", 0, q);
    uri_of(op, sizeof op, "strict-op", "strict", 0, q);
    /* No epoch yet, and the worker may not create it. */
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), -EACCES);
    assert_non_null(strstr(fl_last_error(), "permission denied"));
    /* The operator makes it (etcd-epoch --bump from nothing: epoch 1). */
    const char *bump[] = {FENCELOCK_TOOL_PATH, "etcd-epoch", "--region", op, "--bump", NULL};
    assert_int_equal(ec_run(bump, 30000, out, sizeof out), 0);
    assert_non_null(strstr(out, "epoch 0 -> 1"));
    /* Now the worker does everything a worker does... */
    assert_int_equal(fl_open(uri, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(10), 0, &l), 0);
    assert_int_equal(fl_commit(r, &l, "rec", "x", 1, 0, NULL), 0);
    assert_int_equal(fl_renew(r, &l, S(5)), 0);
    assert_int_equal(fl_release(r, &l), 0);
    const char *status[] = {FENCELOCK_TOOL_PATH, "status", "--region", uri, NULL};
    assert_int_equal(ec_run(status, 30000, out, sizeof out), 0);
    /* ...but not bump the epoch. */
    const char *wbump[] = {FENCELOCK_TOOL_PATH, "etcd-epoch", "--region", uri, "--bump", NULL};
    assert_int_equal(ec_run(wbump, 30000, out, sizeof out), 1);
    assert_non_null(strstr(out, "permission denied"));
    assert_int_equal(ec_run(bump, 30000, out, sizeof out), 0);
    assert_non_null(strstr(out, "epoch 1 -> 2"));
    assert_int_equal(fl_acquire(r, "k", S(10), 0, &l), 0);
    assert_int_equal(FL_TOKEN_EPOCH(l.token), 2);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
}

/* I14 I13: a member whose certificate does not verify (another host's)
 * fails one call at most: the next starts at the next endpoint.  And the
 * TLS files are read once, at fl_open: replaced afterwards by a FIFO, they
 * never block a handshake. */
static void test_bad_endpoint_and_files_replaced(void **state)
{
    (void)state;
    char path[2][600], ca[600], uri[2048], q[1024];
    const char *tmp = th_tmpdir();
    snprintf(path[0], sizeof path[0], "%s/elsewhere2.pem", tmp);
    snprintf(path[1], sizeof path[1], "%s/elsewhere2.key", tmp);
    ec_tls_issue(&cluster, path[0], path[1], "/O=elsewhere",
                 "subjectAltName=IP:10.9.9.9\nextendedKeyUsage=serverAuth\n");
    int bad = 0;
    pid_t srv = tls_server(path[0], path[1], &bad);
    /* A copy of the CA, to replace later. */
    snprintf(ca, sizeof ca, "%s/ca-copy.pem", tmp);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", cluster.ca, ca);
    const char *cp[] = {"sh", "-c", cmd, NULL};
    assert_int_equal(ec_run(cp, 10000, NULL, 0), 0);
    char grant[1024];
    ec_uri(&cluster, 0, "badep", grant, sizeof grant);
    query_of(q, sizeof q, ca, cluster.cert, cluster.key, cluster.password_file);
    /* A follower first (it will be stopped: the leader stays), the bad
     * endpoint, the leader. */
    int leader = ec_leader(&cluster, 10000);
    assert_true(leader >= 0);
    int f = (leader + 1) % cluster.n;
    snprintf(uri, sizeof uri, "etcds://" EC_WORKER "@127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/badep?%s",
             cluster.m[f].client_port, bad, cluster.m[leader].client_port, q);
    fl_region *r = NULL, *other = NULL;
    assert_int_equal(fl_open(uri, &r), 0); /* on the follower */
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &l), 0);
    /* The follower stops: a read times out there, and the next endpoint
     * refuses the handshake.  That call fails; the next ones go to the
     * leader. */
    ec_pause(&cluster, f);
    char buf[8];
    size_t len;
    uint64_t fence;
    int rc = fl_read(r, "rec", buf, sizeof buf, &len, &fence);
    assert_true(rc == -EACCES || rc == -EHOSTUNREACH || rc == -ENOENT);
    rc = fl_commit(r, &l, "rec", "x", 1, 0, NULL);
    if (rc != 0)
        fail_msg("the commit after a refusing endpoint: %s (%s)", fl_err_name(rc),
                 fl_last_error());
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), 0);
    ec_resume(&cluster, f);
    /* The CA file becomes a FIFO: new connections (a waiter's watch) go on. */
    assert_int_equal(unlink(ca), 0);
    assert_int_equal(mkfifo(ca, 0600), 0);
    ec_uri(&cluster, 0, "badep", grant, sizeof grant);
    assert_int_equal(fl_open(grant, &other), 0);
    fl_lease x;
    assert_int_equal(fl_acquire(other, "held", S(30), 0, &x), 0);
    uint64_t t0 = th_now_ns();
    assert_int_equal(fl_acquire(r, "held", S(5), S(1), &l), -ETIMEDOUT);
    assert_true(th_now_ns() - t0 < S(10));
    assert_int_equal(fl_release(other, &x), 0);
    fl_close(other);
    fl_close(r);
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
}

/* I14: an operator turns authentication off: handles with a token go on,
 * without one (as etcdctl does), their keepalives too. */
static void test_auth_disabled(void **state)
{
    (void)state;
    char uri[2048], out[4096];
    ec_uri(&cluster, 0, "authoff", uri, sizeof uri);
    fl_region *r = NULL;
    assert_int_equal(fl_open(uri, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", S(3), 0, &l), 0);
    fl_keepalive *k = NULL;
    lost = 0;
    assert_int_equal(fl_keepalive_start(r, &l, S(3), on_lost, NULL, &k), 0);
    assert_int_equal(ec_etcdctl(&cluster, 0, out, sizeof out, "auth", "disable", NULL), 0);
    cluster.auth_on = false;
    /* Past two renewals of the keepalive (every second). */
    nanosleep(&(struct timespec){2, 500 * 1000 * 1000}, NULL);
    fl_lease now;
    int rc = fl_keepalive_status(k, &now);
    if (rc != 0)
        fail_msg("the keepalive after auth disable: %s (%s)", fl_err_name(rc), fl_last_error());
    assert_int_equal(fl_commit(r, &now, "rec", "x", 1, 0, NULL), 0);
    assert_int_equal(fl_keepalive_stop(k, &now), 0);
    assert_int_equal(fl_release(r, &now), 0);
    fl_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_files_and_environment),
        cmocka_unit_test(test_password_never_shown),
        cmocka_unit_test(test_token_expiry),
        cmocka_unit_test(test_stricter_roles),
        cmocka_unit_test(test_bad_endpoint_and_files_replaced),
        cmocka_unit_test(test_auth_disabled), /* last: the cluster has no auth after it */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
