/* SPDX-License-Identifier: MIT */
/*
 * etcd_herd.c - question 9 (issues 15 and 28), the herd: what etcd serves
 * per acquisition when many processes wait for one key, counted by etcd
 * itself, with this build's protocol and, in the same run, the protocol
 * before issue 28 (the library of commit fd9933c) beside it.
 *
 * A three-member etcd cluster on loopback (tests/lib/cluster.c).  A phase:
 * N worker processes (this program again, with --worker), each with its own
 * handle on a URI naming the three members (worker i talks to member i mod
 * 3 first, as processes on three hosts would), each warmed up by two
 * acquisitions of the key (a handle's first acquisition of a TTL grants a
 * lease; later ones reuse it), then, at one signal, each loops
 * fl_acquire(FL_WAIT_FOREVER) + fl_release of the one key until the phase's
 * time is up (a waiter already queued then still takes its turn).  The
 * holder checks mutual exclusion and that tokens increase, through a shared
 * file.  Before the signal and after the last worker's last release, every
 * member's GET /metrics on its client port: grpc_server_msg_received_total
 * summed over all methods and members (each request of fencelock, through
 * etcd's JSON gateway, is one gRPC message; a watch created or a keepalive
 * sent is one message of its stream), shown per method too, and
 * grpc_server_msg_sent_total of etcdserverpb.Watch (the watch messages sent
 * back), each divided by the phase's acquisitions.  Nothing else talks to
 * the cluster meanwhile; handles are closed after the second scrape, so
 * fl_close's revokes are not counted.
 *
 * The protocol before issue 28 is the same public API and soname: its
 * workers run with LD_LIBRARY_PATH=DIR, DIR holding the libfencelock.so.0
 * of fd9933c (bench/run builds it once, from git archive, into the build
 * directory: --old-lib DIR).  Each worker reports the library it loaded,
 * and the phase stops if it is not the one asked for.
 *
 * Phases: 16 workers and 1 worker, this build's protocol and the one
 * before, in the order new, old, old, new (the 1-worker phases: what a
 * free key costs in requests).
 */
#include "benchutil.h"
#include "cluster_harness.h"
#include "etcd_raw.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#define HERD_TTL_NS (10 * FB_S)
#define HERD_MAX 64

/* What the workers of a phase share (a file in the work directory). */
struct shared {
    _Atomic int stop;
    _Atomic int inside;            /* holders now: 0 or 1 */
    _Atomic uint64_t last_token;   /* the latest holding's token */
    _Atomic uint64_t acquisitions; /* in the timed phase */
    _Atomic uint64_t violations;   /* two holders at once, or a token not above the last */
};

static struct shared *map_shared(const char *path, bool create)
{
    int fd = open(path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0600);
    if (fd < 0 || (create && ftruncate(fd, sizeof(struct shared)) != 0))
        fb_die("%s: %s", path, strerror(errno));
    void *p = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        fb_die("mmap %s: %s", path, strerror(errno));
    return p;
}

/* ---- the worker ---- */

