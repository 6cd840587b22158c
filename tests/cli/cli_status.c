/* SPDX-License-Identifier: MIT */
/*
 * cli_status.c - `fencelock status` on live regions served by a real
 * fencelockd: what the tables and the JSON document show for a fresh
 * region, for keys held, freed, expired and orphaned by a dead holder, for
 * records with accepted and rejected commits, for keys that need escaping,
 * and for a long key on an 80-column terminal (a pseudo-terminal made by
 * python3).  The JSON is checked by python3's strict parser.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A region path in this test's directory (th_path's buffer is reused). */
static void region_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s", th_path(name));
}

static void start_daemon(th_daemon *d, const char *region)
{
    if (th_daemon_start(d, region, NULL) != 0)
        fail_msg("fencelockd did not get ready on %s", region);
}

/* `fencelock status -r region` (with --json if json): must succeed quietly. */
static char *status(const char *region, bool json)
{
    run_result r;
    if (json)
        run_tool(&r, NULL, (const char *const[]){"status", "-r", region, "--json", NULL});
    else
        run_tool(&r, NULL, (const char *const[]){"status", "--region", region, NULL});
    if (r.status != 0)
        fail_msg("status exited %d: %s", r.status, r.err);
    assert_string_equal(r.err, "");
    free(r.err);
    return r.out;
}

