/* SPDX-License-Identifier: MIT */
/* I4 I6 I13 I14: the invariants the defects below broke (each test names its own) */
/*
 * etcd_review28.c - the defects a hostile review of issue 28's etcd queue
 * (a fair queue per key, reused etcd leases: src/etcd/lock.c, wait.c,
 * pool.c) found where an answer is lost or comes late, reproduced, each as
 * the scenario that showed it, on a real member, with real handles and
 * processes, through a fake that relays to the member and loses or holds
 * the chosen request.  Numbered as in the review (the others, a lease or
 * the queue used outside the protocol, are etcd_review28_misuse.c):
 *
 *   1. a waiter whose place was given up (its lease ended while it was
 *      SIGSTOPped) queues again, and that enqueue's answer is lost: the
 *      lease, which may carry the new entry, goes back to the handle's pool,
 *      which keeps it alive: a phantom live entry holds the key long past
 *      its lease (I4, I6);
 *   2. an acquire Txn held on the way and delivered after the acquisition
 *      it belonged to went on and ended (a stopped member that resumes):
 *      it queues an entry again, on a lease the pool keeps alive (I4, I6);
 *   3. the epoch moves between an acquire attempt whose answer was lost and
 *      its repetition: the repetition queues a second entry behind the
 *      first, on the same lease, and the caller waits behind its own entry
 *      (I4, I6);
 *   7. the first acquisition of a key, its Txn repeated after a lost
 *      answer, says FL_LEASE_EXPIRED (docs/etcd.md: 0 when nothing tells);
 *   8. a renew's move held on the way lands after the next renew let its
 *      new lease go (whose revoke failed): the holding ends ~57 s before
 *      its deadline_ns (I4);
 *   9. an applied acquire whose look after the repetition reaches nobody
 *      answers -EHOSTUNREACH, "no effect", and pools its entry's lease
 *      (I14, I4);
 *  10. the same after an answered acquire whose history read (the flags)
 *      reaches nobody (I14, I4).
 *
 * docs/etcd.md (Fault tests) has the review's record; what the queue
 * withstood is etcd_review28_held.c.  The queue read raw and the thread
 * that acquires are review28_util.c.
 *
 * Each test fails on the code it was written against; each comment says
 * where the defect is.  One member (the relays front one member), a prefix
 * per test.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "review28_util.h"

/* ---- a relay in front of member 0 that loses or holds chosen requests ---- */

enum relay_mode {
    R_PASS,
    R_LOSE_ACQ,      /* acquire Txns: applied, then the connection closed without answer */
    R_HOLD_ACQ_ONCE, /* the next acquire Txn: kept (not applied) and never answered */
    R_BUMP_ACQ_ONCE, /* the next acquire Txn: applied, the epoch moved, no answer */
    R_LOSE_ACQ_ONCE, /* the next acquire Txn: applied, the connection closed without answer */
    R_HOLD_MOVE,     /* renew Txns that move an entry to another lease: the first kept
                        (not applied), all never answered */
    R_LOSE_LOOKS,    /* Txns without a put (looks at the queue): closed unanswered */
    R_LOSE_HISTORY,  /* ranges of the queue's history (min_create_revision): closed
                        unanswered */
    R_PASS_ACQ_THEN_LOSE_LOOKS, /* the next acquire Txn passes; then this relay and its
                                   peer lose every look */
};

struct relay {
    ec_fake *fake;
    int port, member_port;
    _Atomic int mode;
    _Atomic int hits;
    _Atomic bool have_held;
    _Atomic bool hold_revokes; /* lease revokes: never answered (they fail) */
    _Atomic int watches;       /* watch requests seen */
    struct relay *peer;        /* R_PASS_ACQ_THEN_LOSE_LOOKS: the other relay */
    char held[1 << 15];
    char bump[256]; /* R_BUMP_ACQ_ONCE: the /v3/kv/put body that moves the epoch */
};

/* The acquire Txn (lock.c, fl__etcd_enqueue) is the one Txn that puts with
 * prev_kv (the marker). */
static bool is_acquire(const char *path, const char *body)
{
    return strcmp(path, "/v3/kv/txn") == 0 && strstr(body, "\"prev_kv\":true");
}

