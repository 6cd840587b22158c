/* SPDX-License-Identifier: MIT */
/*
 * run_probe.c - the COMMAND that the tests of `fencelock run` run.  It
 * reports on fd 3 (a pipe to the test) what a command sees:
 *
 *   ready PID PGID                 started: its pid and process group
 *   env KEY TOKEN REGION           FENCELOCK_KEY, _TOKEN, _REGION ("-": unset)
 *   fds N [FD=TARGET...]           open descriptors besides 0..3 (leaked to it)
 *   grandchild PID PGID            (--fork) a child it started, same group
 *   detached PID SID               (--setsid) a child in a session of its own,
 *                                  (--detach) the same double-forked, so that
 *                                  it is reparented to fencelock run; both
 *                                  ignore SIGTERM (and report it)
 *   signal PID N                   PID (it or its child) received signal N
 *
 * and obeys lines on stdin: "exit N" (exit with N), "kill N" (die by signal
 * N).  Caught signals are reported and ignored, except SIGTERM, which ends
 * it (by SIGTERM) unless --ignore-term.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool ignore_term;

static void say(const char *line)
{
    size_t n = strlen(line);
    if (write(3, line, n) != (ssize_t)n) { /* the test is gone */
    }
}

static void on_signal(int sig)
{
    char line[64];
    snprintf(line, sizeof line, "signal %d %d\n", (int)getpid(), sig); /* no allocation */
    say(line);
    if (sig == SIGTERM && !ignore_term) {
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
    }
}

static void catch_signals(void)
{
    static const int sigs[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM,
                               SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

/* How many descriptors besides 0..3 are open, and what they are. */
static int extra_fds(char *what, size_t cap)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    size_t len = 0;
    what[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 3 || fd == dirfd(d))
            continue;
        n++;
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t t = readlink(link, target, sizeof target - 1);
        target[t > 0 ? t : 0] = '\0';
        if (len + 300 < cap)
            len += (size_t)snprintf(what + len, cap - len, " %d=%s", fd, target);
    }
    closedir(d);
    return n;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v ? v : "-";
}

int main(int argc, char **argv)
{
    bool do_fork = false, do_setsid = false, do_detach = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ignore-term") == 0)
            ignore_term = true;
        else if (strcmp(argv[i], "--fork") == 0)
            do_fork = true;
        else if (strcmp(argv[i], "--setsid") == 0)
            do_setsid = true;
        else if (strcmp(argv[i], "--detach") == 0)
            do_detach = true;
    }
    catch_signals();
    char line[8192];
    snprintf(line, sizeof line, "ready %d %d\n", (int)getpid(), (int)getpgrp());
    say(line);
    snprintf(line, sizeof line, "env %s %s %s\n", env("FENCELOCK_KEY"), env("FENCELOCK_TOKEN"),
             env("FENCELOCK_REGION"));
    say(line);
    char what[4096];
    int nfds = extra_fds(what, sizeof what);
    snprintf(line, sizeof line, "fds %d%s\n", nfds, what);
    say(line);
    if (do_fork) {
        pid_t pid = fork();
        if (pid == 0) {
            snprintf(line, sizeof line, "grandchild %d %d\n", (int)getpid(), (int)getpgrp());
            say(line);
            for (;;)
                pause();
        }
    }
    if (do_setsid || do_detach) {
        pid_t pid = fork();
        if (pid == 0) {
            setsid();
            if (do_detach && fork() != 0)
                _exit(0); /* the detached one is orphaned */
            ignore_term = true;
            snprintf(line, sizeof line, "detached %d %d\n", (int)getpid(), (int)getsid(0));
            say(line);
            for (;;)
                pause();
        }
        if (do_detach)
            waitpid(pid, NULL, 0);
    }
    /* Commands on stdin, one per line. */
    size_t n = 0;
    for (;;) {
        ssize_t r = read(0, line + n, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        if (line[n] != '\n' && n + 2 < sizeof line) {
            n++;
            continue;
        }
        line[n] = '\0';
        n = 0;
        int v;
        if (sscanf(line, "exit %d", &v) == 1)
            return v;
        if (sscanf(line, "kill %d", &v) == 1) {
            signal(v, SIG_DFL);
            raise(v);
        }
    }
}
