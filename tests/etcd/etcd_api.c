/* SPDX-License-Identifier: MIT */
/*
 * etcd_api.c - the public API on a real one-member etcd cluster: every
 * call keeps its meaning and its documented errors (I13).  One member for
 * the whole file; each test works under its own prefix.
 *
 * Tries, waits, timeouts, -EDEADLK, wakeups on release, takeover of an
 * expired lease (FL_LEASE_EXPIRED) and of a closed handle's holding
 * (FL_LEASE_OWNER_DIED), cancellation, renew to the same and to another
 * length, fenced commits (-ESTALE with the accepted token, -EXDEV, strict,
 * -EMSGSIZE), fl_commit_token, reads (-ENOENT, -ENOBUFS), the 64-bit
 * pointer, read-only handles, inspection, keepalive, fork, and threads
 * sharing a handle.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cluster_harness.h"

static ec_cluster cluster;

static int setup(void **state)
{
    (void)state;
    ec_start(&cluster, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ec_stop_all(&cluster);
    return 0;
}

static const char *uri(const char *prefix)
{
    static char buf[1024];
    return ec_uri(&cluster, 0, prefix, buf, sizeof buf);
}

static fl_region *open_rw(const char *prefix)
{
    fl_region *r = NULL;
    int err = fl_open(uri(prefix), &r);
    if (err)
        fail_msg("fl_open(%s): %s", uri(prefix), fl_last_error());
    return r;
}

#define S(x) ((uint64_t)(x) * TH_S)
#define MS(x) ((uint64_t)(x) * TH_MS)

/* I1 I13 */
static void test_try_release_tokens(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-try");
    assert_int_equal(fl_region_registered(r), 0);
    assert_string_equal(fl_region_path(r), uri("api-try"));
    assert_string_equal(fl_region_backend(r), "etcd"); /* chosen by the scheme */
    fl_lease a, b;
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &a), 0);
    assert_true(a.token > 0 && a.token <= FL_TOKEN_MAX);
    assert_int_equal(a.token >> 40, 1); /* epoch 1: the first client made it */
    assert_int_equal(a.flags, 0);
    assert_true(a.handle != 0);
    assert_true(a.deadline_ns > th_now_ns() + S(4));
    assert_int_equal(fl_acquire(r, "k", S(5), 0, &b), -EBUSY);
    assert_non_null(strstr(fl_last_error(), "held"));
    assert_int_equal(fl_check(r, &a), 0);
    assert_int_equal(fl_release(r, &a), 0);
    assert_int_equal(fl_release(r, &a), -ESTALE); /* released before */
    assert_int_equal(fl_check(r, &a), -ESTALE);
    uint64_t last = a.token;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(fl_acquire(r, "k", S(5), 0, &b), 0);
        assert_true(b.token > last);
        assert_int_equal(b.flags, 0); /* released, not expired */
        last = b.token;
        assert_int_equal(fl_release(r, &b), 0);
    }
    /* Arguments */
    assert_int_equal(fl_acquire(r, "", S(1), 0, &b), -EINVAL);
    assert_int_equal(fl_acquire(r, "k", 0, 0, &b), -EINVAL);
    assert_int_equal(fl_acquire(r, "k", S(1), -5, &b), -EINVAL);
    assert_int_equal(fl_acquire(r, "k", S(1), 0, NULL), -EINVAL);
    assert_int_equal(fl_acquire(r, "k", UINT64_MAX, 0, &b), -EOVERFLOW);
    fl_lease forged = a;
    forged.slot = 999;
    assert_int_equal(fl_release(r, &forged), -EINVAL);
    assert_int_equal(fl_renew(r, &forged, S(1)), -EINVAL);
    assert_int_equal(fl_check(r, &forged), -EINVAL);
    forged = a;
    assert_int_equal(fl_renew(r, &forged, 0), -EINVAL);
    fl_close(r);
}

struct waiter {
    fl_region *r;
    const char *key;
    uint64_t lease_ns;
    int64_t timeout_ns;
    fl_cancel *cancel;
    fl_lease lease;
    int rc;
    uint64_t t_end;
    char why[512];
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = w->cancel ? fl_acquire_cancelable(w->r, w->key, w->lease_ns, w->timeout_ns,
                                              w->cancel, &w->lease)
                      : fl_acquire(w->r, w->key, w->lease_ns, w->timeout_ns, &w->lease);
    w->t_end = th_now_ns();
    snprintf(w->why, sizeof w->why, "%s", fl_last_error());
    return NULL;
}

