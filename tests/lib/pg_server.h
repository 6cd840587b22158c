/* SPDX-License-Identifier: MIT */
/*
 * pg_server.h - a private PostgreSQL server for one test run: initdb into a
 * fresh directory, started with pg_ctl on a Unix socket in that directory
 * (no TCP port), as the `postgres` OS user when the test runs as root
 * (postgres refuses to run as root).  It is stopped and its directory
 * removed at exit, and also if the test process dies: a watchdog process
 * does it when the test's end of a pipe closes.
 *
 * The server binaries are found in $FL_PG_BINDIR, else PG_BINDIR (set by
 * CMake), else /usr/lib/postgresql/<newest>/bin.  Their absence is a test
 * failure, not a skip: CI installs them (Debian's postgresql package).
 */
#ifndef FL_TEST_PG_SERVER_H
#define FL_TEST_PG_SERVER_H

/* Start the server; fails the test (with what is missing or the server's
 * log) if it cannot.  Returns the libpq conninfo to reach it. */
const char *pg_server_start(void);

#endif
