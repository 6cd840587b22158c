/* SPDX-License-Identifier: MIT */
/*
 * supervise.h - what the library offers its supervisor, fencelockd: the one
 * header of the library fencelockd includes (src/fencelockd/fencelockd.h),
 * with the public fencelock.h and the registration protocol (proto.h) it
 * pulls in.  Not installed; nothing here is exported from libfencelock.so
 * (fencelockd links the static library).
 *
 * The handle stays opaque: every write the supervisor makes to the shared
 * format goes through a function below, and each lives beside the protocol
 * it must keep: the lock words in slot.c, buffers and records in record.c,
 * the event ring in events.c, readiness and the serving lock in ready.c,
 * creation and mapping in region.c.  supervise.c holds the supervisor's own
 * fields (the client table, the token floor, the boot id, the run state and
 * the counters of the header) and composes the rest.  Nothing here hands the
 * supervisor a pointer into the mapping; fl__sup_region_mapping gives its
 * bounds for the SIGBUS handler to compare addresses with, never to read.
 *
 * Each function says in which context it may be called:
 *   ANY      any process with a handle, any time (reads, or process-local).
 *   OWNER    the supervisor before it takes the serving lock: creating,
 *            mapping and checking a region.
 *   START    the supervisor holding the serving lock
 *            (fl__region_lock_serve), after fl__region_set_ready(r, 0) and
 *            before it readies the region: fl_open admits no new client, so
 *            nothing of this boot takes a token from a floor not yet
 *            durable (I1).  Handles opened before a supervisor restart in
 *            the same boot keep working meanwhile (I10).
 *   SERVING  the supervisor holding the serving lock, in its one thread:
 *            START or its event loop.  It is the only writer of the client
 *            table, the floor, boot_id, run_state and supervisor_pid, so
 *            it reads them back relaxed.
 *
 * The backend's own files see this header through shm.h, and some of
 * its functions serve both (fl__region_map is also fl_open's); the
 * supervisor-only ones are marked SERVING or START.
 */
#ifndef FL_SUPERVISE_H
#define FL_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../core.h" /* the sizes, the clocks, fl__checksum */
#include "fencelock.h"
#include "proto.h"

/* A handle on a region file (shm.h); opaque here. */
struct fl__shm;

/* ---- paths (region.c, paths.c, client.c); ANY ---- */
/* fl__region_resolve_path (core.h) resolves the region path. */
/* The directory of a region path into buf ("." for a bare name). */
int fl__region_dir(const char *region_path, char *buf, size_t cap);
/* Socket path of a region: path + ".sock" (0 or -ENAMETOOLONG). */
int fl__socket_path(const char *region_path, char *buf, size_t cap);

/* ---- creating and mapping a region (region.c); OWNER ---- */
struct fl__params {
    uint32_t locks, records, record_size, clients, spare_buffers;
};
/* fencelockd's defaults for a new region. */
#define FL__DEFAULT_LOCKS 4096u
#define FL__DEFAULT_RECORDS 1024u
#define FL__DEFAULT_RECORD_SIZE 1024u
#define FL__DEFAULT_CLIENTS 1024u
#define FL__DEFAULT_SPARE_BUFFERS 64u
/* The least and greatest value of each parameter a region can be created
 * with (the layout's limits, format.h).  ANY. */
void fl__params_limits(struct fl__params *min, struct fl__params *max);
/* Create a region file at path with group gid ((gid_t)-1: the creator's)
 * and mode, both set before the file appears under path: a complete file
 * appears, or nothing.  0, -EEXIST if one is there already, or -errno with
 * fl_last_error() saying what failed. */
int fl__region_create_shared(const char *path, const struct fl__params *p, gid_t gid,
                             unsigned mode);
/* Map and validate a region; readonly maps PROT_READ.  Does not register.
 * Refuses (-EPERM) a directory or file another user controls (paths.c),
 * with the strict rule of a default path.  0, or -errno with
 * fl_last_error() naming what is wrong (I9). */