static int relay_fn(void *arg, const char *path, const char *body, char *out, size_t cap)
{
    struct relay *rl = arg;
    /* The fake answers one request at a time and cannot stream: a watch is
     * held unanswered, so a waiter through the relay looks at its queue
     * every slice (wait.c, FL__ETCD_SLICE_MS) instead. */
    if (strcmp(path, "/v3/watch") == 0) {
        atomic_fetch_add(&rl->watches, 1);
        return -1;
    }
    bool acq = is_acquire(path, body);
    if (atomic_load(&rl->hold_revokes) && strcmp(path, "/v3/lease/revoke") == 0)
        return -1;
    switch (atomic_load(&rl->mode)) {
    case R_LOSE_ACQ:
        if (acq) {
            atomic_fetch_add(&rl->hits, 1);
            ec_relay(rl->member_port, path, body, out, cap);
            return 0;
        }
        break;
    case R_HOLD_ACQ_ONCE:
        if (acq && !atomic_load(&rl->have_held)) {
            snprintf(rl->held, sizeof rl->held, "%s", body);
            atomic_store(&rl->have_held, true);
            atomic_fetch_add(&rl->hits, 1);
            return -1;
        }
        break;
    case R_BUMP_ACQ_ONCE:
        if (acq && atomic_fetch_add(&rl->hits, 1) == 0) {
            ec_relay(rl->member_port, path, body, out, cap);
            char ans[4096];
            ec_relay(rl->member_port, "/v3/kv/put", rl->bump, ans, sizeof ans);
            return 0;
        }
        break;
    case R_LOSE_ACQ_ONCE:
        if (acq && atomic_fetch_add(&rl->hits, 1) == 0) {
            ec_relay(rl->member_port, path, body, out, cap);
            return 0;
        }
        break;
    case R_LOSE_HISTORY:
        if (strcmp(path, "/v3/kv/range") == 0 && strstr(body, "min_create_revision")) {
            atomic_fetch_add(&rl->hits, 1);
            return 0;
        }
        break;
    case R_LOSE_LOOKS:
        if (strcmp(path, "/v3/kv/txn") == 0 && !strstr(body, "request_put")) {
            atomic_fetch_add(&rl->hits, 1);
            return 0;
        }
        break;
    case R_PASS_ACQ_THEN_LOSE_LOOKS:
        if (acq) {
            int st = ec_relay(rl->member_port, path, body, out, cap);
            atomic_store(&rl->mode, R_LOSE_LOOKS);
            if (rl->peer)
                atomic_store(&rl->peer->mode, R_LOSE_LOOKS);
            return st;
        }
        break;
    case R_HOLD_MOVE:
        /* lock.c, fl__etcd_renew: the move is a put with ignore_value */
        if (strcmp(path, "/v3/kv/txn") == 0 && strstr(body, "ignore_value")) {
            if (!atomic_load(&rl->have_held)) {
                snprintf(rl->held, sizeof rl->held, "%s", body);
                atomic_store(&rl->have_held, true);
            }
            atomic_fetch_add(&rl->hits, 1);
            return -1;
        }
        break;
    default:
        break;
    }
    return ec_relay(rl->member_port, path, body, out, cap);
}

static struct relay *relay_start(void)
{
    struct relay *rl = calloc(1, sizeof *rl);
    assert_non_null(rl);
    rl->member_port = cl.m[0].client_port;
    rl->fake = ec_fake_start(relay_fn, rl, &rl->port);
    return rl;
}

static void relay_stop(struct relay *rl)
{
    ec_fake_stop(rl->fake);
    free(rl);
}


/* =====================================================================
 * 1.  A waiter stopped past its lease queues again on resuming, and that
 * enqueue's answer is lost.
 *
 * wait.c, fl__etcd_acquire: `if (!w.p.c) { err = fl__queue_up(&w, false);
 * if (err) break; }` -- fl__etcd_enqueue cleared w.p (p->c 0) before its
 * request, so fl__give_up sees "not queued" (its leave loop does not run,
 * r 0, !w->p.c) and calls fl__etcd_lease_give: the lease goes back to the
 * pool although the lost Txn may have put our entry on it (-EAGAIN; also
 * -ENOTRECOVERABLE, whose Txn was applied).  The first enqueue, before the
 * loop, gets this right (it revokes on every error but -EBUSY,
 * -EHOSTUNREACH and -EACCES).  The pool's thread renews the lease for 30 s
 * of idleness, and every acquisition of the same TTL by the handle reuses
 * it and keeps it alive: the phantom entry holds the key meanwhile.
 * I4 I6
 * ===================================================================== */
