/* SPDX-License-Identifier: MIT */
/*
 * signals_metrics.c - `fencelock metrics` and fencelockd --metrics-file:
 * Prometheus text exposition checked by the strict check_exposition.py.
 *
 * - the checker itself refuses each way of breaking the format (so that
 *   its approval means something) and accepts valid corner cases;
 * - a region with keys and record names that need escaping (quote,
 *   backslash, newline, tab, UTF-8, bytes that are not UTF-8): the output
 *   passes, every label decodes to the right value, every family has its
 *   HELP and TYPE, and the values are those of the inspection API;
 * - an empty region, a region without supervisor, $FENCELOCK_REGION;
 * - help, bad usage (2), a missing region (3), a full disk (1);
 * - the supervisor's file passes too, is rewritten as counts change, and
 *   is replaced atomically (no temporary file is left beside it).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "signals_util.h"

#define LONG_LEASE (3600 * TH_S)

/* ---- the checker ------------------------------------------------------------ */

/* Cases for the checker, run in one python3 (each spawn costs): every text
 * with the problem it must report, "" for a text it must accept. */
struct check_case {
    const char *text, *problem;
};

/* Loads check_exposition.py as a module and runs check() on each case:
 * stdin has one "HEX-TEXT<TAB>PROBLEM" line per case; prints what went
 * wrong, one line per case, and exits 1 if anything did. */
static const char check_cases_code[] =
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('ce', sys.argv[1])\n"
    "ce = importlib.util.module_from_spec(spec); spec.loader.exec_module(ce)\n"
    "bad = 0\n"
    "for line in sys.stdin.read().splitlines():\n"
    "    hexed, want = line.split('\\t', 1)\n"
    "    text = bytes.fromhex(hexed)\n"
    "    problems, _ = ce.check(text, 'fencelock_')\n"
    "    if want == '' and problems:\n"
    "        print('refused %r: %s' % (text, problems)); bad = 1\n"
    "    elif want and not any(want in p for p in problems):\n"
    "        print('%r: want a problem with %r, got %s' % (text, want, problems)); bad = 1\n"
    "sys.exit(bad)\n";

static void run_check_cases(const struct check_case *cases, size_t n)
{
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += strlen(cases[i].text) * 2 + strlen(cases[i].problem) + 2;
    char *input = malloc(cap), *p = input;
    assert_non_null(input);
    for (size_t i = 0; i < n; i++) {
        for (const unsigned char *c = (const unsigned char *)cases[i].text; *c; c++)
            p += sprintf(p, "%02x", *c);
        p += sprintf(p, "\t%s\n", cases[i].problem);
    }
    const char *argv[] = {"python3", "-c", check_cases_code, CHECK_EXPOSITION, NULL};
    run_opts o = {.stdin_text = input};
    run_result r;
    run_program(&r, &o, argv);
    if (r.status != 0)
        fail_msg("the checker got cases wrong (exit %d):\n%s%s", r.status, r.out, r.err);
    run_result_free(&r);
    free(input);
}

