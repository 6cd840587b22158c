/* SPDX-License-Identifier: MIT */
/*
 * lock_tokens.c - fencing tokens are unique and strictly increasing per key
 * under contention from several processes with several threads each.
 *
 * I1.  Three processes with three threads each hammer one hot key and 64
 * other keys (acquire with a timeout, release), half the time by name and
 * half by key handle (fl_key_resolve once per process, fl_acquire_key).  While it holds a key, a
 * holder checks, in memory shared by all processes, that nobody else is
 * inside (the lease is far longer than the run) and that its token is
 * greater than the last token any holder of that key saw; then it stores
 * its own.  A second phase uses 1 ms leases, so holders that overrun are
 * taken over: there tokens must still be unique, and each thread's own
 * tokens for a key must increase.  Every process writes the tokens it got
 * to a file; the parent checks uniqueness per key, that each key's tokens
 * are exactly F..F+N-1 with F the epoch's first token (T' = T + 1 above the
 * floor; a failed try or wait consumes none), and that N matches the key's
 * acquisition counter (a statistic: with 1 ms leases a holder preempted
 * right after acquiring may be taken over and its count lost, so there it
 * may be lower by at most the takeovers, never higher).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"

#define NPROC 3
#define NTHR 3
#define NKEYS 64             /* key 0 is the hot key, 1..NKEYS-1 the others */
#define KEY_EXPIRING NKEYS   /* phase 2 key, 1 ms leases */
#define ALLKEYS (NKEYS + 1)
#define ITER1 1500
#define ITER2 300
#define MAXREC (NTHR * (ITER1 + ITER2))

struct shared {
    _Atomic uint64_t last[ALLKEYS];
    _Atomic uint32_t inside[ALLKEYS];
    _Atomic uint32_t violations;
    _Atomic uint32_t takeovers; /* phase 2 acquisitions that took a lease over */
    _Atomic uint32_t errors;
    _Atomic int first_error;
};

struct rec {
    uint32_t key;
    uint32_t thread; /* proc * NTHR + thread */
    uint64_t token;
};

static struct shared *sh;