static int find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libfencelock.so")) {
        char *out = arg;
        if (!realpath(info->dlpi_name, out))
            snprintf(out, PATH_MAX, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

static void say(int fd, const char *fmt, ...)
{
    char line[PATH_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || write(fd, line, (size_t)n) != n)
        _exit(3);
}

#define WORKER_FAIL(...)                                                                      \
    do {                                                                                      \
        say(rep, "E " __VA_ARGS__);                                                           \
        _exit(1);                                                                             \
    } while (0)

/* --worker URI KEY SHARED CMD_FD REPLY_FD */
static int worker(char **argv)
{
    const char *uri = argv[2], *key = argv[3];
    struct shared *sh = map_shared(argv[4], false);
    int cmd = atoi(argv[5]), rep = atoi(argv[6]);
    char lib[PATH_MAX] = "?";
    dl_iterate_phdr(find_lib, lib);
    fl_region *r = NULL;
    if (fl_open(uri, &r) != 0)
        WORKER_FAIL("fl_open %s: %s\n", uri, fl_last_error());
    for (int i = 0; i < 2; i++) { /* warm: the first grants a lease, the second reuses it */
        fl_lease l;
        if (fl_acquire(r, key, HERD_TTL_NS, FL_WAIT_FOREVER, &l) != 0 || fl_release(r, &l) != 0)
            WORKER_FAIL("warm-up: %s\n", fl_last_error());
    }
    say(rep, "R %s\n", lib);
    if (fb_get(cmd) != 'g')
        _exit(0);
    uint64_t n = 0;
    while (!atomic_load(&sh->stop)) {
        fl_lease l;
        if (fl_acquire(r, key, HERD_TTL_NS, FL_WAIT_FOREVER, &l) != 0)
            WORKER_FAIL("acquire: %s\n", fl_last_error());
        if (atomic_fetch_add(&sh->inside, 1) != 0 || l.token <= atomic_load(&sh->last_token))
            atomic_fetch_add(&sh->violations, 1);
        atomic_store(&sh->last_token, l.token);
        atomic_fetch_add(&sh->acquisitions, 1);
        n++;
        atomic_fetch_sub(&sh->inside, 1);
        if (fl_release(r, &l) != 0)
            WORKER_FAIL("release: %s\n", fl_last_error());
    }
    say(rep, "D %" PRIu64 "\n", n);
    if (fb_get(cmd) != 'x')
        _exit(0);
    fl_close(r);
    return 0;
}

/* ---- the driver ---- */

struct proc {
    pid_t pid;
    int cmd, rep;
    char buf[PATH_MAX + 128];
    size_t n;
};

/* The next line from p (without its newline), waiting up to ms. */
static const char *read_line(struct proc *p, int ms)
{
    uint64_t end = fb_now_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->n);
        if (nl) {
            static char line[sizeof p->buf];
            size_t len = (size_t)(nl - p->buf);
            memcpy(line, p->buf, len);
            line[len] = '\0';
            memmove(p->buf, nl + 1, p->n - len - 1);
            p->n -= len + 1;
            if (line[0] == 'E')
                fb_die("herd worker %d: %s", (int)p->pid, line + 2);
            return line;
        }
        uint64_t now = fb_now_ns();
        if (now >= end || p->n == sizeof p->buf)
            fb_die("herd worker %d did not answer in %d ms", (int)p->pid, ms);
        struct pollfd pf = {p->rep, POLLIN, 0};
        if (poll(&pf, 1, (int)((end - now) / 1000000u) + 1) < 0 && errno != EINTR)
            fb_die("poll: %s", strerror(errno));
        if (pf.revents) {
            ssize_t k = read(p->rep, p->buf + p->n, sizeof p->buf - p->n);
            if (k <= 0)
                fb_die("herd worker %d exited", (int)p->pid);
            p->n += (size_t)k;
        }
    }
}

struct phase {
    const char *proto; /* "new" or "old" */
    int nproc;
    double acquisitions, seconds, violations;
    fbm_counts counted; /* etcd's counts over the phase's runs, summed */
};

/* Etcd's URI for worker i: all three members, member i mod 3 first. */
static void worker_uri(const ec_cluster *c, int i, const char *prefix, char *buf, size_t cap)
{
    size_t off = (size_t)snprintf(buf, cap, "etcd://");
    for (int k = 0; k < c->n; k++) {
        const ec_member *m = &c->m[(i + k) % c->n];
        off += (size_t)snprintf(buf + off, cap - off, "%s%s:%d", k ? "," : "", m->host,
                                m->client_port);
    }
    snprintf(buf + off, cap - off, "/%s", prefix);
}

