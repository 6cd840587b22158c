/* SPDX-License-Identifier: MIT */
/*
 * supervisor_users.c - regions and other users (I12; issue 13 sections 1 and 2).
 *
 * A region directory that another user controls (owns, or may write
 * without the sticky bit) is refused by fencelockd (exit 3, region_untrusted)
 * and by fl_open (-EPERM naming it); a region file owned by a stranger is
 * refused; a group-writable or sticky directory of root's is accepted.
 * fencelockd --group G --mode 0660 shares a region with G: two users in G
 * register and lock and commit, a user outside G gets EACCES.  A client that
 * cannot register says why in fl_last_error(), and `fencelock status` lists
 * it with the reason (text and JSON); `fencelock run --require-supervisor`
 * refuses to run unregistered.
 *
 * Every test needs root (it makes throwaway uids and gids, numeric ids
 * without passwd entries) and is skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

/* Throwaway ids, per test process so that parallel runs do not meet. */
static uid_t uid_a, uid_b, uid_c, squatter;
static gid_t group;

static int setup(void **state)
{
    (void)state;
    unsigned base = 200000u + (unsigned)getpid() % 100000u * 8u;
    uid_a = base + 1;
    uid_b = base + 2;
    uid_c = base + 3;
    squatter = base + 4;
    group = base + 5;
    /* Other users must reach directories below the test's own. */
    chmod(th_tmpdir(), 0711);
    return 0;
}

#define NEED_ROOT()                                                                    \
    do {                                                                               \
        if (geteuid() != 0)                                                            \
            skip();                                                                    \
    } while (0)

