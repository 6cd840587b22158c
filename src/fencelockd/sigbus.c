/* SPDX-License-Identifier: MIT */
/*
 * sigbus.c - a region file truncated under the supervisor (I9).
 *
 * Any process that may open the region file for writing can also shrink it
 * (`truncate -s 4096 REGION`).  The pages past the new end are then gone
 * from every mapping of the file, and the next access to one of them raises
 * SIGBUS.  By default that kills fencelockd without a word, and with it the
 * detection of dead holders.  Here the supervisor says why it stops instead:
 * one error line in its log (and on stderr when the log is a file), then
 * exit status 3 ("the region is corrupt"), like a region refused at start.
 *
 * A signal handler may only make async-signal-safe calls, so the line is
 * built in advance (sigbus_arm); the handler only fills in the time and the
 * file's size now (clock_gettime, fstat, integer formatting), write()s it
 * and _exit()s.  The log line goes through log_current_fd(), so a log
 * reopened on SIGHUP is still the one written.  --syslog does not get the
 * line: syslog() is not async-signal-safe (under systemd, stderr reaches the
 * journal anyway).  A SIGBUS at an address outside the region, or one sent
 * by another process, keeps its default action: that is not a truncation.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/json.h"
#include "fencelockd.h"

static const char *map_lo, *map_hi; /* the region's mapping */
static int region_fd = -1;
static char *line_head; /* ","level":"error",...,"mapped_size":N,"file_size": */
static size_t head_len;
static char *line_tail; /* ,"message":"..."}\n */
static size_t tail_len;
static char *line_buf; /* room for the whole line */
static size_t line_cap;

static const char message[] =
    "the region file was truncated (shrunk) by another process while fencelockd had it "
    "mapped: the region is lost. fencelockd stops (exit 3); until a supervisor serves a valid "
    "region, a dead holder's lock is freed only when its lease ends. Only trusted processes "
    "may open a region file for writing (README: Trust model)";

/* ---- async-signal-safe formatting ---------------------------------------- */

struct out {
    char *p;
    size_t n, cap;
};

static void put(struct out *o, const char *s, size_t len)
{
    if (len > o->cap - o->n)
        len = o->cap - o->n;
    memcpy(o->p + o->n, s, len);
    o->n += len;
}

/* v in decimal, at least width digits (zero-padded). */
static void put_uint(struct out *o, uint64_t v, int width)
{
    char d[24];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < (int)sizeof d);
    while (n < width && n < (int)sizeof d)
        d[n++] = '0';
    while (n > 0)
        put(o, &d[--n], 1);
}

/* "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" as the log's other lines (json.c), without
 * gmtime_r: the civil-from-days conversion of H. Hinnant, for days >= 0. */
static void put_time(struct out *o, const struct timespec *ts)
{
    uint64_t secs = (uint64_t)ts->tv_sec;
    uint64_t days = secs / 86400, sod = secs % 86400;
    uint64_t z = days + 719468;
    uint64_t era = z / 146097;
    uint64_t doe = z - era * 146097;
    uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    uint64_t mp = (5 * doy + 2) / 153;
    uint64_t day = doy - (153 * mp + 2) / 5 + 1;
    uint64_t month = mp < 10 ? mp + 3 : mp - 9;
    uint64_t year = yoe + era * 400 + (month <= 2);
    put_uint(o, year, 4);
    put(o, "-", 1);
    put_uint(o, month, 2);
    put(o, "-", 1);
    put_uint(o, day, 2);
    put(o, "T", 1);
    put_uint(o, sod / 3600, 2);
    put(o, ":", 1);
    put_uint(o, sod % 3600 / 60, 2);
    put(o, ":", 1);
    put_uint(o, sod % 60, 2);
    put(o, ".", 1);
    put_uint(o, (uint64_t)ts->tv_nsec / 1000, 6);
    put(o, "Z", 1);
}

