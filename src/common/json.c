/* SPDX-License-Identifier: MIT */
/* json.c - JSON string escaping and timestamps for the programs' output. */
#include "json.h"

#include <time.h>

#include "clocks.h"

void fl__json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20 || *p >= 0x7f)
                fprintf(f, "\\u%04x", *p); /* keys are bytes, not UTF-8: keep them exact */
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void fl__json_time(FILE *f, uint64_t unix_ns)
{
    time_t sec = (time_t)(unix_ns / FL__NS_PER_S);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char buf[40];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(f, "\"%s.%06ldZ\"", buf, (long)(unix_ns % FL__NS_PER_S / 1000));
}

void fl__json_now(FILE *f) { fl__json_time(f, fl__wall_clock_ns()); }
