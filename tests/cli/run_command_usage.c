/* SPDX-License-Identifier: MIT */
/*
 * run_command_usage.c - the command line of `fencelock run`, against a real
 * fencelockd: bad usage (status 2, the fault named, a hint to --help), the
 * limits of --lease, flock(1)'s forms, any key, --help, the region by
 * option or environment (a relative path made absolute for the command, a
 * URI passed on as it is) and regions that cannot be opened.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cli_util.h"
#include "fencelock.h"
#include "harness.h"
#include "run_util.h"
#include "spawn.h"

/* ---- bad usage and region errors --------------------------------------------- */

static void expect_usage(const char *const *args, const char *message)
{
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o, args);
    if (r.status != 2)
        fail_msg("expected status 2 for \"%s\", got %d; stderr: %s", message, r.status, r.err);
    assert_string_equal(r.out, "");
    assert_int_equal(count_lines(r.err), 2);
    assert_true(strncmp(r.err, "fencelock run: ", 15) == 0);
    sp_assert_contains(r.err, message);
    sp_assert_contains(r.err, "Try 'fencelock run --help'.");
    run_result_free(&r);
}

static void test_bad_usage(void **state)
{
    (void)state;
    char long_key[200];
    memset(long_key, 'k', 128);
    long_key[128] = '\0';
    char max_key[200];
    memset(max_key, 'k', 127);
    max_key[127] = '\0';
#define U(msg, ...) expect_usage((const char *const[]){"run", __VA_ARGS__, NULL}, msg)
    U("missing KEY and COMMAND", "--lease", "1s");
    U("missing COMMAND after KEY", "k");
    U("expected COMMAND after KEY, found '--lease' (options go before KEY", "k", "--lease", "1s",
      "--", "true");
    U("expected COMMAND after KEY, found '-x'", "k", "-x");
    U("missing COMMAND after '--'", "k", "--");
    U("COMMAND is empty", "k", "--", "");
    U("KEY is empty", "", "--", "true");
    U("KEY is 128 bytes long", long_key, "--", "true");
    U("--lease '5x': unknown unit", "--lease", "5x", "k", "--", "true");
    U("--lease '-1s': negative durations are not allowed", "--lease", "-1s", "k", "--", "true");
    U("--lease '': empty duration", "--lease", "", "k", "--", "true");
    U("--lease '0.1': a lease must be at least 250ms", "--lease", "0.1", "k", "--", "true");
    U("-c/--command given twice", "-c", "true", "-c", "true", "k");
    U("unexpected argument 'true': -c STRING and COMMAND exclude each other", "-c", "true", "k",
      "true");
    U("unexpected argument 'x': -c STRING and COMMAND exclude each other", "k", "-c", "true",
      "x");
    U("option '-c' needs an argument", "k", "-c");
    U("-c: the command STRING is empty", "k", "-c", "");
    U("--conflict-exit-code '256': not an exit status from 0 to 255", "-E", "256", "k", "true");
    U("--conflict-exit-code '-1': not an exit status", "--conflict-exit-code", "-1", "k",
      "true");
    U("--conflict-exit-code '': not an exit status", "-E", "", "k", "true");
    U("--lease '0': a lease must be at least 250ms", "--lease", "0", "k", "--", "true");
    U("--lease '0.5ms': a lease must be at least 250ms", "--lease", "0.5ms", "k", "--", "true");
    U("--wait '1.s': expected digits after the decimal point", "--wait", "1.s", "k", "--",
      "true");
    U("--wait 's': expected a number", "--wait", "s", "k", "--", "true");
    U("--wait '+1s': expected a number", "--wait", "+1s", "k", "--", "true");
    U("--wait '1 s': unknown unit", "--wait", "1 s", "k", "--", "true");
    U("--kill-after '5d': unknown unit", "--kill-after", "5d", "k", "--", "true");
    U("--kill-after '99999999999m': too long", "--kill-after", "99999999999m", "k", "--",
      "true");
    U("--wait and --no-wait exclude each other", "--wait", "1s", "--no-wait", "k", "--",
      "true");
    U("unknown option '--frobnicate'", "--frobnicate", "k", "--", "true");
    U("unknown option '-x'", "-x", "k", "--", "true");
    U("option '--lease' needs an argument", "--lease");
    U("option '--no-wait' takes no argument", "--no-wait=1", "k", "--", "true");
    U("--region: the path is empty", "--region", "", "k", "--", "true");
#undef U
    /* The longest key is fine, and options may be ended by --. */
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o, (const char *const[]){"run", max_key, "--", "true", NULL});
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    run_tool(&r, &o,
             (const char *const[]){"run", "-l", "2s", "-w", "1.5s", "-k", "250ms", "--",
                                   "run/dashdash", "--", "sh", "-c", "exit 9", NULL});
    assert_int_equal(r.status, 9);
    run_result_free(&r);
}

