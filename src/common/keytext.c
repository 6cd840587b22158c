/* SPDX-License-Identifier: MIT */
/* keytext.c - keys in text output; see keytext.h. */
#include "keytext.h"

#include <stdio.h>

void fl__keytext(const char *s, char *out, size_t cap)
{
    if (cap == 0)
        return;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 5 <= cap; p++) {
        if (*p == '\\') {
            out[n++] = '\\';
            out[n++] = '\\';
        } else if (*p < 0x20 || *p >= 0x7f) {
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", *p);
        } else {
            out[n++] = (char)*p;
        }
    }
    out[n] = '\0';
}
