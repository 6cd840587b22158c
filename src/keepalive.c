/* SPDX-License-Identifier: MIT */
/*
 * keepalive.c - keeping leases renewed from a background thread, and telling
 * the application when one is lost.
 *
 * One keeper thread per region handle, started with the first keepalive,
 * renews every kept lease a third of its lease length before it would end.
 * Application threads add and remove leases while the keeper walks them: the
 * set is an RCU-protected list (liburcu, membarrier flavour), so the keeper
 * never takes a lock that an application thread holds and vice versa; an
 * entry is freed only after a grace period, when the keeper can no longer be
 * looking at it.  RCU is per process: nothing here is in the shared region.
 *
 * Loss is reported three ways, for three kinds of program: fl_keepalive_fd()
 * (an eventfd that becomes readable: poll/epoll loops), the on_lost callback
 * (called on the keeper thread), and fl_keepalive_status().
 *
 * on_lost runs outside the read section: the walk only claims the loss and
 * pins the entry (reporting, under the lock); the callbacks run after
 * urcu_memb_read_unlock().  A callback may therefore call anything a thread
 * of the program may, fl_keepalive_stop() of any keepalive (its own
 * included) and fl_close() too: inside a read section, the grace period that
 * stop waits for would wait for the keeper itself, and every lease of the
 * process would stop being renewed (issue 26).  A pinned entry is freed by
 * whoever unpins it last: stop from another thread waits for the report to
 * end; stop from the callback (the keeper's own thread) leaves the entry to
 * the keeper, which frees it once the callback returns.
 *
 * A process stopped past its lease (SIGSTOP, the case fencing exists for)
 * stops its keeper too: when it resumes, the keeper's renewal fails with
 * -ESTALE and the loss is reported, never hidden.
 */
#define _LGPL_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <urcu/rculist.h>
#include <urcu/urcu-memb.h>

#include "core.h"

struct fl_keepalive {
    struct cds_list_head node; /* in keeper->leases, RCU-protected */
    fl_region *r;
    uint64_t token;
    uint32_t slot;
    uint32_t flags;
    uint64_t lease_ns;
    _Atomic uint64_t deadline_ns; /* latest deadline the keeper obtained */
    _Atomic uint64_t handle;      /* the lease's backend handle (etcd: a renew may move it) */
    _Atomic int lost;             /* 0, or the error that ended the lease */
    int efd;
    fl_lost_fn on_lost;
    void *arg;
    /* Under keeper->lock.  reporting: the keeper will call (or is calling)
     * on_lost, outside its read section, so k must stay.  detached: stopped;
     * no callback starts after this.  keeper_frees: stopped from the keeper's
     * own thread while pinned: the keeper frees k when the report ends. */
    bool reporting, detached, keeper_frees;
    struct fl_keepalive *report_next; /* the keeper's list of losses to report */
};

struct fl__keeper {
    fl_region *r; /* set before the thread starts; never read once orphaned */
    pthread_t thread;
    pthread_mutex_t lock; /* serializes writers of the list; the keeper never takes it to read */
    pthread_cond_t wake;  /* a lease was added, or stop */
    pthread_cond_t reported; /* a report ended (an entry was unpinned) */
    struct cds_list_head leases;
    bool stop;
    /* fl_close() was called on the keeper's own thread (from on_lost): the
     * thread is detached and frees this keeper itself once the callback
     * returns, never touching the region again. */
    bool orphaned;
    uint64_t generation; /* bumped on every add, under lock */
};

static uint64_t fl__renew_at(const struct fl_keepalive *k)
{
    /* renew when two thirds of the lease are left... a third has passed */
    uint64_t d = atomic_load_explicit(&k->deadline_ns, memory_order_relaxed);
    uint64_t margin = k->lease_ns / 3 * 2;
    return d > margin ? d - margin : 0;
}

/* Claims k's loss (once) and pins k for the report, which happens after
 * the read section.  Called inside it, where k cannot be freed; the lock is
 * never held across a grace period, so taking it here cannot deadlock. */
