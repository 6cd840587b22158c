/* SPDX-License-Identifier: MIT */
/*
 * commit.c - question 3: what a fenced commit and a read cost.
 *
 * Sizes: 8 bytes, 256 bytes, 1 KiB (the default record size) and 64 KiB
 * (the largest record size a region can have; this region is made with
 * --record-size 65536).  The measuring process is pinned to one CPU.
 *   commit, uncontended          fl_commit by the lease holder, nobody else
 *   commit, 1 reader + 1 writer  meanwhile, on the other CPU, one process
 *                                reads the same record in a loop and one
 *                                commits records of another key in a loop
 *   read, uncontended            fl_read of the record
 *   read, 1 writer               while another process commits that record
 * Baseline, in the same run: SQLite's conditional UPDATE with a fence column,
 *   UPDATE rec SET value = ?, fence = ? WHERE id = ? AND fence <= ?
 * in autocommit (one transaction per commit, like fl_commit), WAL mode, with
 * synchronous=NORMAL and =FULL, the database on a disk-backed /tmp; and its
 * SELECT as the read baseline.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"
#include "fencelock.h"

#ifdef FB_HAVE_SQLITE
#include <sqlite3.h>
#endif

#define KEY "bench/commit"
#define OTHER_KEY "bench/commit-other"
#define RW_KEY "bench/read-writer"
#define LEASE_NS (600ull * FB_S)
#define MAXSIZE 65536

static const size_t sizes[] = {8, 256, 1024, 65536};
enum { NS = sizeof sizes / sizeof sizes[0] };

static char region[600];
static fl_region *R;
static fl_lease lease;
static unsigned char *payload, *readbuf;
static _Atomic int *stop_flag;

struct cctx {
    const char *record;
    size_t len;
};

static void op_commit(void *p, size_t n)
{
    struct cctx *c = p;
    for (size_t i = 0; i < n; i++) {
        payload[0] = (unsigned char)i;
        int e = fl_commit(R, &lease, c->record, payload, c->len, 0, NULL);
        if (e)
            fb_die("commit: %s", fl_last_error());
    }
}

static void op_read(void *p, size_t n)
{
    struct cctx *c = p;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        uint64_t fence;
        int e = fl_read(R, c->record, readbuf, MAXSIZE, &len, &fence);
        if (e)
            fb_die("read: %s", fl_last_error());
    }
}

/* A helper process on CPU 0: reads `record` or commits to it under `key`
 * until the stop flag is set. */
static pid_t helper(bool writer, const char *key, const char *record, size_t len)
{
    pid_t pid = fb_fork();
    if (pid < 0)
        fb_die("fork: %s", strerror(errno));
    if (pid > 0)
        return pid;
    fb_pin(0);
    fl_region *r = fb_open(region, true);
    unsigned char *buf = calloc(1, MAXSIZE);
    fl_lease l;
    if (writer && fl_acquire(r, key, LEASE_NS, 5 * FB_S, &l) != 0)
        fb_die("helper acquire: %s", fl_last_error());
    uint64_t i = 0;
    while (!atomic_load_explicit(stop_flag, memory_order_relaxed)) {
        size_t got;
        uint64_t fence;
        int e;
        if (writer) {
            buf[0] = (unsigned char)i++;
            e = fl_commit(r, &l, record, buf, len, 0, NULL);
        } else {
            e = fl_read(r, record, buf, MAXSIZE, &got, &fence);
        }
        if (e)
            fb_die("helper: %s", fl_last_error());
    }
    if (writer)
        fl_release(r, &l);
    fl_close(r);
    _exit(0);
}

static void helpers_stop(pid_t *pids, int n)
{
    atomic_store(stop_flag, 1);
    for (int i = 0; i < n; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fb_die("helper failed (status %#x)", st);
    }
    atomic_store(stop_flag, 0);
}

#ifdef FB_HAVE_SQLITE
struct sqctx {
    sqlite3 *db;
    sqlite3_stmt *upd, *sel;
    size_t len;
    int64_t token;
};

static void sq_check(sqlite3 *db, int rc, const char *what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
        fb_die("sqlite %s: %s", what, sqlite3_errmsg(db));
}

static void op_sq_update(void *p, size_t n)
{
    struct sqctx *c = p;
    for (size_t i = 0; i < n; i++) {
        payload[0] = (unsigned char)i;
        sqlite3_bind_blob(c->upd, 1, payload, (int)c->len, SQLITE_STATIC);
        sqlite3_bind_int64(c->upd, 2, c->token);
        sqlite3_bind_int64(c->upd, 3, (sqlite3_int64)c->len);
        sq_check(c->db, sqlite3_step(c->upd), "update");
        sqlite3_reset(c->upd);
        if (sqlite3_changes(c->db) != 1)
            fb_die("sqlite: the conditional update changed %d rows", sqlite3_changes(c->db));
    }
}

