/* SPDX-License-Identifier: MIT */
/*
 * fencelock.h - leased locks with fencing tokens for the processes of one host
 * (and, on etcd, of many).
 *
 * Anything not in this header is not API.
 *
 * OVERVIEW
 *
 * A region is one memory-mapped file, created and kept by the supervisor
 * fencelockd, that holds lock slots, a key index and fenced records.  Client
 * processes map it and work on it directly with atomic instructions: acquire,
 * renew, release, commit and read make no system call when uncontended.
 *
 * Every successful acquisition of a key returns a fencing token greater than
 * every earlier token of that key (I1).  A lease ends at its deadline on
 * CLOCK_MONOTONIC unless renewed; after that another process may take the
 * key over and gets a greater token.  A holder that was paused past its
 * deadline (SIGSTOP, GC, swap) can still run code when it wakes up, so the
 * lock alone cannot protect a resource: the resource must compare tokens.
 * fl_commit() is that comparison for records kept in the region (I2), and
 * docs/write-paths.md shows it for SQL databases and files.  A -ESTALE result means
 * "ownership lost": stop, never retry with the same token.
 *
 * CONVENTIONS
 *
 * - Functions return 0 or a negative errno value; fl_strerror() names it and,
 *   after a failing call, fl_last_error() describes it in detail (for example
 *   which region file is corrupt and how).  The library never prints.
 * - All functions are thread-safe; one region handle may be shared by the
 *   threads of a process.  A handle belongs to the process that opened it:
 *   in a child after fork() every call on it returns -ECHILD (fl_close()
 *   only unmaps the child's copy); the child opens its own.  Keepalives
 *   started by the parent belong to the parent: a child must not stop them
 *   (their thread exists only in the parent).
 * - Time: lease deadlines are on CLOCK_MONOTONIC.  Processes in other time
 *   namespaces (containers, CRIU, `unshare --time`) share a region safely:
 *   each handle converts by its namespace's offset, and every deadline a
 *   caller sees is on the caller's own CLOCK_MONOTONIC.
 * - Keys and record names are NUL-terminated byte strings of 1..FL_KEY_MAX
 *   bytes.
 *
 * BACKENDS
 *
 * A region string names where the locks and records live, and fl_open()
 * chooses the backend once, from it:
 * - a file path (the default): a shared-memory region on this host, kept by
 *   fencelockd.  Everything above describes it.
 * - "SCHEME://...": a network store.  "etcd://HOST:PORT[,HOST:PORT...]/PREFIX"
 *   names an etcd v3 cluster over plain HTTP, and
 *   "etcds://[USER@]HOST:PORT[,...]/PREFIX[?cacert=F&cert=F&key=F&password-file=F]"
 *   one over TLS (the server's certificate verified against cacert or the
 *   system store), in builds made with libcurl and jansson (others answer
 *   -EPROTONOSUPPORT, saying so); any other scheme is -EPROTONOSUPPORT.
 *   What the URI does not name comes from $FENCELOCK_ETCD_CACERT,
 *   $FENCELOCK_ETCD_CERT, $FENCELOCK_ETCD_KEY, $FENCELOCK_ETCD_USER,
 *   $FENCELOCK_ETCD_PASSWORD_FILE and $FENCELOCK_ETCD_PASSWORD.  A password
 *   never goes in the URI (-EINVAL: the string is shown and passed on) and
 *   never appears in a message.
 * Every function keeps its meaning on every backend, and the tokens of one
 * key keep increasing strictly (I1, I13).  What a backend cannot know or
 * offer is said where it matters; the shared-memory specifics are the token
 * layout (FL_TOKEN_EPOCH and friends), the owner-died flag, nanosecond
 * leases, and most fields of the inspection structures (a network backend
 * leaves what it does not know 0, the value that always means "unknown").
 * fl_lease's slot and handle are the backend's own: never build or change
 * a lease by hand.
 *
 * etcd regions (docs/etcd.md): a token is epoch << FL_TOKEN_EPOCH_SHIFT |
 * the etcd revision that queued the acquisition, the epoch kept in the
 * cluster (PREFIX/epoch).  Waiters are served in the order they queued, and
 * a release wakes only the next one.  After restoring an etcd snapshot, and
 * before clients resume, run `fencelock etcd-epoch --region URI --bump`
 * (`--at-least N` after a second restore from the same snapshot): a
 * restore rolls revisions back.  Leases are whole seconds, rounded up,
 * never below etcd's minimum (2 s by default), on etcd leases the handle
 * reuses; deadline_ns is the earliest end of that etcd lease (its last
 * renewal's send time plus its TTL), so it is never later than etcd's own,
 * and at least half the TTL after the call returns (usually two thirds or
 * more).  A dead holder's lock is freed when its etcd lease ends (no
 * supervisor sees deaths across hosts): FL_LEASE_OWNER_DIED means only that
 * the holder's handle was closed while holding it, and
 * fl_region_registered() is 0.
 * Records hold up to 512 KiB.  Each request has a timeout of 2 s
 * ($FENCELOCK_ETCD_TIMEOUT_MS, 100..60000), the endpoints are tried in
 * turn; fl_close() takes at most about one timeout.  A commit that answered
 * -EAGAIN may still take effect until a later commit of the same lease (or
 * of a newer token) is accepted, never after; an fl_renew() that answered
 * -EAGAIN leaves the holding alive at least until the deadline_ns it set.  On etcd, fl_client_info_get() is -ERANGE for every index and
 * fl_unregistered_info_get() -ENOENT; an etcd URI or PREFIX that is
 * malformed is -EINVAL from fl_open(), a file it names that cannot be read
 * that file's errno (-ENOENT, -EACCES), an endpoint that is not etcd
 * -EPROTO, etcd's "database space exceeded" -ENOSPC, and every refusal of
 * the client's credentials -EACCES (a certificate that does not verify or
 * is rejected, a wrong password, a user without permission on PREFIX/, no
 * user where the cluster requires one), from any call, before any effect.
 *
 * Network backends add three errors, and only they return them from the
 * calls below (a region file never does):
 *   -EHOSTUNREACH  no endpoint answered in time (refused, unreachable, or
 *                  silent past the per-request timeout); the call had no
 *                  effect.
 *   -EAGAIN        the outcome is unknown: a request was sent and no answer
 *                  came.  It may have taken effect (a commit may have been
 *                  accepted: fl_read() tells); it is never reported as a
 *                  success.  (fl_open()'s -EAGAIN, "region not ready", and
 *                  fl_keepalive_start()'s, "no thread", keep their meaning.)
 *                  After either error from fl_release() the key may still
 *                  be held (an fl_acquire() of it from the same thread is
 *                  -EDEADLK): call fl_release() again with the same lease.
 *                  It returns 0 when the earlier attempt took effect, and
 *                  else releases now; the lease ends by itself at its
 *                  deadline if no call ever gets through.
 *   -ENOTRECOVERABLE  (fl_acquire, etcd) the cluster went back in time
 *                  under the same epoch (a snapshot restored without a bump
 *                  of the epoch), or its epoch key is gone (fl_open too,
 *                  where tokens were issued): no token is handed out until
 *                  `fencelock etcd-epoch --bump`.
 * -ETIMEDOUT keeps one meaning everywhere: the key stayed held.
 *
 * CAVEATS (what fencelock does not promise)
 *
 * - A lease is not a guarantee that the holder is the only one running its
 *   critical section: only the fenced check at the resource is.
 * - Death detection: fencelockd frees a dead registered holder's locks
 *   (I5).  Besides, each registered handle keeps a robust futex (its life
 *   word, held by a thread of the library's until fl_close) that the kernel
 *   marks when the process dies or calls execve: a waiter asleep on a key
 *   the dead process held, or one that comes to wait later, sees that and
 *   frees the lock itself, with or without fencelockd (FL_LEASE_OWNER_DIED
 *   either way).  Without fencelockd, a dead holder's lock that nobody
 *   waits for is freed at its lease deadline or by the next fl_acquire that
 *   waits (a try, timeout_ns 0, answers -EBUSY); so is one whose waiters
 *   went to sleep under an earlier holder of the key and were not woken
 *   since (they learn of the death at the deadline of the lease they saw),
 *   and every lock of a holder on a kernel without futex_waitv (Linux
 *   5.16) or a C library other than glibc.  A process that opened the
 *   region while no supervisor ran is unregistered and always falls back
 *   to leases, and its commit buffer is not reclaimed if it dies in the
 *   middle of a commit.  A registered handle costs one thread (the life
 *   thread: asleep until fl_close, signals blocked, a 128 KiB stack
 *   reserved); a process that dies or calls execve without fl_close is a
 *   death, a thread that exits while its process lives is not.
 * - The region's table of unregistered clients (fencelock status) keeps the
 *   latest 32 and is written by the clients themselves: display only, and a
 *   member of the region's group can falsify it.
 * - A commit in flight holds one commit buffer, also while its process is
 *   stopped: the one thing a client holds beyond its lease.  The buffers
 *   beyond one per record (fencelockd --spare-buffers, default 64) serve
 *   commits in flight; when they are exhausted, commits fail with -ENOSPC,
 *   they never wait.
 * - A release wakes one waiter, not all (no thundering herd), and only when
 *   a sleeper asked for a wake since the last one was sent (the slot's
 *   wake_needed, region format 6): while a woken waiter is on its way to
 *   the lock, the releases of processes that took the key meanwhile wake
 *   nobody more.  A woken waiter stopped (SIGSTOP, a debugger) in the
 *   instant between its wake and its look at the lock holds that wake: the
 *   other waiters then sleep on the free lock until the deadline of the
 *   lease they saw, the same bound as a stopped holder (I4).  One that dies
 *   there is covered by fencelockd, which wakes every sleeper of a key when
 *   it reaps a process; a wait that ends without the lock (timeout,
 *   fl_cancel_trigger, also at the look after its wake) passes the wake on.
 * - A waiter spins once, briefly, before it sleeps: every waiter while
 *   nobody sleeps on the key, and behind sleepers one waiter per holding,
 *   only when the holder took the key on another CPU than the waiter's (so
 *   that a release finds somebody running instead of a sleeper still on
 *   its way).  Two hints in the lock slot decide it (the CPU of the
 *   holder's contended acquisition, which holding was last claimed); any
 *   value in them, stale or foreign, only decides whether one waiter
 *   spins, and a waiter stopped in its spin holds nothing the others wait
 *   for.  A spinner that wins takes the key ahead of the sleeper the
 *   release woke: on a region file, waiters are served in no promised
 *   order (on etcd, in the order they queued).  Spinning costs
 *   CPU per acquisition when many processes wait on one key (the figures:
 *   docs/benchmarks.md); processes that share one CPU never spin behind
 *   sleepers.
 * - A waiter killed by SIGKILL while asleep leaves the key's waiter count
 *   one too high until the next boot: later releases of that key make one
 *   futex system call each (correctness is unaffected).
 * - When clients go away, fencelockd wakes the sleepers of every key that
 *   has any (one of them may have died between its release and its wake),
 *   once per round of its event loop; a sleeper on a key that is still held
 *   sleeps again.  Many short-lived clients beside many long waits cost
 *   each waiter up to one wake-up per round in which clients exited.
 * - Regions are for one host.  Never put one on NFS or share it between
 *   machines: the clock and the futexes are per host.  x86-64 and aarch64
 *   only (a lock-free 16-byte compare-and-swap); the aarch64 build is
 *   tested under qemu, not yet on arm64 hardware.
 * - The region format is version 6 (2 moved the lock slot's statistics off
 *   the pair's cache line; 3 added the readiness fields and the buffer
 *   checksum; 4 doubled the client entry to 128 bytes for the life word; 5
 *   hashes keys eight bytes at a time, so its key index is not format 4's;
 *   6 gives each lock slot the wake_needed flag, which a version-5 library
 *   would not keep, so the two must not share a region; the spin hints came
 *   later in bytes version 6 already reserved as zero, which a library that
 *   does not know them never writes: it only never spins behind sleepers).
 *   A region of an older format is refused with a message naming both
 *   versions.  A tmpfs region is re-created at the next boot anyway; one on
 *   disk is replaced by a fresh one that keeps the same state file (its
 *   epoch puts every new token above the old ones; or read the greatest
 *   token with the old build's `fencelock status --json` and pass
 *   fencelockd --min-token); its records do not carry over.
 * - A region on disk survives a host crash as whatever pages reached the
 *   disk.  At its next start fencelockd vouches for every record by its
 *   checksum; a record it cannot vouch for reads as -EBADMSG until it is
 *   committed again (never as bytes no commit wrote).  Which commits since
 *   the last flush survive is not promised.
 * - Every process that can write the region file is trusted: it can forge
 *   tokens or truncate the file (every process mapping it then gets SIGBUS);
 *   the whole trust model is in docs/security.md.
 * - Lease deadlines are kept in microseconds of CLOCK_MONOTONIC in 48 bits:
 *   a host up for more than 8.9 years gets -EOVERFLOW from acquire and renew.
 */
