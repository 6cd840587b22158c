/* SPDX-License-Identifier: MIT */
/*
 * supervisor_exit.c - fencelockd's exit statuses (the one table, FLD_EXIT_TABLE in
 * src/fencelockd/fencelockd.h; fencelockd(8), EXIT STATUS), each provoked in
 * a real fencelockd, each with the one line that says why and names the
 * file or the option:
 *
 *   0  SIGTERM: a clean stop, and the next start finds "clean_shutdown"
 *   1  signalfd fails: provoked for real, with RLIMIT_NOFILE at 4 so that
 *      the --log file takes the last descriptor.  The other causes (poll
 *      failing while serving, memory) cannot be provoked from outside the
 *      process and are not tested.
 *   2  bad usage: an unknown option, a bad value, a region path too long
 *      for its socket
 *   3  a corrupt state file
 *   4  a second fencelockd on a served region
 *   5  a --log file that cannot be opened
 *
 * and a SIGHUP whose log reopen fails is logged in the old file, not fatal.
 * A start that fails leaves nothing to take tokens from: no region where
 * none was, or a region that refuses new clients.
 *
 * Ordering without sleeps: each daemon is waited for, its exit or its
 * READY=1 (harness.c); log lines are waited for with a bound.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "harness.h"

static void assert_has(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The whole of a file (or of an open descriptor's file, fd >= 0), for
 * assertions; the caller frees it. */
static char *slurp(const char *path, int fd)
{
    int own = fd < 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    int rfd = fd < 0 ? own : fd;
    char *text = calloc(1, 1 << 16);
    assert_non_null(text);
    if (rfd >= 0) {
        ssize_t n = pread(rfd, text, (1 << 16) - 1, 0);
        text[n > 0 ? n : 0] = '\0';
    }
    if (own >= 0)
        close(own);
    return text;
}

/* Run fencelockd with args (after argv[0], NULL-terminated), its stderr in a
 * file, and wait for its exit (10 s: every case here exits at once; one
 * that serves instead is a failure, not a hang).  nofile > 0: its only
 * descriptors are 0, 1 and 2 and RLIMIT_NOFILE is nofile.  Returns its exit
 * status (128 + signal if killed); *err gets its stderr. */
