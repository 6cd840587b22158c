/* SPDX-License-Identifier: MIT */
/*
 * chaos.h - the chaos harness (issue 8): what the controller, the workers,
 * the final phase and the checker of tests/chaos share.
 *
 * One program, fl_chaos, runs in three roles:
 *   controller  starts fencelockd on a private region, forks N workers and
 *               injects seeded faults (SIGSTOP/SIGCONT pauses, SIGKILL of
 *               workers and of the supervisor, stress-ng load); logs every
 *               fault to controller.log
 *   worker      acquires keys, commits self-checking values, reads records,
 *               renews and releases (or lets leases expire); logs every
 *               operation before and after the call to w<ID>.log
 *   final       after all workers are gone: inspects every lock, reads and
 *               rewrites every record through the library (final.log)
 * and then the checker reads every log (check.c, check_log.c) and verifies
 * I1..I8 on the history (check_lock.c, check_record.c).  `fl_chaos --check
 * DIR` re-checks the logs of an earlier run.
 *
 * LOG FORMAT (one line per write(2), O_APPEND: a SIGKILL leaves whole lines;
 * a torn last line is ignored)
 *   B <op#> <t_ns> <op> key=value...     written before the library call
 *   A <op#> <t_ns> <op> key=value...     written after it, same op#
 * t_ns is CLOCK_MONOTONIC, the clock of lease deadlines, shared by every
 * process of the host, so intervals [B, A] of different processes compare.
 * An operation with a B line and no A line was in flight when its worker
 * died: it may or may not have taken effect ("maybe").
 *
 * controller.log:  <t_ns> <event> key=value...
 */
#ifndef FL_CHAOS_H
#define FL_CHAOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fencelock.h"

#define CH_MS 1000000ull
#define CH_S 1000000000ull

#define CH_MAX_KEYS 32
#define CH_MAX_RPK 8
#define CH_MAX_RECORDS (CH_MAX_KEYS * CH_MAX_RPK)
#define CH_MAX_WORKERS 64
#define CH_FINAL_WID 1000000 /* the worker id of the final phase */

/* Stress levels for stress-ng. */
enum { CH_STRESS_NONE = 0, CH_STRESS_LIGHT = 1, CH_STRESS_FULL = 2 };

struct ch_config {
    uint64_t seed;
    uint64_t duration_ns;
    int workers;
    int keys;            /* keys chaos/k0 .. */
    int rpk;             /* records per key: chaos/k<k>/r<j> */
    uint64_t lease_ns;   /* nominal lease; workers use [lease/2, 2*lease] */
    uint64_t slack_ns;   /* scheduling slack granted to every timing bound */
    uint64_t pause_mean_ns;  /* mean time between pauses (exponential) */
    uint64_t kill_mean_ns;   /* mean time between worker kills */
    uint64_t dkill_mean_ns;  /* mean time between supervisor kills (0: never) */
    uint64_t ddown_max_ns;   /* supervisor down time: uniform [0, this] */
    int stress;          /* CH_STRESS_* */
    int spare_buffers;
    int record_size;
    bool keep;           /* keep the run directory even on success */
    bool verbose;
    char dir[512];       /* logs, state file, daemon log */
    char region[512];    /* the region file (on tmpfs) */
    char fencelockd[512];
};

/* ---- time, randomness, names ---------------------------------------------- */
uint64_t ch_now(void);
void ch_sleep_until(uint64_t t);
void ch_sleep_ns(uint64_t ns);

typedef struct ch_rng {
    uint64_t s;
} ch_rng;
void ch_rng_seed(ch_rng *r, uint64_t seed, uint64_t stream);
uint64_t ch_rng_next(ch_rng *r);
uint64_t ch_rng_below(ch_rng *r, uint64_t n);           /* [0, n) */
uint64_t ch_rng_range(ch_rng *r, uint64_t lo, uint64_t hi); /* [lo, hi] */
bool ch_rng_chance(ch_rng *r, unsigned percent);
uint64_t ch_rng_exp(ch_rng *r, uint64_t mean);           /* exponential */
uint64_t ch_rng_logu(ch_rng *r, uint64_t lo, uint64_t hi); /* log-uniform */

void ch_key_name(char *buf, size_t cap, int key);
void ch_rec_name(char *buf, size_t cap, int rec); /* rec = key * rpk + j */

/* ---- self-checking values ---------------------------------------------------
 * A value (little-endian, host order on x86-64 and aarch64):
 *   magic u64 | wid u32 | rec u32 | seq u64 | token u64 | len u32 | 0 u32 |
 *   filler (from a PRNG seeded by wid, seq, token) | FNV-1a 64 of all before
 * so a read names its writer, its sequence number and its token, and any
 * torn or mixed bytes fail the checksum. */
#define CH_VAL_MAGIC 0x534f414843464c31ull /* "1LFCHAOS" */
#define CH_VAL_HDR 40u
#define CH_VAL_MIN (CH_VAL_HDR + 8u)
struct ch_value {
    uint32_t wid;
    uint32_t rec;
    uint64_t seq;
    uint64_t token;
    uint32_t len;
    uint64_t sum;
};
/* Fill buf[0..len) with the value of (wid, rec, seq, token); returns its checksum. */
uint64_t ch_value_make(void *buf, size_t len, uint32_t wid, uint32_t rec, uint64_t seq,
                       uint64_t token);
/* NULL if buf[0..len) is a well-formed value (decoded into *v), else a reason. */
const char *ch_value_parse(const void *buf, size_t len, struct ch_value *v);

/* ---- logs ---------------------------------------------------------------------- */
typedef struct ch_log {
    int fd;
    uint64_t op;
} ch_log;
int ch_log_open(ch_log *l, const char *path);
/* Write one whole line: "<prefix...>" as formatted, plus a newline, in one write(2). */
void ch_log_line(ch_log *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the config file (DIR/config) ----------------------------------------------- */
int ch_config_write(const struct ch_config *c);
int ch_config_read(struct ch_config *c, const char *dir);

/* ---- roles --------------------------------------------------------------------- */
/* Worker wid until end_ns (CLOCK_MONOTONIC); the exit status of the process. */
int ch_worker(const struct ch_config *c, int wid, uint64_t end_ns);
/* The final phase: inspect, read and rewrite everything (final.log). */
int ch_final(const struct ch_config *c);
/* Run the controller; returns 0, or -1 if the run could not be set up. */
int ch_controller(struct ch_config *c);
/* Check the logs of dir; prints the summary table; returns the violation count
 * (or -1 if the logs cannot be read). */
long ch_check(const struct ch_config *c);

#endif
