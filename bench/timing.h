/* SPDX-License-Identifier: MIT */
/*
 * timing.h - the timing helper every benchmark shares: CLOCK_MONOTONIC in
 * nanoseconds, CPU pinning, sample sets with median and p99, and batched
 * measurement of fast operations (warm-up, then repetitions of a batch).
 *
 * Fast operations (tens of nanoseconds) are timed in batches: a clock read
 * costs about as much as the operation, so one sample is the mean time of a
 * batch of B operations, and the median and p99 are over those samples.
 * Slow events (handoffs, takeovers, deaths) are timed one by one.
 */
#ifndef FB_TIMING_H
#define FB_TIMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FB_US 1000ull
#define FB_MS 1000000ull
#define FB_S 1000000000ull

/* CLOCK_MONOTONIC in nanoseconds (the clock leases are measured on). */
uint64_t fb_now_ns(void);

/* Busy-wait for ns nanoseconds (work inside or outside a critical section). */
void fb_spin_ns(uint64_t ns);
/* The CPU's spin-wait hint (pause, yield) for busy loops. */
static inline void fb_cpu_relax(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* CPUs this process may run on (as at its start, before any pinning). */
int fb_ncpu(void);
/* Undo fb_pin: allow every CPU of the start again. */
int fb_unpin(void);
/* Pin the calling process to CPU (cpu modulo the allowed CPUs); 0 or -errno. */
int fb_pin(int cpu);

/* A growable set of samples (doubles, in nanoseconds unless said). */
typedef struct fb_samples {
    double *v;
    size_t n, cap;
    bool sorted;
} fb_samples;

void fb_samples_init(fb_samples *s);
void fb_samples_add(fb_samples *s, double x);
void fb_samples_free(fb_samples *s);
/* Quantile q in [0,1] (nearest rank on the sorted samples); NAN when empty. */
double fb_quantile(fb_samples *s, double q);
double fb_mean(const fb_samples *s);

typedef struct fb_stats {
    double median, p99, mean, min, max;
    size_t n;
} fb_stats;
fb_stats fb_stats_of(fb_samples *s);

/* Run op(ctx, batch): `batch` operations per call.  Warm up for warm_ns,
 * then time calls until run_ns has passed or max_reps samples were taken
 * (at least 20).  batch 0 = choose one so a call takes about 20 us.  Each
 * sample (per operation: call time / batch) goes into out if not NULL.
 * Returns the statistics of the per-operation samples; *batch_out, if not
 * NULL, receives the batch used. */
typedef void (*fb_op_fn)(void *ctx, size_t batch);
fb_stats fb_measure(fb_op_fn op, void *ctx, size_t batch, uint64_t warm_ns, uint64_t run_ns,
                    size_t max_reps, fb_samples *out, size_t *batch_out);

#endif
