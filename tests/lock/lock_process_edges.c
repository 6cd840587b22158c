/* SPDX-License-Identifier: MIT */
/*
 * lock_process_edges.c - a handle used after fork (I12, I5), and processes
 * in other time namespaces sharing a region (I4, I11).
 *
 * Real fencelockd, real fork(), real time namespaces (unshare(CLONE_NEWTIME)
 * and /proc/self/timens_offsets: root and Linux 5.6+; skipped elsewhere).
 * Results come back over pipes; no sleeps order anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fencelock.h"
#include "harness.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define LEASE (60ull * TH_S)

/* Write "a b c ..." (ints) to fd. */
static void report(int fd, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (write(fd, line, (size_t)n) != n)
        _exit(100);
}

/* I12, I5: a child of fork() using its parent's handle is refused on every
 * entry point (-ECHILD); its fl_close unmaps only its own copy, so the
 * supervisor does not reap the living parent; the child opens its own. */
static void test_handle_used_after_fork(void **state)
{
    (void)state;
    const char *region = strdup(th_path("fork.region"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_region_registered(r), 1);
    fl_lease held;
    assert_int_equal(fl_acquire(r, "parent/key", LEASE, 0, &held), 0);
    assert_int_equal(fl_commit(r, &held, "parent/rec", "p", 1, 0, NULL), 0);

    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        fl_lease l;
        char buf[8];
        size_t len;
        uint64_t fence, acc;
        fl_region_info ri;
        fl_lock_info li;
        fl_lease copy = held;
        int rc[10];
        rc[0] = fl_acquire(r, "child/key", LEASE, 0, &l);
        rc[1] = fl_release(r, &copy);
        rc[2] = fl_renew(r, &copy, LEASE);
        rc[3] = fl_check(r, &copy);
        rc[4] = fl_commit(r, &copy, "parent/rec", "c", 1, 0, &acc);
        rc[5] = fl_read(r, "parent/rec", buf, sizeof buf, &len, &fence);
        rc[6] = fl_region_info_get(r, &ri);
        rc[7] = fl_lock_info_get(r, 0, &li);
        rc[8] = fl_region_registered(r);
        rc[9] = strstr(fl_last_error(), "another process") != NULL;
        fl_close(r); /* must not end the parent's registration */
        fl_region *mine;
        int orc = fl_open(region, &mine);
        int reg = orc == 0 ? fl_region_registered(mine) : -1;
        int arc = orc == 0 ? fl_acquire(mine, "child/key", LEASE, 0, &l) : -1;
        if (orc == 0)
            fl_close(mine);
        report(p[1], "%d %d %d %d %d %d %d %d %d %d %d %d %d\n", rc[0], rc[1], rc[2], rc[3],
               rc[4], rc[5], rc[6], rc[7], rc[8], rc[9], orc, reg, arc);
        _exit(0);
    }
    close(p[1]);
    char line[256];
    assert_int_equal(th_recv(p[0], line, sizeof line, 20000), 0);
    int rc[13];
    assert_int_equal(sscanf(line, "%d %d %d %d %d %d %d %d %d %d %d %d %d", &rc[0], &rc[1],
                            &rc[2], &rc[3], &rc[4], &rc[5], &rc[6], &rc[7], &rc[8], &rc[9],
                            &rc[10], &rc[11], &rc[12]),
                     13);
    for (int i = 0; i < 8; i++)
        if (rc[i] != -ECHILD)
            fail_msg("call %d in the child returned %s, want ECHILD (%s)", i,
                     fl_err_name(rc[i]), line);
    assert_int_equal(rc[8], 0);  /* not registered: the registration is the parent's */
    assert_int_equal(rc[9], 1);  /* fl_last_error says why */
    assert_int_equal(rc[10], 0); /* the child opens its own handle */
    assert_int_equal(rc[11], 1); /* ... registered as itself */
    assert_int_equal(rc[12], 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(p[0]);

    /* The child's own client came and went: one client_gone line, and it is
     * not the parent's.  Wait for it, then look at the parent. */
    assert_true(th_daemon_log_wait(&d, "\"event\":\"client_gone\"", 1, 10000));
    assert_int_equal(th_daemon_log_count(&d, "\"key\":\"parent/key\""), 0);
    assert_int_equal(fl_check(r, &held), 0); /* still ours: not reaped */
    assert_int_equal(fl_region_registered(r), 1);
    char buf[8];
    size_t len;
    uint64_t fence;
    assert_int_equal(fl_read(r, "parent/rec", buf, sizeof buf, &len, &fence), 0);
    assert_true(len == 1 && buf[0] == 'p' && fence == held.token);
    assert_int_equal(fl_renew(r, &held, LEASE), 0);
    assert_int_equal(fl_release(r, &held), 0);
    fl_close(r);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"client_gone\"", 2, 10000));
    th_daemon_stop(&d, SIGTERM);
    free((void *)region);
}