static void test_requeue_answer_lost_pools_entry(void **state)
{
    (void)state;
    const char *prefix = "rq";
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1); /* the agent inherits it */
    struct relay *rl = relay_start();
    char via[256], direct[1024];
    snprintf(via, sizeof via, "etcd://127.0.0.1:%d/%s", rl->port, prefix);
    direct_uri(prefix, direct, sizeof direct);
    fl_region *h = NULL, *d = NULL;
    assert_int_equal(fl_open(direct, &h), 0);
    assert_int_equal(fl_open(direct, &d), 0);
    fl_lease hl, dl;
    assert_int_equal(fl_acquire(h, "k", S(60), 0, &hl), 0);

    /* W waits behind the holder, through the relay, with a 2 s lease. */
    ec_agent w;
    ec_agent_start(&w, via);
    assert_int_equal(w.open_rc, 0);
    ec_agent_send(&w, "acq k %llu %llu", (unsigned long long)S(2), (unsigned long long)S(30));
    if (!wait_live(prefix, "k", 2, 20000))
        fail_msg("the waiter did not queue");
    /* Once it watches the entry before its own, it is asleep in its wait
     * (not inside the enqueue's request). */
    for (uint64_t end = th_now_ns() + S(20); !atomic_load(&rl->watches);) {
        if (th_now_ns() > end)
            fail_msg("the waiter did not start its watch");
        pause_ms(10);
    }
    /* Stopped until etcd ended its lease (and its entry with it). */
    kill(w.c.pid, SIGSTOP);
    if (!wait_live(prefix, "k", 1, 20000))
        fail_msg("the stopped waiter's entry outlived its lease");
    /* On resuming it queues again; that Txn is applied, its answer lost. */
    atomic_store(&rl->mode, R_LOSE_ACQ);
    kill(w.c.pid, SIGCONT);
    ec_reply wr;
    if (ec_agent_read(&w, &wr, 30000) != 0)
        fail_msg("the waiter did not answer");
    atomic_store(&rl->mode, R_PASS);
    printf("# the waiter's fl_acquire: %s (%s); re-queue Txns relayed: %d\n",
           fl_err_name(wr.rc), wr.text, atomic_load(&rl->hits));
    assert_true(atomic_load(&rl->hits) >= 1);
    assert_int_equal(wr.rc, -EAGAIN);
    dump_queue(prefix, "k");

    /* The holder releases.  The entry the lost Txn made lives on a lease of
     * 2 s: the next one must get the key within that lease and some slack. */
    assert_int_equal(fl_release(h, &hl), 0);
    struct timed_acq next = take_within_lease(d, "k", &dl);
    dump_queue(prefix, "k");
    if (next.rc == 0)
        assert_int_equal(fl_release(d, &dl), 0);
    ec_agent_stop(&w); /* fl_close revokes the pool: the phantom goes */
    fl_close(h);
    fl_close(d);
    relay_stop(rl);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
    if (next.rc != 0)
        fail_msg("after a re-queue whose answer was lost (-EAGAIN), the key stayed held by "
                 "nobody for %.1f s (its entry's lease is 2 s): %s: %s -- the lease that may "
                 "carry the entry went back to the handle's pool, which keeps it alive "
                 "(wait.c: fl__give_up pools it when w.p.c is 0)",
                 secs(next.took), fl_err_name(next.rc), next.why);
}

/* =====================================================================
 * 2.  An acquire Txn held on the way (a member stopped with the request in
 * its socket, which reads it when it resumes), repeated to another
 * endpoint, and delivered after the holding it started has ended and the
 * next holder's release deleted its entry.
 *
 * lock.c, fl__etcd_enqueue: the Txn's only guard against a repetition is
 * "our entry absent" (and the epoch and marker).  Once the released entry
 * is deleted, a late copy finds it absent again and queues it anew, live,
 * on the lease L it names -- which fl_release gave back to the pool, whose
 * thread keeps it alive (pool.c), and which the handle's next acquisitions
 * of the same TTL reuse.  A lease whose acquire Txn had an attempt without
 * an answer (rp.ambiguous) must not be pooled (revoke it at the release),
 * or the Txn must carry a guard that a late copy cannot pass.
 * I4 I6
 * ===================================================================== */
