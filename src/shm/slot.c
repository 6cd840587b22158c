/* SPDX-License-Identifier: MIT */
/*
 * slot.c - the lock-word state machine.  The only code that writes a lock
 * slot's state pair.  The spin before a sleep is spin.h's, the cancel
 * object src/cancel.c's, the lock view for tools (fl_lock_info_get)
 * inspect.c's.
 * Its Promela model is src/shm/slot.pml (ctest -R model_slot): change them
 * together.  What the choices below cost and bought, measured:
 * docs/benchmarks.md ("Figures from slot.c's design notes" points to each).
 *
 * THE STATE PAIR (struct fl__pair, 16 bytes, 16-byte aligned)
 *
 *   state word        lease word                   meaning
 *   ---------------   --------------------------   ---------------------------
 *   T << 1 | 0        0                            free; last holding T released
 *   T << 1 | 0        FREED_BY_DEATH               free; supervisor freed T (I5)
 *   T << 1 | 0        FREED_VOID                   free; T voided by a new boot
 *   T << 1 | HELD     owner << 48 | deadline_us    held by token T until deadline
 *
 *   T is the newest token of the key (0: never acquired).  owner is the
 *   holder's client table index (0 when unregistered); deadline_us is
 *   CLOCK_MONOTONIC in microseconds.
 *
 * TRANSITIONS (each one 16-byte compare-and-swap of the whole pair)
 *
 *   acquire   free(T) or held(T, deadline passed)  ->  held(T', owner, now + lease)
 *             with T' = max(T + 1, token_floor); fails with no effect otherwise
 *   renew     held(T, owner, d > now)              ->  held(T, owner, now + lease)
 *   release   held(T, ...)                         ->  free(T, 0)
 *   reap      held(T, dead owner, ...)             ->  free(T, FREED_BY_DEATH)
 *             (by fencelockd, or by a waiter that saw the owner's life word
 *             die: fl__free_dead, life.c)
 *   void      held(T, ...) of an earlier boot      ->  free(T, FREED_VOID)
 *
 * WHY ONE 16-BYTE CAS.  Taking the lock, choosing the token and setting the
 * deadline and owner must be one step.  Were the deadline written after the
 * token, a holder stopped between the two would leave a lock that looks held
 * with the previous holder's (or no) deadline: waiters could not know when it
 * ends (I4), and a supervisor could not know whose it is when it dies (I5).
 * With one CAS, a process stopped forever at any instruction of acquire,
 * renew or release has either changed nothing or completed its transition;
 * in both cases the pair alone says when the lock ends.  Every acquisition
 * CASes from the exact pair it read, so two acquirers can never produce the
 * same token (I1), and a failed try writes nothing and consumes no token.
 *
 * The 16-byte CAS is a real lock-free instruction, emitted by
 * src/shm/arch/pair.h (cmpxchg16b on x86-64; casp, or an ldaxp/stlxp loop, on
 * aarch64).  Reading never uses it: a 16-byte atomic load is a write on
 * both, and the status tool maps the region read-only.  Readers load the two
 * words separately and re-read the state word (fl__pair_load, pair.h): the
 * state word never takes the same value twice (T only grows and each T is
 * held, then freed, once), so an unchanged state word proves the lease word
 * belongs to it.
 *
 * WAITING (the futex word wake_seq, the count `waiters`, the flag
 * wake_needed)
 *   waiter:   seq = wake_seq; waiters++; wake_needed = 1 (both seq_cst);
 *             re-read the pair; still held ->
 *             futex_wait(wake_seq, seq, min(deadline, timeout));
 *             waiters--; look again.  A wait that ends without the lock
 *             (timeout, cancel) passes the wake on (fl__pass_wake_on).
 *   releaser: CAS the pair (seq_cst); if wake_needed and exchanging it
 *             with 0 gives 1, and waiters > 0: wake_seq++; futex_wake(1)
 *             (fl__release_wake).
 *   acquirer: a contended acquisition (it saw the key held, and may have
 *             been woken by the release that cleared wake_needed): after
 *             its CAS, if waiters > 0, wake_needed = 1 (fl__arm_wake), so
 *             that its own release wakes the next sleeper.
 *   Either the waiter's re-read sees the release, or the releaser's read of
 *   wake_needed sees the waiter's 1 (each side's write is ordered before
 *   its seq_cst read, also on aarch64: docs/memory-orders.md; Dekker), and
 *   the bumped wake_seq makes a late futex_wait return at once: no lost
 *   wakeup.  A release wakes one sleeper, not all (no thundering herd:
 *   waking all made every sleeper but one run, look and sleep again at
 *   every release), and only if no sleeper has been woken
 *   since the last one asked: while a woken waiter is on its way to the
 *   lock, the releases of processes that took the key meanwhile without
 *   sleeping wake nobody more (each such wake made one more process run,
 *   look, find the key held and sleep again).  The one woken either takes
 *   the lock and sets wake_needed again, so its release wakes the next;
 *   or finds it taken by a process that came without sleeping and sleeps
 *   again, setting wake_needed, so that holder's release wakes one; or ends
 *   its wait without the lock and passes the wake on (fl__pass_wake_on:
 *   wake_needed set again, and a wake now if the lock is free) (I6).
 *   A stale 1 (its sleeper found the key free and took it) costs one
 *   release a wake of nobody (none at all when waiters is 0).  One woken
 *   and then killed before it took the lock:
 *   fencelockd wakes every sleeper of every key when it reaps a process
 *   (fl__slots_wake_sleepers, wake-all, as it wakes for a releaser killed
 *   between its CAS and its wake); unregistered, or stopped (SIGSTOP)
 *   between its wake and its look: it holds the one wake, and the others
 *   sleep on the free lock until the deadline of the lease they saw (I4,
 *   the bound of a holder stopped forever; src/shm/slot.pml checks it, and
 *   test_woken_waiter_stopped stops a real one there).  Why not
 *   FUTEX_CMP_REQUEUE or PI futexes: both hand the lock to a waiter through
 *   a 32-bit futex word that holds the owner, and ours is the 16-byte pair
 *   whose lease expires without anybody's call; a PI futex has no deadline
 *   for a holder that never comes back, and requeueing to the pair is not
 *   possible.  Waiters
 *   also wake at the holder's deadline and take the expired lease over, so a
 *   stopped or dead holder delays them by its lease at most (I4).
 *   A registered holder's death also reaches them through its life word
 *   (life.c): a waiter reads the holder's word after its re-read of the
 *   pair; dead -> fl__free_dead at once; alive -> it sleeps with futex_waitv
 *   on wake_seq and that word, and after any return passes a death on to
 *   the word's other sleepers and frees the dead holding.  Nothing above
 *   changes: the word is one more reason to wake.
 *
 * SPINNING (spin.h: before the first sleep of an acquisition; no
 * transition of the pair and no part of the wake protocol above: the
 * model's one spin, src/shm/slot.pml)
 *   A waiter that finds the key held may spin once, a bounded number of
 *   pauses re-reading the state word, before it sleeps: every waiter while
 *   nobody sleeps on the key; behind sleepers, only the one that claims
 *   the holding, and only when the holder runs on another CPU.  The two
 *   hints that decide it (holder_cpu, spin_holding) are relaxed and order
 *   nothing: any value in them only decides whether one waiter spins.
 *   spin.h says why, and why a pause at any step there is safe.
 *
 * EARLY RETURNS AROUND THE WAIT (no transition of the pair; src/shm/slot.pml
 * lists them under "Outside the model")
 *   own lock  a wait on a key held, unexpired, by this handle's own latest
 *             acquisition, made by the calling thread, returns -EDEADLK
 *             instead of sleeping until its own deadline and then taking
 *             itself over (other threads of the handle wait for it as
 *             before: they may share a handle and contend).  The test: the slot's
 *             state word holds exactly the token r->held[slot] recorded at
 *             this handle's last acquisition.  Tokens of a key never repeat,
 *             so an entry left by a release or a lost lease never matches a
 *             later holding, and r->held is process memory: another
 *             process's holding cannot match.  (The lease word's owner is a
 *             client index, 0 for every unregistered process, and the
 *             holder_pid/holder_client_id fields are informational and
 *             written after the CAS: neither can tell.)
 *   cancel    a wait given an fl_cancel publishes the futex word it sleeps
 *             on in the cancel object (cancel.h), then reads the cancelled flag
 *             after reading wake_seq; fl_cancel_trigger (src/cancel.c) sets the flag, then reads
 *             the published word and bumps and wakes it.  Both sides are
 *             seq_cst: either the waiter sees the flag before sleeping, or
 *             the trigger sees the word and its bump makes the futex_wait
 *             return at once (the same Dekker argument as WAITING).
 *
 * COUNTERS (the slot's counters[], statistics for fl_lock_info_get; they
 * order nothing, so every access is relaxed)
 *   holder-only  acquisitions, contended, expiries_taken, releases: written
 *             by an acquisition right after the CAS that made it the holder,
 *             with a plain load and store (fl__count_held: no locked
 *             instruction on the uncontended path).  A release is counted by the
 *             acquisition that follows it, when the pair that acquisition
 *             replaced is free with no FREED_* mark (a count after the
 *             release CAS would race with the next holder's);
 *             fl_lock_info_get (inspect.c) adds the last holding's release
 *             while the key is free.  Another writer of these words exists only once this
 *             holder's lease has ended, so an update is lost only when a
 *             holder is paused (or preempted) past its deadline between its
 *             CAS and its store and another acquisition takes the key over
 *             meanwhile: these counts may be low (by one per such pause),
 *             never high.  A holder killed at that point loses its count, as
 *             it always did.
 *   shared    busy, timeouts, renewals (threads sharing one lease may renew
 *             it at once), renew_failed, release_failed, deaths (fencelockd's
 *             reap, fl_close, a waiter that frees a dead holder's lock):
 *             written by processes that do not hold the key (or may not): a
 *             locked add (fl__count), exact.
 *
 * KEY HANDLES (fl_key_resolve, fl_acquire_key)
 *   A key handle is the key's slot index, resolved once; acquiring by it
 *   skips the key check, the hash and the probe.  Slots are never freed or
 *   reused and a published slot's key never changes, so an index once
 *   resolved names the same key for the life of the mapping.  Checks: api.c
 *   compares the handle's tag with the region handle's (it came from this
 *   handle, hence this mapping); here, the index is below the slots handed
 *   out.  Then the acquisition is fl_acquire's, step for step.
 */