/* The CPU's spin-wait hint, while a holder works or overruns its lease. */
static inline void spin_hint(void)
{
#if defined(__x86_64__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
static char region_path[512];
static char out_dir[512];

static void key_name(uint32_t k, char *buf, size_t cap)
{
    if (k == 0)
        snprintf(buf, cap, "tok/hot");
    else if (k == KEY_EXPIRING)
        snprintf(buf, cap, "tok/expiring");
    else
        snprintf(buf, cap, "tok/k/%u", k);
}

struct worker {
    fl_region *r;
    const fl_key *keys; /* every key, resolved (ALLKEYS) */
    int proc, thr;
    struct rec *recs;
    int n;
};

static void note_error(int rc)
{
    atomic_fetch_add(&sh->errors, 1);
    int zero = 0;
    atomic_compare_exchange_strong(&sh->first_error, &zero, rc ? rc : -1);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned seed = (unsigned)(w->proc * 131 + w->thr * 7 + 1);
    char key[64];
    /* phase 1: mutual exclusion and order, long leases */
    for (int i = 0; i < ITER1; i++) {
        uint32_t k = (i % 2 == 0) ? 0 : 1 + (uint32_t)(rand_r(&seed) % (NKEYS - 1));
        key_name(k, key, sizeof key);
        fl_lease l;
        int rc = (i / 2 + w->thr + w->proc) % 2
                     ? fl_acquire_key(w->r, &w->keys[k], AG_S(60), (int64_t)AG_S(30), &l)
                     : fl_acquire(w->r, key, AG_S(60), (int64_t)AG_S(30), &l);
        if (rc != 0) {
            note_error(rc);
            continue;
        }
        if (atomic_fetch_add(&sh->inside[k], 1) != 0)
            atomic_fetch_add(&sh->violations, 1); /* two holders at once */
        if (l.token <= atomic_load(&sh->last[k]))
            atomic_fetch_add(&sh->violations, 1); /* token not above the last seen */
        atomic_store(&sh->last[k], l.token);
        for (int s = 0; s < (int)(rand_r(&seed) % 200); s++)
            spin_hint();
        atomic_fetch_sub(&sh->inside[k], 1);
        w->recs[w->n++] = (struct rec){k, (uint32_t)(w->proc * NTHR + w->thr), l.token};
        rc = fl_release(w->r, &l);
        if (rc != 0)
            note_error(rc);
    }
    /* phase 2: 1 ms leases, some holders overrun and are taken over */
    key_name(KEY_EXPIRING, key, sizeof key);
    for (int i = 0; i < ITER2; i++) {
        fl_lease l;
        int rc = (i + w->thr) % 2 ? fl_acquire_key(w->r, &w->keys[KEY_EXPIRING], AG_MS(1),
                                                   (int64_t)AG_S(30), &l)
                                  : fl_acquire(w->r, key, AG_MS(1), (int64_t)AG_S(30), &l);
        if (rc != 0) {
            note_error(rc);
            continue;
        }
        if (l.flags & FL_LEASE_EXPIRED)
            atomic_fetch_add(&sh->takeovers, 1);
        w->recs[w->n++] = (struct rec){KEY_EXPIRING, (uint32_t)(w->proc * NTHR + w->thr),
                                       l.token};
        if (i % 4 == 0)
            while (th_now_ns() <= l.deadline_ns) /* overrun the lease on purpose */
                spin_hint();
        rc = fl_release(w->r, &l);
        if (rc != 0 && rc != -ESTALE) /* -ESTALE: expired, maybe taken over */
            note_error(rc);
    }
    return NULL;
}

static int proc_main(void *arg, int in, int out)
{
    int proc = (int)(intptr_t)arg;
    fl_region *r;
    int rc = fl_open(region_path, &r);
    if (rc != 0)
        return 10;
    th_send(out, "ready");
    char buf[64];
    if (th_recv(in, buf, sizeof buf, 30000) != 0 || strcmp(buf, "go") != 0)
        return 11;
    static fl_key keys[ALLKEYS];
    for (uint32_t k = 0; k < ALLKEYS; k++) {
        char key[64];
        key_name(k, key, sizeof key);
        if (fl_key_resolve(r, key, &keys[k]) != 0)
            return 16;
    }
    struct worker w[NTHR];
    pthread_t t[NTHR];
    for (int i = 0; i < NTHR; i++) {
        w[i] = (struct worker){r, keys, proc, i, calloc(ITER1 + ITER2, sizeof(struct rec)), 0};
        if (!w[i].recs || pthread_create(&t[i], NULL, worker_main, &w[i]) != 0)
            return 12;
    }
    for (int i = 0; i < NTHR; i++)
        pthread_join(t[i], NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/tokens.%d", out_dir, proc);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 13;
    for (int i = 0; i < NTHR; i++)
        if (fwrite(w[i].recs, sizeof(struct rec), (size_t)w[i].n, f) != (size_t)w[i].n)
            return 14;
    if (fclose(f) != 0)
        return 15;
    fl_close(r);
    th_send(out, "done");
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* I1 */
static void test_tokens_unique_and_increasing(void **state)
{
    (void)state;
    th_daemon d;
    snprintf(region_path, sizeof region_path, "%s", th_path("tokens.region"));
    snprintf(out_dir, sizeof out_dir, "%s", th_tmpdir());
    ag_daemon_start(&d, region_path);
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);

    th_child c[NPROC];
    for (int p = 0; p < NPROC; p++) {
        assert_int_equal(th_child_start(&c[p], proc_main, (void *)(intptr_t)p), 0);
        th_expect(c[p].from_child, "ready", 20000);
    }
    for (int p = 0; p < NPROC; p++)
        th_send(c[p].to_child, "go");
    for (int p = 0; p < NPROC; p++) {
        th_expect(c[p].from_child, "done", 50000);
        assert_int_equal(th_child_wait(&c[p], 20000), 0);
    }
    if (atomic_load(&sh->errors))
        fail_msg("%u lock calls failed, first with %s", atomic_load(&sh->errors),
                 fl_err_name(atomic_load(&sh->first_error)));
    assert_int_equal(atomic_load(&sh->violations), 0);

    /* gather every token per key */
    uint64_t *tokens[ALLKEYS];
    size_t ntok[ALLKEYS] = {0};
    for (int k = 0; k < ALLKEYS; k++) {
        tokens[k] = calloc((size_t)NPROC * MAXREC, sizeof(uint64_t));
        assert_non_null(tokens[k]);
    }
    uint64_t last_of_thread[NPROC * NTHR][ALLKEYS];
    memset(last_of_thread, 0, sizeof last_of_thread);
    size_t total = 0;
    for (int p = 0; p < NPROC; p++) {
        char path[600];
        snprintf(path, sizeof path, "%s/tokens.%d", out_dir, p);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        struct rec rc;
        while (fread(&rc, sizeof rc, 1, f) == 1) {
            assert_true(rc.key < ALLKEYS && rc.thread < NPROC * NTHR);
            /* one thread's acquisitions happen in program order */
            assert_true(rc.token > last_of_thread[rc.thread][rc.key]);
            last_of_thread[rc.thread][rc.key] = rc.token;
            tokens[rc.key][ntok[rc.key]++] = rc.token;
            total++;
        }
        fclose(f);
    }
    assert_int_equal(total, (size_t)NPROC * NTHR * (ITER1 + ITER2));

    fl_region *ro;
    assert_int_equal(fl_open_readonly(region_path, &ro), 0);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(ro, &ri), 0);
    for (int k = 0; k < ALLKEYS; k++) {
        char key[64];
        key_name((uint32_t)k, key, sizeof key);
        if (ntok[k] == 0)
            continue;
        qsort(tokens[k], ntok[k], sizeof(uint64_t), cmp_u64);
        for (size_t i = 1; i < ntok[k]; i++)
            if (tokens[k][i] == tokens[k][i - 1])
                fail_msg("key %s: token %" PRIu64 " handed out twice", key, tokens[k][i]);
        /* a fresh region, one supervisor run: the tokens of a key are
         * exactly floor .. floor + N - 1 */
        assert_int_equal(tokens[k][0], ri.token_floor);
        assert_int_equal(FL_TOKEN_COUNTER(tokens[k][0]), 1);
        assert_int_equal(tokens[k][ntok[k] - 1], ri.token_floor + ntok[k] - 1);
        fl_lock_info li;
        assert_int_equal(ag_lock_info(ro, key, &li), 0);
        assert_int_equal(li.token, tokens[k][ntok[k] - 1]);
        if (k == KEY_EXPIRING) /* takeovers: see above */
            assert_true(li.acquisitions <= ntok[k] &&
                        li.acquisitions + atomic_load(&sh->takeovers) >= ntok[k]);
        else
            assert_int_equal(li.acquisitions, ntok[k]);
        if (k == 0 || k == KEY_EXPIRING)
            print_message("%s: %zu acquisitions, %llu contended, %llu expired leases taken "
                          "over\n",
                          key, ntok[k], (unsigned long long)li.contended,
                          (unsigned long long)li.expiries_taken);
        free(tokens[k]);
    }
    assert_int_equal(ntok[0], (size_t)NPROC * NTHR * ITER1 / 2);
    assert_int_equal(ntok[KEY_EXPIRING], (size_t)NPROC * NTHR * ITER2);
    fl_close(ro);
    munmap(sh, sizeof *sh);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_tokens_unique_and_increasing, ag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
