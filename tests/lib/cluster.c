/* SPDX-License-Identifier: MIT */
/* cluster.c - real etcd members for the etcd backend's tests and
 * benchmarks: see cluster_harness.h (the network namespaces they may run
 * in: cluster_netns.c).  No cmocka here (the benchmarks link it too,
 * fl_testlib_etcd): a failure of the harness goes to ec_fail(), which each
 * program defines (cluster_harness.c: the test fails; bench/etcd.c: the
 * benchmark dies with the message). */
#include "cluster_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#define EC_READY_MS 30000

/* ---- bookkeeping: every member this process started dies at exit ---- */
static pid_t ec_pids[64];
static int ec_npids;

static pid_t ec_owner; /* the process that started the members */

void ec_kill_leftovers(void)
{
    if (getpid() != ec_owner)
        return; /* a forked child that called exit(): not its members */
    for (int i = 0; i < ec_npids; i++)
        if (ec_pids[i] > 0) {
            kill(ec_pids[i], SIGCONT);
            kill(ec_pids[i], SIGKILL);
            waitpid(ec_pids[i], NULL, 0);
            ec_pids[i] = 0;
        }
}

static void ec_track(pid_t pid)
{
    static bool registered;
    if (!registered) {
        ec_owner = getpid();
        atexit(ec_kill_leftovers);
        registered = true;
    }
    for (int i = 0; i < ec_npids; i++)
        if (ec_pids[i] == 0) {
            ec_pids[i] = pid;
            return;
        }
    if (ec_npids < (int)(sizeof ec_pids / sizeof ec_pids[0]))
        ec_pids[ec_npids++] = pid;
}

static void ec_untrack(pid_t pid)
{
    for (int i = 0; i < ec_npids; i++)
        if (ec_pids[i] == pid)
            ec_pids[i] = 0;
}

static const char *ec_etcd_bin(void)
{
    const char *b = getenv("FL_ETCD_BIN");
    return b && *b ? b : "etcd";
}

static const char *ec_etcdctl_bin(void)
{
    const char *b = getenv("FL_ETCDCTL_BIN");
    return b && *b ? b : "etcdctl";
}

/* ---- ports ---- */

static bool ec_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Two free ports, from a range of this process's own (see the header). */
static void ec_two_ports(int *a, int *b)
{
    static int next;
    if (!next)
        next = 21000 + (int)(getpid() % 900) * 12;
    for (int tries = 0; tries < 2000; tries++) {
        int p = next;
        next += 2;
        if (next >= 32700)
            next = 21000;
        if (ec_port_free(p) && ec_port_free(p + 1)) {
            *a = p;
            *b = p + 1;
            return;
        }
    }
    ec_fail("no two free loopback ports");
}

/* ---- HTTP ---- */

struct ec_buf {
    char *p;
    size_t n, cap;
};

static size_t ec_write(char *d, size_t size, size_t nmemb, void *arg)
{
    struct ec_buf *b = arg;
    size_t n = size * nmemb;
    size_t take = b->n + n < b->cap ? n : (b->cap > b->n ? b->cap - b->n - 1 : 0);
    if (take) {
        memcpy(b->p + b->n, d, take);
        b->n += take;
        b->p[b->n] = '\0';
    }
    return n;
}

static void ec_curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* One POST to host:port (a GET when body is NULL); on a secured cluster
 * over TLS with the client's files, and with auth (a token in an
 * "Authorization:" line) if not NULL. */
static int ec_post_raw(const ec_cluster *c, const char *host, int port, const char *path,
                       const char *body, const char *auth, char *out, size_t cap,
                       long timeout_ms)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, ec_curl_init);
    CURL *h = curl_easy_init();
    if (!h)
        return 0;
    bool tls = c && c->secure;
    char url[256];
    snprintf(url, sizeof url, "%s://%s:%d%s", tls ? "https" : "http", host, port, path);
    char dummy[1];
    struct ec_buf b = {.p = out ? out : dummy, .n = 0, .cap = out ? cap : sizeof dummy};
    b.p[0] = '\0';
    struct curl_slist *hdrs = auth ? curl_slist_append(NULL, auth) : NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    else
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ec_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    if (hdrs)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (tls) {
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
    }
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    return (int)status;
}

