/* SPDX-License-Identifier: MIT */
/*
 * cli_truncated.c - a region file truncated under the programs that map
 * it (I9).  Any process that may write the file can shrink it (`truncate -s
 * 4096 REGION`); every later access to a lost page of a mapping is SIGBUS.
 * Neither program may die of it silently:
 *
 * - `fencelock status --watch` exits with status 3 (region error) and a
 *   message naming the file and saying it was truncated while being read;
 * - fencelockd exits with status 3 and its log (and stderr, when the log is
 *   a file) has one region_truncated error line naming the region.
 *
 * The order is set by what the programs show, never by sleeps: the view's
 * first refresh has been printed before the file is shrunk (its next refresh
 * reads the client table, in the lost pages), and fencelockd touches the
 * lost pages on its next round (the event ring at the end of the file).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_util.h"
#include "fencelock.h"
#include "harness.h"

#define WAIT_MS 15000

static void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

/* A region with one key and one record, served by d. */
static void make_region(th_daemon *d, const char *path, const char *const *extra)
{
    if (th_daemon_start(d, path, extra) != 0)
        fail_msg("fencelockd did not get ready on %s", path);
    fl_region *r;
    assert_int_equal(fl_open(path, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "t/key", 10 * TH_S, 0, &l), 0);
    assert_int_equal(fl_commit(r, &l, "t/record", "v", 1, 0, NULL), 0);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
}

/* Wait for pid's exit within timeout_ms (a pidfd: no polling); its wait
 * status, or -1 (then it is killed). */
static int wait_exit(pid_t pid, int timeout_ms)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    assert_true(pfd >= 0);
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    close(pfd);
    int st = -1;
    if (n != 1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static void describe_status(int st, char *buf, size_t cap)
{
    if (st == -1)
        snprintf(buf, cap, "still running after %d ms", WAIT_MS);
    else if (WIFSIGNALED(st))
        snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, cap, "exit status %d", WEXITSTATUS(st));
}

/* Append what fd has now to *text (len bytes so far); false at end of file. */
static bool read_some(int fd, char **text, size_t *len)
{
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
        return true;
    if (n <= 0)
        return false;
    char *t = realloc(*text, *len + (size_t)n + 1);
    assert_non_null(t);
    memcpy(t + *len, buf, (size_t)n);
    *len += (size_t)n;
    t[*len] = '\0';
    *text = t;
    return true;
}

/* Read fd to its end, within the deadline (monotonic ns); false if the
 * writer kept it open past the deadline. */
static bool drain(int fd, char **text, size_t *len, uint64_t deadline)
{
    for (;;) {
        uint64_t now = th_now_ns();
        if (now >= deadline)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)((deadline - now) / TH_MS) + 1) == 1 && !read_some(fd, text, len))
            return true;
    }
}

/* I9 */
static void test_watch_exits_3_when_the_region_shrinks(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("watch.region"));
    th_daemon d;
    make_region(&d, path, NULL);
    /* Only the view maps the region now: the supervisor's own SIGBUS is the
     * next test's business. */
    assert_true(WIFEXITED(th_daemon_stop(&d, SIGTERM)));

    int out[2], err[2];
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    assert_int_equal(pipe2(err, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
            _exit(126);
        execl(FENCELOCK_TOOL_PATH, "fencelock", "status", "-r", path, "--watch", "50ms",
              (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);

    /* The first refresh, whole: its last section is the records. */
    char *text = NULL;
    size_t len = 0;
    uint64_t deadline = th_now_ns() + WAIT_MS * TH_MS;
    while (!(text && strstr(text, "t/record"))) {
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        int left = (int)((deadline - th_now_ns()) / TH_MS);
        if (th_now_ns() >= deadline || poll(&p, 1, left) != 1 || !read_some(out[0], &text, &len))
            fail_msg("the view never showed t/record; it showed:\n%s", text ? text : "");
    }
    assert_int_equal(truncate(path, 4096), 0);

    /* Drain stdout (refreshes may come until the next one faults), then stderr. */
    deadline = th_now_ns() + WAIT_MS * TH_MS;
    char *errors = NULL;
    size_t errors_len = 0;
    bool ended = drain(out[0], &text, &len, deadline) &&
                 drain(err[0], &errors, &errors_len, deadline);
    close(out[0]);
    close(err[0]);
    int st = wait_exit(pid, ended ? WAIT_MS : 0);
    char how[128];
    describe_status(st, how, sizeof how);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 3)
        fail_msg("fencelock status --watch: %s, want exit status 3; stderr:\n%s", how,
                 errors ? errors : "");
    assert_non_null(errors);
    char want[700];
    snprintf(want, sizeof want, "fencelock: region %s was truncated while being read", path);
    assert_contains(errors, want);
    assert_contains(errors, "the file is now 4096 bytes");
    free(errors);
    free(text);
}

/* I9 */
static void test_supervisor_exits_3_and_logs_when_the_region_shrinks(void **state)
{
    (void)state;
    char path[512], log[600];
    snprintf(path, sizeof path, "%s", th_path("daemon.region"));
    snprintf(log, sizeof log, "%s", th_path("daemon.log"));
    th_daemon d;
    /* --log: the line goes to the file and, a copy, to stderr (path.log). */
    make_region(&d, path, (const char *const[]){"--log", log, NULL});
    assert_int_equal(truncate(path, 4096), 0);
    int st = wait_exit(d.pid, WAIT_MS);
    d.pid = 0;
    char how[128];
    describe_status(st, how, sizeof how);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 3)
        fail_msg("fencelockd: %s, want exit status 3", how);

    char stderr_log[600];
    snprintf(stderr_log, sizeof stderr_log, "%s.log", path);
    const char *files[] = {log, stderr_log};
    for (size_t i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "r");
        assert_non_null(f);
        char line[16384], found[16384] = "";
        int n = 0;
        while (fgets(line, sizeof line, f))
            if (strstr(line, "\"event\":\"region_truncated\"")) {
                n++;
                snprintf(found, sizeof found, "%s", line);
            }
        fclose(f);
        if (n != 1)
            fail_msg("%s has %d region_truncated lines, want 1", files[i], n);
        if (!have_python3())
            continue;
        /* One strict JSON object naming the region and its sizes. */
        char expr[1200];
        snprintf(expr, sizeof expr,
                 "[d['level'], d['region'] == '%s', d['file_size'], d['mapped_size'] > 4096, "
                 "'truncated' in d['message'], d['ts'].endswith('Z')]",
                 path);
        char *got = json_eval(found, expr);
        if (strcmp(got, "[\"error\", true, 4096, true, true, true]") != 0)
            fail_msg("%s: %s for the line:\n%s", files[i], got, found);
        free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_exits_3_when_the_region_shrinks),
        cmocka_unit_test(test_supervisor_exits_3_and_logs_when_the_region_shrinks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