struct busy {
    fl_region *r;
    _Atomic bool stop;
    _Atomic int rounds;
    uint64_t lease_ids[4];
};

static void *busy_main(void *arg)
{
    struct busy *b = arg;
    while (!atomic_load(&b->stop)) {
        fl_lease l;
        if (fl_acquire(b->r, "other", S(2), S(5), &l) == 0) {
            int n = atomic_fetch_add(&b->rounds, 1);
            if (n < 4)
                b->lease_ids[n] = l.handle;
            fl_release(b->r, &l);
        }
        pause_ms(200);
    }
    return NULL;
}

static void test_late_acquire_txn_queues_again(void **state)
{
    (void)state;
    const char *prefix = "late";
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    struct relay *rl = relay_start();
    char via[256], direct[1024];
    snprintf(via, sizeof via, "etcd://127.0.0.1:%d,127.0.0.1:%d/%s", rl->port,
             cl.m[0].client_port, prefix);
    direct_uri(prefix, direct, sizeof direct);
    fl_region *r = NULL, *d = NULL;
    assert_int_equal(fl_open(via, &r), 0);
    assert_int_equal(fl_open(direct, &d), 0);
    /* The acquire's first attempt is held at the relay; its repetition goes
     * to the member and takes the key. */
    atomic_store(&rl->mode, R_HOLD_ACQ_ONCE);
    fl_lease l, x;
    int rc = fl_acquire(r, "k", S(2), S(5), &l);
    atomic_store(&rl->mode, R_PASS);
    if (rc != 0)
        fail_msg("acquire with its first attempt held: %s (%s)", fl_err_name(rc),
                 fl_last_error());
    assert_true(atomic_load(&rl->have_held));
    assert_int_equal(fl_release(r, &l), 0); /* its etcd lease goes back to the pool */
    /* The next holder comes and goes; its release deletes r's entry. */
    assert_int_equal(fl_acquire(d, "k", S(30), 0, &x), 0);
    assert_true(x.token > l.token);
    assert_int_equal(fl_release(d, &x), 0);
    assert_int_equal(live_of(prefix, "k"), 0);
    /* Now the held attempt reaches etcd (refused, "requested lease not
     * found", where the lease was revoked rather than pooled). */
    char ans[8192];
    int st = ec_relay(cl.m[0].client_port, "/v3/kv/txn", rl->held, ans, sizeof ans);
    printf("# the late acquire Txn: HTTP %d %.200s\n", st, ans);
    dump_queue(prefix, "k");
    /* r goes on working (other keys, the same TTL): its pool reuses L. */
    struct busy b = {.r = r};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, busy_main, &b), 0);
    struct timed_acq next = take_within_lease(d, "k", &x);
    atomic_store(&b.stop, true);
    pthread_join(t, NULL);
    struct qent e[8];
    int n = queue_of(prefix, "k", e, 8);
    bool shared = false;
    for (int i = 0; i < n && i < 8; i++)
        for (int j = 0; j < 4 && j < atomic_load(&b.rounds); j++)
            shared |= e[i].value[0] == 'W' && e[i].lease == b.lease_ids[j] && e[i].lease;
    dump_queue(prefix, "k");
    if (next.rc == 0)
        assert_int_equal(fl_release(d, &x), 0);
    fl_close(r);
    fl_close(d);
    relay_stop(rl);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
    if (next.rc != 0)
        fail_msg("a late copy of a finished acquisition's Txn queued a live entry again: key "
                 "\"k\" stayed held by nobody for %.1f s (leases of 2 s): %s: %s%s",
                 secs(next.took), fl_err_name(next.rc), next.why,
                 shared ? "; and the handle's later acquisitions of \"other\" put their "
                          "entries on the same etcd lease as that phantom"
                        : "");
}

