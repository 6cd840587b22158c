/*
 * slot.pml - Promela model of the lock-slot protocol of src/slot.c, checked
 * with spin by tests/model (ctest -R model_).
 *
 * C-VERSION: src/slot.c git-blob a0d966ca45c3e342ff2c0bc6289538b733fdc94d
 *            (commit 7b20589; the same file plus its one-line pointer to this
 *            model has blob 41d1d1cd0f2e3f6d2f0e42f3d0b4c6f1f5e2a7b9)
 * (tests/model/check_model.sh --sync compares this line with `git hash-object
 * src/slot.c`; when slot.c changes, re-read both, fix the model, re-run the
 * checks and put the new blob here.)
 *
 * WHAT IT MATCHES.  src/slot.c as of the blob above:
 *   pair      one 16-byte word pair: state = token << 1 | HELD, lease =
 *             owner << 48 | deadline while held, 0 or FREED_BY_DEATH while
 *             free; every transition is one cmpxchg16b of the whole pair, and
 *             a failed cmpxchg16b hands back the current pair.
 *   load      fl__pair_load: read state, read lease, re-read state, retry
 *             until the two state reads agree (three separate steps here).
 *   acquire   load; read the clock; held and not expired: spin once on the
 *             state word (a change: re-examine), then fl__wait_for_change:
 *             seq = wake_seq; waiters++; re-read state; re-read lease; if
 *             both unchanged futex_wait(wake_seq, seq, until the deadline of
 *             the lease it saw); waiters--; re-examine.  Free or expired:
 *             read token_floor; next = max(token + 1, floor); CAS the pair
 *             from what was loaded to held(next, me, now + LEASE); a failed
 *             CAS re-examines from a fresh load.
 *   renew     load once; loop: read the clock; not held(mine) or expired:
 *             -ESTALE; else CAS (s, l) -> (s, owner | now + LEASE); a failed
 *             CAS retries with the pair it handed back.
 *   release   load once; loop: not held(mine): -ESTALE; else CAS -> free(T, 0)
 *             (a failed CAS retries with the pair it handed back); then
 *             fl__wake_waiters: read waiters; if > 0, wake_seq++ and
 *             futex_wake(all).
 *   check     load; read the clock; OK iff held(mine) and now < deadline.
 *   reap      (fencelockd, fl__slots_reap_client after a client died) load;
 *             while held by the dead owner: CAS -> free(T, FREED_BY_DEATH),
 *             then fl__wake_waiters; a failed CAS retries with its pair.
 *   futex     futex_wait compares the word and enqueues in one step; it ends
 *             when futex_wake dequeues it, at its absolute deadline, or
 *             (modelled as budgets) by the caller's own timeout or a signal.
 *
 * WHAT IS CHECKED (assert() unless said otherwise)
 *   I1   every successful acquire CAS issues a token greater than the last
 *        one issued (ghost gtok): unique and strictly increasing in the
 *        order the acquisitions took effect.
 *   I1'  lease exclusion: whenever a client starts relying on a lease (its
 *        acquire or renew took effect), no other client relies on a lease
 *        whose deadline has not passed (ghosts believe[], bdl[]).
 *   I2'  a stale renew or release (after a takeover or a reap) never
 *        changes the pair: a renew or release CAS succeeds only while its
 *        token is still the newest one issued; a check that answers OK read
 *        the lease word of its own holding (ghost gltok), never a newer one.
 *   I4   (timed configuration) every client that is not stopped forever
 *        finishes: a holder stopped forever at any step, or one that walks
 *        away without releasing, delays the others only until its deadline.
 *        Spin's invalid-end-state check: a client asleep or spinning with
 *        nothing able to move it is an error.  With -DNP (non-progress
 *        cycles, no progress labels) pan also proves that no execution
 *        runs forever: every retry loop ends.
 *   I6   (NOTIME configuration: leases never expire, so a futex sleep ends
 *        only by a wake) no waiter sleeps forever on a lock that is free,
 *        even when other waiters die, time out or are interrupted, and
 *        holders die (reaped by the supervisor) at any step.
 *
 * HOW "STOPPED AT ANY STEP" IS MODELLED
 *   Every statement below is one atomic step of the C code (one load, one
 *   store, one CAS or fetch-add).  Spin explores all interleavings, so a
 *   client paused at any step while the others and the clock run, then
 *   resumed, is covered.  Stopped forever: the killer process may, once,
 *   stop one client for good at any step (SIGSTOP, or a death that nobody
 *   reaps: unregistered client), or kill it with the supervisor reaping its
 *   lock (a registered client's death).  The client's body is wrapped in
 *   `unless { killed[me] }`, which takes effect before its next step.
 *
 * TIME.  `now` is an abstract monotonic clock; deadlines are small
 * integers (LEASE units after the clock read of the acquiring/renewing
 * client).  The clock process ticks while now < the greatest deadline ever
 * issued (maxdl).  Only comparisons now < deadline matter (equality of
 * whole lease words aside), so stopping the clock once every deadline has
 * passed loses no behaviour, and it keeps the state space finite.  The
 * NOTIME configuration (-DNOTIME) removes the clock.
 *
 * ABSTRACTIONS, AND WHAT IS NOT MODELLED
 *   - One key (slot); NC clients (2 or 3) doing ROUNDS rounds each of:
 *     acquire (waiting, FL_WAIT_FOREVER plus a give-up budget for a
 *     caller's own timeout), optionally renew, optionally check, then
 *     release or walk away.  Lease owners are client numbers 1..NC.
 *   - Sequentially consistent memory.  The C code's orders (seq_cst fetch
 *     add and loads on the Dekker pair, cmpxchg16b as a full barrier,
 *     acquire loads in fl__pair_load) are what makes SC a sound view on
 *     x86-64; the model does not check the memory orders themselves.
 *   - The spin loop (fl__spin_until_changed) is one read of the state word.
 *   - The epoch/overflow checks of the token counter, the voiding of a
 *     previous boot's leases (done before clients open), the counters,
 *     holder_pid and other informational fields are not modelled; the
 *     token floor is: fencelockd may raise it once, at any time.
 *   - wake_seq and waiters are small counters (no 32-bit wrap).
 *
 * BUG VARIANTS (must FAIL; tests/model runs them and expects a failure):
 *   -DBUG_SPLIT_CAS     acquire CASes the state word only, then stores the
 *                       lease word: lease exclusion fails.
 *   -DBUG_NO_REREAD     fl__pair_load skips the re-read of the state word:
 *                       a stale check answers OK.
 *   -DBUG_WAITERS_LATE  the waiter re-reads the pair before waiters++ (no
 *                       Dekker): lost wakeup, invalid end state (NOTIME).
 *   -DBUG_NO_DEADLINE   futex_wait ignores the holder's deadline: a
 *                       stopped holder blocks waiters forever (timed).
 *   -DBUG_STALE_RENEW   renew does not compare the token it read: a stale
 *                       renew after a takeover moves the new holder's lease.
 * Other switches: -DDIE_IN_WAKE_WINDOW (NOTIME) lets a releaser die between
 * its release CAS and its wake; see the note in tests/model/README.
 */