/* I4 I13 */
static void test_wait_timeout_and_deadlock(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-wait"), *r2 = open_rw("api-wait");
    fl_lease a, b;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &a), 0);
    /* This thread waiting on its own holding: -EDEADLK at once. */
    uint64_t t0 = th_now_ns();
    assert_int_equal(fl_acquire(r, "k", S(1), S(5), &b), -EDEADLK);
    assert_true(th_now_ns() - t0 < S(2));
    /* Another handle waits, and the key stays held: -ETIMEDOUT. */
    t0 = th_now_ns();
    assert_int_equal(fl_acquire(r2, "k", S(1), MS(700), &b), -ETIMEDOUT);
    uint64_t took = th_now_ns() - t0;
    assert_true(took >= MS(700));
    assert_true(took < S(5));
    assert_int_equal(fl_release(r, &a), 0);
    fl_close(r2);
    fl_close(r);
}

/* I6 I7 I13 */
static void test_waiters_woken_by_release(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-wake");
    fl_lease a;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &a), 0);
    struct waiter w[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (struct waiter){.r = open_rw("api-wake"), .key = "k", .lease_ns = S(30),
                               .timeout_ns = FL_WAIT_FOREVER};
        assert_int_equal(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
    }
    /* They are asleep on their watches (no CPU): give them time to get there. */
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    uint64_t t_rel = th_now_ns();
    assert_int_equal(fl_release(r, &a), 0);
    /* One of them gets it within a round trip or two, not a slice later. */
    uint64_t last = a.token;
    for (int k = 0; k < 3; k++) {
        int got = -1;
        for (uint64_t deadline = th_now_ns() + S(20); got < 0 && th_now_ns() < deadline;) {
            for (int i = 0; i < 3; i++)
                if (w[i].t_end && w[i].rc == 0 && w[i].lease.token > last) {
                    got = i;
                    break;
                }
            if (got < 0)
                nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
        }
        if (got < 0)
            fail_msg("no waiter got the key after the release");
        if (k == 0)
            assert_true(w[got].t_end - t_rel < S(2));
        assert_int_equal(w[got].lease.flags, 0);
        last = w[got].lease.token;
        assert_int_equal(fl_release(w[got].r, &w[got].lease), 0);
        w[got].lease.token = 0; /* counted */
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].rc, 0);
        fl_close(w[i].r);
    }
    fl_close(r);
}

