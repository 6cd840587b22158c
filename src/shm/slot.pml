/* SPDX-License-Identifier: MIT */
/*
 * slot.pml - a Promela model of the lock-slot protocol of src/shm/slot.c: the
 * pair CAS, waiting on wake_seq (and the wake_needed flag), expiry takeover
 * and the supervisor's reap.
 * tests/model checks it with spin (ctest -R model_slot); README there.
 *
 * C-VERSION: the line after this comment names the blobs of src/shm/slot.c,
 * src/shm/arch/pair.h (the pair CAS and fl__pair_load) and src/shm/spin.h
 * (the spin before a sleep) the model was last checked against (ctest runs
 * model_slot_sync, model_slot_sync_pair and model_slot_sync_spin to compare them).  When
 * one changes: re-read them and the model, fix the model, run the checks,
 * and put the new blob there (`git hash-object src/shm/slot.c
 * src/shm/arch/pair.h src/shm/spin.h`).
 *
 * WHAT IT MATCHES: src/shm/slot.c, src/shm/arch/pair.h and src/shm/spin.h
 * at those blobs, step for step:
 *   pair      state = token << 1 | HELD; lease = owner, deadline while held,
 *             0 or FREED_BY_DEATH while free.  Every transition is one
 *             16-byte CAS of both words (fl__pair_cas: cmpxchg16b, or casp
 *             or an ldaxp/stlxp loop on aarch64); a failed one hands back
 *             the pair.
 *   load      fl__pair_load: load state; load lease; load state again;
 *             retry until the two state loads agree.
 *   acquire   load; read the clock; held and not expired: the first time,
 *             spin on the state word (spin.h; changed: look again); then
 *             fl__wait_for_change: seq = wake_seq; waiters++;
 *             wake_needed = 1; load state, load lease; both unchanged:
 *             futex_wait(wake_seq, seq, until the deadline of the lease
 *             seen); waiters--; look again.
 *             Free or expired: load token_floor; next = max(token + 1,
 *             floor); CAS from the pair loaded to held(next, me, now +
 *             lease); failed: look again from a fresh load.  Succeeded
 *             after seeing the key held (contended): fl__arm_wake: load
 *             waiters; > 0: wake_needed = 1.
 *   renew     load; loop: read the clock; not held(mine) or expired:
 *             -ESTALE; CAS (s, l) -> (s, owner | now + lease); failed: loop
 *             with the pair the CAS handed back.
 *   release   load; loop: not held(mine): -ESTALE; CAS -> free(T, 0);
 *             failed: loop with the pair handed back; then
 *             fl__release_wake: load wake_needed; 1: exchange it with 0;
 *             got 1: fl__wake_one (load waiters; > 0: wake_seq++,
 *             futex_wake(1)).
 *   check     load; read the clock; OK iff held(mine) and now < deadline.
 *   reap      fencelockd, fl__slots_reap_client for a dead client: load;
 *             while held by it: CAS -> free(T, FREED_BY_DEATH), then
 *             fl__wake_all (waiters > 0: wake_seq++, futex_wake(all));
 *             failed: loop with the pair handed back.  Then
 *             fl__slots_wake_sleepers: fl__wake_all on the slot whether or
 *             not it was freed (one key: the model's slot).
 *   give up   a wait ended by the caller's timeout, after waiters--:
 *             fl__pass_wake_on: fl__arm_wake; load state; free:
 *             fl__release_wake (it may have absorbed the one wake of a
 *             release, and the wake_needed it cleared).  In C an
 *             acquisition that waited and returns at its next look (its
 *             deadline passed or a cancel came while the key is held
 *             again) passes the wake on the same way (fl__acquire_slot):
 *             the model's give-up after the futex returned, after one more
 *             read of the pair.
 *   futex     futex_wait compares the word and queues the caller in one
 *             step; it returns when futex_wake dequeues it, at its absolute
 *             deadline, or by the caller's own timeout or a signal.
 *   life      (-DLIFE; src/life.c) each client entry has a life word, held
 *             by the client's life thread.  A waiter that found the pair
 *             unchanged reads the holder's word: OWNER_DIED -> no sleep;
 *             held -> set FUTEX_WAITERS (CAS, a failed one reads again)
 *             and futex_waitv on wake_seq and the word (both compared and
 *             the caller queued on both, one step); after any return it
 *             reads the word again, and if it died wakes every sleeper of
 *             it (the pass-on).  waiters--; then, the holder dead and the
 *             wait not given up, fl__free_dead: membarrier, CAS (s, l) ->
 *             free(T, FREED_BY_DEATH), fl__wake_all.  A client's fl_open
 *             clears its entry's word (life_tid = 0, mutex initialized)
 *             before its life thread holds it.  The kernel, at the life
 *             thread's exit: word -> OWNER_DIED | (word & WAITERS), and
 *             if WAITERS was set, wakes one sleeper queued on it.
 *
 * WHAT IS CHECKED (assert, unless said otherwise)
 *   I1   each successful acquire CAS issues a token greater than the last
 *        one issued (ghost gtok): unique, strictly increasing in the order
 *        the acquisitions took effect; a failed CAS issues none.
 *   EXCL lease exclusion: when a client starts relying on a lease (its
 *        acquire or renew CAS), nobody else relies on one whose deadline
 *        is still ahead (ghosts believe[], bdl[]).
 *   STALE a stale renew or release, after a takeover or a reap, never
 *        changes the pair: their CAS succeeds only while the token is the
 *        newest issued; a check that answers OK read the lease word of its
 *        own holding (ghost gltok), never a newer holder's.
 *   pair fl__pair_load returns a pair that was the real one when its lease
 *        word was loaded (ghost pl_ok): the lemma the C comment states.
 *   I4   (timed) every client that is not stopped forever finishes: a
 *        holder stopped forever at any step, or one that walks away,
 *        delays the others until its deadline, no longer.  This is spin's
 *        invalid-end-state check (a client asleep or blocked that nothing
 *        can move is an error); the _np test adds that no execution runs
 *        forever (non-progress cycles with no progress labels: no cycle at
 *        all, so every retry loop ends).
 *   I6   (NOTIME: leases never expire, so only a wake ends a sleep) no
 *        waiter sleeps forever on a free lock, when other waiters die, time
 *        out or are interrupted, or a holder dies and is reaped, at any
 *        step.  Invalid-end-state check.
 *
 *   LIFE (-DLIFE) the same, with the life words, and: EXCL when a waiter
 *        frees a dead holder's lock (the holder must have stopped:
 *        membarrier) and when the supervisor reaps at the same time (one
 *        CAS wins); I6 without the supervisor (NO_SUPERVISOR): the news of
 *        a holder's death, through its life word, reaches every sleeper
 *        that slept on it, of this key and of another key the holder held
 *        (KEY2); a reused entry whose earlier occupant died (REUSE) never
 *        makes its new occupant look dead.
 *
 * STOPPED AT ANY STEP
 *   Every statement is one load, store, CAS or fetch-add of the C code (or
 *   a purely local computation); spin explores every interleaving, so a
 *   client paused at any step while the others run, then resumed, is
 *   covered.  Stopped forever: the killer may, once, stop a client for good
 *   at any step (SIGSTOP, or a death nobody reaps: unregistered), or kill
 *   it and have fencelockd reap it (registered).  A client's body is
 *   wrapped in `unless { killed[me] }`, which takes effect before its next
 *   step.  In NOTIME configurations only deaths (reaped) happen, at any
 *   step, between a release CAS and its wake too (see BUG_REAP_NO_WAKE).
 *
 * TIME.  `now` is a monotonic clock in abstract units; deadlines are small
 * integers.  Time passes between any two steps, but only a clock read can
 * tell, so the clock advances when read: by any amount up to the horizon,
 * the greatest deadline anybody relies on or the pair holds.  A sleeper's
 * futex deadline advances it too (its deadline came).  Past the horizon
 * every deadline has passed and only differences matter, so nothing is
 * lost, and the state space stays finite.
 *
 * ABSTRACTIONS, AND WHAT IS NOT MODELLED
 *   - One key (slot); NC clients (2 or 3) run ROUNDS rounds of: acquire
 *     (FL_WAIT_FOREVER; GIVEUPS is a budget of waits ended by the caller's
 *     own timeout, INTRS of waits ended by a signal), then optionally
 *     renew and check (HOLDER_OPS), then release or walk away (timed only).
 *     Acquire leases last LEASE units, renewals RLEASE (lease_ns is per
 *     call in the C API; a longer renewal lets a renew move a deadline
 *     past other clients' decisions).  Owners are client numbers 1..NC.
 *   - The optional budgets of timeouts and signals end at any time
 *     (no_more_interruptions): otherwise the mere chance of one would hide
 *     a waiter asleep forever from the end-state check.
 *   - VICTIM=k: only client k is stopped or killed.  Clients run the same
 *     code, and their numbers only name them, so one victim covers all.
 *   - ATOMIC_LOAD: configurations too big for the three-step load use the
 *     lemma above, checked by the configurations that expand it.
 *   - Sequentially consistent memory.  The C code's orders (seq_cst
 *     fetch-add and loads on the Dekker pair, the pair CAS as a seq_cst
 *     compare-exchange (cmpxchg16b, a full barrier, on x86-64; caspal or
 *     ldaxp/stlxp, acquire and release, each followed by an ldar, on
 *     aarch64), acquire loads in fl__pair_load) are what makes SC a sound
 *     view on both architectures (docs/memory-orders.md); the memory
 *     orders themselves are not checked.
 *   - The spin loop is one load of the state word, and every waiter may
 *     spin once.  In C only some do (spin.h SPINNING: all while nobody
 *     sleeps; behind sleepers, the one waiter that claims the holding,
 *     when the holder took the key on another CPU): a subset of what the
 *     model allows.  The two hints that decide it (holder_cpu, stored
 *     after a contended acquiring CAS; spin_holding, the claim's CAS) are
 *     relaxed and read by no other step, so they are not modelled: no
 *     wake, sleep or CAS of the pair depends on them.  The epoch and overflow
 *     checks of the token counter, the voiding of another boot's leases
 *     (before clients open), counters, holder fields, events and stale
 *     notes are not modelled.  fencelockd may raise token_floor once, at
 *     any time (FLOOR); the raise shows when somebody reads it.
 *   - wake_seq and waiters are small counters (no 32-bit wrap).
 *   - LIFE: clients are registered, owners are entry indexes 1..NC, and
 *     every client but REUSE's client 1 has a life thread.  A death
 *     (SIGKILL) is three steps of the killer: dying (the signal is sent),
 *     the victim stops, the life word dies (the kernel), the last two in
 *     either order (GAP=1: the life thread may exit while another thread
 *     of the process still runs; a waiter's membarrier stops it, as the
 *     real barrier makes it enter the kernel and never come back); then
 *     fencelockd is told, unless NO_SUPERVISOR (fencelockd stopped).
 *     KEY2 adds a second key that the victim holds from the start and
 *     never releases, and one waiter of it; the killer must then kill the
 *     victim.  With NO_SUPERVISOR and NOTIME the model has 2 clients: with
 *     3, a sleeper that went to sleep under an earlier holder (a release
 *     wakes one sleeper; the others keep sleeping on the earlier holder's
 *     life word) sleeps on when the next holder dies, which the end-state
 *     check reports: in C that sleep ends at the deadline of the lease it
 *     saw (I4), the bound life.c states (WHAT IT DOES NOT COVER).  The life
 *     word's unlock at fl_close, execve and the life thread's start-up
 *     failures are not modelled (a failure leaves life_tid 0: REUSE).
 *
 * BUG VARIANTS: each must FAIL (ctest runs them, model_slot_bugs):
 *   BUG_SPLIT_CAS     acquire CASes the state word only, then stores the
 *                     lease word: EXCL fails (a takeover of a fresh holding).
 *   BUG_NO_REREAD     fl__pair_load skips the re-load of the state word: a
 *                     stale check answers OK with a newer holder's lease.
 *   BUG_STALE_RENEW   renew does not compare the token: a stale renew
 *                     after a takeover moves the new holder's deadline.
 *   BUG_NO_DEADLINE   futex_wait ignores the holder's deadline: a holder
 *                     stopped forever blocks its waiters forever (I4).
 *   BUG_WAITERS_LATE  the waiter loads the pair before waiters++ (no
 *                     Dekker): a lost wakeup (I6).
 *   BUG_NO_PASS_ON    a wait ended by a timeout does not pass the wake on:
 *                     it absorbed the one wake of a release, and the other
 *                     waiters sleep on a free lock (I6).
 *   BUG_NO_ARM        a contended acquisition does not set wake_needed
 *                     again: the release that woke it cleared the flag, so
 *                     its own release wakes nobody and the other waiters
 *                     sleep on a free lock (I6).
 *   BUG_PASS_NO_ARM   a wait given up while another holds the key does not
 *                     set wake_needed: that holder's release wakes nobody
 *                     (I6).
 *   BUG_REAP_WAKE_NONE the supervisor frees a dead holder's lock but wakes
 *                     nobody: with wake-one releases, a waiter woken and
 *                     then killed takes the wake with it (I5, I6).
 *   BUG_REAP_NO_WAKE  the supervisor wakes a slot's waiters only when it
 *                     frees the slot: a releaser that dies between its
 *                     release CAS and its wake leaves them asleep on a free
 *                     lock until the deadline they saw (I5, I6; NOTIME
 *                     shows the sleep as an invalid end state): the reap
 *                     of slot.c before the model found this.
 *   BUG_STALE_RETRY   a failed acquire CAS is retried with the pair it had
 *                     loaded, not a fresh one: passes the safety search,
 *                     fails the non-progress search (a livelock: --np).
 *   With -DLIFE:
 *   BUG_LIFE_NO_WAITERS  waiters do not set FUTEX_WAITERS before they
 *                     sleep on a life word: the kernel wakes nobody at the
 *                     death, and without fencelockd they sleep on (I5, I6).
 *   BUG_LIFE_NO_PASS_ON  the sleeper the kernel woke does not wake the
 *                     others of the life word: the waiter of the dead
 *                     holder's other key (KEY2) sleeps on (I5, I6).
 *   BUG_LIFE_NO_OWNER_CHECK  the waiter frees whatever holding the key has
 *                     when it frees, not the exact pair it read: a live
 *                     holder's lock freed (EXCL).
 *   BUG_LIFE_NO_INIT  a new occupant does not clear its entry's life word:
 *                     the earlier occupant's OWNER_DIED makes it look dead
 *                     (REUSE; EXCL).
 *   BUG_LIFE_NO_MEMBARRIER  the waiter frees without the membarrier: the
 *                     dying holder still runs after its life word died and
 *                     still relies on its lease (GAP; EXCL).
 */
