/* SPDX-License-Identifier: MIT */
/*
 * signals_log.c - the supervisor's log lines for the signals, parsed by
 * python3's strict JSON parser and checked field by field:
 *
 * - fencing_rejection: one line per refused commit, strict commit, renew
 *   and release, with key, record (commits only), rejected_token,
 *   latest_accepted_token, generation (the key's latest token), operation,
 *   pid and repeat, and no other member;
 * - retry_loop: a warning, once, for a client that resubmits a token that
 *   was already rejected, and none for a client that acquires again after
 *   its rejection;
 * - lease_takeover: key, token, previous_token, late_ns and pid.
 *
 * Events are ordered by the pipes to the child processes and by waiting for
 * log lines, never by sleeping.
 */
#include <errno.h>
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

/* Python: the fencing_rejection lines of the log (d is the log array). */
#define REJECTIONS "[x for x in d if x['event'] == 'fencing_rejection']"

/* Python: the members of line (an expression) that differ from the dict
 * literal want, ts left out: [] when they match. */
static void assert_line(const char *log, const char *line, const char *want)
{
    sig_assert_json(log, "[]",
                    "(lambda L, E: [k for k in sorted(set(L) | set(E)) if k != 'ts' and "
                    "(k not in L or k not in E or L[k] != E[k] or type(L[k]) != type(E[k]))])"
                    "(%s, %s)",
                    line, want);
    /* ts is RFC 3339 UTC with a fraction. */
    sig_assert_json(log, "true",
                    "__import__('re').fullmatch(r'\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d"
                    "(\\.\\d+)?Z', %s['ts']) is not None",
                    line);
}