#ifndef NC
#define NC 3
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef LEASE
#define LEASE 2
#endif
#ifndef FLOOR
#define FLOOR 2             /* token floor fencelockd may raise to; 0: never */
#endif
#ifndef GIVEUPS
#define GIVEUPS 1           /* waits that end by the caller's own timeout */
#endif
#ifndef INTRS
#define INTRS 1             /* waits interrupted by a signal (EINTR) */
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
bool asleep[NC + 1];  /* the futex wait queue of wake_seq */
byte tfloor = 0;      /* header token_floor */
byte now = 0;         /* CLOCK_MONOTONIC */

/* ghosts */
byte gtok = 0;        /* last token issued */
byte gltok = 0;       /* token whose holding the lease word describes */
bool believe[NC + 1]; /* client relies on its lease ... */
byte bdl[NC + 1];     /* ... until this deadline */
bool killed[NC + 1];  /* stopped forever or dead */
bool win[NC + 1];     /* between its release CAS and its wake */
byte reap_req = 0;    /* dead client the supervisor is told about */
byte giveups = GIVEUPS;
byte intrs = INTRS;

#define UNBELIEVE(x) believe[x] = false; bdl[x] = 0
#define NEWDL(d) assert((d) < 32)   /* fits the deadline bits of lw */

/* Lease exclusion (I1'): me starts relying on a lease; nobody else may rely
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
 * until they read the clock, so the clock advances (by any amount, up to
 * the greatest deadline issued) when somebody reads it. */
#ifdef NOTIME
#define CLOCK_READ(n) n = now
#else
#define CLOCK_READ(n) atomic { HORIZON(hz); select(n : now .. hz); now = n; hz = 0 }
#endif

/* fl__pair_load: load state, load lease, re-load state (the guard). */
#ifdef BUG_NO_REREAD
#define PAIR_LOAD(s, l) s = st; l = lw
#define PAIR_LOAD_TAG(s, l, lt) s = st; atomic { l = lw; lt = gltok }
#else
#define PAIR_LOAD(s, l) \
    do \
    :: s = st; l = lw; \
       if :: s == st -> break :: else -> skip fi \
    od
/* the same, also reading the ghost tag of the lease word with it */
#define PAIR_LOAD_TAG(s, l, lt) \
    do \
    :: s = st; atomic { l = lw; lt = gltok }; \
       if :: s == st -> break :: else -> skip fi \
    od
#endif

/* renew's -ESTALE test; BUG_STALE_RENEW forgets the token */
#ifdef BUG_STALE_RENEW
#define RENEW_LOST(s, l, n) ((n) >= DL(l))
#else
#define RENEW_LOST(s, l, n) ((s) != (mytok << 1 | 1) || (n) >= DL(l))
#endif

