/* SPDX-License-Identifier: MIT */
/*
 * sql_postgres_c.c - the fenced SQL write from C through libpq, against a
 * real PostgreSQL server started for this run (pg_server.c): the seed
 * scenario with examples/sql_postgres as the writers, A stopped across its
 * lease expiry.  Without the server binaries this fails; it does not skip.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "pg_server.h"
#include "spawn.h"
#include "sql_seed.h"

static th_daemon daemon_;
static const char *conninfo;

static int server_start(void **state);

/* A fencelockd and a real PostgreSQL (started by the test) for every test. */
static int setup(void **state)
{
    if (th_daemon_start(&daemon_, th_path("region"), NULL) != 0)
        return -1;
    return server_start(state);
}

static int teardown(void **state)
{
    (void)state;
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

/* A query's single value, straight from the server. */
static char *query_value(const char *sql)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect: %s", PQerrorMessage(c));
    PGresult *res = PQexec(c, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    char *v = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    PQfinish(c);
    return v;
}

/* Group setup, not a test: a real PostgreSQL for every test below. */
static int server_start(void **state)
{
    (void)state;
    conninfo = pg_server_start();
    if (!conninfo)
        return -1;
    char *v = query_value("SELECT current_setting('server_version_num')::int >= 90500");
    int ok = strcmp(v, "t") == 0; /* ON CONFLICT needs 9.5 */
    free(v);
    return ok ? 0 : -1;
}

static void test_stale_holder_rejected_by_postgres(void **state)
{
    (void)state;
    assert_non_null(conninfo);
    sql_example ex = {SQL_POSTGRES_PATH, conninfo};
    uint64_t ta, tb;
    sql_seed_scenario(&ex, daemon_.region, "pg/job", "report", &ta, &tb);
    char *v = query_value("SELECT value || '|' || fence_token FROM fenced_values"
                          " WHERE name = 'report'");
    char want[128];
    snprintf(want, sizeof want, "value from B|%" PRIu64, tb);
    assert_string_equal(v, want);
    free(v);
    /* The token is a bigint: the full 64-bit value round-trips. */
    v = query_value("SELECT pg_typeof(fence_token)::text FROM fenced_values LIMIT 1");
    assert_string_equal(v, "bigint");
    free(v);
}

/* Two stale-token writers racing a newer one inside the server: the newer
 * update holds the row lock; the stale one waits, then re-checks its WHERE
 * clause against the committed row (READ COMMITTED) and changes nothing. */
static void test_stale_update_waits_and_rechecks(void **state)
{
    (void)state;
    assert_non_null(conninfo);
    sql_example ex = {SQL_POSTGRES_PATH, conninfo};
    sql_init_row(&ex, daemon_.region, "race");
    PGconn *newer = PQconnectdb(conninfo), *stale = PQconnectdb(conninfo);
    assert_int_equal(PQstatus(newer), CONNECTION_OK);
    assert_int_equal(PQstatus(stale), CONNECTION_OK);
    PQclear(PQexec(newer, "BEGIN"));
    PGresult *res = PQexec(newer, "UPDATE fenced_values SET value = 'newer', fence_token = 20"
                                  " WHERE name = 'race' AND fence_token <= 20");
    assert_string_equal(PQcmdTuples(res), "1");
    PQclear(res);
    /* The stale update blocks on the row lock: send it, confirm it waits. */
    assert_int_equal(PQsendQuery(stale, "UPDATE fenced_values SET value = 'stale',"
                                        " fence_token = 10 WHERE name = 'race'"
                                        " AND fence_token <= 10"),
                     1);
    char *waiting = NULL;
    for (int i = 0; i < 3000; i++) { /* until the server shows it waiting on the lock */
        free(waiting);
        waiting = query_value("SELECT count(*) FROM pg_stat_activity"
                              " WHERE wait_event_type = 'Lock' AND query LIKE '%''stale''%'");
        if (strcmp(waiting, "1") == 0)
            break;
        usleep(10000);
    }
    assert_string_equal(waiting, "1");
    free(waiting);
    PQclear(PQexec(newer, "COMMIT"));
    res = PQgetResult(stale);
    assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
    assert_string_equal(PQcmdTuples(res), "0");
    PQclear(res);
    while ((res = PQgetResult(stale)) != NULL)
        PQclear(res);
    PQfinish(newer);
    PQfinish(stale);
    char *v = query_value("SELECT value || '|' || fence_token FROM fenced_values"
                          " WHERE name = 'race'");
    assert_string_equal(v, "newer|20");
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_holder_rejected_by_postgres),
        cmocka_unit_test(test_stale_update_waits_and_rechecks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
