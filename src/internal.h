/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the library's files share: the process-local region
 * handle and the internal (fl__) functions.  Not installed.
 */
#ifndef FL_INTERNAL_H
#define FL_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "fencelock.h"
#include "format.h"

/* Sizes the code would otherwise repeat as bare numbers. */
#define FL__NS_PER_S 1000000000ull
/* A path (a region, its socket, a state file): Linux's PATH_MAX. */
#define FL__PATH_SIZE 4096
/* A path plus a suffix (".sock", ".new.PID", ".tmp.PID"). */
#define FL__PATH_PLUS_SIZE (FL__PATH_SIZE + 104)
/* A message that quotes a path and says why. */
#define FL__PATH_MSG_SIZE (FL__PATH_SIZE + 304)
/* A boot id: 36 characters and NUL, padded (format.h: header boot_id). */
#define FL__BOOT_ID_SIZE 40

/* Monotonic time in nanoseconds.  All lease arithmetic goes through the
 * handle's clock so tests can substitute a controllable one; the library
 * never reads the wall clock for leases (I11). */
typedef uint64_t (*fl__clock_fn)(void *ctx);

struct fl_region {
    /* The store behind this handle (backend.h), set at open and never
     * changed.  The fields below it, up to `backend`, are the shared-memory
     * backend's; another backend leaves them zeroed (fd and sock -1) and
     * keeps its own state in `backend`. */
    const struct fl__backend *be;
    char *base;           /* the mapping */
    size_t size;          /* bytes mapped == header file_size */
    int fd;               /* region file, kept open for the life of the handle */
    int sock;             /* registration socket, -1 when unregistered */
    bool goodbye;         /* the supervisor takes a goodbye, not sent yet (client.c) */
    bool readonly;
    bool other_boot;      /* the region's boot id is not this boot's (leases void) */
    uint32_t client;      /* client table index, 0 when unregistered */
    uint64_t client_id;
    uint32_t pid;         /* this process, cached at open */
    fl__clock_fn clock;   /* this process's CLOCK_MONOTONIC (or a test's clock) */
    void *clock_ctx;
    /* This process's time namespace offset of CLOCK_MONOTONIC (ns): region
     * deadlines are host time = our time - timens_ns (clock.c). */
    int64_t timens_ns;
    /* Fork detection (fork.c): the process's incarnation word, and its value
     * when this handle was opened. */
    _Atomic uint64_t *incarnation_word;
    uint64_t incarnation;
    char path[FL__PATH_SIZE];

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
    /* The keepalive thread and its lease list (keepalive.c), created on
     * first use under keeper_lock. */
    struct fl__keeper *keeper;
    pthread_mutex_t keeper_lock;

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

    /* A backend other than shared memory: its own state (NULL for shm). */
    void *backend;

    /* Every backend's: this handle's tag, which the key handles it resolves
     * carry (fl_key.handle), so that a key handle is only ever used with
     * the handle that resolved it.  Set by api.c at open; never 0. */
    uint64_t key_cookie;
};

/* ---- The shared-memory backend's entries in its ops table (backends.c) ----
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

/* A cancellation token for waits (fl_cancel_new, slot.c). */
struct fl_cancel {
    _Atomic uint32_t cancelled;
    /* The futex word the waiter sleeps on, while it waits; NULL otherwise. */
    _Atomic(_Atomic uint32_t *) sleeping_on;
};

/* ---- error.c ---- */
/* errno as a negative error code, never 0 (a failed call always has a cause;
 * analyzers cannot know that errno is set). */
static inline int fl__neg_errno(void)
{
    int e = errno;
    return e > 0 ? -e : -EIO;
}

/* Record a detailed message for fl_last_error(). */
void fl__set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Record the message and evaluate to err (negative).  A macro so that the
 * value is visible where it is returned (to readers and to analyzers). */
#define fl__fail(err, ...) (fl__set_error(__VA_ARGS__), (err))
/* The same with a constant message: no formatting (hot refusal paths). */
void fl__set_error_static(const char *msg);
#define fl__fail_static(err, msg) (fl__set_error_static(msg), (err))

/* ---- clock.c ---- */
uint64_t fl__monotonic_ns(void *ctx);
static inline uint64_t fl__now(const fl_region *r) { return r->clock(r->clock_ctx); }
/* Read this boot's id (36 characters and NUL) into buf[FL__BOOT_ID_SIZE]; 0 or -errno. */
int fl__read_boot_id(char buf[FL__BOOT_ID_SIZE]);
/* A nonzero 64-bit tag of a boot id (what the region's ready_boot holds). */
uint64_t fl__boot_tag(const char boot_id[FL__BOOT_ID_SIZE]);
/* This process's CLOCK_MONOTONIC offset from the host's, in ns (0 outside a
 * time namespace, or on a kernel without them).  0 or -errno (fail closed:
 * an offset that cannot be known refuses the open). */
