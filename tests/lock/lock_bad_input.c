/* SPDX-License-Identifier: MIT */
/*
 * lock_bad_input.c - bad region files and bad arguments get clear errors.
 *
 * I9: a missing, empty, garbage, foreign, truncated, wrong-version or
 * corrupt region file is refused with the documented code and an
 * fl_last_error() message that names the file; bad keys, NULL arguments,
 * a zero lease, a bad timeout, a lease naming a slot never issued and a
 * read-only handle are -EINVAL; a full key table is -ENOSPC while existing
 * keys keep working; the error names and messages make sense.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

static const struct fl__params tiny = {.locks = 4, .records = 4, .record_size = 64,
                                       .clients = 8, .spare_buffers = 4};

static char valid[512]; /* a valid region to copy from */

static int setup(void **state)
{
    (void)state;
    snprintf(valid, sizeof valid, "%s", th_path("valid.region"));
    return fl__test_region_create_ready(valid, &tiny) == 0 ? 0 : -1;
}

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
}

static void patch(const char *path, off_t off, const void *bytes, size_t n)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t)n);
    close(fd);
}

/* fl_open and fl_open_readonly both refuse path with err, naming it. */
static void expect_refused(const char *path, int err, const char *also)
{
    fl_region *r = (fl_region *)0x1;
    int rc = fl_open(path, &r);
    if (rc != err)
        fail_msg("fl_open(%s) = %s (%s), want %s", path, fl_err_name(rc), fl_last_error(),
                 fl_err_name(err));
    assert_true(fl_last_error()[0] != '\0');
    if (!strstr(fl_last_error(), path))
        fail_msg("message does not name the file: \"%s\"", fl_last_error());
    if (also && !strstr(fl_last_error(), also))
        fail_msg("message does not say \"%s\": \"%s\"", also, fl_last_error());
    rc = fl_open_readonly(path, &r);
    if (rc != err)
        fail_msg("fl_open_readonly(%s) = %s (%s), want %s", path, fl_err_name(rc),
                 fl_last_error(), fl_err_name(err));
    assert_non_null(strstr(fl_last_error(), path));
}

/* I9 */
static void test_missing_file(void **state)
{
    (void)state;
    expect_refused(th_path("no-such.region"), -ENOENT, NULL);
}

