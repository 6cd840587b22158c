/* SPDX-License-Identifier: MIT */
/*
 * signals_watch.c - `fencelock status --watch` in a real terminal: tmux runs
 * it in a detached 160x40 session (a private server on a socket in the
 * test's directory), the test reads the screen with capture-pane and types
 * with send-keys.
 *
 * - the view shows the keys, with rates once a second refresh came; a burst
 *   of acquisitions on one key moves it to the top with a rate above zero,
 *   and the next refresh brings it back to 0.0 (so it refreshes);
 * - it uses the alternate screen and hides the cursor while it runs;
 * - resized to 70x12 it fits the window and says what it left out;
 * - q and Ctrl-C quit with status 0, leaving the terminal as it was
 *   (normal screen, stty icanon echo isig); SIGTERM restores the terminal
 *   and ends the process by that signal (the shell sees status 143).
 *
 * It waits for what the screen shows, never for a fixed time.  Skipped if
 * tmux is not installed.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "proc_stat.h"
#include "signals_util.h"

#define LONG_LEASE (3600 * TH_S)
#define SCREEN_WAIT_MS 15000

static char region[512], sock[512];
static th_daemon daemon_;
static bool have_tmux, server_started;

/* Run tmux on our private server with up to 24 arguments (NULL-ended). */
static run_result tmux(const char *a0, ...)
{
    const char *argv[32] = {"tmux", "-S", sock, "-f", "/dev/null", a0};
    int n = 6;
    va_list ap;
    va_start(ap, a0);
    for (const char *a; (a = va_arg(ap, const char *));) {
        assert_true(n < 30);
        argv[n++] = a;
    }
    va_end(ap);
    argv[n] = NULL;
    run_result r;
    run_program(&r, NULL, argv);
    return r;
}

static char *capture_from(const char *session, const char *start)
{
    run_result r = tmux("capture-pane", "-p", "-t", session, "-S", start, NULL);
    if (r.status != 0)
        fail_msg("tmux capture-pane: %s", r.err);
    free(r.err);
    return r.out;
}

/* The visible screen. */
static char *capture(const char *session) { return capture_from(session, "0"); }

/* tmux's value of format (like "#{pane_dead}") for session, without newline. */
static char *show(const char *session, const char *format)
{
    run_result r = tmux("display-message", "-p", "-t", session, format, NULL);
    if (r.status != 0)
        fail_msg("tmux display-message: %s", r.err);
    free(r.err);
    size_t n = strlen(r.out);
    if (n && r.out[n - 1] == '\n')
        r.out[n - 1] = '\0';
    return r.out;
}

static void assert_show(const char *session, const char *format, const char *want)
{
    char *got = show(session, format);
    if (strcmp(got, want) != 0)
        fail_msg("%s is '%s', want '%s'; screen:\n%s", format, got, want, capture(session));
    free(got);
}

typedef bool screen_pred(const char *screen, void *arg);

/* Wait until pred holds for the screen; fail with the last screen if not. */
static char *wait_screen(const char *session, screen_pred *pred, void *arg, const char *what)
{
    uint64_t deadline = th_now_ns() + SCREEN_WAIT_MS * TH_MS;
    for (;;) {
        char *s = capture(session);
        if (pred(s, arg))
            return s;
        if (th_now_ns() >= deadline)
            fail_msg("the screen never showed %s; it shows:\n%s", what, s);
        free(s);
        usleep(20000); /* polling the terminal; the deadline only bounds a failure */
    }
}

static bool has_all(const char *screen, void *arg)
{
    for (const char *const *n = arg; *n; n++)
        if (!strstr(screen, *n))
            return false;
    return true;
}

static bool pane_dead(const char *screen, void *arg)
{
    (void)screen;
    char *dead = show(arg, "#{pane_dead}");
    bool yes = strcmp(dead, "1") == 0;
    free(dead);
    return yes;
}

/* The first row of the Keys table: its key, ACQ/S and ACQUIRED. */
struct first_row {
    char key[64];
    double acq;
    char acquired[32];
};

static bool read_first_row(const char *screen, struct first_row *row)
{
    const char *keys = strstr(screen, "\nKeys\n");
    if (!keys)
        return false;
    const char *titles = keys + 6;
    const char *line = strchr(titles, '\n');
    if (!line)
        return false;
    char state[16], commit[16], rej[16], take[16], waiters[16], left[16], pid[16], token[32];
    return sscanf(line + 1, "%63s %15s %lf %15s %15s %15s %15s %15s %15s %31s %31s", row->key,
                  state, &row->acq, commit, rej, take, waiters, left, pid, token,
                  row->acquired) == 11;
}

