/* SPDX-License-Identifier: MIT */
/* pg_server.c - see pg_server.h. */
#include "pg_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef PG_BINDIR
#define PG_BINDIR "/usr/lib/postgresql/15/bin"
#endif

static char bindir[700];
static char dir[256];    /* owned by the server's user; holds data/, the socket, log */
static char conninfo[512];
static bool as_postgres; /* we are root: run the server binaries as postgres */
static int watchdog_fd = -1;
static pid_t watchdog_pid;

static bool executable(const char *d, const char *prog)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", d, prog);
    return access(path, X_OK) == 0;
}

static bool find_bindir(void)
{
    const char *env = getenv("FL_PG_BINDIR");
    const char *candidates[] = {env, PG_BINDIR};
    for (size_t i = 0; i < 2; i++) {
        if (candidates[i] && executable(candidates[i], "initdb") &&
            executable(candidates[i], "pg_ctl")) {
            snprintf(bindir, sizeof bindir, "%s", candidates[i]);
            return true;
        }
    }
    /* Debian installs each major version under /usr/lib/postgresql/N/bin. */
    DIR *d = opendir("/usr/lib/postgresql");
    long best = -1;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            char *end;
            long v = strtol(e->d_name, &end, 10);
            char cand[600];
            snprintf(cand, sizeof cand, "/usr/lib/postgresql/%s/bin", e->d_name);
            if (*end == '\0' && end != e->d_name && v > best && executable(cand, "initdb") &&
                executable(cand, "pg_ctl")) {
                best = v;
                snprintf(bindir, sizeof bindir, "%s", cand);
            }
        }
        closedir(d);
    }
    return best >= 0;
}

/* Run BINDIR/prog args... (as postgres when root), output to DIR/setup.log;
 * its exit status, or -1. */
static int run_pg(const char *prog, const char *const *args)
{
    char path[1024], log[400];
    snprintf(path, sizeof path, "%s/%s", bindir, prog);
    snprintf(log, sizeof log, "%s/setup.log", dir);
    const char *argv[32];
    int n = 0;
    if (as_postgres) {
        argv[n++] = "runuser";
        argv[n++] = "-u";
        argv[n++] = "postgres";
        argv[n++] = "--";
    }
    argv[n++] = path;
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void stop_and_remove(void)
{
    char data[300];
    snprintf(data, sizeof data, "%s/data", dir);
    run_pg("pg_ctl", (const char *const[]){"-D", data, "-m", "immediate", "-w", "stop", NULL});
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) { /* best effort */
    }
}

/* The normal way out: close the pipe, the watchdog stops the server, and
 * we wait for it so that nothing is left when the test ends. */
static void at_exit(void)
{
    if (watchdog_fd < 0)
        return;
    close(watchdog_fd);
    watchdog_fd = -1;
    waitpid(watchdog_pid, NULL, 0);
}

/* A process of its own session (out of reach of signals meant for the
 * test's process group) that cleans up when the pipe from the test closes:
 * at the test's exit, or its death by any signal. */
static void start_watchdog(void)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[1]);
        setsid();
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        char c;
        while (read(p[0], &c, 1) != 0 && errno == EINTR) {
        }
        stop_and_remove();
        _exit(0);
    }
    close(p[0]);
    watchdog_fd = p[1];
    watchdog_pid = pid;
    atexit(at_exit);
}

static void fail_with_log(const char *what)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cat '%s/setup.log' '%s/server.log' >&2 2>/dev/null", dir, dir);
    if (system(cmd) != 0) { /* shown if there */
    }
    fail_msg("PostgreSQL: %s (logs above; binaries from %s)", what, bindir);
}

const char *pg_server_start(void)
{
    if (!find_bindir())
        fail_msg("PostgreSQL server binaries (initdb, pg_ctl) not found in $FL_PG_BINDIR, "
                 "%s or /usr/lib/postgresql/*/bin: install Debian's postgresql package "
                 "(apt-get install postgresql), which CI installs; this test does not skip",
                 PG_BINDIR);
    as_postgres = geteuid() == 0;
    struct passwd *pw = NULL;
    if (as_postgres) {
        pw = getpwnam("postgres");
        if (!pw)
            fail_msg("running as root, the test needs the 'postgres' user to run the server "
                     "(postgres refuses root); Debian's postgresql package creates it");
        if (access("/usr/sbin/runuser", X_OK) != 0 && access("/sbin/runuser", X_OK) != 0)
            fail_msg("running as root, the test needs runuser (util-linux) to start the "
                     "server as the postgres user");
    }
    snprintf(dir, sizeof dir, "/tmp/flpg.XXXXXX");
    if (!mkdtemp(dir))
        fail_msg("mkdtemp: %s", strerror(errno));
    if (pw && chown(dir, pw->pw_uid, pw->pw_gid) != 0)
        fail_msg("chown %s to postgres: %s", dir, strerror(errno));
    start_watchdog();

    char data[300], log[300], opts[400];
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log, sizeof log, "%s/server.log", dir);
    /* No TCP at all: only the socket in our directory, so parallel runs
     * and a system server never collide.  fsync off: a test database. */
    snprintf(opts, sizeof opts, "-k %s -c listen_addresses='' -c fsync=off", dir);
    if (run_pg("initdb", (const char *const[]){"-D", data, "--auth=trust", "--username=postgres",
                                               "--encoding=UTF8", "--no-sync", NULL}) != 0)
        fail_with_log("initdb failed");
    if (run_pg("pg_ctl", (const char *const[]){"-D", data, "-o", opts, "-l", log, "-w", "-t",
                                               "60", "start", NULL}) != 0)
        fail_with_log("the server did not start");
    snprintf(conninfo, sizeof conninfo, "host=%s dbname=postgres user=postgres", dir);
    return conninfo;
}
