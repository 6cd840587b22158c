/* SPDX-License-Identifier: MIT */
/*
 * cli_usage.c - the fencelock tool's command line: help and version
 * texts, and bad usage (exit status 2, one message and a hint on stderr,
 * nothing on stdout); every exit status documented alike in each command's
 * --help and in fencelock(1), and every one the code defines among them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <ctype.h>
#include <stdlib.h>

#include "cli_util.h"
#include "exit_docs.h"
#include "fencelock.h"
#include "harness.h"

#define RUN(res, ...) run_tool((res), NULL, (const char *const[]){__VA_ARGS__, NULL})

static void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

static void test_help_names_everything(void **state)
{
    (void)state;
    const char *forms[] = {"--help", "-h", "help"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        run_result r;
        RUN(&r, forms[i]);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        const char *needles[] = {"Usage: fencelock", "status", "--help", "--version", "--region",
                                 "FENCELOCK_REGION", "/dev/shm/fencelock-UID/region",
                                 "Exit status", "Examples"};
        for (size_t k = 0; k < sizeof needles / sizeof needles[0]; k++)
            assert_contains(r.out, needles[k]);
        /* Every exit status is explained. */
        for (int code = 0; code <= 3; code++) {
            char line[16];
            snprintf(line, sizeof line, "  %d  ", code);
            assert_contains(r.out, line);
        }
        run_result_free(&r);
    }
}

static void test_status_help(void **state)
{
    (void)state;
    run_result a, b, c;
    RUN(&a, "status", "--help");
    RUN(&b, "help", "status");
    RUN(&c, "status", "-h");
    assert_int_equal(a.status, 0);
    assert_int_equal(b.status, 0);
    assert_int_equal(c.status, 0);
    assert_string_equal(a.out, b.out);
    assert_string_equal(a.out, c.out);
    assert_string_equal(a.err, "");
    const char *needles[] = {"Usage: fencelock status", "-r, --region PATH", "--json", "--help",
                             "FENCELOCK_REGION", "/dev/shm/fencelock-UID/region", "Exit status",
                             "Examples", "KEY", "STATE", "TOKEN", "LEFT", "TAKEOVERS", "DEATHS",
                             "REJ-TOKEN"};
    for (size_t k = 0; k < sizeof needles / sizeof needles[0]; k++)
        assert_contains(a.out, needles[k]);
    run_result_free(&a);
    run_result_free(&b);
    run_result_free(&c);
}

static void test_version(void **state)
{
    (void)state;
    char want[64];
    snprintf(want, sizeof want, "fencelock %d.%d.%d\n", FL_VERSION_MAJOR, FL_VERSION_MINOR,
             FL_VERSION_PATCH);
    const char *forms[] = {"--version", "-V"};
    for (size_t i = 0; i < 2; i++) {
        run_result r;
        RUN(&r, forms[i]);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, want);
        assert_string_equal(r.err, "");
        run_result_free(&r);
    }
}

/* I9: bad usage: status 2, nothing on stdout, the problem and a hint on stderr. */
static void expect_usage_error(const char *const *args, const char *message, const char *hint)
{
    run_result r;
    run_tool(&r, NULL, args);
    if (r.status != 2)
        fail_msg("%s ...: exit status %d, want 2; stderr: %s", args[0], r.status, r.err);
    assert_string_equal(r.out, "");
    assert_int_equal(count_lines(r.err), 2);
    assert_contains(r.err, message);
    assert_contains(r.err, hint);
    run_result_free(&r);
}

