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

const char *fl__userinfo_end(const char *s)
{
    const char *auth = strstr(s, "://");
    auth = auth ? auth + 3 : s;
    /* The last '@' before the first '/': what a parser takes. */
    const char *slash = strchr(auth, '/');
    const char *end = slash ? slash : auth + strlen(auth);
    const char *found = NULL;
    for (const char *p = auth; p < end; p++)
        if (*p == '@')
            found = p;
    if (found)
        return found;
    /* Else a password holding '/': the last '@' followed by something that
     * could be endpoints (no '?', '#', '=', '&', '@' or space) up to a '/'
     * or the end. */
    for (const char *at = strchr(auth, '@'); at; at = strchr(at + 1, '@')) {
        size_t n = strcspn(at + 1, "/?#=&@ \t\r\n");
        if (n > 0 && (at[1 + n] == '/' || at[1 + n] == '\0'))
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

/* The secrets of s, as spans: calls fn(arg, start, len) for each, in order:
 * the userinfo's password, then everything after the first "password" of
 * the query that is not "password-file=" (to the end: a password may hold
 * '&' or '#'). */
static void fl__secrets(const char *s, void (*fn)(void *, const char *, size_t), void *arg)
{
    const char *auth = strstr(s, "://");
    auth = auth ? auth + 3 : s;
    const char *at = fl__userinfo_end(s), *colon = NULL;
    if (at)
        colon = memchr(auth, ':', (size_t)(at - auth));
    if (colon && at > colon + 1)
        fn(arg, colon + 1, (size_t)(at - colon - 1));
    const char *query = strchr(colon ? at : auth, '?');
    for (const char *p = query; p && (p = strcasestr(p, "password")) != NULL; p += 8) {
        if (strncmp(p + 8, "-file=", 6) == 0)
            continue;
        if (p[8])
            fn(arg, p + 8, strlen(p + 8));
        break;
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
