/* SPDX-License-Identifier: MIT */
/*
 * format.h - the byte-level layout of a fencelock region file.
 *
 * A region is one file, mapped MAP_SHARED by the supervisor and every client.
 * All integers are little-endian native words (the region never leaves its
 * host); every offset below is from the start of the file.
 *
 *   0      header           FL__HEADER_SIZE bytes (one page)
 *          clients          client_capacity  x FL__CLIENT_SIZE  (entry 0 unused)
 *          lock slots       lock_capacity    x FL__SLOT_SIZE
 *          lock index       lock_index_cap   x 4 (uint32 bucket: hash bits << 24 | slot + 1,
 *                                                 0 = empty; keys.c)
 *          records          record_capacity  x FL__RECORD_SIZE
 *          record index     record_index_cap x 4
 *          buffers          buffer_count     x buffer_stride (64-byte header + data)
 *          events           event_count      x FL__EVENT_SIZE (ring, events.c)
 *
 * Every section starts on a 64-byte boundary.  Index capacities are powers
 * of two at least twice their table's capacity, so an index is at most half
 * full and every probe ends at an empty bucket.
 *
 * HEADER (offsets in bytes)
 *   0   magic[8]            "FENCELK\0"
 *   8   u32 format_version  FL__FORMAT_VERSION
 *   12  u32 header_size     FL__HEADER_SIZE
 *   16  u32 byte_order      0x01020304 as written by the creating host
 *   20  u32 layout_sig      FL__LAYOUT_SIG: the sizes the layout depends on;
 *                           a build with other struct sizes refuses the file
 *   24  u32 lock_capacity, 28 lock_index_cap, 32 record_capacity,
 *   36  u32 record_index_cap, 40 record_size, 44 buffer_count,
 *   48  u32 client_capacity, 52 u32 reserved (0)
 *   56  u64 clients_off, 64 slots_off, 72 lock_index_off, 80 records_off,
 *   88  u64 record_index_off, 96 buffers_off, 104 buffer_stride, 112 file_size
 *   120 u64 created_unix_ns  (wall clock, display only)
 *   128 u64 events_off, 136 u32 event_count (a power of two), 140 u32 reserved
 *   144 u64 checksum         FNV-1a 64 of bytes 0..143; the fields above never
 *                            change after creation
 *   -- mutable part, not checksummed, every field validated on use --
 *   192 u32 next_lock        slots handed out (bounded by lock_capacity)
 *   196 u32 next_record      records handed out
 *   200 u64 token_floor      every new token is >= this (durability, issue 4)
 *   208 u64 next_client_id   supervisor-assigned client ids
 *   216 u32 supervisor_pid   0 when none has served the region
 *   220 u32 buffer_hint      where buffer allocation scans from
 *   224 char boot_id[40]     boot the region's leases belong to (NUL-padded);
 *                            written only by the supervisor, before clients of
 *                            a new boot may open the region
 *   264 u32 run_state        FL__RUN_NEVER / _RUNNING / _CLEAN (supervisor)
 *   268 u32 reserved
 *   272 u64 started_unix_ns  last supervisor start (wall clock, display only)
 *   280 u64 clean_unix_ns    last clean shutdown (wall clock, display only)
 *   288 u64 event_head       next event position producers claim (events.c)
 *   296 u64 event_tail       next event position the supervisor reads
 *   304 u64 events_dropped   events not logged: ring full, or a producer that
 *                            stopped between claiming and publishing
 *   312 u64 ready_boot       READINESS: the boot tag (fl__boot_tag: FNV-1a 64
 *                            of the boot id, never 0) of the boot for which a
 *                            supervisor made the current epoch durable, raised
 *                            token_floor and vouched for the records; 0 while
 *                            none has.  fl_open refuses a region whose
 *                            ready_boot is not this boot's (I1): a supervisor
 *                            clears it when it starts and stores it (release)
 *                            only after all of that, so no client can take a
 *                            token from a floor that is not yet durable.
 *   320 u32 ready_wake       futex word bumped after ready_boot is stored;
 *                            fl_open sleeps on it while a supervisor starts
 *   324 u32 records_unvouched  records the last start found it could not
 *                            vouch for (display; see RECORD cur)
 *   -- unregistered clients (display only, written by any client) --
 *   328 u32 unreg_next       entries ever claimed; a client claims entry
 *                            unreg_next % FL__UNREG_COUNT by fetch-add, so the
 *                            table keeps the latest 32 and overwrites the oldest
 *   332 u32 reserved
 *   336 UNREGISTERED ENTRY[FL__UNREG_COUNT] (FL__UNREG_SIZE = 32 each, to 1360):
 *       0  u32 seq           claim number + 1 once filled, 0 while being
 *                            written or after its client closed (seqlock:
 *                            a reader keeps an entry only if seq is nonzero
 *                            and the same before and after it copied the
 *                            fields; see region.c UNREGISTERED CLIENTS)
 *       4  u32 pid           the client, in its own pid namespace
 *       8  u32 uid           its real uid
 *       12 u32 reason        why it is not registered: a positive errno
 *                            (ECONNREFUSED, ENOENT: no supervisor; EACCES:
 *                            the socket refused it; ...)
 *       16 u64 start_time    jiffies since boot of pid (/proc/PID/stat):
 *                            tells a reused pid from the original
 *       24 u64 time_unix_ns  when it opened (wall clock, display only)
 *   1360 u64 clients_refused  registrations the supervisor refused (client
 *                            table full, or out of file descriptors); written
 *                            by the supervisor only, display only
 *   1368 .. 4095 unused (zero)
 *
 * LOCK SLOT (FL__SLOT_SIZE = 320; the lock-word state machine is in slot.c)
 *   0   u64 state    token << 1 | HELD.  Written together with `lease` by one
 *                    16-byte compare-and-swap (slot.c explains why).
 *   8   u64 lease    HELD:  owner client index << 48 | deadline in microseconds
 *                           of CLOCK_MONOTONIC (48 bits)
 *                    FREE:  how the last holding ended (FL__FREED_*)
 *   16  u32 wake_seq futex word: bumped by every wake of the key's sleepers
 *   20  u32 waiters  processes between deciding to sleep and waking up
 *   24  key: u32 hash, u32 len, char bytes[128]  (immutable once published;
 *                    hash: keys.c THE KEY HASH; bytes zero beyond len)
 *   160 u32 holder_pid (informational, written after acquire)
 *   164 u32 wake_needed  1: a sleeper may need the next release's wake; set
 *                    by waiters and by contended acquisitions, cleared by
 *                    the release that wakes one (slot.c, WAITING).  On the
 *                    line the holder writes anyway, not the pair's.
 *   168 u64 holder_client_id (informational)
 *   176 u64 counters[10]: acquisitions, contended, expiries_taken, deaths,
 *                        renewals, renew_failed, releases, release_failed,
 *                        busy (tries that found the key held), timeouts
 *                        (waits that ended with the key still held).
 *                        acquisitions, contended, expiries_taken and releases
 *                        are written by the key's holder with plain stores,
 *                        releases by the acquisition after the release; the
 *                        others by locked adds (slot.c, COUNTERS)
 *   256 u64 last_stale_token, 264 u32 last_stale_pid, 268 u32 last_stale_op
 *                        (the last renew or release refused as stale)
 *   272 u64 spin_holding  the state word of the last holding that a waiter
 *                        claimed to spin on while others slept (slot.c,
 *                        SPINNING); a hint, relaxed, orders nothing
 *   280 u64 holder_cpu   (token & FL__HOLDER_CPU_TOKEN_MASK) << 16 | CPU
 *                        the holder ran on when it took the key, written by
 *                        contended acquisitions that leave sleepers behind
 *                        only (slot.c, SPINNING); a hint: any value is safe
 *   288 reserved (32 bytes)
 *   Both hints were reserved zero bytes before (same format 6): a library
 *   that does not know them never writes them, and never spins behind
 *   sleepers; nothing any library relies on for exclusion, tokens or
 *   wakes is in them.
 *   The first cache line holds what a lookup and a handoff touch: the pair,
 *   the futex word and the key's header with its first 32 bytes.  The
 *   statistics and holder fields, written on every acquisition and release,
 *   live on later lines, so a waiter polling the pair does not take them
 *   from the holder (format 1 had them on the pair's line; docs/benchmarks.md
 *   measures the move).
 *
 * CLIENT ENTRY (FL__CLIENT_SIZE = 128)
 *   written by the supervisor only:
 *   0 u32 state (FL__CLIENT_FREE / _ATTACHED / _ADOPTED), 4 u32 pid, 8 u32 uid,
 *   16 u64 client_id, 24 u64 start_time (jiffies since boot, from
 *   /proc/PID/stat: tells a reused pid from the original)
 *   written by the client that occupies the entry (life.c), and by waiters:
 *   12 u32 life_tid     the thread id with which the client's life thread
 *                       holds the life word; 0: no life word (none started,
 *                       closed, or not yet).  Cleared by the occupant before
 *                       anything else, stored (release) once the word is held.
 *   32 .. 63 reserved (0)
 *   64 life word area (64 bytes, its own cache line): a process-shared,
 *      robust glibc pthread_mutex_t that the client's life thread holds for
 *      the client's life.  Its first u32 is the mutex's futex word (glibc,
 *      x86-64 and arm64: checked at build time and when it is locked):
 *      the holding thread's id, FUTEX_WAITERS (bit 31) set by waiters that
 *      sleep on it, FUTEX_OWNER_DIED (bit 30, the id cleared) set by the
 *      kernel when the life thread exits without unlocking: the process
 *      died or called execve.  life.c says how waiters use it.
 *
 * RECORD (FL__RECORD_SIZE = 256; the commit protocol is in record.c)
 *   0   u64 cur          reference to the current value: (buffer + 1) << 40 |
 *                        buffer generation (40 bits); 0 = never committed.
 *                        Bit 63 (FL__CUR_UNVOUCHED; buffer + 1 < 2^23 never
 *                        reaches it): the supervisor found, at start, that
 *                        the buffer named does not hold what this record's
 *                        commit wrote there (a disk region after a host
 *                        crash: pages reach the disk in no particular order).
 *                        Reads refuse it (-EBADMSG); the next commit
 *                        replaces it.
 *   8   u32 bound_slot   lock slot + 1 of the key that fences it; 0 = unbound
 *   12  u32 last_rejected_pid
 *   16  u64 commits, 24 rejections, 32 last_rejected_token,
 *   40  u64 last_rejected_accepted, 48 u32 last_rejected_op, 52 reserved
 *   56  u64 repeats      rejections whose token was among the last 4 rejected
 *   64  u64 recent_rejected[4]  (a ring, indexed by rejections % 4)
 *   104 key: as in the lock slot
 *
 * BUFFER HEADER (64 bytes, then record_size bytes rounded up to 8)
 *   0   u64 state   kind (2 bits) << 62 | owner client index << 40 | generation
 *   8   u64 token, 16 u64 version, 24 u32 record, 28 u32 len, 32 u32 writer_pid,
 *   36  u32 reserved, 40 u64 sum: fl__buffer_sum of (record, token, len,
 *       generation, the data words), written by the committer before it
 *       publishes; checked by the supervisor at start (record.c), so that a
 *       buffer whose pages reached the disk from different moments is found
 *
 * EVENT (FL__EVENT_SIZE = 64; the ring protocol is in events.c)
 *   0   u64 seq      position + 1 once published; position + count once read
 *   8   u64 time_ns  CLOCK_MONOTONIC
 *   16  u32 type (FL__EV_*), 20 u32 pid, 24 u32 slot, 28 u32 record + 1 (0: none)
 *   32  u64 token, 40 u64 other_token (accepted token / previous token)
 *   48  u64 late_ns (takeovers: how long after the deadline), 56 u32 op, 60 u32 flags
 */
