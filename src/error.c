/* SPDX-License-Identifier: MIT */
/*
 * error.c - one table of the errors fencelock returns: their names, their
 * messages (fl_strerror, fl_err_name), and the per-thread detail message of
 * the last failure (fl_last_error).  errno is never touched.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

#define FL__ERRORS(X)                                                                       \
    X(ESTALE, "fencing token is stale: ownership lost (do not retry with this token)")     \
    X(EBUSY, "the lock is held")                                                            \
    X(EDEADLK, "the lock is held by this thread's own lease: waiting would outlast it")     \
    X(ECANCELED, "the wait was cancelled")                                                  \
    X(ETIMEDOUT, "timed out waiting for the lock")                                          \
    X(EINVAL, "invalid argument")                                                           \
    X(ENOENT, "no such region, key or record")                                              \
    X(ENOSPC, "the region is full (lock table, record table or commit buffers)")            \
    X(EOVERFLOW, "token space or deadline range exhausted")                                 \
    X(EPROTO, "the region file is corrupt or not a fencelock region (a network store: its " \
              "answer is not what it should answer)")                                       \
    X(EPROTONOSUPPORT, "the region has a format version this build does not read")          \
    X(EAGAIN, "the region is not ready (fencelockd has not made this boot's epoch durable), " \
              "or a network store's answer did not come: the outcome is unknown")             \
    X(EHOSTUNREACH, "no endpoint of the network store answered in time: the call had no "  \
                    "effect")                                                               \
    X(ENOTRECOVERABLE, "the store went back in time (restored from a snapshot?): bump its " \
                       "token epoch (fencelock etcd-epoch --bump)")                          \
    X(EOPNOTSUPP, "not supported by this region's backend")                                 \
    X(ECHILD, "the handle was opened by another process (used after fork): open it again")  \
    X(EBADMSG, "the record's value could not be vouched for after an unclean stop")          \
    X(ENXIO, "the supervisor serves another file at this path")                             \
    X(EUSERS, "the supervisor cannot take another client")                                  \
    X(EXDEV, "the record is fenced by another lock key")                                    \
    X(EMSGSIZE, "value larger than the region's record size")                               \
    X(ENOBUFS, "buffer too small for the value")                                            \
    X(EACCES, "permission denied")                                                          \
    X(EPERM, "operation not permitted")                                                     \
    X(ENOMEM, "out of memory")                                                              \
    X(EMFILE, "too many open files in this process")                                        \
    X(ENFILE, "too many open files in the system")                                          \
    X(ENAMETOOLONG, "path too long")                                                        \
    X(ECONNREFUSED, "no supervisor is listening")                                           \
    X(EEXIST, "already exists")                                                             \
    X(ERANGE, "index out of range")                                                         \
    X(EINTR, "interrupted")                                                                 \
    X(EIO, "input/output error")                                                            \
    /* The bindings' own errors, named here so that every layer names them alike: */       \
    X(EBADF, "the handle is closed")                                                        \
    X(EALREADY, "already in progress (the lease already has a keepalive)")

struct fl__error_entry {
    int code;
    const char *name;
    const char *message;
};

static const struct fl__error_entry fl__errors[] = {
#define FL__ENTRY(name, msg) {name, #name, msg},
    FL__ERRORS(FL__ENTRY)
#undef FL__ENTRY
};

static const struct fl__error_entry *fl__lookup(int err)
{
    if (err < 0)
        err = -err;
    for (size_t i = 0; i < sizeof fl__errors / sizeof fl__errors[0]; i++)
        if (fl__errors[i].code == err)
            return &fl__errors[i];
    return NULL;
}

const char *fl_strerror(int err)
{
    if (err == 0)
        return "success";
    const struct fl__error_entry *e = fl__lookup(err);
    return e ? e->message : "unknown error";
}

const char *fl_err_name(int err)
{
    if (err == 0)
        return "OK";
    const struct fl__error_entry *e = fl__lookup(err);
    return e ? e->name : "E?";
}

/* The last failure's message: a formatted one in fl__last, or a constant
 * one (fl__last_static, no formatting cost on polling paths).  Successful
 * calls leave both alone, as errno is left alone. */
static _Thread_local char fl__last[512];
static _Thread_local const char *fl__last_static;

const char *fl_last_error(void) { return fl__last_static ? fl__last_static : fl__last; }

void fl__set_error_static(const char *msg) { fl__last_static = msg; }

void fl__set_error(const char *fmt, ...)
{
    fl__last_static = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fl__last, sizeof fl__last, fmt, ap);
    va_end(ap);
}
