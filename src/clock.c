/*
 * clock.c - time and boot identity.  Leases are measured on CLOCK_MONOTONIC
 * only (I11): it never jumps with settimeofday or NTP, and it restarts with
 * the boot, which is why a region also records the boot id and treats leases
 * of another boot as void.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

uint64_t fl__monotonic_ns(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail for this clock id */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int fl__read_boot_id(char buf[40])
{
    memset(buf, 0, 40);
    /* Tests simulate a reboot by pointing this at a file of their own. */
    const char *path = getenv("FENCELOCK_TEST_BOOT_ID_FILE");
    if (!path || !*path)
        path = "/proc/sys/kernel/random/boot_id";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fl__neg_errno();
    ssize_t n = read(fd, buf, 39);
    int err = n < 0 ? fl__neg_errno() : 0;
    close(fd);
    if (err)
        return err;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
        buf[--n] = '\0';
    return n > 0 ? 0 : -EIO;
}

uint64_t fl__process_start_time(pid_t pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: count
     * fields from the last ')'. Field 22 is the start time. */
    char *p = strrchr(text, ')');
    if (!p)
        return 0;
    int field = 2;
    for (; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    return errno == 0 && end != p ? v : 0;
}
