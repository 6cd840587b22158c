/* SPDX-License-Identifier: MIT */
/*
 * status_unreg.c - the unregistered clients of `fencelock status` (see
 * status_unreg.h; the table they come from: src/shm/unreg.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duration.h"
#include "json.h"
#include "status_unreg.h"

static int by_opened(const void *a, const void *b)
{
    const fl_unregistered_info *x = a, *y = b;
    return x->opened_unix_ns < y->opened_unix_ns ? -1 : x->opened_unix_ns > y->opened_unix_ns;
}

void unreg_read(fl_region *r, struct unreg_list *u)
{
    u->n = 0;
    for (uint32_t i = 0; i < FL_UNREGISTERED_MAX; i++)
        if (fl_unregistered_info_get(r, i, &u->items[u->n]) == 0)
            u->n++;
    qsort(u->items, u->n, sizeof u->items[0], by_opened);
}

const char *unreg_reason_text(int reason)
{
    switch (-reason) {
    case ECONNREFUSED:
    case ENOENT: return "no supervisor listening on the region's socket";
    case EACCES:
    case EPERM: return "permission denied on the region's socket (its mode or group)";
    case ETIMEDOUT:
    case EAGAIN: return "the supervisor did not answer in time";
    case ENAMETOOLONG: return "the socket path is too long";
    default: return fl_strerror(reason);
    }
}

static void format_time(uint64_t unix_ns, char *buf, size_t cap)
{
    time_t t = (time_t)(unix_ns / CLI_NS_PER_S);
    struct tm tm;
    if (!unix_ns || !localtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(buf, cap, "-");
}

void unreg_print_text(FILE *f, const struct unreg_list *u)
{
    if (u->n == 0)
        return;
    fprintf(f, "\nUnregistered clients (no death detection: their locks end only at lease "
               "expiry)\n");
    fprintf(f, "  %-8s %-8s %-19s  %s\n", "PID", "UID", "OPENED", "REASON");
    for (size_t i = 0; i < u->n; i++) {
        const fl_unregistered_info *e = &u->items[i];
        char when[32];
        format_time(e->opened_unix_ns, when, sizeof when);
        fprintf(f, "  %-8u %-8u %-19s  %s (%s)\n", e->pid, e->uid, when,
                unreg_reason_text(e->reason), fl_err_name(e->reason));
    }
}

void unreg_print_json(FILE *f, const struct unreg_list *u)
{
    fputs("  \"unregistered\": [", f);
    for (size_t i = 0; i < u->n; i++) {
        const fl_unregistered_info *e = &u->items[i];
        fprintf(f, "%s\n    {\"pid\": %u, \"uid\": %u, \"opened\": ", i ? "," : "", e->pid,
                e->uid);
        fl__json_time(f, e->opened_unix_ns);
        fputs(", \"reason\": ", f);
        fl__json_string(f, fl_err_name(e->reason));
        fputs(", \"reason_text\": ", f);
        fl__json_string(f, unreg_reason_text(e->reason));
        fputc('}', f);
    }
    fputs(u->n ? "\n  ],\n" : "],\n", f);
}