static void test_checker_is_strict(void **state)
{
    (void)state;
    sig_need_python3();
    static const struct check_case cases[] = {
        {"", ""},
        {"# HELP fencelock_a Some help with \\\\ and \\n.\n"
         "# TYPE fencelock_a counter\n"
         "fencelock_a{k=\"v\\\"q\\\\b\\nc\",z=\"\xc3\xa9\"} 1 1700000000000\n"
         "fencelock_a{k=\"w\",} 2.5e3\n"
         "\n"
         "# an ordinary comment\n"
         "# TYPE fencelock_g gauge\n"
         "fencelock_g -Inf\n"
         "# TYPE fencelock_h histogram\n"
         "fencelock_h_bucket{le=\"+Inf\"} 3\n"
         "fencelock_h_sum 1.5\n"
         "fencelock_h_count 3\n"
         "fencelock_u NaN\n",
         ""},
        {"fencelock_a 1", "does not end in a line feed"},
        {"fencelock_a{k=\"\xff\"} 1\n", "not valid UTF-8"},
        {"fencelock_a{k=\"x\\ty\"} 1\n", "invalid escape"},
        {"fencelock_a{k=\"x\\\\xff\\x\"} 1\n", "invalid escape"},
        {"fencelock_a{k=\"a\tb\"} 1\n", "raw control character"},
        {"fencelock_a{k=\"a\rb\"} 1\n", "raw control character"},
        {"fencelock_a{k=\"unterminated} 1\n", "unterminated"},
        {"fencelock_a{k=v} 1\n", "not quoted"},
        {"fencelock_a{1k=\"v\"} 1\n", "bad label name"},
        {"fencelock_a{__name__=\"v\"} 1\n", "reserved"},
        {"fencelock_a{k=\"1\",k=\"2\"} 1\n", "given twice"},
        {"fencelock_a{k=\"1\" j=\"2\"} 1\n", "expected ','"},
        {"fencelock_a-b 1\n", "expected a blank"},
        {"9fencelock 1\n", "not a sample"},
        {"fencelock_a\n", "no value"},
        {"fencelock_a one\n", "not a float"},
        {"fencelock_a 0x1p3\n", "not a float"},
        {"fencelock_a 1 2.5\n", "timestamp"},
        {"fencelock_a 1 2 3\n", "after the timestamp"},
        {"fencelock_a 1\nfencelock_a 2\n", "appears twice"},
        {"fencelock_a{k=\"1\",j=\"2\"} 1\nfencelock_a{j=\"2\",k=\"1\"} 2\n", "appears twice"},
        {"fencelock_a 1\nfencelock_b 1\nfencelock_a{k=\"x\"} 2\n", "not together"},
        {"# TYPE fencelock_a gauge\nfencelock_b 1\n# HELP fencelock_a x\n", "not together"},
        {"fencelock_a 1\n# TYPE fencelock_a gauge\n", "after its samples"},
        {"fencelock_a 1\n# HELP fencelock_a late\n", "after its samples"},
        {"# HELP fencelock_a x\n# HELP fencelock_a y\nfencelock_a 1\n", "second HELP"},
        {"# TYPE fencelock_a gauge\n# TYPE fencelock_a gauge\nfencelock_a 1\n", "second TYPE"},
        {"# TYPE fencelock_a countr\nfencelock_a 1\n", "not one of"},
        {"# TYPE fencelock_a counter extra\nfencelock_a 1\n", "not one of"},
        {"# HELP fencelock_a bad \\t escape\nfencelock_a 1\n", "invalid escape"},
        {"# HELP\n", "without a metric name"},
        {"# TYPE fencelock_a counter\nfencelock_a -1\n", "counter"},
        {"# TYPE fencelock_a counter\nfencelock_a NaN\n", "counter"},
        {"# TYPE fencelock_s summary\nfencelock_s_bucket 1\nfencelock_s_count 1\n", "not together"},
        {"other_metric 1\n", "does not start with 'fencelock_'"},
    };
    run_check_cases(cases, sizeof cases / sizeof cases[0]);
    /* And the script itself, as the tests run it: exit 1 and a message. */
    char *problems;
    assert_int_equal(sig_check_exposition("fencelock_a 1\nfencelock_a 1\n", NULL, &problems), 1);
    sig_assert_contains(problems, "line 2: series fencelock_a appears twice");
    free(problems);
}

/* ---- the tool ----------------------------------------------------------------- */

/* The families and types the writer promises (docs/signals.md lists them). */
static const char families_want[] =
    "{'fencelock_supervisor_up': 'gauge', 'fencelock_epoch': 'gauge', "
    "'fencelock_token_floor': 'gauge', 'fencelock_locks_used': 'gauge', "
    "'fencelock_lock_capacity': 'gauge', 'fencelock_records_used': 'gauge', "
    "'fencelock_record_capacity': 'gauge', 'fencelock_events_dropped_total': 'counter', "
    "'fencelock_lock_acquisitions_total': 'counter', "
    "'fencelock_lock_contended_total': 'counter', "
    "'fencelock_lock_expiries_taken_total': 'counter', "
    "'fencelock_lock_deaths_total': 'counter', 'fencelock_lock_renewals_total': 'counter', "
    "'fencelock_lock_renew_failed_total': 'counter', "
    "'fencelock_lock_releases_total': 'counter', "
    "'fencelock_lock_release_failed_total': 'counter', "
    "'fencelock_lock_busy_total': 'counter', 'fencelock_lock_timeouts_total': 'counter', "
    "'fencelock_lock_held': 'gauge', "
    "'fencelock_lock_waiters': 'gauge', 'fencelock_lock_token': 'gauge', "
    "'fencelock_record_commits_total': 'counter', "
    "'fencelock_record_rejections_total': 'counter', "
    "'fencelock_record_repeats_total': 'counter', "
    "'fencelock_record_accepted_token': 'gauge', "
    "'fencelock_record_last_rejected_token': 'gauge', 'fencelock_record_version': 'gauge'}";

