/* SPDX-License-Identifier: MIT */
/*
 * sql_sqlite_c.c - the fenced SQL write from C, in SQLite (embedded: part of
 * the default suite): examples/sql_sqlite run as real processes against a
 * real fencelockd, the writer A stopped across its lease expiry.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "spawn.h"
#include "sql_seed.h"

static th_daemon daemon_;
static char db_path[512];

static int setup(void **state)
{
    (void)state;
    snprintf(db_path, sizeof db_path, "%s", th_path("app.db"));
    return th_daemon_start(&daemon_, th_path("region"), NULL);
}

static int teardown(void **state)
{
    (void)state;
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

/* Read the row straight from the database, not through the example. */
static void db_row(const char *name, char *value, size_t cap, int64_t *token)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT value, fence_token FROM fenced_values"
                                        " WHERE name = ?1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    snprintf(value, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    *token = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_stale_holder_rejected_by_sqlite(void **state)
{
    (void)state;
    sql_example ex = {SQL_SQLITE_PATH, db_path};
    uint64_t ta, tb;
    sql_seed_scenario(&ex, daemon_.region, "sqlite/job", "report", &ta, &tb);
    char value[256];
    int64_t token;
    db_row("report", value, sizeof value, &token);
    assert_string_equal(value, "value from B");
    assert_int_equal((uint64_t)token, tb);

    /* To go on, acquire again and write with the new token: accepted. */
    sp_opts o = {.region = daemon_.region, .stdin_pipe = true};
    sp_proc c;
    sp_start(&c, &o,
             (const char *const[]){SQL_SQLITE_PATH, "write", "sqlite/job", db_path, "report",
                                   NULL});
    sp_write(&c, "value from C\n");
    sp_close_stdin(&c);
    assert_int_equal(sp_wait(&c, 30000), 0);
    sp_free(&c);
    db_row("report", value, sizeof value, &token);
    assert_string_equal(value, "value from C");
    assert_true((uint64_t)token > tb);
}

/* Zero rows because there is no row is an error, not "ownership lost". */
static void test_missing_row(void **state)
{
    (void)state;
    sql_example ex = {SQL_SQLITE_PATH, db_path};
    sql_init_row(&ex, daemon_.region, "other"); /* the table exists */
    sp_opts o = {.region = daemon_.region, .stdin_pipe = true};
    sp_proc p;
    sp_start(&p, &o,
             (const char *const[]){SQL_SQLITE_PATH, "write", "sqlite/none", db_path, "no-such-row",
                                   NULL});
    sp_close_stdin(&p);
    assert_int_equal(sp_wait(&p, 30000), 1);
    char *err = sp_stderr(&p);
    sp_assert_contains(err, "no row 'no-such-row'");
    free(err);
    sp_free(&p);
}

/* --strict (fence_token < token): one write per acquisition; the non-strict
 * rule lets the holder write again with the same token. */
static void test_strict_and_non_strict(void **state)
{
    (void)state;
    sql_example ex = {SQL_SQLITE_PATH, db_path};
    sql_init_row(&ex, daemon_.region, "strict-row");
    /* A holder's first write takes the row from 0 to its token. */
    sp_opts o = {.region = daemon_.region, .stdin_pipe = true};
    sp_proc p;
    sp_start(&p, &o,
             (const char *const[]){SQL_SQLITE_PATH, "write", "--strict", "sqlite/strict", db_path,
                                   "strict-row", NULL});
    sp_write(&p, "first\n");
    sp_close_stdin(&p);
    assert_int_equal(sp_wait(&p, 30000), 0);
    sp_free(&p);
    char value[256];
    int64_t token;
    db_row("strict-row", value, sizeof value, &token);
    /* The same token again: strict refuses (zero rows), non-strict accepts. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE fenced_values SET value = 'again', fence_token = %" PRId64
             " WHERE name = 'strict-row' AND fence_token < %" PRId64,
             token, token);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 0);
    snprintf(sql, sizeof sql,
             "UPDATE fenced_values SET value = 'again', fence_token = %" PRId64
             " WHERE name = 'strict-row' AND fence_token <= %" PRId64,
             token, token);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_holder_rejected_by_sqlite),
        cmocka_unit_test(test_missing_row),
        cmocka_unit_test(test_strict_and_non_strict),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
