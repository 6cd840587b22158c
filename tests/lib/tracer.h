/* SPDX-License-Identifier: MIT */
/*
 * tracer.h - a small ptrace driver that stops a child process at a chosen
 * instruction inside a library call (I2, I4, I5 tests stop real processes
 * between two instructions of the protocol).
 *
 * The traced child calls tr_traceme() once, then raise(SIGSTOP) right before
 * the call it wants driven (fl_commit, fl_release, ...).  The parent:
 *   tr_wait_sigstop(pid)           waits for that stop;
 *   tr_run_to(pid, fn, ...)        single-steps (suppressing the SIGSTOP) until
 *                                  the first instruction of fn;
 *   tr_step(...)                   single-steps n instructions, or until fn
 *                                  returned to its caller;
 *   tr_run_to_addr(...)            runs to an address with a one-shot int3;
 *   tr_detach(pid)                 lets it run on at full speed.
 * fork() keeps addresses, so &fl_commit in the parent is its address in the
 * child.  The instruction matchers below let a test assert which instruction
 * it stopped after (the protocol says which one publishes).
 */
#ifndef FL_TEST_TRACER_H
#define FL_TEST_TRACER_H

/* The stepping functions (tr_run_to, tr_step, tr_run_to_addr, tr_rip) read
 * and write x86-64 registers (rip, rsp, int3): x86-64 only.  Elsewhere they
 * fail (-1) with a message and TR_SUPPORTED is 0, and the tests that step
 * through the library (rec_ptrace, rec_kill, two cases of death) are
 * not built or skip.  (They could not run in the aarch64 cross test anyway:
 * qemu-user does not let one guest process ptrace another.) */
#if defined(__x86_64__)
#define TR_SUPPORTED 1
#else
#define TR_SUPPORTED 0
#endif

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct tr_ctx {
    pid_t pid;
    uint64_t entry_sp;  /* rsp at the first instruction of fn: the return address */
    uint64_t ret_ip;    /* where fn returns to */
    long steps;         /* instructions executed inside fn so far */
    bool returned;      /* fn has returned */
} tr_ctx;

void tr_traceme(void);
/* Wait until pid stops with SIGSTOP (the traced child's raise).  0 or -1. */
int tr_wait_sigstop(pid_t pid, int timeout_ms);
/* Single-step until rip == fn (at most max_steps).  0 or -1. */
int tr_run_to(tr_ctx *t, pid_t pid, uintptr_t fn, long max_steps);
/* Called before each instruction executed: rip and the 8 bytes there. */
typedef void (*tr_insn_fn)(void *ctx, long step, uint64_t rip, const uint8_t insn[8]);
/* Step up to n instructions or until fn returns.  Calls cb (may be NULL)
 * before each one.  0, or -1 if the process left ptrace control. */
int tr_step(tr_ctx *t, long n, tr_insn_fn cb, void *ctx);
/* Run (not step) to the instruction at addr with a one-shot breakpoint (int3
 * written into the tracee's private copy of the page, then restored): stops
 * with rip == addr, the instruction not executed.  t->steps is no longer
 * exact afterwards.  0, or -1 if the tracee did not get there. */
int tr_run_to_addr(tr_ctx *t, uint64_t addr);
/* rip of the stopped tracee, and the 8 bytes there. */
uint64_t tr_rip(pid_t pid, uint8_t insn[8]);
/* Detach and let it run (no signal).  0 or -1. */
int tr_detach(pid_t pid);
/* A locked compare-and-exchange (lock cmpxchg r/m8..64, with or without REX). */
bool tr_is_lock_cmpxchg(const uint8_t insn[8]);
/* A locked cmpxchg16b (lock cmpxchg16b m128: F0 [REX.W] 0F C7 /1), the
 * instruction of every lock-pair transition (src/shm/slot.c). */
bool tr_is_lock_cmpxchg16b(const uint8_t insn[8]);

#endif
