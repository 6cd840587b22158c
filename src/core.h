/* SPDX-License-Identifier: MIT */
/*
 * core.h - the internal header of the code every backend shares (the files at src/):
 * the backend-neutral base handle, errors, clocks, fork detection, futexes,
 * key names and the region string.  Not installed.
 *
 * The layers, lowest first (tools/layers; tools/lint checks that no file
 * includes a header of a layer above its own):
 *   common      src/common/   helpers the library and the programs share
 *   core        src/          this header, backend.h, cancel.h, shown.h
 *   shm, etcd   src/shm/, src/etcd/: the two backends, which never include
 *               each other's headers
 *   fencelockd  src/fencelockd/ (it includes src/shm/supervise.h only)
 *   tools       tools/
 *
 * Like SQLite's sqlite3_file, struct fl_region is what every backend's
 * handle starts with: struct fl__shm (shm/shm.h) and struct fl__etcd
 * (etcd/etcd.h) embed it first and own everything after it.  The core
 * reads and writes only the fields below; a backend finds its own struct
 * from an fl_region * by a cast (the base is at offset 0, which each
 * backend asserts).
 */
#ifndef FL_CORE_H
#define FL_CORE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "fencelock.h"

/* ---- sizes every layer shares ---- */
#define FL__NS_PER_S 1000000000ull
/* A path (a region, its socket, a state file) or a region string: Linux's
 * PATH_MAX. */
#define FL__PATH_SIZE 4096
/* A path plus a suffix (".sock", ".new.PID", ".tmp.PID"). */
#define FL__PATH_PLUS_SIZE (FL__PATH_SIZE + 104)
/* A message that quotes a path and says why. */
#define FL__PATH_MSG_SIZE (FL__PATH_SIZE + 304)
/* A boot id: 36 characters and NUL, padded (shm/format.h: header boot_id). */
#define FL__BOOT_ID_SIZE 40

struct fl__backend;
struct fl__keeper;

/* The base handle (handle.c makes it, for every backend). */
struct fl_region {
    /* The store behind this handle (backend.h), set at open, never changed. */
    const struct fl__backend *be;
    bool readonly;      /* opened by fl_open_readonly (or the supervisor's read-only map) */
    uint32_t pid;       /* the opening process, cached at open */
    /* This handle's tag, which the leases and key handles it issues carry
     * (fl_lease.region, fl_key.handle), so that they are only ever used
     * with the handle that made them.  Set by api.c at open; never 0 once
     * open. */
    uint64_t key_cookie;
    /* Fork detection (fork.c): the process's incarnation word, and its value
     * when this handle was opened. */
    _Atomic uint64_t *incarnation_word;
    uint64_t incarnation;
    /* The keepalive thread and its lease list (keepalive.c), created on
     * first use under keeper_lock. */
    struct fl__keeper *keeper;
    pthread_mutex_t keeper_lock;
    /* The resolved region string: a path, or the whole etcd URI
     * (fl_region_path; messages show it through shown.h). */
    char path[FL__PATH_SIZE];
};

/* ---- handle.c ---- */
/* Make the base of a new handle of backend be for the resolved region
 * string name (truncated to FL__PATH_SIZE - 1 bytes: every caller resolved
 * it into a buffer of that size), bound to the calling process.  Every
 * backend's open calls it first; it cannot fail. */
void fl__handle_init(fl_region *h, const struct fl__backend *be, const char *name,
                     bool readonly);
/* Undo fl__handle_init.  inherited: the handle is a forked child's copy,
 * whose keeper_lock a parent's thread may have held at the fork (left as
 * it is). */
void fl__handle_fini(fl_region *h, bool inherited);

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

/* ---- clock.c: the host's clocks and boot ---- */
/* This process's CLOCK_MONOTONIC in ns (ctx unused: NULL; the signature of
 * a handle clock, shm/shm.h). */
uint64_t fl__monotonic_ns(void *ctx);
/* Read this boot's id (36 characters and NUL) into buf[FL__BOOT_ID_SIZE]; 0 or -errno. */
int fl__read_boot_id(char buf[FL__BOOT_ID_SIZE]);
/* A nonzero 64-bit tag of a boot id (what a region's ready_boot holds). */
uint64_t fl__boot_tag(const char boot_id[FL__BOOT_ID_SIZE]);
/* This process's CLOCK_MONOTONIC offset from the host's, in ns (0 outside a
 * time namespace, or on a kernel without them).  0 or -errno (fail closed:
 * an offset that cannot be known refuses the open). */
int fl__read_timens_offset(int64_t *offset_ns);
/* The start time of process pid (field 22 of /proc/PID/stat); 0 if unknown. */
uint64_t fl__process_start_time(pid_t pid);

/* ---- hash.c ---- */
/* FNV-1a 64 of n bytes (region header checksum, boot tag, the supervisor's
 * state file, etcd's record sums). */
uint64_t fl__checksum(const void *p, size_t n);

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

/* ---- key names (every backend's rule) ---- */
/* Validate a key or record name argument: its length (1..FL_KEY_MAX), or
 * -EINVAL with fl_last_error() saying why.  Inline: every acquisition and
 * commit checks its names. */
static inline int fl__key_check(const char *key)
{
    if (!key)
        return fl__fail(-EINVAL, "key is NULL");
    size_t len = strnlen(key, FL_KEY_MAX + 1);
    if (len == 0)
        return fl__fail(-EINVAL, "key is empty (keys are 1..%d bytes)", FL_KEY_MAX);
    if (len > FL_KEY_MAX)
        return fl__fail(-EINVAL, "key is longer than %d bytes", FL_KEY_MAX);
    return (int)len;
}

/* ---- region_name.c: the region string ---- */
/* The region string: name itself, or the default (fl_default_region_path:
 * $FENCELOCK_REGION, then the default path) when name is NULL or empty.
 * 0 or -ENAMETOOLONG (fl_last_error says). */
int fl__region_resolve_path(const char *name, char *buf, size_t cap);
/* True if region_path, or else $FENCELOCK_REGION, names the region (the
 * shared-memory trust checks relax for a region the caller named). */
bool fl__path_is_named(const char *region_path);

/* ---- wait.c: futexes ---- */
/* Sleep while *word == expected, until the absolute CLOCK_MONOTONIC time
 * deadline_ns (0: no deadline).  Returns 0 when woken or when the value had
 * changed, -ETIMEDOUT, or -EINTR. */
int fl__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns);
/* Wake at most count sleepers of word (FUTEX_WAKE). */
void fl__futex_wake(_Atomic uint32_t *word, int count);
void fl__futex_wake_all(_Atomic uint32_t *word);
/* Sleep while *w0 == v0 and *w1 == v1 (futex_waitv, Linux 5.16), until
 * deadline_ns as fl__futex_wait.  0 when woken through either word or when
 * one had changed, -ETIMEDOUT, -EINTR, or -ENOSYS (no futex_waitv here:
 * the caller sleeps on w0 alone; fl__futex_waitv_available() says so from
 * then on). */
int fl__futex_wait2(_Atomic uint32_t *w0, uint32_t v0, _Atomic uint32_t *w1, uint32_t v1,
                    uint64_t deadline_ns);
bool fl__futex_waitv_available(void);

/* ---- keepalive.c ---- */
/* Stop the handle's keepalive thread (every backend's close, first). */
void fl__keepalive_shutdown(fl_region *r);

#endif /* FL_CORE_H */