#include <errno.h>
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../cancel.h"
#include "shm.h"
#include "arch/pair.h" /* fl__pair_cas, fl__pair_load */
#include "spin.h"

/* now + lease_ns rounded up to a microsecond, as a lease word for owner:
 * now is on our clock, the word on the host's (see fl__deadline_ns). */
static int fl__make_lease(struct fl__shm *r, uint64_t now, uint64_t lease_ns, uint64_t *word)
{
    uint64_t end = now + lease_ns;
    if (end < now)
        return fl__fail(-EOVERFLOW, "lease of %llu ns overflows the clock",
                        (unsigned long long)lease_ns);
    end -= (uint64_t)r->timens_ns;
    /* The same bound as us > FL__DEADLINE_MASK, tested first so that end +
     * 999 cannot wrap: the rounding up is then one multiply by a constant,
     * no remainder.  The CAS waits for this value, which waits for the
     * clock read: the remainder's multiply and compare showed in every
     * acquire+release (docs/benchmarks.md, "Figures from slot.c's design
     * notes"). */
    if (end > FL__DEADLINE_MASK * 1000ull)
        return fl__fail(-EOVERFLOW, "lease deadline beyond what a region can record (2^48 us)");
    uint64_t us = (end + 999) / 1000;
    *word = (uint64_t)r->client << FL__OWNER_SHIFT | us;
    return 0;
}

