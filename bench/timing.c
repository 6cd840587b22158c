/* SPDX-License-Identifier: MIT */
/* timing.c - see timing.h. */
#include "timing.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t fb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * FB_S + (uint64_t)ts.tv_nsec;
}

void fb_spin_ns(uint64_t ns)
{
    uint64_t end = fb_now_ns() + ns;
    while (fb_now_ns() < end)
        fb_cpu_relax();
}

/* The CPUs this process was allowed at the first call, before any pinning. */
static cpu_set_t first_set;
static int first_n;

static void first_affinity(void)
{
    if (first_n)
        return;
    if (sched_getaffinity(0, sizeof first_set, &first_set) != 0) {
        CPU_ZERO(&first_set);
        CPU_SET(0, &first_set);
    }
    first_n = CPU_COUNT(&first_set);
    if (first_n < 1)
        first_n = 1;
}

int fb_ncpu(void)
{
    first_affinity();
    return first_n;
}

int fb_unpin(void)
{
    first_affinity();
    return sched_setaffinity(0, sizeof first_set, &first_set) == 0 ? 0 : -errno;
}

int fb_pin(int cpu)
{
    /* Pick the cpu-th CPU of those allowed at the first call, so pinning works
     * inside a restricted cpuset too. */
    static int allowed[CPU_SETSIZE];
    static int nallowed;
    first_affinity();
    if (nallowed == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &first_set))
                allowed[nallowed++] = i;
    if (nallowed == 0)
        return -EINVAL;
    if (cpu < 0)
        cpu = -cpu;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(allowed[cpu % nallowed], &one);
    return sched_setaffinity(0, sizeof one, &one) == 0 ? 0 : -errno;
}

void fb_samples_init(fb_samples *s) { memset(s, 0, sizeof *s); }

void fb_samples_add(fb_samples *s, double x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        double *v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            perror("fb_samples_add");
            exit(1);
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    s->sorted = false;
}

void fb_samples_free(fb_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fb_quantile(fb_samples *s, double q)
{
    if (s->n == 0)
        return NAN;
    if (!s->sorted) {
        qsort(s->v, s->n, sizeof *s->v, cmp_double);
        s->sorted = true;
    }
    if (q <= 0)
        return s->v[0];
    size_t rank = (size_t)ceil(q * (double)s->n); /* nearest rank, 1-based */
    if (rank < 1)
        rank = 1;
    if (rank > s->n)
        rank = s->n;
    return s->v[rank - 1];
}

double fb_mean(const fb_samples *s)
{
    if (s->n == 0)
        return NAN;
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += s->v[i];
    return sum / (double)s->n;
}

fb_stats fb_stats_of(fb_samples *s)
{
    fb_stats st = {NAN, NAN, NAN, NAN, NAN, s->n};
    if (s->n == 0)
        return st;
    st.median = fb_quantile(s, 0.5);
    st.p99 = fb_quantile(s, 0.99);
    st.min = s->v[0];
    st.max = s->v[s->n - 1];
    st.mean = fb_mean(s);
    return st;
}

fb_stats fb_measure(fb_op_fn op, void *ctx, size_t batch, uint64_t warm_ns, uint64_t run_ns,
                    size_t max_reps, fb_samples *out, size_t *batch_out)
{
    uint64_t t = fb_now_ns();
    if (batch == 0) {
        /* Calibrate: the per-operation time of a few growing batches, after
         * a first call that takes the page faults and cache misses. */
        op(ctx, 16);
        size_t b = 4;
        for (;;) {
            uint64_t a = fb_now_ns();
            op(ctx, b);
            uint64_t d = fb_now_ns() - a;
            if (d >= 20 * FB_US || b >= 100000) {
                double per = (double)d / (double)b;
                batch = (size_t)(20000.0 / (per > 0.5 ? per : 0.5));
                break;
            }
            b *= 4;
        }
        if (batch < 1)
            batch = 1;
        if (batch > 100000)
            batch = 100000;
    }
    while (fb_now_ns() - t < warm_ns)
        op(ctx, batch);
    fb_samples local;
    fb_samples_init(&local);
    fb_samples *s = out ? out : &local;
    uint64_t start = fb_now_ns();
    for (size_t rep = 0; rep < max_reps; rep++) {
        uint64_t a = fb_now_ns();
        op(ctx, batch);
        uint64_t b = fb_now_ns();
        fb_samples_add(s, (double)(b - a) / (double)batch);
        if (rep >= 20 && b - start >= run_ns)
            break;
    }
    fb_stats st = fb_stats_of(s);
    if (batch_out)
        *batch_out = batch;
    fb_samples_free(&local);
    return st;
}