/* I9 */
static void test_empty_and_garbage(void **state)
{
    (void)state;
    char empty[512], garbage[512], small[512];
    snprintf(empty, sizeof empty, "%s", th_path("empty.region"));
    snprintf(garbage, sizeof garbage, "%s", th_path("garbage.region"));
    snprintf(small, sizeof small, "%s", th_path("small.region"));
    int fd = open(empty, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    expect_refused(empty, -EPROTO, "empty");

    fd = open(garbage, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    char junk[16384];
    unsigned seed = 12345;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)rand_r(&seed);
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    expect_refused(garbage, -EPROTO, "magic");

    fd = open(small, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello\n", 6), 6);
    close(fd);
    expect_refused(small, -EPROTO, NULL);
}

/* I9 */
static void test_wrong_magic(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s", th_path("magic.region"));
    copy_file(valid, p);
    patch(p, 0, "SQLite f", 8);
    expect_refused(p, -EPROTO, "magic");
}

/* I9 */
static void test_truncated(void **state)
{
    (void)state;
    struct stat st;
    assert_int_equal(stat(valid, &st), 0);
    char p[512];
    snprintf(p, sizeof p, "%s", th_path("trunc.region"));
    copy_file(valid, p);
    assert_int_equal(truncate(p, st.st_size / 2), 0);
    expect_refused(p, -EPROTO, "truncated");
    assert_int_equal(truncate(p, st.st_size - 1), 0);
    expect_refused(p, -EPROTO, "truncated");
    assert_int_equal(truncate(p, 100), 0); /* the magic, and not even a header */
    expect_refused(p, -EPROTO, "truncated");
}

/* The region at p, its format version patched to v, is refused with
 * -EPROTONOSUPPORT by a message that names v and ours after the file name. */
static void expect_version_refused(const char *p, uint32_t v)
{
    copy_file(valid, p);
    patch(p, 8, &v, sizeof v);
    char vs[16];
    snprintf(vs, sizeof vs, "%u", v);
    expect_refused(p, -EPROTONOSUPPORT, vs);
    const char *m = strstr(fl_last_error(), p);
    assert_non_null(m);
    m += strlen(p);
    bool sawtheirs = false, sawmine = false;
    while (*m) {
        if (*m >= '0' && *m <= '9') {
            unsigned long n = strtoul(m, (char **)&m, 10);
            sawtheirs |= n == v;
            sawmine |= n == FL__FORMAT_VERSION;
        } else {
            m++;
        }
    }
    if (!sawtheirs || !sawmine)
        fail_msg("message does not name both versions: \"%s\"", fl_last_error());
}

/* I9 */
static void test_wrong_version(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s", th_path("version.region"));
    expect_version_refused(p, 99);
}

/* I9: the format before this one (6 added the slot's wake_needed; a
 * format-5 file has the same layout otherwise, but its library would never
 * set the flag, and this one's releases would not wake its sleepers) */
static void test_previous_version(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s", th_path("version5.region"));
    assert_int_equal(FL__FORMAT_VERSION, 6);
    expect_version_refused(p, FL__FORMAT_VERSION - 1);
}

/* I9 */
static void test_corrupt_header_checksum(void **state)
{
    (void)state;
    static const int offsets[] = {24, 28, 40, 56, 64, 100, 112, 120, 127};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s", th_path("sum.region"));
        unlink(p);
        copy_file(valid, p);
        int fd = open(p, O_RDWR);
        assert_true(fd >= 0);
        unsigned char b;
        assert_int_equal(pread(fd, &b, 1, offsets[i]), 1);
        b ^= 0x10;
        assert_int_equal(pwrite(fd, &b, 1, offsets[i]), 1);
        close(fd);
        expect_refused(p, -EPROTO, "checksum");
    }
}

/* I9: a directory or a device is not a region either */
static void test_not_a_regular_file(void **state)
{
    (void)state;
    fl_region *r;
    assert_int_equal(fl_open_readonly("/dev/null", &r), -EPROTO);
    assert_non_null(strstr(fl_last_error(), "/dev/null"));
    assert_int_equal(fl_open("/dev/null", &r), -EPROTO);
    assert_non_null(strstr(fl_last_error(), "/dev/null"));
    char dir[512];
    snprintf(dir, sizeof dir, "%s", th_path("dir.region"));
    assert_int_equal(mkdir(dir, 0700), 0);
    expect_refused(dir, -EPROTO, NULL);
}

/* I9 */
static void test_bad_arguments(void **state)
{
    (void)state;
    fl_region *r;
    assert_int_equal(fl_open(valid, NULL), -EINVAL);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_open_readonly(valid, NULL), -EINVAL);
    assert_int_equal(fl_open(valid, &r), 0);
    fl_lease l;

    /* keys of 0 and 128 bytes; 127 is the longest allowed */
    char k128[129], k127[128];
    memset(k128, 'k', 128);
    k128[128] = '\0';
    memset(k127, 'k', 127);
    k127[127] = '\0';
    assert_int_equal(fl_acquire(r, "", TH_S, 0, &l), -EINVAL);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_acquire(r, k128, TH_S, 0, &l), -EINVAL);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_acquire(r, k127, TH_S, 0, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);

    /* NULL arguments */
    assert_int_equal(fl_acquire(NULL, "k", TH_S, 0, &l), -EINVAL);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_acquire(r, NULL, TH_S, 0, &l), -EINVAL);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_acquire(r, "k", TH_S, 0, NULL), -EINVAL);
    assert_int_equal(fl_renew(NULL, &l, TH_S), -EINVAL);
    assert_int_equal(fl_renew(r, NULL, TH_S), -EINVAL);
    assert_int_equal(fl_release(NULL, &l), -EINVAL);
    assert_int_equal(fl_release(r, NULL), -EINVAL);
    assert_int_equal(fl_check(NULL, &l), -EINVAL);
    assert_int_equal(fl_check(r, NULL), -EINVAL);
    assert_int_equal(fl_lock_info_get(r, 0, NULL), -EINVAL);
    assert_int_equal(fl_lock_info_get(NULL, 0, &(fl_lock_info){0}), -EINVAL);
    assert_int_equal(fl_region_info_get(r, NULL), -EINVAL);
    assert_int_equal(fl_default_region_path(NULL, 10), -EINVAL);
    fl_close(NULL); /* ignored */

    /* lease_ns 0, bad timeouts */
    assert_int_equal(fl_acquire(r, "k", 0, 0, &l), -EINVAL);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_acquire(r, "k", TH_S, -2, &l), -EINVAL);
    assert_int_equal(fl_acquire(r, "k", TH_S, INT64_MIN, &l), -EINVAL);
    assert_int_equal(fl_acquire(r, "k", TH_S, 0, &l), 0);
    assert_int_equal(fl_renew(r, &l, 0), -EINVAL);
    assert_int_equal(fl_check(r, &l), 0); /* the failed renew changed nothing */

    /* a lease naming a slot this region never issued */
    fl_lease bad = l;
    bad.slot = 3; /* within capacity, never handed out */
    assert_int_equal(fl_renew(r, &bad, TH_S), -EINVAL);
    assert_int_equal(fl_release(r, &bad), -EINVAL);
    assert_int_equal(fl_check(r, &bad), -EINVAL);
    bad.slot = UINT32_MAX;
    assert_int_equal(fl_renew(r, &bad, TH_S), -EINVAL);
    assert_int_equal(fl_release(r, &bad), -EINVAL);
    assert_int_equal(fl_check(r, &bad), -EINVAL);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_check(r, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);

    /* a read-only handle cannot lock */
    fl_region *ro;
    assert_int_equal(fl_open_readonly(valid, &ro), 0);
    assert_int_equal(fl_acquire(ro, "k", TH_S, 0, &l), -EINVAL);
    assert_true(fl_last_error()[0] != '\0');
    assert_int_equal(fl_acquire(r, "k", TH_S, 0, &l), 0);
    assert_int_equal(fl_renew(ro, &l, TH_S), -EINVAL);
    assert_int_equal(fl_release(ro, &l), -EINVAL);
    /* A lease is valid only with the handle that acquired it (I8): even a
     * read-only handle of the same region refuses it, as an etcd handle
     * must (its slot names another key there). */
    assert_int_equal(fl_check(ro, &l), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "another region handle"));
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(ro);

    /* index queries out of range */
    fl_lock_info li;
    assert_int_equal(fl_lock_info_get(r, 1000, &li), -ERANGE);
    fl_close(r);
}

