/* SPDX-License-Identifier: MIT */
/*
 * cli_commit.c - `fencelock commit` and `fencelock read`: fenced records
 * from a shell.  The seed scenario as a shell script (commit_seed.sh) with
 * fencelock run and a real SIGSTOP; every documented exit status; the JSON
 * form of read; the key and token from fencelock run's environment.
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

#include "cli_util.h"
#include "exit_docs.h"
#include "fencelock.h"
#include "harness.h"

static th_daemon daemon_;
static fl_region *region_;

static int setup(void **state)
{
    (void)state;
    if (th_daemon_start(&daemon_, th_path("region"), (const char *const[]){"--record-size", "64",
                                                                          NULL}) != 0)
        return -1;
    return fl_open(daemon_.region, &region_) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fl_close(region_);
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

static void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

/* r (of `fencelock cmd ...`) exited want, a status that cmd's --help and
 * fencelock(1) document. */
static void assert_status(const run_result *r, const char *cmd, int want)
{
    if (r->status != want)
        fail_msg("fencelock %s: exit status %d, want %d; stderr: %s", cmd, r->status, want,
                 r->err);
    assert_exit_documented(cmd, want);
}

/* I2, I4: the seed scenario from a shell script: A stopped past its lease,
 * B takes over and commits, A's commit exits 77, read shows B's data. */
