/* SPDX-License-Identifier: MIT */
/*
 * check.c - the chaos checker: reads controller.log, every worker's log and
 * final.log of a run directory, and verifies the history against the
 * invariants.  Every timing comparison uses the [B, A] interval of each
 * call (CLOCK_MONOTONIC, the clock of lease deadlines): an operation took
 * effect at some instant inside its interval; an operation with no A line
 * (its worker died) may or may not have taken effect.
 *
 * WHAT IS CHECKED (each failure is a violation, named by invariant)
 *  I1  tokens of a key are unique; if acquisition X returned before Y was
 *      called, token(X) < token(Y), across worker kills and supervisor
 *      restarts; an acquisition called after a supervisor reported READY has
 *      a token >= the floor it published; the final phase's tokens exceed
 *      every earlier one.
 *  lease semantics (the basis of I4)  no acquisition returns inside a
 *      period in which another lease was certainly held (acquired, not yet
 *      released, deadline not reached, holder alive), nor -- since a greater
 *      token takes effect after a smaller one -- before the end of the
 *      first such period of a smaller token; renew and check
 *      succeed only if called before the deadline and before a greater token
 *      was returned; release succeeds only if no greater token was returned
 *      before it was called (an expired lease nobody took is released with 0)
 *      and fails only if some acquisition could have taken the key; a live
 *      holder's unexpired lease is never taken away; an acquisition
 *      returns 0, -EBUSY (tries) or -ETIMEDOUT (waits), -EBUSY/-ETIMEDOUT only
 *      if some holding could have overlapped, -ETIMEDOUT not before its
 *      timeout, and never later than timeout + slack (minus the waiter's own
 *      pauses and machine stalls).
 *  I2  a commit acknowledged (0) never has a token below (strict: at or
 *      below) one the record had visibly accepted before the commit was
 *      called (an acknowledged commit or a read that returned before); a
 *      rejected commit (-ESTALE) reports an accepted token > its own (strict:
 *      >=) that some commit of that record did write; its value is never read.
 *  I3  every read value is well formed (checksum, filler), its fence equals
 *      the token inside it, and it is the value of a commit of that record that
 *      was acknowledged or in flight (never rejected, never from the future);
 *      reads never go back: a read returns a value at least as new as every
 *      commit acknowledged and every value read before it was called;
 *      -ENOENT only before any commit was acknowledged.
 *  lost commits  the final value of each record (read at the end) is the
 *      newest acknowledged commit, or a newer commit that was in flight
 *      when its writer was killed; the record's accepted token says the same.
 *  I4/I6  no waiter sleeps on a lock that no holding could have held for
 *      longer than a quarter of the slack (own pauses and machine stalls
 *      excluded: a stall is a wake-up of the controller late by > 50 ms); a
 *      worker that does not finish its iteration at the end is a violation;
 *      every lock is free or expired at the end and can be taken, and every
 *      record can be committed again (no commit buffer leaked); the waiter
 *      count left at the end does not exceed the waiters killed while waiting.
 *  I5  a lock whose holder was killed before its deadline and then taken
 *      before that deadline must carry FL_LEASE_OWNER_DIED; if the holder was
 *      registered and the supervisor up, the next holder must be told
 *      OWNER_DIED unless it took the key within a quarter of the slack
 *      (stalls excluded) after the holder was gone (reaped by the
 *      controller); a takeover at the deadline is counted (and warned when
 *      the deadline was > 10 ms after the holder was gone); OWNER_DIED and
 *      EXPIRED are never reported after a clean release.
 *  I7  waiting acquisitions use little CPU (aggregate < 25%, and < 50% for
 *      any single wait of 100 ms or more).
 *  I8  a commit with another key's lease is refused with -EXDEV; records
 *      stay bound to their own key.
 * Anything else unexpected (a library error code, a worker that crashed,
 * a supervisor that died by itself or did not start) is a violation too.
 */
#include "chaos.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_OPEN, K_ACQ, K_RENEW, K_CHECK, K_COMMIT, K_READ, K_RELEASE, K_WORK, K_CLOSE, K_DROP, K_N };
static const char *const kind_name[K_N] = {"open", "acquire", "renew", "check", "commit",
                                           "read", "release", "work", "close", "drop"};

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

static struct st {
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
} S;

/* ---- reporting -------------------------------------------------------------- */

static double rel_ms(uint64_t t)
{
    return t ? ((double)t - (double)S.t0) / 1e6 : -1.0;
}

static int wid_of(int w)
{
    return w >= 0 && (size_t)w < S.nw ? S.w[w].wid : -1;
}

static void note(bool violation, const char *cat, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(bool violation, const char *cat, const char *fmt, ...)
{
    int i;
    for (i = 0; i < S.ncat; i++)
        if (!strcmp(S.cat[i].name, cat))
            break;
    if (i == S.ncat && S.ncat < 64)
        S.cat[S.ncat++].name = cat;
    long n = i < 64 ? ++S.cat[i].n : 0;
    if (violation)
        S.violations++;
    else
        S.warnings++;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (S.vf)
        fprintf(S.vf, "%s %s: %s\n", violation ? "VIOLATION" : "warning", cat, msg);
    if (n <= 5)
        fprintf(stderr, "%s %s: %s\n", violation ? "VIOLATION" : "warning", cat, msg);
    else if (n == 6)
        fprintf(stderr, "%s %s: ... (more in violations.txt)\n",
                violation ? "VIOLATION" : "warning", cat);
}
#define VIOL(cat, ...) note(true, cat, __VA_ARGS__)
#define WARN(cat, ...) note(false, cat, __VA_ARGS__)

static const char *desc(int i)
{
    static char buf[4][256];
    static int n;
    char *p = buf[n++ & 3];
    const struct op *o = &S.ops[i];
    snprintf(p, 256, "w%d %s key=%d rec=%d tok=%" PRIu64 " rc=%d [%.3f, %.3f] ms",
             wid_of(o->w), kind_name[o->kind], o->key, o->rec, o->tok, o->rc, rel_ms(o->b),
             o->done ? rel_ms(o->a) : -1.0);
    return p;
}

/* ---- parsing ------------------------------------------------------------------ */

#define MAXF 48
struct line {
    int n;
    char *k[MAXF], *v[MAXF];
};

static void split(char *s, struct line *l)
{
    l->n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, " \n", &save); t && l->n < MAXF; t = strtok_r(NULL, " \n", &save)) {
        char *eq = strchr(t, '=');
        if (eq) {
            *eq = '\0';
            l->k[l->n] = t;
            l->v[l->n] = eq + 1;
        } else {
            l->k[l->n] = t;
            l->v[l->n] = NULL;
        }
        l->n++;
    }
}

static const char *lv(const struct line *l, const char *key)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i] && !strcmp(l->k[i], key))
            return l->v[i];
    return NULL;
}
static uint64_t lu(const struct line *l, const char *key)
{
    const char *v = lv(l, key);
    return v ? strtoull(v, NULL, 10) : 0;
}
static int64_t li64(const struct line *l, const char *key)
{
    const char *v = lv(l, key);
    return v ? strtoll(v, NULL, 10) : 0;
}

static void *grow(void *p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return p;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(p, n * sz);
    if (!q) {
        fprintf(stderr, "chaos check: out of memory\n");
        exit(3);
    }
    *cap = n;
    return q;
}

static int worker_index(int wid)
{
    for (size_t i = 0; i < S.nw; i++)
        if (S.w[i].wid == wid)
            return (int)i;
    return -1;
}

static int worker_add(int wid)
{
    int i = worker_index(wid);
    if (i >= 0)
        return i;
    static size_t cap;
    S.w = grow(S.w, &cap, S.nw + 1, sizeof *S.w);
    memset(&S.w[S.nw], 0, sizeof S.w[S.nw]);
    S.w[S.nw].wid = wid;
    S.w[S.nw].reg = -1;
    return (int)S.nw++;
}