int fl__region_map(const char *path, bool readonly, struct fl__shm **out);
/* Unmap and free a handle of fl__region_map (NULL: nothing). */
void fl__region_unmap(struct fl__shm *r);
/* The public handle of a region the supervisor mapped, for the public API
 * (fl_region_path, the inspection functions fl__metrics_write reads).  Like
 * strchr, it takes a const handle and gives a handle the caller may use as
 * its own was.  ANY. */
fl_region *fl__sup_handle(const struct fl__shm *r);
/* The parameters a mapped region was created with.  ANY. */
void fl__region_params(const struct fl__shm *r, struct fl__params *p);
/* The region file's descriptor, owned by the handle (fstat, fchown,
 * fchmod; never close it).  ANY. */
int fl__sup_region_fd(const struct fl__shm *r);
/* Where the mapping lies: for the SIGBUS handler (fencelockd sigbus.c) to
 * tell a fault in the region from any other.  Compare, never dereference.
 * ANY. */
void fl__sup_region_mapping(const struct fl__shm *r, const void **base, size_t *size);
/* Write the mapping back to its file (msync MS_SYNC; nothing to do on
 * tmpfs).  0 or -errno.  SERVING. */
int fl__sup_region_flush(struct fl__shm *r);
/* fencelockd --huge-pages: back the region with transparent huge pages where
 * the kernel allows it for its file (region.c, HUGE PAGES).  0 with *huge the
 * bytes of this mapping now on huge pages (why says if that is only part);
 * else a negative errno, nothing changed, and why (cap bytes) says what the
 * kernel allows and what to change.  Never fatal.  OWNER or START. */
int fl__region_huge_pages(struct fl__shm *r, uint64_t *huge, char *why, size_t cap);

/* ---- serving the region (ready.c, supervise.c) ---- */
/* Take the supervisor's lock on the region (ready.c, WHO SERVES THE
 * REGION): 0, -EBUSY when another process holds it, or -errno.  OWNER; it
 * turns OWNER into START. */
int fl__region_lock_serve(struct fl__shm *r);
/* Ready the region for the boot with tag boot_tag (fl__sup_boot.tag), or
 * with 0 make it not ready: fl_open admits clients only to a ready region
 * (ready.c, READINESS).  Ready it last, after the floor is durable, the old
 * boot's leases voided and the records vouched for.  START. */
void fl__region_set_ready(struct fl__shm *r, uint64_t boot_tag);
/* The pid the serving supervisor wrote (0: none; display only, the lock
 * says who serves).  ANY. */
uint32_t fl__sup_supervisor_pid(const struct fl__shm *r);
/* Say which process serves (its pid once it listens, 0 when it stops).
 * SERVING. */
void fl__sup_set_supervisor_pid(struct fl__shm *r, uint32_t pid);
/* How the last supervisor left the region (the header's run_state,
 * format.h FL__RUN_*; supervise.c asserts the values agree). */
enum fl__sup_run {
    FL__SUP_RUN_NEVER = 0,   /* never served */
    FL__SUP_RUN_RUNNING = 1, /* a supervisor runs, or died without shutting down */
    FL__SUP_RUN_CLEAN = 2,   /* the last supervisor flushed and shut down cleanly */
};
/* The run state found (any other value reads as NEVER).  ANY. */
enum fl__sup_run fl__sup_last_run(const struct fl__shm *r);
/* Mark the region served since started_unix_ns (wall clock, display).
 * START, once the new epoch is durable. */
void fl__sup_mark_running(struct fl__shm *r, uint64_t started_unix_ns);
/* Mark a clean shutdown at clean_unix_ns (wall clock, display).  SERVING,
 * last, after fl__sup_region_flush: "clean" promises what is on disk. */
void fl__sup_mark_clean(struct fl__shm *r, uint64_t clean_unix_ns);

