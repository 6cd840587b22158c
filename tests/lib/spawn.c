/* SPDX-License-Identifier: MIT */
/* spawn.c - see spawn.h. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

void sp_start(sp_proc *p, const sp_opts *o, const char *const *argv)
{
    static const sp_opts defaults;
    static int seq;
    if (!o)
        o = &defaults;
    memset(p, 0, sizeof *p);
    p->in = p->report = -1;
    p->status = -1;
    char name[64];
    snprintf(name, sizeof name, "stderr.%d.%d", (int)getpid(), seq++);
    snprintf(p->err_path, sizeof p->err_path, "%s", th_path(name));
    int in[2] = {-1, -1}, out[2], rep[2] = {-1, -1};
    if (o->stdin_pipe)
        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    if (o->report_pipe)
        assert_int_equal(pipe2(rep, O_CLOEXEC), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fin = o->stdin_pipe ? in[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
        int ferr = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (o->stderr_broken_pipe && ferr >= 0) {
            int bp[2];
            if (pipe2(bp, O_CLOEXEC) != 0)
                _exit(126);
            close(bp[0]); /* the reader is gone before anything is written */
            close(ferr);
            ferr = bp[1];
        }
        if (fin < 0 || ferr < 0)
            _exit(126);
        /* Move everything above the targets first, so that no dup2 below
         * overwrites a source; dup2 onto 0..3 clears O_CLOEXEC there. */
        int src[4] = {fin, out[1], ferr, o->report_pipe ? rep[1] : -1};
        for (int i = 0; i < 4; i++)
            if (src[i] >= 0 && (src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 10)) < 0)
                _exit(126);
        for (int i = 0; i < 4; i++)
            if (src[i] >= 0 && dup2(src[i], i) != i)
                _exit(126);
        if (o->region)
            setenv("FENCELOCK_REGION", o->region, 1);
        else
            unsetenv("FENCELOCK_REGION");
        for (int i = 0; o->env && o->env[i]; i++)
            putenv((char *)o->env[i]);
        /* Signals blocked or ignored by the test runner are not the
         * program's business. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    p->pid = pid;
    if (o->stdin_pipe) {
        close(in[0]);
        p->in = in[1];
    }
    close(out[1]);
    p->out = out[0];
    if (o->report_pipe) {
        close(rep[1]);
        p->report = rep[0];
    }
}

char *sp_stderr(const sp_proc *p)
{
    FILE *f = fopen(p->err_path, "r");
    size_t cap = 1, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    if (f) {
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
            char *bigger = realloc(s, cap + n);
            assert_non_null(bigger);
            s = bigger;
            cap += n;
            memcpy(s + len, chunk, n);
            len += n;
        }
        fclose(f);
    }
    s[len] = '\0';
    return s;
}

const char *sp_line(sp_proc *p, int fd, char *buf, size_t cap, int timeout_ms,
                    const char *expecting)
{
    if (th_recv(fd, buf, cap, timeout_ms) != 0) {
        char *err = sp_stderr(p);
        fail_msg("pid %d: no line (%s) within %d ms; its stderr:\n%s", (int)p->pid, expecting,
                 timeout_ms, err);
    }
    return buf;
}

void sp_write(sp_proc *p, const char *text)
{
    size_t n = strlen(text);
    assert_true(p->in >= 0);
    assert_int_equal(write(p->in, text, n), (ssize_t)n);
}

void sp_close_stdin(sp_proc *p)
{
    if (p->in >= 0)
        close(p->in);
    p->in = -1;
}

int sp_wait(sp_proc *p, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    int st;
    for (;;) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid)
            break;
        assert_int_equal(r, 0);
        if (th_now_ns() >= deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            char *err = sp_stderr(p);
            fail_msg("pid %d did not exit within %d ms; its stderr:\n%s", (int)p->pid,
                     timeout_ms, err);
        }
        usleep(1000); /* waiting for an exit; the deadline only bounds a failure */
    }
    p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return p->status;
}

void sp_free(sp_proc *p)
{
    sp_close_stdin(p);
    if (p->out >= 0)
        close(p->out);
    if (p->report >= 0)
        close(p->report);
    p->out = p->report = -1;
}

bool sp_wait_zombie(pid_t pid, int timeout_ms) { return th_wait_state(pid, "Z", timeout_ms); }

void sp_assert_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, haystack);
}