#ifndef FL_FORMAT_H
#define FL_FORMAT_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FL__MAGIC "FENCELK"
/* Format versions: 2 moved the counters off the pair's cache line; 3 added
 * readiness (ready_boot) and the buffers' sums; 4 doubled the client entry
 * for the life word (life.c); 5 changed the key hash (keys.c, THE KEY HASH:
 * eight bytes at a time instead of FNV-1a byte by byte), so this build would
 * not find the keys of a format-4 index; 6 added the slot's wake_needed (a
 * format-5 library would neither set nor clear it, and a release of this one
 * would wake nobody for that library's sleepers). */
#define FL__FORMAT_VERSION 6u
#define FL__BYTE_ORDER_MARK 0x01020304u
#define FL__HEADER_SIZE 4096u
#define FL__SLOT_SIZE 320u
#define FL__RECORD_SIZE 256u
#define FL__CLIENT_SIZE 128u
#define FL__LIFE_AREA_OFFSET 64u /* the life word area of a client entry */
#define FL__LIFE_AREA_SIZE 64u
#define FL__BUFFER_HDR_SIZE 64u
#define FL__EVENT_SIZE 64u
#define FL__EVENT_COUNT 4096u
#define FL__KEY_BYTES 128u
#define FL__UNREG_COUNT 32u /* unregistered-client entries in the header */
#define FL__UNREG_SIZE 32u

