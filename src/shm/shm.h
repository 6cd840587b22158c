/* SPDX-License-Identifier: MIT */
/*
 * shm.h - the internal header of the shared-memory backend (src/shm/): its
 * handle, struct fl__shm, and the functions its files share.  Not
 * installed.  It includes core.h (the layer below) and supervise.h, the
 * narrower interface the supervisor gets (fencelockd includes only that
 * one), and proto.h through it.
 */
#ifndef FL_SHM_H
#define FL_SHM_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "../core.h"
#include "fencelock.h"
#include "format.h"
#include "supervise.h" /* and proto.h */

/* Monotonic time in nanoseconds.  All lease arithmetic goes through the
 * handle's clock so tests can substitute a controllable one; the library
 * never reads the wall clock for leases (I11). */
typedef uint64_t (*fl__clock_fn)(void *ctx);

/* A handle on a region file: the base every backend's handle starts with
 * (core.h), then the shared-memory backend's own fields. */
struct fl__shm {
    struct fl_region h;
    char *base;           /* the mapping */
    size_t size;          /* bytes mapped == header file_size */
    int fd;               /* region file, kept open for the life of the handle */
    int sock;             /* registration socket, -1 when unregistered */
    bool goodbye;         /* the supervisor takes a goodbye, not sent yet (client.c) */
    bool other_boot;      /* the region's boot id is not this boot's (leases void) */
    uint32_t client;      /* client table index, 0 when unregistered */
    uint64_t client_id;
    fl__clock_fn clock;   /* this process's CLOCK_MONOTONIC (or a test's clock) */
    void *clock_ctx;
    /* This process's time namespace offset of CLOCK_MONOTONIC (ns): region
     * deadlines are host time = our time - timens_ns (clock.c). */
    int64_t timens_ns;

    /* Cached views of the validated header (never re-read from shared memory). */
    struct fl__header *hdr;
    uint32_t lock_capacity, lock_index_mask;
    uint32_t record_capacity, record_index_mask;
    uint32_t record_size, buffer_count, client_capacity;
    uint64_t buffer_stride;
    struct fl__client *clients;
    struct fl__slot *slots;
    _Atomic uint32_t *lock_index;
    struct fl__record *records;
    _Atomic uint32_t *record_index;
    char *buffers;
    struct fl__event *events;
    uint32_t event_mask;

    /* A slot or record this process allocated but lost the race to publish;
     * reused by its next key creation instead of leaking (keys.c). 0 = none,
     * else index + 1. */
    _Atomic uint32_t spare_slot, spare_record;

    /* The unregistered-client entry this handle noted (unreg.c): the entry
     * index and the seq it wrote there; unreg_seq 0 = none. */
    uint32_t unreg_entry, unreg_seq;

    /* The buffer this handle last replaced or gave back, tried first by its
     * next commit (record.c): index + 1, a hint, never a holding. */
    _Atomic uint32_t buffer_hint;

    /* Per lock slot, the token of this handle's latest acquisition of it
     * (0: none): process memory, lock_capacity entries, NULL for read-only
     * handles.  A waiting fl_acquire answers -EDEADLK when the slot's state
     * word holds exactly that token (slot.c): tokens of a key never repeat,
     * so an entry left behind by a release or a lost lease never matches
     * another holding, and no other process's acquisition can match.  Only
     * the thread that made the acquisition gets -EDEADLK: other threads
     * sharing the handle wait for it as they always could. */
    _Atomic uint64_t *held;
    /* Per lock slot, the thread (fl__self_tid) that made that acquisition:
     * written before held[] (release), read after it (acquire), so a waiter
     * that sees the token also sees its thread or a later one. */
    _Atomic uint32_t *held_tid;

    /* The handle's life thread (life.c), NULL when it has none (an
     * unregistered handle, or one whose life word could not be set up). */
    struct fl__life *life;
};
_Static_assert(offsetof(struct fl__shm, h) == 0, "an fl_region * of this backend is a struct fl__shm *");

