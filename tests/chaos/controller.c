/* SPDX-License-Identifier: MIT */
/*
 * controller.c - the chaos controller (see chaos.h).
 *
 * Starts fencelockd on a private region (its state file in the run
 * directory), forks the workers, optionally starts stress-ng, and injects
 * faults on a schedule drawn from the seed, each kind from its own stream:
 *   pause     SIGSTOP a random worker, SIGCONT it after a log-uniform time in
 *             [lease/4, 5*lease] (one in ten: [5*lease, 40*lease])
 *   kill      SIGKILL a random worker; a new worker (new id) takes its slot
 *             after 0..200 ms
 *   dkill     SIGKILL fencelockd; restart it after 0..ddown_max
 * Inter-arrival times are exponential with the configured means.  Every
 * fault is logged to controller.log with the time it was sent, and so is
 * every wake-up of the controller that came more than 50 ms late (a machine
 * stall: load, not a fault of the library).  At the end:
 * every worker is resumed and must finish its iteration; fencelockd is up;
 * once every lease has run out, the final phase inspects and rewrites the
 * region.
 */
#include "chaos.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct slot {
    int wid;
    pid_t pid;       /* 0: none */
    bool paused;
    uint64_t cont_at;
    uint64_t respawn_at; /* 0: none pending */
};

static struct ctl {
    struct ch_config *c;
    ch_log log;
    int notify_fd;
    char notify_path[600];
    pid_t daemon;
    uint64_t restart_at; /* 0: none pending */
    pid_t stress;
    struct slot slots[CH_MAX_WORKERS];
    int next_wid;
    uint64_t end;
    int problems; /* set-up failures the checker cannot see */
} g;

#define EV(fmt, ...) ch_log_line(&g.log, "%" PRIu64 " " fmt, ch_now(), __VA_ARGS__)

/* ---- fencelockd ------------------------------------------------------------ */

static int notify_open(void)
{
    snprintf(g.notify_path, sizeof g.notify_path, "%s/notify.sock", g.c->dir);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(g.notify_path) >= sizeof a.sun_path) {
        fprintf(stderr, "chaos: notify socket path too long: %s\n", g.notify_path);
        return -1;
    }
    memcpy(a.sun_path, g.notify_path, strlen(g.notify_path) + 1);
    unlink(g.notify_path);
    g.notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (g.notify_fd < 0 || bind(g.notify_fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("chaos: notify socket");
        return -1;
    }
    return 0;
}

static int daemon_start(void)
{
    char buf[512];
    while (recv(g.notify_fd, buf, sizeof buf, 0) > 0) { /* drain old messages */
    }
    char log[600], state[600], spare[32], rsize[32];
    snprintf(log, sizeof log, "%s/fencelockd.log", g.c->dir);
    snprintf(state, sizeof state, "%s/fencelockd.state", g.c->dir);
    snprintf(spare, sizeof spare, "%d", g.c->spare_buffers);
    snprintf(rsize, sizeof rsize, "%d", g.c->record_size);
    uint64_t t0 = ch_now();
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        setenv("NOTIFY_SOCKET", g.notify_path, 1);
        execl(g.c->fencelockd, g.c->fencelockd, "--region", g.c->region, "--state", state,
              "--spare-buffers", spare, "--record-size", rsize, (char *)NULL);
        perror("chaos: exec fencelockd");
        _exit(127);
    }
    g.daemon = pid;
    uint64_t deadline = ch_now() + 20 * CH_S;
    for (;;) {
        struct pollfd p = {.fd = g.notify_fd, .events = POLLIN};
        if (poll(&p, 1, 50) > 0) {
            ssize_t n = recv(g.notify_fd, buf, sizeof buf - 1, 0);
            if (n > 0) {
                buf[n] = '\0';
                if (strstr(buf, "READY=1"))
                    break;
            }
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            EV("dstart pid=%d rc=-1 status=%d t0=%" PRIu64, (int)pid, st, t0);
            g.daemon = 0;
            return -1;
        }
        if (ch_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            EV("dstart pid=%d rc=-1 status=timeout t0=%" PRIu64, (int)pid, t0);
            g.daemon = 0;
            return -1;
        }
    }
    uint64_t ready = ch_now();
    /* The token floor it published before READY: every token handed out
     * from now on is at least this (I1 across restarts). */
    fl_region *r;
    uint64_t floor = 0, epoch = 0;
    if (fl_open_readonly(g.c->region, &r) == 0) {
        fl_region_info ri;
        if (fl_region_info_get(r, &ri) == 0) {
            floor = ri.token_floor;
            epoch = ri.epoch;
        }
        fl_close(r);
    }
    EV("dstart pid=%d rc=0 t0=%" PRIu64 " ready=%" PRIu64 " floor=%" PRIu64 " epoch=%" PRIu64,
       (int)pid, t0, ready, floor, epoch);
    return 0;
}