/* I1 I2 I4 I13 */
static void test_expired_takeover(void **state)
{
    (void)state;
    fl_region *ra = open_rw("api-exp"), *rb = open_rw("api-exp");
    fl_lease a, b;
    /* 1 ns rounds up to etcd's minimum TTL (whole seconds). */
    assert_int_equal(fl_acquire(ra, "job", 1, 0, &a), 0);
    assert_true(a.deadline_ns >= th_now_ns() + S(1) - MS(200));
    assert_int_equal(fl_commit(ra, &a, "out", "A", 1, 0, NULL), 0);
    /* B waits; A never renews: B takes the key over once etcd ends A's lease. */
    assert_int_equal(fl_acquire(rb, "job", S(30), S(20), &b), 0);
    uint64_t t_b = th_now_ns();
    assert_true(t_b >= a.deadline_ns); /* A's deadline was conservative */
    assert_true(b.token > a.token);
    assert_int_equal(b.flags, FL_LEASE_EXPIRED);
    uint64_t acc = 0;
    assert_int_equal(fl_commit(rb, &b, "out", "B", 1, 0, &acc), 0);
    assert_int_equal(acc, b.token);
    /* A wakes up and finds it all gone. */
    assert_int_equal(fl_check(ra, &a), -ESTALE);
    assert_int_equal(fl_renew(ra, &a, S(5)), -ESTALE);
    assert_int_equal(fl_commit(ra, &a, "out", "A2", 2, 0, &acc), -ESTALE);
    assert_int_equal(acc, b.token);
    assert_int_equal(fl_release(ra, &a), -ESTALE);
    char buf[8];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(ra, "out", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(len, 1);
    assert_int_equal(buf[0], 'B');
    assert_int_equal(fence, b.token);
    assert_int_equal(fl_release(rb, &b), 0);

    /* A lease that ran out and that nobody took over is released normally
     * (as on shared memory), and the next holder is told it was released. */
    fl_lease c, d;
    assert_int_equal(fl_acquire(ra, "solo", 1, 0, &c), 0);
    fl_region *ro = NULL;
    assert_int_equal(fl_open_readonly(uri("api-exp"), &ro), 0);
    bool gone = false;
    for (uint64_t end = th_now_ns() + S(15); !gone && th_now_ns() < end;) {
        fl_region_info info;
        assert_int_equal(fl_region_info_get(ro, &info), 0);
        for (uint32_t i = 0; i < info.locks_used; i++) {
            fl_lock_info li;
            if (fl_lock_info_get(ro, i, &li) == 0 && strcmp(li.key, "solo") == 0)
                gone = li.state == FL_LOCK_FREE; /* etcd deleted the key with its lease */
        }
        if (!gone)
            nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    }
    assert_true(gone);
    fl_close(ro);
    assert_int_equal(fl_release(ra, &c), 0);
    assert_int_equal(fl_release(ra, &c), -ESTALE);
    assert_int_equal(fl_acquire(rb, "solo", S(5), 0, &d), 0);
    assert_int_equal(d.flags, 0);
    assert_int_equal(fl_release(rb, &d), 0);
    fl_close(rb);
    fl_close(ra);
}

/* I5 I13 */
static void test_closed_holder(void **state)
{
    (void)state;
    fl_region *ra = open_rw("api-closed"), *rb = open_rw("api-closed");
    fl_lease a, b;
    assert_int_equal(fl_acquire(ra, "k", S(60), 0, &a), 0);
    fl_close(ra); /* abandons the holding, as a death would */
    assert_int_equal(fl_acquire(rb, "k", S(60), 0, &b), 0);
    assert_true(b.token > a.token);
    assert_int_equal(b.flags, FL_LEASE_OWNER_DIED);
    assert_int_equal(fl_release(rb, &b), 0);
    fl_close(rb);
}

static void *trigger_later(void *arg)
{
    nanosleep(&(struct timespec){0, 600 * 1000 * 1000}, NULL);
    fl_cancel_trigger(arg);
    return NULL;
}

/* I6 I13 */
static void test_cancel(void **state)
{
    (void)state;
    fl_region *ra = open_rw("api-cancel"), *rb = open_rw("api-cancel");
    fl_lease a, b;
    fl_cancel *c;
    assert_int_equal(fl_cancel_new(&c), 0);
    assert_int_equal(fl_acquire(ra, "k", S(60), 0, &a), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, trigger_later, c), 0);
    uint64_t t0 = th_now_ns();
    assert_int_equal(fl_acquire_cancelable(rb, "k", S(5), FL_WAIT_FOREVER, c, &b), -ECANCELED);
    uint64_t took = th_now_ns() - t0;
    pthread_join(t, NULL);
    assert_true(took >= MS(500) && took < S(3));
    /* Still triggered: the next wait ends at once; a free key is still taken. */
    assert_int_equal(fl_acquire_cancelable(rb, "k", S(5), S(10), c, &b), -ECANCELED);
    assert_int_equal(fl_acquire_cancelable(rb, "free", S(5), S(10), c, &b), 0);
    assert_int_equal(fl_release(rb, &b), 0);
    /* Reset: waits again, until the timeout. */
    fl_cancel_reset(c);
    assert_int_equal(fl_acquire_cancelable(rb, "k", S(5), MS(300), c, &b), -ETIMEDOUT);
    assert_int_equal(fl_acquire_cancelable(rb, "k", S(5), MS(300), NULL, &b), -EINVAL);
    assert_int_equal(fl_release(ra, &a), 0);
    fl_cancel_free(c);
    fl_close(rb);
    fl_close(ra);
}