/* Outside the model, unchanged by it: the entry checks against a handle
 * used after fork (fl__handle_check: a guard before any step) and of a key
 * handle's tag and slot (fl_acquire_key: guards before any step; after them
 * an acquisition by key handle is fl_acquire's, step for step, on the slot
 * the handle names, so the model's acquire is both), and the conversion of
 * deadlines by a time namespace's offset (fl__deadline_ns, fl__make_lease:
 * the same arithmetic in every process, so every process reads the same
 * deadline from the same pair; the model's clock is host time); the
 * statistics counters (slot.c, COUNTERS: relaxed locked adds on the paths
 * that return, and the holder's plain load and store after its acquiring
 * CAS, which count its acquisition and the release before it; no step of
 * the protocol reads a counter); and the early returns around a wait
 * (slot.c, EARLY RETURNS): a wait on a key whose state word holds this
 * handle's own latest token returns -EDEADLK, and a cancelled wait returns
 * -ECANCELED, both before any CAS and without sleeping, so they change no
 * pair and no count (a cancelled sleeper undoes its waiters increment as a
 * timed-out one does; the trigger's bump of wake_seq is one more spurious
 * wake, which the model's waiters already tolerate); and the trigger's
 * write to the cancel's eventfd after all that, which only network (etcd)
 * waits poll and which touches no pair and no count. */
