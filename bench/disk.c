/* SPDX-License-Identifier: MIT */
/*
 * disk.c - question 7 (issue 4): what it costs to put the whole region on
 * disk, for records that survive a reboot, against the same region on
 * tmpfs, measured in the same run.
 *
 * For each place (tmpfs: the work directory under /dev/shm; disk: a
 * directory on a disk file system, --disk-dir or one under /var/tmp) a real
 * fencelockd serves a fresh region with --flush-interval 1, so that it
 * msyncs the region every second as a user wanting durable records would
 * configure it.  One process pinned to one CPU measures:
 *   acquire+release, commit 8 B, commit 1 KiB   batched, median and p99
 *   single acquire+release                        each one timed, over more
 *                                                 than two flushes: p99.9
 *                                                 and max (the tail a flush
 *                                                 adds)
 *   msync of the region                           after dirtying 64 slots and
 *                                                 a record: what each flush
 *                                                 costs fencelockd (MS_SYNC)
 *   first acquire+release after a flush          writeback write-protects
 *                                                 the pages it wrote, so the
 *                                                 next store to each takes a
 *                                                 page fault
 * Nothing on the acquisition path calls the kernel in either place; the
 * difference is the page cache's: faults after writeback, and the flush.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "benchutil.h"
#include "fencelock.h"

#define KEY "bench/disk"
#define COMMIT_KEY "bench/disk/commit"
#define RECORD "bench/disk/record"
#define LEASE_NS (600ull * FB_S)
#define DIRTY_KEYS 64

static fl_region *R;
static fl_lease held;
static unsigned char payload[1024];

static void op_acqrel(void *ctx, size_t n)
{
    (void)ctx;
    fb_acquire_release(R, KEY, LEASE_NS, n);
}

static void op_commit(void *ctx, size_t n)
{
    size_t len = *(const size_t *)ctx;
    for (size_t i = 0; i < n; i++) {
        payload[0] = (unsigned char)i;
        if (fl_commit(R, &held, RECORD, payload, len, 0, NULL) != 0)
            fb_die("commit: %s", fl_last_error());
    }
}

static double one_acqrel(void)
{
    uint64_t t0 = fb_now_ns();
    op_acqrel(NULL, 1);
    return (double)(fb_now_ns() - t0);
}

/* The file system type of dir, for the table. */
static const char *fs_name(const char *dir)
{
    struct statfs sf;
    if (statfs(dir, &sf) != 0)
        return "?";
    switch ((unsigned long)sf.f_type) {
    case 0x01021994ul: return "tmpfs";
    case 0xEF53ul: return "ext4";
    case 0x58465342ul: return "xfs";
    case 0x9123683Eul: return "btrfs";
    default: return "other";
    }
}