/* =====================================================================
 * 3.  The epoch moves between an acquire attempt that was applied (its
 * answer lost) and the attempt's repetition.
 *
 * lock.c, fl__refused: the diagnosis looks at the epoch before it looks for
 * our entry, so the repetition returns "epoch moved" (p->epoch_moved)
 * instead of "an earlier attempt of ours queued us" (2); wait.c,
 * fl__queue_up, then queues a new entry (a new ID) on the same lease,
 * behind the first one, which holds the key and is kept alive by our own
 * renewals.  The caller waits behind its own phantom (forever, with
 * FL_WAIT_FOREVER); when the wait ends its leave deletes the second entry
 * only and pools the lease with the first one on it.  Fix: look for our
 * entry first (r[2] before r[0]).
 * I4 I6
 * ===================================================================== */
static void test_epoch_moves_between_attempts(void **state)
{
    (void)state;
    const char *prefix = "bump";
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    struct relay *rl = relay_start();
    char via[256], direct[1024];
    snprintf(via, sizeof via, "etcd://127.0.0.1:%d,127.0.0.1:%d/%s", rl->port,
             cl.m[0].client_port, prefix);
    direct_uri(prefix, direct, sizeof direct);
    fl_region *r = NULL;
    assert_int_equal(fl_open(via, &r), 0); /* creates the epoch, 1 */
    char key[64];
    int kn = snprintf(key, sizeof key, "%s/epoch", prefix);
    char *k64 = b64(key, (size_t)kn), *v64 = b64("2", 1);
    snprintf(rl->bump, sizeof rl->bump, "{\"key\":\"%s\",\"value\":\"%s\"}", k64, v64);
    free(k64);
    free(v64);
    atomic_store(&rl->mode, R_BUMP_ACQ_ONCE);
    /* A free key. */
    fl_lease l;
    uint64_t t0 = th_now_ns();
    int rc = fl_acquire(r, "k", S(2), (int64_t)S(6), &l);
    uint64_t took = th_now_ns() - t0;
    atomic_store(&rl->mode, R_PASS);
    char why[512];
    snprintf(why, sizeof why, "%s", rc ? fl_last_error() : "");
    printf("# acquire of a free key, the epoch moved under its lost attempt: %s after %.1f s "
           "(token %" PRIu64 ")\n",
           fl_err_name(rc), secs(took), rc ? 0 : l.token);
    dump_queue(prefix, "k");
    int live_after = live_of(prefix, "k");
    if (rc == 0) {
        /* The first attempt's entry, queued under epoch 1 before the bump,
         * holds the key: its token is of epoch 1, and still above every
         * earlier one (none here). */
        assert_true(l.token > 0);
        assert_int_equal(fl_release(r, &l), 0);
        live_after = live_of(prefix, "k");
    }
    fl_close(r);
    relay_stop(rl);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
    if (rc != 0)
        fail_msg("fl_acquire of a free key whose first attempt was applied (answer lost) and "
                 "whose repetition found the epoch moved: %s after %.1f s: %s -- it queued a "
                 "second entry behind its own first one (%d live entr%s left after it gave "
                 "up)",
                 fl_err_name(rc), secs(took), why, live_after, live_after == 1 ? "y" : "ies");
    if (live_after != 0)
        fail_msg("after the acquisition was released, %d live entr%s of ours still hold the "
                 "key",
                 live_after, live_after == 1 ? "y" : "ies");
}

/* =====================================================================
 * 7.  The first acquisition of a key, whose acquire Txn's answer was lost
 * and whose repetition (the next endpoint) found the entry the first
 * attempt made.
 *
 * lock.c: fl__etcd_enqueue answers the repetition (fl__refused: 2) with
 * fl__etcd_look(e, k, id, p->c, p), and fl__etcd_look passes had_pred =
 * (c != 0), true here: fl__around finds no entry before ours and
 * fl__holding_now says FL_LEASE_EXPIRED -- on a key never held before.
 * docs/etcd.md (Errors): "a holding's flags are then 0 when nothing
 * tells".  Wrong in the cautious direction (harmless, but a program that
 * recovers after an expiry does it for nothing).  had_pred should say
 * whether an entry was before ours when we last knew, not whether we know
 * our c.
 * ===================================================================== */
