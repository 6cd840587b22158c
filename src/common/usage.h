/* SPDX-License-Identifier: MIT */
/*
 * usage.h - what a fencelock program says on stderr about its command line
 * and about a library error, in the same words in every program and
 * subcommand:
 *
 *     fencelock status: unknown option '--jsn'
 *     Try 'fencelock status --help'.
 *
 * The program's name ("fencelock", "fencelock status", "fencelockd") is set
 * once, by main() or by the subcommand's main, as err(3) takes it from
 * the program: every message below starts with it.
 */
#ifndef FL_COMMON_USAGE_H
#define FL_COMMON_USAGE_H

#include <getopt.h>

/* Bad usage: the exit status of every fencelock program for an unknown
 * command or option, a missing or extra argument (documented in each
 * usage text). */
#define FL__EXIT_USAGE 2

/* Name the program messages start with; name must outlive the messages (a
 * string literal).  Until it is called: "fencelock". */
void fl__set_program(const char *name);

/* "PROGRAM: MESSAGE" and a line feed on stderr. */
__attribute__((format(printf, 1, 2))) void fl__say(const char *fmt, ...);

/* "PROGRAM: MESSAGE" and "Try 'PROGRAM --help'." on stderr; returns
 * FL__EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) int fl__usage_error(const char *fmt, ...);

/* What getopt_long() rejected, said as fl__usage_error() does, for a loop
 * run with opterr = 0 and an optstring that starts with ':' (or "+:"): c is
 * what getopt_long returned, ':' for an option without its argument, else
 * '?'.  Returns FL__EXIT_USAGE. */
int fl__option_error(int c, char **argv, const struct option *longopts);

/* The last library error in one line: fl_last_error()'s detail if there
 * is one, else fl_strerror(err). */
const char *fl__library_error(int err);

#endif
