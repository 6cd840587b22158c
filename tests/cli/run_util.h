/* SPDX-License-Identifier: MIT */
/*
 * run_util.h - what the tests of `fencelock run` (run_command,
 * run_command_lease, run_command_usage) share: the group set-up (a private
 * fencelockd and the test's own handle on its region), run_probe started
 * under `fencelock run` with its first reports read, and the keys as this
 * process sees them.  Only these three tests use it, and it runs run_probe
 * (RUN_PROBE_PATH), a program of this folder, so it is here, not in tests/lib.
 */
#ifndef FL_TEST_RUN_UTIL_H
#define FL_TEST_RUN_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

#include "fencelock.h"
#include "harness.h"
#include "spawn.h"

#define T_LINE 20000 /* ms: generous; nothing waits this long unless broken */

extern th_daemon daemon_;
extern fl_region *region_; /* the test's own client, to hold and inspect keys */

/* The cmocka group setup and teardown: daemon_ on th_path("region"),
 * region_ opened on it. */
int setup(void **state);
int teardown(void **state);

struct probe_run {
    sp_proc p;          /* fencelock run */
    pid_t probe;        /* the command */
    pid_t probe_pgid;
    char key[128], token[32], region[512];
    int extra_fds;
    char fds_line[1024];
};

/* Start `fencelock run OPTIONS... KEY -- run_probe PROBE_ARGS...` and read the
 * probe's first reports; broken_stderr: fencelock run's stderr is a pipe
 * whose reader is gone. */
void start_probe_with(struct probe_run *pr, const char *const *options, const char *key,
                      const char *const *probe_args, bool broken_stderr);
void start_probe(struct probe_run *pr, const char *const *options, const char *key,
                 const char *const *probe_args);
fl_lock_info lock_info(const char *key);
/* "signal PID SIG" from the report pipe. */
void expect_signal(struct probe_run *pr, pid_t pid, int sig);
/* Acquire key in this process, waiting as long as it takes (the holder's
 * lease must run out first); returns the lease. */
fl_lease take_over(const char *key);
bool key_free(const char *key);

#endif