static char *metrics_of(const char *region)
{
    run_result m;
    run_tool(&m, NULL, (const char *const[]){"metrics", "-r", region, NULL});
    if (m.status != 0)
        fail_msg("metrics exited %d: %s", m.status, m.err);
    assert_string_equal(m.err, "");
    free(m.err);
    return m.out;
}

/* The Python value of one sample in dump d: name and labels (a dict literal). */
#define SAMPLE(name, labels)                                                              \
    "[s['value'] for s in d['samples'] if s['name'] == '" name "' and s['labels'] == " labels \
    "]"

/* I9 */
static void test_metrics_escapes_and_values(void **state)
{
    (void)state;
    sig_need_python3();
    char region[512];
    sig_path(region, sizeof region, "escape.region");
    th_daemon d;
    sig_daemon_start(&d, region, NULL);

    /* An empty region is valid: families with HELP and TYPE, no samples. */
    char *text = metrics_of(region);
    char *dump = sig_assert_exposition(text);
    sig_assert_json(dump, "true",
                    "{k: v['type'] for k, v in d['families'].items()} == %s", families_want);
    sig_assert_json(dump, "true", "all(v['help'] for v in d['families'].values())");
    sig_assert_json(dump, "[]", "[s for s in d['samples'] if s['labels']]");
    free(dump);
    free(text);

    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    /* quote, backslash, newline, tab, UTF-8 e-acute, a byte that is not UTF-8 */
    const char *weird = "a\"b\\c\nd\te\xc3\xa9\xff";
    const char *rec = "rec\\\"\n";
    fl_lease l1, l2, l3;
    assert_int_equal(fl_acquire(r, weird, LONG_LEASE, 0, &l1), 0);
    assert_int_equal(fl_commit_u64(r, &l1, rec, 1, 0, NULL), 0);
    assert_int_equal(fl_release(r, &l1), 0);
    assert_int_equal(fl_acquire(r, weird, LONG_LEASE, 0, &l2), 0);
    assert_int_equal(fl_commit_u64(r, &l2, rec, 2, 0, NULL), 0);
    assert_int_equal(fl_renew(r, &l2, LONG_LEASE), 0);
    assert_int_equal(fl_commit_u64(r, &l1, rec, 3, 0, NULL), -ESTALE);
    assert_int_equal(fl_commit_u64(r, &l1, rec, 3, 0, NULL), -ESTALE);
    assert_int_equal(fl_renew(r, &l1, LONG_LEASE), -ESTALE);
    assert_int_equal(fl_acquire(r, "plain", LONG_LEASE, 0, &l3), 0);

    text = metrics_of(region);
    dump = sig_assert_exposition(text);
    /* The label decodes to the key, with a backslash doubled and \xNN
     * standing for what is not UTF-8 text: control bytes other than newline,
     * and invalid bytes. */
    const char *key_label = "{'key': 'a\"b\\\\\\\\c\\nd\\\\x09e\\u00e9\\\\xff'}";
    char expr[1024];
    snprintf(expr, sizeof expr, SAMPLE("fencelock_lock_acquisitions_total", "%s"), key_label);
    sig_assert_json(dump, "[\"2\"]", "%s", expr);
    snprintf(expr, sizeof expr, SAMPLE("fencelock_lock_renewals_total", "%s"), key_label);
    sig_assert_json(dump, "[\"1\"]", "%s", expr);
    snprintf(expr, sizeof expr, SAMPLE("fencelock_lock_renew_failed_total", "%s"), key_label);
    sig_assert_json(dump, "[\"1\"]", "%s", expr);
    snprintf(expr, sizeof expr, SAMPLE("fencelock_lock_held", "%s"), key_label);
    sig_assert_json(dump, "[\"1\"]", "%s", expr);
    snprintf(expr, sizeof expr, SAMPLE("fencelock_lock_token", "%s"), key_label);
    char want[64];
    snprintf(want, sizeof want, "[\"%s\"]", sig_u64(l2.token));
    sig_assert_json(dump, want, "%s", expr);
    /* The record carries its name and its key. */
    const char *rec_labels =
        "{'record': 'rec\\\\\\\\\"\\n', 'key': 'a\"b\\\\\\\\c\\nd\\\\x09e\\u00e9\\\\xff'}";
    snprintf(expr, sizeof expr, SAMPLE("fencelock_record_commits_total", "%s"), rec_labels);
    sig_assert_json(dump, "[\"2\"]", "%s", expr);
    snprintf(expr, sizeof expr, SAMPLE("fencelock_record_rejections_total", "%s"), rec_labels);
    sig_assert_json(dump, "[\"2\"]", "%s", expr);
    snprintf(expr, sizeof expr, SAMPLE("fencelock_record_repeats_total", "%s"), rec_labels);
    sig_assert_json(dump, "[\"1\"]", "%s", expr);
    snprintf(expr, sizeof expr, SAMPLE("fencelock_record_last_rejected_token", "%s"), rec_labels);
    snprintf(want, sizeof want, "[\"%s\"]", sig_u64(l1.token));
    sig_assert_json(dump, want, "%s", expr);
    sig_assert_json(dump, "[\"1\"]",
                    SAMPLE("fencelock_lock_acquisitions_total", "{'key': 'plain'}"));
    sig_assert_json(dump, "[\"2\"]", SAMPLE("fencelock_locks_used", "{}"));
    sig_assert_json(dump, "[\"1\"]", SAMPLE("fencelock_records_used", "{}"));
    sig_assert_json(dump, "[\"1\"]", SAMPLE("fencelock_supervisor_up", "{}"));
    /* Every key has one sample in every lock family, every record one in
     * every record family. */
    sig_assert_json(dump, "true",
                    "all(len([s for s in d['samples'] if s['family'] == f]) == "
                    "(2 if f.startswith('fencelock_lock_') and f != 'fencelock_lock_capacity' "
                    "else 1) "
                    "for f in d['families'])");
    /* The raw text escapes exactly as the format says. */
    sig_assert_contains(text,
                        "fencelock_lock_held{key=\"a\\\"b\\\\\\\\c\\nd\\\\x09e\xc3\xa9\\\\xff\"} "
                        "1\n");
    free(dump);
    free(text);

    /* Without a supervisor: the same counters, supervisor_up 0. */
    th_daemon_stop(&d, SIGTERM);
    text = metrics_of(region);
    free(sig_assert_exposition(text));
    sig_assert_contains(text, "\nfencelock_supervisor_up 0\n");
    sig_assert_contains(text, "\nfencelock_lock_acquisitions_total{key=\"plain\"} 1\n");
    free(text);
    fl_close(r);
}