static void fl__claim_loss(struct fl__keeper *kp, struct fl_keepalive *k, int err,
                           struct fl_keepalive **pending)
{
    int expected = 0;
    /* relaxed: the eventfd write and the callback are the synchronization the
     * application sees; the flag only makes the report happen once */
    if (!atomic_compare_exchange_strong_explicit(&k->lost, &expected, err, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    pthread_mutex_lock(&kp->lock);
    if (!k->detached) { /* a stopped entry's loss is its stop's return value */
        k->reporting = true;
        k->report_next = *pending;
        *pending = k;
    }
    pthread_mutex_unlock(&kp->lock);
}

static void fl__keepalive_free(struct fl_keepalive *k)
{
    close(k->efd);
    free(k);
}

/* Reports the claimed losses, outside the read section, and unpins them. */
static void fl__report_losses(struct fl__keeper *kp, struct fl_keepalive *pending)
{
    while (pending) {
        struct fl_keepalive *k = pending;
        pending = k->report_next;
        pthread_mutex_lock(&kp->lock);
        bool skip = k->detached || kp->orphaned;
        pthread_mutex_unlock(&kp->lock);
        if (!skip) {
            /* The callback first: an application woken by the fd may then
             * rely on whatever the callback recorded. */
            if (k->on_lost) {
                fl_lease l = {.token = k->token,
                              .deadline_ns = atomic_load_explicit(&k->deadline_ns,
                                                                  memory_order_relaxed),
                              .slot = k->slot,
                              .flags = k->flags,
                              .handle = atomic_load_explicit(&k->handle, memory_order_relaxed),
                              .region = k->r->key_cookie};
                k->on_lost(k->arg, &l, atomic_load_explicit(&k->lost, memory_order_relaxed));
            }
            uint64_t one = 1;
            if (write(k->efd, &one, sizeof one) != sizeof one) { /* cannot fail on an eventfd */
            }
        }
        pthread_mutex_lock(&kp->lock);
        k->reporting = false;
        bool free_now = k->keeper_frees;
        pthread_cond_broadcast(&kp->reported);
        pthread_mutex_unlock(&kp->lock);
        /* Stopped by its own (or another) callback: out of the list already,
         * and this thread is the list's only reader, so no grace period. */
        if (free_now)
            fl__keepalive_free(k);
    }
}

static void fl__keeper_free(struct fl__keeper *kp)
{
    struct fl_keepalive *k, *tmp;
    /* Leases still kept are the caller's leak to fix; free them anyway. */
    cds_list_for_each_entry_safe(k, tmp, &kp->leases, node) {
        fl__keepalive_free(k);
    }
    pthread_cond_destroy(&kp->reported);
    pthread_cond_destroy(&kp->wake);
    pthread_mutex_destroy(&kp->lock);
    free(kp);
}

static void *fl__keeper_main(void *arg)
{
    /* kp, not r->keeper: fl_close() may clear that before this thread runs */
    struct fl__keeper *kp = arg;
    fl_region *r = kp->r;
    urcu_memb_register_thread();
    pthread_mutex_lock(&kp->lock);
    while (!kp->stop) {
        uint64_t seen = kp->generation;
        pthread_mutex_unlock(&kp->lock);
        /* the process's CLOCK_MONOTONIC: what every backend's deadline_ns is in */
        uint64_t now = fl__monotonic_ns(NULL), next = now + FL__NS_PER_S; /* idle: 1 s */
        struct fl_keepalive *pending = NULL;
        urcu_memb_read_lock();
        struct fl_keepalive *k;
        cds_list_for_each_entry_rcu(k, &kp->leases, node) {
            if (atomic_load_explicit(&k->lost, memory_order_relaxed))
                continue;
            uint64_t due = fl__renew_at(k);
            if (due <= now) {
                fl_lease l = {.token = k->token,
                              .deadline_ns = atomic_load_explicit(&k->deadline_ns,
                                                                  memory_order_relaxed),
                              .slot = k->slot,
                              .handle = atomic_load_explicit(&k->handle,
                                                             memory_order_relaxed),
                              .region = r->key_cookie};
                int err = fl_renew(r, &l, k->lease_ns);
                if (err) {
                    fl__claim_loss(kp, k, err, &pending);
                    continue;
                }
                atomic_store_explicit(&k->deadline_ns, l.deadline_ns, memory_order_relaxed);
                atomic_store_explicit(&k->handle, l.handle, memory_order_relaxed);
                due = fl__renew_at(k);
            }
            if (due < next)
                next = due;
        }
        urcu_memb_read_unlock();
        /* After a callback r may be closed (kp->orphaned): only kp from here. */
        fl__report_losses(kp, pending);
        pthread_mutex_lock(&kp->lock);
        if (kp->stop || kp->generation != seen || pending)
            continue; /* a lease was added, or a callback ran, while we walked: walk again */
        struct timespec ts = {.tv_sec = (time_t)(next / FL__NS_PER_S),
                              .tv_nsec = (long)(next % FL__NS_PER_S)};
        /* The condvar runs on CLOCK_MONOTONIC (see fl__keeper_get), the
         * clock of lease deadlines. */
        pthread_cond_timedwait(&kp->wake, &kp->lock, &ts);
    }
    bool orphaned = kp->orphaned;
    pthread_mutex_unlock(&kp->lock);
    urcu_memb_unregister_thread();
    if (orphaned)
        fl__keeper_free(kp);
    return NULL;
}

/* The handle's keeper, started on first use. */
static int fl__keeper_get(fl_region *r, struct fl__keeper **out)
{
    pthread_mutex_lock(&r->keeper_lock);
    int err = 0;
    if (!r->keeper) {
        struct fl__keeper *kp = calloc(1, sizeof *kp);
        if (!kp) {
            err = -ENOMEM;
            goto out;
        }
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&kp->wake, &ca);
        pthread_condattr_destroy(&ca);
        pthread_cond_init(&kp->reported, NULL);
        pthread_mutex_init(&kp->lock, NULL);
        CDS_INIT_LIST_HEAD(&kp->leases);
        kp->r = r;
        r->keeper = kp;
        int rc = pthread_create(&kp->thread, NULL, fl__keeper_main, kp);
        if (rc) {
            r->keeper = NULL;
            pthread_cond_destroy(&kp->reported);
            pthread_cond_destroy(&kp->wake);
            pthread_mutex_destroy(&kp->lock);
            free(kp);
            err = rc > 0 ? -rc : -EAGAIN;
            goto out;
        }
    }
    *out = r->keeper;
out:
    pthread_mutex_unlock(&r->keeper_lock);
    return err;
}

int fl_keepalive_start(fl_region *r, const fl_lease *lease, uint64_t lease_ns, fl_lost_fn on_lost,
                       void *arg, fl_keepalive **out)
{
    if (!r || !lease || !out)
        return fl__fail(-EINVAL, "fl_keepalive_start: NULL argument");
    if (r->readonly)
        return fl__fail(-EINVAL, "fl_keepalive_start: read-only region handle");
    if (lease_ns < 3000)
        return fl__fail(-EINVAL, "fl_keepalive_start: lease_ns must be at least 3 us");
    int err = fl_check(r, lease);
    if (err)
        return err;
    struct fl_keepalive *k = calloc(1, sizeof *k);
    if (!k)
        return fl__fail(-ENOMEM, "out of memory");
    k->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (k->efd < 0) {
        err = fl__fail(fl__neg_errno(), "eventfd: %s", strerror(errno));
        free(k);
        return err;
    }
    k->r = r;
    k->token = lease->token;
    k->slot = lease->slot;
    k->flags = lease->flags;
    k->lease_ns = lease_ns;
    atomic_init(&k->deadline_ns, lease->deadline_ns);
    atomic_init(&k->handle, lease->handle);
    atomic_init(&k->lost, 0);
    k->on_lost = on_lost;
    k->arg = arg;
    struct fl__keeper *kp = NULL;
    err = fl__keeper_get(r, &kp);
    if (err) {
        close(k->efd);
        free(k);
        return fl__fail(err, "cannot start the keepalive thread");
    }
    /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): kp is set when err is 0 */
    pthread_mutex_lock(&kp->lock);
    cds_list_add_rcu(&k->node, &kp->leases);
    kp->generation++;
    pthread_cond_signal(&kp->wake);
    pthread_mutex_unlock(&kp->lock);
    *out = k;
    return 0;
}

