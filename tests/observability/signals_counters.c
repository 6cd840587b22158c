/* SPDX-License-Identifier: MIT */
/*
 * signals_counters.c - the counters are exact under concurrent multi-process
 * load, and the statistics among them (fencelock.h, fl_lock_info) never
 * count high.
 *
 * Three worker processes share three keys, each fencing one record, and
 * run a fixed pseudo-random mix of operations: ordinary rounds (acquire,
 * commit, renew, release), stale rounds on a lease they kept from an
 * earlier round (commit, strict commit, renew, release, as a paused
 * process would after a takeover), and abandoned rounds (a 2 ms lease left
 * to expire, which the next acquirer takes over).  Each worker counts what
 * the library answered it, per key; the test compares the sums with
 * fl_lock_info and fl_record_info, with the supervisor's log (one
 * fencing_rejection line per rejection and one lease_takeover line per
 * takeover, less the events it reports dropped), with `fencelock metrics`
 * and with the supervisor's --metrics-file.  Exact: renewals, renew
 * failures, release failures, deaths, commits, rejections.  Statistics
 * (acquisitions, takeovers, releases: written by the holder with plain
 * stores since issue 17) may only be lost by a holder paused past its lease
 * right after acquiring and taken over meanwhile, so each is at most the
 * number of takeovers low, never high; a difference is printed.
 *
 * Workers report and then wait, handles open, until the test has read the
 * counters: closing would let the supervisor release their abandoned
 * leases (as deaths).  The interleaving varies from run to run; the
 * comparison holds for every one.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "signals_util.h"

#define WORKERS 3
#define KEYS 3
#define ROUNDS 400
#define LONG_LEASE (3600 * TH_S) /* never expires during the test */
#define SHORT_LEASE (2 * TH_MS)

struct counts {
    uint64_t acq, take, commits, rejections, renew, renew_failed, rel, rel_failed;
};

static char region[512];

static void key_name(char *buf, size_t cap, int k) { snprintf(buf, cap, "load/%d", k); }
static void record_name(char *buf, size_t cap, int k) { snprintf(buf, cap, "load/%d/value", k); }

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A worker's failure: one line to the test, which fails with it. */
static int worker_fail(int out, const char *what, int rc)
{
    char line[256];
    snprintf(line, sizeof line, "error %s %s %s", what, fl_err_name(rc), fl_last_error());
    th_send(out, line);
    return 1;
}

static int count_commit(int rc, struct counts *c)
{
    if (rc == 0)
        c->commits++;
    else if (rc == -ESTALE)
        c->rejections++;
    else
        return rc;
    return 0;
}