static void measure(const char *place, const char *dir, double secs)
{
    char region[600], label[700];
    snprintf(region, sizeof region, "%s/disk-bench.region", dir);
    snprintf(label, sizeof label, "%s (%s)", place, fs_name(dir));
    fb_region_remove(region);
    fb_daemon d;
    static const char *const extra[] = {"--flush-interval", "1", NULL};
    if (fb_daemon_start(&d, region, extra, 30) != 0)
        fb_die("cannot start fencelockd on %s", region);
    R = fb_open(region, true);
    if (fl_acquire(R, COMMIT_KEY, LEASE_NS, 0, &held) != 0)
        fb_die("acquire: %s", fl_last_error());
    fb_pin(0); /* after the start: fencelockd keeps every CPU */

    /* batched costs */
    uint64_t part = (uint64_t)(secs / 5 * 1e9);
    fb_stats st = fb_measure(op_acqrel, NULL, 0, 50 * FB_MS, part, 200000, NULL, NULL);
    fb_result(label, "acquire+release median", st.median, "ns");
    fb_result(label, "acquire+release p99", st.p99, "ns");
    size_t len8 = 8, len1k = sizeof payload;
    st = fb_measure(op_commit, &len8, 0, 50 * FB_MS, part, 200000, NULL, NULL);
    fb_result(label, "commit 8 B median", st.median, "ns");
    st = fb_measure(op_commit, &len1k, 0, 50 * FB_MS, part, 200000, NULL, NULL);
    fb_result(label, "commit 1 KiB median", st.median, "ns");

    /* the tail across fencelockd's flushes: each operation timed alone
     * for at least 2.2 s (two flushes at --flush-interval 1) */
    fb_samples s;
    fb_samples_init(&s);
    uint64_t single_ns = part * 2 > 2200 * FB_MS ? part * 2 : 2200 * FB_MS;
    uint64_t until = fb_now_ns() + single_ns;
    while (fb_now_ns() < until)
        fb_samples_add(&s, one_acqrel());
    fb_result(label, "single acquire+release p99.9", fb_quantile(&s, 0.999), "ns");
    fb_result(label, "single acquire+release max", fb_quantile(&s, 1.0), "ns");
    fb_samples_free(&s);

    /* one flush as fencelockd makes it, and the first store after it */
    int fd = open(region, O_RDWR | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0)
        fb_die("open %s: %s", region, strerror(errno));
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        fb_die("mmap %s: %s", region, strerror(errno));
    close(fd);
    fb_samples flush, first;
    fb_samples_init(&flush);
    fb_samples_init(&first);
    int reps = fb_opt.full ? 100 : 20;
    for (int i = 0; i < reps && fb_budget_left() > 1.0; i++) {
        for (int k = 0; k < DIRTY_KEYS; k++) {
            char key[32];
            snprintf(key, sizeof key, "bench/disk/dirty/%d", k);
            fl_lease l;
            if (fl_acquire(R, key, LEASE_NS, 0, &l) != 0 || fl_release(R, &l) != 0)
                fb_die("acquire/release %s: %s", key, fl_last_error());
        }
        op_commit(&len8, 1);
        uint64_t t0 = fb_now_ns();
        if (msync(map, (size_t)sb.st_size, MS_SYNC) != 0)
            fb_die("msync: %s", strerror(errno));
        fb_samples_add(&flush, (double)(fb_now_ns() - t0));
        fb_samples_add(&first, one_acqrel());
    }
    munmap(map, (size_t)sb.st_size);
    fb_result(label, "msync of the region median", fb_quantile(&flush, 0.5), "ns");
    fb_result(label, "msync p99", fb_quantile(&flush, 0.99), "ns");
    fb_result(label, "first acquire+release after a flush median", fb_quantile(&first, 0.5),
              "ns");
    fb_samples_free(&flush);
    fb_samples_free(&first);

    fb_result(label, "region file", (double)sb.st_size / 1e6, "MB");
    fl_release(R, &held);
    fl_close(R);
    fb_daemon_stop(&d);
    fb_region_remove(region);
    fb_unpin();
}

int main(int argc, char **argv)
{
    fb_init(argc, argv, 7, "disk");
    char own[64] = "";
    const char *disk = fb_opt.disk_dir;
    if (!disk) {
        snprintf(own, sizeof own, "/var/tmp/flbench-disk.XXXXXX");
        if (!mkdtemp(own))
            fb_die("mkdtemp %s: %s", own, strerror(errno));
        disk = own;
    }
    double secs = fb_opt.full ? 8.0 : 2.0;
    measure("region in memory", fb_opt.dir, secs);
    measure("region on disk", disk, secs);
    if (own[0])
        rmdir(own);
    fb_note("one process on one CPU; fencelockd with --flush-interval 1 in both places; "
            "single operations timed one by one for at least 2.2 s (two flushes); msync "
            "(MS_SYNC) of the whole region after dirtying %d lock slots and a record (what "
            "fencelockd does at each flush)",
            DIRTY_KEYS);
    fb_note("disk directory %s", disk);
    return 0;
}
