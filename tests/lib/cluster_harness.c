/* SPDX-License-Identifier: MIT */
/* cluster_harness.c - see cluster_harness.h: the fake etcd, the agents, and
 * ec_fail() for cmocka tests (the cluster itself is in cluster.c). */
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

void ec_fail(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail_msg("%s", msg);
    abort(); /* not reached: cmocka leaves the test */
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
    bool keepalive; /* answers keep the connection open for the next request */
    int conns[16];  /* kept-alive connections, waiting for their next request */
    int nconns;
};

unsigned ec_fake_requests(const ec_fake *f) { return atomic_load(&((ec_fake *)f)->requests); }

/* The Authorization header of the request the fake (this thread) serves:
 * ec_relay sends it on, so that a relay in front of a cluster with users
 * stays transparent. */
static _Thread_local char ec_cur_auth[2048];

/* Read one HTTP request from fd: path and body (and its Authorization
 * header into ec_cur_auth); false on EOF or garbage. */
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
    ec_cur_auth[0] = '\0';
    const char *au = strcasestr(buf, "\r\nAuthorization:");
    if (au && au < hdr_end) {
        au += 16;
        while (*au == ' ')
            au++;
        size_t an = strcspn(au, "\r\n");
        if (an < sizeof ec_cur_auth)
            snprintf(ec_cur_auth, sizeof ec_cur_auth, "%.*s", (int)an, au);
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

/* Serve one request on fd: true if the connection stays open for another. */
static bool ec_fake_serve(ec_fake *f, int fd)
{
    char path[256];
    char *body = NULL;
    if (!ec_read_request(fd, path, sizeof path, &body))
        return false;
    static char out[1 << 16];
    out[0] = '\0';
    int status = f->fn(f->arg, path, body, out, sizeof out);
    free(body);
    atomic_fetch_add(&f->requests, 1);
    if (status < 0 && f->nheld < 64) {
        f->held[f->nheld++] = fd; /* never answered */
        return true;              /* (not closed: the fd is held) */
    }
    if (status > 0) {
        char head[256];
        int hn = snprintf(head, sizeof head,
                          "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\nConnection: %s\r\n\r\n",
                          status, strlen(out), f->keepalive ? "keep-alive" : "close");
        if (write(fd, head, (size_t)hn) < 0 || write(fd, out, strlen(out)) < 0) {
        }
        if (f->keepalive && f->nconns < 16) {
            f->conns[f->nconns++] = fd;
            return true;
        }
    }
    return false;
}

static void *ec_fake_main(void *arg)
{
    ec_fake *f = arg;
    for (;;) {
        struct pollfd p[2 + 16] = {{.fd = f->listen_fd, .events = POLLIN},
                                   {.fd = f->stop_pipe[0], .events = POLLIN}};
        int n = f->nconns;
        for (int i = 0; i < n; i++)
            p[2 + i] = (struct pollfd){.fd = f->conns[i], .events = POLLIN};
        if (poll(p, (nfds_t)(2 + n), -1) < 0 && errno == EINTR)
            continue;
        if (p[1].revents)
            break;
        /* Kept-alive connections first: take each off the list, serve it. */
        for (int i = n - 1; i >= 0; i--) {
            if (!p[2 + i].revents)
                continue;
            int fd = f->conns[i];
            f->conns[i] = f->conns[--f->nconns];
            if (!ec_fake_serve(f, fd))
                close(fd);
        }
        if (f->listen_fd < 0 || !(p[0].revents & POLLIN))
            continue;
        int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (!ec_fake_serve(f, fd))
            close(fd);
    }
    for (int i = 0; i < f->nconns; i++)
        close(f->conns[i]);
    return NULL;
}

void ec_fake_stop_listening(ec_fake *f)
{
    if (f->listen_fd >= 0)
        close(f->listen_fd);
    f->listen_fd = -1;
}

int ec_relay(int port, const char *path, const char *body, char *out, size_t cap)
{
    out[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return 0;
    }
    size_t blen = strlen(body);
    char head[2600], auth[2100] = "";
    if (ec_cur_auth[0])
        snprintf(auth, sizeof auth, "Authorization: %s\r\n", ec_cur_auth);
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
                      "application/json\r\n%sContent-Length: %zu\r\nConnection: close\r\n\r\n",
                      path, port, auth, blen);
    if (write(fd, head, (size_t)hn) != hn || write(fd, body, blen) != (ssize_t)blen) {
        close(fd);
        return 0;
    }
    /* The whole answer, to EOF (Connection: close). */
    size_t rcap = 1 << 20, n = 0;
    char *buf = malloc(rcap + 1);
    ssize_t k;
    while (buf && n < rcap && (k = read(fd, buf + n, rcap - n)) > 0)
        n += (size_t)k;
    close(fd);
    if (!buf)
        return 0;
    buf[n] = '\0';
    int status = 0;
    const char *start = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || !start) {
        free(buf);
        return 0;
    }
    start += 4;
    /* etcd's gateway may answer chunked: join the chunks. */
    size_t o = 0;
    if (strcasestr(buf, "\r\nTransfer-Encoding: chunked")) {
        for (const char *p = start;;) {
            char *end;
            unsigned long len = strtoul(p, &end, 16);
            if (end == p || len == 0 || strncmp(end, "\r\n", 2) != 0)
                break;
            p = end + 2;
            if ((size_t)(buf + n - p) < len + 2) /* the chunk and its CRLF */
                break;
            size_t take = o + len < cap ? len : cap - 1 - o;
            memcpy(out + o, p, take);
            o += take;
            p += len + 2;
        }
    } else {
        o = strlen(start) < cap ? strlen(start) : cap - 1;
        memcpy(out, start, o);
    }
    out[o] = '\0';
    free(buf);
    return status;
}

