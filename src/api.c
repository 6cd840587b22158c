/* SPDX-License-Identifier: MIT */
/*
 * api.c - the public functions that take a region handle: each checks what
 * every backend would check alike (the handle, a lease and a key handle for
 * NULL and for coming from this handle, the process: fork.c) and makes one
 * call through the handle's backend table (backend.h), chosen once by
 * fl_open.  Nothing here knows which store is behind a handle; what every
 * backend shares (the region string's resolution, fl_region_path,
 * fl_region_backend, the 64-bit pointer records) is written once here,
 * above them.
 */
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "core.h"
#include "shown.h"

/* A tag for a new handle, which its key handles carry (fl_key.handle): a
 * key handle is accepted only by the handle whose tag it carries.  Distinct
 * for every handle of a process (the count goes through a bijection), and
 * unlike any other process's but by a chance of 2^-64 (the pid and the
 * first open's time go in too: a key handle copied to another process, or
 * kept across fork(), is refused there).  Never 0. */
static uint64_t fl__new_key_cookie(void)
{
    static _Atomic uint64_t opened, salt;
    /* relaxed: only uniqueness matters, no other memory is ordered by it */
    uint64_t s = atomic_load_explicit(&salt, memory_order_relaxed);
    if (s == 0) {
        uint64_t mine = fl__monotonic_ns(NULL) | 1, none = 0;
        atomic_compare_exchange_strong_explicit(&salt, &none, mine, memory_order_relaxed,
                                                memory_order_relaxed);
        s = atomic_load_explicit(&salt, memory_order_relaxed);
    }
    for (;;) {
        uint64_t n = atomic_fetch_add_explicit(&opened, 1, memory_order_relaxed);
        /* count * odd constant: distinct counts stay distinct; then the
         * finalizer of splitmix64, a bijection of 64-bit words */
        uint64_t x = n * 0x9e3779b97f4a7c15ull + s + ((uint64_t)getpid() << 32);
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        if (x != 0)
            return x;
    }
}

/* A password someone wrote into the region string never reaches a message,
 * whole or in pieces (a directory of a path, an endpoint): shown.h. */
static void fl__mask_error(const char *name)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", fl_last_error());
    fl__mask_secrets(name, msg, sizeof msg);
    fl__set_error("%s", msg);
}

/* Resolve the region string (NULL: $FENCELOCK_REGION, then the default
 * path) and open it with the backend its scheme selects. */
static int fl__open_any(const char *region, bool readonly, const char *fn, fl_region **out)
{
    if (!out)
        return fl__fail(-EINVAL, "%s: out is NULL", fn);
    char name[FL__PATH_SIZE];
    int err = fl__region_resolve_path(region, name, sizeof name);
    if (err)
        return err;
    const struct fl__backend *be = NULL;
    err = fl__backend_for(name, &be);
    if (err) {
        fl__mask_error(name);
        return err;
    }
    err = be->open(name, readonly, fl__path_is_named(region), out);
    if (err == 0)
        (*out)->key_cookie = fl__new_key_cookie();
    else
        fl__mask_error(name);
    return err;
}

int fl_open(const char *region, fl_region **out)
{
    return fl__open_any(region, false, "fl_open", out);
}

int fl_open_readonly(const char *region, fl_region **out)
{
    return fl__open_any(region, true, "fl_open_readonly", out);
}

void fl_close(fl_region *r)
{
    if (r)
        r->be->close(r);
}

/* A lease carries the tag of the handle that issued it (fl_lease.region),
 * so that a lease of another handle, another region's or the same region's
 * (whose slot numbers or etcd key indexes may name another key there), is
 * refused before a backend reads its slot. */
static int fl__issued(const fl_region *r, int err, fl_lease *lease)
{
    if (err == 0)
        lease->region = r->key_cookie;
    return err;
}

static int fl__lease_check(const fl_region *r, const fl_lease *lease, const char *fn)
{
    if (!lease)
        return fl__fail(-EINVAL, "%s: NULL argument", fn);
    int err = fl__handle_check(r, fn);
    if (err)
        return err;
    if (__builtin_expect(lease->region == r->key_cookie, 1))
        return 0;
    if (lease->region == 0)
        return fl__fail(-EINVAL, "%s: the lease was never issued (zeroed, or built by hand: "
                                 "only an acquisition makes a lease)", fn);
    return fl__fail(-EINVAL, "%s: the lease was issued by another region handle (a lease is "
                             "valid only with the handle that acquired it)", fn);
}

