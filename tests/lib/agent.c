/* SPDX-License-Identifier: MIT */
/* agent.c - see agent.h. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

/* ---- the agent process ---- */

#define AG_LEASES 16

struct ag_lease {
    char name[32];
    bool used;
    fl_lease lease;
};

static volatile sig_atomic_t ag_sigusr1;

static void ag_on_sigusr1(int sig)
{
    (void)sig;
    ag_sigusr1++;
}

static struct ag_lease *ag_find(struct ag_lease *t, const char *name, bool create)
{
    for (int i = 0; i < AG_LEASES; i++)
        if (t[i].used && strcmp(t[i].name, name) == 0)
            return &t[i];
    if (!create)
        return NULL;
    for (int i = 0; i < AG_LEASES; i++)
        if (!t[i].used) {
            t[i].used = true;
            snprintf(t[i].name, sizeof t[i].name, "%s", name);
            memset(&t[i].lease, 0, sizeof t[i].lease);
            return &t[i];
        }
    return NULL;
}

static void ag_answer(int out, int rc, const fl_lease *l, uint64_t t0, uint64_t t1)
{
    char buf[256];
    fl_lease z = {0};
    if (!l)
        l = &z;
    snprintf(buf, sizeof buf, "r %d %" PRIu64 " %" PRIu64 " %u %u %" PRIu64 " %" PRIu64, rc,
             l->token, l->deadline_ns, l->slot, l->flags, t0, t1);
    th_send(out, buf);
}

/* tacq: one fl_acquire in a thread of its own, which then exits */
struct ag_tacq {
    fl_region *r;
    const char *key;
    uint64_t lease_ns;
    int rc;
    fl_lease lease;
};

static void *ag_tacq_main(void *arg)
{
    struct ag_tacq *a = arg;
    a->rc = fl_acquire(a->r, a->key, a->lease_ns, 0, &a->lease);
    pthread_exit(NULL); /* the thread that holds the lock ends; the process lives */
}