/* I8 I9: a lease is valid only with the handle that acquired it.  Region X
 * gives "a" slot 0, region Y gives "b" slot 0: X's lease for "a" used with
 * Y would fence Y's record of "b" with a token of "a" (defect 5 of the
 * etcd review; the same hole on a region file). */
static void test_foreign_lease(void **state)
{
    (void)state;
    char px[512], py[512];
    snprintf(px, sizeof px, "%s", th_path("foreign-x.region"));
    snprintf(py, sizeof py, "%s", th_path("foreign-y.region"));
    assert_int_equal(fl__test_region_create_ready(px, &tiny), 0);
    assert_int_equal(fl__test_region_create_ready(py, &tiny), 0);
    fl_region *x, *y, *x2;
    assert_int_equal(fl_open(px, &x), 0);
    assert_int_equal(fl_open(py, &y), 0);
    assert_int_equal(fl_open(px, &x2), 0);
    fl_lease a, b;
    for (int i = 0; i < 3; i++) { /* "b"'s tokens pass "a"'s */
        assert_int_equal(fl_acquire(y, "b", TH_S, 0, &b), 0);
        assert_int_equal(fl_release(y, &b), 0);
    }
    assert_int_equal(fl_acquire(y, "b", 10 * TH_S, 0, &b), 0);
    assert_int_equal(fl_commit(y, &b, "rb", "b", 1, 0, NULL), 0);
    assert_int_equal(fl_acquire(x, "a", 10 * TH_S, 0, &a), 0);
    assert_int_equal(a.slot, b.slot);
    assert_true(a.region != 0 && a.region != b.region);
    const fl_region *const others[] = {y, x2}; /* another region; another handle of X */
    for (size_t i = 0; i < 2; i++) {
        fl_region *o = (fl_region *)others[i];
        assert_int_equal(fl_commit(o, &a, "rb", "a", 1, 0, NULL), -EINVAL);
        assert_non_null(strstr(fl_last_error(), "another region handle"));
        assert_int_equal(fl_commit_u64(o, &a, "rb", 1, 0, NULL), -EINVAL);
        assert_int_equal(fl_renew(o, &a, TH_S), -EINVAL);
        assert_int_equal(fl_check(o, &a), -EINVAL);
        assert_int_equal(fl_release(o, &a), -EINVAL);
        fl_keepalive *k = NULL;
        assert_int_equal(fl_keepalive_start(o, &a, TH_S, NULL, NULL, &k), -EINVAL);
    }
    fl_lease forged = a;
    forged.region = 0;
    assert_int_equal(fl_commit(x, &forged, "ra", "a", 1, 0, NULL), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "never issued"));
    char buf[4];
    size_t len;
    uint64_t fence;
    assert_int_equal(fl_read(y, "rb", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(fence, b.token);
    /* With its own handle, all of it works. */
    assert_int_equal(fl_commit(x, &a, "ra", "a", 1, 0, NULL), 0);
    assert_int_equal(fl_renew(x, &a, 10 * TH_S), 0);
    assert_int_equal(fl_release(x, &a), 0);
    assert_int_equal(fl_release(y, &b), 0);
    fl_close(x2);
    fl_close(y);
    fl_close(x);
}

/* I9: a full key table */
static void test_full_key_table(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s", th_path("full.region"));
    assert_int_equal(fl__test_region_create_ready(p, &tiny), 0);
    fl_region *r;
    assert_int_equal(fl_open(p, &r), 0);
    fl_lease l[4], x;
    char key[32];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "full/%d", i);
        assert_int_equal(fl_acquire(r, key, TH_S, 0, &l[i]), 0);
        assert_int_equal(l[i].token, 1);
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        assert_int_equal(fl_acquire(r, "full/4", TH_S, 0, &x), -ENOSPC);
        assert_true(fl_last_error()[0] != '\0');
        assert_non_null(strstr(fl_last_error(), p));
        assert_int_equal(fl_acquire(r, "full/5", TH_S, (int64_t)(10 * TH_MS), &x), -ENOSPC);
    }
    /* existing keys still work */
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "full/%d", i);
        assert_int_equal(fl_acquire(r, key, TH_S, 0, &x), -EBUSY);
        assert_int_equal(fl_release(r, &l[i]), 0);
        assert_int_equal(fl_acquire(r, key, TH_S, 0, &l[i]), 0);
        assert_int_equal(l[i].token, 2);
        assert_int_equal(fl_release(r, &l[i]), 0);
    }
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    assert_int_equal(ri.lock_capacity, 4);
    assert_int_equal(ri.locks_used, 4);
    fl_close(r);
}

