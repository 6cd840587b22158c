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

#include "core.h"

/* Timer slack for the last stretch of a sleep that ends at a deadline (ns). */
#define FL__WAIT_SLACK_NS 1000
/* The last stretch: how long before its deadline a sleep narrows its timer
 * slack (ns).  Long enough to hold the prctl calls and a wake-up, which are
 * microseconds; a sleep that lasts to its deadline wakes once more, here. */
#define FL__WAIT_LAST_STRETCH_NS 1000000ull

static void fl__timespec_of(uint64_t ns, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ns / FL__NS_PER_S);
    ts->tv_nsec = (long)(ns % FL__NS_PER_S);
}

/* What a sleep is on: one word (FUTEX_WAIT_BITSET), or two (futex_waitv,
 * w1 non-NULL).  Shared futexes, no FUTEX_PRIVATE_FLAG: the words are in
 * the region. */
struct fl__sleep {
    _Atomic uint32_t *w0, *w1;
    uint32_t v0, v1;
};

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

/* One futex sleep until the absolute CLOCK_MONOTONIC time *ts (NULL: no
 * timeout): the system call's result, its error in errno. */
static long fl__sleep_once(const struct fl__sleep *sp, const struct timespec *ts)
{
    if (!sp->w1)
        return syscall(SYS_futex, (uint32_t *)sp->w0, FUTEX_WAIT_BITSET, sp->v0, ts, NULL,
                       FUTEX_BITSET_MATCH_ANY);
    struct futex_waitv wv[2] = {
        {.val = sp->v0, .uaddr = (uint64_t)(uintptr_t)sp->w0, .flags = FUTEX_32},
        {.val = sp->v1, .uaddr = (uint64_t)(uintptr_t)sp->w1, .flags = FUTEX_32},
    };
    /* An absolute CLOCK_MONOTONIC deadline, read on a time namespace's clock
     * as FUTEX_WAIT_BITSET reads it (the kernel converts both alike). */
    return syscall(SYS_futex_waitv, wv, 2u, 0u, ts, CLOCK_MONOTONIC);
}

/* A sleep until deadline_ns (0: none), as fl__sleep_once answers.
 *
 * A timed sleep ends at a holder's deadline, where the waiter takes the
 * lease over (I4): the thread's timer slack (50 us by default) would add up
 * to that much lateness, so the sleep narrows it to 1 us.  But nearly every
 * sleep ends with a wake long before its deadline, and a prctl call costs
 * about a microsecond on a VM (1.2 us here): three per sleep were 3.6 us of
 * CPU, and the restore after a wake sat on the path of every handoff.  So
 * the sleep is in two stretches: up to the caller's slack plus the last
 * stretch before the deadline, on the caller's own slack (the timer fires
 * at the latest at the last stretch's start; a wake here costs nothing
 * more); then, only if the deadline is that near, the last stretch, on the
 * narrow slack, restored after.  The same futex values both times: a wake
 * between the two ends the second at once (EAGAIN), none is lost.
 * Limits: PR_GET_TIMERSLACK answers an int, so a slack above INT_MAX reads
 * as negative and is left alone; a signal handler that longjmps out of the
 * last stretch leaves the narrow slack behind. */
static long fl__sleep_until(const struct fl__sleep *sp, uint64_t deadline_ns)
{
    if (!deadline_ns)
        return fl__sleep_once(sp, NULL);
    struct timespec ts;
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    bool narrow = slack > FL__WAIT_SLACK_NS;
    if (narrow) {
        uint64_t lead = (uint64_t)slack + FL__WAIT_LAST_STRETCH_NS;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now); /* the futex's clock */
        uint64_t now_ns = (uint64_t)now.tv_sec * FL__NS_PER_S + (uint64_t)now.tv_nsec;
        if (deadline_ns > lead && deadline_ns - lead > now_ns) {
            fl__timespec_of(deadline_ns - lead, &ts);
            long rc = fl__sleep_once(sp, &ts);
            if (rc >= 0 || errno != ETIMEDOUT)
                return rc;
        }
        prctl(PR_SET_TIMERSLACK, FL__WAIT_SLACK_NS, 0, 0, 0);
    }
    fl__timespec_of(deadline_ns, &ts);
    long rc = fl__sleep_once(sp, &ts);
    int saved = errno;
    if (narrow)
        prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
    errno = saved;
    return rc;
}

int fl__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns)
{
    long rc = fl__sleep_until(&(struct fl__sleep){.w0 = word, .v0 = expected}, deadline_ns);
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
    long rc = fl__sleep_until(&(struct fl__sleep){.w0 = w0, .v0 = v0, .w1 = w1, .v1 = v1},
                              deadline_ns);
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
