/* SPDX-License-Identifier: MIT */
/*
 * wall_clock.h - the wall clock of the programs, for display only: the
 * timestamps of log lines and views, how long ago a region was created.
 * Never for leases, which the library measures on CLOCK_MONOTONIC (I11):
 * the wall clock jumps when it is set.  Header-only, so that any part of
 * the tree can read it the same way without linking src/common.
 */
#ifndef FL_COMMON_WALL_CLOCK_H
#define FL_COMMON_WALL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since the Unix epoch, now. */
static inline uint64_t fl__wall_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* cannot fail for this clock id */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