static void test_repeated_first_acquire_flags(void **state)
{
    (void)state;
    const char *prefix = "rpt";
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    struct relay *rl = relay_start();
    char via[256];
    snprintf(via, sizeof via, "etcd://127.0.0.1:%d,127.0.0.1:%d/%s", rl->port,
             cl.m[0].client_port, prefix);
    fl_region *r = NULL;
    assert_int_equal(fl_open(via, &r), 0);
    atomic_store(&rl->mode, R_LOSE_ACQ_ONCE);
    fl_lease l;
    int rc = fl_acquire(r, "fresh", S(30), S(5), &l);
    atomic_store(&rl->mode, R_PASS);
    char why[512];
    snprintf(why, sizeof why, "%s", rc ? fl_last_error() : "");
    assert_int_equal(atomic_load(&rl->hits), 1);
    dump_queue(prefix, "fresh");
    if (rc == 0)
        assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    relay_stop(rl);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
    if (rc != 0)
        fail_msg("the repeated acquire of a free key: %s: %s", fl_err_name(rc), why);
    if (l.flags != 0)
        fail_msg("the first acquisition ever of key \"fresh\", its Txn repeated after a lost "
                 "answer, says flags 0x%x (FL_LEASE_EXPIRED 0x%x): nobody held it before",
                 l.flags, FL_LEASE_EXPIRED);
}

/* =====================================================================
 * 8.  A renew that moves the entry to another lease (another length) is
 * held on the way (-EAGAIN: both leases kept); the next renew reads the
 * entry still on the old lease and lets the new one go -- but the held
 * move arrives after that read, and the revoke of the new lease did not
 * get through (pool.c: "failed: the lease ends at its TTL").
 *
 * lock.c, fl__settle_move: "it did not" is only "it has not yet": the
 * move Txn compares create_revision and lease == L, both still true, so
 * a late copy moves the entry to L2, whose TTL (3 s) nobody renews, while
 * the holder's deadline_ns says the 60 s of L: the holding ends under its
 * holder 55 s early (I4: deadline_ns must never be later than the moment
 * etcd may end the holding).  A narrower window without a failed revoke:
 * the late move landing between the read and the revoke.  Fix: make a
 * late move fail once it has been given up -- e.g. compare the entry's
 * mod_revision in the move, and have settle touch the entry (a put with
 * ignore_value on L) before it lets L2 go -- or keep L2 alive as long as
 * the holding.
 * I4
 * ===================================================================== */
static void test_late_renew_move_ends_holding(void **state)
{
    (void)state;
    const char *prefix = "move";
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    struct relay *rl = relay_start();
    char via[256], direct[1024];
    snprintf(via, sizeof via, "etcd://127.0.0.1:%d/%s", rl->port, prefix);
    direct_uri(prefix, direct, sizeof direct);
    fl_region *r = NULL, *d = NULL;
    assert_int_equal(fl_open(via, &r), 0);
    assert_int_equal(fl_open(direct, &d), 0);
    fl_lease l, x;
    assert_int_equal(fl_acquire(r, "k", S(60), 0, &l), 0);
    atomic_store(&rl->mode, R_HOLD_MOVE);
    int rc = fl_renew(r, &l, S(3));
    atomic_store(&rl->mode, R_PASS);
    if (rc != -EAGAIN)
        fail_msg("a renew whose move was held: %s (%s), not -EAGAIN", fl_err_name(rc),
                 fl_last_error());
    assert_true(atomic_load(&rl->have_held));
    /* The next renew (the first length again) settles: the entry is on the
     * old lease; the new one is let go, and its revoke does not get
     * through. */
    atomic_store(&rl->hold_revokes, true);
    rc = fl_renew(r, &l, S(60));
    if (rc != 0)
        fail_msg("the renew after: %s (%s)", fl_err_name(rc), fl_last_error());
    /* The held move arrives (a fix may make it fail: any answer). */
    char ans[8192];
    int st = ec_relay(cl.m[0].client_port, "/v3/kv/txn", rl->held, ans, sizeof ans);
    printf("# the late move: HTTP %d %.160s\n", st, ans);
    dump_queue(prefix, "k");
    bool gone = wait_live(prefix, "k", 0, 15000);
    uint64_t now = th_now_ns();
    rc = fl_acquire(d, "k", S(30), 0, &x);
    int chk = fl_check(r, &l);
    dump_queue(prefix, "k");
    if (rc == 0)
        assert_int_equal(fl_release(d, &x), 0);
    atomic_store(&rl->hold_revokes, false);
    fl_release(r, &l);
    fl_close(r);
    fl_close(d);
    relay_stop(rl);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
    if (gone || rc == 0)
        fail_msg("after a late move of the entry to the lease its renew had let go, the holding "
                 "ended %.1f s before its deadline_ns (another handle's try: %s; the holder's "
                 "fl_check: %s)",
                 l.deadline_ns > now ? secs(l.deadline_ns - now) : 0.0, fl_err_name(rc),
                 fl_err_name(chk));
}

