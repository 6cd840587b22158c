/* SPDX-License-Identifier: MIT */
/*
 * death.c - question 5: how soon a waiter holds the lock after its holder
 * is killed.
 *
 * A real fencelockd serves a private region.  Per trial a fresh holder
 * process H (registered with the supervisor) takes the lock and sleeps; a
 * waiter W, already asleep in the lock call (checked through the lock's
 * waiter count or futex word and /proc), takes over when the runner kills H
 * with SIGKILL.  Measured: from the runner's clock read just before kill()
 * to W's clock read just after its lock call returned.
 *   fencelock             W gets the key with FL_LEASE_OWNER_DIED (the
 *                         holder's lease is 10 s: only death detection can
 *                         free it this soon): H's life word (src/shm/life.c)
 *                         wakes W, or fencelockd reaps H, whichever first
 *   fencelock, fencelockd stopped   the same with fencelockd stopped
 *                         (SIGSTOP) after H registered: the life word alone
 *   robust pthread mutex  W's pthread_mutex_lock returns EOWNERDEAD (the
 *                         kernel walks the dead thread's robust list)
 * The three kinds rotate trial by trial.  H runs on CPU 0, W on CPU 1, the
 * supervisor wherever the scheduler puts it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"
#include "fencelock.h"

#define KEY "bench/death"
#define HOLD_NS (10 * FB_S)

struct dsh {
    pthread_mutex_t mtx;
    _Atomic uint64_t w_acq_ns;
    _Atomic uint32_t w_flags;
    _Atomic int w_err, w_ownerdead;
};

static struct dsh *sh;
static char region[600];

static void run_w(int in, int out)
{
    fb_pin(1);
    fl_region *r = fb_open(region, true);
    for (;;) {
        int cmd = fb_get(in);
        if (cmd == 'q' || cmd < 0)
            break;
        if (cmd == 'f') {
            fl_lease l;
            int e = fl_acquire(r, KEY, HOLD_NS, 5 * FB_S, &l);
            atomic_store(&sh->w_acq_ns, fb_now_ns());
            atomic_store(&sh->w_err, e);
            if (e == 0) {
                atomic_store(&sh->w_flags, l.flags);
                fl_release(r, &l);
            }
        } else {
            int e = pthread_mutex_lock(&sh->mtx);
            atomic_store(&sh->w_acq_ns, fb_now_ns());
            atomic_store(&sh->w_ownerdead, e == EOWNERDEAD);
            if (e == EOWNERDEAD) {
                pthread_mutex_consistent(&sh->mtx);
                e = 0;
            }
            atomic_store(&sh->w_err, e);
            if (e == 0)
                pthread_mutex_unlock(&sh->mtx);
        }
        fb_put(out, 'd');
    }
    fl_close(r);
    _exit(0);
}

/* A holder: takes the lock, says so, sleeps until killed. */
static pid_t start_holder(char kind)
{
    int p[2];
    if (pipe(p) != 0)
        fb_die("pipe: %s", strerror(errno));
    pid_t pid = fb_fork();
    if (pid < 0)
        fb_die("fork: %s", strerror(errno));
    if (pid == 0) {
        close(p[0]);
        fb_pin(0);
        if (kind != 'm') {
            fl_region *r = fb_open(region, true);
            fl_lease l;
            if (fl_acquire(r, KEY, HOLD_NS, 2 * FB_S, &l) != 0)
                fb_die("holder: %s", fl_last_error());
        } else {
            int e = pthread_mutex_lock(&sh->mtx);
            if (e == EOWNERDEAD)
                pthread_mutex_consistent(&sh->mtx);
            else if (e)
                fb_die("holder: lock failed (%d)", e);
        }
        fb_put(p[1], 'r');
        for (;;)
            pause();
    }
    close(p[1]);
    if (fb_get(p[0]) != 'r')
        fb_die("holder did not take the lock");
    close(p[0]);
    return pid;
}

static fl_region *ro;
static uint32_t slot = UINT32_MAX;

static uint32_t waiters(void)
{
    if (slot == UINT32_MAX) {
        fl_region_info ri;
        fl_region_info_get(ro, &ri);
        for (uint32_t i = 0; i < ri.locks_used; i++) {
            fl_lock_info li;
            if (fl_lock_info_get(ro, i, &li) == 0 && strcmp(li.key, KEY) == 0)
                slot = i;
        }
        if (slot == UINT32_MAX)
            return 0;
    }
    fl_lock_info li;
    return fl_lock_info_get(ro, slot, &li) == 0 ? li.waiters : 0;
}

/* Wait until W sleeps in its lock call.  glibc marks a mutex with sleepers
 * by FUTEX_WAITERS (bit 31) in its lock word. */
static bool wait_asleep(pid_t w, char kind)
{
    uint64_t end = fb_now_ns() + 2 * FB_S;
    while (fb_now_ns() < end) {
        bool queued = kind != 'm'
                          ? waiters() > 0
                          : (atomic_load((_Atomic int *)&sh->mtx.__data.__lock) & (int)0x80000000u) != 0;
        if (queued && fb_proc_state(w) == 'S')
            return true;
        usleep(20);
    }
    return false;
}