__attribute__((format(printf, 3, 4))) static void assert_json(const char *json, const char *want,
                                                              const char *fmt, ...)
{
    char expr[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(expr, sizeof expr, fmt, ap);
    va_end(ap);
    char *got = json_eval(json, expr);
    if (strcmp(got, want) != 0)
        fail_msg("%s is %s, want %s; document:\n%s", expr, got, want, json);
    free(got);
}

/* Python expression for the lock (record) whose key (name) is key, a
 * Python literal. */
#define LOCK(key) "next(l for l in d['locks'] if l['key'] == " key ")"
#define RECORD(name) "next(r for r in d['records'] if r['name'] == " name ")"

static char *u64s(uint64_t v)
{
    static _Thread_local char buf[4][32];
    static _Thread_local int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%llu", (unsigned long long)v);
    return b;
}

/* The row of a table whose field col is want[col], checked field by field;
 * "*" matches anything. */
static void assert_row_by(const char *out, const char *section, int col, const char *const *want,
                          int n)
{
    char *f[16];
    int got = table_row(out, section, col, want[col], f, 16);
    if (got == 0)
        fail_msg("no row with '%s' under %s in:\n%s", want[col], section, out);
    if (got != n)
        fail_msg("row '%s' has %d fields, want %d:\n%s", want[col], got, n, out);
    for (int i = 0; i < n; i++)
        if (strcmp(want[i], "*") != 0 && strcmp(want[i], f[i]) != 0)
            fail_msg("row '%s' field %d is '%s', want '%s':\n%s", want[col], i, f[i], want[i],
                     out);
    free_fields(f, got);
}

static void assert_row(const char *out, const char *section, const char *const *want, int n)
{
    assert_row_by(out, section, 0, want, n);
}

/* People read the tables: no line ends in blanks, and every right-aligned
 * column's values end where its title ends. */
static void assert_tidy_table(const char *out, const char *section, const char *const *numeric)
{
    for (const char *p = out; (p = strchr(p, '\n')); p++)
        if (p > out && p[-1] == ' ')
            fail_msg("a line ends in a blank:\n%s", out);
    char heading[64];
    snprintf(heading, sizeof heading, "\n%s\n", section);
    const char *title_line = strstr(out, heading);
    assert_non_null(title_line);
    title_line += strlen(heading);
    const char *title_end = strchr(title_line, '\n');
    for (; *numeric; numeric++) {
        const char *t = strstr(title_line, *numeric);
        assert_true(t && t < title_end);
        size_t edge = (size_t)(t - title_line) + strlen(*numeric); /* one past the title */
        for (const char *row = title_end + 1; *row == ' ' && row[1] == ' ';) {
            const char *end = strchr(row, '\n');
            if ((size_t)(end - row) < edge || row[edge - 1] == ' ' ||
                (row[edge] != ' ' && row[edge] != '\n'))
                fail_msg("column %s is not aligned in:\n%s", *numeric, out);
            row = end + 1;
        }
    }
}

static void test_fresh_region(void **state)
{
    (void)state;
    char region[512], want[600];
    region_path(region, sizeof region, "fresh.region");
    th_daemon d;
    start_daemon(&d, region);

    char *out = status(region, false);
    snprintf(want, sizeof want, "Region %s\n", region);
    assert_contains(out, want);
    snprintf(want, sizeof want, "Supervisor:   pid %d, running\n", (int)d.pid);
    assert_contains(out, want);
    assert_contains(out, "Format:       version 6, ");
    assert_contains(out, "(this boot)");
    assert_contains(out, "Tokens:       epoch 1, floor ");
    assert_contains(out, "Locks:        0 of 4096 keys in use\n");
    assert_contains(out, "Records:      0 of 1024 in use, values up to 1024 bytes\n");
    assert_contains(out, "Clients:      0 of 1024 registered\n");
    assert_contains(out, "\nClients\n  (none)\n");
    assert_contains(out, "\nLocks\n  (none)\n");
    assert_contains(out, "\nRecords\n  (none)\n");
    free(out);

    char *json = status(region, true);
    assert_json(json,
                "[\"clients\", \"locks\", \"records\", \"region\", \"skipped\", \"time\", "
                "\"unregistered\"]",
                "sorted(d)");
    snprintf(want, sizeof want, "\"%s\"", region);
    assert_json(json, want, "d['region']['path']");
    assert_json(json, u64s((uint64_t)d.pid), "d['region']['supervisor_pid']");
    assert_json(json, "true", "d['region']['supervisor_alive']");
    assert_json(json, "true", "d['region']['same_boot']");
    assert_json(json, "6", "d['region']['format_version']");
    assert_json(json, "4096", "d['region']['lock_capacity']");
    assert_json(json, "0", "d['region']['locks_used']");
    assert_json(json, "1024", "d['region']['client_capacity']");
    assert_json(json, "0", "d['region']['clients_used']");
    assert_json(json, "true", "d['region']['token_floor'] >= 1");
    assert_json(json, "36", "len(d['region']['boot_id'])");
    /* Numbers are JSON numbers, never strings. */
    assert_json(json, "true",
                "all(type(v) is int for k, v in d['region'].items() if k not in "
                "('path', 'boot_id', 'created', 'supervisor_alive', 'same_boot', 'ready', 'last_run'))");
    assert_json(json, "[[], [], []]", "[d['clients'], d['locks'], d['records']]");
    free(json);

    /* A view that cannot be written out is a failure. */
    run_opts full = {.stdout_path = "/dev/full"};
    run_result r;
    run_tool(&r, &full, (const char *const[]){"status", "-r", region, NULL});
    assert_int_equal(r.status, 1);
    assert_contains(r.err, "fencelock: cannot write the output");
    run_result_free(&r);
    th_daemon_stop(&d, SIGTERM);
}

/* Spin on fl_check until the lease has ended by the library's own clock
 * (a 1 us lease: no sleep needed, and no guess about timing). */
static void wait_expired(fl_region *r, const fl_lease *l)
{
    uint64_t deadline = th_now_ns() + 10 * TH_S;
    while (fl_check(r, l) == 0)
        assert_true(th_now_ns() < deadline);
}

static void test_keys_and_records(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "live.region");
    th_daemon d;
    start_daemon(&d, region);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_region_registered(r), 1);
    char pid_copy[32];
    snprintf(pid_copy, sizeof pid_copy, "%d", (int)getpid());

    /* held, with a committed record */
    fl_lease alpha;
    uint64_t accepted;
    assert_int_equal(fl_acquire(r, "jobs/alpha", LEASE_LONG, 0, &alpha), 0);
    assert_int_equal(fl_commit(r, &alpha, "jobs/alpha/state", "v1", 2, 0, &accepted), 0);
    /* released */
    fl_lease beta;
    assert_int_equal(fl_acquire(r, "jobs/beta", LEASE_LONG, 0, &beta), 0);
    assert_int_equal(fl_release(r, &beta), 0);
    /* expired while held */
    fl_lease brief;
    assert_int_equal(fl_acquire(r, "jobs/brief", 1000, 0, &brief), 0);
    wait_expired(r, &brief);
    /* a record that rejected a stale token */
    fl_lease old, cur;
    assert_int_equal(fl_acquire(r, "jobs/gamma", LEASE_LONG, 0, &old), 0);
    assert_int_equal(fl_release(r, &old), 0);
    assert_int_equal(fl_acquire(r, "jobs/gamma", LEASE_LONG, 0, &cur), 0);
    assert_int_equal(fl_commit(r, &cur, "jobs/gamma/out", "new", 3, 0, NULL), 0);
    assert_int_equal(fl_commit(r, &old, "jobs/gamma/out", "old", 3, 0, &accepted), -ESTALE);
    assert_int_equal(accepted, cur.token);

    char *json = status(region, true);
    /* Our own registration, as the supervisor recorded it. */
    char expr[256];
    snprintf(expr, sizeof expr, "[c['index'] for c in d['clients'] if c['pid'] == %s]",
             pid_copy);
    char *indexes = json_eval(json, expr);
    assert_true(indexes[0] == '[' && indexes[1] >= '1' && indexes[1] <= '9');
    char index[16];
    snprintf(index, sizeof index, "%ld", strtol(indexes + 1, NULL, 10));
    free(indexes);
    snprintf(expr, sizeof expr, "next(c for c in d['clients'] if c['index'] == %s)['state']",
             index);
    assert_json(json, "\"attached\"", "%s", expr);
    assert_json(json, "4", "d['region']['locks_used']");
    assert_json(json, "2", "d['region']['records_used']");

    assert_json(json, "\"held\"", LOCK("'jobs/alpha'") "['state']");
    assert_json(json, u64s(alpha.token), LOCK("'jobs/alpha'") "['token']");
    assert_json(json, pid_copy, LOCK("'jobs/alpha'") "['holder_pid']");
    assert_json(json, index, LOCK("'jobs/alpha'") "['holder_client']");
    assert_json(json, "true", "0 < " LOCK("'jobs/alpha'") "['lease_left_ns'] <= %llu",
                (unsigned long long)LEASE_LONG);
    assert_json(json, "1", LOCK("'jobs/alpha'") "['acquisitions']");
    assert_json(json, "null", LOCK("'jobs/alpha'") "['last_release']");
    assert_json(json, "\"free\"", LOCK("'jobs/beta'") "['state']");
    assert_json(json, "0", LOCK("'jobs/beta'") "['lease_left_ns']");
    assert_json(json, "\"released\"", LOCK("'jobs/beta'") "['last_release']");
    assert_json(json, "1", LOCK("'jobs/beta'") "['releases']");
    assert_json(json, "\"expired\"", LOCK("'jobs/brief'") "['state']");
    assert_json(json, "true", LOCK("'jobs/brief'") "['lease_left_ns'] < 0");
    assert_json(json, "2", LOCK("'jobs/gamma'") "['acquisitions']");

    assert_json(json, "\"jobs/alpha\"", RECORD("'jobs/alpha/state'") "['bound_key']");
    assert_json(json, u64s(alpha.token), RECORD("'jobs/alpha/state'") "['accepted_token']");
    assert_json(json, "1", RECORD("'jobs/alpha/state'") "['version']");
    assert_json(json, "2", RECORD("'jobs/alpha/state'") "['size']");
    assert_json(json, "1", RECORD("'jobs/alpha/state'") "['commits']");
    assert_json(json, "0", RECORD("'jobs/alpha/state'") "['rejections']");
    assert_json(json, u64s(cur.token), RECORD("'jobs/gamma/out'") "['accepted_token']");
    assert_json(json, "1", RECORD("'jobs/gamma/out'") "['rejections']");
    assert_json(json, u64s(old.token), RECORD("'jobs/gamma/out'") "['last_rejected_token']");
    assert_json(json, pid_copy, RECORD("'jobs/gamma/out'") "['last_rejected_pid']");
    free(json);

    char *out = status(region, false);
    assert_contains(out, "Locks:        4 of 4096 keys in use\n");
    assert_contains(out, "Records:      2 of 1024 in use");
    assert_contains(out, "Clients:      1 of 1024 registered\n");
    assert_row(out, "Clients", (const char *const[]){index, "*", pid_copy, "*", "attached"}, 5);
    /* KEY STATE TOKEN PID CLIENT LEFT WAITERS ACQUIRED CONTENDED TAKEOVERS DEATHS RENEWALS LAST */
    char tok[32];
    snprintf(tok, sizeof tok, "%s", u64s(alpha.token));
    assert_row(out, "Locks",
               (const char *const[]){"jobs/alpha", "held", tok, pid_copy, index, "*", "0", "1",
                                     "0", "0", "0", "0", "-"},
               13);
    assert_row(out, "Locks",
               (const char *const[]){"jobs/beta", "free", u64s(beta.token), "-", "-", "-", "0",
                                     "1", "0", "0", "0", "0", "released"},
               13);
    assert_row(out, "Locks",
               (const char *const[]){"jobs/brief", "expired", "*", pid_copy, index, "expired",
                                     "0", "1", "0", "0", "0", "0", "-"},
               13);
    /* NAME KEY TOKEN VERSION SIZE COMMITS REJECTED REJ-TOKEN REJ-PID */
    assert_row(out, "Records",
               (const char *const[]){"jobs/alpha/state", "jobs/alpha", tok, "1", "2", "1", "0",
                                     "-", "-"},
               9);
    char cur_tok[32];
    snprintf(cur_tok, sizeof cur_tok, "%s", u64s(cur.token));
    assert_row(out, "Records",
               (const char *const[]){"jobs/gamma/out", "jobs/gamma", cur_tok, "1", "3", "1",
                                     "1", u64s(old.token), pid_copy},
               9);
    /* The lease of jobs/alpha has most of its minute left: shown in seconds. */
    char *f[16];
    int n = table_row(out, "Locks", 0, "jobs/alpha", f, 16);
    assert_int_equal(n, 13);
    {
        char *unit;
        double left = strtod(f[5], &unit);
        /* anything in (0, 60] seconds: the time the test took is not asserted */
        if (!(strcmp(unit, "s") == 0 && left > 0 && left <= 60.05))
            fail_msg("lease left of jobs/alpha shown as '%s'", f[5]);
    }
    free_fields(f, n);
    assert_tidy_table(out, "Locks",
                      (const char *const[]){"TOKEN", "PID", "CLIENT", "LEFT", "WAITERS",
                                            "ACQUIRED", "DEATHS", "RENEWALS", NULL});
    assert_tidy_table(out, "Records",
                      (const char *const[]){"TOKEN", "VERSION", "SIZE", "REJ-PID", NULL});
    assert_tidy_table(out, "Clients", (const char *const[]){"INDEX", "PID", "UID", NULL});
    free(out);

    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

