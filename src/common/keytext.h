/* SPDX-License-Identifier: MIT */
/*
 * keytext.h - keys and record names in text output.  The library takes any
 * byte string of 1..FL_KEY_MAX bytes but NUL (UTF-8, spaces, control bytes);
 * every text a fencelock program writes for people (messages, tables) shows
 * one the same way, so that it is visible and unambiguous on a terminal and
 * in a log: printable ASCII as it is (spaces included), a backslash doubled,
 * every other byte (control bytes, DEL, the bytes of UTF-8 sequences) as
 * \xNN.  `fencelock status` escapes by the same rule.  JSON output escapes
 * by JSON's rules instead (src/common/json.c).
 */
#ifndef FL_COMMON_KEYTEXT_H
#define FL_COMMON_KEYTEXT_H

#include <stddef.h>

/* Room for the longest key with every byte escaped, and its NUL. */
#define FL_KEYTEXT_MAX (127 * 4 + 1)

/* Write s escaped into out (cap bytes, at least 1); a text too long for
 * cap is cut at a whole escape and still NUL-terminated. */
void fl__keytext(const char *s, char *out, size_t cap);

#endif