int fl_keepalive_fd(const fl_keepalive *k) { return k ? k->efd : -EINVAL; }

int fl_keepalive_status(const fl_keepalive *k, fl_lease *lease)
{
    if (!k)
        return fl__fail(-EINVAL, "fl_keepalive_status: NULL argument");
    if (lease) {
        lease->token = k->token;
        lease->deadline_ns = atomic_load_explicit(&k->deadline_ns, memory_order_relaxed);
        lease->slot = k->slot;
        lease->flags = k->flags;
        lease->handle = atomic_load_explicit(&k->handle, memory_order_relaxed);
        lease->region = k->r->key_cookie;
    }
    int lost = atomic_load_explicit(&k->lost, memory_order_relaxed);
    return lost ? fl__fail(lost, "the kept-alive lease was lost") : 0;
}

int fl_keepalive_stop(fl_keepalive *k, fl_lease *lease)
{
    if (!k)
        return fl__fail(-EINVAL, "fl_keepalive_stop: NULL argument");
    struct fl__keeper *kp = k->r->keeper;
    pthread_mutex_lock(&kp->lock);
    cds_list_del_rcu(&k->node);
    k->detached = true;
    if (k->reporting && pthread_equal(pthread_self(), kp->thread)) {
        /* From a callback (k's own, or another's while k waits for its
         * report): the keeper frees k once that report ends. */
        k->keeper_frees = true;
        pthread_mutex_unlock(&kp->lock);
        return fl_keepalive_status(k, lease);
    }
    while (k->reporting) /* its callback runs now: stop returns after it */
        pthread_cond_wait(&kp->reported, &kp->lock);
    pthread_mutex_unlock(&kp->lock);
    /* After the grace period the keeper is no longer looking at k.  (On the
     * keeper's own thread this is outside its read section, as it must be.) */
    urcu_memb_synchronize_rcu();
    int err = fl_keepalive_status(k, lease);
    fl__keepalive_free(k);
    return err;
}

void fl__keepalive_shutdown(fl_region *r)
{
    struct fl__keeper *kp = r->keeper;
    if (!kp)
        return;
    r->keeper = NULL;
    pthread_mutex_lock(&kp->lock);
    kp->stop = true;
    if (pthread_equal(pthread_self(), kp->thread)) {
        /* fl_close() from on_lost: a thread cannot join itself.  It finishes
         * the callback, sees orphaned, and frees the keeper on its way out. */
        kp->orphaned = true;
        pthread_mutex_unlock(&kp->lock);
        pthread_detach(kp->thread);
        return;
    }
    pthread_cond_signal(&kp->wake);
    pthread_mutex_unlock(&kp->lock);
    pthread_join(kp->thread, NULL);
    fl__keeper_free(kp);
}
