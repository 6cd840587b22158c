/* SPDX-License-Identifier: MIT */
/*
 * pair_x86_64.h - the pair CAS on x86-64: lock cmpxchg16b (included by
 * pair.h only; the contract is there).
 *
 * We emit the instruction ourselves: GCC's 16-byte __atomic calls go to
 * libatomic, whose fallback is a per-process lock, useless between
 * processes.  Inline assembly needs no -mcx16; every x86-64 CPU that runs
 * a current Linux has the instruction.
 *
 * Ordering: a locked instruction is a full barrier on both outcomes
 * (seq_cst); on failure it still writes the old value back, which is why
 * it needs write permission even when it fails.
 */
#ifndef FL_ARCH_PAIR_X86_64_H
#define FL_ARCH_PAIR_X86_64_H

/* Compare-and-swap both words of p.  On failure *s and *l receive the
 * current values.  lock cmpxchg16b is a full barrier (seq_cst). */
static inline bool fl__pair_cas(struct fl__pair *p, uint64_t *s, uint64_t *l, uint64_t ns,
                                uint64_t nl)
{
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %[m]"
                         : "=@ccz"(ok), [m] "+m"(*p), "+a"(*s), "+d"(*l)
                         : "b"(ns), "c"(nl)
                         : "memory");
    return ok;
}

static inline void fl__cpu_relax(void) { __builtin_ia32_pause(); }

/* Which instruction fl__pair_cas uses (for tests and diagnostics). */
static inline const char *fl__pair_impl(void) { return "cmpxchg16b"; }

#endif /* FL_ARCH_PAIR_X86_64_H */