/* Limits the layout can express. */
#define FL__MAX_LOCKS ((1u << 24) - 1) /* entry + 1 fits the 24 bits of an index bucket */
#define FL__MAX_RECORDS (1u << 22)
#define FL__MAX_BUFFERS ((1u << 23) - 2) /* buffer + 1 fits the 24-bit field of `cur` */
#define FL__MAX_CLIENTS 65535u           /* the owner field of a lease is 16 bits */
#define FL__MIN_RECORD_SIZE 8u
#define FL__MAX_RECORD_SIZE (64u * 1024u)

/* ---- lock state pair ---- */
#define FL__HELD 1ull
#define FL__TOKEN_SHIFT 1
#define FL__DEADLINE_BITS 48
#define FL__DEADLINE_MASK ((1ull << FL__DEADLINE_BITS) - 1)
#define FL__OWNER_SHIFT 48
/* The slot's holder_cpu hint: the token's low 48 bits over a 16-bit CPU. */
#define FL__HOLDER_CPU_SHIFT 16
#define FL__HOLDER_CPU_MASK ((1ull << FL__HOLDER_CPU_SHIFT) - 1)
#define FL__HOLDER_CPU_TOKEN_MASK ((1ull << (64 - FL__HOLDER_CPU_SHIFT)) - 1)
/* lease word while free: how the last holding ended */
#define FL__FREED_BY_DEATH (1ull << 63)
#define FL__FREED_VOID (1ull << 62) /* voided: lease of an earlier boot */

