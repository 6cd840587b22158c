/* SPDX-License-Identifier: MIT */
/*
 * record.pml - a Promela model of the fenced commit protocol of
 * src/shm/record.c: buffers, the record's `cur`, read-validate-CAS, recycling
 * and the supervisor's reap.  tests/model checks it with spin (ctest -R
 * model_record); README there.
 *
 * C-VERSION: the line after this comment names the blob of src/shm/record.c
 * the model was last checked against (ctest runs model_record_sync to
 * compare).  When record.c changes: re-read both, fix the model, run the
 * checks, and put the new blob there (`git hash-object
 * src/shm/record.c`).
 *
 * WHAT IT MATCHES: src/shm/record.c at that blob, step for step:
 *   cur       one word per record: (buffer + 1, generation), 0 = never
 *             committed; read and CASed as a whole.
 *   buffer    state word (kind FREE / STAGING / PUBLISHED, owner,
 *             generation), read and CASed as a whole; header token; data
 *             words (NCELL here).
 *   claim     fl__buffer_get: scan the pool once from a start (the hints
 *             are modelled as a start chosen freely), for each buffer
 *             fl__buffer_claim: load its state word; generation spent:
 *             skip; STAGING: skip; PUBLISHED: load cur, skip if cur names
 *             this buffer at this generation; then CAS the state word from
 *             what was loaded to STAGING(me, g + 1).  None: -ENOSPC.
 *   fill      store the token, then each data word (separate stores).
 *   commit    loop: fl__record_current (load cur; 0: F = 0; else load the
 *             token F of the buffer it names, re-load cur, retry until
 *             equal); T < F: give the buffer back (store FREE, same
 *             generation) and reject; else CAS cur from the value loaded to
 *             (mine, my generation): success: store PUBLISHED(my
 *             generation); failure: loop.
 *   read      fl_read: load cur (0: -ENOENT), load the token, load each
 *             data word, re-load cur: different: retry.
 *   reap      (fencelockd, fl__buffers_reap_client) for each buffer: load
 *             its state; STAGING of the dead client: load cur; CAS the
 *             state to PUBLISHED (cur names it) or FREE, same generation.
 *
 * WHAT IS CHECKED (assert() unless said otherwise)
 *   I2   a commit that takes effect has T >= every token accepted before
 *        it (ghost maxacc); a commit that is rejected has T < some token
 *        accepted before the rejection: no false rejection either.
 *        Commits are numbered (commit id = the value of its data words),
 *        so a rejected commit's data never becoming visible is part of I3.
 *   I3   every read that completes returns data words all equal to the id
 *        of one accepted commit, and that commit's token.
 *   cur  the buffer cur names is never claimed, given back or freed by a
 *        reap (the current value is never overwritten); and at the end,
 *        cur names the commit with the greatest token accepted, intact.
 *   I4   every process finishes (spin's invalid-end-state check; the _np
 *        test adds that no execution runs forever: no cycle, every retry
 *        loop ends).  Nothing in the protocol waits for anybody (no buffer:
 *        -ENOSPC), so a writer stopped at any step never blocks the others.
 *
 * HOW "STOPPED AT ANY STEP" IS MODELLED
 *   Every statement is one load, store or CAS of the C code (or a purely
 *   local computation); spin explores all interleavings, which covers a
 *   process paused at any step, for any time, then resumed, and every
 *   assertion is checked in all those states.  A process stopped forever
 *   is a process never scheduled again: as no step waits for another
 *   process, that adds no state to check.  What does add states is a
 *   death: the killer may, once, kill a writer at any step (`unless
 *   { killed[me] }` around its body) and fencelockd then reaps its STAGING
 *   buffer, concurrently with the others (KILL=1).
 *   The record starts empty or (SEED) with a committed value: commit id 5,
 *   token 0, in buffer 0.  READS reads by the reader.
 *
 * ABSTRACTIONS, AND WHAT IS NOT MODELLED
 *   - One record; the `record` field of a buffer, binding to a lock slot
 *     (I8), the length, the version counter, writer_pid, the counters and
 *     the strict-commit flag are not modelled (strict commits differ only
 *     in the comparison T <= F).  Tokens are given, not taken from a lock:
 *     writer 1 commits ids 1, 3 with tokens 1, 3 (it re-acquired the lock
 *     in between); writer 2 commits ids 2, 4 with tokens 2, 2 (two
 *     commits under one lease: equal tokens are accepted; W2COMMITS=1: id
 *     2 only).  So writer 2's commits are stale once token 3 is accepted,
 *     writer 1's first once token 2 is.
 *   - NB buffers (3), NCELL data words (2), generations up to GMAX: as in
 *     the C code a buffer whose generation reaches GMAX is retired, never
 *     reused, so no generation wraps and no modulo argument is needed.
 *   - The process-local hint and the region-wide scan start: the scan
 *     starts at buffer 0, or (FREE_START) at any buffer, chosen freely.
 *   - Sequentially consistent memory: the release/acquire orders and
 *     fences of record.c (claim: acquire CAS then release fence before
 *     writing; commit: release CAS on cur; reads: acquire fence before the
 *     re-load of cur) are what makes SC a sound view; they are not
 *     checked here.
 *
 * BUG VARIANTS (must FAIL; tests/model runs them and expects a failure):
 *   -DBUG_READER_NO_VALIDATE  fl_read does not re-load cur: torn read.
 *   -DBUG_RECYCLE_CURRENT     a PUBLISHED buffer is claimed without
 *                             checking cur: the current value is lost.
 *   -DBUG_STORE_CUR           the commit stores cur instead of CASing it:
 *                             a paused stale writer overwrites newer data.
 *   -DBUG_NO_VALIDATE         fl__record_current does not re-load cur: F
 *                             may come from a recycled buffer (false
 *                             rejection).
 *   -DBUG_EARLY_PUBLISH       PUBLISHED is stored before the CAS on cur.
 *   -DBUG_REAP_FREES_CURRENT  the reap frees the dead writer's buffer even
 *                             when cur names it.
 *   -DBUG_STALE_RETRY         a failed CAS on cur is retried with the cur
 *                             it had loaded: passes the safety search,
 *                             fails the non-progress one (livelock, --np).
 *   -DBUG_RELAXED_STATE_LOAD  the one weak-memory case modelled: a claim
 *                             that loads a buffer's state word without
 *                             acquire may then load a cur older than the
 *                             CAS that made the buffer current (any value
 *                             cur had before), and claim the current value.
 *                             record.c loads the state with acquire.
 */
