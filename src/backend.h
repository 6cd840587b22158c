/* SPDX-License-Identifier: MIT */
/*
 * backend.h - the seam between the public API and the stores that keep the
 * locks and records.  Not installed.
 *
 * A region string names a store: a file path names a shared-memory region
 * (src/shm/), "etcd://..." an etcd cluster (src/etcd/).  fl_open() picks the backend once, from the string's scheme,
 * and stores its ops table in the handle; every public function that takes a
 * handle is one indirect call through that table (api.c), so no caller ever
 * asks which store it talks to, and the shared-memory fast path pays one
 * predicted indirect call for the seam (bench Q1).
 *
 * Like SQLite's sqlite3_io_methods, every backend fills every entry: the
 * tables are compiled into the library, so there is no older table to
 * allow for.
 *
 * Every operation keeps the public function's contract (include/fencelock.h).
 * api.c has checked what every backend would: the handle for NULL, a lease
 * argument for NULL and for coming from this handle (fl_lease.region), a key
 * handle for coming from this handle (fl_key.handle), the NULL `cancel`
 * of the cancelable calls, and fl_read's arguments and record name.  Each backend checks the rest itself (its errors
 * are the public function's), and reports failures through fl__fail() so
 * fl_last_error() says what happened.
 */
#ifndef FL_BACKEND_H
#define FL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "fencelock.h"

struct fl__backend {
    const char *name; /* "shm", "etcd": fl_region_backend(), and messages */

    /* Open the store `name` names (already resolved: never NULL; for shm a
     * path, for etcd the whole URI), read-only for inspection when
     * `readonly`; `named`: the caller named it (not a default), which the
     * shared-memory trust checks relax for.  On success *out is a handle
     * whose `be` is this table. */
    int (*open)(const char *name, bool readonly, bool named, fl_region **out);
    /* fl_close(): never fails; frees the handle. */
    void (*close)(fl_region *r);

    /* fl_acquire() and fl_acquire_cancelable(): cancel is NULL for the former. */
    int (*acquire)(fl_region *r, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                   fl_cancel *cancel, fl_lease *lease);
    /* fl_key_resolve(): find or create key and put in k what this backend
     * finds it by again (k->slot, and k's reserved words if it needs
     * more); api.c zeroed k before, and sets k->handle to the handle's tag
     * after a success. */
    int (*key_resolve)(fl_region *r, const char *key, fl_key *k);
    /* fl_acquire_key() and fl_acquire_key_cancelable() (cancel NULL for the
     * former): fl_acquire of the key k was resolved from.  api.c has checked
     * that k carries r's tag, so k was resolved by r; the backend checks
     * that k->slot is one it issued (etcd: the handle's own index of the
     * key, as its fl_lease.slot). */
    int (*acquire_key)(fl_region *r, const fl_key *k, uint64_t lease_ns, int64_t timeout_ns,
                       fl_cancel *cancel, fl_lease *lease);
    int (*renew)(fl_region *r, fl_lease *lease, uint64_t lease_ns);
    int (*release)(fl_region *r, const fl_lease *lease);
    int (*check)(fl_region *r, const fl_lease *lease);

    int (*commit)(fl_region *r, const fl_lease *lease, const char *record, const void *data,
                  size_t len, unsigned flags, uint64_t *accepted);
    int (*commit_token)(fl_region *r, const char *key, uint64_t token, const char *record,
                        const void *data, size_t len, unsigned flags, uint64_t *accepted);
    int (*read)(fl_region *r, const char *record, void *buf, size_t cap, size_t *len,
                uint64_t *fence);

    int (*registered)(const fl_region *r);

    /* Inspection.  A backend whose store has no fixed tables fills what it
     * knows and leaves the rest 0 ("unknown", as for added fields). */
    int (*region_info)(fl_region *r, fl_region_info *info);
    int (*lock_info)(fl_region *r, uint32_t index, fl_lock_info *info);
    int (*record_info)(fl_region *r, uint32_t index, fl_record_info *info);
    int (*client_info)(fl_region *r, uint32_t index, fl_client_info *info);
    int (*unregistered_info)(fl_region *r, uint32_t index, fl_unregistered_info *info);
};

/* The shared-memory backend (shm/backend.c). */
extern const struct fl__backend fl__shm_backend;

/* The etcd backend (etcd/backend.c); only in builds with libcurl and jansson
 * (FL_HAVE_ETCD). */
extern const struct fl__backend fl__etcd_backend;

/* The backend a resolved region string selects: a string that starts with
 * "SCHEME://" (SCHEME: a letter, then letters, digits, '+', '-', '.') names a
 * network store, anything else a shared-memory region file.  Returns 0 and
 * sets *be, or -EPROTONOSUPPORT for a scheme this build does not serve
 * (fl_last_error() names it and what the build serves). */
int fl__backend_for(const char *name, const struct fl__backend **be);

#endif /* FL_BACKEND_H */
