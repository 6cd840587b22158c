/* SPDX-License-Identifier: MIT */
/*
 * lock_pair.c - the lock word's 16-byte primitives (src/shm/arch/pair.h) on the
 * architecture this build is for: fl__pair_cas and the write-free reader
 * fl__pair_load.  On aarch64 each instruction sequence is run on its own
 * (the ldaxp/stlxp loop always, casp where the CPU has LSE), and mixed, as
 * processes built for different CPUs would share a region.
 *
 * I1 rests on these: every acquisition is one CAS of both words from the
 * exact pair it read, so two acquirers never get the same token; a torn
 * snapshot, a lost update or a CAS that compared one word only would break
 * it.  The stress: writers (threads, then processes on a MAP_SHARED memfd
 * mapping) increment the pair by CAS loops for a while, every pair ever
 * written being (n, mix(n)), while a reader loads it with fl__pair_load
 * through a read-only mapping of the same file.  Then:
 *   - every snapshot (each failed CAS hands one back, each load returns
 *     one) has lease word == mix(state word): the two halves always change
 *     together, and a failed CAS's snapshot is not torn (the ldaxp/stlxp
 *     loop must store it back to prove it; GCC 12's 16-byte __sync CAS
 *     does not, and this test catches that under qemu);
 *   - the state seen by each writer and by the reader never goes back;
 *   - the final state is the number of successful CASes: no update lost,
 *     none applied twice;
 *   - every writer succeeded at least once and the reader never wrote (it
 *     would have died of SIGSEGV on its PROT_READ mapping).
 * FL_TEST_PAIR_IMPL=casp|ldaxp/stlxp|cmpxchg16b makes test_impl check which
 * sequence fl__pair_cas picked (the cross test runs it on a CPU without
 * LSE, QEMU_CPU=cortex-a57, to check the run-time fallback).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "shm/arch/pair.h"

#define WRITERS 4
#define MIN_SECONDS 1.0   /* each stress runs at least this long ... */
#define MAX_SECONDS 60.0  /* ... and until every writer has succeeded once */

typedef bool (*cas_fn)(struct fl__pair *p, uint64_t *s, uint64_t *l, uint64_t ns, uint64_t nl);

struct impl {
    const char *name;
    cas_fn writer[WRITERS]; /* writer i's CAS */
};

/* The lease word that belongs to state word n. */
static uint64_t mix(uint64_t n) { return (n * 0x9e3779b97f4a7c15ull) ^ (n >> 29) ^ 0x5555aaaaull; }

/* The shared page: the pair on its own cache line, the results after it. */
struct shared {
    struct fl__pair pair;
    char pad[48];
    _Atomic uint32_t ready, go, stop;
    _Atomic uint64_t done[WRITERS]; /* successful CASes per writer */
    _Atomic uint64_t failed, torn, backwards, reads;
};

static int shm_fd = -1;
static struct shared *rw;       /* writers' view */
static const struct shared *ro; /* the reader's, PROT_READ */

static void map_shared(void)
{
    shm_fd = memfd_create("fl-test-pair", MFD_CLOEXEC);
    assert_true(shm_fd >= 0);
    assert_int_equal(ftruncate(shm_fd, 4096), 0);
    rw = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
    ro = mmap(NULL, 4096, PROT_READ, MAP_SHARED, shm_fd, 0);
    assert_true(rw != MAP_FAILED && ro != MAP_FAILED);
    assert_int_equal((uintptr_t)&rw->pair % 16, 0);
}

static void unmap_shared(void)
{
    munmap(rw, 4096);
    munmap((void *)ro, 4096);
    close(shm_fd);
}

static void reset_shared(void)
{
    memset(rw, 0, sizeof *rw);
    atomic_store(&rw->pair.state, 0);
    atomic_store(&rw->pair.lease, mix(0));
}

/* ---- the one-threaded contract -------------------------------------------- */

static void check_contract(const char *name, cas_fn cas)
{
    struct fl__pair *p = &rw->pair;
    reset_shared();
    uint64_t s = 0, l = mix(0);
    /* success: writes both words, leaves the expected values in place */
    if (!cas(p, &s, &l, 1, mix(1)))
        fail_msg("%s: CAS from the current pair failed", name);
    assert_true(s == 0 && l == mix(0));
    uint64_t cs, cl;
    fl__pair_load(p, &cs, &cl);
    assert_true(cs == 1 && cl == mix(1));
    /* failure on the state word: nothing written, the current pair handed back */
    s = 0, l = mix(1);
    if (cas(p, &s, &l, 7, 7))
        fail_msg("%s: CAS succeeded with a wrong state word", name);
    assert_true(s == 1 && l == mix(1));
    /* failure on the lease word alone (renew and reap compare it too) */
    s = 1, l = mix(0);
    if (cas(p, &s, &l, 7, 7))
        fail_msg("%s: CAS succeeded with a wrong lease word", name);
    assert_true(s == 1 && l == mix(1));
    fl__pair_load(p, &cs, &cl);
    assert_true(cs == 1 && cl == mix(1));
    /* the words are not swapped: state is the lower address */
    assert_int_equal(atomic_load(&p->state), 1);
    assert_true(atomic_load(&p->lease) == mix(1));
    /* all 64 bits of both words count */
    atomic_store(&p->state, UINT64_MAX);
    atomic_store(&p->lease, 1ull << 63);
    s = UINT64_MAX, l = 1ull << 63;
    assert_true(cas(p, &s, &l, 1ull << 63, UINT64_MAX));
    fl__pair_load(p, &cs, &cl);
    assert_true(cs == 1ull << 63 && cl == UINT64_MAX);
}

