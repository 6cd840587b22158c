/* SPDX-License-Identifier: MIT */
/*
 * supervisor_notify.c - fencelockd speaks the systemd notify protocol: READY=1 once
 * the region is ready, WATCHDOG=1 every half $WATCHDOG_USEC from its event
 * loop (systemd WatchdogSec=), and STOPPING=1 when SIGTERM stops it, before
 * its clean shutdown.  The test plays systemd: it binds the datagram socket
 * named by $NOTIFY_SOCKET and reads what arrives.
 *
 * Ordering without sleeps: the event loop sends the first WATCHDOG=1 on its
 * first turn, before it can read a signal, so "no WATCHDOG=1 between READY=1
 * and STOPPING=1" is a deterministic check that the watchdog is off.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

struct fake_systemd {
    int fd;
    char name[108];   /* what $NOTIFY_SOCKET says */
    pid_t daemon;
    uint64_t started_ns;
};

/* Bind the notify socket: a path, or an abstract name if abstract. */
static void fake_systemd_bind(struct fake_systemd *s, const char *tag, bool abstract)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    socklen_t len;
    if (abstract) {
        snprintf(s->name, sizeof s->name, "@fencelock-test-%d-%s", (int)getpid(), tag);
        memcpy(addr.sun_path + 1, s->name + 1, strlen(s->name) - 1);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(s->name));
    } else {
        snprintf(s->name, sizeof s->name, "%s/notify-%s", th_tmpdir(), tag);
        memcpy(addr.sun_path, s->name, strlen(s->name) + 1);
        len = sizeof addr;
    }
    s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(s->fd >= 0);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&addr, len), 0);
}

/* Start fencelockd on its own region with $NOTIFY_SOCKET and the given
 * watchdog variables (NULL: unset; "self" for WATCHDOG_PID: its own pid). */
static void fake_systemd_start(struct fake_systemd *s, const char *tag, const char *usec,
                               const char *wd_pid)
{
    char region[600], state[620], log[620];
    snprintf(region, sizeof region, "%s/region-%s", th_tmpdir(), tag);
    snprintf(state, sizeof state, "%s.state", region);
    snprintf(log, sizeof log, "%s.log", region);
    pid_t parent = getpid();
    s->started_ns = th_now_ns();
    s->daemon = fork();
    assert_true(s->daemon >= 0);
    if (s->daemon == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (lfd >= 0)
            dup2(lfd, 2);
        setenv("NOTIFY_SOCKET", s->name, 1);
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
        if (usec)
            setenv("WATCHDOG_USEC", usec, 1);
        if (wd_pid && strcmp(wd_pid, "self") == 0) {
            char me[32];
            snprintf(me, sizeof me, "%d", (int)getpid()); /* exec keeps the pid */
            setenv("WATCHDOG_PID", me, 1);
        } else if (wd_pid) {
            setenv("WATCHDOG_PID", wd_pid, 1);
        }
        execl(FENCELOCKD_PATH, FENCELOCKD_PATH, "--region", region, "--state", state,
              (char *)NULL);
        _exit(127);
    }
}

/* The next datagram within timeout_ms into buf; false on timeout. */
static bool fake_systemd_recv(struct fake_systemd *s, char *buf, size_t cap, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    for (;;) {
        uint64_t now = th_now_ns();
        if (now >= deadline)
            return false;
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        int rc = poll(&p, 1, (int)((deadline - now) / TH_MS) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return false;
        ssize_t n = recv(s->fd, buf, cap - 1, 0);
        if (n < 0)
            return false;
        buf[n] = '\0';
        return true;
    }
}

/* Read until READY=1; nothing else may come first. */
static void expect_ready(struct fake_systemd *s)
{
    char buf[256];
    assert_true(fake_systemd_recv(s, buf, sizeof buf, 20000));
    assert_string_equal(buf, "READY=1");
}

/* SIGTERM; read until STOPPING=1, counting the WATCHDOG=1 seen on the way;
 * then the daemon must exit 0 and send nothing more. */
static int stop_and_count_watchdogs(struct fake_systemd *s)
{
    assert_int_equal(kill(s->daemon, SIGTERM), 0);
    char buf[256];
    int watchdogs = 0;
    for (;;) {
        assert_true(fake_systemd_recv(s, buf, sizeof buf, 20000));
        if (strcmp(buf, "STOPPING=1") == 0)
            break;
        assert_string_equal(buf, "WATCHDOG=1");
        watchdogs++;
    }
    int st;
    assert_int_equal(waitpid(s->daemon, &st, 0), s->daemon);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* It has exited: everything it sent is queued; STOPPING=1 was the last. */
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    close(s->fd);
    if (s->name[0] != '@')
        unlink(s->name);
    return watchdogs;
}

/* WatchdogSec=600ms: WATCHDOG=1 every 300ms or so, never faster; then a
 * SIGTERM makes it say STOPPING=1 before it exits 0. */
/* I5: a hung supervisor (no WATCHDOG=1) is restarted by systemd, so death
 * detection does not stay off */
static void test_watchdog_then_stopping(void **state)
{
    (void)state;
    struct fake_systemd s;
    fake_systemd_bind(&s, "wd", false);
    fake_systemd_start(&s, "wd", "600000", "self");
    expect_ready(&s);
    char buf[256];
    for (int i = 0; i < 3; i++) {
        assert_true(fake_systemd_recv(&s, buf, sizeof buf, 20000));
        assert_string_equal(buf, "WATCHDOG=1");
    }
    /* Three sends at least 300ms apart take at least 600ms; they all happened
     * between the fork and now. */
    uint64_t elapsed = th_now_ns() - s.started_ns;
    assert_true(elapsed >= 600 * TH_MS);
    stop_and_count_watchdogs(&s);
}

/* No $WATCHDOG_USEC: READY=1, then STOPPING=1 and nothing else. */
static void test_no_watchdog_without_usec(void **state)
{
    (void)state;
    struct fake_systemd s;
    fake_systemd_bind(&s, "nowd", false);
    fake_systemd_start(&s, "nowd", NULL, NULL);
    expect_ready(&s);
    assert_int_equal(stop_and_count_watchdogs(&s), 0);
}

/* $WATCHDOG_PID names another process (fencelockd inherited the variables
 * from a watched parent): not its watchdog.  The abstract socket form
 * ('@name') of $NOTIFY_SOCKET works too. */
static void test_watchdog_pid_of_another(void **state)
{
    (void)state;
    struct fake_systemd s;
    fake_systemd_bind(&s, "otherpid", true);
    char other[32];
    snprintf(other, sizeof other, "%d", (int)getpid());
    fake_systemd_start(&s, "otherpid", "600000", other);
    expect_ready(&s);
    assert_int_equal(stop_and_count_watchdogs(&s), 0);
}

/* WATCHDOG_PID set to its own pid, abstract socket: the first WATCHDOG=1
 * comes on the loop's first turn, before the SIGTERM can be read. */
static void test_watchdog_first_at_once(void **state)
{
    (void)state;
    struct fake_systemd s;
    fake_systemd_bind(&s, "first", true);
    fake_systemd_start(&s, "first", "3600000000", "self"); /* an hour: one ping only */
    expect_ready(&s);
    assert_int_equal(stop_and_count_watchdogs(&s), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watchdog_then_stopping),
        cmocka_unit_test(test_no_watchdog_without_usec),
        cmocka_unit_test(test_watchdog_pid_of_another),
        cmocka_unit_test(test_watchdog_first_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
