/* SPDX-License-Identifier: MIT */
/*
 * b64.c - base64 (RFC 4648 section 4, padded), the encoding of every key
 * and value on etcd's JSON gateway.  The decoder is strict: the gateway
 * writes canonical padded base64, and anything else in an answer is
 * untrusted input, refused rather than guessed at.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "client.h"

static const char fl__b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *fl__b64_encode(const void *p, size_t n)
{
    const unsigned char *s = p;
    if (n > (SIZE_MAX - 1) / 4 * 3 - 3)
        return NULL;
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = fl__b64_alphabet[v >> 18];
        *o++ = fl__b64_alphabet[(v >> 12) & 63];
        *o++ = fl__b64_alphabet[(v >> 6) & 63];
        *o++ = fl__b64_alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = fl__b64_alphabet[v >> 18];
        *o++ = fl__b64_alphabet[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *o++ = fl__b64_alphabet[v >> 18];
        *o++ = fl__b64_alphabet[(v >> 12) & 63];
        *o++ = fl__b64_alphabet[(v >> 6) & 63];
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

static int fl__b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

int fl__b64_decode(const char *text, size_t n, unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (n % 4)
        return -EINVAL;
    size_t pad = 0;
    if (n >= 1 && text[n - 1] == '=')
        pad++;
    if (n >= 2 && text[n - 2] == '=')
        pad++;
    size_t cap = n / 4 * 3 - pad;
    unsigned char *buf = malloc(cap + 1);
    if (!buf)
        return -ENOMEM;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            bool last = i + 4 == n;
            if (last && text[i + k] == '=' && k >= 4 - (int)pad) {
                v[k] = 0;
                continue;
            }
            v[k] = fl__b64_value(text[i + k]);
            if (v[k] < 0) {
                free(buf);
                return -EINVAL;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        unsigned char b[3] = {(unsigned char)(w >> 16), (unsigned char)(w >> 8),
                              (unsigned char)w};
        size_t take = i + 4 == n ? 3 - pad : 3;
        /* canonical: the bits under the padding are zero */
        if ((take == 1 && (w & 0xffff)) || (take == 2 && (w & 0xff))) {
            free(buf);
            return -EINVAL;
        }
        for (size_t k = 0; k < take; k++)
            buf[o++] = b[k];
    }
    buf[o] = '\0';
    *out = buf;
    *len = o;
    return 0;
}
