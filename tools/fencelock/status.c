/*
 * status.c - `fencelock status`: a view of one region as it is now, as
 * aligned tables for people or one JSON document for programs.
 *
 * The region is opened with fl_open_readonly(): mapped PROT_READ from an
 * O_RDONLY descriptor and never registered, so looking cannot disturb the
 * processes being looked at, and a read-only file can be inspected.  The
 * view is taken first (take_snapshot) and printed afterwards, so both output
 * forms show the same numbers and column widths can be fitted to them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "fencelock.h"
#include "json.h"

const char status_usage[] =
    "Usage: fencelock status [-r PATH | --region PATH] [--json]\n"
    "\n"
    "Show a fencelock region as it is now: its parameters and supervisor, the\n"
    "client processes registered with the supervisor, every lock key and every\n"
    "fenced record.\n"
    "\n"
    "The region is opened read-only and without registering: status works on a\n"
    "read-only file and with or without a running fencelockd, and it changes\n"
    "nothing.  The numbers are read from shared memory while other processes\n"
    "work, one field at a time: a near-instant view, not an atomic snapshot.\n"
    "Process ids are those of the supervisor's pid namespace; whether the\n"
    "supervisor is running is checked in the caller's.\n"
    "\n"
    "Options:\n"
    "  -r, --region PATH  the region file (default: $FENCELOCK_REGION, else\n"
    "                     /dev/shm/fencelock-UID/region)\n"
    "      --json         print one JSON document instead of tables\n"
    "  -h, --help         show this help and exit\n"
    "\n"
    "Clients table:\n"
    "  INDEX      client table index (what the locks table shows as CLIENT)\n"
    "  CLIENT-ID  client id, unique for the life of the region\n"
    "  PID, UID   the client process\n"
    "  STATE      attached (connected to the running supervisor) or adopted\n"
    "             (registered before a supervisor restart, watched by pid)\n"
    "\n"
    "Locks table, one row per key:\n"
    "  KEY        the key; bytes outside printable ASCII are shown as \\xNN and\n"
    "             a backslash as \\\\\n"
    "  STATE      free; held (by an unexpired lease); expired (the lease ended\n"
    "             while held: the next acquire takes it over with a new token)\n"
    "  TOKEN      latest fencing token handed out for the key (0: never)\n"
    "  PID        holder's process id, - when free\n"
    "  CLIENT     holder's client index; - when free or when the holder is not\n"
    "             registered (then its death is detected only by lease expiry)\n"
    "  LEFT       lease time left (300ms, 1.25s, 4m05s); expired once past its\n"
    "             deadline; - when free\n"
    "  WAITERS    processes waiting for the key now\n"
    "  ACQUIRED   successful acquisitions\n"
    "  CONTENDED  acquisitions that found the key held\n"
    "  TAKEOVERS  acquisitions that took an expired lease over\n"
    "  DEATHS     holdings released by fencelockd because the holder died\n"
    "  RENEWALS   successful lease renewals\n"
    "  LAST       how the last holding ended: released; died (released by\n"
    "             fencelockd); voided (a lease of an earlier boot); - while\n"
    "             held or if never held\n"
    "\n"
    "Records table, one row per record:\n"
    "  NAME       record name, escaped like keys\n"
    "  KEY        the lock key that fences it (- if never bound)\n"
    "  TOKEN      greatest fencing token the record accepted (0: none)\n"
    "  VERSION    version of the current value (accepted commits)\n"
    "  SIZE       bytes in the current value\n"
    "  COMMITS    commits accepted\n"
    "  REJECTED   commits rejected for a stale token\n"
    "  REJ-TOKEN  token of the last rejected commit, - if none\n"
    "  REJ-PID    process that made the last rejected commit, - if none\n"
    "\n"
    "JSON output: one object with \"time\" (when the view was taken), \"region\"\n"
    "(an object) and the arrays \"clients\", \"locks\" and \"records\", one element\n"
    "per line.  Members are named after the fields of fencelock.h's\n"
    "fl_region_info, fl_client_info, fl_lock_info and fl_record_info; numbers\n"
    "are JSON numbers.  In addition the region has path, clients_used,\n"
    "supervisor_alive and created.  Times are RFC 3339 in UTC.  Every state and\n"
    "last_release is the word the tables show, null for -; bound_key is null if\n"
    "unbound.  lease_left_ns is in nanoseconds, negative once expired, 0 when\n"
    "free.  Keys and names are strings in which each byte outside printable\n"
    "ASCII is a \\u00NN escape: decoded as Latin-1 they give the bytes back.\n"
    "A lock's holder_pid, holder_client and holder_client_id name its latest\n"
    "holder, also after a release.\n"
    "\n" CLI_ENVIRONMENT_TEXT "\n" CLI_EXIT_STATUS_TEXT
    "\n"
    "Examples:\n"
    "  fencelock status\n"
    "  FENCELOCK_REGION=/run/myapp/locks fencelock status\n"
    "  fencelock status --json | jq -r '.locks[] | select(.waiters > 0) | .key'\n";

/* ---- the view -------------------------------------------------------------- */

