/* SPDX-License-Identifier: MIT */
/*
 * rec_concurrent.c - writers and readers in several processes at once on one
 * record.  Two writers take turns on the same key with short leases (and
 * sometimes let a lease run out instead of releasing it); two readers (one
 * of them on a read-only mapping) read continuously.  Every payload names
 * its own token and length and carries a checksum over bytes derived from
 * the token, so each read is checked to be exactly one committed value with
 * its own fence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rec_common.h"

#define KEY "conc-key"
#define REC "conc-record"
#define REC_SIZE 512u
#define WRITER_OPS 3000
#define READ_BATCH 32
#define TAG_STALE 3u /* payloads committed with an outdated lease: never visible */

static const char *region;

struct writer_arg {
    uint32_t tag;
};

static int writer(void *arg, int in, int out)
{
    (void)in;
    const struct writer_arg *w = arg;
    fl_region *r = rc_open(region);
    unsigned char data[REC_SIZE];
    unsigned long long ok = 0, stale = 0, other = 0, skipped = 0, forced = 0;
    uint64_t last_token = 0;
    fl_lease prev = {0};
    for (int i = 0; i < WRITER_OPS; i++) {
        fl_lease l;
        int rc = fl_acquire(r, KEY, 2 * TH_MS, 30 * (int64_t)TH_S, &l);
        if (rc != 0 || l.token <= last_token) {
            other++; /* I1: every token of ours is greater than our previous one */
            continue;
        }
        last_token = l.token;
        int commits = (i % 5 == 0) ? 2 : 1; /* the same lease commits twice sometimes */
        for (int c = 0; c < commits; c++) {
            size_t len = pl_len(l.token * 2 + (uint64_t)c, w->tag, REC_SIZE);
            pl_make(data, len, l.token, w->tag);
            uint64_t acc = 0;
            rc = fl_commit(r, &l, REC, data, len, 0, &acc);
            if (rc == 0 && acc == l.token)
                ok++;
            else if (rc == -ESTALE && acc > l.token)
                stale++; /* our lease ran out and the other writer committed */
            else
                other++;
        }
        /* A commit with an older lease of ours: whatever happened since, the
         * record has accepted a greater token (ours or the other writer's),
         * so it must be rejected, and readers must never see its bytes. */
        if (prev.token && i % 4 == 1) {
            size_t len = pl_len(prev.token, TAG_STALE, REC_SIZE);
            pl_make(data, len, prev.token, TAG_STALE);
            uint64_t acc = 0;
            rc = fl_commit(r, &prev, REC, data, len, 0, &acc);
            if (rc == -ESTALE && acc > prev.token)
                forced++;
            else
                other++;
        }
        prev = l;
        if (i % 16 == 7) {
            skipped++; /* let it expire: the other writer takes it over */
            /* Our own next wait would be -EDEADLK while it is unexpired:
             * let the 2 ms pass (or the other writer take it) first. */
            while (fl_check(r, &l) == 0)
                usleep(100);
            continue;
        }
        rc = fl_release(r, &l);
        if (rc != 0 && rc != -ESTALE)
            other++;
    }
    th_sendf(out, "ok %llu stale %llu forced %llu other %llu skipped %llu", ok, stale, forced,
             other, skipped);
    fl_close(r);
    return 0;
}

static int reader(void *arg, int in, int out)
{
    bool readonly = *(const int *)arg;
    fl_region *r = NULL;
    if (readonly) {
        if (fl_open_readonly(region, &r) != 0)
            return 1;
    } else {
        r = rc_open(region);
    }
    unsigned char buf[REC_SIZE];
    unsigned long long reads = 0, absent = 0, bad = 0, backwards = 0, errors = 0;
    char first_bad[200] = "";
    uint64_t last = 0;
    th_send(out, "running");
    for (bool stop = false;;) {
        for (int i = 0; i < READ_BATCH; i++) {
            size_t len = 0;
            uint64_t fence = 0;
            int rc = fl_read(r, REC, buf, sizeof buf, &len, &fence);
            if (rc == -ENOENT) {
                absent++;
                continue;
            }
            if (rc != 0) {
                errors++;
                continue;
            }
            reads++;
            uint32_t tag = 0;
            const char *why = pl_check(buf, len, fence, &tag);
            if (!why && tag == TAG_STALE)
                why = "the bytes of a rejected commit are visible (I2)";
            else if (!why && tag != 1 && tag != 2)
                why = "unknown writer tag";
            if (why) {
                if (!bad++)
                    snprintf(first_bad, sizeof first_bad, "fence=%llu len=%zu: %s",
                             (unsigned long long)fence, len, why);
            }
            if (fence < last)
                backwards++; /* I2: the accepted token never decreases */
            last = fence;
        }
        if (stop)
            break;
        struct pollfd p = {.fd = in, .events = POLLIN};
        stop = poll(&p, 1, 0) > 0;
    }
    th_sendf(out, "reads %llu absent %llu bad %llu backwards %llu errors %llu last %llu|%s",
             reads, absent, bad, backwards, errors, (unsigned long long)last, first_bad);
    fl_close(r);
    return 0;
}

