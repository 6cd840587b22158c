/* SPDX-License-Identifier: MIT */
/*
 * signals_overflow.c - the event ring overflows without losing a count.
 *
 * The supervisor is stopped with SIGSTOP, so nobody drains the ring of
 * 4096 events; a client then posts 5000 fencing rejections (the same stale
 * commit, as a retry loop would).  The client never waits: the first 4096
 * events fill the ring and the other 904 are dropped and counted.  Then:
 * the record's counters are exact (5000 rejections, 4999 repeats) at once;
 * fl_region_info.events_dropped is 904 while the supervisor is still
 * stopped; after SIGCONT the log shows the 4096 rejections that fit, one
 * events_dropped line with count 904, and one retry_loop warning; and the
 * --metrics-file and `fencelock metrics` show 904 dropped events and 5000
 * rejections.
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

#define RING 4096 /* FL__EVENT_COUNT: the ring's entries */
#define POSTS 5000
#define LONG_LEASE (3600 * TH_S)

static char region[512];

/* Sets up a stale lease, answers "ready TOKEN", and on "post N" commits the
 * stale token N times, answering "posted REJECTED". */
static int client(void *arg, int in, int out)
{
    (void)arg;
    fl_region *r;
    if (fl_open(region, &r) != 0)
        return 1;
    fl_lease l1, l2;
    if (fl_acquire(r, "ring/key", LONG_LEASE, 0, &l1) || fl_release(r, &l1) ||
        fl_acquire(r, "ring/key", LONG_LEASE, 0, &l2) ||
        fl_commit_u64(r, &l2, "ring/rec", 2, 0, NULL) || fl_release(r, &l2))
        return 2;
    char line[128];
    snprintf(line, sizeof line, "ready %llu", (unsigned long long)l1.token);
    th_send(out, line);
    while (th_recv(in, line, sizeof line, 30000) == 0) {
        int n;
        if (sscanf(line, "post %d", &n) == 1) {
            int rejected = 0;
            for (int i = 0; i < n; i++)
                rejected += fl_commit_u64(r, &l1, "ring/rec", 1, 0, NULL) == -ESTALE;
            snprintf(line, sizeof line, "posted %d", rejected);
            th_send(out, line);
        } else if (strcmp(line, "exit") == 0) {
            break;
        }
    }
    fl_close(r);
    return 0;
}

static void record_counts(uint64_t *rejections, uint64_t *repeats, uint64_t *dropped)
{
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    fl_region_info g;
    assert_int_equal(fl_region_info_get(ro, &g), 0);
    *dropped = g.events_dropped;
    assert_int_equal(g.records_used, 1);
    fl_record_info c;
    assert_int_equal(fl_record_info_get(ro, 0, &c), 0);
    *rejections = c.rejections;
    *repeats = c.repeats;
    fl_close(ro);
}