/* Outside the model: the buffer sum (one more plain store into the
 * committer's own STAGING buffer before the publishing CAS, like the data
 * words); the supervisor's check of every current value at start
 * (fl__records_vouch), which marks cur FL__CUR_UNVOUCHED only with a CAS
 * from a cur it saw unchanged around the check, so a concurrent commit
 * makes the CAS fail (in the same boot no current buffer fails the check:
 * a buffer cur names never changes); reads refusing a marked cur, and
 * commits taking its F as 0 (tokens of this boot are above every earlier
 * one, I1); the entry checks against a handle used after fork; and
 * fl_commit_token, which looks the key's slot up (never creating it) and
 * then makes fl_commit's commit with a lease of that slot and token: the
 * same steps as the model's commit.
 * Issue 27 moved record.c into src/shm/ and made the handle a struct
 * fl__shm (its path and pid in the base handle): no step of the model
 * changed.
 * C-VERSION: src/shm/record.c git-blob 2ac403f81c39db826032f3b1a96ffda038a33001 */

#ifndef NB
#define NB 3
#endif
#define NCELL 2
#ifndef GMAX
#define GMAX 15            /* generation space: a buffer at GMAX is retired */
#endif
#ifndef READS
#define READS 2            /* reads the reader does */
#endif
#ifndef KILL
#define KILL 1             /* 1: the killer may kill one writer (reaped) */
#endif
#ifndef W2COMMITS
#define W2COMMITS 2        /* commits of writer 2 (1 or 2) */
#endif
#define COMMITS(w) ((w) == 1 -> 2 : W2COMMITS)
#define NW 2               /* writers */
#define NCOMMIT 5          /* commit ids 1..4, and 5 for the seed */
#ifndef SEED
#define SEED 1             /* 1: the record starts with a committed value */
#endif

#define FREE 0
#define STAGING 1
#define PUBLISHED 2

#define REF(b, g) (((b) + 1) << 4 | (g))
#define BUF(c)    (((c) >> 4) - 1)
#define GEN(c)    ((c) & 15)

byte cur = 0;
byte bkind[NB];            /* the state word of each buffer: */
byte bown[NB];             /*   kind, owner and generation, */
byte bgen[NB];             /*   always read and CASed together */
byte btok[NB];             /* header: token */
byte cell[NB * NCELL];     /* data words */

