/* SPDX-License-Identifier: MIT */
/*
 * wait.c - fl_acquire on etcd: its arguments, the lease its entry lives on,
 * and the waiting in the key's queue (queue.c, QUEUE).
 *
 * WAITING.  The acquire Txn puts our entry at the back of the key's queue
 * and tells us the entry before ours.  We watch that one entry, from the
 * revision of the answer on, and nothing else, so a release wakes one
 * waiter, not all of them:
 *   - it is rewritten "R ..." or "D ...": its holder ended the holding, and
 *     we hold the key now (no request);
 *   - it is deleted, and we knew it held the key: its lease ended, and we
 *     hold the key now, FL_LEASE_EXPIRED (no request);
 *   - it is deleted, and we did not know that (a waiter ahead of us gave up,
 *     or its lease ended after it came to hold the key unseen): one read
 *     of the queue around our entry says where we are (queue.c, fl__etcd_look);
 *   - the watch broke or its history was compacted, or nothing came for
 *     FL__ETCD_SLICE_MS (a member stopped under the watch): the same read.
 * Our entry lives on our lease L: we renew L when a third of its TTL has
 * passed.  "We hold the key now" needs our entry alive when the entry
 * before ours ended: so the time must still be before L's end as last
 * known (etcd cannot have ended L before it); else one read says whether
 * our entry is still there.  If it is not (this process was stopped past
 * L's end, or cut off), our place was given up: we queue again at the back,
 * never taking the key out of turn.
 *
 * LEAVING.  A wait that times out, is cancelled, or fails leaves the queue:
 * one Txn deletes our entry if the entry before ours is still as we knew
 * it; if it changed we may hold the key now, and then we keep it (0, as a
 * free key is acquired even when the cancel flag is set).  If that Txn's
 * answer is lost, L is revoked: our entry goes with it.
 *
 * An fl_cancel's wake fd is polled with the watch: fl_cancel_trigger ends
 * the sleep at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../cancel.h"
#include "etcd.h"

/* The longest a waiter sleeps before it looks at the queue itself, in case
 * a watch event was lost (a member stopped under the watch). */
#define FL__ETCD_SLICE_MS 5000
/* After a watch that could not be set up, or broke: wait this long, then
 * this much more each time (up to the slice), before the next look. */
#define FL__ETCD_BACKOFF_MS 20

/* Sleep on a plain poll of the cancel fd (no watch) for ms. */
static int fl__nap(fl_cancel *c, int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, fd >= 0 ? 1 : 0, ms);
    if (n > 0 && fl__cancel_fd_woke(c, fd))
        return FL__WATCH_FD;
    return FL__WATCH_TIMEOUT;
}

static int fl__deadlk(const char *key)
{
    return fl__fail(-EDEADLK, "etcd: key \"%s\" is held by this thread's own lease: waiting "
                              "would outlast it",
                    key);
}

/* One wait: the call's arguments and what it holds. */
struct fl__waiter {
    struct fl__etcd *e;
    const char *key;
    uint32_t slot;
    struct fl__etcd_keys k;
    uint64_t ttl;                 /* the TTL asked for */
    uint64_t lease, granted;      /* L and its TTL */
    uint64_t until, base;         /* L's end at the earliest, and when it was last renewed */
    char id[FL__ETCD_ID_LEN + 1]; /* our entry */
    struct fl__etcd_place p;      /* where it is */
    /* Whether L may carry an entry of ours that we do not know of (an
     * acquire Txn or a leave whose outcome is unknown): then L is revoked,
     * never given back to the pool; and whether an acquire Txn of ours may
     * still arrive (its answer was lost): then L is revoked when the holding
     * ends (etcd.h, fl__etcd_key.tainted). */
    bool unsure, tainted;
};

