/* SPDX-License-Identifier: MIT */
/*
 * uncontended.c - question 1: what an uncontended lock operation costs.
 *
 * One process pinned to one CPU times, in batches, each operation against a
 * key (or lock) that nobody else uses:
 *   fencelock  acquire+release by key, acquire+release by key handle
 *              (fl_key_resolve once, then fl_acquire_key), renew, check, try
 *              of a held key
 *   baselines  robust process-shared pthread mutex lock+unlock (and trylock
 *              of a held one), flock LOCK_EX+LOCK_UN, OFD fcntl lock+unlock
 *   the floor  one clock_gettime(CLOCK_MONOTONIC): every acquisition reads
 *              the clock once to set its deadline; and (x86-64) two
 *              16-byte compare-and-swaps (lock cmpxchg16b) on a private
 *              pair, what acquire and release each do once (slot.c, WHY
 *              ONE 16-BYTE CAS): no acquire+release can cost less than the
 *              two together on this machine
 * The operations are measured in interleaved rounds so that a noisy moment
 * of the machine hits all of them alike.  The region is served by a real
 * fencelockd (the process is registered, as in production).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "fencelock.h"

#define KEY "bench/uncontended"
#define LEASE_NS (60ull * FB_S)

static fl_region *R;
static fl_key K; /* KEY, resolved once */
static fl_lease held; /* for renew and check */
static pthread_mutex_t *mtx;
static int flock_fd, ofd_fd;
static volatile int sink;

static void op_fl_acqrel(void *ctx, size_t n)
{
    (void)ctx;
    fb_acquire_release(R, KEY, LEASE_NS, n);
}

static void op_fl_acqrel_key(void *ctx, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        fl_lease l;
        if (fl_acquire_key(R, &K, LEASE_NS, 0, &l) != 0)
            fb_die("acquire by key handle: %s", fl_last_error());
        if (fl_release(R, &l) != 0)
            fb_die("release: %s", fl_last_error());
    }
}

static void op_clock(void *ctx, size_t n)
{
    (void)ctx;
    long sum = 0;
    for (size_t i = 0; i < n; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sum += ts.tv_nsec;
    }
    sink = (int)sum;
}

#if defined(__x86_64__)
/* Two 16-byte CASes per op, each from the pair just read, as acquire and
 * release make them (the pair is this process's, so they always succeed). */
static void op_cas16(void *ctx, size_t n)
{
    (void)ctx;
    static struct {
        _Alignas(16) uint64_t s;
        uint64_t l;
    } pair;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            uint64_t s = __atomic_load_n(&pair.s, __ATOMIC_ACQUIRE);
            uint64_t l = __atomic_load_n(&pair.l, __ATOMIC_ACQUIRE);
            unsigned char ok;
            __asm__ __volatile__("lock cmpxchg16b %[m]"
                                 : "=@ccz"(ok), [m] "+m"(pair), "+a"(s), "+d"(l)
                                 : "b"(s ^ 1), "c"(l + 1)
                                 : "memory");
            if (!ok)
                fb_die("cmpxchg16b of a private pair failed");
        }
    }
}
#endif

static void op_fl_renew(void *ctx, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        if (fl_renew(R, &held, LEASE_NS) != 0)
            fb_die("renew: %s", fl_last_error());
}

static void op_fl_check(void *ctx, size_t n)
{
    (void)ctx;
    int e = 0;
    for (size_t i = 0; i < n; i++)
        e |= fl_check(R, &held);
    if (e)
        fb_die("check: %s", fl_last_error());
}

static void op_fl_busy(void *ctx, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        fl_lease l;
        if (fl_acquire(R, "bench/held", LEASE_NS, 0, &l) != -EBUSY)
            fb_die("try of a held key did not say EBUSY");
    }
}

static void op_mutex(void *ctx, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        int e = pthread_mutex_lock(mtx);
        e |= pthread_mutex_unlock(mtx);
        if (e)
            fb_die("robust mutex lock/unlock failed");
    }
}

