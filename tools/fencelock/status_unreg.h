/* SPDX-License-Identifier: MIT */
/*
 * status_unreg.h - the unregistered clients of `fencelock status`: processes
 * that opened the region but could not register with its supervisor (their
 * locks outlive them until the leases end), and why (I12).
 */
#ifndef FL_TOOL_STATUS_UNREG_H
#define FL_TOOL_STATUS_UNREG_H

#include <stddef.h>
#include <stdio.h>

#include "fencelock.h"

struct unreg_list {
    fl_unregistered_info items[FL_UNREGISTERED_MAX];
    size_t n;
};

/* Copy out the entries whose process still runs, oldest first. */
void unreg_read(fl_region *r, struct unreg_list *u);
/* A short phrase for a reason code (a negative errno). */
const char *unreg_reason_text(int reason);
/* The text section "Unregistered clients", printed only when there are any
 * (the rest of the output stays as it was for regions without them). */
void unreg_print_text(FILE *f, const struct unreg_list *u);
/* The JSON member  "unregistered": [...],  (with its trailing comma and
 * newline), always present. */
void unreg_print_json(FILE *f, const struct unreg_list *u);

#endif
