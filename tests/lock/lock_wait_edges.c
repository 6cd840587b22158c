/* SPDX-License-Identifier: MIT */
/*
 * lock_wait_edges.c - the early returns around a wait in fl_acquire: a wait
 * on a key this handle holds is -EDEADLK at once (not a self-takeover after
 * its own lease), while another handle's or process's hold is still waited
 * for; and a wait ended by an fl_cancel from another thread or a signal
 * handler, with -ECANCELED.  Real processes and a real fencelockd.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "harness.h"

static th_daemon daemon_;

static int setup(void **state)
{
    (void)state;
    return th_daemon_start(&daemon_, th_path("region"), NULL);
}

static int teardown(void **state)
{
    (void)state;
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

static uint32_t waiters_of(fl_region *r, const char *key)
{
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    for (uint32_t i = 0; i < ri.locks_used; i++) {
        fl_lock_info li;
        if (fl_lock_info_get(r, i, &li) == 0 && strcmp(li.key, key) == 0)
            return li.waiters;
    }
    return 0;
}

/* Until key has a sleeper (bounded: a failure fails, it does not hang). */
static void wait_for_sleeper(fl_region *r, const char *key)
{
    uint64_t end = th_now_ns() + 10 * TH_S;
    while (waiters_of(r, key) == 0) {
        if (th_now_ns() > end)
            fail_msg("nobody waits on %s", key);
        usleep(1000); /* polling a count; the deadline bounds a failure */
    }
}

/* I1, I4: a wait on one's own key returns -EDEADLK at once, consuming no
 * token and leaving the lease current; a try still says -EBUSY. */
static void test_own_key_is_edeadlk(void **state)
{
    (void)state;
    fl_region *r;
    assert_int_equal(fl_open(daemon_.region, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "own", 60 * TH_S, 0, &l), 0);
    uint64_t t0 = th_now_ns();
    fl_lease again;
    assert_int_equal(fl_acquire(r, "own", 60 * TH_S, FL_WAIT_FOREVER, &again), -EDEADLK);
    assert_int_equal(fl_acquire(r, "own", 60 * TH_S, 5 * (int64_t)TH_S, &again), -EDEADLK);
    assert_true(th_now_ns() - t0 < 2 * TH_S); /* at once, not after a lease */
    assert_int_equal(fl_acquire(r, "own", 60 * TH_S, 0, &again), -EBUSY);
    assert_int_equal(fl_check(r, &l), 0); /* still ours, not taken over */
    assert_int_equal(fl_release(r, &l), 0);
    /* Released: a wait acquires at once, with the next token. */
    assert_int_equal(fl_acquire(r, "own", 60 * TH_S, FL_WAIT_FOREVER, &again), 0);
    assert_int_equal(again.token, l.token + 1);
    assert_int_equal(fl_release(r, &again), 0);
    /* An expired own lease nobody took is taken over, as before. */
    assert_int_equal(fl_acquire(r, "own", 1 * TH_MS, 0, &l), 0);
    while (fl_check(r, &l) == 0)
        usleep(200);
    assert_int_equal(fl_acquire(r, "own", 60 * TH_S, FL_WAIT_FOREVER, &again), 0);
    assert_true(again.flags & FL_LEASE_EXPIRED);
    assert_int_equal(fl_release(r, &again), 0);
    fl_close(r);
}

struct waiter {
    fl_region *r;
    fl_cancel *c;
    const char *key;
    int rc;
    fl_lease l;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = fl_acquire_cancelable(w->r, w->key, 60 * TH_S, FL_WAIT_FOREVER, w->c, &w->l);
    return NULL;
}

/* I6: another handle of this process, another process, or another thread
 * sharing this handle, holding the key is waited for, never -EDEADLK, also
 * with stale entries from this handle's earlier holding. */
