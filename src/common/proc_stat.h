/* SPDX-License-Identifier: MIT */
/*
 * proc_stat.h - one reader of /proc/PID/stat for the library and the
 * programs (the tests and benchmarks have theirs: tests/common/proc_stat.h).
 */
#ifndef FL_COMMON_PROC_STAT_H
#define FL_COMMON_PROC_STAT_H

#include <sys/types.h>

struct fl__proc_stat {
    char state;                     /* 'R', 'S', 'T', 'Z' (zombie), 'X' (dead)... */
    pid_t ppid, pgrp;
    unsigned long long utime, stime; /* clock ticks of CPU time */
    unsigned long long start_time;  /* clock ticks after boot: with the pid, one process */
};

/* Reads /proc/PID/stat.  0, or -errno (-ENOENT: no such process; -EPROTO: a
 * line it cannot parse).  The command name (field 2) may hold anything,
 * spaces and ')' included: the fields are counted from its last ')'. */
int fl__proc_stat_read(pid_t pid, struct fl__proc_stat *out);

#endif
