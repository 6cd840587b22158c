/* SPDX-License-Identifier: MIT */
/*
 * life.c - a registered client's life word: the death of a holder reaches
 * its waiters through the kernel, with or without fencelockd.
 *
 * THE LIFE WORD.  Each registered handle's client entry holds a robust,
 * process-shared glibc pthread_mutex_t (format.h: CLIENT ENTRY, life area).
 * At fl_open a thread of our own locks it and blocks, signals blocked,
 * until fl_close unlocks it and the thread is joined.  When that thread
 * exits without unlocking -- the process died (any fatal signal, exit()
 * without fl_close) or called execve -- the kernel walks the thread's
 * robust list (handle_futex_death) and stores FUTEX_OWNER_DIED in the
 * mutex's futex word, keeping FUTEX_WAITERS and clearing the thread id, and
 * wakes one thread asleep on the word if FUTEX_WAITERS was set.  The futex
 * word is the mutex's first u32 on glibc (x86-64 and arm64: checked below
 * at build time, and by the opener, who reads the life thread's id there
 * once it holds the lock); elsewhere life words are compiled out.  Waiters
 * only read the word, set FUTEX_WAITERS and sleep on it; they never lock
 * it.  A process-wide word held by a thread that lives exactly as long as
 * the process is what "the holder died" means: a thread that acquired a
 * lock and then exited (pthread_exit) while its process lives is not a
 * death, and is not seen as one.
 *
 * WAITING (slot.c WAITING has the key's side).  A waiter that finds a key
 * held by client entry c (c != 0: registered) reads the entry's life_tid,
 * then its life word:
 *   OWNER_DIED   the holder is dead: it frees the holding it read (below)
 *                without sleeping;
 *   life_tid     alive: it sets FUTEX_WAITERS (CAS; a changed word is read
 *                again) and sleeps with futex_waitv on both the key's
 *                wake_seq and the life word, each compared with the value
 *                it read, in one step of the kernel;
 *   anything else (life_tid 0: no life thread, closing, or a region
 *                client that never started one): the key's word alone.
 * After every return from that sleep it reads the life word again; if it
 * died, it wakes every sleeper of the life word before anything else (it
 * may hold the kernel's one wake, while waiters of other keys the dead
 * process held sleep on the same word), then frees the holding.
 * FUTEX_WAITERS is set before the sleep so that the kernel's death handling
 * wakes somebody: the futex_waitv compare and the kernel's update of the
 * word are ordered by the futex hash bucket lock, so either the sleeper
 * sees OWNER_DIED in its compare (and returns at once) or it is queued
 * before the kernel looks for sleepers.  src/shm/slot.pml (LIFE) checks this
 * protocol; BUG_LIFE_NO_WAITERS and BUG_LIFE_NO_PASS_ON must fail there.
 *
 * FREEING A DEAD HOLDER'S LOCK (slot.c fl__free_dead): the same transition
 * as fencelockd's reap, held(T, c, deadline) -> free(T, FREED_BY_DEATH), by
 * one owner-checked CAS from the exact pair read before the life word, then
 * a wake of every sleeper of the key.  The next holder sees
 * FL_LEASE_OWNER_DIED (I5).  If fencelockd reaps at the same time, one CAS
 * wins and the other finds another pair and does nothing.
 *
 * WHY A DEAD-LOOKING WORD MEANS A DEAD HOLDER
 *   Reuse of an entry.  A pair names its holder by entry index, and
 *   fencelockd hands an entry to a new client only after it reaped the old
 *   one, which frees every pair owned by that index.  The new occupant, at
 *   fl_open and before its first acquisition, stores life_tid = 0 and
 *   initializes the mutex (an OWNER_DIED left by the previous occupant is
 *   gone), and stores life_tid (release) only after its life thread holds
 *   the word.  Its first acquire CAS (a full barrier) follows all of that;
 *   a waiter's acquire load of the pair that saw that holding, and its
 *   acquire loads of life_tid and the word after it, therefore see the new
 *   occupant's values or later ones.  Later ones are that occupant's death
 *   or close, or -- only after it was reaped, its pairs freed -- a later
 *   occupant's: then the pair the waiter read is gone, and the exact-pair
 *   CAS fails.  Tokens never repeat, so that pair cannot come back (ABA).
 *   A client whose life thread never started (pthread_create failed, no
 *   robust futexes -- get_robust_list fails or names no list, as under
 *   qemu-user --, another C library) leaves life_tid 0: never dead to
 *   waiters.  A region of format 3 (clients without life words) is refused
 *   by this library, and older libraries refuse format 4.  src/shm/slot.pml
 *   (REUSE) starts a client in an entry a dead occupant left OWNER_DIED,
 *   without a life thread; BUG_LIFE_NO_INIT (no clearing) must fail.
 *   Reuse of pids and thread ids does not matter: waiters look at the
 *   OWNER_DIED bit, which only the kernel sets and nobody clears but the
 *   next occupant; a live thread's id in the word is compared with the
 *   entry's life_tid only to tell a held word from an unlocked one.
 *   The last instructions of a dying process.  SIGKILL reaches the threads
 *   of a process one by one: the life thread may exit, and the word die,
 *   while another thread of the process is still running user code on
 *   another CPU, for as long as the interrupt that stops it takes -- in the
 *   middle of its work under the lock, or acquiring.  So a waiter that saw
 *   OWNER_DIED calls membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) before it
 *   frees anything (fl__life_confirm); every client registered for it at
 *   fl_open.  Every thread of the dying process had SIGKILL pending before
 *   its life thread could run its exit (the fatal-signal path marks them
 *   all under the siglock that the exiting thread takes next; exit_group
 *   and execve zap the other threads the same way), the barrier interrupts
 *   each CPU that runs one of them and waits until it took the interrupt,
 *   and a thread that returns from the kernel with SIGKILL pending never
 *   runs user code again.  After the barrier the dead holder takes no more
 *   steps; src/shm/slot.pml (GAP) lets the word die before the holder stops,
 *   and BUG_LIFE_NO_MEMBARRIER must fail there (lease exclusion).
 *   A stopped process (SIGSTOP, a debugger) does not die: its word stays
 *   held, and its waiters wait for its deadline as before (I4).
 *
 * WHAT IT DOES NOT COVER (fencelockd does, when it runs)
 *   - Unregistered clients (owner 0): no entry, no life word; lease expiry.
 *   - Sleepers that went to sleep while an earlier holder held the key and
 *     were not woken since (a release wakes one sleeper: the others keep
 *     sleeping on the earlier holder's word): if the next holder dies they
 *     learn of it at the deadline of the lease they saw, then at once.
 *   - A woken waiter, or the sleeper holding the kernel's one wake, killed
 *     before it passes its wake on; a releaser killed between its release
 *     and its wake when its waiters sleep on an earlier holder's word.
 *   - Kernels without futex_waitv (ENOSYS, Linux < 5.16) or membarrier's
 *     global expedited command: a waiter sees a death only when it looks
 *     (before sleeping, or at the deadline it slept to).
 *   - Another client of the region's group can write any entry's life word
 *     (the group trusts every member, README).
 *
 * COST.  One thread per registered handle (a 128 KiB stack, reserved, not
 * touched), created at fl_open and joined at fl_close; a waiter reads two
 * more words before it sleeps and sets a bit once per holder.  The fast
 * paths (acquire free, release, renew) do not change.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))
/* glibc's pthread_mutex_t: __data.__lock, the futex word, comes first. */
_Static_assert(offsetof(pthread_mutex_t, __data.__lock) == 0,
               "the life word is the mutex's first u32 (glibc layout)");
