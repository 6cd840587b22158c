/* SPDX-License-Identifier: MIT */
/*
 * keepalive.c - leases kept renewed by the library's background thread, and
 * their loss reported through the fd, the callback and the status.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "harness.h"

static th_daemon daemon_;
static char region[512];

static int setup(void **state)
{
    (void)state;
    snprintf(region, sizeof region, "%s", th_path("region"));
    return th_daemon_start(&daemon_, region, NULL);
}

static int teardown(void **state)
{
    (void)state;
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A 500 ms lease outlives four lease lengths while kept alive (renewed
 * every ~170 ms: generous on a loaded 2-core machine). */
static void test_kept_lease_survives(void **state)
{
    (void)state;
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "kept", 500 * TH_MS, 0, &l), 0);
    fl_keepalive *k;
    assert_int_equal(fl_keepalive_start(r, &l, 500 * TH_MS, NULL, NULL, &k), 0);
    uint64_t end = th_now_ns() + 2 * TH_S;
    while (th_now_ns() < end) {
        /* the point is that time passes; the lease must stay current */
        assert_int_equal(fl_check(r, &l), 0);
        sleep_ms(20);
    }
    fl_lease now;
    assert_int_equal(fl_keepalive_stop(k, &now), 0);
    assert_true(now.deadline_ns > l.deadline_ns);
    assert_int_equal(fl_release(r, &now), 0);
    fl_close(r);
}

/* Atomics: written on the keepalive thread, read after the fd wakes us (an
 * eventfd orders them, but sanitizers cannot see that). */
struct lost_note {
    _Atomic int calls, err;
};

static void on_lost(void *arg, const fl_lease *lease, int err)
{
    (void)lease;
    struct lost_note *n = arg;
    atomic_store(&n->err, err);
    atomic_fetch_add(&n->calls, 1);
}

/* The child keeps a lease alive, is stopped past it, and on resuming learns
 * of the loss through the fd, the callback and the status (I4: no holder
 * goes on believing it holds). */
static int keeper_child(void *arg, int in, int out)
{
    (void)arg;
    fl_region *r;
    if (fl_open(region, &r) != 0)
        return 1;
    fl_lease l;
    if (fl_acquire(r, "paused", 300 * TH_MS, 0, &l) != 0)
        return 2;
    struct lost_note note = {0};
    fl_keepalive *k;
    if (fl_keepalive_start(r, &l, 300 * TH_MS, on_lost, &note, &k) != 0)
        return 3;
    char line[64];
    snprintf(line, sizeof line, "holding %llu", (unsigned long long)l.token);
    th_send(out, line);
    struct pollfd p = {.fd = fl_keepalive_fd(k), .events = POLLIN};
    int rc = poll(&p, 1, 30000);
    (void)in;
    int status = fl_keepalive_status(k, NULL);
    snprintf(line, sizeof line, "poll %d status %s calls %d err %s", rc, fl_err_name(status),
             atomic_load(&note.calls), fl_err_name(atomic_load(&note.err)));
    th_send(out, line);
    fl_lease last;
    fl_keepalive_stop(k, &last);
    fl_close(r);
    return 0;
}

/* I4 */
static void test_loss_reported_after_pause(void **state)
{
    (void)state;
    th_child c;
    assert_int_equal(th_child_start(&c, keeper_child, NULL), 0);
    char line[128];
    assert_int_equal(th_recv(c.from_child, line, sizeof line, 10000), 0);
    unsigned long long old = 0;
    assert_int_equal(sscanf(line, "holding %llu", &old), 1);
    kill(c.pid, SIGSTOP);
    assert_true(th_wait_stopped(c.pid, 5000));
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease l;
    /* Waits for the stopped child's lease to run out, then takes over. */
    assert_int_equal(fl_acquire(r, "paused", 10 * TH_S, 10 * (int64_t)TH_S, &l), 0);
    assert_true(l.token > old);
    assert_true(l.flags & FL_LEASE_EXPIRED);
    kill(c.pid, SIGCONT);
    assert_int_equal(th_recv(c.from_child, line, sizeof line, 10000), 0);
    assert_string_equal(line, "poll 1 status ESTALE calls 1 err ESTALE");
    assert_int_equal(fl_check(r, &l), 0); /* the loser's keeper did not disturb us */
    fl_release(r, &l);
    fl_close(r);
    int st = th_child_wait(&c, 10000);
    assert_int_equal(st, 0);
}

/* What the callback of the lost lease did, for the child to send. */
struct cb_ctx {
    fl_region *r;
    fl_keepalive *lost_k, *other_k;
    fl_lease other;
    int stop_other, release_other, stop_self;
    int done_fd;
};

