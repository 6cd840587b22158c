/* SPDX-License-Identifier: MIT */
/*
 * benchutil.h - what the benchmark programs share besides timing: their
 * command line, the CSV they append results and target verdicts to, raw
 * data files for the plots, a real fencelockd started on a private region
 * and awaited through the systemd notify protocol, and shared memory.
 *
 * Every program takes:
 *   --quick | --full   how long and how many (default --quick)
 *   --dir DIR          private work directory (regions, lock files); created
 *                      under /dev/shm (else /tmp) and removed if not given
 *   --csv FILE         append results here (default: stdout)
 *   --raw DIR          write plot data here (default: none)
 *   --budget SECONDS   stop measuring early to finish within this time
 *   --fencelockd PATH  the supervisor to start (default: the one built)
 *   --sqlite-dir DIR   fb_commit: where SQLite's database goes
 *   --disk-dir DIR     fb_disk: where the disk-backed region goes
 *   --huge-pages       fb_scale: also measure the keys on a region served with
 *                      fencelockd --huge-pages, beside the plain one (put
 *                      --dir on a tmpfs mounted with huge=within_size)
 */
#ifndef FB_BENCHUTIL_H
#define FB_BENCHUTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fencelock.h"
#include "timing.h"

struct fb_opts {
    bool full;
    const char *dir;
    const char *csv;
    const char *raw;
    double budget_s;
    const char *fencelockd;
    const char *sqlite_dir; /* commit: where the SQLite database goes (default: a /tmp dir) */
    const char *disk_dir;   /* disk: where the disk-backed region goes (default: a /var/tmp dir) */
    bool huge_pages;        /* scale: a second keys region with fencelockd --huge-pages */
};

extern struct fb_opts fb_opt;

/* Parse the common options (exits on bad usage); question is the number this
 * program answers, name its file name. */
void fb_init(int argc, char **argv, int question, const char *name);
/* Seconds left of --budget (a large number if none was given). */
double fb_budget_left(void);
/* dir/name in a static per-call-site buffer: copy it. */
const char *fb_path(const char *name);

/* One result row: question, case, metric, value, unit. */
void fb_result(const char *cse, const char *metric, double value, const char *unit);
/* Results of a statistics set: median and p99 (and n). */
void fb_result_stats(const char *cse, const fb_stats *st, const char *unit);
/* One target row: what is measured (value, unit), the limit as text, verdict. */
void fb_target(const char *target, const char *measured, double value, const char *unit,
               const char *limit, bool pass);
/* A note row (free text, shown under the question's table). */
void fb_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Write the CDF of s (at most 400 points: value quantile) to raw/name.dat. */
void fb_raw_cdf(const char *name, fb_samples *s);
/* Open raw/name for writing (NULL without --raw). */
void *fb_raw_open(const char *name);

/* A fencelockd on a private region. */
typedef struct fb_daemon {
    pid_t pid;
    char region[512];
} fb_daemon;
/* Start it with extra options (NULL-terminated, may be NULL); its state file
 * and log go beside the region.  Waits for READY=1 (up to timeout_s).
 * Returns 0 or -1. */
int fb_daemon_start(fb_daemon *d, const char *region, const char *const *extra, int timeout_s);
void fb_daemon_stop(fb_daemon *d);
/* Remove the region and the files beside it. */
void fb_region_remove(const char *region);

/* Shared anonymous memory (MAP_SHARED), zeroed; exits on failure. */
void *fb_shared(size_t bytes);
void fb_unshare(void *p, size_t bytes);

/* fork() a child that dies with its parent.  Returns like fork(). */
pid_t fb_fork(void);
/* The one-letter state of a process from /proc (R, S, T, ...), '?' if gone. */
char fb_proc_state(pid_t pid);
/* Resident and resident-shared memory of this process, in bytes. */
void fb_self_rss(uint64_t *rss, uint64_t *shmem);

/* fl_open the region (exits on failure); registered with its supervisor
 * unless that is not required. */
struct fl_region;
struct fl_region *fb_open(const char *region, bool need_registered);

/* Bytes of this process's mapping of the file at path mapped by huge pages
 * (ShmemPmdMapped and FilePmdMapped in /proc/self/smaps). */
uint64_t fb_pmd_mapped(const char *path);

/* Exit with a message (benchmarks do not recover from setup failures). */
void fb_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* n x (fl_acquire of key without waiting + fl_release): the uncontended
 * pair that questions 1 and 7 time.  Inline, so the timing has no call of
 * ours around the library's. */
static inline void fb_acquire_release(struct fl_region *r, const char *key, uint64_t lease_ns,
                                      size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fl_lease l;
        if (fl_acquire(r, key, lease_ns, 0, &l) != 0)
            fb_die("acquire: %s", fl_last_error());
        if (fl_release(r, &l) != 0)
            fb_die("release: %s", fl_last_error());
    }
}

/* One-byte messages between a benchmark's processes over pipes: fb_put
 * exits the process if the byte cannot be written; fb_get returns the byte,
 * or -1 at end of file (the other side is gone). */
void fb_put(int fd, char c);
int fb_get(int fd);

/* Progress on stderr. */
void fb_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
