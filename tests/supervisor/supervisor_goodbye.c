/* SPDX-License-Identifier: MIT */
/*
 * supervisor_goodbye.c - the supervisor tells a death from a clean close (I5, I9).
 *
 * A clean fl_close says goodbye on the registration socket before it shuts
 * it down; only then does fencelockd log the client "closed".  A killed
 * process is "died" even when the end of its connection reaches the
 * supervisor while the dying process is still in /proc (here: a zombie its
 * parent has not waited for yet), and so is one that exits without closing.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

enum { N = 50 };

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

/* Lines of the daemon's log that contain both a and b. */
static int log_count2(const char *a, const char *b)
{
    char path[600];
    snprintf(path, sizeof path, "%s.log", region);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, a) && strstr(line, b))
            n++;
    fclose(f);
    return n;
}

#define GONE "\"event\":\"client_gone\""
#define BY_DEATH "\"event\":\"lock_released_by_death\""
#define DIED "\"reason\":\"died\""
#define CLOSED "\"reason\":\"closed\""

enum how { CLOSE_CLEANLY, EXIT_WITHOUT_CLOSE };

/* A client: registers, holds a lock of its own, says ready, and on any line
 * closes cleanly or exits without closing. */
static int client_main(void *arg, int in, int out)
{
    enum how how = (enum how)(intptr_t)arg;
    fl_region *r;
    if (fl_open(region, &r) != 0 || !fl_region_registered(r)) {
        th_send(out, "unregistered");
        return 1;
    }
    char key[64];
    snprintf(key, sizeof key, "goodbye/%d", (int)getpid());
    fl_lease l;
    if (fl_acquire(r, key, 60 * TH_S, 0, &l) != 0) {
        th_send(out, "no lock");
        return 1;
    }
    th_send(out, "ready");
    char line[64];
    if (th_recv(in, line, sizeof line, 60000) != 0)
        return 1;
    if (how == CLOSE_CLEANLY)
        fl_close(r);
    return 0; /* and exit at once: the pidfd and the goodbye race */
}

static void start_clients(th_child *c, int n, enum how how)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(th_child_start(&c[i], client_main, (void *)(intptr_t)how), 0);
    }
    for (int i = 0; i < n; i++)
        th_expect(c[i].from_child, "ready", 20000);
}

static void expect_gone(int before, int n)
{
    if (!th_daemon_log_wait(&d, GONE, before + n, 20000))
        fail_msg("%d client_gone lines, want %d", th_daemon_log_count(&d, GONE) - before, n);
}

/* I5 */
/* Very killed client is logged as died, never as closed, although the
 * end of each connection arrives while its process is a zombie nobody has
 * waited for (still in /proc). */
static void test_killed_clients_died(void **state)
{
    (void)state;
    int gone = th_daemon_log_count(&d, GONE);
    int died = log_count2(GONE, DIED), closed = log_count2(GONE, CLOSED);
    int freed = log_count2(BY_DEATH, DIED);
    th_child c[N];
    start_clients(c, N, CLOSE_CLEANLY);
    for (int i = 0; i < N; i++)
        kill(c[i].pid, SIGKILL);
    expect_gone(gone, N);
    assert_int_equal(log_count2(GONE, DIED) - died, N);
    assert_int_equal(log_count2(GONE, CLOSED) - closed, 0);
    /* and each lock it held was released by death, as a death */
    assert_true(th_daemon_log_wait(&d, BY_DEATH, freed + N, 10000));
    assert_int_equal(log_count2(BY_DEATH, DIED) - freed, N);
    for (int i = 0; i < N; i++)
        th_child_wait(&c[i], 10000);
}

/* I5 */
/* Very client that closes cleanly is logged as closed, also when it
 * exits right after fl_close (its pidfd and its goodbye arrive together). */
