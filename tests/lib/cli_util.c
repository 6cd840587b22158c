/* SPDX-License-Identifier: MIT */
/* cli_util.c - see cli_util.h. */
#include "cli_util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define RUN_TIMEOUT_MS 20000

struct buf {
    char *data;
    size_t len, cap;
};

static void buf_add(struct buf *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *d = realloc(b->data, cap);
        assert_non_null(d);
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static char *buf_take(struct buf *b)
{
    if (!b->data)
        buf_add(b, "", 0);
    return b->data;
}

/* stdin comes from a file, so a program that writes before it has read all
 * of its input cannot deadlock against us. */
static int stdin_fd(const char *text)
{
    if (!text)
        return open("/dev/null", O_RDONLY | O_CLOEXEC);
    static int seq;
    char name[64];
    snprintf(name, sizeof name, "stdin.%d", seq++);
    char path[512];
    snprintf(path, sizeof path, "%s", th_path(name));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    return open(path, O_RDONLY | O_CLOEXEC);
}

static void child_exec(const run_opts *o, int in, int out, int err, const char *const *argv)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        _exit(126);
    if (o->stdout_path) {
        int fd = open(o->stdout_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0)
            _exit(126);
    }
    if (o->region_env)
        setenv("FENCELOCK_REGION", o->region_env, 1);
    else
        unsetenv("FENCELOCK_REGION");
    if (o->uid != 0 &&
        (setgroups(0, NULL) != 0 || setgid(o->gid) != 0 || setuid(o->uid) != 0)) {
        perror("cannot change to the test user");
        _exit(126);
    }
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

void run_program(run_result *res, const run_opts *o, const char *const *argv)
{
    static const run_opts defaults;
    if (!o)
        o = &defaults;
    int outp[2], errp[2];
    assert_int_equal(pipe2(outp, O_CLOEXEC), 0);
    assert_int_equal(pipe2(errp, O_CLOEXEC), 0);
    int in = stdin_fd(o->stdin_text);
    assert_true(in >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child_exec(o, in, outp[1], errp[1], argv);
    close(in);
    close(outp[1]);
    close(errp[1]);

    struct buf bufs[2] = {{0}, {0}};
    struct pollfd p[2] = {{.fd = outp[0], .events = POLLIN}, {.fd = errp[0], .events = POLLIN}};
    uint64_t deadline = th_now_ns() + RUN_TIMEOUT_MS * TH_MS;
    int open_fds = 2;
    while (open_fds > 0) {
        uint64_t now = th_now_ns();
        int ms = now >= deadline ? 0 : (int)((deadline - now) / TH_MS) + 1;
        int rc = ms > 0 ? poll(p, 2, ms) : 0;
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("%s did not finish within %d ms", argv[0], RUN_TIMEOUT_MS);
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !p[i].revents)
                continue;
            char chunk[4096];
            ssize_t n = read(p[i].fd, chunk, sizeof chunk);
            if (n > 0) {
                buf_add(&bufs[i], chunk, (size_t)n);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else {
                close(p[i].fd);
                p[i].fd = -1; /* poll ignores negative descriptors */
                open_fds--;
            }
        }
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    res->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    res->out = buf_take(&bufs[0]);
    res->err = buf_take(&bufs[1]);
}

void run_tool(run_result *res, const run_opts *o, const char *const *args)
{
    const char *argv[32] = {FENCELOCK_TOOL_PATH};
    int n = 1;
    for (; args[n - 1]; n++) {
        assert_true(n < 31);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    run_program(res, o, argv);
}

void run_result_free(run_result *res)
{
    free(res->out);
    free(res->err);
    res->out = res->err = NULL;
}

int count_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '\n' || p[1] == '\0')
            n++;
    return n;
}

bool have_python3(void)
{
    const char *argv[] = {"python3", "-c", "import json", NULL};
    run_result r;
    run_program(&r, NULL, argv);
    bool ok = r.status == 0;
    run_result_free(&r);
    return ok;
}

/* Strict: duplicate members and NaN/Infinity are errors, not quirks. */
static const char json_eval_code[] =
    "import json, sys\n"
    "def members(pairs):\n"
    "    keys = [k for k, _ in pairs]\n"
    "    if len(keys) != len(set(keys)):\n"
    "        raise ValueError('duplicate member in %r' % keys)\n"
    "    return dict(pairs)\n"
    "def constant(name):\n"
    "    raise ValueError('not JSON: ' + name)\n"
    "d = json.load(sys.stdin, object_pairs_hook=members, parse_constant=constant)\n"
    "print(json.dumps(eval(sys.argv[1])))\n";

char *json_eval(const char *json, const char *expr)
{
    const char *argv[] = {"python3", "-c", json_eval_code, expr, NULL};
    run_opts o = {.stdin_text = json};
    run_result r;
    run_program(&r, &o, argv);
    if (r.status != 0)
        fail_msg("python3 failed on %s: %s\ndocument:\n%s", expr, r.err, json);
    free(r.err);
    size_t n = strlen(r.out);
    while (n > 0 && r.out[n - 1] == '\n')
        r.out[--n] = '\0';
    return r.out;
}

static int split_fields(const char *line, size_t len, char **fields, int max)
{
    int n = 0;
    size_t i = 0;
    while (i < len && n < max) {
        while (i < len && line[i] == ' ')
            i++;
        size_t start = i;
        while (i < len && line[i] != ' ')
            i++;
        if (i > start)
            fields[n++] = strndup(line + start, i - start);
    }
    return n;
}

int table_row(const char *out, const char *section, int col, const char *value, char **fields,
              int max)
{
    size_t slen = strlen(section);
    const char *p = out;
    /* Find the heading line, then read its indented rows up to a blank line. */
    while (p && !(strncmp(p, section, slen) == 0 && p[slen] == '\n')) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p)
        return 0;
    p += slen + 1;
    while (*p == ' ') {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int n = split_fields(p, len, fields, max);
        if (n > col && strcmp(fields[col], value) == 0)
            return n;
        free_fields(fields, n);
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

void free_fields(char **fields, int n)
{
    for (int i = 0; i < n; i++)
        free(fields[i]);
}