/* flock(1)'s habits: -w with bare seconds, -E for the status when the key
 * is not acquired, -c STRING through sh -c (before or after KEY), and
 * KEY COMMAND without '--'.  I4: a busy key is never waited for past -w. */
static void test_flock_habits(void **state)
{
    (void)state;
    fl_lease held;
    assert_int_equal(fl_acquire(region_, "run/flock", 60 * TH_S, 0, &held), 0);
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o, (const char *const[]){"run", "-n", "-E", "3", "run/flock", "true", NULL});
    assert_int_equal(r.status, 3);
    sp_assert_contains(r.err, "'run/flock' is held by another process");
    run_result_free(&r);
    run_tool(&r, &o,
             (const char *const[]){"run", "--conflict-exit-code", "0", "--no-wait", "run/flock",
                                   "true", NULL});
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    uint64_t t0 = th_now_ns();
    run_tool(&r, &o,
             (const char *const[]){"run", "-w", "0.2", "-E", "9", "run/flock", "-c", "echo ran",
                                   NULL});
    assert_true(th_now_ns() - t0 >= 200 * TH_MS); /* 0.2 is seconds, not ms */
    assert_int_equal(r.status, 9);
    assert_string_equal(r.out, "");
    sp_assert_contains(r.err, "'run/flock' is still held after waiting 200ms");
    run_result_free(&r);
    assert_int_equal(fl_release(region_, &held), 0);

    /* KEY COMMAND without '--'; its arguments may start with '-'. */
    run_tool(&r, &o,
             (const char *const[]){"run", "run/flock", "sh", "-c", "echo $FENCELOCK_KEY; exit 4",
                                   NULL});
    assert_int_equal(r.status, 4);
    assert_string_equal(r.out, "run/flock\n");
    run_result_free(&r);
    /* -c STRING after KEY (flock's form) and before it. */
    run_tool(&r, &o,
             (const char *const[]){"run", "run/flock", "-c", "echo \"$FENCELOCK_TOKEN\" | wc -l",
                                   NULL});
    assert_int_equal(r.status, 0);
    sp_assert_contains(r.out, "1\n");
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"run", "--command=exit 5", "run/flock", NULL});
    assert_int_equal(r.status, 5);
    run_result_free(&r);
    run_tool(&r, &o, (const char *const[]){"run", "run/flock", "--command=exit 6", NULL});
    assert_int_equal(r.status, 6);
    run_result_free(&r);
    assert_true(key_free("run/flock"));
}

/* I9: every key the library takes is a KEY on the command line (spaces,
 * UTF-8, control bytes), passed to the command as it is and shown escaped
 * (\xNN, \\) in messages. */
static void test_any_key(void **state)
{
    (void)state;
    const char *keys[] = {"a b", "caf\xc3\xa9", "tab\there", "back\\slash", "'quoted'"};
    const char *shown[] = {"'a b'", "'caf\\xc3\\xa9'", "'tab\\x09here'", "'back\\\\slash'",
                           "''quoted''"};
    run_opts o = {.region_env = daemon_.region};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        run_result r;
        run_tool(&r, &o,
                 (const char *const[]){"run", keys[i], "sh", "-c", "printf %s \"$FENCELOCK_KEY\"",
                                       NULL});
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, keys[i]);
        run_result_free(&r);
        fl_lease held;
        assert_int_equal(fl_acquire(region_, keys[i], 60 * TH_S, 0, &held), 0);
        run_tool(&r, &o, (const char *const[]){"run", "-n", keys[i], "true", NULL});
        assert_int_equal(r.status, 75);
        char want[128];
        snprintf(want, sizeof want, "fencelock run: %s is held by another process", shown[i]);
        sp_assert_contains(r.err, want);
        run_result_free(&r);
        assert_int_equal(fl_release(region_, &held), 0);
    }
}

/* I4, I9: --lease below what renewal keeps on a loaded machine (250ms,
 * docs/run-lease.md) or beyond what a region can record (deadlines are
 * microseconds of CLOCK_MONOTONIC below 2^48) is refused before anything
 * runs, with the limit. */
