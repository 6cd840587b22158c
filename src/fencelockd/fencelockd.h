/* SPDX-License-Identifier: MIT */
/*
 * fencelockd.h - what the supervisor's files share.
 *
 * THE LIBRARY.  fencelockd sees the library only through src/shm/supervise.h
 * (with the public fencelock.h and proto.h it pulls in): the region handle
 * is opaque here, and every write to the shared format is a call into it.
 * No file of this directory includes shm.h or format.h.
 *
 * ERRORS.  One style in every file:
 *   - A function that can fail returns 0 or a negative errno (a constructor:
 *     0 and *out, or a negative errno).  Nothing returns -1 or fills an
 *     error buffer.
 *   - The function that meets the failure, and knows what it was doing and
 *     to which file, writes the one line about it: log_error (an event name
 *     and a message naming the object), or, before the log is open (the
 *     command line, --log itself), one "fencelockd: ..." line on stderr.
 *     Its callers pass the code up, undo what they made, and never log it
 *     again.  A library call's reason comes from fl_last_error(), logged by
 *     the fencelockd function that made the call.
 *   - Best-effort steps (access_socket, sigbus_arm, notify_systemd, ...)
 *     follow the same rule; their callers say at the call why going on is
 *     right.
 *   - Every system call's result is checked, except close() of a socket, a
 *     pidfd or a file only read: Linux frees the descriptor even when close
 *     reports an error, and there is nothing to retry or report.
 *   - Which exit status a failure means is decided in one place, main.c
 *     (daemon_init, daemon_tick), by the step that failed: enum fld_exit.
 */
#ifndef FENCELOCKD_H
#define FENCELOCKD_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../shm/supervise.h"

/* errno as a negative error code, never 0 (a failed call always has a
 * cause; analyzers cannot know that errno is set). */
static inline int neg_errno(void)
{
    int e = errno;
    return e > 0 ? -e : -EIO;
}

/* ---- exit statuses: the one table ---- */
/* X(name, status, text for --help).  docs/man/fencelockd.8 (EXIT STATUS)
 * says the same, and tests/dist/man_test.sh checks that it lists each;
 * tests/supervisor/test_exit.c provokes each.  Scripts and the systemd
 * units (RestartPreventExitStatus=2 3 4 5: those need a human) rely on the
 * numbers: never renumber, only add. */
#define FLD_EXIT_TABLE(X)                                                                  \
    X(FLD_EXIT_OK, 0,                                                                      \
      "stopped by SIGTERM or SIGINT after a clean shutdown (also --help and --version)")   \
    X(FLD_EXIT_FAILURE, 1,                                                                 \
      "a system call it needs failed (signals, the socket, poll, memory), at start or "    \
      "while serving; worth a restart")                                                    \
    X(FLD_EXIT_USAGE, 2,                                                                   \
      "bad usage: an unknown option, a bad value, a region path too long for its socket")  \
    X(FLD_EXIT_REGION, 3,                                                                  \
      "the region cannot be created, is corrupt, does not match the options, was "         \
      "truncated, or its directory or file is controlled by another user; or the state "   \
      "file is corrupt or unwritable, the epoch space is spent, or this boot's id cannot " \
      "be read")                                                                           \
    X(FLD_EXIT_BUSY, 4, "another fencelockd serves the region")                           \
    X(FLD_EXIT_LOG, 5, "the --log file cannot be opened")

enum fld_exit {
#define FLD_EXIT_ENUM(name, status, text) name = (status),
    FLD_EXIT_TABLE(FLD_EXIT_ENUM)
#undef FLD_EXIT_ENUM
};

/* ---- options.c: the command line ---- */
struct options {
    const char *region;
    const char *state;
    uint64_t min_token;
    uint64_t flush_interval_ns; /* 0: only at a clean stop */
    const char *log_path;
    bool syslog;
    const char *metrics_file;
    uint64_t metrics_interval_ns;
    struct fl__params params;
    bool given[5];     /* which of params were given (locks .. spare_buffers) */
    bool huge_pages;   /* --huge-pages */
    gid_t gid;         /* --group, (gid_t)-1 if not given */
    unsigned mode;     /* --mode of the region file and socket */
    bool access_given; /* --group or --mode */
    bool done;         /* --help or --version: printed, nothing to serve */
};
/* Parse the command line into o: 0, or -EINVAL after one line on stderr
 * saying what is wrong.  --help and --version print and set o->done. */