struct holder_arg {
    const char *region;
};

/* Child: hold jobs/dead, report its token, and die holding it when told. */
static int hold_until_told(void *varg, int in, int out)
{
    const struct holder_arg *arg = varg;
    fl_region *r;
    if (fl_open(arg->region, &r) != 0 || !fl_region_registered(r))
        return 1;
    fl_lease l;
    if (fl_acquire(r, "jobs/dead", LEASE_LONG, 0, &l) != 0)
        return 2;
    char msg[64];
    snprintf(msg, sizeof msg, "held %llu", (unsigned long long)l.token);
    th_send(out, msg);
    char buf[64];
    th_recv(in, buf, sizeof buf, 60000);
    return 0; /* exits without releasing: the supervisor must free the key */
}

/* I5 */
static void test_dead_holder(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "dead.region");
    th_daemon d;
    start_daemon(&d, region);
    struct holder_arg arg = {region};
    th_child c;
    assert_int_equal(th_child_start(&c, hold_until_told, &arg), 0);
    char line[64];
    assert_int_equal(th_recv(c.from_child, line, sizeof line, 20000), 0);
    assert_true(strncmp(line, "held ", 5) == 0);
    const char *token = line + 5;
    char child_pid[32];
    snprintf(child_pid, sizeof child_pid, "%d", (int)c.pid);

    char *out = status(region, false);
    assert_row(out, "Locks",
               (const char *const[]){"jobs/dead", "held", token, child_pid, "*", "*", "0", "1",
                                     "0", "0", "0", "0", "-"},
               13);
    assert_row_by(out, "Clients", 2, (const char *const[]){"*", "*", child_pid, "*", "attached"},
                  5);
    free(out);

    th_send(c.to_child, "exit");
    assert_int_equal(th_child_wait(&c, 20000), 0);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"client_gone\"", 1, 20000));

    out = status(region, false);
    assert_row(out, "Locks",
               (const char *const[]){"jobs/dead", "free", token, "-", "-", "-", "0", "1", "0",
                                     "0", "1", "0", "died"},
               13);
    assert_contains(out, "\nClients\n  (none)\n");
    free(out);
    char *json = status(region, true);
    assert_json(json, "\"died\"", LOCK("'jobs/dead'") "['last_release']");
    assert_json(json, "1", LOCK("'jobs/dead'") "['deaths']");
    assert_json(json, child_pid, LOCK("'jobs/dead'") "['holder_pid']"); /* the latest holder */
    assert_json(json, "[]", "d['clients']");
    free(json);
    th_daemon_stop(&d, SIGTERM);
}

