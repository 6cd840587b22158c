/* SPDX-License-Identifier: MIT */
/*
 * notify.c - the systemd notify protocol: one datagram to $NOTIFY_SOCKET
 * (a path, or an abstract name when it starts with '@').
 *
 * fencelockd says READY=1 once the region is ready (main.c), STOPPING=1 when
 * a signal asks it to stop, and, when the unit has WatchdogSec= (systemd then
 * sets $WATCHDOG_USEC, and $WATCHDOG_PID to the pid it watches), WATCHDOG=1
 * every half interval from its event loop: a loop that stops turning (a
 * deadlock, a hang on a dead disk) is killed and restarted by systemd.
 * Without $NOTIFY_SOCKET all of this is a no-op.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fencelockd.h"

int notify_systemd(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    int err = 0;
    if (len >= sizeof addr.sun_path) {
        err = -ENAMETOOLONG;
    } else {
        memcpy(addr.sun_path, path, len);
        if (addr.sun_path[0] == '@')
            addr.sun_path[0] = '\0';
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr,
                             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
            err = neg_errno();
        if (fd >= 0)
            close(fd);
    }
    if (err) {
        /* systemd then sees no READY=1 (and kills us at its start timeout)
         * or no WATCHDOG=1: the log says why */
        log_begin("warn", "notify_failed");
        log_str("state", state);
        log_str("notify_socket", path);
        log_str("message", strerror(-err));
        log_end();
    }
    return err;
}

/* A positive decimal from the environment, or 0 when unset or malformed. */
static uint64_t env_u64(const char *name)
{
    const char *s = getenv(name);
    if (!s || *s < '0' || *s > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    return errno || *end ? 0 : (uint64_t)v;
}

/* Plain CLOCK_MONOTONIC: the watchdog is this process's own business, it is
 * compared with no other process's clock. */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0; /* cannot fail on Linux; 0 only sends the next one early */
    return (uint64_t)ts.tv_sec * FL__NS_PER_S + (uint64_t)ts.tv_nsec;
}

static struct {
    int state;         /* 0 not read yet, 1 off, 2 on */
    uint64_t period_ns; /* half of $WATCHDOG_USEC: systemd's advice */
    uint64_t next_ns;   /* when the next WATCHDOG=1 is due */
} wd;

int notify_watchdog(int timeout_ms)
{
    if (wd.state == 0) {
        uint64_t usec = env_u64("WATCHDOG_USEC");
        uint64_t pid = env_u64("WATCHDOG_PID");
        /* As sd_watchdog_enabled(): WATCHDOG_PID, when set, names the process
         * systemd watches; a child that inherited the variables is not it.
         * The upper bound keeps usec * 1000 in 64 bits (584 years). */
        bool on = usec > 0 && usec < UINT64_MAX / 1000 && (pid == 0 || pid == (uint64_t)getpid()) &&
                  getenv("NOTIFY_SOCKET");
        wd.state = on ? 2 : 1;
        wd.period_ns = usec * 1000 / 2;
        if (wd.period_ns < 1000000)
            wd.period_ns = 1000000; /* the event loop's resolution is a millisecond */
        wd.next_ns = 0;             /* the first one at once */
    }
    if (wd.state != 2)
        return timeout_ms;
    uint64_t now = mono_ns();
    if (now >= wd.next_ns) {
        (void)notify_systemd("WATCHDOG=1"); /* a failure is logged; the loop goes on */
        wd.next_ns = now + wd.period_ns;
    }
    uint64_t left_ms = (wd.next_ns - now + 999999) / 1000000;
    if (left_ms > INT_MAX)
        left_ms = INT_MAX;
    return timeout_ms < 0 || left_ms < (uint64_t)timeout_ms ? (int)left_ms : timeout_ms;
}
