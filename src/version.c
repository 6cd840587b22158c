/* SPDX-License-Identifier: MIT */
/*
 * version.c - the version of the loaded library (fl_version,
 * fl_version_number) and the compile-time guard of the public structures'
 * sizes: docs/abi.md promises that a minor version never changes the size of
 * an fl_*_info structure or the offset of a field in it.  New fields are
 * taken from `reserved`; the asserts below fail the build of a change that
 * grows a structure instead; fl_lease and fl_key, values the caller keeps, are fixed.  A major version (new SONAME) may update them.
 */
#include <stddef.h>

#include "core.h"

FL_API const char *fl_version(void) { return FL_VERSION_STRING; }

FL_API unsigned int fl_version_number(void) { return FL_VERSION_NUMBER; }

/* The sizes of ABI 0: the same on x86-64 and aarch64 (both LP64, the same
 * alignments; the aarch64 cross build checks them too). */
_Static_assert(sizeof(fl_region_info) == 216, "fl_region_info changed size: ABI break");
_Static_assert(sizeof(fl_lock_info) == 336, "fl_lock_info changed size: ABI break");
_Static_assert(sizeof(fl_record_info) == 392, "fl_record_info changed size: ABI break");
_Static_assert(sizeof(fl_client_info) == 88, "fl_client_info changed size: ABI break");
_Static_assert(sizeof(fl_unregistered_info) == 96, "fl_unregistered_info changed size: ABI break");
_Static_assert(sizeof(fl_lease) == 64, "fl_lease changed size: ABI break");
_Static_assert(sizeof(fl_key) == 32, "fl_key changed size: ABI break");
