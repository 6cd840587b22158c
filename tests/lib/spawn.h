/* SPDX-License-Identifier: MIT */
/*
 * spawn.h - what the tests of the write paths (run_* in tests/cli, tests/sql,
 * files_pointer in tests/examples) share: starting a real program with a
 * pipe to its standard input, a pipe from its standard output, its standard
 * error in a file and an optional report pipe on fd 3; reading its lines
 * with timeouts; and waiting for it.  Every process dies with the test
 * (PR_SET_PDEATHSIG).
 * Events are ordered by these lines and waits, never by sleeps.
 */
#ifndef FL_TEST_SPAWN_H
#define FL_TEST_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct sp_proc {
    pid_t pid;
    int in;             /* write end of its stdin (-1: it has /dev/null, or closed) */
    int out;            /* read end of its stdout */
    int report;         /* read end of the pipe on its fd 3 (-1 if not asked for) */
    char err_path[512]; /* its stderr */
    int status;         /* sp_wait's result once it returned >= 0 */
} sp_proc;

typedef struct sp_opts {
    const char *region;         /* FENCELOCK_REGION (NULL: unset) */
    const char *const *env;     /* more NAME=VALUE entries, NULL-terminated (may be NULL) */
    bool stdin_pipe;            /* false: stdin is /dev/null */
    bool report_pipe;           /* a pipe on its fd 3, read through sp_proc.report */
    bool stderr_broken_pipe;    /* its stderr a pipe whose reader is gone (err_path stays
                                   empty): every write fails with EPIPE or SIGPIPE */
} sp_opts;

/* Start argv (argv[0] a path, or looked up in PATH); fails the test if it
 * cannot. */
void sp_start(sp_proc *p, const sp_opts *o, const char *const *argv);
/* Read one line of its stdout (or of fd, for the report pipe) within
 * timeout_ms, without the newline; fails the test on timeout or EOF,
 * naming what was expected and showing its stderr. */
const char *sp_line(sp_proc *p, int fd, char *buf, size_t cap, int timeout_ms,
                    const char *expecting);
/* Write text to its stdin; sp_close_stdin sends EOF. */
void sp_write(sp_proc *p, const char *text);
void sp_close_stdin(sp_proc *p);
/* Wait for its exit within timeout_ms: the exit status, 128+N if killed by
 * signal N; fails the test on timeout (and kills it). */
int sp_wait(sp_proc *p, int timeout_ms);
/* Its stderr so far (malloc'd). */
char *sp_stderr(const sp_proc *p);
/* Close its pipes (after sp_wait). */
void sp_free(sp_proc *p);

/* Wait until pid is a zombie (exited, not yet reaped) per /proc. */
bool sp_wait_zombie(pid_t pid, int timeout_ms);
/* Fail the test unless haystack contains needle. */
void sp_assert_contains(const char *haystack, const char *needle);

#endif
