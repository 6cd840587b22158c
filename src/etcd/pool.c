/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the etcd leases a handle keeps for reuse, and the thread that
 * keeps them and revokes the ones it gives up.
 *
 * WHY A POOL.  An entry of a key's queue lives on an etcd lease (etcd.h,
 * LAYOUT).  Granting one per acquisition made an acquisition two round
 * trips (grant, then the Txn) and its release two more (the Txn, then a
 * revoke).  A lease whose entry was released carries nothing, so it can
 * carry the next entry: the release gives it back here, and the next
 * acquisition of the same TTL takes it, one round trip in all.  Like etcd's
 * own sessions, but a lease never carries two entries: one holding's end
 * (its lease running out) ends only that holding.
 *
 * KEEPING THEM.  A lease in the pool must still be alive, and fresh, when it
 * is taken: the holding's deadline is the lease's end at the earliest
 * (lease.c).  The thread renews each idle lease once a third of its TTL has
 * passed, so a lease taken has at least about two thirds of its TTL left;
 * one that has less than half left (the thread fell behind) is renewed by
 * the taker first.  A lease idle for FL__ETCD_POOL_IDLE_NS is revoked, not
 * renewed: an idle handle sends nothing.  Each renewal is a request of its
 * own: etcd's JSON gateway answers a streaming request only once the whole
 * body has arrived, so keepalives cannot share one stream as gRPC clients'
 * do (docs/etcd.md).
 *
 * WHAT IF the process stops or dies: pooled leases end at their TTL, with
 * nothing on them.  The thread blocks every signal.  A forked child's
 * handle has no thread (it runs in the parent only): fl__etcd_pool_forget
 * drops the child's copy.  If the thread cannot be started, leases are
 * revoked on the caller's path and nothing is pooled.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd.h"

/* How long a lease may sit unused in the pool before it is revoked. */
#define FL__ETCD_POOL_IDLE_NS (30 * FL__NS_PER_S)

/* When the thread acts on idle lease l: renew once a third of its TTL has
 * passed, or revoke once it has been idle too long. */
static uint64_t fl__due(const struct fl__etcd_pooled *l)
{
    uint64_t ttl_ns = l->ttl * FL__NS_PER_S;
    uint64_t renew = l->until > ttl_ns / 3 * 2 ? l->until - ttl_ns / 3 * 2 : 0;
    uint64_t drop = l->used + FL__ETCD_POOL_IDLE_NS;
    return renew < drop ? renew : drop;
}

static void fl__remove_locked(struct fl__etcd_pool *p, unsigned i)
{
    p->idle[i] = p->idle[--p->n];
}

/* Queue id for revocation (under p->mu): false when out of memory. */
static bool fl__queue_revoke_locked(struct fl__etcd_pool *p, uint64_t id)
{
    if (p->nrev == p->caprev) {
        size_t cap = p->caprev ? 2 * p->caprev : 16;
        uint64_t *ids = realloc(p->revoke, cap * sizeof *ids);
        if (!ids)
            return false;
        p->revoke = ids;
        p->caprev = cap;
    }
    p->revoke[p->nrev++] = id;
    return true;
}

static void fl__revoke_now(struct fl__etcd *e, uint64_t id)
{
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", fl_last_error());
    (void)fl__etcd_revoke(&e->c, id); /* failed: the lease ends at its TTL */
    fl__set_error("%s", saved);
}