/* I9: the region was replaced under a running supervisor */
static void test_replaced_region(void **state)
{
    (void)state;
    char p[512], old[600];
    snprintf(p, sizeof p, "%s", th_path("replaced.region"));
    snprintf(old, sizeof old, "%s.old", p);
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, p, NULL), 0);
    assert_int_equal(rename(p, old), 0); /* the supervisor keeps serving the old file */
    assert_int_equal(fl__test_region_create_ready(p, &tiny), 0);
    fl_region *r;
    int rc = fl_open(p, &r);
    if (rc != -ENXIO)
        fail_msg("fl_open of a replaced region = %s (%s), want ENXIO", fl_err_name(rc),
                 fl_last_error());
    assert_non_null(strstr(fl_last_error(), p));
    th_daemon_stop(&d, SIGTERM);
}

/* I9: the supervisor's client table is full */
static void test_client_table_full(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s", th_path("clients.region"));
    th_daemon d;
    const char *extra[] = {"--clients", "2", NULL};
    assert_int_equal(th_daemon_start(&d, p, extra), 0);
    fl_region *a, *b, *c;
    assert_int_equal(fl_open(p, &a), 0);
    assert_int_equal(fl_open(p, &b), 0);
    assert_int_equal(fl_region_registered(a), 1);
    assert_int_equal(fl_region_registered(b), 1);
    assert_string_equal(fl_region_backend(a), "shm"); /* a path names a region file */
    assert_string_equal(fl_region_backend(NULL), "");
    assert_int_equal(fl_open(p, &c), -EUSERS);
    assert_true(fl_last_error()[0] != '\0');
    fl_close(b);
    assert_true(th_daemon_log_wait(&d, "client_gone", 1, 10000));
    assert_int_equal(fl_open(p, &c), 0);
    assert_int_equal(fl_region_registered(c), 1);
    fl_close(a);
    fl_close(c);
    th_daemon_stop(&d, SIGTERM);
}

