/* SPDX-License-Identifier: MIT */
/*
 * backend.c - the etcd backend's ops table (backend.h) and its handle, a
 * struct fl__etcd (etcd.h) that starts with the base handle (core.h).  Each entry
 * (api.c has checked the handle's process: -ECHILD after fork) maps fl_lease
 * to the lower layers' holding and back, and calls wait.c, lock.c, record.c or
 * inspect.c.  The client (client.h) reports its failures through
 * fl__etcd_error(), defined here as fl_last_error()'s setter.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "backend.h"
#include "etcd.h"

void fl__etcd_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fl__set_error("%s", msg);
}

/* ---- the backend's own handle ---- */

int fl__etcd_open(const char *uri, bool readonly, struct fl__etcd **out)
{
    *out = NULL;
    struct fl__etcd *e = calloc(1, sizeof *e);
    if (!e)
        return fl__fail(-ENOMEM, "out of memory");
    fl__handle_init(&e->h, &fl__etcd_backend, uri, readonly);
    int err = fl__etcd_client_init(&e->c, uri);
    if (err) {
        fl__handle_fini(&e->h, false);
        free(e);
        return err;
    }
    /* The host, for `fencelock status` (display only; spaces would break
     * the lock value's fields). */
    if (gethostname(e->host, sizeof e->host) != 0 || !e->host[0])
        snprintf(e->host, sizeof e->host, "?");
    e->host[sizeof e->host - 1] = '\0';
    for (char *p = e->host; *p; p++)
        if (*p <= ' ' || *p > '~')
            *p = '?';
    /* Entry IDs: a random nonce, so that no two handles make the same one
     * (entry.c).  Without getrandom, what tells this handle apart. */
    if (getrandom(&e->nonce, sizeof e->nonce, GRND_NONBLOCK) != (ssize_t)sizeof e->nonce) {
        uint64_t seed[3] = {fl__etcd_now_ns(), (uint64_t)getpid(), (uint64_t)(uintptr_t)e};
        e->nonce = fl__checksum(seed, sizeof seed);
    }
    atomic_init(&e->next_id, 0);
    atomic_init(&e->min_ttl, 0);
    atomic_init(&e->commit_seq, 0);
    pthread_mutex_init(&e->lock, NULL);
    fl__etcd_pool_init(e);
    /* A read-only handle writes nothing: an absent epoch reads as 0. */
    uint64_t epoch = 0;
    err = fl__etcd_epoch_load(&e->c, !readonly, &epoch);
    if (err) {
        /* Name the region (as shown: the messages of the requests name
         * only an endpoint). */
        if (!strstr(fl_last_error(), e->c.uri.shown)) {
            char why[1024];
            snprintf(why, sizeof why, "%s", fl_last_error());
            fl__set_error("region %s: %s", e->c.uri.shown, why);
        }
        fl__handle_fini(&e->h, false);
        fl__etcd_close(e);
        return err;
    }
    *out = e;
    return 0;
}

void fl__etcd_close(struct fl__etcd *e)
{
    if (!e)
        return;
    for (uint32_t i = 0; i < e->nkeys; i++)
        free(e->keys[i]);
    free(e->keys);
    free(e->index);
    fl__etcd_snap_free(e->snap);
    pthread_mutex_destroy(&e->lock);
    fl__etcd_client_destroy(&e->c);
    free(e);
}

/* ---- the ops ---- */

/* The etcd handle behind r: the ops below are only ever called with
 * handles this backend opened (the base is first, etcd.h). */
static struct fl__etcd *fl__e(const fl_region *r) { return (struct fl__etcd *)(void *)r; }

static int fl__be_open(const char *name, bool readonly, bool named, fl_region **out)
{
    (void)named; /* the directory trust checks are the region file's */
    struct fl__etcd *e = NULL;
    int err = fl__etcd_open(name, readonly, &e);
    if (err)
        return err;
    /* As for a region file opened unregistered (fencelock.h, fl_open), say
     * why death detection is off: `fencelock run` shows it. */
    if (!readonly)
        fl__set_error("region %s is an etcd cluster: no supervisor watches this process, so "
                      "its locks end at their etcd leases if it dies",
                      name);
    *out = &e->h;
    return 0;
}

static void fl__be_close(fl_region *r)
{
    struct fl__etcd *e = fl__e(r);
    if (!fl__handle_is_inherited(r)) {
        /* All that follows gets one request timeout, however many requests
         * it still has to make and however many endpoints are silent: what
         * it cannot reach ends by itself (leases at their TTL). */
        fl__etcd_client_closing(&e->c);
        /* The keepalive thread renews through this handle: stop it first.
         * Then what is still held is abandoned, as a death would leave it
         * (its next holder sees FL_LEASE_OWNER_DIED). */
        fl__keepalive_shutdown(r);
        if (!e->h.readonly)
            fl__etcd_abandon_all(e);
        fl__etcd_pool_stop(e);
    } else {
        fl__etcd_pool_forget(e);
    }
    fl__handle_fini(r, fl__handle_is_inherited(r));
    /* In a forked child: only this process's memory (and its copies of the
     * connections) goes; the parent's holdings are the parent's. */
    fl__etcd_close(e);
}

static void fl__to_lease(const struct fl__etcd_lease *h, fl_lease *l)
{
    memset(l, 0, sizeof *l);
    l->token = h->token;
    l->deadline_ns = h->deadline_ns;
    l->slot = h->slot;
    l->flags = h->flags;
    l->handle = h->lease_id;
}