static void op_sq_select(void *p, size_t n)
{
    struct sqctx *c = p;
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(c->sel, 1, (sqlite3_int64)c->len);
        if (sqlite3_step(c->sel) != SQLITE_ROW)
            fb_die("sqlite select: %s", sqlite3_errmsg(c->db));
        int bytes = sqlite3_column_bytes(c->sel, 0);
        memcpy(readbuf, sqlite3_column_blob(c->sel, 0), (size_t)bytes);
        (void)sqlite3_column_int64(c->sel, 1);
        sqlite3_reset(c->sel);
    }
}
#endif

static char sqlite_dir[512];

static void remove_sqlite_dir(void)
{
    if (sqlite_dir[0]) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", sqlite_dir);
        if (system(cmd) != 0) { /* best effort */
        }
    }
}

int main(int argc, char **argv)
{
    fb_init(argc, argv, 3, "commit");
    fb_pin(1);
    snprintf(region, sizeof region, "%s", fb_path("q3.region"));
    static const char *const extra[] = {"--records", "64", "--record-size", "65536",
                                        "--spare-buffers", "64", NULL};
    fb_daemon d;
    if (fb_daemon_start(&d, region, extra, 30) != 0)
        fb_die("cannot start fencelockd");
    R = fb_open(region, true);
    stop_flag = fb_shared(4096);
    payload = calloc(1, MAXSIZE);
    readbuf = calloc(1, MAXSIZE);
    for (size_t i = 0; i < MAXSIZE; i++)
        payload[i] = (unsigned char)(i * 7);
    if (fl_acquire(R, KEY, LEASE_NS, 5 * FB_S, &lease) != 0)
        fb_die("acquire: %s", fl_last_error());

    uint64_t per = (fb_opt.full ? 2000 : 250) * FB_MS;
    /* 4 fencelock cases + up to 4 SQLite cases per size */
    double need = NS * 8 * ((double)per / 1e9 + 0.1) + 2;
    if (fb_budget_left() < need)
        per = (uint64_t)((fb_budget_left() - 2) / (NS * 8) / 1.3 * 1e9);
    uint64_t warm = per / 10;
    fb_stats fl_commit_st[NS];
    char names[NS][64], other[NS][64], rw[NS][64];
    for (int s = 0; s < NS; s++) {
        snprintf(names[s], sizeof names[s], "q3/record-%zu", sizes[s]);
        snprintf(other[s], sizeof other[s], "q3/other-%zu", sizes[s]);
        snprintf(rw[s], sizeof rw[s], "q3/read-writer-%zu", sizes[s]);
        struct cctx c = {names[s], sizes[s]};
        char cse[128], raw[64];
        fb_samples smp;

        fb_samples_init(&smp);
        snprintf(cse, sizeof cse, "fencelock commit %zu B; uncontended", sizes[s]);
        fl_commit_st[s] = fb_measure(op_commit, &c, 0, warm, per, 1000000, &smp, NULL);
        fb_result_stats(cse, &fl_commit_st[s], "ns");
        snprintf(raw, sizeof raw, "q3_commit_%zu", sizes[s]);
        fb_raw_cdf(raw, &smp);
        fb_samples_free(&smp);

        pid_t h[2] = {helper(false, NULL, names[s], sizes[s]),
                      helper(true, OTHER_KEY, other[s], sizes[s])};
        usleep(20000);
        fb_samples_init(&smp);
        snprintf(cse, sizeof cse, "fencelock commit %zu B; 1 reader + 1 writer", sizes[s]);
        fb_stats st = fb_measure(op_commit, &c, 0, warm, per, 1000000, &smp, NULL);
        fb_result_stats(cse, &st, "ns");
        snprintf(raw, sizeof raw, "q3_commit_busy_%zu", sizes[s]);
        fb_raw_cdf(raw, &smp);
        fb_samples_free(&smp);
        helpers_stop(h, 2);

        snprintf(cse, sizeof cse, "fencelock read %zu B; uncontended", sizes[s]);
        st = fb_measure(op_read, &c, 0, warm, per, 1000000, NULL, NULL);
        fb_result_stats(cse, &st, "ns");

        pid_t w = helper(true, RW_KEY, rw[s], sizes[s]);
        usleep(20000);
        struct cctx rc = {rw[s], sizes[s]};
        snprintf(cse, sizeof cse, "fencelock read %zu B; 1 writer", sizes[s]);
        st = fb_measure(op_read, &rc, 0, warm, per, 1000000, NULL, NULL);
        fb_result_stats(cse, &st, "ns");
        helpers_stop(&w, 1);
    }
    fb_note("per-operation times over batches; the measuring process on one CPU, helpers on "
            "the other; region on %s", fb_opt.dir);

#ifdef FB_HAVE_SQLITE
    if (fb_opt.sqlite_dir) {
        snprintf(sqlite_dir, sizeof sqlite_dir, "%s", fb_opt.sqlite_dir);
    } else {
        snprintf(sqlite_dir, sizeof sqlite_dir, "/tmp/flbench-sqlite.XXXXXX");
        if (!mkdtemp(sqlite_dir))
            fb_die("mkdtemp: %s", strerror(errno));
        atexit(remove_sqlite_dir);
    }
    char dbpath[600];
    snprintf(dbpath, sizeof dbpath, "%s/fenced.db", sqlite_dir);
    sqlite3 *db;
    if (sqlite3_open(dbpath, &db) != SQLITE_OK)
        fb_die("sqlite open %s: %s", dbpath, sqlite3_errmsg(db));
    sq_check(db,
             sqlite3_exec(db,
                          "PRAGMA journal_mode=WAL;"
                          "CREATE TABLE IF NOT EXISTS rec(id INTEGER PRIMARY KEY,"
                          " fence INTEGER NOT NULL, value BLOB NOT NULL);",
                          NULL, NULL, NULL),
             "schema");
    for (int s = 0; s < NS; s++) {
        char sql[200];
        snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO rec VALUES(%zu, 0, zeroblob(%zu))",
                 sizes[s], sizes[s]);
        sq_check(db, sqlite3_exec(db, sql, NULL, NULL, NULL), "insert");
    }
    struct sqctx sq = {.db = db, .token = (int64_t)lease.token};
    sq_check(db,
             sqlite3_prepare_v2(db,
                                "UPDATE rec SET value = ?1, fence = ?2 "
                                "WHERE id = ?3 AND fence <= ?2",
                                -1, &sq.upd, NULL),
             "prepare");
    sq_check(db, sqlite3_prepare_v2(db, "SELECT value, fence FROM rec WHERE id = ?1", -1,
                                    &sq.sel, NULL),
             "prepare");
    fb_stats sq_normal[NS];
    static const char *const modes[] = {"NORMAL", "FULL"};
    for (int m = 0; m < 2; m++) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", modes[m]);
        sq_check(db, sqlite3_exec(db, pragma, NULL, NULL, NULL), "pragma");
        for (int s = 0; s < NS; s++) {
            sq.len = sizes[s];
            char cse[128], raw[64];
            fb_samples smp;
            fb_samples_init(&smp);
            snprintf(cse, sizeof cse, "SQLite conditional UPDATE %zu B; WAL synchronous=%s",
                     sizes[s], modes[m]);
            fb_stats st = fb_measure(op_sq_update, &sq, 1, warm, per, 1000000, &smp, NULL);
            fb_result_stats(cse, &st, "ns");
            snprintf(raw, sizeof raw, "q3_sqlite_%s_%zu", modes[m], sizes[s]);
            fb_raw_cdf(raw, &smp);
            fb_samples_free(&smp);
            if (m == 0) {
                sq_normal[s] = st;
                snprintf(cse, sizeof cse, "SQLite SELECT %zu B", sizes[s]);
                st = fb_measure(op_sq_select, &sq, 0, warm, per, 1000000, NULL, NULL);
                fb_result_stats(cse, &st, "ns");
            }
        }
    }
    sqlite3_finalize(sq.upd);
    sqlite3_finalize(sq.sel);
    sqlite3_close(db);
    fb_note("SQLite %s; database on %s; one autocommit transaction per UPDATE",
            sqlite3_libversion(), sqlite_dir);