static int worker(void *arg, int in, int out)
{
    int id = (int)(intptr_t)arg;
    fl_region *r;
    int rc = fl_open(region, &r);
    if (rc)
        return worker_fail(out, "open", rc);
    th_send(out, "ready");
    char line[64];
    if (th_recv(in, line, sizeof line, 30000) != 0 || strcmp(line, "go") != 0)
        return 1;

    struct counts c[KEYS];
    memset(c, 0, sizeof c);
    fl_lease kept[KEYS];     /* a released lease of each key: stale later */
    bool have_kept[KEYS] = {false};
    fl_lease abandoned[KEYS]; /* a lease of each key left to expire, maybe still ours */
    bool have_abandoned[KEYS] = {false};
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
    for (int round = 0; round < ROUNDS; round++) {
        int k = (int)(xorshift(&seed) % KEYS);
        unsigned kind = (unsigned)(xorshift(&seed) % 100);
        char key[32], rec[32];
        key_name(key, sizeof key, k);
        record_name(rec, sizeof rec, k);
        uint64_t value = (uint64_t)id << 32 | (uint64_t)round;
        if (kind < 30 && have_kept[k]) {
            /* Stale round: what a process paused across a takeover does.
             * The kept lease was released and the key acquired since, so
             * renew and release are refused; the commits are refused unless
             * the record still holds exactly this token (then the plain
             * commit is accepted and the strict one refused). */
            rc = count_commit(fl_commit_u64(r, &kept[k], rec, value, 0, NULL), &c[k]);
            if (rc)
                return worker_fail(out, "stale commit", rc);
            rc = count_commit(fl_commit_u64(r, &kept[k], rec, value, FL_COMMIT_STRICT, NULL),
                              &c[k]);
            if (rc)
                return worker_fail(out, "stale strict commit", rc);
            fl_lease copy = kept[k];
            rc = fl_renew(r, &copy, SHORT_LEASE);
            if (rc == 0)
                c[k].renew++;
            else if (rc == -ESTALE)
                c[k].renew_failed++;
            else
                return worker_fail(out, "stale renew", rc);
            rc = fl_release(r, &kept[k]);
            if (rc == 0)
                c[k].rel++;
            else if (rc == -ESTALE)
                c[k].rel_failed++;
            else
                return worker_fail(out, "stale release", rc);
            continue;
        }
        bool abandon = kind >= 95;
        fl_lease l;
        /* Our own abandoned lease: a wait of ours on it is -EDEADLK while it
         * lasts (fl_acquire), so let it run out (or be taken) first. */
        while (have_abandoned[k] && fl_check(r, &abandoned[k]) == 0)
            usleep(100);
        have_abandoned[k] = false;
        rc = fl_acquire(r, key, abandon ? SHORT_LEASE : LONG_LEASE, FL_WAIT_FOREVER, &l);
        if (rc)
            return worker_fail(out, "acquire", rc);
        c[k].acq++;
        if (l.flags & FL_LEASE_EXPIRED)
            c[k].take++;
        rc = count_commit(fl_commit_u64(r, &l, rec, value, 0, NULL), &c[k]);
        if (rc)
            return worker_fail(out, "commit", rc);
        if (abandon) {
            abandoned[k] = l;
            have_abandoned[k] = true;
            continue; /* left to expire: the next acquirer takes it over */
        }
        rc = fl_renew(r, &l, LONG_LEASE);
        if (rc)
            return worker_fail(out, "renew", rc);
        c[k].renew++;
        rc = fl_release(r, &l);
        if (rc)
            return worker_fail(out, "release", rc);
        c[k].rel++;
        kept[k] = l;
        have_kept[k] = true;
    }
    for (int k = 0; k < KEYS; k++) {
        char msg[256];
        snprintf(msg, sizeof msg, "counts %d %llu %llu %llu %llu %llu %llu %llu %llu", k,
                 (unsigned long long)c[k].acq, (unsigned long long)c[k].take,
                 (unsigned long long)c[k].commits, (unsigned long long)c[k].rejections,
                 (unsigned long long)c[k].renew, (unsigned long long)c[k].renew_failed,
                 (unsigned long long)c[k].rel, (unsigned long long)c[k].rel_failed);
        th_send(out, msg);
    }
    th_send(out, "done");
    /* Keep the handle (and any abandoned lease) until the test has looked. */
    if (th_recv(in, line, sizeof line, 60000) != 0)
        return 1;
    fl_close(r);
    return 0;
}

static void read_counts(th_child *w, struct counts *sum)
{
    char line[512];
    for (;;) {
        if (th_recv(w->from_child, line, sizeof line, 50000) != 0)
            fail_msg("worker %d did not report", (int)w->pid);
        if (strncmp(line, "error", 5) == 0)
            fail_msg("worker %d: %s", (int)w->pid, line);
        if (strcmp(line, "done") == 0)
            return;
        int k;
        struct counts c;
        unsigned long long v[8];
        if (sscanf(line, "counts %d %llu %llu %llu %llu %llu %llu %llu %llu", &k, &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 9 ||
            k < 0 || k >= KEYS)
            fail_msg("worker %d: bad report '%s'", (int)w->pid, line);
        c = (struct counts){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
        sum[k].acq += c.acq;
        sum[k].take += c.take;
        sum[k].commits += c.commits;
        sum[k].rejections += c.rejections;
        sum[k].renew += c.renew;
        sum[k].renew_failed += c.renew_failed;
        sum[k].rel += c.rel;
        sum[k].rel_failed += c.rel_failed;
    }
}

static const fl_lock_info *lock_named(const fl_lock_info *locks, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(locks[i].key, key) == 0)
            return &locks[i];
    fail_msg("no key %s in the region", key);
    return NULL;
}

static const fl_record_info *record_named(const fl_record_info *recs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(recs[i].name, name) == 0)
            return &recs[i];
    fail_msg("no record %s in the region", name);
    return NULL;
}

