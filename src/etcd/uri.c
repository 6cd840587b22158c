/* SPDX-License-Identifier: MIT */
/*
 * uri.c - the region string of an etcd cluster:
 *
 *     etcd://HOST:PORT[,HOST:PORT...]/PREFIX
 *
 * HOST is a DNS name or an IPv4 address (letters, digits, '-', '.') or an
 * IPv6 address in brackets; PORT is 1..65535; at most FL__ETCD_MAX_ENDPOINTS
 * endpoints, tried in turn.  PREFIX scopes every key fencelock writes: it is
 * one or more segments of [A-Za-z0-9._-] joined by single slashes (a trailing
 * slash is dropped), none of them ".", ".." or a name the layout uses under
 * a prefix ("lock", "last", "rec", "epoch"), at most FL__ETCD_PREFIX_MAX
 * bytes.  With those rules no two prefixes share a key: a prefix that is a
 * segment-prefix of another continues with a segment the layout never
 * writes (backend.c, LAYOUT).  No user information, query or fragment:
 * credentials and TLS are not supported (docs/etcd.md).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

bool fl__etcd_is_uri(const char *name)
{
    return name && strncmp(name, FL__ETCD_SCHEME, strlen(FL__ETCD_SCHEME)) == 0;
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

/* One "HOST:PORT" of length n at s. */
static int fl__endpoint_parse(const char *uri, const char *s, size_t n,
                              struct fl__etcd_endpoint *ep)
{
    const char *colon = NULL;
    size_t hlen;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close || close == s + 1)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: bad IPv6 endpoint '%.*s'", uri, (int)n,
                                 s);
        for (const char *p = s + 1; p < close; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
                  (*p >= 'A' && *p <= 'F') || *p == ':' || *p == '.'))
                return fl__etcd_fail(-EINVAL, "etcd URI %s: bad IPv6 endpoint '%.*s'", uri,
                                     (int)n, s);
        if (close + 1 >= s + n || close[1] != ':')
            return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s' has no :PORT", uri,
                                 (int)n, s);
        colon = close + 1;
        hlen = (size_t)(colon - s);
    } else {
        colon = memchr(s, ':', n);
        if (!colon)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s' has no :PORT", uri,
                                 (int)n, s);
        hlen = (size_t)(colon - s);
        if (hlen == 0)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s' has no host", uri,
                                 (int)n, s);
        for (size_t i = 0; i < hlen; i++)
            if (!fl__host_char(s[i]))
                return fl__etcd_fail(-EINVAL,
                                     "etcd URI %s: host '%.*s': byte 0x%02x is not allowed "
                                     "(letters, digits, '-', '.'; IPv6 in brackets)",
                                     uri, (int)hlen, s, (unsigned char)s[i]);
    }
    if (hlen > FL__ETCD_HOST_MAX)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: host longer than %d bytes", uri,
                             FL__ETCD_HOST_MAX);
    const char *port = colon + 1;
    size_t plen = (size_t)(s + n - port);
    unsigned long v = 0;
    if (plen == 0 || plen > 5)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s': bad port", uri, (int)n, s);
    for (size_t i = 0; i < plen; i++) {
        if (port[i] < '0' || port[i] > '9')
            return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s': bad port", uri, (int)n,
                                 s);
        v = v * 10 + (unsigned long)(port[i] - '0');
    }
    if (v == 0 || v > 65535)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: endpoint '%.*s': port out of 1..65535", uri,
                             (int)n, s);
    snprintf(ep->name, sizeof ep->name, "%.*s:%lu", (int)hlen, s, v);
    snprintf(ep->url, sizeof ep->url, "http://%.*s:%lu", (int)hlen, s, v);
    return 0;
}

static int fl__prefix_check(const char *uri, const char *p, size_t n)
{
    static const char *const reserved[] = {".", "..", "lock", "last", "rec", "epoch"};
    if (n == 0)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: no PREFIX after the endpoints "
                                      "(etcd://HOST:PORT/PREFIX)", uri);
    if (n > FL__ETCD_PREFIX_MAX)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: PREFIX longer than %d bytes", uri,
                             FL__ETCD_PREFIX_MAX);
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/') {
            if (!fl__seg_char(p[i]))
                return fl__etcd_fail(-EINVAL,
                                     "etcd URI %s: PREFIX byte 0x%02x at %zu is not allowed "
                                     "(letters, digits, '.', '_', '-', '/' between segments)",
                                     uri, (unsigned char)p[i], i);
            continue;
        }
        size_t len = i - start;
        if (len == 0)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: PREFIX has an empty segment", uri);
        for (size_t k = 0; k < sizeof reserved / sizeof reserved[0]; k++)
            if (strlen(reserved[k]) == len && memcmp(reserved[k], p + start, len) == 0)
                return fl__etcd_fail(-EINVAL,
                                     "etcd URI %s: PREFIX segment '%s' is reserved (., .., "
                                     "lock, last, rec, epoch)",
                                     uri, reserved[k]);
        start = i + 1;
    }
    return 0;
}

int fl__etcd_uri_parse(const char *uri, struct fl__etcd_uri *out)
{
    memset(out, 0, sizeof *out);
    if (!fl__etcd_is_uri(uri))
        return fl__etcd_fail(-EINVAL, "'%s' is not an etcd URI (etcd://HOST:PORT/PREFIX)",
                             uri ? uri : "(null)");
    const char *s = uri + strlen(FL__ETCD_SCHEME);
    const char *slash = strchr(s, '/');
    if (!slash)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: no /PREFIX (etcd://HOST:PORT/PREFIX)", uri);
    for (const char *p = s; p < slash; p++)
        if (*p == '@' || *p == '?' || *p == '#' || *p == '%')
            return fl__etcd_fail(-EINVAL,
                                 "etcd URI %s: '%c' is not supported (no credentials, query "
                                 "or escapes)",
                                 uri, *p);
    if (slash == s)
        return fl__etcd_fail(-EINVAL, "etcd URI %s: no endpoint", uri);
    const char *p = s;
    while (p < slash) {
        const char *comma = memchr(p, ',', (size_t)(slash - p));
        const char *end = comma ? comma : slash;
        if (end == p)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: empty endpoint in the list", uri);
        if (out->n == FL__ETCD_MAX_ENDPOINTS)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: more than %d endpoints", uri,
                                 FL__ETCD_MAX_ENDPOINTS);
        int err = fl__endpoint_parse(uri, p, (size_t)(end - p), &out->ep[out->n]);
        if (err)
            return err;
        out->n++;
        if (!comma)
            break;
        p = comma + 1;
        if (p == slash)
            return fl__etcd_fail(-EINVAL, "etcd URI %s: empty endpoint in the list", uri);
    }
    const char *prefix = slash + 1;
    size_t n = strlen(prefix);
    if (n && prefix[n - 1] == '/')
        n--; /* "etcd://h:1/app/" is "etcd://h:1/app" */
    int err = fl__prefix_check(uri, prefix, n);
    if (err)
        return err;
    memcpy(out->prefix, prefix, n);
    out->prefix[n] = '\0';
    out->prefix_len = n;
    return 0;
}
