/* SPDX-License-Identifier: MIT */
/*
 * shown.h - a region string as it may be shown in a message: a password
 * someone wrote into it masked.  No dependency: the library (api.c, the
 * etcd URI parser) and the fencelock tool's copy of the etcd client use it.
 */
#ifndef FL_SHOWN_H
#define FL_SHOWN_H

#include <stddef.h>

/* Copy s into out (cap bytes with the NUL, cut to fit), with "***" in place
 * of the password of a "...//USER:PASSWORD@HOST:PORT..." userinfo and of the
 * value of a query key that starts with "password" (other than
 * "password-file").  The userinfo ends at the last '@' that an endpoint list
 * follows (host, port, commas, brackets up to a '/' or the end), so that a
 * password holding '/', '?', '#' or '@' is masked whole.  A string with '@'
 * inside a query's file name may be masked more than it needs: a message
 * then shows less, never a password. */
void fl__region_shown(const char *s, char *out, size_t cap);

/* Replace in msg (a NUL-terminated string in a buffer of cap bytes) every
 * occurrence of a secret region holds (what fl__region_shown masks) by
 * "***": for a message made from pieces of region (a directory of it, an
 * endpoint of it) that fl__region_shown cannot know. */
void fl__mask_secrets(const char *region, char *msg, size_t cap);

/* The '@' that ends s's userinfo (see above), or NULL: search from after
 * "://" (or from s) on. */
const char *fl__userinfo_end(const char *s);

#endif
