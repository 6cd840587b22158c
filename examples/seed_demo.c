/* SPDX-License-Identifier: MIT */
/*
 * seed_demo.c - the pause-across-expiry scenario, with two real processes.
 *
 *   1. A acquires the key and gets token t.
 *   2. A is stopped (SIGSTOP: a GC pause, swap, a stalled VM) before it writes.
 *   3. A's lease expires; B, waiting, takes the key over: token t+1.
 *   4. B commits its result to the fenced record.
 *   5. A is continued and, unaware, commits its stale result: rejected
 *      (-ESTALE), and its renew and release are rejected too.
 *   6. The record holds B's result.
 *
 * Usage: seed_demo [REGION]   (default: $FENCELOCK_REGION or the default path)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fencelock.h"

#define KEY "demo/render-job"
#define RECORD "demo/render-output"
#define LEASE_NS (500ull * 1000 * 1000)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t t0;

static void say(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%7.3f s] %-6s ", (double)(now_ns() - t0) / 1e9, who);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

/* One byte over a pipe orders the steps: no sleeps decide anything here. */
static void post(int fd) { char c = 1; if (write(fd, &c, 1) != 1) _exit(9); }
static void await(int fd) { char c; if (read(fd, &c, 1) != 1) _exit(9); }

static fl_region *open_region(const char *path, const char *who)
{
    fl_region *r;
    int err = fl_open(path, &r);
    if (err) {
        fprintf(stderr, "%s: cannot open region: %s (%s)\n", who, fl_strerror(err),
                fl_last_error());
        exit(3);
    }
    return r;
}

static int process_a(const char *path, int go, int done)
{
    fl_region *r = open_region(path, "A");
    fl_lease lease;
    int err = fl_acquire(r, KEY, LEASE_NS, FL_WAIT_FOREVER, &lease);
    if (err)
        return fprintf(stderr, "A: acquire: %s\n", fl_strerror(err)), 1;
    say("A", "acquired \"%s\": token %" PRIu64 ", lease 500 ms", KEY, lease.token);
    post(done);
    await(go); /* the parent stops us here, then lets us go on long after */
    say("A", "continued after the pause; commits its (stale) result");
    uint64_t accepted = 0;
    const char *mine = "frame rendered by A";
    err = fl_commit(r, &lease, RECORD, mine, strlen(mine), 0, &accepted);
    say("A", "commit with token %" PRIu64 " -> %s (%s); the record had accepted token %" PRIu64,
        lease.token, fl_err_name(err), fl_strerror(err), accepted);
    int renew = fl_renew(r, &lease, LEASE_NS);
    int rel = fl_release(r, &lease);
    say("A", "renew -> %s, release -> %s: A knows it lost the lock and stops", fl_err_name(renew),
        fl_err_name(rel));
    fl_close(r);
    return err == -ESTALE && renew == -ESTALE && rel == -ESTALE ? 0 : 1;
}

static int process_b(const char *path, int go, int done)
{
    fl_region *r = open_region(path, "B");
    await(go);
    say("B", "waits for \"%s\" (sleeps on a futex until A's lease ends)", KEY);
    fl_lease lease;
    int err = fl_acquire(r, KEY, 5ull * 1000 * 1000 * 1000, 10ll * 1000 * 1000 * 1000, &lease);
    if (err)
        return fprintf(stderr, "B: acquire: %s\n", fl_strerror(err)), 1;
    say("B", "took the key over: token %" PRIu64 "%s", lease.token,
        (lease.flags & FL_LEASE_EXPIRED) ? " (the previous holder's lease had expired)" : "");
    const char *mine = "frame rendered by B";
    uint64_t accepted = 0;
    err = fl_commit(r, &lease, RECORD, mine, strlen(mine), 0, &accepted);
    say("B", "commit with token %" PRIu64 " -> %s", lease.token, err ? fl_err_name(err) : "accepted");
    post(done);
    await(go); /* hold the lease while A wakes up */
    err = fl_release(r, &lease);
    say("B", "released token %" PRIu64 " -> %s", lease.token, err ? fl_err_name(err) : "ok");
    fl_close(r);
    return 0;
}

static pid_t spawn(int (*fn)(const char *, int, int), const char *path, int *go, int *done)
{
    int down[2], up[2];
    if (pipe(down) || pipe(up))
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(down[1]);
        close(up[0]);
        _exit(fn(path, down[0], up[1]));
    }
    close(down[0]);
    close(up[1]);
    *go = down[1];
    *done = up[0];
    return pid;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : NULL;
    if (path && (!strcmp(path, "-h") || !strcmp(path, "--help"))) {
        printf("Usage: seed_demo [REGION]\nRuns the pause-across-expiry scenario with two "
               "processes on a running fencelockd's region.\n");
        return 0;
    }
    t0 = now_ns();
    int a_go, a_done, b_go, b_done;
    pid_t a = spawn(process_a, path, &a_go, &a_done);
    await(a_done);
    kill(a, SIGSTOP);
    int st;
    waitpid(a, &st, WUNTRACED); /* returns once A is really stopped */
    say("demo", "A is stopped (SIGSTOP) before it writes: a GC pause, swap, a stalled VM");
    pid_t b = spawn(process_b, path, &b_go, &b_done);
    post(b_go);
    await(b_done);
    say("demo", "B committed; now A wakes up (SIGCONT), unaware that time passed");
    kill(a, SIGCONT);
    post(a_go);
    int sa, sb;
    waitpid(a, &sa, 0);
    post(b_go);
    waitpid(b, &sb, 0);

    fl_region *r = open_region(path, "demo");
    char buf[256];
    size_t len = 0;
    uint64_t fence = 0;
    int err = fl_read(r, RECORD, buf, sizeof buf - 1, &len, &fence);
    if (!err) {
        buf[len] = '\0';
        say("demo", "record \"%s\" holds \"%s\", written with token %" PRIu64, RECORD, buf, fence);
    }
    fl_close(r);
    bool ok = !err && WIFEXITED(sa) && WEXITSTATUS(sa) == 0 && WIFEXITED(sb) &&
              WEXITSTATUS(sb) == 0 && strstr(buf, "by B");
    say("demo", ok ? "the stale write was rejected; B's result survived"
                   : "UNEXPECTED OUTCOME: see above");
    return ok ? 0 : 1;
}