static bool busy_on_top(const char *screen, void *arg)
{
    (void)arg;
    struct first_row row;
    return read_first_row(screen, &row) && strcmp(row.key, "zzz-busy") == 0 && row.acq > 0 &&
           strcmp(row.acquired, "201") == 0;
}

static bool calm_again(const char *screen, void *arg)
{
    (void)arg;
    struct first_row row;
    const char *busy = strstr(screen, "\n  zzz-busy ");
    char state[16];
    double acq = -1;
    return read_first_row(screen, &row) && strcmp(row.key, "aaa-idle") == 0 && busy &&
           sscanf(busy, "\n  zzz-busy %15s %lf", state, &acq) == 2 && acq == 0;
}

/* On "burst N": N rounds of acquire, commit, release on zzz-busy, then "done". */
static int burster(void *arg, int in, int out)
{
    (void)arg;
    fl_region *r;
    if (fl_open(region, &r) != 0)
        return 1;
    th_send(out, "ready");
    char line[64];
    while (th_recv(in, line, sizeof line, 60000) == 0) {
        int n;
        if (sscanf(line, "burst %d", &n) != 1)
            break;
        for (int i = 0; i < n; i++) {
            fl_lease l;
            if (fl_acquire(r, "zzz-busy", LONG_LEASE, FL_WAIT_FOREVER, &l) ||
                fl_commit_u64(r, &l, "zzz-busy/rec", (uint64_t)i, 0, NULL) ||
                fl_release(r, &l))
                return 2;
        }
        th_send(out, "done");
    }
    fl_close(r);
    return 0;
}

/* A shell command line: the watch, then what the terminal is left like. */
static void watch_command(char *buf, size_t cap, const char *before)
{
    snprintf(buf, cap,
             "%s'%s' status -r '%s' --watch 1s; echo \"exit=$?\"; "
             "stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo "
             "-e isig -e -isig | tr '\\n' ' '; echo",
             before, FENCELOCK_TOOL_PATH, region);
}

static void start_session(const char *name, const char *command)
{
    run_result r = tmux("new-session", "-d", "-x", "160", "-y", "40", "-s", name, command, ";",
                        "set-option", "-t", name, "remain-on-exit", "on", ";", "set-option",
                        "-t", name, "status", "off", NULL);
    if (r.status != 0)
        fail_msg("tmux new-session: %s", r.err);
    server_started = true;
    run_result_free(&r);
}

static const char *const view_needles[] = {"fencelock status --watch  ", "(q: quit)",
                                           "\nKeys\n", "aaa-idle", "zzz-busy", "\nRecords\n",
                                           NULL};

/* After q or Ctrl-C: status 0 and the terminal as it was. */
static void assert_restored(const char *session)
{
    free(wait_screen(session, pane_dead, (void *)session, "the end of the watch"));
    /* With the history: tmux scrolls a line up to say "Pane is dead". */
    char *s = capture_from(session, "-");
    sig_assert_contains(s, "exit=0\n");
    sig_assert_contains(s, "isig icanon echo");
    sig_assert_not_contains(s, "fencelock status --watch");
    free(s);
    assert_show(session, "#{alternate_on}", "0");
}

