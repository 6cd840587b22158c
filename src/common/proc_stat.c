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
#include <stdlib.h>
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
    if (!rest || rest[1] != ' ' || !rest[2])
        return -EPROTO;
    out->state = rest[2];
    /* Fields from 4 on are numbers: 4 ppid, 5 pgrp, 14 utime, 15 stime,
     * 22 starttime; strtoull, so that a malformed one is refused. */
    unsigned long long v[23] = {0};
    const char *p = rest + 3;
    for (int field = 4; field <= 22; field++) {
        if (*p != ' ')
            return -EPROTO;
        char *end;
        errno = 0;
        v[field] = strtoull(p + 1, &end, 10);
        if (errno || end == p + 1)
            return -EPROTO;
        p = end;
    }
    long long ppid = (long long)v[4], pgrp = (long long)v[5];
    out->utime = v[14];
    out->stime = v[15];
    out->start_time = v[22];
    out->ppid = (pid_t)ppid;
    out->pgrp = (pid_t)pgrp;
    return 0;
}