static void run_phase(const ec_cluster *c, struct phase *ph, const char *old_lib, double secs,
                      int seq, char *lib_seen, size_t lib_cap)
{
    char path[PATH_MAX], prefix[64], self[PATH_MAX];
    snprintf(path, sizeof path, "%s", fb_path("herd.shared"));
    struct shared *sh = map_shared(path, true);
    snprintf(prefix, sizeof prefix, "herd-%s-%d-%d", ph->proto, ph->nproc, seq);
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0)
        fb_die("readlink /proc/self/exe: %s", strerror(errno));
    self[sl] = '\0';
    bool old = strcmp(ph->proto, "old") == 0;
    struct proc p[HERD_MAX];
    for (int i = 0; i < ph->nproc; i++) {
        int cmd[2], rep[2];
        if (pipe(cmd) != 0 || pipe(rep) != 0)
            fb_die("pipe: %s", strerror(errno));
        char uri[1024], cfd[16], rfd[16];
        worker_uri(c, i, prefix, uri, sizeof uri);
        snprintf(cfd, sizeof cfd, "%d", cmd[0]);
        snprintf(rfd, sizeof rfd, "%d", rep[1]);
        pid_t pid = fb_fork();
        if (pid < 0)
            fb_die("fork: %s", strerror(errno));
        if (pid == 0) {
            close(cmd[1]);
            close(rep[0]);
            if (old)
                setenv("LD_LIBRARY_PATH", old_lib, 1);
            else
                unsetenv("LD_LIBRARY_PATH"); /* the build's, by the program's RUNPATH */
            char *const av[] = {self, "--worker", uri, "key", path, cfd, rfd, NULL};
            execv(self, av);
            _exit(127);
        }
        close(cmd[0]);
        close(rep[1]);
        p[i] = (struct proc){.pid = pid, .cmd = cmd[1], .rep = rep[0]};
    }
    for (int i = 0; i < ph->nproc; i++) {
        const char *line = read_line(&p[i], 120000);
        if (line[0] != 'R')
            fb_die("herd worker %d: %s", (int)p[i].pid, line);
        const char *lib = line + 2;
        bool in_old = strncmp(lib, old_lib ? old_lib : "", old_lib ? strlen(old_lib) : 0) == 0;
        if (old != (old_lib && in_old))
            fb_die("herd worker %d of the %s protocol loaded %s", (int)p[i].pid, ph->proto, lib);
        snprintf(lib_seen, lib_cap, "%s", lib);
    }
    fbm_counts before, after, delta;
    fbm_scrape(c, &before);
    uint64_t t0 = fb_now_ns();
    for (int i = 0; i < ph->nproc; i++)
        fb_put(p[i].cmd, 'g');
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&sh->stop, 1);
    uint64_t counted = 0;
    for (int i = 0; i < ph->nproc; i++) {
        const char *line = read_line(&p[i], 120000);
        if (line[0] != 'D')
            fb_die("herd worker %d: %s", (int)p[i].pid, line);
        counted += strtoull(line + 2, NULL, 10);
    }
    uint64_t t1 = fb_now_ns();
    fbm_scrape(c, &after);
    fbm_per(&before, &after, 1, &delta);
    fbm_add(&ph->counted, &delta);
    for (int i = 0; i < ph->nproc; i++) {
        fb_put(p[i].cmd, 'x');
        int st = 0;
        waitpid(p[i].pid, &st, 0);
        close(p[i].cmd);
        close(p[i].rep);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fb_die("herd worker %d exited with status 0x%x", (int)p[i].pid, st);
    }
    if (counted != atomic_load(&sh->acquisitions))
        fb_die("herd: workers counted %" PRIu64 " acquisitions, the shared count is %" PRIu64,
               counted, atomic_load(&sh->acquisitions));
    ph->acquisitions += (double)counted;
    ph->seconds += (double)(t1 - t0) / 1e9;
    ph->violations += (double)atomic_load(&sh->violations);
    munmap(sh, sizeof *sh);
    unlink(path);
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--worker") == 0)
        return worker(argv);
    /* --old-lib DIR: the library before issue 28 (not a common option). */
    const char *old_lib = NULL;
    char old_real[PATH_MAX];
    int k = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--old-lib") == 0 && i + 1 < argc)
            old_lib = argv[++i];
        else
            argv[k++] = argv[i];
    }
    argc = k;
    argv[argc] = NULL;
    fb_init(argc, argv, 9, "etcd_herd");
    if (old_lib) {
        if (!realpath(old_lib, old_real))
            fb_die("--old-lib %s: %s", old_lib, strerror(errno));
        old_lib = old_real;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    ec_cluster c;
    ec_start(&c, 3);
    int leader = ec_leader(&c, 10000);
    fb_log("etcd: 3 members on loopback (leader m%d)", leader);

    /* new, old, old, new for each size; the phase length from the budget. */
    enum { NEW16, OLD16, NEW1, OLD1, NPH };
    struct phase ph[NPH] = {
        [NEW16] = {.proto = "new", .nproc = 16}, [OLD16] = {.proto = "old", .nproc = 16},
        [NEW1] = {.proto = "new", .nproc = 1},   [OLD1] = {.proto = "old", .nproc = 1},
    };
    static const int order[] = {NEW16, OLD16, OLD16, NEW16, NEW1, OLD1, OLD1, NEW1};
    int nsteps = sizeof order / sizeof order[0];
    double herd_s = fb_opt.full ? 8 : 2.5, one_s = fb_opt.full ? 3 : 1;
    char lib_new[PATH_MAX] = "", lib_old[PATH_MAX] = "";
    for (int s = 0; s < nsteps; s++) {
        struct phase *p = &ph[order[s]];
        bool is_old = strcmp(p->proto, "old") == 0;
        if (is_old && !old_lib)
            continue;
        double secs = p->nproc > 1 ? herd_s : one_s;
        /* a phase takes its time plus about 4 s to start, warm and stop */
        if (fb_budget_left() < secs + 6) {
            fb_log("budget: phase %d (%s, %d processes) not run", s, p->proto, p->nproc);
            continue;
        }
        fb_log("phase %d: %s protocol, %d processes, %.1f s", s, p->proto, p->nproc, secs);
        run_phase(&c, p, old_lib, secs, s, is_old ? lib_old : lib_new, PATH_MAX);
    }

    static const char *const names[NPH] = {
        [NEW16] = "herd: 16 processes on one key (issue 28's protocol)",
        [OLD16] = "herd: 16 processes on one key (before issue 28: fd9933c)",
        [NEW1] = "herd: 1 process: a free key (issue 28's protocol)",
        [OLD1] = "herd: 1 process: a free key (before issue 28: fd9933c)",
    };
    fbm_counts per[NPH];
    for (int i = 0; i < NPH; i++) {
        if (ph[i].acquisitions <= 0)
            continue;
        fbm_counts none = {0};
        fbm_per(&none, &ph[i].counted, ph[i].acquisitions, &per[i]);
        fb_result(names[i], "acquisitions", ph[i].acquisitions, "ops");
        fb_result(names[i], "acquisitions/s", ph[i].acquisitions / ph[i].seconds, "1/s");
        fb_result(names[i], "requests/acq.", per[i].received, "n");
        double other = per[i].received;
        for (int m = 0; m < FBM_NMETHODS; m++) {
            char metric[64];
            snprintf(metric, sizeof metric, "%s/acq.", fbm_method_names[m]);
            fb_result(names[i], metric, per[i].received_by[m], "n");
            other -= per[i].received_by[m];
        }
        fb_result(names[i], "other/acq.", other, "n");
        fb_result(names[i], "watch msgs sent/acq.", per[i].watch_sent, "n");
        fb_result(names[i], "exclusion violations", ph[i].violations, "ops");
    }
    if (ph[NEW16].acquisitions > 0 && ph[OLD16].acquisitions > 0) {
        fb_result("16 processes: requests/acq. before issue 28 / with it", "ratio",
                  per[OLD16].received / per[NEW16].received, "x");
        fb_result("16 processes: watch msgs sent/acq. before issue 28 / with it", "ratio",
                  per[OLD16].watch_sent / per[NEW16].watch_sent, "x");
        fb_result("16 processes: acquisitions/s with issue 28 / before it", "ratio",
                  (ph[NEW16].acquisitions / ph[NEW16].seconds) /
                      (ph[OLD16].acquisitions / ph[OLD16].seconds),
                  "x");
    }
    fb_note("herd: a phase is N processes, each with its own handle warmed by two "
            "acquisitions, looping fl_acquire(FL_WAIT_FOREVER) + fl_release of one key (lease "
            "10 s) for %.1f s (16 processes) or %.1f s (1), a waiter queued at the end still "
            "taking its turn; per acquisition: etcd's grpc_server_msg_received_total (all "
            "methods, all 3 members, GET /metrics before the start and after the last "
            "release) and grpc_server_msg_sent_total of etcdserverpb.Watch; Watch/acq. is "
            "watches created; phases in the order new, old, old, new, summed",
            herd_s, one_s);
    if (old_lib)
        fb_note("herd: issue 28's protocol is %s; the protocol before it is %s (the library "
                "of fd9933c, loaded by LD_LIBRARY_PATH)",
                lib_new, lib_old);
    else
        fb_note("herd: the protocol before issue 28 was not run (no --old-lib DIR: bench/run "
                "builds the library of fd9933c from git archive)");
    if (ph[NEW16].acquisitions > 0) {
        double rq = per[NEW16].received, ws = per[NEW16].watch_sent;
        fb_target("etcd: with 16 waiters on one key at most 3 etcd requests per acquisition",
                  "16 processes: requests/acq. (all methods)", rq, "n", "<= 3", rq <= 3);
        fb_target("etcd: with 16 waiters on one key at most 3 watch messages per acquisition",
                  "16 processes: watch msgs sent/acq.", ws, "n", "<= 3", ws <= 3);
    }
    if (ph[NEW16].violations + ph[OLD16].violations + ph[NEW1].violations + ph[OLD1].violations)
        fb_die("herd: mutual exclusion or token order violated (see the results)");
    ec_stop_all(&c);
    return 0;
}
