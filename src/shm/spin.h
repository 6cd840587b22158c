/* SPDX-License-Identifier: MIT */
/*
 * spin.h - the spin of a waiter before its first sleep (slot.c's acquire
 * loop, its only includer).  Static inline: the functions lie on the
 * contended acquire path, and out of line they would cost a call there.
 * None of them writes the state pair, and none is part of the wake protocol
 * (slot.c, WAITING): the model's one spin (src/shm/slot.pml) is the
 * state-word re-read of fl__spin_until_changed, and the hints below are
 * left out of it because no step of the protocol reads them.
 *
 * SPINNING (before the first sleep of an acquisition)
 *   A waiter that finds the key held may spin once, a bounded number of
 *   pauses, re-reading the state word, before it sleeps:
 *   - nobody sleeps on the key: every such waiter spins, briefly
 *     (FL__SPIN_PAUSES): a holder on another CPU usually releases soon;
 *   - others sleep on it: one waiter per holding may spin, longer
 *     (FL__SPIN_CLAIMED_PAUSES, about as long as the gap below),
 *     and only when the holder took the key on another CPU than the one
 *     the waiter runs on.  A release with sleepers hands the key to a
 *     woken sleeper that needs time to run (an idle vCPU must be
 *     resumed), and the key lies free meanwhile; the spinner takes it
 *     within a cache miss of the release.  One per holding, because every
 *     spinner but the first would only burn its CPU; never on the
 *     holder's CPU, where spinning only keeps the holder from running.
 *     (The gap, the pause counts and what the other variants cost:
 *     docs/benchmarks.md, question 6, "Then one spinner behind the
 *     sleepers".)
 *   Two hints in the slot serve this (format.h): holder_cpu, the holding's
 *   token and the CPU its acquisition ran on, stored by a contended
 *   acquisition that left sleepers behind only (the uncontended path pays
 *   nothing; a holding not noted is unknown, and nobody spins behind
 *   sleepers on it); and
 *   spin_holding, the state word of the holding last claimed, taken by a
 *   CAS from any other value.  Both are relaxed: they order nothing, and
 *   any value in them (stale, torn between the two, written by a foreign
 *   process) only decides whether one waiter spins a few microseconds.
 *   A process stopped forever (or killed) right after its claim leaves
 *   that holding without a spinner: the others sleep at once, as they
 *   would without spinning, and a later holding has another state word
 *   (tokens never repeat), so the claim is free again.  Resumed an hour
 *   later, it finishes its bounded spin and looks at the pair again, as
 *   after any pause.  A CPU is only a hint: the holder may have moved,
 *   and then one spin is wasted.
 *   Fairness: a spinner that wins takes the key ahead of the sleeper the
 *   release woke, which finds it held and sleeps again, behind the
 *   others in the futex queue.  A newcomer could always take a free key
 *   ahead of a woken sleeper (fencelock promises no order among waiters,
 *   nor does the robust mutex); the spinner makes it more frequent, and
 *   a sleeper can be passed over again and again while processes on two
 *   CPUs hand the key to each other.
 */
#ifndef FL_SHM_SPIN_H
#define FL_SHM_SPIN_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm.h"
#include "arch/pair.h" /* fl__cpu_relax */

/* Spin before sleeping (SPINNING): while nobody sleeps on the key, every
 * waiter, briefly; behind sleepers, the holding's one claimed spinner, for
 * about the time a woken sleeper there takes to reach the key (what the
 * counts come to in microseconds: docs/benchmarks.md, "Figures from
 * slot.c's design notes"). */
#define FL__SPIN_PAUSES 128
#define FL__SPIN_CLAIMED_PAUSES 512

static inline bool fl__spin_until_changed(struct fl__slot *sl, uint64_t s, int pauses)
{
    for (int i = 0; i < pauses; i++) {
        fl__cpu_relax();
        /* relaxed: only a hint; the caller re-reads the pair with acquire */
        if (atomic_load_explicit(&sl->pair.state, memory_order_relaxed) != s)
            return true;
    }
    return false;
}

/* The CPU this thread runs on, as the holder_cpu hint holds it (its low
 * FL__HOLDER_CPU_SHIFT bits); false if it cannot be known.  glibc 2.35 and
 * later read it from the thread's rseq area (no system call); without rseq
 * it is the vDSO on x86-64 and a getcpu system call on aarch64: contended
 * paths only. */
static inline bool fl__this_cpu(uint64_t *cpu)
{
    int c = sched_getcpu();
    if (c < 0)
        return false;
    *cpu = (uint64_t)c & FL__HOLDER_CPU_MASK;
    return true;
}

/* Whether this waiter is to spin behind the key's sleepers on holding s
 * (SPINNING): the holding's CPU is noted and is not ours, and nobody has
 * claimed this holding yet; we claim it.  relaxed, all: hints that order
 * nothing (SPINNING says why any value is safe). */
static inline bool fl__spin_claim(struct fl__slot *sl, uint64_t s)
{
    uint64_t hc = atomic_load_explicit(&sl->holder_cpu, memory_order_relaxed);
    if (hc >> FL__HOLDER_CPU_SHIFT != ((s >> FL__TOKEN_SHIFT) & FL__HOLDER_CPU_TOKEN_MASK))
        return false; /* not noted: no sleeper was left behind its acquisition */
    uint64_t cpu = 0;
    if (!fl__this_cpu(&cpu) || (hc & FL__HOLDER_CPU_MASK) == cpu)
        return false;
    uint64_t c = atomic_load_explicit(&sl->spin_holding, memory_order_relaxed);
    return c != s && atomic_compare_exchange_strong_explicit(&sl->spin_holding, &c, s,
                                                             memory_order_relaxed,
                                                             memory_order_relaxed);
}

/* A contended acquisition of token t that leaves sleepers behind notes
 * the CPU it ran on (SPINNING); without sleepers nobody needs it, and two
 * processes handing a key back and forth would move the hint's cache line
 * at every handoff (what that cost: docs/benchmarks.md, "Figures from
 * slot.c's design notes").  relaxed: a hint. */
static inline void fl__note_holder_cpu(struct fl__slot *sl, uint64_t t)
{
    uint64_t cpu = 0;
    if (fl__this_cpu(&cpu))
        atomic_store_explicit(&sl->holder_cpu,
                              (t & FL__HOLDER_CPU_TOKEN_MASK) << FL__HOLDER_CPU_SHIFT | cpu,
                              memory_order_relaxed);
}

#endif