static void test_bad_usage(void **state)
{
    (void)state;
    const char *top = "Try 'fencelock --help'.";
    const char *sub = "Try 'fencelock status --help'.";
    expect_usage_error((const char *const[]){NULL}, "fencelock: no command given", top);
    expect_usage_error((const char *const[]){"frobnicate", NULL},
                       "fencelock: unknown command 'frobnicate'", top);
    expect_usage_error((const char *const[]){"--frobnicate", NULL},
                       "fencelock: unknown option '--frobnicate'", top);
    expect_usage_error((const char *const[]){"help", "frobnicate", NULL},
                       "unknown command 'frobnicate'", top);
    expect_usage_error((const char *const[]){"--help", "extra", NULL},
                       "unexpected argument 'extra'", top);
    expect_usage_error((const char *const[]){"status", "--frobnicate", NULL},
                       "fencelock status: unknown option '--frobnicate'", sub);
    expect_usage_error((const char *const[]){"status", "-x", NULL},
                       "fencelock status: unknown option '-x'", sub);
    expect_usage_error((const char *const[]){"status", "--region", NULL},
                       "option '--region' needs an argument", sub);
    expect_usage_error((const char *const[]){"status", "-r", NULL},
                       "option '-r' needs an argument", sub);
    expect_usage_error((const char *const[]){"status", "--json=yes", NULL},
                       "option '--json' takes no argument", sub);
    expect_usage_error((const char *const[]){"status", "--region", "", NULL},
                       "--region: the path is empty", sub);
    expect_usage_error((const char *const[]){"status", "one", "two", NULL},
                       "fencelock status: unexpected argument 'two'", sub);
    /* I9: a bad column list is named, not half applied. */
    expect_usage_error((const char *const[]){"status", "-o", NULL},
                       "option '-o' needs an argument", sub);
    expect_usage_error((const char *const[]){"status", "-o", "KEY,NOPE", NULL},
                       "--output: unknown column 'NOPE' of the locks table", sub);
    expect_usage_error((const char *const[]){"status", "-o", "clients:KEY", NULL},
                       "--output: unknown column 'KEY' of the clients table", sub);
    expect_usage_error((const char *const[]){"status", "--output", "keys:KEY", NULL},
                       "--output: 'keys' is not a table (clients, locks or records)", sub);
    expect_usage_error((const char *const[]){"status", "-o", "KEY,,STATE", NULL},
                       "--output: an empty column name", sub);
    expect_usage_error((const char *const[]){"status", "-o", "+", NULL},
                       "--output: no column given", sub);
    expect_usage_error((const char *const[]){"status", "--json", "-o", "KEY", NULL},
                       "--output chooses the columns of the tables: not with --json", sub);
    expect_usage_error((const char *const[]){"status", "--output-all", "--watch", NULL},
                       "--output-all chooses the columns of the tables: not with --watch", sub);
    expect_usage_error((const char *const[]){"status", "-o", "KEY", "some/key", NULL},
                       "--output chooses the columns of the tables: not with KEY", sub);
}

/* --list-columns and --help describe every column of every table, each
 * once, the defaults marked. */
static void test_list_columns(void **state)
{
    (void)state;
    run_result l, h;
    RUN(&l, "status", "--list-columns");
    RUN(&h, "status", "--help");
    assert_int_equal(l.status, 0);
    assert_string_equal(l.err, "");
    const char *lines[] = {"Locks table, one row per key (-o locks:LIST; * default):\n",
                           "\n *KEY ", "\n  BUSY ", "\n  TIMEOUTS ", "\n  STALE-OP ",
                           "\n *LAST ", "Records table, one row per record", "\n  UNVOUCHED ",
                           "\n *REJ-PID ", "Clients table, one row per client",
                           "\n *CLIENT-ID "};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        assert_contains(l.out, lines[i]);
        assert_contains(h.out, lines[i]);
    }
    run_result_free(&l);
    run_result_free(&h);
}

/* Output that cannot be written is an error (status 1), not a success. */
static void test_write_error(void **state)
{
    (void)state;
    run_opts o = {.stdout_path = "/dev/full"};
    const char *const *forms[] = {(const char *const[]){"--help", NULL},
                                  (const char *const[]){"status", "--help", NULL},
                                  (const char *const[]){"--version", NULL}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        run_result r;
        run_tool(&r, &o, forms[i]);
        assert_int_equal(r.status, 1);
        assert_contains(r.err, "fencelock: cannot write the output");
        run_result_free(&r);
    }
}

