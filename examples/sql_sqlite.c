/* SPDX-License-Identifier: MIT */
/*
 * sql_sqlite.c - the fenced write to a SQL database, with SQLite.
 *
 * The lock tells a process it may work on a row; it cannot stop a holder that
 * was paused past its lease from writing afterwards.  The database must
 * refuse that write itself.  Each fenced row carries the token of the
 * acquisition that last wrote it, and every write is the conditional update
 *
 *     UPDATE fenced_values SET value = :value, fence_token = :token
 *      WHERE name = :name AND fence_token <= :token
 *
 * (with --strict: fence_token < :token, one write per acquisition).  The
 * comparison and the write are one statement, so the database does them
 * atomically.  Zero rows changed means a newer holder has written: ownership
 * is lost.  The writer stops and reports it; it never retries with the same
 * token.  To go on it must acquire again and recompute from the fresh row.
 *
 * Usage:
 *   sql_sqlite init DB NAME
 *       create the table and the row NAME (fence_token 0) if missing
 *   sql_sqlite write [--lease-ms N] [--strict] KEY DB NAME < VALUE
 *       acquire KEY (waiting as long as it takes), print "acquired KEY: token T",
 *       read the new value from standard input (the work done under the lock),
 *       and write it to row NAME, fenced by the token
 *   sql_sqlite read DB NAME
 *       print the row: VALUE <tab> FENCE_TOKEN
 *
 * The region is $FENCELOCK_REGION, else the default.  Exit status: 0 written;
 * 1 error (no such row: run init first; database error); 2 bad usage;
 * 3 region error; 76 ownership lost (a newer token has written the row; the
 * same status as `fencelock run` uses for a lost lease).
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fencelock.h"

#define EXIT_USAGE 2
#define EXIT_REGION 3
#define EXIT_OWNERSHIP_LOST 76

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS fenced_values ("
    "  name TEXT PRIMARY KEY,"
    "  value TEXT NOT NULL,"
    "  fence_token INTEGER NOT NULL DEFAULT 0)"; /* 0: no holder has written yet */

static int usage(void)
{
    fputs("usage: sql_sqlite init DB NAME\n"
          "       sql_sqlite write [--lease-ms N] [--strict] KEY DB NAME < VALUE\n"
          "       sql_sqlite read DB NAME\n",
          stderr);
    return EXIT_USAGE;
}

static sqlite3 *open_db(const char *path)
{
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        fprintf(stderr, "sql_sqlite: %s: %s\n", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return NULL;
    }
    /* Writers queue for the database lock instead of failing at once. */
    sqlite3_busy_timeout(db, 10000);
    return db;
}