#ifndef FENCELOCK_H
#define FENCELOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FL_BUILDING_LIBRARY)
#define FL_API __attribute__((visibility("default")))
#else
#define FL_API
#endif

/* ---- Version --------------------------------------------------------------
 * The version this header belongs to (CMakeLists.txt refuses to configure if
 * project() says otherwise).  FL_VERSION_NUMBER is 0xMMmmpp: major, minor,
 * patch one byte each, so versions compare as integers.  fl_version() and
 * fl_version_number() return the version of the library actually loaded at
 * run time, which may be newer than the header a program was compiled with
 * (same major version: see docs/abi.md). */
#define FL_VERSION_MAJOR 0
#define FL_VERSION_MINOR 1
#define FL_VERSION_PATCH 0
#define FL__STRINGIFY(x) #x
#define FL__VERSION_STR(a, b, c) FL__STRINGIFY(a) "." FL__STRINGIFY(b) "." FL__STRINGIFY(c)
#define FL_VERSION_STRING FL__VERSION_STR(FL_VERSION_MAJOR, FL_VERSION_MINOR, FL_VERSION_PATCH)
#define FL_VERSION_NUMBER \
    ((FL_VERSION_MAJOR << 16) | (FL_VERSION_MINOR << 8) | FL_VERSION_PATCH)