static void test_closed_clients_closed(void **state)
{
    (void)state;
    int gone = th_daemon_log_count(&d, GONE);
    int died = log_count2(GONE, DIED), closed = log_count2(GONE, CLOSED);
    th_child c[N];
    start_clients(c, N, CLOSE_CLEANLY);
    for (int i = 0; i < N; i++)
        th_send(c[i].to_child, "close");
    expect_gone(gone, N);
    assert_int_equal(log_count2(GONE, CLOSED) - closed, N);
    assert_int_equal(log_count2(GONE, DIED) - died, 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(th_child_wait(&c[i], 10000), 0);
}

/* I5 */
/*  process that exits without fl_close did not close: it died (its
 * lock is released by death). */
static void test_exit_without_close_died(void **state)
{
    (void)state;
    enum { M = 10 };
    int gone = th_daemon_log_count(&d, GONE);
    int died = log_count2(GONE, DIED);
    th_child c[M];
    start_clients(c, M, EXIT_WITHOUT_CLOSE);
    for (int i = 0; i < M; i++)
        th_send(c[i].to_child, "exit");
    expect_gone(gone, M);
    assert_int_equal(log_count2(GONE, DIED) - died, M);
    for (int i = 0; i < M; i++)
        th_child_wait(&c[i], 10000);
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

/* I9 */
/* What a registered client sends is parsed (fl__goodbye_parse): a
 * malformed message or another client's goodbye is logged and ignored (the
 * client stays registered); only a goodbye with its own id ends it as
 * closed. */
static void test_bad_goodbyes(void **state)
{
    (void)state;
    int fd = connect_raw();
    struct fl__hello h = {.magic = FL__HELLO_MAGIC, .version = FL__PROTO_VERSION,
                          .pid = (uint32_t)getpid()};
    assert_int_equal(send(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    struct fl__reply rep;
    assert_int_equal(recv(fd, &rep, sizeof rep, 0), (ssize_t)sizeof rep);
    assert_int_equal(rep.status, 0);
    assert_true(rep.flags & FL__REPLY_TAKES_GOODBYE);

    int bad = th_daemon_log_count(&d, "\"event\":\"bad_message\"");
    int gone = th_daemon_log_count(&d, GONE);
    int closed = log_count2(GONE, CLOSED);
    assert_int_equal(send(fd, "abc", 3, 0), 3);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"bad_message\"", bad + 1, 5000));
    struct fl__goodbye g = {.magic = 0xdeadbeef, .client_id = rep.client_id};
    assert_int_equal(send(fd, &g, sizeof g, 0), (ssize_t)sizeof g);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"bad_message\"", bad + 2, 5000));
    g = (struct fl__goodbye){.magic = FL__GOODBYE_MAGIC, .reserved = 1,
                             .client_id = rep.client_id};
    assert_int_equal(send(fd, &g, sizeof g, 0), (ssize_t)sizeof g);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"bad_message\"", bad + 3, 5000));
    g = (struct fl__goodbye){.magic = FL__GOODBYE_MAGIC, .client_id = rep.client_id + 1000};
    assert_int_equal(send(fd, &g, sizeof g, 0), (ssize_t)sizeof g);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"bad_message\"", bad + 4, 5000));
    assert_true(th_daemon_log_count(&d, "message of 3 bytes") >= 1);
    assert_true(th_daemon_log_count(&d, "goodbye with magic") >= 1);
    assert_int_equal(th_daemon_log_count(&d, GONE), gone); /* still registered */

    g = (struct fl__goodbye){.magic = FL__GOODBYE_MAGIC, .client_id = rep.client_id};
    assert_int_equal(send(fd, &g, sizeof g, 0), (ssize_t)sizeof g);
    expect_gone(gone, 1);
    assert_int_equal(log_count2(GONE, CLOSED) - closed, 1);
    char end;
    assert_int_equal(recv(fd, &end, 1, 0), 0); /* and it hung up */
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_clients_died),
        cmocka_unit_test(test_closed_clients_closed),
        cmocka_unit_test(test_exit_without_close_died),
        cmocka_unit_test(test_bad_goodbyes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