/* Issue 17 (arm64) moved fl__pair_cas, fl__pair_load and the spin hint out
 * of slot.c into src/arch/pair.h (the CAS per architecture below it),
 * unchanged for x86-64, and added aarch64's CAS (casp or ldaxp/stlxp, with
 * the same contract): no step of the model changed, only where the code
 * lives. */
/* Issue 27 moved slot.c and pair.h into src/shm/, the spin into
 * src/shm/spin.h, fl_cancel_* into src/cancel.c (the wait reaches the
 * cancel object through cancel.h: the same seq_cst publication and flag
 * reads) and fl_lock_info_get into inspect.c, and made the handle a
 * struct fl__shm: no step of the model changed, only where the code
 * lives.  Later, a reap and a waiter's free of a dead holder count the
 * death before their wake instead of after it (so that what a woken
 * waiter reports comes after the count): counters are outside the model
 * (above), the CAS and the wake are its steps, in the same order. */
/* C-VERSION: src/shm/slot.c git-blob e772194beb95c3578491538ce935f58c98eb7f1f,
 *            src/shm/arch/pair.h git-blob 7486f73b5cd5daeecf030e046bcde9ed9f5b23a2,
 *            src/shm/spin.h git-blob 15e6341db7b8203e496c828cd0504e1e9f0d42cd */

