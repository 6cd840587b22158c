/* SPDX-License-Identifier: MIT */
/*
 * run_tty.c - `fencelock run` on a terminal (a pseudo-terminal of the
 * test's own, fencelock run the session leader in front of it): the command,
 * in a process group of its own, gets the terminal, so it can read it, ^C
 * reaches it (once: fencelock run is not in front), and after ^Z stops it,
 * fencelock run stops too, and continues it when continued.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "fencelock.h"
#include "harness.h"

#define T_WAIT 20000

static th_daemon daemon_;

static int setup(void **state)
{
    (void)state;
    return th_daemon_start(&daemon_, th_path("region"), NULL);
}

static int teardown(void **state)
{
    (void)state;
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

struct tty_run {
    int master;
    pid_t pid; /* fencelock run: session leader, its terminal the pty */
    char out[65536];
    size_t len;
};

static void start_on_tty(struct tty_run *t, const char *key, const char *script)
{
    memset(t, 0, sizeof *t);
    t->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(t->master >= 0);
    assert_int_equal(grantpt(t->master), 0);
    assert_int_equal(unlockpt(t->master), 0);
    char slave[128];
    assert_int_equal(ptsname_r(t->master, slave, sizeof slave), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent || setsid() < 0)
            _exit(126);
        int fd = open(slave, O_RDWR); /* the session's controlling terminal */
        if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) != 0)
            _exit(126);
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (fd > 2)
            close(fd);
        setenv("FENCELOCK_REGION", daemon_.region, 1);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execl(FENCELOCK_TOOL_PATH, FENCELOCK_TOOL_PATH, "run", key, "--", "sh", "-c", script,
              (char *)NULL);
        _exit(127);
    }
    t->pid = pid;
}

/* Read the terminal's output until it contains needle. */
static void expect_output(struct tty_run *t, const char *needle)
{
    uint64_t deadline = th_now_ns() + T_WAIT * TH_MS;
    while (!strstr(t->out, needle)) {
        uint64_t now = th_now_ns();
        if (now >= deadline)
            fail_msg("terminal output has no \"%s\" within %d ms:\n%s", needle, T_WAIT, t->out);
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        if (poll(&p, 1, (int)((deadline - now) / TH_MS) + 1) <= 0)
            continue;
        ssize_t n = read(t->master, t->out + t->len, sizeof t->out - 1 - t->len);
        if (n <= 0)
            fail_msg("terminal closed before \"%s\":\n%s", needle, t->out);
        t->len += (size_t)n;
        t->out[t->len] = '\0';
    }
}

static void type(struct tty_run *t, const char *keys)
{
    assert_int_equal(write(t->master, keys, strlen(keys)), (ssize_t)strlen(keys));
}

static int wait_exit(struct tty_run *t)
{
    uint64_t deadline = th_now_ns() + T_WAIT * TH_MS;
    int st;
    for (;;) {
        /* Keep the terminal drained so that nothing blocks on output. */
        char buf[4096];
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        if (poll(&p, 1, 1) > 0 && read(t->master, buf, sizeof buf) < 0) {
        }
        pid_t r = waitpid(t->pid, &st, WNOHANG);
        if (r == t->pid)
            break;
        if (th_now_ns() >= deadline) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &st, 0);
            fail_msg("fencelock run did not exit; terminal:\n%s", t->out);
        }
    }
    close(t->master);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The command reads the terminal: it is in front, so no SIGTTIN stops it. */
static void test_command_reads_terminal(void **state)
{
    (void)state;
    struct tty_run t;
    start_on_tty(&t, "tty/read", "echo ready; read line; echo \"got $line\"; exit 5");
    expect_output(&t, "ready");
    type(&t, "hello\n");
    expect_output(&t, "got hello");
    assert_int_equal(wait_exit(&t), 5);
}

/* ^C goes to the command's group (in front), and only there. */
static void test_interrupt_key(void **state)
{
    (void)state;
    struct tty_run t;
    start_on_tty(&t, "tty/int",
                 "n=0; line=; trap 'n=$((n+1)); echo \"INT $n\"' INT; echo ready; "
                 "while [ \"$line\" != x ]; do read line; done; echo \"ints $n\"; exit 3");
    expect_output(&t, "ready");
    type(&t, "\003"); /* ^C: VINTR */
    expect_output(&t, "INT 1");
    type(&t, "x\n");
    expect_output(&t, "ints 1"); /* one SIGINT, not a second one forwarded */
    assert_int_equal(wait_exit(&t), 3);
}

/* I4: ^Z stops the command; fencelock run follows it (stops itself, so that a
 * shell would see the job stopped), and when continued, continues it. */
static void test_suspend_key(void **state)
{
    (void)state;
    struct tty_run t;
    start_on_tty(&t, "tty/stop", "echo ready; read line; echo \"got $line\"");
    expect_output(&t, "ready");
    type(&t, "\032"); /* ^Z: VSUSP */
    assert_true(th_wait_stopped(t.pid, T_WAIT));
    assert_int_equal(kill(t.pid, SIGCONT), 0); /* what a shell's fg does */
    type(&t, "again\n");
    expect_output(&t, "got again");
    assert_int_equal(wait_exit(&t), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_command_reads_terminal),
        cmocka_unit_test(test_interrupt_key),
        cmocka_unit_test(test_suspend_key),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
