/* SPDX-License-Identifier: MIT */
/*
 * lock_clock.c - leases follow the handle's monotonic clock and nothing else.
 *
 * I11: with a fake clock substituted (fl__region_set_clock), expiry,
 * deadlines and renewals follow only the fake clock: frozen, a 1 ms lease
 * stays held however much real time passes; advanced past the deadline, a
 * try-acquire takes it over with FL_LEASE_EXPIRED.  And after a reboot
 * (a region whose boot id is another boot's) every lease is void: clients
 * are refused until fencelockd adopts the region, which frees the held
 * locks as voided (the next holder sees FL_LEASE_EXPIRED).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

static const struct fl__params small = {.locks = 64, .records = 8, .record_size = 64,
                                        .clients = 8, .spare_buffers = 4};

struct fake {
    uint64_t now;
    unsigned long reads;
};

static uint64_t fake_clock(void *ctx)
{
    struct fake *f = ctx;
    f->reads++;
    return f->now;
}

/* I11 */
static void test_expiry_follows_only_the_handle_clock(void **state)
{
    (void)state;
    const char *path = th_path("clock.region");
    assert_int_equal(fl__test_region_create_ready(path, &small), 0);
    fl_region *r;
    assert_int_equal(fl_open(path, &r), 0);
    assert_int_equal(fl_region_registered(r), 0); /* no supervisor: unregistered */

    /* a fake time unrelated to the real monotonic clock */
    struct fake f = {.now = 5 * TH_S};
    fl__region_set_clock(fl__shm_of(r), fake_clock, &f);

    fl_lease a;
    assert_int_equal(fl_acquire(r, "clk", TH_MS, 0, &a), 0);
    assert_true(f.reads > 0); /* the lease was computed from our clock */
    assert_int_equal(a.deadline_ns, f.now + TH_MS);
    uint64_t t = a.token;

    /* real time passes; the fake clock does not */
    struct timespec ts = {0, 50 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
    fl_lease b;
    assert_int_equal(fl_acquire(r, "clk", TH_MS, 0, &b), -EBUSY);
    assert_int_equal(fl_check(r, &a), 0);
    fl_lock_info li;
    assert_int_equal(fl_lock_info_get(r, a.slot, &li), 0);
    assert_int_equal(li.state, FL_LOCK_HELD);
    assert_int_equal(li.lease_left_ns, (int64_t)TH_MS);

    /* fake time moves, still short of the deadline */
    f.now += TH_MS - 1000;
    assert_int_equal(fl_acquire(r, "clk", TH_MS, 0, &b), -EBUSY);
    assert_int_equal(fl_check(r, &a), 0);

    /* renew follows the fake clock too */
    assert_int_equal(fl_renew(r, &a, 2 * TH_MS), 0);
    assert_int_equal(a.deadline_ns, f.now + 2 * TH_MS);
    f.now += TH_MS + 500 * 1000; /* past the original deadline, before the renewed one */
    assert_int_equal(fl_check(r, &a), 0);
    assert_int_equal(fl_acquire(r, "clk", TH_MS, 0, &b), -EBUSY);

    /* past the deadline on the fake clock: taken over, with a greater token */
    f.now = a.deadline_ns;
    assert_int_equal(fl_check(r, &a), -ESTALE);
    assert_int_equal(fl_lock_info_get(r, a.slot, &li), 0);
    assert_int_equal(li.state, FL_LOCK_EXPIRED);
    assert_int_equal(fl_acquire(r, "clk", TH_MS, 0, &b), 0);
    assert_int_equal(b.token, t + 1);
    assert_true(b.flags & FL_LEASE_EXPIRED);
    assert_int_equal(b.deadline_ns, f.now + TH_MS);
    assert_int_equal(fl_renew(r, &a, TH_MS), -ESTALE);
    assert_int_equal(fl_release(r, &a), -ESTALE);
    assert_int_equal(fl_check(r, &b), 0);

    /* a fake clock far ahead of real time: expiry is equally immediate */
    f.now += 1000 * TH_S;
    assert_int_equal(fl_acquire(r, "clk", TH_S, 0, &a), 0);
    assert_int_equal(a.token, b.token + 1);
    assert_true(a.flags & FL_LEASE_EXPIRED);
    assert_int_equal(fl_release(r, &a), 0);

    fl_close(r);
}

/* I11: leases of an earlier boot are void */
static void test_other_boot_leases_are_void(void **state)
{
    (void)state;
    const char *p = th_path("boot.region");
    char path[512];
    snprintf(path, sizeof path, "%s", p);
    assert_int_equal(fl__test_region_create_ready(path, &small), 0);
    fl_region *r;
    assert_int_equal(fl_open(path, &r), 0);
    fl_lease a;
    assert_int_equal(fl_acquire(r, "boot/key", 3600 * TH_S, 0, &a), 0);
    fl_close(r); /* unregistered: the lock stays held for an hour */

    /* pretend the region was written during another boot */
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    char other[40] = "00000000-0000-4000-8000-000000000000";
    assert_int_equal(pwrite(fd, other, sizeof other, 224), (ssize_t)sizeof other);
    close(fd);

    assert_int_equal(fl_open(path, &r), -EAGAIN);
    assert_non_null(strstr(fl_last_error(), path));
    fl_region *ro;
    assert_int_equal(fl_open_readonly(path, &ro), 0); /* inspection still works */
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(ro, &ri), 0);
    assert_int_equal(ri.same_boot, 0);
    fl_lock_info li;
    assert_int_equal(fl_lock_info_get(ro, a.slot, &li), 0);
    assert_int_equal(li.state, FL_LOCK_EXPIRED); /* shown as void */
    fl_close(ro);

    th_daemon d;
    assert_int_equal(th_daemon_start(&d, path, NULL), 0);
    assert_true(th_daemon_log_wait(&d, "new_boot", 1, 10000));
    assert_true(th_daemon_log_wait(&d, "lease_voided", 1, 10000));
    assert_int_equal(fl_open(path, &r), 0);
    fl_lease b;
    assert_int_equal(fl_acquire(r, "boot/key", TH_S, 0, &b), 0);
    assert_true(b.token > a.token); /* the new supervisor also began a new epoch */
    assert_true(b.flags & FL_LEASE_EXPIRED);
    assert_int_equal(fl_release(r, &b), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expiry_follows_only_the_handle_clock),
        cmocka_unit_test(test_other_boot_leases_are_void),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
