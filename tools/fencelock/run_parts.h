/* SPDX-License-Identifier: MIT */
/*
 * run_parts.h - what the files of `fencelock run` share: its options
 * (run_args.c parses them) and the runner, the state of one supervised
 * command (run_supervise.c starts, watches and ends it; run.c opens the
 * region, acquires KEY and calls the steps in order).
 */
#ifndef FL_TOOL_RUN_PARTS_H
#define FL_TOOL_RUN_PARTS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fencelock.h"
#include "keytext.h"

struct run_options {
    const char *region; /* NULL: the default */
    uint64_t lease_ns;
    int64_t wait_ns; /* FL_WAIT_FOREVER, 0 (try once) or a timeout */
    uint64_t kill_after_ns;
    int conflict_exit; /* exit status when the key is not acquired */
    const char *key;
    char key_text[FL_KEYTEXT_MAX]; /* key as messages show it */
    char *shell_command[4]; /* sh -c STRING, when -c is given */
    char **command; /* NULL-terminated, at least one word */
    bool require_supervisor; /* --require-supervisor: never run unregistered */
};

/* Returns -1 to go on, else the exit status (help shown, or bad usage). */
int run_parse_args(int argc, char **argv, struct run_options *o);

struct runner {
    const struct run_options *o;
    fl_region *r;
    const char *region_env; /* $FENCELOCK_REGION for COMMAND: the region, absolute */
    fl_lease lease;
    fl_keepalive *k;
    sigset_t old_mask; /* to restore in the child */
    struct sigaction old_pipe; /* SIGPIPE as we got it, to restore in the child */
    int sfd;           /* signalfd of the forwarded signals, SIGCHLD and SIGTTOU */
    pid_t child;       /* the command; also its process group */
    bool foreground;   /* stdin is our terminal and we were in front: COMMAND gets it */
    bool child_done;
    int child_status; /* wait status */
    bool lost;
    int lost_err;
    bool loss_said; /* the loss was reported when the command was signalled */
    bool term_sent, kill_sent;
    bool leftovers;   /* ending what the command left running after its exit */
    uint64_t kill_at; /* CLOCK_MONOTONIC */
};

/* The steps of run_main, once KEY is held (run_supervise.c). */

/* Block what we forward, and SIGCHLD and SIGTTOU, and read them from a
 * signalfd.  0, or -1 said on stderr. */
int run_setup_signals(struct runner *rn);
/* Start the command held before exec, keep the lease alive, let it go.  0;
 * -1 on a failure said on stderr; or RUN_EXIT_LEASE_LOST.  Unless 0, KEY
 * has been released. */
int run_start_command(struct runner *rn);
/* Until the command and every process it started have ended (the last ones
 * by SIGKILL at the latest).  0, or -1 on a failure of our own. */
int run_supervise(struct runner *rn);
/* After run_supervise failed: SIGKILL what is left, wait until it is gone;
 * the supervision cannot go on, and nothing is left running without it. */
void run_kill_unwatched(struct runner *rn);
/* Stop renewing, release, and choose the exit status. */
int run_finish(struct runner *rn, int failed);

#endif
