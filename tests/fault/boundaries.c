/* SPDX-License-Identifier: MIT */
/*
 * boundaries.c - tokens never repeat at the edges of a host's life (I1, I11,
 * I3, I9): clients that open while fencelockd starts (after a tmpfs reboot,
 * after a host crash that reverted a disk region, with a corrupt state
 * file), epochs at the end of their space, an unreadable boot id, and a
 * region on disk whose pages came back from different moments.
 *
 * Real fencelockd processes, real clients opening in a tight loop, real
 * files.  A reboot is simulated through FENCELOCK_TEST_BOOT_ID_FILE.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

#define LEASE (60ull * TH_S)

static void write_boot_id(const char *path, const char *id)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", id);
    fclose(f);
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp --sparse=never '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

static uint64_t acquire_release(const char *region, const char *key)
{
    fl_region *r;
    int err = fl_open(region, &r);
    if (err)
        fail_msg("open %s: %s (%s)", region, fl_err_name(err), fl_last_error());
    fl_lease l;
    err = fl_acquire(r, key, LEASE, 5 * (int64_t)TH_S, &l);
    if (err)
        fail_msg("acquire %s: %s (%s)", key, fl_err_name(err), fl_last_error());
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    return l.token;
}

/* Open the region in a tight loop; once open, acquire "k" again and again
 * and write each token to the parent.  Killed by the parent. */
static int opener_child(void *arg, int in, int out)
{
    (void)in;
    const char *region = arg;
    fl_region *r = NULL;
    while (fl_open(region, &r) != 0)
        ; /* -EAGAIN (not ready) or -ENOENT (not created yet): at once again */
    char line[64];
    for (;;) {
        fl_lease l;
        if (fl_acquire(r, "k", LEASE, FL_WAIT_FOREVER, &l) != 0)
            continue;
        fl_release(r, &l);
        int n = snprintf(line, sizeof line, "%llu\n", (unsigned long long)l.token);
        if (write(out, line, (size_t)n) != n)
            return 0;
    }
}

/* Start fencelockd on region while `openers` clients open it in a tight
 * loop; return the smallest token any of them got (each must get some). */
static uint64_t smallest_token_while_starting(const char *region, int openers)
{
    th_child c[4];
    assert_true(openers <= 4);
    for (int i = 0; i < openers; i++)
        assert_int_equal(th_child_start(&c[i], opener_child, (void *)region), 0);
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    uint64_t smallest = UINT64_MAX;
    for (int i = 0; i < openers; i++) {
        char line[64];
        for (int k = 0; k < 20; k++) {
            if (th_recv(c[i].from_child, line, sizeof line, 15000) != 0)
                fail_msg("opener %d got no token from a started supervisor", i);
            uint64_t t = strtoull(line, NULL, 10);
            smallest = t < smallest ? t : smallest;
        }
        kill(c[i].pid, SIGKILL);
        th_child_wait(&c[i], 5000);
    }
    th_daemon_stop(&d, SIGKILL);
    return smallest;
}

/* The latest token handed out for key (the region's own record of it). */
static uint64_t latest_token(const char *region, const char *key)
{
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    fl_lock_info li;
    uint64_t t = 0;
    for (uint32_t i = 0; fl_lock_info_get(ro, i, &li) != -ERANGE; i++)
        if (strcmp(li.key, key) == 0)
            t = li.token;
    fl_close(ro);
    return t;
}

/* I1: a tmpfs reboot.  The region is gone with the old boot, the state file
 * stays; clients of the new boot open while fencelockd creates the region
 * and starts its epoch.  None may take a token at or below the old boot's
 * (before the readiness gate they got 1, 2, 3: the new file's floor before
 * the epoch was raised).  Repeated, since the window is short. */
static void test_open_during_start_after_tmpfs_reboot(void **state)
{
    (void)state;
    const char *region = strdup(th_path("tmpfs"));
    const char *boot = strdup(th_path("tmpfs.boot"));
    setenv("FENCELOCK_TEST_BOOT_ID_FILE", boot, 1);
    uint64_t newest = 0;
    for (int round = 0; round < 10; round++) {
        char id[40];
        snprintf(id, sizeof id, "%08d-1111-4111-8111-111111111111", round);
        write_boot_id(boot, id);
        uint64_t low = smallest_token_while_starting(region, 2);
        if (low <= newest)
            fail_msg("round %d: token %llu after a reboot, but %llu was issued before", round,
                     (unsigned long long)low, (unsigned long long)newest);
        newest = latest_token(region, "k");
        unlink(region); /* the tmpfs empties at the reboot */
    }
    unsetenv("FENCELOCK_TEST_BOOT_ID_FILE");
    free((void *)region);
    free((void *)boot);
}