/* A counter that processes other than the key's holder write (COUNTERS). */
static inline void fl__count(struct fl__slot *sl, enum fl__lock_counter c)
{
    /* relaxed: statistics, nothing is ordered by them */
    atomic_fetch_add_explicit(&sl->counters[c], 1, memory_order_relaxed);
}

/* A counter only the key's holder writes, by the holder (COUNTERS): a
 * plain load and store, no locked instruction. */
static inline void fl__count_held(struct fl__slot *sl, enum fl__lock_counter c)
{
    /* relaxed: statistics; COUNTERS says which update a pause can lose */
    uint64_t n = atomic_load_explicit(&sl->counters[c], memory_order_relaxed);
    atomic_store_explicit(&sl->counters[c], n + 1, memory_order_relaxed);
}

/* The key of slot sl, for a message: "%.*s" and these two arguments.  Its
 * bytes never change once published; the length is clamped (shared memory
 * is untrusted). */
#define FL__SLOT_KEY(sl) \
    (int)((sl)->key.len < FL_KEY_MAX ? (sl)->key.len : FL_KEY_MAX), (sl)->key.bytes

/* Wake `count` sleepers of the key (1: fl__release_wake; INT_MAX: the
 * supervisor's wakes and a free of a dead holder's lock, WAITING), if it
 * has any. */
static void fl__wake_sleepers(struct fl__slot *sl, int count)
{
    /* seq_cst: the Dekker read after our pair CAS (see WAITING); for
     * fl__release_wake, a sleeper whose wake_needed we took incremented
     * waiters before it stored that 1 */
    if (atomic_load(&sl->waiters) == 0)
        return;
    /* release: a woken waiter that sees the new seq also sees the release */
    atomic_fetch_add_explicit(&sl->wake_seq, 1, memory_order_release);
    fl__futex_wake(&sl->wake_seq, count);
}

static void fl__wake_all(struct fl__slot *sl) { fl__wake_sleepers(sl, INT_MAX); }

/* After a release CAS (or a wait passing a wake on): wake one sleeper if
 * one asked since the last such wake (WAITING).  The load first: an
 * uncontended release reads the flag, 0, and makes no locked instruction.
 * Stopped or killed between the exchange and the wake: as between a
 * release CAS and its wake (fl__shm_release). */
static void fl__release_wake(struct fl__slot *sl)
{
    /* seq_cst: the Dekker read after our pair CAS, against the waiter's
     * store of 1 before its re-read of the pair (WAITING) */
    if (atomic_load(&sl->wake_needed) && atomic_exchange(&sl->wake_needed, 0))
        fl__wake_sleepers(sl, 1);
}

/* Sleepers are left whose wake_needed may have been taken by the wake
 * that reached us: the next release must wake one of them (WAITING).
 * Stopped forever here, holding the key: they sleep until its deadline
 * (I4); killed: fencelockd's reap wakes them all.  Returns whether there
 * were sleepers. */
static bool fl__arm_wake(struct fl__slot *sl)
{
    /* seq_cst, both: slow path only, and the model's sequentially
     * consistent view of it needs no further argument */
    if (atomic_load(&sl->waiters) == 0)
        return false;
    atomic_store(&sl->wake_needed, 1);
    return true;
}

/* A wait that ends without the lock (timeout, cancel) may have absorbed the
 * one wake a release sent, and the wake_needed that release cleared: set it
 * again, so that a holder's release wakes the next sleeper, and when the
 * lock is free wake one now; otherwise they would sleep on until the
 * deadline they saw (I6).
 * Stopped right before this: the others sleep until the deadline they saw
 * (I4).  Killed: fencelockd wakes every sleeper of the key when it reaps us
 * (fl__slots_wake_sleepers); unregistered, the same deadline bound. */
static void fl__pass_wake_on(struct fl__slot *sl)
{
    fl__arm_wake(sl);
    /* seq_cst: after our store of wake_needed, against a holder's release
     * CAS and its read of wake_needed: either we see the lock free, or its
     * release sees our 1 */
    if (!(atomic_load(&sl->pair.state) & FL__HELD))
        fl__release_wake(sl);
}

