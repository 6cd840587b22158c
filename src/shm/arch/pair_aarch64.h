/* SPDX-License-Identifier: MIT */
/*
 * pair_aarch64.h - the pair CAS on aarch64 (included by pair.h only; the
 * contract is there).
 *
 * TWO INSTRUCTION SEQUENCES, the two mappings the Arm C/C++ atomics ABI
 * gives for a 128-bit compare_exchange_strong(seq_cst, acquire):
 *
 *   LSE (FEAT_LSE, Armv8.1 and later: Neoverse, Graviton 2+, Cortex-A55/A76+)
 *       caspal  x0, x1, x2, x3, [p]
 *     One instruction: compares the 16 bytes at p with x0:x1 (x0 the word
 *     at the lower address: the state word), writes x2:x3 if equal, and
 *     returns the old 16 bytes in x0:x1 either way.  A CASP access is
 *     single-copy atomic as a 16-byte access (16-byte aligned: format.h
 *     aligns struct fl__pair to 16).  The register pairs must be even/odd
 *     consecutive, hence the explicit register variables below.
 *
 *   Armv8.0 (no LSE: Cortex-A53/A57/A72, so Raspberry Pi 3 and 4, Graviton 1)
 *     1: ldaxp  os, ol, [p]
 *        cmp    os, s ; ccmp ol, l, #0, eq
 *        csel   ws, ns, os, eq ; csel wl, nl, ol, eq
 *        stlxp  w, ws, wl, [p]
 *        cbnz   w, 1b
 *     Without FEAT_LSE2 a 16-byte load is single-copy atomic only as the
 *     load half of an exclusive pair whose store succeeds: a plain ldp may
 *     return the state word of one pair and the lease word of another, and
 *     so may an ldaxp whose stlxp is never attempted.  So the loop always
 *     stores: the new pair if the comparison held, the old pair back if
 *     not, and retries until the store-exclusive succeeds.  A failed CAS
 *     therefore hands back one atomic snapshot (the caller decides on it:
 *     renew and release loop on the returned pair), and writes the value
 *     the pair already had: invisible to every reader, like x86's
 *     cmpxchg16b, which also writes on failure.  (Why not the compiler's:
 *     Debian 12's GCC 12 compiles a 16-byte __atomic_compare_exchange_n
 *     into a call to libatomic, which may take a lock, as on x86; and its
 *     16-byte __sync_val_compare_and_swap is an ldxp/stlxp loop that does
 *     not store on failure, so it can return a torn old value: GCC bug
 *     111404, fixed in GCC 14.  tests/unit/test_pair.c catches exactly
 *     that under qemu.)
 *
 *   Both sequences are atomic with respect to each other (a casp write to
 *   the pair clears every other observer's exclusive monitor on it, so a
 *   concurrent stlxp fails and retries): processes built with different
 *   choices below can share a region.
 *
 * RUN TIME OR BUILD TIME.  Built for Armv8.1-A or later (-march=armv8.1-a,
 * or any -march/-mcpu that defines __ARM_FEATURE_ATOMICS), casp only, no
 * check.  Otherwise (Debian's and every distribution's arm64 baseline is
 * Armv8.0) the choice is made at run time: getauxval(AT_HWCAP) &
 * HWCAP_ATOMICS, read once per process and cached.  One binary then runs
 * on every arm64 machine and uses casp where the CPU has it, for a load of
 * a cached byte and a predictable branch per CAS; GCC's -moutline-atomics
 * (on by default for aarch64 Linux since GCC 10) makes the same choice for
 * the library's C11 atomics (__aarch64_cas8_acq_rel and friends).
 * The tests run both sequences on every arm64 run (tests/unit/test_pair.c
 * calls each one directly when the CPU has it, and the dispatch under a
 * CPU without LSE: QEMU_CPU=cortex-a57 in the cross build).
 *
 * ORDERING.  Both sequences are the Arm ABI's seq_cst compare-exchange: on
 * success the read is an acquire and the write a release; on failure the
 * read is an acquire (caspal's failed compare performs no write; the
 * ldaxp/stlxp loop's write-back is a release of the same value).  That is
 * weaker than x86, where a locked instruction is a full fence for every
 * access around it on both outcomes.  What fencelock needs, and gets:
 *   - everything before a successful CAS is visible before the new pair
 *     (release): a holder's writes before fl_release, the key bytes, the
 *     caller's data protected by the lock;
 *   - nothing after a CAS, on either outcome, is performed before its read
 *     (acquire): fl_acquire's caller sees the previous holder's writes, and
 *     a failed CAS's snapshot is as good as an acquire load of the pair;
 *   - the releaser's Dekker (slot.c WAITING): its pair CAS, then a seq_cst
 *     load of `waiters`.  A store-release (the write half of caspal or
 *     stlxp) followed in program order by a load-acquire of the RCsc kind
 *     (ldar: every seq_cst load is one) is observed in that order.  So the
 *     CAS's write and the load of `waiters` cannot be reordered, exactly
 *     what the waiter's side (a seq_cst increment, then a seq_cst load of
 *     the pair) needs; the x86 argument "both sides are full barriers"
 *     becomes "on both sides a release write, then an ldar".  (An acquire
 *     load that is not seq_cst may be an ldapr on Armv8.3+ targets, which a
 *     release write does not order: that load must stay seq_cst.)
 * No caller of fl__pair_cas relies on a plain or relaxed access after it
 * being ordered after its write: the accesses after it that others read
 * are the seq_cst load above and the informational holder fields (relaxed,
 * display only).  docs/memory-orders.md walks through every caller.
 *
 * The reader (fl__pair_load, pair.h) never uses these instructions, for the
 * same reason as on x86: they write, and the status tool maps the region
 * read-only.  It loads the two words with acquire and re-reads the state
 * word; see the argument there.
 */