/* The worker of wid, added if new (S.w may move: take the pointer after). */
static struct worker *wk(int wid)
{
    int i = worker_add(wid);
    return &S.w[i];
}

static void pause_add(struct worker *w, uint64_t b)
{
    w->pauses = grow(w->pauses, &w->cpauses, w->npauses + 1, sizeof *w->pauses);
    w->pauses[w->npauses++] = (struct pause){b, 0};
}

static void pause_end(struct worker *w, uint64_t t)
{
    if (w->npauses && !w->pauses[w->npauses - 1].e)
        w->pauses[w->npauses - 1].e = t;
}

static int parse_controller(void)
{
    char path[700];
    snprintf(path, sizeof path, "%s/controller.log", S.c->dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "chaos check: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    bool up = false;
    while ((n = getline(&buf, &cap, f)) > 0) {
        if (buf[n - 1] != '\n')
            break; /* torn last line */
        struct line l;
        split(buf, &l);
        if (l.n < 2)
            continue;
        uint64_t t = strtoull(l.k[0], NULL, 10);
        const char *ev = l.k[1];
        if (!strcmp(ev, "begin")) {
            S.t0 = t;
            S.tend = lu(&l, "end");
        } else if (!strcmp(ev, "wstart")) {
            struct worker *w = wk((int)lu(&l, "w"));
            w->start_t = t;
            w->pid = (int)lu(&l, "pid");
        } else if (!strcmp(ev, "stop")) {
            S.pauses++;
            pause_add(wk((int)lu(&l, "w")), t);
        } else if (!strcmp(ev, "cont")) {
            pause_end(wk((int)lu(&l, "w")), t);
        } else if (!strcmp(ev, "kill")) {
            S.kills++;
            struct worker *w = wk((int)lu(&l, "w"));
            w->killed = true;
            w->kill_t = t;
            pause_end(w, t);
        } else if (!strcmp(ev, "wexit")) {
            struct worker *w = wk((int)lu(&l, "w"));
            w->exited = true;
            w->exit_t = t;
            w->exit_status = (int)li64(&l, "status");
            w->exit_expected = lu(&l, "expected") != 0;
            if (!w->exit_expected && !w->killed)
                VIOL("worker-crashed",
                     "worker %d (pid %d) exited on its own with status %d (code %" PRId64
                     ", signal %" PRId64 ") at %.3f ms",
                     w->wid, w->pid, w->exit_status, li64(&l, "code"), li64(&l, "signal"),
                     rel_ms(t));
        } else if (!strcmp(ev, "straggler")) {
            struct worker *w = wk((int)lu(&l, "w"));
            w->straggler = true;
            VIOL("I4/I6 stuck-worker",
                 "worker %d did not finish its iteration within the end grace period (killed "
                 "at %.3f ms); its last operation is in w%d.log",
                 w->wid, rel_ms(t), w->wid);
        } else if (!strcmp(ev, "dstart")) {
            if (li64(&l, "rc") != 0) {
                VIOL("supervisor-start", "fencelockd failed to (re)start at %.3f ms (status %s)",
                     rel_ms(t), lv(&l, "status") ? lv(&l, "status") : "?");
                continue;
            }
            S.dstarts++;
            if (S.nds < 4096)
                S.ds[S.nds++] = (struct dstart){lu(&l, "ready"), lu(&l, "floor")};
            if (S.nup < 4096) {
                S.up[S.nup++] = (struct updown){lu(&l, "ready"), UINT64_MAX};
                up = true;
            }
        } else if (!strcmp(ev, "dkill")) {
            if (lu(&l, "sig") == 9)
                S.dkills++;
            if (up && S.nup)
                S.up[S.nup - 1].e = t;
            up = false;
        } else if (!strcmp(ev, "dexit")) {
            if (up && S.nup)
                S.up[S.nup - 1].e = t;
            up = false;
            if (lu(&l, "expected") == 0)
                VIOL("supervisor-died", "fencelockd exited by itself at %.3f ms (status %" PRId64
                                        "); see fencelockd.log",
                     rel_ms(t), li64(&l, "status"));
        } else if (!strcmp(ev, "stall")) {
            uint64_t b = lu(&l, "from"), late = lu(&l, "late");
            S.stalls = grow(S.stalls, &S.cstalls, S.nstalls + 1, sizeof *S.stalls);
            S.stalls[S.nstalls++] = (struct stall){b, b + late};
            S.stall_ns += late;
            if (late > S.stall_max)
                S.stall_max = late;
        } else if (!strcmp(ev, "stress")) {
            S.stress_runs++;
        } else if (!strcmp(ev, "final")) {
            S.final_status = li64(&l, "status");
        } else if (!strcmp(ev, "done")) {
            S.problems = li64(&l, "problems");
        }
    }
    free(buf);
    fclose(f);
    for (size_t i = 0; i < S.nw; i++)
        pause_end(&S.w[i], S.tend ? S.tend : UINT64_MAX);
    return 0;
}

static int kind_of(const char *s)
{
    for (int k = 0; k < K_N; k++)
        if (!strcmp(kind_name[k], s))
            return k;
    if (!strcmp(s, "acq"))
        return K_ACQ;
    return -1;
}

static void parse_info(const struct line *l)
{
    const char *what = l->k[3];
    if (!strcmp(what, "lockinfo")) {
        const char *key = lv(l, "key");
        int k;
        if (key && sscanf(key, "chaos/k%d", &k) == 1 && S.nli < CH_MAX_KEYS) {
            S.li[S.nli].key = k;
            S.li[S.nli].state = (int)li64(l, "state");
            S.li[S.nli].token = lu(l, "token");
            S.li[S.nli].waiters = (uint32_t)lu(l, "waiters");
            S.nli++;
        }
    } else if (!strcmp(what, "recinfo")) {
        const char *name = lv(l, "name"), *bound = lv(l, "bound");
        int r, k = -1;
        if (name && sscanf(name, "chaos/rec%d", &r) == 1 && r >= 0 && r < CH_MAX_RECORDS) {
            if (bound && sscanf(bound, "chaos/k%d", &k) != 1)
                k = -1;
            S.ri[r].rec = r;
            S.ri[r].bound_key = k;
            S.ri[r].accepted = lu(l, "accepted");
            S.ri[r].seen = true;
        }
    }
}

static int parse_worker_log(int w, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    struct worker *wk = &S.w[w];
    wk->seen = true;
    wk->op0 = S.nops;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    int lastb = -1;
    while ((n = getline(&buf, &cap, f)) > 0) {
        if (buf[n - 1] != '\n')
            break; /* torn last line: the worker died writing it */
        struct line l;
        split(buf, &l);
        if (l.n < 4)
            continue;
        char ph = l.k[0][0];
        uint64_t t = strtoull(l.k[2], NULL, 10);
        if (ph == 'I') {
            parse_info(&l);
            continue;
        }
        int kind = kind_of(l.k[3]);
        if (ph == 'N' && !strcmp(l.k[3], "drop"))
            kind = K_DROP;
        if (kind < 0)
            continue;
        if (ph == 'B' || ph == 'N') {
            S.ops = grow(S.ops, &S.cops, S.nops + 1, sizeof *S.ops);
            struct op *o = &S.ops[S.nops];
            memset(o, 0, sizeof *o);
            o->kind = (uint8_t)kind;
            o->w = w;
            o->b = t;
            o->key = (int)li64(&l, "key");
            o->rec = lv(&l, "rec") ? (int)li64(&l, "rec") : -1;
            o->tok = lu(&l, "tok");
            o->lease = lu(&l, "lease");
            o->timeout = li64(&l, "to");
            o->seq = lu(&l, "seq");
            o->len = (uint32_t)lu(&l, "len");
            o->sum = lu(&l, "sum");
            o->strict = lu(&l, "strict") != 0;
            o->xkey = lu(&l, "xkey") != 0;
            o->hold = -1;
            o->src = -1;
            if (ph == 'N') {
                o->done = true;
                o->a = t;
            }
            lastb = (int)S.nops;
            S.nops++;
            if (kind == K_COMMIT && o->seq >= 1) {
                wk->commits = grow(wk->commits, &wk->ccommits, o->seq, sizeof *wk->commits);
                while (wk->ncommits < o->seq)
                    wk->commits[wk->ncommits++] = -1;
                wk->commits[o->seq - 1] = lastb;
            }
        } else if (ph == 'A') {
            if (lastb < 0 || S.ops[lastb].done || S.ops[lastb].kind != kind) {
                VIOL("log-format", "%s: an A line without its B line: %s", path, l.k[3]);
                continue;
            }
            struct op *o = &S.ops[lastb];
            o->done = true;
            o->a = t;
            o->rc = (int)li64(&l, "rc");
            if (kind == K_ACQ && o->rc == 0) {
                o->tok = lu(&l, "tok");
                o->dl = lu(&l, "dl");
                o->flags = (uint32_t)lu(&l, "fl");
            }
            if (kind == K_ACQ)
                o->cpu = lu(&l, "cpu");
            if (kind == K_RENEW && o->rc == 0)
                o->dl = lu(&l, "dl");
            if (kind == K_COMMIT)
                o->acc = lu(&l, "acc");
            if (kind == K_OPEN) {
                o->reg = o->rc == 0 ? (int8_t)lu(&l, "reg") : -1;
                if (o->rc == 0)
                    wk->reg = o->reg;
            }
            if (kind == K_READ && o->rc == 0) {
                o->fence = lu(&l, "fence");
                o->len = (uint32_t)lu(&l, "len");
                o->ok = lu(&l, "ok") != 0;
                o->vw = (uint32_t)lu(&l, "w");
                o->vrec = (uint32_t)lu(&l, "vrec");
                o->vseq = lu(&l, "seq");
                o->vtok = lu(&l, "vtok");
                o->vsum = lu(&l, "sum");
                if (!o->ok)
                    VIOL("I3 torn-read",
                         "w%d read of rec %d returned malformed bytes (%s), fence %" PRIu64
                         ", len %u, at [%.3f, %.3f] ms; hex=%.200s",
                         wk->wid, o->rec, lv(&l, "why") ? lv(&l, "why") : "?", o->fence, o->len,
                         rel_ms(o->b), rel_ms(o->a), lv(&l, "hex") ? lv(&l, "hex") : "");
            }
        }
    }
    free(buf);
    fclose(f);
    wk->nops = S.nops - wk->op0;
    return 0;
}

/* ---- helpers ------------------------------------------------------------------- */

static uint64_t pause_overlap(const struct worker *w, uint64_t b, uint64_t e)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < w->npauses; i++) {
        uint64_t pb = w->pauses[i].b, pe = w->pauses[i].e ? w->pauses[i].e : UINT64_MAX;
        uint64_t lo = pb > b ? pb : b, hi = pe < e ? pe : e;
        if (hi > lo)
            sum += hi - lo;
    }
    return sum;
}