/* The shared-memory handle behind the base handle r, which is one: the ops
 * table (backend.c) is only ever called with handles it opened. */
static inline struct fl__shm *fl__shm_of(fl_region *r) { return (struct fl__shm *)(void *)r; }
static inline const struct fl__shm *fl__shm_of_const(const fl_region *r)
{
    return (const struct fl__shm *)(const void *)r;
}

/* ---- The shared-memory backend's entries in its ops table (backend.c) ----
 * Each is the public function of the same name (fencelock.h) for a handle
 * on a region file; api.c has checked r for NULL. */
int fl__shm_open(const char *path, bool readonly, bool named, fl_region **out);
void fl__shm_close(fl_region *r);
int fl__shm_acquire(fl_region *r, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                    fl_cancel *cancel, fl_lease *lease);
/* fl_key_resolve (sets k->slot only: api.c zeroed k and sets its handle). */
int fl__shm_key_resolve(fl_region *r, const char *key, fl_key *k);
/* fl_acquire_key and fl_acquire_key_cancelable (cancel NULL for the former);
 * api.c has checked that k came from r. */
int fl__shm_acquire_key(fl_region *r, const fl_key *k, uint64_t lease_ns, int64_t timeout_ns,
                        fl_cancel *cancel, fl_lease *lease);
int fl__shm_renew(fl_region *r, fl_lease *lease, uint64_t lease_ns);
int fl__shm_release(fl_region *r, const fl_lease *lease);
int fl__shm_check(fl_region *r, const fl_lease *lease);
int fl__shm_commit(fl_region *r, const fl_lease *lease, const char *record, const void *data,
                   size_t len, unsigned flags, uint64_t *accepted);
int fl__shm_commit_token(fl_region *r, const char *key, uint64_t token, const char *record,
                         const void *data, size_t len, unsigned flags, uint64_t *accepted);
int fl__shm_read(fl_region *r, const char *record, void *buf, size_t cap, size_t *len,
                 uint64_t *fence);
int fl__shm_region_registered(const fl_region *r);
int fl__shm_region_info_get(fl_region *r, fl_region_info *info);
int fl__shm_lock_info_get(fl_region *r, uint32_t index, fl_lock_info *info);
int fl__shm_record_info_get(fl_region *r, uint32_t index, fl_record_info *info);
int fl__shm_client_info_get(fl_region *r, uint32_t index, fl_client_info *info);
int fl__shm_unregistered_info_get(fl_region *r, uint32_t index, fl_unregistered_info *info);


/* ---- the handle's clock ---- */
/* The handle's clock: CLOCK_MONOTONIC read here, inline, unless a test put
 * its own clock in the handle (fl__region_set_clock).  Every acquisition
 * reads it once; calling clock_gettime directly instead of through the
 * function pointer and fl__monotonic_ns saves about 1 ns of that path
 * (docs/benchmarks.md). */
static inline uint64_t fl__now(const struct fl__shm *r)
{
    if (__builtin_expect(r->clock == fl__monotonic_ns, 1)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail for this clock id */
        return (uint64_t)ts.tv_sec * FL__NS_PER_S + (uint64_t)ts.tv_nsec;
    }
    return r->clock(r->clock_ctx);
}

/* ---- a lease word's fields (slot.c writes them; inspect.c reads them) ---- */
/* The deadline of a lease word on this process's CLOCK_MONOTONIC: the word
 * holds host time (the initial time namespace's); we may live in a time
 * namespace whose clock is shifted by r->timens_ns (clock.c, I11).
 * Unsigned arithmetic wraps exactly: the result is a valid local time. */
static inline uint64_t fl__deadline_ns(const struct fl__shm *r, uint64_t lease_word)
{
    return (lease_word & FL__DEADLINE_MASK) * 1000ull + (uint64_t)r->timens_ns;
}

