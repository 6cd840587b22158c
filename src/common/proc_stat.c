/* SPDX-License-Identifier: MIT */
/*
 * proc_stat.c - /proc/PID/stat, read once and parsed from the last ')'.
 * Compiled into the library (process start times: death detection) and into
 * fencelock_common (fencelock run's process-tree walk).
 */
#include "proc_stat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int fl__proc_stat_read(pid_t pid, struct fl__proc_stat *out)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, text, sizeof text - 1);
    int saved = errno;
    close(fd);
    if (n < 0)
        return -saved;
    text[n] = '\0';
    const char *rest = strrchr(text, ')');
    int ppid, pgrp;
    /* fields 3 (state), 4, 5, then 14 and 15 (utime, stime), then 22 (starttime) */
    if (!rest || sscanf(rest + 1,
                        " %c %d %d %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu %*s %*s %*s %*s "
                        "%*s %*s %llu",
                        &out->state, &ppid, &pgrp, &out->utime, &out->stime,
                        &out->start_time) != 6)
        return -EPROTO;
    out->ppid = (pid_t)ppid;
    out->pgrp = (pid_t)pgrp;
    return 0;
}
