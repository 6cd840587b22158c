/* SPDX-License-Identifier: MIT */
/*
 * cli_util.h - what the command-line tests share: running a program (the
 * fencelock tool, python3, strace) with its output captured, asking python3
 * questions about a JSON document, and picking rows out of the tool's tables.
 */
#ifndef FL_TEST_CLI_UTIL_H
#define FL_TEST_CLI_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct run_result {
    int status; /* exit status; -1 if it was killed or timed out */
    char *out;  /* stdout, NUL-terminated */
    char *err;  /* stderr, NUL-terminated */
} run_result;

typedef struct run_opts {
    const char *region_env; /* FENCELOCK_REGION for the program; NULL: unset */
    const char *stdin_text; /* NULL: /dev/null */
    const char *stdout_path; /* NULL: captured; else written to this file (/dev/full) */
    uid_t uid;              /* 0: as we are; else drop to this uid (and gid) first */
    gid_t gid;
} run_opts;

/* Run argv (argv[0] is looked up in PATH) and capture its output; fails the
 * test if it cannot be started or does not finish within 20 s. */
void run_program(run_result *res, const run_opts *o, const char *const *argv);
/* Run the fencelock tool with args (NULL-terminated, without argv[0]). */
void run_tool(run_result *res, const run_opts *o, const char *const *args);
void run_result_free(run_result *res);

/* Lines in s (a last line without newline counts). */
int count_lines(const char *s);

/* Whether python3 runs here; tests that need it skip without it. */
bool have_python3(void);
/* Evaluate the Python expression expr with the JSON document json bound to
 * d, and return json.dumps() of the result (malloc'd, no newline).  Fails
 * the test if json is not one strict JSON document (no duplicate members,
 * no NaN) or expr raises. */
char *json_eval(const char *json, const char *expr);

/* The row of the table under heading section ("Locks", "Records",
 * "Clients") whose field number col (0-based) is value, split on blanks into
 * at most max fields (malloc'd copies in fields[]); returns the field count,
 * 0 if there is no such row. */
int table_row(const char *out, const char *section, int col, const char *value, char **fields,
              int max);
void free_fields(char **fields, int n);

#endif