int fl__read_timens_offset(int64_t *offset_ns);
/* The start time of process pid (field 22 of /proc/PID/stat); 0 if unknown. */
uint64_t fl__process_start_time(pid_t pid);

/* ---- fork.c ---- */
/* Bind a new handle to the calling process (its incarnation). */
void fl__handle_bind_process(fl_region *r);
/* The -ECHILD error for a handle used in a forked child. */
int fl__handle_forked(const fl_region *r, const char *fn);
/* 0 if r was opened by the calling process, else -ECHILD (fork.c): one load
 * of a word that never changes within a process. */
static inline int fl__handle_check(const fl_region *r, const char *fn)
{
    /* relaxed: the word changes only across fork, never under our feet */
    if (__builtin_expect(atomic_load_explicit(r->incarnation_word, memory_order_relaxed) !=
                             r->incarnation,
                         0))
        return fl__handle_forked(r, fn);
    return 0;
}
/* True if the calling process is not the one that opened r. */
static inline bool fl__handle_is_inherited(const fl_region *r)
{
    return atomic_load_explicit(r->incarnation_word, memory_order_relaxed) != r->incarnation;
}

/* ---- region.c ---- */
struct fl__params {
    uint32_t locks, records, record_size, clients, spare_buffers;
};
#define FL__DEFAULT_LOCKS 4096u
#define FL__DEFAULT_RECORDS 1024u
#define FL__DEFAULT_RECORD_SIZE 1024u
#define FL__DEFAULT_CLIENTS 1024u
#define FL__DEFAULT_SPARE_BUFFERS 64u

/* Create a region file at path with params, atomically (a complete file
 * appears under the name, or nothing).  -EEXIST if one is there already. */
int fl__region_create(const char *path, const struct fl__params *p);
/* The same with group gid ((gid_t)-1: the creator's) and mode (fencelockd
 * --group/--mode), both set before the file appears under path. */
int fl__region_create_shared(const char *path, const struct fl__params *p, gid_t gid,
                             unsigned mode);
/* Map and validate; readonly maps PROT_READ.  Does not register.  Refuses
 * (-EPERM) a directory or file another user controls (paths.c), with the
 * strict rule of a default path. */
int fl__region_map(const char *path, bool readonly, fl_region **out);
/* The same; named: the path was named by the caller (paths.c: then the
 * directory's owner is trusted). */
int fl__region_map_named(const char *path, bool readonly, bool named, fl_region **out);

void fl__region_unmap(fl_region *r);
int fl__region_resolve_path(const char *path, char *buf, size_t cap);
/* fencelockd --huge-pages: back the region with transparent huge pages where
 * the kernel allows it for its file (region.c, HUGE PAGES).  0 with *huge the
 * bytes of this mapping now on huge pages (why says if that is only part);
 * else a negative errno, nothing changed, and why (cap bytes) says what the
 * kernel allows and what to change.  Never fatal. */
int fl__region_huge_pages(fl_region *r, uint64_t *huge, char *why, size_t cap);
/* The parameters a mapped region was created with. */
void fl__region_params(const fl_region *r, struct fl__params *p);
/* hash.c: FNV-1a 64 of n bytes. */
uint64_t fl__checksum(const void *p, size_t n);
/* ---- ready.c ---- */
/* Ready the region for the boot with tag boot_tag (fl__boot_tag), or with 0
 * make it not ready: fl_open admits clients only to a ready region (ready.c,
 * READINESS).  Supervisor only. */
void fl__region_set_ready(fl_region *r, uint64_t boot_tag);
/* Take the supervisor's lock on the region (ready.c, WHO SERVES THE
 * REGION): 0, -EBUSY when another process holds it, or -errno. */
int fl__region_lock_serve(fl_region *r);
/* Whether a supervisor holds that lock now (tests it, takes nothing). */
bool fl__region_served(const fl_region *r);
/* fl_open's wait for a region readied in this boot (ready.c, READINESS):
 * 0, -EAGAIN or -EIO with the reason. */
int fl__await_ready(fl_region *r);
/* Tests without a supervisor: create a region and ready it for this boot, as
 * if a supervisor had started (its floor stays 1: no durable epoch). */
int fl__test_region_create_ready(const char *path, const struct fl__params *p);
/* Whether the region's leases belong to the current boot. */
bool fl__same_boot(const fl_region *r);
/* Test hook: substitute the handle's clock. */
void fl__region_set_clock(fl_region *r, fl__clock_fn fn, void *ctx);