struct snapshot {
    char path[4096];
    fl_region_info region;
    bool supervisor_alive;
    fl_client_info *clients;
    size_t n_clients;
    fl_lock_info *locks;
    size_t n_locks;
    fl_record_info *records;
    size_t n_records;
};

static void free_snapshot(struct snapshot *s)
{
    free(s->clients);
    free(s->locks);
    free(s->records);
}

/* The last library error in one line: the detail if there is one. */
static const char *library_error(int err)
{
    const char *detail = fl_last_error();
    return detail[0] ? detail : fl_strerror(err);
}

static int out_of_memory(const char *what)
{
    fprintf(stderr, "fencelock: %s: out of memory\n", what);
    return CLI_EXIT_RUNTIME;
}

static int fail_runtime(const char *what, int err)
{
    fprintf(stderr, "fencelock: %s: %s\n", what, library_error(err));
    return CLI_EXIT_RUNTIME;
}

static int read_clients(fl_region *r, struct snapshot *s)
{
    uint32_t cap = s->region.client_capacity;
    /* calloc(0, ...) may return NULL: only ask for something. */
    s->clients = cap ? calloc(cap, sizeof *s->clients) : NULL;
    if (cap && !s->clients)
        return out_of_memory("reading the client table");
    for (uint32_t i = 1; i <= cap; i++) {
        int err = fl_client_info_get(r, i, &s->clients[s->n_clients]);
        if (err == 0)
            s->n_clients++;
        else if (err == -ERANGE)
            break;
        else if (err != -ENOENT)
            return fail_runtime("reading the client table", err);
    }
    return CLI_EXIT_OK;
}

static int read_locks(fl_region *r, struct snapshot *s)
{
    uint32_t used = s->region.locks_used;
    /* calloc(0, ...) may return NULL: only ask for something. */
    s->locks = used ? calloc(used, sizeof *s->locks) : NULL;
    if (used && !s->locks)
        return out_of_memory("reading the lock table");
    for (uint32_t i = 0; i < used; i++) {
        int err = fl_lock_info_get(r, i, &s->locks[s->n_locks]);
        if (err == 0)
            s->n_locks++;
        else if (err != -ENOENT) /* a slot abandoned in a creation race holds no key */
            return fail_runtime("reading the lock table", err);
    }
    return CLI_EXIT_OK;
}

static int read_records(fl_region *r, struct snapshot *s)
{
    uint32_t used = s->region.records_used;
    /* calloc(0, ...) may return NULL: only ask for something. */
    s->records = used ? calloc(used, sizeof *s->records) : NULL;
    if (used && !s->records)
        return out_of_memory("reading the record table");
    for (uint32_t i = 0; i < used; i++) {
        int err = fl_record_info_get(r, i, &s->records[s->n_records]);
        if (err == 0)
            s->n_records++;
        else if (err != -ENOENT)
            return fail_runtime("reading the record table", err);
    }
    return CLI_EXIT_OK;
}

