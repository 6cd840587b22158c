/* SPDX-License-Identifier: MIT */
/*
 * cli_metrics.c - the label values of `fencelock metrics` name their
 * keys injectively: keys that an escape could confuse (the byte 0xff and
 * the four characters \xff, a tab and the text \x09, ...) are distinct
 * series, the text passes the strict checker of tests/observability, and every
 * label decodes, as fencelock(1) says, to its key's bytes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_util.h"
#include "fencelock.h"
#include "harness.h"

#define LEASE_LONG (60 * TH_S)

static void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The label of a key read back as fencelock(1) says: the value's UTF-8
 * bytes, \\ a backslash, \xNN the byte NN; d is check_exposition.py's dump.
 * Every backslash of a value must be one of the two. */
#define DECODE                                                                                 \
    "(lambda b: __import__('re').sub(rb'\\\\(\\\\|x([0-9a-f]{2}))', lambda m: b'\\\\' if "     \
    "m.group(2) is None else bytes([int(m.group(2), 16)]), b) if "                             \
    "__import__('re').fullmatch(rb'(?:[^\\\\]|\\\\\\\\|\\\\x[0-9a-f]{2})*', b) else "          \
    "'undecodable: ' + repr(b))"

/* I9 */
static void test_distinct_keys_distinct_series(void **state)
{
    (void)state;
    if (!have_python3())
        skip();
    char region[512];
    snprintf(region, sizeof region, "%s", th_path("labels.region"));
    th_daemon d;
    if (th_daemon_start(&d, region, NULL) != 0)
        fail_msg("fencelockd did not get ready on %s", region);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    /* Pairs the old labels merged, and their neighbours. */
    const char *keys[] = {
        "dup\xff",      "dup\\xff",      "dup\\\\xff",     /* byte 0xff; \xff; \\xff */
        "tab\t",        "tab\\x09",                        /* a control byte; its text */
        "nl\n",         "nl\\n",                           /* newline; backslash n */
        "caf\xc3\xa9",  "caf\\xc3\\xa9",                   /* UTF-8; its escapes */
        "q\"",          "q\\\"",          "back\\",        /* quote; \"; a last backslash */
    };
    enum { N = sizeof keys / sizeof keys[0] };
    fl_lease l[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(fl_acquire(r, keys[i], LEASE_LONG, 0, &l[i]), 0);
    assert_int_equal(fl_commit(r, &l[0], "rec\\xff", "a", 1, 0, NULL), 0);
    assert_int_equal(fl_commit(r, &l[1], "rec\xff", "b", 1, 0, NULL), 0);

    run_result m;
    run_tool(&m, NULL, (const char *const[]){"metrics", "-r", region, NULL});
    assert_int_equal(m.status, 0);
    assert_string_equal(m.err, "");
    /* The text as the brief example reads: two series, not one. */
    assert_contains(m.out, "\nfencelock_lock_held{key=\"dup\\\\xff\"} 1\n");
    assert_contains(m.out, "\nfencelock_lock_held{key=\"dup\\\\\\\\xff\"} 1\n");

    /* The strict checker: no series twice, every value valid UTF-8. */
    run_opts in = {.stdin_text = m.out};
    run_result c;
    run_program(&c, &in,
                (const char *const[]){"python3", CHECK_EXPOSITION, "--dump", "--require-prefix",
                                      "fencelock_", NULL});
    if (c.status != 0)
        fail_msg("check_exposition.py refused the metrics (%d):\n%s\n%s", c.status, c.err,
                 m.out);

    /* Each key's label decodes to its bytes, one series per key. */
    char *hex[N], want[N * (4 * FL_KEY_MAX + 8)];
    for (int i = 0; i < N; i++) {
        hex[i] = malloc(2 * strlen(keys[i]) + 1);
        assert_non_null(hex[i]);
        for (size_t k = 0; keys[i][k]; k++)
            sprintf(hex[i] + 2 * k, "%02x", (unsigned char)keys[i][k]);
    }
    qsort(hex, N, sizeof hex[0], by_string);
    size_t n = (size_t)snprintf(want, sizeof want, "[");
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(want + n, sizeof want - n, "%s\"%s\"", i ? ", " : "", hex[i]);
    snprintf(want + n, sizeof want - n, "]");
    const char *families[] = {"fencelock_lock_held", "fencelock_lock_acquisitions_total",
                              "fencelock_lock_token"};
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        char expr[1024];
        snprintf(expr, sizeof expr,
                 "sorted(" DECODE "(s['labels']['key'].encode()).hex() for s in d['samples'] "
                 "if s['name'] == '%s')",
                 families[f]);
        char *got = json_eval(c.out, expr);
        if (strcmp(got, want) != 0)
            fail_msg("%s: the keys decoded are\n%s\nwant\n%s\nmetrics:\n%s", families[f], got,
                     want, m.out);
        free(got);
    }
    /* Records too: rec\xff (the text) and rec<0xff> are two series. */
    char *got = json_eval(c.out, "sorted(" DECODE "(s['labels']['record'].encode()).hex() "
                                 "for s in d['samples'] if s['name'] == "
                                 "'fencelock_record_commits_total')");
    assert_string_equal(got, "[\"7265635c786666\", \"726563ff\"]");
    free(got);
    for (int i = 0; i < N; i++)
        free(hex[i]);
    run_result_free(&c);
    run_result_free(&m);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* The help says how a label reads back. */
static void test_help(void **state)
{
    (void)state;
    run_result h;
    run_tool(&h, NULL, (const char *const[]){"metrics", "--help", NULL});
    assert_int_equal(h.status, 0);
    assert_contains(h.out, "each backslash doubled");
    assert_contains(h.out, "So two\nkeys never share a series");
    run_result_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct_keys_distinct_series),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