/* The calling thread's id, cached: identifies the acquiring thread in
 * r->held_tid (EARLY RETURNS).  In a forked child the cache keeps the
 * parent thread's id, which no other thread of the child can have. */
static uint32_t fl__self_tid(void)
{
    /* initial-exec: a thread-pointer load, not a __tls_get_addr call, on the
     * uncontended path (the library is not dlopen()ed late in practice;
     * glibc reserves static TLS room for that case) */
    static _Thread_local uint32_t tid __attribute__((tls_model("initial-exec")));
    if (!tid)
        tid = (uint32_t)syscall(SYS_gettid);
    return tid;
}

/* fl__wait_for_change found the holder of (s, l) dead (life.c). */
#define FL__WAIT_HOLDER_DIED 1

/* Sleep until the pair leaves (s, l), the holder's deadline, wait_until, or
 * cancel (may be NULL) is triggered, or the holder dies (its life word,
 * life.c).  Returns 0 to re-examine the pair, FL__WAIT_HOLDER_DIED,
 * -ETIMEDOUT or -ECANCELED. */
static int fl__wait_for_change(struct fl__shm *r, struct fl__slot *sl, uint64_t s, uint64_t l,
                               uint64_t wait_until, fl_cancel *cancel)
{
    if (cancel) /* Dekker with fl_cancel_trigger (cancel.h, EARLY RETURNS) */
        fl__cancel_sleep_on(cancel, &sl->wake_seq);
    /* acquire: pairs with the releaser's release increment */
    uint32_t seq = atomic_load_explicit(&sl->wake_seq, memory_order_acquire);
    atomic_fetch_add(&sl->waiters, 1); /* seq_cst: read by fl__wake_sleepers */
    atomic_store(&sl->wake_needed, 1);  /* seq_cst: Dekker with fl__release_wake */
    uint64_t s2 = atomic_load(&sl->pair.state);
    uint64_t l2 = atomic_load(&sl->pair.lease);
    int rc = 0;
    if (fl__cancel_is_set(cancel)) { /* after the seq read */
        rc = -ECANCELED;
    } else if (s2 == s && l2 == l) {
        uint64_t until = fl__deadline_ns(r, l);
        if (wait_until && wait_until < until)
            until = wait_until;
        /* The holder's life word (life.c): dead, or to sleep on too. */
        struct fl__life_watch lw;
        int life = fl__life_watch(r, fl__owner(l), &lw);
        bool died = life == FL__LIFE_DEAD;
        if (!died) {
            /* The futex sleeps on the real CLOCK_MONOTONIC, the clock
             * leases use (a test clock only drives try-acquires). */
            rc = -ENOSYS;
            if (life == FL__LIFE_ALIVE)
                rc = fl__futex_wait2(&sl->wake_seq, seq, lw.word, lw.val, until);
            if (rc == -ENOSYS)
                rc = fl__futex_wait(&sl->wake_seq, seq, until);
            /* whatever ended the sleep: a death is passed on (life.c) */
            if (life == FL__LIFE_ALIVE)
                died = fl__life_after_sleep(&lw);
            if (rc == -EINTR)
                rc = 0; /* re-examine; a signal handler may have run, nothing else */
            if (rc == -ETIMEDOUT)
                rc = (wait_until && fl__now(r) >= wait_until) ? -ETIMEDOUT : 0;
        }
        if (died && rc == 0)
            rc = FL__WAIT_HOLDER_DIED;
    }
    /* relaxed: the count only decides whether releasers bother to wake */
    atomic_fetch_sub_explicit(&sl->waiters, 1, memory_order_relaxed);
    if (cancel)
        fl__cancel_sleep_done(cancel);
    if (rc >= 0 && fl__cancel_is_set(cancel))
        rc = -ECANCELED;
    return rc;
}

/* The holder of (s, l) is dead (its life word died, life.c): free its lock
 * as fencelockd's reap would (I5): the owner-checked CAS from the exact
 * pair read before the life word, to free(T, FREED_BY_DEATH), and a wake of
 * every sleeper (the dead process may have been a woken waiter too).  First
 * make sure that no thread of the dying process still runs (life.c, the
 * last instructions of a dying process); if that cannot be known, life
 * words are off in this process from now on and the caller's next wait
 * sleeps on the key alone.  A failed CAS: the pair moved on (a reap, a
 * release, another waiter's free): the caller looks again. */
static void fl__free_dead(struct fl__shm *r, struct fl__slot *sl, uint32_t idx, uint64_t s,
                          uint64_t l)
{
    if (fl__life_confirm() != 0)
        return;
    if (fl__pair_cas(&sl->pair, &s, &l, s & ~FL__HELD, FL__FREED_BY_DEATH)) {
        /* count before the wake: whatever a woken waiter reports comes
         * after the death is counted (a locked add, not a log write).
         * Stopped or killed here, the key free and nobody woken: as a
         * releaser between its CAS and its wake (fl__shm_release); the
         * count's add lengthens that window, it adds no new one. */
        fl__count(sl, FL__C_DEATHS);
        fl__wake_all(sl);
        /* for fencelockd's log, which would otherwise not see this death
         * as a lock released: its reap finds nothing left to free */
        fl__event_post(r, &(struct fl__event_data){.type = FL__EV_ABANDONED,
                                                   .slot = idx,
                                                   .token = s >> FL__TOKEN_SHIFT,
                                                   .flags = FL__EVF_DIED});
    }
}

