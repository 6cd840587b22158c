/* SPDX-License-Identifier: MIT */
/*
 * clocks.h - the two clocks of the programs, read the same way everywhere.
 *
 * The wall clock is for display only: the timestamps of log lines and
 * views, how long ago a region was created.  Never for leases, which the
 * library measures on CLOCK_MONOTONIC (I11): the wall clock jumps when it is
 * set.  The monotonic clock times what a program does itself (a refresh
 * interval, a grace period, a rate).  Header-only, so that any part of the
 * tree can read them without linking src/common.
 */
#ifndef FL_COMMON_CLOCKS_H
#define FL_COMMON_CLOCKS_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds in a second (core.h has the same definition). */
#define FL__NS_PER_S 1000000000ull

static inline uint64_t fl__clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts); /* cannot fail for these clock ids */
    return (uint64_t)ts.tv_sec * FL__NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Nanoseconds since the Unix epoch, now (CLOCK_REALTIME). */
static inline uint64_t fl__wall_clock_ns(void) { return fl__clock_ns(CLOCK_REALTIME); }

/* Nanoseconds of CLOCK_MONOTONIC, now. */
static inline uint64_t fl__monotonic_clock_ns(void) { return fl__clock_ns(CLOCK_MONOTONIC); }

#endif
