/* SPDX-License-Identifier: MIT */
/*
 * rec_pointer.c - the fenced-pointer pattern as a test.  Objects are files
 * named objects/<token>.bin under the test directory, written (tmp + rename)
 * before the pointer record is committed with fl_commit_u64.  A stale writer,
 * paused with SIGSTOP across its lease's expiry, writes its own object file
 * but its pointer commit is rejected, so a reader that resolves the pointer
 * always gets the newer object.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rec_common.h"

#define KEY "render/image-52"
#define PTR "render/image-52/current"
#define OBJ_LEN 3000u
#define TAG_STALE 0x5A5Au
#define TAG_NEW 0x4E45u

static const char *region;

static void obj_path(char *buf, size_t cap, uint64_t token)
{
    snprintf(buf, cap, "%s/objects/%llu.bin", th_tmpdir(), (unsigned long long)token);
}

/* Write objects/<token>.bin atomically (tmp + rename).  0 or -1. */
static int obj_write(uint64_t token, uint32_t tag)
{
    char path[600], tmp[700];
    obj_path(path, sizeof path, token);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    unsigned char data[OBJ_LEN];
    pl_make(data, sizeof data, token, tag);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, data, sizeof data);
    if (n != (ssize_t)sizeof data || fsync(fd) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return rename(tmp, path);
}

/* Read objects/<token>.bin and verify it; its tag, or 0 on any failure. */
static uint32_t obj_read(uint64_t token)
{
    char path[600];
    obj_path(path, sizeof path, token);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    unsigned char data[OBJ_LEN + 1];
    ssize_t n = read(fd, data, sizeof data);
    close(fd);
    uint32_t tag = 0;
    if (n != (ssize_t)OBJ_LEN || pl_check(data, OBJ_LEN, token, &tag) != NULL)
        return 0;
    return tag;
}

/* The stale writer: acquires, says ready (the parent stops it), and when
 * told, writes its object (unless it wrote it before the pause) and commits
 * the pointer. */
static int stale_writer(void *arg, int in, int out)
{
    int write_before_pause = *(int *)arg;
    fl_region *r = rc_open(region);
    fl_lease l;
    if (fl_acquire(r, KEY, 200 * TH_MS, 10 * (int64_t)TH_S, &l) != 0)
        return 1;
    if (write_before_pause && obj_write(l.token, TAG_STALE) != 0)
        return 2;
    th_sendf(out, "token %llu", (unsigned long long)l.token);
    th_expect(in, "go", 60000); /* stopped and continued around here */
    if (!write_before_pause && obj_write(l.token, TAG_STALE) != 0)
        return 3;
    uint64_t acc = 0;
    int rc = fl_commit_u64(r, &l, PTR, l.token, 0, &acc);
    th_sendf(out, "commit %d %llu", rc, (unsigned long long)acc);
    fl_close(r);
    return 0;
}

/* The newer writer: waits for the key (the stale lease must run out), writes
 * its object, then commits the pointer to it. */
static int new_writer(void *arg, int in, int out)
{
    (void)arg;
    (void)in;
    fl_region *r = rc_open(region);
    fl_lease l;
    int rc = fl_acquire(r, KEY, 30 * TH_S, 30 * (int64_t)TH_S, &l);
    if (rc != 0)
        return 1;
    if (obj_write(l.token, TAG_NEW) != 0)
        return 2;
    uint64_t acc = 0;
    rc = fl_commit_u64(r, &l, PTR, l.token, 0, &acc);
    th_sendf(out, "commit %llu %u %d %llu", (unsigned long long)l.token, l.flags, rc,
             (unsigned long long)acc);
    fl_release(r, &l);
    fl_close(r);
    return 0;
}

/* Resolves the pointer until told to stop: every resolution must find a
 * complete object of the newest writer, never the stale one's. */
