/* SPDX-License-Identifier: MIT */
/*
 * cli_bad_region.c - `fencelock status` on region files it must refuse
 * (missing, empty, garbage, a directory, truncated, another format version,
 * unreadable: exit status 3 and one line naming the file) and on files it
 * must read without writing (read-only, of an earlier boot).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_util.h"
#include "fencelock.h"
#include "harness.h"

static void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

static void region_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s", th_path(name));
}

/* Both output forms refuse it the same way: status 3, nothing on stdout,
 * one line on stderr that names the file and the problem. */
static void expect_refused(const run_opts *o, const char *region, const char *problem)
{
    for (int json = 0; json < 2; json++) {
        run_result r;
        if (json)
            run_tool(&r, o, (const char *const[]){"status", "--region", region, "--json", NULL});
        else
            run_tool(&r, o, (const char *const[]){"status", "--region", region, NULL});
        if (r.status != 3)
            fail_msg("%s: exit status %d, want 3; stderr: %s", region, r.status, r.err);
        assert_string_equal(r.out, "");
        assert_int_equal(count_lines(r.err), 1);
        assert_true(strncmp(r.err, "fencelock: ", 11) == 0);
        assert_contains(r.err, region);
        assert_contains(r.err, problem);
        run_result_free(&r);
    }
}

static void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static void *read_file(const char *path, size_t *len)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    char *data = malloc((size_t)st.st_size);
    assert_non_null(data);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, data, (size_t)st.st_size), (ssize_t)st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return data;
}

/* A valid region, made by a real fencelockd that is then stopped. */
static void make_region(const char *path)
{
    th_daemon d;
    if (th_daemon_start(&d, path, (const char *const[]){"--locks", "64", "--records", "16", NULL}))
        fail_msg("fencelockd did not get ready on %s", path);
    th_daemon_stop(&d, SIGTERM);
}

/* I9 */
static void test_missing(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "missing.region");
    expect_refused(NULL, region, "does not exist");
}

static void test_empty(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "empty.region");
    write_file(region, "", 0);
    expect_refused(NULL, region, "empty file");
}

static void test_garbage(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "garbage.region");
    unsigned char junk[5000];
    uint32_t x = 12345; /* a fixed sequence: the test is the same every run */
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (unsigned char)(x >> 16);
    }
    write_file(region, junk, sizeof junk);
    expect_refused(NULL, region, "not a fencelock region");
}

static void test_directory(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "dir.region");
    assert_int_equal(mkdir(region, 0700), 0);
    expect_refused(NULL, region, "not a regular file");
}

static void test_truncated(void **state)
{
    (void)state;
    char valid[512], region[512];
    region_path(valid, sizeof valid, "whole.region");
    region_path(region, sizeof region, "half.region");
    make_region(valid);
    size_t len;
    char *data = read_file(valid, &len);
    write_file(region, data, len / 2);
    free(data);
    expect_refused(NULL, region, "truncated");
}

static void test_other_version(void **state)
{
    (void)state;
    char valid[512], region[512];
    region_path(valid, sizeof valid, "v1.region");
    region_path(region, sizeof region, "v99.region");
    make_region(valid);
    size_t len;
    char *data = read_file(valid, &len);
    uint32_t version = 99; /* format_version: header offset 8, native byte order */
    memcpy(data + 8, &version, sizeof version);
    write_file(region, data, len);
    free(data);
    expect_refused(NULL, region, "format version 99");
}

/* An unprivileged user to run the tool as when we are root (root may open
 * any file, so a mode alone proves nothing). */
static bool unprivileged_user(run_opts *o)
{
    if (geteuid() != 0)
        return false;
    struct passwd *pw = getpwnam("nobody");
    o->uid = pw ? pw->pw_uid : 65534;
    o->gid = pw ? pw->pw_gid : 65534;
    /* Let that user reach the files in our directory. */
    assert_int_equal(chmod(th_tmpdir(), 0755), 0);
    return true;
}

static void test_unreadable(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "secret.region");
    make_region(region);
    run_opts o = {0};
    if (!unprivileged_user(&o))
        assert_int_equal(chmod(region, 0), 0);
    expect_refused(&o, region, "Permission denied");
}