/* ghosts */
byte tokof[NCOMMIT + 1];   /* the token of each commit id */
bool accepted[NCOMMIT + 1];
byte maxacc = 0;           /* greatest token accepted */
byte lastacc = 0;          /* commit id accepted last */
#ifdef BUG_RELAXED_STATE_LOAD
byte oldcur = 0;           /* a value cur had before its last CAS */
#endif
bool killed[NW + 1];
byte reap_req = 0;
byte finished = 0;         /* processes that ran to their end */

/* The current value is never touched: the buffer b at generation g being
 * claimed, given back or freed is not what cur names. */
#define NOT_CURRENT(b, g) assert(cur != REF(b, g))

/* Kills one writer, at any step, and has fencelockd reap it. */
active proctype killer()
{
    byte v;
    if
    :: skip
#if KILL
    :: select(v : 1 .. NW);
       /* died, and fencelockd learns it (its socket closes) */
       atomic { killed[v] = true; reap_req = v; v = 0 }
#endif
    fi
}

/* fencelockd: fl__buffers_reap_client for the dead writer.  The C code
 * loads every buffer's state word in turn; loads of buffers that are not
 * STAGING of the dead writer have no effect, and the dead writer's STAGING
 * buffers cannot change until the reap CASes them (only their owner or
 * the reap writes a STAGING buffer), so the model finds them in one step
 * (a writer holds one STAGING buffer at a time). */
active proctype supervisor()
{
    byte v, i, g;
    bool found, current;
end_idle:
    reap_req != 0;
    v = reap_req;
    d_step {
        for (i : 0 .. NB - 1) {
            if
            :: !found && bkind[i] == STAGING && bown[i] == v ->
               found = true; g = bgen[i]; break
            :: else -> skip
            fi
        }
    };
    if
    :: found ->
       current = (cur == REF(i, g));
       d_step {
           if
           :: bkind[i] == STAGING && bown[i] == v && bgen[i] == g ->
#ifdef BUG_REAP_FREES_CURRENT
              bkind[i] = FREE; NOT_CURRENT(i, g);
#else
              if
              :: current -> bkind[i] = PUBLISHED
              :: else -> bkind[i] = FREE; NOT_CURRENT(i, g)
              fi;
#endif
              bown[i] = 0
           :: else -> assert(false)     /* nobody else writes it */
           fi
       }
    :: else -> skip
    fi;
    d_step { v = 0; i = 0; g = 0; found = false; current = false }
}