/* ---- buffers ---- */
#define FL__BUF_FREE 0ull
#define FL__BUF_STAGING 1ull
#define FL__BUF_PUBLISHED 2ull
#define FL__BUF_KIND_SHIFT 62
#define FL__BUF_OWNER_SHIFT 40
#define FL__BUF_OWNER_MASK 0xffffull
#define FL__BUF_GEN_BITS 40
#define FL__BUF_GEN_MASK ((1ull << FL__BUF_GEN_BITS) - 1)
/* ---- records ---- */
#define FL__CUR_UNVOUCHED (1ull << 63)

/* ---- supervisor run state ---- */
#define FL__RUN_NEVER 0u
#define FL__RUN_RUNNING 1u /* a supervisor runs, or died without shutting down */
#define FL__RUN_CLEAN 2u   /* the last supervisor flushed and shut down cleanly */

/* ---- clients ---- */
#define FL__CLIENT_FREE 0u
#define FL__CLIENT_ATTACHED 1u /* connected to the running supervisor */
#define FL__CLIENT_ADOPTED 2u  /* from before a supervisor restart; watched by pid */

struct fl__key {
    uint32_t hash;
    uint32_t len;
    char bytes[FL__KEY_BYTES];
};

/* The 16-byte lock state: both words change together, by cmpxchg16b. */
struct fl__pair {
    alignas(16) _Atomic uint64_t state;
    _Atomic uint64_t lease;
};