#ifndef NC
#define NC 3
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef LEASE
#define LEASE 1             /* lease_ns of fl_acquire, in clock units */
#endif
#ifndef RLEASE
#define RLEASE 2            /* lease_ns of fl_renew (a longer one: renew
                             * can extend a lease past others' decisions) */
#endif
#ifndef FLOOR
#define FLOOR 2             /* token floor fencelockd may raise to; 0: never */
#endif
#ifndef GIVEUPS
#define GIVEUPS 1           /* waits that end by the caller's own timeout */
#endif
#ifndef CANCELS
#define CANCELS 1           /* waits ended by fl_cancel_trigger after the
                             * futex returned, woken or not (-ECANCELED) */
#endif
#ifndef INTRS
#define INTRS 1             /* waits interrupted by a signal (EINTR) */
#endif
#ifndef HOLDER_OPS
#define HOLDER_OPS 1        /* 1: holders may renew and check; 0: they don't */
#endif
#ifndef KILL
#define KILL 1              /* 1: the killer may stop or kill one client */
#endif
#ifndef VICTIM
#define VICTIM 0            /* 0: any client; k: client k (clients are
                             * symmetric, so one victim covers them all) */
#endif
#ifndef GAP
#define GAP 1               /* LIFE: the life thread may die while another
                             * thread of the process still runs */
#endif
#ifndef REUSE
#define REUSE 0             /* LIFE: client 1 took an entry whose earlier
                             * occupant died (its life word says so), and
                             * its own life thread never started */
#endif

/* the pair */
#define HELD(s)   ((s) & 1)
#define TOK(s)    ((s) >> 1)
#define DL(l)     ((l) & 31)       /* deadline, while held */
#define OWNER(l)  (((l) >> 5) & 3) /* owner client, while held */
#define OWNER_BITS 96              /* 3 << 5 */
#define FREED_BY_DEATH 128         /* lease word of a lock freed by a reap */

byte st = 0;          /* state word */
byte lw = 0;          /* lease word */
byte wake_seq = 0;    /* futex word */
byte waiters = 0;
bit wneed = 0;        /* wake_needed: a sleeper may need a release's wake */
#ifdef KEY2
bool asleep[NC + 2];  /* the futex wait queues: clients on wake_seq, and
                       * key 2's waiter (NC + 1) on wake2 */
#else
bool asleep[NC + 1];  /* the futex wait queue of wake_seq */
#endif
byte tfloor = 0;      /* header token_floor */
byte now = 0;         /* CLOCK_MONOTONIC */

/* ghosts */
byte gtok = 0;        /* last token issued */
byte gltok = 0;       /* token whose holding the lease word describes */
bool believe[NC + 1]; /* client relies on its lease ... */
byte bdl[NC + 1];     /* ... until this deadline */
bool killed[NC + 1];  /* stopped forever or dead */
byte reap_req = 0;    /* dead client the supervisor is told about */
byte giveups = GIVEUPS;
byte cancels = CANCELS;
byte intrs = INTRS;

#define UNBELIEVE(x) believe[x] = false; bdl[x] = 0

#ifdef LIFE
/* Life words (src/life.c): one per client entry, a robust futex that the
 * client's life thread holds for the client's life.  The kernel's death
 * handling (handle_futex_death) turns a held word into OWNER_DIED, keeps
 * FUTEX_WAITERS, and wakes one sleeper queued on it if that bit was set. */
#define LV_LIVE    1    /* a life thread's TID: its process lives */
#define LV_DIED    2    /* FUTEX_OWNER_DIED (the kernel cleared the TID) */
#define LV_WAITERS 4    /* FUTEX_WAITERS */
byte life[NC + 1];      /* each client entry's life word */
bool dying[NC + 1];     /* SIGKILL sent: its threads stop at their next entry
                         * to the kernel, which need not come before its
                         * life thread's exit (GAP) */
#ifdef KEY2
#define NQ (NC + 1)     /* futex sleepers: the clients and key 2's waiter */
#else
#define NQ NC
#endif
byte lsleep[NQ + 1];    /* futex_waitv: the entry whose life word a sleeper
                         * is queued on besides its key's word (0: none) */
#ifdef KEY2
/* A second key, held by the victim all along (it never releases it), and
 * one waiter of it: the news of the victim's death must reach it too. */
byte st2 = 3;                  /* held, token 1 */
byte lw2 = VICTIM << 5;        /* owner: the victim (NOTIME: no deadline) */
byte wake2 = 0;                /* key 2's futex word */
#endif

/* A client stops for good (SIGKILL reached every thread, or the waiter's
 * membarrier made it reach them). */
#define STOP(v) \
    atomic { \
        if \
        :: !killed[v] -> killed[v] = true; UNBELIEVE(v) \
        :: else -> skip \
        fi \
    }
/* the kernel wakes one sleeper queued on life[h] (any of them) */
#define LIFE_WAKE_ONE_BODY(h) \
        if \
        :: asleep[1] && lsleep[1] == h -> asleep[1] = false \
        :: asleep[2] && lsleep[2] == h -> asleep[2] = false \
        :: NQ > 2 && asleep[3] && lsleep[3] == h -> asleep[3] = false \
        :: NQ > 3 && asleep[NQ] && lsleep[NQ] == h -> asleep[NQ] = false \
        :: else -> skip \
        fi
/* futex_wake(INT_MAX) on life[h]: the news passed on */
#define LIFE_WAKE_ALL(h) \
    d_step { \
        for (xj : 1 .. NQ) { \
            if \
            :: lsleep[xj] == h -> asleep[xj] = false \
            :: else -> skip \
            fi \
        }; \
        xj = 0 \
    }
