/* SPDX-License-Identifier: MIT */
/*
 * supervisor_socket.c - malformed messages on the supervisor's socket (I9): each
 * gets a clear refusal and a log line naming what was wrong; the supervisor
 * keeps serving and nothing already held is disturbed.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

static th_daemon d;
static char region[512];

static int setup(void **state)
{
    (void)state;
    snprintf(region, sizeof region, "%s", th_path("region"));
    return th_daemon_start(&d, region, NULL);
}

static int teardown(void **state)
{
    (void)state;
    th_daemon_stop(&d, SIGTERM);
    return 0;
}

static int connect_raw(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char path[600];
    snprintf(path, sizeof path, "%s.sock", region);
    assert_true(strlen(path) < sizeof a.sun_path);
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Send bytes, expect a refusal with status want (or just a close when
 * want is 0), and a bad_message log line. */
static void expect_refusal(const void *msg, size_t n, int want, int logs_before)
{
    int fd = connect_raw();
    assert_int_equal(send(fd, msg, n, 0), (ssize_t)n);
    struct fl__reply rep;
    ssize_t got = recv(fd, &rep, sizeof rep, 0);
    if (want) {
        assert_int_equal(got, (ssize_t)sizeof rep);
        assert_int_equal(rep.magic, FL__REPLY_MAGIC);
        assert_int_equal(rep.status, want);
    }
    char end;
    assert_int_equal(recv(fd, &end, 1, 0), 0); /* then the supervisor hangs up */
    close(fd);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"bad_message\"", logs_before + 1, 5000));
}

/* Still serving: a real client registers and gets a lock. */
static void expect_serving(void)
{
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_region_registered(r), 1);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "still", TH_S, 0, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
}

/* I9 */
static void test_malformed_hellos(void **state)
{
    (void)state;
    fl_region *holder;
    assert_int_equal(fl_open(region, &holder), 0);
    fl_lease held;
    assert_int_equal(fl_acquire(holder, "held", 60 * TH_S, 0, &held), 0);

    int logs = th_daemon_log_count(&d, "\"event\":\"bad_message\"");
    expect_refusal("abc", 3, -EPROTO, logs++);
    struct fl__hello h = {.magic = 0xdeadbeef, .version = FL__PROTO_VERSION};
    expect_refusal(&h, sizeof h, -EPROTO, logs++);
    h = (struct fl__hello){.magic = FL__HELLO_MAGIC, .version = 99};
    expect_refusal(&h, sizeof h, -EPROTONOSUPPORT, logs++);
    h = (struct fl__hello){.magic = FL__HELLO_MAGIC, .version = FL__PROTO_VERSION,
                           .reserved = 7};
    expect_refusal(&h, sizeof h, -EPROTO, logs++);
    char big[200];
    memset(big, 0x5a, sizeof big);
    memcpy(big, &(struct fl__hello){.magic = FL__HELLO_MAGIC, .version = FL__PROTO_VERSION},
           sizeof h);
    expect_refusal(big, sizeof big, -EPROTO, logs++);
    assert_true(th_daemon_log_count(&d, "hello of 3 bytes") >= 1);
    assert_true(th_daemon_log_count(&d, "protocol version 99") >= 1);

    expect_serving();
    assert_int_equal(fl_check(holder, &held), 0); /* untouched */
    assert_int_equal(fl_release(holder, &held), 0);
    fl_close(holder);
}

/* I9: connections that never say hello, or vanish at once, cost nothing. */
static void test_silent_connections(void **state)
{
    (void)state;
    int fds[80];
    for (int i = 0; i < 80; i++)
        fds[i] = connect_raw();
    /* Past 64 waiting hellos the supervisor drops the oldest, and says so;
     * a real client still gets in while the silent ones stay connected. */
    assert_true(th_daemon_log_wait(&d, "connection_dropped", 16, 5000));
    expect_serving();
    for (int i = 0; i < 80; i++)
        close(fds[i]);
    expect_serving();
    for (int i = 0; i < 20; i++)
        close(connect_raw());
    expect_serving();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_hellos),
        cmocka_unit_test(test_silent_connections),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