_Static_assert(sizeof(pthread_mutex_t) <= FL__LIFE_AREA_SIZE,
               "a pthread_mutex_t fits the client entry's life area");
#define FL__LIFE_SUPPORTED 1
#else
#define FL__LIFE_SUPPORTED 0
#endif

/* Reserved, not committed: the thread only locks, sleeps and unlocks. */
#define FL__LIFE_STACK_SIZE ((size_t)128 * 1024)

enum { FL__LIFE_STARTING, FL__LIFE_HOLDING, FL__LIFE_FAILED, FL__LIFE_STOP };

struct fl__life {
    pthread_t thread;
    pthread_mutex_t *mutex; /* in our client entry */
    _Atomic uint32_t phase; /* FL__LIFE_*; a private futex word */
    uint32_t tid;           /* the life thread's id */
};

/* 1 once membarrier's global expedited command failed here: without it a
 * waiter cannot know that a dying holder has stopped, so it ignores life
 * words (fencelockd or the deadline, as before). */
static _Atomic int fl__life_off;

static void fl__private_wait(_Atomic uint32_t *word, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void fl__private_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline _Atomic uint32_t *fl__life_word(struct fl__client *e)
{
    return (_Atomic uint32_t *)(void *)e->life;
}

#if FL__LIFE_SUPPORTED
static void *fl__life_main(void *arg)
{
    struct fl__life *lf = arg;
    lf->tid = (uint32_t)syscall(SYS_gettid);
    int e = pthread_mutex_lock(lf->mutex);
    /* The kernel walks this thread's robust list at its death only if
     * glibc could register it (set_robust_list).  Where it could not
     * (qemu-user answers ENOSYS: it cannot walk guest memory), the word
     * would never say owner-died: no life word, the supervisor's path. */
    void *head = NULL;
    size_t head_len = 0;
    if (e == 0 && (syscall(SYS_get_robust_list, 0, &head, &head_len) != 0 || head == NULL)) {
        pthread_mutex_unlock(lf->mutex);
        e = ENOTSUP;
    }
    /* release: tid before the phase the opener reads */
    atomic_store_explicit(&lf->phase, e == 0 ? FL__LIFE_HOLDING : FL__LIFE_FAILED,
                          memory_order_release);
    fl__private_wake(&lf->phase);
    if (e != 0)
        return NULL;
    /* acquire: nothing to order; the loop only waits for the word */
    while (atomic_load_explicit(&lf->phase, memory_order_acquire) != FL__LIFE_STOP)
        fl__private_wait(&lf->phase, FL__LIFE_HOLDING);
    pthread_mutex_unlock(lf->mutex);
    return NULL;
}

static void fl__life_end(struct fl__life *lf)
{
    atomic_store_explicit(&lf->phase, FL__LIFE_STOP, memory_order_release);
    fl__private_wake(&lf->phase);
    pthread_join(lf->thread, NULL);
    free(lf);
}
#endif

void fl__life_start(struct fl__shm *r)
{
#if FL__LIFE_SUPPORTED
    if (r->h.readonly || r->client == 0 || r->client >= r->client_capacity || r->life)
        return;
    struct fl__client *e = &r->clients[r->client];
    /* Before anything else, and before our first acquisition (whose CAS is
     * a full barrier): no life word, and none of an earlier occupant's
     * (see WHY A DEAD-LOOKING WORD MEANS A DEAD HOLDER). */
    atomic_store_explicit(&e->life_tid, 0, memory_order_relaxed);
    pthread_mutex_t *m = (pthread_mutex_t *)(void *)e->life;
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0)
        return;
    int err = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (!err)
        err = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (!err)
        err = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    if (err)
        return;
    /* Waiters stop a dying process's last threads with the global
     * expedited membarrier, which reaches only registered processes. */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) != 0)
        return;
    struct fl__life *lf = calloc(1, sizeof *lf);
    if (!lf)
        return;
    lf->mutex = m;
    /* The thread runs no handler of the application's: all signals blocked
     * (it inherits the mask).  SIGKILL and SIGSTOP still reach it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t ta;
    err = pthread_attr_init(&ta);
    if (!err) {
        pthread_attr_setstacksize(&ta, FL__LIFE_STACK_SIZE);
        err = pthread_create(&lf->thread, &ta, fl__life_main, lf);
        pthread_attr_destroy(&ta);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        free(lf);
        return;
    }
    pthread_setname_np(lf->thread, "fencelock-life");
    uint32_t phase;
    /* acquire: the thread's tid, stored before its phase */
    while ((phase = atomic_load_explicit(&lf->phase, memory_order_acquire)) == FL__LIFE_STARTING)
        fl__private_wait(&lf->phase, FL__LIFE_STARTING);
    /* The word must now hold the life thread's id: it is the futex word of
     * the mutex this glibc locked (the layout the static asserts assume). */
    uint32_t w = atomic_load_explicit(fl__life_word(e), memory_order_relaxed);
    if (phase != FL__LIFE_HOLDING || lf->tid == 0 || (w & FUTEX_TID_MASK) != lf->tid ||
        (w & FUTEX_OWNER_DIED)) {
        fl__life_end(lf);
        return;
    }
    r->life = lf;
    /* release: the word is held before anybody can see life_tid */
    atomic_store_explicit(&e->life_tid, lf->tid, memory_order_release);