static void test_metrics_command_line(void **state)
{
    (void)state;
    sig_need_python3();
    char region[512];
    sig_path(region, sizeof region, "cli.region");
    th_daemon d;
    sig_daemon_start(&d, region, NULL);

    /* $FENCELOCK_REGION names the region when -r is not given. */
    run_result r;
    run_opts env = {.region_env = region};
    run_tool(&r, &env, (const char *const[]){"metrics", NULL});
    assert_int_equal(r.status, 0);
    free(sig_assert_exposition(r.out));
    run_result_free(&r);

    /* Help: three ways, one text, naming the families. */
    run_result a, b, c;
    run_tool(&a, NULL, (const char *const[]){"metrics", "--help", NULL});
    run_tool(&b, NULL, (const char *const[]){"help", "metrics", NULL});
    run_tool(&c, NULL, (const char *const[]){"metrics", "-h", NULL});
    assert_int_equal(a.status, 0);
    assert_int_equal(b.status, 0);
    assert_int_equal(c.status, 0);
    assert_string_equal(a.out, b.out);
    assert_string_equal(a.out, c.out);
    const char *needles[] = {"Usage: fencelock metrics", "-r, --region PATH", "FENCELOCK_REGION",
                             "Exit status", "lock_acquisitions_total", "record_repeats_total",
                             "events_dropped_total", "--metrics-file", "textfile"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        sig_assert_contains(a.out, needles[i]);
    run_result_free(&a);
    run_result_free(&b);
    run_result_free(&c);
    run_tool(&a, NULL, (const char *const[]){"--help", NULL});
    sig_assert_contains(a.out, "  metrics ");
    run_result_free(&a);

    /* Bad usage: 2, nothing on stdout, the problem and a hint. */
    const char *const *bad[] = {
        (const char *const[]){"metrics", "--frobnicate", NULL},
        (const char *const[]){"metrics", "-x", NULL},
        (const char *const[]){"metrics", "--region", NULL},
        (const char *const[]){"metrics", "--region", "", NULL},
        (const char *const[]){"metrics", "extra", NULL},
        (const char *const[]){"metrics", "--help=yes", NULL},
    };
    const char *messages[] = {"unknown option '--frobnicate'", "unknown option '-x'",
                              "option '--region' needs an argument", "the path is empty",
                              "unexpected argument 'extra'", "'--help' takes no argument"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_tool(&r, NULL, bad[i]);
        if (r.status != 2)
            fail_msg("%s: exit %d, want 2: %s", messages[i], r.status, r.err);
        assert_string_equal(r.out, "");
        sig_assert_contains(r.err, "fencelock metrics: ");
        sig_assert_contains(r.err, messages[i]);
        sig_assert_contains(r.err, "Try 'fencelock metrics --help'.");
        run_result_free(&r);
    }

    /* No region there: 3. */
    char missing[512];
    sig_path(missing, sizeof missing, "missing.region");
    run_tool(&r, NULL, (const char *const[]){"metrics", "-r", missing, NULL});
    assert_int_equal(r.status, 3);
    assert_string_equal(r.out, "");
    sig_assert_contains(r.err, "fencelock: ");
    run_result_free(&r);

    /* The output cannot be written: 1. */
    run_opts full = {.stdout_path = "/dev/full"};
    run_tool(&r, &full, (const char *const[]){"metrics", "-r", region, NULL});
    assert_int_equal(r.status, 1);
    sig_assert_contains(r.err, "cannot write the output");
    run_result_free(&r);

    th_daemon_stop(&d, SIGTERM);
}

/* ---- the supervisor's file ------------------------------------------------------ */

static void test_metrics_file(void **state)
{
    (void)state;
    sig_need_python3();
    char region[512], dir[512], file[600];
    sig_path(region, sizeof region, "file.region");
    sig_path(dir, sizeof dir, "textfile");
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(file, sizeof file, "%s/fencelock.prom", dir);
    th_daemon d;
    sig_daemon_start(&d, region,
                     (const char *const[]){"--metrics-file", file, "--metrics-interval", "1",
                                           NULL});
    const char *first[] = {"\nfencelock_supervisor_up 1\n", NULL};
    if (!sig_wait_file(file, first, 10000))
        fail_msg("fencelockd did not write %s", file);

    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease l;
    for (int i = 0; i < 7; i++) {
        assert_int_equal(fl_acquire(r, "file/key", LONG_LEASE, 0, &l), 0);
        assert_int_equal(fl_commit_u64(r, &l, "file/rec", (uint64_t)i, 0, NULL), 0);
        assert_int_equal(fl_release(r, &l), 0);
    }
    const char *later[] = {
        "\nfencelock_lock_acquisitions_total{key=\"file/key\"} 7\n",
        "\nfencelock_lock_releases_total{key=\"file/key\"} 7\n",
        "\nfencelock_record_commits_total{record=\"file/rec\",key=\"file/key\"} 7\n",
        NULL,
    };
    if (!sig_wait_file(file, later, 10000))
        fail_msg("%s was not rewritten with the new counts", file);
    char *text = sig_read_file(file);
    free(sig_assert_exposition(text));
    /* The file and the tool agree on the counters (not on the gauges of
     * time-dependent state, which are equal here too: nothing is held). */
    char *tool = metrics_of(region);
    assert_string_equal(text, tool);
    free(tool);
    free(text);

    /* Replaced by rename: only the file itself is in its directory. */
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        assert_string_equal(e->d_name, "fencelock.prom");
    }
    closedir(dp);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_is_strict),
        cmocka_unit_test(test_metrics_escapes_and_values),
        cmocka_unit_test(test_metrics_command_line),
        cmocka_unit_test(test_metrics_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
