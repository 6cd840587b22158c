/* SPDX-License-Identifier: MIT */
/*
 * rec_kill.c - writers killed with SIGKILL in the middle of commits, one
 * after the other, on a region with only 4 spare commit buffers
 * (fencelockd --spare-buffers 4): nothing they held may leak for ever (I4),
 * the supervisor reaps each one (client_gone) and frees its lock (I5), and
 * the records stay readable and writable (I3).
 *
 * Kills come in four kinds, in turn:
 *   free      the writer loops on commits; SIGKILL lands wherever it is
 *   pre-cas   ptrace stops it at the publishing compare-and-swap, not yet done
 *   post-cas  ptrace stops it right after that CAS: its buffer is current but
 *             still STAGING (the supervisor must publish it, not free it)
 *   spread    ptrace stops it N instructions into fl_commit, N spread over
 *             the whole call
 * Each killed writer keeps its staging buffer and its spare: without reaping
 * the 8-buffer pool would run dry after a few kills.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "shm/shm.h"
#include "rec_common.h"

#define KEY "kill-key"
#define NREC 4
#define REC_SIZE 256u
#define KILLS 24

static const char *region;
static tr_profile prof; /* from the calibration run of the first test */

static const char *rec_name(int j)
{
    static const char *names[NREC] = {"kill-rec-0", "kill-rec-1", "kill-rec-2", "kill-rec-3"};
    return names[j];
}

struct victim_arg {
    bool traced;
    int target; /* the record whose commit the parent drives (traced) */
};

/* Registers, acquires the key, commits one round to every record, then (traced)
 * stops right before one driven commit, then loops on commits until killed. */
static int victim(void *arg, int in, int out)
{
    (void)in;
    const struct victim_arg *v = arg;
    if (v->traced)
        tr_traceme();
    fl_region *r = rc_open(region);
    fl_lease l;
    int rc = fl_acquire(r, KEY, 60 * TH_S, 30 * (int64_t)TH_S, &l);
    if (rc != 0) {
        th_sendf(out, "acquire-failed %d", rc);
        return 1;
    }
    th_sendf(out, "acquired %llu %u %d", (unsigned long long)l.token, l.flags,
             fl_region_registered(r));
    static unsigned char data[NREC][REC_SIZE];
    size_t len[NREC];
    for (int j = 0; j < NREC; j++) {
        len[j] = pl_len(l.token, (uint32_t)j + 1, REC_SIZE);
        pl_make(data[j], len[j], l.token, (uint32_t)j + 1);
        rc = fl_commit(r, &l, rec_name(j), data[j], len[j], 0, NULL);
        if (rc != 0) {
            th_sendf(out, "commit-failed %d %s", rc, fl_last_error());
            return 2;
        }
    }
    if (v->traced) {
        th_send(out, "ready");
        raise(SIGSTOP);
        rc = fl_commit(r, &l, rec_name(v->target), data[v->target], len[v->target], 0, NULL);
        th_sendf(out, "committed %d", rc);
    }
    th_send(out, "looping");
    for (unsigned i = 0;; i++) {
        rc = fl_commit(r, &l, rec_name((int)(i % NREC)), data[i % NREC], len[i % NREC], 0, NULL);
        if (rc != 0) {
            th_sendf(out, "loop-commit-failed %d %s", rc, fl_last_error());
            return 3;
        }
    }
}

/* Census of the commit-buffer pool, read straight from the mapping. */
struct census {
    int free_, staging, current, garbage;
};

static struct census pool(fl_region *r)
{
    struct census c = {0};
    for (uint32_t i = 0; i < fl__shm_of(r)->buffer_count; i++) {
        struct fl__buffer *b = fl__buffer_at(fl__shm_of(r), i);
        uint64_t st = atomic_load(&b->state);
        uint64_t kind = st >> FL__BUF_KIND_SHIFT, gen = st & FL__BUF_GEN_MASK;
        if (kind == FL__BUF_FREE) {
            c.free_++;
        } else if (kind == FL__BUF_STAGING) {
            c.staging++;
        } else {
            uint32_t rec = atomic_load(&b->record);
            uint64_t ref = ((uint64_t)i + 1) << 40 | gen;
            if (rec < fl__shm_of(r)->record_capacity && atomic_load(&fl__shm_of(r)->records[rec].cur) == ref)
                c.current++;
            else
                c.garbage++;
        }
    }
    return c;
}

