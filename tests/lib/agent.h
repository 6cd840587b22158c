/* SPDX-License-Identifier: MIT */
/*
 * agent.h - lock "agents" for the integration tests: each agent is a real
 * child process (th_child_start) with its own fl_region handle that runs
 * lock commands the test sends over its pipe and answers each with one
 * line.  Tests order events with these messages, with signals and with
 * explicit waits on observable state (waiter counts, process states, the
 * supervisor's log), never with sleeps.
 *
 * Commands (one line each; lease and timeout in nanoseconds, timeout -1 is
 * FL_WAIT_FOREVER; NAME names a lease the agent keeps):
 *   acq NAME KEY LEASE TIMEOUT   fl_acquire, keeps the lease as NAME on success
 *   renew NAME LEASE             fl_renew
 *   rel NAME                     fl_release
 *   check NAME                   fl_check
 *   copy DST SRC                 keep a copy of lease SRC as DST (an old lease)
 *   forge NAME TOKEN             set the token of lease NAME (a lease never issued)
 *   loop KEY N LEASE             N x (acquire within 20 s, renew, check, release);
 *                                rc: first error, token: last token
 *   spawn                        fork a child that inherits everything and just
 *                                sleeps (token: its pid; ag_track_foreign it)
 *   sigs                         token: how many SIGUSR1 the agent has caught
 *   tacq NAME KEY LEASE          fl_acquire (no wait) in a new thread that then
 *                                exits (pthread_exit); the process lives on
 *   exec                         answer, then execve /bin/sleep 120 (the handle,
 *                                its locks and its life thread are gone)
 *   close                        fl_close the handle
 *   exit                         fl_close and exit 0
 * Every answer is "r RC TOKEN DEADLINE SLOT FLAGS T_START T_END", T_* being
 * CLOCK_MONOTONIC just before and just after the library call.
 *
 * An agent installs a SIGUSR1 handler without SA_RESTART, so a test can
 * interrupt a waiting fl_acquire.
 */
#ifndef FL_TEST_AGENT_H
#define FL_TEST_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fencelock.h"
#include "harness.h"

typedef struct ag_reply {
    int rc;
    uint64_t token;
    uint64_t deadline_ns;
    uint32_t slot;
    uint32_t flags;
    uint64_t t_start;
    uint64_t t_end;
} ag_reply;

typedef struct ag {
    th_child c;
    int open_rc;    /* what fl_open returned in the agent */
    int registered; /* fl_region_registered() of its handle */
    bool reaped;
} ag;

/* Start an agent that opens region with fl_open; fails the test if the
 * agent does not report within 20 s.  Check a->open_rc. */
void ag_start(ag *a, const char *region);
/* Send one command (printf format). */
void ag_send(ag *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Read one answer within timeout_ms: 0, or -1 on timeout/EOF. */
int ag_read(ag *a, ag_reply *rp, int timeout_ms);
/* Send a command and read its answer (fails the test after 30 s). */
ag_reply ag_do(ag *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Wait until one of n agents answers; returns its position (answer in *rp),
 * or -1 after timeout_ms. */
int ag_read_any(ag **list, int n, ag_reply *rp, int timeout_ms);
/* Send "exit" and reap; returns the wait status. */
int ag_stop(ag *a);
/* SIGKILL and reap; returns the wait status. */
int ag_kill(ag *a);

/* Start a daemon tracked for cleanup (fails the test if it does not start). */
void ag_daemon_start(th_daemon *d, const char *region);
/* The same with extra fencelockd arguments (NULL-terminated). */
void ag_daemon_start_x(th_daemon *d, const char *region, const char *const *extra);
/* Kill pid (not a child of the test) at teardown. */
void ag_track_foreign(pid_t pid);
/* Test teardown: kill every agent and daemon still running. */
int ag_teardown(void **state);

/* Inspection through a read-only handle. */
/* Find key among the published slots: 0 and *info, or -ENOENT. */
int ag_lock_info(fl_region *ro, const char *key, fl_lock_info *info);
/* Wait until key has at least n waiters (timeout_ms). */
bool ag_wait_waiters(fl_region *ro, const char *key, uint32_t n, int timeout_ms);
/* Wait until process pid is asleep (state 'S') (timeout_ms). */
bool ag_wait_sleeping(pid_t pid, int timeout_ms);
/* Sleep until CLOCK_MONOTONIC passes t_ns (waiting for a lease deadline to
 * pass is the point of the callers, not a race). */
void ag_sleep_until(uint64_t t_ns);

#define AG_MS(x) ((uint64_t)(x) * TH_MS)
#define AG_S(x) ((uint64_t)(x) * TH_S)

#endif
