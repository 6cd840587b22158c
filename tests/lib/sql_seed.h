/* SPDX-License-Identifier: MIT */
/*
 * sql_seed.h - the seed scenario against a real database, driven through an
 * example writer program (examples/sql_sqlite, examples/sql_postgres), each
 * writer a real process:
 *
 *   A acquires the key (token ta) and is stopped (SIGSTOP) before it writes;
 *   its lease runs out; B acquires (tb > ta) and commits its row; A is
 *   continued and runs its conditional UPDATE: zero rows, so A reports
 *   ownership lost (exit 76) and does not retry; the row is B's, fenced tb.
 *
 * The writers print "acquired KEY: token T", then read the value from stdin
 * (the work under the lock; A is stopped there), then write it.
 */
#ifndef FL_TEST_SQL_SEED_H
#define FL_TEST_SQL_SEED_H

#include <stdint.h>

typedef struct sql_example {
    const char *program; /* the example's binary */
    const char *target;  /* its database argument: a file, or a libpq conninfo */
} sql_example;

/* Run the scenario on row name, fenced by key, in region.  Fails the test
 * on any deviation.  *ta and *tb receive the tokens. */
void sql_seed_scenario(const sql_example *ex, const char *region, const char *key,
                       const char *name, uint64_t *ta, uint64_t *tb);

/* `program read target name`: "VALUE\tTOKEN" (malloc'd, no newline). */
char *sql_read_row(const sql_example *ex, const char *region, const char *name);

/* Run `program init target name`; fails the test unless it exits 0. */
void sql_init_row(const sql_example *ex, const char *region, const char *name);

#endif
