/* SPDX-License-Identifier: MIT */
/*
 * lease.c - the etcd leases that queue entries live on, as queue.c, lock.c, wait.c
 * and pool.c use them: the TTL a lease length asks for (whole seconds,
 * raised to etcd's minimum once a grant showed it), and a grant or a
 * keepalive with the time until which etcd keeps the lease at least.  The
 * requests are the client's (reply.c); the handle keeps and reuses its
 * leases (pool.c).
 *
 * THE DEADLINE of a holding is the end of its lease at the earliest: the
 * local CLOCK_MONOTONIC time taken before the grant (or the latest
 * keepalive) was sent, plus the TTL etcd granted.  The lease cannot end at
 * etcd before it, as etcd starts counting later (a leader change only
 * restarts the count).  Clock rate differences between hosts are assumed
 * negligible against a lease of whole seconds.
 */
#include <inttypes.h>
#include <stdio.h>

#include "etcd.h"

int fl__etcd_ttl(struct fl__etcd *e, uint64_t lease_ns, uint64_t *ttl)
{
    uint64_t s = lease_ns / FL__NS_PER_S + (lease_ns % FL__NS_PER_S != 0);
    if (s > FL__ETCD_TTL_MAX)
        return fl__fail(-EOVERFLOW, "etcd: a lease of %" PRIu64 " s is longer than etcd's "
                                    "longest (%llu s)",
                        s, (unsigned long long)FL__ETCD_TTL_MAX);
    /* relaxed: a hint (etcd.h) */
    uint64_t min = atomic_load_explicit(&e->min_ttl, memory_order_relaxed);
    *ttl = s > min ? s : min;
    return 0;
}

static void fl__note_granted(struct fl__etcd *e, uint64_t asked, uint64_t granted)
{
    if (granted > asked) /* etcd raised it to its minimum */
        atomic_store_explicit(&e->min_ttl, granted, memory_order_relaxed);
}

int fl__etcd_lease_grant(struct fl__etcd *e, uint64_t ttl, uint64_t *id, uint64_t *granted,
                         uint64_t *until)
{
    uint64_t base = fl__etcd_now_ns(); /* before the request leaves (THE DEADLINE) */
    int err = fl__etcd_grant(&e->c, ttl, id, granted);
    if (!err) {
        fl__note_granted(e, ttl, *granted);
        *until = base + *granted * FL__NS_PER_S;
    }
    return err;
}

int fl__etcd_lease_renew(struct fl__etcd *e, uint64_t id, uint64_t *until)
{
    uint64_t base = fl__etcd_now_ns(), ttl = 0;
    int err = fl__etcd_keepalive(&e->c, id, &ttl);
    if (!err)
        *until = ttl ? base + ttl * FL__NS_PER_S : 0;
    return err;
}