static void *fl__pool_main(void *arg)
{
    struct fl__etcd *e = arg;
    struct fl__etcd_pool *p = &e->pool;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->nrev) {
            uint64_t id = p->revoke[0];
            memmove(p->revoke, p->revoke + 1, (p->nrev - 1) * sizeof *p->revoke);
            p->nrev--;
            pthread_mutex_unlock(&p->mu);
            (void)fl__etcd_revoke(&e->c, id);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        if (p->stop) {
            if (!p->n)
                break;
            uint64_t id = p->idle[p->n - 1].id;
            p->n--;
            pthread_mutex_unlock(&p->mu);
            (void)fl__etcd_revoke(&e->c, id);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        uint64_t now = fl__etcd_now_ns(), next = UINT64_MAX;
        unsigned due = p->n;
        for (unsigned i = 0; i < p->n; i++) {
            if (p->idle[i].renewing)
                continue;
            uint64_t d = fl__due(&p->idle[i]);
            if (d < next) {
                next = d;
                due = i;
            }
        }
        if (due < p->n && next <= now) {
            /* It stays in the pool while its request runs (a taker meanwhile
             * takes it as it is: alive until its `until`); renewing marks it
             * so that it is not picked again, and the answer applies only if
             * nobody took it. */
            struct fl__etcd_pooled l = p->idle[due];
            bool keep = now < l.used + FL__ETCD_POOL_IDLE_NS;
            if (!keep)
                fl__remove_locked(p, due);
            else
                p->idle[due].renewing = true;
            pthread_mutex_unlock(&p->mu);
            uint64_t until = 0;
            if (keep && fl__etcd_lease_renew(e, l.id, &until) == 0 && until) {
                pthread_mutex_lock(&p->mu);
                for (unsigned i = 0; i < p->n; i++)
                    if (p->idle[i].id == l.id) {
                        p->idle[i].until = until;
                        p->idle[i].renewing = false;
                    }
                continue;
            }
            /* Idle too long (out of the pool already), or not renewed: it
             * goes, unless a taker has it now (then it is the taker's, alive
             * until its `until`). */
            pthread_mutex_lock(&p->mu);
            bool mine = !keep;
            for (unsigned i = 0; !mine && i < p->n; i++)
                if (p->idle[i].id == l.id) {
                    fl__remove_locked(p, i);
                    mine = true;
                }
            pthread_mutex_unlock(&p->mu);
            if (mine)
                (void)fl__etcd_revoke(&e->c, l.id);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        if (next == UINT64_MAX) {
            pthread_cond_wait(&p->cv, &p->mu);
        } else {
            struct timespec ts = {.tv_sec = (time_t)(next / FL__NS_PER_S),
                                  .tv_nsec = (long)(next % FL__NS_PER_S)};
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void fl__etcd_pool_init(struct fl__etcd *e)
{
    struct fl__etcd_pool *p = &e->pool;
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the clock of fl__etcd_now_ns */
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* Start the thread (under p->mu) with every signal blocked; false if it
 * cannot start. */
static bool fl__started_locked(struct fl__etcd *e)
{
    struct fl__etcd_pool *p = &e->pool;
    if (p->started)
        return true;
    if (p->stop)
        return false;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    p->started = pthread_create(&p->thread, NULL, fl__pool_main, e) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return p->started;
}

int fl__etcd_lease_take(struct fl__etcd *e, uint64_t ttl, uint64_t *id, uint64_t *granted,
                        uint64_t *until)
{
    struct fl__etcd_pool *p = &e->pool;
    struct fl__etcd_pooled l = {0};
    pthread_mutex_lock(&p->mu);
    unsigned best = p->n;
    for (unsigned i = 0; i < p->n; i++)
        if (p->idle[i].ttl == ttl && (best == p->n || p->idle[i].until > p->idle[best].until))
            best = i;
    if (best < p->n) {
        l = p->idle[best];
        fl__remove_locked(p, best);
    }
    pthread_mutex_unlock(&p->mu);
    if (l.id) {
        uint64_t now = fl__etcd_now_ns();
        if (l.until > now && l.until - now >= ttl * FL__NS_PER_S / 2) {
            *id = l.id;
            *granted = ttl;
            *until = l.until;
            return 0;
        }
        /* The thread fell behind (or the process was stopped): renew it
         * first; a lease etcd no longer has is replaced. */
        uint64_t u = 0;
        int err = fl__etcd_lease_renew(e, l.id, &u);
        if (err) {
            fl__etcd_lease_give(e, l.id, ttl, l.until);
            return err;
        }
        if (u) {
            *id = l.id;
            *granted = ttl;
            *until = u;
            return 0;
        }
    }
    return fl__etcd_lease_grant(e, ttl, id, granted, until);
}

void fl__etcd_lease_give(struct fl__etcd *e, uint64_t id, uint64_t ttl, uint64_t until)
{
    if (!id)
        return;
    struct fl__etcd_pool *p = &e->pool;
    uint64_t evict = 0;
    pthread_mutex_lock(&p->mu);
    bool pooled = false;
    for (unsigned i = 0; i < p->n; i++)
        if (p->idle[i].id == id) { /* given back twice: once is enough */
            pthread_mutex_unlock(&p->mu);
            return;
        }
    if (fl__started_locked(e)) {
        if (p->n == FL__ETCD_POOL_MAX) { /* the least recently used goes */
            unsigned lru = 0;
            for (unsigned i = 1; i < p->n; i++)
                if (p->idle[i].used < p->idle[lru].used)
                    lru = i;
            evict = p->idle[lru].id;
            fl__remove_locked(p, lru);
            if (fl__queue_revoke_locked(p, evict))
                evict = 0;
        }
        p->idle[p->n++] = (struct fl__etcd_pooled){
            .id = id, .ttl = ttl, .until = until, .used = fl__etcd_now_ns()};
        pooled = true;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    if (evict)
        fl__revoke_now(e, evict);
    if (!pooled)
        fl__revoke_now(e, id); /* no thread to keep it alive */
}

void fl__etcd_revoke_later(struct fl__etcd *e, uint64_t id)
{
    if (!id)
        return;
    struct fl__etcd_pool *p = &e->pool;
    pthread_mutex_lock(&p->mu);
    bool queued = fl__started_locked(e) && fl__queue_revoke_locked(p, id);
    if (queued)
        pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (!queued) /* no thread or no memory: revoke it here */
        fl__revoke_now(e, id);
}

void fl__etcd_pool_stop(struct fl__etcd *e)
{
    struct fl__etcd_pool *p = &e->pool;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    bool started = p->started;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (started)
        pthread_join(p->thread, NULL); /* it revokes what is queued and pooled first */
    free(p->revoke);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

void fl__etcd_pool_forget(struct fl__etcd *e)
{
    /* a forked child: the thread and the leases are the parent's.  The
     * mutex may have been held at the fork: not destroyed. */
    free(e->pool.revoke);
    e->pool.revoke = NULL;
    e->pool.n = 0;
    e->pool.started = false;
}
