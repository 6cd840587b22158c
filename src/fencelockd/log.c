/*
 * log.c - the supervisor's log: one JSON object per line on stderr, so that
 * journald, a file or a pipe to jq all read it.
 */
#include <stdio.h>

#include "../common/json.h"
#include "fencelockd.h"

void log_begin(const char *level, const char *event)
{
    flockfile(stderr);
    fputs("{\"ts\":", stderr);
    fl_json_now(stderr);
    fputs(",\"level\":", stderr);
    fl_json_string(stderr, level);
    fputs(",\"event\":", stderr);
    fl_json_string(stderr, event);
}

void log_str(const char *name, const char *value)
{
    fprintf(stderr, ",\"%s\":", name);
    fl_json_string(stderr, value ? value : "");
}

void log_u64(const char *name, uint64_t value)
{
    fprintf(stderr, ",\"%s\":%llu", name, (unsigned long long)value);
}

void log_i64(const char *name, int64_t value)
{
    fprintf(stderr, ",\"%s\":%lld", name, (long long)value);
}

void log_end(void)
{
    fputs("}\n", stderr);
    fflush(stderr);
    funlockfile(stderr);
}

void log_error(const char *event, const char *message)
{
    log_begin("error", event);
    log_str("message", message);
    log_end();
}