/* handle_futex_death for the dying life thread of client v */
#define LIFE_DEATH(v) \
    atomic { \
        if \
        :: life[v] & LV_LIVE -> \
           if \
           :: life[v] & LV_WAITERS -> \
              life[v] = LV_DIED | LV_WAITERS; \
              LIFE_WAKE_ONE_BODY(v) \
           :: else -> life[v] = LV_DIED \
           fi \
        :: else -> skip   /* no life thread: nothing to mark */ \
        fi \
    }
/* fl__life_confirm: membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED).  Every
 * thread of a process whose life word died has SIGKILL pending; the
 * barrier's interrupt makes each one that still runs enter the kernel, and
 * it never returns to user code: after it, the dying client takes no step. */
#ifdef BUG_LIFE_NO_MEMBARRIER
#define MEMBARRIER(h) skip
#else
#define MEMBARRIER(h) \
    if \
    :: dying[h] -> STOP(h) \
    :: else -> skip \
    fi
#endif
/* fl__life_watch: read the holder's life word; died: dead = true; held by
 * a life thread: make sure FUTEX_WAITERS is set (CAS; a failed CAS reads
 * again), lv = the value to sleep on; no life word: lv = 0 (the key's word
 * only).  me: the sleeper's queue index. */
#ifdef BUG_LIFE_NO_WAITERS
#define LIFE_SET_WAITERS(h) break
#else
#define LIFE_SET_WAITERS(h) \
    atomic { \
        if \
        :: life[h] == lv -> life[h] = lv | LV_WAITERS; lv = lv | LV_WAITERS; break \
        :: else -> skip \
        fi \
    }
#endif
#define LIFE_WATCH(h) \
    do \
    :: lv = life[h]; \
       if \
       :: lv & LV_DIED -> dead = true; break \
       :: !(lv & (LV_LIVE | LV_DIED)) -> lv = 0; break \
       :: (lv & LV_LIVE) && (lv & LV_WAITERS) -> break \
       :: else -> LIFE_SET_WAITERS(h) \
       fi \
    od
/* After the sleep: a life word that died means this sleeper may hold the
 * kernel's one wake; pass the news on to every sleeper of that word. */
#ifdef BUG_LIFE_NO_PASS_ON
#define LIFE_PASS_ON(h) skip
#else
#define LIFE_PASS_ON(h) LIFE_WAKE_ALL(h)
#endif
#define LIFE_AFTER_SLEEP(h) \
    if \
    :: lv != 0 && (life[h] & LV_DIED) -> LIFE_PASS_ON(h); dead = true \
    :: else -> skip \
    fi
#endif /* LIFE */
#define NEWDL(d) assert((d) < 32)   /* fits the deadline bits of lw */

/* Lease exclusion (EXCL): me starts relying on a lease; nobody else may rely
 * on one that has not expired, unless me's own has expired already. */
#define EXCL(me) \
    for (xj : 1 .. NC) { \
        assert(xj == me || !believe[xj] || bdl[xj] <= now || bdl[me] <= now) \
    }; \
    xj = 0

/* The clock's horizon: the greatest deadline anybody still relies on,
 * the pair's included (a sleeper's own deadline wakes it: see the futex). */
#define HORIZON(h) \
    h = (HELD(st) -> DL(lw) : 0); \
    for (xj : 1 .. NC) { \
        if :: bdl[xj] > h -> h = bdl[xj] :: else -> skip fi \
    }; \
    h = (now > h -> now : h); \
    xj = 0

/* Reading the clock.  Time passes between any two steps; nobody can tell
 * until they read the clock, so the clock advances when somebody reads it:
 * by any amount up to the horizon (see TIME in the header). */
#ifdef NOTIME
#define CLOCK_READ(n) n = now
#else
#define CLOCK_READ(n) atomic { HORIZON(hz); select(n : now .. hz); now = n; hz = 0 }
#endif

/* fl__pair_load: load state, load lease, re-load state until the two state
 * loads agree.  Lemma (checked where expanded): the pair it returns was
 * the real pair when the lease was loaded, because the state word never
 * takes the same value twice (ghost pl_ok).  With -DATOMIC_LOAD the model
 * uses the lemma and loads the pair in one step, to check bigger
 * configurations. */
#if defined(ATOMIC_LOAD) && !defined(BUG_NO_REREAD)
#define PAIR_LOAD(s, l) d_step { s = st; l = lw }
#define PAIR_LOAD_TAG(s, l, lt) d_step { s = st; l = lw; lt = gltok }
#elif defined(BUG_NO_REREAD)
#define PAIR_LOAD(s, l) s = st; l = lw
#define PAIR_LOAD_TAG(s, l, lt) s = st; atomic { l = lw; lt = gltok }
#else
#define PAIR_LOAD(s, l) \
    do \
    :: s = st; atomic { l = lw; pl_ok = (st == s) }; \
       if \
       :: s == st -> assert(pl_ok); pl_ok = false; break \
       :: else -> pl_ok = false \
       fi \
    od
/* the same, also reading the ghost tag of the lease word with it */
#define PAIR_LOAD_TAG(s, l, lt) \
    do \
    :: s = st; atomic { l = lw; lt = gltok; pl_ok = (st == s) }; \
       if \
       :: s == st -> assert(pl_ok); pl_ok = false; break \
       :: else -> pl_ok = false \
       fi \
    od
#endif

/* renew's -ESTALE test; BUG_STALE_RENEW forgets the token */
#ifdef BUG_STALE_RENEW
#define RENEW_LOST(s, l, n) ((n) >= DL(l))
#else
#define RENEW_LOST(s, l, n) ((s) != (mytok << 1 | 1) || (n) >= DL(l))
#endif