#endif

    FILE *f = fb_raw_open("q3_sizes.dat");
    if (f) {
        fprintf(f, "# bytes fencelock_commit_median sqlite_normal_median (ns)\n");
        for (int s = 0; s < NS; s++)
#ifdef FB_HAVE_SQLITE
            fprintf(f, "%zu %.6g %.6g\n", sizes[s], fl_commit_st[s].median, sq_normal[s].median);
#else
            fprintf(f, "%zu %.6g nan\n", sizes[s], fl_commit_st[s].median);
#endif
        fclose(f);
    }
    fb_target("8-byte fenced commit at most 50 ns median", "fencelock commit 8 B median",
              fl_commit_st[0].median, "ns", "<= 50", fl_commit_st[0].median <= 50);
#ifdef FB_HAVE_SQLITE
    for (int s = 0; s < NS; s++) {
        char t[160];
        snprintf(t, sizeof t,
                 "%zu-byte commit at least 100x faster than SQLite (synchronous=NORMAL)",
                 sizes[s]);
        double ratio = sq_normal[s].median / fl_commit_st[s].median;
        fb_target(t, "SQLite / fencelock (median)", ratio, "x", ">= 100", ratio >= 100);
    }
#else
    fb_note("built without SQLite: no baseline, the 100x targets are not measured");
#endif
    fl_release(R, &lease);
    fl_close(R);
    fb_daemon_stop(&d);
    fb_region_remove(region);
    return 0;
}
