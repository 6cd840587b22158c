/* SPDX-License-Identifier: MIT */
/*
 * sql_postgres.c - the fenced write to a SQL database, with PostgreSQL
 * through libpq.  The same pattern as sql_sqlite.c:
 *
 *     UPDATE fenced_values SET value = $1, fence_token = $2
 *      WHERE name = $3 AND fence_token <= $2
 *
 * (with --strict: fence_token < $2) and zero rows changed means ownership
 * lost: stop, never retry with the same token.
 *
 * Why one statement is enough: under READ COMMITTED (the default) an UPDATE
 * that finds its row locked by a concurrent writer waits for it, and if that
 * writer commits, re-evaluates the WHERE clause on the row's new version.  So
 * a stale writer that races a newer one sees the newer fence_token and
 * changes nothing; the comparison and the write cannot be separated.  Do not
 * read the token in one statement and write in another without SELECT ...
 * FOR UPDATE or SERIALIZABLE: the check would no longer be part of the write.
 *
 * Usage:
 *   sql_postgres init CONNINFO NAME
 *       create the table and the row NAME (fence_token 0) if missing
 *   sql_postgres write [--lease-ms N] [--strict] KEY CONNINFO NAME < VALUE
 *       acquire KEY, print "acquired KEY: token T", read the new value from
 *       standard input (the work done under the lock) and write it fenced
 *   sql_postgres read CONNINFO NAME
 *       print the row: VALUE <tab> FENCE_TOKEN
 *
 * CONNINFO is a libpq connection string ("host=/run/postgresql dbname=app").
 * The region is $FENCELOCK_REGION, else the default.  Exit status: 0 written;
 * 1 error (no such row: run init first; database error); 2 bad usage;
 * 3 region error; 76 ownership lost.
 */
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fencelock.h"

#define EXIT_USAGE 2
#define EXIT_REGION 3
#define EXIT_OWNERSHIP_LOST 76

static int usage(void)
{
    fputs("usage: sql_postgres init CONNINFO NAME\n"
          "       sql_postgres write [--lease-ms N] [--strict] KEY CONNINFO NAME < VALUE\n"
          "       sql_postgres read CONNINFO NAME\n",
          stderr);
    return EXIT_USAGE;
}

static PGconn *connect_db(const char *conninfo)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "sql_postgres: cannot connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* Run sql with text parameters; the result if its status is want, else NULL
 * (the error printed). */
static PGresult *exec(PGconn *c, const char *sql, int n, const char *const *params,
                      ExecStatusType want)
{
    PGresult *res = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != want) {
        fprintf(stderr, "sql_postgres: %s", PQerrorMessage(c));
        PQclear(res);
        return NULL;
    }
    return res;
}

static int init(const char *conninfo, const char *name)
{
    PGconn *c = connect_db(conninfo);
    if (!c)
        return 1;
    int status = 1;
    PGresult *res = exec(c,
                         "CREATE TABLE IF NOT EXISTS fenced_values ("
                         "  name text PRIMARY KEY,"
                         "  value text NOT NULL,"
                         "  fence_token bigint NOT NULL DEFAULT 0)", /* 0: nobody wrote yet */
                         0, NULL, PGRES_COMMAND_OK);
    if (res) {
        PQclear(res);
        const char *params[] = {name};
        res = exec(c,
                   "INSERT INTO fenced_values (name, value, fence_token) VALUES ($1, '', 0)"
                   " ON CONFLICT (name) DO NOTHING",
                   1, params, PGRES_COMMAND_OK);
        if (res) {
            PQclear(res);
            status = 0;
        }
    }
    PQfinish(c);
    return status;
}

/* The fenced write: 0 written, EXIT_OWNERSHIP_LOST, or 1. */
static int fenced_update(PGconn *c, const char *name, const char *value, uint64_t token,
                         bool strict)
{
    char tok[32];
    snprintf(tok, sizeof tok, "%" PRIu64, token); /* fits bigint: tokens <= INT64_MAX */
    const char *params[] = {value, tok, name};
    PGresult *res = exec(c,
                         strict ? "UPDATE fenced_values SET value = $1, fence_token = $2"
                                  " WHERE name = $3 AND fence_token < $2"
                                : "UPDATE fenced_values SET value = $1, fence_token = $2"
                                  " WHERE name = $3 AND fence_token <= $2",
                         3, params, PGRES_COMMAND_OK);
    if (!res)
        return 1;
    bool changed = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    if (changed) {
        printf("written with token %s\n", tok);
        return 0;
    }
    /* Zero rows: either a newer holder wrote the row, or there is no row. */
    const char *p[] = {name};
    res = exec(c, "SELECT fence_token FROM fenced_values WHERE name = $1", 1, p,
               PGRES_TUPLES_OK);
    if (!res)
        return 1;
    int status;
    if (PQntuples(res) == 0) {
        fprintf(stderr, "sql_postgres: no row '%s' (run: sql_postgres init CONNINFO %s)\n", name,
                name);
        status = 1;
    } else {
        printf("ownership lost: row '%s' was written with token %s, ours is %s; stopping "
               "(acquire again to go on)\n",
               name, PQgetvalue(res, 0, 0), tok);
        status = EXIT_OWNERSHIP_LOST;
    }
    PQclear(res);
    return status;
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
    const char *key = argv[i], *conninfo = argv[i + 1], *name = argv[i + 2];

    fl_region *r;
    int err = fl_open(NULL, &r);
    if (err) {
        fprintf(stderr, "sql_postgres: %s\n", fl_last_error());
        return EXIT_REGION;
    }
    fl_lease lease;
    err = fl_acquire(r, key, lease_ns, FL_WAIT_FOREVER, &lease);
    if (err) {
        fprintf(stderr, "sql_postgres: acquire %s: %s\n", key, fl_strerror(err));
        fl_close(r);
        return 1;
    }
    printf("acquired %s: token %" PRIu64 "\n", key, lease.token);
    fflush(stdout);

    int status = 1;
    char *value = read_stdin(); /* the work: may take long, may be paused */
    PGconn *c = value ? connect_db(conninfo) : NULL;
    if (c) {
        status = fenced_update(c, name, value, lease.token, strict);
        PQfinish(c);
    }
    free(value);
    err = fl_release(r, &lease);
    if (err == -ESTALE && status == 0)
        printf("note: the lease had run out by the release\n");
    fl_close(r);
    return status;
}

static int read_cmd(const char *conninfo, const char *name)
{
    PGconn *c = connect_db(conninfo);
    if (!c)
        return 1;
    const char *params[] = {name};
    PGresult *res = exec(c, "SELECT value, fence_token FROM fenced_values WHERE name = $1", 1,
                         params, PGRES_TUPLES_OK);
    int status = 1;
    if (res && PQntuples(res) == 1) {
        printf("%s\t%s\n", PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
        status = 0;
    } else if (res) {
        fprintf(stderr, "sql_postgres: no row '%s'\n", name);
    }
    PQclear(res);
    PQfinish(c);
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