/* The exit statuses the code defines (NAME_EXIT_WHAT = N in the tool's
 * sources), each with the command its prefix names (NULL: CLI_, shared). */
struct exit_constant {
    char name[64];
    int value;
    const char *cmd;
};

static int exit_constants(struct exit_constant *out, int max)
{
    static const struct {
        const char *prefix, *cmd;
    } prefixes[] = {{"COMMIT_", "commit"}, {"READ_", "read"}, {"RUN_", "run"}, {"CLI_", NULL}};
    DIR *d = opendir(FENCELOCK_TOOL_SOURCE_DIR);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 3 || (strcmp(e->d_name + len - 2, ".c") != 0 &&
                        strcmp(e->d_name + len - 2, ".h") != 0))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", FENCELOCK_TOOL_SOURCE_DIR, e->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char name[64];
            int value;
            /* "    COMMIT_EXIT_STALE = 77, ..." */
            if (sscanf(line, " %63[A-Z_] = %d", name, &value) != 2 || !strstr(name, "_EXIT_"))
                continue;
            assert_true(n < max);
            snprintf(out[n].name, sizeof out[n].name, "%s", name);
            out[n].value = value;
            out[n].cmd = NULL;
            bool known = false;
            for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
                if (strncmp(name, prefixes[i].prefix, strlen(prefixes[i].prefix)) == 0) {
                    out[n].cmd = prefixes[i].cmd;
                    known = true;
                }
            if (!known)
                fail_msg("%s (%s): which command's is it? (this test knows %s)", name,
                         e->d_name, "COMMIT_, READ_, RUN_, CLI_");
            n++;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* Every exit status is documented where a user looks: each command's --help
 * and its section of fencelock(1) list the same statuses, the EXIT STATUS
 * section lists every one of them and no other, and every status the code
 * defines is among them, for the command it belongs to. */
static void test_exit_statuses_documented(void **state)
{
    (void)state;
    run_result r;
    RUN(&r, "--help");
    const char *p = strstr(r.out, "\nCommands:\n");
    assert_non_null(p);
    p += strlen("\nCommands:\n");
    exit_codes all, every, top;
    memset(&every, 0, sizeof every);
    man_exit_codes(NULL, &all);
    help_exit_codes(NULL, &top);
    for (int i = 0; i < top.n; i++)
        every.v[every.n++] = top.v[i];
    char names[16][32];
    int ncmd = 0;
    while (*p == ' ' && p[1] == ' ' && isalpha((unsigned char)p[2])) {
        char name[32];
        assert_int_equal(sscanf(p, " %31s", name), 1);
        if (strcmp(name, "help") != 0) {
            assert_true(ncmd < 16);
            snprintf(names[ncmd++], sizeof names[0], "%s", name);
        }
        p += strcspn(p, "\n") + 1;
    }
    run_result_free(&r);
    assert_true(ncmd >= 6); /* status metrics run commit read etcd-epoch */
    for (int c = 0; c < ncmd; c++) {
        exit_codes help, section;
        help_exit_codes(names[c], &help);
        man_exit_codes(names[c], &section);
        if (help.n == 0 || strcmp(exit_codes_text(&help), exit_codes_text(&section)) != 0)
            fail_msg("%s: --help lists exit statuses '%s', its section of fencelock(1) '%s'",
                     names[c], exit_codes_text(&help), exit_codes_text(&section));
        for (int i = 0; i < help.n; i++) {
            if (!exit_codes_has(&all, help.v[i]))
                fail_msg("%s exits %d, which EXIT STATUS of fencelock(1) does not list (%s)",
                         names[c], help.v[i], exit_codes_text(&all));
            bool seen = false;
            for (int k = 0; k < every.n; k++)
                seen |= every.v[k] == help.v[i];
            if (!seen) {
                assert_true(every.n < EXIT_CODES_MAX);
                every.v[every.n++] = help.v[i];
            }
        }
    }
    /* No status in EXIT STATUS that no command returns. */
    for (int i = 0; i < all.n; i++) {
        bool used = false;
        for (int k = 0; k < every.n; k++)
            used |= every.v[k] == all.v[i];
        if (!used)
            fail_msg("EXIT STATUS of fencelock(1) lists %d, which no --help does", all.v[i]);
    }
    /* What the code defines. */
    struct exit_constant k[64];
    int nk = exit_constants(k, 64);
    assert_true(nk >= 10); /* CLI_ 3, COMMIT_ 4, READ_ 1, RUN_ 5 */
    for (int i = 0; i < nk; i++) {
        if (!exit_codes_has(&all, k[i].value))
            fail_msg("%s = %d is not in EXIT STATUS of fencelock(1) (%s)", k[i].name, k[i].value,
                     exit_codes_text(&all));
        if (!k[i].cmd)
            continue;
        exit_codes help;
        help_exit_codes(k[i].cmd, &help);
        if (!exit_codes_has(&help, k[i].value))
            fail_msg("%s = %d is not in fencelock %s --help (%s)", k[i].name, k[i].value,
                     k[i].cmd, exit_codes_text(&help));
    }
}

