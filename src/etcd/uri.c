/* SPDX-License-Identifier: MIT */
/*
 * uri.c - the region string of an etcd cluster:
 *
 *     etcd://[USER@]HOST:PORT[,HOST:PORT...]/PREFIX[?KEY=VALUE[&KEY=VALUE...]]
 *     etcds://...     the same over TLS (https to every endpoint)
 *
 * HOST is a DNS name or an IPv4 address (letters, digits, '-', '.') or an
 * IPv6 address in brackets; PORT is 1..65535; at most FL__ETCD_MAX_ENDPOINTS
 * endpoints, tried in turn.  PREFIX scopes every key fencelock writes: it is
 * one or more segments of [A-Za-z0-9._-] joined by single slashes (a trailing
 * slash is dropped), none of them ".", ".." or a name the layout uses under
 * a prefix ("lock", "last", "rec", "epoch"), at most FL__ETCD_PREFIX_MAX
 * bytes.  With those rules no two prefixes share a key: a prefix that is a
 * segment-prefix of another continues with a segment the layout never
 * writes (etcd.h, LAYOUT).
 *
 * USER is etcd's user name (letters, digits, "-._~", or %XX escapes).  A
 * password is never part of the string: the string is shown by `fencelock
 * status`, kept by fl_region_path() and handed to children in
 * $FENCELOCK_REGION, so "USER:PASSWORD@" is refused with a message saying
 * where a password goes (credentials.c), and every message of this file
 * shows the string with such a password masked.  The query's keys are
 * cacert, cert, key (TLS only) and password-file, each at most once, its
 * value %XX-decoded; any other key is refused by name.  No fragment.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "client.h"
#include "../shown.h"

bool fl__etcd_is_uri(const char *name)
{
    return name && (strncmp(name, FL__ETCD_SCHEME, strlen(FL__ETCD_SCHEME)) == 0 ||
                    strncmp(name, FL__ETCD_TLS_SCHEME, strlen(FL__ETCD_TLS_SCHEME)) == 0);
}

static bool fl__host_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.';
}

static bool fl__seg_char(char ch)
{
    return fl__host_char(ch) || ch == '_';
}

static int fl__hex(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* %XX-decode n bytes at s into out (cap bytes with the NUL): the decoded
 * length, or -1 (a bad escape, a control byte or NUL, too long).  unreserved
 * limits the raw bytes to RFC 3986's unreserved ones (a user name). */
static int fl__pct_decode(const char *s, size_t n, char *out, size_t cap, bool unreserved)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '%') {
            if (i + 2 >= n)
                return -1; /* "%" or "%X" at the end */
            int h = fl__hex(s[i + 1]), l = fl__hex(s[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            ch = (unsigned char)(h << 4 | l);
            i += 2;
        } else if (unreserved && !(fl__seg_char((char)ch) || ch == '~')) {
            return -1;
        }
        if (ch < 0x20 || ch == 0x7f || o + 1 >= cap)
            return -1;
        out[o++] = (char)ch;
    }
    out[o] = '\0';
    return (int)o;
}

/* Whether n bytes at s read as endpoints: each comma-separated item ends
 * with ':' and 1 to 5 digits.  (Not a full check: what decides between a
 * list of endpoints and "USER:PASSWORD" cut at a '/' in the password.) */
static bool fl__endpoints_shaped(const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ',')
            continue;
        size_t d = 0;
        while (d < i - start && s[i - 1 - d] >= '0' && s[i - 1 - d] <= '9')
            d++;
        if (d == 0 || d > 5 || d == i - start || s[i - 1 - d] != ':')
            return false;
        start = i + 1;
    }
    return true;
}