/* The loaded library's version as "MAJOR.MINOR.PATCH" (a static string; never
 * NULL).  Any thread, any time, before fl_open too. */
FL_API const char *fl_version(void);

/* The loaded library's version as FL_VERSION_NUMBER encodes it (0xMMmmpp).
 * Any thread, any time. */
FL_API unsigned int fl_version_number(void);

/* Longest key or record name, in bytes, without the terminating NUL. */
#define FL_KEY_MAX 127

/* Greatest token the library will ever hand out (tokens fit a SQL BIGINT). */
#define FL_TOKEN_MAX ((uint64_t)INT64_MAX)

/* Token layout (shared-memory regions; other backends document their own,
 * and their tokens need not decompose this way): epoch <<
 * FL_TOKEN_EPOCH_SHIFT | counter.  The epoch (23 bits)
 * is made durable on disk by fencelockd before any token of it is handed out
 * and advances at every supervisor start, so tokens stay increasing across
 * restarts, crashes and reboots; the counter (40 bits) counts acquisitions of
 * one key within an epoch.  Tokens compare as plain integers. */
#define FL_TOKEN_EPOCH_SHIFT 40
#define FL_TOKEN_EPOCH(t) ((uint64_t)(t) >> FL_TOKEN_EPOCH_SHIFT)
#define FL_TOKEN_COUNTER(t) ((uint64_t)(t) & ((1ull << FL_TOKEN_EPOCH_SHIFT) - 1))
#define FL_EPOCH_MAX ((1ull << (63 - FL_TOKEN_EPOCH_SHIFT)) - 1)

/* Environment variable naming the region when a program is given none. */
#define FL_REGION_ENV "FENCELOCK_REGION"

typedef struct fl_region fl_region; /* opaque: this process's view of one region */

typedef struct fl_lease {
    uint64_t token;       /* fencing token of this acquisition */
    uint64_t deadline_ns; /* CLOCK_MONOTONIC time (the caller's) at which the lease ends
                             unless renewed */
    uint32_t slot;        /* which lock, in the backend's numbering: meaningful to the
                             library only (shared memory: the key's lock slot; etcd: the
                             handle's index of the key) */
    uint32_t flags;       /* FL_LEASE_EXPIRED: the previous holder's lease ran out while held;
                             FL_LEASE_OWNER_DIED: the previous holder died holding it */
    uint64_t handle;      /* the backend's id of this holding, meaningful to the library
                             only (shared memory: 0; etcd: the etcd lease id) */
    uint64_t region;      /* the tag of the region handle that issued it (as fl_key.handle):
                             fl_renew, fl_release, fl_check and fl_commit refuse a lease of
                             another handle (-EINVAL); never 0 in an issued lease */
    uint64_t reserved[3]; /* zero; room for a later backend's needs (docs/abi.md) */
} fl_lease;

#define FL_LEASE_EXPIRED    0x1u /* previous holder's lease ran out (or was voided by a reboot) */
#define FL_LEASE_OWNER_DIED 0x2u /* previous holder died holding the lock; fencelockd freed it */

#define FL_WAIT_FOREVER (-1)

/* Open a region and register this process with its supervisor.
 *
 * region_path: the region file; NULL means $FENCELOCK_REGION if set, else the
 *   default path (see fl_default_region_path()).
 * out: receives the handle, to be passed to fl_close().
 *
 * If this process cannot register (no supervisor answers on the region's
 * socket, the socket refuses it: for example EACCES when it is not in the
 * group fencelockd --group shares the region with), the region is still
 * opened (I10), unregistered: its locks then fall back to lease expiry when
 * it dies.  fl_open then returns 0, fl_region_registered() answers 0, and
 * fl_last_error() (an exception to its rule of changing only on failure)
 * says why, naming the region and the socket; the region also notes the
 * process (pid, uid, reason) for `fencelock status`
 * (fl_unregistered_info_get()) until fl_close.
 *
 * Before opening, the region's directory and file are checked (I12): the
 * directory must be owned by the caller or root (or, for a path named by
 * region_path or $FENCELOCK_REGION, by any user: naming it trusts its
 * owner), and not be writable by every user unless it has the sticky bit;
 * the file must be owned by the caller, root or the directory's owner.
 * Group-writable directories are accepted (docs/security.md).
 *
 * Errors:
 *   -EINVAL     out is NULL
 *   -ENAMETOOLONG  the path (or its socket path) is too long
 *   -ENOENT     the region file does not exist (start fencelockd first)
 *   -EACCES     no permission to open or map the file
 *   -EPERM      the region's directory or file is controlled by another user (owned
 *               by another user, or a directory writable by all without the sticky
 *               bit): fl_last_error() names it, its owner and mode
 *   -EPROTO     the file is not a fencelock region, or is corrupt or truncated
 *               (fl_last_error() says what is wrong, naming the file)
 *   -EPROTONOSUPPORT  the region has another format version than this build reads
 *   -EAGAIN     the region is not ready: no fencelockd has made this boot's token
 *               epoch durable for it (a region just created, one written during an
 *               earlier boot whose leases are void (I11), or one whose supervisor
 *               failed to start).  While a supervisor is starting, fl_open waits for
 *               it, at most 5 seconds.  Never a token from a floor that is not the
 *               current epoch's (I1).
 *   -EIO        this boot's id (/proc/sys/kernel/random/boot_id) or this process's
 *               time namespace offsets (/proc/self/timens_offsets) cannot be read:
 *               whether leases are valid cannot be known, so nothing is opened
 *   -ENXIO      the supervisor serves another file at this path (the region was
 *               replaced under a running system)
 *   -ENOMEM, -EMFILE, -ENFILE  out of resources (in this process)
 *   -EHOSTUNREACH  (etcd) no endpoint answered
 *   -EINVAL     (etcd) a malformed URI or PREFIX, a password written in the URI,
 *               a user without a password or a password without a user (see
 *               docs/etcd.md)
 *   -EACCES     (etcd) refused: a certificate that does not verify or that the
 *               server rejects, a wrong password, no permission on PREFIX/, no
 *               user where the cluster requires one (fl_last_error(): why, and
 *               which endpoint)
 *   -ENOENT, -EACCES, ...  (etcd) a TLS or password file the URI or the
 *               environment names cannot be read (fl_last_error() names it)
 *   -ENOTRECOVERABLE  (etcd) PREFIX/epoch is gone where tokens were issued:
 *               `fencelock etcd-epoch --bump` first
 *   -EUSERS     the supervisor cannot take another client: its client table is
 *               full (fencelockd --clients), or it is out of file descriptors
 *               (raise its LimitNOFILE= / ulimit -n); fl_last_error() says which.
 *               Returned at once, not after the registration timeout.
 */
