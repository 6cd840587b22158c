/* SPDX-License-Identifier: MIT */
/*
 * fencelockd.h - what the supervisor's files share.
 */
#ifndef FENCELOCKD_H
#define FENCELOCKD_H

#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
#include <sys/types.h>

#include "../internal.h"

/* ---- log.c: one JSON object per line on stderr, or a file ---- */
/* Log to path (appending) instead of stderr, and/or to syslog too. */
int log_open(const char *path, bool syslog_too);
/* Reopen the log file (SIGHUP, after logrotate moved it). */
int log_reopen(void);
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
/* The descriptor log lines go to now (2 for stderr); async-signal-safe. */
int log_current_fd(void);

/* ---- sigbus.c: a region file truncated under the supervisor ---- */
/* From now on, a SIGBUS on r's mapping (its file was shrunk by another
 * process) writes one region_truncated error line to the log (and to stderr
 * if the log is a file) and exits 3, instead of a silent death.  Call once,
 * right after the region is mapped. */
void sigbus_arm(const fl_region *r);

/* ---- access.c: --group and --mode ---- */
/* Parse --group (a name or number) and --mode (octal, within 0666, with
 * 0600, without 0002): 0, or -1 after saying why on stderr. */
int access_parse_group(const char *text, gid_t *gid);
int access_parse_mode(const char *text, unsigned *mode);
/* Make the region's directory (0700, or 0750-style for a group; access.c);
 * an existing one is left as it is (a warning if gid cannot reach it). */
void access_make_dir(const char *region_path, gid_t gid, unsigned mode);
/* Give an existing region gid ((gid_t)-1: keep) and mode: 0, or -1 after
 * logging region_access_failed. */
int access_apply(fl_region *r, gid_t gid, unsigned mode);
/* Give the socket the region file's group and mode. */
void access_socket(const char *socket_path, const fl_region *r);

/* ---- notify.c ---- */
/* Tell systemd (NOTIFY_SOCKET) a state such as "READY=1"; no-op without it. */
void notify_systemd(const char *state);
/* The watchdog (systemd WatchdogSec=, i.e. $WATCHDOG_USEC): call it from the
 * event loop right before it blocks; it sends WATCHDOG=1 when half the
 * interval has passed since the last one, and returns timeout_ms (a poll
 * timeout, -1 = none) shortened so the loop wakes for the next one.  Without
 * the variables it only returns timeout_ms. */
int notify_watchdog(int timeout_ms);

/* ---- durable.c: the durable state file (the epoch) ---- */
/* The default state file of a region: /var/lib/fencelock/NAME.state for
 * root, $XDG_STATE_HOME/fencelock/NAME.state (or ~/.local/state/...) else. */
int durable_default_path(const char *region, char *buf, size_t cap);
/* Read the epoch: 0; -ENOENT when there is no file; -EPROTO when corrupt. */
int durable_load(const char *path, uint64_t *epoch, char *err, size_t errcap);
/* Write the epoch durably (temp, fsync, rename, fsync dir): 0 or -errno. */
int durable_store(const char *path, uint64_t epoch, char *err, size_t errcap);

/* ---- epoch.c: advancing the token epoch ---- */
/* The greatest epoch found in the region: the floor's and every key's. */
uint64_t epoch_in_region(fl_region *r);
/* Make epoch `next` durable, then raise the region's floor to it (and to
 * min_token).  0, or -errno with the reason in err (the floor is unchanged). */
int epoch_advance(fl_region *r, const char *state_path, uint64_t next, uint64_t min_token,
                  char *err, size_t errcap);
/* Advance the epoch when some key has spent half its counter; 0 if nothing
 * to do or done, -errno on a failed durable write. */
int epoch_check_counters(fl_region *r, const char *state_path, char *err, size_t errcap);

/* ---- event_log.c: what clients report through the event ring ---- */
struct event_log;
struct event_log *event_log_new(fl_region *r);
void event_log_free(struct event_log *l);
/* Log every event clients posted since the last call, and any drops. */
void event_log_drain(struct event_log *l);

/* ---- metrics_file.c ---- */
/* Rewrite path atomically (temp file, rename) with the region's metrics. */
int metrics_file_write(fl_region *r, const char *path);

/* ---- registry.c: the client table and death reaping ---- */
/* Connections accepted whose hello is not read yet, at most. */
#define REGISTRY_MAX_PENDING 64
struct registry;
struct registry *registry_new(fl_region *r);
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
/* Open the reserve descriptor; admit_free closes it. */
void admit_init(fl_region *r);
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