/* Open the region at path read-only and copy out everything shown. */
static int take_snapshot(const char *path, struct snapshot *s)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    fl_region *r;
    int err = fl_open_readonly(path, &r);
    if (err) {
        fprintf(stderr, "fencelock: %s\n", library_error(err));
        return err == -ENOMEM || err == -EMFILE || err == -ENFILE ? CLI_EXIT_RUNTIME
                                                                   : CLI_EXIT_REGION;
    }
    int rc = CLI_EXIT_OK;
    err = fl_region_info_get(r, &s->region);
    if (err)
        rc = fail_runtime("reading the region header", err);
    if (rc == CLI_EXIT_OK)
        rc = read_clients(r, s);
    if (rc == CLI_EXIT_OK)
        rc = read_locks(r, s);
    if (rc == CLI_EXIT_OK)
        rc = read_records(r, s);
    fl_close(r);
    /* The library asks the supervisor's flock, which a reused pid cannot fake. */
    s->supervisor_alive = s->region.served != 0;
    return rc;
}

/* ---- formatting helpers ---------------------------------------------------- */

/* Room for a key with every byte escaped as \xNN, and its NUL. */
#define ESCAPED_MAX (FL_KEY_MAX * 4 + 1)
/* Room for any table cell. */
#define CELL_MAX (ESCAPED_MAX + 8)

/* Keys are bytes: make every one visible and unambiguous on a terminal. */
static void escape_bytes(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 5 <= cap; p++) {
        if (*p == '\\') {
            out[n++] = '\\';
            out[n++] = '\\';
        } else if (*p < 0x20 || *p >= 0x7f) {
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", *p);
        } else {
            out[n++] = (char)*p;
        }
    }
    out[n] = '\0';
}

/* Drop trailing zeros of a decimal fraction: "1.50" -> "1.5", "2.00" -> "2". */
static void trim_fraction(char *s)
{
    char *dot = strchr(s, '.');
    if (!dot)
        return;
    char *end = s + strlen(s);
    while (end > dot + 1 && end[-1] == '0')
        end--;
    if (end == dot + 1)
        end = dot;
    *end = '\0';
}

/* A duration in the largest fitting unit, truncated (never overstated):
 * 850us, 300ms, 1.25s, 4m05s, 2h03m, 3d04h. */
static void format_duration(uint64_t ns, char *buf, size_t cap)
{
    const uint64_t us = 1000, ms = 1000 * us, s = 1000 * ms, min = 60 * s, h = 60 * min,
                   d = 24 * h;
    if (ns < us) {
        snprintf(buf, cap, "<1us");
    } else if (ns < ms) {
        snprintf(buf, cap, "%" PRIu64 "us", ns / us);
    } else if (ns < s) {
        snprintf(buf, cap, "%" PRIu64 "ms", ns / ms);
    } else if (ns < min) {
        char num[32];
        snprintf(num, sizeof num, "%" PRIu64 ".%02" PRIu64, ns / s, ns % s / (10 * ms));
        trim_fraction(num);
        snprintf(buf, cap, "%ss", num);
    } else if (ns < h) {
        snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", ns / min, ns % min / s);
    } else if (ns < d) {
        snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", ns / h, ns % h / min);
    } else {
        snprintf(buf, cap, "%" PRIu64 "d%02" PRIu64 "h", ns / d, ns % d / h);
    }
}

static void format_size(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%" PRIu64 " bytes", bytes);
        return;
    }
    double v = (double)bytes / 1024;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, "%.1f %s (%" PRIu64 " bytes)", v, units[u], bytes);
}

static uint64_t wall_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* compared with the creation time, display only */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A wall-clock time in nanoseconds, for people: local time with its zone. */
static void format_local_time(uint64_t unix_ns, char *buf, size_t cap)
{
    time_t t = (time_t)(unix_ns / 1000000000ull);
    struct tm tm;
    if (!localtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%d %H:%M:%S %Z", &tm) == 0)
        snprintf(buf, cap, "?");
}

/* The same for programs: RFC 3339 in UTC. */
static void format_utc_time(uint64_t unix_ns, char *buf, size_t cap)
{
    time_t t = (time_t)(unix_ns / 1000000000ull);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "?");
}