/* ---- paths.c ---- */
/* True if region_path, or else $FENCELOCK_REGION, names the region. */
bool fl__path_is_named(const char *region_path);
/* The directory of a region path into buf ("." for a bare name). */
int fl__region_dir(const char *region_path, char *buf, size_t cap);
/* Check the region's directory (paths.c); *owner gets its owner, or
 * (uid_t)-1 if it cannot be looked at.  0 or -EPERM with the reason. */
int fl__check_region_dir(const char *region_path, bool named, uid_t *owner);
/* Check the region file's owner against the caller, root and dir_owner. */
struct stat;
int fl__check_region_file(const char *path, const struct stat *st, uid_t dir_owner);

/* ---- unreg.c ---- */
/* Note in the region's header that this handle runs unregistered, and why
 * (err: the registration's negative error).  Best effort, display only. */
void fl__unreg_note(fl_region *r, int err);
/* Clear the entry fl__unreg_note wrote, if it is still ours (fl_close). */
void fl__unreg_clear(fl_region *r);

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
void fl__keytab_locks(fl_region *r, struct fl__keytab *t);
void fl__keytab_records(fl_region *r, struct fl__keytab *t);
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
int fl__lock_find_or_create(fl_region *r, const char *key, uint32_t *idx);
/* Copy entry idx's key (NUL-terminated, clamped) into out[FL_KEY_MAX + 1] and
 * tell whether it is published in the index: 0, or -ENOENT. */
int fl__key_published(const struct fl__keytab *t, uint32_t idx, char out[FL_KEY_MAX + 1]);
/* Entries handed out so far, clamped to capacity (shared memory is untrusted). */
uint32_t fl__keytab_used(const struct fl__keytab *t);

/* ---- slot.c ---- */
static inline struct fl__slot *fl__slot_at(const fl_region *r, uint32_t i) { return &r->slots[i]; }
/* Lock slots handed out so far, clamped to the capacity: a slot a lease or
 * key handle names must be below it.  fl__keytab_used() of the lock table,
 * without building the table (release and renew check it every time). */
static inline uint32_t fl__locks_used(const fl_region *r)
{
    /* relaxed: a count for bounds, not a publication (keys.c) */
    uint32_t n = atomic_load_explicit(&r->hdr->next_lock, memory_order_relaxed);
    return n < r->lock_capacity ? n : r->lock_capacity;
}
/* Called for each lock the supervisor frees: slot index and its token. */
typedef void (*fl__freed_fn)(void *ctx, uint32_t slot, uint64_t token);
/* Free every lock held by client index `client` (it died or closed). Returns
 * how many were freed.  Supervisor only. */
uint32_t fl__slots_reap_client(fl_region *r, uint32_t client, fl__freed_fn fn, void *ctx);
/* Void every held lease (a new boot) and zero the waiter counts.
 * Supervisor only, before clients open. */
uint32_t fl__slots_void_all(fl_region *r, fl__freed_fn fn, void *ctx);
/* Wake the sleepers of every key that has any (after clients went away:
 * one may have died between its release and its wake).  Supervisor only. */
void fl__slots_wake_sleepers(fl_region *r);
/* The newest token slot i has handed out. */
uint64_t fl__slot_token(const fl_region *r, uint32_t i);

/* ---- wait.c ---- */
/* Sleep while *word == expected, until the absolute CLOCK_MONOTONIC time
 * deadline_ns (0: no deadline).  Returns 0 when woken or when the value had
 * changed, -ETIMEDOUT, or -EINTR. */
int fl__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns);
void fl__futex_wake_all(_Atomic uint32_t *word);

/* ---- client.c ---- */
/* Register with the supervisor listening beside the region. 0; -ECONNREFUSED /
 * -ENOENT when none listens (the caller opens unregistered); -ENXIO; -EUSERS
 * (its client table is full, or it is out of file descriptors: fl_last_error()
 * says which). */
int fl__client_register(fl_region *r);
/* Tell the supervisor that this handle closes cleanly, so that it logs the
 * client as "closed", not "died".  Call it in fl_close after the handle's
 * own locks are freed and before the socket is shut down, from the process
 * that opened the handle (never from a forked child using the parent's
 * handle: the goodbye would end the parent's registration).  Sends at most
 * once per handle; a no-op for an unregistered handle or a supervisor that
 * does not take goodbyes.  Never blocks. */
void fl__client_goodbye(fl_region *r);
/* Socket path of a region: path + ".sock". */
int fl__socket_path(const char *region_path, char *buf, size_t cap);

