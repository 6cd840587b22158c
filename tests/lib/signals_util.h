/* SPDX-License-Identifier: MIT */
/*
 * signals_util.h - what the tests of the operational signals share: a
 * supervisor started with extra options, its log as one JSON array for
 * python3 to query, the strict exposition checker (check_exposition.py),
 * and waits on files the supervisor rewrites.  Running programs and asking
 * python3 about JSON come from tests/lib/cli_util.h.
 */
#ifndef FL_TEST_SIGNALS_UTIL_H
#define FL_TEST_SIGNALS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli_util.h"
#include "harness.h"

/* Needles for th_daemon_log_wait: the supervisor writes compact JSON. */
#define LOG_EVENT(name) "\"event\":\"" name "\""

/* th_path(name) copied to buf. */
void sig_path(char *buf, size_t cap, const char *name);
/* Start fencelockd on region with extra arguments (NULL-terminated, may be
 * NULL); fails the test if it does not get ready. */
void sig_daemon_start(th_daemon *d, const char *region, const char *const *extra);
/* The whole of a file (malloc'd, NUL-terminated), or NULL if it cannot be read. */
char *sig_read_file(const char *path);
/* The supervisor's log (region + ".log") as one JSON array of its lines. */
char *sig_log_array(const th_daemon *d);
/* Evaluate the Python expression expr (printf format) with d bound to the
 * JSON document json; fail the test unless json.dumps() of it is want. */
void sig_assert_json(const char *json, const char *want, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Run check_exposition.py --require-prefix fencelock_ --dump on text:
 * returns its exit status; *dump (if not NULL) receives its JSON output,
 * *problems (if not NULL) its messages (both malloc'd). */
int sig_check_exposition(const char *text, char **dump, char **problems);
/* The same, failing the test (with the problems and the text) unless valid. */
char *sig_assert_exposition(const char *text);
/* Wait until the file at path contains every needle (NULL-terminated list)
 * within timeout_ms; true if it did. */
bool sig_wait_file(const char *path, const char *const *needles, int timeout_ms);
/* A decimal string for v (one of eight rotating static buffers). */
const char *sig_u64(uint64_t v);
/* Fail the test unless text contains needle. */
void sig_assert_contains(const char *text, const char *needle);
void sig_assert_not_contains(const char *text, const char *needle);
/* Skip the test when python3 is missing (the checks need it). */
void sig_need_python3(void);

#endif