/* The checks every acquisition makes of its arguments (fn names the public
 * function in messages). */
static inline int fl__acquire_args(struct fl__shm *r, uint64_t lease_ns, int64_t timeout_ns,
                                   const char *fn)
{
    if (r->h.readonly)
        return fl__fail(-EINVAL, "%s: read-only region handle", fn);
    if (lease_ns == 0)
        return fl__fail(-EINVAL, "%s: lease_ns must be > 0", fn);
    if (timeout_ns < 0 && timeout_ns != FL_WAIT_FOREVER)
        return fl__fail(-EINVAL, "%s: timeout_ns must be >= 0 or FL_WAIT_FOREVER", fn);
    return 0;
}

/* Find key's slot, creating it on first use (fl_acquire, fl_key_resolve). */
static int fl__slot_of_key(struct fl__shm *r, const char *key, uint32_t *idx)
{
    int err = fl__lock_find_or_create(r, key, idx);
    if (err == -ENOSPC)
        return fl__fail(-ENOSPC, "region %s: lock table full (%u keys); cannot add key \"%s\"",
                        r->h.path, r->lock_capacity, key);
    return err;
}

static int fl__acquire_slot(struct fl__shm *r, uint32_t idx, uint64_t lease_ns, int64_t timeout_ns,
                            fl_cancel *cancel, fl_lease *lease);

int fl__shm_acquire(fl_region *h, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                    fl_cancel *cancel, fl_lease *lease)
{
    struct fl__shm *r = fl__shm_of(h);
    int err = fl__acquire_args(r, lease_ns, timeout_ns, "fl_acquire");
    if (err)
        return err;
    uint32_t idx = 0;
    err = fl__slot_of_key(r, key, &idx);
    if (err)
        return err;
    return fl__acquire_slot(r, idx, lease_ns, timeout_ns, cancel, lease);
}

int fl__shm_key_resolve(fl_region *h, const char *key, fl_key *k)
{
    struct fl__shm *r = fl__shm_of(h);
    if (r->h.readonly)
        return fl__fail(-EINVAL, "fl_key_resolve: read-only region handle");
    uint32_t idx = 0;
    int err = fl__slot_of_key(r, key, &idx);
    if (err)
        return err;
    k->slot = idx;
    return 0;
}

/* A key handle names its slot: bounds-checked against the slots handed out
 * (a handle is only ever made by fl_key_resolve on this region handle, which
 * api.c has checked by its tag; slots are never freed or reused, so the
 * slot still holds the key it was resolved for). */
int fl__shm_acquire_key(fl_region *h, const fl_key *k, uint64_t lease_ns, int64_t timeout_ns,
                        fl_cancel *cancel, fl_lease *lease)
{
    struct fl__shm *r = fl__shm_of(h);
    int err = fl__acquire_args(r, lease_ns, timeout_ns, "fl_acquire_key");
    if (err)
        return err;
    if (__builtin_expect(k->slot >= fl__locks_used(r), 0))
        return fl__fail(-EINVAL, "fl_acquire_key: key handle names slot %u, which this region "
                        "never issued", k->slot);
    return fl__acquire_slot(r, k->slot, lease_ns, timeout_ns, cancel, lease);
}

/* The acquisition proper, of slot idx (published, < the slots in use);
 * *waited: it went to wait at least once (fl__acquire_slot). */