/* Registration protocol (fixed-size messages on a SOCK_SEQPACKET socket). */
#define FL__HELLO_MAGIC 0x31434c46u /* "FLC1" */
#define FL__REPLY_MAGIC 0x31534c46u /* "FLS1" */
#define FL__GOODBYE_MAGIC 0x31424c46u /* "FLB1" */
#define FL__PROTO_VERSION 1u
struct fl__hello {
    uint32_t magic;
    uint32_t version;
    uint32_t pid;      /* informational: the client's own view of its pid */
    uint32_t reserved;
};
/* Refusal statuses: -EUSERS the client table is full; -EMFILE the supervisor
 * is out of file descriptors (the client's fl_open returns -EUSERS for both,
 * fl_last_error() says which); -EPROTO, -EPROTONOSUPPORT a bad hello. */
struct fl__reply {
    uint32_t magic;
    int32_t status;    /* 0 or -errno */
    uint32_t client;   /* client table index */
    uint32_t flags;    /* FL__REPLY_*; 0 from supervisors older than the flag */
    uint64_t client_id;
    uint64_t dev, ino; /* the region file the supervisor serves */
};
#define FL__REPLY_TAKES_GOODBYE 0x1u /* send a goodbye before a clean close */
/* A clean close, sent by fl_close (fl__client_goodbye) on the registration
 * socket just before it shuts the socket down.  Without it the end of the
 * connection is a death ("died" in the log), whatever /proc still shows. */
struct fl__goodbye {
    uint32_t magic;
    uint32_t reserved;  /* 0 */
    uint64_t client_id; /* the id the reply assigned */
};

/* ---- keepalive.c ---- */
/* Stop the handle's keepalive thread (fl_close). */
void fl__keepalive_shutdown(fl_region *r);

_Static_assert(FL__OP_COMMIT == FL_OP_COMMIT && FL__OP_STRICT_COMMIT == FL_OP_STRICT_COMMIT &&
                   FL__OP_RENEW == FL_OP_RENEW && FL__OP_RELEASE == FL_OP_RELEASE,
               "the log and the inspection API name operations alike");

/* ---- events.c ---- */
struct fl__event_data {
    uint32_t type, pid, slot, record; /* record: index + 1, 0 for none */
    uint64_t token, other_token, late_ns, time_ns;
    uint32_t op, flags;
};
/* Post an event for the supervisor; drops it (counted) when the ring is full. */
void fl__event_post(fl_region *r, const struct fl__event_data *d);
struct fl__event_reader {
    uint64_t stuck_pos, stuck_since; /* start with stuck_pos = UINT64_MAX */
};
typedef void (*fl__event_fn)(void *ctx, const struct fl__event_data *d);
/* Supervisor: hand every published event to fn, in order.  Returns how many. */
uint32_t fl__events_drain(fl_region *r, struct fl__event_reader *rd, fl__event_fn fn, void *ctx);

/* ---- proto.c ---- */
/* Parse a hello from untrusted bytes: 0, -EPROTO or -EPROTONOSUPPORT, with
 * the reason in why. */
int fl__hello_parse(const void *buf, size_t n, struct fl__hello *out, char *why, size_t whycap);
/* Parse a supervisor's reply: 0 or -EPROTO (reason in why); out->status may
 * itself be a refusal (negative errno). */
int fl__reply_parse(const void *buf, size_t n, uint32_t client_capacity, struct fl__reply *out,
                    char *why, size_t whycap);
/* Parse a message from a registered client (a goodbye): 0 or -EPROTO with
 * the reason in why.  The caller compares client_id with its table. */
int fl__goodbye_parse(const void *buf, size_t n, struct fl__goodbye *out, char *why,
                      size_t whycap);

/* ---- record.c ---- */
/* Release staging buffers of a dead client and publish those its commit had
 * made current.  Supervisor only.  Returns how many it touched. */
uint32_t fl__buffers_reap_client(fl_region *r, uint32_t client);
/* The same for every owner: a new boot, where every writer is gone.
 * Supervisor only, before the region is ready. */
uint32_t fl__buffers_reap_all(fl_region *r);
/* Called for each record whose value cannot be vouched for. */
typedef void (*fl__unvouched_fn)(void *ctx, uint32_t record);
/* Check every record's current value against its buffer (record.c, THE
 * BUFFER SUM); mark those that fail FL__CUR_UNVOUCHED.  Returns how many are
 * unvouched (newly or already).  Supervisor only, before readying. */
uint32_t fl__records_vouch(fl_region *r, fl__unvouched_fn fn, void *ctx);
static inline struct fl__buffer *fl__buffer_at(const fl_region *r, uint32_t i)
{
    return (struct fl__buffer *)(void *)(r->buffers + (size_t)i * r->buffer_stride);
}

#endif /* FL_INTERNAL_H */