/* root's token on a secured cluster with auth on (NULL otherwise), cached
 * per cluster; again asks for a new one. */
static const char *ec_root_auth(const ec_cluster *c, const char *host, int port, bool again)
{
    static char line[512], owner[64];
    if (!c || !c->auth_on)
        return NULL;
    if (!again && line[0] && strcmp(owner, c->token) == 0)
        return line;
    char body[128], out[1024];
    snprintf(body, sizeof body, "{\"name\":\"root\",\"password\":\"%s\"}", c->root_password);
    line[0] = '\0';
    if (ec_post_raw(c, host, port, "/v3/auth/authenticate", body, NULL, out, sizeof out, 5000) !=
        200)
        return NULL;
    json_t *j = json_loads(out, 0, NULL);
    const char *t = json_string_value(json_object_get(j, "token"));
    if (t)
        snprintf(line, sizeof line, "Authorization: %s", t);
    json_decref(j);
    snprintf(owner, sizeof owner, "%s", c->token);
    return line[0] ? line : NULL;
}

static int ec_post_port(const ec_cluster *c, const char *host, int port, const char *path,
                        const char *body, char *out, size_t cap, long timeout_ms)
{
    const char *auth = ec_root_auth(c, host, port, false);
    char mine[1 << 12];
    char *o = out ? out : mine;
    size_t oc = out ? cap : sizeof mine;
    int st = ec_post_raw(c, host, port, path, body, auth, o, oc, timeout_ms);
    /* The token expired, or names a raft index this member has not reached
     * (after a restore it waits until the timeout): another. */
    if (c && c->auth_on && st != 200 && (st == 0 || strstr(o, "auth token"))) {
        auth = ec_root_auth(c, host, port, true);
        st = ec_post_raw(c, host, port, path, body, auth, o, oc, timeout_ms);
    }
    return st;
}

int ec_post(const ec_cluster *c, int i, const char *path, const char *body, char *out,
            size_t cap)
{
    return ec_post_port(c, c->m[i].host, c->m[i].client_port, path, body, out, cap, 5000);
}

/* ---- Prometheus metrics ---- */

/* True when the series' labels (the text between its braces, or "" for a
 * series without labels) hold the matcher m (`label="value"`), or, for
 * `label!="value"`, do not. */
static bool ec_label_match(const char *labels, size_t len, const char *m, size_t mlen)
{
    const char *neq = memchr(m, '!', mlen);
    char want[256];
    if (mlen >= sizeof want)
        return false;
    if (neq && neq + 1 < m + mlen && neq[1] == '=') {
        /* label!="value": absent as label="value" */
        size_t k = (size_t)(neq - m);
        snprintf(want, sizeof want, "%.*s%.*s", (int)k, m, (int)(mlen - k - 1), neq + 1);
    } else {
        snprintf(want, sizeof want, "%.*s", (int)mlen, m);
        neq = NULL;
    }
    size_t wl = strlen(want);
    bool found = false;
    for (size_t at = 0; at + wl <= len && !found; at++)
        found = (at == 0 || labels[at - 1] == ',') && memcmp(labels + at, want, wl) == 0 &&
                (at + wl == len || labels[at + wl] == ',');
    return neq ? !found : found;
}

/* The sum of metric name's series in a Prometheus text exposition whose
 * labels match every matcher of filter (see ec_metric). */
static double ec_metric_parse(const char *text, const char *name, const char *filter)
{
    size_t nl = strlen(name);
    double sum = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > nl && memcmp(line, name, nl) == 0 && (line[nl] == '{' || line[nl] == ' ')) {
            const char *labels = "", *value = line + nl;
            size_t llen = 0;
            if (line[nl] == '{') {
                labels = line + nl + 1;
                const char *close = memchr(labels, '}', len - nl - 1);
                if (!close)
                    goto next;
                llen = (size_t)(close - labels);
                value = close + 1;
            }
            bool ok = true;
            for (const char *f = filter ? filter : ""; ok && *f;) {
                /* matchers are separated by commas outside the quotes */
                const char *q = f;
                bool quoted = false;
                while (*q && (quoted || *q != ',')) {
                    if (*q == '"')
                        quoted = !quoted;
                    q++;
                }
                ok = ec_label_match(labels, llen, f, (size_t)(q - f));
                f = *q ? q + 1 : q;
            }
            if (ok)
                sum += strtod(value, NULL);
        }
    next:
        line = end ? end + 1 : NULL;
    }
    return sum;
}

