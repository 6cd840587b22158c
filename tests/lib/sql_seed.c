/* SPDX-License-Identifier: MIT */
/* sql_seed.c - see sql_seed.h. */
#include "sql_seed.h"

#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "spawn.h"

#define T_LINE 30000

void sql_init_row(const sql_example *ex, const char *region, const char *name)
{
    sp_proc p;
    sp_opts o = {.region = region};
    sp_start(&p, &o, (const char *const[]){ex->program, "init", ex->target, name, NULL});
    if (sp_wait(&p, T_LINE) != 0) {
        char *err = sp_stderr(&p);
        fail_msg("%s init: status %d: %s", ex->program, p.status, err);
    }
    sp_free(&p);
}

char *sql_read_row(const sql_example *ex, const char *region, const char *name)
{
    sp_proc p;
    sp_opts o = {.region = region};
    sp_start(&p, &o, (const char *const[]){ex->program, "read", ex->target, name, NULL});
    char buf[4096];
    sp_line(&p, p.out, buf, sizeof buf, T_LINE, "the row");
    assert_int_equal(sp_wait(&p, T_LINE), 0);
    sp_free(&p);
    return strdup(buf);
}

static uint64_t expect_acquired(sp_proc *p, const char *key)
{
    char buf[512], want[256];
    unsigned long long t;
    sp_line(p, p->out, buf, sizeof buf, T_LINE, "acquired");
    snprintf(want, sizeof want, "acquired %s: token %%llu", key);
    if (sscanf(buf, want, &t) != 1)
        fail_msg("expected 'acquired %s: token T', got '%s'", key, buf);
    return t;
}

void sql_seed_scenario(const sql_example *ex, const char *region, const char *key,
                       const char *name, uint64_t *ta_out, uint64_t *tb_out)
{
    sql_init_row(ex, region, name);
    sp_opts o = {.region = region, .stdin_pipe = true};
    char buf[512], want[512];

    /* A acquires with a short lease and is stopped before it writes. */
    sp_proc a;
    sp_start(&a, &o,
             (const char *const[]){ex->program, "write", "--lease-ms", "1000", key, ex->target,
                                   name, NULL});
    uint64_t ta = expect_acquired(&a, key);
    assert_int_equal(kill(a.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(a.pid, T_LINE));

    /* B waits until A's lease runs out, takes the key over, writes. */
    sp_proc b;
    sp_start(&b, &o,
             (const char *const[]){ex->program, "write", "--lease-ms", "30000", key, ex->target,
                                   name, NULL});
    sp_write(&b, "value from B\n");
    sp_close_stdin(&b);
    uint64_t tb = expect_acquired(&b, key);
    assert_true(tb > ta);
    snprintf(want, sizeof want, "written with token %" PRIu64, tb);
    assert_string_equal(sp_line(&b, b.out, buf, sizeof buf, T_LINE, "written"), want);
    assert_int_equal(sp_wait(&b, T_LINE), 0);
    sp_free(&b);
    /* A never ran meanwhile. */
    assert_true(th_wait_stopped(a.pid, 1000));

    /* A resumes unaware and writes with its old token: zero rows. */
    assert_int_equal(kill(a.pid, SIGCONT), 0);
    sp_write(&a, "value from A\n");
    sp_close_stdin(&a);
    snprintf(want, sizeof want,
             "ownership lost: row '%s' was written with token %" PRIu64 ", ours is %" PRIu64
             "; stopping (acquire again to go on)",
             name, tb, ta);
    assert_string_equal(sp_line(&a, a.out, buf, sizeof buf, T_LINE, "ownership lost"), want);
    assert_int_equal(sp_wait(&a, T_LINE), 76);
    sp_free(&a);

    /* The row is B's, with B's token. */
    char *row = sql_read_row(ex, region, name);
    snprintf(want, sizeof want, "value from B\t%" PRIu64, tb);
    assert_string_equal(row, want);
    free(row);
    *ta_out = ta;
    *tb_out = tb;
}