/* fl__wake_waiters: read waiters; if any, bump wake_seq and wake them all.
 * The releaser's window (win) closes once it has woken or seen none. */
#define WAKE_WAITERS(me) \
    if \
    :: waiters > 0 -> \
       wake_seq++; \
       d_step { for (xj : 1 .. NC) { asleep[xj] = false }; xj = 0; win[me] = false } \
    :: else -> win[me] = false \
    fi

#if FLOOR > 0
/* fencelockd raises token_floor (a new epoch), once, at any time. */
active proctype floor_raiser()
{
    tfloor = FLOOR
}
#endif

/* Stops one client forever, or kills it and has the supervisor reap it. */
active proctype killer()
{
    byte v;
    if
    :: skip
    :: select(v : 1 .. NC);
       if
#ifndef NOTIME
       :: killed[v] = true           /* stopped forever, never reaped */
#endif
#ifdef DIE_IN_WAKE_WINDOW
       :: atomic { killed[v] = true; UNBELIEVE(v) };
#else
       :: atomic { !win[v] -> killed[v] = true; UNBELIEVE(v) };
#endif
          reap_req = v;               /* died: fencelockd reaps */
          v = 0
       fi
    fi
}

/* fencelockd: fl__slots_reap_client for the dead client. */
active proctype supervisor()
{
    byte s, l, v, xj;
    bool ok;
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
       :: ok -> WAKE_WAITERS(0); break
       :: else -> skip
       fi
    :: else -> break
    od;
    atomic { s = 0; l = 0; v = 0; ok = false }
}

proctype client(byte me)
{
    byte s, l, n, next, seq, until, mytok, lt, xj, hz, round;
    bool spun, gaveup, ok;

    {
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
              if
              :: !spun && st != s ->
                 spun = true              /* fl__spin_until_changed saw it */
              :: else ->
                 spun = true;
                 /* fl__wait_for_change */
                 seq = wake_seq;
#ifndef BUG_WAITERS_LATE
                 waiters++;
#endif
                 if
                 :: st == s ->
                    if
                    :: lw == l ->
#ifdef BUG_WAITERS_LATE
                       waiters++;
#endif
                       until = DL(l);
                       /* futex_wait: compare and enqueue, one step */
                       atomic {
                           if
                           :: wake_seq == seq -> asleep[me] = true
                           :: else -> skip
                           fi;
                           seq = 0
                       };
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
                       fi
                    :: else
#ifdef BUG_WAITERS_LATE
                       -> waiters++
#endif
                    fi
                 :: else
#ifdef BUG_WAITERS_LATE
                    -> waiters++
#endif
                 fi;
                 atomic { waiters--; seq = 0; until = 0; s = 0; l = 0 };
                 if
                 :: gaveup -> break       /* -ETIMEDOUT to the caller */
                 :: else -> skip
                 fi
              fi
           :: else ->
              /* free, or held with the deadline passed: take it */
              next = (tfloor > TOK(s) + 1 -> tfloor : TOK(s) + 1);
#ifndef BUG_SPLIT_CAS
              d_step {
                  if
                  :: st == s && lw == l ->
                     assert(next > gtok);                         /* I1 */
                     st = next << 1 | 1; lw = me << 5 | (n + LEASE);
                     gtok = next; gltok = next; mytok = next;
                     NEWDL(n + LEASE);
                     believe[me] = true; bdl[me] = n + LEASE;
                     EXCL(me);                                    /* I1' */
                     ok = true
                  :: else -> ok = false  /* somebody moved first: no token */
                  fi;
                  s = 0; l = 0; next = 0
              };
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
              :: ok -> ok = false; break
              :: else -> skip
              fi
           fi
        od;

        if
        :: gaveup -> gaveup = false
        :: else ->
           /* ---------------- fl_renew (optional) ---------------- */
           if
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
                           assert(gtok == mytok);                 /* I2' */
                           lw = (l & OWNER_BITS) | (n + LEASE);
                           NEWDL(n + LEASE);
                           bdl[me] = n + LEASE; EXCL(me); ok = true
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
           :: skip
           fi;

           /* ---------------- fl_check (optional) ---------------- */
           if
           :: PAIR_LOAD_TAG(s, l, lt);
              CLOCK_READ(n);
              if
              :: s == (mytok << 1 | 1) && n < DL(l) ->
                 assert(lt == mytok)                              /* I2' */
              :: else -> UNBELIEVE(me)                     /* -ESTALE */
              fi;
              d_step { s = 0; l = 0; n = 0; lt = 0 }
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
                        assert(gtok == mytok);                    /* I2' */
                        st = mytok << 1; lw = 0; gltok = 0;
                        win[me] = true; ok = true
                     :: else -> s = st; l = lw; ok = false
                     fi
                 };
                 if
                 :: ok -> ok = false; WAKE_WAITERS(me); break
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
            ok = false; asleep[me] = false }
    }
}

init
{
    byte i;
    atomic {
        for (i : 1 .. NC) {
            run client(i)
        }
    }
}
