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
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "duration.h"
#include "fencelock.h"
#include "guard.h"
#include "json.h"
#include "status_unreg.h"

const char status_usage[] =
    "Usage: fencelock status [-r PATH] [--prefix PREFIX] [--json]\n"
    "       fencelock status [-r PATH] [--json] KEY\n"
    "       fencelock status [-r PATH] [--prefix PREFIX] [--json] --watch [INTERVAL]\n"
    "                        [--count N]\n"
    "\n"
    "Show a fencelock region as it is now: its parameters and supervisor, the\n"
    "client processes registered with the supervisor, every lock key and every\n"
    "fenced record.  With KEY, show that one key and the records it fences in\n"
    "detail.  With --watch, show a view refreshed every INTERVAL, with rates\n"
    "per second, most active keys first (like top).\n"
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
    "                     /run/fencelock/region for root, else\n"
    "                     $XDG_RUNTIME_DIR/fencelock/region, else\n"
    "                     /dev/shm/fencelock-UID/region)\n"
    "      --json         print one JSON document instead of tables (with\n"
    "                     --watch: one document per refresh)\n"
    "      --prefix PREFIX\n"
    "                     show only the keys that start with PREFIX and the\n"
    "                     records whose name or key starts with PREFIX (bytes,\n"
    "                     compared exactly)\n"
    "      --watch [INTERVAL]\n"
    "                     refresh every INTERVAL (500ms, 2s, 1.5s, 1m; a bare\n"
    "                     number is seconds; 50ms to 1h) [2s]\n"
    "      --count N      with --watch: stop after N refreshes\n"
    "  -h, --help         show this help and exit\n"
    "\n"
    "Clients table:\n"
    "  INDEX      client table index (what the locks table shows as CLIENT)\n"
    "  CLIENT-ID  client id, unique for the life of the region\n"
    "  PID, UID   the client process\n"
    "  STATE      attached (connected to the running supervisor) or adopted\n"
    "             (registered before a supervisor restart, watched by pid)\n"
    "\n"
    "Unregistered clients (shown only when there are any; JSON: \"unregistered\"):\n"
    "  processes still running that opened the region but could not register\n"
    "  with a supervisor (none running, or its socket refused them: mode, group),\n"
    "  so their locks outlive them until the leases end: PID, UID, when they\n"
    "  opened, and the REASON; the region keeps the latest 32\n"
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
    "Slots in use that a table does not list are counted under it, one line per\n"
    "reason (\"3 of 40 lock slots not listed: no published key (...)\"): a slot\n"
    "with no published key or name (abandoned by a creator that lost a race, or\n"
    "corrupt), or with corrupt shared data.  The counts are for the whole region,\n"
    "also with --prefix.\n"
    "\n"
    "The region block also counts the events dropped from the supervisor's\n"
    "log (its event ring was full, or a client stopped while posting): the\n"
    "counters stay exact, only log lines are missing.\n"
    "\n"
    "One key (status KEY): every field of the key (state, token with its epoch\n"
    "and counter, holder, lease left, waiters, acquisitions, contended,\n"
    "takeovers, deaths, renewals and releases with those refused as stale, the\n"
    "last stale renewal or release: its operation, token and pid) and every\n"
    "record the key fences (accepted token, version, size, commits,\n"
    "rejections, repeats, and the last rejection: operation, token, pid and\n"
    "the token the record had accepted then).  A key that does not exist is an\n"
    "error, exit status 4.  Give KEY as its bytes (no escapes).\n"
    "\n"
    "Watch view (--watch): a header with the time, the supervisor, the epoch,\n"
    "the table fill and the dropped events, the region-wide rates, a line \"not\n"
    "listed: ...\" when slots in use are not listed (as below the tables), then\n"
    "the keys and the records, most active first (ties by name).  Rates are per\n"
    "second over the last refresh, - on the first.  On a terminal the view\n"
    "uses the alternate screen and is cut to the window; q or Ctrl-C quits\n"
    "(exit status 0), SIGINT, SIGTERM and SIGHUP restore the terminal and end\n"
    "it by that signal.  When standard output is not a terminal each refresh\n"
    "prints the whole view after a blank line, and a closed pipe ends it with\n"
    "status 0 (fencelock status --watch 1s | head works).\n"
    "  Keys:     KEY, STATE, ACQ/S (acquisitions), COMMIT/S (commits accepted\n"
    "            on the key's records), REJ/S (fencing rejections: commits\n"
    "            refused on the key's records plus renewals and releases\n"
    "            refused as stale), TAKEOVER/S (expired leases taken over),\n"
    "            WAITERS, LEFT, PID, TOKEN, and the totals ACQUIRED, COMMITS,\n"
    "            REJECTED (the same sum as REJ/S), REPEATS, TAKEOVERS\n"
    "  Records:  NAME, KEY, COMMIT/S, REJ/S, REPEAT/S, TOKEN, COMMITS,\n"
    "            REJECTED, REPEATS (rejections of a token the record had just\n"
    "            rejected: a client retrying instead of acquiring again)\n"
    "  Activity: ACQ/S + COMMIT/S + REJ/S for keys, COMMIT/S + REJ/S for\n"
    "            records.\n"
    "\n"
    "JSON output: one object with \"time\" (when the view was taken), \"region\"\n"
    "(an object) and the arrays \"clients\", \"locks\" and \"records\", one element\n"
    "per line.  Members are named after the fields of fencelock.h's\n"
    "fl_region_info, fl_client_info, fl_lock_info and fl_record_info; numbers\n"
    "are JSON numbers.  In addition the region has path, clients_used,\n"
    "supervisor_alive and created.  Times are RFC 3339 in UTC.  Every state and\n"
    "last_release is the word the tables show, null for -; bound_key is null if\n"
    "unbound; last_stale_op is \"renew\", \"release\" or null and last_rejected_op\n"
    "\"commit\", \"strict_commit\" or null.  lease_left_ns is in nanoseconds,\n"
    "negative once expired, 0 when free.  Keys and names are strings in which\n"
    "each byte outside printable ASCII is a \\u00NN escape: decoded as Latin-1\n"
    "they give the bytes back.  A lock's holder_pid, holder_client and\n"
    "holder_client_id name its latest holder, also after a release.  With KEY\n"
    "the document has \"time\", \"region\", \"lock\" (one object) and \"records\"\n"
    "(those the key fences).  The document of the whole region ends with\n"
    "\"skipped\": the slots in use not listed, {\"locks\": N, \"records\": N,\n"
    "\"reasons\": {\"locks\": {\"no_published_key\": N, \"corrupt\": N}, \"records\":\n"
    "{...}}}, every reason present, 0 when none.\n"
    "\n" CLI_ENVIRONMENT_TEXT "\n" CLI_EXIT_STATUS_TEXT
    "  4  status KEY: the region has no such key\n"
    "\n"
    "Examples:\n"
    "  fencelock status\n"
    "  FENCELOCK_REGION=/run/myapp/locks fencelock status\n"
    "  fencelock status orders/42\n"
    "  fencelock status --watch 1s --prefix orders/\n"
    "  fencelock status --json | jq -r '.locks[] | select(.waiters > 0) | .key'\n";