/* ---- a new boot (supervise.c over slot.c and record.c); START ---- */
/* Called for each lock freed by the supervisor: slot index and its token. */
typedef void (*fl__freed_fn)(void *ctx, uint32_t slot, uint64_t token);
struct fl__sup_boot {
    char now[FL__BOOT_ID_SIZE];      /* this boot's id */
    char previous[FL__BOOT_ID_SIZE]; /* the region's, as found */
    uint64_t tag;                    /* this boot's tag, for fl__region_set_ready */
    bool new_boot;                   /* previous != now: the work below was done */
    uint32_t leases_voided, buffers_released;
};
/* Read this boot's id and compare it with the region's.  For a region of
 * an earlier boot, every lease in it is void (I11: fn is called for each,
 * with FL_LEASE_EXPIRED told to the next holder), every client of its table
 * is gone and so is every commit in flight: they are voided and freed, and
 * the region takes this boot's id.  0, or -errno when this boot's id cannot
 * be read (then nothing is touched: fail closed, the caller must not ready
 * the region).  START. */
int fl__sup_adopt_boot(struct fl__shm *r, fl__freed_fn fn, void *ctx, struct fl__sup_boot *out);

/* ---- the token epoch (supervise.c over slot.c); SERVING ---- */
/* Every new token is >= the floor (slot.c).  ANY. */
uint64_t fl__sup_token_floor(const struct fl__shm *r);
/* Raise the floor to floor.  Call it only once the epoch of floor is
 * durable (fencelockd epoch.c: I1).  0, or -ERANGE if floor is not above
 * the current floor (nothing is stored: the floor never goes down). */
int fl__sup_raise_floor(struct fl__shm *r, uint64_t floor);
/* Lock slots handed out so far (clamped to the capacity: shared memory is
 * untrusted).  ANY. */
uint32_t fl__sup_lock_count(struct fl__shm *r);
/* The newest token slot has handed out; 0 beyond fl__sup_lock_count.  ANY. */
uint64_t fl__sup_lock_token(struct fl__shm *r, uint32_t slot);
/* The key of lock slot `slot` (0-based) or of record `record` (0-based)
 * into out, NUL-terminated: 0, or -ENOENT (out is "") for an index beyond
 * those handed out or one whose key is not published.  ANY. */
int fl__sup_lock_key(struct fl__shm *r, uint32_t slot, char out[FL_KEY_MAX + 1]);
int fl__sup_record_key(struct fl__shm *r, uint32_t record, char out[FL_KEY_MAX + 1]);

/* ---- records (supervise.c over record.c); START ---- */
/* Called for each record whose value cannot be vouched for. */
typedef void (*fl__unvouched_fn)(void *ctx, uint32_t record);
/* Check every record's current value against its buffer's sum (record.c,
 * THE BUFFER SUM); mark those that fail (reads answer -EBADMSG until the
 * next commit) and call fn for each; store the count in the header for the
 * status tool.  Returns how many are unvouched (newly or already). */
uint32_t fl__sup_vouch_records(struct fl__shm *r, fl__unvouched_fn fn, void *ctx);

/* ---- the client table (supervise.c over slot.c and record.c) ---- */
/* Entries of the client table, entry 0 (unregistered) included: indexes
 * 1 .. capacity - 1 are clients.  ANY. */
uint32_t fl__sup_client_capacity(const struct fl__shm *r);
/* One entry as the supervisor wrote it. */
struct fl__sup_client {
    uint32_t pid, uid;
    uint64_t client_id;
    uint64_t start_time; /* of pid (fl__process_start_time), 0 if unknown */
};
/* Read entry i (0 < i < capacity): true and *out if it holds a client
 * (attached or adopted), false if it is free.  SERVING. */
bool fl__sup_client_read(const struct fl__shm *r, uint32_t i, struct fl__sup_client *out);
/* Whether entry i's process is still the one that registered: pid alive
 * with the start time recorded (pids are reused; LMDB's reader table
 * re-checks the same way).  SERVING. */
