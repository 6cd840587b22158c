/* SPDX-License-Identifier: MIT */
/*
 * proc_stat.h - the tests' and benchmarks' one reader of /proc/PID/stat
 * (the library's and programs' is src/common/proc_stat.h).
 */
#ifndef TH_PROC_STAT_H
#define TH_PROC_STAT_H

#include <sys/types.h>

struct th_proc_stat {
    char state; /* 'R', 'S', 'T', 't', 'Z'... */
    pid_t ppid;
    unsigned long long utime, stime; /* clock ticks of CPU time */
};

/* 0, or -1 if pid is gone or its line does not parse (fields counted from
 * the last ')': the command name may hold anything). */
int th_proc_stat_read(pid_t pid, struct th_proc_stat *out);

#endif