/* Run fn(arg, out) in a new time namespace whose CLOCK_MONOTONIC is shifted
 * by offset_s; returns fn's line in buf.  false if time namespaces are not
 * available here (not root, old kernel). */
typedef void (*timens_fn)(void *arg, int out);
static bool in_time_namespace(long offset_s, timens_fn fn, void *arg, char *buf, size_t cap,
                              pid_t *child)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        /* The namespace applies to children of the caller: unshare, set the
         * offset before anyone is inside, then fork into it. */
        if (unshare(CLONE_NEWTIME) != 0) {
            report(p[1], "unavailable unshare %d\n", errno);
            _exit(0);
        }
        int fd = open("/proc/self/timens_offsets", O_WRONLY);
        char off[64];
        int n = snprintf(off, sizeof off, "monotonic %ld 0\n", offset_s);
        if (fd < 0 || write(fd, off, (size_t)n) != n) {
            report(p[1], "unavailable offsets %d\n", errno);
            _exit(0);
        }
        close(fd);
        pid_t in = fork();
        if (in == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* ends with its parent, below */
            fn(arg, p[1]);
            _exit(0);
        }
        int st;
        waitpid(in, &st, 0);
        _exit(0);
    }
    close(p[1]);
    int got = th_recv(p[0], buf, cap, 30000);
    close(p[0]);
    *child = pid; /* the caller kills it (and so the namespace's process) */
    assert_int_equal(got, 0);
    return strncmp(buf, "unavailable", 11) != 0;
}

static void end_namespace(pid_t pid)
{
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
}

static uint64_t own_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* In a namespace a day ahead: the host's 60 s lease on "k" is still held
 * (before, it looked a day old and was taken over at once: two holders);
 * a lease taken here reports its deadline on this namespace's clock and is
 * seen from the host with the right time left. */
static void ahead_fn(void *arg, int out)
{
    const char *region = arg;
    fl_region *r;
    int orc = fl_open(region, &r);
    if (orc) {
        report(out, "open %d\n", orc);
        return;
    }
    fl_lease l, g;
    int krc = fl_acquire(r, "k", LEASE, 0, &l);
    uint64_t before = own_monotonic_ns();
    int grc = fl_acquire(r, "g", 10 * TH_S, 0, &g);
    long long left_ms = (long long)(g.deadline_ns - before) / 1000000;
    report(out, "ok %d %d %lld\n", krc, grc, left_ms);
    /* keep "g" held: the parent looks at it from the host */
    pause();
}

