/* SPDX-License-Identifier: MIT */
/*
 * fuzz_text.c - libFuzzer harness for the text parsers of untrusted input
 * outside the library (I9): durations as every program reads them
 * (src/common/duration.c: fencelock, fencelockd, the chaos harness) and fencelockd's durable state file
 * (src/fencelockd/durable.c), which an operator or a failing disk may have
 * left in any shape.
 *
 * Besides "no crash, no sanitizer report", it checks what each parser
 * promises:
 *   duration   accepted: the value is at most CLI_DURATION_MAX_NS, and
 *              formatting it gives text that parses back to the same value;
 *              refused: a reason is given and *ns is left alone.
 *   state file accepted: exactly the file the supervisor writes for that
 *              epoch, byte for byte, so nothing else can set an epoch, and
 *              no log line; refused: exactly one error line (fencelockd's
 *              rule: the function that fails logs once), naming the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/duration.h"
#include "fencelockd/fencelockd.h"

static char state_path[64];

/* durable.c reports through fencelockd's log (log.c, not linked here): its
 * lines are caught to check what they say and that there is one. */
static char last_error[8192];
static int error_lines;

void log_error(const char *event, const char *message)
{
    snprintf(last_error, sizeof last_error, "%s: %s", event, message);
    error_lines++;
}

void log_errorf(const char *event, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_error(event, msg);
}

static void remove_state(void)
{
    unlink(state_path);
}

static void fuzz_duration(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return;
    memcpy(text, data, size);
    text[size] = '\0';
    const uint64_t untouched = 0x5eed5eed5eed5eedull;
    uint64_t ns = untouched;
    const char *why = NULL;
    if (cli_parse_duration(text, &ns, &why) == 0) {
        if (ns > CLI_DURATION_MAX_NS)
            abort();
        char buf[64];
        cli_format_duration(ns, CLI_DURATION_EXACT, buf, sizeof buf);
        uint64_t again = 0;
        if (cli_parse_duration(buf, &again, &why) != 0 || again != ns)
            abort(); /* the format is not read back as the same duration */
    } else if (!why || !*why || ns != untouched) {
        abort();
    }
    free(text);
}

static void fuzz_state_file(const uint8_t *data, size_t size)
{
    if (!state_path[0]) {
        snprintf(state_path, sizeof state_path, "/tmp/flfuzz-state.%d", (int)getpid());
        atexit(remove_state);
    }
    int fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(state_path); /* the harness's own set-up failed, not the parser */
        exit(1);
    }
    if (size > 0 && write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    uint64_t epoch = 0;
    last_error[0] = '\0';
    error_lines = 0;
    int rc = durable_load(state_path, &epoch);
    if (rc == 0) {
        if (error_lines != 0)
            abort();
        /* only the whole canonical file for that epoch is accepted */
        char want[128];
        int n = snprintf(want, sizeof want, "fencelock-state 1\nepoch %llu\n",
                         (unsigned long long)epoch);
        if (n <= 0 || (size_t)n >= sizeof want)
            abort();
        snprintf(want + n, sizeof want - (size_t)n, "checksum %016llx\n",
                 (unsigned long long)fl__checksum(want, (size_t)n));
        if (size != strlen(want) || memcmp(data, want, size) != 0)
            abort();
    } else if (rc >= 0 || error_lines != 1 || !strstr(last_error, state_path)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte chooses the parser; the rest is its input. */
    if (size == 0)
        return 0;
    if (data[0] & 1)
        fuzz_state_file(data + 1, size - 1);
    else
        fuzz_duration(data + 1, size - 1);
    return 0;
}
