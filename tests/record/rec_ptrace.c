/* SPDX-License-Identifier: MIT */
/*
 * rec_ptrace.c - a writer stopped at many instructions inside fl_commit().
 *
 * The writer W is a traced child: it acquires the key with a 2 ms lease,
 * raises SIGSTOP right before fl_commit(), and the parent single-steps it
 * (PTRACE_SINGLESTEP) to the chosen instruction of the call.  While W is
 * stopped there, a newer writer B (another process) takes the key over at
 * W's expiry and commits, and a reader R (another process) reads: both must
 * complete without W (I4).  Then W is detached and finishes its call.
 *
 * Whether W's commit had taken effect when it was stopped is observed, not
 * guessed: R reads the record before B commits; a fence equal to W's token
 * means W's compare-and-swap had already published.  Then:
 *   not yet published -> W's fl_commit returns -ESTALE naming B's token (I2)
 *   already published -> W's fl_commit returns 0, and B's later commit wins
 * and in both cases the final value is B's, byte for byte, with B's token.
 *
 * A calibration run steps W through a whole commit to count its
 * instructions and find the instruction that publishes (the one after which
 * the record's fence changes; it must be a `lock cmpxchg`).  Then:
 *   (a) stops at every instruction from 16 before the CAS to 8 after it (by
 *       address: the first time W reaches it; counting single steps from the
 *       entry is not exact there, as the buffer scan varies in length from
 *       run to run), and every k-th instruction across the whole call (by
 *       count), and after the return;
 *   (b) stops exactly at the CAS (not executed) and right after it, by
 *       address, several times, with a reader spinning on the record the
 *       whole time: it never sees torn bytes, and never sees W's value when
 *       W was stopped before the CAS;
 *   (c) -ENOSPC while a stopped commit holds the last free buffer, and
 *       success when one more spare buffer exists.
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
#include <sys/wait.h>

#include "shm/shm.h"
#include "rec_common.h"

#define KEY "pt-key"
#define REC "pt-record"
#define REC_SIZE 256u
#define TAG_W 0x57u
#define TAG_B 0x42u
#define W_LEASE (2 * TH_MS)

static const char *region;

/* ---- the stepped writer ---- */
static int stepped_writer(void *arg, int in, int out)
{
    (void)arg;
    (void)in;
    tr_traceme();
    fl_region *r = rc_open(region);
    fl_lease l;
    int rc = fl_acquire(r, KEY, W_LEASE, 30 * (int64_t)TH_S, &l);
    if (rc != 0) {
        th_sendf(out, "acquire-failed %d", rc);
        return 1;
    }
    unsigned char data[REC_SIZE];
    size_t len = pl_len(l.token, TAG_W, REC_SIZE);
    pl_make(data, len, l.token, TAG_W);
    th_sendf(out, "token %llu", (unsigned long long)l.token);
    raise(SIGSTOP); /* the parent steps us from here */
    uint64_t acc = 0;
    rc = fl_commit(r, &l, REC, data, len, 0, &acc);
    th_sendf(out, "rc %d %llu", rc, (unsigned long long)acc);
    fl_close(r);
    return 0;
}

/* ---- the newer writer: one commit per "commit" line ---- */
static int newer_writer(void *arg, int in, int out)
{
    (void)arg;
    fl_region *r = rc_open(region);
    char cmd[64];
    while (th_recv(in, cmd, sizeof cmd, 120000) == 0 && strcmp(cmd, "commit") == 0) {
        fl_lease l;
        int rc = fl_acquire(r, KEY, 60 * TH_S, 30 * (int64_t)TH_S, &l);
        if (rc != 0) {
            th_sendf(out, "acquire-failed %d", rc);
            continue;
        }
        unsigned char data[REC_SIZE];
        size_t len = pl_len(l.token, TAG_B, REC_SIZE);
        pl_make(data, len, l.token, TAG_B);
        uint64_t acc = 0;
        rc = fl_commit(r, &l, REC, data, len, 0, &acc);
        int rel = fl_release(r, &l);
        th_sendf(out, "done %llu %u %d %llu %d", (unsigned long long)l.token, l.flags, rc,
                 (unsigned long long)acc, rel);
    }
    fl_close(r);
    return 0;
}