bool fl__sup_client_alive(const struct fl__shm *r, uint32_t i);
/* Fill free entry i for process pid (uid) and publish it (release): a new
 * client id, and the process's start time, so that a later supervisor can
 * tell it from a process that reuses its pid.  0 and *id, or -EMFILE /
 * -ENFILE when the start time cannot be read for lack of descriptors (the
 * entry stays free: refuse the client rather than record a wrong one).
 * SERVING. */
int fl__sup_client_attach(struct fl__shm *r, uint32_t i, pid_t pid, uid_t uid, uint64_t *id);
/* Mark entry i adopted: kept from before a supervisor restart, watched by
 * pid (registry_adopt).  SERVING. */
void fl__sup_client_adopt(struct fl__shm *r, uint32_t i);
struct fl__sup_reaped {
    uint32_t locks;   /* locks freed (FL_LEASE_OWNER_DIED for the next holder) */
    uint32_t buffers; /* commit buffers released or published */
};
/* Free everything client i holds: its locks (fn for each; their waiters
 * are woken) and its commit buffers; then free the entry (release: the
 * reaping happens before the entry reads free, for the tools; only the
 * supervisor hands entries out).  For a client that died or closed.
 * SERVING. */
void fl__sup_client_reap(struct fl__shm *r, uint32_t i, fl__freed_fn fn, void *ctx,
                         struct fl__sup_reaped *out);
/* Wake the sleepers of every key that has any (slot.c says why): after a
 * round of events in which clients went away, and once at start.
 * SERVING. */
void fl__slots_wake_sleepers(struct fl__shm *r);
/* Count one refused registration in the header (the status tool shows
 * it).  SERVING. */
void fl__sup_count_refusal(struct fl__shm *r);

/* ---- the event ring (events.c); SERVING: its only consumer ---- */
struct fl__event_data {
    uint32_t type, pid, slot, record; /* record: index + 1, 0 for none */
    uint64_t token, other_token, late_ns, time_ns;
    uint32_t op, flags; /* op: FL_OP_* (fencelock.h) */
};
/* fl__event_data.type and .flags: the ring's values (format.h FL__EV_*,
 * FL__EVF_*), named again for the supervisor, which sees no layout;
 * supervise.c asserts that both agree. */
enum fl__sup_event_type {
    FL__SUP_EVENT_REJECTED = 1,  /* a stale token refused: commit, renew or release */
    FL__SUP_EVENT_TAKEOVER = 2,  /* an expired lease taken over */
    FL__SUP_EVENT_ABANDONED = 3, /* a lock freed by fl_close of a handle that held it */
};
#define FL__SUP_EVENT_REPEAT 1u /* the token had been rejected on this record before */
#define FL__SUP_EVENT_DIED 2u   /* ABANDONED: the holder died; pid is the waiter that
                                   saw its life word die and freed the lock */
struct fl__event_reader {
    uint64_t stuck_pos, stuck_since; /* start with stuck_pos = UINT64_MAX */
};
typedef void (*fl__event_fn)(void *ctx, const struct fl__event_data *d);
/* Hand every published event to fn, in order (at most one ring's worth per
 * call).  The fields come from shared memory: untrusted, check indexes
 * before use.  Returns how many. */
uint32_t fl__events_drain(struct fl__shm *r, struct fl__event_reader *rd, fl__event_fn fn, void *ctx);
/* Events not logged so far (ring full, or a producer stopped while
 * posting).  ANY. */
uint64_t fl__sup_events_dropped(const struct fl__shm *r);
/* CLOCK_MONOTONIC now on the host's clock, the clock of fl__event_data's
 * time_ns (differs from this process's own inside a time namespace).  ANY. */
uint64_t fl__sup_host_now_ns(const struct fl__shm *r);


#endif /* FL_SUPERVISE_H */
