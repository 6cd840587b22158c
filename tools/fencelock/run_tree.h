/* SPDX-License-Identifier: MIT */
/*
 * run_tree.h - the descendants of this process, for `fencelock run`: found
 * by walking /proc, signalled through pidfds.
 *
 * fencelock run is a child subreaper, so every process its command starts
 * stays a descendant of it, however it left the command's process group
 * (setsid, setpgid, double fork): a process whose parent exits is
 * reparented to it.  They are found by walking /proc (ppid links, read with
 * fl__proc_stat_read(); /proc/PID/task/TID/children needs
 * CONFIG_PROC_CHILDREN, which not every kernel has) and signalled through
 * pidfds checked against the start time read in the walk, so that a pid
 * reused meanwhile by an unrelated process is never signalled.
 *
 * Each call walks /proc afresh; -1 means /proc could not be read (or memory
 * ran out), and then the caller falls back on the command's process group.
 */
#ifndef FL_TOOL_RUN_TREE_H
#define FL_TOOL_RUN_TREE_H

#include <stdbool.h>
#include <sys/types.h>

/* Send sig (then SIGCONT if cont, so that a stopped process can act on it)
 * to process group group and to every live descendant outside it, each
 * once.  Returns how many live descendants are outside the group; -1 (and
 * nothing sent) if they cannot be listed. */
int run_tree_signal(pid_t group, int sig, bool cont);

/* How many descendants are alive (zombies are not), or -1 if they cannot
 * be listed. */
int run_tree_alive(void);

/* SIGKILL process group group, then every live descendant, and wait until
 * those signalled through a pidfd have exited (when some could not be, wait
 * 10ms instead).  Returns how many were alive when listed (0: none is
 * left), or -1 if they cannot be listed (the group was signalled). */
int run_tree_kill_round(pid_t group);

#endif
