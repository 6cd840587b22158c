/* SPDX-License-Identifier: MIT */
/*
 * json.h - the few JSON pieces the programs write (log lines, --json output).
 * Keys are arbitrary bytes: everything outside printable ASCII is escaped.
 */
#ifndef FL_JSON_H
#define FL_JSON_H
#include <stdint.h>
#include <stdio.h>

/* Write s as a JSON string literal, quotes included. */
void fl__json_string(FILE *f, const char *s);
/* Write the current wall-clock time as an RFC 3339 UTC string literal. */
void fl__json_now(FILE *f);
/* The same for a given wall-clock time in nanoseconds since the epoch. */
void fl__json_time(FILE *f, uint64_t unix_ns);

#endif