static void test_seed_scenario_shell(void **state)
{
    (void)state;
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_program(&r, &o,
                (const char *const[]){"sh", SOURCE_DIR "/commit_seed.sh", FENCELOCK_TOOL_PATH,
                                      NULL});
    if (r.status != 0)
        fail_msg("commit_seed.sh: status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    assert_contains(r.out, "refused (77)");
    run_result_free(&r);
}

/* I2, I8, I9: every exit status of commit and read, each with its message. */
static void test_exit_statuses(void **state)
{
    (void)state;
    run_opts o = {.region_env = daemon_.region, .stdin_text = "one"};
    run_result r;
    fl_lease a, b;
    assert_int_equal(fl_acquire(region_, "k", 60 * TH_S, 0, &a), 0);
    assert_int_equal(fl_release(region_, &a), 0);
    assert_int_equal(fl_acquire(region_, "k", 60 * TH_S, 0, &b), 0);
    char ta[32], tb[32], tbig[32];
    snprintf(ta, sizeof ta, "%" PRIu64, a.token);
    snprintf(tb, sizeof tb, "%" PRIu64, b.token);
    snprintf(tbig, sizeof tbig, "%" PRIu64, b.token + 1);

    /* 4: the record does not exist yet. */
    run_tool(&r, &o, (const char *const[]){"read", "rec", NULL});
    assert_status(&r, "read", 4);
    assert_contains(r.err, "no record 'rec'");
    run_result_free(&r);
    /* 0: accepted, from stdin. */
    run_tool(&r, &o, (const char *const[]){"commit", "--key", "k", "--token", tb, "rec", NULL});
    assert_status(&r, "commit", 0);
    assert_string_equal(r.err, "");
    run_result_free(&r);
    /* 77: stale, naming the accepted token; --strict refuses an equal one. */
    run_tool(&r, &o, (const char *const[]){"commit", "-k", "k", "-t", ta, "rec", NULL});
    assert_status(&r, "commit", 77);
    char want[128];
    snprintf(want, sizeof want, "rejected as stale: 'rec' has accepted token %s", tb);
    assert_contains(r.err, want);
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"commit", "--strict", "-k", "k", "-t", tb, "rec", NULL});
    assert_status(&r, "commit", 77);
    run_result_free(&r);
    /* 2: a token k never issued, not a number, no key or token at all. */
    run_tool(&r, &o, (const char *const[]){"commit", "-k", "k", "-t", tbig, "rec", NULL});
    assert_status(&r, "commit", 2);
    assert_contains(r.err, "was never issued by key 'k'");
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"commit", "-k", "k", "-t", "12x", "rec", NULL});
    assert_status(&r, "commit", 2);
    assert_contains(r.err, "--token '12x' is not a token");
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"commit", "rec", NULL});
    assert_status(&r, "commit", 2);
    assert_contains(r.err, "no KEY: give --key");
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"commit", "-k", "k", NULL});
    assert_status(&r, "commit", 2);
    assert_contains(r.err, "missing RECORD");
    run_result_free(&r);
    /* 4: a key never acquired; nothing is created. */
    run_tool(&r, &o, (const char *const[]){"commit", "-k", "nokey", "-t", "1", "rec", NULL});
    assert_status(&r, "commit", 4);
    assert_contains(r.err, "key 'nokey' was never acquired");
    run_result_free(&r);
    /* 78: bound to another key. */
    fl_lease other;
    assert_int_equal(fl_acquire(region_, "other", 60 * TH_S, 0, &other), 0);
    char to[32];
    snprintf(to, sizeof to, "%" PRIu64, other.token);
    run_tool(&r, &o, (const char *const[]){"commit", "-k", "other", "-t", to, "rec", NULL});
    assert_status(&r, "commit", 78);
    run_result_free(&r);
    /* 65: larger than the record size (64 here); nothing committed. */
    char big[100];
    memset(big, 'x', 65);
    big[65] = '\0';
    run_opts ob = {.region_env = daemon_.region, .stdin_text = big};
    run_tool(&r, &ob, (const char *const[]){"commit", "-k", "k", "-t", tb, "rec", NULL});
    assert_status(&r, "commit", 65);
    assert_contains(r.err, "larger than the region's record size (64 bytes)");
    run_result_free(&r);
    /* 0: read gives the committed bytes and the fence. */
    run_tool(&r, &o, (const char *const[]){"read", "rec", NULL});
    assert_status(&r, "read", 0);
    assert_string_equal(r.out, "one");
    snprintf(want, sizeof want, "fence %s\n", tb);
    assert_string_equal(r.err, want);
    run_result_free(&r);
    /* 3: no region.  (th_path's buffer is reused by run_tool for stdin: a
     * copy.) */
    char none[512], no_file[512];
    snprintf(none, sizeof none, "%s", th_path("none"));
    snprintf(no_file, sizeof no_file, "%s", th_path("no-file"));
    run_tool(&r, &o, (const char *const[]){"read", "--region", none, "rec", NULL});
    assert_status(&r, "read", 3);
    assert_contains(r.err, "does not exist");
    run_result_free(&r);
    run_tool(&r, &o,
             (const char *const[]){"commit", "--region", none, "-k", "k", "-t", tb, "rec", NULL});
    assert_status(&r, "commit", 3);
    assert_contains(r.err, "does not exist");
    run_result_free(&r);
    /* 1: FILE cannot be read; the output of read cannot be written. */
    run_tool(&r, &o,
             (const char *const[]){"commit", "-k", "k", "-t", tb, "rec", no_file,
                                   NULL});
    assert_status(&r, "commit", 1);
    assert_contains(r.err, "cannot open");
    run_result_free(&r);
    run_opts full = {.region_env = daemon_.region, .stdout_path = "/dev/full"};
    run_tool(&r, &full, (const char *const[]){"read", "rec", NULL});
    assert_status(&r, "read", 1);
    assert_contains(r.err, "cannot write the output");
    run_result_free(&r);
    /* 2: read's bad usage. */
    run_tool(&r, &o, (const char *const[]){"read", "rec", "extra", NULL});
    assert_status(&r, "read", 2);
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"read", NULL});
    assert_status(&r, "read", 2);
    run_result_free(&r);
    /* 5 (a value torn by an unclean stop of a region on disk) is made in
     * tests/fault/boundaries.c: here, that it is documented. */
    assert_exit_documented("read", 5);
    assert_int_equal(fl_release(region_, &b), 0);
    assert_int_equal(fl_release(region_, &other), 0);
}

