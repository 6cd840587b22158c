/* SPDX-License-Identifier: MIT */
/* cluster_harness.c - see cluster_harness.h. */
#include "cluster_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
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

#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

#define EC_READY_MS 30000

/* ---- bookkeeping: every member this process started dies at exit ---- */
static pid_t ec_pids[64];
static int ec_npids;

static void ec_kill_leftovers(void)
{
    for (int i = 0; i < ec_npids; i++)
        if (ec_pids[i] > 0) {
            kill(ec_pids[i], SIGCONT);
            kill(ec_pids[i], SIGKILL);
            waitpid(ec_pids[i], NULL, 0);
        }
}

static void ec_track(pid_t pid)
{
    static bool registered;
    if (!registered) {
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
    fail_msg("no two free loopback ports");
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

static int ec_post_port(int port, const char *path, const char *body, char *out, size_t cap,
                        long timeout_ms)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, ec_curl_init);
    CURL *h = curl_easy_init();
    if (!h)
        return 0;
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    char dummy[1];
    struct ec_buf b = {.p = out ? out : dummy, .n = 0, .cap = out ? cap : sizeof dummy};
    b.p[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ec_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    return (int)status;
}

int ec_post(const ec_cluster *c, int i, const char *path, const char *body, char *out,
            size_t cap)
{
    return ec_post_port(c->m[i].client_port, path, body, out, cap, 5000);
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

static void ec_spawn_member(ec_cluster *c, int i, const char *state)
{
    ec_member *m = &c->m[i];
    char client[64], peer[64];
    snprintf(client, sizeof client, "http://127.0.0.1:%d", m->client_port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", m->peer_port);
    const char *argv[] = {ec_etcd_bin(),
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
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(m->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
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
        if (ec_post_port(c->m[i].client_port, "/v3/kv/range", "{\"key\":\"AA==\"}", out,
                         sizeof out, 2000) == 200)
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
        fail_msg("etcd member %s (client port %d) did not get ready", c->m[i].name,
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

void ec_start(ec_cluster *c, int n)
{
    static int seq;
    assert_true(n >= 1 && n <= EC_MAX_MEMBERS);
    memset(c, 0, sizeof *c);
    c->n = n;
    snprintf(c->token, sizeof c->token, "fltest-%d-%d", (int)getpid(), seq++);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        ec_member *m = &c->m[i];
        snprintf(m->name, sizeof m->name, "m%d", i);
        ec_two_ports(&m->client_port, &m->peer_port);
        off += (size_t)snprintf(c->initial_cluster + off, sizeof c->initial_cluster - off,
                                "%s%s=http://127.0.0.1:%d", i ? "," : "", m->name,
                                m->peer_port);
    }
    ec_new_dirs(c);
    for (int i = 0; i < n; i++)
        ec_spawn_member(c, i, "new");
    for (int i = 0; i < n; i++)
        ec_require_ready(c, i);
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
    assert_true(c->m[i].pid > 0);
    assert_int_equal(kill(c->m[i].pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(c->m[i].pid, 10000));
    c->m[i].paused = true;
}

void ec_resume(ec_cluster *c, int i)
{
    assert_true(c->m[i].pid > 0);
    assert_int_equal(kill(c->m[i].pid, SIGCONT), 0);
    c->m[i].paused = false;
}

void ec_restart(ec_cluster *c, int i)
{
    assert_true(c->m[i].pid == 0);
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

const char *ec_uri(const ec_cluster *c, unsigned which, const char *prefix, char *buf,
                   size_t cap)
{
    size_t off = (size_t)snprintf(buf, cap, "etcd://");
    bool first = true;
    for (int i = 0; i < c->n; i++) {
        if (which && !(which & (1u << i)))
            continue;
        off += (size_t)snprintf(buf + off, cap - off, "%s127.0.0.1:%d", first ? "" : ",",
                                c->m[i].client_port);
        first = false;
    }
    snprintf(buf + off, cap - off, "/%s", prefix);
    return buf;
}

void ec_snapshot_save(const ec_cluster *c, int i, const char *file)
{
    char ep[64], out[4096];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", c->m[i].client_port);
    const char *argv[] = {ec_etcdctl_bin(), "--endpoints", ep, "snapshot", "save", file, NULL};
    int st = ec_run(argv, 30000, out, sizeof out);
    if (st != 0)
        fail_msg("etcdctl snapshot save: status %d: %s", st, out);
}

void ec_snapshot_restore(ec_cluster *c, const char *file)
{
    ec_stop_all(c);
    ec_new_dirs(c);
    for (int i = 0; i < c->n; i++) {
        ec_member *m = &c->m[i];
        char peer[64], out[4096];
        snprintf(peer, sizeof peer, "http://127.0.0.1:%d", m->peer_port);
        const char *argv[] = {ec_etcdctl_bin(), "snapshot", "restore", file,
                              "--name", m->name,
                              "--data-dir", m->data_dir,
                              "--initial-cluster", c->initial_cluster,
                              "--initial-cluster-token", c->token,
                              "--initial-advertise-peer-urls", peer,
                              NULL};
        int st = ec_run(argv, 30000, out, sizeof out);
        if (st != 0)
            fail_msg("etcdctl snapshot restore: status %d: %s", st, out);
    }
    for (int i = 0; i < c->n; i++)
        ec_spawn_member(c, i, "new");
    for (int i = 0; i < c->n; i++)
        ec_require_ready(c, i);
}

/* ---- the fake etcd ---- */

struct ec_fake {
    pthread_t thread;
    int listen_fd;
    int stop_pipe[2];
    ec_fake_fn fn;
    void *arg;
    _Atomic unsigned requests;
    int held[64]; /* connections left unanswered (status -1) */
    int nheld;
};

unsigned ec_fake_requests(const ec_fake *f) { return atomic_load(&((ec_fake *)f)->requests); }

/* Read one HTTP request from fd: path and body; false on EOF or garbage. */
static bool ec_read_request(int fd, char *path, size_t pcap, char **body)
{
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return false;
    char *hdr_end = NULL;
    while (!hdr_end) {
        if (n == cap) {
            free(buf);
            return false;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k <= 0) {
            free(buf);
            return false;
        }
        n += (size_t)k;
        buf[n] = '\0';
        hdr_end = strstr(buf, "\r\n\r\n");
    }
    size_t clen = 0;
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    if (cl)
        clen = strtoul(cl + 17, NULL, 10);
    size_t hlen = (size_t)(hdr_end + 4 - buf);
    if (clen > (1u << 24)) {
        free(buf);
        return false;
    }
    if (hlen + clen > cap) {
        char *p = realloc(buf, hlen + clen + 1);
        if (!p) {
            free(buf);
            return false;
        }
        buf = p;
        cap = hlen + clen;
    }
    while (n < hlen + clen) {
        ssize_t k = read(fd, buf + n, hlen + clen - n);
        if (k <= 0) {
            free(buf);
            return false;
        }
        n += (size_t)k;
    }
    buf[hlen + clen] = '\0';
    if (sscanf(buf, "POST %255s", path) != 1 && sscanf(buf, "GET %255s", path) != 1) {
        free(buf);
        return false;
    }
    (void)pcap;
    *body = strdup(buf + hlen);
    free(buf);
    return *body != NULL;
}

static void *ec_fake_main(void *arg)
{
    ec_fake *f = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = f->listen_fd, .events = POLLIN},
                              {.fd = f->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno == EINTR)
            continue;
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        char path[256];
        char *body = NULL;
        if (!ec_read_request(fd, path, sizeof path, &body)) {
            close(fd);
            continue;
        }
        static char out[1 << 16];
        out[0] = '\0';
        int status = f->fn(f->arg, path, body, out, sizeof out);
        free(body);
        atomic_fetch_add(&f->requests, 1);
        if (status < 0 && f->nheld < 64) {
            f->held[f->nheld++] = fd; /* never answered */
            continue;
        }
        if (status > 0) {
            char head[256];
            int hn = snprintf(head, sizeof head,
                              "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                              "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                              status, strlen(out));
            if (write(fd, head, (size_t)hn) < 0 || write(fd, out, strlen(out)) < 0) {
            }
        }
        close(fd);
    }
    return NULL;
}

ec_fake *ec_fake_start(ec_fake_fn fn, void *arg, int *port)
{
    ec_fake *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->fn = fn;
    f->arg = arg;
    f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->listen_fd, 16), 0);
    socklen_t len = sizeof a;
    getsockname(f->listen_fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    assert_int_equal(pipe2(f->stop_pipe, O_CLOEXEC), 0);
    assert_int_equal(pthread_create(&f->thread, NULL, ec_fake_main, f), 0);
    return f;
}

void ec_fake_stop(ec_fake *f)
{
    if (!f)
        return;
    if (write(f->stop_pipe[1], "x", 1) != 1) {
    }
    pthread_join(f->thread, NULL);
    for (int i = 0; i < f->nheld; i++)
        close(f->held[i]);
    close(f->listen_fd);
    close(f->stop_pipe[0]);
    close(f->stop_pipe[1]);
    free(f);
}

/* ---- agents ---- */

static void ec_agent_answer(int out, int rc, uint64_t token, uint64_t value, uint32_t flags,
                            const char *text)
{
    char buf[512], clean[300];
    snprintf(clean, sizeof clean, "%s", text ? text : "");
    for (char *p = clean; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    snprintf(buf, sizeof buf, "r %d %" PRIu64 " %" PRIu64 " %" PRIu32 " %s", rc, token, value,
             flags, clean);
    th_send(out, buf);
}

static int ec_agent_main(void *arg, int in, int out)
{
    const char *uri = arg;
    fl_region *r = NULL;
    int rc = fl_open(uri, &r);
    char line[1024];
    snprintf(line, sizeof line, "ready %d %s", rc, rc ? fl_last_error() : "");
    th_send(out, line);
    if (rc)
        return 1;
    fl_lease lease;
    memset(&lease, 0, sizeof lease);
    while (th_recv(in, line, sizeof line, 3600 * 1000) == 0) { /* an hour: until told */
        char a1[256] = "", a2[512] = "";
        unsigned long long n1 = 0;
        long long n2 = 0;
        if (sscanf(line, "acq %255s %llu %lld", a1, &n1, &n2) == 3) {
            fl_lease l;
            rc = fl_acquire(r, a1, n1, n2, &l);
            if (rc == 0)
                lease = l;
            ec_agent_answer(out, rc, rc ? 0 : l.token, 0, rc ? 0 : l.flags,
                            rc ? fl_last_error() : "");
        } else if (sscanf(line, "commit %255s %511[^\n]", a1, a2) == 2 ||
                   sscanf(line, "strict %255s %511[^\n]", a1, a2) == 2) {
            uint64_t acc = 0;
            rc = fl_commit(r, &lease, a1, a2, strlen(a2),
                           strncmp(line, "strict", 6) == 0 ? FL_COMMIT_STRICT : 0, &acc);
            ec_agent_answer(out, rc, lease.token, acc, 0, rc ? fl_last_error() : "");
        } else if (sscanf(line, "read %255s", a1) == 1) {
            char buf[256];
            size_t len = 0;
            uint64_t fence = 0;
            rc = fl_read(r, a1, buf, sizeof buf - 1, &len, &fence);
            buf[rc == 0 ? len : 0] = '\0';
            ec_agent_answer(out, rc, 0, fence, 0, rc ? fl_last_error() : buf);
        } else if (sscanf(line, "renew %llu", &n1) == 1) {
            rc = fl_renew(r, &lease, n1);
            ec_agent_answer(out, rc, lease.token, 0, 0, rc ? fl_last_error() : "");
        } else if (strcmp(line, "check") == 0) {
            rc = fl_check(r, &lease);
            ec_agent_answer(out, rc, lease.token, 0, 0, rc ? fl_last_error() : "");
        } else if (strcmp(line, "rel") == 0) {
            rc = fl_release(r, &lease);
            ec_agent_answer(out, rc, lease.token, 0, 0, rc ? fl_last_error() : "");
        } else if (strcmp(line, "exit") == 0) {
            fl_close(r);
            return 0;
        } else {
            ec_agent_answer(out, -EINVAL, 0, 0, 0, "unknown command");
        }
    }
    fl_close(r);
    return 0;
}

void ec_agent_start(ec_agent *a, const char *uri)
{
    /* An agent that died must fail the test with a message, not kill it
     * with SIGPIPE (which would also skip the cleanup at exit). */
    signal(SIGPIPE, SIG_IGN);
    memset(a, 0, sizeof *a);
    assert_int_equal(th_child_start(&a->c, ec_agent_main, (void *)uri), 0);
    char line[1200];
    if (th_recv(a->c.from_child, line, sizeof line, 30000) != 0)
        fail_msg("agent did not report");
    assert_int_equal(sscanf(line, "ready %d", &a->open_rc), 1);
}

void ec_agent_send(ec_agent *a, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    th_send(a->c.to_child, line);
}

int ec_agent_read(ec_agent *a, ec_reply *rp, int timeout_ms)
{
    char line[1024];
    memset(rp, 0, sizeof *rp);
    if (th_recv(a->c.from_child, line, sizeof line, timeout_ms) != 0)
        return -1;
    unsigned long long t = 0, v = 0;
    int pos = 0;
    if (sscanf(line, "r %d %llu %llu %" SCNu32 " %n", &rp->rc, &t, &v, &rp->flags, &pos) < 4)
        return -1;
    rp->token = t;
    rp->value = v;
    snprintf(rp->text, sizeof rp->text, "%s", line + pos);
    return 0;
}

ec_reply ec_agent_do(ec_agent *a, int timeout_ms, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    th_send(a->c.to_child, line);
    ec_reply rp;
    if (ec_agent_read(a, &rp, timeout_ms) != 0)
        fail_msg("agent: no answer to '%s' within %d ms", line, timeout_ms);
    return rp;
}

void ec_agent_stop(ec_agent *a)
{
    if (a->c.pid <= 0)
        return;
    kill(a->c.pid, SIGCONT);
    th_send(a->c.to_child, "exit");
    if (th_child_wait(&a->c, 20000) < 0)
        fail_msg("agent did not exit");
    a->c.pid = 0;
}