/* ---- the implementations under test ----------------------------------------- */

static int impls(struct impl out[4])
{
    int n = 0;
    out[n].name = "fl__pair_cas (dispatch)";
    for (int i = 0; i < WRITERS; i++)
        out[n].writer[i] = fl__pair_cas;
    n++;
#if defined(__aarch64__)
    out[n].name = "ldaxp/stlxp";
    for (int i = 0; i < WRITERS; i++)
        out[n].writer[i] = fl__pair_cas_llsc;
    n++;
    if (fl__pair_have_lse()) {
        out[n].name = "casp";
        for (int i = 0; i < WRITERS; i++)
            out[n].writer[i] = fl__pair_cas_lse;
        n++;
        out[n].name = "casp and ldaxp/stlxp mixed";
        for (int i = 0; i < WRITERS; i++)
            out[n].writer[i] = i % 2 ? fl__pair_cas_lse : fl__pair_cas_llsc;
        n++;
    } else {
        print_message("this CPU has no LSE: casp not tested\n");
    }
#endif
    return n;
}

/* I1 */
static void test_contract(void **state)
{
    (void)state;
    map_shared();
    struct impl im[4];
    int n = impls(im);
    for (int i = 0; i < n; i++)
        for (int w = 0; w < WRITERS; w++)
            check_contract(im[i].name, im[i].writer[w]);
    unmap_shared();
}

static void test_impl(void **state)
{
    (void)state;
    const char *impl = fl__pair_impl();
    print_message("fl__pair_cas uses %s\n", impl);
#if defined(__aarch64__)
    bool lse = (getauxval(AT_HWCAP) & HWCAP_ATOMICS) != 0;
    assert_int_equal(fl__pair_have_lse(), lse);
    assert_string_equal(impl, lse ? "casp" : "ldaxp/stlxp");
#endif
    const char *want = getenv("FL_TEST_PAIR_IMPL");
    if (want && *want)
        assert_string_equal(impl, want);
}

/* ---- the stress --------------------------------------------------------------- */

static void writer_run(cas_fn cas, int id)
{
    struct fl__pair *p = &rw->pair;
    atomic_fetch_add(&rw->ready, 1);
    while (!atomic_load(&rw->go))
        fl__cpu_relax();
    uint64_t s = 0, l = 0, last = 0, done = 0, failed = 0, torn = 0, back = 0;
    fl__pair_load(p, &s, &l);
    while (!atomic_load_explicit(&rw->stop, memory_order_relaxed)) {
        for (int k = 0; k < 64; k++) {
            if (l != mix(s)) { /* a torn snapshot: count it, start again */
                torn++;
                fl__pair_load(p, &s, &l);
                continue;
            }
            if (s < last)
                back++;
            last = s;
            if (cas(p, &s, &l, s + 1, mix(s + 1))) {
                s++;
                l = mix(s);
                if (done++ == 0) /* the first success is what the main side waits for */
                    atomic_store(&rw->done[id], 1);
            } else {
                failed++;
            }
        }
    }
    atomic_store(&rw->done[id], done);
    atomic_fetch_add(&rw->failed, failed);
    atomic_fetch_add(&rw->torn, torn);
    atomic_fetch_add(&rw->backwards, back);
}

/* The reader never writes: it uses the PROT_READ view only. */
static void reader_run(void)
{
    struct fl__pair *p = (struct fl__pair *)&ro->pair;
    atomic_fetch_add(&rw->ready, 1);
    while (!atomic_load(&rw->go))
        fl__cpu_relax();
    uint64_t last = 0, reads = 0, torn = 0, back = 0;
    while (!atomic_load_explicit(&rw->stop, memory_order_relaxed)) {
        uint64_t s, l;
        fl__pair_load(p, &s, &l);
        reads++;
        if (l != mix(s))
            torn++;
        if (s < last)
            back++;
        last = s;
    }
    atomic_fetch_add(&rw->reads, reads);
    atomic_fetch_add(&rw->torn, torn);
    atomic_fetch_add(&rw->backwards, back);
}