/* I9 */
static void test_escaped_keys(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "escape.region");
    th_daemon d;
    start_daemon(&d, region);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    const char odd[] = "q\"b\\c\x01" "d";  /* quote, backslash, byte 0x01 */
    const char utf8[] = "caf\xc3\xa9";        /* bytes above 0x7f stay bytes */
    fl_lease a, b;
    assert_int_equal(fl_acquire(r, odd, LEASE_LONG, 0, &a), 0);
    assert_int_equal(fl_acquire(r, utf8, LEASE_LONG, 0, &b), 0);
    assert_int_equal(fl_commit(r, &a, "rec\"\\\x7f", "x", 1, 0, NULL), 0);

    char *json = status(region, true);
    assert_contains(json, "\"key\": \"q\\\"b\\\\c\\u0001d\"");
    assert_contains(json, "\"key\": \"caf\\u00c3\\u00a9\"");
    assert_contains(json, "\"name\": \"rec\\\"\\\\\\u007f\"");
    /* Decoded, each \u00NN is the byte NN again. */
    assert_json(json, "true",
                "'7122625c630164' in [l['key'].encode('latin-1').hex() for l in d['locks']]");
    assert_json(json, "true",
                "'636166c3a9' in [l['key'].encode('latin-1').hex() for l in d['locks']]");
    assert_json(json, "\"7122625c630164\"", "d['records'][0]['bound_key'].encode('latin-1').hex()");
    free(json);

    char *out = status(region, false);
    assert_row(out, "Locks",
               (const char *const[]){"q\"b\\\\c\\x01d", "held", "*", "*", "*", "*", "0", "1",
                                     "0", "0", "0", "0", "-"},
               13);
    assert_row(out, "Locks",
               (const char *const[]){"caf\\xc3\\xa9", "held", "*", "*", "*", "*", "0", "1", "0",
                                     "0", "0", "0", "-"},
               13);
    assert_row(out, "Records",
               (const char *const[]){"rec\"\\\\\\x7f", "q\"b\\\\c\\x01d", "*", "1", "1", "1", "0",
                                     "-", "-"},
               9);
    free(out);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