/* Time in [b, e] during which the machine stalled (stalls are logged in order). */
static uint64_t stall_overlap(uint64_t b, uint64_t e)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < S.nstalls; i++) {
        uint64_t lo = S.stalls[i].b > b ? S.stalls[i].b : b;
        uint64_t hi = S.stalls[i].e < e ? S.stalls[i].e : e;
        if (hi > lo)
            sum += hi - lo;
    }
    return sum;
}

static bool supervisor_up(uint64_t b, uint64_t e)
{
    for (size_t i = 0; i < S.nup; i++)
        if (S.up[i].b <= b && e <= S.up[i].e)
            return true;
    return false;
}

static int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

static int by_b(const void *x, const void *y)
{
    return cmp_u64(S.ops[*(const int *)x].b, S.ops[*(const int *)y].b);
}
static int by_a(const void *x, const void *y)
{
    return cmp_u64(S.ops[*(const int *)x].a, S.ops[*(const int *)y].a);
}
static int by_tok(const void *x, const void *y)
{
    return cmp_u64(S.ops[*(const int *)x].tok, S.ops[*(const int *)y].tok);
}
static int hold_by_pb(const void *x, const void *y)
{
    return cmp_u64(S.h[*(const int *)x].pb, S.h[*(const int *)y].pb);
}
static int hold_by_tok(const void *x, const void *y)
{
    return cmp_u64(S.h[*(const int *)x].tok, S.h[*(const int *)y].tok);
}

/* order of values on a record: (token, writer's sequence); the same token
 * means the same holding (I1), hence the same writer */
static int ord_cmp(uint64_t t1, uint64_t s1, uint64_t t2, uint64_t s2)
{
    return t1 != t2 ? cmp_u64(t1, t2) : cmp_u64(s1, s2);
}

/* ---- holdings -------------------------------------------------------------------- */

static void seg_add(struct hold *h, uint64_t b, uint64_t e, uint64_t dl, int end)
{
    if (e <= b)
        return;
    S.segs = grow(S.segs, &S.csegs, S.nsegs + 1, sizeof *S.segs);
    if (h->nseg == 0)
        h->seg0 = (int)S.nsegs;
    S.segs[S.nsegs++] = (struct seg){b, e, dl, end};
    h->nseg++;
}

static void build_holdings(void)
{
    for (size_t wi = 0; wi < S.nw; wi++) {
        struct worker *w = &S.w[wi];
        uint64_t death = w->death_t;
        for (size_t i = w->op0; i < w->op0 + w->nops; i++) {
            struct op *o = &S.ops[i];
            if (o->kind != K_ACQ || (o->done && o->rc != 0))
                continue;
            S.h = grow(S.h, &S.ch, S.nh + 1, sizeof *S.h);
            struct hold *h = &S.h[S.nh];
            memset(h, 0, sizeof *h);
            h->w = (int)wi;
            h->acq = (int)i;
            h->key = o->key;
            h->rel = -1;
            o->hold = (int)S.nh;
            S.nh++;
            if (!o->done) { /* died inside acquire: it may hold the key until death + lease */
                h->maybe = true;
                h->pb = o->b;
                h->pd = death ? death : o->b;
                h->pe = h->pd + o->lease + CH_MS;
                continue;
            }
            h->tok = o->tok;
            h->flags = o->flags;
            h->pb = o->b;
            uint64_t dl = o->dl, poss_dl = o->dl;
            uint64_t seg_b = o->a;
            bool live = true; /* still certainly held from seg_b until dl */
            uint64_t end_life = death ? death : UINT64_MAX;
            h->e1 = dl < end_life ? dl : end_life;
            bool first = true;
            size_t j;
            for (j = i + 1; j < w->op0 + w->nops; j++) {
                struct op *p = &S.ops[j];
                if (p->kind == K_ACQ || p->kind == K_CLOSE) {
                    if (first && p->kind == K_CLOSE && p->b < h->e1)
                        h->e1 = p->b;
                    break;
                }
                if (first && (p->kind == K_RENEW || p->kind == K_RELEASE)) {
                    first = false;
                    if (p->b < h->e1)
                        h->e1 = p->b;
                }
                if (p->kind == K_DROP)
                    continue;
                if (p->kind == K_RENEW || p->kind == K_CHECK || p->kind == K_RELEASE ||
                    p->kind == K_COMMIT || p->kind == K_READ || p->kind == K_WORK)
                    p->hold = (int)(h - S.h);
                if (p->kind == K_RENEW) {
                    if (live)
                        seg_add(h, seg_b, dl < p->b ? dl : p->b, dl, dl < p->b ? SEG_DL : SEG_OP);
                    if (!p->done) {
                        poss_dl = poss_dl > (death ? death : p->b) + p->lease + CH_MS
                                      ? poss_dl
                                      : (death ? death : p->b) + p->lease + CH_MS;
                        live = false;
                    } else if (p->rc == 0) {
                        dl = p->dl;
                        poss_dl = poss_dl > dl ? poss_dl : dl;
                        seg_b = p->a;
                        live = true;
                    } else {
                        live = false;
                    }
                } else if (p->kind == K_RELEASE) {
                    h->rel = (int)j;
                    if (live)
                        seg_add(h, seg_b, dl < p->b ? dl : p->b, dl, dl < p->b ? SEG_DL : SEG_OP);
                    live = false;
                    if (p->done && p->rc == 0) {
                        h->rel_ok = true;
                        poss_dl = p->a;
                    }
                }
            }
            /* no release: certainly held until its deadline or its holder's end */
            if (live) {
                uint64_t e = dl;
                int why = SEG_DL;
                if (j < w->op0 + w->nops && S.ops[j].kind == K_CLOSE && S.ops[j].b < e)
                    e = S.ops[j].b;
                if (end_life < e) {
                    e = end_life;
                    why = w->killed ? SEG_DEATH : SEG_DL;
                }
                seg_add(h, seg_b, e, dl, why);
            }
            h->pe = poss_dl;
        }
    }
}