/* ---- the view -------------------------------------------------------------- */

/*
 * Why a slot in use is not listed: the error fl_lock_info_get() or
 * fl_record_info_get() gave for it.  The counts are region-wide (a slot with
 * no key cannot be matched against --prefix or KEY).
 */
enum skip_reason {
    SKIP_NO_KEY,  /* -ENOENT: no published key (or name) */
    SKIP_CORRUPT, /* -EPROTO: the slot's shared data is corrupt (the library's error for
                     corrupt shared data; the info calls do not return it today, and a
                     corrupt slot is better counted than the whole view refused) */
    SKIP_REASONS
};

static const struct {
    const char *name;   /* the JSON member */
    const char *brief_lock, *brief_record; /* what the watch view's header says */
    const char *lock;   /* what the tables say for lock slots */
    const char *record; /* and for records */
} skip_reasons[SKIP_REASONS] = {
    [SKIP_NO_KEY] = {"no_published_key", "no published key", "no published name",
                     "no published key (abandoned by a creator that lost a race, or corrupt)",
                     "no published name (abandoned by a creator that lost a race, or "
                     "corrupt)"},
    [SKIP_CORRUPT] = {"corrupt", "corrupt", "corrupt", "corrupt shared data",
                      "corrupt shared data"},
};

struct skipped {
    uint32_t locks[SKIP_REASONS];
    uint32_t records[SKIP_REASONS];
};

/* The reason for err from an info call, or -1 if err is not a skip. */
static int skip_reason_of(int err)
{
    switch (err) {
    case -ENOENT: return SKIP_NO_KEY;
    case -EPROTO: return SKIP_CORRUPT;
    default: return -1;
    }
}

static uint32_t skipped_total(const uint32_t *by_reason)
{
    uint32_t n = 0;
    for (int i = 0; i < SKIP_REASONS; i++)
        n += by_reason[i];
    return n;
}

struct snapshot {
    char path[4096];
    fl_region_info region;
    bool supervisor_alive;
    fl_client_info *clients;
    size_t n_clients;
    fl_lock_info *locks;
    uint32_t *lock_slots; /* the slot index of each of locks[] (stable for the region's life) */
    size_t n_locks;
    fl_record_info *records;
    uint32_t *record_slots; /* the same for records[] */
    size_t n_records;
    struct skipped skipped; /* slots in use that are not listed, and why */
    struct unreg_list unreg; /* running clients that could not register */
};

static void free_snapshot(struct snapshot *s)
{
    free(s->clients);
    free(s->locks);
    free(s->lock_slots);
    free(s->records);
    free(s->record_slots);
    s->clients = NULL;
    s->locks = NULL;
    s->lock_slots = NULL;
    s->records = NULL;
    s->record_slots = NULL;
    s->n_clients = s->n_locks = s->n_records = 0;
    memset(&s->skipped, 0, sizeof s->skipped);
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
    s->lock_slots = used ? calloc(used, sizeof *s->lock_slots) : NULL;
    if (used && (!s->locks || !s->lock_slots))
        return out_of_memory("reading the lock table");
    for (uint32_t i = 0; i < used; i++) {
        int err = fl_lock_info_get(r, i, &s->locks[s->n_locks]);
        int why = skip_reason_of(err); /* a slot abandoned in a creation race holds no key */
        if (err == 0)
            s->lock_slots[s->n_locks++] = i;
        else if (why >= 0)
            s->skipped.locks[why]++;
        else
            return fail_runtime("reading the lock table", err);
    }
    return CLI_EXIT_OK;
}

static int read_records(fl_region *r, struct snapshot *s)
{
    uint32_t used = s->region.records_used;
    /* calloc(0, ...) may return NULL: only ask for something. */
    s->records = used ? calloc(used, sizeof *s->records) : NULL;
    s->record_slots = used ? calloc(used, sizeof *s->record_slots) : NULL;
    if (used && (!s->records || !s->record_slots))
        return out_of_memory("reading the record table");
    for (uint32_t i = 0; i < used; i++) {
        int err = fl_record_info_get(r, i, &s->records[s->n_records]);
        int why = skip_reason_of(err);
        if (err == 0)
            s->record_slots[s->n_records++] = i;
        else if (why >= 0)
            s->skipped.records[why]++;
        else
            return fail_runtime("reading the record table", err);
    }
    return CLI_EXIT_OK;
}

/* Open the region at path read-only: CLI_EXIT_OK or the exit status, the
 * problem said on stderr. */
static int open_region(const char *path, fl_region **r)
{
    int err = fl_open_readonly(path, r);
    if (err) {
        fprintf(stderr, "fencelock: %s\n", library_error(err));
        return err == -ENOMEM || err == -EMFILE || err == -ENFILE ? CLI_EXIT_RUNTIME
                                                                   : CLI_EXIT_REGION;
    }
    return CLI_EXIT_OK;
}

/* Copy out everything shown from an open region (s is empty or freed). */
static int read_snapshot(fl_region *r, const char *path, struct snapshot *s)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    int rc = CLI_EXIT_OK;
    int err = fl_region_info_get(r, &s->region);
    if (err)
        rc = fail_runtime("reading the region header", err);
    if (rc == CLI_EXIT_OK)
        rc = read_clients(r, s);
    if (rc == CLI_EXIT_OK)
        rc = read_locks(r, s);
    if (rc == CLI_EXIT_OK)
        rc = read_records(r, s);
    if (rc == CLI_EXIT_OK)
        unreg_read(r, &s->unreg);
    /* The library asks the supervisor's flock, which a reused pid cannot fake. */
    s->supervisor_alive = s->region.served != 0;
    return rc;
}

/* open_region() and read_snapshot() with the region's pages guarded
 * (guard.h): a SIGBUS from a file truncated under us sets *truncated and
 * returns CLI_EXIT_REGION, the message left to the caller (a terminal may
 * have to leave the alternate screen first).  After a truncation in
 * guarded_read, the handle may only be closed (fl_close touches no page of
 * the mapping); after one in guarded_open there is no handle. */
static int guarded_open(const char *path, fl_region **r, bool *truncated)
{
    if (sigsetjmp(cli_bus_env, 1) != 0) {
        *truncated = true;
        return CLI_EXIT_REGION;
    }
    cli_bus_arm();
    int rc = open_region(path, r);
    cli_bus_disarm();
    return rc;
}