static void test_region_from_environment(void **state)
{
    (void)state;
    char region[512], want[600];
    region_path(region, sizeof region, "env.region");
    th_daemon d;
    start_daemon(&d, region);
    run_opts o = {.region_env = region};
    run_result r;
    run_tool(&r, &o, (const char *const[]){"status", NULL});
    assert_int_equal(r.status, 0);
    snprintf(want, sizeof want, "Region %s\n", region);
    assert_contains(r.out, want);
    run_result_free(&r);
    /* --region wins over the environment. */
    o.region_env = "/nonexistent/region";
    run_tool(&r, &o, (const char *const[]){"status", "--region", region, "--json", NULL});
    assert_int_equal(r.status, 0);
    snprintf(want, sizeof want, "\"%s\"", region);
    assert_json(r.out, want, "d['region']['path']");
    run_result_free(&r);
    th_daemon_stop(&d, SIGTERM);

    /* Neither: the per-user default, named in the error if it is absent. */
    char fallback[600];
    unsetenv(FL_REGION_ENV);
    assert_int_equal(fl_default_region_path(fallback, sizeof fallback), 0);
    run_tool(&r, NULL, (const char *const[]){"status", NULL});
    if (access(fallback, F_OK) != 0) {
        assert_int_equal(r.status, 3);
        assert_int_equal(count_lines(r.err), 1);
        assert_contains(r.err, fallback);
    } else if (r.status == 0) { /* a real one runs on this machine */
        assert_contains(r.out, fallback);
    } else { /* one of another format (an older build's), named as such */
        assert_int_equal(r.status, 3);
        assert_contains(r.err, fallback);
        assert_contains(r.err, "format version");
    }
    run_result_free(&r);
}

static void test_supervisor_stopped(void **state)
{
    (void)state;
    char region[512], want[128];
    region_path(region, sizeof region, "stopped.region");
    th_daemon d;
    start_daemon(&d, region);
    th_daemon_stop(&d, SIGTERM);
    char *out = status(region, false);
    snprintf(want, sizeof want, "Supervisor:   not running");
    assert_contains(out, want);
    assert_contains(out, "Clean stop:   ");
    free(out);
    char *json = status(region, true);
    assert_json(json, "0", "d['region']['supervisor_pid']"); /* cleared at a clean stop */
    assert_json(json, "false", "d['region']['supervisor_alive']");
    assert_json(json, "\"clean_shutdown\"", "d['region']['last_run']");
    free(json);
}

