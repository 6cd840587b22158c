/* SPDX-License-Identifier: MIT */
/*
 * supervisor_huge_pages.c - fencelockd --huge-pages (issue 17).
 *
 * Where the kernel does not allow huge pages for the region's file (a disk
 * file system, tmpfs without huge=), fencelockd logs one
 * huge_pages_unavailable warning that says why and what to change, and
 * serves the region as always: the option is never a failure (I12: a clear
 * message, not a silent loss).  Where it allows them (a tmpfs mounted with
 * huge=within_size, made in a private mount namespace: root only, skipped
 * otherwise), it logs huge_pages with the bytes now on huge pages, and a
 * client's own mapping of the region is mapped by huge pages (PMDs in its
 * /proc/self/smaps) without doing anything itself; locks and records work
 * on it as on any region.
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "harness.h"

#define SKIPPED 77

/* The bytes of this process's mapping of path mapped by huge pages. */
static uint64_t pmd_mapped(const char *path)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[1024];
    bool ours = false;
    unsigned long long kb = 0, v;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
            line[strcspn(line, "\n")] = '\0';
            size_t n = strlen(line), m = strlen(path);
            ours = n >= m && strcmp(line + n - m, path) == 0;
            continue;
        }
        if (ours && sscanf(line, "ShmemPmdMapped: %llu kB", &v) == 1)
            kb += v;
    }
    fclose(f);
    return kb * 1024;
}

/* Locks and a record work on the region (through a fresh handle). */
static int use_region(const char *region)
{
    fl_region *r;
    if (fl_open(region, &r) != 0)
        return 1;
    char key[32];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "huge/%d", i);
        fl_lease l;
        if (fl_acquire(r, key, TH_S, 0, &l) != 0 || fl_commit(r, &l, key, key, 4, 0, NULL) != 0 ||
            fl_release(r, &l) != 0)
            return 2;
    }
    fl_close(r);
    return 0;
}

/* I12 */
static void test_not_allowed_is_a_warning(void **state)
{
    (void)state;
    const char *region = th_path("small-pages.region");
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, (const char *const[]){"--huge-pages", NULL}),
                     0);
    int warned = th_daemon_log_count(&d, "\"event\":\"huge_pages_unavailable\"");
    int applied = th_daemon_log_count(&d, "\"event\":\"huge_pages\"");
    assert_int_equal(warned + applied, 1);
    if (warned) {
        /* says why, naming the file system or the mount and its option */
        assert_true(th_daemon_log_count(&d, "not on tmpfs") +
                        th_daemon_log_count(&d, "huge=") >= 1);
        print_message("%s: small pages (the warning says why)\n", th_tmpdir());
    }
    assert_int_equal(use_region(region), 0);
    assert_int_equal(th_daemon_stop(&d, SIGTERM), 0);
}

/* In a private mount namespace: a tmpfs that allows huge pages. */
static int huge_tmpfs(void *arg, int in, int out)
{
    (void)arg;
    (void)in;
    (void)out;
    char dir[512];
    snprintf(dir, sizeof dir, "%s", th_path("huge-mount"));
    if (mkdir(dir, 0700) != 0)
        return 10;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("fltest", dir, "tmpfs", 0, "huge=within_size,size=64m,mode=0700") != 0)
        return SKIPPED; /* not root, or no mount namespaces here */
    char region[600];
    snprintf(region, sizeof region, "%s/region", dir);
    th_daemon d;
    int rc = 0;
    if (th_daemon_start(&d, region,
                        (const char *const[]){"--huge-pages", "--locks", "20000", NULL}) != 0)
        return 11;
    if (th_daemon_log_count(&d, "\"event\":\"huge_pages_unavailable\"") != 0)
        rc = SKIPPED; /* a kernel without shmem THP (or MADV_COLLAPSE: before 6.1) */
    else if (th_daemon_log_count(&d, "\"event\":\"huge_pages\"") != 1)
        rc = 12;
    if (rc == 0) {
        fl_region *r;
        if (fl_open(region, &r) != 0)
            rc = 13;
        fl_lease l;
        if (!rc && (fl_acquire(r, "touch", TH_S, 0, &l) != 0 || fl_release(r, &l) != 0))
            rc = 14;
        /* the client's own mapping, which it did nothing special for */
        if (!rc && pmd_mapped(region) == 0)
            rc = 15;
        if (!rc)
            fl_close(r);
        if (!rc)
            rc = use_region(region) ? 16 : 0;
    }
    if (th_daemon_stop(&d, SIGTERM) != 0 && rc == 0)
        rc = 17;
    umount2(dir, MNT_DETACH);
    return rc;
}

/* I12 */
static void test_allowed_backs_every_mapping(void **state)
{
    (void)state;
    th_child c;
    assert_int_equal(th_child_start(&c, huge_tmpfs, NULL), 0);
    int st = th_child_wait(&c, 60000);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == SKIPPED)
        skip();
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_allowed_is_a_warning),
        cmocka_unit_test(test_allowed_backs_every_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