static inline uint32_t fl__owner(uint64_t lease_word)
{
    return (uint32_t)(lease_word >> FL__OWNER_SHIFT);
}

/* ---- region.c (struct fl__params, creating, mapping: supervise.h) ---- */
/* Create a region file at path with params, 0600, atomically (a complete
 * file appears under the name, or nothing).  -EEXIST if one is there
 * already.  Tests and fl__test_region_create_ready. */
int fl__region_create(const char *path, const struct fl__params *p);
/* fl__region_map; named: the path was named by the caller (paths.c: then
 * the directory's owner is trusted). */
int fl__region_map_named(const char *path, bool readonly, bool named, struct fl__shm **out);

/* ---- hash.c (fl__checksum: supervise.h) ---- */
/* ---- ready.c (the serving lock and readying: supervise.h) ---- */
/* Whether a supervisor holds that lock now (tests it, takes nothing). */
bool fl__region_served(const struct fl__shm *r);
/* fl_open's wait for a region readied in this boot (ready.c, READINESS):
 * 0, -EAGAIN or -EIO with the reason. */
int fl__await_ready(struct fl__shm *r);
/* Tests without a supervisor: create a region and ready it for this boot, as
 * if a supervisor had started (its floor stays 1: no durable epoch). */
int fl__test_region_create_ready(const char *path, const struct fl__params *p);
/* Whether the region's leases belong to the current boot. */
bool fl__same_boot(const struct fl__shm *r);
/* Whether the region's boot id is id; had receives it, NUL-terminated
 * (for messages).  fl__same_boot() with id read from this boot. */
bool fl__region_boot_is(const struct fl__shm *r, const char id[FL__BOOT_ID_SIZE],
                        char had[FL__BOOT_ID_SIZE]);
/* Test hook: substitute the handle's clock. */
void fl__region_set_clock(struct fl__shm *r, fl__clock_fn fn, void *ctx);

/* ---- paths.c ---- */
/* Check the region's directory (paths.c); *owner gets its owner, or
 * (uid_t)-1 if it cannot be looked at.  0 or -EPERM with the reason. */
int fl__check_region_dir(const char *region_path, bool named, uid_t *owner);
/* Check the region file's owner against the caller, root and dir_owner. */
struct stat;
int fl__check_region_file(const char *path, const struct stat *st, uid_t dir_owner);

/* ---- unreg.c ---- */
/* Note in the region's header that this handle runs unregistered, and why
 * (err: the registration's negative error).  Best effort, display only. */
void fl__unreg_note(struct fl__shm *r, int err);
/* Clear the entry fl__unreg_note wrote, if it is still ours (fl_close). */
void fl__unreg_clear(struct fl__shm *r);

/* ---- keys.c ---- */
struct fl__keytab {
    char *entries;                /* first entry */
    size_t stride;                /* bytes per entry */
    size_t key_offset;            /* offset of struct fl__key inside an entry */
    uint32_t capacity;
    _Atomic uint32_t *index;      /* buckets: entry + 1, 0 = empty */
    uint32_t index_mask;
    _Atomic uint32_t *next;       /* entries handed out */
    _Atomic uint32_t *spare;      /* process-local spare entry (index + 1) */
};
void fl__keytab_locks(struct fl__shm *r, struct fl__keytab *t);
void fl__keytab_records(struct fl__shm *r, struct fl__keytab *t);
/* Validate a key argument; returns its length or a negative error. */
int fl__key_check(const char *key);
/* Find key: 0 and *idx, -ENOENT, or -EPROTO for a corrupt index. */
int fl__key_find(const struct fl__keytab *t, const char *key, size_t len, uint32_t *idx);
/* Find key or create it: 0 and *idx, -ENOSPC, -EPROTO. */
int fl__key_find_or_create(const struct fl__keytab *t, const char *key, size_t len,
                           uint32_t *idx);
