/* SPDX-License-Identifier: MIT */
/*
 * check_log.c - the chaos checker's reading of the logs (chaos.h, LOG
 * FORMAT): controller.log gives the workers, their pauses, kills and exits,
 * the supervisor's starts (with the floor each published) and deaths, and
 * the machine's stalls; each worker's log and final.log give the operations
 * (a B line and its A line make one op; no A line: in flight at a kill) and
 * the final phase's listing of locks and records.  What is wrong on the
 * face of a line (an A line without its B, a malformed read, a worker that
 * crashed, a supervisor that died or did not start) is reported here.
 */
#include "check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int worker_index(int wid)
{
    for (size_t i = 0; i < S.nw; i++)
        if (S.w[i].wid == wid)
            return (int)i;
    return -1;
}

int worker_add(int wid)
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

int parse_controller(void)
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

int parse_worker_log(int w, const char *path)
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