FL_API int fl_open(const char *region_path, fl_region **out);

/* Open a region read-only for inspection (the status tool).  It maps the file
 * with PROT_READ and does not register; only the fl_*_info() functions and
 * fl_read() may be used on the handle.  Errors: as fl_open(), without -ENXIO,
 * -EUSERS and -EAGAIN: a region that is not ready, or of an earlier boot, is
 * opened (its leases are shown as void). */
FL_API int fl_open_readonly(const char *region_path, fl_region **out);

/* Unmap the region and end the registration.  Locks still held through this
 * handle are released as if the process had died (their next holders see
 * FL_LEASE_OWNER_DIED); an unregistered handle's locks end at their lease
 * deadlines.  Stop every keepalive of the handle first, and call it when no
 * other thread is inside a call on the handle (end their waits with
 * fl_cancel_trigger first): the handle is freed, and a call still running
 * on it, or made after, uses freed memory.  NULL is ignored.  Leases
 * obtained through the handle must not be used afterwards.
 * In a forked child, on a handle the parent opened, it only unmaps the
 * child's copy: the parent's locks and registration are left alone. */
FL_API void fl_close(fl_region *r);

/* Acquire the lock of key and receive a lease with its fencing token.
 *
 * lease_ns: lease length in nanoseconds, > 0 (rounded up to a microsecond).
 * timeout_ns: 0 = try once (-EBUSY if held), > 0 = wait at most that long
 *   (-ETIMEDOUT), FL_WAIT_FOREVER = no limit.  A wait sleeps on a futex and
 *   wakes on release, on the holder's death, and at the holder's deadline,
 *   when it takes the expired lease over.  From about a millisecond (plus
 *   the thread's own timer slack) before that deadline, or before the end
 *   of timeout_ns, the calling thread's timer slack is narrowed to 1 us (so
 *   the takeover is not up to 50 us late) and restored afterwards (not if a
 *   signal handler longjmps out of the wait); before that the wait sleeps
 *   with the thread's own slack.  Signals do not end a wait: a
 *   handler runs, then the wait goes on.
 * lease: receives token, deadline, slot and flags.
 *
 * The key gets a slot on first use and keeps it for the life of the region.
 * A try that fails consumes no token.
 *
 * A wait (timeout_ns != 0) on a key that this handle holds, by an unexpired
 * lease of its latest acquisition of the key made by the calling thread,
 * returns -EDEADLK at once: it could only end at its own deadline, take its
 * own lease over and make that lease stale.  Another thread of the process
 * sharing the handle still waits for that holding to end (threads may share
 * a handle and contend, as before); a key held by another handle or process
 * is waited for as always; a try (timeout_ns 0) on one's own key still
 * returns -EBUSY.
 *
 * Errors:
 *   -EINVAL    NULL argument, key of 0 or more than FL_KEY_MAX bytes, lease_ns 0,
 *              timeout_ns < 0 other than FL_WAIT_FOREVER, or a read-only handle
 *   -EBUSY     timeout_ns was 0 and the key is held by an unexpired lease
 *   -ETIMEDOUT the key stayed held for timeout_ns
 *   -EDEADLK   timeout_ns != 0 and the key is held, unexpired, by this handle's
 *              acquisition made by the calling thread (see above); nothing
 *              changed, no token consumed
 *   -ENOSPC    the key is new and the region's lock table is full
 *   -EOVERFLOW the key's token counter is spent for the current epoch (fencelockd
 *              advances the epoch long before; without a supervisor it cannot),
 *              or the deadline does not fit (see CAVEATS); on etcd, a revision
 *              of 2^40 or more
 *   -EPROTO    the region's shared data is corrupt (fl_last_error() says where)
 *   (network backends: -EHOSTUNREACH, -EAGAIN, -ENOTRECOVERABLE; see BACKENDS)
 */
FL_API int fl_acquire(fl_region *r, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                      fl_lease *lease);

/* Cancelling a wait.
 *
 * An fl_cancel is a flag in this process's memory that ends the waits given
 * it: fl_acquire_cancelable() is fl_acquire() that returns -ECANCELED
 * instead of waiting (or going on waiting) for a held key once
 * fl_cancel_trigger() has been called on it, from another thread or from a
 * signal handler.  The flag stays set until fl_cancel_reset(), so a trigger
 * that comes just before the wait begins is not lost, and every later wait
 * given the same object ends at once until it is reset.  A key that is free
 * is still acquired when the flag is set: cancellation ends waiting only.
 * A cancelled wait consumes no token and leaves nothing held.
 *
 * Contexts: fl_cancel_trigger() and fl_cancel_is_triggered() are
 * async-signal-safe (atomics and one futex wake; errno is preserved) and
 * thread-safe; fl_cancel_new(), fl_cancel_free() and fl_cancel_reset() are
 * thread-safe but not async-signal-safe.  One object may serve several
 * waits at once.  Free it only when no wait and no trigger uses it, and do
 * not fl_close() a region while a trigger may still run for a wait on it.
 * A trigger wakes every sleeper of the key the cancelled wait sleeps on;
 * the others look at the key again and sleep on.
 */
typedef struct fl_cancel fl_cancel; /* opaque: a cancellation flag */

/* A new, untriggered fl_cancel.  Errors: -EINVAL (out NULL), -ENOMEM. */
FL_API int fl_cancel_new(fl_cancel **out);
/* Free it; NULL is ignored. */
FL_API void fl_cancel_free(fl_cancel *c);
/* Set the flag and wake the wait that uses c, if one sleeps.  NULL is ignored. */
FL_API void fl_cancel_trigger(fl_cancel *c);
/* Clear the flag, for the next wait. NULL is ignored. */
FL_API void fl_cancel_reset(fl_cancel *c);
/* 1 if triggered (and not reset since), else 0. */
FL_API int fl_cancel_is_triggered(const fl_cancel *c);

/* fl_acquire() whose wait ends with -ECANCELED when cancel is triggered
 * (see above).  Errors: those of fl_acquire(), and
 *   -ECANCELED the key was held and cancel was or became triggered
 *   -EINVAL    cancel is NULL (and fl_acquire()'s cases) */
FL_API int fl_acquire_cancelable(fl_region *r, const char *key, uint64_t lease_ns,
                                 int64_t timeout_ns, fl_cancel *cancel, fl_lease *lease);