int main(int argc, char **argv)
{
    fb_init(argc, argv, 5, "death");
    fb_pin(0);
    snprintf(region, sizeof region, "%s", fb_path("q5.region"));
    fb_daemon d;
    if (fb_daemon_start(&d, region, NULL, 30) != 0)
        fb_die("cannot start fencelockd");
    if (fl_open_readonly(region, &ro) != 0)
        fb_die("open: %s", fl_last_error());
    sh = fb_shared(sizeof *sh);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&sh->mtx, &a);

    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0)
        fb_die("pipe: %s", strerror(errno));
    pid_t w = fb_fork();
    if (w == 0) {
        close(down[1]);
        close(up[0]);
        run_w(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);

    int n = fb_opt.full ? 3000 : 1000;
    fb_samples fl, fs, mx;
    fb_samples_init(&fl);
    fb_samples_init(&fs);
    fb_samples_init(&mx);
    int skipped = 0;
    uint64_t t0 = fb_now_ns();
    double budget = fb_budget_left() - 1;
    for (int i = 0; i < 3 * n; i++) {
        /* f: fencelockd runs; s: it is stopped; m: the robust mutex */
        char kind = "fsm"[i % 3];
        pid_t h = start_holder(kind);
        if (kind == 's' && kill(d.pid, SIGSTOP) != 0) /* H is registered */
            fb_die("cannot stop fencelockd: %s", strerror(errno));
        fb_put(down[1], kind == 'm' ? 'm' : 'f');
        if (!wait_asleep(w, kind)) {
            skipped++;
            fb_log("waiter not seen asleep within 2 s; measured anyway");
        }
        uint64_t tk = fb_now_ns();
        kill(h, SIGKILL);
        if (fb_get(up[0]) != 'd')
            fb_die("waiter failed");
        uint64_t ta = atomic_load(&sh->w_acq_ns);
        waitpid(h, NULL, 0);
        if (atomic_load(&sh->w_err) != 0)
            fb_die("waiter's lock failed: %d", atomic_load(&sh->w_err));
        if (kind != 'm' && !(atomic_load(&sh->w_flags) & FL_LEASE_OWNER_DIED))
            fb_die("fencelock waiter got the key without FL_LEASE_OWNER_DIED");
        if (kind == 'm' && !atomic_load(&sh->w_ownerdead))
            fb_die("mutex waiter did not see EOWNERDEAD");
        if (kind == 's' && kill(d.pid, SIGCONT) != 0)
            fb_die("cannot continue fencelockd: %s", strerror(errno));
        fb_samples_add(kind == 'f' ? &fl : kind == 's' ? &fs : &mx, (double)(ta - tk));
        if ((double)(fb_now_ns() - t0) / 1e9 > budget) {
            fb_log("time bound reached after %d trials", i + 1);
            break;
        }
    }
    fb_put(down[1], 'q');
    waitpid(w, NULL, 0);

    fb_stats sf = fb_stats_of(&fl), ss = fb_stats_of(&fs), sm = fb_stats_of(&mx);
#define FL_CASE "fencelock (life word or fencelockd; FL_LEASE_OWNER_DIED)"
#define FS_CASE "fencelock, fencelockd stopped (life word; FL_LEASE_OWNER_DIED)"
    fb_result(FL_CASE, "trials", (double)sf.n, "");
    fb_result_stats(FL_CASE, &sf, "ns");
    fb_result(FL_CASE, "max", sf.max, "ns");
    fb_result(FS_CASE, "trials", (double)ss.n, "");
    fb_result_stats(FS_CASE, &ss, "ns");
    fb_result(FS_CASE, "max", ss.max, "ns");
    fb_result("robust pthread mutex (EOWNERDEAD)", "trials", (double)sm.n, "");
    fb_result_stats("robust pthread mutex (EOWNERDEAD)", &sm, "ns");
    fb_result("robust pthread mutex (EOWNERDEAD)", "max", sm.max, "ns");
    fb_raw_cdf("q5_death_fl", &fl);
    fb_raw_cdf("q5_death_fl_nosup", &fs);
    fb_raw_cdf("q5_death_mutex", &mx);
    fb_note("from the clock read before kill(SIGKILL) to the waiter's clock read after its lock "
            "call; holder on CPU 0; waiter on CPU 1; %d trials where the waiter was not yet "
            "seen asleep",
            skipped);
    double ratio = sf.median / sm.median, ratio_s = ss.median / sm.median;
    fb_target("death to new holder median at most 1.5x the robust mutex's EOWNERDEAD",
              "fencelock / robust mutex (median)", ratio, "x", "<= 1.5", ratio <= 1.5);
    fb_target("the same with fencelockd stopped",
              "fencelock, fencelockd stopped / robust mutex (median)", ratio_s, "x", "<= 1.5",
              ratio_s <= 1.5);
    fb_target("death to new holder p99 at most 2 ms", "fencelock p99", sf.p99 / 1e6, "ms",
              "<= 2", sf.p99 <= 2e6);
    fl_close(ro);
    fb_daemon_stop(&d);
    fb_region_remove(region);
    return 0;
}