/* In a child: become uid, with supplementary groups groups[n]. */
static void become(uid_t uid, const gid_t *groups, size_t n)
{
    if (setgroups(n, groups) != 0 || setresgid(uid, uid, uid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
        perror("become");
        _exit(126);
    }
}

/* Run `fencelock ARGS...` (as uid if not 0, in groups), its stdout and
 * stderr into *out (malloc'ed); returns the exit status. */
static int run_tool(uid_t uid, const gid_t *groups, size_t n, char **out,
                    const char *const *argv)
{
    static int seq;
    char path[600];
    snprintf(path, sizeof path, "%s/tool.%d.out", th_tmpdir(), seq++);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        unsetenv(FL_REGION_ENV);
        if (uid)
            become(uid, groups, n);
        const char *args[32] = {FENCELOCK_TOOL_PATH};
        for (int i = 0; argv[i] && i < 30; i++)
            args[i + 1] = argv[i];
        execv(FENCELOCK_TOOL_PATH, (char *const *)args);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    *out = calloc(1, 1 << 16);
    size_t len = fread(*out, 1, (1 << 16) - 1, f);
    (*out)[len] = '\0';
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void assert_has(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

/* fencelockd started by hand (to see its exit status and log): returns its
 * exit status, its log in *log. */
static int daemon_exit(const char *region, const char *const *extra, char **log)
{
    char logpath[600];
    snprintf(logpath, sizeof logpath, "%s/daemon.%d.log", th_tmpdir(), (int)th_now_ns() % 100000);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(126);
        char state[700];
        snprintf(state, sizeof state, "%s/daemon.state", th_tmpdir());
        const char *argv[32] = {FENCELOCKD_PATH, "--region", region, "--state", state};
        int n = 5;
        for (int i = 0; extra && extra[i] && n < 30; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(FENCELOCKD_PATH, (char *const *)argv);
        _exit(127);
    }
    /* Every case here exits at once; one that serves instead is a failure,
     * not a hang. */
    int st = 0;
    uint64_t deadline = th_now_ns() + 10 * TH_S;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (th_now_ns() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("fencelockd --region %s did not exit", region);
        }
        th_wait_state(pid, "Z", 100); /* wait for it to end, at most 100 ms a round */
    }
    FILE *f = fopen(logpath, "r");
    assert_non_null(f);
    *log = calloc(1, 1 << 16);
    size_t len = fread(*log, 1, (1 << 16) - 1, f);
    (*log)[len] = '\0';
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void make_dir(const char *path, uid_t owner, gid_t grp, mode_t mode)
{
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(chown(path, owner, grp), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* I12: another user's directory, mode 0777, squatted before the supervisor. */
static void test_squatted_directory_refused(void **state)
{
    (void)state;
    NEED_ROOT();
    char dir[600], region[700];
    snprintf(dir, sizeof dir, "%s", th_path("squat"));
    make_dir(dir, squatter, squatter, 0777);
    snprintf(region, sizeof region, "%s/region", dir);

    char *log;
    assert_int_equal(daemon_exit(region, NULL, &log), 3);
    assert_has(log, "\"event\":\"region_untrusted\"");
    assert_has(log, dir);
    char owner[64];
    snprintf(owner, sizeof owner, "owned by uid %u", (unsigned)squatter);
    assert_has(log, owner);
    free(log);
    struct stat st;
    assert_int_equal(stat(region, &st), -1); /* nothing was created in it */

    /* A region the squatter put there: refused by clients and the tool too. */
    assert_int_equal(chmod(dir, 0700), 0);
    struct fl__params p = {64, 16, 64, 16, 8};
    assert_int_equal(fl__region_create(region, &p), 0);
    assert_int_equal(chown(region, squatter, squatter), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    fl_region *r = NULL;
    assert_int_equal(fl_open(region, &r), -EPERM);
    assert_has(fl_last_error(), dir);
    assert_has(fl_last_error(), "writable by every user without the sticky bit");
    assert_int_equal(fl_open_readonly(region, &r), -EPERM);
    char *out;
    assert_int_equal(run_tool(0, NULL, 0, &out,
                              (const char *const[]){"status", "--region", region, NULL}),
                     3);
    assert_has(out, dir);
    assert_has(out, "writable by every user");
    free(out);
}

/* I12: the default path of a user ($XDG_RUNTIME_DIR/fencelock/region, else
 * /dev/shm/fencelock-UID/region), and that fallback squatted by another
 * user (mode 0755 this time: ownership alone refuses it). */
static void test_default_path_squatted(void **state)
{
    (void)state;
    NEED_ROOT();
    char dir[128];
    snprintf(dir, sizeof dir, "/dev/shm/fencelock-%u", (unsigned)uid_a);
    rmdir(dir);
    make_dir(dir, squatter, squatter, 0755);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsetenv(FL_REGION_ENV);
        become(uid_a, NULL, 0);
        char def[600], want[700];
        /* A user session's runtime directory comes first; one that is not
         * a directory is passed over. */
        setenv("XDG_RUNTIME_DIR", th_tmpdir(), 1);
        snprintf(want, sizeof want, "%s/fencelock/region", th_tmpdir());
        if (fl_default_region_path(def, sizeof def) != 0 || strcmp(def, want) != 0)
            _exit(9);
        setenv("XDG_RUNTIME_DIR", "/nonexistent-13", 1);
        if (fl_default_region_path(def, sizeof def) != 0 || strncmp(def, dir, strlen(dir)) != 0)
            _exit(8);
        unsetenv("XDG_RUNTIME_DIR");
        if (fl_default_region_path(def, sizeof def) != 0 || strncmp(def, dir, strlen(dir)) != 0)
            _exit(10);
        fl_region *r = NULL;
        int err = fl_open(NULL, &r);
        if (err != -EPERM)
            _exit(11);
        char owner[64];
        snprintf(owner, sizeof owner, "owned by uid %u", (unsigned)squatter);
        if (!strstr(fl_last_error(), owner) || !strstr(fl_last_error(), dir))
            _exit(12);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    rmdir(dir);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* I12: a stranger's region file in root's sticky directory is refused; the
 * caller's own, and root's group-writable directory, are accepted. */
static void test_file_owner_and_good_directories(void **state)
{
    (void)state;
    NEED_ROOT();
    struct fl__params p = {64, 16, 64, 16, 8};
    char dir[600], region[700];
    snprintf(dir, sizeof dir, "%s", th_path("sticky"));
    make_dir(dir, 0, 0, 01777);
    snprintf(region, sizeof region, "%s/region", dir);
    assert_int_equal(fl__test_region_create_ready(region, &p), 0);
    fl_region *r = NULL;
    assert_int_equal(fl_open(region, &r), 0); /* root's own file in a sticky dir */
    fl_close(r);
    assert_int_equal(chown(region, squatter, squatter), 0);
    assert_int_equal(fl_open(region, &r), -EPERM);
    assert_has(fl_last_error(), region);
    char owner[64];
    snprintf(owner, sizeof owner, "owned by uid %u", (unsigned)squatter);
    assert_has(fl_last_error(), owner);

    /* Root's directory, group-writable on purpose for a group: accepted. */
    snprintf(dir, sizeof dir, "%s", th_path("groupdir"));
    make_dir(dir, 0, group, 02770);
    snprintf(region, sizeof region, "%s/region", dir);
    assert_int_equal(fl__test_region_create_ready(region, &p), 0);
    assert_int_equal(fl_open(region, &r), 0);
    fl_close(r);
}

/* fencelockd's options: an unknown group, or a mode that gives others write
 * or other bits, is bad usage (2). */
static void test_group_mode_options(void **state)
{
    (void)state;
    char *log;
    const char *region = th_path("opts/region");
    assert_int_equal(daemon_exit(region, (const char *const[]){"--group", "no-such-group-13",
                                                               NULL},
                                 &log),
                     2);
    assert_has(log, "no group named 'no-such-group-13'");
    free(log);
    const char *bad[] = {"0662", "0666", "0777", "0460", "abc", "2660"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(daemon_exit(region, (const char *const[]){"--mode", bad[i], NULL},
                                     &log),
                         2);
        assert_has(log, "--mode");
        free(log);
    }
}

struct member {
    const char *region;
    uid_t uid;
};

/* A member of the group: opens, must be registered, then on each "go"
 * acquires "shared", commits its uid to record "who" and releases,
 * answering "ok TOKEN". */
static int member_main(void *arg, int in, int out)
{
    const struct member *m = arg;
    become(m->uid, &group, 1);
    fl_region *r = NULL;
    int err = fl_open(m->region, &r);
    char line[256];
    if (err || !fl_region_registered(r)) {
        snprintf(line, sizeof line, "open %d registered %d: %s", err,
                 err ? -1 : fl_region_registered(r), fl_last_error());
        th_send(out, line);
        return 1;
    }
    th_send(out, "registered");
    while (th_recv(in, line, sizeof line, 20000) == 0 && strcmp(line, "go") == 0) {
        fl_lease l;
        uint64_t accepted;
        if (fl_acquire(r, "shared", 10 * TH_S, FL_WAIT_FOREVER, &l) != 0 ||
            fl_commit_u64(r, &l, "who", m->uid, 0, &accepted) != 0 ||
            fl_release(r, &l) != 0) {
            th_send(out, fl_last_error());
            return 1;
        }
        snprintf(line, sizeof line, "ok %llu", (unsigned long long)l.token);
        th_send(out, line);
    }
    fl_close(r);
    return 0;
}

/* An outsider: fl_open must fail with EACCES. */
static int outsider_main(void *arg, int in, int out)
{
    (void)in;
    const struct member *m = arg;
    become(m->uid, NULL, 0);
    fl_region *r = NULL;
    int err = fl_open(m->region, &r);
    char line[64];
    snprintf(line, sizeof line, "%d", err);
    th_send(out, line);
    return 0;
}

/* A member that ends up unregistered: reports fl_open's result and
 * fl_last_error(), then holds the handle open until told to close. */
static int unregistered_main(void *arg, int in, int out)
{
    const struct member *m = arg;
    become(m->uid, &group, 1);
    fl_region *r = NULL;
    int err = fl_open(m->region, &r);
    char line[4400];
    snprintf(line, sizeof line, "%d %d %s", err, err ? -1 : fl_region_registered(r),
             fl_last_error());
    th_send(out, line);
    th_recv(in, line, sizeof line, 30000);
    if (!err)
        fl_close(r);
    return 0;
}

static uint64_t token_of(const char *line)
{
    assert_int_equal(strncmp(line, "ok ", 3), 0);
    return strtoull(line + 3, NULL, 10);
}

/* I12, I2: a region shared with a group by fencelockd --group --mode. */
static void test_group_shares_region(void **state)
{
    (void)state;
    NEED_ROOT();
    char region[600], gid_text[32], logpath[600];
    snprintf(region, sizeof region, "%s", th_path("shared/region"));
    snprintf(logpath, sizeof logpath, "%s", th_path("shared.log"));
    snprintf(gid_text, sizeof gid_text, "%u", (unsigned)group);
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region,
                                     (const char *const[]){"--group", gid_text, "--mode",
                                                           "0660", "--log", logpath, NULL}),
                     0);
    /* The files and the directory fencelockd made. */
    struct stat st;
    assert_int_equal(stat(region, &st), 0);
    assert_int_equal(st.st_gid, group);
    assert_int_equal(st.st_mode & 07777, 0660);
    char sock[700];
    snprintf(sock, sizeof sock, "%s.sock", region);
    assert_int_equal(stat(sock, &st), 0);
    assert_int_equal(st.st_gid, group);
    assert_int_equal(st.st_mode & 0777, 0660);
    assert_int_equal(stat(th_path("shared"), &st), 0);
    assert_int_equal(st.st_gid, group);
    assert_int_equal(st.st_mode & 07777, 0750);

    /* Two members, both registered, take turns on one key and record. */
    struct member a = {region, uid_a}, b = {region, uid_b}, c = {region, uid_c};
    th_child ca, cb, cc;
    assert_int_equal(th_child_start(&ca, member_main, &a), 0);
    assert_int_equal(th_child_start(&cb, member_main, &b), 0);
    th_expect(ca.from_child, "registered", 10000);
    th_expect(cb.from_child, "registered", 10000);
    char line[4400];
    th_send(ca.to_child, "go");
    assert_int_equal(th_recv(ca.from_child, line, sizeof line, 10000), 0);
    uint64_t ta = token_of(line);
    th_send(cb.to_child, "go");
    assert_int_equal(th_recv(cb.from_child, line, sizeof line, 10000), 0);
    uint64_t tb = token_of(line);
    assert_true(tb > ta);
    th_send(ca.to_child, "go");
    assert_int_equal(th_recv(ca.from_child, line, sizeof line, 10000), 0);
    assert_true(token_of(line) > tb);
    th_send(ca.to_child, "end");
    th_send(cb.to_child, "end");
    assert_int_equal(th_child_wait(&ca, 10000), 0);
    assert_int_equal(th_child_wait(&cb, 10000), 0);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    uint64_t who = 0, fence = 0;
    assert_int_equal(fl_read_u64(r, "who", &who, &fence), 0);
    assert_int_equal(who, uid_a);
    fl_close(r);

    /* Not in the group: the region file itself is closed to it. */
    assert_int_equal(th_child_start(&cc, outsider_main, &c), 0);
    assert_int_equal(th_recv(cc.from_child, line, sizeof line, 10000), 0);
    assert_int_equal(atoi(line), -EACCES);
    assert_int_equal(th_child_wait(&cc, 10000), 0);

    /* A socket that refuses a member (hand-made chmod): it opens
     * unregistered, says why, and status lists it with the reason. */
    assert_int_equal(chmod(sock, 0600), 0);
    th_child cu;
    assert_int_equal(th_child_start(&cu, unregistered_main, &a), 0);
    assert_int_equal(th_recv(cu.from_child, line, sizeof line, 10000), 0);
    assert_int_equal(strncmp(line, "0 0 ", 4), 0); /* fl_open 0, unregistered */
    assert_has(line, "opened unregistered");
    assert_has(line, "Permission denied");
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "%d", (int)cu.pid);
    char *out;
    assert_int_equal(run_tool(0, NULL, 0, &out,
                              (const char *const[]){"status", "--region", region, NULL}),
                     0);
    assert_has(out, "Unregistered clients");
    assert_has(out, pid_text);
    assert_has(out, "permission denied on the region's socket");
    free(out);
    assert_int_equal(run_tool(0, NULL, 0, &out,
                              (const char *const[]){"status", "--region", region, "--json",
                                                    NULL}),
                     0);
    char want[128];
    snprintf(want, sizeof want, "{\"pid\": %s, \"uid\": %u,", pid_text, (unsigned)uid_a);
    assert_has(out, want);
    assert_has(out, "\"reason\": \"EACCES\"");
    free(out);
    th_send(cu.to_child, "close");
    assert_int_equal(th_child_wait(&cu, 10000), 0);
    /* Closed: no longer listed. */
    assert_int_equal(run_tool(0, NULL, 0, &out,
                              (const char *const[]){"status", "--region", region, "--json",
                                                    NULL}),
                     0);
    assert_has(out, "\"unregistered\": [],");
    free(out);
    assert_int_equal(chmod(sock, 0660), 0);

    /* No supervisor: run --require-supervisor refuses, plain run warns. */
    th_daemon_stop(&d, SIGTERM);
    gid_t g = group;
    assert_int_equal(run_tool(uid_b, &g, 1, &out,
                              (const char *const[]){"run", "--require-supervisor", "--region",
                                                    region, "k", "--", "echo", "ran", NULL}),
                     3);
    assert_has(out, "--require-supervisor");
    assert_has(out, "no supervisor");
    if (strstr(out, "ran\n"))
        fail_msg("the command ran: %s", out);
    free(out);
    assert_int_equal(run_tool(uid_b, &g, 1, &out,
                              (const char *const[]){"run", "--region", region, "k", "--", "echo",
                                                    "ran", NULL}),
                     0);
    assert_has(out, "warning: ");
    assert_has(out, "opened unregistered");
    assert_has(out, "ran\n");
    free(out);

    /* An existing region gets --group/--mode applied at the next start. */
    assert_int_equal(chmod(region, 0600), 0);
    assert_int_equal(th_daemon_start(&d, region,
                                     (const char *const[]){"--group", gid_text, "--log",
                                                           logpath, NULL}),
                     0);
    assert_int_equal(stat(region, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0660);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_squatted_directory_refused),
        cmocka_unit_test(test_default_path_squatted),
        cmocka_unit_test(test_file_owner_and_good_directories),
        cmocka_unit_test(test_group_mode_options),
        cmocka_unit_test(test_group_shares_region),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