static int guarded_read(fl_region *r, const char *path, struct snapshot *s, bool *truncated)
{
    if (sigsetjmp(cli_bus_env, 1) != 0) {
        *truncated = true;
        return CLI_EXIT_REGION;
    }
    cli_bus_arm();
    int rc = read_snapshot(r, path, s);
    cli_bus_disarm();
    return rc;
}

/* Open the region at path read-only and copy out everything shown. */
static int take_snapshot(const char *path, struct snapshot *s)
{
    fl_region *r;
    bool truncated = false;
    int rc = guarded_open(path, &r, &truncated);
    if (rc == CLI_EXIT_OK) {
        rc = guarded_read(r, path, s, &truncated);
        fl_close(r);
    }
    if (truncated)
        return cli_region_truncated(path);
    return rc;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Keep the keys that start with prefix and the records whose name or bound
 * key does (NULL keeps everything). */
static void filter_prefix(struct snapshot *s, const char *prefix)
{
    if (!prefix)
        return;
    size_t n = 0;
    for (size_t i = 0; i < s->n_locks; i++)
        if (has_prefix(s->locks[i].key, prefix)) {
            s->locks[n] = s->locks[i];
            s->lock_slots[n++] = s->lock_slots[i];
        }
    s->n_locks = n;
    n = 0;
    for (size_t i = 0; i < s->n_records; i++)
        if (has_prefix(s->records[i].name, prefix) ||
            (s->records[i].bound_key[0] && has_prefix(s->records[i].bound_key, prefix))) {
            s->records[n] = s->records[i];
            s->record_slots[n++] = s->record_slots[i];
        }
    s->n_records = n;
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

/* The operation named by the inspection structures, or NULL for none. */
static const char *op_name(uint32_t op)
{
    switch (op) {
    case FL_OP_COMMIT: return "commit";
    case FL_OP_STRICT_COMMIT: return "strict_commit";
    case FL_OP_RENEW: return "renew";
    case FL_OP_RELEASE: return "release";
    default: return NULL;
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
    fprintf(f, "  Ready:        %s\n",
            g->ready ? "yes (this boot's token epoch is durable: clients may open it)"
                     : "no: fl_open refuses clients until a fencelockd makes this boot's epoch "
                       "durable (starting, failed to start, or an earlier boot's region)");
    fprintf(f,
            "  Tokens:       epoch %" PRIu64 ", floor %" PRIu64
            " (token = epoch << %d | counter)\n",
            g->epoch, g->token_floor, FL_TOKEN_EPOCH_SHIFT);
    fprintf(f, "  Locks:        %" PRIu32 " of %" PRIu32 " keys in use\n", g->locks_used,
            g->lock_capacity);
    fprintf(f, "  Records:      %" PRIu32 " of %" PRIu32 " in use, values up to %" PRIu32
               " bytes\n",
            g->records_used, g->record_capacity, g->record_size);
    if (g->records_unvouched)
        fprintf(f,
                "  Unvouched:    %" PRIu32 " records whose value fencelockd could not vouch "
                "for at its start (read as EBADMSG until committed again; its log names them)\n",
                g->records_unvouched);
    fprintf(f, "  Buffers:      %" PRIu32 " commit buffers\n", g->buffer_count);
    fprintf(f, "  Clients:      %zu of %" PRIu32 " registered\n", s->n_clients,
            g->client_capacity);
    fprintf(f, "  Log events:   %" PRIu64 " dropped (counters stay exact)\n", g->events_dropped);
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

/* One line per reason for the slots in use that a table does not list:
 * "285 of 301 lock slots not listed: no published key (...)". */
static void print_skipped(FILE *f, const char *indent, const uint32_t *by_reason, uint32_t used,
                          bool locks)
{
    for (int i = 0; i < SKIP_REASONS; i++)
        if (by_reason[i])
            fprintf(f, "%s%" PRIu32 " of %" PRIu32 " %s not listed: %s\n", indent, by_reason[i],
                    used, locks ? "lock slots" : "record slots",
                    locks ? skip_reasons[i].lock : skip_reasons[i].record);
}

static void print_text(FILE *f, const struct snapshot *s)
{
    print_region(f, s);
    print_section(f, "Clients", client_columns, N_OF(client_columns), s->clients,
                  sizeof *s->clients, s->n_clients);
    unreg_print_text(f, &s->unreg);
    print_section(f, "Locks", lock_columns, N_OF(lock_columns), s->locks, sizeof *s->locks,
                  s->n_locks);
    print_skipped(f, "  ", s->skipped.locks, s->region.locks_used, true);
    print_section(f, "Records", record_columns, N_OF(record_columns), s->records,
                  sizeof *s->records, s->n_records);
    print_skipped(f, "  ", s->skipped.records, s->region.records_used, false);
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
    j_bool(&j, "ready", g->ready != 0);
    j_u64(&j, "records_unvouched", g->records_unvouched);
    j_u64(&j, "created_unix_ns", g->created_unix_ns);
    j_str(&j, "created", created);
    j_u64(&j, "events_dropped", g->events_dropped);
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
    j_u64(&j, "release_failed", l->release_failed);
    j_u64(&j, "busy", l->busy);
    j_u64(&j, "timeouts", l->timeouts);
    j_str(&j, "last_release", last_release_name(l));
    j_u64(&j, "last_stale_token", l->last_stale_token);
    j_u64(&j, "last_stale_pid", l->last_stale_pid);
    j_str(&j, "last_stale_op", op_name(l->last_stale_op));
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
    j_u64(&j, "last_rejected_accepted", r->last_rejected_accepted);
    j_str(&j, "last_rejected_op", op_name(r->last_rejected_op));
    j_u64(&j, "repeats", r->repeats);
    j_bool(&j, "unvouched", r->unvouched != 0);
    j_end(&j);
}

/* {"no_published_key": 285, "corrupt": 0}: every reason, also when 0. */
static void json_reasons(FILE *f, const uint32_t *by_reason)
{
    struct jobject j = j_begin(f);
    for (int i = 0; i < SKIP_REASONS; i++)
        j_u64(&j, skip_reasons[i].name, by_reason[i]);
    j_end(&j);
}

/* The slots in use that "locks" and "records" do not list, and why. */
static void json_skipped(FILE *f, const struct skipped *k)
{
    struct jobject j = j_begin(f);
    j_u64(&j, "locks", skipped_total(k->locks));
    j_u64(&j, "records", skipped_total(k->records));
    j_key(&j, "reasons");
    struct jobject r = j_begin(f);
    j_key(&r, "locks");
    json_reasons(f, k->locks);
    j_key(&r, "records");
    json_reasons(f, k->records);
    j_end(&r);
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
    unreg_print_json(f, &s->unreg);
    json_array(f, "locks", s->locks, sizeof *s->locks, s->n_locks, json_lock_item, false);
    json_array(f, "records", s->records, sizeof *s->records, s->n_records, json_record_item,
               false);
    fputs("  \"skipped\": ", f);
    json_skipped(f, &s->skipped);
    fputs("\n}\n", f);
}

/* ---- one key in detail (status KEY) ---------------------------------------- */

/* The lock whose key is key, or NULL. */
static const fl_lock_info *find_lock(const struct snapshot *s, const char *key)
{
    for (size_t i = 0; i < s->n_locks; i++)
        if (strcmp(s->locks[i].key, key) == 0)
            return &s->locks[i];
    return NULL;
}

/* Keep only the records fenced by key. */
static void keep_records_of(struct snapshot *s, const char *key)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_records; i++)
        if (strcmp(s->records[i].bound_key, key) == 0) {
            s->records[n] = s->records[i];
            s->record_slots[n++] = s->record_slots[i];
        }
    s->n_records = n;
}

#define FIELD "%-18s"

static void print_key_detail(FILE *f, const struct snapshot *s, const fl_lock_info *l)
{
    char buf[CELL_MAX];
    escape_bytes(l->key, buf, sizeof buf);
    fprintf(f, "Key %s\n", buf);
    fprintf(f, "  " FIELD "%s\n", "Region:", s->path);
    fprintf(f, "  " FIELD "%s\n", "State:", lock_state_name(l->state));
    if (l->token)
        fprintf(f, "  " FIELD "%" PRIu64 " (epoch %" PRIu64 ", counter %" PRIu64 ")\n",
                "Token:", l->token, (uint64_t)FL_TOKEN_EPOCH(l->token),
                (uint64_t)FL_TOKEN_COUNTER(l->token));
    else
        fprintf(f, "  " FIELD "0 (never acquired)\n", "Token:");
    if (l->token == 0)
        fprintf(f, "  " FIELD "-\n", "Holder:");
    else if (l->state == FL_LOCK_FREE)
        fprintf(f, "  " FIELD "- (the last holder was pid %" PRIu32 ")\n", "Holder:",
                l->holder_pid);
    else if (l->holder_client)
        fprintf(f, "  " FIELD "pid %" PRIu32 ", client %" PRIu32 " (client id %" PRIu64 ")\n",
                "Holder:", l->holder_pid, l->holder_client, l->holder_client_id);
    else
        fprintf(f,
                "  " FIELD "pid %" PRIu32 ", not registered (its death is noticed only when "
                "its lease ends)\n",
                "Holder:", l->holder_pid);
    lock_left(l, buf, sizeof buf);
    fprintf(f, "  " FIELD "%s\n", "Lease left:", buf);
    fprintf(f, "  " FIELD "%" PRIu32 "\n", "Waiters:", l->waiters);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Acquisitions:", l->acquisitions);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Contended:", l->contended);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Takeovers:", l->expiries_taken);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Deaths:", l->deaths);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Renewals:", l->renewals);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Renewals refused:", l->renew_failed);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Releases:", l->releases);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Releases refused:", l->release_failed);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Busy tries:", l->busy);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Timed out:", l->timeouts);
    const char *op = op_name(l->last_stale_op);
    if (op)
        fprintf(f, "  " FIELD "%s of token %" PRIu64 " by pid %" PRIu32 "\n", "Last stale:", op,
                l->last_stale_token, l->last_stale_pid);
    else
        fprintf(f, "  " FIELD "none\n", "Last stale:");
    lock_last(l, buf, sizeof buf);
    fprintf(f, "  " FIELD "%s\n", "Last release:", buf);

    escape_bytes(l->key, buf, sizeof buf);
    fprintf(f, "\nRecords fenced by %s\n", buf);
    if (s->n_records == 0)
        fputs("  (none)\n", f);
    for (size_t i = 0; i < s->n_records; i++) {
        const fl_record_info *c = &s->records[i];
        escape_bytes(c->name, buf, sizeof buf);
        fprintf(f, "%s  Record %s\n", i ? "\n" : "", buf);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Accepted token:", c->accepted_token);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Version:", c->version);
        fprintf(f, "    " FIELD "%" PRIu32 " bytes\n", "Size:", c->size);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Commits:", c->commits);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Rejections:", c->rejections);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Repeats:", c->repeats);
        op = op_name(c->last_rejected_op);
        if (c->rejections && op)
            fprintf(f,
                    "    " FIELD "%s of token %" PRIu64 " by pid %" PRIu32
                    " (the record had accepted %" PRIu64 ")\n",
                    "Last rejection:", op, c->last_rejected_token, c->last_rejected_pid,
                    c->last_rejected_accepted);
        else
            fprintf(f, "    " FIELD "none\n", "Last rejection:");
    }
}