int fl_acquire(fl_region *r, const char *key, uint64_t lease_ns, int64_t timeout_ns,
               fl_lease *lease)
{
    if (!r || !lease)
        return fl__fail(-EINVAL, "fl_acquire: NULL argument");
    int err = fl__handle_check(r, "fl_acquire");
    if (err)
        return err;
    return fl__issued(r, r->be->acquire(r, key, lease_ns, timeout_ns, NULL, lease), lease);
}

int fl_acquire_cancelable(fl_region *r, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                          fl_cancel *cancel, fl_lease *lease)
{
    if (!r || !cancel || !lease)
        return fl__fail(-EINVAL, "fl_acquire_cancelable: NULL argument");
    int err = fl__handle_check(r, "fl_acquire_cancelable");
    if (err)
        return err;
    return fl__issued(r, r->be->acquire(r, key, lease_ns, timeout_ns, cancel, lease), lease);
}

int fl_key_resolve(fl_region *r, const char *key, fl_key *k)
{
    if (!r || !k)
        return fl__fail(-EINVAL, "fl_key_resolve: NULL argument");
    *k = (fl_key){0}; /* a failed resolve leaves a handle nothing accepts */
    int err = fl__handle_check(r, "fl_key_resolve");
    if (err)
        return err;
    err = r->be->key_resolve(r, key, k);
    if (err) {
        *k = (fl_key){0};
        return err;
    }
    k->handle = r->key_cookie;
    return 0;
}

/* The handle's tag proves that k came from r (fl__new_key_cookie), so a
 * backend's own check can be a bound. */
static inline int fl__key_check_handle(const fl_region *r, const fl_key *k, const char *fn)
{
    if (__builtin_expect(k->handle == r->key_cookie, 1))
        return 0;
    if (k->handle == 0)
        return fl__fail(-EINVAL, "%s: key handle was never resolved (zeroed, or its "
                        "fl_key_resolve failed)", fn);
    return fl__fail(-EINVAL, "%s: key handle was resolved by another region handle (a key "
                    "handle is valid only with the handle that resolved it)", fn);
}

int fl_acquire_key(fl_region *r, const fl_key *k, uint64_t lease_ns, int64_t timeout_ns,
                   fl_lease *lease)
{
    if (!r || !k || !lease)
        return fl__fail(-EINVAL, "fl_acquire_key: NULL argument");
    int err = fl__handle_check(r, "fl_acquire_key");
    if (err)
        return err;
    err = fl__key_check_handle(r, k, "fl_acquire_key");
    if (err)
        return err;
    return fl__issued(r, r->be->acquire_key(r, k, lease_ns, timeout_ns, NULL, lease), lease);
}

int fl_acquire_key_cancelable(fl_region *r, const fl_key *k, uint64_t lease_ns,
                              int64_t timeout_ns, fl_cancel *cancel, fl_lease *lease)
{
    if (!r || !k || !cancel || !lease)
        return fl__fail(-EINVAL, "fl_acquire_key_cancelable: NULL argument");
    int err = fl__handle_check(r, "fl_acquire_key_cancelable");
    if (err)
        return err;
    err = fl__key_check_handle(r, k, "fl_acquire_key_cancelable");
    if (err)
        return err;
    return fl__issued(r, r->be->acquire_key(r, k, lease_ns, timeout_ns, cancel, lease), lease);
}

int fl_renew(fl_region *r, fl_lease *lease, uint64_t lease_ns)
{
    if (!r)
        return fl__fail(-EINVAL, "fl_renew: NULL argument");
    int err = fl__lease_check(r, lease, "fl_renew");
    return err ? err : r->be->renew(r, lease, lease_ns);
}

int fl_release(fl_region *r, const fl_lease *lease)
{
    if (!r)
        return fl__fail(-EINVAL, "fl_release: NULL argument");
    int err = fl__lease_check(r, lease, "fl_release");
    return err ? err : r->be->release(r, lease);
}

int fl_check(fl_region *r, const fl_lease *lease)
{
    if (!r)
        return fl__fail(-EINVAL, "fl_check: NULL argument");
    int err = fl__lease_check(r, lease, "fl_check");
    return err ? err : r->be->check(r, lease);
}