/* I9: fencelockd reads its intervals with the one duration grammar: a bare
 * number is seconds (decimals allowed), units us ms s m h; bad text is
 * refused with the reason, before anything is created. */
static void test_fencelockd_durations(void **state)
{
    (void)state;
    char region[512];
    snprintf(region, sizeof region, "%s/dur.region", th_tmpdir());
    const struct {
        const char *opt, *value, *why;
    } bad[] = {
        {"--flush-interval", "5x", "unknown unit"},
        {"--flush-interval", "-1", "negative"},
        {"--flush-interval", "50ms", "from 100ms to 24h"},
        {"--metrics-interval", "0", "from 100ms to 24h"},
        {"--metrics-interval", "25h", "from 100ms to 24h"},
        {"--metrics-interval", "1.5sec", "unknown unit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_result r;
        run_program(&r, NULL,
                    (const char *const[]){FENCELOCKD_PATH, "--region", region, bad[i].opt,
                                          bad[i].value, NULL});
        if (r.status == 0 || !strstr(r.err, bad[i].why) || !strstr(r.err, bad[i].opt))
            fail_msg("fencelockd %s %s: status %d, stderr:\n%s", bad[i].opt, bad[i].value,
                     r.status, r.err);
        run_result_free(&r);
    }
    /* Old spellings (whole seconds) and new ones start a supervisor. */
    const char *const good[][4] = {
        {"--flush-interval", "0.5", "--metrics-interval", "250ms"},
        {"--flush-interval", "30", "--metrics-interval", "15"},
        {"--flush-interval", "0", "--metrics-interval", "1m"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char metrics[600];
        snprintf(metrics, sizeof metrics, "%s/dur%zu.prom", th_tmpdir(), i);
        th_daemon d;
        if (th_daemon_start(&d, region,
                            (const char *const[]){good[i][0], good[i][1], good[i][2], good[i][3],
                                                  "--metrics-file", metrics, NULL}) != 0)
            fail_msg("fencelockd %s %s %s %s did not start", good[i][0], good[i][1],
                     good[i][2], good[i][3]);
        fl_region *fr;
        assert_int_equal(fl_open(region, &fr), 0);
        fl_close(fr);
        assert_int_equal(th_daemon_stop(&d, SIGTERM), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_names_everything),
        cmocka_unit_test(test_status_help),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_list_columns),
        cmocka_unit_test(test_write_error),
        cmocka_unit_test(test_exit_statuses_documented),
        cmocka_unit_test(test_fencelockd_durations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
