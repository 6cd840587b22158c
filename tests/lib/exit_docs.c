/* SPDX-License-Identifier: MIT */
/* exit_docs.c - see exit_docs.h. */
#include "exit_docs.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_util.h"

#ifndef FENCELOCK_MAN1_PATH
#error "FENCELOCK_MAN1_PATH: the source's docs/man/fencelock.1"
#endif

static void add(exit_codes *c, int status)
{
    if (exit_codes_has(c, status))
        return;
    assert_true(c->n < EXIT_CODES_MAX);
    int i = c->n++;
    for (; i > 0 && c->v[i - 1] > status; i--)
        c->v[i] = c->v[i - 1];
    c->v[i] = status;
}

bool exit_codes_has(const exit_codes *c, int status)
{
    for (int i = 0; i < c->n; i++)
        if (c->v[i] == status)
            return true;
    return false;
}

const char *exit_codes_text(const exit_codes *c)
{
    static _Thread_local char buf[4][EXIT_CODES_MAX * 5];
    static _Thread_local int next;
    char *b = buf[next++ % 4];
    size_t n = 0;
    b[0] = '\0';
    for (int i = 0; i < c->n; i++)
        n += (size_t)snprintf(b + n, sizeof buf[0] - n, "%s%d", i ? " " : "", c->v[i]);
    return b;
}

void help_exit_codes(const char *cmd, exit_codes *out)
{
    memset(out, 0, sizeof *out);
    run_result r;
    run_tool(&r, NULL,
             cmd ? (const char *const[]){cmd, "--help", NULL}
                 : (const char *const[]){"--help", NULL});
    assert_int_equal(r.status, 0);
    const char *p = strstr(r.out, "\nExit status:\n");
    if (!p)
        fail_msg("fencelock %s --help has no \"Exit status:\" block", cmd ? cmd : "");
    p += strlen("\nExit status:\n");
    /* "  N  text", "  NN   text"; not "  2, 3 and 75 mean ..." */
    while (*p && *p != '\n') {
        size_t len = strcspn(p, "\n");
        int status, used = 0;
        if (sscanf(p, "  %d%n", &status, &used) == 1 && p[0] == ' ' && p[1] == ' ' &&
            isdigit((unsigned char)p[2]) && p[used] == ' ' && p[used + 1] == ' ')
            add(out, status);
        p += len + (p[len] == '\n');
    }
    run_result_free(&r);
}

static char *read_man(void)
{
    FILE *f = fopen(FENCELOCK_MAN1_PATH, "r");
    if (!f)
        fail_msg("cannot open %s", FENCELOCK_MAN1_PATH);
    char *text = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 65536;
            text = realloc(text, cap);
            assert_non_null(text);
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        if (got == 0)
            break;
        len += got;
    }
    fclose(f);
    text[len] = '\0';
    return text;
}

/* The first of "\n.SS " and "\n.SH " after p, or the end. */
static const char *section_end(const char *p)
{
    const char *ss = strstr(p, "\n.SS "), *sh = strstr(p, "\n.SH ");
    if (ss && (!sh || ss < sh))
        return ss;
    return sh ? sh : p + strlen(p);
}

void man_exit_codes(const char *cmd, exit_codes *out)
{
    memset(out, 0, sizeof *out);
    char *man = read_man();
    if (!cmd) {
        /* ".TP\n.B N\n" entries */
        const char *from = strstr(man, "\n.SH \"EXIT STATUS\"\n");
        assert_non_null(from);
        const char *to = section_end(from + 1);
        for (const char *p = from; (p = strstr(p, "\n.TP\n.B ")) && p < to; p++) {
            int status;
            char end;
            if (sscanf(p + strlen("\n.TP\n.B "), "%d%c", &status, &end) == 2 && end == '\n')
                add(out, status);
        }
        free(man);
        return;
    }
    char head[64];
    snprintf(head, sizeof head, "\n.SS \"%s ", cmd);
    const char *from = strstr(man, head);
    if (!from)
        fail_msg("fencelock.1 has no section for %s", cmd);
    const char *to = section_end(from + 1);
    const char *para = strstr(from, "\nExit status");
    if (!para || para > to)
        fail_msg("the section of %s in fencelock.1 has no \"Exit status\" paragraph", cmd);
    /* The paragraph: up to the next request that starts another one. */
    const char *end = para + 1;
    while (end < to) {
        end += strcspn(end, "\n");
        if (*end == '\0' || strncmp(end, "\n.PP", 4) == 0 || strncmp(end, "\n.TP", 4) == 0 ||
            strncmp(end, "\n.RS", 4) == 0 || strncmp(end, "\n.SS", 4) == 0 ||
            strncmp(end, "\n.SH", 4) == 0)
            break;
        end++;
    }
    for (const char *p = para; p < end; p++) {
        if (!isdigit((unsigned char)*p) || isalnum((unsigned char)p[-1]) || p[-1] == '\\')
            continue;
        char *after;
        long status = strtol(p, &after, 10);
        if (*after != '+') /* 128+N is no status of its own */
            add(out, (int)status);
        p = after - 1;
    }
    free(man);
}

void assert_exit_documented(const char *cmd, int status)
{
    exit_codes help, section, all;
    help_exit_codes(cmd, &help);
    man_exit_codes(cmd, &section);
    man_exit_codes(NULL, &all);
    if (!exit_codes_has(&help, status))
        fail_msg("fencelock %s exited %d, which its --help does not list (%s)", cmd, status,
                 exit_codes_text(&help));
    if (!exit_codes_has(&section, status))
        fail_msg("fencelock %s exited %d, which its section of fencelock(1) does not list (%s)",
                 cmd, status, exit_codes_text(&section));
    if (!exit_codes_has(&all, status))
        fail_msg("fencelock %s exited %d, which EXIT STATUS of fencelock(1) does not list (%s)",
                 cmd, status, exit_codes_text(&all));
}