static int run_fencelockd(const char *const *args, unsigned long nofile, char **err)
{
    static int runs;
    char errpath[600];
    snprintf(errpath, sizeof errpath, "%s/stderr.%d", th_tmpdir(), ++runs);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(126);
        close(fd);
        if (nofile) {
            for (int i = 3; i < 4096; i++)
                close(i);
            struct rlimit rl = {.rlim_cur = nofile, .rlim_max = nofile};
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
                _exit(126);
        }
        const char *argv[32] = {FENCELOCKD_PATH};
        for (int i = 0; args[i] && i < 30; i++)
            argv[i + 1] = args[i];
        execv(FENCELOCKD_PATH, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    uint64_t deadline = th_now_ns() + 10 * TH_S;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (th_now_ns() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("fencelockd did not exit");
        }
        th_wait_state(pid, "Z", 100); /* wait for it to end, at most 100 ms a round */
    }
    *err = slurp(errpath, -1);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A start that failed left the region refusing new clients: fl_open says
 * it is not ready (no supervisor made this boot's epoch durable). */
static void assert_not_ready(const char *region)
{
    fl_region *r = NULL;
    assert_int_equal(fl_open(region, &r), -EAGAIN);
    assert_null(r);
}

/* 0: stopped by SIGTERM after a clean shutdown; the next start finds it. */
static void test_exit_0_clean_stop(void **state)
{
    /* I10 */
    (void)state;
    char region[600];
    snprintf(region, sizeof region, "%s", th_path("stop"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    int st = th_daemon_stop(&d, SIGTERM);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(th_daemon_log_count(&d, "\"event\":\"stop\""), 1);
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_int_equal(th_daemon_log_count(&d, "\"last_run\":\"clean_shutdown\""), 1);
    st = th_daemon_stop(&d, SIGINT);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);

    char *err = NULL;
    assert_int_equal(run_fencelockd((const char *[]){"--version", NULL}, 0, &err), 0);
    free(err);
}

/* 1: the signal descriptor cannot be had.  RLIMIT_NOFILE 4: stdin, stdout,
 * stderr and the --log file; signalfd gets EMFILE.  Nothing is created. */
static void test_exit_1_signalfd_fails(void **state)
{
    /* I9 I1 */
    (void)state;
    char dir[600], region[700], statef[700], log[700];
    snprintf(dir, sizeof dir, "%s", th_path("sigfd"));
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(region, sizeof region, "%s/region", dir);
    snprintf(statef, sizeof statef, "%s/state", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    char *err = NULL;
    int status = run_fencelockd(
        (const char *[]){"--region", region, "--state", statef, "--log", log, NULL}, 4, &err);
    char *text = slurp(log, -1);
    if (status != 1)
        fail_msg("exit %d, want 1; stderr:\n%s\nlog:\n%s", status, err, text);
    assert_has(text, "\"event\":\"signals_failed\"");
    assert_has(text, "signalfd");
    assert_has(text, strerror(EMFILE));
    assert_false(exists(region)); /* it stopped before the region */
    free(text);
    free(err);
}

/* 2: bad usage, said on stderr before anything is opened. */
static void test_exit_2_usage(void **state)
{
    /* I9 */
    (void)state;
    char region[600], statef[700];
    snprintf(region, sizeof region, "%s", th_path("usage"));
    snprintf(statef, sizeof statef, "%s.state", region);
    char *err = NULL;
    assert_int_equal(run_fencelockd((const char *[]){"--no-such-option", NULL}, 0, &err), 2);
    assert_has(err, "Try 'fencelockd --help'");
    free(err);

    assert_int_equal(run_fencelockd((const char *[]){"--region", region, "--state", statef,
                                                      "--locks", "0", NULL},
                                    0, &err),
                     2);
    assert_has(err, "--locks");
    assert_false(exists(region));
    free(err);

    /* A Unix socket address holds 107 bytes: REGION.sock must fit. */
    char dir[800], longregion[900];
    snprintf(dir, sizeof dir, "%s/%0120d", th_tmpdir(), 0);
    snprintf(longregion, sizeof longregion, "%s/region", dir);
    assert_int_equal(run_fencelockd((const char *[]){"--region", longregion, "--state", statef,
                                                      NULL},
                                    0, &err),
                     2);
    assert_has(err, longregion);
    assert_has(err, ".sock");
    assert_false(exists(dir)); /* said before any directory was made */
    free(err);
}

/* 3: a corrupt state file; the region it created refuses clients. */
static void test_exit_3_corrupt_state(void **state)
{
    /* I9 I1 */
    (void)state;
    char region[600], statef[700];
    snprintf(region, sizeof region, "%s", th_path("corrupt"));
    snprintf(statef, sizeof statef, "%s.state", region);
    FILE *f = fopen(statef, "w");
    assert_non_null(f);
    fputs("fencelock-state 1\nepoch 7\nchecksum 0000000000000000\n", f);
    assert_int_equal(fclose(f), 0);
    char *err = NULL;
    assert_int_equal(
        run_fencelockd((const char *[]){"--region", region, "--state", statef, NULL}, 0, &err), 3);
    assert_has(err, statef);
    /* said once, by the function that read it (fencelockd.h, ERRORS) */
    assert_int_equal(count(err, "\"level\":\"error\""), 1);
    assert_int_equal(count(err, "\"event\":\"state_invalid\""), 1);
    assert_not_ready(region);
    free(err);
}

/* 4: another fencelockd serves the region; the first goes on serving. */
static void test_exit_4_already_served(void **state)
{
    /* I9 */
    (void)state;
    char region[600], statef[700];
    snprintf(region, sizeof region, "%s", th_path("busy"));
    snprintf(statef, sizeof statef, "%s.state", region);
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    char *err = NULL;
    assert_int_equal(
        run_fencelockd((const char *[]){"--region", region, "--state", statef, NULL}, 0, &err), 4);
    assert_has(err, "\"event\":\"already_served\"");
    char pid[64];
    snprintf(pid, sizeof pid, "fencelockd pid %d", (int)d.pid);
    assert_has(err, pid);
    free(err);
    fl_region *r = NULL;
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_region_registered(r), 1); /* still served by the first */
    fl_close(r);
    int st = th_daemon_stop(&d, SIGTERM);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* 5: the --log file cannot be opened (not bad usage: the command line is
 * right, the file system says no).  One line on stderr names the file;
 * nothing is created. */
static void test_exit_5_log_unopenable(void **state)
{
    /* I9 */
    (void)state;
    char region[600], statef[700], notdir[600], log[700];
    snprintf(region, sizeof region, "%s", th_path("logfail"));
    snprintf(statef, sizeof statef, "%s.state", region);
    snprintf(notdir, sizeof notdir, "%s", th_path("a-file"));
    FILE *f = fopen(notdir, "w");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    /* Under a regular file: ENOTDIR, whoever runs the test (root too). */
    snprintf(log, sizeof log, "%s/fencelockd.log", notdir);
    char *err = NULL;
    assert_int_equal(run_fencelockd((const char *[]){"--region", region, "--state", statef,
                                                      "--log", log, NULL},
                                    0, &err),
                     5);
    assert_has(err, "cannot open log file");
    assert_has(err, log);
    assert_has(err, strerror(ENOTDIR));
    assert_false(exists(region));
    free(err);

    snprintf(log, sizeof log, "%s/no-such-dir/fencelockd.log", th_tmpdir());
    assert_int_equal(run_fencelockd((const char *[]){"--region", region, "--state", statef,
                                                      "--log", log, NULL},
                                    0, &err),
                     5);
    assert_has(err, log);
    assert_has(err, strerror(ENOENT));
    free(err);
}

/* SIGHUP reopens the log; a reopen that fails is logged in the file kept
 * open, and the supervisor serves on and stops cleanly. */
static void test_sighup_reopen_failure_is_not_fatal(void **state)
{
    /* I9 I10 */
    (void)state;
    char dir[600], region[700], log[700];
    snprintf(dir, sizeof dir, "%s", th_path("hup"));
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(region, sizeof region, "%s", th_path("hup-region"));
    snprintf(log, sizeof log, "%s/log", dir);
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, (const char *const[]){"--log", log, NULL}), 0);
    int fd = open(log, O_RDONLY | O_CLOEXEC); /* the file it keeps writing */
    assert_true(fd >= 0);
    assert_int_equal(unlink(log), 0);
    assert_int_equal(rmdir(dir), 0); /* now the path cannot be created again */
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    uint64_t deadline = th_now_ns() + 10 * TH_S;
    for (;;) {
        char *text = slurp(NULL, fd);
        bool seen = strstr(text, "\"event\":\"log_reopen_failed\"") != NULL;
        if (seen) {
            assert_has(text, log);
            free(text);
            break;
        }
        free(text);
        if (th_now_ns() > deadline)
            fail_msg("no log_reopen_failed line after SIGHUP");
        usleep(2000); /* polling a file the daemon appends to; not a race */
    }
    int st = th_daemon_stop(&d, SIGTERM);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char *text = slurp(NULL, fd);
    assert_has(text, "\"event\":\"stop\"");
    free(text);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_0_clean_stop),
        cmocka_unit_test(test_exit_1_signalfd_fails),
        cmocka_unit_test(test_exit_2_usage),
        cmocka_unit_test(test_exit_3_corrupt_state),
        cmocka_unit_test(test_exit_4_already_served),
        cmocka_unit_test(test_exit_5_log_unopenable),
        cmocka_unit_test(test_sighup_reopen_failure_is_not_fatal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