static ec_fake *ec_fake_new(ec_fake_fn fn, void *arg, int *port, bool keepalive);

ec_fake *ec_fake_start(ec_fake_fn fn, void *arg, int *port)
{
    return ec_fake_new(fn, arg, port, false);
}

ec_fake *ec_fake_start_keepalive(ec_fake_fn fn, void *arg, int *port)
{
    return ec_fake_new(fn, arg, port, true);
}

static ec_fake *ec_fake_new(ec_fake_fn fn, void *arg, int *port, bool keepalive)
{
    ec_fake *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->keepalive = keepalive;
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
    if (f->listen_fd >= 0)
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

struct ec_agent_arg {
    const char *uri, *netns;
};

static int ec_agent_main(void *arg, int in, int out)
{
    const struct ec_agent_arg *aa = arg;
    const char *uri = aa->uri;
    fl_region *r = NULL;
    int rc = 0;
    if (aa->netns && aa->netns[0] && (rc = ec_netns_enter(aa->netns)) != 0) {
        char line[256];
        snprintf(line, sizeof line, "ready %d cannot enter namespace %s", rc, aa->netns);
        th_send(out, line);
        return 1;
    }
    rc = fl_open(uri, &r);
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
    ec_agent_start_in(a, uri, NULL);
}

void ec_agent_start_in(ec_agent *a, const char *uri, const char *netns)
{
    struct ec_agent_arg aa = {uri, netns}; /* the child gets a copy */
    /* An agent that died must fail the test with a message, not kill it
     * with SIGPIPE (which would also skip the cleanup at exit). */
    signal(SIGPIPE, SIG_IGN);
    memset(a, 0, sizeof *a);
    assert_int_equal(th_child_start(&a->c, ec_agent_main, &aa), 0);
    char line[1200];
    if (th_recv(a->c.from_child, line, sizeof line, 30000) != 0)
        fail_msg("agent did not report");
    assert_int_equal(sscanf(line, "ready %d", &a->open_rc), 1);
}

void ec_agent_send(ec_agent *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    th_vsendf(a->c.to_child, fmt, ap);
    va_end(ap);
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