static inline __attribute__((always_inline)) int
fl__acquire_loop(struct fl__shm *r, struct fl__slot *sl, uint32_t idx, uint64_t lease_ns,
                 int64_t timeout_ns, fl_cancel *cancel, fl_lease *lease, bool *waited)
{
    int err;

    /* One clock read per attempt; the wait deadline needs one more, only
     * when there is a timeout to wait for. */
    uint64_t wait_until = timeout_ns > 0 ? fl__now(r) + (uint64_t)timeout_ns : 0;
    bool contended = false, spun = false;
    for (;;) {
        uint64_t s = 0, l = 0;
        fl__pair_load(&sl->pair, &s, &l);
        uint64_t now = fl__now(r);
        uint32_t flags = 0;
        bool takeover = false;
        if (s & FL__HELD) {
            if (now < fl__deadline_ns(r, l)) {
                contended = true;
                if (timeout_ns == 0) { /* a polling caller's path: no formatting */
                    fl__count(sl, FL__C_BUSY);
                    return fl__fail_static(-EBUSY, "the key is held (try again later)");
                }
                /* acquire: pairs with the release store of held[] below, so
                 * held_tid is the acquiring thread's (or a later one's) */
                if (atomic_load_explicit(&r->held[idx], memory_order_acquire) ==
                        s >> FL__TOKEN_SHIFT &&
                    atomic_load_explicit(&r->held_tid[idx], memory_order_relaxed) ==
                        fl__self_tid())
                    return fl__fail(-EDEADLK,
                                    "key \"%.*s\" is held by this handle (token %llu): waiting "
                                    "would only outlast its own lease",
                                    FL__SLOT_KEY(sl), (unsigned long long)(s >> FL__TOKEN_SHIFT));
                if (fl__cancel_is_set(cancel))
                    return fl__fail(-ECANCELED, "wait for key \"%.*s\" cancelled",
                                    FL__SLOT_KEY(sl));
                if (wait_until && now >= wait_until) {
                    fl__count(sl, FL__C_TIMEOUTS);
                    return fl__fail(-ETIMEDOUT, "key \"%.*s\" stayed held", FL__SLOT_KEY(sl));
                }
                /* Spin once before sleeping: every waiter while nobody
                 * sleeps on the key, one per holding behind sleepers
                 * (SPINNING).  relaxed: a hint, as the spin itself */
                if (!spun) {
                    spun = true;
                    bool changed = false;
                    if (atomic_load_explicit(&sl->waiters, memory_order_relaxed) == 0)
                        changed = fl__spin_until_changed(sl, s, FL__SPIN_PAUSES);
                    else if (fl__spin_claim(sl, s))
                        changed = fl__spin_until_changed(sl, s, FL__SPIN_CLAIMED_PAUSES);
                    if (changed)
                        continue;
                }
                *waited = true;
                err = fl__wait_for_change(r, sl, s, l, wait_until, cancel);
                if (err == FL__WAIT_HOLDER_DIED) {
                    fl__free_dead(r, sl, idx, s, l);
                    continue;
                }
                if (err == -ECANCELED)
                    return fl__fail(err, "wait for key \"%.*s\" cancelled", FL__SLOT_KEY(sl));
                if (err) {
                    fl__count(sl, FL__C_TIMEOUTS);
                    return fl__fail(err, "key \"%.*s\" stayed held", FL__SLOT_KEY(sl));
                }
                continue;
            }
            flags = FL_LEASE_EXPIRED;
            takeover = true;
        } else {
            if (l & FL__FREED_BY_DEATH)
                flags |= FL_LEASE_OWNER_DIED;
            if (l & FL__FREED_VOID)
                flags |= FL_LEASE_EXPIRED;
        }
        uint64_t token = s >> FL__TOKEN_SHIFT;
        if (token >= FL_TOKEN_MAX)
            return fl__fail(-EOVERFLOW, "key \"%.*s\": token space spent", FL__SLOT_KEY(sl));
        /* relaxed: the floor only rises, before clients of a new epoch open
         * (they learn of it through registration); order among tokens comes
         * from the CAS on this slot */
        uint64_t floor = atomic_load_explicit(&r->hdr->token_floor, memory_order_relaxed);
        uint64_t next = token + 1 > floor ? token + 1 : floor;
        /* Never count into an epoch that fencelockd has not made durable:
         * after a crash it restarts above the durable epoch only (I1). */
        uint64_t epoch = FL_TOKEN_EPOCH(floor) > FL_TOKEN_EPOCH(token) ? FL_TOKEN_EPOCH(floor)
                                                                      : FL_TOKEN_EPOCH(token);
        if (FL_TOKEN_EPOCH(next) > epoch || next > FL_TOKEN_MAX)
            return fl__fail(-EOVERFLOW,
                            "key \"%.*s\": token counter of epoch %llu spent (fencelockd "
                            "advances the epoch; is it running?)",
                            FL__SLOT_KEY(sl), (unsigned long long)epoch);
        uint64_t nl = 0;
        err = fl__make_lease(r, now, lease_ns, &nl);
        if (err)
            return err;
        if (!fl__pair_cas(&sl->pair, &s, &l, next << FL__TOKEN_SHIFT | FL__HELD, nl))
            continue; /* somebody else moved first: no token consumed */
        /* we may have been woken by the wake that cleared wake_needed; with
         * sleepers left, a waiter may spin behind them on our holding */
        if (contended && fl__arm_wake(sl))
            fl__note_holder_cpu(sl, next);
        /* relaxed: informational fields for the status tool; stored only
         * when they change, so a process re-taking its own lock writes nothing */
        if (atomic_load_explicit(&sl->holder_pid, memory_order_relaxed) != r->h.pid)
            atomic_store_explicit(&sl->holder_pid, r->h.pid, memory_order_relaxed);
        if (atomic_load_explicit(&sl->holder_client_id, memory_order_relaxed) != r->client_id)
            atomic_store_explicit(&sl->holder_client_id, r->client_id, memory_order_relaxed);
        /* read only by this handle's own waits (EARLY RETURNS); release:
         * our thread id before the token */
        atomic_store_explicit(&r->held_tid[idx], fl__self_tid(), memory_order_relaxed);
        atomic_store_explicit(&r->held[idx], next, memory_order_release);
        /* We hold the key: its holder-only counters (COUNTERS), with the
         * release of the holding we follow, if it ended that way (the pair
         * we replaced, s and l, was free with no FREED_* mark). */
        fl__count_held(sl, FL__C_ACQUISITIONS);
        if (!takeover && l == 0 && token != 0)
            fl__count_held(sl, FL__C_RELEASES);
        if (contended || takeover)
            fl__count_held(sl, FL__C_CONTENDED);
        if (takeover) {
            fl__count_held(sl, FL__C_EXPIRIES_TAKEN);
            uint64_t deadline = fl__deadline_ns(r, l); /* l: the pair we replaced */
            fl__event_post(r, &(struct fl__event_data){.type = FL__EV_TAKEOVER,
                                                       .slot = idx,
                                                       .token = next,
                                                       .other_token = token,
                                                       .late_ns = now > deadline ? now - deadline : 0});
        }
        /* handle and reserved are zero for a region file (fencelock.h) */
        *lease = (fl_lease){.token = next,
                            .deadline_ns = fl__deadline_ns(r, nl),
                            .slot = idx,
                            .flags = flags};
        return 0;
    }
}