/* I4, I11: processes in time namespaces agree with the host on deadlines. */
static void test_time_namespace_ahead(void **state)
{
    (void)state;
    const char *region = strdup(th_path("timens.region"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease held;
    assert_int_equal(fl_acquire(r, "k", LEASE, 0, &held), 0);

    char line[256];
    pid_t ns;
    /* The process in the namespace pauses holding "g" until end_namespace. */
    bool available = in_time_namespace(86400, ahead_fn, (void *)region, line, sizeof line, &ns);
    if (!available) {
        end_namespace(ns);
        fl_close(r);
        th_daemon_stop(&d, SIGTERM);
        skip();
    }
    int krc = 1, grc = 1;
    long long left_ms = 0;
    if (sscanf(line, "ok %d %d %lld", &krc, &grc, &left_ms) != 3)
        fail_msg("in the namespace: %s", line);
    if (krc != -EBUSY)
        fail_msg("a process a day ahead took over a live 60 s lease: %s (%s)", fl_err_name(krc),
                 line);
    assert_int_equal(grc, 0);
    assert_true(left_ms > 8000 && left_ms <= 10000); /* its own clock: 10 s left */
    /* From the host: "g" is held with about 10 s left, not a day and 10 s. */
    fl_lock_info li;
    bool seen = false;
    for (uint32_t i = 0; fl_lock_info_get(r, i, &li) != -ERANGE; i++)
        if (strcmp(li.key, "g") == 0) {
            seen = true;
            assert_int_equal(li.state, FL_LOCK_HELD);
            assert_true(li.lease_left_ns > 5 * (int64_t)TH_S &&
                        li.lease_left_ns <= 10 * (int64_t)TH_S);
        }
    assert_true(seen);
    end_namespace(ns);
    assert_int_equal(fl_release(r, &held), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
    free((void *)region);
}

struct behind {
    const char *region;
    int64_t wait_ns;
};

/* In a namespace behind the host: wait for "n", held on the host with a
 * 300 ms lease; report how long the wait took on this clock. */
static void behind_fn(void *arg, int out)
{
    struct behind *b = arg;
    fl_region *r;
    int orc = fl_open(b->region, &r);
    if (orc) {
        report(out, "open %d\n", orc);
        return;
    }
    uint64_t t0 = own_monotonic_ns();
    fl_lease l;
    int rc = fl_acquire(r, "n", TH_S, b->wait_ns, &l);
    long long took_ms = (long long)(own_monotonic_ns() - t0) / 1000000;
    report(out, "ok %d %lld %u\n", rc, took_ms, l.flags);
    if (rc == 0)
        fl_release(r, &l);
    fl_close(r);
}

/* I4: a namespace behind the host read the host's deadlines as far in its
 * future and waited that much too long for an expired lease. */
static void test_time_namespace_behind(void **state)
{
    (void)state;
    /* The offset must keep the namespace's clock positive: half the uptime,
     * at most two minutes; too young a machine to tell the difference. */
    struct timespec up;
    clock_gettime(CLOCK_MONOTONIC, &up);
    long offset = up.tv_sec / 2 > 120 ? 120 : up.tv_sec / 2;
    if (offset < 20)
        skip();
    const char *region = strdup(th_path("behind.region"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease held;
    assert_int_equal(fl_acquire(r, "n", 300 * TH_MS, 0, &held), 0);
    /* waits at most offset/2: before, it would have slept `offset` more */
    struct behind b = {region, (int64_t)offset / 2 * (int64_t)TH_S};
    char line[256];
    pid_t ns;
    bool available = in_time_namespace(-offset, behind_fn, &b, line, sizeof line, &ns);
    end_namespace(ns);
    if (!available) {
        fl_close(r);
        th_daemon_stop(&d, SIGTERM);
        skip();
    }
    int rc = 1;
    long long took_ms = 0;
    unsigned flags = 0;
    if (sscanf(line, "ok %d %lld %u", &rc, &took_ms, &flags) != 3)
        fail_msg("in the namespace: %s", line);
    if (rc != 0)
        fail_msg("behind by %ld s: waited %lld ms and got %s, want the expired lease", offset,
                 took_ms, fl_err_name(rc));
    assert_true(flags & FL_LEASE_EXPIRED);
    fl_close(r); /* our lease was taken over: nothing to release */
    th_daemon_stop(&d, SIGTERM);
    free((void *)region);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handle_used_after_fork),
        cmocka_unit_test(test_time_namespace_ahead),
        cmocka_unit_test(test_time_namespace_behind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