/* Renew L: 0, or the request's error; w->until 0 when etcd no longer has it. */
static int fl__renew_mine(struct fl__waiter *w)
{
    uint64_t t = fl__etcd_now_ns(), until = 0;
    int err = fl__etcd_lease_renew(w->e, w->lease, &until);
    if (!err) {
        w->until = until;
        w->base = t;
    }
    return err;
}

/* Put a new entry of ours in the queue (a first one, or again after our
 * place was given up), on L, renewed or replaced first if it may be gone.
 * The entry's ID is one for the whole call: an attempt of an earlier round
 * whose answer was lost is found by its repetition whatever moved since. */
static int fl__queue_up(struct fl__waiter *w, bool try_only)
{
    fl__etcd_new_id(w->e, w->id);
    for (int round = 0;; round++) {
        if (w->until <= fl__etcd_now_ns()) {
            int err = fl__renew_mine(w);
            if (!err && !w->until) {
                /* L ended (and whatever it carried with it): a new one */
                err = fl__etcd_lease_grant(w->e, w->ttl, &w->lease, &w->granted, &w->until);
                w->unsure = false;
            }
            if (err)
                return err;
            w->base = fl__etcd_now_ns();
        }
        int err = fl__etcd_enqueue(w->e, &w->k, w->id, w->lease, try_only, &w->p);
        w->tainted = w->tainted || w->p.ambiguous;
        if (err && err != 1 && err != -EBUSY && err != -EHOSTUNREACH && err != -EACCES)
            w->unsure = true; /* an entry may be on L */
        if (err == 1 && round < 64) {
            /* Our lease ran out before the Txn (this thread was stopped?):
             * the Txn had no effect; a new lease, and again. */
            err = fl__etcd_lease_grant(w->e, w->ttl, &w->lease, &w->granted, &w->until);
            if (err)
                return err;
            w->unsure = w->tainted = false;
            w->base = fl__etcd_now_ns();
            continue;
        }
        if (err == 1)
            return fl__fail(-EAGAIN, "etcd: every lease ran out before its acquire Txn");
        if (!err && w->p.epoch_moved && round < 64)
            continue; /* numbered with the new epoch now */
        if (!err && w->p.epoch_moved)
            return fl__fail(-EAGAIN, "etcd: the epoch kept moving");
        return err;
    }
}

/* We hold the key (w->p.head): record the holding and fill out. */
static int fl__won(struct fl__waiter *w, struct fl__etcd_lease *out)
{
    fl__etcd_set_held(w->e, w->slot, w->p.token, w->id, w->p.pred.state ? w->p.pred.id : "",
                      w->lease, w->ttl, w->until, w->tainted);
    *out = (struct fl__etcd_lease){.token = w->p.token,
                                   .deadline_ns = w->until,
                                   .lease_id = w->lease,
                                   .slot = w->slot,
                                   .flags = w->p.flags};
    return 0;
}

/* Leave the queue (LEAVING) after a wait that ends with err: err, or 0
 * with *out when we turned out to hold the key. */
static int fl__give_up(struct fl__waiter *w, int err, struct fl__etcd_lease *out)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", fl_last_error());
    int r = 0;
    for (int round = 0; w->p.c && round < 8; round++) {
        r = fl__etcd_leave(w->e, &w->k, w->id, &w->p);
        if (r != 2)
            break;
    }
    if (r == 1) {
        fl__set_error("%s", why);
        return fl__won(w, out);
    }
    if (r == 0 && !w->p.c && !w->unsure && !w->tainted)
        fl__etcd_lease_give(w->e, w->lease, w->ttl, w->until); /* it carries nothing now */
    else
        fl__etcd_revoke_later(w->e, w->lease); /* an entry of ours may be on it: it goes too */
    fl__set_error("%s", why);
    return err;
}