static void test_lease_limits(void **state)
{
    (void)state;
#define U(msg, ...) expect_usage((const char *const[]){"run", __VA_ARGS__, NULL}, msg)
    U("--lease '249ms': a lease must be at least 250ms", "--lease", "249ms", "k", "--", "true");
    U("--lease '1ms': a lease must be at least 250ms", "--lease", "1ms", "k", "--", "true");
    run_opts o = {.region_env = daemon_.region};
    run_result r;
    run_tool(&r, &o,
             (const char *const[]){"run", "--lease", "250ms", "run/min", "--", "true", NULL});
    assert_int_equal(r.status, 0);
    run_result_free(&r);

    /* About 190 years: accepted by the duration parser, not by a region. */
    run_tool(&r, &o,
             (const char *const[]){"run", "--lease", "99999999m", "run/max", "--", "sh", "-c",
                                   "echo ran", NULL});
    assert_int_equal(r.status, 2);
    assert_string_equal(r.out, "");
    sp_assert_contains(r.err, "--lease '99999999m': longer than a region can record: at most ");
    unsigned long long max_m;
    const char *at = strstr(r.err, "at most ");
    assert_int_equal(sscanf(at, "at most %llum now", &max_m), 1);
    run_result_free(&r);
    /* The limit is (2^48 - 1) us less the clock, in whole minutes. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * TH_S + (uint64_t)ts.tv_nsec;
    uint64_t want = (((1ull << 48) - 1) * 1000ull - now) / (60 * TH_S);
    assert_true(max_m == want || max_m == want + 1); /* a minute may have turned since */
    char over[32], under[32];
    snprintf(over, sizeof over, "%llum", max_m + 1);
    snprintf(under, sizeof under, "%llum", max_m - 1);
    U("longer than a region can record: at most", "--lease", over, "k", "--", "true");
    run_tool(&r, &o,
             (const char *const[]){"run", "--lease", under, "run/max", "--", "true", NULL});
    if (r.status != 0)
        fail_msg("--lease %s: status %d; stderr: %s", under, r.status, r.err);
    run_result_free(&r);
#undef U
}