/* ---- Key handles ----------------------------------------------------------
 *
 * A key handle is a key looked up once: fl_key_resolve() does what
 * fl_acquire() does before it takes the lock (checks the key, hashes it,
 * finds its slot in the region's index or creates it), and fl_acquire_key()
 * then takes the lock without any of that.  It is the same lock: the same
 * tokens (acquisitions by handle and by name of one key interleave, and
 * their tokens keep increasing strictly: I1), the same leases, waits,
 * -EDEADLK and cancel rules, and the lease is renewed, released and
 * committed with as any other.  Resolve the keys a program takes often,
 * once (at start).
 *
 * A key handle is a plain value: copy it, share it between threads.  It is
 * valid with the region handle that resolved it, until fl_close(), and with
 * no other: not another handle of the same region, nor a handle opened in a
 * child after fork() (acquisitions refuse it, -EINVAL).  Only
 * fl_key_resolve() makes one; never build or change one by hand.  A region
 * file never frees or reuses a key's slot, so a handle cannot come to name
 * another key.
 */
typedef struct fl_key {
    uint32_t slot;        /* which lock, in the backend's numbering (as fl_lease.slot:
                             shared memory: the key's lock slot) */
    uint32_t reserved0;   /* zero */
    uint64_t handle;      /* the tag of the region handle that resolved it; never 0 */
    uint64_t reserved[2]; /* zero; room for a later backend (docs/abi.md) */
} fl_key;

/* Resolve key into *k for fl_acquire_key(), creating the key's lock slot on
 * first use as fl_acquire() does (the key then exists for the life of the
 * region; nothing is acquired, no token is consumed).  On failure *k is
 * zeroed, and no acquisition accepts it.
 * Errors:
 *   -EINVAL      NULL argument, key of 0 or more than FL_KEY_MAX bytes, or a
 *                read-only handle
 *   -ENOSPC      the key is new and the region's lock table is full
 *   -EPROTO      the region's shared data is corrupt (fl_last_error() says where)
 */
FL_API int fl_key_resolve(fl_region *r, const char *key, fl_key *k);

/* fl_acquire() of the key that k was resolved from (see above): lease_ns,
 * timeout_ns and lease as there.
 * Errors: those of fl_acquire() except -ENOSPC (the key exists), with:
 *   -EINVAL      NULL argument; a key handle that r did not resolve (zeroed by a
 *                failed fl_key_resolve(), resolved by another region handle, or
 *                changed by hand) or that names a slot r's region never issued
 *                (fl_last_error() says which); lease_ns 0; timeout_ns < 0 other
 *                than FL_WAIT_FOREVER; a read-only handle
 */
FL_API int fl_acquire_key(fl_region *r, const fl_key *k, uint64_t lease_ns, int64_t timeout_ns,
                          fl_lease *lease);

/* fl_acquire_key() whose wait ends with -ECANCELED when cancel is triggered,
 * as fl_acquire_cancelable()'s.  Errors: those of fl_acquire_key(), and
 *   -ECANCELED the key was held and cancel was or became triggered
 *   -EINVAL    cancel is NULL (and fl_acquire_key()'s cases) */
FL_API int fl_acquire_key_cancelable(fl_region *r, const fl_key *k, uint64_t lease_ns,
                                     int64_t timeout_ns, fl_cancel *cancel, fl_lease *lease);

/* Extend a lease to now + lease_ns; updates lease->deadline_ns.
 * Errors:
 *   -ESTALE    ownership lost: the lease expired or the key was taken over
 *              (nothing changed)
 *   -EINVAL    NULL argument, lease_ns 0, bad slot, read-only handle, a lease
 *              issued by another region handle (lease->region is not r's)
 *   -EOVERFLOW the deadline does not fit (see CAVEATS)
 */
FL_API int fl_renew(fl_region *r, fl_lease *lease, uint64_t lease_ns);

/* Release a lease and wake the key's waiters.  A lease past its deadline
 * that nobody has taken over is released normally (0): no other holder can
 * have overlapped it.
 * Errors:
 *   -ESTALE  ownership lost: another acquisition has taken the key, or this
 *            lease was released before (nothing changed)
 *   -EINVAL  NULL argument, bad slot, read-only handle, a lease issued by
 *            another region handle
 */
FL_API int fl_release(fl_region *r, const fl_lease *lease);

/* 0 while lease is still the current holding of its key and unexpired, else -ESTALE. One atomic
   read: lets a long job stop early. Never a substitute for the fenced check at the resource.
   Errors: -ESTALE as said; -EINVAL for NULL arguments, a bad slot, or a lease issued by
   another region handle. */
FL_API int fl_check(fl_region *r, const fl_lease *lease);

/* ---- Fenced records ------------------------------------------------------ */

#define FL_COMMIT_STRICT 1u /* accept only T > greatest accepted (operations unique per generation) */

/* Commit len bytes to record, fenced by lease->token.
 *
 * The commit takes effect if and only if lease->token >= F (> F with
 * FL_COMMIT_STRICT), F being the greatest token the record had accepted when
 * the commit took effect; comparison and publication are one atomic step (I2).
 * It checks the token against the record, not the lease's deadline.  The
 * record is created by its first commit and bound to the lease's key: it only
 * ever accepts leases of that key (I8).
 *
 * Returns 0, or:
 *   -ESTALE    the record already accepted a greater token (or an equal one under
 *              FL_COMMIT_STRICT); *accepted, if not NULL, is set to the greatest
 *              accepted token.  Ownership is lost: never retry with this token.
 *   -EXDEV     the record is bound to another key than the lease's
 *   -EMSGSIZE  len exceeds the region's record size
 *   -EINVAL    NULL argument (data may be NULL when len is 0), bad record name,
 *              unknown flags, a lease whose slot or token this region never
 *              issued, a lease issued by another region handle (even one of the
 *              same region: a lease is valid only with the handle that acquired
 *              it), or a read-only handle
 *   -ENOSPC    the record is new and the record table is full, or no commit
 *              buffer is free (all are current values or in-flight commits)
 *   -EPROTO    the region's shared data is corrupt
 * On success *accepted, if not NULL, is set to lease->token.
 */
FL_API int fl_commit(fl_region *r, const fl_lease *lease, const char *record, const void *data,
                     size_t len, unsigned flags, uint64_t *accepted);

/* Commit len bytes to record, fenced by token, a token that key issued.
 *
 * The same commit as fl_commit(), for a holder that has the key and the
 * token but not the fl_lease (a shell script run by `fencelock run`, which
 * finds them in $FENCELOCK_KEY and $FENCELOCK_TOKEN; another process that
 * was handed them).  The key's lock slot is looked up, never created; the
 * token must be one that key issued (0 < token <= the key's newest token,
 * the check fl_commit() makes of a lease); then the commit is fl_commit()'s:
 * it takes effect if and only if token >= F (> F with FL_COMMIT_STRICT),
 * atomically (I2), and binds a new record to key (I8).
 *
 * Why this is safe: the fence compares tokens, nothing else.  fl_commit()
 * does not check that the lease is current either: a lease that was lost
 * (expired, taken over) still commits until a newer token has committed to
 * the record, and is refused from then on.  A token without its lease is in
 * exactly that position: it proves nothing about current ownership, only
 * which acquisition it came from, and a newer holder's first commit shuts it
 * out.  Anyone who could call this could also write the region file (see
 * CAVEATS: every writer of the region is trusted); the check that the key
 * issued the token keeps a mistyped token from poisoning a record with a
 * value no acquisition reached.
 *
 * Returns 0 (*accepted, if not NULL, set to token), or:
 *   -ESTALE    the record already accepted a greater token (or an equal one under
 *              FL_COMMIT_STRICT); *accepted, if not NULL, is set to the greatest
 *              accepted token.  Ownership is lost: never retry with this token.
 *   -ENOENT    key was never acquired in this region (it has no lock slot, so it
 *              issued no token); nothing is created
 *   -EINVAL    NULL r, key or record, key or record name of 0 or more than
 *              FL_KEY_MAX bytes, NULL data with len > 0, unknown flags, token 0
 *              or greater than any token key issued, or a read-only handle
 *   -EXDEV     the record is bound to another key than key
 *   -EMSGSIZE  len exceeds the region's record size
 *   -ENOSPC    the record is new and the record table is full, or no commit
 *              buffer is free
 *   -EPROTO    the region's shared data is corrupt
 *   -ECHILD    r was opened by another process (see CONVENTIONS)
 */