struct thread_arg {
    cas_fn cas;
    int id; /* -1: the reader */
};

static void *thread_main(void *arg)
{
    const struct thread_arg *a = arg;
    if (a->id < 0)
        reader_run();
    else
        writer_run(a->cas, a->id);
    return NULL;
}

/* Start them, let them run MIN_SECONDS and until every writer succeeded
 * once, stop them. */
static void run_for_a_while(int parties)
{
    uint64_t t0 = th_now_ns();
    while (atomic_load(&rw->ready) < (uint32_t)parties) {
        if (th_now_ns() - t0 > (uint64_t)(MAX_SECONDS * 1e9))
            fail_msg("the stress parties did not start");
        usleep(1000);
    }
    atomic_store(&rw->go, 1);
    uint64_t start = th_now_ns();
    for (;;) {
        usleep(10000);
        double ran = (double)(th_now_ns() - start) / 1e9;
        bool all = true;
        for (int i = 0; i < WRITERS; i++)
            all &= atomic_load(&rw->done[i]) > 0;
        if ((ran >= MIN_SECONDS && all) || ran >= MAX_SECONDS)
            break;
    }
    atomic_store(&rw->stop, 1);
}

static void check_results(const char *name, const char *how)
{
    uint64_t sum = 0;
    for (int i = 0; i < WRITERS; i++) {
        uint64_t d = atomic_load(&rw->done[i]);
        if (d == 0)
            fail_msg("%s, %s: writer %d never succeeded", name, how, i);
        sum += d;
    }
    uint64_t s, l;
    fl__pair_load(&rw->pair, &s, &l);
    print_message("%-28s %-9s %9llu CASes, %9llu failed, %9llu reads\n", name, how,
                  (unsigned long long)sum, (unsigned long long)atomic_load(&rw->failed),
                  (unsigned long long)atomic_load(&rw->reads));
    if (atomic_load(&rw->torn) != 0)
        fail_msg("%s, %s: %llu torn snapshots (a state word with another pair's lease word)",
                 name, how, (unsigned long long)atomic_load(&rw->torn));
    if (atomic_load(&rw->backwards) != 0)
        fail_msg("%s, %s: the state went back %llu times", name, how,
                 (unsigned long long)atomic_load(&rw->backwards));
    if (s != sum || l != mix(s))
        fail_msg("%s, %s: final pair (%llu, %#llx) after %llu successful CASes: updates lost "
                 "or doubled",
                 name, how, (unsigned long long)s, (unsigned long long)l,
                 (unsigned long long)sum);
    assert_true(atomic_load(&rw->reads) > 0);
}

/* I1 */
static void test_stress_threads(void **state)
{
    (void)state;
    map_shared();
    struct impl im[4];
    int n = impls(im);
    for (int i = 0; i < n; i++) {
        reset_shared();
        pthread_t th[WRITERS + 1];
        struct thread_arg args[WRITERS + 1];
        for (int w = 0; w <= WRITERS; w++) {
            args[w] = (struct thread_arg){w < WRITERS ? im[i].writer[w] : NULL,
                                          w < WRITERS ? w : -1};
            assert_int_equal(pthread_create(&th[w], NULL, thread_main, &args[w]), 0);
        }
        run_for_a_while(WRITERS + 1);
        for (int w = 0; w <= WRITERS; w++)
            pthread_join(th[w], NULL);
        check_results(im[i].name, "threads");
    }
    unmap_shared();
}

/* I1: what the region needs: processes on one MAP_SHARED file */
static void test_stress_processes(void **state)
{
    (void)state;
    map_shared();
    struct impl im[4];
    int n = impls(im);
    for (int i = 0; i < n; i++) {
        reset_shared();
        pid_t pid[WRITERS + 1];
        for (int w = 0; w <= WRITERS; w++) {
            pid[w] = fork();
            assert_true(pid[w] >= 0);
            if (pid[w] == 0) {
                if (w < WRITERS)
                    writer_run(im[i].writer[w], w);
                else
                    reader_run();
                _exit(0);
            }
        }
        run_for_a_while(WRITERS + 1);
        for (int w = 0; w <= WRITERS; w++) {
            int st = 0;
            assert_int_equal(waitpid(pid[w], &st, 0), pid[w]);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                fail_msg("%s: %s %d ended with status %#x%s", im[i].name,
                         w < WRITERS ? "writer" : "reader", w, st,
                         WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV
                             ? " (SIGSEGV: a write to the read-only mapping?)"
                             : "");
        }
        check_results(im[i].name, "processes");
    }
    unmap_shared();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_impl),
        cmocka_unit_test(test_contract),
        cmocka_unit_test(test_stress_threads),
        cmocka_unit_test(test_stress_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