/* Every acquisition that waited and returns without the key passes the wake
 * on (fl__pass_wake_on): it may have been woken by a release's one wake,
 * and then given up at its next look: the caller's deadline passed, a
 * cancel came, or the lease cannot be made (-EOVERFLOW), while another
 * process holds the key again or the key is free.  The model's wait given
 * up after its futex returned is this, after one more read of the pair. */
static int fl__acquire_slot(struct fl__shm *r, uint32_t idx, uint64_t lease_ns, int64_t timeout_ns,
                            fl_cancel *cancel, fl_lease *lease)
{
    struct fl__slot *sl = fl__slot_at(r, idx);
    bool waited = false;
    int err = fl__acquire_loop(r, sl, idx, lease_ns, timeout_ns, cancel, lease, &waited);
    if (__builtin_expect(err != 0, 0) && waited)
        fl__pass_wake_on(sl);
    return err;
}

/* A renew or release refused as stale: counted, remembered, reported. */
static void fl__note_stale(struct fl__shm *r, struct fl__slot *sl, const fl_lease *lease,
                           uint64_t current, uint32_t op)
{
    fl__count(sl, op == FL__OP_RENEW ? FL__C_RENEW_FAILED : FL__C_RELEASE_FAILED);
    /* relaxed: a last-seen sample for the status tool */
    atomic_store_explicit(&sl->last_stale_token, lease->token, memory_order_relaxed);
    atomic_store_explicit(&sl->last_stale_pid, r->h.pid, memory_order_relaxed);
    atomic_store_explicit(&sl->last_stale_op, op, memory_order_relaxed);
    fl__event_post(r, &(struct fl__event_data){.type = FL__EV_REJECTED,
                                               .slot = lease->slot,
                                               .token = lease->token,
                                               .other_token = current,
                                               .op = op});
}

static int fl__lease_slot(struct fl__shm *r, const fl_lease *lease, const char *fn,
                          struct fl__slot **sl)
{
    if (r->h.readonly)
        return fl__fail(-EINVAL, "%s: read-only region handle", fn);
    if (lease->slot >= fl__locks_used(r))
        return fl__fail(-EINVAL, "%s: lease names slot %u, which this region never issued",
                        fn, lease->slot);
    *sl = fl__slot_at(r, lease->slot);
    return 0;
}

int fl__shm_renew(fl_region *h, fl_lease *lease, uint64_t lease_ns)
{
    struct fl__shm *r = fl__shm_of(h);
    struct fl__slot *sl = NULL;
    int err = fl__lease_slot(r, lease, "fl_renew", &sl);
    if (err)
        return err;
    if (lease_ns == 0)
        return fl__fail(-EINVAL, "fl_renew: lease_ns must be > 0");
    uint64_t s = 0, l = 0;
    fl__pair_load(&sl->pair, &s, &l);
    for (;;) {
        uint64_t now = fl__now(r);
        if (s != (lease->token << FL__TOKEN_SHIFT | FL__HELD) || now >= fl__deadline_ns(r, l)) {
            fl__note_stale(r, sl, lease, s >> FL__TOKEN_SHIFT, FL__OP_RENEW);
            return fl__fail(-ESTALE, "renew of token %llu: ownership lost",
                            (unsigned long long)lease->token);
        }
        uint64_t nl = 0;
        err = fl__make_lease(r, now, lease_ns, &nl);
        if (err)
            return err;
        nl = (nl & FL__DEADLINE_MASK) | (l & ~FL__DEADLINE_MASK); /* keep the owner */
        if (fl__pair_cas(&sl->pair, &s, &l, s, nl)) {
            fl__count(sl, FL__C_RENEWALS);
            lease->deadline_ns = fl__deadline_ns(r, nl);
            return 0;
        }
        /* s, l now hold the current pair: a takeover or a renewal by another
         * thread sharing this lease; check again */
    }
}

int fl__shm_release(fl_region *h, const fl_lease *lease)
{
    struct fl__shm *r = fl__shm_of(h);
    struct fl__slot *sl = NULL;
    int err = fl__lease_slot(r, lease, "fl_release", &sl);
    if (err)
        return err;
    uint64_t held = lease->token << FL__TOKEN_SHIFT | FL__HELD;
    uint64_t s = 0, l = 0;
    fl__pair_load(&sl->pair, &s, &l);
    for (;;) {
        if (s != held) {
            fl__note_stale(r, sl, lease, s >> FL__TOKEN_SHIFT, FL__OP_RELEASE);
            return fl__fail(-ESTALE, "release of token %llu: ownership lost",
                            (unsigned long long)lease->token);
        }
        /* No clock read: if the CAS succeeds nobody took the key over, so
         * the holding was never overlapped, expired or not. */
        if (fl__pair_cas(&sl->pair, &s, &l, lease->token << FL__TOKEN_SHIFT, 0)) {
            /* Counted by the next acquisition, which holds the key then
             * (COUNTERS): a count here would race with it.
             * Killed here, between the CAS and the wake: fencelockd wakes
             * the sleepers when it reaps us (fl__slots_wake_sleepers).
             * Stopped here, or unregistered: they wake at the deadline they
             * saw (I4). */
            fl__release_wake(sl);
            return 0;
        }
    }
}