/* fl__wake_sleepers: read waiters; if any, bump wake_seq and wake one
 * (fl__release_wake, when it cleared wake_needed) or all (the supervisor,
 * a waiter that freed a dead holder's lock). */
/* futex_wake(1): one sleeper, any of them (the kernel's order is FIFO by
 * priority; any is the stronger check) */
#define FUTEX_WAKE_ONE \
    atomic { \
        if \
        :: asleep[1] -> asleep[1] = false \
        :: asleep[2] -> asleep[2] = false \
        :: NC > 2 && asleep[NC] -> asleep[NC] = false \
        :: else -> skip \
        fi \
    }
/* futex_wake(INT_MAX): every sleeper */
#define FUTEX_WAKE_ALL \
    d_step { for (xj : 1 .. NC) { asleep[xj] = false }; xj = 0 }
#define WAKE_ONE \
    if \
    :: waiters > 0 -> \
       wake_seq++; \
       FUTEX_WAKE_ONE \
    :: else -> skip \
    fi
/* fl__release_wake (a release, a waiter passing a wake on): wake one only
 * if a sleeper asked for it since the last such wake.  wx: a local. */
#define RELEASE_WAKE \
    if \
    :: wneed -> \
       atomic { wx = wneed; wneed = 0 }; \
       if \
       :: wx -> wx = false; WAKE_ONE \
       :: else -> skip \
       fi \
    :: else -> skip \
    fi
/* fl__arm_wake: sleepers left (a contended acquisition, whose wake may have
 * cleared wake_needed; a wait given up): the next release must wake one. */
#define ARM_WAKE \
    if \
    :: waiters > 0 -> wneed = 1 \
    :: else -> skip \
    fi
#ifdef BUG_REAP_WAKE_NONE
#define WAKE_ALL skip
#else
#define WAKE_ALL \
    if \
    :: waiters > 0 -> \
       wake_seq++; \
       FUTEX_WAKE_ALL \
    :: else -> skip \
    fi
#endif

/* Stops one client forever, or kills it and has the supervisor reap it. */
#ifdef KEY2
proctype killer()   /* started by init, once the victim holds key 2 */
#else
active proctype killer()
#endif
{
    byte v, xj;
    if
#ifndef KEY2
    :: skip
#endif
#if KILL
    :: if
#if VICTIM == 0
       :: select(v : 1 .. NC);
#else
       :: v = VICTIM;
#endif
       fi;
       if
#ifndef NOTIME
       :: killed[v] = true            /* stopped forever, never reaped */
#endif
#ifdef LIFE
       :: dying[v] = true;            /* SIGKILL sent */
          if
          :: skip; STOP(v); LIFE_DEATH(v)
#if GAP
          :: skip; LIFE_DEATH(v); STOP(v)   /* its life thread exits first */
#endif
          fi;
#ifndef NO_SUPERVISOR
          reap_req = v                /* gone: fencelockd reaps */
#else
          skip                        /* fencelockd is stopped */
#endif
#else
       :: atomic {
              killed[v] = true; UNBELIEVE(v) };
          reap_req = v                /* died: fencelockd reaps */
#endif
       fi;
       v = 0
#endif
    fi
}

#if GIVEUPS + INTRS + CANCELS > 0
/* A caller's timeout or a signal may end a sleep, or never come.  This
 * process decides, at any time, that no more will come: without it, the
 * mere possibility of one would hide a waiter asleep forever from the
 * invalid-end-state check. */
active proctype no_more_interruptions()
{
    d_step { giveups = 0; intrs = 0; cancels = 0 }
}
#endif

/* fencelockd: fl__slots_reap_client for the dead client. */
active proctype supervisor()
{
    byte s, l, v, xj;
    bool ok, pl_ok;
end_idle:
    reap_req != 0;
    v = reap_req;
    PAIR_LOAD(s, l);
    do
    :: HELD(s) && OWNER(l) == v ->
       d_step {
           if
           :: st == s && lw == l ->
              st = s - 1; lw = FREED_BY_DEATH; gltok = 0; ok = true
           :: else -> s = st; l = lw; ok = false
           fi
       };
       if
       :: ok -> WAKE_ALL; break
       :: else -> skip
       fi
    :: else ->
#ifndef BUG_REAP_NO_WAKE
       /* fencelockd wakes every slot's sleepers after a round in which a
        * client went (fl__slots_wake_sleepers), freed or not: the dead
        * client may have been a releaser killed between its release CAS
        * and its wake */
       WAKE_ALL;
#endif
       break
    od;
    atomic { s = 0; l = 0; v = 0; ok = false }
}

