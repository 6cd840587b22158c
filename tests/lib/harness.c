/* SPDX-License-Identifier: MIT */
/* harness.c - see harness.h. */
#include "harness.h"
#include "proc_stat.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];
static pid_t tmp_owner;

static void th_cleanup(void)
{
    if (tmpdir[0] && getpid() == tmp_owner) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) { /* best effort */
        }
    }
}

const char *th_tmpdir(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/fltest.XXXXXX");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            abort();
        }
        tmp_owner = getpid();
        atexit(th_cleanup);
    }
    return tmpdir;
}

const char *th_path(const char *name)
{
    static _Thread_local char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", th_tmpdir(), name);
    return buf;
}

uint64_t th_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int remaining_ms(uint64_t deadline)
{
    uint64_t now = th_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now) / 1000000 + 1);
}

static int daemon_start(th_daemon *d, const char *region, const char *const *extra,
                        const struct rlimit *nofile)
{
    memset(d, 0, sizeof *d);
    snprintf(d->region, sizeof d->region, "%s", region);
    /* Our own notify socket: fencelockd sends READY=1 to it. */
    static int seq;
    char sock[600];
    snprintf(sock, sizeof sock, "%s/notify.%d.%d", th_tmpdir(), (int)getpid(), seq++);
    int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(sock) >= sizeof addr.sun_path) {
        fprintf(stderr, "harness: notify socket path too long: %s\n", sock);
        return -1;
    }
    memcpy(addr.sun_path, sock, strlen(sock) + 1);
    unlink(sock);
    if (nfd < 0 || bind(nfd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("notify socket");
        return -1;
    }
    char log[600];
    snprintf(log, sizeof log, "%s.log", region);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        if (nofile && setrlimit(RLIMIT_NOFILE, nofile) != 0) {
            perror("setrlimit RLIMIT_NOFILE");
            _exit(127);
        }
        int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (lfd >= 0)
            dup2(lfd, 2);
        setenv("NOTIFY_SOCKET", sock, 1);
        /* The durable state file goes beside the region, not under /var/lib,
         * unless the test names one. */
        char state[600];
        snprintf(state, sizeof state, "%s.state", region);
        const char *argv[34] = {FENCELOCKD_PATH, "--region", region};
        int n = 3;
        bool has_state = false;
        for (int i = 0; extra && extra[i] && n < 31; i++) {
            has_state |= strcmp(extra[i], "--state") == 0;
            argv[n++] = extra[i];
        }
        if (!has_state) {
            argv[n++] = "--state";
            argv[n++] = state;
        }
        argv[n] = NULL;
        execv(FENCELOCKD_PATH, (char *const *)argv);
        perror("exec fencelockd");
        _exit(127);
    }
    d->pid = pid;
    uint64_t deadline = th_now_ns() + 20 * TH_S;
    int rc = -1;
    for (;;) {
        struct pollfd p = {.fd = nfd, .events = POLLIN};
        int ms = remaining_ms(deadline);
        if (ms == 0)
            break;
        if (poll(&p, 1, ms > 200 ? 200 : ms) > 0) {
            char buf[256];
            ssize_t n = recv(nfd, buf, sizeof buf - 1, 0);
            if (n > 0) {
                buf[n] = '\0';
                if (strstr(buf, "READY=1")) {
                    rc = 0;
                    break;
                }
            }
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            d->pid = 0;
            break;
        }
    }
    close(nfd);
    unlink(sock);
    if (rc != 0 && d->pid) {
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
    }
    return rc;
}

int th_daemon_start(th_daemon *d, const char *region, const char *const *extra)
{
    return daemon_start(d, region, extra, NULL);
}

int th_daemon_start_nofile(th_daemon *d, const char *region, const char *const *extra,
                           unsigned long soft, unsigned long hard)
{
    struct rlimit rl = {.rlim_cur = soft, .rlim_max = hard};
    return daemon_start(d, region, extra, &rl);
}

int th_daemon_stop(th_daemon *d, int sig)
{
    if (d->pid <= 0)
        return -1;
    kill(d->pid, sig);
    int st = -1;
    waitpid(d->pid, &st, 0);
    d->pid = 0;
    return st;
}

int th_daemon_log_count(const th_daemon *d, const char *needle)
{
    char log[600];
    snprintf(log, sizeof log, "%s.log", d->region);
    FILE *f = fopen(log, "r");
    if (!f)
        return 0;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

bool th_daemon_log_wait(const th_daemon *d, const char *needle, int n, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    while (th_daemon_log_count(d, needle) < n) {
        if (th_now_ns() >= deadline)
            return false;
        usleep(2000); /* polling a file the daemon appends to; not a race */
    }
    return true;
}

int th_child_start(th_child *c, th_child_fn fn, void *arg)
{
    int down[2], up[2];
    if (pipe2(down, O_CLOEXEC) != 0 || pipe2(up, O_CLOEXEC) != 0)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        close(down[1]);
        close(up[0]);
        _exit(fn(arg, down[0], up[1]));
    }
    close(down[0]);
    close(up[1]);
    c->pid = pid;
    c->to_child = down[1];
    c->from_child = up[0];
    return 0;
}

void th_send(int fd, const char *line)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s\n", line);
    if (write(fd, buf, (size_t)n) != n) { /* the reader checks */
    }
}

void th_vsendf(int fd, const char *fmt, va_list ap)
{
    char line[1000]; /* th_send's buffer holds it and the newline */
    vsnprintf(line, sizeof line, fmt, ap);
    th_send(fd, line);
}

void th_sendf(int fd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    th_vsendf(fd, fmt, ap);
    va_end(ap);
}

int th_recv(int fd, char *buf, size_t cap, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ms = remaining_ms(deadline);
        if (ms == 0 || poll(&p, 1, ms) <= 0)
            return -1;
        char ch;
        ssize_t r = read(fd, &ch, 1);
        if (r <= 0)
            return -1;
        if (ch == '\n') {
            buf[n] = '\0';
            return 0;
        }
        buf[n++] = ch;
    }
    buf[n] = '\0';
    return 0;
}

void th_expect(int fd, const char *want, int timeout_ms)
{
    char buf[1024];
    if (th_recv(fd, buf, sizeof buf, timeout_ms) != 0) {
        fprintf(stderr, "harness: expected '%s', got nothing within %d ms\n", want, timeout_ms);
        abort();
    }
    if (strcmp(buf, want) != 0) {
        fprintf(stderr, "harness: expected '%s', got '%s'\n", want, buf);
        abort();
    }
}

int th_child_wait(th_child *c, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    int st;
    for (;;) {
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid)
            break;
        if (th_now_ns() >= deadline) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            st = -1;
            break;
        }
        usleep(1000); /* waiting for an exit; the deadline only bounds a failure */
    }
    close(c->to_child);
    close(c->from_child);
    return st;
}

char th_proc_state(pid_t pid)
{
    struct th_proc_stat st;
    return th_proc_stat_read(pid, &st) == 0 ? st.state : '?';
}

bool th_wait_state(pid_t pid, const char *states, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    while (!strchr(states, th_proc_state(pid))) {
        if (th_now_ns() >= deadline)
            return false;
        usleep(1000); /* polling /proc for a state change; the deadline bounds a failure */
    }
    return true;
}

bool th_wait_stopped(pid_t pid, int timeout_ms) { return th_wait_state(pid, "Tt", timeout_ms); }

uint64_t th_cpu_ticks(pid_t pid)
{
    struct th_proc_stat st;
    return th_proc_stat_read(pid, &st) == 0 ? st.utime + st.stime : 0;
}
