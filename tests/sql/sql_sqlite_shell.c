/* SPDX-License-Identifier: MIT */
/*
 * sql_sqlite_shell.c - the fenced SQL write from a shell script:
 * examples/sql_sqlite.sh runs `fencelock run KEY -- sh -c '... sqlite3 ...'`
 * with the update fenced by $FENCELOCK_TOKEN.  The seed scenario: the whole
 * of A (fencelock run and its command) stopped across A's lease expiry; B
 * commits; A's command resumes first and its update changes zero rows (it
 * exits 76, ownership lost); then fencelock run resumes, finds its lease lost
 * and exits 76 too.  The row is B's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "spawn.h"

#define T_LINE 30000

static th_daemon daemon_;
static char db_path[512];
static char fencelock_env[600];
static const char *env[] = {fencelock_env, NULL};

static int setup(void **state)
{
    (void)state;
    snprintf(db_path, sizeof db_path, "%s", th_path("app.db"));
    snprintf(fencelock_env, sizeof fencelock_env, "FENCELOCK=%s", FENCELOCK_TOOL_PATH);
    return th_daemon_start(&daemon_, th_path("region"), NULL);
}

static int teardown(void **state)
{
    (void)state;
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

/* The row as the sqlite3 program shows it: "VALUE|TOKEN". */
static char *db_row(const char *name)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT value || '|' || fence_token FROM fenced_values WHERE name = '%s'", name);
    sp_proc p;
    sp_start(&p, NULL, (const char *const[]){"sqlite3", "-batch", db_path, sql, NULL});
    char buf[512];
    sp_line(&p, p.out, buf, sizeof buf, T_LINE, "the row (is the sqlite3 program installed?)");
    assert_int_equal(sp_wait(&p, T_LINE), 0);
    sp_free(&p);
    return strdup(buf);
}

/* "acquired KEY: token T (pid P)" */
static void expect_acquired(sp_proc *p, const char *key, uint64_t *token, pid_t *pid)
{
    char buf[512], fmt[256];
    unsigned long long t;
    int pp;
    sp_line(p, p->out, buf, sizeof buf, T_LINE, "acquired");
    snprintf(fmt, sizeof fmt, "acquired %s: token %%llu (pid %%d)", key);
    if (sscanf(buf, fmt, &t, &pp) != 2)
        fail_msg("expected 'acquired %s: token T (pid P)', got '%s'", key, buf);
    *token = t;
    *pid = pp;
}

static void test_stale_holder_rejected_by_sqlite3_shell(void **state)
{
    (void)state;
    const char *key = "shell/job", *name = "report";
    sp_opts o = {.region = daemon_.region, .env = env, .stdin_pipe = true};
    char buf[512], want[512];

    /* A: fencelock run (the script execs it) and its command, a shell. */
    sp_proc a;
    sp_start(&a, &o,
             (const char *const[]){"sh", SQL_SQLITE_SH, "--lease", "1s", key, db_path, name,
                                   NULL});
    uint64_t ta;
    pid_t a_cmd;
    expect_acquired(&a, key, &ta, &a_cmd);
    /* Stop all of A: fencelock run, and the command's process group. */
    assert_int_equal(kill(a.pid, SIGSTOP), 0);
    assert_int_equal(kill(-a_cmd, SIGSTOP), 0);
    assert_true(th_wait_stopped(a.pid, T_LINE));
    assert_true(th_wait_stopped(a_cmd, T_LINE));

    /* B: the same script; it waits for A's lease to run out, then commits. */
    sp_proc b;
    sp_start(&b, &o, (const char *const[]){"sh", SQL_SQLITE_SH, key, db_path, name, NULL});
    sp_write(&b, "value from B\n");
    sp_close_stdin(&b);
    uint64_t tb;
    pid_t b_cmd;
    expect_acquired(&b, key, &tb, &b_cmd);
    assert_true(tb > ta);
    snprintf(want, sizeof want, "written with token %" PRIu64, tb);
    assert_string_equal(sp_line(&b, b.out, buf, sizeof buf, T_LINE, "written"), want);
    assert_int_equal(sp_wait(&b, T_LINE), 0);
    sp_free(&b);
    assert_true(th_wait_stopped(a.pid, 1000));

    /* A's command resumes first (its fencelock run is still stopped) and
     * writes with the old token: zero rows, ownership lost. */
    assert_int_equal(kill(-a_cmd, SIGCONT), 0);
    sp_write(&a, "value from A\n");
    sp_close_stdin(&a);
    snprintf(want, sizeof want,
             "ownership lost: row %s was written with token %" PRIu64 ", ours is %" PRIu64
             "; stopping",
             name, tb, ta);
    assert_string_equal(sp_line(&a, a.out, buf, sizeof buf, T_LINE, "ownership lost"), want);
    /* Then fencelock run resumes: its lease is gone. */
    assert_int_equal(kill(a.pid, SIGCONT), 0);
    assert_int_equal(sp_wait(&a, T_LINE), 76);
    char *err = sp_stderr(&a);
    sp_assert_contains(err, "fencelock run: lost the lease of 'shell/job'");
    free(err);
    sp_free(&a);

    char *row = db_row(name);
    snprintf(want, sizeof want, "value from B|%" PRIu64, tb);
    assert_string_equal(row, want);
    free(row);
}

/* Quotes in values and names survive the trip through the shell into SQL. */
static void test_quoting(void **state)
{
    (void)state;
    sp_opts o = {.region = daemon_.region, .env = env, .stdin_pipe = true};
    const char *value = "it's \"quoted\"; DROP TABLE fenced_values; -- $HOME `id`";
    sp_proc p;
    sp_start(&p, &o,
             (const char *const[]){"sh", SQL_SQLITE_SH, "shell/quote", db_path, "o'brien", NULL});
    sp_write(&p, value);
    sp_write(&p, "\n");
    sp_close_stdin(&p);
    assert_int_equal(sp_wait(&p, T_LINE), 0);
    sp_free(&p);
    char *row = db_row("o''brien");
    assert_non_null(strstr(row, value));
    free(row);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_holder_rejected_by_sqlite3_shell),
        cmocka_unit_test(test_quoting),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
