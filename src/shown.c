/* SPDX-License-Identifier: MIT */
/*
 * shown.c - masking a password in a region string (shown.h).  A password
 * never belongs in a region string (the etcd backend refuses one), but a
 * user may write one, into the userinfo or the query, and every message
 * that echoes the string must not echo it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shown.h"

static int fl__endpoint_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '-' || ch == ':' || ch == ',' || ch == '[' || ch == ']';
}

const char *fl__userinfo_end(const char *s)
{
    const char *auth = strstr(s, "://");
    auth = auth ? auth + 3 : s;
    const char *found = NULL;
    for (const char *at = strchr(auth, '@'); at; at = strchr(at + 1, '@')) {
        const char *p = at + 1;
        while (*p && fl__endpoint_char(*p))
            p++;
        if (p > at + 1 && (*p == '/' || *p == '\0'))
            found = at;
    }
    return found;
}

/* Append n bytes of p to out (cap with the NUL), cut at the end. */
static void fl__put(char *out, size_t cap, size_t *o, const char *p, size_t n)
{
    while (n-- && *o + 1 < cap)
        out[(*o)++] = *p++;
}

/* A query pair at p (after '?' or '&') whose key starts with "password" and
 * is not "password-file": how many bytes of it to keep (the key's
 * "password"), else 0. */
static size_t fl__password_pair(const char *p)
{
    if (strncasecmp(p, "password", 8) != 0)
        return 0;
    if (strncmp(p, "password-file=", 14) == 0 || strcmp(p, "password-file") == 0)
        return 0;
    return 8;
}

/* The secrets of s, as spans: calls fn(arg, start, len) for each. */
static void fl__secrets(const char *s, void (*fn)(void *, const char *, size_t), void *arg)
{
    const char *auth = strstr(s, "://");
    auth = auth ? auth + 3 : s;
    const char *at = fl__userinfo_end(s);
    if (at)
        for (const char *p = auth; p < at; p++)
            if (*p == ':') {
                if (at > p + 1)
                    fn(arg, p + 1, (size_t)(at - p - 1));
                break;
            }
    const char *query = strchr(at ? at : auth, '?');
    for (const char *p = query ? query + 1 : NULL; p && *p; p++) {
        size_t keep;
        if ((p[-1] == '?' || p[-1] == '&') && (keep = fl__password_pair(p)) != 0) {
            size_t n = strcspn(p + keep, "&#");
            /* the value (after '=' or an escaped one), or all after "password" */
            const char *v = p + keep;
            if (*v == '=') {
                v++;
                n--;
            }
            if (n)
                fn(arg, v, n);
        }
    }
}

struct fl__masking {
    char *msg;
    size_t cap;
};

static void fl__mask_one(void *arg, const char *secret, size_t n)
{
    struct fl__masking *m = arg;
    char *out = malloc(m->cap);
    if (!out) { /* no memory for the copy: say nothing rather than the secret */
        snprintf(m->msg, m->cap, "(a message that held a password, withheld)");
        return;
    }
    size_t o = 0;
    for (const char *p = m->msg; *p;) {
        size_t left = strlen(p);
        if (strncmp(p, secret, left < n ? left : n) == 0) {
            /* the secret, or its start where the message was cut */
            fl__put(out, m->cap, &o, "***", 3);
            p += left < n ? left : n;
        } else {
            fl__put(out, m->cap, &o, p++, 1);
        }
    }
    out[o] = '\0';
    memcpy(m->msg, out, o + 1);
    free(out);
}

void fl__mask_secrets(const char *region, char *msg, size_t cap)
{
    if (!region || !msg || cap < 4)
        return;
    struct fl__masking m = {msg, cap};
    fl__secrets(region, fl__mask_one, &m);
}

/* The secret spans of a region string, in order. */
struct fl__spans {
    const char *start[8];
    size_t len[8];
    int n;
};

static void fl__span_add(void *arg, const char *p, size_t n)
{
    struct fl__spans *sp = arg;
    if (sp->n < 8) {
        sp->start[sp->n] = p;
        sp->len[sp->n++] = n;
    }
}

void fl__region_shown(const char *s, char *out, size_t cap)
{
    if (cap == 0)
        return;
    struct fl__spans sp = {.n = 0};
    fl__secrets(s, fl__span_add, &sp);
    size_t o = 0;
    int k = 0;
    for (const char *p = s; *p;) {
        if (k < sp.n && p == sp.start[k]) {
            fl__put(out, cap, &o, "***", 3);
            p += sp.len[k++];
        } else {
            fl__put(out, cap, &o, p++, 1);
        }
    }
    out[o] = '\0';
}
