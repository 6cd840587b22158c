/*
 * wait.c - futex sleep and wake on words of the shared mapping.
 *
 * Shared futexes only: FUTEX_PRIVATE_FLAG would key the wait on this
 * process's address space and never see a wake from another process.
 * FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline (without
 * FUTEX_CLOCK_REALTIME), the clock leases are measured on, so a sleep can
 * end exactly at a holder's deadline however often it is restarted.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int fl__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns)
{
    struct timespec ts, *tsp = NULL;
    if (deadline_ns) {
        ts.tv_sec = (time_t)(deadline_ns / 1000000000ull);
        ts.tv_nsec = (long)(deadline_ns % 1000000000ull);
        tsp = &ts;
    }
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET, expected, tsp, NULL,
                      FUTEX_BITSET_MATCH_ANY);
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

void fl__futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