static int ag_main(void *arg, int in, int out)
{
    const char *region = arg;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ag_on_sigusr1; /* no SA_RESTART: interrupts a futex wait */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    fl_region *r = NULL;
    int rc = fl_open(region, &r);
    char buf[1024];
    snprintf(buf, sizeof buf, "ready %d %d", rc, rc == 0 ? fl_region_registered(r) : 0);
    th_send(out, buf);
    struct ag_lease leases[AG_LEASES];
    memset(leases, 0, sizeof leases);
    for (;;) {
        if (th_recv(in, buf, sizeof buf, 600000) != 0)
            return 2; /* the parent is gone */
        char cmd[32] = "", a1[160] = "", a2[160] = "";
        long long n1 = 0, n2 = 0;
        int nf = sscanf(buf, "%31s %159s %159s %lld %lld", cmd, a1, a2, &n1, &n2);
        if (nf < 1)
            return 3;
        uint64_t t0 = th_now_ns(), t1;
        if (strcmp(cmd, "exit") == 0) {
            fl_close(r);
            return 0;
        } else if (strcmp(cmd, "close") == 0) {
            fl_close(r);
            r = NULL;
            ag_answer(out, 0, NULL, t0, th_now_ns());
        } else if (strcmp(cmd, "acq") == 0) {
            /* acq NAME KEY LEASE TIMEOUT */
            fl_lease l;
            memset(&l, 0, sizeof l);
            rc = fl_acquire(r, a2, (uint64_t)n1, (int64_t)n2, &l);
            t1 = th_now_ns();
            if (rc == 0) {
                struct ag_lease *e = ag_find(leases, a1, true);
                if (!e)
                    return 4;
                e->lease = l;
            }
            ag_answer(out, rc, &l, t0, t1);
        } else if (strcmp(cmd, "renew") == 0 || strcmp(cmd, "rel") == 0 ||
                   strcmp(cmd, "check") == 0) {
            struct ag_lease *e = ag_find(leases, a1, false);
            if (!e)
                return 5;
            if (cmd[0] == 'r' && cmd[2] == 'n') {
                rc = fl_renew(r, &e->lease, strtoull(a2, NULL, 10));
            } else if (cmd[0] == 'r') {
                rc = fl_release(r, &e->lease);
            } else {
                rc = fl_check(r, &e->lease);
            }
            t1 = th_now_ns();
            ag_answer(out, rc, &e->lease, t0, t1);
        } else if (strcmp(cmd, "copy") == 0) {
            struct ag_lease *src = ag_find(leases, a2, false);
            struct ag_lease *dst = ag_find(leases, a1, true);
            if (!src || !dst)
                return 6;
            dst->lease = src->lease;
            ag_answer(out, 0, &dst->lease, t0, th_now_ns());
        } else if (strcmp(cmd, "forge") == 0) {
            struct ag_lease *e = ag_find(leases, a1, false);
            if (!e)
                return 7;
            e->lease.token = strtoull(a2, NULL, 10);
            ag_answer(out, 0, &e->lease, t0, th_now_ns());
        } else if (strcmp(cmd, "loop") == 0) {
            /* loop KEY N LEASE: sscanf put N in a2 and LEASE in n1 */
            long count = strtol(a2, NULL, 10);
            uint64_t lease_ns = (uint64_t)n1;
            fl_lease l;
            memset(&l, 0, sizeof l);
            rc = 0;
            for (long i = 0; i < count && rc == 0; i++) {
                rc = fl_acquire(r, a1, lease_ns, (int64_t)(20 * TH_S), &l);
                if (rc == 0)
                    rc = fl_renew(r, &l, lease_ns);
                if (rc == 0)
                    rc = fl_check(r, &l);
                if (rc == 0)
                    rc = fl_release(r, &l);
            }
            ag_answer(out, rc, &l, t0, th_now_ns());
        } else if (strcmp(cmd, "spawn") == 0) {
            /* a child that inherits everything (the registration socket too)
             * and outlives us: it never touches fencelock */
            pid_t pid = fork();
            if (pid == 0) {
                alarm(120); /* a safety net; the test kills it */
                for (;;)
                    pause();
            }
            fl_lease l = {.token = (uint64_t)(pid > 0 ? pid : 0)};
            ag_answer(out, pid > 0 ? 0 : -errno, &l, t0, th_now_ns());
        } else if (strcmp(cmd, "tacq") == 0) {
            /* tacq NAME KEY LEASE: sscanf put LEASE in n1 */
            struct ag_tacq a = {.r = r, .key = a2, .lease_ns = (uint64_t)n1, .rc = -1};
            pthread_t th;
            if (pthread_create(&th, NULL, ag_tacq_main, &a) != 0)
                return 9;
            pthread_join(th, NULL);
            t1 = th_now_ns();
            if (a.rc == 0) {
                struct ag_lease *e = ag_find(leases, a1, true);
                if (!e)
                    return 4;
                e->lease = a.lease;
            }
            ag_answer(out, a.rc, &a.lease, t0, t1);
        } else if (strcmp(cmd, "exec") == 0) {
            /* answer first: after execve nothing of ours is left to answer */
            ag_answer(out, 0, NULL, t0, th_now_ns());
            execl("/bin/sleep", "sleep", "120", (char *)NULL);
            return 10;
        } else if (strcmp(cmd, "sigs") == 0) {
            fl_lease l = {.token = (uint64_t)ag_sigusr1};
            ag_answer(out, 0, &l, t0, th_now_ns());
        } else {
            return 8;
        }
    }
}

/* ---- the test side ---- */

/* Children to kill at teardown, by pid (the ag and th_daemon structures
 * live on the tests' stacks). */
#define AG_MAX_TRACKED 256
static pid_t tracked[AG_MAX_TRACKED];
static int ntracked;

static void ag_track(pid_t pid)
{
    if (ntracked < AG_MAX_TRACKED)
        tracked[ntracked++] = pid;
}

static pid_t foreign[AG_MAX_TRACKED];
static int nforeign;

void ag_track_foreign(pid_t pid)
{
    if (nforeign < AG_MAX_TRACKED)
        foreign[nforeign++] = pid;
}