static void op_mutex_busy(void *ctx, size_t n)
{
    pthread_mutex_t *m = ctx;
    for (size_t i = 0; i < n; i++)
        if (pthread_mutex_trylock(m) != EBUSY)
            fb_die("trylock of a held robust mutex did not say EBUSY");
}

static void op_flock(void *ctx, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        if (flock(flock_fd, LOCK_EX) != 0 || flock(flock_fd, LOCK_UN) != 0)
            fb_die("flock: %s", strerror(errno));
}

static void op_ofd(void *ctx, size_t n)
{
    (void)ctx;
    struct flock wr = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    struct flock un = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
    for (size_t i = 0; i < n; i++)
        if (fcntl(ofd_fd, F_OFD_SETLKW, &wr) != 0 || fcntl(ofd_fd, F_OFD_SETLK, &un) != 0)
            fb_die("OFD lock: %s", strerror(errno));
}

static pthread_mutex_t *robust_mutex(void)
{
    pthread_mutex_t *m = fb_shared(sizeof *m);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (pthread_mutex_init(m, &a) != 0)
        fb_die("pthread_mutex_init");
    pthread_mutexattr_destroy(&a);
    return m;
}

struct op {
    const char *name, *raw;
    fb_op_fn fn;
    void *ctx;
    size_t batch;
    fb_samples s;
};