static void print_key_json(FILE *f, const struct snapshot *s, const fl_lock_info *l)
{
    fputs("{\n  \"time\": ", f);
    fl_json_now(f);
    fputs(",\n  \"region\": ", f);
    json_region(f, s);
    fputs(",\n  \"lock\": ", f);
    json_lock(f, l);
    fputs(",\n", f);
    json_array(f, "records", s->records, sizeof *s->records, s->n_records, json_record_item,
               true);
    fputs("}\n", f);
}

/* ---- the watch view (--watch) ---------------------------------------------- */

/* Longest key or name shown on a terminal; longer ones end in "...". */
#define WATCH_NAME_MAX 48

struct key_row {
    const fl_lock_info *l;
    char key[ESCAPED_MAX]; /* as shown */
    uint64_t commits;      /* over the records the key fences */
    uint64_t rejected;     /* their rejections, plus renewals and releases refused */
    uint64_t repeats;
    bool have_rate;
    double acq, commit, rej, take; /* per second */
};

struct record_row {
    const fl_record_info *c;
    char name[ESCAPED_MAX], key[ESCAPED_MAX];
    bool have_rate;
    double commit, rej, rep;
};

/* Counters of the previous refresh, by slot, to take rates from. */
struct key_count {
    bool seen;
    uint64_t acq, commits, rejected, take;
};
struct record_count {
    bool seen;
    uint64_t commits, rejected, repeats;
};

struct watch {
    const char *path;
    const char *prefix;
    uint64_t interval_ns;
    bool tty;
    struct snapshot s;
    struct key_row *keys;
    struct record_row *recs;
    struct key_count *prev_keys;
    size_t n_prev_keys;
    struct record_count *prev_recs;
    size_t n_prev_recs;
    bool have_prev;
    uint64_t prev_ns;
    uint64_t unix_ns; /* when the current view was taken */
    bool have_total;
    double acq, commit, rej, take; /* per second over the keys shown */
};

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A key or name as the watch view shows it: escaped, cut on a terminal. */
static void watch_name(const char *s, char *out, size_t cap, bool cut)
{
    escape_bytes(s, out, cap);
    if (cut && strlen(out) > WATCH_NAME_MAX)
        snprintf(out + WATCH_NAME_MAX - 3, cap - (WATCH_NAME_MAX - 3), "...");
}