static int setup(void **state)
{
    (void)state;
    const char *argv[] = {"tmux", "-V", NULL};
    run_result r;
    run_program(&r, NULL, argv);
    have_tmux = r.status == 0;
    run_result_free(&r);
    sig_path(region, sizeof region, "watch.region");
    sig_path(sock, sizeof sock, "tmux.sock");
    if (th_daemon_start(&daemon_, region, NULL) != 0)
        return -1;
    /* Two keys with a record each, used once. */
    fl_region *h;
    if (fl_open(region, &h) != 0)
        return -1;
    const char *keys[] = {"aaa-idle", "zzz-busy"};
    for (int i = 0; i < 2; i++) {
        char rec[64];
        snprintf(rec, sizeof rec, "%s/rec", keys[i]);
        fl_lease l;
        if (fl_acquire(h, keys[i], LONG_LEASE, 0, &l) || fl_commit_u64(h, &l, rec, 1, 0, NULL) ||
            fl_release(h, &l))
            return -1;
    }
    fl_close(h);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (server_started) {
        run_result r = tmux("kill-server", NULL);
        run_result_free(&r);
    }
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

static void need_tmux(void)
{
    if (!have_tmux) {
        print_message("tmux is missing: skipped\n");
        skip();
    }
}

static void test_watch_in_terminal(void **state)
{
    (void)state;
    need_tmux();
    th_child b;
    assert_int_equal(th_child_start(&b, burster, NULL), 0);
    th_expect(b.from_child, "ready", 20000);

    char cmd[2048];
    watch_command(cmd, sizeof cmd, "");
    start_session("w1", cmd);
    char *s = wait_screen("w1", has_all, (void *)view_needles, "the watch view");
    free(s);
    assert_show("w1", "#{alternate_on}", "1");
    assert_show("w1", "#{cursor_flag}", "0");

    /* A burst on zzz-busy: the next refresh shows it on top, with a rate. */
    th_send(b.to_child, "burst 200");
    th_expect(b.from_child, "done", 30000);
    s = wait_screen("w1", busy_on_top, NULL, "zzz-busy on top with a rate");
    sig_assert_contains(s, "ACQ/S");
    sig_assert_contains(s, "REJ/S");
    sig_assert_contains(s, "per second: ");
    sig_assert_not_contains(s, "per second: - acquisitions");
    free(s);
    /* And the one after, calm again: back in name order, rate 0.0. */
    free(wait_screen("w1", calm_again, NULL, "zzz-busy back at 0.0 below aaa-idle"));

    /* A small window: cut to fit, with what is left out said. */
    run_result r = tmux("resize-window", "-t", "w1", "-x", "70", "-y", "12", NULL);
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    const char *cut[] = {"... and ", NULL};
    s = wait_screen("w1", has_all, (void *)cut, "a view cut to 70x12");
    assert_true(count_lines(s) <= 12);
    for (const char *line = s; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        assert_true(len <= 70);
        line += len + (end ? 1 : 0);
    }
    free(s);

    /* q quits and puts the terminal back. */
    r = tmux("send-keys", "-t", "w1", "q", NULL);
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    assert_restored("w1");

    th_send(b.to_child, "exit");
    th_child_wait(&b, 20000);
}

static void test_watch_ctrl_c(void **state)
{
    (void)state;
    need_tmux();
    char cmd[2048];
    watch_command(cmd, sizeof cmd, "");
    start_session("w2", cmd);
    free(wait_screen("w2", has_all, (void *)view_needles, "the watch view"));
    run_result r = tmux("send-keys", "-t", "w2", "C-c", NULL);
    assert_int_equal(r.status, 0);
    run_result_free(&r);
    assert_restored("w2");
}

/* The child of pid (the watch the pane's shell runs), or 0. */
static pid_t child_of(pid_t pid)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    pid_t found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char *end;
        long other = strtol(e->d_name, &end, 10);
        struct th_proc_stat st;
        if (*end || other <= 0 || th_proc_stat_read((pid_t)other, &st) != 0)
            continue;
        if (st.ppid == pid)
            found = (pid_t)other;
    }
    closedir(d);
    return found;
}

static void test_watch_sigterm(void **state)
{
    (void)state;
    need_tmux();
    char cmd[2048];
    watch_command(cmd, sizeof cmd, "");
    start_session("w3", cmd);
    free(wait_screen("w3", has_all, (void *)view_needles, "the watch view"));
    char *shell = show("w3", "#{pane_pid}");
    pid_t watch = child_of((pid_t)atoi(shell));
    free(shell);
    assert_true(watch > 1);
    assert_int_equal(kill(watch, SIGTERM), 0);
    free(wait_screen("w3", pane_dead, (void *)"w3", "the end of the watch"));
    /* Ended by the signal (the shell sees 128 + 15), the terminal restored. */
    char *s = capture_from("w3", "-");
    sig_assert_contains(s, "exit=143\n");
    sig_assert_contains(s, "isig icanon echo");
    sig_assert_not_contains(s, "fencelock status --watch");
    free(s);
    assert_show("w3", "#{alternate_on}", "0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_in_terminal),
        cmocka_unit_test(test_watch_ctrl_c),
        cmocka_unit_test(test_watch_sigterm),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