/* I4 I13 */
static void test_renew(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-renew");
    fl_lease a, b;
    assert_int_equal(fl_acquire(r, "k", S(3), 0, &a), 0);
    uint64_t h = a.handle, d0 = a.deadline_ns;
    nanosleep(&(struct timespec){1, 0}, NULL);
    assert_int_equal(fl_renew(r, &a, S(3)), 0); /* same length: the same etcd lease */
    assert_int_equal(a.handle, h);
    assert_true(a.deadline_ns > d0);
    assert_int_equal(fl_renew(r, &a, S(20)), 0); /* another length: moved to a new lease */
    assert_true(a.handle != h);
    assert_true(a.deadline_ns > th_now_ns() + S(18));
    assert_int_equal(fl_check(r, &a), 0);
    /* The old lease is gone with nothing on it; the key lives on the new one. */
    nanosleep(&(struct timespec){4, 0}, NULL);
    assert_int_equal(fl_check(r, &a), 0);
    assert_int_equal(fl_acquire(r, "k", S(1), 0, &b), -EBUSY);
    /* A copy that lost its etcd lease id (0) is still renewed and released. */
    fl_lease copy = a;
    copy.handle = 0;
    assert_int_equal(fl_renew(r, &copy, S(20)), 0);
    assert_int_equal(fl_release(r, &copy), 0);
    assert_int_equal(fl_renew(r, &a, S(20)), -ESTALE);
    fl_close(r);
}