/* fl__key_check, then fl__key_find_or_create in the lock table: the lookup
 * of fl_acquire and fl_key_resolve in one call.  0 and *idx, or the errors of
 * both (-EINVAL, -ENOSPC, -EPROTO). */
int fl__lock_find_or_create(struct fl__shm *r, const char *key, uint32_t *idx);
/* Copy entry idx's key (NUL-terminated, clamped) into out[FL_KEY_MAX + 1] and
 * tell whether it is published in the index: 0, or -ENOENT. */
int fl__key_published(const struct fl__keytab *t, uint32_t idx, char out[FL_KEY_MAX + 1]);
/* Entries handed out so far, clamped to capacity (shared memory is untrusted). */
uint32_t fl__keytab_used(const struct fl__keytab *t);

/* ---- slot.c (fl__slots_wake_sleepers: supervise.h) ---- */
static inline struct fl__slot *fl__slot_at(const struct fl__shm *r, uint32_t i) { return &r->slots[i]; }
/* Lock slots handed out so far, clamped to the capacity: a slot a lease or
 * key handle names must be below it.  fl__keytab_used() of the lock table,
 * without building the table (release and renew check it every time). */
static inline uint32_t fl__locks_used(const struct fl__shm *r)
{
    /* relaxed: a count for bounds, not a publication (keys.c) */
    uint32_t n = atomic_load_explicit(&r->hdr->next_lock, memory_order_relaxed);
    return n < r->lock_capacity ? n : r->lock_capacity;
}
/* Free every lock held by client index `client` (0: none), marking each
 * freed by death (FL_LEASE_OWNER_DIED for the next holder) and waking its
 * waiters; fn (may be NULL) is called for each.  Returns how many.
 * Two callers:
 *   - the supervisor, for a client that died or closed
 *     (fl__sup_client_reap, supervise.c);
 *   - fl_close, for the closing handle's own index (session.c), so that its
 *     locks are freed whether or not a supervisor runs.
 * Both may run on one index at once (fl_close just before the supervisor
 * sees the connection end): each lock is freed by one CAS from the pair
 * just read, owner checked, so it is freed once, and a CAS that loses sees
 * the lock free or taken over and leaves it.  Neither can free another
 * client's locks: the supervisor hands the index out again only after its
 * own reap returned, and by then the handle is closed. */
uint32_t fl__slots_reap_client(struct fl__shm *r, uint32_t client, fl__freed_fn fn, void *ctx);
/* Void every held lease (a new boot) and zero the waiter counts.  Only
 * fl__sup_adopt_boot (supervise.c) calls it, in the supervisor's START:
 * no process of this boot can have opened the region yet. */
uint32_t fl__slots_void_all(struct fl__shm *r, fl__freed_fn fn, void *ctx);
/* The newest token slot i has handed out. */
uint64_t fl__slot_token(const struct fl__shm *r, uint32_t i);

/* ---- life.c ---- */
/* Give a registered handle its life word: its entry's robust mutex, held
 * by a thread of its own until fl__life_stop.  Best effort: on any failure
 * the handle works without one (death detection by fencelockd or lease). */
void fl__life_start(struct fl__shm *r);
/* fl_close: give the life word up and end the thread (after the handle's
 * own locks are freed).  In a forked child (inherited handle) use
 * fl__life_forget: the thread is the parent's. */
void fl__life_stop(struct fl__shm *r);
void fl__life_forget(struct fl__shm *r);
/* A waiter's view of a holder's life word (slot.c WAITING). */
struct fl__life_watch {
    _Atomic uint32_t *word; /* the futex word to sleep on beside the key's */
    uint32_t val;           /* its value, FUTEX_WAITERS set */
};
enum { FL__LIFE_NONE, FL__LIFE_ALIVE, FL__LIFE_DEAD };
/* Look at the life word of client entry `owner` (the holder of a pair just
 * read): FL__LIFE_DEAD, FL__LIFE_ALIVE with *w set up to sleep on, or
 * FL__LIFE_NONE (no usable life word: sleep on the key's word only). */
