/* SPDX-License-Identifier: MIT */
/*
 * run_tree.c - the descendants of `fencelock run`: the /proc walk and the
 * pidfd signals (see run_tree.h).
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "duration.h"
#include "proc_stat.h"
#include "run_tree.h"

/* One process as /proc/PID/stat shows it. */
struct proc {
    pid_t pid, ppid, pgrp;
    char state;               /* 'Z' zombie, 'X' dead, else alive */
    unsigned long long start; /* clock ticks after boot: with pid, names one process */
};

struct proc_list {
    struct proc *v;
    size_t n, cap;
};

static bool proc_alive(const struct proc *p) { return p->state != 'Z' && p->state != 'X'; }

static bool read_proc(pid_t pid, struct proc *p)
{
    struct fl__proc_stat st;
    if (fl__proc_stat_read(pid, &st) != 0)
        return false;
    p->pid = pid;
    p->ppid = st.ppid;
    p->pgrp = st.pgrp;
    p->state = st.state;
    p->start = st.start_time;
    return true;
}

static int proc_push(struct proc_list *l, const struct proc *p)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        struct proc *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *p;
    return 0;
}

static bool proc_listed(const struct proc_list *l, pid_t pid)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].pid == pid)
            return true;
    return false;
}

/* Every descendant of this process, zombies included, into out (emptied
 * first; free out->v).  0, or -1 if /proc cannot be read. */
static int list_descendants(struct proc_list *out)
{
    out->n = 0;
    struct proc_list all = {0};
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        struct proc p;
        if (*end || pid <= 0 || !read_proc((pid_t)pid, &p))
            continue; /* not a process, or gone meanwhile */
        if (proc_push(&all, &p) != 0) {
            rc = -1;
            break;
        }
    }
    closedir(d);
    /* Parents are not always listed before their children (pids wrap):
     * repeat until a pass adds nothing. */
    pid_t self = getpid();
    for (bool grew = rc == 0; grew;) {
        grew = false;
        for (size_t i = 0; i < all.n; i++) {
            const struct proc *p = &all.v[i];
            if ((p->ppid == self || proc_listed(out, p->ppid)) && !proc_listed(out, p->pid)) {
                if (proc_push(out, p) != 0) {
                    rc = -1;
                    break;
                }
                grew = true;
            }
        }
    }
    free(all.v);
    return rc;
}

/* A pidfd of p if it is still the process listed (same start time); else
 * -1 with errno ESRCH, or another errno if that cannot be known. */
static int proc_pidfd(const struct proc *p)
{
    int fd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    if (fd < 0)
        return -1;
    struct proc now;
    if (!read_proc(p->pid, &now) || now.start != p->start) {
        close(fd);
        errno = ESRCH;
        return -1;
    }
    return fd;
}

/* Send sig to p unless it is gone (or its pid now names another process). */
static void signal_proc(const struct proc *p, int sig)
{
    int fd = proc_pidfd(p);
    if (fd >= 0) {
        syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
        close(fd);
    } else if (errno != ESRCH) {
        kill(p->pid, sig); /* no pidfd (ENOSYS, EMFILE): by pid, as before them */
    }
}

int run_tree_signal(pid_t group, int sig, bool cont)
{
    struct proc_list l = {0};
    if (list_descendants(&l) != 0) {
        free(l.v);
        return -1;
    }
    int others = 0;
    for (int round = 0; round < (cont ? 2 : 1); round++) {
        int s = round == 0 ? sig : SIGCONT;
        kill(-group, s); /* ESRCH once the group is empty: nothing to do */
        for (size_t i = 0; i < l.n; i++) {
            if (proc_alive(&l.v[i]) && l.v[i].pgrp != group) {
                signal_proc(&l.v[i], s);
                others += round == 0;
            }
        }
    }
    free(l.v);
    return others;
}

int run_tree_alive(void)
{
    struct proc_list l = {0};
    int alive = 0;
    if (list_descendants(&l) != 0)
        alive = -1;
    else
        for (size_t i = 0; i < l.n; i++)
            alive += proc_alive(&l.v[i]);
    free(l.v);
    return alive;
}

int run_tree_kill_round(pid_t group)
{
    kill(-group, SIGKILL);
    struct proc_list l = {0};
    if (list_descendants(&l) != 0) {
        free(l.v);
        return -1;
    }
    int *fds = calloc(l.n ? l.n : 1, sizeof *fds);
    size_t alive = 0, waiting = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (!proc_alive(&l.v[i]))
            continue;
        alive++;
        int fd = proc_pidfd(&l.v[i]);
        if (fd >= 0) {
            syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
            if (fds)
                fds[waiting++] = fd;
            else
                close(fd);
        } else if (errno != ESRCH) {
            kill(l.v[i].pid, SIGKILL);
        }
    }
    /* A pidfd becomes readable when its process has exited (its children
     * are reparented to us by then). */
    for (size_t i = 0; i < waiting; i++) {
        struct pollfd pf = {.fd = fds[i], .events = POLLIN};
        while (poll(&pf, 1, -1) < 0 && errno == EINTR) {
        }
        close(fds[i]);
    }
    if (alive > waiting) {
        /* Some could not be waited for by pidfd: look again shortly. */
        struct timespec ts = {0, (long)(10 * CLI_NS_PER_MS)};
        nanosleep(&ts, NULL);
    }
    free(fds);
    free(l.v);
    return (int)alive;
}