static void daemon_kill(int sig)
{
    if (!g.daemon)
        return;
    EV("dkill pid=%d sig=%d", (int)g.daemon, sig);
    kill(g.daemon, sig);
    int st = 0;
    waitpid(g.daemon, &st, 0);
    EV("dexit pid=%d status=%d expected=1", (int)g.daemon, st);
    g.daemon = 0;
}

/* ---- stress-ng ---------------------------------------------------------------- */

static void stress_start(void)
{
    if (g.c->stress == CH_STRESS_NONE)
        return;
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%" PRIu64 "s", (uint64_t)(g.c->duration_ns / CH_S + 30));
    const char *light[] = {"stress-ng", "-q", "--taskset", "0", "--cpu", "1", "--cpu-load", "50",
                           "--vm", "1", "--vm-bytes", "64M", "--switch", "1", "--futex", "1",
                           "--timeout", timeout, NULL};
    const char *full[] = {"stress-ng", "-q", "--cpu", "1", "--vm", "1", "--vm-bytes", "128M",
                          "--switch", "1", "--futex", "1", "--timeout", timeout, NULL};
    const char *const *argv = g.c->stress == CH_STRESS_LIGHT ? light : full;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        execvp("stress-ng", (char *const *)argv);
        fprintf(stderr, "chaos: exec stress-ng: %s (use --no-stress)\n", strerror(errno));
        _exit(127);
    }
    if (pid > 0) {
        setpgid(pid, pid);
        g.stress = pid;
        EV("stress pid=%d level=%s", (int)pid, g.c->stress == CH_STRESS_LIGHT ? "light" : "full");
    }
}

static void stress_stop(void)
{
    if (!g.stress)
        return;
    kill(g.stress, SIGTERM);
    uint64_t deadline = ch_now() + 10 * CH_S;
    int st = 0;
    while (waitpid(g.stress, &st, WNOHANG) == 0) {
        if (ch_now() > deadline) {
            kill(-g.stress, SIGKILL); /* its process group: the stressors we started */
            waitpid(g.stress, &st, 0);
            break;
        }
        ch_sleep_ns(10 * CH_MS);
    }
    kill(-g.stress, SIGKILL); /* stressors that outlived their parent, if any */
    EV("stress-stop pid=%d status=%d", (int)g.stress, st);
    g.stress = 0;
}

/* ---- workers ----------------------------------------------------------------- */

static void worker_start(int s)
{
    struct slot *sl = &g.slots[s];
    int wid = g.next_wid++;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        close(g.notify_fd);
        _exit(ch_worker(g.c, wid, g.end));
    }
    if (pid < 0) {
        perror("chaos: fork");
        g.problems++;
        sl->respawn_at = ch_now() + 100 * CH_MS;
        return;
    }
    sl->wid = wid;
    sl->pid = pid;
    sl->paused = false;
    sl->respawn_at = 0;
    EV("wstart slot=%d w=%d pid=%d", s, wid, (int)pid);
}

static void log_exit(struct slot *sl, int st, const struct rusage *ru, bool expected)
{
    uint64_t cpu = (uint64_t)ru->ru_utime.tv_sec * CH_S + (uint64_t)ru->ru_utime.tv_usec * 1000 +
                   (uint64_t)ru->ru_stime.tv_sec * CH_S + (uint64_t)ru->ru_stime.tv_usec * 1000;
    EV("wexit w=%d pid=%d status=%d exited=%d code=%d signal=%d expected=%d cpu=%" PRIu64,
       sl->wid, (int)sl->pid, st, WIFEXITED(st), WIFEXITED(st) ? WEXITSTATUS(st) : -1,
       WIFSIGNALED(st) ? WTERMSIG(st) : 0, expected, cpu);
}

static void worker_kill(int s, uint64_t respawn_delay)
{
    struct slot *sl = &g.slots[s];
    if (!sl->pid)
        return;
    EV("kill w=%d pid=%d paused=%d", sl->wid, (int)sl->pid, sl->paused);
    kill(sl->pid, SIGKILL);
    int st;
    struct rusage ru;
    wait4(sl->pid, &st, 0, &ru);
    log_exit(sl, st, &ru, true);
    sl->pid = 0;
    sl->paused = false;
    if (respawn_delay != UINT64_MAX)
        sl->respawn_at = ch_now() + respawn_delay;
}