int fl_commit(fl_region *r, const fl_lease *lease, const char *record, const void *data,
              size_t len, unsigned flags, uint64_t *accepted)
{
    if (!r)
        return fl__fail(-EINVAL, "fl_commit: NULL argument");
    int err = fl__lease_check(r, lease, "fl_commit");
    return err ? err : r->be->commit(r, lease, record, data, len, flags, accepted);
}

int fl_commit_token(fl_region *r, const char *key, uint64_t token, const char *record,
                    const void *data, size_t len, unsigned flags, uint64_t *accepted)
{
    if (!r)
        return fl__fail(-EINVAL, "fl_commit_token: NULL argument");
    int err = fl__handle_check(r, "fl_commit_token");
    return err ? err : r->be->commit_token(r, key, token, record, data, len, flags, accepted);
}

int fl_read(fl_region *r, const char *record, void *buf, size_t cap, size_t *len,
            uint64_t *fence)
{
    if (!r)
        return fl__fail(-EINVAL, "fl_read: NULL argument");
    int err = fl__handle_check(r, "fl_read");
    if (err)
        return err;
    if (!len || !fence || (!buf && cap > 0))
        return fl__fail(-EINVAL, "fl_read: NULL argument");
    int rlen = fl__key_check(record); /* every backend's names are keys' */
    return rlen < 0 ? rlen : r->be->read(r, record, buf, cap, len, fence);
}

/* The fenced pointer is 8 bytes little-endian on every backend, so a value
 * written by one program reads the same in any other. */
int fl_commit_u64(fl_region *r, const fl_lease *lease, const char *record, uint64_t value,
                  unsigned flags, uint64_t *accepted)
{
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(value >> (8 * i));
    return fl_commit(r, lease, record, le, sizeof le, flags, accepted);
}

int fl_read_u64(fl_region *r, const char *record, uint64_t *value, uint64_t *fence)
{
    if (!value)
        return fl__fail(-EINVAL, "fl_read_u64: value is NULL");
    unsigned char le[8];
    size_t len = 0;
    int err = fl_read(r, record, le, sizeof le, &len, fence);
    if (err == -ENOBUFS || (err == 0 && len != 8))
        return fl__fail(-EPROTO, "record \"%s\" holds %zu bytes, not a 64-bit pointer", record,
                        len);
    if (err)
        return err;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)le[i] << (8 * i);
    *value = v;
    return 0;
}

int fl_region_registered(const fl_region *r) { return r ? r->be->registered(r) : 0; }

const char *fl_region_path(const fl_region *r) { return r ? r->path : ""; }

const char *fl_region_backend(const fl_region *r) { return r ? r->be->name : ""; }

int fl_region_info_get(fl_region *r, fl_region_info *info)
{
    if (!r || !info)
        return fl__fail(-EINVAL, "fl_region_info_get: NULL argument");
    int err = fl__handle_check(r, "fl_region_info_get");
    return err ? err : r->be->region_info(r, info);
}

int fl_lock_info_get(fl_region *r, uint32_t index, fl_lock_info *info)
{
    if (!r || !info)
        return fl__fail(-EINVAL, "fl_lock_info_get: NULL argument");
    int err = fl__handle_check(r, "fl_lock_info_get");
    return err ? err : r->be->lock_info(r, index, info);
}

int fl_record_info_get(fl_region *r, uint32_t index, fl_record_info *info)
{
    if (!r || !info)
        return fl__fail(-EINVAL, "fl_record_info_get: NULL argument");
    int err = fl__handle_check(r, "fl_record_info_get");
    return err ? err : r->be->record_info(r, index, info);
}

int fl_client_info_get(fl_region *r, uint32_t index, fl_client_info *info)
{
    if (!r || !info)
        return fl__fail(-EINVAL, "fl_client_info_get: NULL argument");
    int err = fl__handle_check(r, "fl_client_info_get");
    return err ? err : r->be->client_info(r, index, info);
}

int fl_unregistered_info_get(fl_region *r, uint32_t index, fl_unregistered_info *info)
{
    if (!r || !info)
        return fl__fail(-EINVAL, "fl_unregistered_info_get: NULL argument");
    int err = fl__handle_check(r, "fl_unregistered_info_get");
    return err ? err : r->be->unregistered_info(r, index, info);
}