static double per_second(uint64_t now, uint64_t before, double seconds)
{
    return now >= before ? (double)(now - before) / seconds : 0;
}

static int by_activity_key(const void *a, const void *b)
{
    const struct key_row *x = a, *y = b;
    double ax = x->acq + x->commit + x->rej, ay = y->acq + y->commit + y->rej;
    if (ax != ay)
        return ax > ay ? -1 : 1;
    return strcmp(x->l->key, y->l->key);
}

static int by_activity_record(const void *a, const void *b)
{
    const struct record_row *x = a, *y = b;
    double ax = x->commit + x->rej, ay = y->commit + y->rej;
    if (ax != ay)
        return ax > ay ? -1 : 1;
    return strcmp(x->c->name, y->c->name);
}

static int by_key_name(const void *a, const void *b)
{
    const struct key_row *const *x = a, *const *y = b;
    return strcmp((*x)->l->key, (*y)->l->key);
}

static int find_key_name(const void *key, const void *elem)
{
    const struct key_row *const *row = elem;
    return strcmp(key, (*row)->l->key);
}

/* Add each record's counters to the row of the key that fences it. */
static int add_record_counts(struct watch *w)
{
    struct snapshot *s = &w->s;
    if (s->n_locks == 0)
        return CLI_EXIT_OK;
    struct key_row **by_name = calloc(s->n_locks, sizeof *by_name);
    if (!by_name)
        return out_of_memory("--watch");
    for (size_t i = 0; i < s->n_locks; i++)
        by_name[i] = &w->keys[i];
    qsort(by_name, s->n_locks, sizeof *by_name, by_key_name);
    for (size_t i = 0; i < s->n_records; i++) {
        const fl_record_info *c = &s->records[i];
        if (!c->bound_key[0])
            continue;
        struct key_row **row =
            bsearch(c->bound_key, by_name, s->n_locks, sizeof *by_name, find_key_name);
        if (row) {
            (*row)->commits += c->commits;
            (*row)->rejected += c->rejections;
            (*row)->repeats += c->repeats;
        }
    }
    free(by_name);
    return CLI_EXIT_OK;
}

/* Read the region again and work out the rows, their rates and order.  A
 * region truncated under us sets *truncated (see guarded_read). */
static int watch_refresh(struct watch *w, fl_region *r, bool *truncated)
{
    struct snapshot *s = &w->s;
    free_snapshot(s);
    int rc = guarded_read(r, w->path, s, truncated);
    if (rc != CLI_EXIT_OK)
        return rc;
    uint64_t now = monotonic_ns();
    w->unix_ns = wall_clock_ns();
    filter_prefix(s, w->prefix);

    free(w->keys);
    free(w->recs);
    w->keys = calloc(s->n_locks + 1, sizeof *w->keys);
    w->recs = calloc(s->n_records + 1, sizeof *w->recs);
    struct key_count *kc = calloc((size_t)s->region.locks_used + 1, sizeof *kc);
    struct record_count *rcnt = calloc((size_t)s->region.records_used + 1, sizeof *rcnt);
    if (!w->keys || !w->recs || !kc || !rcnt) {
        free(kc);
        free(rcnt);
        return out_of_memory("--watch");
    }
    for (size_t i = 0; i < s->n_locks; i++) {
        struct key_row *k = &w->keys[i];
        k->l = &s->locks[i];
        k->rejected = k->l->renew_failed + k->l->release_failed;
        watch_name(k->l->key, k->key, sizeof k->key, w->tty);
    }
    rc = add_record_counts(w);
    if (rc != CLI_EXIT_OK) {
        free(kc);
        free(rcnt);
        return rc;
    }
    double dt = w->have_prev && now > w->prev_ns ? (double)(now - w->prev_ns) / 1e9 : 0;
    w->have_total = dt > 0;
    w->acq = w->commit = w->rej = w->take = 0;
    for (size_t i = 0; i < s->n_locks; i++) {
        struct key_row *k = &w->keys[i];
        uint32_t slot = s->lock_slots[i];
        struct key_count cur = {true, k->l->acquisitions, k->commits, k->rejected,
                                k->l->expiries_taken};
        if (slot < s->region.locks_used)
            kc[slot] = cur;
        if (dt > 0) {
            /* A key created since the last refresh: all its counts are new. */
            struct key_count before = {0};
            if (slot < w->n_prev_keys && w->prev_keys[slot].seen)
                before = w->prev_keys[slot];
            k->have_rate = true;
            k->acq = per_second(cur.acq, before.acq, dt);
            k->commit = per_second(cur.commits, before.commits, dt);
            k->rej = per_second(cur.rejected, before.rejected, dt);
            k->take = per_second(cur.take, before.take, dt);
            w->acq += k->acq;
            w->commit += k->commit;
            w->rej += k->rej;
            w->take += k->take;
        }
    }
    for (size_t i = 0; i < s->n_records; i++) {
        struct record_row *c = &w->recs[i];
        c->c = &s->records[i];
        watch_name(c->c->name, c->name, sizeof c->name, w->tty);
        if (c->c->bound_key[0])
            watch_name(c->c->bound_key, c->key, sizeof c->key, w->tty);
        else
            snprintf(c->key, sizeof c->key, "-");
        uint32_t slot = s->record_slots[i];
        struct record_count cur = {true, c->c->commits, c->c->rejections, c->c->repeats};
        if (slot < s->region.records_used)
            rcnt[slot] = cur;
        if (dt > 0) {
            struct record_count before = {0};
            if (slot < w->n_prev_recs && w->prev_recs[slot].seen)
                before = w->prev_recs[slot];
            c->have_rate = true;
            c->commit = per_second(cur.commits, before.commits, dt);
            c->rej = per_second(cur.rejected, before.rejected, dt);
            c->rep = per_second(cur.repeats, before.repeats, dt);
        }
    }
    free(w->prev_keys);
    free(w->prev_recs);
    w->prev_keys = kc;
    w->n_prev_keys = s->region.locks_used;
    w->prev_recs = rcnt;
    w->n_prev_recs = s->region.records_used;
    w->prev_ns = now;
    w->have_prev = true;
    qsort(w->keys, s->n_locks, sizeof *w->keys, by_activity_key);
    qsort(w->recs, s->n_records, sizeof *w->recs, by_activity_record);
    return CLI_EXIT_OK;
}

static void rate_cell(bool have, double v, char *buf, size_t cap)
{
    if (have)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "-");
}