FL_API int fl_commit_token(fl_region *r, const char *key, uint64_t token, const char *record,
                           const void *data, size_t len, unsigned flags, uint64_t *accepted);

/* Read the current value: copies at most cap bytes, sets *len to its full length and *fence to
   the token that wrote it.  The bytes are exactly those of one accepted commit (I3).
   Errors: -ENOENT if never committed; -ENOBUFS if cap is too small (nothing copied, *len set);
   -EBADMSG if the value could not be vouched for when fencelockd adopted the region after an
   unclean stop (a region on disk after a host crash: its pages reached the disk from
   different moments); the next commit replaces it;
   -EINVAL for NULL arguments (buf may be NULL when cap is 0) or a bad record name;
   -EPROTO for corrupt shared data.  Works on read-only handles. */
FL_API int fl_read(fl_region *r, const char *record, void *buf, size_t cap, size_t *len,
                   uint64_t *fence);

/* The fenced-pointer pattern: a record whose value is one 64-bit number (a
 * generation or object id, stored little-endian in 8 bytes).  Immutable
 * objects are stored under generation-specific names (for example
 * renders/image-52/<token>.jpg) and only the pointer is fenced.  Errors: as
 * fl_commit() and fl_read(); fl_read_u64 returns -EPROTO if the record does
 * not hold exactly 8 bytes. */
FL_API int fl_commit_u64(fl_region *r, const fl_lease *lease, const char *record,
                         uint64_t value, unsigned flags, uint64_t *accepted);
FL_API int fl_read_u64(fl_region *r, const char *record, uint64_t *value, uint64_t *fence);

/* ---- Keepalive ----------------------------------------------------------- */

typedef struct fl_keepalive fl_keepalive; /* opaque: one lease kept renewed */

/* Called on the keepalive thread when a kept lease is lost; err is -ESTALE
 * (ownership lost) or another error of fl_renew().  Keep it short: it delays
 * the renewal of the other leases.  It runs outside the library's locks and
 * may call any function of this header: fl_release() of other leases,
 * fl_keepalive_stop() of any keepalive (its own included: k is freed after
 * the callback returns), fl_close() of the handle (the keepalive thread then
 * ends itself; do not touch the handle afterwards). */
typedef void (*fl_lost_fn)(void *arg, const fl_lease *lease, int err);

/* Keep lease renewed, each renewal extending it to now + lease_ns, from a
 * background thread of this region handle (started on first use).  A
 * renewal happens when a third of the lease has passed.  When a renewal
 * fails the lease is lost: fl_keepalive_fd() becomes readable, on_lost (if
 * not NULL) is called, and fl_keepalive_status() returns the error.  A
 * process stopped past its lease (the case fencing is for) learns of the
 * loss as soon as it runs again.  Every keepalive must be stopped before
 * fl_close().
 * Errors: -EINVAL (NULL argument, lease_ns < 3 us, read-only handle, a lease
 *   issued by another region handle);
 *   -ESTALE (the lease is not current now); -ENOMEM, -EMFILE, -EAGAIN. */
FL_API int fl_keepalive_start(fl_region *r, const fl_lease *lease, uint64_t lease_ns,
                              fl_lost_fn on_lost, void *arg, fl_keepalive **out);

/* A file descriptor (an eventfd, owned by k) that becomes readable when the
 * lease is lost, for poll/epoll loops.  -EINVAL for NULL. */
FL_API int fl_keepalive_fd(const fl_keepalive *k);

/* 0 while the lease is kept, else the error that lost it (-ESTALE).  If lease
 * is not NULL it receives the lease with its latest deadline.  -EINVAL for NULL. */
FL_API int fl_keepalive_status(const fl_keepalive *k, fl_lease *lease);

/* Stop renewing and free k (its fd is closed).  lease, if not NULL, receives
 * the lease with its latest deadline, for fl_release().  Returns 0, or the
 * error that had lost the lease (-ESTALE); -EINVAL for NULL.  May block for an
 * RCU grace period (microseconds), and while k's on_lost runs on the
 * keepalive thread (stop returns after it; called from on_lost it does not
 * wait). */
FL_API int fl_keepalive_stop(fl_keepalive *k, fl_lease *lease);

/* ---- Errors and paths ---------------------------------------------------- */

/* Every function that takes a region handle, except fl_close(), returns
 * -ECHILD when called in a process other than the one that opened the
 * handle (a fork() child): the child must fl_open() the region itself.
 * That error is not repeated in each function's list below. */

/* Note for tests: FENCELOCK_TEST_BOOT_ID_FILE, when set, names a file read
 * instead of /proc/sys/kernel/random/boot_id (to simulate a reboot).  Never
 * set it in production. */

/* A static message for a negative (or positive) errno value; never NULL. */
FL_API const char *fl_strerror(int err);

/* The symbolic name of an error ("ESTALE"); "E?" when unknown.  Never NULL. */
FL_API const char *fl_err_name(int err);

/* Details of the last error returned to this thread by a fencelock function,
 * for example "region /dev/shm/x: bad magic: not a fencelock region".  Like
 * errno, it is set by failures and left alone by successes: read it right
 * after the call that failed.  Valid until the next fencelock call in this
 * thread; "" when no call has failed yet. */
FL_API const char *fl_last_error(void);

/* Write the region path used when none is given: $FENCELOCK_REGION if set;
 * else for root (real uid 0) /run/fencelock/region, the system-wide region;
 * else $XDG_RUNTIME_DIR/fencelock/region (the user's session); only when
 * that does not exist (XDG_RUNTIME_DIR unset, relative or not a directory;
 * for root, /run missing) /dev/shm/fencelock-<uid>/region.  All are tmpfs:
 * stores stay in memory.
 * Errors: -ENAMETOOLONG if it does not fit in cap bytes; -EINVAL for NULL. */
FL_API int fl_default_region_path(char *buf, size_t cap);

/* 1 if this handle is registered with a supervisor (death detection on),
 * else 0. */
FL_API int fl_region_registered(const fl_region *r);

