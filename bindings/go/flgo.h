/* SPDX-License-Identifier: MIT */
/*
 * flgo.h - C helpers of the Go binding's hot calls (lease.go, record.go),
 * included by their cgo preambles, where _GoString_ is defined.
 */
#ifndef FLGO_H
#define FLGO_H

#include <string.h>
#include <fencelock.h>

/* A key or record name, given as the Go string itself, as a C string in
 * out: instead of a new Go []byte per call.  One byte past FL_KEY_MAX is
 * kept, enough for the library to refuse a longer name with its message.
 * The Go side has refused a name with a NUL byte. */
static inline const char *flgo_name(char out[FL_KEY_MAX + 2], _GoString_ s)
{
    size_t n = _GoStringLen(s);
    if (n > FL_KEY_MAX + 1)
        n = FL_KEY_MAX + 1;
    if (n)
        memcpy(out, _GoStringPtr(s), n);
    out[n] = '\0';
    return out;
}

#endif
