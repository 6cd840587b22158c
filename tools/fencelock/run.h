/* SPDX-License-Identifier: MIT */
/*
 * run.h - `fencelock run`: hold a key's lock for as long as a command runs.
 */
#ifndef FL_TOOL_RUN_H
#define FL_TOOL_RUN_H

#include "cli.h"

/* Exit statuses of `fencelock run` besides the command's own, documented in
 * run_usage, fencelock(1) and docs/write-paths.md; scripts depend on them.
 * 2 and 3 are the tool's common statuses (CLI_EXIT_USAGE, CLI_EXIT_REGION);
 * the others stay out of the range that commands commonly use. */
enum {
    RUN_EXIT_NOT_ACQUIRED = 75, /* EX_TEMPFAIL: the key stayed held (--wait, --no-wait) */
    RUN_EXIT_LEASE_LOST = 76,   /* the lease was lost while the command ran */
    RUN_EXIT_FAILED = 125,      /* fencelock run itself failed (as timeout(1), env(1)) */
    RUN_EXIT_CANNOT_EXEC = 126, /* the command was found but cannot be run */
    RUN_EXIT_NOT_FOUND = 127,   /* the command was not found */
};

cli_command_fn run_main;
extern const char run_usage[];

#endif