#ifndef FL_ARCH_PAIR_AARCH64_H
#define FL_ARCH_PAIR_AARCH64_H

#include <stdatomic.h>
#include <sys/auxv.h>

#ifndef HWCAP_ATOMICS
#define HWCAP_ATOMICS (1ul << 8) /* arch/arm64/include/uapi/asm/hwcap.h */
#endif

/* casp: FEAT_LSE.  Only call where fl__pair_have_lse() (or the build
 * target) says the CPU has it: elsewhere it is an undefined instruction. */
static inline bool fl__pair_cas_lse(struct fl__pair *p, uint64_t *s, uint64_t *l, uint64_t ns,
                                    uint64_t nl)
{
    uint64_t es = *s, el = *l;
    register uint64_t x0 __asm__("x0") = es;
    register uint64_t x1 __asm__("x1") = el;
    register uint64_t x2 __asm__("x2") = ns;
    register uint64_t x3 __asm__("x3") = nl;
    /* .arch_extension: the assembler accepts casp in a file built for the
     * Armv8.0 baseline; the compiler itself still emits no LSE code. */
    __asm__ __volatile__(".arch_extension lse\n\t"
                         "caspal %[o0], %[o1], %[n0], %[n1], %[m]"
                         : [o0] "+r"(x0), [o1] "+r"(x1), [m] "+Q"(*p)
                         : [n0] "r"(x2), [n1] "r"(x3)
                         : "memory");
    *s = x0;
    *l = x1;
    return x0 == es && x1 == el;
}

/* The Armv8.0 exclusive-pair loop; works on every aarch64 CPU. */
static inline bool fl__pair_cas_llsc(struct fl__pair *p, uint64_t *s, uint64_t *l, uint64_t ns,
                                     uint64_t nl)
{
    uint64_t os, ol, ws, wl;
    uint32_t failed;
    __asm__ __volatile__("1:\n\t"
                         "ldaxp  %[os], %[ol], %[m]\n\t"
                         "cmp    %[os], %[es]\n\t"
                         "ccmp   %[ol], %[el], #0, eq\n\t"
                         "csel   %[ws], %[ns], %[os], eq\n\t"
                         "csel   %[wl], %[nl], %[ol], eq\n\t"
                         "stlxp  %w[f], %[ws], %[wl], %[m]\n\t"
                         "cbnz   %w[f], 1b"
                         : [os] "=&r"(os), [ol] "=&r"(ol), [ws] "=&r"(ws), [wl] "=&r"(wl),
                           [f] "=&r"(failed), [m] "+Q"(*p)
                         : [es] "r"(*s), [el] "r"(*l), [ns] "r"(ns), [nl] "r"(nl)
                         : "cc", "memory");
    bool ok = os == *s && ol == *l;
    *s = os;
    *l = ol;
    return ok;
}

/* Does this CPU have FEAT_LSE?  HWCAP_ATOMICS, read once and cached.
 * relaxed: the value is a fact about the machine (Linux reports only the
 * features every CPU of the system has), the same for every thread; a
 * thread that still sees 0 looks it up again and stores the same value.
 * Nothing else is published through it. */
static inline bool fl__pair_have_lse(void)
{
#if defined(__ARM_FEATURE_ATOMICS)
    return true;
#else
    static _Atomic unsigned char cached; /* 0: not looked up; 1: no LSE; 2: LSE */
    unsigned char c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (__builtin_expect(c == 0, 0)) {
        c = (getauxval(AT_HWCAP) & HWCAP_ATOMICS) ? 2 : 1;
        atomic_store_explicit(&cached, c, memory_order_relaxed);
    }
    return c == 2;
#endif
}

static inline bool fl__pair_cas(struct fl__pair *p, uint64_t *s, uint64_t *l, uint64_t ns,
                                uint64_t nl)
{
    if (fl__pair_have_lse())
        return fl__pair_cas_lse(p, s, l, ns, nl);
    return fl__pair_cas_llsc(p, s, l, ns, nl);
}

/* yield: the architected spin-wait hint (Linux's cpu_relax() on arm64).
 * Much shorter than x86's pause on most cores, so slot.c's 128 hints spin
 * for less time here; the spin is only a hint (the futex wait follows). */
static inline void fl__cpu_relax(void) { __asm__ __volatile__("yield" ::: "memory"); }

/* Which instruction fl__pair_cas uses (for tests and diagnostics). */
static inline const char *fl__pair_impl(void)
{
    return fl__pair_have_lse() ? "casp" : "ldaxp/stlxp";
}

#endif /* FL_ARCH_PAIR_AARCH64_H */