proctype writer(byte me)
{
    byte k, cid, tok, start, i, n, bk, bo, bg, mygen, c, f;
    bool ok;

    {
    for (k : 0 .. COMMITS(me) - 1) {
        cid = me + 2 * k;               /* writer 1: 1, 3; writer 2: 2, 4 */
        tok = tokof[cid];

        /* ---- fl__buffer_get ---- */
#ifdef FREE_START
        select(start : 0 .. NB - 1);
#endif
        ok = false;
        for (n : 0 .. NB - 1) {
            i = (start + n) % NB;
            /* fl__buffer_claim(i) */
            d_step { bk = bkind[i]; bo = bown[i]; bg = bgen[i] };
            if
            :: bg == GMAX -> skip           /* retired */
            :: bg < GMAX && bk == STAGING -> skip
            :: bg < GMAX && bk == PUBLISHED ->
#if defined(BUG_RELAXED_STATE_LOAD)
               if
               :: c = cur
               :: c = oldcur                /* an older value of cur */
               fi;
               if
               :: c == REF(i, bg) -> c = 0
               :: else -> c = 0; ok = true
               fi
#elif !defined(BUG_RECYCLE_CURRENT)
               if
               :: cur == REF(i, bg) -> skip /* the current value */
               :: else -> ok = true
               fi
#else
               ok = true
#endif
            :: bg < GMAX && bk == FREE -> ok = true
            fi;
            if
            :: ok ->
               d_step {
                   if
                   :: bkind[i] == bk && bown[i] == bo && bgen[i] == bg ->
                      NOT_CURRENT(i, bg);
                      bkind[i] = STAGING; bown[i] = me; bgen[i] = bg + 1
                   :: else -> ok = false
                   fi;
                   bk = 0; bo = 0
               }
            :: else -> skip
            fi;
            if
            :: ok -> break
            :: else -> bg = 0
            fi
        };
        atomic { start = 0; n = 0; bk = 0; bo = 0 };

        if
        :: !ok -> i = 0; bg = 0              /* -ENOSPC: no effect */
        :: else ->
           mygen = bg + 1;
           bg = 0;
           /* ---- fl__buffer_fill ---- */
           btok[i] = tok;
           cell[i * NCELL] = cid;
           cell[i * NCELL + 1] = cid;
#ifdef BUG_EARLY_PUBLISH
           bkind[i] = PUBLISHED; bown[i] = 0;
#endif
           do
           :: /* ---- fl__record_current ---- */
              do
              :: c = cur;
                 if
                 :: c == 0 -> f = 0; break
                 :: else ->
                    f = btok[BUF(c)];
#ifdef BUG_NO_VALIDATE
                    break
#else
                    if
                    :: cur == c -> break
                    :: else -> skip
                    fi
#endif
                 fi
              od;
              if
              :: tok < f ->
                 /* reject: fl__buffer_put, -ESTALE */
                 d_step {
                     assert(tok < maxacc);          /* I2: no false rejection */
                     NOT_CURRENT(i, mygen);
                     bkind[i] = FREE; bown[i] = 0
                 };
                 break
              :: else ->
#ifdef BUG_STORE_CUR
                 d_step {
                     assert(tok >= maxacc);         /* I2 */
                     maxacc = tok; accepted[cid] = true; lastacc = cid;
                     cur = REF(i, mygen); ok = true
                 };
#else
#ifdef BUG_STALE_RETRY
cas_again:       skip;
#endif
                 d_step {
                     if
                     :: cur == c ->
                        assert(tok >= maxacc);      /* I2 */
                        maxacc = tok; accepted[cid] = true; lastacc = cid;
#ifdef BUG_RELAXED_STATE_LOAD
                        oldcur = cur;
#endif
                        cur = REF(i, mygen); ok = true
                     :: else -> ok = false
                     fi
                 };
#endif
#ifdef BUG_STALE_RETRY
                 if
                 :: !ok -> goto cas_again    /* the CAS again, same old cur */
                 :: else -> skip
                 fi;
#endif
                 if
                 :: ok ->
#ifndef BUG_EARLY_PUBLISH
                    d_step { bkind[i] = PUBLISHED; bown[i] = 0 };
#endif
                    break
                 :: else -> skip
                 fi
              fi
           od;
           atomic { i = 0; mygen = 0; c = 0; f = 0; ok = false }
        fi
    };
    atomic { k = 0; cid = 0; tok = 0 }
    } unless {
        d_step { killed[me] ->
            k = 0; cid = 0; tok = 0; start = 0; i = 0; n = 0; bk = 0; bo = 0;
            bg = 0; mygen = 0; c = 0; f = 0; ok = false }
    };
    finished++
}

proctype reader()
{
    byte r, c, b, t, d0, d1;
    for (r : 1 .. READS) {
        do
        :: c = cur;
           if
           :: c == 0 -> break                /* -ENOENT: never committed */
           :: else ->
              b = BUF(c);
              t = btok[b];
              d0 = cell[b * NCELL];
              d1 = cell[b * NCELL + 1];
#ifndef BUG_READER_NO_VALIDATE
              if
              :: cur == c ->
#else
              if
              :: true ->
#endif
                 /* I3: one accepted commit's data, with its token */
                 assert(d0 == d1 && d0 != 0 && accepted[d0] && t == tokof[d0]);
                 break
              :: else -> skip                /* replaced while copied */
              fi
           fi
        od;
        atomic { c = 0; b = 0; t = 0; d0 = 0; d1 = 0 }
    };
    finished++
}

init
{
    atomic {
        tokof[1] = 1; tokof[2] = 2; tokof[3] = 3; tokof[4] = 2;
#if SEED
        /* commit 5, token 0: committed before the writers start */
        tokof[5] = 0; accepted[5] = true; lastacc = 5;
        btok[0] = 0; cell[0] = 5; cell[1] = 5;
        bkind[0] = PUBLISHED; bgen[0] = 1; cur = REF(0, 1);
#endif
        run writer(1);
        run writer(2);
        run reader()
    };
    /* everybody not stopped forever is done: the record holds the
     * commit with the greatest token accepted, intact */
    finished == NW + 1;
    if
    :: cur != 0 ->
       assert(btok[BUF(cur)] == maxacc && tokof[lastacc] == maxacc);
       assert(cell[BUF(cur) * NCELL] == lastacc && cell[BUF(cur) * NCELL + 1] == lastacc);
       assert(bkind[BUF(cur)] != FREE && bgen[BUF(cur)] == GEN(cur))
    :: else -> assert(maxacc == 0)
    fi
}