/* ---- the reader: one read per "read" line ---- */
static int one_reader(void *arg, int in, int out)
{
    (void)arg;
    fl_region *r = rc_open(region);
    char cmd[64];
    while (th_recv(in, cmd, sizeof cmd, 120000) == 0 && strcmp(cmd, "read") == 0) {
        unsigned char buf[REC_SIZE];
        size_t len = 0;
        uint64_t fence = 0;
        int rc = fl_read(r, REC, buf, sizeof buf, &len, &fence);
        uint32_t tag = 0;
        const char *why = rc == 0 ? pl_check(buf, len, fence, &tag) : "read failed";
        th_sendf(out, "read %d %llu %zu %u %s", rc, (unsigned long long)fence, len, tag,
                 why ? "bad" : "ok");
    }
    fl_close(r);
    return 0;
}

/* ---- a reader spinning on the record until told to stop ---- */
static int spin_reader(void *arg, int in, int out)
{
    (void)arg;
    fl_region *r = rc_open(region);
    unsigned long long reads = 0, bad = 0, wseen = 0, backwards = 0;
    uint64_t last = 0;
    th_send(out, "running");
    for (bool stop = false;;) {
        for (int i = 0; i < 16; i++) {
            unsigned char buf[REC_SIZE];
            size_t len = 0;
            uint64_t fence = 0;
            if (fl_read(r, REC, buf, sizeof buf, &len, &fence) != 0) {
                bad++;
                continue;
            }
            reads++;
            uint32_t tag = 0;
            if (pl_check(buf, len, fence, &tag) != NULL || (tag != TAG_W && tag != TAG_B))
                bad++;
            if (tag == TAG_W)
                wseen++;
            if (fence < last)
                backwards++;
            last = fence;
        }
        if (stop)
            break;
        struct pollfd p = {.fd = in, .events = POLLIN};
        stop = poll(&p, 1, 0) > 0;
    }
    th_sendf(out, "reads %llu bad %llu wseen %llu backwards %llu", reads, bad, wseen, backwards);
    fl_close(r);
    return 0;
}

/* ---- the fixture: a supervised region with B and R running ---- */
static th_daemon daemon_;
static th_child newer, reader;
static fl_region *parent_r;
static tr_profile prof;

struct read_result {
    int rc;
    unsigned long long fence;
    size_t len;
    unsigned tag;
    bool ok;
};

static struct read_result read_via_reader(void)
{
    char buf[256], ok[8];
    struct read_result res = {0};
    th_send(reader.to_child, "read");
    rc_recv(reader.from_child, buf, sizeof buf, 30000); /* I4: completes while W is stopped */
    if (sscanf(buf, "read %d %llu %zu %u %7s", &res.rc, &res.fence, &res.len, &res.tag, ok) != 5)
        fail_msg("reader said '%s'", buf);
    res.ok = strcmp(ok, "ok") == 0;
    return res;
}

struct commit_result {
    unsigned long long token, acc;
    unsigned flags;
    int rc, rel;
};

static struct commit_result commit_via_newer(void)
{
    char buf[256];
    struct commit_result c = {0};
    th_send(newer.to_child, "commit");
    rc_recv(newer.from_child, buf, sizeof buf, 60000); /* I4: W delays it by its lease at most */
    if (sscanf(buf, "done %llu %u %d %llu %d", &c.token, &c.flags, &c.rc, &c.acc, &c.rel) != 5)
        fail_msg("newer writer said '%s'", buf);
    return c;
}