/* I2 I3 I8 I13 */
static void test_commit_read(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-commit");
    fl_lease a, b, o;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &a), 0);
    uint64_t acc = 0;
    char buf[64];
    size_t len = 99;
    uint64_t fence = 0;
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), -ENOENT);
    assert_int_equal(fl_commit(r, &a, "rec", "one", 3, 0, &acc), 0);
    assert_int_equal(acc, a.token);
    assert_int_equal(fl_commit(r, &a, "rec", "two", 3, 0, &acc), 0); /* T >= F */
    assert_int_equal(fl_commit(r, &a, "rec", "three", 5, FL_COMMIT_STRICT, &acc), -ESTALE);
    assert_int_equal(acc, a.token);
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "two", 3);
    assert_int_equal(fence, a.token);
    assert_int_equal(fl_read(r, "rec", buf, 2, &len, &fence), -ENOBUFS);
    assert_int_equal(len, 3);
    assert_int_equal(fl_read(r, "rec", NULL, 0, &len, &fence), -ENOBUFS);
    assert_int_equal(fl_read(r, "rec", NULL, 4, &len, &fence), -EINVAL);
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, NULL, &fence), -EINVAL);
    assert_int_equal(fl_release(r, &a), 0);
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &b), 0);
    assert_int_equal(fl_commit(r, &b, "rec", "new", 3, FL_COMMIT_STRICT, &acc), 0);
    assert_int_equal(fl_commit(r, &a, "rec", "old", 3, 0, &acc), -ESTALE); /* older token */
    assert_int_equal(acc, b.token);
    assert_non_null(strstr(fl_last_error(), "ownership lost"));
    /* Another key's lease: never compared, refused. */
    assert_int_equal(fl_acquire(r, "other", S(30), 0, &o), 0);
    assert_true(o.token > b.token);
    assert_int_equal(fl_commit(r, &o, "rec", "x", 1, 0, &acc), -EXDEV);
    /* Keys whose names extend or prefix each other stay apart. */
    fl_lease kk;
    assert_int_equal(fl_acquire(r, "kk", S(30), 0, &kk), 0);
    assert_int_equal(fl_commit(r, &kk, "rec", "x", 1, 0, &acc), -EXDEV);
    assert_int_equal(fl_commit(r, &b, "rec-kk", "x", 1, 0, &acc), 0);
    assert_int_equal(fl_commit(r, &kk, "rec-kk", "x", 1, 0, &acc), -EXDEV);
    /* Empty values, binary values. */
    assert_int_equal(fl_commit(r, &o, "empty", NULL, 0, 0, &acc), 0);
    assert_int_equal(fl_read(r, "empty", NULL, 0, &len, &fence), 0);
    assert_int_equal(len, 0);
    const unsigned char bin[] = {0, 1, 2, 0, 255, '\n', 0};
    assert_int_equal(fl_commit(r, &o, "bin", bin, sizeof bin, 0, &acc), 0);
    assert_int_equal(fl_read(r, "bin", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(len, sizeof bin);
    assert_memory_equal(buf, bin, sizeof bin);
    /* Arguments and sizes. */
    assert_int_equal(fl_commit(r, &o, "", "x", 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit(r, &o, "r", NULL, 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit(r, &o, "r", "x", 1, 0x80, &acc), -EINVAL);
    fl_region_info info;
    assert_int_equal(fl_region_info_get(r, &info), 0);
    assert_true(info.record_size >= 4096);
    char *big = calloc(1, (size_t)info.record_size + 1);
    assert_non_null(big);
    memset(big, 'b', info.record_size + 1);
    assert_int_equal(fl_commit(r, &o, "big", big, info.record_size + 1, 0, &acc), -EMSGSIZE);
    assert_int_equal(fl_commit(r, &o, "big", big, info.record_size, 0, &acc), 0);
    char *back = malloc(info.record_size);
    assert_non_null(back);
    assert_int_equal(fl_read(r, "big", back, info.record_size, &len, &fence), 0);
    assert_int_equal(len, info.record_size);
    assert_memory_equal(back, big, info.record_size);
    free(back);
    free(big);
    /* A token the key never issued. */
    fl_lease forged = o;
    forged.token = o.token + 1000;
    assert_int_equal(fl_commit(r, &forged, "r2", "x", 1, 0, &acc), -EINVAL);
    forged.token = 0;
    assert_int_equal(fl_commit(r, &forged, "r2", "x", 1, 0, &acc), -EINVAL);
    /* The 64-bit pointer. */
    assert_int_equal(fl_commit_u64(r, &o, "ptr", 0x0102030405060708ull, 0, &acc), 0);
    uint64_t v = 0;
    assert_int_equal(fl_read_u64(r, "ptr", &v, &fence), 0);
    assert_int_equal(v, 0x0102030405060708ull);
    assert_int_equal(fence, o.token);
    assert_int_equal(fl_read_u64(r, "rec", &v, &fence), -EPROTO); /* 3 bytes */
    fl_close(r);
}

/* I2 I8 I13 */
static void test_commit_token(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-ctok"), *r2 = open_rw("api-ctok");
    fl_lease a, b;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &a), 0);
    uint64_t acc = 0;
    /* Another handle, which never saw the key: it reads the key's newest token. */
    assert_int_equal(fl_commit_token(r2, "k", a.token, "rec", "t", 1, 0, &acc), 0);
    assert_int_equal(acc, a.token);
    assert_int_equal(fl_commit_token(r2, "k", a.token + 1, "rec", "t", 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit_token(r2, "k", 0, "rec", "t", 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit_token(r2, "never", 5, "rec", "t", 1, 0, &acc), -ENOENT);
    assert_int_equal(fl_release(r, &a), 0);
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &b), 0);
    assert_int_equal(fl_commit_token(r2, "k", b.token, "rec", "u", 1, 0, &acc), 0);
    assert_int_equal(fl_commit_token(r2, "k", a.token, "rec", "v", 1, 0, &acc), -ESTALE);
    assert_int_equal(acc, b.token);
    fl_lease o;
    assert_int_equal(fl_acquire(r, "o", S(30), 0, &o), 0);
    assert_int_equal(fl_commit_token(r2, "o", o.token, "rec", "w", 1, 0, &acc), -EXDEV);
    assert_int_equal(fl_release(r, &b), 0);
    assert_int_equal(fl_release(r, &o), 0);
    fl_close(r2);
    fl_close(r);
}

/* I9 I13 */
static void test_readonly_and_inspection(void **state)
{
    (void)state;
    fl_region *ro = NULL, *r = open_rw("api-ro");
    assert_int_equal(fl_open_readonly(uri("api-ro-empty"), &ro), 0);
    fl_region_info info;
    assert_int_equal(fl_region_info_get(ro, &info), 0);
    assert_int_equal(info.epoch, 0); /* a read-only handle creates nothing */
    assert_int_equal(info.locks_used, 0);
    fl_close(ro);

    fl_lease a, b;
    assert_int_equal(fl_acquire(r, "held", S(30), 0, &a), 0);
    assert_int_equal(fl_acquire(r, "released", S(30), 0, &b), 0);
    assert_int_equal(fl_commit(r, &b, "rec", "value", 5, 0, NULL), 0);
    assert_int_equal(fl_release(r, &b), 0);
    assert_int_equal(fl_open_readonly(uri("api-ro"), &ro), 0);
    assert_int_equal(fl_acquire(ro, "x", S(1), 0, &b), -EINVAL);
    assert_int_equal(fl_commit(ro, &a, "rec", "x", 1, 0, NULL), -EINVAL);
    assert_int_equal(fl_commit_token(ro, "held", a.token, "rec", "x", 1, 0, NULL), -EINVAL);
    char buf[16];
    size_t len;
    uint64_t fence;
    assert_int_equal(fl_read(ro, "rec", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(fence, b.token);
    assert_int_equal(fl_region_info_get(ro, &info), 0);
    assert_int_equal(info.epoch, 1);
    assert_int_equal(info.locks_used, 2);
    assert_int_equal(info.records_used, 1);
    assert_true(info.token_floor > b.token);
    assert_int_equal(info.ready, 1);
    assert_int_equal(info.client_capacity, 0);
    fl_lock_info li;
    bool seen_held = false, seen_released = false;
    for (uint32_t i = 0; i < info.locks_used; i++) {
        assert_int_equal(fl_lock_info_get(ro, i, &li), 0);
        if (strcmp(li.key, "held") == 0) {
            seen_held = true;
            assert_int_equal(li.state, FL_LOCK_HELD);
            assert_int_equal(li.token, a.token);
            assert_int_equal(li.holder_pid, (uint32_t)getpid());
            assert_true(li.lease_left_ns > 0);
        } else if (strcmp(li.key, "released") == 0) {
            seen_released = true;
            assert_int_equal(li.state, FL_LOCK_FREE);
            assert_int_equal(li.token, b.token);
            assert_int_equal(li.last_release, 0);
        }
    }
    assert_true(seen_held && seen_released);
    assert_int_equal(fl_lock_info_get(ro, info.locks_used, &li), -ERANGE);
    fl_record_info ri;
    assert_int_equal(fl_record_info_get(ro, 0, &ri), 0);
    assert_string_equal(ri.name, "rec");
    assert_string_equal(ri.bound_key, "released");
    assert_int_equal(ri.accepted_token, b.token);
    assert_int_equal(ri.size, 5);
    assert_int_equal(ri.version, 1);
    assert_int_equal(fl_record_info_get(ro, 1, &ri), -ERANGE);
    fl_client_info ci;
    assert_int_equal(fl_client_info_get(ro, 1, &ci), -ERANGE);
    fl_unregistered_info ui;
    assert_int_equal(fl_unregistered_info_get(ro, 0, &ui), -ENOENT);
    assert_int_equal(fl_unregistered_info_get(ro, FL_UNREGISTERED_MAX, &ui), -ERANGE);
    fl_close(ro);
    assert_int_equal(fl_release(r, &a), 0);
    fl_close(r);
}

static void on_lost(void *arg, const fl_lease *lease, int err)
{
    (void)lease;
    *(int *)arg = err;
}

/* I4 I13 */
static void test_keepalive(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-keep"), *r2 = open_rw("api-keep");
    fl_lease a, b;
    assert_int_equal(fl_acquire(r, "k", S(2), 0, &a), 0);
    fl_keepalive *k;
    int lost = 0;
    /* Kept at 3 s: the first renewal moves the key to a 3 s etcd lease. */
    assert_int_equal(fl_keepalive_start(r, &a, S(3), on_lost, &lost, &k), 0);
    nanosleep(&(struct timespec){7, 0}, NULL); /* more than two leases */
    assert_int_equal(fl_keepalive_status(k, &b), 0);
    assert_int_equal(lost, 0);
    assert_int_equal(b.token, a.token);
    assert_true(b.deadline_ns > th_now_ns());
    assert_int_equal(fl_check(r, &b), 0);
    assert_int_equal(fl_acquire(r2, "k", S(1), 0, &b), -EBUSY);
    assert_int_equal(fl_keepalive_stop(k, &b), 0);
    assert_int_equal(fl_release(r, &b), 0);
    fl_close(r2);
    fl_close(r);
}

/* I12 */
static void test_fork(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-fork");
    fl_lease a;
    assert_int_equal(fl_acquire(r, "k", S(30), 0, &a), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fl_lease b;
        int ok = fl_acquire(r, "x", S(1), 0, &b) == -ECHILD &&
                 fl_release(r, &a) == -ECHILD && fl_commit(r, &a, "r", "x", 1, 0, NULL) == -ECHILD;
        fl_close(r); /* only the child's copy */
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(fl_check(r, &a), 0); /* the parent's holding is untouched */
    assert_int_equal(fl_release(r, &a), 0);
    fl_close(r);
}

struct worker {
    fl_region *r;
    int rounds;
    int rc;
    uint64_t tokens[64];
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < w->rounds && !w->rc; i++) {
        fl_lease l;
        int rc = fl_acquire(w->r, "shared", S(30), S(60), &l);
        if (!rc)
            rc = fl_commit(w->r, &l, "counter", &l.token, sizeof l.token, FL_COMMIT_STRICT, NULL);
        if (!rc)
            rc = fl_release(w->r, &l);
        w->tokens[i] = l.token;
        w->rc = rc;
    }
    return NULL;
}

/* I1 I2 I13 */
static void test_threads(void **state)
{
    (void)state;
    fl_region *shared = open_rw("api-threads"), *own = open_rw("api-threads");
    struct worker w[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.r = i < 3 ? shared : own, .rounds = 10};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, 0);
    }
    /* Every strict commit was accepted: each holder's token exceeded the
     * last one committed, so tokens followed the holdings' order. */
    for (int i = 0; i < 4; i++)
        for (int j = 1; j < 10; j++)
            assert_true(w[i].tokens[j] > w[i].tokens[j - 1]);
    fl_close(own);
    fl_close(shared);
}

/* The etcd lease of a released holding carries nothing and goes back to
 * the handle's pool: the next acquisition of the same TTL reuses it (one
 * request instead of a grant and a Txn), and fl_close revokes what is
 * pooled (tooling: resources, not an invariant). */
static bool lease_gone(uint64_t id)
{
    char body[64], out[1024];
    snprintf(body, sizeof body, "{\"ID\":\"%" PRIu64 "\"}", id);
    if (ec_post(&cluster, 0, "/v3/lease/timetolive", body, out, sizeof out) != 200)
        return false;
    /* a lease etcd does not know answers TTL -1 */
    return strstr(out, "\"TTL\":\"-1\"") != NULL;
}

static void test_release_pools_lease(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-pool");
    fl_lease a, b, c;
    assert_int_equal(fl_acquire(r, "k", S(60), 0, &a), 0);
    assert_true(a.handle != 0);
    assert_false(lease_gone(a.handle));
    assert_int_equal(fl_release(r, &a), 0);
    assert_false(lease_gone(a.handle)); /* pooled, alive */
    /* the same TTL reuses it, on another key too */
    assert_int_equal(fl_acquire(r, "k2", S(60), 0, &b), 0);
    assert_int_equal(b.handle, a.handle);
    assert_true(b.token > a.token);
    /* a second holding at once needs a lease of its own */
    assert_int_equal(fl_acquire(r, "k", S(60), 0, &c), 0);
    assert_true(c.handle != b.handle);
    assert_int_equal(fl_release(r, &b), 0);
    assert_int_equal(fl_release(r, &c), 0);
    /* closed: what is pooled is revoked before fl_close returns */
    fl_close(r);
    assert_true(lease_gone(b.handle));
    assert_true(lease_gone(c.handle));
}

/* I1 I13: key handles on etcd: resolved once, the same lock and token
 * sequence as by name; a handle from another region handle is refused. */
static void test_key_handle(void **state)
{
    (void)state;
    fl_region *r = open_rw("api-keyh"), *r2 = open_rw("api-keyh");
    fl_key k;
    assert_int_equal(fl_key_resolve(r, "kh", &k), 0);
    fl_lease a, b;
    assert_int_equal(fl_acquire_key(r, &k, S(5), 0, &a), 0);
    assert_int_equal(fl_acquire(r2, "kh", S(5), 0, &b), -EBUSY);
    assert_int_equal(fl_release(r, &a), 0);
    assert_int_equal(fl_acquire(r2, "kh", S(5), 0, &b), 0);
    assert_true(b.token > a.token);
    assert_int_equal(fl_release(r2, &b), 0);
    fl_lease c;
    assert_int_equal(fl_acquire_key(r, &k, S(5), 0, &c), 0);
    assert_true(c.token > b.token);
    assert_int_equal(fl_acquire_key(r2, &k, S(5), 0, &b), -EINVAL); /* not r2's */
    assert_int_equal(fl_release(r, &c), 0);
    fl_close(r2);
    fl_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_try_release_tokens),
        cmocka_unit_test(test_wait_timeout_and_deadlock),
        cmocka_unit_test(test_waiters_woken_by_release),
        cmocka_unit_test(test_expired_takeover),
        cmocka_unit_test(test_closed_holder),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_renew),
        cmocka_unit_test(test_commit_read),
        cmocka_unit_test(test_commit_token),
        cmocka_unit_test(test_readonly_and_inspection),
        cmocka_unit_test(test_keepalive),
        cmocka_unit_test(test_release_pools_lease),
        cmocka_unit_test(test_key_handle),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
