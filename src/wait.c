/* SPDX-License-Identifier: MIT */
/*
 * wait.c - futex sleep and wake on words of the shared mapping.
 *
 * Shared futexes only: FUTEX_PRIVATE_FLAG would key the wait on this
 * process's address space and never see a wake from another process.
 * FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline (without
 * FUTEX_CLOCK_REALTIME), the clock leases are measured on, so a sleep can
 * end exactly at a holder's deadline however often it is restarted.  In a
 * time namespace the kernel reads that deadline on the namespace's clock,
 * which is the clock our callers pass (slot.c converts region deadlines).
 */
#include <limits.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Timer slack for sleeps that end at a deadline (ns). */
#define FL__WAIT_SLACK_NS 1000

int fl__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns)
{
    struct timespec ts, *tsp = NULL;
    if (deadline_ns) {
        ts.tv_sec = (time_t)(deadline_ns / FL__NS_PER_S);
        ts.tv_nsec = (long)(deadline_ns % FL__NS_PER_S);
        tsp = &ts;
    }
    /* A timed sleep ends at a holder's deadline, where the waiter takes the
     * lease over (I4): the kernel's default timer slack (50 us) would add up
     * to that much lateness.  Narrow it for this sleep only, then restore
     * the caller's: prctl calls on a path that is about to sleep anyway.
     * Limits: PR_GET_TIMERSLACK answers an int, so a slack above INT_MAX
     * reads as negative and is left alone; a signal handler that longjmps
     * out of the sleep leaves the narrow slack behind. */
    int slack = tsp ? prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) : -1;
    if (slack > FL__WAIT_SLACK_NS)
        prctl(PR_SET_TIMERSLACK, FL__WAIT_SLACK_NS, 0, 0, 0);
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET, expected, tsp, NULL,
                      FUTEX_BITSET_MATCH_ANY);
    int saved = errno;
    if (slack > FL__WAIT_SLACK_NS)
        prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
    errno = saved;
    if (rc == 0)
        return 0;
    switch (errno) {
    case EAGAIN: /* the word had already changed: a wake happened */
        return 0;
    case ETIMEDOUT:
        return -ETIMEDOUT;
    case EINTR:
        return -EINTR;
    default: /* EFAULT/EINVAL cannot happen on a valid mapping; re-examine */
        return 0;
    }
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449 /* the same number on x86-64 and arm64 (Linux 5.16) */
#endif
#ifndef FUTEX_32
#define FUTEX_32 2u /* FUTEX2_SIZE_U32, in <linux/futex.h> since Linux 5.16 */
/* struct futex_waitv, as <linux/futex.h> of Linux 5.16 has it */
struct futex_waitv {
    uint64_t val;
    uint64_t uaddr;
    uint32_t flags;
    uint32_t __reserved;
};
#endif

/* 1 once futex_waitv answered ENOSYS in this process (an older kernel, or a
 * seccomp filter): callers sleep on their first word only from then on. */
static _Atomic int fl__no_waitv;

bool fl__futex_waitv_available(void)
{
    return !atomic_load_explicit(&fl__no_waitv, memory_order_relaxed);
}

int fl__futex_wait2(_Atomic uint32_t *w0, uint32_t v0, _Atomic uint32_t *w1, uint32_t v1,
                    uint64_t deadline_ns)
{
    /* shared futexes (no FUTEX_PRIVATE_FLAG): the words are in the region */
    struct futex_waitv wv[2] = {
        {.val = v0, .uaddr = (uint64_t)(uintptr_t)w0, .flags = FUTEX_32},
        {.val = v1, .uaddr = (uint64_t)(uintptr_t)w1, .flags = FUTEX_32},
    };
    struct timespec ts, *tsp = NULL;
    if (deadline_ns) {
        ts.tv_sec = (time_t)(deadline_ns / FL__NS_PER_S);
        ts.tv_nsec = (long)(deadline_ns % FL__NS_PER_S);
        tsp = &ts;
    }
    /* the timer slack of fl__futex_wait, for the same reason */
    int slack = tsp ? prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) : -1;
    if (slack > FL__WAIT_SLACK_NS)
        prctl(PR_SET_TIMERSLACK, FL__WAIT_SLACK_NS, 0, 0, 0);
    /* An absolute CLOCK_MONOTONIC deadline, read on a time namespace's clock
     * as FUTEX_WAIT_BITSET reads it (the kernel converts both alike). */
    long rc = syscall(SYS_futex_waitv, wv, 2u, 0u, tsp, CLOCK_MONOTONIC);
    int saved = errno;
    if (slack > FL__WAIT_SLACK_NS)
        prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
    errno = saved;
    if (rc >= 0)
        return 0; /* the index of the word that woke us */
    switch (errno) {
    case EAGAIN: /* a word had already changed */
        return 0;
    case ETIMEDOUT:
        return -ETIMEDOUT;
    case EINTR:
        return -EINTR;
    case ENOSYS:
        atomic_store_explicit(&fl__no_waitv, 1, memory_order_relaxed);
        return -ENOSYS;
    default: /* EFAULT/EINVAL cannot happen on a valid mapping; re-examine */
        return 0;
    }
}

void fl__futex_wake(_Atomic uint32_t *word, int count)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, count, NULL, NULL, 0);
}

void fl__futex_wake_all(_Atomic uint32_t *word) { fl__futex_wake(word, INT_MAX); }
