/* SPDX-License-Identifier: MIT */
/*
 * cli.h - what the parts of the fencelock tool share: its exit statuses and
 * the entry points of its subcommands.  main.c dispatches; each subcommand
 * parses its own options and owns its output.
 */
#ifndef FL_TOOL_CLI_H
#define FL_TOOL_CLI_H

#include "usage.h"

/* Exit statuses, documented in the usage text; scripts depend on them. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_RUNTIME = 1, /* out of memory, cannot write the output, unexpected library error */
    CLI_EXIT_USAGE = FL__EXIT_USAGE, /* 2: unknown command or option, missing or extra argument */
    CLI_EXIT_REGION = 3,  /* the region is missing, unreadable, corrupt or of another version */
    CLI_EXIT_NO_KEY = 4,  /* status KEY: the region has no such key */
};

/* The exit-status paragraph, shared by every usage text. */
#define CLI_EXIT_STATUS_TEXT                                                                \
    "Exit status:\n"                                                                        \
    "  0  success\n"                                                                        \
    "  1  runtime error (out of memory, cannot write the output)\n"                         \
    "  2  bad usage: unknown command or option, missing or extra argument\n"                \
    "  3  the region cannot be opened or is not a valid region: missing, unreadable,\n"     \
    "     empty, not a fencelock region, corrupt, truncated, of another format\n"          \
    "     version, or in a directory another user controls\n"

/* The -r option of a command that reads a region, with its default (as
 * fl_default_region_path() finds it), shared by the usage texts that
 * describe their options from column 21. */
#define CLI_REGION_OPTION_TEXT                                                              \
    "  -r, --region PATH  the region file (default: $FENCELOCK_REGION, else\n"             \
    "                     /run/fencelock/region for root, else\n"                          \
    "                     $XDG_RUNTIME_DIR/fencelock/region, else\n"                       \
    "                     /dev/shm/fencelock-UID/region)\n"

/* The environment paragraph, shared by every usage text. */
#define CLI_ENVIRONMENT_TEXT                                                                \
    "Environment:\n"                                                                        \
    "  FENCELOCK_REGION  region file used when --region is not given; when it is\n"         \
    "                    unset or empty: /run/fencelock/region for root (the\n"             \
    "                    system-wide region), else $XDG_RUNTIME_DIR/fencelock/region\n"     \
    "                    (the user's session), else /dev/shm/fencelock-UID/region,\n"       \
    "                    UID being the caller's user id\n"                                  \
    "  XDG_RUNTIME_DIR   the user's runtime directory (see FENCELOCK_REGION)\n"

/* Flush stdout: CLI_EXIT_OK, or CLI_EXIT_RUNTIME after saying on stderr that
 * the output was lost. */
int cli_finish_stdout(void);

/* A KEY or RECORD argument is what the library takes: 1 to FL_KEY_MAX bytes,
 * any but NUL (which an argument cannot hold).  -1 if name is one, else bad
 * usage said ("RECORD is empty (1 to 127 bytes)", what naming it). */
int cli_check_name(const char *what, const char *name);
/* The argument of -r/--region into *region: 0, or the usage status (after
 * the message) for an empty one. */
int cli_region_option(const char *arg, const char **region);

/* The exit status of a failed fl_open: CLI_EXIT_RUNTIME for a shortage of
 * memory or descriptors, CLI_EXIT_REGION for anything about the region. */
int cli_open_status(int err);
/* Say why region (NULL: the default) could not be opened, "PROGRAM: cannot
 * open region PATH: DETAIL" (the path left out when the detail has it), and
 * return cli_open_status(err). */
int cli_open_failed(const char *region, int err);

/* A subcommand: argv[0] is its name; returns an exit status.  main.c names
 * the program "fencelock NAME" (usage.h) before it runs one, so that its
 * messages and hints name the subcommand. */
typedef int cli_command_fn(int argc, char **argv);

cli_command_fn status_main;
/* Written at start from the column definitions (status.c); as long as it
 * takes (a test reads it whole). */
#define STATUS_USAGE_MAX 32768
extern char status_usage[STATUS_USAGE_MAX];

cli_command_fn metrics_main;
extern const char metrics_usage[];

cli_command_fn commit_main;
extern const char commit_usage[];

cli_command_fn read_main;
extern const char read_usage[];

cli_command_fn etcd_epoch_main;
extern const char etcd_epoch_usage[];

#endif