/* One "HOST:PORT" of length n at s. */
static int fl__endpoint_parse(const char *shown, const char *s, size_t n, bool tls,
                              struct fl__etcd_endpoint *ep)
{
    const char *colon = NULL;
    size_t hlen;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close || close == s + 1)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: bad IPv6 endpoint '%.*s'", shown,
                                 (int)n, s);
        for (const char *p = s + 1; p < close; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
                  (*p >= 'A' && *p <= 'F') || *p == ':' || *p == '.'))
                return fl__etcd_fail(-EINVAL, "etcd URI %s: bad IPv6 endpoint '%.*s'", shown,
                                     (int)n, s);
        if (close + 1 >= s + n || close[1] != ':')
            return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s' has no :PORT", shown,
                                 (int)n, s);
        colon = close + 1;
        hlen = (size_t)(colon - s);
    } else {
        colon = memchr(s, ':', n);
        if (!colon)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s' has no :PORT", shown,
                                 (int)n, s);
        hlen = (size_t)(colon - s);
        if (hlen == 0)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s' has no host", shown,
                                 (int)n, s);
        for (size_t i = 0; i < hlen; i++)
            if (!fl__host_char(s[i]))
                return fl__etcd_fail(-EINVAL,
                                     "etcd URI %s: host '%.*s': byte 0x%02x is not allowed "
                                     "(letters, digits, '-', '.'; IPv6 in brackets)",
                                     shown, (int)hlen, s, (unsigned char)s[i]);
    }
    if (hlen > FL__ETCD_HOST_MAX)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: host longer than %d bytes", shown,
                             FL__ETCD_HOST_MAX);
    const char *port = colon + 1;
    size_t plen = (size_t)(s + n - port);
    unsigned long v = 0;
    if (plen == 0 || plen > 5)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s': bad port", shown, (int)n,
                             s);
    for (size_t i = 0; i < plen; i++) {
        if (port[i] < '0' || port[i] > '9')
            return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s': bad port", shown,
                                 (int)n, s);
        v = v * 10 + (unsigned long)(port[i] - '0');
    }
    if (v == 0 || v > 65535)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s': port out of 1..65535",
                             shown, (int)n, s);
    snprintf(ep->name, sizeof ep->name, "%.*s:%lu", (int)hlen, s, v);
    snprintf(ep->url, sizeof ep->url, "%s://%.*s:%lu", tls ? "https" : "http", (int)hlen, s,
             v);
    return 0;
}

static int fl__prefix_check(const char *shown, const char *p, size_t n)
{
    static const char *const reserved[] = {".", "..", "lock", "last", "rec", "epoch"};
    if (n == 0)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: no PREFIX after the endpoints "
                                      "(etcd://HOST:PORT/PREFIX)", shown);
    if (n > FL__ETCD_PREFIX_MAX)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: PREFIX longer than %d bytes", shown,
                             FL__ETCD_PREFIX_MAX);
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/') {
            if (!fl__seg_char(p[i]))
                return fl__etcd_fail(-EINVAL,
                                     "etcd URI %s: PREFIX byte 0x%02x at %zu is not allowed "
                                     "(letters, digits, '.', '_', '-', '/' between segments)",
                                     shown, (unsigned char)p[i], i);
            continue;
        }
        size_t len = i - start;
        if (len == 0)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: PREFIX has an empty segment", shown);
        for (size_t k = 0; k < sizeof reserved / sizeof reserved[0]; k++)
            if (strlen(reserved[k]) == len && memcmp(reserved[k], p + start, len) == 0)
                return fl__etcd_fail(-EINVAL,
                                     "etcd URI %s: PREFIX segment '%s' is reserved (., .., "
                                     "lock, last, rec, epoch)",
                                     shown, reserved[k]);
        start = i + 1;
    }
    return 0;
}