static void wk_key(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ((const struct key_row *)row)->key);
}
static void wk_state(const void *row, char *buf, size_t cap)
{
    lock_state(((const struct key_row *)row)->l, buf, cap);
}
static void wk_left(const void *row, char *buf, size_t cap)
{
    lock_left(((const struct key_row *)row)->l, buf, cap);
}
static void wk_pid(const void *row, char *buf, size_t cap)
{
    lock_pid(((const struct key_row *)row)->l, buf, cap);
}
static void wk_token(const void *row, char *buf, size_t cap)
{
    lock_token(((const struct key_row *)row)->l, buf, cap);
}
static void wk_waiters(const void *row, char *buf, size_t cap)
{
    lock_waiters(((const struct key_row *)row)->l, buf, cap);
}
static void wk_acquired(const void *row, char *buf, size_t cap)
{
    lock_acquisitions(((const struct key_row *)row)->l, buf, cap);
}
static void wk_takeovers(const void *row, char *buf, size_t cap)
{
    lock_takeovers(((const struct key_row *)row)->l, buf, cap);
}

#define RATE_CELL(name, type, field)                                                      \
    static void name(const void *row, char *buf, size_t cap)                              \
    {                                                                                     \
        const type *x = row;                                                              \
        rate_cell(x->have_rate, x->field, buf, cap);                                      \
    }

RATE_CELL(wk_acq_rate, struct key_row, acq)
RATE_CELL(wk_commit_rate, struct key_row, commit)
RATE_CELL(wk_rej_rate, struct key_row, rej)
RATE_CELL(wk_take_rate, struct key_row, take)
NUMBER_CELL(wk_commits, struct key_row, commits)
NUMBER_CELL(wk_rejected, struct key_row, rejected)
NUMBER_CELL(wk_repeats, struct key_row, repeats)

static const struct column watch_key_columns[] = {
    {"KEY", false, wk_key},
    {"STATE", false, wk_state},
    {"ACQ/S", true, wk_acq_rate},
    {"COMMIT/S", true, wk_commit_rate},
    {"REJ/S", true, wk_rej_rate},
    {"TAKEOVER/S", true, wk_take_rate},
    {"WAITERS", true, wk_waiters},
    {"LEFT", true, wk_left},
    {"PID", true, wk_pid},
    {"TOKEN", true, wk_token},
    {"ACQUIRED", true, wk_acquired},
    {"COMMITS", true, wk_commits},
    {"REJECTED", true, wk_rejected},
    {"REPEATS", true, wk_repeats},
    {"TAKEOVERS", true, wk_takeovers},
};

static void wr_name(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ((const struct record_row *)row)->name);
}
static void wr_key(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ((const struct record_row *)row)->key);
}
static void wr_token(const void *row, char *buf, size_t cap)
{
    record_token(((const struct record_row *)row)->c, buf, cap);
}
static void wr_commits(const void *row, char *buf, size_t cap)
{
    record_commits(((const struct record_row *)row)->c, buf, cap);
}
static void wr_rejected(const void *row, char *buf, size_t cap)
{
    record_rejections(((const struct record_row *)row)->c, buf, cap);
}
static void wr_repeats(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%" PRIu64, ((const struct record_row *)row)->c->repeats);
}
RATE_CELL(wr_commit_rate, struct record_row, commit)
RATE_CELL(wr_rej_rate, struct record_row, rej)
RATE_CELL(wr_rep_rate, struct record_row, rep)

static const struct column watch_record_columns[] = {
    {"NAME", false, wr_name},
    {"KEY", false, wr_key},
    {"COMMIT/S", true, wr_commit_rate},
    {"REJ/S", true, wr_rej_rate},
    {"REPEAT/S", true, wr_rep_rate},
    {"TOKEN", true, wr_token},
    {"COMMITS", true, wr_commits},
    {"REJECTED", true, wr_rejected},
    {"REPEATS", true, wr_repeats},
};

_Static_assert(N_OF(watch_key_columns) <= MAX_COLUMNS, "too many columns");
_Static_assert(N_OF(watch_record_columns) <= MAX_COLUMNS, "too many columns");

/* A table of n rows showing at most room lines (0: no limit): when cut, the
 * last line says how many rows are left out. */
static void watch_section(FILE *f, const char *title, const struct column *cols, size_t ncols,
                          const void *rows, size_t size, size_t n, long room)
{
    fprintf(f, "%s\n", title);
    if (n == 0) {
        fputs("  (none)\n", f);
        return;
    }
    size_t shown = n;
    if (room > 0 && (size_t)room < n)
        shown = room > 1 ? (size_t)room - 1 : 0;
    print_table(f, cols, ncols, rows, size, shown);
    if (shown < n)
        fprintf(f, "  ... and %zu more\n", n - shown);
}

/* The whole view; rows > 0 fits it into that many lines (a terminal). */
static void watch_render(FILE *f, const struct watch *w, long rows)
{
    const struct snapshot *s = &w->s;
    const fl_region_info *g = &s->region;
    char when[64], every[32], a[32], b[32], c[32], d[32];
    format_local_time(w->unix_ns, when, sizeof when);
    format_duration(w->interval_ns, every, sizeof every);
    fprintf(f, "fencelock status --watch  %s  every %s  region %s%s\n", when, every, s->path,
            w->tty ? "  (q: quit)" : "");
    if (s->supervisor_alive)
        fprintf(f, "supervisor pid %" PRIu32 " running", g->supervisor_pid);
    else
        fputs("supervisor not running", f);
    fprintf(f,
            "  epoch %" PRIu64 "  keys %" PRIu32 "/%" PRIu32 "  records %" PRIu32 "/%" PRIu32
            "  clients %zu  log events dropped %" PRIu64 "\n",
            g->epoch, g->locks_used, g->lock_capacity, g->records_used, g->record_capacity,
            s->n_clients, g->events_dropped);
    rate_cell(w->have_total, w->acq, a, sizeof a);
    rate_cell(w->have_total, w->commit, b, sizeof b);
    rate_cell(w->have_total, w->rej, c, sizeof c);
    rate_cell(w->have_total, w->take, d, sizeof d);
    fprintf(f, "per second: %s acquisitions  %s commits  %s rejections  %s takeovers\n", a, b,
            c, d);
    long header = 3;
    uint32_t skipped_locks = skipped_total(s->skipped.locks),
             skipped_records = skipped_total(s->skipped.records);
    if (skipped_locks || skipped_records) {
        fputs("not listed:", f);
        for (int i = 0; i < SKIP_REASONS; i++) {
            if (s->skipped.locks[i])
                fprintf(f, "  %" PRIu32 " of %" PRIu32 " lock slots (%s)",
                        s->skipped.locks[i], g->locks_used, skip_reasons[i].brief_lock);
            if (s->skipped.records[i])
                fprintf(f, "  %" PRIu32 " of %" PRIu32 " record slots (%s)",
                        s->skipped.records[i], g->records_used, skip_reasons[i].brief_record);
        }
        fputc('\n', f);
        header++;
    }
    if (w->prefix) {
        char p[ESCAPED_MAX];
        escape_bytes(w->prefix, p, sizeof p);
        fprintf(f, "prefix: %s\n", p);
        header++;
    }
    /* Blank, title and column titles for each section. */
    long room_keys = 0, room_recs = 0;
    if (rows > 0) {
        long avail = rows - header - 6;
        long nk = (long)s->n_locks, nr = (long)s->n_records;
        if (avail < 2)
            avail = 2;
        if (nk + nr > avail) {
            long recs = avail / 3 > avail - nk ? avail / 3 : avail - nk;
            if (recs > nr)
                recs = nr;
            if (recs < 1)
                recs = 1;
            room_recs = recs;
            room_keys = avail - recs > 1 ? avail - recs : 1;
        }
    }
    fputc('\n', f);
    watch_section(f, "Keys", watch_key_columns, N_OF(watch_key_columns), w->keys,
                  sizeof *w->keys, s->n_locks, room_keys);
    fputc('\n', f);
    watch_section(f, "Records", watch_record_columns, N_OF(watch_record_columns), w->recs,
                  sizeof *w->recs, s->n_records, room_recs);
}

