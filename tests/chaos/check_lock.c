/* SPDX-License-Identifier: MIT */
/*
 * check_lock.c - the chaos checker's checks of the keys: the holdings (when
 * each lease was certainly and when possibly held) built from the
 * operations, I1 (tokens), and the lease semantics with I4, I5, I6 and I7:
 * exclusion; renew, check and release; the flags after a death; the results,
 * timing and waits of acquisitions; CPU while waiting.  What each means is
 * listed in check.c (WHAT IS CHECKED); the state at the end is checked there.
 */
#include "check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

static int by_b(const void *x, const void *y)
{
    return cmp_u64(S.ops[*(const int *)x].b, S.ops[*(const int *)y].b);
}
static int by_a(const void *x, const void *y)
{
    return cmp_u64(S.ops[*(const int *)x].a, S.ops[*(const int *)y].a);
}
int by_tok(const void *x, const void *y)
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

void build_holdings(void)
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

void check_tokens(int key, int *acq, size_t n)
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

void check_key(int key)
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
