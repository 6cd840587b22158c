/* SPDX-License-Identifier: MIT */
/*
 * check.c - the chaos checker: reads controller.log, every worker's log and
 * final.log of a run directory, and verifies the history against the
 * invariants.  Every timing comparison uses the [B, A] interval of each
 * call (CLOCK_MONOTONIC, the clock of lease deadlines): an operation took
 * effect at some instant inside its interval; an operation with no A line
 * (its worker died) may or may not have taken effect.
 *
 * This file drives it (ch_check: the logs are read by check_log.c, the
 * holdings and each key checked by check_lock.c, each record by
 * check_record.c, then the state at the end, then the summary) and holds
 * what the parts share (check.h): the state S and the reporting.
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
#include "check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kind_name[K_N] = {"open", "acquire", "renew", "check", "commit",
                                    "read", "release", "work", "close", "drop"};

struct st S;

/* ---- reporting -------------------------------------------------------------- */

double rel_ms(uint64_t t)
{
    return t ? ((double)t - (double)S.t0) / 1e6 : -1.0;
}

int wid_of(int w)
{
    return w >= 0 && (size_t)w < S.nw ? S.w[w].wid : -1;
}

void note(bool violation, const char *cat, const char *fmt, ...)
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

const char *desc(int i)
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

void *grow(void *p, size_t *cap, size_t need, size_t sz)
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
