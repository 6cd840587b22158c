/* SPDX-License-Identifier: MIT */
/*
 * proc_stat.c - /proc/PID/stat for the tests (process states, CPU time,
 * children) and the benchmarks (bench/benchutil.c).
 */
#include "proc_stat.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int th_proc_stat_read(pid_t pid, struct th_proc_stat *out)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    const char *rest = strrchr(text, ')');
    int ppid;
    if (!rest || sscanf(rest + 1, " %c %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu",
                        &out->state, &ppid, &out->utime, &out->stime) != 4)
        return -1;
    out->ppid = (pid_t)ppid;
    return 0;
}
