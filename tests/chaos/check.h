/* SPDX-License-Identifier: MIT */
/*
 * check.h - what the parts of the chaos checker share: the operations and
 * workers read from the logs (check_log.c), the holdings built from them
 * (check_lock.c), the checker's one state S, and the reporting of
 * violations and of operations (check.c).  Internal to the checker: the
 * rest of fl_chaos knows only ch_check() (chaos.h).
 */
#ifndef FL_CHAOS_CHECK_H
#define FL_CHAOS_CHECK_H

#include "chaos.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { K_OPEN, K_ACQ, K_RENEW, K_CHECK, K_COMMIT, K_READ, K_RELEASE, K_WORK, K_CLOSE, K_DROP, K_N };
extern const char *const kind_name[K_N];

struct op {
    uint8_t kind;
    bool done, strict, xkey, ok;
    int8_t reg;
    int w; /* worker index */
    int key, rec;
    int rc;
    uint32_t flags, len, vw, vrec;
    uint64_t b, a; /* a: 0 if not done */
    uint64_t tok, lease, dl, cpu, seq, sum, acc, fence, vseq, vtok, vsum;
    int64_t timeout;
    int hold;
    int src; /* commit op a read's value came from, -1 */
};

struct pause {
    uint64_t b, e;
};

struct worker {
    int wid;
    int pid;
    bool seen, killed, exited, straggler;
    int exit_status;
    bool exit_expected;
    uint64_t start_t, kill_t, exit_t, death_t;
    int reg; /* registration of its (last) open: 1, 0, or -1 if never opened */
    size_t op0, nops;
    struct pause *pauses;
    size_t npauses, cpauses;
    int *commits; /* op index of commit seq s at [s - 1] */
    size_t ncommits, ccommits;
};

struct seg { /* a period in which a lease was certainly held */
    uint64_t b, e, dl;
    int end; /* why it ends at e: SEG_DL (deadline or close), SEG_OP (a renew or release
                was called), SEG_DEATH (its worker was killed) */
};
enum { SEG_DL, SEG_OP, SEG_DEATH };

struct hold {
    int w, acq, key;
    bool maybe;     /* acquisition in flight when its worker died */
    uint64_t tok;   /* 0 if maybe */
    uint32_t flags;
    uint64_t pb, pe; /* possibly held: [pb, pe] */
    uint64_t pd;     /* maybe: the last instant its acquisition could take effect */
    uint64_t e1;     /* held certainly from its effect (inside [B, A] of the acquisition)
                        until e1: its first deadline, renewal or release call, death */
    int seg0, nseg;
    int rel; /* op index of its release, -1 */
    bool rel_ok;
};

struct dstart {
    uint64_t ready, floor;
};

struct updown { /* the supervisor up from b to e */
    uint64_t b, e;
};

struct stall { /* the controller could not run from b to e: the machine stalled */
    uint64_t b, e;
};

struct st {
    const struct ch_config *c;
    struct op *ops;
    size_t nops, cops;
    struct worker *w;
    size_t nw;
    int final_w;
    struct hold *h;
    size_t nh, ch;
    struct seg *segs;
    size_t nsegs, csegs;
    struct dstart ds[4096];
    size_t nds;
    struct updown up[4096];
    size_t nup;
    struct stall *stalls;
    size_t nstalls, cstalls;
    uint64_t stall_ns, stall_max;
    uint64_t t0, tend;
    long violations, warnings;
    FILE *vf;
    /* counts */
    long pauses, kills, dkills, dstarts, problems, final_status, stress_runs;
    long byop[K_N], maybe_ops;
    long acq_ok, acq_busy, acq_timedout, takeovers, owner_died, rejections, strict_rejections,
        xkey_refused, renew_stale, release_stale, check_stale, reads_checked, reads_enoent,
        enospc, unregistered_opens, lockinfo_checked, final_values_checked, stale_waiters;
    long deaths_holding, death_handoffs_timed, deaths_at_expiry;
    uint64_t death_latency_max, death_latency_sum;
    uint64_t wait_ns, wait_cpu_ns;
    uint64_t max_wait_ns;
    /* final lock and record info */
    struct { int key; int state; uint64_t token; uint32_t waiters; } li[CH_MAX_KEYS];
    int nli;
    struct { int rec; int bound_key; uint64_t accepted; bool seen; } ri[CH_MAX_RECORDS];
    /* categories */
    struct { const char *name; long n; } cat[64];
    int ncat;
};
extern struct st S;

/* ---- reporting (check.c) ------------------------------------------------------ */

double rel_ms(uint64_t t);
int wid_of(int w);
void note(bool violation, const char *cat, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define VIOL(cat, ...) note(true, cat, __VA_ARGS__)
#define WARN(cat, ...) note(false, cat, __VA_ARGS__)
/* One operation, for a message: worker, kind, key, record, token, result,
 * interval in ms since the start. */
const char *desc(int i);
/* p grown (realloc) to hold need elements of sz bytes; exits on no memory. */
void *grow(void *p, size_t *cap, size_t need, size_t sz);

/* ---- the logs (check_log.c) ------------------------------------------------------ */

int worker_index(int wid);
int worker_add(int wid);
int parse_controller(void);
int parse_worker_log(int w, const char *path);

/* ---- the keys (check_lock.c) and the records (check_record.c) -------------------- */

/* -1, 0 or 1 as a <, == or > b: for the qsort comparators. */
static inline int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

/* Op indexes by token, for qsort (check_lock.c). */
int by_tok(const void *x, const void *y);
void build_holdings(void);
void check_tokens(int key, int *acq, size_t n);
void check_key(int key);
void check_record(int rec);

#endif
