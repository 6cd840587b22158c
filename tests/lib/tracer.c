/* SPDX-License-Identifier: MIT */
/* tracer.c - see tracer.h. */
#include "tracer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"


void tr_traceme(void)
{
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
        perror("PTRACE_TRACEME");
        _exit(90);
    }
}

int tr_wait_sigstop(pid_t pid, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            if (WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP)
                return 0;
            fprintf(stderr, "tracer: tracee %d: unexpected wait status %#x\n", (int)pid, st);
            return -1;
        }
        if (w < 0 || th_now_ns() >= deadline)
            return -1;
        usleep(500); /* waiting for the child to reach its stop; the deadline bounds a failure */
    }
}

#if TR_SUPPORTED
static int tr_regs(pid_t pid, struct user_regs_struct *regs)
{
    return ptrace(PTRACE_GETREGS, pid, NULL, regs) == 0 ? 0 : -1;
}

static int tr_single(pid_t pid)
{
    if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) != 0)
        return -1;
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
        return -1;
    if (WSTOPSIG(st) != SIGTRAP) {
        fprintf(stderr, "tracer: tracee %d stopped by signal %d while stepping\n", (int)pid,
                WSTOPSIG(st));
        return -1;
    }
    return 0;
}

uint64_t tr_rip(pid_t pid, uint8_t insn[8])
{
    struct user_regs_struct regs;
    if (tr_regs(pid, &regs) != 0)
        return 0;
    if (insn) {
        errno = 0;
        long w = ptrace(PTRACE_PEEKTEXT, pid, (void *)regs.rip, NULL);
        memcpy(insn, &w, 8);
    }
    return regs.rip;
}

int tr_run_to(tr_ctx *t, pid_t pid, uintptr_t fn, long max_steps)
{
    memset(t, 0, sizeof *t);
    t->pid = pid;
    struct user_regs_struct regs;
    for (long i = 0; i < max_steps; i++) {
        if (tr_single(pid) != 0 || tr_regs(pid, &regs) != 0)
            return -1;
        if (regs.rip == fn) {
            t->entry_sp = regs.rsp;
            errno = 0;
            t->ret_ip = (uint64_t)ptrace(PTRACE_PEEKDATA, pid, (void *)regs.rsp, NULL);
            return errno ? -1 : 0;
        }
    }
    fprintf(stderr, "tracer: tracee %d did not reach %#lx in %ld steps\n", (int)pid,
            (unsigned long)fn, max_steps);
    return -1;
}

int tr_step(tr_ctx *t, long n, tr_insn_fn cb, void *ctx)
{
    struct user_regs_struct regs;
    for (long i = 0; i < n && !t->returned; i++) {
        if (cb) {
            uint8_t insn[8];
            uint64_t rip = tr_rip(t->pid, insn);
            cb(ctx, t->steps, rip, insn);
        }
        if (tr_single(t->pid) != 0 || tr_regs(t->pid, &regs) != 0)
            return -1;
        t->steps++;
        if (regs.rsp == t->entry_sp + 8 && regs.rip == t->ret_ip)
            t->returned = true;
    }
    return 0;
}

int tr_run_to_addr(tr_ctx *t, uint64_t addr)
{
    struct user_regs_struct regs;
    if (tr_regs(t->pid, &regs) != 0)
        return -1;
    if (regs.rip == addr)
        return 0;
    errno = 0;
    long orig = ptrace(PTRACE_PEEKTEXT, t->pid, (void *)addr, NULL);
    if (errno)
        return -1;
    long trap = (long)(((unsigned long)orig & ~0xFFul) | 0xCCul);
    if (ptrace(PTRACE_POKETEXT, t->pid, (void *)addr, (void *)trap) != 0)
        return -1;
    int st;
    if (ptrace(PTRACE_CONT, t->pid, NULL, NULL) != 0 || waitpid(t->pid, &st, 0) != t->pid ||
        !WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP) {
        fprintf(stderr, "tracer: tracee %d did not reach the breakpoint at %#llx\n", (int)t->pid,
                (unsigned long long)addr);
        return -1;
    }
    if (ptrace(PTRACE_POKETEXT, t->pid, (void *)addr, (void *)orig) != 0 ||
        tr_regs(t->pid, &regs) != 0 || regs.rip != addr + 1)
        return -1;
    regs.rip = addr; /* back onto the instruction the int3 replaced */
    return ptrace(PTRACE_SETREGS, t->pid, NULL, &regs) == 0 ? 0 : -1;
}

#else /* !TR_SUPPORTED: the register-level driver is x86-64 only (tracer.h) */
static int tr_unsupported(const char *fn)
{
    fprintf(stderr, "tracer: %s: the ptrace driver reads x86-64 registers only\n", fn);
    return -1;
}

uint64_t tr_rip(pid_t pid, uint8_t insn[8])
{
    (void)pid;
    if (insn)
        memset(insn, 0, 8);
    tr_unsupported("tr_rip");
    return 0;
}

int tr_run_to(tr_ctx *t, pid_t pid, uintptr_t fn, long max_steps)
{
    (void)fn, (void)max_steps;
    memset(t, 0, sizeof *t);
    t->pid = pid;
    return tr_unsupported("tr_run_to");
}

int tr_step(tr_ctx *t, long n, tr_insn_fn cb, void *ctx)
{
    (void)t, (void)n, (void)cb, (void)ctx;
    return tr_unsupported("tr_step");
}

int tr_run_to_addr(tr_ctx *t, uint64_t addr)
{
    (void)t, (void)addr;
    return tr_unsupported("tr_run_to_addr");
}
#endif

int tr_detach(pid_t pid) { return ptrace(PTRACE_DETACH, pid, NULL, NULL) == 0 ? 0 : -1; }

bool tr_is_lock_cmpxchg(const uint8_t insn[8])
{
    if (insn[0] != 0xF0)
        return false;
    int i = 1;
    if (insn[i] == 0x66) /* operand-size prefix (16-bit) */
        i++;
    if (insn[i] >= 0x40 && insn[i] <= 0x4F) /* REX */
        i++;
    return insn[i] == 0x0F && (insn[i + 1] == 0xB1 || insn[i + 1] == 0xB0);
}

bool tr_is_lock_cmpxchg16b(const uint8_t insn[8])
{
    if (insn[0] != 0xF0)
        return false;
    int i = 1;
    if (insn[i] >= 0x40 && insn[i] <= 0x4F) /* REX (REX.W for the 16-byte form) */
        i++;
    /* ModRM reg field 1 selects cmpxchg8b/16b in group 9 */
    return insn[i] == 0x0F && insn[i + 1] == 0xC7 && ((insn[i + 2] >> 3) & 7) == 1;
}