/* "USER" of length n (what precedes '@'). */
static int fl__userinfo_parse(const char *shown, const char *s, size_t n,
                              struct fl__etcd_uri *out)
{
    if (memchr(s, ':', n))
        return fl__etcd_fail(-EINVAL,
                             "etcd URI %s: a password does not go in the region string (it is "
                             "shown by fencelock status and passed on in $FENCELOCK_REGION): "
                             "give it in password-file=FILE, $%s or $%s",
                             shown, FL__ETCD_PASSWORD_FILE_ENV, FL__ETCD_PASSWORD_ENV);
    if (n == 0 || fl__pct_decode(s, n, out->user, sizeof out->user, true) <= 0)
        return fl__etcd_fail(-EINVAL,
                             "etcd URI %s: bad user name before '@' (1..%d bytes of letters, "
                             "digits, '-', '.', '_', '~' or %%XX escapes, no control bytes)",
                             shown, FL__ETCD_USER_MAX);
    return 0;
}

/* One "KEY=VALUE" of the query. */
static int fl__query_pair(const char *shown, const char *s, size_t n, struct fl__etcd_uri *out)
{
    static const struct {
        const char *key;
        size_t off;
        bool tls_only;
    } keys[] = {
        {"cacert", offsetof(struct fl__etcd_uri, cacert), true},
        {"cert", offsetof(struct fl__etcd_uri, cert), true},
        {"key", offsetof(struct fl__etcd_uri, key), true},
        {"password-file", offsetof(struct fl__etcd_uri, password_file), false},
    };
    const char *eq = memchr(s, '=', n);
    size_t klen = eq ? (size_t)(eq - s) : n;
    if (klen >= 8 && strncasecmp(s, "password", 8) == 0 &&
        !(klen == 13 && memcmp(s, "password-file", 13) == 0))
        return fl__etcd_fail(-EINVAL,
                             "etcd URI %s: a password does not go in the region string: give "
                             "it in password-file=FILE, $%s or $%s",
                             shown, FL__ETCD_PASSWORD_FILE_ENV, FL__ETCD_PASSWORD_ENV);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (strlen(keys[k].key) != klen || memcmp(keys[k].key, s, klen) != 0)
            continue;
        char *dst = (char *)out + keys[k].off;
        if (keys[k].tls_only && !out->tls)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: %s= sets up TLS: write etcds://", shown,
                                 keys[k].key);
        if (dst[0])
            return fl__etcd_fail(-EINVAL, "etcd URI %s: %s= is given twice", shown,
                                 keys[k].key);
        if (!eq || eq + 1 == s + n ||
            fl__pct_decode(eq + 1, (size_t)(s + n - eq - 1), dst, FL__ETCD_FILE_MAX + 1,
                           false) <= 0)
            return fl__etcd_fail(-EINVAL,
                                 "etcd URI %s: %s= needs a file name (1..%d bytes, %%XX "
                                 "escapes, no control bytes)",
                                 shown, keys[k].key, FL__ETCD_FILE_MAX);
        return 0;
    }
    return fl__etcd_fail(-EINVAL,
                         "etcd URI %s: unknown query key '%.*s' (cacert, cert, key, "
                         "password-file)",
                         shown, (int)(klen > 64 ? 64 : klen), s);
}

static int fl__query_parse(const char *shown, const char *q, struct fl__etcd_uri *out)
{
    while (*q) {
        size_t n = strcspn(q, "&");
        if (n == 0)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: empty KEY=VALUE in the query", shown);
        int err = fl__query_pair(shown, q, n, out);
        if (err)
            return err;
        q += n;
        if (*q == '&' && !*++q)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: empty KEY=VALUE in the query", shown);
    }
    return 0;
}

