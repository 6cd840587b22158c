/* SPDX-License-Identifier: MIT */
/*
 * lease.c - the etcd leases that holdings live on, as lock.c and wait.c
 * use them: the TTL a lease length asks for (whole seconds, raised to
 * etcd's minimum once a grant showed it), a grant with the origin of its
 * deadline, and the drop of a lease nobody will use.  The requests are the
 * client's (reply.c); the leases of released holdings are revoked by a
 * thread (revoker.c).
 *
 * THE DEADLINE of a holding is the local CLOCK_MONOTONIC time taken before
 * the grant (or the latest keepalive) was sent, plus the TTL etcd granted:
 * the lease cannot end at etcd before it, as etcd starts counting later (a
 * leader change only restarts the count).  Clock rate differences between
 * hosts are assumed negligible against a lease of whole seconds.
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

/* Grant a lease for ttl: *id, *granted, and *base the local time taken
 * before the request left (the deadline's origin). */
int fl__etcd_lease_grant(struct fl__etcd *e, uint64_t ttl, uint64_t *id, uint64_t *granted,
                         uint64_t *base)
{
    *base = fl__etcd_now_ns();
    int err = fl__etcd_grant(&e->c, ttl, id, granted);
    if (!err)
        fl__note_granted(e, ttl, *granted);
    return err;
}

/* Best effort: a lease we will not use (its key, if any, goes with it). */
void fl__etcd_lease_drop(struct fl__etcd *e, uint64_t id)
{
    if (!id)
        return;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", fl_last_error());
    (void)fl__etcd_revoke(&e->c, id); /* if it fails, the lease ends by itself */
    fl__set_error("%s", saved);
}