static void fl__from_lease(const fl_lease *l, struct fl__etcd_lease *h)
{
    h->token = l->token;
    h->deadline_ns = l->deadline_ns;
    h->slot = l->slot;
    h->flags = l->flags;
    h->lease_id = l->handle;
}

static int fl__be_acquire(fl_region *r, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                          fl_cancel *cancel, fl_lease *lease)
{
    struct fl__etcd_lease h;
    int err = fl__etcd_acquire(fl__e(r), key, lease_ns, timeout_ns, cancel, &h);
    if (!err)
        fl__to_lease(&h, lease);
    return err;
}

/* Key handles: the handle's own index of the key (as fl_lease.slot), found
 * again by index; an acquisition by handle is the acquisition by name (the
 * lookup it saves is a hash of a few bytes beside network round trips). */
static int fl__be_key_resolve(fl_region *r, const char *key, fl_key *k)
{
    uint32_t slot = 0;
    int err = fl__etcd_resolve(fl__e(r), key, &slot);
    if (!err)
        k->slot = slot;
    return err;
}

static int fl__be_acquire_key(fl_region *r, const fl_key *k, uint64_t lease_ns,
                              int64_t timeout_ns, fl_cancel *cancel, fl_lease *lease)
{
    char key[FL_KEY_MAX + 1];
    if (fl__etcd_slot_key(fl__e(r), k->slot, key, NULL) != 0)
        return fl__fail(-EINVAL, "fl_acquire_key: key handle names index %u, which this "
                                 "handle never resolved", k->slot);
    return fl__be_acquire(r, key, lease_ns, timeout_ns, cancel, lease);
}

static int fl__be_renew(fl_region *r, fl_lease *lease, uint64_t lease_ns)
{
    struct fl__etcd_lease h;
    fl__from_lease(lease, &h);
    int err = fl__etcd_renew(fl__e(r), &h, lease_ns);
    /* On -EAGAIN too: the deadline then is what the holding lasts whichever
     * way the renew went (lock.c, RENEW). */
    lease->deadline_ns = h.deadline_ns;
    if (!err)
        lease->handle = h.lease_id;
    return err;
}

static int fl__be_release(fl_region *r, const fl_lease *lease)
{
    struct fl__etcd_lease h;
    fl__from_lease(lease, &h);
    return fl__etcd_release(fl__e(r), &h);
}

static int fl__be_check(fl_region *r, const fl_lease *lease)
{
    struct fl__etcd_lease h;
    fl__from_lease(lease, &h);
    return fl__etcd_check(fl__e(r), &h);
}

static int fl__be_commit(fl_region *r, const fl_lease *lease, const char *record,
                         const void *data, size_t len, unsigned flags, uint64_t *accepted)
{
    struct fl__etcd_lease h;
    fl__from_lease(lease, &h);
    return fl__etcd_commit(fl__e(r), &h, record, data, len, flags, accepted);
}

static int fl__be_commit_token(fl_region *r, const char *key, uint64_t token, const char *record,
                               const void *data, size_t len, unsigned flags, uint64_t *accepted)
{
    return fl__etcd_commit_token(fl__e(r), key, token, record, data, len, flags, accepted);
}

static int fl__be_read(fl_region *r, const char *record, void *buf, size_t cap, size_t *len,
                       uint64_t *fence)
{
    return fl__etcd_read(fl__e(r), record, buf, cap, len, fence);
}

/* No supervisor watches an etcd client: its locks end at their leases. */
static int fl__be_registered(const fl_region *r)
{
    (void)r;
    return 0;
}

static int fl__be_region_info(fl_region *r, fl_region_info *info)
{
    return fl__etcd_region_info(fl__e(r), info);
}

static int fl__be_lock_info(fl_region *r, uint32_t index, fl_lock_info *info)
{
    return fl__etcd_lock_info(fl__e(r), index, info);
}

static int fl__be_record_info(fl_region *r, uint32_t index, fl_record_info *info)
{
    return fl__etcd_record_info(fl__e(r), index, info);
}

/* etcd has no client table: every index is past the (empty) table. */
static int fl__be_client_info(fl_region *r, uint32_t index, fl_client_info *info)
{
    (void)info;
    return fl__fail(-ERANGE, "fl_client_info_get: index %u: an etcd region (%s) has no client "
                             "table (no supervisor registers its clients)",
                    index, r->path);
}

/* Nor a table of unregistered clients: its FL_UNREGISTERED_MAX entries are
 * all empty. */
static int fl__be_unregistered_info(fl_region *r, uint32_t index, fl_unregistered_info *info)
{
    (void)info;
    if (index >= FL_UNREGISTERED_MAX)
        return fl__fail(-ERANGE, "fl_unregistered_info_get: index %u past the table", index);
    return fl__fail(-ENOENT, "fl_unregistered_info_get: an etcd region (%s) notes no "
                             "unregistered clients",
                    r->path);
}

const struct fl__backend fl__etcd_backend = {
    .name = "etcd",
    .open = fl__be_open,
    .close = fl__be_close,
    .acquire = fl__be_acquire,
    .key_resolve = fl__be_key_resolve,
    .acquire_key = fl__be_acquire_key,
    .renew = fl__be_renew,
    .release = fl__be_release,
    .check = fl__be_check,
    .commit = fl__be_commit,
    .commit_token = fl__be_commit_token,
    .read = fl__be_read,
    .registered = fl__be_registered,
    .region_info = fl__be_region_info,
    .lock_info = fl__be_lock_info,
    .record_info = fl__be_record_info,
    .client_info = fl__be_client_info,
    .unregistered_info = fl__be_unregistered_info,
};