void ag_start(ag *a, const char *region)
{
    memset(a, 0, sizeof *a);
    static char paths[AG_MAX_TRACKED][512];
    static int npaths;
    /* the child gets a copy of the parent's memory: any stable buffer works */
    char *p = paths[npaths++ % AG_MAX_TRACKED];
    snprintf(p, 512, "%s", region);
    if (th_child_start(&a->c, ag_main, p) != 0)
        fail_msg("cannot start an agent");
    ag_track(a->c.pid);
    char buf[256];
    if (th_recv(a->c.from_child, buf, sizeof buf, 20000) != 0)
        fail_msg("agent %d did not report after opening %s", (int)a->c.pid, region);
    if (sscanf(buf, "ready %d %d", &a->open_rc, &a->registered) != 2)
        fail_msg("agent said '%s'", buf);
}

void ag_send(ag *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    th_vsendf(a->c.to_child, fmt, ap);
    va_end(ap);
}

static int ag_parse(const char *buf, ag_reply *rp)
{
    memset(rp, 0, sizeof *rp);
    return sscanf(buf, "r %d %" SCNu64 " %" SCNu64 " %" SCNu32 " %" SCNu32 " %" SCNu64 " %" SCNu64,
                  &rp->rc, &rp->token, &rp->deadline_ns, &rp->slot, &rp->flags, &rp->t_start,
                  &rp->t_end) == 7
               ? 0
               : -1;
}

int ag_read(ag *a, ag_reply *rp, int timeout_ms)
{
    char buf[512];
    if (th_recv(a->c.from_child, buf, sizeof buf, timeout_ms) != 0)
        return -1;
    return ag_parse(buf, rp);
}

ag_reply ag_do(ag *a, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    th_send(a->c.to_child, buf);
    ag_reply rp;
    if (ag_read(a, &rp, 30000) != 0)
        fail_msg("agent %d: no answer to '%s'", (int)a->c.pid, buf);
    return rp;
}

int ag_read_any(ag **list, int n, ag_reply *rp, int timeout_ms)
{
    struct pollfd p[16];
    if (n > 16)
        return -1;
    for (int i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = list[i]->c.from_child, .events = POLLIN};
    int rc = poll(p, (nfds_t)n, timeout_ms);
    if (rc <= 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (p[i].revents)
            return ag_read(list[i], rp, 10000) == 0 ? i : -1;
    return -1;
}

int ag_stop(ag *a)
{
    if (a->reaped)
        return -1;
    th_send(a->c.to_child, "exit");
    a->reaped = true;
    return th_child_wait(&a->c, 20000);
}

int ag_kill(ag *a)
{
    if (a->reaped)
        return -1;
    kill(a->c.pid, SIGKILL);
    a->reaped = true;
    return th_child_wait(&a->c, 20000);
}

void ag_daemon_start(th_daemon *d, const char *region) { ag_daemon_start_x(d, region, NULL); }

void ag_daemon_start_x(th_daemon *d, const char *region, const char *const *extra)
{
    if (th_daemon_start(d, region, extra) != 0)
        fail_msg("fencelockd did not start on %s", region);
    ag_track(d->pid);
}

int ag_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < ntracked; i++) {
        /* still our unreaped child? (an exited one is a zombie: reap it) */
        if (waitpid(tracked[i], NULL, WNOHANG) == 0) {
            kill(tracked[i], SIGKILL);
            waitpid(tracked[i], NULL, 0);
        }
    }
    ntracked = 0;
    for (int i = 0; i < nforeign; i++)
        kill(foreign[i], SIGKILL); /* not our children: nothing to reap */
    nforeign = 0;
    return 0;
}

int ag_lock_info(fl_region *ro, const char *key, fl_lock_info *info)
{
    fl_region_info ri;
    if (fl_region_info_get(ro, &ri) != 0)
        return -EINVAL;
    for (uint32_t i = 0; i < ri.locks_used; i++)
        if (fl_lock_info_get(ro, i, info) == 0 && strcmp(info->key, key) == 0)
            return 0;
    return -ENOENT;
}

bool ag_wait_waiters(fl_region *ro, const char *key, uint32_t n, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    for (;;) {
        fl_lock_info info;
        if (ag_lock_info(ro, key, &info) == 0 && info.waiters >= n)
            return true;
        if (th_now_ns() >= deadline)
            return false;
        usleep(1000); /* polling shared state until the condition holds */
    }
}

bool ag_wait_sleeping(pid_t pid, int timeout_ms) { return th_wait_state(pid, "S", timeout_ms); }

void ag_sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / TH_S), .tv_nsec = (long)(t_ns % TH_S)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}
