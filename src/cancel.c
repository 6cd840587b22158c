/* SPDX-License-Identifier: MIT */
/*
 * cancel.c - fl_cancel: a flag a wait checks, and a wake for the wait that
 * sleeps meanwhile (cancel.h says how each backend's wait listens).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cancel.h"
#include "core.h"

int fl_cancel_new(fl_cancel **out)
{
    if (!out)
        return fl__fail(-EINVAL, "fl_cancel_new: NULL argument");
    fl_cancel *c = calloc(1, sizeof *c);
    if (!c)
        return fl__fail(-ENOMEM, "out of memory");
    atomic_init(&c->wake_fd, -1);
    *out = c;
    return 0;
}

void fl_cancel_free(fl_cancel *c)
{
    /* relaxed: no wait and no trigger uses c any more (the contract) */
    int fd = c ? atomic_load_explicit(&c->wake_fd, memory_order_relaxed) : -1;
    if (fd >= 0)
        close(fd);
    free(c);
}

/* Async-signal-safe: atomics, one futex wake and one eventfd write, no
 * lock, no errno left changed. */
void fl_cancel_trigger(fl_cancel *c)
{
    if (!c)
        return;
    atomic_store(&c->cancelled, 1); /* seq_cst: Dekker with the waiter (cancel.h) */
    _Atomic uint32_t *word = atomic_load(&c->sleeping_on);
    if (word) {
        int saved = errno;
        /* Every sleeper of that word wakes, re-examines what it waits for
         * and sleeps again: a cancel costs the word's other sleepers one
         * wakeup. */
        atomic_fetch_add_explicit(word, 1, memory_order_release);
        fl__futex_wake_all(word);
        errno = saved;
    }
    int fd = atomic_load(&c->wake_fd); /* seq_cst: after the flag (cancel.h) */
    if (fd >= 0) {
        int saved = errno;
        uint64_t one = 1;
        if (write(fd, &one, sizeof one) != sizeof one) { /* full counter: already readable */
        }
        errno = saved;
    }
}

void fl_cancel_reset(fl_cancel *c)
{
    if (c) /* relaxed: the caller orders a reset before the next wait itself */
        atomic_store_explicit(&c->cancelled, 0, memory_order_relaxed);
}

int fl_cancel_is_triggered(const fl_cancel *c)
{
    return c && atomic_load((_Atomic uint32_t *)&c->cancelled) ? 1 : 0;
}

int fl__cancel_wake_fd(fl_cancel *c)
{
    int fd = atomic_load(&c->wake_fd);
    if (fd >= 0)
        return fd;
    int mine = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (mine < 0)
        return fl__fail(fl__neg_errno(), "eventfd: %s", strerror(errno));
    int expected = -1;
    /* seq_cst: published before the waiter reads `cancelled` (Dekker with
     * fl_cancel_trigger, which sets it before reading wake_fd) */
    if (!atomic_compare_exchange_strong(&c->wake_fd, &expected, mine)) {
        close(mine);
        return expected;
    }
    return mine;
}

bool fl__cancel_fd_woke(fl_cancel *c, int fd)
{
    if (fl__cancel_is_set(c))
        return true;
    uint64_t v;
    while (read(fd, &v, sizeof v) == sizeof v) {
    }
    if (fl__cancel_is_set(c)) {
        uint64_t one = 1;
        if (write(fd, &one, sizeof one) != sizeof one) { /* counter full: readable */
        }
        return true;
    }
    return false;
}
