/* SPDX-License-Identifier: MIT */
/*
 * hash.c - the checksum of the region format: FNV-1a 64, for the header's
 * checksum, the boot tag (clock.c) and the supervisor's state file.  (The
 * key index has its own word-at-a-time hash since format 5: keys.c, THE KEY
 * HASH.)  Below every other file: it calls nothing.
 */
#include "core.h"

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