/* I1: a host crash that reverted a region on disk to an old copy, in a new
 * boot.  Clients open while fencelockd adopts it: none may take a token the
 * old boot had issued (before the gate: ...779, ...780, ...781 again). */
static void test_open_during_start_after_disk_revert(void **state)
{
    (void)state;
    const char *region = strdup(th_path("disk"));
    const char *snapshot = strdup(th_path("disk.snapshot"));
    const char *boot = strdup(th_path("disk.boot"));
    setenv("FENCELOCK_TEST_BOOT_ID_FILE", boot, 1);
    write_boot_id(boot, "aaaaaaaa-0000-4000-8000-000000000000");
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    acquire_release(region, "k");
    th_daemon_stop(&d, SIGKILL);
    copy_file(region, snapshot); /* what reached the disk */
    uint64_t newest = 0;
    for (int round = 0; round < 10; round++) {
        /* The old boot goes on issuing tokens past the snapshot. */
        assert_int_equal(th_daemon_start(&d, region, NULL), 0);
        for (int i = 0; i < 50; i++)
            acquire_release(region, "k");
        th_daemon_stop(&d, SIGKILL);
        newest = latest_token(region, "k");
        /* Crash: the disk holds the snapshot; a new boot starts. */
        copy_file(snapshot, region);
        char id[40];
        snprintf(id, sizeof id, "%08d-2222-4222-8222-222222222222", round);
        write_boot_id(boot, id);
        uint64_t low = smallest_token_while_starting(region, 2);
        if (low <= newest)
            fail_msg("round %d: token %llu after the crash, but %llu was issued before", round,
                     (unsigned long long)low, (unsigned long long)newest);
        copy_file(snapshot, region);
        write_boot_id(boot, "aaaaaaaa-0000-4000-8000-000000000000");
    }
    unsetenv("FENCELOCK_TEST_BOOT_ID_FILE");
    free((void *)region);
    free((void *)snapshot);
    free((void *)boot);
}

/* Run fencelockd to completion; its exit status, its stderr in err. */
static int run_daemon(const char *region, const char *statef, char *err, size_t cap)
{
    char cmd[2000], errf[700];
    snprintf(errf, sizeof errf, "%s.err", region);
    snprintf(cmd, sizeof cmd, "'%s' --region '%s' --state '%s' 2>'%s'", FENCELOCKD_PATH, region,
             statef, errf);
    int st = system(cmd);
    FILE *f = fopen(errf, "r");
    size_t n = f ? fread(err, 1, cap - 1, f) : 0;
    err[n] = '\0';
    if (f)
        fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Opener that reports whether it ever opened (it never should). */
static int open_or_report(void *arg, int in, int out)
{
    (void)in;
    const char *region = arg;
    fl_region *r;
    for (;;) {
        int err = fl_open(region, &r);
        if (err == 0) {
            fl_lease l;
            int a = fl_acquire(r, "k", LEASE, 0, &l);
            char line[64];
            int n = snprintf(line, sizeof line, "opened %d %llu\n", a,
                             (unsigned long long)(a == 0 ? l.token : 0));
            if (write(out, line, (size_t)n) != n)
                return 1;
            return 0;
        }
    }
}

/* I1: fencelockd that fails to start its epoch (a corrupt state file: exit
 * 3) leaves the region unusable, even though it created it: no client
 * opens it, none takes a token from floor 1, during or after the attempt. */
static void test_failed_start_leaves_region_unusable(void **state)
{
    (void)state;
    const char *region = strdup(th_path("failed"));
    char statef[600];
    snprintf(statef, sizeof statef, "%s.state", region);
    FILE *f = fopen(statef, "w");
    assert_non_null(f);
    fputs("fencelock-state 1\nepoch 7\nchecksum 0000000000000000\n", f);
    fclose(f);
    th_child c;
    assert_int_equal(th_child_start(&c, open_or_report, (void *)region), 0);
    char err[4096];
    for (int round = 0; round < 5; round++)
        assert_int_equal(run_daemon(region, statef, err, sizeof err), 3);
    assert_non_null(strstr(err, "checksum"));
    char line[64];
    if (th_recv(c.from_child, line, sizeof line, 300) == 0)
        fail_msg("a client opened a region whose supervisor failed to start: %s", line);
    kill(c.pid, SIGKILL);
    th_child_wait(&c, 5000);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), -EAGAIN);
    assert_non_null(strstr(fl_last_error(), "not ready"));
    /* Inspection still works, and says so. */
    assert_int_equal(fl_open_readonly(region, &r), 0);
    fl_region_info info;
    assert_int_equal(fl_region_info_get(r, &info), 0);
    assert_int_equal(info.ready, 0);
    fl_close(r);
    free((void *)region);
}