static void pause_worker(int s, uint64_t ns)
{
    struct slot *sl = &g.slots[s];
    if (!sl->pid || sl->paused)
        return;
    sl->paused = true;
    sl->cont_at = ch_now() + ns;
    EV("stop w=%d pid=%d ns=%" PRIu64, sl->wid, (int)sl->pid, ns);
    kill(sl->pid, SIGSTOP);
}

static void resume_worker(int s)
{
    struct slot *sl = &g.slots[s];
    if (!sl->pid || !sl->paused)
        return;
    kill(sl->pid, SIGCONT);
    EV("cont w=%d pid=%d", sl->wid, (int)sl->pid);
    sl->paused = false;
}

/* Reap children that exited by themselves: workers at their end time (or
 * crashed), fencelockd (unexpectedly). */
static void reap(void)
{
    for (;;) {
        int st;
        struct rusage ru;
        pid_t pid = wait4(-1, &st, WNOHANG, &ru);
        if (pid <= 0)
            return;
        if (pid == g.daemon) {
            EV("dexit pid=%d status=%d expected=0", (int)pid, st);
            fprintf(stderr, "chaos: fencelockd exited by itself (status %d)\n", st);
            g.daemon = 0;
            g.restart_at = ch_now() + 100 * CH_MS;
            continue;
        }
        if (pid == g.stress) {
            EV("stress-exit pid=%d status=%d", (int)pid, st);
            g.stress = 0;
            continue;
        }
        for (int s = 0; s < g.c->workers; s++) {
            struct slot *sl = &g.slots[s];
            if (sl->pid == pid) {
                bool normal = WIFEXITED(st) && WEXITSTATUS(st) == 0 && ch_now() >= g.end;
                log_exit(sl, st, &ru, normal);
                if (!normal)
                    fprintf(stderr, "chaos: worker %d (pid %d) exited with status %d\n", sl->wid,
                            (int)pid, st);
                sl->pid = 0;
                sl->paused = false;
                if (ch_now() < g.end)
                    sl->respawn_at = ch_now() + 10 * CH_MS;
            }
        }
    }
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

int ch_controller(struct ch_config *c)
{
    memset(&g, 0, sizeof g);
    g.c = c;
    char path[600];
    snprintf(path, sizeof path, "%s/controller.log", c->dir);
    if (ch_log_open(&g.log, path) != 0 || notify_open() != 0)
        return -1;
    if (ch_config_write(c) != 0)
        return -1;
    if (daemon_start() != 0) {
        fprintf(stderr, "chaos: fencelockd did not start (see %s/fencelockd.log)\n", c->dir);
        return -1;
    }
    uint64_t start = ch_now();
    g.end = start + c->duration_ns;
    EV("begin seed=%" PRIu64 " end=%" PRIu64, c->seed, g.end);
    stress_start();
    for (int s = 0; s < c->workers; s++)
        worker_start(s);

    ch_rng rp, rk, rd;
    ch_rng_seed(&rp, c->seed, 1);
    ch_rng_seed(&rk, c->seed, 2);
    ch_rng_seed(&rd, c->seed, 3);
    uint64_t next_pause = start + ch_rng_exp(&rp, c->pause_mean_ns);
    uint64_t next_kill = c->kill_mean_ns ? start + ch_rng_exp(&rk, c->kill_mean_ns) : UINT64_MAX;
    uint64_t next_dkill = c->dkill_mean_ns ? start + ch_rng_exp(&rd, c->dkill_mean_ns) : UINT64_MAX;
    uint64_t L = c->lease_ns;

    for (;;) {
        uint64_t now = ch_now();
        if (now >= g.end)
            break;
        reap();
        if (now >= next_pause) {
            int s = (int)ch_rng_below(&rp, (uint64_t)c->workers);
            uint64_t ns = ch_rng_chance(&rp, 10) ? ch_rng_logu(&rp, 5 * L, 40 * L)
                                                 : ch_rng_logu(&rp, L / 4, 5 * L);
            pause_worker(s, ns);
            next_pause += ch_rng_exp(&rp, c->pause_mean_ns);
        }
        for (int s = 0; s < c->workers; s++)
            if (g.slots[s].paused && now >= g.slots[s].cont_at)
                resume_worker(s);
        if (now >= next_kill) {
            int s = (int)ch_rng_below(&rk, (uint64_t)c->workers);
            worker_kill(s, ch_rng_range(&rk, 0, 200 * CH_MS));
            next_kill += ch_rng_exp(&rk, c->kill_mean_ns);
        }
        for (int s = 0; s < c->workers; s++)
            if (!g.slots[s].pid && g.slots[s].respawn_at && now >= g.slots[s].respawn_at)
                worker_start(s);
        if (now >= next_dkill) {
            if (g.daemon) {
                daemon_kill(SIGKILL);
                g.restart_at = ch_now() + ch_rng_range(&rd, 0, c->ddown_max_ns);
            }
            next_dkill += ch_rng_exp(&rd, c->dkill_mean_ns);
        }
        if (!g.daemon && g.restart_at && ch_now() >= g.restart_at) {
            g.restart_at = 0;
            if (daemon_start() != 0) {
                fprintf(stderr, "chaos: fencelockd did not restart\n");
                g.problems++;
                g.restart_at = ch_now() + 500 * CH_MS;
            }
        }
        uint64_t next = min_u64(g.end, min_u64(next_pause, min_u64(next_kill, next_dkill)));
        for (int s = 0; s < c->workers; s++) {
            if (g.slots[s].paused)
                next = min_u64(next, g.slots[s].cont_at);
            if (!g.slots[s].pid && g.slots[s].respawn_at)
                next = min_u64(next, g.slots[s].respawn_at);
        }
        if (!g.daemon && g.restart_at)
            next = min_u64(next, g.restart_at);
        /* A wake-up late by more than 50 ms means this process, as ordinary
         * as the workers, could not run: the machine stalled.  The checker
         * does not blame waiters for those periods. */
        uint64_t before = ch_now();
        uint64_t target = min_u64(next, before + 20 * CH_MS);
        if (target < before)
            target = before; /* an overdue event: no sleep, lateness counts from now */
        ch_sleep_until(target);
        uint64_t woke = ch_now();
        if (woke > target + 50 * CH_MS)
            EV("stall from=%" PRIu64 " late=%" PRIu64, target, woke - target);
    }

    /* The end: no new faults.  Resume everyone; let them finish. */
    EV("end workers=%d", c->workers);
    for (int s = 0; s < c->workers; s++)
        resume_worker(s);
    if (!g.daemon) {
        g.restart_at = 0;
        if (daemon_start() != 0) {
            fprintf(stderr, "chaos: fencelockd did not restart at the end\n");
            g.problems++;
        }
    }
    uint64_t deadline = ch_now() + 40 * L + c->slack_ns + 20 * CH_S;
    for (;;) {
        reap();
        int alive = 0;
        for (int s = 0; s < c->workers; s++)
            alive += g.slots[s].pid != 0;
        if (!alive)
            break;
        if (ch_now() > deadline) {
            for (int s = 0; s < c->workers; s++) {
                if (g.slots[s].pid) {
                    EV("straggler w=%d pid=%d", g.slots[s].wid, (int)g.slots[s].pid);
                    fprintf(stderr, "chaos: worker %d did not finish; killing it\n",
                            g.slots[s].wid);
                    worker_kill(s, UINT64_MAX);
                }
            }
            break;
        }
        ch_sleep_ns(10 * CH_MS);
    }
    stress_stop();
    EV("workers-gone n=%d", g.next_wid);
    /* Every lease of a dead worker runs out within 20 * lease: the long
     * leases (one in twenty, worker.c) last up to that, and a worker that
     * opened while the supervisor was down is never reaped, so its long
     * lease held at its kill stays held until its deadline.  (The wait was
     * 4 * lease, which such a lease could outlast: a rare false I4 report.) */
    ch_sleep_ns(20 * L + 200 * CH_MS);
    if (!g.daemon && daemon_start() != 0)
        g.problems++;
    fflush(NULL);
    pid_t fin = fork();
    if (fin == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(g.notify_fd);
        _exit(ch_final(c));
    }
    int st = -1;
    uint64_t fdeadline = ch_now() + 60 * CH_S;
    while (fin > 0 && waitpid(fin, &st, WNOHANG) == 0) {
        if (ch_now() > fdeadline) {
            kill(fin, SIGKILL);
            waitpid(fin, &st, 0);
            break;
        }
        ch_sleep_ns(5 * CH_MS);
    }
    EV("final pid=%d status=%d", (int)fin, st);
    daemon_kill(SIGTERM);
    EV("done problems=%d", g.problems);
    close(g.notify_fd);
    unlink(g.notify_path);
    return g.problems ? -1 : 0;
}
