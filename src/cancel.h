/* SPDX-License-Identifier: MIT */
/*
 * cancel.h - how a backend's wait listens to an fl_cancel (cancel.c).  Not
 * installed.
 *
 * The cancel object owns both ways a wait may sleep, and knows no backend:
 *   - a futex word the waiter names while it sleeps on it
 *     (fl__cancel_sleep_on): the trigger bumps and wakes that word, so a
 *     futex sleep returns at once (the shared-memory backend, shm/slot.c);
 *   - an eventfd the waiter polls beside its own descriptors
 *     (fl__cancel_wake_fd): the trigger makes it readable (the etcd
 *     backend's watches, etcd/lock.c).
 * Either way the waiter publishes first and reads the flag after, the
 * trigger sets the flag first and looks for the published word or fd
 * after, all seq_cst: either the waiter sees the flag before it sleeps or
 * the trigger sees what to wake (a Dekker pair).
 */
#ifndef FL_CANCEL_H
#define FL_CANCEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fencelock.h"

struct fl_cancel {
    _Atomic uint32_t cancelled;
    /* The futex word the waiter sleeps on, while it waits; NULL otherwise. */
    _Atomic(_Atomic uint32_t *) sleeping_on;
    /* The eventfd waits poll, made on first use (fl__cancel_wake_fd), -1 =
     * none; closed by fl_cancel_free. */
    _Atomic int wake_fd;
};

/* Whether c (may be NULL) was triggered.  seq_cst: the read after the
 * publication of the Dekker pair above. */
static inline bool fl__cancel_is_set(fl_cancel *c) { return c && atomic_load(&c->cancelled); }

/* The waiter is about to sleep on word: a trigger from now on bumps and
 * wakes it.  seq_cst: before the waiter's read of the flag. */
static inline void fl__cancel_sleep_on(fl_cancel *c, _Atomic uint32_t *word)
{
    atomic_store(&c->sleeping_on, word);
}

/* The waiter no longer sleeps on its word.  relaxed: a trigger that still
 * sees the word only wakes its sleepers for nothing (they look again). */
static inline void fl__cancel_sleep_done(fl_cancel *c)
{
    atomic_store_explicit(&c->sleeping_on, NULL, memory_order_relaxed);
}

/* The eventfd to poll for c's trigger (readable once triggered), made on
 * first use and kept until fl_cancel_free: the fd, or a negative errno
 * (fl_last_error() says why). */
int fl__cancel_wake_fd(fl_cancel *c);

/* The wake fd fd polled readable: true if c is triggered.  A readable fd
 * whose trigger was since reset is drained and answers false; if a trigger
 * came meanwhile, the fd is made readable again for the other waiters. */
bool fl__cancel_fd_woke(fl_cancel *c, int fd);

#endif /* FL_CANCEL_H */