/* =====================================================================
 * 9.  An acquire whose first attempt was applied (its answer lost), whose
 * repetition was refused because our entry exists, and whose look at the
 * queue around that entry then reached no endpoint.
 *
 * lock.c, fl__etcd_enqueue: `if (err == 2) err = fl__etcd_look(...)`: the
 * look is a read, whose failure is -EHOSTUNREACH ("the call had no
 * effect"), and fl__etcd_enqueue returns it as the acquire's outcome,
 * although the acquire took effect (our entry is live on the lease); wait.c
 * then gives the lease back to the pool on -EHOSTUNREACH ("refused before
 * any effect").  I14: an answer the network lost is never reported as "no
 * effect" unless no byte can have reached the store -- here the Txn did.
 * And the lease, carrying the live entry, is kept alive by the pool: the
 * key is held by nobody until the pool lets it go.  Fix: after a
 * repetition that found our entry, any failure is -EAGAIN.
 * I14 I4
 * ===================================================================== */
static void test_look_after_repetition_unreachable(void **state)
{
    (void)state;
    const char *prefix = "rlook";
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    struct relay *a = relay_start(), *b = relay_start();
    b->peer = a;
    char via[256], direct[1024];
    snprintf(via, sizeof via, "etcd://127.0.0.1:%d,127.0.0.1:%d/%s", a->port, b->port, prefix);
    direct_uri(prefix, direct, sizeof direct);
    fl_region *r = NULL, *d = NULL;
    assert_int_equal(fl_open(via, &r), 0);
    assert_int_equal(fl_open(direct, &d), 0);
    atomic_store(&a->mode, R_LOSE_ACQ_ONCE);
    atomic_store(&b->mode, R_PASS_ACQ_THEN_LOSE_LOOKS);
    fl_lease l, x;
    int rc = fl_acquire(r, "k", S(2), 0, &l);
    char why[512];
    snprintf(why, sizeof why, "%s", rc ? fl_last_error() : "");
    atomic_store(&a->mode, R_PASS);
    atomic_store(&b->mode, R_PASS);
    printf("# the acquire: %s (%s); looks lost: %d + %d\n", fl_err_name(rc), why,
           atomic_load(&a->hits) - 1, atomic_load(&b->hits));
    int live = live_of(prefix, "k");
    dump_queue(prefix, "k");
    struct timed_acq next = take_within_lease(d, "k", &x);
    if (next.rc == 0)
        assert_int_equal(fl_release(d, &x), 0);
    if (rc == 0)
        fl_release(r, &l);
    fl_close(r);
    fl_close(d);
    relay_stop(a);
    relay_stop(b);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
    if (rc == -EHOSTUNREACH && live > 0)
        fail_msg("fl_acquire answered -EHOSTUNREACH (\"the call had no effect\") with its "
                 "entry live in the queue (%d live): %s; another handle then %s after %.1f s "
                 "(leases of 2 s)",
                 live, why, next.rc == 0 ? "got the key" : fl_err_name(next.rc),
                 secs(next.took));
    if (next.rc != 0)
        fail_msg("the key stayed held by nobody for %.1f s after an acquire that answered %s: "
                 "%s",
                 secs(next.took), fl_err_name(rc), why);
}

/* =====================================================================
 * 10.  An acquire Txn that was applied and answered (a free key: we hold
 * it), whose follow-up read of the queue's history (how the holding before
 * ended) reaches no endpoint.
 *
 * lock.c, fl__etcd_enqueue -> fl__holding_now -> fl__held_between: the
 * read's -EHOSTUNREACH becomes the acquire's result, although the Txn took
 * effect and our entry now holds the key; wait.c gives the lease back to
 * the pool on -EHOSTUNREACH, live entry and all.  The caller was told "no
 * effect" (I14), and the key is held by a phantom for as long as the pool
 * keeps that lease.  The history read is needed only for the flags: on its
 * failure, FL_LEASE_EXPIRED (the cautious answer, as for a compacted
 * history) and the holding, not an error.
 * State: H released while W waited; W then held and never renewed, so W's
 * entry vanished and H's released one is the newest before ours, with W
 * queued between them before H's release (lock.c, HOW THE HOLDING BEFORE
 * ENDED: the rare case that reads the history).
 * I14 I4
 * ===================================================================== */