/* A state file holding epoch e, with a valid checksum. */
static void write_state(const char *path, uint64_t e)
{
    char body[128], text[256];
    int n = snprintf(body, sizeof body, "fencelock-state 1\nepoch %llu\n", (unsigned long long)e);
    snprintf(text, sizeof text, "%schecksum %016llx\n", body,
             (unsigned long long)fl__checksum(body, (size_t)n));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* I1: epoch arithmetic never wraps.  A state file at 2^64-1 (it used to
 * overflow to epoch 0 and hand out token 1) or at the last epoch is refused
 * with a clear error, and the region stays unusable; one epoch below the
 * last still starts. */
static void test_epoch_never_wraps(void **state)
{
    (void)state;
    const char *region = strdup(th_path("wrap"));
    char statef[600], err[4096];
    snprintf(statef, sizeof statef, "%s.state", region);
    uint64_t spent[] = {UINT64_MAX, UINT64_MAX - 1, FL_EPOCH_MAX + 1, FL_EPOCH_MAX};
    for (size_t i = 0; i < sizeof spent / sizeof spent[0]; i++) {
        write_state(statef, spent[i]);
        assert_int_equal(run_daemon(region, statef, err, sizeof err), 3);
        if (!strstr(err, "epoch space spent"))
            fail_msg("epoch %llu: fencelockd said %s", (unsigned long long)spent[i], err);
        fl_region *r;
        assert_int_equal(fl_open(region, &r), -EAGAIN);
        /* the state file is left as it was: never rewritten lower */
        uint64_t e = 0;
        FILE *f = fopen(statef, "r");
        assert_non_null(f);
        assert_int_equal(fscanf(f, "fencelock-state 1 epoch %llu", (unsigned long long *)&e), 1);
        fclose(f);
        assert_true(e == spent[i]);
    }
    write_state(statef, FL_EPOCH_MAX - 1);
    const char *extra[] = {"--state", statef, NULL};
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, extra), 0);
    uint64_t t = acquire_release(region, "k");
    assert_true(FL_TOKEN_EPOCH(t) == FL_EPOCH_MAX);
    assert_true(t <= FL_TOKEN_MAX);
    th_daemon_stop(&d, SIGKILL);
    /* The next start would need epoch FL_EPOCH_MAX + 1: refused. */
    assert_int_equal(run_daemon(region, statef, err, sizeof err), 3);
    assert_non_null(strstr(err, "epoch space spent"));
    free((void *)region);
}

/* I11: an unreadable boot id fails closed: clients are refused (-EIO) and
 * fencelockd does not start; it never counts as "the same boot". */
static void test_unreadable_boot_id_fails_closed(void **state)
{
    (void)state;
    const char *region = strdup(th_path("noboot"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    acquire_release(region, "k");
    th_daemon_stop(&d, SIGTERM);
    setenv("FENCELOCK_TEST_BOOT_ID_FILE", th_path("no-such-boot-id"), 1);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), -EIO);
    assert_non_null(strstr(fl_last_error(), "boot"));
    assert_int_equal(fl_open_readonly(region, &r), 0);
    fl_region_info info;
    assert_int_equal(fl_region_info_get(r, &info), 0);
    assert_int_equal(info.same_boot, 0);
    assert_int_equal(info.ready, 0);
    fl_close(r);
    char statef[600], err[4096];
    snprintf(statef, sizeof statef, "%s.state", region);
    assert_int_equal(run_daemon(region, statef, err, sizeof err), 3);
    assert_non_null(strstr(err, "boot_id_unreadable"));
    unsetenv("FENCELOCK_TEST_BOOT_ID_FILE");
    free((void *)region);
}

/* Byte offset of a region section, and the region's geometry. */
struct geometry {
    uint64_t records_off, buffers_off, stride, file_size;
};
static struct geometry geometry_of(const char *path)
{
    struct fl__header h;
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
    return (struct geometry){h.records_off, h.buffers_off, h.buffer_stride, h.file_size};
}

/* Copy bytes [off, off + n) of from into to. */
static void splice_bytes(const char *from, const char *to, uint64_t off, uint64_t n)
{
    char *buf = malloc(n);
    assert_non_null(buf);
    int a = open(from, O_RDONLY), b = open(to, O_WRONLY);
    assert_true(a >= 0 && b >= 0);
    assert_int_equal(pread(a, buf, n, (off_t)off), (ssize_t)n);
    assert_int_equal(pwrite(b, buf, n, (off_t)off), (ssize_t)n);
    close(a);
    close(b);
    free(buf);
}

static void commit_value(const char *region, const char *value, uint64_t *token)
{
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "writer", LEASE, 5 * (int64_t)TH_S, &l), 0);
    assert_int_equal(fl_commit(r, &l, "rec", value, strlen(value), 0, NULL), 0);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    if (token)
        *token = l.token;
}