/* I4: a full event ring delays no client */
static void test_ring_overflow_keeps_counts(void **state)
{
    (void)state;
    sig_need_python3();
    sig_path(region, sizeof region, "ring.region");
    char metrics_file[512];
    sig_path(metrics_file, sizeof metrics_file, "ring.prom");
    th_daemon d;
    sig_daemon_start(&d, region,
                     (const char *const[]){"--metrics-file", metrics_file, "--metrics-interval",
                                           "1", NULL});
    th_child c;
    assert_int_equal(th_child_start(&c, client, NULL), 0);
    char line[128];
    assert_int_equal(th_recv(c.from_child, line, sizeof line, 20000), 0);
    unsigned long long stale;
    if (sscanf(line, "ready %llu", &stale) != 1)
        fail_msg("client: %s", line);
    /* Nothing posted yet (successes post no event): the ring is empty. */
    assert_int_equal(th_daemon_log_count(&d, LOG_EVENT("fencing_rejection")), 0);

    assert_int_equal(kill(d.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(d.pid, 10000));
    char cmd[32];
    snprintf(cmd, sizeof cmd, "post %d", POSTS);
    th_send(c.to_child, cmd);
    char want[64];
    snprintf(want, sizeof want, "posted %d", POSTS);
    th_expect(c.from_child, want, 30000);

    /* Exact before the supervisor has seen a thing. */
    uint64_t rejections, repeats, dropped;
    record_counts(&rejections, &repeats, &dropped);
    assert_int_equal(rejections, POSTS);
    assert_int_equal(repeats, POSTS - 1);
    assert_int_equal(dropped, POSTS - RING);

    assert_int_equal(kill(d.pid, SIGCONT), 0);
    if (!th_daemon_log_wait(&d, LOG_EVENT("events_dropped"), 1, 20000))
        fail_msg("no events_dropped line after SIGCONT");
    if (!th_daemon_log_wait(&d, LOG_EVENT("fencing_rejection"), RING, 20000))
        fail_msg("%d fencing_rejection lines, want %d",
                 th_daemon_log_count(&d, LOG_EVENT("fencing_rejection")), RING);
    char *log = sig_log_array(&d);
    sig_assert_json(log, sig_u64(RING),
                    "len([x for x in d if x['event'] == 'fencing_rejection'])");
    sig_assert_json(log, "[[\"warn\", 904, 904]]",
                    "[[x['level'], x['count'], x['total']] for x in d if x['event'] == "
                    "'events_dropped']");
    /* The events that fit are the first ones, in order: the first is not a
     * repeat, the others are. */
    sig_assert_json(log, "[false, true, 4095]",
                    "(lambda R: [R[0]['repeat'], R[1]['repeat'], sum(x['repeat'] for x in R)])"
                    "([x for x in d if x['event'] == 'fencing_rejection'])");
    sig_assert_json(log, "true",
                    "all(x['rejected_token'] == %llu and x['operation'] == 'commit' and "
                    "x['record'] == 'ring/rec' and x['pid'] == %d for x in d if x['event'] == "
                    "'fencing_rejection')",
                    stale, (int)c.pid);
    sig_assert_json(log, "1", "len([x for x in d if x['event'] == 'retry_loop'])");
    free(log);

    /* Still exact, and nothing more was dropped. */
    record_counts(&rejections, &repeats, &dropped);
    assert_int_equal(rejections, POSTS);
    assert_int_equal(repeats, POSTS - 1);
    assert_int_equal(dropped, POSTS - RING);

    /* The metrics say so too: the supervisor's file within its interval,
     * and the tool. */
    const char *needles[] = {"\nfencelock_events_dropped_total 904\n",
                             "\nfencelock_record_rejections_total{record=\"ring/rec\",key=\"ring/"
                             "key\"} 5000\n",
                             "\nfencelock_record_repeats_total{record=\"ring/rec\",key=\"ring/"
                             "key\"} 4999\n",
                             NULL};
    if (!sig_wait_file(metrics_file, needles, 10000))
        fail_msg("%s does not show the dropped events", metrics_file);
    char *file = sig_read_file(metrics_file);
    free(sig_assert_exposition(file));
    free(file);
    run_result m;
    run_tool(&m, NULL, (const char *const[]){"metrics", "--region", region, NULL});
    assert_int_equal(m.status, 0);
    for (int i = 0; needles[i]; i++)
        sig_assert_contains(m.out, needles[i]);
    run_result_free(&m);

    /* And the status views. */
    run_result s;
    run_tool(&s, NULL, (const char *const[]){"status", "-r", region, NULL});
    assert_int_equal(s.status, 0);
    sig_assert_contains(s.out, "  Log events:   904 dropped");
    run_result_free(&s);
    run_tool(&s, NULL, (const char *const[]){"status", "-r", region, "--json", NULL});
    assert_int_equal(s.status, 0);
    sig_assert_json(s.out, "904", "d['region']['events_dropped']");
    sig_assert_json(s.out, "[5000, 4999]",
                    "[d['records'][0]['rejections'], d['records'][0]['repeats']]");
    run_result_free(&s);

    th_send(c.to_child, "exit");
    assert_int_equal(th_child_wait(&c, 20000), 0);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_overflow_keeps_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
