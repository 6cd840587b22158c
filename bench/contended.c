/* SPDX-License-Identifier: MIT */
/*
 * contended.c - question 2: contended handoff between processes.
 *
 * N processes (2, 4, 8; pinned round-robin to the CPUs, so 2 processes get
 * one core each) loop on one key: lock, a critical section that checks
 * exclusion and takes timestamps, unlock.  Measured per lock kind:
 *   throughput  acquisitions per second, all processes together
 *   handoffs    acquisitions by another process than the last holder, per s
 *   handoff latency  from the releaser's timestamp just before its unlock to
 *               the next (other) holder's timestamp just after its lock
 * Lock kinds: fencelock (FL_WAIT_FOREVER), robust process-shared pthread
 * mutex, flock, OFD fcntl locks; all run in the same invocation.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"
#include "fencelock.h"

#define KEY "bench/contended"
#define MAXP 8
#define CAP 65536 /* handoff samples kept per process (the latest) */

enum kind { K_FL, K_MUTEX, K_FLOCK, K_OFD, K_COUNT };
static const char *const kind_name[K_COUNT] = {"fencelock", "robust pthread mutex", "flock",
                                               "OFD fcntl lock"};
static const char *const kind_tag[K_COUNT] = {"fl", "mutex", "flock", "ofd"};

struct shared {
    _Atomic int ready, go, stop;
    pthread_mutex_t mtx;
    _Atomic uint64_t last_release_ns;
    _Atomic int last_holder;
    _Atomic int inside;
    _Atomic uint64_t violations;
    struct {
        _Atomic uint64_t acq, handoffs;
    } per[MAXP];
    uint32_t samples[MAXP][CAP]; /* ns, capped at 4 s */
};

static struct shared *sh;
static char region[600];

static void child(enum kind k, int me, int nprocs)
{
    fb_pin(me);
    fl_region *r = NULL;
    int fd = -1;
    if (k == K_FL)
        r = fb_open(region, true);
    if (k == K_FLOCK || k == K_OFD) {
        fd = open(fb_path(k == K_FLOCK ? "q2.flock" : "q2.ofd"), O_RDWR | O_CREAT | O_CLOEXEC,
                  0600);
        if (fd < 0)
            fb_die("open: %s", strerror(errno));
    }
    struct flock wr = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    struct flock un = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load(&sh->go))
        usleep(200);
    uint64_t n = 0;
    (void)nprocs;
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        fl_lease l;
        int e = 0;
        switch (k) {
        case K_FL: e = fl_acquire(r, KEY, 10 * FB_S, FL_WAIT_FOREVER, &l); break;
        case K_MUTEX: e = pthread_mutex_lock(&sh->mtx); break;
        case K_FLOCK: e = flock(fd, LOCK_EX); break;
        case K_OFD: e = fcntl(fd, F_OFD_SETLKW, &wr); break;
        default: break;
        }
        if (e)
            fb_die("%s: lock failed (%d)", kind_name[k], e);
        uint64_t t = fb_now_ns();
        if (atomic_fetch_add_explicit(&sh->inside, 1, memory_order_relaxed) != 0)
            atomic_fetch_add(&sh->violations, 1);
        int last = atomic_load_explicit(&sh->last_holder, memory_order_relaxed);
        if (last != me && last >= 0) {
            uint64_t d = t - atomic_load_explicit(&sh->last_release_ns, memory_order_relaxed);
            uint64_t h = atomic_fetch_add_explicit(&sh->per[me].handoffs, 1, memory_order_relaxed);
            sh->samples[me][h % CAP] = d > 4 * FB_S ? (uint32_t)(4 * FB_S) : (uint32_t)d;
        }
        atomic_fetch_add_explicit(&sh->per[me].acq, 1, memory_order_relaxed);
        n++;
        atomic_fetch_sub_explicit(&sh->inside, 1, memory_order_relaxed);
        atomic_store_explicit(&sh->last_holder, me, memory_order_relaxed);
        atomic_store_explicit(&sh->last_release_ns, fb_now_ns(), memory_order_relaxed);
        switch (k) {
        case K_FL: e = fl_release(r, &l); break;
        case K_MUTEX: e = pthread_mutex_unlock(&sh->mtx); break;
        case K_FLOCK: e = flock(fd, LOCK_UN); break;
        case K_OFD: e = fcntl(fd, F_OFD_SETLK, &un); break;
        default: break;
        }
        if (e)
            fb_die("%s: unlock failed (%d)", kind_name[k], e);
    }
    if (r)
        fl_close(r);
    _exit(0);
}

struct outcome {
    double throughput, handoffs_per_s;
    fb_stats lat;
};