static const char *lock_state_name(int state)
{
    switch (state) {
    case FL_LOCK_FREE: return "free";
    case FL_LOCK_HELD: return "held";
    case FL_LOCK_EXPIRED: return "expired";
    default: return "unknown";
    }
}

/* How the last holding ended, or NULL while held or if never held. */
static const char *last_release_name(const fl_lock_info *l)
{
    if (l->state != FL_LOCK_FREE || l->token == 0)
        return NULL;
    if (l->last_release == FL_LEASE_OWNER_DIED)
        return "died";
    if (l->last_release == FL_LEASE_EXPIRED)
        return "voided";
    return "released";
}

/* ---- tables for people ----------------------------------------------------- */

typedef void cell_fn(const void *row, char *buf, size_t cap);

struct column {
    const char *title;
    bool right; /* numbers align right, text left */
    cell_fn *cell;
};

#define MAX_COLUMNS 16

static void put_cell(FILE *f, const char *text, int width, bool right, bool last)
{
    if (right)
        fprintf(f, "%*s", width, text);
    else if (last)
        fputs(text, f); /* no trailing blanks */
    else
        fprintf(f, "%-*s", width, text);
}

/* Print rows (n of them, size bytes apart) under a header line, each column
 * as wide as its widest cell.  Cells are formatted twice (measure, print)
 * rather than stored: a region may hold millions of keys. */
static void print_table(FILE *f, const struct column *cols, size_t ncols, const void *rows,
                        size_t size, size_t n)
{
    int width[MAX_COLUMNS];
    char cell[CELL_MAX];
    for (size_t c = 0; c < ncols; c++)
        width[c] = (int)strlen(cols[c].title);
    for (size_t r = 0; r < n; r++) {
        const void *row = (const char *)rows + r * size;
        for (size_t c = 0; c < ncols; c++) {
            cols[c].cell(row, cell, sizeof cell);
            int len = (int)strlen(cell);
            if (len > width[c])
                width[c] = len;
        }
    }
    fputs("  ", f);
    for (size_t c = 0; c < ncols; c++) {
        put_cell(f, cols[c].title, width[c], cols[c].right, c + 1 == ncols);
        fputs(c + 1 == ncols ? "\n" : "  ", f);
    }
    for (size_t r = 0; r < n; r++) {
        const void *row = (const char *)rows + r * size;
        fputs("  ", f);
        for (size_t c = 0; c < ncols; c++) {
            cols[c].cell(row, cell, sizeof cell);
            put_cell(f, cell, width[c], cols[c].right, c + 1 == ncols);
            fputs(c + 1 == ncols ? "\n" : "  ", f);
        }
    }
}

/* A cell printing one unsigned field. */
#define NUMBER_CELL(name, type, field)                                                    \
    static void name(const void *row, char *buf, size_t cap)                              \
    {                                                                                     \
        snprintf(buf, cap, "%" PRIu64, (uint64_t)((const type *)row)->field);             \
    }

NUMBER_CELL(client_index, fl_client_info, index)
NUMBER_CELL(client_id, fl_client_info, client_id)
NUMBER_CELL(client_pid, fl_client_info, pid)
NUMBER_CELL(client_uid, fl_client_info, uid)

static void client_state(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ((const fl_client_info *)row)->attached ? "attached" : "adopted");
}

static const struct column client_columns[] = {
    {"INDEX", true, client_index}, {"CLIENT-ID", true, client_id}, {"PID", true, client_pid},
    {"UID", true, client_uid},     {"STATE", false, client_state},
};

static void lock_key(const void *row, char *buf, size_t cap)
{
    escape_bytes(((const fl_lock_info *)row)->key, buf, cap);
}

static void lock_state(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", lock_state_name(((const fl_lock_info *)row)->state));
}

static void lock_pid(const void *row, char *buf, size_t cap)
{
    const fl_lock_info *l = row;
    if (l->state == FL_LOCK_FREE)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%" PRIu32, l->holder_pid);
}