/* I3, I9: a region on disk comes back from a host crash with its record
 * table newer than its buffers (pages are written back in no order).  The
 * record then names a buffer that never held its value: before the buffer
 * sum, fl_read returned 0 bytes with fence 0, and a commit compared against
 * F = 0.  Now fencelockd finds it, logs it, counts it; fl_read says
 * -EBADMSG, never bytes no commit wrote; the next commit replaces it; a
 * record whose buffer is intact still reads as committed. */
static void test_torn_disk_region_records(void **state)
{
    (void)state;
    const char *region = strdup(th_path("torn"));
    const char *old = strdup(th_path("torn.old"));
    const char *boot = strdup(th_path("torn.boot"));
    setenv("FENCELOCK_TEST_BOOT_ID_FILE", boot, 1);
    write_boot_id(boot, "bbbbbbbb-0000-4000-8000-000000000000");
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    commit_value(region, "value-one", NULL);
    th_daemon_stop(&d, SIGTERM);
    copy_file(region, old); /* the buffers as the disk had them */
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    uint64_t t2 = 0;
    commit_value(region, "value-two", &t2); /* into another buffer */
    th_daemon_stop(&d, SIGKILL);

    /* The crash: record table new, buffers old. */
    struct geometry g = geometry_of(region);
    splice_bytes(old, region, g.buffers_off, g.file_size - g.buffers_off);
    write_boot_id(boot, "cccccccc-0000-4000-8000-000000000000");
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"record_unvouched\"", 1, 5000));
    assert_true(th_daemon_log_wait(&d, "\"record\":\"rec\"", 1, 5000));

    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    char buf[64];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), -EBADMSG);
    assert_non_null(strstr(fl_last_error(), "vouch"));
    /* fencelock read gives it its own exit status (5), and no bytes. */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' read --region '%s' rec >'%s.out' 2>/dev/null",
             FENCELOCK_TOOL_PATH, region, region);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 5);
    fl_region_info info;
    assert_int_equal(fl_region_info_get(r, &info), 0);
    assert_int_equal(info.records_unvouched, 1);
    fl_record_info ri;
    assert_int_equal(fl_record_info_get(r, 0, &ri), 0);
    assert_int_equal(ri.unvouched, 1);

    /* A lease of this boot replaces it (its token is above every earlier one). */
    fl_lease l;
    assert_int_equal(fl_acquire(r, "writer", LEASE, 0, &l), 0);
    assert_true(l.token > t2);
    assert_int_equal(fl_commit(r, &l, "rec", "value-three", 11, FL_COMMIT_STRICT, NULL), 0);
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(len, 11);
    assert_memory_equal(buf, "value-three", 11);
    assert_true(fence == l.token);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGKILL);

    /* One flipped data byte of an intact-looking buffer is found too. */
    struct fl__shm *m;
    assert_int_equal(fl__region_map(region, false, &m), 0);
    uint64_t cur = atomic_load(&m->records[0].cur);
    uint64_t bi = (cur >> 40) - 1;
    fl__region_unmap(m);
    int fd = open(region, O_RDWR);
    assert_true(fd >= 0);
    char c = 'X';
    assert_int_equal(pwrite(fd, &c, 1, (off_t)(g.buffers_off + bi * g.stride + 64 + 3)), 1);
    close(fd);
    write_boot_id(boot, "dddddddd-0000-4000-8000-000000000000");
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"record_unvouched\"", 2, 5000));
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), -EBADMSG);
    fl_close(r);
    th_daemon_stop(&d, SIGKILL);

    /* An intact region: nothing unvouched, values read as committed. */
    write_boot_id(boot, "eeeeeeee-0000-4000-8000-000000000000");
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    commit_value(region, "value-four", NULL);
    th_daemon_stop(&d, SIGKILL);
    write_boot_id(boot, "ffffffff-0000-4000-8000-000000000000");
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, &fence), 0);
    assert_memory_equal(buf, "value-four", 10);
    assert_int_equal(fl_region_info_get(r, &info), 0);
    assert_int_equal(info.records_unvouched, 0);
    fl_close(r);
    th_daemon_stop(&d, SIGKILL);
    unsetenv("FENCELOCK_TEST_BOOT_ID_FILE");
    free((void *)region);
    free((void *)old);
    free((void *)boot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_during_start_after_tmpfs_reboot),
        cmocka_unit_test(test_open_during_start_after_disk_revert),
        cmocka_unit_test(test_failed_start_leaves_region_unusable),
        cmocka_unit_test(test_epoch_never_wraps),
        cmocka_unit_test(test_unreadable_boot_id_fails_closed),
        cmocka_unit_test(test_torn_disk_region_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
