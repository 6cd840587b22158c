/* SPDX-License-Identifier: MIT */
/*
 * log.c - the supervisor's log: one JSON object per line, on stderr by
 * default, appended to a file with --log (reopened on SIGHUP, for logrotate),
 * and copied to syslog/journald with --syslog.  Each line is built in memory
 * and written with one write(), so lines never interleave.
 *
 * The JSON is written with the small shared writer of src/common/json.c (the
 * status tool's too), not a JSON library: a log line is a flat object of
 * strings and integers, the supervisor should not need one more shared
 * library to start, and the SIGBUS handler (sigbus.c) must pre-format its
 * line without any.  jansson comes in with the etcd backend, which parses
 * JSON; writing flat lines does not need it.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "../common/json.h"
#include "fencelockd.h"

static int log_fd = 2;
static char *log_path;
static bool use_syslog;

static FILE *line;
static char *line_buf;
static size_t line_len;
static int line_priority;

/* Open path for appending; on success it replaces the current log file. */
static int log_switch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        return neg_errno();
    if (log_fd != 2)
        close(log_fd);
    log_fd = fd;
    return 0;
}

int log_open(const char *path, bool syslog_too)
{
    if (path) {
        char *copy = strdup(path); /* kept for log_reopen */
        int err = copy ? log_switch(path) : -ENOMEM;
        if (err) {
            free(copy);
            fprintf(stderr, "fencelockd: cannot open log file %s: %s\n", path, strerror(-err));
            return err;
        }
        free(log_path);
        log_path = copy;
    }
    if (syslog_too && !use_syslog) {
        openlog("fencelockd", LOG_PID, LOG_DAEMON);
        use_syslog = true;
    }
    return 0;
}

int log_reopen(void)
{
    if (!log_path)
        return 0;
    int err = log_switch(log_path);
    if (err)
        log_errorf("log_reopen_failed", "cannot reopen log file %s: %s; still writing to the "
                                        "file opened before", log_path, strerror(-err));
    return err;
}

void log_close(void)
{
    if (log_fd != 2)
        close(log_fd);
    log_fd = 2;
    free(log_path);
    log_path = NULL;
    if (use_syslog)
        closelog();
    use_syslog = false;
}

/* Read from a signal handler (sigbus.c): one int load, async-signal-safe. */
int log_current_fd(void) { return log_fd; }

void log_begin(const char *level, const char *event) { log_begin_at(level, event, 0); }

void log_begin_at(const char *level, const char *event, uint64_t unix_ns)
{
    line = open_memstream(&line_buf, &line_len);
    if (!line)
        line = stderr; /* out of memory: write straight through */
    line_priority = !strcmp(level, "error") ? LOG_ERR : !strcmp(level, "warn") ? LOG_WARNING
                                                                                : LOG_INFO;
    fputs("{\"ts\":", line);
    if (unix_ns)
        fl__json_time(line, unix_ns);
    else
        fl__json_now(line);
    fputs(",\"level\":", line);
    fl__json_string(line, level);
    fputs(",\"event\":", line);
    fl__json_string(line, event);
}

void log_str(const char *name, const char *value)
{
    fprintf(line, ",\"%s\":", name);
    fl__json_string(line, value ? value : "");
}

void log_u64(const char *name, uint64_t value)
{
    fprintf(line, ",\"%s\":%llu", name, (unsigned long long)value);
}

void log_i64(const char *name, int64_t value)
{
    fprintf(line, ",\"%s\":%lld", name, (long long)value);
}

void log_bool(const char *name, bool value)
{
    fprintf(line, ",\"%s\":%s", name, value ? "true" : "false");
}

void log_end(void)
{
    fputs("}\n", line);
    if (line == stderr)
        return;
    fclose(line);
    size_t off = 0;
    while (off < line_len) {
        ssize_t n = write(log_fd, line_buf + off, line_len - off);
        if (n <= 0)
            break; /* a full disk must not stop the supervisor */
        off += (size_t)n;
    }
    if (use_syslog)
        syslog(line_priority, "%.*s", (int)(line_len ? line_len - 1 : 0), line_buf);
    free(line_buf);
    line_buf = NULL;
    line = NULL;
}

void log_error(const char *event, const char *message)
{
    log_begin("error", event);
    log_str("message", message);
    log_end();
}

void log_errorf(const char *event, const char *fmt, ...)
{
    char msg[FL__PATH_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap); /* a longer message is cut, never lost */
    va_end(ap);
    log_error(event, msg);
}
