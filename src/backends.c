/* SPDX-License-Identifier: MIT */
/*
 * backends.c - which backend a region string selects (backend.h).
 */
#include <string.h>

#include "backend.h"
#include "core.h"

/* "SCHEME://": a letter, then letters, digits, '+', '-', '.' (RFC 3986). */
static size_t fl__scheme_len(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return 0;
    size_t n = 1;
    while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
           (s[n] >= '0' && s[n] <= '9') || s[n] == '+' || s[n] == '-' || s[n] == '.')
        n++;
    return strncmp(s + n, "://", 3) == 0 ? n : 0;
}

int fl__backend_for(const char *name, const struct fl__backend **be)
{
    size_t n = fl__scheme_len(name);
    if (n == 0) {
        *be = &fl__shm_backend;
        return 0;
    }
    /* etcd:// and etcds:// (TLS) */
    bool etcd = (n == 4 && strncmp(name, "etcd", 4) == 0) ||
                (n == 5 && strncmp(name, "etcds", 5) == 0);
#ifdef FL_HAVE_ETCD
    if (etcd) {
        *be = &fl__etcd_backend;
        return 0;
    }
    const char *serves = "region files and etcd:// or etcds:// clusters";
#else
    if (etcd)
        return fl__fail(-EPROTONOSUPPORT,
                        "region %.*s://...: this libfencelock was built without etcd support "
                        "(libcurl and jansson were not found when it was built)",
                        (int)n, name);
    const char *serves = "region files";
#endif
    /* Only the scheme is shown: the rest may hold a user's password. */
    return fl__fail(-EPROTONOSUPPORT, "region %.*s://...: unknown scheme \"%.*s\": this build "
                                      "serves %s",
                    (int)n, name, (int)n, name, serves);
}