static void test_history_read_unreachable(void **state)
{
    (void)state;
    const char *prefix = "hist";
    setenv("FENCELOCK_ETCD_TIMEOUT_MS", "500", 1);
    struct relay *rl = relay_start();
    char via[256], direct[1024];
    snprintf(via, sizeof via, "etcd://127.0.0.1:%d/%s", rl->port, prefix);
    direct_uri(prefix, direct, sizeof direct);
    fl_region *h = NULL, *w = NULL, *x = NULL, *d = NULL;
    assert_int_equal(fl_open(direct, &h), 0);
    assert_int_equal(fl_open(direct, &w), 0);
    assert_int_equal(fl_open(via, &x), 0);
    assert_int_equal(fl_open(direct, &d), 0);
    fl_lease hl, xl, dl;
    assert_int_equal(fl_acquire(h, "k", S(60), 0, &hl), 0);
    struct acq_arg a = {w, "k", S(2), (int64_t)S(40), {0}, 0, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acq_main, &a), 0);
    if (!wait_live(prefix, "k", 2, 20000))
        fail_msg("W did not queue");
    assert_int_equal(fl_release(h, &hl), 0);
    if (!wait_done(&a, 20000) || a.rc != 0)
        fail_msg("W did not get the key");
    pthread_join(t, NULL);
    /* W never renews: its entry goes with its lease. */
    if (!wait_live(prefix, "k", 0, 20000))
        fail_msg("W's entry outlived its lease");
    dump_queue(prefix, "k");
    atomic_store(&rl->mode, R_LOSE_HISTORY);
    int rc = fl_acquire(x, "k", S(2), 0, &xl);
    atomic_store(&rl->mode, R_PASS);
    char why[512];
    snprintf(why, sizeof why, "%s", rc ? fl_last_error() : "");
    int hits = atomic_load(&rl->hits), live = live_of(prefix, "k");
    printf("# the acquire: %s (%s) flags 0x%x; history reads lost: %d\n", fl_err_name(rc), why,
           rc ? 0 : xl.flags, hits);
    dump_queue(prefix, "k");
    struct timed_acq next = take_within_lease(d, "k", &dl);
    if (next.rc == 0)
        assert_int_equal(fl_release(d, &dl), 0);
    if (rc == 0)
        fl_release(x, &xl);
    fl_close(h);
    fl_close(w);
    fl_close(x);
    fl_close(d);
    relay_stop(rl);
    unsetenv("FENCELOCK_ETCD_TIMEOUT_MS");
    assert_true(hits >= 1); /* the scenario reached the history read */
    if (rc != 0 && live > 0)
        fail_msg("fl_acquire answered %s with its entry live, holding the key (%d live): %s; "
                 "another handle then %s after %.1f s (leases of 2 s)",
                 fl_err_name(rc), live, why, next.rc == 0 ? "got the key" : fl_err_name(next.rc),
                 secs(next.took));
    if (rc == 0 && xl.flags != FL_LEASE_EXPIRED)
        fail_msg("the holding before ended unreleased, yet flags 0x%x", xl.flags);
}

int main(void)
{
    /* FL_ETCD_REVIEW28_ONLY=test_name (a cmocka pattern) runs one. */
    const char *only = getenv("FL_ETCD_REVIEW28_ONLY");
    if (only && *only)
        cmocka_set_test_filter(only);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requeue_answer_lost_pools_entry),
        cmocka_unit_test(test_late_acquire_txn_queues_again),
        cmocka_unit_test(test_epoch_moves_between_attempts),
        cmocka_unit_test(test_repeated_first_acquire_flags),
        cmocka_unit_test(test_late_renew_move_ends_holding),
        cmocka_unit_test(test_look_after_repetition_unreachable),
        cmocka_unit_test(test_history_read_unreachable),
    };
    return cmocka_run_group_tests(tests, review28_group_setup, review28_group_teardown);
}