int fl__life_watch(struct fl__shm *r, uint32_t owner, struct fl__life_watch *w);
/* After a sleep on w: true if the holder has died since, in which case the
 * news was passed on to every other sleeper of that word. */
bool fl__life_after_sleep(const struct fl__life_watch *w);
/* Before a waiter frees a dead holder's lock: 0 once no thread of any
 * dying process can run another instruction of its own (membarrier), or
 * -errno, after which life words are off in this process. */
int fl__life_confirm(void);

/* ---- client.c ---- */
/* Register with the supervisor listening beside the region. 0; -ECONNREFUSED /
 * -ENOENT when none listens (the caller opens unregistered); -ENXIO; -EUSERS
 * (its client table is full, or it is out of file descriptors: fl_last_error()
 * says which). */
int fl__client_register(struct fl__shm *r);
/* Tell the supervisor that this handle closes cleanly, so that it logs the
 * client as "closed", not "died".  Call it in fl_close after the handle's
 * own locks are freed and before the socket is shut down, from the process
 * that opened the handle (never from a forked child using the parent's
 * handle: the goodbye would end the parent's registration).  Sends at most
 * once per handle; a no-op for an unregistered handle or a supervisor that
 * does not take goodbyes.  Never blocks. */
void fl__client_goodbye(struct fl__shm *r);
/* The registration protocol: proto.h; fl__socket_path: supervise.h. */


_Static_assert(FL__OP_COMMIT == FL_OP_COMMIT && FL__OP_STRICT_COMMIT == FL_OP_STRICT_COMMIT &&
                   FL__OP_RENEW == FL_OP_RENEW && FL__OP_RELEASE == FL_OP_RELEASE,
               "the log and the inspection API name operations alike");
_Static_assert(FL__RUN_NEVER == FL_RUN_NEVER && FL__RUN_RUNNING == FL_RUN_STARTED &&
                   FL__RUN_CLEAN == FL_RUN_CLEAN,
               "fl_region_info.run_state is the header's run_state, copied as it is");
_Static_assert(FL__BOOT_ID_SIZE == FL_BOOT_ID_SIZE,
               "fl_region_info.boot_id is the header's boot_id, copied as it is");

/* ---- events.c (struct fl__event_data, the drain: supervise.h) ---- */
/* Post an event for the supervisor; drops it (counted) when the ring is
 * full.  Any client; never waits. */
void fl__event_post(struct fl__shm *r, const struct fl__event_data *d);

/* ---- record.c ---- */
/* Release staging buffers of a dead client and publish those its commit had
 * made current.  Returns how many it touched.  Only fl__sup_client_reap
 * (supervise.c) calls it, for a client that is gone: a staging buffer can
 * become current only through its owner, so a live owner's are left alone. */
uint32_t fl__buffers_reap_client(struct fl__shm *r, uint32_t client);
/* The same for every owner: a new boot, where every writer is gone.  Only
 * fl__sup_adopt_boot (supervise.c) calls it, before the region is ready. */
uint32_t fl__buffers_reap_all(struct fl__shm *r);
/* Check every record's current value against its buffer (record.c, THE
 * BUFFER SUM); mark those that fail FL__CUR_UNVOUCHED.  Returns how many are
 * unvouched (newly or already).  Only fl__sup_vouch_records (supervise.c)
 * calls it, before the region is readied. */
uint32_t fl__records_vouch(struct fl__shm *r, fl__unvouched_fn fn, void *ctx);
static inline struct fl__buffer *fl__buffer_at(const struct fl__shm *r, uint32_t i)
{
    return (struct fl__buffer *)(void *)(r->buffers + (size_t)i * r->buffer_stride);
}

#endif /* FL_SHM_H */