enum fl__lock_counter {
    FL__C_ACQUISITIONS,
    FL__C_CONTENDED,
    FL__C_EXPIRIES_TAKEN,
    FL__C_DEATHS,
    FL__C_RENEWALS,
    FL__C_RENEW_FAILED,
    FL__C_RELEASES,
    FL__C_RELEASE_FAILED,
    FL__C_BUSY,
    FL__C_TIMEOUTS,
    FL__C_COUNT
};

struct fl__slot {
    struct fl__pair pair;
    _Atomic uint32_t wake_seq;
    _Atomic uint32_t waiters;
    struct fl__key key;
    _Atomic uint32_t holder_pid;
    _Atomic uint32_t wake_needed;
    _Atomic uint64_t holder_client_id;
    _Atomic uint64_t counters[FL__C_COUNT];
    _Atomic uint64_t last_stale_token;
    _Atomic uint32_t last_stale_pid;
    _Atomic uint32_t last_stale_op;
    _Atomic uint64_t spin_holding;
    _Atomic uint64_t holder_cpu;
    char reserved1[FL__SLOT_SIZE - 288];
};

struct fl__client {
    _Atomic uint32_t state;
    _Atomic uint32_t pid;
    _Atomic uint32_t uid;
    _Atomic uint32_t life_tid;
    _Atomic uint64_t client_id;
    _Atomic uint64_t start_time;
    char reserved0[FL__LIFE_AREA_OFFSET - 32];
    /* a pthread_mutex_t (life.c); its first u32 is the futex word */
    alignas(64) unsigned char life[FL__LIFE_AREA_SIZE];
};

struct fl__record {
    _Atomic uint64_t cur;
    _Atomic uint32_t bound_slot;
    _Atomic uint32_t last_rejected_pid;
    _Atomic uint64_t commits;
    _Atomic uint64_t rejections;
    _Atomic uint64_t last_rejected_token;
    _Atomic uint64_t last_rejected_accepted;
    _Atomic uint32_t last_rejected_op;
    uint32_t reserved0;
    _Atomic uint64_t repeats;
    _Atomic uint64_t recent_rejected[4];
    uint64_t reserved1;
    struct fl__key key;
    char pad[FL__RECORD_SIZE - 104 - sizeof(struct fl__key)];
};

struct fl__buffer {
    _Atomic uint64_t state;
    _Atomic uint64_t token;
    _Atomic uint64_t version;
    _Atomic uint32_t record;
    _Atomic uint32_t len;
    _Atomic uint32_t writer_pid;
    uint32_t reserved0;
    _Atomic uint64_t sum;
    char pad[FL__BUFFER_HDR_SIZE - 48];
    _Atomic uint64_t data[]; /* record_size rounded up to 8 bytes */
};

/* An unregistered client, noted by its own fl_open (see format above). */
struct fl__unreg {
    _Atomic uint32_t seq;
    _Atomic uint32_t pid;
    _Atomic uint32_t uid;
    _Atomic uint32_t reason;
    _Atomic uint64_t start_time;
    _Atomic uint64_t time_unix_ns;
};