/* A fresh supervised region per test, with B and R running on it. */
static int setup(void **state)
{
    (void)state;
    static int seq;
    char name[32];
    snprintf(name, sizeof name, "ptrace-%d", seq++);
    const char *opts[] = {"--records", "8", "--record-size", "256", NULL};
    rc_daemon(&daemon_, name, opts);
    region = daemon_.region;
    parent_r = rc_open(region);
    rc_child(&newer, newer_writer, NULL);
    rc_child(&reader, one_reader, NULL);
    /* the record exists and is bound before any stepped run */
    struct commit_result c = commit_via_newer();
    if (c.rc != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    th_send(newer.to_child, "exit");
    th_send(reader.to_child, "exit");
    rc_child_exit(&newer, 20000);
    rc_child_exit(&reader, 20000);
    fl_close(parent_r);
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

struct w_run {
    th_child c;
    unsigned long long token;
};

static void start_w(struct w_run *w)
{
    char buf[128];
    rc_child(&w->c, stepped_writer, NULL);
    rc_recv(w->c.from_child, buf, sizeof buf, 30000);
    if (sscanf(buf, "token %llu", &w->token) != 1)
        fail_msg("stepped writer said '%s'", buf);
    assert_int_equal(tr_wait_sigstop(w->c.pid, 30000), 0);
}

static bool w_published(void *ctx)
{
    const struct w_run *w = ctx;
    unsigned char buf[REC_SIZE];
    size_t len;
    uint64_t fence = 0;
    return fl_read(parent_r, REC, buf, sizeof buf, &len, &fence) == 0 && fence == w->token;
}

/* Count the instructions of one whole commit and find the publishing CAS
 * (once: what it finds are addresses in this program, the same for every
 * region). */
static void calibrate(void)
{
    if (prof.total)
        return;
    struct w_run w;
    start_w(&w);
    assert_int_equal(tr_profile_commit(w.c.pid, w_published, &w, &prof), 0);
    char buf[128];
    rc_recv(w.c.from_child, buf, sizeof buf, 30000);
    char want[64];
    snprintf(want, sizeof want, "rc 0 %llu", w.token);
    assert_string_equal(buf, want);
    assert_int_equal(rc_child_exit(&w.c, 30000), 0);
    assert_true(prof.cas_step > 0);
    assert_true(prof.total > prof.cas_step);
    fprintf(stderr, "# calibration: fl_commit = %ld instructions, %d locked cmpxchg; the value "
                    "became visible at step %ld (%#llx, %s)\n",
            prof.total, prof.cmpxchg_seen, prof.cas_step, (unsigned long long)prof.cas_rip,
            prof.cas_locked ? "a lock cmpxchg" : "NOT a lock cmpxchg");
}

enum stop_at {
    AT_COUNT,  /* n single steps from the entry of fl_commit */
    AT_ADDR,   /* the first time it reaches address addr (not executed) */
    AT_CAS,    /* at the publishing CAS, not executed */
    AFTER_CAS, /* right after the publishing CAS */
};

struct outcome {
    bool effective; /* W's commit had taken effect when it was stopped */
    bool returned;  /* W's fl_commit had returned already */
    long steps;
};

/* One run: stop W, let B commit and R read, resume W, check everything. */
static struct outcome stop_and_overtake(enum stop_at where, long n, uint64_t addr)
{
    struct w_run w;
    start_w(&w);
    tr_ctx t;
    assert_int_equal(tr_run_to(&t, w.c.pid, (uintptr_t)&fl_commit, 1000000), 0);
    if (where == AT_COUNT) {
        assert_int_equal(tr_step(&t, n, NULL, NULL), 0);
    } else {
        assert_int_equal(tr_run_to_addr(&t, where == AT_ADDR ? addr : prof.cas_rip), 0);
        if (where == AFTER_CAS)
            assert_int_equal(tr_step(&t, 1, NULL, NULL), 0);
    }
    struct outcome o = {.returned = t.returned, .steps = t.steps};

    /* W is stopped: R reads without waiting for it */
    struct read_result pre = read_via_reader();
    assert_int_equal(pre.rc, 0);
    assert_true(pre.ok); /* I3 */
    o.effective = pre.fence == w.token;
    if (o.effective)
        assert_int_equal(pre.tag, TAG_W);
    else
        assert_true(pre.fence < w.token);
    if (where == AT_CAS)
        assert_false(o.effective);
    if (where == AFTER_CAS)
        assert_true(o.effective);
    if (o.returned)
        assert_true(o.effective);

    /* B takes the key over at W's expiry and commits */
    struct commit_result b = commit_via_newer();
    assert_int_equal(b.rc, 0);
    assert_int_equal(b.acc, b.token);
    assert_true(b.token > w.token); /* I1 */
    assert_true(b.flags & FL_LEASE_EXPIRED);
    assert_int_equal(b.rel, 0);

    /* R reads B's value, still without W */
    struct read_result mid = read_via_reader();
    assert_int_equal(mid.rc, 0);
    assert_true(mid.ok);
    assert_int_equal(mid.fence, b.token);
    assert_int_equal(mid.tag, TAG_B);

    /* W finishes its call */
    assert_int_equal(tr_detach(w.c.pid), 0);
    char buf[128];
    int rc;
    unsigned long long acc;
    rc_recv(w.c.from_child, buf, sizeof buf, 30000);
    assert_int_equal(sscanf(buf, "rc %d %llu", &rc, &acc), 2);
    if (o.effective) {
        assert_int_equal(rc, 0);
        assert_int_equal(acc, w.token);
    } else {
        if (rc != -ESTALE)
            fail_msg("W stopped before its commit took effect (mode %d, n %ld, addr %#llx), "
                     "resumed after token %llu committed: rc %d (want -ESTALE)",
                     (int)where, n, (unsigned long long)addr, b.token, rc);
        assert_int_equal(acc, b.token); /* I2 */
    }
    assert_int_equal(rc_child_exit(&w.c, 30000), 0);

    /* the final value is B's, byte for byte */
    unsigned char val[REC_SIZE], want[REC_SIZE];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(parent_r, REC, val, sizeof val, &len, &fence), 0);
    assert_int_equal(fence, b.token);
    size_t wlen = pl_len(b.token, TAG_B, REC_SIZE);
    pl_make(want, wlen, b.token, TAG_B);
    assert_int_equal(len, wlen);
    assert_memory_equal(val, want, wlen);
    fl_record_info info;
    assert_true(rc_record_info(parent_r, REC, &info));
    assert_int_equal(info.accepted_token, b.token);
    if (!o.effective)
        assert_int_equal(info.last_rejected_token, w.token);
    return o;
}

/* I2 I3 I4: stops at every instruction from 16 before the publishing CAS
 * to 8 after it (by address), and every k-th instruction across the whole
 * call (by count). */
static void test_stop_across_commit(void **state)
{
    (void)state;
    calibrate();
    int runs = 0, effective = 0, rejected = 0;

    /* The neighbourhood of the CAS, exactly: before it the stopped commit
     * must lose to the newer one, after it it has already won and then been
     * replaced. */
    int near = 0;
    for (int i = 0; i < TR_NEAR_COUNT; i++) {
        if (!prof.near_unique[i])
            continue; /* runs more than once per call (a helper): no exact stop by address */
        bool after = i > TR_NEAR_BEFORE;
        struct outcome o = stop_and_overtake(AT_ADDR, i - TR_NEAR_BEFORE, prof.near_rip[i]);
        if (o.effective != after)
            fail_msg("stopped at instruction %+d from the publishing CAS (0: the CAS, not yet "
                     "executed): the commit had%s taken effect",
                     i - TR_NEAR_BEFORE, o.effective ? "" : " not");
        near++;
        runs++;
        effective += o.effective;
        rejected += !o.effective;
    }
    assert_true(near >= 4);

    /* The whole call, every k-th instruction.  Keep the run bounded: single
     * steps cost tens of microseconds each, and ASan builds execute about four
     * times as many instructions: aim at about 300 000 steps (a stop at n
     * costs n steps), and stop sampling after 30 s once 12 points are done. */
    long samples = 300000 / (prof.total / 2 + 1);
    if (samples > 80)
        samples = 80;
    if (samples < 12)
        samples = 12;
    long k = (prof.total + 3) / samples;
    if (k < 1)
        k = 1;
    uint64_t deadline = th_now_ns() + 30 * TH_S;
    int spread = 0;
    for (long n = 0; n <= prof.total + 2; n += k) {
        if (spread >= 12 && th_now_ns() > deadline)
            break;
        struct outcome o = stop_and_overtake(AT_COUNT, n, 0);
        spread++;
        runs++;
        effective += o.effective;
        rejected += !o.effective;
    }
    /* past the end: the commit returned before B started */
    struct outcome o = stop_and_overtake(AT_COUNT, 2 * prof.total, 0);
    assert_true(o.returned);
    runs++;
    effective++;
    fprintf(stderr, "# %d stop points (%d around the CAS by address, %d every %ld of %ld "
                    "instructions, 1 after the return): %d rejected after resuming, %d had "
                    "taken effect\n",
            runs, near, spread, k, prof.total, rejected, effective);
    assert_true(rejected > 0);
    assert_true(effective > 0);
    /* I2: what publishes is one compare-and-swap (comparison and mutation in
     * one atomic step), not a plain store after a check */
    assert_true(prof.cas_locked);
}

/* I2 I3: exactly at the publishing CAS and right after it, found by address,
 * with a reader spinning on the record throughout. */
static void test_stop_at_cas(void **state)
{
    (void)state;
    calibrate();
    for (int phase = 0; phase < 2; phase++) {
        enum stop_at where = phase == 0 ? AT_CAS : AFTER_CAS;
        th_child sp;
        rc_child(&sp, spin_reader, NULL);
        th_expect(sp.from_child, "running", 20000);
        for (int i = 0; i < 6; i++) {
            struct outcome o = stop_and_overtake(where, 0, 0);
            assert_int_equal(o.effective, where == AFTER_CAS);
        }
        th_send(sp.to_child, "stop");
        char buf[256];
        unsigned long long reads, bad, wseen, backwards;
        assert_int_equal(sscanf(rc_recv(sp.from_child, buf, sizeof buf, 30000),
                                "reads %llu bad %llu wseen %llu backwards %llu", &reads, &bad,
                                &wseen, &backwards),
                         4);
        assert_int_equal(rc_child_exit(&sp, 20000), 0);
        assert_int_equal(bad, 0);       /* I3 */
        assert_int_equal(backwards, 0); /* I2 */
        assert_true(reads >= 16);
        if (where == AT_CAS)
            assert_int_equal(wseen, 0); /* a rejected commit is never visible */
    }
}

/* ---- (c) buffers: a stopped commit holds one, no more ---- */
struct nb_ctx {
    const char *path;
};

static int nb_writer(void *arg, int in, int out)
{
    (void)in;
    const struct nb_ctx *c = arg;
    tr_traceme();
    fl_region *r = rc_open(c->path);
    fl_lease l;
    if (fl_acquire(r, KEY, W_LEASE, 30 * (int64_t)TH_S, &l) != 0)
        return 1;
    th_sendf(out, "token %llu", (unsigned long long)l.token);
    raise(SIGSTOP);
    uint64_t acc = 0;
    int rc = fl_commit(r, &l, REC, "stopped-writer", 14, 0, &acc);
    th_sendf(out, "rc %d %llu", rc, (unsigned long long)acc);
    fl_close(r);
    return 0;
}

/* I4 (and fl_commit's -ENOSPC): with one buffer beyond the record's, a commit
 * stopped before its CAS holds the only free one: another commit gets
 * -ENOSPC (and changes nothing); with two, the other commit succeeds while
 * the first is stopped. */
static void test_stopped_commit_holds_one_buffer(void **state)
{
    (void)state;
    calibrate();
    for (uint32_t spare = 1; spare <= 2; spare++) {
        char name[32];
        snprintf(name, sizeof name, "nobuf-%u", spare);
        struct nb_ctx ctx = {rc_path(name)};
        struct fl__params p = {.locks = 4, .records = 1, .record_size = 64, .clients = 8,
                               .spare_buffers = spare};
        assert_int_equal(fl__test_region_create_ready(ctx.path, &p), 0);
        fl_region *r = rc_open(ctx.path);
        fl_lease first;
        assert_int_equal(fl_acquire(r, KEY, 60 * TH_S, 0, &first), 0);
        assert_int_equal(fl_commit(r, &first, REC, "first", 5, 0, NULL), 0);
        assert_int_equal(fl_release(r, &first), 0);

        th_child w;
        rc_child(&w, nb_writer, &ctx);
        char buf[128];
        unsigned long long tw;
        assert_int_equal(sscanf(rc_recv(w.from_child, buf, sizeof buf, 30000), "token %llu", &tw),
                         1);
        assert_int_equal(tr_wait_sigstop(w.pid, 30000), 0);
        tr_ctx t;
        assert_int_equal(tr_run_to(&t, w.pid, (uintptr_t)&fl_commit, 1000000), 0);
        assert_int_equal(tr_run_to_addr(&t, prof.cas_rip), 0);

        fl_lease l;
        assert_int_equal(fl_acquire(r, KEY, 60 * TH_S, 30 * (int64_t)TH_S, &l), 0);
        assert_true(l.token > tw);
        int rc = fl_commit(r, &l, REC, "other", 5, 0, NULL);
        unsigned char val[64];
        size_t len = 0;
        uint64_t fence = 0;
        assert_int_equal(fl_read(r, REC, val, sizeof val, &len, &fence), 0);
        if (spare == 1) {
            assert_int_equal(rc, -ENOSPC);
            assert_int_equal(fence, first.token); /* nothing changed */
            assert_int_equal(len, 5);
            assert_memory_equal(val, "first", 5);
        } else {
            assert_int_equal(rc, 0); /* I4: the stopped commit delays nobody */
            assert_int_equal(fence, l.token);
        }

        assert_int_equal(tr_detach(w.pid), 0);
        int wrc;
        unsigned long long acc;
        assert_int_equal(sscanf(rc_recv(w.from_child, buf, sizeof buf, 30000), "rc %d %llu", &wrc,
                                &acc),
                         2);
        if (spare == 1) {
            /* nothing newer took effect: its CAS succeeds when it resumes */
            assert_int_equal(wrc, 0);
            assert_int_equal(acc, tw);
        } else {
            assert_int_equal(wrc, -ESTALE);
            assert_int_equal(acc, l.token);
        }
        assert_int_equal(rc_child_exit(&w, 30000), 0);
        /* with the stopped writer gone, commits work again */
        assert_int_equal(fl_commit(r, &l, REC, "after", 5, 0, NULL), 0);
        assert_int_equal(fl_read(r, REC, val, sizeof val, &len, &fence), 0);
        assert_int_equal(fence, l.token);
        assert_memory_equal(val, "after", 5);
        fl_close(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stop_across_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_at_cas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_commit_holds_one_buffer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
