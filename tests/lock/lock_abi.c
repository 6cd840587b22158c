/* SPDX-License-Identifier: MIT */
/*
 * lock_abi.c - the run-time side of the ABI policy (docs/abi.md), through the
 * public header only, against a real fencelockd:
 * - fl_version() and fl_version_number() agree with FL_VERSION_STRING,
 *   FL_VERSION_NUMBER and FL_VERSION_MAJOR/MINOR/PATCH;
 * - every fl_*_info_get zeroes the structure's reserved tail whatever the
 *   caller left in it, so a later minor version can give those bytes a
 *   meaning (0: unknown) without breaking callers compiled against this one.
 * - a region string with a scheme this build does not serve is refused with
 *   -EPROTONOSUPPORT and a message naming it, through fl_open, fl_open_readonly
 *   and $FENCELOCK_REGION alike (docs/backends.md), never taken for a path;
 * - fl_etcd_epoch zeroes its result (reserved tail included) and refuses
 *   what is not an etcd region before it asks anything (asked 0).
 * No invariant of docs/invariants.md applies; this guards the header's
 * promise to programs built against another version of the library.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fencelock.h"
#include "harness.h"

static void test_version(void **state)
{
    (void)state;
    assert_string_equal(fl_version(), FL_VERSION_STRING);
    assert_int_equal(fl_version_number(), FL_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", FL_VERSION_MAJOR, FL_VERSION_MINOR, FL_VERSION_PATCH);
    assert_string_equal(fl_version(), want);
    assert_int_equal(fl_version_number() >> 16, FL_VERSION_MAJOR);
    assert_int_equal((fl_version_number() >> 8) & 0xff, FL_VERSION_MINOR);
    assert_int_equal(fl_version_number() & 0xff, FL_VERSION_PATCH);
}

static void assert_zero(const uint64_t *reserved, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(reserved[i], 0);
}

#define POISON(x) memset(&(x), 0xa5, sizeof(x))
#define NRES(x) (sizeof(x).reserved / sizeof(x).reserved[0])

static void test_info_reserved_zeroed(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("abi.region");
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_region_registered(r), 1);
    fl_lease l;
    POISON(l);
    assert_int_equal(fl_acquire(r, "abi/key", 10ull * 1000000000ull, 0, &l), 0);
    /* a region file's lease: handle 0, the reserved tail zeroed */
    assert_int_equal(l.handle, 0);
    assert_zero(l.reserved, NRES(l));
    assert_int_equal(fl_commit(r, &l, "abi/record", "v", 1, 0, NULL), 0);

    fl_region_info ri;
    POISON(ri);
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    assert_zero(ri.reserved, NRES(ri));

    fl_lock_info li;
    POISON(li);
    assert_int_equal(fl_lock_info_get(r, 0, &li), 0);
    assert_string_equal(li.key, "abi/key");
    assert_zero(li.reserved, NRES(li));

    fl_record_info rec;
    POISON(rec);
    assert_int_equal(fl_record_info_get(r, 0, &rec), 0);
    assert_string_equal(rec.name, "abi/record");
    assert_zero(rec.reserved, NRES(rec));

    /* our own registration is one live entry of the client table */
    int live = 0;
    for (uint32_t i = 1; i < ri.client_capacity; i++) {
        fl_client_info ci;
        POISON(ci);
        if (fl_client_info_get(r, i, &ci) != 0)
            continue;
        live++;
        assert_zero(ci.reserved, NRES(ci));
    }
    assert_true(live >= 1);

    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* A scheme selects a backend; one this build lacks is a clear refusal, not
 * a file of that name (tooling). */
static void test_unknown_scheme(void **state)
{
    (void)state;
    fl_region *r = NULL;
    assert_int_equal(fl_open("nosuch://host/prefix", &r), -EPROTONOSUPPORT);
    assert_null(r);
    assert_non_null(strstr(fl_last_error(), "unknown scheme \"nosuch\""));
    assert_int_equal(fl_open_readonly("x+y.z-1://h", &r), -EPROTONOSUPPORT);
    assert_non_null(strstr(fl_last_error(), "x+y.z-1"));
    /* not a scheme (no letter first, or no "://"): a path, which is missing */
    assert_int_equal(fl_open("1x://h", &r), -ENOENT);
    assert_int_equal(fl_open("nosuch:/h", &r), -ENOENT);
    assert_int_equal(setenv(FL_REGION_ENV, "nosuch://h/p", 1), 0);
    assert_int_equal(fl_open(NULL, &r), -EPROTONOSUPPORT);
    assert_int_equal(unsetenv(FL_REGION_ENV), 0);
}

/* The admin entry point's result is zeroed like an *_info structure, and a
 * region that is no etcd URI is refused before any request: -EINVAL, or
 * -EPROTONOSUPPORT in a build without etcd. */
static void test_etcd_epoch_refusals(void **state)
{
    (void)state;
    fl_etcd_epoch_result res;
    memset(&res, 0xa5, sizeof res);
    int err = fl_etcd_epoch("/dev/shm/no-such-fencelock-region", 0, 0, &res);
    assert_true(err == -EINVAL || err == -EPROTONOSUPPORT);
    assert_true(err == -EPROTONOSUPPORT || strstr(fl_last_error(), "is not an etcd region"));
    assert_int_equal(res.before, 0);
    assert_int_equal(res.after, 0);
    assert_int_equal(res.asked, 0);
    assert_int_equal(res.reserved0, 0);
    for (size_t i = 0; i < sizeof res.reserved / sizeof res.reserved[0]; i++)
        assert_int_equal(res.reserved[i], 0);
    assert_int_equal(fl_etcd_epoch(NULL, 0, 0, &res), -EINVAL);
    assert_int_equal(fl_etcd_epoch("etcd://127.0.0.1:1/p", 0, 0, NULL), -EINVAL);
    assert_int_equal(fl_etcd_epoch("etcd://127.0.0.1:1/p", 0x2, 0, &res), -EINVAL);
    assert_int_equal(fl_etcd_epoch("etcd://127.0.0.1:1/p", 0, 5, &res), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "at_least goes with FL_ETCD_EPOCH_BUMP"));
    assert_int_equal(res.asked, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_info_reserved_zeroed),
        cmocka_unit_test(test_unknown_scheme),
        cmocka_unit_test(test_etcd_epoch_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