#define EXPECT(what, got, want)                                                           \
    do {                                                                                  \
        if ((uint64_t)(got) != (uint64_t)(want))                                          \
            fail_msg("%s: %s is %llu, the workers counted %llu", key, what,               \
                     (unsigned long long)(got), (unsigned long long)(want));              \
    } while (0)

/* A statistic (fl_lock_info): lost updates need a takeover each, so it is
 * at most `take` below what the workers counted, never above. */
#define EXPECT_STAT(what, got, want, take)                                                \
    do {                                                                                  \
        uint64_t g_ = (got), w_ = (want);                                                 \
        if (g_ > w_ || g_ + (take) < w_)                                                  \
            fail_msg("%s: %s is %llu, the workers counted %llu (%llu takeovers)", key,    \
                     what, (unsigned long long)g_, (unsigned long long)w_,                \
                     (unsigned long long)(take));                                         \
        if (g_ != w_)                                                                     \
            print_message("%s: %s is %llu, the workers counted %llu: a holder paused "     \
                          "right after acquiring\n",                                      \
                          key, what, (unsigned long long)g_, (unsigned long long)w_);     \
    } while (0)

/* "fencelock_NAME{LABELS} VALUE\n" must be a line of text. */
static void assert_sample(const char *text, const char *name, const char *labels, uint64_t v)
{
    char want[512];
    snprintf(want, sizeof want, "\nfencelock_%s{%s} %llu\n", name, labels,
             (unsigned long long)v);
    sig_assert_contains(text, want);
}