static void test_other_holder_still_waits(void **state)
{
    (void)state;
    fl_region *a, *b;
    assert_int_equal(fl_open(daemon_.region, &a), 0);
    assert_int_equal(fl_open(daemon_.region, &b), 0);
    fl_lease la, lb;
    assert_int_equal(fl_acquire(a, "other", 60 * TH_S, 0, &la), 0);
    assert_int_equal(fl_release(a, &la), 0);
    assert_int_equal(fl_acquire(b, "other", 200 * TH_MS, 0, &lb), 0);
    /* a waits for b's lease to run out (b never releases) and takes over. */
    assert_int_equal(fl_acquire(a, "other", 60 * TH_S, 10 * (int64_t)TH_S, &la), 0);
    assert_true(la.flags & FL_LEASE_EXPIRED);
    assert_int_equal(la.token, lb.token + 1);
    /* Another process holds: a waits until it releases. */
    assert_int_equal(fl_release(a, &la), 0);
    int go[2], held[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(held), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fl_region *c;
        fl_lease lc;
        char x;
        if (fl_open(daemon_.region, &c) != 0 || fl_acquire(c, "other", 60 * TH_S, 0, &lc) != 0)
            _exit(1);
        if (write(held[1], "h", 1) != 1 || read(go[0], &x, 1) != 1)
            _exit(2);
        _exit(fl_release(c, &lc) == 0 ? 0 : 3);
    }
    char x;
    assert_int_equal(read(held[0], &x, 1), 1);
    /* The wait runs on a thread; the child releases once it sleeps. */
    fl_cancel *never;
    assert_int_equal(fl_cancel_new(&never), 0);
    struct waiter w = {a, never, "other", 1, {0}};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    wait_for_sleeper(b, "other");
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, 0);
    assert_true(w.l.token > la.token);
    assert_int_equal(fl_release(a, &w.l), 0);
    /* Another thread sharing the handle waits for this thread's holding
     * (threads may share a handle and contend): no -EDEADLK. */
    fl_lease mine;
    assert_int_equal(fl_acquire(a, "other", 60 * TH_S, 0, &mine), 0);
    w = (struct waiter){a, never, "other", 1, {0}};
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    wait_for_sleeper(b, "other");
    assert_int_equal(fl_acquire(a, "other", 60 * TH_S, FL_WAIT_FOREVER, &la), -EDEADLK);
    assert_int_equal(fl_release(a, &mine), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, 0);
    assert_int_equal(w.l.token, mine.token + 1);
    assert_int_equal(fl_release(a, &w.l), 0);
    fl_cancel_free(never);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(st, 0);
    fl_close(a);
    fl_close(b);
}

/* I6: a wait forever ends with -ECANCELED when another thread triggers its
 * fl_cancel; nothing is held or consumed, and the key's other waiters go on
 * waiting (and get the key when it is released). */
static void test_cancel_from_thread(void **state)
{
    (void)state;
    fl_region *h, *r;
    assert_int_equal(fl_open(daemon_.region, &h), 0);
    assert_int_equal(fl_open(daemon_.region, &r), 0);
    fl_lease held;
    assert_int_equal(fl_acquire(h, "cancel", 60 * TH_S, 0, &held), 0);
    fl_cancel *c;
    assert_int_equal(fl_cancel_new(&c), 0);
    assert_int_equal(fl_cancel_is_triggered(c), 0);
    struct waiter w = {r, c, "cancel", 1, {0}};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    wait_for_sleeper(h, "cancel");
    fl_cancel_trigger(c);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, -ECANCELED);
    assert_int_equal(fl_check(h, &held), 0);
    /* Sticky: the next wait ends at once; a free key is still acquired. */
    assert_int_equal(fl_acquire_cancelable(r, "cancel", TH_S, FL_WAIT_FOREVER, c, &w.l),
                     -ECANCELED);
    assert_int_equal(fl_acquire_cancelable(r, "cancel-free", TH_S, FL_WAIT_FOREVER, c, &w.l), 0);
    assert_int_equal(fl_release(r, &w.l), 0);
    assert_int_equal(fl_acquire_cancelable(r, "cancel", TH_S, 0, NULL, &w.l), -EINVAL);
    /* Reset: a wait waits again, and gets the key on release. */
    fl_cancel_reset(c);
    w.rc = 1;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    wait_for_sleeper(h, "cancel");
    assert_int_equal(fl_release(h, &held), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, 0);
    assert_int_equal(w.l.token, held.token + 1); /* the cancelled wait consumed none */
    assert_int_equal(fl_release(r, &w.l), 0);
    fl_cancel_free(c);
    fl_close(r);
    fl_close(h);
}

static fl_cancel *signal_cancel_;
static void on_sigusr1(int sig)
{
    (void)sig;
    fl_cancel_trigger(signal_cancel_); /* async-signal-safe */
}

/* I6: a signal handler cancels the wait of the thread it interrupts. */
static void test_cancel_from_signal_handler(void **state)
{
    (void)state;
    fl_region *h, *r;
    assert_int_equal(fl_open(daemon_.region, &h), 0);
    assert_int_equal(fl_open(daemon_.region, &r), 0);
    fl_lease held;
    assert_int_equal(fl_acquire(h, "sig", 60 * TH_S, 0, &held), 0);
    assert_int_equal(fl_cancel_new(&signal_cancel_), 0);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    struct waiter w = {r, signal_cancel_, "sig", 1, {0}};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    wait_for_sleeper(h, "sig");
    assert_int_equal(pthread_kill(t, SIGUSR1), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, -ECANCELED);
    sigaction(SIGUSR1, &old, NULL);
    assert_int_equal(fl_release(h, &held), 0);
    fl_cancel_free(signal_cancel_);
    fl_close(r);
    fl_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_key_is_edeadlk),
        cmocka_unit_test(test_other_holder_still_waits),
        cmocka_unit_test(test_cancel_from_thread),
        cmocka_unit_test(test_cancel_from_signal_handler),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