int fl__shm_check(fl_region *h, const fl_lease *lease)
{
    struct fl__shm *r = fl__shm_of(h);
    if (lease->slot >= fl__locks_used(r))
        return fl__fail(-EINVAL, "fl_check: lease names slot %u, which this region never issued",
                        lease->slot);
    uint64_t s = 0, l = 0;
    fl__pair_load(&fl__slot_at(r, lease->slot)->pair, &s, &l);
    if (s == (lease->token << FL__TOKEN_SHIFT | FL__HELD) && fl__now(r) < fl__deadline_ns(r, l))
        return 0;
    return fl__fail(-ESTALE, "token %llu is no longer current", (unsigned long long)lease->token);
}

uint64_t fl__slot_token(const struct fl__shm *r, uint32_t i)
{
    uint64_t s = 0, l = 0;
    fl__pair_load(&fl__slot_at(r, i)->pair, &s, &l);
    return s >> FL__TOKEN_SHIFT;
}

/* Free the slots held by `client` (or every held slot, if `any`), leaving
 * `why` in the lease word, and wake their waiters. */
static uint32_t fl__slots_free_where(struct fl__shm *r, uint32_t client, bool any, uint64_t why,
                                     fl__freed_fn fn, void *ctx)
{
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    uint32_t used = fl__keytab_used(&t), freed = 0;
    for (uint32_t i = 0; i < used; i++) {
        struct fl__slot *sl = fl__slot_at(r, i);
        uint64_t s = 0, l = 0;
        fl__pair_load(&sl->pair, &s, &l);
        while ((s & FL__HELD) && (any || fl__owner(l) == client)) {
            if (fl__pair_cas(&sl->pair, &s, &l, s & ~FL__HELD, why)) {
                /* count, then wake, then log: what a woken waiter reports
                 * comes after the death is counted (one locked add), and
                 * the waiters' latency (I5) does not include a write to the
                 * log; wake all of them: the dead holder may also have
                 * been a waiter holding a wake.  fencelockd stopped or
                 * killed between the CAS and the wake: its waiters sleep
                 * until the dead holder's deadline at most (I4, I5), as
                 * for a releaser stopped there (fl__shm_release). */
                if (why == FL__FREED_BY_DEATH)
                    fl__count(sl, FL__C_DEATHS);
                fl__wake_all(sl);
                if (fn)
                    fn(ctx, i, s >> FL__TOKEN_SHIFT);
                freed++;
                break;
            }
            /* changed under us (an expiry takeover): look again */
        }
    }
    return freed;
}

/*
 * Wake the sleepers of every key that has any; fencelockd calls it after a
 * round of its event loop in which a client went away, and once at start
 * (an earlier supervisor may have died between a reap and this pass).
 *
 * Why: a releaser killed between its release CAS and its futex wake
 * (fl_release) leaves the lock free and its waiters asleep until the
 * deadline of the lease they saw, and its reap finds nothing held by it.
 * The region does not record who released last (the free lease word keeps
 * how the last holding ended), so every key with sleepers is woken; they
 * re-read the pair and sleep again if it is held.  src/shm/slot.pml found the
 * window; model_slot_wakeup checks this fix and BUG_REAP_NO_WAKE the reap
 * without it; test_releaser_killed_before_wake stops a real releaser there.
 *
 * Ordering: a sleeper's seq_cst increment of `waiters` precedes its re-read
 * of the pair, which saw the lock held, so it precedes the dead releaser's
 * CAS; that CAS precedes the process's exit, which precedes the event that
 * brought us here.  Our seq_cst load of `waiters` therefore sees the sleeper.
 *
 * Cost: one load per key, and a futex wake per key with sleepers, per round
 * in which any client went (a clean fl_close looks like a death from here:
 * the socket closes in both cases).  A sleeper on a key held by a live
 * holder wakes for nothing a few microseconds, once per such round.
 */
void fl__slots_wake_sleepers(struct fl__shm *r)
{
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    uint32_t used = fl__keytab_used(&t);
    for (uint32_t i = 0; i < used; i++)
        fl__wake_all(fl__slot_at(r, i));
}

uint32_t fl__slots_reap_client(struct fl__shm *r, uint32_t client, fl__freed_fn fn, void *ctx)
{
    if (client == 0)
        return 0; /* unregistered holders are never reaped: they fall back to leases */
    return fl__slots_free_where(r, client, false, FL__FREED_BY_DEATH, fn, ctx);
}

uint32_t fl__slots_void_all(struct fl__shm *r, fl__freed_fn fn, void *ctx)
{
    uint32_t voided = fl__slots_free_where(r, 0, true, FL__FREED_VOID, fn, ctx);
    /* No process of the earlier boot is left to take back its count of
     * waiters, and no client of this boot has opened yet (fl_open answers
     * -EAGAIN until the voiding is done): start the counts from zero, or
     * every release of those keys would make a futex call for nobody. */
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    uint32_t used = fl__keytab_used(&t);
    for (uint32_t i = 0; i < used; i++) {
        /* relaxed: nobody else runs on the region yet */
        atomic_store_explicit(&fl__slot_at(r, i)->waiters, 0, memory_order_relaxed);
        atomic_store_explicit(&fl__slot_at(r, i)->wake_needed, 0, memory_order_relaxed);
    }
    return voided;
}
