/* SPDX-License-Identifier: MIT */
/*
 * revoker.c - the etcd leases of released holdings, revoked off the
 * caller's path.
 *
 * fl_release on etcd is over when its Txn has deleted the lock key and
 * written the "released" marker: that one round trip is what makes the key
 * free, and the release's answer says so.  The holding's etcd lease then
 * carries nothing (each acquisition has a lease of its own), and revoking it
 * only spares etcd a lease that would otherwise end by itself at its TTL.
 * Waiting for that second round trip doubled the cost of a release, so the
 * handle's revoker thread does it: started on the first release, it revokes
 * the queued leases in order, and fl_close drains the queue and joins it.
 *
 * What if the process stops or dies with leases queued: they end at their
 * TTL, as any lease of a dead client does; no key is attached to them.  If
 * the thread cannot be started, the release revokes the lease itself, as
 * before.  The thread blocks every signal (the application's handlers never
 * run on it).  A forked child's handle has no revoker (the thread exists in
 * the parent only): fl__etcd_revoker_forget drops the child's copy.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

static void *fl__revoker_main(void *arg)
{
    struct fl__etcd *e = arg;
    struct fl__etcd_revoker *v = &e->revoker;
    pthread_mutex_lock(&v->mu);
    for (;;) {
        while (v->n == 0 && !v->stop)
            pthread_cond_wait(&v->cv, &v->mu);
        if (v->n == 0)
            break; /* stop, and nothing left */
        uint64_t id = v->ids[0];
        memmove(v->ids, v->ids + 1, (v->n - 1) * sizeof *v->ids);
        v->n--;
        pthread_mutex_unlock(&v->mu);
        (void)fl__etcd_revoke(&e->c, id); /* failed: the lease ends at its TTL */
        pthread_mutex_lock(&v->mu);
    }
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

void fl__etcd_revoker_init(struct fl__etcd *e)
{
    struct fl__etcd_revoker *v = &e->revoker;
    memset(v, 0, sizeof *v);
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cv, NULL);
}

/* Start the thread with every signal blocked; false if it cannot start. */
static bool fl__revoker_start(struct fl__etcd *e)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&e->revoker.thread, NULL, fl__revoker_main, e);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err == 0;
}

void fl__etcd_revoke_later(struct fl__etcd *e, uint64_t id)
{
    if (!id)
        return;
    struct fl__etcd_revoker *v = &e->revoker;
    pthread_mutex_lock(&v->mu);
    bool queued = false;
    if (!v->stop && (v->started || (v->started = fl__revoker_start(e)))) {
        if (v->n == v->cap) {
            size_t cap = v->cap ? 2 * v->cap : 16;
            uint64_t *ids = realloc(v->ids, cap * sizeof *ids);
            if (ids) {
                v->ids = ids;
                v->cap = cap;
            }
        }
        if (v->n < v->cap) {
            v->ids[v->n++] = id;
            pthread_cond_signal(&v->cv);
            queued = true;
        }
    }
    pthread_mutex_unlock(&v->mu);
    if (!queued) { /* no thread or no memory: revoke it here, as before */
        char saved[1024];
        snprintf(saved, sizeof saved, "%s", fl_last_error());
        (void)fl__etcd_revoke(&e->c, id);
        fl__set_error("%s", saved);
    }
}

void fl__etcd_revoker_stop(struct fl__etcd *e)
{
    struct fl__etcd_revoker *v = &e->revoker;
    pthread_mutex_lock(&v->mu);
    v->stop = true;
    bool started = v->started;
    pthread_cond_signal(&v->cv);
    pthread_mutex_unlock(&v->mu);
    if (started)
        pthread_join(v->thread, NULL); /* it revokes what is queued first */
    free(v->ids);
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
}

void fl__etcd_revoker_forget(struct fl__etcd *e)
{
    /* a forked child: the thread is the parent's; its queue is the parent's
     * to revoke.  The mutex may have been held at the fork: not destroyed. */
    free(e->revoker.ids);
    e->revoker.ids = NULL;
    e->revoker.started = false;
}
