/* SPDX-License-Identifier: MIT */
/*
 * wait.c - fl_acquire on etcd: its arguments, the lease a waiter keeps, and
 * the waiting between acquire Txns (lock.c, ACQUIRE, sends each of them).
 *
 * WAITING.  A waiter keeps its lease L (renewed each time it wakes, or
 * granted again when it ran out) and sleeps on a watch of lock/KEY's
 * deletion from the revision after the failed Txn (watch.c): a release
 * deletes the key, and so does etcd when the holder's lease ends.  Every
 * waiter wakes (as on shared memory) and sends the Txn again.  The watch is
 * an alarm clock only: the sleep also ends after a third of L's TTL (to
 * renew L) and at most every FL__ETCD_SLICE_MS, and the Txn decides.  An
 * fl_cancel's wake fd is polled with the watch: fl_cancel_trigger ends the
 * sleep at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../cancel.h"
#include "etcd.h"

/* The longest a waiter sleeps before it looks at the key itself, in case a
 * watch event was lost (a member stopped under the watch). */
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
    uint64_t ttl;
    int err = fl__etcd_ttl(e, lease_ns, &ttl);
    if (err)
        return err;
    uint32_t slot;
    err = fl__etcd_intern(e, key, (size_t)klen, &slot);
    if (err)
        return err;
    struct fl__etcd_keys k;
    fl__etcd_keys_of(e, key, (size_t)klen, &k);
    int cfd = -1;
    if (cancel && timeout_ns != 0) {
        cfd = fl__cancel_wake_fd(cancel);
        if (cfd < 0)
            return cfd;
    }
    uint64_t start = fl__etcd_now_ns();
    uint64_t wait_end = timeout_ns > 0 ? start + (uint64_t)timeout_ns : UINT64_MAX;
    uint64_t lease = 0, granted = 0, base = 0;
    err = fl__etcd_lease_grant(e, ttl, &lease, &granted, &base);
    if (err)
        return err;
    int backoff = FL__ETCD_BACKOFF_MS;
    for (int round = 0;; round++) {
        struct fl__etcd_try t;
        err = fl__etcd_acquire_txn(e, &k, lease, &t);
        if (err == 1 && round < 64) {
            /* Our lease ran out before the Txn (this thread was stopped?):
             * the Txn had no effect; a new lease, and again. */
            err = fl__etcd_lease_grant(e, ttl, &lease, &granted, &base);
            if (err)
                return err;
            continue;
        }
        if (err == 1)
            err = fl__fail(-EAGAIN, "etcd: every lease ran out before its acquire Txn");
        if (err)
            break;
        if (t.epoch_moved && round < 64)
            continue; /* numbered with the new epoch now */
        if (!t.won && t.holder_lease == lease && t.token) {
            /* An earlier attempt of ours took effect and its answer was
             * lost: that holding is ours.  (Its flags went with the answer.) */
            t.won = true;
        }
        if (t.won) {
            fl__etcd_set_held(e, slot, t.token, lease);
            *out = (struct fl__etcd_lease){.token = t.token,
                                           .deadline_ns = base + granted * FL__NS_PER_S,
                                           .lease_id = lease,
                                           .slot = slot,
                                           .flags = t.flags};
            return 0;
        }
        fl__etcd_note_slot(e, slot, t.token);
        if (timeout_ns == 0) {
            err = fl__fail(-EBUSY, "etcd: key \"%s\" is held (token %" PRIu64 ")", key, t.token);
            break;
        }
        pthread_mutex_lock(&e->lock);
        bool own = e->keys[slot]->held_token == t.token &&
                   e->keys[slot]->held_tid == fl__etcd_tid();
        pthread_mutex_unlock(&e->lock);
        if (own) {
            err = fl__fail(-EDEADLK, "etcd: key \"%s\" is held by this thread's own lease "
                                     "(token %" PRIu64 "): waiting would outlast it",
                           key, t.token);
            break;
        }
        if (fl__cancel_is_set(cancel)) {
            err = fl__fail(-ECANCELED, "fl_acquire_cancelable: cancelled while \"%s\" is held",
                           key);
            break;
        }
        uint64_t now = fl__etcd_now_ns();
        if (now >= wait_end) {
            err = fl__fail(-ETIMEDOUT, "etcd: key \"%s\" stayed held (token %" PRIu64 ")", key,
                           t.token);
            break;
        }
        /* Sleep: until the key is deleted, the wait ends, a third of our
         * lease has passed (to renew it), a cancel, or the slice. */
        uint64_t ms = FL__ETCD_CEIL_MS(wait_end - now);
        uint64_t renew_ms = granted * FL__ETCD_MS_PER_S / 3;
        if (ms > renew_ms)
            ms = renew_ms;
        if (ms > FL__ETCD_SLICE_MS)
            ms = FL__ETCD_SLICE_MS;
        struct fl__etcd_watch *w = NULL;
        int got;
        int werr = fl__etcd_watch_open(&e->c, k.lock, k.lock_len, t.revision + 1, &w);
        if (werr == 0) {
            got = fl__etcd_watch_wait(w, cfd, (int)ms);
            fl__etcd_watch_close(w);
        } else if (werr == -EACCES) {
            err = werr;
            break;
        } else
            got = FL__WATCH_LOST;
        if (got == FL__WATCH_FD && !fl__cancel_fd_woke(cancel, cfd))
            got = FL__WATCH_TIMEOUT; /* a stale wake: look again */
        if (got == FL__WATCH_REFUSED) {
            err = fl__fail(-EACCES, "%s", fl_last_error());
            break;
        }
        if (got == FL__WATCH_LOST) {
            /* No alarm clock: nap, a little longer each time. */
            uint64_t nap = (uint64_t)backoff < ms ? (uint64_t)backoff : ms;
            got = fl__nap(cancel, cfd, (int)nap);
            if (backoff < FL__ETCD_SLICE_MS)
                backoff *= 2;
        } else if (got == FL__WATCH_DELETED)
            backoff = FL__ETCD_BACKOFF_MS;
        if (got == FL__WATCH_FD) {
            err = fl__fail(-ECANCELED, "fl_acquire_cancelable: cancelled while \"%s\" is held",
                           key);
            break;
        }
        /* Keep our lease for the next Txn: renewed from now, or a new one. */
        if (fl__etcd_now_ns() - base >= granted * FL__NS_PER_S / 3) {
            uint64_t t1 = fl__etcd_now_ns(), left = 0;
            err = fl__etcd_keepalive(&e->c, lease, &left);
            if (err)
                break;
            if (left) {
                base = t1;
                granted = left;
            } else {
                err = fl__etcd_lease_grant(e, ttl, &lease, &granted, &base);
                if (err)
                    return err;
            }
        }
    }
    fl__etcd_lease_drop(e, lease);
    return err;
}