#else
    (void)r;
#endif
}

void fl__life_stop(struct fl__shm *r)
{
#if FL__LIFE_SUPPORTED
    struct fl__life *lf = r->life;
    if (!lf)
        return;
    r->life = NULL;
    /* relaxed: a waiter that still reads the old life_tid finds the word
     * unlocked (not dead) or held by the same thread: it sleeps on the key
     * as well, whose locks we freed (and woke) before this */
    atomic_store_explicit(&r->clients[r->client].life_tid, 0, memory_order_relaxed);
    fl__life_end(lf); /* the thread unlocks the word: not a death */
#else
    (void)r;
#endif
}

void fl__life_forget(struct fl__shm *r)
{
    /* a forked child: the thread and its word are the parent's */
    free(r->life);
    r->life = NULL;
}

int fl__life_watch(struct fl__shm *r, uint32_t owner, struct fl__life_watch *w)
{
    if (!FL__LIFE_SUPPORTED || owner == 0 || owner >= r->client_capacity)
        return FL__LIFE_NONE;
    /* relaxed: a flag of this process, set once */
    if (atomic_load_explicit(&fl__life_off, memory_order_relaxed))
        return FL__LIFE_NONE;
    struct fl__client *e = &r->clients[owner];
    /* acquire: after the pair load that showed `owner` holding, and pairs
     * with the occupant's release store once its word was held */
    uint32_t tid = atomic_load_explicit(&e->life_tid, memory_order_acquire);
    if (tid == 0)
        return FL__LIFE_NONE;
    _Atomic uint32_t *word = fl__life_word(e);
    /* acquire: the kernel's OWNER_DIED, seen before the membarrier and the
     * pair CAS that follow it (fl__free_dead) */
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        if (v & FUTEX_OWNER_DIED)
            return FL__LIFE_DEAD;
        if ((v & FUTEX_TID_MASK) != (tid & FUTEX_TID_MASK))
            return FL__LIFE_NONE; /* unlocked by a closing client, or another's */
        if (!fl__futex_waitv_available())
            return FL__LIFE_NONE; /* alive; we cannot sleep on both words */
        if (v & FUTEX_WAITERS)
            break;
        /* seq_cst (a locked instruction either way): FUTEX_WAITERS is in
         * the word before our futex_waitv compares it; a failed CAS hands
         * back the word, which is looked at again */
        if (atomic_compare_exchange_weak(word, &v, v | FUTEX_WAITERS)) {
            v |= FUTEX_WAITERS;
            break;
        }
    }
    w->word = word;
    w->val = v;
    return FL__LIFE_ALIVE;
}

bool fl__life_after_sleep(const struct fl__life_watch *w)
{
    /* acquire: as in fl__life_watch */
    if (!(atomic_load_explicit(w->word, memory_order_acquire) & FUTEX_OWNER_DIED))
        return false;
    /* We may hold the kernel's one wake of this word; waiters of the dead
     * process's other keys sleep on it too: pass the news on to them all. */
    fl__futex_wake_all(w->word);
    return true;
}

int fl__life_confirm(void)
{
    /* After this, every thread of a process whose life word died has
     * stopped for good (WHY A DEAD-LOOKING WORD MEANS A DEAD HOLDER). */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0)
        return 0;
    int err = fl__neg_errno();
    atomic_store_explicit(&fl__life_off, 1, memory_order_relaxed);
    return err;
}