int options_parse(int argc, char **argv, struct options *o);

/* ---- log.c: one JSON object per line on stderr, or a file ---- */
/* Log to path (appending) instead of stderr, and/or to syslog too:
 * 0, or -errno after "fencelockd: cannot open log file PATH: ..." on
 * stderr (the log is not open: stderr is where that is said). */
int log_open(const char *path, bool syslog_too);
/* Reopen the log file (SIGHUP, after logrotate moved it): 0, or -errno
 * after a log_reopen_failed line in the log kept open. */
int log_reopen(void);
/* Close the log file (the lines go to stderr again) and syslog. */
void log_close(void);
/* Start a log line: {"ts":...,"level":level,"event":event  (caller adds
 * fields with log_* and ends it with log_end). */
void log_begin(const char *level, const char *event);
/* The same, for something that happened at unix_ns (wall clock). */
void log_begin_at(const char *level, const char *event, uint64_t unix_ns);
void log_str(const char *name, const char *value);
void log_u64(const char *name, uint64_t value);
void log_i64(const char *name, int64_t value);
void log_bool(const char *name, bool value);
void log_end(void);
/* A one-line error event with a message. */
void log_error(const char *event, const char *message);
/* The same, message made with printf. */
void log_errorf(const char *event, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The descriptor log lines go to now (2 for stderr); async-signal-safe. */
int log_current_fd(void);

/* ---- sigbus.c: a region file truncated under the supervisor ---- */
/* From now on, a SIGBUS on r's mapping (its file was shrunk by another
 * process) writes one region_truncated error line to the log (and to stderr
 * if the log is a file) and exits FLD_EXIT_REGION, instead of a silent
 * death.  Call once, right after the region is mapped.  0, or -errno after
 * logging why it could not (then a truncation kills by SIGBUS, as without
 * it). */
int sigbus_arm(struct fl__shm *r);
/* Undo sigbus_arm (before the region is unmapped); nothing if not armed. */
void sigbus_disarm(void);

/* ---- access.c: --group and --mode ---- */
/* Parse --group (a name or number) and --mode (octal, within 0666, with
 * 0600, without 0002): 0, or -EINVAL after saying why on stderr. */
int access_parse_group(const char *text, gid_t *gid);
int access_parse_mode(const char *text, unsigned *mode);
/* Make the region's directory (0700, or 0750-style for a group; access.c);
 * an existing one is left as it is (a warning if gid cannot reach it).
 * 0, or -errno after a mkdir_failed line. */
int access_make_dir(const char *region_path, gid_t gid, unsigned mode);
/* Give an existing region gid ((gid_t)-1: keep) and mode: 0, or -errno
 * after a region_access_failed line. */
int access_apply(struct fl__shm *r, gid_t gid, unsigned mode);
/* Give the socket the region file's group and mode: 0, or -errno after a
 * socket_access_failed line. */
int access_socket(const char *socket_path, struct fl__shm *r);

/* ---- notify.c ---- */
/* Tell systemd (NOTIFY_SOCKET) a state such as "READY=1"; 0 without it.
 * 0, or -errno after a notify_failed line. */
int notify_systemd(const char *state);
/* The watchdog (systemd WatchdogSec=, i.e. $WATCHDOG_USEC): call it from the
 * event loop right before it blocks; it sends WATCHDOG=1 when half the
 * interval has passed since the last one, and returns timeout_ms (a poll
 * timeout, -1 = none) shortened so the loop wakes for the next one.  Without
 * the variables it only returns timeout_ms. */
int notify_watchdog(int timeout_ms);

/* ---- durable.c: the durable state file (the epoch) ---- */
/* The default state file of a region: /var/lib/fencelock/NAME.state for
 * root, $XDG_STATE_HOME/fencelock/NAME.state (or ~/.local/state/...) else.
 * 0, or -errno after a no_state_path line. */
int durable_default_path(const char *region, char *buf, size_t cap);
/* Read the epoch: 0; -ENOENT when there is no file (no line: the caller
 * decides what that means); -EPROTO or -errno after a state_invalid line. */
int durable_load(const char *path, uint64_t *epoch);
/* Write the epoch durably (temp, fsync, rename, fsync dir): 0, or -errno
 * after an epoch_not_durable line naming the step and the file. */
int durable_store(const char *path, uint64_t epoch);

/* ---- epoch.c: the token epoch ---- */
/* At start: log what the last run left, then make a new epoch durable
 * above every token that may ever have been handed out, and raise the
 * floor to it (and above min_token).  0, or -errno after its line
 * (state_invalid, epoch_space_spent, epoch_not_durable). */
int epoch_start(struct fl__shm *r, const char *state_path, uint64_t min_token);
/* Advance the epoch when some key has spent half its counter: 0 if nothing
 * to do or done, -errno after its line (the floor is unchanged). */
int epoch_check_counters(struct fl__shm *r, const char *state_path);

/* ---- event_log.c: what clients report through the event ring ---- */
struct event_log;
/* 0 and *out, or -ENOMEM after an out_of_memory line. */
int event_log_new(struct fl__shm *r, struct event_log **out);
void event_log_free(struct event_log *l);
/* Log every event clients posted since the last call, and any drops. */
void event_log_drain(struct event_log *l);

/* ---- metrics_file.c ---- */
/* Rewrite path atomically (temp file, rename) with the region's metrics:
 * 0, or -errno after a metrics_file_failed line. */
int metrics_file_write(struct fl__shm *r, const char *path);

/* ---- registry.c: the client table and death reaping ---- */
/* Connections accepted whose hello is not read yet, at most. */
#define REGISTRY_MAX_PENDING 64
struct registry;
/* 0 and *out, or -errno after its line (out_of_memory, region_stat_failed). */
int registry_new(struct fl__shm *r, struct registry **out);
void registry_free(struct registry *g);
/* Adopt the client table of a region served before (supervisor restart):
 * reap entries whose process is gone, watch the others by pid. */
void registry_adopt(struct registry *g);
/* Take a new connection (accepted socket). */
void registry_accept(struct registry *g, int fd);
/* Fill pollfds with every descriptor to watch; returns how many. */
int registry_pollfds(struct registry *g, struct pollfd *fds, int max);
/* Handle the events poll() reported for the descriptors registry_pollfds gave. */
void registry_handle(struct registry *g, const struct pollfd *fds, int n);
/* Periodic work (checks of adopted clients without a pidfd). */
void registry_tick(struct registry *g);
/* Most descriptors registry_pollfds may return. */
int registry_max_fds(const struct registry *g);
/* Refuse clients beyond this many (the open-files limit has room for no
 * more); they are told -EMFILE.  Default: the whole client table. */
void registry_set_fd_limit(struct registry *g, uint32_t clients);
/* How many clients went away (were reaped) so far. */
uint64_t registry_departures(const struct registry *g);
/* Registrations refused because the client table was full. */
uint64_t registry_refused_full(const struct registry *g);
/* Answer a connection with a refusal (status: a negative errno) at once. */
void registry_refuse(int fd, int status);

/* ---- admit.c: file descriptors and the accept path ---- */
/* Raise the soft RLIMIT_NOFILE to what `clients` clients and `pending`
 * waiting connections need, up to the hard limit; log fd_limit_low when the
 * hard limit is too low.  Returns how many clients fit (<= clients). */
uint32_t admit_raise_fd_limit(uint32_t clients, int pending);
/* The soft RLIMIT_NOFILE in force after admit_raise_fd_limit. */
uint64_t admit_fd_limit(void);
/* Open the reserve descriptor; admit_free closes it.  0, or -errno after a
 * warning (without a reserve, running out of descriptors pauses the
 * listener instead of refusing at once). */
int admit_init(struct fl__shm *r);
/* Count one refused registration in the region header (status shows it). */
void admit_count_refusal(void);
void admit_free(void);
/* Whether to poll the listening socket this round (false for a while after
 * descriptors ran out with no reserve to refuse clients with). */
bool admit_listening(uint64_t departures, uint64_t now_ns);
/* Accept every waiting connection, handing each to the registry; when out
 * of descriptors, refuse them at once (-EMFILE) or stop listening. */
void admit_accept(int lfd, struct registry *g);
/* Count (and log, at most once a second) a client refused for lack of
 * descriptors; pid 0 when unknown. */
void admit_refused(pid_t pid);
/* Periodic: log refusals not logged yet. */
void admit_tick(uint64_t now_ns);
/* Clients refused for lack of descriptors so far. */
uint64_t admit_refused_total(void);

#endif
