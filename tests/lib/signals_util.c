/* SPDX-License-Identifier: MIT */
/* signals_util.c - see signals_util.h. */
#include "signals_util.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

void sig_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s", th_path(name));
}

void sig_daemon_start(th_daemon *d, const char *region, const char *const *extra)
{
    if (th_daemon_start(d, region, extra) != 0)
        fail_msg("fencelockd did not get ready on %s", region);
}

char *sig_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *p = realloc(data, cap);
            assert_non_null(p);
            data = p;
        }
        size_t n = fread(data + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    data[len] = '\0';
    return data;
}

char *sig_log_array(const th_daemon *d)
{
    char path[600];
    snprintf(path, sizeof path, "%s.log", d->region);
    char *log = sig_read_file(path);
    assert_non_null(log);
    size_t len = strlen(log);
    char *out = malloc(len + 3);
    assert_non_null(out);
    size_t n = 0;
    out[n++] = '[';
    bool first = true;
    for (char *line = log; *line;) {
        char *end = strchr(line, '\n');
        size_t l = end ? (size_t)(end - line) : strlen(line);
        if (l > 0) {
            if (!first)
                out[n++] = ',';
            memcpy(out + n, line, l);
            n += l;
            first = false;
        }
        line += l + (end ? 1 : 0);
    }
    out[n++] = ']';
    out[n] = '\0';
    free(log);
    return out;
}

void sig_assert_json(const char *json, const char *want, const char *fmt, ...)
{
    char expr[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(expr, sizeof expr, fmt, ap);
    va_end(ap);
    char *got = json_eval(json, expr);
    if (strcmp(got, want) != 0) {
        size_t len = strlen(json);
        fail_msg("%s is %s, want %s; document%s:\n%.*s", expr, got, want,
                 len > 20000 ? " (its end)" : "", 20000, len > 20000 ? json + len - 20000 : json);
    }
    free(got);
}

int sig_check_exposition(const char *text, char **dump, char **problems)
{
    const char *argv[] = {"python3", CHECK_EXPOSITION, "--require-prefix", "fencelock_",
                          "--dump", "-", NULL};
    run_opts o = {.stdin_text = text};
    run_result r;
    run_program(&r, &o, argv);
    if (dump)
        *dump = r.out;
    else
        free(r.out);
    if (problems)
        *problems = r.err;
    else
        free(r.err);
    return r.status;
}

char *sig_assert_exposition(const char *text)
{
    char *dump, *problems;
    int st = sig_check_exposition(text, &dump, &problems);
    if (st != 0)
        fail_msg("check_exposition.py exited %d:\n%s\ntext:\n%s", st, problems, text);
    free(problems);
    return dump;
}

bool sig_wait_file(const char *path, const char *const *needles, int timeout_ms)
{
    uint64_t deadline = th_now_ns() + (uint64_t)timeout_ms * TH_MS;
    for (;;) {
        char *text = sig_read_file(path);
        bool all = text != NULL;
        for (size_t i = 0; all && needles[i]; i++)
            all = strstr(text, needles[i]) != NULL;
        free(text);
        if (all)
            return true;
        if (th_now_ns() >= deadline)
            return false;
        usleep(5000); /* polling a file another process rewrites; not a race */
    }
}

const char *sig_u64(uint64_t v)
{
    static _Thread_local char buf[8][32];
    static _Thread_local int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%llu", (unsigned long long)v);
    return b;
}

void sig_assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

void sig_assert_not_contains(const char *text, const char *needle)
{
    if (strstr(text, needle))
        fail_msg("did not expect \"%s\" in:\n%s", needle, text);
}

void sig_need_python3(void)
{
    if (!have_python3()) {
        print_message("python3 is missing: skipped\n");
        skip();
    }
}