proctype client(byte me)
{
    byte s, l, n, next, seq, until, mytok, lt, xj, hz, round;
    bool spun, gaveup, ok, pl_ok, cont, wx;
#ifdef LIFE
    byte h, lv;
    bool dead;
#endif

    {
#ifdef LIFE
    /* fl_open (life.c): the entry's life word becomes this occupant's
     * before it can take anything: life_tid = 0 and the mutex initialized
     * (a word an earlier occupant's death left OWNER_DIED is reset), then
     * the life thread locks it and life_tid is published. */
#ifdef KEY2
    if
    :: me == VICTIM -> skip       /* done before it took key 2 (init) */
    :: else ->
#endif
#ifndef BUG_LIFE_NO_INIT
    life[me] = 0;
#endif
    if
    :: REUSE && me == 1 -> skip   /* its life thread never started */
    :: else -> life[me] = LV_LIVE
    fi
#ifdef KEY2
    fi
#endif
    ;
#endif
    do
    :: round < ROUNDS ->
        /* ---------------- fl_acquire ---------------- */
        spun = false;
        do
        :: PAIR_LOAD(s, l);
           CLOCK_READ(n);
           if
           :: HELD(s) && n < DL(l) ->
              n = 0;
              cont = true;
              if
              :: !spun && st != s ->
                 spun = true              /* fl__spin_until_changed saw it */
              :: else ->
                 spun = true;
                 /* fl__wait_for_change */
                 seq = wake_seq;
#ifndef BUG_WAITERS_LATE
                 waiters++;
                 wneed = 1;
#endif
                 if
                 :: st == s ->
                    if
                    :: lw == l ->
#ifdef BUG_WAITERS_LATE
                       waiters++;
                       wneed = 1;
#endif
                       until = DL(l);
#ifdef LIFE
                       /* the holder's life word (fl__life_watch) */
                       h = OWNER(l);
                       LIFE_WATCH(h);
                       if
                       :: dead -> skip    /* no sleep: the holder is dead */
                       :: else ->
                       /* futex_waitv on wake_seq and, if it has one, the
                        * holder's life word: both compared and the caller
                        * queued on both, one step */
                       atomic {
                           if
                           :: wake_seq == seq && (lv == 0 || life[h] == lv) ->
                              asleep[me] = true;
                              lsleep[me] = (lv != 0 -> h : 0)
                           :: else -> skip
                           fi;
                           seq = 0
                       };
#else
                       /* futex_wait: compare and enqueue, one step */
                       atomic {
                           if
                           :: wake_seq == seq -> asleep[me] = true
                           :: else -> skip
                           fi;
                           seq = 0
                       };
#endif
                       if
                       :: atomic { !asleep[me] -> skip }  /* woken, or no sleep */
#if !defined(NOTIME) && !defined(BUG_NO_DEADLINE)
                       :: atomic { asleep[me] ->          /* the deadline came */
                              if
                              :: now < until -> now = until
                              :: else -> skip
                              fi;
                              asleep[me] = false }
#endif
                       :: atomic { asleep[me] && giveups > 0 ->
                              asleep[me] = false; giveups--; gaveup = true }
                       :: atomic { asleep[me] && intrs > 0 ->
                              asleep[me] = false; intrs-- }
                       fi;
                       /* fl_cancel: the flag read after the futex returns,
                        * by a wake (which this wait then absorbed) or not.
                        * The trigger's own wake of the key's sleepers is
                        * left out: it happens only while the waiter is
                        * still published as sleeping, and without it the
                        * check is stricter. */
                       if
                       :: atomic { cancels > 0 && !gaveup ->
                              cancels--; gaveup = true }
                       :: skip
                       fi
#ifdef LIFE
                       ;
                       lsleep[me] = 0;
                       /* after any return: a died life word is passed on */
                       LIFE_AFTER_SLEEP(h)
                       fi
#endif
                    :: else
#ifdef BUG_WAITERS_LATE
                       -> waiters++; wneed = 1
#endif
                    fi
                 :: else
#ifdef BUG_WAITERS_LATE
                    -> waiters++; wneed = 1
#endif
                 fi;
#ifdef LIFE
                 atomic { waiters--; seq = 0; until = 0 };
                 /* the holder died (seen before or after the sleep):
                  * fl__free_dead, unless the wait ends anyway */
                 if
                 :: dead && !gaveup ->
                    MEMBARRIER(h);
                    d_step {
                        if
#ifdef BUG_LIFE_NO_OWNER_CHECK
                        :: HELD(st) ->         /* whoever holds it now */
                           st = st - 1; lw = FREED_BY_DEATH; gltok = 0; ok = true
#else
                        :: st == s && lw == l ->    /* the dead holding */
                           st = s - 1; lw = FREED_BY_DEATH; gltok = 0; ok = true
#endif
                        :: else -> ok = false
                        fi
                    };
                    if
                    :: ok -> ok = false; WAKE_ALL
                    :: else -> skip
                    fi
                 :: else -> skip
                 fi;
                 d_step { dead = false; h = 0; lv = 0; s = 0; l = 0 };
#else
                 atomic { waiters--; seq = 0; until = 0; s = 0; l = 0 };
#endif
                 if
                 :: gaveup ->
#ifndef BUG_NO_PASS_ON
                    /* fl__pass_wake_on: this wait may have absorbed the
                     * one wake of a release and cleared wake_needed: set
                     * it again for the holder's release; the lock free:
                     * wake one now */
#ifndef BUG_PASS_NO_ARM
                    ARM_WAKE;
#endif
                    if
                    :: !HELD(st) -> RELEASE_WAKE
                    :: else -> skip
                    fi;
#endif
                    spun = false; cont = false; break   /* -ETIMEDOUT */
                 :: else -> skip
                 fi
              fi
           :: else ->
              /* free, or held with the deadline passed: take it */
              /* read token_floor.  fencelockd raises it (a new epoch)
               * once, at any time; nobody can tell when before reading it,
               * so the raise happens at a read. */
              atomic {
                  if
                  :: FLOOR > 0 && tfloor < FLOOR -> tfloor = FLOOR
                  :: true -> skip
                  fi;
                  next = (tfloor > TOK(s) + 1 -> tfloor : TOK(s) + 1)
              };
#ifndef BUG_SPLIT_CAS
#ifdef BUG_STALE_RETRY
stale_retry:  skip;
#endif
              d_step {
                  if
                  :: st == s && lw == l ->
                     assert(next > gtok);                         /* I1 */
                     st = next << 1 | 1; lw = me << 5 | (n + LEASE);
                     gtok = next; gltok = next; mytok = next;
                     NEWDL(n + LEASE);
                     believe[me] = true; bdl[me] = n + LEASE;
                     EXCL(me);
                     ok = true
                  :: else -> ok = false  /* somebody moved first: no token */
                  fi
#ifndef BUG_STALE_RETRY
                  ; s = 0; l = 0; next = 0
#endif
              };
#ifdef BUG_STALE_RETRY
              if
              :: !ok -> goto stale_retry  /* the CAS again, with the old pair */
              :: else -> s = 0; l = 0; next = 0
              fi;
#endif
#else
              d_step {
                  if
                  :: st == s ->
                     assert(next > gtok);
                     st = next << 1 | 1; gtok = next; mytok = next; ok = true
                  :: else -> ok = false
                  fi;
                  s = 0; l = 0; next = 0
              };
              if
              :: ok ->
                 d_step { lw = me << 5 | (n + LEASE); gltok = mytok; NEWDL(n + LEASE);
                     believe[me] = true; bdl[me] = n + LEASE; EXCL(me) }
              :: else -> skip
              fi;
#endif
              n = 0;
              if
              :: ok ->
                 ok = false; spun = false;
#ifndef BUG_NO_ARM
                 if
                 :: cont -> ARM_WAKE      /* fl__arm_wake */
                 :: else -> skip
                 fi;
#endif
                 cont = false; break
              :: else -> skip
              fi
           fi
        od;

        if
        :: gaveup -> gaveup = false
        :: else ->
           /* ---------------- fl_renew (optional) ---------------- */
           if
#if HOLDER_OPS
           :: PAIR_LOAD(s, l);
              do
              :: CLOCK_READ(n);
                 if
                 :: RENEW_LOST(s, l, n) ->
                    UNBELIEVE(me);                         /* -ESTALE */
                    break
                 :: else ->
                    d_step {
                        if
                        :: st == s && lw == l ->
                           assert(gtok == mytok);                 /* STALE */
                           lw = (l & OWNER_BITS) | (n + RLEASE);
                           NEWDL(n + RLEASE);
                           bdl[me] = n + RLEASE; EXCL(me); ok = true
                        :: else -> s = st; l = lw; ok = false
                        fi;
                        n = 0
                    };
                    if
                    :: ok -> ok = false; break
                    :: else -> skip
                    fi
                 fi
              od;
              atomic { s = 0; l = 0; n = 0 }
#endif
           :: skip
           fi;

           /* ---------------- fl_check (optional) ---------------- */
           if
#if HOLDER_OPS
           :: PAIR_LOAD_TAG(s, l, lt);
              CLOCK_READ(n);
              if
              :: s == (mytok << 1 | 1) && n < DL(l) ->
                 assert(lt == mytok)                              /* STALE */
              :: else -> UNBELIEVE(me)                     /* -ESTALE */
              fi;
              d_step { s = 0; l = 0; n = 0; lt = 0 }
#endif
           :: skip
           fi;

           /* ---------------- fl_release, or walk away ---------------- */
           UNBELIEVE(me);
           if
           :: PAIR_LOAD(s, l);
              do
              :: s != (mytok << 1 | 1) -> break                 /* -ESTALE */
              :: s == (mytok << 1 | 1) ->
                 d_step {
                     if
                     :: st == s && lw == l ->
                        assert(gtok == mytok);                    /* STALE */
                        st = mytok << 1; lw = 0; gltok = 0;
                        ok = true
                     :: else -> s = st; l = lw; ok = false
                     fi
                 };
                 if
                 :: ok -> ok = false; RELEASE_WAKE; break
                 :: else -> skip
                 fi
              od;
              atomic { s = 0; l = 0 }
#ifndef NOTIME
           :: skip                    /* never releases: the lease expires */
#endif
           fi
        fi;
        mytok = 0;
        round++
    :: else -> break
    od
    } unless {
        d_step { killed[me] ->      /* its locals no longer matter */
            s = 0; l = 0; n = 0; next = 0; seq = 0; until = 0; mytok = 0;
            lt = 0; xj = 0; hz = 0; round = 0; spun = false; gaveup = false;
            ok = false; cont = false; wx = false; asleep[me] = false
#ifdef LIFE
            ; h = 0; lv = 0; dead = false; lsleep[me] = 0
#endif
        }
    }
}