static void test_help(void **state)
{
    (void)state;
    run_result a, b;
    run_tool(&a, NULL, (const char *const[]){"run", "--help", NULL});
    run_tool(&b, NULL, (const char *const[]){"help", "run", NULL});
    assert_int_equal(a.status, 0);
    assert_int_equal(b.status, 0);
    assert_string_equal(a.out, b.out);
    assert_string_equal(a.err, "");
    const char *needles[] = {"Usage:\n  fencelock run", "KEY [--] COMMAND", "--lease DURATION",
                             "--wait DURATION", "--no-wait", "--kill-after DURATION",
                             "--region PATH", "FENCELOCK_TOKEN", "FENCELOCK_KEY",
                             "FENCELOCK_REGION", "default 30s", "at least 250ms", "default 5s",
                             "250ms, 1.5s, 2m", "decimal number of seconds",
                             "--conflict-exit-code N", "--command STRING", "KEY -c STRING",
                             "process group", "SIGTERM", "SIGKILL", "any 1 to 127 bytes",
                             "  75   ", "  76   ", "  2    ", "  3    ", "  125  ", "  126  ",
                             "  127  ", "128+N", "fence_token <= $FENCELOCK_TOKEN",
                             "its absolute path", "so COMMAND may\n"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        sp_assert_contains(a.out, needles[i]);
    run_result_free(&a);
    run_result_free(&b);
    /* The command list names it. */
    run_tool(&a, NULL, (const char *const[]){"--help", NULL});
    sp_assert_contains(a.out, "  run ");
    run_result_free(&a);
    /* Help that cannot be written is run's own failure, 125 (1 would be
     * taken for COMMAND's). */
    run_opts full = {.stdout_path = "/dev/full"};
    run_tool(&a, &full, (const char *const[]){"run", "--help", NULL});
    assert_int_equal(a.status, 125);
    sp_assert_contains(a.err, "cannot write the output");
    run_result_free(&a);
}

/* A relative region, by -r or by $FENCELOCK_REGION, reaches COMMAND as an
 * absolute path: COMMAND that changes directory still commits and reads
 * through it.  A URI is no path: it is passed on as it is. */
static void test_relative_region(void **state)
{
    (void)state;
    char dir[PATH_MAX], want[PATH_MAX + 16];
    assert_non_null(realpath(th_tmpdir(), dir)); /* getcwd() gives the resolved path */
    snprintf(want, sizeof want, "%s/region", dir);
    assert_string_equal(strrchr(daemon_.region, '/'), "/region"); /* the daemon's, in dir */
    /* sh -c SCRIPT DIR TOOL [ARG...]: from DIR, fencelock run ARG...; the
     * command goes to / and uses $FENCELOCK_REGION there. */
    const char *script =
        "cd \"$0\" && export FL_TOOL=\"$1\" && shift && exec \"$FL_TOOL\" run \"$@\"";
    const char *command = "cd / && printf '%s\\n' \"$FENCELOCK_REGION\" && "
                          "printf rel | \"$FL_TOOL\" commit run/relrec && "
                          "\"$FL_TOOL\" read run/relrec";
    const char *forms[][3] = {{"-r", "region", NULL}, {"--region", "./region", NULL},
                              {NULL, NULL, "region"}, {NULL, NULL, "./region"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const char *argv[12] = {"sh", "-c", script, dir, FENCELOCK_TOOL_PATH};
        int n = 5;
        for (int k = 0; k < 2 && forms[i][k]; k++)
            argv[n++] = forms[i][k];
        argv[n++] = "run/rel";
        argv[n++] = "-c";
        argv[n++] = command;
        argv[n] = NULL;
        run_opts o = {.region_env = forms[i][2]}; /* NULL: unset */
        run_result r;
        run_program(&r, &o, argv);
        if (r.status != 0)
            fail_msg("form %zu: status %d; stderr: %s", i, r.status, r.err);
        char out[PATH_MAX + 32];
        snprintf(out, sizeof out, "%s\nrel", want);
        assert_string_equal(r.out, out);
        sp_assert_contains(r.err, "fence ");
        run_result_free(&r);
    }
    assert_true(key_free("run/rel"));
    /* A URI is not joined to the directory: the library is given the URI
     * (no endpoint answers here, or the scheme is unknown: status 3, its
     * message names it).  The library decides what is a URI, not the tool's
     * reading of the text: a scheme the tool does not know stays as it is. */
    const char *uris[] = {"etcd://127.0.0.1:9/fl-rel", "etcds://127.0.0.1:9/fl-rel",
                          "redis://127.0.0.1:9/fl-rel"};
    for (size_t i = 0; i < sizeof uris / sizeof uris[0]; i++) {
        run_result r;
        run_program(&r, NULL,
                    (const char *const[]){"sh", "-c", script, dir, FENCELOCK_TOOL_PATH, "-r",
                                          uris[i], "run/rel", "--", "true", NULL});
        assert_int_equal(r.status, 3);
        /* "region etcd://127.0.0.1:9/fl-rel: ...", or "region etcd://...:"
         * in a build without etcd */
        char named[32];
        snprintf(named, sizeof named, "region %.*s://", (int)strcspn(uris[i], ":"), uris[i]);
        sp_assert_contains(r.err, named);
        if (strstr(r.err, dir) || strstr(r.err, "does not exist"))
            fail_msg("%s was joined to the directory: %s", uris[i], r.err);
        run_result_free(&r);
    }
}

static void test_region_errors(void **state)
{
    (void)state;
    run_result r;
    /* Missing, by option and by environment. */
    char missing[512];
    snprintf(missing, sizeof missing, "%s", th_path("no-such-region"));
    run_tool(&r, NULL,
             (const char *const[]){"run", "--region", missing, "k", "--", "sh", "-c",
                                   "echo ran", NULL});
    assert_int_equal(r.status, 3);
    assert_string_equal(r.out, "");
    sp_assert_contains(r.err, "fencelock run: ");
    sp_assert_contains(r.err, missing);
    run_result_free(&r);
    run_opts o = {.region_env = missing};
    run_tool(&r, &o, (const char *const[]){"run", "k", "--", "true", NULL});
    assert_int_equal(r.status, 3);
    sp_assert_contains(r.err, missing);
    run_result_free(&r);
    /* Not a region. */
    char garbage[512];
    snprintf(garbage, sizeof garbage, "%s", th_path("garbage-region"));
    FILE *f = fopen(garbage, "w");
    assert_non_null(f);
    for (int i = 0; i < 8192; i++)
        fputc(i * 7 & 0xff, f);
    fclose(f);
    run_tool(&r, NULL,
             (const char *const[]){"run", "--region", garbage, "k", "--", "true", NULL});
    assert_int_equal(r.status, 3);
    sp_assert_contains(r.err, garbage);
    run_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease_limits),
        cmocka_unit_test(test_flock_habits),
        cmocka_unit_test(test_any_key),
        cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_region_errors),
        cmocka_unit_test(test_relative_region),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
