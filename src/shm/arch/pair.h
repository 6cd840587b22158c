/* SPDX-License-Identifier: MIT */
/*
 * pair.h - the lock word's primitives: the 16-byte compare-and-swap of a
 * slot's state pair (the one architecture-specific piece), the write-free
 * reader, and the spin hint.
 *
 *   bool fl__pair_cas(struct fl__pair *p, uint64_t *s, uint64_t *l,
 *                     uint64_t ns, uint64_t nl)
 *       If p holds (*s, *l), replace it by (ns, nl) and return true.
 *       Otherwise return false with (*s, *l) set to the pair p held: one
 *       16-byte single-copy atomic snapshot, never a state word of one
 *       pair with the lease word of another.  Lock-free (a real 16-byte
 *       instruction, never libatomic's lock), atomic across processes on a
 *       MAP_SHARED mapping.  Ordering: at least C11's seq_cst
 *       compare-exchange: on success its read is an acquire, its write a
 *       release, and the write is ordered before every later seq_cst
 *       load; on failure an acquire.  (x86's lock prefix gives
 *       more, a full fence for every access around it; nothing here relies
 *       on more: pair_aarch64.h.)  It needs write permission even when it
 *       fails (both architectures may write the old value back): readers
 *       use fl__pair_load, never this.
 *   void fl__pair_load(struct fl__pair *p, uint64_t *s, uint64_t *l)
 *       A consistent snapshot of the pair without writing (plain C11, the
 *       same on every architecture; the argument is below).
 *   void fl__cpu_relax(void)
 *       The architecture's spin-wait hint.
 *
 * Only slot.c changes a lock slot's pair (tests/unit/test_pair.c stresses
 * these functions on a pair of its own).  The state machine is in
 * src/shm/slot.c; its model, src/shm/slot.pml, pins this file too.  The
 * memory-order arguments of every caller, for both architectures, are in
 * docs/memory-orders.md.
 *
 * Supported: x86-64 (cmpxchg16b) and little-endian aarch64 (LSE casp, or an
 * ldaxp/stlxp loop where LSE is absent).  Anything else fails here, at build
 * time (and CMakeLists.txt refuses it at configure time).
 */
#ifndef FL_ARCH_PAIR_H
#define FL_ARCH_PAIR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../format.h"

#if defined(__x86_64__)
#include "pair_x86_64.h"
#elif defined(__aarch64__) && defined(__AARCH64EL__)
#include "pair_aarch64.h"
#else
#error "fencelock's lock word needs a 16-byte compare-and-swap: x86-64 or little-endian aarch64"
#endif

/*
 * THE READER.  A 16-byte atomic load would be a write on both
 * architectures: x86-64 has only cmpxchg16b, and aarch64 without FEAT_LSE2
 * has only casp or an ldxp/stxp pair, which must store to prove the load
 * atomic (a plain ldp is not single-copy atomic there).  The status tool
 * maps the region read-only, and a writing load would also pull the pair's
 * cache line from the holder.  So readers load the two words separately and
 * re-read the state word: the state word never takes the same value twice
 * apart from renewals, which keep it and change only the lease word (T only
 * grows, and each T is held, then freed, once), so every write between the
 * two state loads that carried state s carried a lease word of the same
 * holding, and an unchanged state word proves the lease word belongs to it.
 *
 * On a weakly ordered machine (aarch64) this needs two things x86-TSO gives
 * for free, and both hold:
 *   - the three loads happen in program order: state, lease, state.  The
 *     first two are acquire loads, and nothing after an acquire load is
 *     performed before it; a relaxed lease load could be satisfied before
 *     the first state load, or after the second, and pair a state with a
 *     lease of another holding.
 *   - every writer writes both words in one single-copy atomic 16-byte
 *     write (casp, or an stlxp that succeeded; cmpxchg16b on x86): a write
 *     of the pair is one event, so a load of the lease word that comes
 *     after (in the order above) a load that saw a pair's state word cannot
 *     see a lease word older than that pair's, and one that comes before a
 *     load that saw a state word cannot see a newer one (Armv8 is
 *     other-multi-copy atomic: a write is seen by all other observers at
 *     once).
 * The acquire loads also make visible what the writer of the state
 * published before its CAS (its holder fields, and for records the bound
 * key).  Plain loads, no write: works on a PROT_READ mapping.
 */
static inline void fl__pair_load(struct fl__pair *p, uint64_t *s, uint64_t *l)
{
    for (;;) {
        /* acquire: what the writer of this state published (holder fields,
         * and for records the bound key) is visible after it; and the lease
         * load cannot be performed before it */
        uint64_t s1 = atomic_load_explicit(&p->state, memory_order_acquire);
        /* acquire: keeps the re-read below after this load (a relaxed
         * lease load could be satisfied after it on aarch64) */
        uint64_t l1 = atomic_load_explicit(&p->lease, memory_order_acquire);
        /* relaxed: ordered after the acquire above; it only compares */
        uint64_t s2 = atomic_load_explicit(&p->state, memory_order_relaxed);
        if (s1 == s2) {
            *s = s1;
            *l = l1;
            return;
        }
    }
}

#endif /* FL_ARCH_PAIR_H */