/* Issue 26: on_lost stops another keepalive and releases its lease, then
 * stops its own.  Inside the keeper's RCU read section the first stop waited
 * for a grace period that waited for the keeper: every renewal stopped. */
static void on_lost_releasing(void *arg, const fl_lease *lease, int err)
{
    (void)lease;
    (void)err;
    struct cb_ctx *c = arg;
    c->stop_other = fl_keepalive_stop(c->other_k, &c->other);
    c->release_other = fl_release(c->r, &c->other);
    c->stop_self = fl_keepalive_stop(c->lost_k, NULL);
    if (write(c->done_fd, "x", 1) != 1)
        abort();
}

static int wait_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms);
}

static int callback_child(void *arg, int in, int out)
{
    (void)arg;
    (void)in;
    int done[2];
    fl_region *r;
    if (pipe(done) != 0 || fl_open(region, &r) != 0)
        return 1;
    struct cb_ctx c = {.r = r, .done_fd = done[1]};
    fl_lease lost, still;
    fl_keepalive *still_k;
    if (fl_acquire(r, "cb-lost", 300 * TH_MS, 0, &lost) != 0 ||
        fl_acquire(r, "cb-other", 10 * TH_S, 0, &c.other) != 0 ||
        fl_acquire(r, "cb-still", 3 * TH_S, 0, &still) != 0)
        return 2;
    /* other and still: long enough to outlive the pause; lost: not */
    if (fl_keepalive_start(r, &c.other, 10 * TH_S, NULL, NULL, &c.other_k) != 0 ||
        fl_keepalive_start(r, &still, 3 * TH_S, NULL, NULL, &still_k) != 0 ||
        fl_keepalive_start(r, &lost, 300 * TH_MS, on_lost_releasing, &c, &c.lost_k) != 0)
        return 3;
    char line[160];
    snprintf(line, sizeof line, "holding %llu", (unsigned long long)lost.token);
    th_send(out, line);
    if (wait_readable(done[0], 30000) != 1)
        return 4; /* the callback never finished: the keeper is wedged */
    /* The keeper goes on renewing the lease it still keeps. */
    int renewed = 0;
    for (uint64_t end = th_now_ns() + 20 * TH_S; !renewed && th_now_ns() < end;) {
        fl_lease now;
        if (fl_keepalive_status(still_k, &now) != 0)
            break;
        renewed = now.deadline_ns > still.deadline_ns;
        sleep_ms(20);
    }
    snprintf(line, sizeof line, "stop_other %s release_other %s stop_self %s renewed %d",
             fl_err_name(c.stop_other), fl_err_name(c.release_other), fl_err_name(c.stop_self),
             renewed);
    th_send(out, line);
    fl_lease last;
    if (fl_keepalive_stop(still_k, &last) != 0 || fl_release(r, &last) != 0)
        return 5;
    fl_close(r);
    return 0;
}

/* Starts child_fn, stops it past its 300 ms lease on key, takes key over
 * into *l through r, resumes it, and checks the line it reports then. */
static void run_paused_child(int (*child_fn)(void *, int, int), const char *key,
                             const char *expect, fl_region *r, th_child *c, fl_lease *l)
{
    assert_int_equal(th_child_start(c, child_fn, NULL), 0);
    char line[160];
    assert_int_equal(th_recv(c->from_child, line, sizeof line, 10000), 0);
    unsigned long long old = 0;
    assert_int_equal(sscanf(line, "holding %llu", &old), 1);
    kill(c->pid, SIGSTOP);
    assert_true(th_wait_stopped(c->pid, 5000));
    assert_int_equal(fl_acquire(r, key, 10 * TH_S, 10 * (int64_t)TH_S, l), 0);
    assert_true(l->token > old);
    kill(c->pid, SIGCONT);
    assert_int_equal(th_recv(c->from_child, line, sizeof line, 60000), 0);
    assert_string_equal(line, expect);
}

/* I4: a callback that releases another lease neither wedges the keeper nor
 * hides a loss; the released key is free at once. */
static void test_callback_releases_other(void **state)
{
    (void)state;
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    th_child c;
    fl_lease l;
    run_paused_child(callback_child, "cb-lost",
                     "stop_other OK release_other OK stop_self ESTALE renewed 1", r, &c, &l);
    fl_lease other;
    assert_int_equal(fl_acquire(r, "cb-other", TH_S, 0, &other), 0);
    assert_int_equal(fl_release(r, &other), 0);
    assert_int_equal(th_child_wait(&c, 30000), 0);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
}

