/* SPDX-License-Identifier: MIT */
/*
 * harness.h - what every fencelock test shares: a private temporary
 * directory, a real fencelockd started and awaited through the systemd
 * notify protocol, child processes driven over pipes, and waits with
 * timeouts.  Tests order events with these messages and waits, never with
 * sleeps.  Every child dies with the test (PR_SET_PDEATHSIG), so a failed
 * or hung test leaves nothing behind.
 */
#ifndef FL_TEST_HARNESS_H
#define FL_TEST_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A fresh directory for this test process, removed at exit. */
const char *th_tmpdir(void);
/* th_tmpdir()/name in a static buffer (one per call site: copy it). */
const char *th_path(const char *name);

typedef struct th_daemon {
    pid_t pid;
    char region[512];
} th_daemon;

/* Start fencelockd on region (extra: NULL-terminated extra arguments, may be
 * NULL) and wait until it reports READY=1.  Its stderr goes to
 * region + ".log"; its durable state file is region + ".state" unless extra
 * has --state.  Returns 0, or -1 if it exited or did not get ready. */
int th_daemon_start(th_daemon *d, const char *region, const char *const *extra);
/* The same with the daemon's RLIMIT_NOFILE set to soft/hard (in the child,
 * before exec). */
int th_daemon_start_nofile(th_daemon *d, const char *region, const char *const *extra,
                           unsigned long soft, unsigned long hard);
/* Send sig (SIGKILL, SIGTERM) and reap it.  Returns its wait status. */
int th_daemon_stop(th_daemon *d, int sig);
/* Count lines of the daemon's log containing needle. */
int th_daemon_log_count(const th_daemon *d, const char *needle);
/* Wait until the log has at least n lines containing needle (timeout_ms). */
bool th_daemon_log_wait(const th_daemon *d, const char *needle, int n, int timeout_ms);

/* A child process running fn(arg, in, out): in reads the parent's messages,
 * out writes to the parent.  fn's return value is the child's exit status. */
typedef struct th_child {
    pid_t pid;
    int to_child;   /* parent writes */
    int from_child; /* parent reads */
} th_child;
typedef int (*th_child_fn)(void *arg, int in, int out);
int th_child_start(th_child *c, th_child_fn fn, void *arg);
/* Send one line (no newline needed). */
void th_send(int fd, const char *line);
/* Send one printf-formatted line (cut at 1,000 bytes). */
void th_sendf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void th_vsendf(int fd, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Read one line (without newline) within timeout_ms; 0, or -1 on timeout/EOF. */
int th_recv(int fd, char *buf, size_t cap, int timeout_ms);
/* Wait for a child's exit within timeout_ms: its wait status, or -1 (then it
 * is killed). */
int th_child_wait(th_child *c, int timeout_ms);
/* Convenience: read a line and require it to equal want (fails the test). */
void th_expect(int fd, const char *want, int timeout_ms);

/* The state letter of process pid in /proc/PID/stat ('R', 'S', 'T', 'Z'...),
 * '?' when it cannot be read. */
char th_proc_state(pid_t pid);
/* Wait until process pid is in one of states (e.g. "S"); true if so. */
bool th_wait_state(pid_t pid, const char *states, int timeout_ms);
/* Wait until process pid is stopped ('T' or 't'); true if so. */
bool th_wait_stopped(pid_t pid, int timeout_ms);
/* CPU time (user + system, in clock ticks) pid has used so far, from /proc. */
uint64_t th_cpu_ticks(pid_t pid);

uint64_t th_now_ns(void);
#define TH_MS 1000000ull
#define TH_S 1000000000ull

/* Paths of the built programs (set by CMake). */
#ifndef FENCELOCKD_PATH
#define FENCELOCKD_PATH "fencelockd"
#endif
#ifndef FENCELOCK_TOOL_PATH
#define FENCELOCK_TOOL_PATH "fencelock"
#endif

#endif