int fl__etcd_uri_parse(const char *uri, struct fl__etcd_uri *out)
{
    memset(out, 0, sizeof *out);
    if (uri)
        fl__region_shown(uri, out->shown, sizeof out->shown);
    if (!fl__etcd_is_uri(uri))
        return fl__etcd_fail(-EINVAL,
                             "'%s' is not an etcd URI (etcd://HOST:PORT/PREFIX, or etcds:// for "
                             "TLS)",
                             uri ? out->shown : "(null)");
    const char *shown = out->shown;
    if (strlen(uri) >= sizeof out->shown)
        return fl__etcd_fail(-EINVAL, "etcd URI %.80s...: longer than %zu bytes", shown,
                             sizeof out->shown - 1);
    out->tls = strncmp(uri, FL__ETCD_TLS_SCHEME, strlen(FL__ETCD_TLS_SCHEME)) == 0;
    const char *s = uri + strlen(out->tls ? FL__ETCD_TLS_SCHEME : FL__ETCD_SCHEME);
    if (strchr(s, '#'))
        return fl__etcd_fail(-EINVAL, "etcd URI %s: a fragment ('#') is not supported", shown);
    const char *slash = strchr(s, '/');
    if (!slash)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: no /PREFIX (etcd://HOST:PORT/PREFIX)",
                             shown);
    /* The userinfo ends at the last '@' before the first '/', or, when a
     * '/' comes before the '@' (a password holding one), at the '@' an
     * endpoint list follows, if what precedes the first '/' cannot be
     * endpoints (shown.h). */
    const char *at = NULL;
    for (const char *p = s; p < slash; p++)
        if (*p == '@')
            at = p;
    const char *far = fl__userinfo_end(uri);
    if (!at && far && far > slash && !fl__endpoints_shaped(s, (size_t)(slash - s))) {
        at = far;
        slash = strchr(at, '/');
        if (!slash)
            slash = at + strlen(at);
    }
    if (at) {
        if (memchr(at + 1, '@', (size_t)(slash - at - 1)))
            return fl__etcd_fail(-EINVAL, "etcd URI %s: more than one '@' (write '@' in a "
                                          "user name as %%40)", shown);
        int err = fl__userinfo_parse(shown, s, (size_t)(at - s), out);
        if (err)
            return err;
        s = at + 1;
        if (!*slash)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: no /PREFIX (etcd://HOST:PORT/PREFIX)",
                                 shown);
    }
    for (const char *p = s; p < slash; p++)
        if (*p == '?' || *p == '%')
            return fl__etcd_fail(-EINVAL,
                                 "etcd URI %s: '%c' is not supported among the endpoints (the "
                                 "query goes after /PREFIX)",
                                 shown, *p);
    if (slash == s)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: no endpoint", shown);
    const char *p = s;
    while (p < slash) {
        const char *comma = memchr(p, ',', (size_t)(slash - p));
        const char *end = comma ? comma : slash;
        if (end == p)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: empty endpoint in the list", shown);
        if (out->n == FL__ETCD_MAX_ENDPOINTS)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: more than %d endpoints", shown,
                                 FL__ETCD_MAX_ENDPOINTS);
        int err = fl__endpoint_parse(shown, p, (size_t)(end - p), out->tls, &out->ep[out->n]);
        if (err)
            return err;
        out->n++;
        if (!comma)
            break;
        p = comma + 1;
        if (p == slash)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: empty endpoint in the list", shown);
    }
    const char *prefix = slash + 1;
    const char *query = strchr(prefix, '?');
    size_t n = query ? (size_t)(query - prefix) : strlen(prefix);
    if (n && prefix[n - 1] == '/')
        n--; /* "etcd://h:1/app/" is "etcd://h:1/app" */
    int err = fl__prefix_check(shown, prefix, n);
    if (err)
        return err;
    memcpy(out->prefix, prefix, n);
    out->prefix[n] = '\0';
    out->prefix_len = n;
    if (query) {
        if (!query[1])
            return fl__etcd_fail(-EINVAL, "etcd URI %s: an empty query after '?'", shown);
        err = fl__query_parse(shown, query + 1, out);
        if (err)
            return err;
    }
    /* A string that parses holds no password (one is refused above): shown
     * as written, not as the masking's guesses would show it. */
    snprintf(out->shown, sizeof out->shown, "%s", uri);
    return 0;
}