static struct outcome run(enum kind k, int nprocs, uint64_t dur_ns, fb_samples *lat)
{
    uint64_t violations_before = atomic_load(&sh->violations);
    atomic_store(&sh->ready, 0);
    atomic_store(&sh->go, 0);
    atomic_store(&sh->stop, 0);
    atomic_store(&sh->last_holder, -1);
    for (int i = 0; i < MAXP; i++) {
        atomic_store(&sh->per[i].acq, 0);
        atomic_store(&sh->per[i].handoffs, 0);
    }
    pid_t pids[MAXP];
    for (int i = 0; i < nprocs; i++) {
        pids[i] = fb_fork();
        if (pids[i] < 0)
            fb_die("fork: %s", strerror(errno));
        if (pids[i] == 0)
            child(k, i, nprocs);
    }
    while (atomic_load(&sh->ready) < nprocs)
        usleep(500);
    uint64_t t0 = fb_now_ns();
    atomic_store(&sh->go, 1);
    /* count from a settled start: the first 10% is warm-up */
    usleep((useconds_t)(dur_ns / 10 / 1000));
    uint64_t a0 = 0, h0 = 0;
    for (int i = 0; i < nprocs; i++) {
        a0 += atomic_load(&sh->per[i].acq);
        h0 += atomic_load(&sh->per[i].handoffs);
    }
    t0 = fb_now_ns();
    usleep((useconds_t)(dur_ns / 1000));
    uint64_t a1 = 0, h1 = 0;
    for (int i = 0; i < nprocs; i++) {
        a1 += atomic_load(&sh->per[i].acq);
        h1 += atomic_load(&sh->per[i].handoffs);
    }
    uint64_t t1 = fb_now_ns();
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < nprocs; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fb_die("%s child %d failed (status %#x)", kind_name[k], i, st);
    }
    if (atomic_load(&sh->violations) != violations_before)
        fb_die("%s: mutual exclusion violated", kind_name[k]);
    for (int i = 0; i < nprocs; i++) {
        uint64_t h = atomic_load(&sh->per[i].handoffs);
        for (uint64_t j = 0; j < (h < CAP ? h : CAP); j++)
            fb_samples_add(lat, sh->samples[i][j]);
    }
    struct outcome o;
    double secs = (double)(t1 - t0) / 1e9;
    o.throughput = (double)(a1 - a0) / secs;
    o.handoffs_per_s = (double)(h1 - h0) / secs;
    o.lat = fb_stats_of(lat);
    return o;
}

int main(int argc, char **argv)
{
    fb_init(argc, argv, 2, "contended");
    snprintf(region, sizeof region, "%s", fb_path("q2.region"));
    fb_daemon d;
    if (fb_daemon_start(&d, region, NULL, 30) != 0)
        fb_die("cannot start fencelockd");
    sh = fb_shared(sizeof *sh);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&sh->mtx, &a);

    static const int counts[] = {2, 4, 8};
    enum { NC = sizeof counts / sizeof counts[0] };
    uint64_t dur = (fb_opt.full ? 3000 : 400) * FB_MS;
    double need = NC * K_COUNT * ((double)dur * 1.1 / 1e9 + 0.1) + 1;
    if (fb_budget_left() < need)
        dur = (uint64_t)((fb_budget_left() - 1) / (NC * K_COUNT) / 1.3 * 1e9);
    struct outcome out[NC][K_COUNT];
    for (int c = 0; c < NC; c++)
        for (int k = 0; k < K_COUNT; k++) {
            fb_samples lat;
            fb_samples_init(&lat);
            out[c][k] = run((enum kind)k, counts[c], dur, &lat);
            char cse[128];
            snprintf(cse, sizeof cse, "%s; %d processes", kind_name[k], counts[c]);
            fb_result(cse, "acquisitions/s", out[c][k].throughput, "1/s");
            fb_result(cse, "handoffs/s", out[c][k].handoffs_per_s, "1/s");
            fb_result(cse, "handoff median", out[c][k].lat.median, "ns");
            fb_result(cse, "handoff p99", out[c][k].lat.p99, "ns");
            char raw[64];
            snprintf(raw, sizeof raw, "q2_handoff_%s_%d", kind_tag[k], counts[c]);
            fb_raw_cdf(raw, &lat);
            fb_samples_free(&lat);
        }
    FILE *f = fb_raw_open("q2_throughput.dat");
    if (f) {
        fprintf(f, "# procs fl mutex flock ofd (acquisitions/s)\n");
        for (int c = 0; c < NC; c++)
            fprintf(f, "%d %.6g %.6g %.6g %.6g\n", counts[c], out[c][0].throughput,
                    out[c][1].throughput, out[c][2].throughput, out[c][3].throughput);
        fclose(f);
    }
    fb_note("%d CPUs; processes pinned round-robin; %.1f s per run after %.2f s warm-up; the "
            "critical section takes two clock reads; mutual exclusion checked in every one",
            fb_ncpu(), (double)dur / 1e9, (double)dur / 1e10);
    double ratio = out[0][K_FL].throughput / out[0][K_MUTEX].throughput;
    fb_target("contended throughput between 2 processes at least that of a robust mutex",
              "fencelock / robust mutex (acquisitions/s)", ratio, "x", ">= 1", ratio >= 1);
    fb_daemon_stop(&d);
    fb_region_remove(region);
    return 0;
}