static void terminal_size(long *rows, long *cols)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
    } else {
        *rows = 24;
        *cols = 80;
    }
}

/* Draw the view on the terminal: home, clear, and the lines cut to the
 * window, in one write (no flicker). */
static int watch_draw(const struct watch *w)
{
    long rows, cols;
    terminal_size(&rows, &cols);
    char *text = NULL, *frame = NULL;
    size_t text_len = 0, frame_len = 0;
    FILE *t = open_memstream(&text, &text_len);
    if (!t)
        return -ENOMEM;
    watch_render(t, w, rows);
    if (fclose(t) != 0)
        return -ENOMEM;
    FILE *out = open_memstream(&frame, &frame_len);
    if (!out) {
        free(text);
        return -ENOMEM;
    }
    fputs("\033[H\033[2J", out);
    long line = 0;
    for (char *p = text; *p && line < rows;) {
        char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (line > 0)
            fputc('\n', out); /* no newline after the last row: it would scroll */
        fwrite(p, 1, len > (size_t)cols ? (size_t)cols : len, out);
        line++;
        p += len + (end ? 1 : 0);
    }
    free(text);
    if (fclose(out) != 0)
        return -ENOMEM;
    int err = 0;
    for (size_t off = 0; off < frame_len;) {
        ssize_t n = write(STDOUT_FILENO, frame + off, frame_len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? -errno : -EIO;
            break;
        }
        off += (size_t)n;
    }
    free(frame);
    return err;
}

static void write_string(const char *s)
{
    size_t len = strlen(s);
    while (len > 0) {
        ssize_t n = write(STDOUT_FILENO, s, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* the terminal is gone: nothing to restore */
        s += n;
        len -= (size_t)n;
    }
}

static volatile sig_atomic_t watch_signal, watch_resized;

static void on_watch_signal(int sig)
{
    if (sig == SIGWINCH)
        watch_resized = 1;
    else
        watch_signal = sig;
}

/* Push stdout out after a refresh: 0 go on, 1 the reader is gone (a closed
 * pipe: stop quietly), -1 an error (said on stderr). */
static int flush_refresh(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    if (errno == EPIPE)
        return 1;
    fprintf(stderr, "fencelock: cannot write the output: %s\n",
            errno ? strerror(errno) : "write error");
    return -1;
}

struct status_options {
    const char *region; /* NULL: the default */
    bool json;
    const char *prefix; /* NULL: every key */
    const char *key;    /* status KEY */
    bool watch;
    uint64_t interval_ns;
    unsigned long count; /* refreshes before stopping, 0: no limit */
};

/* The terminal side of --watch: the alternate screen without a cursor, and
 * keys read one by one without echo (q and Ctrl-C quit). */
struct terminal {
    bool keys;  /* stdin is the terminal in raw mode */
    struct termios saved;
    sigset_t old_mask;
};

static void terminal_enter(struct terminal *t)
{
    sigset_t block;
    sigemptyset(&block);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
    for (size_t i = 0; i < N_OF(sigs); i++)
        sigaddset(&block, sigs[i]);
    /* Blocked except inside ppoll, which so never misses one. */
    sigprocmask(SIG_BLOCK, &block, &t->old_mask);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_watch_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_OF(sigs); i++)
        sigaction(sigs[i], &sa, NULL);
    t->keys = false;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0) {
        struct termios raw = t->saved;
        /* Ctrl-C comes as a byte, so that quitting is one path that restores. */
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
        raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        t->keys = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    write_string("\033[?1049h\033[?25l");
}

static void terminal_leave(struct terminal *t)
{
    write_string("\033[?25h\033[?1049l");
    if (t->keys)
        tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

/* Wait on a terminal until deadline (monotonic ns), redrawing on resize.
 * Returns 1 to quit (q, Ctrl-C or a signal), 0 to refresh, -1 on a write
 * error. */
static int terminal_wait(struct terminal *t, const struct watch *w, uint64_t deadline)
{
    for (;;) {
        if (watch_signal)
            return 1;
        if (watch_resized) {
            watch_resized = 0;
            if (watch_draw(w) != 0)
                return -1;
        }
        uint64_t now = monotonic_ns();
        if (now >= deadline)
            return 0;
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int n = ppoll(t->keys ? &p : NULL, t->keys ? 1 : 0, &ts, &t->old_mask);
        if (n <= 0)
            continue; /* a signal (looked at above) or the time is up */
        if (p.revents & POLLIN) {
            char buf[64];
            ssize_t k = read(STDIN_FILENO, buf, sizeof buf);
            for (ssize_t i = 0; i < k; i++) {
                if (buf[i] == 'q' || buf[i] == 'Q' || buf[i] == 3 /* Ctrl-C */ ||
                    buf[i] == 4 /* Ctrl-D */)
                    return 1;
                if (buf[i] == ' ')
                    return 0; /* refresh now */
            }
            if (k == 0)
                t->keys = false; /* end of input: keep watching, by time only */
        } else if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) {
            t->keys = false;
        }
    }
}