/* I2 I4 I5: rejections, takeovers and deaths are each counted exactly */
static void test_counters_exact_under_load(void **state)
{
    (void)state;
    sig_need_python3();
    sig_path(region, sizeof region, "load.region");
    char metrics_file[512];
    sig_path(metrics_file, sizeof metrics_file, "fencelock.prom");
    th_daemon d;
    sig_daemon_start(&d, region,
                     (const char *const[]){"--metrics-file", metrics_file, "--metrics-interval",
                                           "1", NULL});

    th_child w[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        assert_int_equal(th_child_start(&w[i], worker, (void *)(intptr_t)i), 0);
        th_expect(w[i].from_child, "ready", 20000);
    }
    for (int i = 0; i < WORKERS; i++)
        th_send(w[i].to_child, "go");
    struct counts sum[KEYS];
    memset(sum, 0, sizeof sum);
    for (int i = 0; i < WORKERS; i++)
        read_counts(&w[i], sum);

    /* Every worker is idle now, its handle open: the counters are final. */
    fl_region *r;
    assert_int_equal(fl_open_readonly(region, &r), 0);
    fl_region_info g;
    assert_int_equal(fl_region_info_get(r, &g), 0);
    /* Workers racing to create a new key may each take an entry; the loser
     * keeps its unpublished one as a spare, so more entries than keys may be
     * handed out.  Exactly KEYS of them are published. */
    assert_true(g.locks_used >= KEYS && g.records_used >= KEYS);
    fl_lock_info locks[KEYS];
    fl_record_info recs[KEYS];
    uint32_t nl = 0, nr = 0;
    for (uint32_t i = 0; i < g.locks_used; i++) {
        fl_lock_info li;
        if (fl_lock_info_get(r, i, &li) == 0) {
            assert_true(nl < KEYS);
            locks[nl++] = li;
        }
    }
    for (uint32_t i = 0; i < g.records_used; i++) {
        fl_record_info ri;
        if (fl_record_info_get(r, i, &ri) == 0) {
            assert_true(nr < KEYS);
            recs[nr++] = ri;
        }
    }
    assert_int_equal(nl, KEYS);
    assert_int_equal(nr, KEYS);
    uint64_t all_rejections = 0, all_takeovers = 0;
    for (int k = 0; k < KEYS; k++) {
        char key[32], rec[32];
        key_name(key, sizeof key, k);
        record_name(rec, sizeof rec, k);
        const fl_lock_info *l = lock_named(locks, KEYS, key);
        const fl_record_info *c = record_named(recs, KEYS, rec);
        EXPECT_STAT("acquisitions", l->acquisitions, sum[k].acq, sum[k].take);
        EXPECT_STAT("expiries_taken", l->expiries_taken, sum[k].take, sum[k].take);
        EXPECT("renewals", l->renewals, sum[k].renew);
        EXPECT("renew_failed", l->renew_failed, sum[k].renew_failed);
        EXPECT_STAT("releases", l->releases, sum[k].rel, sum[k].take);
        EXPECT("release_failed", l->release_failed, sum[k].rel_failed);
        EXPECT("deaths", l->deaths, 0);
        EXPECT("commits", c->commits, sum[k].commits);
        EXPECT("version", c->version, sum[k].commits);
        EXPECT("rejections", c->rejections, sum[k].rejections);
        assert_string_equal(c->bound_key, key);
        /* Not counted by the workers: bounded by what they did count. */
        assert_true(l->contended >= l->expiries_taken && l->contended <= l->acquisitions);
        assert_true(c->repeats <= c->rejections);
        /* The load did what it is for. */
        assert_true(sum[k].rejections > 0 && sum[k].renew_failed > 0 && sum[k].rel_failed > 0);
        all_rejections += sum[k].rejections + sum[k].renew_failed + sum[k].rel_failed;
        all_takeovers += sum[k].take;
    }
    assert_true(all_takeovers > 0);
    print_message("%llu fencing rejections, %llu takeovers, %llu events dropped\n",
                  (unsigned long long)all_rejections, (unsigned long long)all_takeovers,
                  (unsigned long long)g.events_dropped);

    /* The log: one line per rejection and per takeover, but for those it
     * says were dropped (none unless the ring overflowed). */
    uint64_t dropped = g.events_dropped;
    assert_true(dropped <= all_rejections + all_takeovers);
    if (dropped == 0) {
        if (!th_daemon_log_wait(&d, LOG_EVENT("fencing_rejection"), (int)all_rejections, 20000))
            fail_msg("%d fencing_rejection lines, want %llu",
                     th_daemon_log_count(&d, LOG_EVENT("fencing_rejection")),
                     (unsigned long long)all_rejections);
        if (!th_daemon_log_wait(&d, LOG_EVENT("lease_takeover"), (int)all_takeovers, 20000))
            fail_msg("%d lease_takeover lines, want %llu",
                     th_daemon_log_count(&d, LOG_EVENT("lease_takeover")),
                     (unsigned long long)all_takeovers);
    } else {
        assert_true(th_daemon_log_wait(&d, LOG_EVENT("events_dropped"), 1, 20000));
        uint64_t want = all_rejections + all_takeovers - dropped;
        uint64_t deadline = th_now_ns() + 20 * TH_S;
        while ((uint64_t)(th_daemon_log_count(&d, LOG_EVENT("fencing_rejection")) +
                          th_daemon_log_count(&d, LOG_EVENT("lease_takeover"))) < want &&
               th_now_ns() < deadline)
            usleep(10000); /* waiting for the supervisor's log; the deadline bounds a failure */
    }
    /* Never more lines than events. */
    assert_true((uint64_t)th_daemon_log_count(&d, LOG_EVENT("fencing_rejection")) <=
                all_rejections);
    assert_true((uint64_t)th_daemon_log_count(&d, LOG_EVENT("lease_takeover")) <= all_takeovers);
    assert_int_equal((uint64_t)(th_daemon_log_count(&d, LOG_EVENT("fencing_rejection")) +
                                th_daemon_log_count(&d, LOG_EVENT("lease_takeover"))) +
                         dropped,
                     all_rejections + all_takeovers);

    /* fencelock metrics shows the same numbers, in a valid exposition. */
    run_result m;
    run_tool(&m, NULL, (const char *const[]){"metrics", "-r", region, NULL});
    if (m.status != 0)
        fail_msg("metrics exited %d: %s", m.status, m.err);
    assert_string_equal(m.err, "");
    free(sig_assert_exposition(m.out));
    char labels[128];
    for (int k = 0; k < KEYS; k++) {
        char key[32], rec[32];
        key_name(key, sizeof key, k);
        record_name(rec, sizeof rec, k);
        const fl_lock_info *l = lock_named(locks, KEYS, key);
        const fl_record_info *c = record_named(recs, KEYS, rec);
        snprintf(labels, sizeof labels, "key=\"%s\"", key);
        /* the statistics as the library reads them (checked against the
         * workers' counts above) */
        assert_sample(m.out, "lock_acquisitions_total", labels, l->acquisitions);
        assert_sample(m.out, "lock_expiries_taken_total", labels, l->expiries_taken);
        assert_sample(m.out, "lock_renewals_total", labels, sum[k].renew);
        assert_sample(m.out, "lock_renew_failed_total", labels, sum[k].renew_failed);
        assert_sample(m.out, "lock_releases_total", labels, l->releases);
        assert_sample(m.out, "lock_release_failed_total", labels, sum[k].rel_failed);
        assert_sample(m.out, "lock_contended_total", labels, l->contended);
        assert_sample(m.out, "lock_deaths_total", labels, 0);
        assert_sample(m.out, "lock_token", labels, l->token);
        snprintf(labels, sizeof labels, "record=\"%s\",key=\"%s\"", rec, key);
        assert_sample(m.out, "record_commits_total", labels, sum[k].commits);
        assert_sample(m.out, "record_rejections_total", labels, sum[k].rejections);
        assert_sample(m.out, "record_repeats_total", labels, c->repeats);
        assert_sample(m.out, "record_accepted_token", labels, c->accepted_token);
    }
    sig_assert_contains(m.out, "\nfencelock_supervisor_up 1\n");
    char want[128];
    snprintf(want, sizeof want, "\nfencelock_events_dropped_total %llu\n",
             (unsigned long long)dropped);
    sig_assert_contains(m.out, want);

    /* The supervisor's --metrics-file catches up within its interval and is
     * just as valid. */
    char needles[KEYS][128];
    const char *list[KEYS + 1];
    for (int k = 0; k < KEYS; k++) {
        char key[32];
        key_name(key, sizeof key, k);
        snprintf(needles[k], sizeof needles[k],
                 "\nfencelock_lock_acquisitions_total{key=\"%s\"} %llu\n", key,
                 (unsigned long long)lock_named(locks, KEYS, key)->acquisitions);
        list[k] = needles[k];
    }
    list[KEYS] = NULL;
    if (!sig_wait_file(metrics_file, list, 10000))
        fail_msg("%s does not show the final counts", metrics_file);
    char *file = sig_read_file(metrics_file);
    free(sig_assert_exposition(file));
    free(file);
    run_result_free(&m);

    fl_close(r);
    for (int i = 0; i < WORKERS; i++) {
        th_send(w[i].to_child, "exit");
        int st = th_child_wait(&w[i], 20000);
        assert_int_equal(st, 0);
    }
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_exact_under_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