int main(int argc, char **argv)
{
    fb_init(argc, argv, 1, "uncontended");
    fb_pin(1);
    char region[600];
    snprintf(region, sizeof region, "%s", fb_path("q1.region"));
    fb_daemon d;
    if (fb_daemon_start(&d, region, NULL, 30) != 0)
        fb_die("cannot start fencelockd");
    R = fb_open(region, true);
    if (fl_key_resolve(R, KEY, &K) != 0)
        fb_die("resolve: %s", fl_last_error());
    if (fl_acquire(R, KEY "/held", LEASE_NS, 0, &held) != 0)
        fb_die("acquire: %s", fl_last_error());
    fl_lease other;
    if (fl_acquire(R, "bench/held", LEASE_NS, 0, &other) != 0)
        fb_die("acquire: %s", fl_last_error());
    mtx = robust_mutex();
    pthread_mutex_t *held_mtx = robust_mutex();
    pthread_mutex_lock(held_mtx);
    flock_fd = open(fb_path("q1.flock"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ofd_fd = open(fb_path("q1.ofd"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (flock_fd < 0 || ofd_fd < 0)
        fb_die("lock files: %s", strerror(errno));

    struct op ops[] = {
        {"fencelock acquire+release by key", "q1_fl_acqrel", op_fl_acqrel, NULL, 0, {0}},
        {"fencelock acquire+release by key handle", "q1_fl_acqrel_key", op_fl_acqrel_key, NULL,
         0, {0}},
        {"fencelock renew", "q1_fl_renew", op_fl_renew, NULL, 0, {0}},
        {"fencelock check", "q1_fl_check", op_fl_check, NULL, 0, {0}},
        {"fencelock try of a held key (EBUSY)", "q1_fl_busy", op_fl_busy, NULL, 0, {0}},
        {"robust pthread mutex lock+unlock", "q1_mutex", op_mutex, NULL, 0, {0}},
        {"robust pthread mutex trylock of a held one", "q1_mutex_busy", op_mutex_busy,
         held_mtx, 0, {0}},
        {"flock LOCK_EX+LOCK_UN", "q1_flock", op_flock, NULL, 0, {0}},
        {"OFD fcntl lock+unlock", "q1_ofd", op_ofd, NULL, 0, {0}},
        {"clock_gettime(CLOCK_MONOTONIC), the floor", "q1_clock", op_clock, NULL, 0, {0}},
#if defined(__x86_64__)
        {"two cmpxchg16b (acquire's and release's pair CAS), the floor", "q1_cas16", op_cas16,
         NULL, 0, {0}},
#endif
    };
    enum { O_ACQREL, O_ACQREL_KEY, O_MUTEX = 5, O_FLOCK = 7, O_OFD, O_CLOCK, O_CAS16 };
    enum { N = sizeof ops / sizeof ops[0] };
    int rounds = fb_opt.full ? 10 : 5;
    uint64_t per = (fb_opt.full ? 600 : 150) * FB_MS; /* per op per round */
    double need = (double)rounds * N * ((double)per / 1e9 + 0.02) + 2;
    if (fb_budget_left() < need) {
        per = (uint64_t)((fb_budget_left() - 2) / rounds / N * 1e9 * 0.8);
        if (per < 10 * FB_MS)
            per = 10 * FB_MS;
    }
    for (int i = 0; i < N; i++)
        fb_samples_init(&ops[i].s);
    for (int round = 0; round < rounds; round++)
        for (int i = 0; i < N; i++)
            fb_measure(ops[i].fn, ops[i].ctx, ops[i].batch, round == 0 ? 50 * FB_MS : 5 * FB_MS,
                       per, 1000000, &ops[i].s, &ops[i].batch);

    fb_stats st[N];
    for (int i = 0; i < N; i++) {
        st[i] = fb_stats_of(&ops[i].s);
        fb_result_stats(ops[i].name, &st[i], "ns");
        fb_result(ops[i].name, "batch", (double)ops[i].batch, "ops");
        fb_raw_cdf(ops[i].raw, &ops[i].s);
    }
    fb_note("one process pinned to one CPU; median and p99 of per-operation times over "
            "batches (batch = ops per timed sample); %d interleaved rounds", rounds);

    double fl = st[O_ACQREL].median, flk = st[O_ACQREL_KEY].median, mutex = st[O_MUTEX].median;
    double r_mutex = fl / mutex, r_flock = st[O_FLOCK].median / fl, r_ofd = st[O_OFD].median / fl;
    double r_key = flk / mutex;
    fb_note("every acquisition reads CLOCK_MONOTONIC once (its lease deadline): the clock read "
            "alone is %.2fx the robust mutex here; without it by key is %.2fx and by key "
            "handle %.2fx the mutex",
            st[O_CLOCK].median / mutex, (fl - st[O_CLOCK].median) / mutex,
            (flk - st[O_CLOCK].median) / mutex);
#if defined(__x86_64__)
    double floor_ns = st[O_CLOCK].median + st[O_CAS16].median;
    fb_note("the floor of any acquire+release here: a clock read and two 16-byte CAS = %.1f ns "
            "= %.2fx the robust mutex (by key handle: %.1f ns above it; by key: %.1f ns)",
            floor_ns, floor_ns / mutex, flk - floor_ns, fl - floor_ns);
#endif
    fb_target("uncontended acquire+release at most 4x a robust mutex lock+unlock",
              "fencelock / robust mutex (median)", r_mutex, "x", "<= 4", r_mutex <= 4);
    fb_target("uncontended acquire+release by key at most 3.5x a robust mutex (issue 17)",
              "fencelock by key / robust mutex (median)", r_mutex, "x", "<= 3.5", r_mutex <= 3.5);
    fb_target("uncontended acquire+release by key handle at most 3x a robust mutex (issue 17)",
              "fencelock by key handle / robust mutex (median)", r_key, "x", "<= 3", r_key <= 3);
    fb_target("uncontended acquire+release at least 20x faster than flock",
              "flock / fencelock (median)", r_flock, "x", ">= 20", r_flock >= 20);
    fb_target("uncontended acquire+release at least 20x faster than OFD locks",
              "OFD / fencelock (median)", r_ofd, "x", ">= 20", r_ofd >= 20);

    fl_release(R, &held);
    fl_release(R, &other);
    fl_close(R);
    fb_daemon_stop(&d);
    fb_region_remove(region);
    (void)sink;
    return 0;
}
