/* SPDX-License-Identifier: MIT */
/* benchutil.c - see benchutil.h. */
#include "benchutil.h"
#include "proc_stat.h"

#include "fencelock.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FENCELOCKD_PATH
#define FENCELOCKD_PATH "fencelockd"
#endif

struct fb_opts fb_opt;
static int question;
static const char *prog;
static uint64_t start_ns;
static char own_dir[256];
static pid_t own_pid;
static FILE *csv;

static void cleanup_dir(void)
{
    if (own_dir[0] && getpid() == own_pid) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", own_dir);
        if (system(cmd) != 0) { /* best effort */
        }
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [--quick|--full] [--dir DIR] [--csv FILE] [--raw DIR] [--budget S]\n"
            "          [--fencelockd PATH] [--sqlite-dir DIR] [--disk-dir DIR] [--huge-pages]\n"
            "Benchmark question %d of bench/ (see docs/benchmarks.md); appends CSV rows\n"
            "kind,question,case,metric,value,unit,target,verdict.\n",
            prog, question);
}

void fb_init(int argc, char **argv, int q, const char *name)
{
    question = q;
    prog = name;
    fb_ncpu(); /* remember the CPUs before anybody pins */
    start_ns = fb_now_ns();
    fb_opt.fencelockd = FENCELOCKD_PATH;
    static const struct option longopts[] = {
        {"quick", no_argument, NULL, 'q'},       {"full", no_argument, NULL, 'f'},
        {"dir", required_argument, NULL, 'd'},   {"csv", required_argument, NULL, 'c'},
        {"raw", required_argument, NULL, 'r'},   {"budget", required_argument, NULL, 'b'},
        {"fencelockd", required_argument, NULL, 'F'},
        {"sqlite-dir", required_argument, NULL, 's'},
        {"disk-dir", required_argument, NULL, 'D'},
        {"huge-pages", no_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'q': fb_opt.full = false; break;
        case 'f': fb_opt.full = true; break;
        case 'd': fb_opt.dir = optarg; break;
        case 'c': fb_opt.csv = optarg; break;
        case 'r': fb_opt.raw = optarg; break;
        case 'b': fb_opt.budget_s = atof(optarg); break;
        case 'F': fb_opt.fencelockd = optarg; break;
        case 's': fb_opt.sqlite_dir = optarg; break;
        case 'D': fb_opt.disk_dir = optarg; break;
        case 'H': fb_opt.huge_pages = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc) {
        usage(stderr);
        exit(2);
    }
    if (!fb_opt.dir) {
        snprintf(own_dir, sizeof own_dir, "/dev/shm/flbench.XXXXXX");
        if (!mkdtemp(own_dir)) {
            snprintf(own_dir, sizeof own_dir, "/tmp/flbench.XXXXXX");
            if (!mkdtemp(own_dir))
                fb_die("mkdtemp: %s", strerror(errno));
        }
        own_pid = getpid();
        atexit(cleanup_dir);
        fb_opt.dir = own_dir;
    }
    if (fb_opt.csv) {
        csv = fopen(fb_opt.csv, "a");
        if (!csv)
            fb_die("%s: %s", fb_opt.csv, strerror(errno));
    } else {
        csv = stdout;
    }
    setvbuf(csv, NULL, _IOLBF, 0);
    if (fb_opt.raw)
        mkdir(fb_opt.raw, 0755);
}

double fb_budget_left(void)
{
    if (fb_opt.budget_s <= 0)
        return 1e9;
    return fb_opt.budget_s - (double)(fb_now_ns() - start_ns) / 1e9;
}

const char *fb_path(const char *name)
{
    static _Thread_local char buf[8][600];
    static _Thread_local int next;
    char *b = buf[next++ % 8];
    snprintf(b, 600, "%s/%s", fb_opt.dir, name);
    return b;
}

/* CSV fields hold no commas or newlines. */
static void field(FILE *f, const char *s)
{
    for (; s && *s; s++)
        fputc(*s == ',' ? ';' : (*s == '\n' ? ' ' : *s), f);
}

static void row(const char *kind, const char *cse, const char *metric, double value,
                const char *unit, const char *target, const char *verdict)
{
    fprintf(csv, "%s,%d,", kind, question);
    field(csv, cse);
    fputc(',', csv);
    field(csv, metric);
    fputc(',', csv);
    if (isnan(value))
        fputs("nan", csv);
    else
        fprintf(csv, "%.6g", value);
    fputc(',', csv);
    field(csv, unit);
    fputc(',', csv);
    field(csv, target);
    fputc(',', csv);
    field(csv, verdict);
    fputc('\n', csv);
    fflush(csv);
}

void fb_result(const char *cse, const char *metric, double value, const char *unit)
{
    row("result", cse, metric, value, unit, "", "");
    fb_log("%-44s %-14s %12.6g %s", cse, metric, value, unit);
}

void fb_result_stats(const char *cse, const fb_stats *st, const char *unit)
{
    fb_result(cse, "median", st->median, unit);
    fb_result(cse, "p99", st->p99, unit);
}

void fb_target(const char *target, const char *measured, double value, const char *unit,
               const char *limit, bool pass)
{
    row("target", target, measured, value, unit, limit, pass ? "PASS" : "MISS");
    fb_log("TARGET %s: %s = %.4g %s (%s) %s", target, measured, value, unit, limit,
           pass ? "PASS" : "MISS");
}

void fb_note(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    row("note", buf, "", NAN, "", "", "");
    fb_log("note: %s", buf);
}

void *fb_raw_open(const char *name)
{
    if (!fb_opt.raw)
        return NULL;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", fb_opt.raw, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fb_log("cannot write %s: %s", path, strerror(errno));
    return f;
}

void fb_raw_cdf(const char *name, fb_samples *s)
{
    if (!fb_opt.raw || s->n == 0)
        return;
    char fname[300];
    snprintf(fname, sizeof fname, "%s.dat", name);
    FILE *f = fb_raw_open(fname);
    if (!f)
        return;
    fb_quantile(s, 0.5); /* sorts */
    size_t points = s->n < 400 ? s->n : 400;
    for (size_t i = 0; i < points; i++) {
        /* denser toward the tail: quantiles 1 - 10^-x */
        double q = points == 1 ? 1.0 : (double)i / (double)(points - 1);
        double qq = q < 0.9 ? q : 0.9 + 0.1 * (1 - pow(10.0, -3.0 * (q - 0.9) / 0.1)) / 0.999;
        fprintf(f, "%.6g %.6g\n", fb_quantile(s, qq), qq);
    }
    fclose(f);
}

int fb_daemon_start(fb_daemon *d, const char *region, const char *const *extra, int timeout_s)
{
    memset(d, 0, sizeof *d);
    snprintf(d->region, sizeof d->region, "%s", region);
    static int seq;
    char sock[600];
    snprintf(sock, sizeof sock, "%s/notify.%d.%d", fb_opt.dir, (int)getpid(), seq++);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(sock) >= sizeof addr.sun_path) {
        fb_log("notify socket path too long: %s", sock);
        return -1;
    }
    memcpy(addr.sun_path, sock, strlen(sock) + 1);
    unlink(sock);
    int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (nfd < 0 || bind(nfd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        fb_log("notify socket: %s", strerror(errno));
        return -1;
    }
    char log[600], state[600];
    snprintf(log, sizeof log, "%s.log", region);
    snprintf(state, sizeof state, "%s.state", region);
    pid_t pid = fb_fork();
    if (pid < 0)
        fb_die("fork: %s", strerror(errno));
    if (pid == 0) {
        fb_unpin(); /* the supervisor runs wherever the scheduler likes */
        int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (lfd >= 0)
            dup2(lfd, 2);
        setenv("NOTIFY_SOCKET", sock, 1);
        const char *argv[40] = {fb_opt.fencelockd, "--region", region, "--state", state};
        int n = 5;
        for (int i = 0; extra && extra[i] && n < 38; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(fb_opt.fencelockd, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", fb_opt.fencelockd, strerror(errno));
        _exit(127);
    }
    d->pid = pid;
    uint64_t deadline = fb_now_ns() + (uint64_t)timeout_s * FB_S;
    int rc = -1;
    while (fb_now_ns() < deadline) {
        struct pollfd p = {.fd = nfd, .events = POLLIN};
        if (poll(&p, 1, 100) > 0) {
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
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            d->pid = 0;
            fb_log("fencelockd exited before READY=1; see %s", log);
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

void fb_daemon_stop(fb_daemon *d)
{
    if (d->pid <= 0)
        return;
    kill(d->pid, SIGTERM);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
}

void fb_region_remove(const char *region)
{
    static const char *const suffix[] = {"", ".log", ".state", ".sock", ".lock"};
    char p[600];
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        snprintf(p, sizeof p, "%s%s", region, suffix[i]);
        unlink(p);
    }
}

void *fb_shared(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        fb_die("mmap %zu bytes: %s", bytes, strerror(errno));
    return p;
}

void fb_unshare(void *p, size_t bytes) { munmap(p, bytes); }

pid_t fb_fork(void)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        own_dir[0] = '\0'; /* only the parent removes its work directory */
    }
    return pid;
}

char fb_proc_state(pid_t pid)
{
    struct th_proc_stat st;
    return th_proc_stat_read(pid, &st) == 0 ? st.state : '?';
}

void fb_self_rss(uint64_t *rss, uint64_t *shmem)
{
    *rss = *shmem = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    unsigned long long v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %llu kB", &v) == 1)
            *rss = v * 1024;
        else if (sscanf(line, "RssShmem: %llu kB", &v) == 1)
            *shmem = v * 1024;
    }
    fclose(f);
}

uint64_t fb_pmd_mapped(const char *path)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return 0;
    char line[1024];
    bool ours = false;
    unsigned long long kb = 0, v;
    size_t m = strlen(path);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
            line[strcspn(line, "\n")] = '\0';
            size_t n = strlen(line);
            ours = n >= m && strcmp(line + n - m, path) == 0;
            continue;
        }
        if (ours && (sscanf(line, "ShmemPmdMapped: %llu kB", &v) == 1 ||
                     sscanf(line, "FilePmdMapped: %llu kB", &v) == 1))
            kb += v;
    }
    fclose(f);
    return kb * 1024;
}

struct fl_region *fb_open(const char *region, bool need_registered)
{
    fl_region *r;
    int err = fl_open(region, &r);
    if (err)
        fb_die("fl_open %s: %s (%s)", region, fl_strerror(err), fl_last_error());
    if (need_registered && !fl_region_registered(r))
        fb_die("fl_open %s: not registered with fencelockd", region);
    return r;
}

void fb_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog ? prog : "bench");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void fb_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%6.2f s] %s: ", (double)(fb_now_ns() - start_ns) / 1e9, prog ? prog : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void fb_put(int fd, char c)
{
    if (write(fd, &c, 1) != 1)
        _exit(9);
}

int fb_get(int fd)
{
    char c;
    return read(fd, &c, 1) == 1 ? c : -1;
}