/* ---- I1: tokens --------------------------------------------------------------- */

static void check_tokens(int key, int *acq, size_t n)
{
    if (!n)
        return;
    qsort(acq, n, sizeof *acq, by_tok);
    for (size_t i = 1; i < n; i++)
        if (S.ops[acq[i]].tok == S.ops[acq[i - 1]].tok)
            VIOL("I1 duplicate-token", "key %d: token %" PRIu64 " handed out twice: %s and %s", key,
                 S.ops[acq[i]].tok, desc(acq[i]), desc(acq[i - 1]));
    for (size_t i = 0; i < n; i++) {
        const struct op *o = &S.ops[acq[i]];
        if (o->tok == 0 || o->tok > FL_TOKEN_MAX)
            VIOL("I1 token-range", "%s: token out of range", desc(acq[i]));
        uint64_t floor = 0, ready = 0;
        for (size_t d = 0; d < S.nds; d++)
            if (S.ds[d].ready < o->b && S.ds[d].ready >= ready) {
                ready = S.ds[d].ready;
                floor = S.ds[d].floor;
            }
        if (o->tok < floor)
            VIOL("I1 below-floor",
                 "%s: token %" PRIu64 " (epoch %" PRIu64 ") below the floor %" PRIu64
                 " (epoch %" PRIu64 ") published by the supervisor READY at %.3f ms",
                 desc(acq[i]), o->tok, FL_TOKEN_EPOCH(o->tok), floor, FL_TOKEN_EPOCH(floor),
                 rel_ms(ready));
    }
    int *bya = malloc(n * sizeof *bya), *byb = malloc(n * sizeof *byb);
    memcpy(bya, acq, n * sizeof *acq);
    memcpy(byb, acq, n * sizeof *acq);
    qsort(bya, n, sizeof *bya, by_a);
    qsort(byb, n, sizeof *byb, by_b);
    size_t p = 0;
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        const struct op *y = &S.ops[byb[i]];
        while (p < n && S.ops[bya[p]].a < y->b) {
            if (best < 0 || S.ops[bya[p]].tok > S.ops[best].tok)
                best = bya[p];
            p++;
        }
        if (best >= 0 && S.ops[best].tok >= y->tok)
            VIOL("I1 token-order",
                 "key %d: %s returned token %" PRIu64 " although %s had returned %" PRIu64
                 " before it was called",
                 key, desc(byb[i]), y->tok, desc(best), S.ops[best].tok);
    }
    free(bya);
    free(byb);
}

/* ---- lease semantics, I4, I5, I6, I7 --------------------------------------------------- */