struct fl__header {
    /* immutable, checksummed */
    char magic[8];
    uint32_t format_version;
    uint32_t header_size;
    uint32_t byte_order;
    uint32_t layout_sig;
    uint32_t lock_capacity;
    uint32_t lock_index_cap;
    uint32_t record_capacity;
    uint32_t record_index_cap;
    uint32_t record_size;
    uint32_t buffer_count;
    uint32_t client_capacity;
    uint32_t reserved0;
    uint64_t clients_off;
    uint64_t slots_off;
    uint64_t lock_index_off;
    uint64_t records_off;
    uint64_t record_index_off;
    uint64_t buffers_off;
    uint64_t buffer_stride;
    uint64_t file_size;
    uint64_t created_unix_ns;
    uint64_t events_off;
    uint32_t event_count;
    uint32_t reserved3;
    uint64_t checksum;
    char reserved1[192 - 152];
    /* mutable */
    _Atomic uint32_t next_lock;
    _Atomic uint32_t next_record;
    _Atomic uint64_t token_floor;
    _Atomic uint64_t next_client_id;
    _Atomic uint32_t supervisor_pid;
    _Atomic uint32_t buffer_hint;
    char boot_id[40];
    _Atomic uint32_t run_state;
    uint32_t reserved2;
    _Atomic uint64_t started_unix_ns;
    _Atomic uint64_t clean_unix_ns;
    _Atomic uint64_t event_head;
    _Atomic uint64_t event_tail;
    _Atomic uint64_t events_dropped;
    _Atomic uint64_t ready_boot;
    _Atomic uint32_t ready_wake;
    _Atomic uint32_t records_unvouched;
    _Atomic uint32_t unreg_next;
    uint32_t reserved4;
    struct fl__unreg unreg[FL__UNREG_COUNT];
    _Atomic uint64_t clients_refused;
    char pad[FL__HEADER_SIZE - 1368];
};

#define FL__CHECKSUMMED_BYTES 144u

/* Event types and operations (the ring: events.c). */
#define FL__EV_REJECTED 1u /* a stale token refused: commit, renew or release */
#define FL__EV_TAKEOVER 2u /* an expired lease taken over */
#define FL__EV_ABANDONED 3u /* a lock freed by fl_close of a handle that still held it,
                            * or (FL__EVF_DIED) by a waiter whose holder died */
#define FL__OP_COMMIT 1u
#define FL__OP_STRICT_COMMIT 2u
#define FL__OP_RENEW 3u
#define FL__OP_RELEASE 4u
#define FL__EVF_REPEAT 1u /* the token had been rejected on this record before */
#define FL__EVF_DIED 2u   /* FL__EV_ABANDONED: the holder died; pid is the waiter
                           * that freed its lock (life.c) */

struct fl__event {
    _Atomic uint64_t seq;
    _Atomic uint64_t time_ns;
    _Atomic uint32_t type;
    _Atomic uint32_t pid;
    _Atomic uint32_t slot;
    _Atomic uint32_t record;
    _Atomic uint64_t token;
    _Atomic uint64_t other_token;
    _Atomic uint64_t late_ns;
    _Atomic uint32_t op;
    _Atomic uint32_t flags;
};

