/* SPDX-License-Identifier: MIT */
/*
 * signals_status.c - the status views of the signals, without a terminal:
 *
 * - `fencelock status KEY`: every field of one key and of the records it
 *   fences, as text and as JSON; a missing key exits 4;
 * - --prefix in the tables and the JSON;
 * - --watch when stdout is not a terminal: whole views separated by a blank
 *   line, rates from the second on, the busiest key first; --count;
 *   --json; a reader that goes away (| head) ends it quietly with status 0;
 * - the new options' bad usage.
 *
 * (signals_watch.c drives --watch in a real terminal.)
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "signals_util.h"

#define LONG_LEASE (3600 * TH_S)

static char region[512];
static th_daemon daemon_;
static fl_region *handle;
static fl_lease t1, t2; /* orders/1: t1 old (released), t2 holds it */

/* orders/1 fences orders/1/total and orders/1/extra and has stale traffic;
 * orders/2 was used once; users/1 fences users/1/name and orders/by-user. */
static int setup(void **state)
{
    (void)state;
    sig_path(region, sizeof region, "status.region");
    if (th_daemon_start(&daemon_, region, NULL) != 0)
        return -1;
    if (fl_open(region, &handle) != 0)
        return -1;
    fl_lease l;
    uint64_t acc;
    if (fl_acquire(handle, "orders/1", LONG_LEASE, 0, &t1) ||
        fl_commit_u64(handle, &t1, "orders/1/total", 1, 0, NULL) ||
        fl_commit_u64(handle, &t1, "orders/1/extra", 1, 0, NULL) || fl_release(handle, &t1) ||
        fl_acquire(handle, "orders/1", LONG_LEASE, 0, &t2) ||
        fl_commit_u64(handle, &t2, "orders/1/total", 2, 0, NULL) ||
        fl_commit_u64(handle, &t1, "orders/1/total", 3, 0, &acc) != -ESTALE ||
        fl_commit_u64(handle, &t1, "orders/1/total", 3, 0, &acc) != -ESTALE)
        return -1;
    fl_lease copy = t1;
    if (fl_renew(handle, &copy, LONG_LEASE) != -ESTALE || fl_release(handle, &t1) != -ESTALE)
        return -1;
    if (fl_acquire(handle, "orders/2", LONG_LEASE, 0, &l) || fl_release(handle, &l))
        return -1;
    if (fl_acquire(handle, "users/1", LONG_LEASE, 0, &l) ||
        fl_commit_u64(handle, &l, "users/1/name", 1, 0, NULL) ||
        fl_commit_u64(handle, &l, "orders/by-user", 1, 0, NULL) || fl_release(handle, &l))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fl_release(handle, &t2);
    fl_close(handle);
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

static run_result tool(const char *const *args)
{
    run_result r;
    run_tool(&r, NULL, args);
    return r;
}

static void expect_ok(const run_result *r)
{
    if (r->status != 0)
        fail_msg("exit %d: %s", r->status, r->err);
    assert_string_equal(r->err, "");
}

/* "  LABEL<pad to 18>VALUE\n" as the detail view prints it. */
static void assert_field(const char *out, int indent, const char *label, const char *value)
{
    char want[1024];
    snprintf(want, sizeof want, "\n%*s%-18s%s\n", indent, "", label, value);
    sig_assert_contains(out, want);
}

static void test_key_detail(void **state)
{
    (void)state;
    run_result r = tool((const char *const[]){"status", "-r", region, "orders/1", NULL});
    expect_ok(&r);
    const char *out = r.out;
    assert_true(strncmp(out, "Key orders/1\n", 13) == 0);
    char v[256];
    int pid = (int)getpid();
    assert_field(out, 2, "Region:", region);
    assert_field(out, 2, "State:", "held");
    snprintf(v, sizeof v, "%s (epoch %llu, counter %llu)", sig_u64(t2.token),
             (unsigned long long)FL_TOKEN_EPOCH(t2.token),
             (unsigned long long)FL_TOKEN_COUNTER(t2.token));
    assert_field(out, 2, "Token:", v);
    snprintf(v, sizeof v, "\n  %-18spid %d, client ", "Holder:", pid);
    sig_assert_contains(out, v);
    assert_field(out, 2, "Waiters:", "0");
    assert_field(out, 2, "Acquisitions:", "2");
    assert_field(out, 2, "Contended:", "0");
    assert_field(out, 2, "Takeovers:", "0");
    assert_field(out, 2, "Deaths:", "0");
    assert_field(out, 2, "Renewals:", "0");
    assert_field(out, 2, "Renewals refused:", "1");
    assert_field(out, 2, "Releases:", "1");
    assert_field(out, 2, "Releases refused:", "1");
    snprintf(v, sizeof v, "release of token %s by pid %d", sig_u64(t1.token), pid);
    assert_field(out, 2, "Last stale:", v);
    assert_field(out, 2, "Last release:", "-");
    sig_assert_contains(out, "\n\nRecords fenced by orders/1\n  Record orders/1/");
    sig_assert_contains(out, "\n  Record orders/1/total\n");
    sig_assert_contains(out, "\n  Record orders/1/extra\n");
    sig_assert_not_contains(out, "users/1");
    sig_assert_not_contains(out, "orders/by-user");
    /* The record blocks: total had two rejections of t1, one a repeat. */
    const char *total = strstr(out, "  Record orders/1/total\n");
    assert_field(total, 4, "Accepted token:", sig_u64(t2.token));
    assert_field(total, 4, "Version:", "2");
    assert_field(total, 4, "Size:", "8 bytes");
    assert_field(total, 4, "Commits:", "2");
    assert_field(total, 4, "Rejections:", "2");
    assert_field(total, 4, "Repeats:", "1");
    snprintf(v, sizeof v, "commit of token %s by pid %d (the record had accepted %s)",
             sig_u64(t1.token), pid, sig_u64(t2.token));
    assert_field(total, 4, "Last rejection:", v);
    const char *extra = strstr(out, "  Record orders/1/extra\n");
    assert_field(extra, 4, "Rejections:", "0");
    assert_field(extra, 4, "Last rejection:", "none");
    run_result_free(&r);

    /* A key never stale and without records. */
    r = tool((const char *const[]){"status", "-r", region, "orders/2", NULL});
    expect_ok(&r);
    assert_field(r.out, 2, "State:", "free");
    assert_field(r.out, 2, "Last stale:", "none");
    assert_field(r.out, 2, "Last release:", "released");
    snprintf(v, sizeof v, "- (the last holder was pid %d)", pid);
    assert_field(r.out, 2, "Holder:", v);
    sig_assert_contains(r.out, "\nRecords fenced by orders/2\n  (none)\n");
    run_result_free(&r);
}

static void test_key_json(void **state)
{
    (void)state;
    sig_need_python3();
    run_result r =
        tool((const char *const[]){"status", "--json", "-r", region, "orders/1", NULL});
    expect_ok(&r);
    const char *j = r.out;
    sig_assert_json(j, "[\"lock\", \"records\", \"region\", \"time\"]", "sorted(d)");
    sig_assert_json(j, "\"orders/1\"", "d['lock']['key']");
    sig_assert_json(j, "\"held\"", "d['lock']['state']");
    sig_assert_json(j, sig_u64(t2.token), "d['lock']['token']");
    sig_assert_json(j, "[1, 1, 1]",
                    "[d['lock']['renew_failed'], d['lock']['release_failed'], "
                    "d['lock']['releases']]");
    sig_assert_json(j, "\"release\"", "d['lock']['last_stale_op']");
    sig_assert_json(j, sig_u64(t1.token), "d['lock']['last_stale_token']");
    sig_assert_json(j, sig_u64((uint64_t)getpid()), "d['lock']['last_stale_pid']");
    sig_assert_json(j, "[\"orders/1/extra\", \"orders/1/total\"]",
                    "sorted(x['name'] for x in d['records'])");
    const char *total = "next(x for x in d['records'] if x['name'] == 'orders/1/total')";
    sig_assert_json(j, "[2, 2, 1]", "[%s['commits'], %s['rejections'], %s['repeats']]", total,
                    total, total);
    sig_assert_json(j, "\"commit\"", "%s['last_rejected_op']", total);
    sig_assert_json(j, sig_u64(t2.token), "%s['last_rejected_accepted']", total);
    sig_assert_json(j, sig_u64(t1.token), "%s['last_rejected_token']", total);
    sig_assert_json(j, "null",
                    "next(x for x in d['records'] if x['name'] == 'orders/1/extra')"
                    "['last_rejected_op']");
    sig_assert_json(j, "0", "d['region']['events_dropped']");
    run_result_free(&r);
}

/* I9 */
static void test_missing_key(void **state)
{
    (void)state;
    for (int json = 0; json < 2; json++) {
        run_result r = tool(json ? (const char *const[]){"status", "-r", region, "--json",
                                                         "orders/3", NULL}
                                 : (const char *const[]){"status", "-r", region, "orders/3",
                                                         NULL});
        assert_int_equal(r.status, 4);
        assert_string_equal(r.out, "");
        char want[700];
        snprintf(want, sizeof want, "fencelock status: no key 'orders/3' in region %s\n",
                 region);
        assert_string_equal(r.err, want);
        run_result_free(&r);
    }
    /* A record name is not a key. */
    run_result r = tool((const char *const[]){"status", "-r", region, "orders/1/total", NULL});
    assert_int_equal(r.status, 4);
    run_result_free(&r);
}

/* The first fields of the rows of a section of the table output. */
static void assert_section_names(const char *out, const char *section, const char *want)
{
    char heading[64];
    snprintf(heading, sizeof heading, "\n%s\n", section);
    const char *p = strstr(out, heading);
    if (!p)
        fail_msg("no %s section in:\n%s", section, out);
    p += strlen(heading);
    char got[1024] = "";
    p = strchr(p, '\n'); /* the column titles */
    assert_non_null(p);
    for (p++; p[0] == ' ' && p[1] == ' ';) {
        const char *start = p + 2, *end = strpbrk(start, " \n");
        strncat(got, start, (size_t)(end - start));
        strcat(got, ",");
        p = strchr(p, '\n') + 1;
    }
    if (strcmp(got, want) != 0)
        fail_msg("%s: rows %s, want %s, in:\n%s", section, got, want, out);
}

static void test_prefix(void **state)
{
    (void)state;
    sig_need_python3();
    run_result r = tool((const char *const[]){"status", "-r", region, "--prefix", "orders/", NULL});
    expect_ok(&r);
    assert_section_names(r.out, "Locks", "orders/1,orders/2,");
    /* A record shows when its name or its key starts with the prefix. */
    assert_section_names(r.out, "Records", "orders/1/total,orders/1/extra,orders/by-user,");
    run_result_free(&r);

    r = tool((const char *const[]){"status", "-r", region, "--prefix", "users/", NULL});
    expect_ok(&r);
    assert_section_names(r.out, "Locks", "users/1,");
    assert_section_names(r.out, "Records", "users/1/name,orders/by-user,");
    run_result_free(&r);

    r = tool((const char *const[]){"status", "-r", region, "--prefix", "nothing", NULL});
    expect_ok(&r);
    sig_assert_contains(r.out, "\nLocks\n  (none)\n");
    sig_assert_contains(r.out, "\nRecords\n  (none)\n");
    run_result_free(&r);

    r = tool((const char *const[]){"status", "-r", region, "--json", "--prefix", "orders/", NULL});
    expect_ok(&r);
    sig_assert_json(r.out, "[\"orders/1\", \"orders/2\"]", "[x['key'] for x in d['locks']]");
    sig_assert_json(r.out, "[\"orders/1/total\", \"orders/1/extra\", \"orders/by-user\"]",
                    "[x['name'] for x in d['records']]");
    /* The region itself is not filtered. */
    sig_assert_json(r.out, "[3, 4]", "[d['region']['locks_used'], d['region']['records_used']]");
    run_result_free(&r);

    /* An empty prefix keeps everything. */
    r = tool((const char *const[]){"status", "-r", region, "--prefix", "", NULL});
    expect_ok(&r);
    assert_section_names(r.out, "Locks", "orders/1,orders/2,users/1,");
    run_result_free(&r);
}

/* ---- --watch without a terminal ----------------------------------------------- */

/* Acquire, commit and release hot/1 in a loop until told to stop; says
 * "running" after the first round. */
static int churn(void *arg, int in, int out)
{
    (void)arg;
    fl_region *r;
    if (fl_open(region, &r) != 0)
        return 1;
    for (uint64_t i = 0;; i++) {
        fl_lease l;
        if (fl_acquire(r, "hot/1", LONG_LEASE, FL_WAIT_FOREVER, &l) ||
            fl_commit_u64(r, &l, "hot/1/rec", i, 0, NULL) || fl_release(r, &l))
            return 2;
        if (i == 0)
            th_send(out, "running");
        struct pollfd p = {.fd = in, .events = POLLIN};
        if (i % 64 == 0 && poll(&p, 1, 0) > 0)
            break;
        if (i % 64 == 0)
            usleep(1000); /* keep it gentle: a steady rate, not a spin */
    }
    fl_close(r);
    return 0;
}

/* Split the views of --watch output at their blank-line separators. */
static int split_views(char *out, char **views, int max)
{
    int n = 0;
    char *p = out;
    while (p && *p && n < max) {
        views[n++] = p;
        char *sep = strstr(p, "\n\nfencelock status --watch  ");
        if (!sep)
            break;
        sep[1] = '\0';
        p = sep + 2;
    }
    return n;
}

static void test_watch_plain(void **state)
{
    (void)state;
    th_child c;
    assert_int_equal(th_child_start(&c, churn, NULL), 0);
    th_expect(c.from_child, "running", 20000);
    run_result r =
        tool((const char *const[]){"status", "-r", region, "--watch", "300ms", "--count", "3",
                                   NULL});
    th_send(c.to_child, "stop");
    assert_int_equal(th_child_wait(&c, 20000), 0);
    expect_ok(&r);
    size_t len = strlen(r.out);
    assert_true(len > 0 && r.out[len - 1] == '\n');
    char *views[8];
    int n = split_views(r.out, views, 8);
    if (n != 3)
        fail_msg("%d views, want 3:\n%s", n, r.out);
    for (int i = 0; i < 3; i++) {
        assert_true(strncmp(views[i], "fencelock status --watch  ", 26) == 0);
        sig_assert_contains(views[i], "  every 300ms  region ");
        sig_assert_contains(views[i], "\nsupervisor pid ");
        sig_assert_contains(views[i], "\nper second: ");
        sig_assert_not_contains(views[i], "(q: quit)"); /* not a terminal */
        sig_assert_not_contains(views[i], "\033");
    }
    /* No rates in the first view; then the busy key leads, with a rate. */
    sig_assert_contains(views[0], "per second: - acquisitions  - commits");
    for (int i = 1; i < 3; i++) {
        assert_section_names(views[i], "Keys", "hot/1,orders/1,orders/2,users/1,");
        const char *row = strstr(views[i], "\n  hot/1 ");
        assert_non_null(row);
        char state[16];
        double acq, commit, rej;
        if (sscanf(row, "\n  hot/1 %15s %lf %lf %lf", state, &acq, &commit, &rej) != 4)
            fail_msg("cannot read the hot/1 row:\n%s", views[i]);
        if (!(acq > 0 && commit > 0 && rej == 0))
            fail_msg("hot/1: ACQ/S %.1f COMMIT/S %.1f REJ/S %.1f in:\n%s", acq, commit, rej,
                     views[i]);
        sig_assert_contains(views[i], "\n  orders/1  ");
        const char *idle = strstr(views[i], "\n  orders/2 ");
        assert_non_null(idle);
        assert_int_equal(sscanf(idle, "\n  orders/2 %15s %lf", state, &acq), 2);
        assert_true(acq == 0);
        assert_section_names(views[i], "Records",
                             "hot/1/rec,orders/1/extra,orders/1/total,orders/by-user,"
                             "users/1/name,");
    }
    /* The totals of the keys shown: REJECTED counts commits refused plus
     * renewals and releases refused (2 + 1 + 1 on orders/1). */
    char *f[20];
    int nf = table_row(views[2], "Keys", 0, "orders/1", f, 20);
    assert_int_equal(nf, 15);
    assert_string_equal(f[1], "held");
    assert_string_equal(f[10], "2");  /* ACQUIRED */
    assert_string_equal(f[11], "3");  /* COMMITS on its two records */
    assert_string_equal(f[12], "4");  /* REJECTED */
    assert_string_equal(f[13], "1");  /* REPEATS */
    assert_string_equal(f[14], "0");  /* TAKEOVERS */
    free_fields(f, nf);
    run_result_free(&r);

    /* --prefix narrows the view. */
    r = tool((const char *const[]){"status", "-r", region, "--watch=100ms", "--count", "1",
                                   "--prefix", "users/", NULL});
    expect_ok(&r);
    sig_assert_contains(r.out, "\nprefix: users/\n");
    assert_section_names(r.out, "Keys", "users/1,");
    assert_section_names(r.out, "Records", "orders/by-user,users/1/name,");
    run_result_free(&r);
}

static void test_watch_json(void **state)
{
    (void)state;
    sig_need_python3();
    run_result r = tool((const char *const[]){"status", "-r", region, "--watch", "100ms",
                                              "--count", "2", "--json", NULL});
    expect_ok(&r);
    /* Two JSON documents, one after the other. */
    const char *code =
        "import json, sys\n"
        "s = sys.stdin.read(); dec = json.JSONDecoder(); i = 0; docs = []\n"
        "while i < len(s):\n"
        "    d, i = dec.raw_decode(s, i)\n"
        "    docs.append(d)\n"
        "    while i < len(s) and s[i] in ' \\n': i += 1\n"
        "print(len(docs), sorted(docs[0]), [len(d['locks']) for d in docs])\n";
    const char *argv[] = {"python3", "-c", code, NULL};
    run_opts o = {.stdin_text = r.out};
    run_result p;
    run_program(&p, &o, argv);
    assert_int_equal(p.status, 0);
    assert_string_equal(p.out,
                        "2 ['clients', 'locks', 'records', 'region', 'skipped', 'time', "
                        "'unregistered'] [4, 4]\n");
    run_result_free(&p);
    run_result_free(&r);
}

static void test_watch_closed_pipe(void **state)
{
    (void)state;
    char status_file[512];
    sig_path(status_file, sizeof status_file, "watch.status");
    /* `fencelock status --watch | head -n 1`: head leaves after one line,
     * the next view meets a closed pipe. */
    const char *script =
        "{ \"$0\" status -r \"$1\" --watch 50ms; echo \"$?\" > \"$2\"; } | head -n 1";
    const char *argv[] = {"sh", "-c", script, FENCELOCK_TOOL_PATH, region, status_file, NULL};
    run_result r;
    run_program(&r, NULL, argv);
    assert_int_equal(r.status, 0);
    assert_true(strncmp(r.out, "fencelock status --watch  ", 26) == 0);
    assert_int_equal(count_lines(r.out), 1);
    assert_string_equal(r.err, ""); /* quiet: no "Broken pipe" */
    char *st = sig_read_file(status_file);
    assert_non_null(st);
    assert_string_equal(st, "0\n");
    free(st);
    run_result_free(&r);

    /* A missing region: 3 at once, as without --watch. */
    char missing[512];
    sig_path(missing, sizeof missing, "missing.region");
    r = tool((const char *const[]){"status", "-r", missing, "--watch", NULL});
    assert_int_equal(r.status, 3);
    assert_string_equal(r.out, "");
    run_result_free(&r);
}

/* ---- usage ---------------------------------------------------------------------- */

static void expect_usage(const char *const *args, const char *message)
{
    run_result r;
    run_tool(&r, NULL, args);
    if (r.status != 2)
        fail_msg("'%s': exit %d, want 2: %s", message, r.status, r.err);
    assert_string_equal(r.out, "");
    assert_int_equal(count_lines(r.err), 2);
    sig_assert_contains(r.err, "fencelock status: ");
    sig_assert_contains(r.err, message);
    sig_assert_contains(r.err, "Try 'fencelock status --help'.");
    run_result_free(&r);
}

static void test_usage(void **state)
{
    (void)state;
    expect_usage((const char *const[]){"status", "-r", region, "one", "two", NULL},
                 "unexpected argument 'two'");
    expect_usage((const char *const[]){"status", "-r", region, "--prefix", "o", "orders/1", NULL},
                 "give a KEY or --prefix, not both");
    expect_usage((const char *const[]){"status", "-r", region, "", NULL}, "the key is empty");
    expect_usage((const char *const[]){"status", "--count", "2", NULL}, "--count needs --watch");
    expect_usage((const char *const[]){"status", "--watch", "--count", "0", NULL},
                 "--count: '0' is not a number of refreshes");
    expect_usage((const char *const[]){"status", "--watch", "--count", "x", NULL},
                 "--count: 'x' is not a number");
    expect_usage((const char *const[]){"status", "--watch", "10ms", NULL},
                 "--watch: '10ms' is not an interval");
    expect_usage((const char *const[]){"status", "--watch", "2h", NULL},
                 "--watch: '2h' is not an interval");
    expect_usage((const char *const[]){"status", "--watch=fast", NULL},
                 "--watch: 'fast' is not an interval");
    expect_usage((const char *const[]){"status", "--watch", "1.2.3s", NULL},
                 "is not an interval");
    expect_usage((const char *const[]){"status", "--watch", "1s", "orders/1", NULL},
                 "unexpected argument 'orders/1'");
    expect_usage((const char *const[]){"status", "--prefix", NULL},
                 "option '--prefix' needs an argument");
    expect_usage((const char *const[]){"status", "--json=1", NULL},
                 "option '--json' takes no argument");

    run_result r;
    run_tool(&r, NULL, (const char *const[]){"status", "--help", NULL});
    assert_int_equal(r.status, 0);
    const char *needles[] = {"fencelock status [-r PATH] [--json] KEY", "--watch [INTERVAL]",
                             "--prefix PREFIX", "--count N", "  4  status KEY", "ACQ/S",
                             "REJ/S", "REPEATS", "q or Ctrl-C", "| head", "last_stale_op",
                             "events dropped"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        sig_assert_contains(r.out, needles[i]);
    run_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_detail),
        cmocka_unit_test(test_key_json),
        cmocka_unit_test(test_missing_key),
        cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_watch_plain),
        cmocka_unit_test(test_watch_json),
        cmocka_unit_test(test_watch_closed_pipe),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