/* 73: no room for a new record (a region of one record). */
static void test_no_room(void **state)
{
    (void)state;
    th_daemon d;
    char region[512];
    snprintf(region, sizeof region, "%s", th_path("one-record"));
    if (th_daemon_start(&d, region, (const char *const[]){"--records", "1", NULL}) != 0)
        fail_msg("fencelockd --records 1 did not start");
    run_opts o = {.region_env = region, .stdin_text = "v"};
    run_result r;
    run_tool(&r, &o,
             (const char *const[]){"run", "k", "-c",
                                   FENCELOCK_TOOL_PATH " commit first && " FENCELOCK_TOOL_PATH
                                                       " commit second",
                                   NULL});
    assert_status(&r, "commit", 73); /* fencelock run passes the commit's status on */
    assert_contains(r.err, "fencelock commit: ");
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"read", "first", NULL});
    assert_status(&r, "read", 0);
    assert_string_equal(r.out, "v");
    run_result_free(&r);
    th_daemon_stop(&d, SIGTERM);
}

/* I8, I9: any key and record name (UTF-8, spaces); the key and the token
 * from fencelock run's environment; read --json. */
static void test_env_and_json(void **state)
{
    (void)state;
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    const char *key = "caf\xc3\xa9 job";
    run_tool(&r, &o,
             (const char *const[]){"run", key, "-c", "printf 'hi\\n' | " FENCELOCK_TOOL_PATH
                                                     " commit 'my rec' && echo $FENCELOCK_TOKEN",
                                   NULL});
    if (r.status != 0)
        fail_msg("status %d: %s", r.status, r.err);
    uint64_t token = strtoull(r.out, NULL, 10);
    assert_true(token > 0);
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"read", "--json", "my rec", NULL});
    assert_int_equal(r.status, 0);
    char want[256];
    snprintf(want, sizeof want,
             "{\"record\":\"my rec\",\"key\":\"caf\\u00c3\\u00a9 job\",\"fence\":%" PRIu64
             ",\"data_base64\":\"aGkK\"}\n",
             token);
    assert_string_equal(r.out, want);
    assert_string_equal(r.err, "");
    run_result_free(&r);
    if (have_python3()) {
        run_tool(&r, &o, (const char *const[]){"read", "--json", "my rec", NULL});
        char *v = json_eval(r.out, "__import__('base64').b64decode(d['data_base64']).decode()");
        assert_string_equal(v, "\"hi\\n\"");
        free(v);
        run_result_free(&r);
    }
}

static void test_help(void **state)
{
    (void)state;
    run_result r;
    run_tool(&r, NULL, (const char *const[]){"commit", "--help", NULL});
    assert_int_equal(r.status, 0);
    const char *cn[] = {"Usage: fencelock commit", "FENCELOCK_TOKEN", "--strict", "  77  ",
                        "  65  ", "  78  ", "  73  ", "  4   "};
    for (size_t i = 0; i < sizeof cn / sizeof cn[0]; i++)
        assert_contains(r.out, cn[i]);
    run_result_free(&r);
    run_tool(&r, NULL, (const char *const[]){"read", "--help", NULL});
    assert_int_equal(r.status, 0);
    const char *rn[] = {"Usage: fencelock read", "--json", "data_base64", "  4  ", "  5  "};
    for (size_t i = 0; i < sizeof rn / sizeof rn[0]; i++)
        assert_contains(r.out, rn[i]);
    run_result_free(&r);
    run_tool(&r, NULL, (const char *const[]){"--help", NULL});
    assert_contains(r.out, "  commit ");
    assert_contains(r.out, "  read ");
    run_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_scenario_shell),
        cmocka_unit_test(test_exit_statuses),
        cmocka_unit_test(test_no_room),
        cmocka_unit_test(test_env_and_json),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