/* I3 (and I1, I2 under contention) */
static void test_concurrent_readers_writers(void **state)
{
    (void)state;
    th_daemon d;
    const char *opts[] = {"--record-size", "512", "--records", "8", NULL};
    rc_daemon(&d, "conc", opts);
    region = d.region;
    char buf[512];

    static const int ro[2] = {0, 1};
    th_child rd[2];
    for (int i = 0; i < 2; i++) {
        rc_child(&rd[i], reader, (void *)&ro[i]);
        th_expect(rd[i].from_child, "running", 20000);
    }
    static struct writer_arg wa[2] = {{1}, {2}};
    th_child wr[2];
    for (int i = 0; i < 2; i++)
        rc_child(&wr[i], writer, &wa[i]);
    unsigned long long ok_sum = 0, stale_sum = 0;
    for (int i = 0; i < 2; i++) {
        unsigned long long ok, stale, forced, other, skipped;
        assert_int_equal(sscanf(rc_recv(wr[i].from_child, buf, sizeof buf, 90000),
                                "ok %llu stale %llu forced %llu other %llu skipped %llu", &ok,
                                &stale, &forced, &other, &skipped),
                         5);
        assert_int_equal(other, 0);
        assert_true(ok > 0);
        assert_true(forced > 0);
        ok_sum += ok;
        stale_sum += stale + forced;
        assert_int_equal(rc_child_exit(&wr[i], 20000), 0);
        fprintf(stderr, "# writer %d: %llu commits accepted, %llu rejected (lease ran out), "
                        "%llu rejected (outdated lease), %llu leases left to expire\n",
                i + 1, ok, stale, forced, skipped);
    }
    fl_region *r = rc_open(region);
    size_t len = 0;
    uint64_t fence = 0;
    unsigned char val[REC_SIZE];
    assert_int_equal(fl_read(r, REC, val, sizeof val, &len, &fence), 0);
    assert_null(pl_check(val, len, fence, NULL));

    for (int i = 0; i < 2; i++) {
        th_send(rd[i].to_child, "stop");
        unsigned long long reads, absent, bad, backwards, errors, last;
        rc_recv(rd[i].from_child, buf, sizeof buf, 20000);
        assert_int_equal(sscanf(buf, "reads %llu absent %llu bad %llu backwards %llu errors %llu "
                                     "last %llu",
                                &reads, &absent, &bad, &backwards, &errors, &last),
                         6);
        if (bad)
            fprintf(stderr, "reader %d: %s\n", i, strchr(buf, '|') + 1);
        fprintf(stderr, "# reader %d (%s): %llu reads verified, %llu before the first commit\n",
                i + 1, ro[i] ? "read-only" : "read-write", reads, absent);
        assert_int_equal(bad, 0);
        assert_int_equal(backwards, 0);
        assert_int_equal(errors, 0);
        assert_true(reads >= READ_BATCH); /* the batch after "stop" saw the final value */
        assert_int_equal(last, fence);
        assert_int_equal(rc_child_exit(&rd[i], 20000), 0);
    }

    /* every accepted commit counted once, every rejection once */
    fl_record_info info;
    assert_true(rc_record_info(r, REC, &info));
    assert_int_equal(info.commits, ok_sum);
    assert_int_equal(info.version, ok_sum);
    assert_int_equal(info.rejections, stale_sum);
    assert_int_equal(info.accepted_token, fence);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_readers_writers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