/* The path of the region file this handle maps (never NULL; "" for NULL). */
FL_API const char *fl_region_path(const fl_region *r);

/* The backend behind this handle, as chosen by fl_open from the region
 * string: "shm" (a region file in shared memory) or "etcd" (an etcd://
 * or etcds:// cluster); later versions may add others.  A static string,
 * never NULL; "" for NULL. */
FL_API const char *fl_region_backend(const fl_region *r);

/* ---- Inspection (read-only, for tools) -----------------------------------
 * Growth of the *_info structures (docs/abi.md): each ends in `reserved`,
 * which the library zeroes.  A later minor version adds fields by taking
 * them from the front of `reserved`, so the size and every existing offset
 * stay the same: a program compiled against this header keeps working with a
 * newer library (which may fill what is `reserved` here: never read it), and
 * a program compiled against a newer header reads 0 in the new fields from an
 * older library.  0 therefore always means "unknown" in an added field. */

/* fl_region_info.run_state: how the last supervisor's run of the region went.
 * With `served` it tells apart the four cases tools show: FL_RUN_STARTED and
 * served, a supervisor serves the region now; FL_RUN_STARTED and not served,
 * it died (or was killed) without shutting down; FL_RUN_CLEAN, it shut down
 * cleanly; FL_RUN_NEVER, no supervisor has served the region yet. */
#define FL_RUN_NEVER   0u /* no supervisor has served the region */
#define FL_RUN_STARTED 1u /* a supervisor started and has not shut down cleanly: it runs, or died */
#define FL_RUN_CLEAN   2u /* the last supervisor shut down cleanly */

/* Size of fl_region_info.boot_id: the 36 characters of a Linux boot id
 * (/proc/sys/kernel/random/boot_id) and its NUL, padded. */
#define FL_BOOT_ID_SIZE 40

typedef struct fl_region_info {
    uint32_t format_version;
    uint32_t lock_capacity;   /* lock slots (keys) the region can hold */
    uint32_t locks_used;      /* slots handed out so far */
    uint32_t record_capacity;
    uint32_t records_used;
    uint32_t record_size;     /* largest value a record holds, bytes */
    uint32_t buffer_count;    /* commit buffers: current values plus in-flight commits */
    uint32_t client_capacity;
    uint64_t file_size;       /* bytes */
    uint64_t created_unix_ns; /* wall-clock creation time, for display only */
    uint64_t token_floor;     /* every new token is at least this */
    uint64_t epoch;           /* FL_TOKEN_EPOCH(token_floor): the current epoch */
    uint32_t run_state;       /* FL_RUN_NEVER, FL_RUN_STARTED or FL_RUN_CLEAN (see above) */
    uint32_t ready;           /* 1 if a supervisor readied the region in this boot (its epoch is
                                 durable): fl_open admits clients only then */
    uint64_t started_unix_ns; /* when the last supervisor started (wall clock, display only) */
    uint64_t clean_unix_ns;   /* when a supervisor last shut down cleanly, 0 if never */
    uint32_t supervisor_pid;  /* last supervisor that served the region, 0 if none */
    int32_t  same_boot;       /* 1 if written during the current boot, else 0 */
    int32_t  served;          /* 1 if a fencelockd serves the region now, else 0 */
    uint32_t records_unvouched; /* records the last supervisor start could not vouch for
                                   (fl_read answers -EBADMSG for them until recommitted) */
    uint64_t events_dropped;  /* events the supervisor's log never showed: ring full, or a
                                 client stopped while posting (counters stay exact) */
    char     boot_id[FL_BOOT_ID_SIZE]; /* boot the region's leases belong to */
    uint64_t clients_refused; /* registrations the supervisor refused (client table full,
                                 or out of file descriptors): fl_open said -EUSERS */
    uint64_t reserved[7];     /* zero; later fields come from here (see above) */
} fl_region_info;

/* Errors: -EINVAL for NULL arguments. */
FL_API int fl_region_info_get(fl_region *r, fl_region_info *info);

#define FL_LOCK_FREE    0 /* nobody holds it */
#define FL_LOCK_HELD    1 /* held by an unexpired lease */
#define FL_LOCK_EXPIRED 2 /* held by a lease whose deadline has passed */

/* The counters of fl_lock_info count since the region was created.  Exact:
 * deaths, renewals, renew_failed, release_failed, busy, timeouts.
 * Statistics: acquisitions, contended, expiries_taken, releases.  The
 * key's holder writes these without a locked instruction (the uncontended
 * acquire+release is cheaper for it), so a concurrent update can be lost:
 * only when a holder is paused or preempted past its lease deadline within
 * the few instructions after its acquisition and another process takes the
 * key over meanwhile.  They may then read low, by one per such pause, never
 * high.  A release is counted by the key's next acquisition; while the key
 * is free after a release, that last one is included. */
typedef struct fl_lock_info {
    char     key[FL_KEY_MAX + 1];
    int      state;            /* FL_LOCK_FREE, FL_LOCK_HELD or FL_LOCK_EXPIRED */
    uint64_t token;            /* latest token handed out for this key (0: never) */
    uint32_t holder_pid;       /* pid of the latest holder, in the supervisor's pid namespace */
    uint32_t holder_client;    /* client table index of the holder, 0 if unregistered */
    uint64_t holder_client_id; /* registered client id of the holder, 0 if unregistered */
    int64_t  lease_left_ns;    /* time left on the lease (negative: expired); 0 when free */
    uint32_t waiters;          /* processes waiting now (see CAVEATS) */
    uint32_t last_release;     /* how the last holding ended: 0 released, FL_LEASE_OWNER_DIED,
                                  FL_LEASE_EXPIRED (voided) */
    uint64_t acquisitions;     /* successful acquisitions (a statistic: see above) */
    uint64_t contended;        /* acquisitions that found the key held (statistic) */
    uint64_t expiries_taken;   /* acquisitions that took an expired lease over (statistic) */
    uint64_t deaths;           /* holdings released by the supervisor for a dead holder */
    uint64_t renewals;
    uint64_t renew_failed;
    uint64_t releases;         /* holdings ended by fl_release() (statistic: see above) */
    uint64_t release_failed;   /* releases refused as stale */
    uint64_t last_stale_token; /* the last renew or release refused as stale: its token, */
    uint32_t last_stale_pid;   /* its pid, */
    uint32_t last_stale_op;    /* and FL_OP_RENEW or FL_OP_RELEASE (0: none yet) */
    uint64_t busy;             /* tries (timeout 0) that found the key held: -EBUSY */
    uint64_t timeouts;         /* waits that ended with the key still held: -ETIMEDOUT */
    uint64_t reserved[8];      /* zero; later fields come from here (see above) */
} fl_lock_info;

/* Operations named by the inspection structures and the supervisor's log. */
#define FL_OP_COMMIT        1u
#define FL_OP_STRICT_COMMIT 2u
#define FL_OP_RENEW         3u
#define FL_OP_RELEASE       4u

