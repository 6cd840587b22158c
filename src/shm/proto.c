/* SPDX-License-Identifier: MIT */
/*
 * proto.c - the registration messages, parsed from untrusted bytes (I9).
 * The supervisor parses hellos from any local process that can reach its
 * socket, and goodbyes from registered clients; a client parses the reply of
 * whatever listens there.  Both are
 * fixed-size and checked field by field; nothing here trusts a length or
 * a number it did not check.
 */
#include <string.h>

#include "shm.h"

int fl__hello_parse(const void *buf, size_t n, struct fl__hello *out, char *why, size_t whycap)
{
    if (n != sizeof *out) {
        snprintf(why, whycap, "hello of %zu bytes, expected %zu", n, sizeof *out);
        return -EPROTO;
    }
    memcpy(out, buf, sizeof *out);
    if (out->magic != FL__HELLO_MAGIC) {
        snprintf(why, whycap, "hello with magic %#x, expected %#x", out->magic, FL__HELLO_MAGIC);
        return -EPROTO;
    }
    if (out->version != FL__PROTO_VERSION) {
        snprintf(why, whycap, "hello of protocol version %u; this supervisor speaks %u",
                 out->version, FL__PROTO_VERSION);
        return -EPROTONOSUPPORT;
    }
    if (out->reserved != 0) {
        snprintf(why, whycap, "hello with reserved field %#x set", out->reserved);
        return -EPROTO;
    }
    return 0;
}

int fl__reply_parse(const void *buf, size_t n, uint32_t client_capacity, struct fl__reply *out,
                    char *why, size_t whycap)
{
    if (n != sizeof *out) {
        snprintf(why, whycap, "reply of %zu bytes, expected %zu", n, sizeof *out);
        return -EPROTO;
    }
    memcpy(out, buf, sizeof *out);
    if (out->magic != FL__REPLY_MAGIC) {
        snprintf(why, whycap, "reply with magic %#x, expected %#x", out->magic, FL__REPLY_MAGIC);
        return -EPROTO;
    }
    if (out->status > 0 || out->status < -4095) {
        snprintf(why, whycap, "reply with status %d", out->status);
        return -EPROTO;
    }
    if (out->status == 0 && (out->client == 0 || out->client >= client_capacity)) {
        snprintf(why, whycap, "reply assigns client index %u of %u", out->client,
                 client_capacity);
        return -EPROTO;
    }
    return 0;
}

int fl__goodbye_parse(const void *buf, size_t n, struct fl__goodbye *out, char *why,
                      size_t whycap)
{
    if (n != sizeof *out) {
        snprintf(why, whycap, "message of %zu bytes from a registered client, expected a "
                 "goodbye of %zu", n, sizeof *out);
        return -EPROTO;
    }
    memcpy(out, buf, sizeof *out);
    if (out->magic != FL__GOODBYE_MAGIC) {
        snprintf(why, whycap, "goodbye with magic %#x, expected %#x", out->magic,
                 FL__GOODBYE_MAGIC);
        return -EPROTO;
    }
    if (out->reserved != 0) {
        snprintf(why, whycap, "goodbye with reserved field %#x set", out->reserved);
        return -EPROTO;
    }
    return 0;
}