/* I9: a path too long for the library */
static void test_path_too_long(void **state)
{
    (void)state;
    static char longpath[5000];
    memset(longpath, 'x', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    fl_region *r;
    int rc = fl_open(longpath, &r);
    assert_true(fl_last_error()[0] != '\0');
    /* fencelock.h, fl_open: "-ENAMETOOLONG  the path ... is too long" */
    if (rc != -ENAMETOOLONG)
        fail_msg("fl_open of a %zu-byte path = %s (%s); fencelock.h documents ENAMETOOLONG",
                 strlen(longpath), fl_err_name(rc), fl_last_error());
}

/* The environment variable and the default path */
static void test_paths(void **state)
{
    (void)state;
    fl_region *r;
    char buf[4];
    assert_int_equal(fl_default_region_path(buf, sizeof buf), -ENAMETOOLONG);
    setenv(FL_REGION_ENV, valid, 1);
    char def[600];
    assert_int_equal(fl_default_region_path(def, sizeof def), 0);
    assert_string_equal(def, valid);
    assert_int_equal(fl_open(NULL, &r), 0); /* NULL: $FENCELOCK_REGION */
    fl_lease l;
    assert_int_equal(fl_acquire(r, "env", TH_S, 0, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    unsetenv(FL_REGION_ENV);
    assert_int_equal(fl_default_region_path(def, sizeof def), 0);
    char want[600];
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat xst;
    if (getuid() == 0)
        snprintf(want, sizeof want, "/run/fencelock/region"); /* /run exists here */
    else if (xdg && xdg[0] == '/' && stat(xdg, &xst) == 0 && S_ISDIR(xst.st_mode))
        snprintf(want, sizeof want, "%s/fencelock/region", xdg);
    else
        snprintf(want, sizeof want, "/dev/shm/fencelock-%u/region", (unsigned)getuid());
    assert_string_equal(def, want);
}

/* I9 */
static void test_error_text(void **state)
{
    (void)state;
    assert_string_equal(fl_err_name(-ESTALE), "ESTALE");
    assert_string_equal(fl_err_name(ESTALE), "ESTALE");
    assert_non_null(strstr(fl_strerror(-ESTALE), "stale"));
    assert_string_equal(fl_strerror(-ESTALE), fl_strerror(ESTALE));
    assert_string_equal(fl_err_name(-EBUSY), "EBUSY");
    assert_string_equal(fl_err_name(-ETIMEDOUT), "ETIMEDOUT");
    assert_string_equal(fl_err_name(-ENOSPC), "ENOSPC");
    assert_string_equal(fl_err_name(-EPROTONOSUPPORT), "EPROTONOSUPPORT");
    assert_string_equal(fl_err_name(-9999), "E?");
    assert_non_null(fl_strerror(-9999));
    assert_true(fl_strerror(-9999)[0] != '\0');
    assert_non_null(fl_strerror(0));
    /* every error the lock calls document has its own text */
    static const int documented[] = {EINVAL, ENOENT, EACCES, EPROTO, EPROTONOSUPPORT, EAGAIN,
                                     ENXIO,  ENOMEM, EMFILE, ENFILE, EUSERS, EBUSY,
                                     ETIMEDOUT, ENOSPC, EOVERFLOW, ESTALE, ERANGE};
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++) {
        assert_string_not_equal(fl_err_name(-documented[i]), "E?");
        assert_string_not_equal(fl_strerror(-documented[i]), "unknown error");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_empty_and_garbage),
        cmocka_unit_test(test_wrong_magic),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_wrong_version),
        cmocka_unit_test(test_previous_version),
        cmocka_unit_test(test_corrupt_header_checksum),
        cmocka_unit_test(test_not_a_regular_file),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_foreign_lease),
        cmocka_unit_test(test_full_key_table),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_path_too_long),
        cmocka_unit_test(test_replaced_region),
        cmocka_unit_test(test_client_table_full),
        cmocka_unit_test(test_error_text),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