/* I2 */
static void test_rejection_line_fields(void **state)
{
    (void)state;
    sig_need_python3();
    char region[512];
    sig_path(region, sizeof region, "fields.region");
    th_daemon d;
    sig_daemon_start(&d, region, NULL);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_region_registered(r), 1);

    /* t1 and t2 commit; t3 holds the key (the generation) without a commit. */
    const char *key = "acct/7", *rec = "acct/7/balance";
    fl_lease l1, l2, l3;
    uint64_t accepted = 0;
    assert_int_equal(fl_acquire(r, key, LONG_LEASE, 0, &l1), 0);
    assert_int_equal(fl_commit_u64(r, &l1, rec, 100, 0, NULL), 0);
    assert_int_equal(fl_release(r, &l1), 0);
    assert_int_equal(fl_acquire(r, key, LONG_LEASE, 0, &l2), 0);
    assert_int_equal(fl_commit_u64(r, &l2, rec, 200, 0, NULL), 0);
    assert_int_equal(fl_release(r, &l2), 0);
    assert_int_equal(fl_acquire(r, key, LONG_LEASE, 0, &l3), 0);
    assert_true(l1.token < l2.token && l2.token < l3.token);

    /* 1: a commit of the old token t1. */
    assert_int_equal(fl_commit_u64(r, &l1, rec, 111, 0, &accepted), -ESTALE);
    assert_int_equal(accepted, l2.token);
    /* 2: a strict commit of t2, equal to the accepted one. */
    assert_int_equal(fl_commit_u64(r, &l2, rec, 222, FL_COMMIT_STRICT, &accepted), -ESTALE);
    /* 3, 4: renew and release of old leases. */
    fl_lease copy = l1;
    assert_int_equal(fl_renew(r, &copy, LONG_LEASE), -ESTALE);
    assert_int_equal(fl_release(r, &l2), -ESTALE);
    if (!th_daemon_log_wait(&d, LOG_EVENT("fencing_rejection"), 4, 20000))
        fail_msg("the supervisor logged %d fencing_rejection lines, want 4",
                 th_daemon_log_count(&d, LOG_EVENT("fencing_rejection")));

    char *log = sig_log_array(&d);
    sig_assert_json(log, "4", "len(" REJECTIONS ")");
    char want[1024];
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    snprintf(want, sizeof want,
             "{'level': 'info', 'event': 'fencing_rejection', 'key': 'acct/7', "
             "'record': 'acct/7/balance', 'rejected_token': %s, 'latest_accepted_token': %s, "
             "'generation': %s, 'operation': 'commit', 'pid': %s, 'repeat': False}",
             sig_u64(l1.token), sig_u64(l2.token), sig_u64(l3.token), pid);
    assert_line(log, REJECTIONS "[0]", want);
    snprintf(want, sizeof want,
             "{'level': 'info', 'event': 'fencing_rejection', 'key': 'acct/7', "
             "'record': 'acct/7/balance', 'rejected_token': %s, 'latest_accepted_token': %s, "
             "'generation': %s, 'operation': 'strict_commit', 'pid': %s, 'repeat': False}",
             sig_u64(l2.token), sig_u64(l2.token), sig_u64(l3.token), pid);
    assert_line(log, REJECTIONS "[1]", want);
    /* Renew and release name no record; latest_accepted_token is then the
     * key's current token. */
    snprintf(want, sizeof want,
             "{'level': 'info', 'event': 'fencing_rejection', 'key': 'acct/7', "
             "'rejected_token': %s, 'latest_accepted_token': %s, 'generation': %s, "
             "'operation': 'renew', 'pid': %s, 'repeat': False}",
             sig_u64(l1.token), sig_u64(l3.token), sig_u64(l3.token), pid);
    assert_line(log, REJECTIONS "[2]", want);
    snprintf(want, sizeof want,
             "{'level': 'info', 'event': 'fencing_rejection', 'key': 'acct/7', "
             "'rejected_token': %s, 'latest_accepted_token': %s, 'generation': %s, "
             "'operation': 'release', 'pid': %s, 'repeat': False}",
             sig_u64(l2.token), sig_u64(l3.token), sig_u64(l3.token), pid);
    assert_line(log, REJECTIONS "[3]", want);
    /* No retry loop: every token was rejected once. */
    sig_assert_json(log, "0", "len([x for x in d if x['event'] == 'retry_loop'])");
    free(log);

    /* The inspection API says the same. */
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    fl_record_info c;
    assert_int_equal(fl_record_info_get(ro, 0, &c), 0);
    assert_string_equal(c.name, rec);
    assert_int_equal(c.rejections, 2);
    assert_int_equal(c.repeats, 0);
    assert_int_equal(c.last_rejected_token, l2.token);
    assert_int_equal(c.last_rejected_accepted, l2.token);
    assert_int_equal(c.last_rejected_op, FL_OP_STRICT_COMMIT);
    assert_int_equal(c.last_rejected_pid, (uint32_t)getpid());
    fl_lock_info li;
    assert_int_equal(fl_lock_info_get(ro, 0, &li), 0);
    assert_int_equal(li.renew_failed, 1);
    assert_int_equal(li.release_failed, 1);
    assert_int_equal(li.last_stale_token, l2.token);
    assert_int_equal(li.last_stale_op, FL_OP_RELEASE);
    assert_int_equal(li.last_stale_pid, (uint32_t)getpid());
    fl_close(ro);

    assert_int_equal(fl_release(r, &l3), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* Keys and record names are bytes: the log escapes them as JSON strings
 * that decode (as Latin-1) to the same bytes. */
/* I9 */
static void test_rejection_line_escapes_names(void **state)
{
    (void)state;
    sig_need_python3();
    char region[512];
    sig_path(region, sizeof region, "escape.region");
    th_daemon d;
    sig_daemon_start(&d, region, NULL);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    const char *key = "q\"uo\\te\n\xc3\xa9\xff", *rec = "rec\t\"1\"";
    fl_lease l1, l2;
    assert_int_equal(fl_acquire(r, key, LONG_LEASE, 0, &l1), 0);
    assert_int_equal(fl_release(r, &l1), 0);
    assert_int_equal(fl_acquire(r, key, LONG_LEASE, 0, &l2), 0);
    assert_int_equal(fl_commit_u64(r, &l2, rec, 1, 0, NULL), 0);
    assert_int_equal(fl_commit_u64(r, &l1, rec, 2, 0, NULL), -ESTALE);
    assert_true(th_daemon_log_wait(&d, LOG_EVENT("fencing_rejection"), 1, 20000));
    char *log = sig_log_array(&d);
    sig_assert_json(log, "true",
                    REJECTIONS "[0]['key'].encode('latin-1') == b'q\"uo\\\\te\\n\\xc3\\xa9\\xff'");
    sig_assert_json(log, "true", REJECTIONS "[0]['record'].encode('latin-1') == b'rec\\t\"1\"'");
    free(log);
    assert_int_equal(fl_release(r, &l2), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* ---- the retry-loop warning ---------------------------------------------- */

static char retry_region[512];

/* A client with a stale token t1 on key (t2 committed).  Commands:
 *   retry      commit t1 again (answers "rejected" or an error)
 *   reacquire  acquire again and commit the new token (answers "ok TOKEN")
 * It first answers "stale T1" once set up. */
static int client(void *arg, int in, int out)
{
    const char *key = arg;
    char rec[64], line[128];
    snprintf(rec, sizeof rec, "%s/r", key);
    fl_region *r;
    if (fl_open(retry_region, &r) != 0)
        return 1;
    fl_lease l1, l2;
    if (fl_acquire(r, key, LONG_LEASE, 0, &l1) || fl_release(r, &l1) ||
        fl_acquire(r, key, LONG_LEASE, 0, &l2) || fl_commit_u64(r, &l2, rec, 2, 0, NULL) ||
        fl_release(r, &l2))
        return 2;
    snprintf(line, sizeof line, "stale %llu", (unsigned long long)l1.token);
    th_send(out, line);
    while (th_recv(in, line, sizeof line, 30000) == 0) {
        if (strcmp(line, "retry") == 0) {
            int rc = fl_commit_u64(r, &l1, rec, 1, 0, NULL);
            th_send(out, rc == -ESTALE ? "rejected" : "unexpected");
        } else if (strcmp(line, "reacquire") == 0) {
            fl_lease l3;
            int rc = fl_acquire(r, key, LONG_LEASE, 0, &l3);
            if (rc == 0)
                rc = fl_commit_u64(r, &l3, rec, 3, 0, NULL);
            if (rc == 0)
                rc = fl_release(r, &l3);
            snprintf(line, sizeof line, "%s %llu", rc == 0 ? "ok" : "error",
                     (unsigned long long)l3.token);
            th_send(out, line);
        } else if (strcmp(line, "exit") == 0) {
            break;
        }
    }
    fl_close(r);
    return 0;
}

static uint64_t start_client(th_child *c, const char *key)
{
    assert_int_equal(th_child_start(c, client, (void *)key), 0);
    char line[128];
    assert_int_equal(th_recv(c->from_child, line, sizeof line, 20000), 0);
    unsigned long long t;
    if (sscanf(line, "stale %llu", &t) != 1)
        fail_msg("client: %s", line);
    return t;
}

static void client_do(th_child *c, const char *cmd, const char *want)
{
    char line[128];
    th_send(c->to_child, cmd);
    assert_int_equal(th_recv(c->from_child, line, sizeof line, 20000), 0);
    if (strncmp(line, want, strlen(want)) != 0)
        fail_msg("%s: client answered '%s', want '%s'", cmd, line, want);
}

static void test_retry_loop_warning(void **state)
{
    (void)state;
    sig_need_python3();
    sig_path(retry_region, sizeof retry_region, "retry.region");
    th_daemon d;
    sig_daemon_start(&d, retry_region, NULL);

    /* B is rejected once and does the right thing: acquires again. */
    th_child b;
    uint64_t b_stale = start_client(&b, "loop/b");
    client_do(&b, "retry", "rejected");
    client_do(&b, "reacquire", "ok");
    /* A resubmits the same stale token three times. */
    th_child a;
    uint64_t a_stale = start_client(&a, "loop/a");
    client_do(&a, "retry", "rejected");
    client_do(&a, "retry", "rejected");
    client_do(&a, "retry", "rejected");

    /* The ring is drained in order: once A's third rejection is logged,
     * everything B did is too. */
    if (!th_daemon_log_wait(&d, LOG_EVENT("fencing_rejection"), 4, 20000))
        fail_msg("%d fencing_rejection lines, want 4",
                 th_daemon_log_count(&d, LOG_EVENT("fencing_rejection")));
    assert_true(th_daemon_log_wait(&d, LOG_EVENT("retry_loop"), 1, 20000));
    char *log = sig_log_array(&d);
    char expr[512];
    /* One warning, for A's token, with level warn. */
    sig_assert_json(log, "1", "len([x for x in d if x['event'] == 'retry_loop'])");
    snprintf(expr, sizeof expr,
             "{'level': 'warn', 'event': 'retry_loop', 'pid': %d, 'key': 'loop/a', "
             "'record': 'loop/a/r', 'token': %s}",
             (int)a.pid, sig_u64(a_stale));
    sig_assert_json(log, "[]",
                    "(lambda L, E: [k for k in sorted(set(L) | set(E)) if k not in ('ts', "
                    "'message') and L.get(k) != E.get(k)])([x for x in d if x['event'] == "
                    "'retry_loop'][0], %s)",
                    expr);
    sig_assert_json(log, "true",
                    "'acquire again' in "
                    "[x for x in d if x['event'] == 'retry_loop'][0]['message']");
    /* A's rejections: the first is not a repeat, the next two are. */
    sig_assert_json(log, "[false, true, true]",
                    "[x['repeat'] for x in " REJECTIONS " if x['pid'] == %d]", (int)a.pid);
    sig_assert_json(log, "[false]", "[x['repeat'] for x in " REJECTIONS " if x['pid'] == %d]",
                    (int)b.pid);
    snprintf(expr, sizeof expr, "[x['rejected_token'] for x in " REJECTIONS " if x['pid'] == %d]",
             (int)a.pid);
    char want[128];
    snprintf(want, sizeof want, "[%s, %s, %s]", sig_u64(a_stale), sig_u64(a_stale),
             sig_u64(a_stale));
    sig_assert_json(log, want, "%s", expr);
    sig_assert_json(log, "[]", "[x for x in d if x['event'] == 'retry_loop' and x['pid'] == %d]",
                    (int)b.pid);
    free(log);
    (void)b_stale;

    /* The counters agree: repeats on A's record only. */
    fl_region *ro;
    assert_int_equal(fl_open_readonly(retry_region, &ro), 0);
    fl_region_info g;
    assert_int_equal(fl_region_info_get(ro, &g), 0);
    for (uint32_t i = 0; i < g.records_used; i++) {
        fl_record_info c;
        assert_int_equal(fl_record_info_get(ro, i, &c), 0);
        if (strcmp(c.name, "loop/a/r") == 0) {
            assert_int_equal(c.rejections, 3);
            assert_int_equal(c.repeats, 2);
        } else {
            assert_string_equal(c.name, "loop/b/r");
            assert_int_equal(c.rejections, 1);
            assert_int_equal(c.repeats, 0);
        }
    }
    fl_close(ro);

    /* More retries of the same token: counted, but warned about only once. */
    client_do(&a, "retry", "rejected");
    assert_true(th_daemon_log_wait(&d, LOG_EVENT("fencing_rejection"), 5, 20000));
    assert_int_equal(th_daemon_log_count(&d, LOG_EVENT("retry_loop")), 1);

    th_send(a.to_child, "exit");
    th_send(b.to_child, "exit");
    assert_int_equal(th_child_wait(&a, 20000), 0);
    assert_int_equal(th_child_wait(&b, 20000), 0);
    th_daemon_stop(&d, SIGTERM);
}

/* ---- takeover ------------------------------------------------------------- */

/* I4 */
static void test_takeover_line(void **state)
{
    (void)state;
    sig_need_python3();
    char region[512];
    sig_path(region, sizeof region, "takeover.region");
    th_daemon d;
    sig_daemon_start(&d, region, NULL);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease old, now;
    fl_region *holder;
    assert_int_equal(fl_open(region, &holder), 0);
    assert_int_equal(fl_acquire(holder, "jobs/1", 5 * TH_MS, 0, &old), 0);
    /* Waits for the deadline, then takes the expired lease over (from
     * another handle: a wait on one's own holding is -EDEADLK). */
    assert_int_equal(fl_acquire(r, "jobs/1", LONG_LEASE, FL_WAIT_FOREVER, &now), 0);
    assert_true(now.flags & FL_LEASE_EXPIRED);
    assert_true(th_daemon_log_wait(&d, LOG_EVENT("lease_takeover"), 1, 20000));
    char *log = sig_log_array(&d);
    char want[512];
    snprintf(want, sizeof want,
             "{'level': 'info', 'event': 'lease_takeover', 'key': 'jobs/1', 'token': %s, "
             "'previous_token': %s, 'pid': %d}",
             sig_u64(now.token), sig_u64(old.token), (int)getpid());
    sig_assert_json(log, "[]",
                    "(lambda L, E: [k for k in sorted(set(L) | set(E)) if k not in ('ts', "
                    "'late_ns') and L.get(k) != E.get(k)])([x for x in d if x['event'] == "
                    "'lease_takeover'][0], %s)",
                    want);
    /* How long after the deadline: an integer, and under the test's bound. */
    sig_assert_json(log, "true",
                    "(lambda x: type(x) is int and 0 <= x < 20 * 10**9)([x for x in d if "
                    "x['event'] == 'lease_takeover'][0]['late_ns'])");
    free(log);
    assert_int_equal(fl_release(r, &now), 0);
    fl_close(r);
    fl_close(holder);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejection_line_fields),
        cmocka_unit_test(test_rejection_line_escapes_names),
        cmocka_unit_test(test_retry_loop_warning),
        cmocka_unit_test(test_takeover_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