static int watch_main(const struct status_options *o, const char *path)
{
    fl_region *r;
    bool truncated = false;
    int rc = guarded_open(path, &r, &truncated);
    if (truncated)
        return cli_region_truncated(path);
    if (rc != CLI_EXIT_OK)
        return rc;
    /* A reader that went away shows up as EPIPE from a write, not a death. */
    signal(SIGPIPE, SIG_IGN);
    struct watch w;
    memset(&w, 0, sizeof w);
    w.path = path;
    w.prefix = o->prefix;
    w.interval_ns = o->interval_ns;
    w.tty = !o->json && isatty(STDOUT_FILENO);
    struct terminal term;
    memset(&term, 0, sizeof term);
    if (w.tty)
        terminal_enter(&term);
    uint64_t next = monotonic_ns();
    for (unsigned long frames = 0;;) {
        rc = watch_refresh(&w, r, &truncated);
        if (rc != CLI_EXIT_OK)
            break;
        frames++;
        if (w.tty) {
            if (watch_draw(&w) != 0) {
                rc = CLI_EXIT_RUNTIME;
                break;
            }
        } else {
            if (o->json)
                print_json(stdout, &w.s);
            else {
                if (frames > 1)
                    fputc('\n', stdout);
                watch_render(stdout, &w, 0);
            }
            int f = flush_refresh();
            if (f != 0) {
                rc = f > 0 ? CLI_EXIT_OK : CLI_EXIT_RUNTIME;
                break;
            }
        }
        if (o->count && frames >= o->count)
            break;
        uint64_t now = monotonic_ns();
        next += w.interval_ns;
        if (next <= now)
            next = now + w.interval_ns; /* fell behind (stopped?): no burst */
        if (w.tty) {
            int q = terminal_wait(&term, &w, next);
            if (q != 0) {
                rc = q > 0 ? CLI_EXIT_OK : CLI_EXIT_RUNTIME;
                break;
            }
            uint64_t woke = monotonic_ns();
            if (woke < next)
                next = woke; /* space: refresh now */
        } else {
            struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
            }
        }
    }
    if (w.tty)
        terminal_leave(&term);
    free_snapshot(&w.s);
    free(w.keys);
    free(w.recs);
    free(w.prev_keys);
    free(w.prev_recs);
    if (truncated)
        rc = cli_region_truncated(path); /* after the terminal is back */
    fl_close(r);
    if (watch_signal) {
        /* End by the signal, as if it had not been caught. */
        int sig = watch_signal;
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
    }
    return rc;
}

/* ---- the command ----------------------------------------------------------- */

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

/* long-only options: outside the range of short ones */
enum { OPT_JSON = 256, OPT_PREFIX, OPT_WATCH, OPT_COUNT };

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

#define INTERVAL_MIN (50 * 1000000ull)
#define INTERVAL_MAX (3600 * 1000000000ull)

/* A refresh interval: a DURATION (500ms, 2s, 1.5s, 1m), or a bare number of
 * seconds as watch(1) and top(1) take it. */
static int parse_interval(const char *s, uint64_t *ns)
{
    char with_unit[64];
    if (*s && strspn(s, "0123456789.") == strlen(s) && strlen(s) < sizeof with_unit - 1) {
        snprintf(with_unit, sizeof with_unit, "%ss", s);
        s = with_unit;
    }
    const char *why;
    uint64_t v;
    if (cli_parse_duration(s, &v, &why) != 0 || v < INTERVAL_MIN || v > INTERVAL_MAX)
        return -1;
    *ns = v;
    return 0;
}

static int bad_interval(const char *s)
{
    return status_usage_error("--watch: '%s' is not an interval from 50ms to 1h (like 500ms, 2s "
                              "or 1m)",
                              s);
}

/* Returns -1 to go on, else the exit status (help shown, or bad usage). */
static int parse_status_args(int argc, char **argv, struct status_options *o)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, OPT_JSON},
        {"prefix", required_argument, NULL, OPT_PREFIX},
        {"watch", optional_argument, NULL, OPT_WATCH},
        {"count", required_argument, NULL, OPT_COUNT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our messages name the subcommand and give the hint */
    optind = 1;
    o->interval_ns = 2000000000ull;
    bool interval_given = false;
    int c;
    while ((c = getopt_long(argc, argv, ":r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (!optarg[0])
                return status_usage_error("--region: the path is empty");
            o->region = optarg;
            break;
        case OPT_JSON: o->json = true; break;
        case OPT_PREFIX: o->prefix = optarg; break;
        case OPT_WATCH:
            o->watch = true;
            if (optarg) {
                if (parse_interval(optarg, &o->interval_ns) != 0)
                    return bad_interval(optarg);
                interval_given = true;
            }
            break;
        case OPT_COUNT: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-' || v == 0 || v > UINT32_MAX)
                return status_usage_error("--count: '%s' is not a number of refreshes (1 or "
                                          "more)",
                                          optarg);
            o->count = (unsigned long)v;
            break;
        }
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
    if (o->watch) {
        /* --watch 1s: the word after it is its interval. */
        if (optind < argc && !interval_given) {
            if (parse_interval(argv[optind], &o->interval_ns) != 0)
                return bad_interval(argv[optind]);
            optind++;
        }
    } else if (optind < argc) {
        o->key = argv[optind++];
    }
    if (optind < argc)
        return status_usage_error("unexpected argument '%s'", argv[optind]);
    if (o->count && !o->watch)
        return status_usage_error("--count needs --watch");
    if (o->key) {
        if (!o->key[0])
            return status_usage_error("the key is empty");
        if (strlen(o->key) > FL_KEY_MAX)
            return status_usage_error("the key is longer than %d bytes", FL_KEY_MAX);
        if (o->prefix)
            return status_usage_error("give a KEY or --prefix, not both");
    }
    return -1;
}

/* status KEY: that key and its records, or exit status 4. */
static int show_key(const struct status_options *o, struct snapshot *s)
{
    const fl_lock_info *l = find_lock(s, o->key);
    if (!l) {
        char key[ESCAPED_MAX];
        escape_bytes(o->key, key, sizeof key);
        fprintf(stderr, "fencelock status: no key '%s' in region %s\n", key, s->path);
        return CLI_EXIT_NO_KEY;
    }
    keep_records_of(s, o->key);
    if (o->json)
        print_key_json(stdout, s, l);
    else
        print_key_detail(stdout, s, l);
    return cli_finish_stdout();
}

int status_main(int argc, char **argv)
{
    struct status_options o;
    memset(&o, 0, sizeof o);
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
    if (o.watch)
        return watch_main(&o, path);

    struct snapshot s;
    memset(&s, 0, sizeof s);
    rc = take_snapshot(path, &s);
    if (rc == CLI_EXIT_OK) {
        if (o.key) {
            rc = show_key(&o, &s);
        } else {
            filter_prefix(&s, o.prefix);
            if (o.json)
                print_json(stdout, &s);
            else
                print_text(stdout, &s);
            rc = cli_finish_stdout();
        }
    }
    free_snapshot(&s);
    return rc;
}