static void expect_shown(const run_opts *o, const char *region, const char *key_row)
{
    run_result r;
    run_tool(&r, o, (const char *const[]){"status", "-r", region, NULL});
    if (r.status != 0)
        fail_msg("status of %s exited %d: %s", region, r.status, r.err);
    assert_string_equal(r.err, "");
    assert_contains(r.out, key_row);
    run_result_free(&r);
}

/* With strace, prove what the mode bits cannot show to root: the region is
 * opened O_RDONLY only, and the supervisor's socket is never connected. */
static void check_syscalls(const char *region)
{
    char log[512];
    region_path(log, sizeof log, "strace.log");
    const char *argv[] = {"strace", "-f",  "-qq", "-s", "4096", "-o", log, "-e",
                          "trace=open,openat,connect", FENCELOCK_TOOL_PATH, "status",
                          "--region", region, NULL};
    run_result r;
    run_program(&r, NULL, argv);
    struct stat st;
    if (r.status != 0 || stat(log, &st) != 0 || st.st_size == 0) {
        fprintf(stderr, "strace cannot trace here (status %d): syscall check skipped\n%s",
                r.status, r.err);
        run_result_free(&r);
        return;
    }
    run_result_free(&r);
    size_t len;
    char *text = read_file(log, &len);
    char *copy = strndup(text, len);
    free(text);
    char quoted[600];
    snprintf(quoted, sizeof quoted, "\"%s\"", region);
    int opens = 0;
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "connect("))
            fail_msg("status connected a socket: %s", line);
        if (strstr(line, quoted)) {
            opens++;
            if (!strstr(line, "O_RDONLY") || strstr(line, "O_RDWR") || strstr(line, "O_WRONLY"))
                fail_msg("the region was not opened read-only: %s", line);
        }
    }
    free(copy);
    assert_true(opens >= 1);
}

static void test_read_only_file(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "ro.region");
    th_daemon d;
    if (th_daemon_start(&d, region, NULL) != 0)
        fail_msg("fencelockd did not get ready on %s", region);
    fl_region *r;
    fl_lease l;
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_acquire(r, "jobs/ro", 60 * TH_S, 0, &l), 0);
    assert_int_equal(chmod(region, 0444), 0);

    expect_shown(NULL, region, "  jobs/ro  held");
    run_opts o = {0};
    if (unprivileged_user(&o))
        expect_shown(&o, region, "  jobs/ro  held");
    check_syscalls(region);

    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* A region written during another boot (its boot id differs) is shown, its
 * leases void, without waiting for fencelockd to adopt it. */
static void test_earlier_boot(void **state)
{
    (void)state;
    char live[512], region[512];
    region_path(live, sizeof live, "boot.region");
    region_path(region, sizeof region, "oldboot.region");
    th_daemon d;
    if (th_daemon_start(&d, live, NULL) != 0)
        fail_msg("fencelockd did not get ready on %s", live);
    fl_region *r;
    fl_lease l;
    assert_int_equal(fl_open(live, &r), 0);
    assert_int_equal(fl_acquire(r, "jobs/boot", 60 * TH_S, 0, &l), 0);
    size_t len;
    char *data = read_file(live, &len);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
    memcpy(data + 224, "00000000-0000-0000-0000-000000000000", 37); /* boot_id */
    write_file(region, data, len);
    free(data);

    run_result res;
    run_tool(&res, NULL, (const char *const[]){"status", "-r", region, NULL});
    assert_int_equal(res.status, 0);
    assert_contains(res.out, "00000000-0000-0000-0000-000000000000 (an earlier boot");
    assert_contains(res.out, "  jobs/boot  expired");
    run_result_free(&res);
    run_tool(&res, NULL, (const char *const[]){"status", "-r", region, "--json", NULL});
    assert_int_equal(res.status, 0);
    assert_contains(res.out, "\"same_boot\": false");
    assert_contains(res.out, "\"state\": \"expired\"");
    run_result_free(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing),      cmocka_unit_test(test_empty),
        cmocka_unit_test(test_garbage),      cmocka_unit_test(test_directory),
        cmocka_unit_test(test_truncated),    cmocka_unit_test(test_other_version),
        cmocka_unit_test(test_unreadable),   cmocka_unit_test(test_read_only_file),
        cmocka_unit_test(test_earlier_boot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