static void lock_client(const void *row, char *buf, size_t cap)
{
    const fl_lock_info *l = row;
    if (l->state == FL_LOCK_FREE || l->holder_client == 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%" PRIu32, l->holder_client);
}

static void lock_left(const void *row, char *buf, size_t cap)
{
    const fl_lock_info *l = row;
    if (l->state == FL_LOCK_FREE)
        snprintf(buf, cap, "-");
    else if (l->state == FL_LOCK_EXPIRED || l->lease_left_ns <= 0)
        snprintf(buf, cap, "expired");
    else
        format_duration((uint64_t)l->lease_left_ns, buf, cap);
}

static void lock_last(const void *row, char *buf, size_t cap)
{
    const char *name = last_release_name(row);
    snprintf(buf, cap, "%s", name ? name : "-");
}

NUMBER_CELL(lock_token, fl_lock_info, token)
NUMBER_CELL(lock_waiters, fl_lock_info, waiters)
NUMBER_CELL(lock_acquisitions, fl_lock_info, acquisitions)
NUMBER_CELL(lock_contended, fl_lock_info, contended)
NUMBER_CELL(lock_takeovers, fl_lock_info, expiries_taken)
NUMBER_CELL(lock_deaths, fl_lock_info, deaths)
NUMBER_CELL(lock_renewals, fl_lock_info, renewals)

static const struct column lock_columns[] = {
    {"KEY", false, lock_key},
    {"STATE", false, lock_state},
    {"TOKEN", true, lock_token},
    {"PID", true, lock_pid},
    {"CLIENT", true, lock_client},
    {"LEFT", true, lock_left},
    {"WAITERS", true, lock_waiters},
    {"ACQUIRED", true, lock_acquisitions},
    {"CONTENDED", true, lock_contended},
    {"TAKEOVERS", true, lock_takeovers},
    {"DEATHS", true, lock_deaths},
    {"RENEWALS", true, lock_renewals},
    {"LAST", false, lock_last},
};

static void record_name(const void *row, char *buf, size_t cap)
{
    escape_bytes(((const fl_record_info *)row)->name, buf, cap);
}

static void record_key(const void *row, char *buf, size_t cap)
{
    const fl_record_info *rec = row;
    if (rec->bound_key[0])
        escape_bytes(rec->bound_key, buf, cap);
    else
        snprintf(buf, cap, "-");
}

static void record_rejected_token(const void *row, char *buf, size_t cap)
{
    const fl_record_info *rec = row;
    if (rec->rejections == 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%" PRIu64, rec->last_rejected_token);
}

static void record_rejected_pid(const void *row, char *buf, size_t cap)
{
    const fl_record_info *rec = row;
    if (rec->rejections == 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%" PRIu32, rec->last_rejected_pid);
}

NUMBER_CELL(record_token, fl_record_info, accepted_token)
NUMBER_CELL(record_version, fl_record_info, version)
NUMBER_CELL(record_size, fl_record_info, size)
NUMBER_CELL(record_commits, fl_record_info, commits)
NUMBER_CELL(record_rejections, fl_record_info, rejections)

static const struct column record_columns[] = {
    {"NAME", false, record_name},
    {"KEY", false, record_key},
    {"TOKEN", true, record_token},
    {"VERSION", true, record_version},
    {"SIZE", true, record_size},
    {"COMMITS", true, record_commits},
    {"REJECTED", true, record_rejections},
    {"REJ-TOKEN", true, record_rejected_token},
    {"REJ-PID", true, record_rejected_pid},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(N_OF(lock_columns) <= MAX_COLUMNS, "too many columns");
_Static_assert(N_OF(record_columns) <= MAX_COLUMNS, "too many columns");
_Static_assert(N_OF(client_columns) <= MAX_COLUMNS, "too many columns");

static void print_region(FILE *f, const struct snapshot *s)
{
    const fl_region_info *g = &s->region;
    char buf[128], when[64];
    fprintf(f, "Region %s\n", s->path);
    format_size(g->file_size, buf, sizeof buf);
    fprintf(f, "  Format:       version %" PRIu32 ", %s\n", g->format_version, buf);

    format_local_time(g->created_unix_ns, when, sizeof when);
    uint64_t now = wall_clock_ns();
    if (now >= g->created_unix_ns) {
        format_duration(now - g->created_unix_ns, buf, sizeof buf);
        fprintf(f, "  Created:      %s (%s ago)\n", when, buf);
    } else {
        fprintf(f, "  Created:      %s\n", when); /* the wall clock was set back */
    }

    fprintf(f, "  Boot:         %s (%s)\n", g->boot_id[0] ? g->boot_id : "unknown",
            g->same_boot ? "this boot"
                         : "an earlier boot: its leases are void until fencelockd adopts it");
    if (s->supervisor_alive)
        fprintf(f, "  Supervisor:   pid %" PRIu32 ", running\n", g->supervisor_pid);
    else if (g->run_state == 0)
        fprintf(f, "  Supervisor:   none has served this region\n");
    else
        fprintf(f,
                "  Supervisor:   not running (a dead holder's lock is freed only when its "
                "lease ends)\n");
    if (g->started_unix_ns) {
        format_local_time(g->started_unix_ns, when, sizeof when);
        fprintf(f, "  Last start:   %s\n", when);
    }
    if (g->clean_unix_ns) {
        format_local_time(g->clean_unix_ns, when, sizeof when);
        fprintf(f, "  Clean stop:   %s%s\n", when,
                g->run_state == 2 ? "" : " (the run since then has not stopped cleanly)");
    } else if (g->run_state != 0) {
        fprintf(f, "  Clean stop:   never\n");
    }
    fprintf(f,
            "  Tokens:       epoch %" PRIu64 ", floor %" PRIu64
            " (token = epoch << %d | counter)\n",
            g->epoch, g->token_floor, FL_TOKEN_EPOCH_SHIFT);
    fprintf(f, "  Locks:        %" PRIu32 " of %" PRIu32 " keys in use\n", g->locks_used,
            g->lock_capacity);
    fprintf(f, "  Records:      %" PRIu32 " of %" PRIu32 " in use, values up to %" PRIu32
               " bytes\n",
            g->records_used, g->record_capacity, g->record_size);
    fprintf(f, "  Buffers:      %" PRIu32 " commit buffers\n", g->buffer_count);
    fprintf(f, "  Clients:      %zu of %" PRIu32 " registered\n", s->n_clients,
            g->client_capacity);
}

static void print_section(FILE *f, const char *title, const struct column *cols, size_t ncols,
                          const void *rows, size_t size, size_t n)
{
    fprintf(f, "\n%s\n", title);
    if (n == 0)
        fputs("  (none)\n", f);
    else
        print_table(f, cols, ncols, rows, size, n);
}

static void print_text(FILE *f, const struct snapshot *s)
{
    print_region(f, s);
    print_section(f, "Clients", client_columns, N_OF(client_columns), s->clients,
                  sizeof *s->clients, s->n_clients);
    print_section(f, "Locks", lock_columns, N_OF(lock_columns), s->locks, sizeof *s->locks,
                  s->n_locks);
    print_section(f, "Records", record_columns, N_OF(record_columns), s->records,
                  sizeof *s->records, s->n_records);
}

/* ---- JSON for programs ----------------------------------------------------- */

/* Writes the members of one object, placing the commas. */
struct jobject {
    FILE *f;
    bool first;
};

static struct jobject j_begin(FILE *f)
{
    fputc('{', f);
    return (struct jobject){f, true};
}

static void j_key(struct jobject *j, const char *key)
{
    if (!j->first)
        fputs(", ", j->f);
    j->first = false;
    fl_json_string(j->f, key);
    fputs(": ", j->f);
}

static void j_u64(struct jobject *j, const char *key, uint64_t v)
{
    j_key(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

static void j_i64(struct jobject *j, const char *key, int64_t v)
{
    j_key(j, key);
    fprintf(j->f, "%" PRId64, v);
}

static void j_bool(struct jobject *j, const char *key, bool v)
{
    j_key(j, key);
    fputs(v ? "true" : "false", j->f);
}

/* A string member; NULL is written as null. */
static void j_str(struct jobject *j, const char *key, const char *v)
{
    j_key(j, key);
    if (v)
        fl_json_string(j->f, v);
    else
        fputs("null", j->f);
}

static void j_end(struct jobject *j) { fputc('}', j->f); }

static void json_region(FILE *f, const struct snapshot *s)
{
    const fl_region_info *g = &s->region;
    char created[64];
    format_utc_time(g->created_unix_ns, created, sizeof created);
    struct jobject j = j_begin(f);
    j_str(&j, "path", s->path);
    j_u64(&j, "format_version", g->format_version);
    j_u64(&j, "file_size", g->file_size);
    j_u64(&j, "lock_capacity", g->lock_capacity);
    j_u64(&j, "locks_used", g->locks_used);
    j_u64(&j, "record_capacity", g->record_capacity);
    j_u64(&j, "records_used", g->records_used);
    j_u64(&j, "record_size", g->record_size);
    j_u64(&j, "buffer_count", g->buffer_count);
    j_u64(&j, "client_capacity", g->client_capacity);
    j_u64(&j, "clients_used", s->n_clients);
    j_u64(&j, "token_floor", g->token_floor);
    j_u64(&j, "epoch", g->epoch);
    j_u64(&j, "token_epoch_shift", FL_TOKEN_EPOCH_SHIFT);
    j_u64(&j, "supervisor_pid", g->supervisor_pid);
    j_bool(&j, "supervisor_alive", s->supervisor_alive);
    j_str(&j, "last_run", g->run_state == 2   ? "clean_shutdown"
                          : g->run_state == 1 ? (s->supervisor_alive ? "running"
                                                                     : "unclean_shutdown")
                                              : "never_served");
    j_u64(&j, "started_unix_ns", g->started_unix_ns);
    j_u64(&j, "clean_unix_ns", g->clean_unix_ns);
    j_str(&j, "boot_id", g->boot_id);
    j_bool(&j, "same_boot", g->same_boot != 0);
    j_u64(&j, "created_unix_ns", g->created_unix_ns);
    j_str(&j, "created", created);
    j_end(&j);
}

static void json_client(FILE *f, const fl_client_info *c)
{
    struct jobject j = j_begin(f);
    j_u64(&j, "index", c->index);
    j_u64(&j, "client_id", c->client_id);
    j_u64(&j, "pid", c->pid);
    j_u64(&j, "uid", c->uid);
    j_str(&j, "state", c->attached ? "attached" : "adopted");
    j_end(&j);
}

static void json_lock(FILE *f, const fl_lock_info *l)
{
    struct jobject j = j_begin(f);
    j_str(&j, "key", l->key);
    j_str(&j, "state", lock_state_name(l->state));
    j_u64(&j, "token", l->token);
    j_u64(&j, "holder_pid", l->holder_pid);
    j_u64(&j, "holder_client", l->holder_client);
    j_u64(&j, "holder_client_id", l->holder_client_id);
    j_i64(&j, "lease_left_ns", l->lease_left_ns);
    j_u64(&j, "waiters", l->waiters);
    j_u64(&j, "acquisitions", l->acquisitions);
    j_u64(&j, "contended", l->contended);
    j_u64(&j, "expiries_taken", l->expiries_taken);
    j_u64(&j, "deaths", l->deaths);
    j_u64(&j, "renewals", l->renewals);
    j_u64(&j, "renew_failed", l->renew_failed);
    j_u64(&j, "releases", l->releases);
    j_str(&j, "last_release", last_release_name(l));
    j_end(&j);
}

static void json_record(FILE *f, const fl_record_info *r)
{
    struct jobject j = j_begin(f);
    j_str(&j, "name", r->name);
    j_str(&j, "bound_key", r->bound_key[0] ? r->bound_key : NULL);
    j_u64(&j, "accepted_token", r->accepted_token);
    j_u64(&j, "version", r->version);
    j_u64(&j, "size", r->size);
    j_u64(&j, "commits", r->commits);
    j_u64(&j, "rejections", r->rejections);
    j_u64(&j, "last_rejected_token", r->last_rejected_token);
    j_u64(&j, "last_rejected_pid", r->last_rejected_pid);
    j_end(&j);
}

typedef void json_item_fn(FILE *f, const void *item);

static void json_client_item(FILE *f, const void *item) { json_client(f, item); }
static void json_lock_item(FILE *f, const void *item) { json_lock(f, item); }
static void json_record_item(FILE *f, const void *item) { json_record(f, item); }

/* An array member, one element per line so that line tools work too. */
static void json_array(FILE *f, const char *key, const void *items, size_t size, size_t n,
                       json_item_fn *write, bool last)
{
    fputs("  ", f);
    fl_json_string(f, key);
    fputs(": [", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        write(f, (const char *)items + i * size);
    }
    fputs(n ? "\n  ]" : "]", f);
    fputs(last ? "\n" : ",\n", f);
}

static void print_json(FILE *f, const struct snapshot *s)
{
    fputs("{\n  \"time\": ", f);
    fl_json_now(f);
    fputs(",\n  \"region\": ", f);
    json_region(f, s);
    fputs(",\n", f);
    json_array(f, "clients", s->clients, sizeof *s->clients, s->n_clients, json_client_item,
               false);
    json_array(f, "locks", s->locks, sizeof *s->locks, s->n_locks, json_lock_item, false);
    json_array(f, "records", s->records, sizeof *s->records, s->n_records, json_record_item,
               true);
    fputs("}\n", f);
}

/* ---- the command ----------------------------------------------------------- */

struct status_options {
    const char *region; /* NULL: the default */
    bool json;
};

__attribute__((format(printf, 1, 2))) static int status_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fencelock status: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'fencelock status --help'.\n", stderr);
    return CLI_EXIT_USAGE;
}

enum { OPT_JSON = 256 }; /* long-only options: outside the range of short ones */

/* Name what getopt_long rejected.  optopt is 0 for an unknown long option
 * (always the whole word argv[optind - 1]), the option's value for a long
 * option given an argument it does not take, and the character for an
 * unknown short option, which may sit inside a cluster like "-xj" that
 * optind has not moved past.  A short no-argument option (-h) cannot be
 * rejected, so a match on a no-argument option means its long form. */
static int unknown_option(char **argv, const struct option *longopts)
{
    if (optopt == 0)
        return status_usage_error("unknown option '%s'", argv[optind - 1]);
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == optopt && o->has_arg == no_argument)
            return status_usage_error("option '--%s' takes no argument", o->name);
    return status_usage_error("unknown option '-%c'", optopt);
}

/* Returns -1 to go on, else the exit status (help shown, or bad usage). */
static int parse_status_args(int argc, char **argv, struct status_options *o)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our messages name the subcommand and give the hint */
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (!optarg[0])
                return status_usage_error("--region: the path is empty");
            o->region = optarg;
            break;
        case OPT_JSON: o->json = true; break;
        case 'h':
            fputs(status_usage, stdout);
            return cli_finish_stdout();
        case ':':
            /* The option is what ends the word it came in: "-r" or "--region". */
            return status_usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
            return unknown_option(argv, longopts);
        }
    }
    if (optind < argc)
        return status_usage_error("unexpected argument '%s'", argv[optind]);
    return -1;
}

int status_main(int argc, char **argv)
{
    struct status_options o = {0};
    int rc = parse_status_args(argc, argv, &o);
    if (rc >= 0)
        return rc;

    char path[4096];
    if (o.region) {
        if (strlen(o.region) >= sizeof path) {
            fprintf(stderr, "fencelock: region path too long (%zu bytes)\n", strlen(o.region));
            return CLI_EXIT_REGION;
        }
        snprintf(path, sizeof path, "%s", o.region);
    } else {
        /* Resolved here, not inside fl_open_readonly, because it is shown. */
        int err = fl_default_region_path(path, sizeof path);
        if (err) {
            fprintf(stderr, "fencelock: %s\n", library_error(err));
            return CLI_EXIT_REGION;
        }
    }

    struct snapshot s;
    memset(&s, 0, sizeof s);
    rc = take_snapshot(path, &s);
    if (rc == CLI_EXIT_OK) {
        if (o.json)
            print_json(stdout, &s);
        else
            print_text(stdout, &s);
        rc = cli_finish_stdout();
    }
    free_snapshot(&s);
    return rc;
}