_Static_assert(sizeof(struct fl__key) == 136, "key layout");
_Static_assert(offsetof(struct fl__slot, wake_seq) == 16, "slot layout");
_Static_assert(offsetof(struct fl__slot, holder_pid) == 160, "slot layout");
_Static_assert(offsetof(struct fl__slot, wake_needed) == 164, "slot layout");
_Static_assert(offsetof(struct fl__slot, holder_client_id) == 168, "slot layout");
_Static_assert(offsetof(struct fl__slot, counters) == 176, "slot layout");
_Static_assert(offsetof(struct fl__slot, key) == 24, "slot layout");
_Static_assert(sizeof(struct fl__slot) == FL__SLOT_SIZE, "slot size");
_Static_assert(sizeof(struct fl__client) == FL__CLIENT_SIZE, "client size");
_Static_assert(offsetof(struct fl__client, life_tid) == 12, "client layout");
_Static_assert(offsetof(struct fl__client, life) == FL__LIFE_AREA_OFFSET, "client layout");
_Static_assert(offsetof(struct fl__record, bound_slot) == 8, "record layout");
_Static_assert(offsetof(struct fl__record, last_rejected_op) == 48, "record layout");
_Static_assert(offsetof(struct fl__record, key) == 104, "record layout");
_Static_assert(sizeof(struct fl__record) == FL__RECORD_SIZE, "record size");
_Static_assert(offsetof(struct fl__buffer, len) == 28, "buffer layout");
_Static_assert(offsetof(struct fl__buffer, sum) == 40, "buffer layout");
_Static_assert(offsetof(struct fl__buffer, data) == FL__BUFFER_HDR_SIZE, "buffer layout");
_Static_assert(offsetof(struct fl__header, ready_boot) == 312, "header layout");
_Static_assert(offsetof(struct fl__header, ready_wake) == 320, "header layout");
_Static_assert(FL__MAX_BUFFERS + 1 < (1u << 23), "cur's bit 63 stays free for FL__CUR_UNVOUCHED");
_Static_assert(offsetof(struct fl__header, checksum) == 144, "header layout");
_Static_assert(offsetof(struct fl__header, event_head) == 288, "header layout");
_Static_assert(sizeof(struct fl__event) == FL__EVENT_SIZE, "event size");
_Static_assert(offsetof(struct fl__slot, last_stale_token) == 256, "slot layout");
_Static_assert(offsetof(struct fl__slot, spin_holding) == 272, "slot layout");
_Static_assert(offsetof(struct fl__slot, holder_cpu) == 280, "slot layout");
_Static_assert(offsetof(struct fl__record, repeats) == 56, "record layout");
_Static_assert(offsetof(struct fl__header, next_lock) == 192, "header layout");
_Static_assert(offsetof(struct fl__header, token_floor) == 200, "header layout");
_Static_assert(offsetof(struct fl__header, boot_id) == 224, "header layout");
_Static_assert(offsetof(struct fl__header, run_state) == 264, "header layout");
_Static_assert(offsetof(struct fl__header, clean_unix_ns) == 280, "header layout");
_Static_assert(offsetof(struct fl__header, unreg_next) == 328, "header layout");
_Static_assert(offsetof(struct fl__header, unreg) == 336, "header layout");
_Static_assert(sizeof(struct fl__unreg) == FL__UNREG_SIZE, "unregistered entry size");
_Static_assert(offsetof(struct fl__unreg, reason) == 12, "unregistered entry layout");
_Static_assert(offsetof(struct fl__unreg, start_time) == 16, "unregistered entry layout");
_Static_assert(offsetof(struct fl__unreg, time_unix_ns) == 24, "unregistered entry layout");
_Static_assert(336 + FL__UNREG_COUNT * FL__UNREG_SIZE == 1360, "header layout");
_Static_assert(offsetof(struct fl__header, clients_refused) == 1360, "header layout");
_Static_assert(sizeof(struct fl__header) == FL__HEADER_SIZE, "header size");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4,
               "atomics must be plain words to be shared between processes");

/* The sizes the layout depends on, folded into one word. */
#define FL__LAYOUT_SIG                                                                   \
    ((uint32_t)(FL__HEADER_SIZE ^ (FL__SLOT_SIZE << 8) ^ (FL__RECORD_SIZE << 12) ^       \
                (FL__CLIENT_SIZE << 20) ^ (FL__BUFFER_HDR_SIZE << 24) ^ (FL__KEY_BYTES << 4) ^ \
                (FL__EVENT_SIZE << 16)))

#endif /* FL_FORMAT_H */