int fl__etcd_acquire(struct fl__etcd *e, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                     fl_cancel *cancel, struct fl__etcd_lease *out)
{
    int klen = fl__key_check(key);
    if (klen < 0)
        return klen;
    if (e->h.readonly)
        return fl__fail(-EINVAL, "fl_acquire: read-only region handle");
    if (lease_ns == 0)
        return fl__fail(-EINVAL, "fl_acquire: lease_ns is 0");
    if (timeout_ns < 0 && timeout_ns != FL_WAIT_FOREVER)
        return fl__fail(-EINVAL, "fl_acquire: negative timeout other than FL_WAIT_FOREVER");
    struct fl__waiter w = {.e = e, .key = key};
    int err = fl__etcd_ttl(e, lease_ns, &w.ttl);
    if (err)
        return err;
    err = fl__etcd_intern(e, key, (size_t)klen, &w.slot);
    if (err)
        return err;
    char mine[FL__ETCD_ID_LEN + 1] = "";
    int own = timeout_ns != 0 ? fl__etcd_held_by_me(e, w.slot, mine) : 0;
    if (own == 1)
        return fl__deadlk(key);
    fl__etcd_keys_of(e, key, (size_t)klen, &w.k);
    int cfd = -1;
    if (cancel && timeout_ns != 0) {
        cfd = fl__cancel_wake_fd(cancel);
        if (cfd < 0)
            return cfd;
    }
    uint64_t start = fl__etcd_now_ns();
    uint64_t wait_end = timeout_ns > 0 ? start + (uint64_t)timeout_ns : UINT64_MAX;
    err = fl__etcd_lease_take(e, w.ttl, &w.lease, &w.granted, &w.until);
    if (err)
        return err;
    w.base = start;
    err = fl__queue_up(&w, timeout_ns == 0);
    if (err) {
        if (err == -EBUSY)
            fl__etcd_note_slot(e, w.slot, w.p.holder);
        /* Refused before any effect: the lease carries nothing.  Else an
         * entry may be on it (an answer lost, or one that came from before a
         * restore: -ENOTRECOVERABLE): it goes with the lease. */
        if (!w.unsure && !w.tainted)
            fl__etcd_lease_give(e, w.lease, w.ttl, w.until);
        else
            fl__etcd_revoke_later(e, w.lease);
        return err;
    }
    if (own == 2 && !w.p.head && strcmp(w.p.pred.id, mine) == 0)
        /* Our own holding, whose release had no answer, is still there. */
        return fl__give_up(&w, fl__deadlk(key), out);
    struct fl__etcd_watch *watch = NULL;
    int backoff = FL__ETCD_BACKOFF_MS;
    uint64_t looked = fl__etcd_now_ns();
    for (;;) {
        if (!w.p.c) { /* our place was given up: at the back again */
            fl__etcd_watch_close(watch);
            watch = NULL;
            err = fl__queue_up(&w, false);
            if (err)
                break;
            looked = fl__etcd_now_ns();
            continue;
        }
        if (w.p.head) {
            fl__etcd_watch_close(watch);
            watch = NULL;
            if (fl__etcd_now_ns() < w.until)
                return fl__won(&w, out); /* our entry was alive (WAITING) */
            err = fl__etcd_look(e, &w.k, w.id, w.p.c, true, &w.p); /* is it? */
            if (err)
                break;
            if (w.p.c && w.p.head && (err = fl__renew_mine(&w)) == 0 && w.until)
                return fl__won(&w, out);
            if (err)
                break;
            if (!w.until)
                w.p.c = 0; /* L ended just now: so did our entry */
            continue;
        }
        fl__etcd_note_slot(e, w.slot, w.p.holder);
        if (fl__cancel_is_set(cancel)) {
            err = fl__fail(-ECANCELED, "fl_acquire_cancelable: cancelled while \"%s\" is held",
                           key);
            break;
        }
        uint64_t now = fl__etcd_now_ns();
        if (now >= wait_end) {
            err = fl__fail(-ETIMEDOUT, "etcd: key \"%s\" stayed held (token %" PRIu64 ")", key,
                           w.p.holder);
            break;
        }
        uint64_t renew_at = w.base + w.granted * FL__NS_PER_S / 3;
        if (now >= renew_at) {
            err = fl__renew_mine(&w);
            if (err)
                break;
            if (!w.until) { /* L ended: our entry went with it */
                w.p.c = 0;
                continue;
            }
            renew_at = w.base + w.granted * FL__NS_PER_S / 3;
        }
        /* Sleep: until the entry before ours changes, the wait ends, L is
         * due for renewal, a cancel, or the slice. */
        uint64_t until = wait_end < renew_at ? wait_end : renew_at;
        uint64_t slice_end = looked + (uint64_t)FL__ETCD_SLICE_MS * FL__NS_PER_S / 1000;
        if (until > slice_end)
            until = slice_end;
        uint64_t ms = until > now ? FL__ETCD_CEIL_MS(until - now) : 0;
        if (!watch) {
            char pk[FL__ETCD_KEY_MAX];
            size_t plen = fl__etcd_entry_key(&w.k, w.p.pred.id, pk);
            int werr = fl__etcd_watch_open(&e->c, pk, plen, w.p.revision + 1, &watch);
            if (werr == -EACCES) {
                err = werr;
                break;
            }
        }
        int got = watch ? fl__etcd_watch_wait(watch, cfd, (int)ms) : FL__WATCH_LOST;
        if (got == FL__WATCH_FD && !fl__cancel_fd_woke(cancel, cfd))
            got = FL__WATCH_TIMEOUT; /* a stale wake: look again */
        if (got == FL__WATCH_REFUSED) {
            err = fl__fail(-EACCES, "%s", fl_last_error());
            break;
        }
        if (got == FL__WATCH_FD)
            continue; /* the cancel flag is looked at above */
        if (got == FL__WATCH_PUT) {
            unsigned char v[2] = {0, 0};
            size_t n = fl__etcd_watch_put(watch, v, sizeof v);
            if (n == 2 && (v[0] == 'R' || v[0] == 'D') && v[1] == ' ') {
                /* Its holder ended the holding: ours now (QUEUE). */
                w.p.head = true;
                w.p.flags = v[0] == 'D' ? FL_LEASE_OWNER_DIED : 0;
            }
            continue; /* anything else: not an end */
        }
        if (got == FL__WATCH_DELETED && w.p.pred_is_head) {
            /* The holder's entry is gone unreleased: its lease ended, and
             * the released entry before it is the one our release deletes. */
            w.p.head = true;
            w.p.flags = FL_LEASE_EXPIRED;
            snprintf(w.p.pred.id, sizeof w.p.pred.id, "%s", w.p.pred_pred);
            w.p.pred.state = w.p.pred_pred[0] ? 'R' : 0;
            continue;
        }
        if (got == FL__WATCH_TIMEOUT && fl__etcd_now_ns() < slice_end)
            continue; /* the wait's end or L's renewal: above */
        if (got == FL__WATCH_LOST) {
            /* No alarm clock: nap, a little longer each time, then look. */
            int nap = backoff < (int)ms ? backoff : (int)ms;
            if (fl__nap(cancel, cfd, nap) == FL__WATCH_FD)
                continue;
            if (backoff < FL__ETCD_SLICE_MS)
                backoff *= 2;
        } else
            backoff = FL__ETCD_BACKOFF_MS;
        /* Deleted (a waiter ahead of us gone), compacted, lost, or the
         * slice: where are we? */
        struct fl__etcd_entry was = w.p.pred;
        err = fl__etcd_look(e, &w.k, w.id, w.p.c, true, &w.p);
        if (err)
            break;
        looked = fl__etcd_now_ns();
        if (watch && (w.p.head || !w.p.c || strcmp(was.id, w.p.pred.id) != 0 ||
                      got != FL__WATCH_TIMEOUT)) {
            fl__etcd_watch_close(watch); /* watching another entry, or from a newer revision */
            watch = NULL;
        }
    }
    fl__etcd_watch_close(watch);
    return fl__give_up(&w, err, out);
}