static void write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            return; /* EINTR cannot happen: every signal is blocked in here */
        p += n;
        len -= (size_t)n;
    }
}

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    const char *a = si->si_addr;
    if (si->si_code <= 0 || a < map_lo || a >= map_hi) {
        /* Not the region's pages: the default action (the access runs again
         * and dies of it; a sent signal is raised again, delivered on return). */
        signal(sig, SIG_DFL);
        if (si->si_code <= 0)
            raise(sig);
        return;
    }
    struct out o = {line_buf, 0, line_cap};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* the log's timestamp, never for leases */
    put(&o, "{\"ts\":\"", 7);
    put_time(&o, &ts);
    put(&o, "\"", 1);
    put(&o, line_head, head_len);
    struct stat st;
    if (fstat(region_fd, &st) == 0 && st.st_size >= 0)
        put_uint(&o, (uint64_t)st.st_size, 1);
    else
        put(&o, "null", 4);
    put(&o, line_tail, tail_len);
    int fd = log_current_fd();
    write_all(fd, o.p, o.n);
    if (fd != 2)
        write_all(2, o.p, o.n);
    _exit(FLD_EXIT_REGION);
}

/* Close the memory stream f and return what it holds (*buf, malloc'd:
 * set by fclose), or NULL. */
static char *memstream_done(FILE *f, char **buf)
{
    if (fclose(f) != 0) {
        free(*buf);
        return NULL;
    }
    return *buf;
}

/* ,"level":"error","event":"region_truncated","region":PATH,"mapped_size":N,"file_size": */
static char *make_head(const struct fl__shm *r, size_t size, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    fputs(",\"level\":\"error\",\"event\":\"region_truncated\",\"region\":", f);
    fl__json_string(f, fl_region_path(fl__sup_handle(r)));
    fprintf(f, ",\"mapped_size\":%llu,\"file_size\":", (unsigned long long)size);
    return memstream_done(f, &buf);
}

/* ,"message":MESSAGE}\n */
static char *make_tail(size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    fputs(",\"message\":", f);
    fl__json_string(f, message);
    fputs("}\n", f);
    return memstream_done(f, &buf);
}

/* Free the prepared line (nothing armed uses it any more). */
static void drop_line(void)
{
    free(line_head);
    free(line_tail);
    free(line_buf);
    line_head = line_tail = line_buf = NULL;
}

int sigbus_arm(struct fl__shm *r)
{
    const void *base = NULL;
    size_t size = 0;
    fl__sup_region_mapping(r, &base, &size);
    line_head = make_head(r, size, &head_len);
    line_tail = make_tail(&tail_len);
    line_cap = head_len + tail_len + 128; /* the time, a size and the opening */
    line_buf = malloc(line_cap);
    if (!line_head || !line_tail || !line_buf) {
        drop_line();
        log_error("out_of_memory", "cannot prepare the region_truncated log line; a region "
                                   "truncated under fencelockd kills it by SIGBUS");
        return -ENOMEM;
    }
    map_lo = base;
    map_hi = (const char *)base + size;
    region_fd = fl__sup_region_fd(r);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigfillset(&sa.sa_mask); /* nothing interrupts the line */
    if (sigaction(SIGBUS, &sa, NULL) != 0) {
        int err = neg_errno();
        drop_line();
        log_errorf("sigbus_failed", "cannot install the SIGBUS handler: %s; a region truncated "
                                    "under fencelockd kills it by SIGBUS", strerror(-err));
        return err;
    }
    return 0;
}

void sigbus_disarm(void)
{
    if (!line_buf)
        return;
    /* The default action again before the mapping goes: a SIGBUS now is
     * not the region's.  sigaction cannot fail for SIGBUS and SIG_DFL. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    (void)sigaction(SIGBUS, &sa, NULL);
    map_lo = map_hi = NULL;
    region_fd = -1;
    drop_line();
}