#ifdef KEY2
/* A waiter of key 2, which the victim holds and never releases: only the
 * news of the victim's death, through its life word, can free it
 * (fencelockd is stopped: KEY2 goes with NO_SUPERVISOR).  The same steps
 * as a client's wait (fl__wait_for_change, fl__free_dead); nobody else
 * waits for key 2, so it keeps no count of waiters. */
proctype k2waiter()
{
    byte s, l, h, lv, seq, xj;
    bool dead;
    do
    :: atomic { s = st2; l = lw2 };
       if
       :: !HELD(s) -> break           /* free: it takes key 2 */
       :: else ->
          seq = wake2;
          h = OWNER(l);
          LIFE_WATCH(h);
          if
          :: !dead ->
             atomic {
                 if
                 :: wake2 == seq && (lv == 0 || life[h] == lv) ->
                    asleep[NC + 1] = true;
                    lsleep[NC + 1] = (lv != 0 -> h : 0)
                 :: else -> skip
                 fi;
                 seq = 0
             };
             atomic { !asleep[NC + 1] -> lsleep[NC + 1] = 0 };
             LIFE_AFTER_SLEEP(h)
          :: else -> skip
          fi;
          if
          :: dead ->
             MEMBARRIER(h);
             d_step {
                 if
                 :: st2 == s && lw2 == l -> st2 = s - 1; lw2 = FREED_BY_DEATH; wake2++
                 :: else -> skip
                 fi
             }
          :: else -> skip
          fi;
          d_step { dead = false; h = 0; lv = 0; seq = 0 }
       fi
    od;
    atomic { s = 0; l = 0 }
}
#endif

init
{
    byte i;
    atomic {
#ifdef LIFE
#if REUSE
        life[1] = LV_DIED | LV_WAITERS;   /* left by the earlier occupant */
#endif
#ifdef KEY2
        life[VICTIM] = LV_LIVE;           /* before it took key 2 */
        run k2waiter();
        run killer();
#endif
#endif
        for (i : 1 .. NC) {
            run client(i)
        }
    }
}