struct close_ctx {
    fl_region *r;
    int done_fd;
};

static void on_lost_closing(void *arg, const fl_lease *lease, int err)
{
    (void)lease;
    (void)err;
    struct close_ctx *c = arg;
    fl_close(c->r); /* its keepalive still kept: freed with the keeper */
    if (write(c->done_fd, "x", 1) != 1)
        abort();
}

static int closing_child(void *arg, int in, int out)
{
    (void)arg;
    (void)in;
    int done[2];
    fl_region *r;
    if (pipe(done) != 0 || fl_open(region, &r) != 0)
        return 1;
    struct close_ctx c = {.r = r, .done_fd = done[1]};
    fl_lease l;
    fl_keepalive *k;
    if (fl_acquire(r, "cb-close", 300 * TH_MS, 0, &l) != 0 ||
        fl_keepalive_start(r, &l, 300 * TH_MS, on_lost_closing, &c, &k) != 0)
        return 2;
    char line[64];
    snprintf(line, sizeof line, "holding %llu", (unsigned long long)l.token);
    th_send(out, line);
    if (wait_readable(done[0], 30000) != 1)
        return 3;
    th_send(out, "closed");
    return 0;
}

/* fl_close() from on_lost: the keeper cannot join itself; it finishes the
 * callback and frees itself (the sanitizer builds check nothing is touched
 * after the close and nothing leaks). */
static void test_callback_closes_region(void **state)
{
    (void)state;
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    th_child c;
    fl_lease l;
    run_paused_child(closing_child, "cb-close", "closed", r, &c, &l);
    assert_int_equal(th_child_wait(&c, 30000), 0);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
}

struct churn {
    fl_region *r;
    int id;
    int failures;
    int saved; /* pauses longer than the lease that the keeper bridged */
};

/* The churn's lease, and the pause that outlasts it: long enough that a
 * keeper thread starved by a loaded machine (load 10 on 2 CPUs) still
 * renews in time (it renews at a third of the lease). */
#define CHURN_LEASE_NS (2 * TH_S)
#define CHURN_PAUSE_MS 2500

static void *churn_thread(void *arg)
{
    struct churn *c = arg;
    for (int i = 0; i < 200; i++) {
        char key[32];
        snprintf(key, sizeof key, "churn-%d-%d", c->id, i % 4);
        fl_lease l;
        if (fl_acquire(c->r, key, CHURN_LEASE_NS, 0, &l) != 0) {
            c->failures++;
            continue;
        }
        fl_keepalive *k;
        if (fl_keepalive_start(c->r, &l, CHURN_LEASE_NS, NULL, NULL, &k) != 0) {
            c->failures++;
            continue;
        }
        bool paused = i == 100;
        if (paused)
            sleep_ms(CHURN_PAUSE_MS); /* longer than the lease: only the keeper saves it */
        fl_lease now;
        if (fl_keepalive_stop(k, &now) != 0 || fl_release(c->r, &now) != 0)
            c->failures++;
        else if (paused && now.deadline_ns > l.deadline_ns)
            c->saved++; /* renewed past the deadline it started with */
    }
    return NULL;
}

/* Threads add and remove kept leases while the keeper walks the list (RCU). */
static void test_threads_churn(void **state)
{
    (void)state;
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    pthread_t t[4];
    struct churn c[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (struct churn){r, i, 0, 0};
        pthread_create(&t[i], NULL, churn_thread, &c[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(c[i].failures, 0);
        assert_int_equal(c[i].saved, 1); /* the pause at i = 100 */
    }
    fl_close(r);
}

/* I9 */
static void test_bad_arguments(void **state)
{
    (void)state;
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "args", TH_S, 0, &l), 0);
    fl_keepalive *k;
    assert_int_equal(fl_keepalive_start(NULL, &l, TH_S, NULL, NULL, &k), -EINVAL);
    assert_int_equal(fl_keepalive_start(r, &l, 10, NULL, NULL, &k), -EINVAL);
    assert_int_equal(fl_release(r, &l), 0);
    assert_int_equal(fl_keepalive_start(r, &l, TH_S, NULL, NULL, &k), -ESTALE);
    assert_int_equal(fl_keepalive_fd(NULL), -EINVAL);
    fl_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_lease_survives),
        cmocka_unit_test(test_loss_reported_after_pause),
        cmocka_unit_test(test_callback_releases_other),
        cmocka_unit_test(test_callback_closes_region),
        cmocka_unit_test(test_threads_churn),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