/* First index of hs (sorted by pb) whose pb >= t. */
static size_t lower_pb(const int *hs, size_t n, uint64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (S.h[hs[mid]].pb < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void check_key(int key)
{
    /* holdings of this key, by start of possibly-held period and by token */
    int *hs = NULL, *ht = NULL, *hm = NULL;
    size_t nh = 0, nt = 0, nm = 0, cap1 = 0, cap2 = 0, cap3 = 0;
    uint64_t maxlen = 0;
    for (size_t i = 0; i < S.nh; i++) {
        if (S.h[i].key != key)
            continue;
        hs = grow(hs, &cap1, nh + 1, sizeof *hs);
        hs[nh++] = (int)i;
        if (S.h[i].pe > S.h[i].pb && S.h[i].pe - S.h[i].pb > maxlen)
            maxlen = S.h[i].pe - S.h[i].pb;
        if (!S.h[i].maybe) {
            ht = grow(ht, &cap2, nt + 1, sizeof *ht);
            ht[nt++] = (int)i;
        } else {
            hm = grow(hm, &cap3, nm + 1, sizeof *hm);
            hm[nm++] = (int)i;
        }
    }
    if (nh)
        qsort(hs, nh, sizeof *hs, hold_by_pb);
    if (nt)
        qsort(ht, nt, sizeof *ht, hold_by_tok);
#define FIRST_CANDIDATE(t) lower_pb(hs, nh, (t) > maxlen ? (t) - maxlen : 0)

    /* Exclusion: no acquisition returns inside another's certainly-held period. */
    for (size_t x = 0; x < nt; x++) {
        const struct hold *hb = &S.h[ht[x]];
        const struct op *b = &S.ops[hb->acq];
        for (size_t y = FIRST_CANDIDATE(b->b); y < nh; y++) {
            const struct hold *ha = &S.h[hs[y]];
            if (ha->pb > b->a)
                break;
            if (ha == hb || ha->maybe)
                continue;
            /* hb's greater token took effect after ha's (I1), so inside ha's
             * first certain period if it returned before that period ended */
            if (hb->tok > ha->tok && b->a < ha->e1) {
                VIOL("lease exclusion (I1/I4)",
                     "key %d: %s returned token %" PRIu64 " before token %" PRIu64
                     " of w%d could end (%.3f ms: deadline %.3f ms, no release, renewal or "
                     "death before)",
                     key, desc(hb->acq), b->tok, ha->tok, wid_of(ha->w), rel_ms(ha->e1),
                     rel_ms(S.ops[ha->acq].dl));
                continue;
            }
            for (int s = 0; s < ha->nseg; s++) {
                const struct seg *sg = &S.segs[ha->seg0 + s];
                if (sg->b <= b->b && b->a < sg->e) {
                    VIOL("lease exclusion (I1/I4)",
                         "key %d: %s returned token %" PRIu64 " while token %" PRIu64
                         " of w%d was certainly held (period [%.3f, %.3f] ms, deadline %.3f ms)",
                         key, desc(hb->acq), b->tok, ha->tok, wid_of(ha->w), rel_ms(sg->b),
                         rel_ms(sg->e), rel_ms(sg->dl));
                    break;
                }
            }
        }
    }

    /* Renew, check, release of each holding.  next_a[x]: the earliest return of
     * an acquisition with a greater token than holding x. */
    uint64_t *next_a = malloc((nt + 1) * sizeof *next_a);
    uint64_t *next_b = malloc((nt + 1) * sizeof *next_b); /* ... and the earliest call */
    next_a[nt] = next_b[nt] = UINT64_MAX;
    for (size_t x = nt; x-- > 0;) {
        uint64_t a = x + 1 < nt ? S.ops[S.h[ht[x + 1]].acq].a : UINT64_MAX;
        uint64_t b = x + 1 < nt ? S.ops[S.h[ht[x + 1]].acq].b : UINT64_MAX;
        next_a[x] = a < next_a[x + 1] ? a : next_a[x + 1];
        next_b[x] = b < next_b[x + 1] ? b : next_b[x + 1];
    }
    for (size_t x = 0; x < nt; x++) {
        const struct hold *h = &S.h[ht[x]];
        const struct worker *w = &S.w[h->w];
        uint64_t dl = S.ops[h->acq].dl;
        uint64_t next_tok_a = next_a[x];
        for (size_t i = (size_t)h->acq + 1; i < w->op0 + w->nops; i++) {
            const struct op *p = &S.ops[i];
            if (p->kind == K_ACQ || p->kind == K_CLOSE)
                break;
            if (p->kind != K_RENEW && p->kind != K_CHECK && p->kind != K_RELEASE)
                continue;
            if (!p->done)
                break;
            if (p->rc != 0 && p->rc != -ESTALE) {
                VIOL("unexpected-error", "%s: %s", desc((int)i), fl_err_name(p->rc));
                continue;
            }
            /* renew and check need an unexpired lease; release does not: an
             * expired lease nobody took over is released normally (0) */
            if (p->rc == 0 && p->b >= dl && p->kind != K_RELEASE)
                VIOL("lease semantics",
                     "%s succeeded although called after its deadline %.3f ms", desc((int)i),
                     rel_ms(dl));
            if (p->rc == -ESTALE && p->kind == K_RELEASE && next_b[x] >= p->a) {
                /* ESTALE from release: another acquisition took the key */
                bool maybe = false;
                for (size_t y = 0; y < nm && !maybe; y++)
                    maybe = S.h[hm[y]].pb < p->a && S.h[hm[y]].pd > S.ops[h->acq].b;
                if (!maybe)
                    VIOL("lease semantics",
                         "%s: -ESTALE although no acquisition with a greater token was called "
                         "before it returned",
                         desc((int)i));
            }
            if (p->rc == 0 && p->b > next_tok_a)
                VIOL("lease semantics",
                     "%s succeeded although a greater token was returned at %.3f ms",
                     desc((int)i), rel_ms(next_tok_a));
            if (p->rc == -ESTALE) {
                if (p->kind == K_RENEW)
                    S.renew_stale++;
                else if (p->kind == K_RELEASE)
                    S.release_stale++;
                else
                    S.check_stale++;
                if (p->a < dl)
                    VIOL("I4 lease taken from a live holder",
                         "%s: -ESTALE before its deadline %.3f ms (its holder is alive); a "
                         "greater token was returned at %.3f ms",
                         desc((int)i), rel_ms(dl), rel_ms(next_tok_a));
            }
            if (p->kind == K_RENEW)
                dl = p->rc == 0 ? p->dl : 0;
            if (p->kind == K_RELEASE)
                break;
        }
    }
    free(next_a);
    free(next_b);

    uint64_t slack = S.c->slack_ns;
    /* Flags: OWNER_DIED / EXPIRED never after a clean release; a holder killed
     * before its deadline whose key is taken before that deadline must be
     * reported as dead (I5). */
    for (size_t x = 0; x < nt; x++) {
        const struct op *na = &S.ops[S.h[ht[x]].acq];
        if (na->flags & FL_LEASE_OWNER_DIED)
            S.owner_died++;
        if (na->flags & FL_LEASE_EXPIRED)
            S.takeovers++;
    }
    for (size_t x = 1; x < nt; x++) {
        const struct hold *p = &S.h[ht[x - 1]], *n = &S.h[ht[x]];
        const struct op *na = &S.ops[n->acq];
        /* an acquisition in flight at a kill (unknown token) may sit between p and n */
        bool between = false;
        for (size_t y = 0; y < nm && !between; y++) {
            const struct hold *m = &S.h[hm[y]];
            between = m->pb < na->a && m->pd > S.ops[p->acq].b;
        }
        if (between)
            continue;
        /* p's release returned 0: it found the pair still held(p), so n took
         * the key from the free state it left, not from a dead or late holder */
        if (p->rel_ok && na->flags)
            VIOL("I5 flags",
                 "%s has flags %u although the previous holding (token %" PRIu64
                 ") was released cleanly at %.3f ms",
                 desc(n->acq), na->flags, p->tok, rel_ms(S.ops[p->rel].a));
        const struct worker *pw = &S.w[p->w];
        if (!pw->killed || p->nseg == 0)
            continue;
        /* was p certainly held when its worker was killed? */
        const struct seg *at = &S.segs[p->seg0 + p->nseg - 1];
        if (at->end != SEG_DEATH || pw->kill_t >= at->dl)
            continue;
        S.deaths_holding++;
        if (na->a < at->dl && !(na->flags & FL_LEASE_OWNER_DIED))
            VIOL("I5 death not reported",
                 "w%d was killed at %.3f ms holding token %" PRIu64 " (deadline %.3f ms); %s "
                 "took the key before that deadline with flags %u (no OWNER_DIED)",
                 pw->wid, rel_ms(pw->kill_t), p->tok, rel_ms(at->dl), desc(n->acq), na->flags);
        /* Registered holder, supervisor up: the lock is freed by the supervisor
         * at the death, so whoever takes it next is told OWNER_DIED -- unless it
         * took the lease over at its deadline before the supervisor got to it,
         * which with a deadline a quarter of the slack after the kill is a
         * violation, with a near deadline a warning. */
        bool sup = pw->reg == 1 && supervisor_up(pw->kill_t - 1, na->a);
        /* the supervisor can see the death only once the process is gone:
         * by the time the controller reaped it at the latest */
        uint64_t gone = pw->exit_t > pw->kill_t ? pw->exit_t : pw->kill_t;
        if (sup && !(na->flags & FL_LEASE_OWNER_DIED)) {
            S.deaths_at_expiry++;
            if (na->a > gone + slack / 4 + stall_overlap(gone, na->a))
                VIOL("I5 death not detected",
                     "w%d (registered, supervisor up) was killed at %.3f ms (gone by %.3f ms) "
                     "holding token %" PRIu64 " (deadline %.3f ms); %s took it over %.3f ms "
                     "after it was gone, without OWNER_DIED",
                     pw->wid, rel_ms(pw->kill_t), rel_ms(gone), p->tok, rel_ms(at->dl),
                     desc(n->acq), (na->a - gone) / 1e6);
            else if (at->dl > gone + 10 * CH_MS)
                WARN("I5 death seen as expiry",
                     "w%d (registered, supervisor up) killed at %.3f ms and gone by %.3f ms "
                     "holding token %" PRIu64 "; %s took it over at the deadline %.3f ms "
                     "(flags %u)",
                     pw->wid, rel_ms(pw->kill_t), rel_ms(gone), p->tok, desc(n->acq),
                     rel_ms(at->dl), na->flags);
        }
        if (sup && (na->flags & FL_LEASE_OWNER_DIED) && na->b < pw->kill_t) {
            /* a waiter at the death: how long the handoff took */
            uint64_t lat = na->a > pw->kill_t ? na->a - pw->kill_t : 0;
            S.death_handoffs_timed++;
            S.death_latency_sum += lat;
            if (lat > S.death_latency_max)
                S.death_latency_max = lat;
        }
    }

    /* Acquisitions: result codes, timing bounds, waits on a free lock (I4, I6), CPU (I7). */
    static struct iv { uint64_t b, e; } iv[8192];
    for (size_t i = 0; i < S.nops; i++) {
        const struct op *o = &S.ops[i];
        if (o->kind != K_ACQ || o->key != key)
            continue;
        const struct worker *w = &S.w[o->w];
        uint64_t e = o->done ? o->a : (w->death_t > o->b ? w->death_t : o->b);
        if (o->done) {
            if (o->rc == 0)
                S.acq_ok++;
            else if (o->rc == -EBUSY)
                S.acq_busy++;
            else if (o->rc == -ETIMEDOUT)
                S.acq_timedout++;
            if (o->rc != 0 && !(o->rc == -EBUSY && o->timeout == 0) &&
                !(o->rc == -ETIMEDOUT && o->timeout > 0))
                VIOL("unexpected-error", "%s: %s (timeout %" PRId64 ")", desc((int)i),
                     fl_err_name(o->rc), o->timeout);
        }
        uint64_t dur = e - o->b, own = pause_overlap(w, o->b, e);
        uint64_t active = dur > own ? dur - own : 0;
        uint64_t stalled = stall_overlap(o->b, e);
        if (o->done && o->timeout >= 0 && active > (uint64_t)o->timeout + slack + stalled)
            VIOL("I4 acquire overran its timeout",
                 "%s took %.3f ms (%.3f ms paused, %.3f ms machine stall) with timeout %.3f ms "
                 "(slack %.0f ms)",
                 desc((int)i), dur / 1e6, own / 1e6, stalled / 1e6, o->timeout / 1e6,
                 slack / 1e6);
        if (o->done && o->rc == -ETIMEDOUT && dur + CH_MS < (uint64_t)o->timeout)
            VIOL("acquire timed out early", "%s returned -ETIMEDOUT after %.3f ms (timeout %.3f ms)",
                 desc((int)i), dur / 1e6, o->timeout / 1e6);
        if (o->done && o->timeout != 0 && dur >= 20 * CH_MS) {
            S.wait_ns += active;
            S.wait_cpu_ns += o->cpu;
            if (active > S.max_wait_ns)
                S.max_wait_ns = active;
            if (active >= 100 * CH_MS && o->cpu * 2 > active)
                VIOL("I7 busy waiting", "%s used %.3f ms of CPU in a wait of %.3f ms",
                     desc((int)i), o->cpu / 1e6, active / 1e6);
        }
        /* Others' possibly-held periods overlapping [b, e], and own pauses. */
        bool overlapped = false;
        size_t niv = 0;
        for (size_t y = FIRST_CANDIDATE(o->b); y < nh; y++) {
            const struct hold *h = &S.h[hs[y]];
            if (h->pb > e)
                break;
            if (h->acq == (int)i || h->pe < o->b)
                continue;
            overlapped = true;
            if (niv < 8192)
                iv[niv++] = (struct iv){h->pb, h->pe};
        }
        if (o->done && o->rc != 0 && !overlapped)
            VIOL("spurious busy", "%s: the key was free: no holding could overlap [%.3f, %.3f] ms",
                 desc((int)i), rel_ms(o->b), rel_ms(e));
        /* A wait on a lock no holding could hold: a lost wakeup.  Woken
         * waiters run within scheduling delay; a quarter of the slack is
         * generous for it (own pauses are excluded). */
        uint64_t wake_slack = slack / 4;
        if (o->timeout == 0 || dur <= wake_slack)
            continue;
        for (size_t p = 0; p < w->npauses && niv < 8192; p++)
            if (w->pauses[p].b < e && w->pauses[p].e > o->b)
                iv[niv++] = (struct iv){w->pauses[p].b, w->pauses[p].e};
        for (size_t p = 0; p < S.nstalls && niv < 8192; p++)
            if (S.stalls[p].b < e && S.stalls[p].e > o->b)
                iv[niv++] = (struct iv){S.stalls[p].b, S.stalls[p].e};
        for (size_t a = 1; a < niv; a++) /* few: insertion sort by start */
            for (size_t c = a; c > 0 && iv[c].b < iv[c - 1].b; c--) {
                struct iv t = iv[c];
                iv[c] = iv[c - 1];
                iv[c - 1] = t;
            }
        uint64_t cover = o->b, gap = 0, gap_at = 0;
        for (size_t a = 0; a < niv; a++) {
            if (iv[a].b > cover && iv[a].b - cover > gap) {
                gap = iv[a].b - cover;
                gap_at = cover;
            }
            if (iv[a].e > cover)
                cover = iv[a].e;
        }
        if (e > cover && e - cover > gap) {
            gap = e - cover;
            gap_at = cover;
        }
        if (gap > wake_slack)
            VIOL("I6 waiter asleep on a free lock",
                 "%s waited %.3f ms; no holding could have held the key for %.3f ms from %.3f ms",
                 desc((int)i), dur / 1e6, gap / 1e6, rel_ms(gap_at));
    }
#undef FIRST_CANDIDATE
    free(hs);
    free(ht);
    free(hm);
}

/* ---- records: I2, I3, I8, final values ---------------------------------------- */

struct ev {
    uint64_t t, tok, seq;
    int op;
};
static int ev_by_t(const void *x, const void *y)
{
    return cmp_u64(((const struct ev *)x)->t, ((const struct ev *)y)->t);
}

static void check_record(int rec)
{
    int key = rec / S.c->rpk;
    struct ev *done = NULL, *q = NULL;
    size_t nd = 0, nq = 0, cd = 0, cq = 0;
    int last_acked = -1; /* the newest acknowledged commit (workers only) */
    /* commits that may have written the record (acknowledged or in flight), by token */
    int *writers = NULL;
    size_t nw = 0, cw = 0;
    for (size_t i = 0; i < S.nops; i++) {
        const struct op *o = &S.ops[i];
        if (o->kind == K_COMMIT && o->rec == rec && !o->xkey && (!o->done || o->rc == 0)) {
            writers = grow(writers, &cw, nw + 1, sizeof *writers);
            writers[nw++] = (int)i;
        }
    }
    if (nw)
        qsort(writers, nw, sizeof *writers, by_tok);
    for (size_t i = 0; i < S.nops; i++) {
        struct op *o = &S.ops[i];
        if (o->rec != rec)
            continue;
        if (o->kind == K_COMMIT) {
            if (o->xkey) {
                if (o->done && o->rc == -EXDEV)
                    S.xkey_refused++;
                else if (o->done)
                    VIOL("I8 one scope", "%s with a lease of key %d on a record of key %d: %s",
                         desc((int)i), o->key, key, o->rc ? fl_err_name(o->rc) : "accepted");
                continue;
            }
            if (!o->done)
                continue;
            if (o->rc == -ESTALE) {
                S.rejections++;
                if (o->strict)
                    S.strict_rejections++;
                if (o->strict ? o->acc < o->tok : o->acc <= o->tok)
                    VIOL("I2 rejection", "%s (strict %d) rejected with accepted %" PRIu64
                                         " which does not exceed its token",
                         desc((int)i), o->strict, o->acc);
                bool found = false;
                size_t lo = 0, hi = nw;
                while (lo < hi) { /* first writer with tok >= acc */
                    size_t mid = (lo + hi) / 2;
                    if (S.ops[writers[mid]].tok < o->acc)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                for (; lo < nw && S.ops[writers[lo]].tok == o->acc && !found; lo++)
                    found = S.ops[writers[lo]].b < o->a;
                if (!found)
                    VIOL("I2 rejection", "%s: accepted token %" PRIu64
                                         " was never committed to the record before",
                         desc((int)i), o->acc);
                continue;
            }
            if (o->rc == -ENOSPC) {
                S.enospc++;
                WARN("commit -ENOSPC", "%s: no free commit buffer", desc((int)i));
                continue;
            }
            if (o->rc != 0) {
                VIOL("unexpected-error", "%s: %s", desc((int)i), fl_err_name(o->rc));
                continue;
            }
            if (o->acc != o->tok)
                VIOL("I2 accepted", "%s: accepted %" PRIu64 " != its token", desc((int)i), o->acc);
            done = grow(done, &cd, nd + 1, sizeof *done);
            done[nd++] = (struct ev){o->a, o->tok, o->seq, (int)i};
            q = grow(q, &cq, nq + 1, sizeof *q);
            q[nq++] = (struct ev){o->b, o->tok, o->seq, (int)i};
            if (S.w[o->w].wid != CH_FINAL_WID &&
                (last_acked < 0 || ord_cmp(o->tok, o->seq, S.ops[last_acked].tok,
                                           S.ops[last_acked].seq) > 0))
                last_acked = (int)i;
        } else if (o->kind == K_READ && o->done) {
            if (o->rc == -ENOENT) {
                S.reads_enoent++;
                q = grow(q, &cq, nq + 1, sizeof *q);
                q[nq++] = (struct ev){o->b, 0, 0, (int)i};
                continue;
            }
            if (o->rc != 0) {
                VIOL("unexpected-error", "%s: %s", desc((int)i), fl_err_name(o->rc));
                continue;
            }
            if (!o->ok)
                continue; /* reported while parsing */
            S.reads_checked++;
            if (o->fence != o->vtok || (int)o->vrec != rec)
                VIOL("I3 read", "%s: fence %" PRIu64 " but the value holds token %" PRIu64
                                " of record %u",
                     desc((int)i), o->fence, o->vtok, o->vrec);
            int wi = worker_index((int)o->vw);
            int src = wi >= 0 && o->vseq >= 1 && o->vseq <= S.w[wi].ncommits
                          ? S.w[wi].commits[o->vseq - 1]
                          : -1;
            if (src < 0) {
                VIOL("I3 read", "%s: value (writer %u, seq %" PRIu64
                                ") matches no logged commit",
                     desc((int)i), o->vw, o->vseq);
                continue;
            }
            const struct op *c = &S.ops[src];
            o->src = src;
            if (c->rec != rec || c->tok != o->vtok || c->len != o->len || c->sum != o->vsum)
                VIOL("I3 read", "%s: value differs from the commit it names: %s", desc((int)i),
                     desc(src));
            else if (c->done && c->rc != 0)
                VIOL("I2 rejected commit visible", "%s returned the value of the rejected %s",
                     desc((int)i), desc(src));
            else if (c->b > o->a)
                VIOL("I3 read", "%s returned a value committed only later: %s", desc((int)i),
                     desc(src));
            done = grow(done, &cd, nd + 1, sizeof *done);
            done[nd++] = (struct ev){o->a, o->vtok, o->vseq, (int)i};
            q = grow(q, &cq, nq + 1, sizeof *q);
            q[nq++] = (struct ev){o->b, o->vtok, o->vseq, (int)i};
        }
    }
    /* Sweep: what was visibly accepted before each commit or read was called. */
    qsort(done, nd, sizeof *done, ev_by_t);
    qsort(q, nq, sizeof *q, ev_by_t);
    size_t p = 0;
    int best = -1; /* done event with the greatest order */
    uint64_t btok = 0, bseq = 0;
    for (size_t i = 0; i < nq; i++) {
        while (p < nd && done[p].t < q[i].t) {
            if (best < 0 || ord_cmp(done[p].tok, done[p].seq, btok, bseq) > 0) {
                best = done[p].op;
                btok = done[p].tok;
                bseq = done[p].seq;
            }
            p++;
        }
        if (best < 0)
            continue;
        const struct op *o = &S.ops[q[i].op];
        if (o->kind == K_COMMIT) {
            if (o->strict ? o->tok <= btok : o->tok < btok)
                VIOL("I2 fenced commit",
                     "%s (strict %d) was accepted although token %" PRIu64
                     " was visibly accepted before it was called (%s)",
                     desc(q[i].op), o->strict, btok, desc(best));
        } else if (o->rc == -ENOENT) {
            VIOL("I3 read", "%s: -ENOENT after %s", desc(q[i].op), desc(best));
        } else if (ord_cmp(q[i].tok, q[i].seq, btok, bseq) < 0) {
            VIOL("I3 stale read",
                 "%s returned (token %" PRIu64 ", seq %" PRIu64 ") older than (token %" PRIu64
                 ", seq %" PRIu64 ") visible before it was called (%s)",
                 desc(q[i].op), q[i].tok, q[i].seq, btok, bseq, desc(best));
        }
    }
    free(done);
    free(q);
    free(writers);

    /* The final value: the first read of the final phase. */
    if (S.final_w < 0)
        return;
    const struct worker *fw = &S.w[S.final_w];
    int fr = -1, fc = -1, fr2 = -1;
    for (size_t i = fw->op0; i < fw->op0 + fw->nops; i++) {
        const struct op *o = &S.ops[i];
        if (o->rec != rec)
            continue;
        if (o->kind == K_READ && fr < 0)
            fr = (int)i;
        else if (o->kind == K_COMMIT && fc < 0)
            fc = (int)i;
        else if (o->kind == K_READ && fc >= 0 && fr2 < 0)
            fr2 = (int)i;
    }
    if (fr < 0 || !S.ops[fr].done) {
        VIOL("final", "record %d was not read at the end", rec);
        return;
    }
    S.final_values_checked++;
    const struct op *f = &S.ops[fr];
    if (last_acked >= 0) {
        const struct op *x = &S.ops[last_acked];
        if (f->rc != 0 || ord_cmp(f->vtok, f->vseq, x->tok, x->seq) < 0)
            VIOL("lost commit",
                 "record %d ends with (w%u, seq %" PRIu64 ", token %" PRIu64 ", rc %d) but %s "
                 "(seq %" PRIu64 ") was acknowledged and never superseded",
                 rec, f->vw, f->vseq, f->vtok, f->rc, desc(last_acked), x->seq);
    }
    if (S.ri[rec].seen) {
        if (S.ri[rec].bound_key != key)
            VIOL("I8 one scope", "record %d is bound to key %d, not %d", rec, S.ri[rec].bound_key,
                 key);
        if (f->rc == 0 && S.ri[rec].accepted != f->fence)
            VIOL("final", "record %d: accepted token %" PRIu64 " but its value has token %" PRIu64,
                 rec, S.ri[rec].accepted, f->fence);
    } else if (f->rc == 0) {
        VIOL("final", "record %d has a value but no record info", rec);
    }
    if (fc < 0 || !S.ops[fc].done || S.ops[fc].rc != 0)
        VIOL("I4 final commit", "record %d could not be committed at the end (%s): a leaked "
                                "commit buffer or a stuck lock",
             rec, fc < 0 ? "no commit" : desc(fc));
    else if (fr2 < 0 || S.ops[fr2].rc != 0 || S.ops[fr2].src != fc)
        VIOL("final", "record %d: the final commit did not read back (%s)", rec,
             fr2 < 0 ? "no read" : desc(fr2));
}

/* ---- driver -------------------------------------------------------------------------- */

static void summary(void)
{
    const struct ch_config *c = S.c;
    long total = 0;
    for (int k = 0; k < K_N; k++)
        if (k != K_WORK && k != K_DROP)
            total += S.byop[k];
    printf("\n== chaos summary: seed %" PRIu64 ", %.0f s, %d workers, %d keys x %d records, "
           "lease %.0f ms, stress %s\n",
           c->seed, c->duration_ns / 1e9, c->workers, c->keys, c->rpk, c->lease_ns / 1e6,
           c->stress == CH_STRESS_FULL ? "full" : c->stress == CH_STRESS_LIGHT ? "light" : "none");
    printf("  %-34s %10ld\n", "operations", total);
    for (int k = K_ACQ; k <= K_RELEASE; k++)
        printf("    %-32s %10ld\n", kind_name[k], S.byop[k]);
    printf("    %-32s %10ld\n", "in flight at a kill (maybe)", S.maybe_ops);
    printf("  %-34s %10ld / %ld / %ld\n", "acquire ok / busy / timed out", S.acq_ok, S.acq_busy,
           S.acq_timedout);
    printf("  %-34s %10ld\n", "pauses (SIGSTOP/SIGCONT)", S.pauses);
    printf("  %-34s %10zu (%.3f s, longest %.1f ms)\n", "machine stalls (> 50 ms)", S.nstalls,
           S.stall_ns / 1e9, S.stall_max / 1e6);
    printf("  %-34s %10ld\n", "worker kills (SIGKILL)", S.kills);
    printf("  %-34s %10ld\n", "supervisor kills (SIGKILL)", S.dkills);
    printf("  %-34s %10ld\n", "supervisor restarts", S.dstarts > 0 ? S.dstarts - 1 : 0);
    printf("  %-34s %10ld\n", "unregistered worker opens", S.unregistered_opens);
    printf("  %-34s %10ld (%ld strict)\n", "rejections (commit -ESTALE)", S.rejections,
           S.strict_rejections);
    printf("  %-34s %10ld\n", "other-key commits refused (EXDEV)", S.xkey_refused);
    printf("  %-34s %10ld / %ld / %ld\n", "stale renew / release / check", S.renew_stale,
           S.release_stale, S.check_stale);
    printf("  %-34s %10ld\n", "takeovers (FL_LEASE_EXPIRED)", S.takeovers);
    printf("  %-34s %10ld\n", "owner-died handoffs", S.owner_died);
    printf("  %-34s %10ld\n", "kills while holding", S.deaths_holding);
    printf("  %-34s %10ld\n", "deaths taken over at expiry", S.deaths_at_expiry);
    if (S.death_handoffs_timed)
        printf("  %-34s %10.3f ms max, %.3f ms mean (%ld)\n", "death handoff to a waiter",
               S.death_latency_max / 1e6, S.death_latency_sum / 1e6 / (double)S.death_handoffs_timed,
               S.death_handoffs_timed);
    printf("  %-34s %10.2f %% of %.1f s waited (longest wait %.1f ms)\n", "CPU while waiting",
           S.wait_ns ? 100.0 * (double)S.wait_cpu_ns / (double)S.wait_ns : 0.0, S.wait_ns / 1e9,
           S.max_wait_ns / 1e6);
    printf("  %-34s %10ld\n", "waiters left counted by killed ones", S.stale_waiters);
    printf("  %-34s %10ld\n", "reads checked", S.reads_checked);
    printf("  %-34s %10ld\n", "final values checked", S.final_values_checked);
    printf("  %-34s %10ld\n", "warnings", S.warnings);
    printf("  %-34s %10ld\n", "violations", S.violations);
    for (int i = 0; i < S.ncat; i++)
        printf("    %-32s %10ld\n", S.cat[i].name, S.cat[i].n);
}

long ch_check(const struct ch_config *c)
{
    memset(&S, 0, sizeof S);
    S.c = c;
    S.final_w = -1;
    char path[700];
    snprintf(path, sizeof path, "%s/violations.txt", c->dir);
    S.vf = fopen(path, "w");
    if (parse_controller() != 0)
        return -1;
    size_t nctl = S.nw;
    for (size_t i = 0; i < nctl; i++) {
        snprintf(path, sizeof path, "%s/w%d.log", c->dir, S.w[i].wid);
        if (parse_worker_log((int)i, path) != 0 && !S.w[i].killed)
            VIOL("log-missing", "%s: %s", path, strerror(errno));
    }
    S.final_w = worker_add(CH_FINAL_WID);
    snprintf(path, sizeof path, "%s/final.log", c->dir);
    if (parse_worker_log(S.final_w, path) != 0) {
        VIOL("final", "no final.log: the final phase did not run");
        S.final_w = -1;
    }
    if (S.final_status != 0)
        VIOL("final", "the final phase exited with status %ld", S.final_status);
    if (S.problems)
        VIOL("set-up", "the controller reported %ld problems (see its output)", S.problems);

    /* deaths, counts, results of open */
    for (size_t i = 0; i < S.nw; i++) {
        struct worker *w = &S.w[i];
        uint64_t last_close = 0;
        bool opened = false;
        for (size_t j = w->op0; j < w->op0 + w->nops; j++) {
            struct op *o = &S.ops[j];
            S.byop[o->kind]++;
            if (!o->done)
                S.maybe_ops++;
            if (o->kind == K_OPEN && o->done && o->rc == 0) {
                opened = true;
                if (o->reg == 0)
                    S.unregistered_opens++;
            }
            if (o->kind == K_OPEN && o->done && o->rc != 0)
                WARN("open failed", "%s: %s", desc((int)j), fl_err_name(o->rc));
            if (o->kind == K_CLOSE)
                last_close = o->b;
        }
        if (!opened && w->seen && w->nops && !w->killed) /* killed while opening: fine */
            VIOL("open", "worker %d never opened the region", w->wid);
        w->death_t = w->killed ? w->kill_t : last_close ? last_close : w->exit_t;
        if (!w->killed && w->seen && w->nops && !last_close && w->wid != CH_FINAL_WID &&
            !w->straggler)
            VIOL("worker-crashed", "worker %d stopped logging without being killed", w->wid);
    }
    build_holdings();
    int nrec = c->keys * c->rpk;
    for (int k = 0; k < c->keys; k++) {
        int *acq = NULL;
        size_t n = 0, cap = 0;
        for (size_t i = 0; i < S.nops; i++) {
            const struct op *o = &S.ops[i];
            if (o->kind == K_ACQ && o->key == k && o->done && o->rc == 0) {
                acq = grow(acq, &cap, n + 1, sizeof *acq);
                acq[n++] = (int)i;
            }
        }
        check_tokens(k, acq, n);
        free(acq);
        check_key(k);
    }
    for (int r = 0; r < nrec; r++)
        check_record(r);
    /* every lock free or expired at the end */
    for (int i = 0; i < S.nli; i++) {
        S.lockinfo_checked++;
        /* The waiter count: only a waiter killed while asleep may leave it
         * too high (a documented caveat); timeouts and wakeups never. */
        long killed_waiting = 0;
        for (size_t j = 0; j < S.nops; j++) {
            const struct op *o = &S.ops[j];
            killed_waiting += o->kind == K_ACQ && o->key == S.li[i].key && !o->done &&
                              o->timeout != 0 && S.w[o->w].killed;
        }
        S.stale_waiters += S.li[i].waiters;
        if (S.li[i].waiters > killed_waiting)
            VIOL("I6 waiter count",
                 "key %d ends with %u waiters counted but only %ld waiters were killed while "
                 "waiting",
                 S.li[i].key, S.li[i].waiters, killed_waiting);
        if (S.li[i].state == FL_LOCK_HELD)
            VIOL("I4 lock held at the end",
                 "key %d is still held (token %" PRIu64 ") after every worker was gone and "
                 "every lease had run out",
                 S.li[i].key, S.li[i].token);
    }
    if (S.wait_ns >= CH_S && S.wait_cpu_ns * 4 > S.wait_ns)
        VIOL("I7 busy waiting", "waiting acquisitions used %.3f s of CPU in %.3f s of waiting",
             S.wait_cpu_ns / 1e9, S.wait_ns / 1e9);
    if (S.final_w >= 0 && S.nli < c->keys)
        VIOL("final", "only %d of %d keys were listed at the end", S.nli, c->keys);
    if (S.pauses == 0 && c->pause_mean_ns && c->duration_ns > 10 * CH_S)
        WARN("coverage", "no pause was injected");
    if (S.kills == 0 && c->kill_mean_ns && c->duration_ns > 20 * CH_S)
        WARN("coverage", "no worker was killed");
    summary();
    if (S.vf)
        fclose(S.vf);
    return S.violations;
}
