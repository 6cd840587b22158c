/* SPDX-License-Identifier: MIT */
/*
 * clock.c - time and boot identity.  Leases are measured on CLOCK_MONOTONIC
 * only (I11): it never jumps with settimeofday or NTP, and it restarts with
 * the boot, which is why a region also records the boot id and treats leases
 * of another boot as void.
 *
 * TIME NAMESPACES.  A process in a time namespace (a container, a CRIU
 * restore, `unshare --time`) reads CLOCK_MONOTONIC shifted by its
 * namespace's offset.  Deadlines in a region are on the host's clock (the
 * initial time namespace's): slot.c converts between the two with the
 * offset each handle reads at open (/proc/self/timens_offsets), so every
 * process agrees on when a lease ends (I4, I11), and the deadlines a caller
 * sees (fl_lease.deadline_ns) are on its own clock.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/proc_stat.h"
#include "core.h"

uint64_t fl__monotonic_ns(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail for this clock id */
    return (uint64_t)ts.tv_sec * FL__NS_PER_S + (uint64_t)ts.tv_nsec;
}

int fl__read_boot_id(char buf[FL__BOOT_ID_SIZE])
{
    memset(buf, 0, FL__BOOT_ID_SIZE);
    /* Tests simulate a reboot by pointing this at a file of their own. */
    const char *path = getenv("FENCELOCK_TEST_BOOT_ID_FILE");
    if (!path || !*path)
        path = "/proc/sys/kernel/random/boot_id";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fl__neg_errno();
    ssize_t n = read(fd, buf, FL__BOOT_ID_SIZE - 1);
    int err = n < 0 ? fl__neg_errno() : 0;
    close(fd);
    if (err)
        return err;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
        buf[--n] = '\0';
    return n > 0 ? 0 : -EIO;
}

uint64_t fl__boot_tag(const char boot_id[FL__BOOT_ID_SIZE])
{
    size_t n = strnlen(boot_id, FL__BOOT_ID_SIZE);
    uint64_t tag = fl__checksum(boot_id, n);
    return tag ? tag : 1; /* 0 means "not ready" in the region header */
}

int fl__read_timens_offset(int64_t *offset_ns)
{
    *offset_ns = 0;
    int fd = open("/proc/self/timens_offsets", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        /* No such file: a kernel without time namespaces (before 5.6, or
         * built without them), where every clock is the host's. */
        if (errno == ENOENT)
            return 0;
        return fl__fail(fl__neg_errno(), "cannot read /proc/self/timens_offsets: %s",
                        strerror(errno));
    }
    char text[256];
    ssize_t n = read(fd, text, sizeof text - 1);
    int err = n < 0 ? fl__neg_errno() : 0;
    close(fd);
    if (err)
        return fl__fail(err, "cannot read /proc/self/timens_offsets: %s", strerror(-err));
    text[n] = '\0';
    /* Lines "monotonic <seconds> <nanoseconds>" and "boottime ..."; only the
     * monotonic clock matters (leases are measured on it). */
    static const char name[] = "monotonic";
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strncmp(line, name, sizeof name - 1) == 0 && line[sizeof name - 1] == ' ') {
            char *end;
            errno = 0;
            long long sec = strtoll(line + sizeof name - 1, &end, 10);
            long long nsec = strtoll(end, &end, 10);
            if (errno || sec < -(1LL << 32) || sec > (1LL << 32) || nsec < 0 ||
                nsec >= (long long)FL__NS_PER_S)
                break;
            *offset_ns = sec * (long long)FL__NS_PER_S + nsec;
            return 0;
        }
        line = next;
    }
    return fl__fail(-EIO, "cannot parse /proc/self/timens_offsets: no monotonic offset");
}

uint64_t fl__process_start_time(pid_t pid)
{
    struct fl__proc_stat st;
    return fl__proc_stat_read(pid, &st) == 0 ? st.start_time : 0;
}