/* `fencelock status -r region ARGS...`: must succeed quietly. */
static char *status_with(const char *region, const char *const *args)
{
    const char *argv[16] = {"status", "-r", region};
    size_t n = 3;
    for (; *args && n < 15; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    run_result r;
    run_tool(&r, NULL, argv);
    if (r.status != 0)
        fail_msg("status exited %d: %s", r.status, r.err);
    assert_string_equal(r.err, "");
    free(r.err);
    return r.out;
}

/* The fields of the row of section whose first field is first (max 32). */
static int row_fields(const char *out, const char *section, const char *first, char **f)
{
    int n = table_row(out, section, 0, first, f, 32);
    if (n == 0)
        fail_msg("no row '%s' under %s in:\n%s", first, section, out);
    return n;
}

/* -o chooses each table's columns from one list; the busy tries and timed
 * out waits (not shown by default) are one -o +BUSY,TIMEOUTS away. */
static void test_output_columns(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "columns.region");
    th_daemon d;
    start_daemon(&d, region);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    fl_lease held, l;
    assert_int_equal(fl_acquire(r, "jobs/busy", LEASE_LONG, 0, &held), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(fl_acquire(r, "jobs/busy", LEASE_LONG, 0, &l), -EBUSY);
    /* A wait from another handle: this thread waiting for its own holding
     * would be -EDEADLK, not a timeout. */
    fl_region *other;
    assert_int_equal(fl_open(region, &other), 0);
    assert_int_equal(fl_acquire(other, "jobs/busy", LEASE_LONG, 2 * (int64_t)TH_MS, &l),
                     -ETIMEDOUT);
    fl_close(other);
    assert_int_equal(fl_commit(r, &held, "jobs/busy/rec", "v", 1, 0, NULL), 0);

    /* +LIST: the default columns, then these. */
    char *out = status_with(region, (const char *const[]){"-o", "+BUSY,TIMEOUTS", NULL});
    assert_row(out, "Locks",
               (const char *const[]){"jobs/busy", "held", "*", pid, "*", "*", "0", "1", "*", "0",
                                     "0", "0", "-", "2", "1"},
               15);
    assert_tidy_table(out, "Locks", (const char *const[]){"TOKEN", "BUSY", "TIMEOUTS", NULL});
    assert_row(out, "Records",
               (const char *const[]){"jobs/busy/rec", "jobs/busy", "*", "1", "1", "1", "0", "-",
                                     "-"},
               9);
    free(out);

    /* LIST: exactly these, in this order, any case; TABLE: picks the table,
     * and a table not named keeps its defaults. */
    out = status_with(region, (const char *const[]){"-o", "timeouts,KEY,Busy", "-o",
                                                    "records:NAME,unvouched,KEY", NULL});
    assert_contains(out, "\nLocks\n  TIMEOUTS  KEY        BUSY\n");
    assert_row(out, "Locks", (const char *const[]){"1", "jobs/busy", "2"}, 3);
    assert_row(out, "Records", (const char *const[]){"jobs/busy/rec", "no", "jobs/busy"}, 3);
    assert_row_by(out, "Clients", 2, (const char *const[]){"*", "*", pid, "*", "attached"}, 5);
    /* The header block is the same whatever the columns. */
    assert_contains(out, "Locks:        1 of 4096 keys in use\n");
    free(out);
    out = status_with(region, (const char *const[]){"-o", "clients:STATE,PID", NULL});
    assert_row(out, "Clients", (const char *const[]){"attached", pid}, 2);
    free(out);

    /* --output-all: every column of every table, as many as the JSON has
     * members (each column is one member). */
    out = status_with(region, (const char *const[]){"--output-all", NULL});
    char *f[32];
    int n = row_fields(out, "Locks", "jobs/busy", f);
    assert_int_equal(n, 22);
    assert_string_equal(f[16], "2"); /* BUSY */
    assert_string_equal(f[17], "1"); /* TIMEOUTS */
    free_fields(f, n);
    n = row_fields(out, "Records", "jobs/busy/rec", f);
    assert_int_equal(n, 13);
    assert_string_equal(f[12], "no"); /* UNVOUCHED */
    free_fields(f, n);
    free(out);
    char *json = status(region, true);
    assert_json(json, "22", "len(d['locks'][0])");
    assert_json(json, "13", "len(d['records'][0])");
    assert_json(json, "5", "len(d['clients'][0])");
    assert_json(json, "[2, 1, false]",
                "[d['locks'][0]['busy'], d['locks'][0]['timeouts'], d['records'][0]['unvouched']]");
    free(json);

    assert_int_equal(fl_release(r, &held), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* Runs argv[1:] with stdout on a pseudo-terminal of 80 columns (50 rows)
 * and writes what it printed there, with the terminal's \r\n as \n, to
 * stdout; its stderr and exit status are the program's. */
static const char pty_code[] =
    "import fcntl, os, struct, subprocess, sys, termios\n"
    "m, s = os.openpty()\n"
    "fcntl.ioctl(s, termios.TIOCSWINSZ, struct.pack('HHHH', 50, 80, 0, 0))\n"
    "p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=s)\n"
    "os.close(s)\n"
    "out = b''\n"
    "while True:\n"
    "    try:\n"
    "        b = os.read(m, 65536)\n"
    "    except OSError:\n"
    "        break\n" /* EIO: every writer of the terminal is gone */
    "    if not b:\n"
    "        break\n"
    "    out += b\n"
    "rc = p.wait()\n"
    "sys.stdout.buffer.write(out.replace(b'\\r\\n', b'\\n'))\n"
    "sys.exit(rc)\n";

/* `fencelock status -r region ARGS...` on an 80-column terminal. */
static char *status_on_terminal(const char *region, const char *const *args)
{
    const char *argv[20] = {"python3", "-c", pty_code, FENCELOCK_TOOL_PATH, "status", "-r",
                            region};
    size_t n = 7;
    for (; *args && n < 19; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    run_result r;
    run_program(&r, NULL, argv);
    if (r.status != 0)
        fail_msg("status on a terminal exited %d: %s", r.status, r.err);
    free(r.err);
    return r.out;
}

/* The widest line of the table under section (its lines up to the next
 * empty line), and in *title the width of its title line. */
static size_t widest_line(const char *out, const char *section, size_t *title)
{
    char heading[64];
    snprintf(heading, sizeof heading, "\n%s\n", section);
    const char *p = strstr(out, heading);
    assert_non_null(p);
    p += strlen(heading);
    size_t max = 0;
    *title = strcspn(p, "\n");
    while (*p && *p != '\n') {
        size_t len = strcspn(p, "\n");
        if (len > max)
            max = len;
        p += len + (p[len] == '\n');
    }
    return max;
}

/* The cells of the first column of the table under section, as a reader
 * joins the lines of a wrapped cell: a line that stops short of the last
 * column continues the row above.  Returns how many (at most max, in
 * cells[], malloc'd). */
static int first_column(const char *out, const char *section, char **cells, int max)
{
    char heading[64];
    snprintf(heading, sizeof heading, "\n%s\n", section);
    const char *p = strstr(out, heading);
    assert_non_null(p);
    p += strlen(heading);
    /* "  KEY<blanks>  NEXT ... LAST": the column ends two blanks before
     * NEXT; the last title starts where no further line of a cell reaches. */
    size_t title_len = strcspn(p, "\n");
    const char *next = p + 2 + strcspn(p + 2, " ");
    next += strspn(next, " ");
    assert_true(next < p + title_len);
    size_t width = (size_t)(next - p) - 4, last = title_len;
    while (last > 0 && p[last - 1] != ' ')
        last--;
    p += title_len + 1;
    int n = 0;
    while (p[0] == ' ' && p[1] == ' ') {
        size_t len = strcspn(p, "\n");
        size_t take = len - 2 < width ? len - 2 : width;
        while (take > 0 && p[2 + take - 1] == ' ')
            take--;
        if (len > last || n == 0) {
            assert_true(n < max);
            cells[n++] = strndup(p + 2, take);
        } else {
            size_t have = strlen(cells[n - 1]);
            cells[n - 1] = realloc(cells[n - 1], have + take + 1);
            assert_non_null(cells[n - 1]);
            memcpy(cells[n - 1] + have, p + 2, take);
            cells[n - 1][have + take] = '\0';
        }
        p += len + (p[len] == '\n');
    }
    return n;
}

/* One long key on an 80-column terminal: its cell wraps, so that the rows
 * are not as wide as the key; a table whose other columns fit stays within
 * the 80 columns, and the key reads whole from its lines.  In a pipe and in
 * --json it is on one line, whole. */
static void test_long_key_on_terminal(void **state)
{
    (void)state;
    char region[512];
    region_path(region, sizeof region, "wide.region");
    th_daemon d;
    start_daemon(&d, region);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    char key[76], shown[301], name[101], name_shown[401];
    memset(key, 0xe9, 75); /* not UTF-8 alone: each byte is shown as \xe9 */
    key[75] = '\0';
    for (int i = 0; i < 75; i++)
        memcpy(shown + 4 * i, "\\xe9", 5);
    assert_int_equal(strlen(shown), 300);
    memset(name, 0xff, 100);
    name[100] = '\0';
    for (int i = 0; i < 100; i++)
        memcpy(name_shown + 4 * i, "\\xff", 5);
    fl_lease a, b;
    assert_int_equal(fl_acquire(r, key, LEASE_LONG, 0, &a), 0);
    assert_int_equal(fl_acquire(r, "short", LEASE_LONG, 0, &b), 0);
    assert_int_equal(fl_commit(r, &a, name, "x", 1, 0, NULL), 0);

    /* Columns that leave the keys room: every line fits the terminal. */
    const char *const narrow[][3] = {
        {"-o", "KEY,STATE,TOKEN,LEFT,LAST", NULL},
        {"-o", "records:NAME,KEY,TOKEN,VERSION", NULL},
    };
    for (size_t i = 0; i < sizeof narrow / sizeof narrow[0]; i++) {
        const char *table = i == 0 ? "Locks" : "Records";
        char *out = status_on_terminal(region, narrow[i]);
        size_t title, widest = widest_line(out, table, &title);
        if (widest > 80)
            fail_msg("%s %s: a line of %zu columns on an 80-column terminal:\n%s", narrow[i][0],
                     narrow[i][1], widest, out);
        for (const char *e = out; (e = strchr(e, '\n')); e++)
            if (e > out && e[-1] == ' ')
                fail_msg("a line ends in a blank:\n%s", out);
        char *cells[8];
        int n = first_column(out, table, cells, 8);
        assert_int_equal(n, i == 0 ? 2 : 1);
        assert_string_equal(cells[0], i == 0 ? shown : name_shown);
        if (i == 0)
            assert_string_equal(cells[1], "short");
        for (int k = 0; k < n; k++)
            free(cells[k]);
        free(out);
    }
    /* The default columns do not fit 80 even without it: the key no longer
     * makes them wider than the table's title line, which it does not set. */
    char *out = status_on_terminal(region, (const char *const[]){NULL});
    const char *const tables[] = {"Locks", "Records"};
    for (size_t i = 0; i < 2; i++) {
        size_t title, widest = widest_line(out, tables[i], &title);
        if (widest > title || title >= strlen(shown))
            fail_msg("%s: lines up to %zu columns, its title %zu:\n%s", tables[i], widest, title,
                     out);
    }
    free(out);

    /* Not a terminal: the key and the name whole on their lines. */
    out = status(region, false);
    char *f[16];
    int n = table_row(out, "Locks", 0, shown, f, 16);
    assert_int_equal(n, 13);
    free_fields(f, n);
    n = table_row(out, "Records", 0, name_shown, f, 16);
    assert_int_equal(n, 9);
    assert_string_equal(f[1], shown);
    free_fields(f, n);
    free(out);
    char *json = status(region, true);
    assert_json(json, "true",
                "any(l['key'].encode('latin-1') == b'\\xe9' * 75 for l in d['locks'])");
    assert_json(json, "true",
                "d['records'][0]['name'].encode('latin-1') == b'\\xff' * 100 and "
                "d['records'][0]['bound_key'].encode('latin-1') == b'\\xe9' * 75");
    free(json);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
    /* The help says so. */
    run_result h;
    run_tool(&h, NULL, (const char *const[]){"status", "--help", NULL});
    assert_int_equal(h.status, 0);
    assert_contains(h.out, "On a terminal, a table wider than the terminal wraps its keys");
    assert_contains(h.out, "In a pipe or a file every key\nis whole on one line");
    run_result_free(&h);
}

static int need_python(void **state)
{
    (void)state;
    if (!have_python3()) {
        fprintf(stderr, "python3 is not available: the JSON checks need it\n");
        skip();
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fresh_region, need_python),
        cmocka_unit_test_setup(test_keys_and_records, need_python),
        cmocka_unit_test_setup(test_dead_holder, need_python),
        cmocka_unit_test_setup(test_escaped_keys, need_python),
        cmocka_unit_test_setup(test_region_from_environment, need_python),
        cmocka_unit_test_setup(test_supervisor_stopped, need_python),
        cmocka_unit_test_setup(test_output_columns, need_python),
        cmocka_unit_test_setup(test_long_key_on_terminal, need_python),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