/* Every record holds one complete value of one writer, with its fence. */
static void check_records(fl_region *r)
{
    for (int j = 0; j < NREC; j++) {
        unsigned char buf[REC_SIZE];
        size_t len = 0;
        uint64_t fence = 0;
        assert_int_equal(fl_read(r, rec_name(j), buf, sizeof buf, &len, &fence), 0);
        uint32_t tag = 0;
        const char *why = pl_check(buf, len, fence, &tag);
        if (why)
            fprintf(stderr, "record %d: %s\n", j, why);
        assert_null(why);
        assert_int_equal(tag, (uint32_t)j + 1);
    }
}

static fl_record_info info_of(fl_region *r, int j)
{
    fl_record_info info;
    assert_true(rc_record_info(r, rec_name(j), &info));
    return info;
}

struct pub_ctx {
    fl_region *r;
    int target;
    uint64_t base_version;
};

static bool published(void *ctx)
{
    struct pub_ctx *p = ctx;
    return info_of(p->r, p->target).version > p->base_version;
}


/* I4 I5 I3 */
static void test_killed_writers_leak_nothing(void **state)
{
    (void)state;
    th_daemon d;
    const char *opts[] = {"--records",     "4", "--record-size", "256", "--spare-buffers",
                          "4",             "--clients", "64", NULL};
    rc_daemon(&d, "kill", opts);
    region = d.region;
    fl_region *r = rc_open(region);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    assert_int_equal(ri.buffer_count, NREC + 4);
    char buf[512];
    int gone = 0;
    const char *kinds[] = {"free", "pre-cas", "post-cas", "spread"};
    int n_kind[4] = {0}, n_reaped[4] = {0}, n_effect[4] = {0};

    for (int k = -1; k < KILLS; k++) {
        /* k == -1: calibration, a traced run stepped through a whole commit */
        int kind = k < 0 ? -1 : k % 4;
        struct victim_arg va = {.traced = kind != 0, .target = (k + NREC) % NREC};
        th_child c;
        rc_child(&c, victim, &va);
        unsigned long long token;
        unsigned flags;
        int registered;
        rc_recv(c.from_child, buf, sizeof buf, 30000);
        if (sscanf(buf, "acquired %llu %u %d", &token, &flags, &registered) != 3)
            fail_msg("kill %d: victim said '%s'", k, buf);
        assert_int_equal(registered, 1);
        if (k >= 0)
            assert_true(flags & FL_LEASE_OWNER_DIED); /* I5: its predecessor was killed */
        fl_record_info before = {0};
        bool took_effect = false;
        if (va.traced) {
            rc_recv(c.from_child, buf, sizeof buf, 30000);
            if (strcmp(buf, "ready") != 0)
                fail_msg("kill %d: victim said '%s'", k, buf);
            assert_int_equal(tr_wait_sigstop(c.pid, 30000), 0);
            before = info_of(r, va.target);
            if (kind < 0) {
                struct pub_ctx pc = {r, va.target, before.version};
                assert_int_equal(tr_profile_commit(c.pid, published, &pc, &prof), 0);
                assert_true(prof.cas_step >= 0);
                assert_true(prof.total > prof.cas_step);
                rc_recv(c.from_child, buf, sizeof buf, 30000);
                assert_string_equal(buf, "committed 0");
                th_expect(c.from_child, "looping", 30000);
            } else {
                tr_ctx t;
                assert_int_equal(tr_run_to(&t, c.pid, (uintptr_t)&fl_commit, 1000000), 0);
                if (kind == 1 || kind == 2) {
                    assert_int_equal(tr_run_to_addr(&t, prof.cas_rip), 0);
                    if (kind == 2)
                        assert_int_equal(tr_step(&t, 1, NULL, NULL), 0);
                } else {
                    long n = (long)(((uint64_t)k * 7919u) % (uint64_t)prof.total);
                    assert_int_equal(tr_step(&t, n, NULL, NULL), 0);
                }
                took_effect = info_of(r, va.target).version > before.version;
                if (kind == 1)
                    assert_false(took_effect); /* stopped at the CAS, not past it */
                if (kind == 2)
                    assert_true(took_effect); /* stopped right after it */
            }
        } else {
            rc_recv(c.from_child, buf, sizeof buf, 30000);
            if (strcmp(buf, "looping") != 0)
                fail_msg("kill %d: victim said '%s'", k, buf);
        }
        int reaped_before = th_daemon_log_count(&d, "\"buffers_released\":1}");
        assert_int_equal(kill(c.pid, SIGKILL), 0);
        int st = th_child_wait(&c, 30000);
        assert_true(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        gone++;
        if (!th_daemon_log_wait(&d, "\"client_gone\"", gone, 20000))
            fail_msg("kill %d (%s): supervisor did not log client_gone", k,
                     k < 0 ? "calibration" : kinds[kind]);

        int reaped = th_daemon_log_count(&d, "\"buffers_released\":1}") - reaped_before;
        if (kind == 1 || kind == 2)
            assert_int_equal(reaped, 1); /* it died holding exactly its staging buffer */
        if (k >= 0) {
            n_kind[kind]++;
            n_reaped[kind] += reaped;
            n_effect[kind] += took_effect;
        }

        /* I3: readable, one complete value each */
        check_records(r);
        if (va.traced && kind > 0) {
            fl_record_info after = info_of(r, va.target);
            if (took_effect) {
                /* its commit took effect before it died: that value is current */
                assert_int_equal(after.version, before.version + 1);
                assert_int_equal(after.accepted_token, token);
            } else {
                assert_int_equal(after.version, before.version);
            }
        }
        /* I4: nothing of the dead writer is still in flight */
        struct census cs = pool(r);
        if (cs.staging != 0)
            fprintf(stderr, "kill %d (%s): %d STAGING buffers left after the reap\n", k,
                    k < 0 ? "calibration" : kinds[kind], cs.staging);
        assert_int_equal(cs.staging, 0);
        assert_int_equal(cs.current, NREC);
        assert_int_equal(cs.free_ + cs.garbage, (int)ri.buffer_count - NREC);
    }

    for (int i = 0; i < 4; i++)
        fprintf(stderr, "# %s kills: %d, %d of them died holding a staging buffer, %d after "
                        "their commit took effect\n",
                kinds[i], n_kind[i], n_reaped[i], n_effect[i]);

    /* A fresh writer (this process, which never committed before) still
     * commits to every record, again and again. */
    fl_lease l;
    assert_int_equal(fl_acquire(r, KEY, 60 * TH_S, 30 * (int64_t)TH_S, &l), 0);
    assert_true(l.flags & FL_LEASE_OWNER_DIED);
    for (int round = 0; round < 3; round++)
        for (int j = 0; j < NREC; j++) {
            unsigned char data[REC_SIZE];
            size_t len = pl_len(l.token + (uint64_t)round, (uint32_t)j + 1, REC_SIZE);
            pl_make(data, len, l.token, (uint32_t)j + 1);
            int rc = fl_commit(r, &l, rec_name(j), data, len, 0, NULL);
            if (rc)
                fail_msg("fresh commit %d/%d: %s (%s)", round, j, fl_err_name(rc),
                         fl_last_error());
        }
    check_records(r);
    for (int j = 0; j < NREC; j++)
        assert_int_equal(info_of(r, j).accepted_token, l.token);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    assert_true(th_daemon_log_wait(&d, "\"client_gone\"", gone + 1, 20000));

    fl_region *ro = NULL;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    struct census cs = pool(ro);
    assert_int_equal(cs.staging, 0);
    assert_int_equal(cs.current, NREC);
    assert_int_equal(cs.free_ + cs.garbage, 4);
    check_records(ro);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I4 I10 I5: a writer killed right after its publishing CAS while no
 * supervisor runs leaves its (current) buffer STAGING; the supervisor started
 * afterwards adopts the region, finds the client gone and reaps it: the
 * buffer is published (not freed: it holds the record's value), the lock is
 * freed as by a death, and commits go on. */
static void test_killed_while_unsupervised(void **state)
{
    (void)state;
    th_daemon d;
    const char *opts[] = {"--records", "4", "--record-size", "256", "--spare-buffers", "4",
                          NULL};
    rc_daemon(&d, "unsup", opts);
    region = d.region;
    char path[512];
    snprintf(path, sizeof path, "%s", d.region);
    char buf[512];
    if (!prof.total) { /* run alone: find the publishing CAS first */
        fl_region *r = rc_open(path);
        struct victim_arg ca = {.traced = true, .target = 0};
        th_child c;
        rc_child(&c, victim, &ca);
        rc_recv(c.from_child, buf, sizeof buf, 30000);
        th_expect(c.from_child, "ready", 30000);
        assert_int_equal(tr_wait_sigstop(c.pid, 30000), 0);
        struct pub_ctx pc = {r, 0, info_of(r, 0).version};
        assert_int_equal(tr_profile_commit(c.pid, published, &pc, &prof), 0);
        assert_true(prof.cas_step >= 0);
        th_expect(c.from_child, "committed 0", 30000);
        assert_int_equal(kill(c.pid, SIGKILL), 0);
        th_child_wait(&c, 30000);
        assert_true(th_daemon_log_wait(&d, "\"client_gone\"", 1, 20000));
        fl_close(r);
    }

    struct victim_arg va = {.traced = true, .target = 2};
    th_child c;
    rc_child(&c, victim, &va);
    unsigned long long token;
    unsigned flags;
    int registered;
    assert_int_equal(sscanf(rc_recv(c.from_child, buf, sizeof buf, 30000), "acquired %llu %u %d",
                            &token, &flags, &registered),
                     3);
    assert_int_equal(registered, 1);
    th_expect(c.from_child, "ready", 30000);
    assert_int_equal(tr_wait_sigstop(c.pid, 30000), 0);
    tr_ctx t;
    assert_int_equal(tr_run_to(&t, c.pid, (uintptr_t)&fl_commit, 1000000), 0);
    assert_int_equal(tr_run_to_addr(&t, prof.cas_rip), 0);
    assert_int_equal(tr_step(&t, 1, NULL, NULL), 0); /* published, still STAGING */

    /* the supervisor goes away; then the writer dies */
    th_daemon_stop(&d, SIGTERM);
    assert_int_equal(kill(c.pid, SIGKILL), 0);
    int st = th_child_wait(&c, 30000);
    assert_true(st != -1 && WIFSIGNALED(st));

    fl_region *ro = NULL;
    assert_int_equal(fl_open_readonly(path, &ro), 0);
    check_records(ro); /* I3: still readable, its value current */
    assert_int_equal(info_of(ro, va.target).accepted_token, token);
    struct census cs = pool(ro);
    assert_int_equal(cs.staging, 1); /* nobody to reap it yet */

    /* a new supervisor adopts the region and reaps the dead client */
    th_daemon d2;
    assert_int_equal(th_daemon_start(&d2, path, opts), 0);
    assert_true(th_daemon_log_wait(&d2, "gone_while_unsupervised", 1, 20000));
    cs = pool(ro);
    assert_int_equal(cs.staging, 0);
    assert_int_equal(cs.current, NREC); /* published, not freed */
    check_records(ro);
    assert_int_equal(info_of(ro, va.target).accepted_token, token);
    fl_close(ro);

    fl_region *r = rc_open(path);
    assert_int_equal(fl_region_registered(r), 1);
    fl_lease l;
    assert_int_equal(fl_acquire(r, KEY, 60 * TH_S, 0, &l), 0); /* freed, not left to expire */
    assert_true(l.flags & FL_LEASE_OWNER_DIED);
    assert_true(l.token > token);
    for (int round = 0; round < 3; round++)
        for (int j = 0; j < NREC; j++) {
            unsigned char data[REC_SIZE];
            size_t len = pl_len(l.token + (uint64_t)round, (uint32_t)j + 1, REC_SIZE);
            pl_make(data, len, l.token, (uint32_t)j + 1);
            assert_int_equal(fl_commit(r, &l, rec_name(j), data, len, 0, NULL), 0);
        }
    check_records(r);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    th_daemon_stop(&d2, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_writers_leak_nothing),
        cmocka_unit_test(test_killed_while_unsupervised),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