double ec_metric(const ec_cluster *c, int i, const char *name, const char *filter)
{
    size_t cap = 4u << 20;
    char *out = malloc(cap);
    if (!out)
        ec_fail("ec_metric: out of memory");
    int st = ec_post_raw(c, c->m[i].host, c->m[i].client_port, "/metrics", NULL, NULL, out, cap,
                         5000);
    if (st != 200) {
        free(out);
        ec_fail("GET /metrics of member %s (%s:%d): HTTP status %d", c->m[i].name, c->m[i].host,
                c->m[i].client_port, st);
    }
    double v = ec_metric_parse(out, name, filter);
    free(out);
    return v;
}

double ec_metric_sum(const ec_cluster *c, const char *name, const char *filter)
{
    double sum = 0;
    for (int i = 0; i < c->n; i++)
        if (c->m[i].pid > 0 && !c->m[i].paused)
            sum += ec_metric(c, i, name, filter);
    return sum;
}

/* ---- processes ---- */

static void ec_log_tail(const char *path)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "tail -n 30 '%s' >&2", path);
    if (system(cmd) != 0) { /* best effort */
    }
}

int ec_run(const char *const *argv, int timeout_ms, char *out, size_t cap)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (out) {
            dup2(pfd[1], 1);
            dup2(pfd[1], 2);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t n = 0;
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    bool timed_out = false;
    for (;;) {
        uint64_t now = th_now_ns();
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        int rc = poll(&p, 1, (int)((deadline - now) / TH_MS) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            continue;
        char buf[4096];
        ssize_t k = read(pfd[0], buf, sizeof buf);
        if (k <= 0)
            break;
        if (out && cap) {
            size_t take = (size_t)k < cap - 1 - n ? (size_t)k : cap - 1 - n;
            memcpy(out + n, buf, take);
            n += take;
        }
    }
    close(pfd[0]);
    if (out && cap)
        out[n] = '\0';
    if (timed_out)
        kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    if (timed_out || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static const char *ec_scheme(const ec_cluster *c) { return c->secure ? "https" : "http"; }

/* Member i's certificate and key (a secured cluster). */
static void ec_member_files(const ec_cluster *c, int i, char *cert, char *key, size_t cap)
{
    snprintf(cert, cap, "%s/%s.%s.pem", th_tmpdir(), c->token, c->m[i].name);
    snprintf(key, cap, "%s/%s.%s.key", th_tmpdir(), c->token, c->m[i].name);
}

static void ec_spawn_member(ec_cluster *c, int i, const char *state)
{
    ec_member *m = &c->m[i];
    char client[64], peer[64], cert[700], key[700], ttl[16];
    snprintf(client, sizeof client, "%s://%s:%d", ec_scheme(c), m->host, m->client_port);
    snprintf(peer, sizeof peer, "%s://%s:%d", ec_scheme(c), m->host, m->peer_port);
    ec_member_files(c, i, cert, key, sizeof cert);
    snprintf(ttl, sizeof ttl, "%d", EC_AUTH_TTL_S);
    const char *argv[40] = {ec_etcd_bin(),
                            "--name", m->name,
                            "--data-dir", m->data_dir,
                            "--listen-client-urls", client,
                            "--advertise-client-urls", client,
                            "--listen-peer-urls", peer,
                            "--initial-advertise-peer-urls", peer,
                            "--initial-cluster", c->initial_cluster,
                            "--initial-cluster-token", c->token,
                            "--initial-cluster-state", state,
                            NULL};
    if (c->secure) {
        /* TLS to clients and between members, each side verifying the
         * other's certificate against the test's CA. */
        const char *tls[] = {"--cert-file", cert, "--key-file", key,
                             "--trusted-ca-file", c->ca, "--client-cert-auth",
                             "--peer-cert-file", cert, "--peer-key-file", key,
                             "--peer-trusted-ca-file", c->ca, "--peer-client-cert-auth",
                             "--auth-token-ttl", ttl, NULL};
        int n = 0;
        while (argv[n])
            n++;
        for (int k = 0; tls[k]; k++)
            argv[n++] = tls[k];
        argv[n] = NULL;
    }
    /* A member in a network namespace: the child joins it before exec. */
    int nsfd = -1;
    if (m->netns[0]) {
        char path[64];
        snprintf(path, sizeof path, "/run/netns/%s", m->netns);
        nsfd = open(path, O_RDONLY | O_CLOEXEC);
        if (nsfd < 0)
            ec_fail("open %s: %s", path, strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0)
        ec_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) != 0)
            _exit(126);
        int fd = open(m->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (nsfd >= 0)
        close(nsfd);
    m->pid = pid;
    m->paused = false;
    ec_track(pid);
}

bool ec_wait_ready(const ec_cluster *c, int i, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    do {
        char out[512];
        if (c->m[i].pid > 0) {
            int st = 0;
            if (waitpid(c->m[i].pid, &st, WNOHANG) == c->m[i].pid) {
                ec_untrack(c->m[i].pid);
                ((ec_cluster *)c)->m[i].pid = 0;
                return false; /* it exited */
            }
        }
        if (ec_post_port(c, c->m[i].host, c->m[i].client_port, "/v3/kv/range",
                         "{\"key\":\"AA==\"}", out, sizeof out, 2000) == 200)
            return true;
        struct timespec ts = {0, 20 * 1000 * 1000}; /* polling a condition */
        nanosleep(&ts, NULL);
    } while (th_now_ns() < deadline);
    return false;
}

static void ec_require_ready(ec_cluster *c, int i)
{
    if (!ec_wait_ready(c, i, EC_READY_MS)) {
        ec_log_tail(c->m[i].log_path);
        ec_fail("etcd member %s (client %s:%d) did not get ready", c->m[i].name, c->m[i].host,
                c->m[i].client_port);
    }
}

static void ec_new_dirs(ec_cluster *c)
{
    c->generation++;
    char token[sizeof c->token]; /* copied: the member is inside c too */
    memcpy(token, c->token, sizeof token);
    for (int i = 0; i < c->n; i++) {
        ec_member *m = &c->m[i];
        char name[sizeof m->name];
        memcpy(name, m->name, sizeof name);
        snprintf(m->data_dir, sizeof m->data_dir, "%s/%s.%s.g%d", th_tmpdir(), token, name,
                 c->generation);
        snprintf(m->log_path, sizeof m->log_path, "%s/%s.%s.log", th_tmpdir(), token, name);
    }
}

bool ec_secure_wanted(void)
{
    const char *v = getenv("FL_ETCD_SECURE");
    return v && strcmp(v, "1") == 0;
}

void ec_start(ec_cluster *c, int n)
{
    ec_start_on(c, n, NULL, NULL);
}

/* Run openssl with the arguments (NULL-terminated); fail the test if it fails. */
static void ec_openssl(const char *first, ...)
{
    const char *argv[40] = {"openssl", first};
    int n = 2;
    va_list ap;
    va_start(ap, first);
    for (const char *a; n < 39 && (a = va_arg(ap, const char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char out[4096];
    if (ec_run(argv, 30000, out, sizeof out) != 0)
        ec_fail("openssl %s: %s", first, out);
}

static void ec_write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        ec_fail("write %s: %s", path, strerror(errno));
    close(fd);
}

void ec_tls_issue(const ec_cluster *c, const char *cert, const char *key, const char *subj,
                  const char *ext)
{
    char csr[700], extfile[700], cakey[700];
    snprintf(csr, sizeof csr, "%s.csr", cert);
    snprintf(extfile, sizeof extfile, "%s.ext", cert);
    snprintf(cakey, sizeof cakey, "%s.key", c->ca);
    ec_write_file(extfile, ext, 0600);
    ec_openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
               "-nodes", "-keyout", key, "-out", csr, "-subj", subj, NULL);
    ec_openssl("x509", "-req", "-in", csr, "-CA", c->ca, "-CAkey", cakey, "-CAcreateserial",
               "-days", "2", "-out", cert, "-extfile", extfile, NULL);
}

/* The CA, a certificate per member (its address as an IP SAN; for TLS to
 * clients and peers), the client's certificate, and worker's password. */
static void ec_make_tls(ec_cluster *c)
{
    snprintf(c->ca, sizeof c->ca, "%s/%s.ca.pem", th_tmpdir(), c->token);
    snprintf(c->cert, sizeof c->cert, "%s/%s.client.pem", th_tmpdir(), c->token);
    snprintf(c->key, sizeof c->key, "%s/%s.client.key", th_tmpdir(), c->token);
    snprintf(c->password_file, sizeof c->password_file, "%s/%s.worker.pw", th_tmpdir(),
             c->token);
    char cakey[700];
    snprintf(cakey, sizeof cakey, "%s.key", c->ca);
    ec_openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
               "-nodes", "-keyout", cakey, "-out", c->ca, "-days", "2", "-subj",
               "/O=fencelock test CA", NULL);
    for (int i = 0; i < c->n; i++) {
        char cert[700], key[700], ext[256];
        ec_member_files(c, i, cert, key, sizeof cert);
        snprintf(ext, sizeof ext,
                 "subjectAltName=IP:%s,DNS:localhost\n"
                 "extendedKeyUsage=serverAuth,clientAuth\n", c->m[i].host);
        ec_tls_issue(c, cert, key, "/O=fencelock test member", ext);
    }
    ec_tls_issue(c, c->cert, c->key, "/O=fencelock test client", "extendedKeyUsage=clientAuth\n");
    /* Passwords of the test's own: not secrets, but each cluster its own. */
    snprintf(c->root_password, sizeof c->root_password, "root-%08x", (unsigned)rand());
    char pw[64];
    snprintf(pw, sizeof pw, "worker-%08x\n", (unsigned)rand());
    ec_write_file(c->password_file, pw, 0600);
}

/* Users, the worker's role (granted prefixes by ec_uri), auth on. */
void ec_enable_auth(ec_cluster *c)
{
    if (!c->password_file[0]) { /* a plain cluster: passwords of its own */
        snprintf(c->password_file, sizeof c->password_file, "%s/%s.worker.pw", th_tmpdir(),
                 c->token);
        snprintf(c->root_password, sizeof c->root_password, "root-%08x", (unsigned)rand());
        char pw[64];
        snprintf(pw, sizeof pw, "worker-%08x\n", (unsigned)rand());
        ec_write_file(c->password_file, pw, 0600);
    }
    char out[4096], pw[64] = "";
    FILE *f = fopen(c->password_file, "r");
    if (!f || !fgets(pw, sizeof pw, f))
        ec_fail("read %s", c->password_file);
    fclose(f);
    pw[strcspn(pw, "\n")] = '\0';
    char rootpw[96], workerpw[96];
    snprintf(rootpw, sizeof rootpw, "--new-user-password=%s", c->root_password);
    snprintf(workerpw, sizeof workerpw, "--new-user-password=%s", pw);
#define EC_CTL(...)                                                                           \
    do {                                                                                      \
        if (ec_etcdctl(c, 0, out, sizeof out, __VA_ARGS__, NULL) != 0)                        \
            ec_fail("etcdctl: %s", out);                                                      \
    } while (0)
    EC_CTL("user", "add", "root", rootpw);
    EC_CTL("user", "grant-role", "root", "root");
    EC_CTL("role", "add", EC_ROLE);
    EC_CTL("user", "add", EC_WORKER, workerpw);
    EC_CTL("user", "grant-role", EC_WORKER, EC_ROLE);
    EC_CTL("auth", "enable");
#undef EC_CTL
    c->auth_on = true;
}

static void ec_start_mode(ec_cluster *c, int n, const char *const *hosts,
                          const char *const *netns, bool secure)
{
    static int seq;
    if (n < 1 || n > EC_MAX_MEMBERS)
        ec_fail("ec_start: %d members", n);
    memset(c, 0, sizeof *c);
    c->n = n;
    c->secure = secure;
    snprintf(c->token, sizeof c->token, "fltest-%d-%d", (int)getpid(), seq++);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        ec_member *m = &c->m[i];
        snprintf(m->name, sizeof m->name, "m%d", i);
        snprintf(m->host, sizeof m->host, "%s", hosts && hosts[i] ? hosts[i] : "127.0.0.1");
        snprintf(m->netns, sizeof m->netns, "%s", netns && netns[i] ? netns[i] : "");
        ec_two_ports(&m->client_port, &m->peer_port);
        off += (size_t)snprintf(c->initial_cluster + off, sizeof c->initial_cluster - off,
                                "%s%s=%s://%s:%d", i ? "," : "", m->name, ec_scheme(c),
                                m->host, m->peer_port);
    }
    if (secure)
        ec_make_tls(c);
    ec_new_dirs(c);
    for (int i = 0; i < n; i++)
        ec_spawn_member(c, i, "new");
    for (int i = 0; i < n; i++)
        ec_require_ready(c, i);
    if (secure)
        ec_enable_auth(c);
}

void ec_start_on(ec_cluster *c, int n, const char *const *hosts, const char *const *netns)
{
    ec_start_mode(c, n, hosts, netns, ec_secure_wanted());
}

void ec_start_secure(ec_cluster *c, int n)
{
    ec_start_mode(c, n, NULL, NULL, true);
}

int ec_etcdctl(const ec_cluster *c, int i, char *out, size_t cap, ...)
{
    char ep[128], user[64];
    snprintf(ep, sizeof ep, "%s://%s:%d", ec_scheme(c), c->m[i].host, c->m[i].client_port);
    const char *argv[40] = {ec_etcdctl_bin(), "--endpoints", ep};
    int n = 3;
    if (c->secure) {
        argv[n++] = "--cacert";
        argv[n++] = c->ca;
        argv[n++] = "--cert";
        argv[n++] = c->cert;
        argv[n++] = "--key";
        argv[n++] = c->key;
    }
    if (c->auth_on) {
        snprintf(user, sizeof user, "--user=root:%s", c->root_password);
        argv[n++] = user;
    }
    va_list ap;
    va_start(ap, cap);
    for (const char *a; n < 39 && (a = va_arg(ap, const char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char dummy[4096];
    return ec_run(argv, 30000, out ? out : dummy, out ? cap : sizeof dummy);
}

void ec_kill(ec_cluster *c, int i, int sig)
{
    ec_member *m = &c->m[i];
    if (m->pid <= 0)
        return;
    if (m->paused && sig != SIGKILL)
        kill(m->pid, SIGCONT);
    kill(m->pid, sig);
    waitpid(m->pid, NULL, 0);
    ec_untrack(m->pid);
    m->pid = 0;
    m->paused = false;
}

void ec_stop_all(ec_cluster *c)
{
    for (int i = 0; i < c->n; i++)
        ec_kill(c, i, SIGKILL);
}

void ec_pause(ec_cluster *c, int i)
{
    if (c->m[i].pid <= 0 || kill(c->m[i].pid, SIGSTOP) != 0 ||
        !th_wait_stopped(c->m[i].pid, 10000))
        ec_fail("member %s could not be stopped (SIGSTOP)", c->m[i].name);
    c->m[i].paused = true;
}

void ec_resume(ec_cluster *c, int i)
{
    if (c->m[i].pid <= 0 || kill(c->m[i].pid, SIGCONT) != 0)
        ec_fail("member %s could not be continued (SIGCONT)", c->m[i].name);
    c->m[i].paused = false;
}

void ec_restart(ec_cluster *c, int i)
{
    if (c->m[i].pid != 0)
        ec_fail("ec_restart: member %s still runs", c->m[i].name);
    ec_spawn_member(c, i, "existing");
    ec_require_ready(c, i);
}

int ec_leader(const ec_cluster *c, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    do {
        for (int i = 0; i < c->n; i++) {
            if (c->m[i].pid <= 0 || c->m[i].paused)
                continue;
            char out[2048];
            if (ec_post(c, i, "/v3/maintenance/status", "{}", out, sizeof out) != 200)
                continue;
            json_t *j = json_loads(out, 0, NULL);
            json_t *hdr = json_object_get(j, "header");
            const char *me = json_string_value(json_object_get(hdr, "member_id"));
            const char *leader = json_string_value(json_object_get(j, "leader"));
            bool is = me && leader && strcmp(me, leader) == 0;
            json_decref(j);
            if (is)
                return i;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    } while (th_now_ns() < deadline);
    return -1;
}

/* Grant worker's role read-write on prefix/ (a secured cluster), once. */
static void ec_grant(ec_cluster *c, const char *prefix)
{
    for (int i = 0; i < c->nprefixes; i++)
        if (strcmp(c->prefixes[i], prefix) == 0)
            return;
    char key[80], out[4096];
    snprintf(key, sizeof key, "%s/", prefix);
    int alive = 0;
    while (alive < c->n && (c->m[alive].pid <= 0 || c->m[alive].paused))
        alive++;
    if (alive == c->n || ec_etcdctl(c, alive, out, sizeof out, "role", "grant-permission",
                                    "--prefix=true", EC_ROLE, "readwrite", key, NULL) != 0)
        ec_fail("granting %s read-write on %s: %s", EC_ROLE, key, alive == c->n ? "" : out);
    if (c->nprefixes < (int)(sizeof c->prefixes / sizeof c->prefixes[0]))
        snprintf(c->prefixes[c->nprefixes++], sizeof c->prefixes[0], "%s", prefix);
}

const char *ec_uri(ec_cluster *c, unsigned which, const char *prefix, char *buf, size_t cap)
{
    if (c->auth_on)
        ec_grant(c, prefix);
    size_t off = (size_t)snprintf(buf, cap, c->secure ? "etcds://" EC_WORKER "@" : "etcd://");
    bool first = true;
    for (int i = 0; i < c->n; i++) {
        if (which && !(which & (1u << i)))
            continue;
        off += (size_t)snprintf(buf + off, cap - off, "%s%s:%d", first ? "" : ",",
                                c->m[i].host, c->m[i].client_port);
        first = false;
    }
    off += (size_t)snprintf(buf + off, cap - off, "/%s", prefix);
    if (c->secure)
        snprintf(buf + off, cap - off, "?cacert=%s&cert=%s&key=%s&password-file=%s", c->ca,
                 c->cert, c->key, c->password_file);
    return buf;
}

void ec_snapshot_save(const ec_cluster *c, int i, const char *file)
{
    char out[4096];
    int st = ec_etcdctl(c, i, out, sizeof out, "snapshot", "save", file, NULL);
    if (st != 0)
        ec_fail("etcdctl snapshot save: status %d: %s", st, out);
}

void ec_snapshot_restore(ec_cluster *c, const char *file)
{
    ec_stop_all(c);
    ec_new_dirs(c);
    for (int i = 0; i < c->n; i++) {
        ec_member *m = &c->m[i];
        char peer[64], out[4096];
        snprintf(peer, sizeof peer, "%s://%s:%d", ec_scheme(c), m->host, m->peer_port);
        const char *argv[] = {ec_etcdctl_bin(), "snapshot", "restore", file,
                              "--name", m->name,
                              "--data-dir", m->data_dir,
                              "--initial-cluster", c->initial_cluster,
                              "--initial-cluster-token", c->token,
                              "--initial-advertise-peer-urls", peer,
                              NULL};
        int st = ec_run(argv, 30000, out, sizeof out);
        if (st != 0)
            ec_fail("etcdctl snapshot restore: status %d: %s", st, out);
    }
    for (int i = 0; i < c->n; i++)
        ec_spawn_member(c, i, "new");
    for (int i = 0; i < c->n; i++)
        ec_require_ready(c, i);
}
