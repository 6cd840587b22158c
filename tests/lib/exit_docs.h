/* SPDX-License-Identifier: MIT */
/*
 * exit_docs.h - where the fencelock tool documents its exit statuses, read
 * back by the tests: the "Exit status:" block of each command's --help, the
 * "Exit status" paragraph of its section in fencelock(1), and the entries
 * of that page's EXIT STATUS section.  The tests check that each status a
 * command returns is in all three.
 */
#ifndef FL_TEST_EXIT_DOCS_H
#define FL_TEST_EXIT_DOCS_H

#include <stdbool.h>

#define EXIT_CODES_MAX 64

/* A set of exit statuses, in increasing order. */
typedef struct exit_codes {
    int v[EXIT_CODES_MAX];
    int n;
} exit_codes;

/* The statuses of `fencelock CMD --help` (cmd NULL: `fencelock --help`):
 * the lines "  N  ..." of its "Exit status:" block. */
void help_exit_codes(const char *cmd, exit_codes *out);
/* The statuses of the "Exit status" paragraph of CMD's section in
 * fencelock(1), or (cmd NULL) the entries of its EXIT STATUS section.  A
 * number followed by '+' (128+N) is not a status. */
void man_exit_codes(const char *cmd, exit_codes *out);
bool exit_codes_has(const exit_codes *c, int status);
/* "0 1 2 3" */
const char *exit_codes_text(const exit_codes *c);
/* Fail unless status is documented for cmd in its --help, in its section
 * of fencelock(1) and in the EXIT STATUS section. */
void assert_exit_documented(const char *cmd, int status);

#endif