/* Describe lock slot index (0 .. locks_used-1).  Returns 0; -ENOENT for a
 * slot that holds no published key (for example one abandoned while its
 * creator raced another); -ERANGE when index >= locks_used; -EINVAL for NULL. */
FL_API int fl_lock_info_get(fl_region *r, uint32_t index, fl_lock_info *info);

typedef struct fl_record_info {
    char     name[FL_KEY_MAX + 1];
    char     bound_key[FL_KEY_MAX + 1]; /* key of the lock that fences it ("" if unbound) */
    uint64_t accepted_token;   /* greatest token accepted (0: never committed) */
    uint64_t version;          /* number of accepted commits */
    uint32_t size;             /* length of the current value, bytes */
    uint32_t last_rejected_pid;
    uint64_t commits;
    uint64_t rejections;
    uint64_t last_rejected_token;
    uint64_t last_rejected_accepted; /* the greatest accepted token when it was rejected */
    uint32_t last_rejected_op;       /* FL_OP_COMMIT or FL_OP_STRICT_COMMIT (0: none yet) */
    uint32_t unvouched;              /* 1: the value could not be vouched for after an unclean
                                        stop (fl_read says -EBADMSG); the next commit replaces it */
    uint64_t repeats;   /* rejections of a token among the record's last 4 rejected tokens:
                           a client retrying a stale token instead of acquiring again */
    uint64_t reserved[8]; /* zero; later fields come from here (see above) */
} fl_record_info;

/* Describe record index (0 .. records_used-1).  Errors as fl_lock_info_get(). */
FL_API int fl_record_info_get(fl_region *r, uint32_t index, fl_record_info *info);

typedef struct fl_client_info {
    uint32_t index;     /* client table index (1-based; what locks record as holder) */
    uint32_t pid;       /* in the supervisor's pid namespace */
    uint32_t uid;
    uint32_t attached;  /* 1: connected to the running supervisor; 0: adopted after a
                           supervisor restart and watched through its pid */
    uint64_t client_id; /* unique for the life of the region */
    uint64_t reserved[8]; /* zero; later fields come from here (see above) */
} fl_client_info;

/* Describe client table entry index (1 .. client_capacity).  Returns 0 for a
 * live client; -ENOENT for an empty entry; -ERANGE past the table; -EINVAL. */
FL_API int fl_client_info_get(fl_region *r, uint32_t index, fl_client_info *info);

/* Unregistered clients: every fl_open that ended unregistered notes itself
 * in a table of FL_UNREGISTERED_MAX entries in the region (the latest ones:
 * the oldest are overwritten), cleared by its fl_close.  Display only: any
 * client of the region may write it. */
#define FL_UNREGISTERED_MAX 32u

typedef struct fl_unregistered_info {
    uint32_t pid;            /* in the client's pid namespace */
    uint32_t uid;            /* its real uid */
    int32_t  reason;         /* why it is not registered, a negative errno:
                                -ECONNREFUSED or -ENOENT no supervisor listening,
                                -EACCES the socket refused it (mode or group), ... */
    uint32_t reserved0;
    uint64_t start_time;     /* the process's start (jiffies since boot, /proc/PID/stat) */
    uint64_t opened_unix_ns; /* when it opened the region (wall clock, display only) */
    uint64_t reserved[8];    /* zero; later fields come from here (docs/abi.md) */
} fl_unregistered_info;

/* Describe unregistered-client entry index (0 .. FL_UNREGISTERED_MAX-1).
 * Returns 0 for a client whose process still runs (same pid and start
 * time, seen from the caller's pid namespace); -ENOENT for an empty entry,
 * one whose process has ended or closed the handle, or one being written;
 * -ERANGE past the table; -EINVAL for NULL. */
FL_API int fl_unregistered_info_get(fl_region *r, uint32_t index, fl_unregistered_info *info);

/* ---- Administration: an etcd region's token epoch ------------------------
 * For operators and their tools (`fencelock etcd-epoch` calls it), not for
 * applications.  Tokens on etcd are EPOCH << FL_TOKEN_EPOCH_SHIFT | the key's
 * etcd revision.  Restoring an etcd snapshot brings the revision back, so
 * tokens would repeat: after a restore, before any client resumes, bump the
 * epoch once; clients that ran across the restore refuse to hand out tokens
 * (-ENOTRECOVERABLE) until it is bumped (docs/etcd.md, "Restoring a
 * snapshot").  A region file's epoch is fencelockd's: it has none of these. */

#define FL_ETCD_EPOCH_BUMP 0x1u /* set the epoch to max(current + 1, at_least) */

typedef struct fl_etcd_epoch_result {
    uint64_t before;      /* the epoch found; 0: the prefix has none yet */
    uint64_t after;       /* with FL_ETCD_EPOCH_BUMP the epoch set, else equal to before */
    uint32_t asked;       /* 1 once the region string and the files it names were read and
                             the cluster was asked; a failure with 0 is the region's own (its
                             string, a file, memory): nothing was sent */
    uint32_t reserved0;
    uint64_t reserved[5]; /* zero; later fields come from here (docs/abi.md) */
} fl_etcd_epoch_result;

/* Read the token epoch of the etcd region `region` (an etcd:// or etcds://
 * string, as for fl_open), or with FL_ETCD_EPOCH_BUMP set it to one more
 * than the current one, or to at_least if that is more (0: no floor; use it
 * when the cluster was restored from the same snapshot before, or bumped
 * after the snapshot was taken: at_least must exceed every epoch ever used).
 * An absent epoch reads as 0, and a bump creates it.  Opens no region
 * handle; needs no supervisor.  *out is zeroed, then filled; before and
 * after stay 0 on failure.
 * Errors, with out->asked 0 (nothing was sent):
 *   -EINVAL   NULL region or out; unknown flags; at_least without
 *             FL_ETCD_EPOCH_BUMP; a region that is not an etcd URI; a
 *             malformed URI, an option out of range, a password in the URI,
 *             a user without a password
 *   -ENOENT, -EACCES, ...  a file the URI or the environment names (TLS
 *             files, password file) that cannot be read, with its name
 *   -EPROTONOSUPPORT  this library was built without etcd support
 *   -ENOMEM
 * and with out->asked 1 (the cluster was asked):
 *   -EHOSTUNREACH  no endpoint answered; nothing was changed
 *   -EAGAIN   the outcome of the bump is unknown: read the epoch to learn
 *   -EBUSY    the epoch kept changing while it was bumped
 *   -EOVERFLOW  the bump would pass FL_EPOCH_MAX
 *   -EACCES   refused: a certificate that does not verify, a wrong password,
 *             a user without permission on the prefix
 *   -ENOSPC, -EMSGSIZE  refused: etcd's space quota, its request size limit
 *   -EPROTO   an answer etcd does not give, or a refusal of another kind
 *   -ENOMEM */
FL_API int fl_etcd_epoch(const char *region, unsigned flags, uint64_t at_least,
                         fl_etcd_epoch_result *out);

#ifdef __cplusplus
}
#endif
#endif /* FENCELOCK_H */
