/* SPDX-License-Identifier: MIT */
/*
 * check_record.c - the chaos checker's checks of each record: I2 (fenced
 * commits and rejections), I3 (reads well formed, of a real commit, never
 * going back), I8 (a record bound to its own key), and its final value (no
 * lost commit; committed again and read back at the end).  What each means
 * is listed in check.c (WHAT IS CHECKED).
 */
#include "check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

/* ---- records: I2, I3, I8, final values ---------------------------------------- */

/* order of values on a record: (token, writer's sequence); the same token
 * means the same holding (I1), hence the same writer */
static int ord_cmp(uint64_t t1, uint64_t s1, uint64_t t2, uint64_t s2)
{
    return t1 != t2 ? cmp_u64(t1, t2) : cmp_u64(s1, s2);
}

struct ev {
    uint64_t t, tok, seq;
    int op;
};
static int ev_by_t(const void *x, const void *y)
{
    return cmp_u64(((const struct ev *)x)->t, ((const struct ev *)y)->t);
}

void check_record(int rec)
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