static int resolver(void *arg, int in, int out)
{
    (void)arg;
    fl_region *r = rc_open(region);
    unsigned long long resolved = 0, absent = 0, bad = 0, stale = 0, backwards = 0;
    uint64_t last = 0;
    th_send(out, "running");
    for (bool stop = false;;) {
        for (int i = 0; i < 64; i++) {
            uint64_t v = 0, fence = 0;
            int rc = fl_read_u64(r, PTR, &v, &fence);
            if (rc == -ENOENT) {
                absent++;
                continue;
            }
            if (rc != 0 || v != fence) {
                bad++;
                continue;
            }
            if (v < last)
                backwards++;
            last = v;
            uint32_t tag = obj_read(v);
            if (tag == TAG_NEW)
                resolved++;
            else if (tag == TAG_STALE)
                stale++;
            else
                bad++;
        }
        if (stop)
            break; /* one whole batch after "stop": the final pointer was resolved */
        struct pollfd p = {.fd = in, .events = POLLIN};
        stop = poll(&p, 1, 0) > 0;
    }
    th_sendf(out, "resolved %llu absent %llu bad %llu stale %llu backwards %llu", resolved,
             absent, bad, stale, backwards);
    fl_close(r);
    return 0;
}

/* I2 (fenced pointer): two rounds, the stale writer writing its object after
 * and before its pause. */
static void test_fenced_pointer(void **state)
{
    (void)state;
    th_daemon d;
    rc_daemon(&d, "pointer", NULL);
    region = d.region;
    char objects[600];
    snprintf(objects, sizeof objects, "%s/objects", th_tmpdir());
    assert_int_equal(mkdir(objects, 0700), 0);

    th_child rd;
    rc_child(&rd, resolver, NULL);
    char buf[256];
    th_expect(rd.from_child, "running", 20000);

    fl_region *r = rc_open(region);
    for (int round = 0; round < 2; round++) {
        int before = round; /* round 1: the stale object exists before the pause */
        th_child a;
        rc_child(&a, stale_writer, &before);
        unsigned long long ta;
        assert_int_equal(sscanf(rc_recv(a.from_child, buf, sizeof buf, 20000), "token %llu", &ta),
                         1);
        assert_int_equal(kill(a.pid, SIGSTOP), 0);
        assert_true(th_wait_stopped(a.pid, 20000));

        th_child b;
        rc_child(&b, new_writer, NULL);
        unsigned long long tb, bacc;
        unsigned flags;
        int brc;
        assert_int_equal(sscanf(rc_recv(b.from_child, buf, sizeof buf, 30000),
                                "commit %llu %u %d %llu", &tb, &flags, &brc, &bacc),
                         4);
        assert_true(tb > ta); /* I1 */
        assert_true(flags & FL_LEASE_EXPIRED);
        assert_int_equal(brc, 0);
        assert_int_equal(bacc, tb);
        assert_int_equal(rc_child_exit(&b, 20000), 0);

        assert_int_equal(kill(a.pid, SIGCONT), 0);
        th_send(a.to_child, "go");
        int arc;
        unsigned long long aacc;
        assert_int_equal(sscanf(rc_recv(a.from_child, buf, sizeof buf, 20000), "commit %d %llu",
                                &arc, &aacc),
                         2);
        assert_int_equal(arc, -ESTALE); /* I2 */
        assert_int_equal(aacc, tb);
        assert_int_equal(rc_child_exit(&a, 20000), 0);

        /* the stale object was written, harmlessly: nobody points at it */
        assert_int_equal(obj_read(ta), TAG_STALE);
        uint64_t v = 0, fence = 0;
        assert_int_equal(fl_read_u64(r, PTR, &v, &fence), 0);
        assert_int_equal(v, tb);
        assert_int_equal(fence, tb);
        assert_int_equal(obj_read(v), TAG_NEW);
    }
    th_send(rd.to_child, "stop");
    unsigned long long resolved, absent, bad, stale, backwards;
    assert_int_equal(sscanf(rc_recv(rd.from_child, buf, sizeof buf, 20000),
                            "resolved %llu absent %llu bad %llu stale %llu backwards %llu",
                            &resolved, &absent, &bad, &stale, &backwards),
                     5);
    assert_int_equal(rc_child_exit(&rd, 20000), 0);
    assert_int_equal(bad, 0);
    assert_int_equal(stale, 0);
    assert_int_equal(backwards, 0);
    assert_true(resolved >= 64);
    fl_record_info info;
    assert_true(rc_record_info(r, PTR, &info));
    assert_int_equal(info.rejections, 2);
    assert_int_equal(info.commits, 2);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fenced_pointer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