static int init(const char *dbpath, const char *name)
{
    sqlite3 *db = open_db(dbpath);
    if (!db)
        return 1;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_exec(db, schema, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(
            db, "INSERT OR IGNORE INTO fenced_values (name, value, fence_token) VALUES (?1, '', 0)",
            -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    if (rc != SQLITE_OK)
        fprintf(stderr, "sql_sqlite: init: %s\n", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : 1;
}

/* The row's fence_token, or -1 if there is no such row (or on error). */
static int64_t row_token(sqlite3 *db, const char *name)
{
    sqlite3_stmt *st;
    int64_t token = -1;
    if (sqlite3_prepare_v2(db, "SELECT fence_token FROM fenced_values WHERE name = ?1", -1, &st,
                           NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW)
        token = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return token;
}

/* The fenced write: 0 written, EXIT_OWNERSHIP_LOST, or 1. */
static int fenced_update(sqlite3 *db, const char *name, const char *value, uint64_t token,
                         bool strict)
{
    const char *sql = strict ? "UPDATE fenced_values SET value = ?1, fence_token = ?2"
                               " WHERE name = ?3 AND fence_token < ?2"
                             : "UPDATE fenced_values SET value = ?1, fence_token = ?2"
                               " WHERE name = ?3 AND fence_token <= ?2";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "sql_sqlite: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    sqlite3_bind_text(st, 1, value, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)token); /* tokens fit a signed 64-bit integer */
    sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "sql_sqlite: update: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    if (sqlite3_changes(db) == 1) {
        printf("written with token %" PRIu64 "\n", token);
        return 0;
    }
    /* Zero rows: either a newer holder wrote the row, or there is no row. */
    int64_t current = row_token(db, name);
    if (current < 0) {
        fprintf(stderr, "sql_sqlite: no row '%s' (run: sql_sqlite init DB %s)\n", name, name);
        return 1;
    }
    printf("ownership lost: row '%s' was written with token %" PRId64 ", ours is %" PRIu64
           "; stopping (acquire again to go on)\n",
           name, current, token);
    return EXIT_OWNERSHIP_LOST;
}

/* All of standard input, NUL-terminated, without its trailing newline. */
static char *read_stdin(void)
{
    size_t len = 0, cap = 256;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, stdin)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (!buf)
        return NULL;
    while (len > 0 && buf[len - 1] == '\n')
        len--;
    buf[len] = '\0';
    return buf;
}

static int write_cmd(int argc, char **argv)
{
    uint64_t lease_ns = 5000000000ull;
    bool strict = false;
    int i = 0;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--strict") == 0)
            strict = true;
        else if (strcmp(argv[i], "--lease-ms") == 0 && i + 1 < argc)
            lease_ns = strtoull(argv[++i], NULL, 10) * 1000000ull;
        else
            return usage();
    }
    if (argc - i != 3 || lease_ns == 0)
        return usage();
    const char *key = argv[i], *dbpath = argv[i + 1], *name = argv[i + 2];

    fl_region *r;
    int err = fl_open(NULL, &r);
    if (err) {
        fprintf(stderr, "sql_sqlite: %s\n", fl_last_error());
        return EXIT_REGION;
    }
    fl_lease lease;
    err = fl_acquire(r, key, lease_ns, FL_WAIT_FOREVER, &lease);
    if (err) {
        fprintf(stderr, "sql_sqlite: acquire %s: %s\n", key, fl_strerror(err));
        fl_close(r);
        return 1;
    }
    printf("acquired %s: token %" PRIu64 "\n", key, lease.token);
    fflush(stdout);

    int status = 1;
    char *value = read_stdin(); /* the work: may take long, may be paused */
    sqlite3 *db = value ? open_db(dbpath) : NULL;
    if (db) {
        status = fenced_update(db, name, value, lease.token, strict);
        sqlite3_close(db);
    }
    free(value);
    err = fl_release(r, &lease);
    if (err == -ESTALE && status == 0)
        /* Written while the token was still the newest; the lease ran out
         * afterwards.  The write stands: the database checked the token. */
        printf("note: the lease had run out by the release\n");
    fl_close(r);
    return status;
}

static int read_cmd(const char *dbpath, const char *name)
{
    sqlite3 *db = open_db(dbpath);
    if (!db)
        return 1;
    sqlite3_stmt *st;
    int status = 1;
    if (sqlite3_prepare_v2(db, "SELECT value, fence_token FROM fenced_values WHERE name = ?1",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW) {
            printf("%s\t%" PRId64 "\n", (const char *)sqlite3_column_text(st, 0),
                   (int64_t)sqlite3_column_int64(st, 1));
            status = 0;
        } else {
            fprintf(stderr, "sql_sqlite: no row '%s'\n", name);
        }
        sqlite3_finalize(st);
    } else {
        fprintf(stderr, "sql_sqlite: %s\n", sqlite3_errmsg(db));
    }
    sqlite3_close(db);
    return status;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "init") == 0 && argc == 4)
        return init(argv[2], argv[3]);
    if (argc >= 2 && strcmp(argv[1], "write") == 0)
        return write_cmd(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "read") == 0 && argc == 4)
        return read_cmd(argv[2], argv[3]);
    return usage();
}
