/* SPDX-License-Identifier: MIT */
/*
 * hash.c - the one hash of the region format: FNV-1a 64, for the header's
 * checksum, the key index (keys.c), the boot tag (clock.c) and the
 * supervisor's state file.  Below every other file: it calls nothing.
 */
#include "internal.h"

uint64_t fl__checksum(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
