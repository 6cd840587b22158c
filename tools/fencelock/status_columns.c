/* SPDX-License-Identifier: MIT */
/*
 * status_columns.c - the columns of `fencelock status`, each defined once.
 *
 * As util-linux's lslocks keeps one infos[] array, every field shown for a
 * client, a lock or a record is one entry below: its -o name (also the
 * table's header), its --json member, what it means (--help and
 * --list-columns print it), whether it is shown by default, and how to get
 * its value from a row.  The tables (status_text.c, through libsmartcols)
 * and the JSON document (status_json.c) are both drawn from these entries,
 * in their order, so a new field of fencelock.h is one line here.
 *
 * Also here: how values are written for people (sizes, times, keys as
 * escaped bytes; durations by src/common/duration.c), shared by every view.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "status.h"

/* ---- values for people ------------------------------------------------------ */

void format_size(uint64_t bytes, char *buf, size_t cap)
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

/* A wall-clock time in nanoseconds, for people: local time with its zone. */
void format_local_time(uint64_t unix_ns, char *buf, size_t cap)
{
    time_t t = (time_t)(unix_ns / 1000000000ull);
    struct tm tm;
    if (!localtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%d %H:%M:%S %Z", &tm) == 0)
        snprintf(buf, cap, "?");
}

/* The same for programs: RFC 3339 in UTC. */
void format_utc_time(uint64_t unix_ns, char *buf, size_t cap)
{
    time_t t = (time_t)(unix_ns / 1000000000ull);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "?");
}

const char *lock_state_name(int state)
{
    switch (state) {
    case FL_LOCK_FREE: return "free";
    case FL_LOCK_HELD: return "held";
    case FL_LOCK_EXPIRED: return "expired";
    default: return "unknown";
    }
}

/* How the last holding ended, or NULL while held or if never held. */
const char *last_release_name(const fl_lock_info *l)
{
    if (l->state != FL_LOCK_FREE || l->token == 0)
        return NULL;
    if (l->last_release == FL_LEASE_OWNER_DIED)
        return "died";
    if (l->last_release == FL_LEASE_EXPIRED)
        return "voided";
    return "released";
}

void lock_left_text(const fl_lock_info *l, char *buf, size_t cap)
{
    if (l->state == FL_LOCK_FREE)
        snprintf(buf, cap, "-");
    else if (l->state == FL_LOCK_EXPIRED || l->lease_left_ns <= 0)
        snprintf(buf, cap, "expired");
    else
        cli_format_duration((uint64_t)l->lease_left_ns, CLI_DURATION_BRIEF, buf, cap);
}

void column_text(const struct status_column *col, const void *row, char *buf, size_t cap)
{
    if (col->text) {
        col->text(row, buf, cap);
        return;
    }
    struct col_value v;
    col->value(row, &v);
    switch (v.type) {
    case COL_U64: snprintf(buf, cap, "%" PRIu64, v.u); break;
    case COL_I64: snprintf(buf, cap, "%" PRId64, v.i); break;
    case COL_BOOL: snprintf(buf, cap, "%s", v.b ? "yes" : "no"); break;
    case COL_STR:
        if (v.s)
            fl__keytext(v.s, buf, cap);
        else
            snprintf(buf, cap, "-");
        break;
    }
}

/* ---- the columns -------------------------------------------------------------- */

/* value() of one field of a row of type: a number, a boolean or a string. */
#define U64_VALUE(fn, T, field)                                                        \
    static void fn(const void *row, struct col_value *v)                                  \
    {                                                                                     \
        v->type = COL_U64;                                                                \
        v->u = (uint64_t)((const T *)row)->field;                                      \
    }
#define BOOL_VALUE(fn, T, field)                                                       \
    static void fn(const void *row, struct col_value *v)                                  \
    {                                                                                     \
        v->type = COL_BOOL;                                                               \
        v->b = ((const T *)row)->field != 0;                                           \
    }
#define STR_VALUE(fn, T, expr)                                                         \
    static void fn(const void *row, struct col_value *v)                                  \
    {                                                                                     \
        const T *x = row;                                                              \
        v->type = COL_STR;                                                                \
        v->s = (expr);                                                                    \
    }
/* text() of a number that is - when cond holds for the row x. */
#define DASH_TEXT(fn, T, field, cond)                                                  \
    static void fn(const void *row, char *buf, size_t cap)                                \
    {                                                                                     \
        const T *x = row;                                                              \
        if (cond)                                                                         \
            snprintf(buf, cap, "-");                                                      \
        else                                                                              \
            snprintf(buf, cap, "%" PRIu64, (uint64_t)x->field);                           \
    }

#define R COL_RIGHT
#define D COL_DEFAULT

U64_VALUE(client_index, fl_client_info, index)
U64_VALUE(client_id, fl_client_info, client_id)
U64_VALUE(client_pid, fl_client_info, pid)
U64_VALUE(client_uid, fl_client_info, uid)
STR_VALUE(client_state, fl_client_info, x->attached ? "attached" : "adopted")

static const struct status_column client_columns[] = {
    {"INDEX", "index", D | R, "client table index (what the locks table shows as CLIENT)",
     client_index, NULL},
    {"CLIENT-ID", "client_id", D | R, "client id, unique for the life of the region", client_id,
     NULL},
    {"PID", "pid", D | R, "the client's process id", client_pid, NULL},
    {"UID", "uid", D | R, "the client's user id", client_uid, NULL},
    {"STATE", "state", D,
     "attached (connected to the running supervisor) or adopted (registered before a "
     "supervisor restart, watched by pid)",
     client_state, NULL},
};

STR_VALUE(lock_key, fl_lock_info, x->key)
STR_VALUE(lock_state, fl_lock_info, lock_state_name(x->state))
U64_VALUE(lock_token, fl_lock_info, token)
U64_VALUE(lock_pid, fl_lock_info, holder_pid)
DASH_TEXT(lock_pid_text, fl_lock_info, holder_pid, x->state == FL_LOCK_FREE)
U64_VALUE(lock_client, fl_lock_info, holder_client)
DASH_TEXT(lock_client_text, fl_lock_info, holder_client,
          x->state == FL_LOCK_FREE || x->holder_client == 0)
U64_VALUE(lock_client_id, fl_lock_info, holder_client_id)
DASH_TEXT(lock_client_id_text, fl_lock_info, holder_client_id,
          x->state == FL_LOCK_FREE || x->holder_client == 0)
static void lock_left(const void *row, struct col_value *v)
{
    v->type = COL_I64;
    v->i = ((const fl_lock_info *)row)->lease_left_ns;
}
static void lock_left_cell(const void *row, char *buf, size_t cap)
{
    lock_left_text(row, buf, cap);
}
U64_VALUE(lock_waiters, fl_lock_info, waiters)
U64_VALUE(lock_acquisitions, fl_lock_info, acquisitions)
U64_VALUE(lock_contended, fl_lock_info, contended)
U64_VALUE(lock_takeovers, fl_lock_info, expiries_taken)
U64_VALUE(lock_deaths, fl_lock_info, deaths)
U64_VALUE(lock_renewals, fl_lock_info, renewals)
U64_VALUE(lock_renew_failed, fl_lock_info, renew_failed)
U64_VALUE(lock_releases, fl_lock_info, releases)
U64_VALUE(lock_release_failed, fl_lock_info, release_failed)
U64_VALUE(lock_busy, fl_lock_info, busy)
U64_VALUE(lock_timeouts, fl_lock_info, timeouts)
STR_VALUE(lock_last, fl_lock_info, last_release_name(x))
U64_VALUE(lock_stale_token, fl_lock_info, last_stale_token)
DASH_TEXT(lock_stale_token_text, fl_lock_info, last_stale_token, !fl__op_name(x->last_stale_op))
U64_VALUE(lock_stale_pid, fl_lock_info, last_stale_pid)
DASH_TEXT(lock_stale_pid_text, fl_lock_info, last_stale_pid, !fl__op_name(x->last_stale_op))
STR_VALUE(lock_stale_op, fl_lock_info, fl__op_name(x->last_stale_op))

/* In the order of the JSON members; the default columns keep the order the
 * table has always had. */
static const struct status_column lock_columns[] = {
    {"KEY", "key", D,
     "the key; bytes outside printable ASCII are shown as \\xNN and a backslash as \\\\",
     lock_key, NULL},
    {"STATE", "state", D,
     "free; held (by an unexpired lease); expired (the lease ended while held: the next "
     "acquire takes it over with a new token)",
     lock_state, NULL},
    {"TOKEN", "token", D | R, "latest fencing token handed out for the key (0: never)",
     lock_token, NULL},
    {"PID", "holder_pid", D | R,
     "holder's process id, - when free (JSON: the latest holder's, also after a release)",
     lock_pid, lock_pid_text},
    {"CLIENT", "holder_client", D | R,
     "holder's client index; - when free or when the holder is not registered (then its "
     "death is detected only by lease expiry)",
     lock_client, lock_client_text},
    {"CLIENT-ID", "holder_client_id", R, "holder's client id, - like CLIENT", lock_client_id,
     lock_client_id_text},
    {"LEFT", "lease_left_ns", D | R,
     "lease time left (300ms, 1.25s, 4m05s); expired once past its deadline; - when free "
     "(JSON: nanoseconds, negative once expired, 0 when free)",
     lock_left, lock_left_cell},
    {"WAITERS", "waiters", D | R, "processes waiting for the key now", lock_waiters, NULL},
    {"ACQUIRED", "acquisitions", D | R, "successful acquisitions", lock_acquisitions, NULL},
    {"CONTENDED", "contended", D | R, "acquisitions that found the key held", lock_contended,
     NULL},
    {"TAKEOVERS", "expiries_taken", D | R, "acquisitions that took an expired lease over",
     lock_takeovers, NULL},
    {"DEATHS", "deaths", D | R, "holdings released by fencelockd because the holder died",
     lock_deaths, NULL},
    {"RENEWALS", "renewals", D | R, "successful lease renewals", lock_renewals, NULL},
    {"RENEW-STALE", "renew_failed", R, "renewals refused as stale", lock_renew_failed, NULL},
    {"RELEASES", "releases", R, "successful releases", lock_releases, NULL},
    {"RELEASE-STALE", "release_failed", R, "releases refused as stale", lock_release_failed,
     NULL},
    {"BUSY", "busy", R, "tries without waiting (timeout 0) that found the key held (EBUSY)",
     lock_busy, NULL},
    {"TIMEOUTS", "timeouts", R, "waits that ended with the key still held (ETIMEDOUT)", lock_timeouts, NULL},
    {"LAST", "last_release", D,
     "how the last holding ended: released; died (released by fencelockd); voided (a lease "
     "of an earlier boot); - while held or if never held",
     lock_last, NULL},
    {"STALE-TOKEN", "last_stale_token", R,
     "token of the last renewal or release refused as stale, - if none", lock_stale_token,
     lock_stale_token_text},
    {"STALE-PID", "last_stale_pid", R, "process that made it, - if none", lock_stale_pid,
     lock_stale_pid_text},
    {"STALE-OP", "last_stale_op", 0, "renew or release, - if none", lock_stale_op, NULL},
};

STR_VALUE(record_name, fl_record_info, x->name)
STR_VALUE(record_key, fl_record_info, x->bound_key[0] ? x->bound_key : NULL)
U64_VALUE(record_token, fl_record_info, accepted_token)
U64_VALUE(record_version, fl_record_info, version)
U64_VALUE(record_size, fl_record_info, size)
U64_VALUE(record_commits, fl_record_info, commits)
U64_VALUE(record_rejections, fl_record_info, rejections)
U64_VALUE(record_rej_token, fl_record_info, last_rejected_token)
DASH_TEXT(record_rej_token_text, fl_record_info, last_rejected_token, x->rejections == 0)
U64_VALUE(record_rej_pid, fl_record_info, last_rejected_pid)
DASH_TEXT(record_rej_pid_text, fl_record_info, last_rejected_pid, x->rejections == 0)
U64_VALUE(record_rej_accepted, fl_record_info, last_rejected_accepted)
DASH_TEXT(record_rej_accepted_text, fl_record_info, last_rejected_accepted, x->rejections == 0)
STR_VALUE(record_rej_op, fl_record_info, fl__op_name(x->last_rejected_op))
U64_VALUE(record_repeats, fl_record_info, repeats)
BOOL_VALUE(record_unvouched, fl_record_info, unvouched)

static const struct status_column record_columns[] = {
    {"NAME", "name", D, "record name, escaped like keys", record_name, NULL},
    {"KEY", "bound_key", D, "the lock key that fences it (- if never bound)", record_key,
     NULL},
    {"TOKEN", "accepted_token", D | R, "greatest fencing token the record accepted (0: none)",
     record_token, NULL},
    {"VERSION", "version", D | R, "version of the current value (accepted commits)",
     record_version, NULL},
    {"SIZE", "size", D | R, "bytes in the current value", record_size, NULL},
    {"COMMITS", "commits", D | R, "commits accepted", record_commits, NULL},
    {"REJECTED", "rejections", D | R, "commits rejected for a stale token", record_rejections,
     NULL},
    {"REJ-TOKEN", "last_rejected_token", D | R, "token of the last rejected commit, - if none",
     record_rej_token, record_rej_token_text},
    {"REJ-PID", "last_rejected_pid", D | R,
     "process that made the last rejected commit, - if none", record_rej_pid,
     record_rej_pid_text},
    {"REJ-ACCEPTED", "last_rejected_accepted", R,
     "the token the record had accepted when it rejected that commit, - if none",
     record_rej_accepted, record_rej_accepted_text},
    {"REJ-OP", "last_rejected_op", 0, "commit or strict_commit, - if none", record_rej_op,
     NULL},
    {"REPEATS", "repeats", R,
     "rejections of a token among the record's last 4 rejected tokens (a client retrying "
     "a stale token instead of acquiring again)",
     record_repeats, NULL},
    {"UNVOUCHED", "unvouched", 0,
     "yes if fencelockd could not vouch for the value at its start: reads fail (EBADMSG) "
     "until the next commit",
     record_unvouched, NULL},
};

#undef R
#undef D

const struct status_table status_tables[N_TABLES] = {
    [TABLE_CLIENTS] = {"Clients", "clients", client_columns, N_OF(client_columns),
                       sizeof(fl_client_info)},
    [TABLE_LOCKS] = {"Locks", "locks", lock_columns, N_OF(lock_columns), sizeof(fl_lock_info)},
    [TABLE_RECORDS] = {"Records", "records", record_columns, N_OF(record_columns),
                       sizeof(fl_record_info)},
};

_Static_assert(N_OF(client_columns) <= STATUS_MAX_COLUMNS, "too many columns");
_Static_assert(N_OF(lock_columns) <= STATUS_MAX_COLUMNS, "too many columns");
_Static_assert(N_OF(record_columns) <= STATUS_MAX_COLUMNS, "too many columns");

/* ---- choosing columns (-o) --------------------------------------------------- */

void columns_default(struct column_choice choice[N_TABLES])
{
    for (int t = 0; t < N_TABLES; t++) {
        choice[t].n = 0;
        for (size_t c = 0; c < status_tables[t].ncols; c++)
            if (status_tables[t].cols[c].flags & COL_DEFAULT)
                choice[t].ids[choice[t].n++] = (int)c;
    }
}

void columns_all(struct column_choice choice[N_TABLES])
{
    for (int t = 0; t < N_TABLES; t++) {
        choice[t].n = status_tables[t].ncols;
        for (size_t c = 0; c < status_tables[t].ncols; c++)
            choice[t].ids[c] = (int)c;
    }
}

/* The index of the column called name (len bytes, any case), or -1. */
static int column_id(const struct status_table *t, const char *name, size_t len)
{
    for (size_t c = 0; c < t->ncols; c++)
        if (strlen(t->cols[c].name) == len && strncasecmp(t->cols[c].name, name, len) == 0)
            return (int)c;
    return -1;
}

int columns_parse(struct column_choice choice[N_TABLES], const char *arg, char *why,
                  size_t why_cap)
{
    int t = TABLE_LOCKS;
    const char *colon = strchr(arg, ':');
    if (colon) {
        t = -1;
        for (int i = 0; i < N_TABLES; i++)
            if ((size_t)(colon - arg) == strlen(status_tables[i].name) &&
                strncmp(arg, status_tables[i].name, (size_t)(colon - arg)) == 0)
                t = i;
        if (t < 0) {
            snprintf(why, why_cap, "'%.*s' is not a table (clients, locks or records)",
                     (int)(colon - arg), arg);
            return -1;
        }
        arg = colon + 1;
    }
    const struct status_table *tb = &status_tables[t];
    struct column_choice *ch = &choice[t];
    if (*arg == '+')
        arg++; /* after the defaults (or what an earlier -o chose) */
    else
        ch->n = 0;
    if (!*arg) {
        snprintf(why, why_cap, "no column given");
        return -1;
    }
    for (const char *p = arg;;) {
        size_t len = strcspn(p, ",");
        if (len == 0) {
            snprintf(why, why_cap, "an empty column name in '%s'", arg);
            return -1;
        }
        int id = column_id(tb, p, len);
        if (id < 0) {
            snprintf(why, why_cap, "unknown column '%.*s' of the %s table", (int)len, p,
                     tb->name);
            return -1;
        }
        if (ch->n == STATUS_MAX_COLUMNS) {
            snprintf(why, why_cap, "more than %d columns", STATUS_MAX_COLUMNS);
            return -1;
        }
        ch->ids[ch->n++] = id;
        if (!p[len])
            break;
        p += len + 1;
    }
    return 0;
}

/* Write text wrapped at 78 columns, its lines indented by indent blanks;
 * col is where the cursor is on the first line. */
static void wrap(FILE *f, const char *text, int indent, int col)
{
    if (col >= indent) {
        fputc('\n', f);
        col = 0;
    }
    fprintf(f, "%*s", indent - col, "");
    col = indent;
    for (const char *p = text; *p;) {
        int len = (int)strcspn(p, " ");
        if (col > indent && col + 1 + len > 78) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, (size_t)len, f);
        col += len;
        for (p += len; *p == ' '; p++) {
        }
    }
    fputc('\n', f);
}

void columns_describe(FILE *f)
{
    for (int t = 0; t < N_TABLES; t++) {
        const struct status_table *tb = &status_tables[t];
        fprintf(f, "%s%s table, one row per %s (-o %s:LIST; * default):\n", t ? "\n" : "",
                tb->title, t == TABLE_CLIENTS ? "client" : t == TABLE_LOCKS ? "key" : "record",
                tb->name);
        for (size_t c = 0; c < tb->ncols; c++) {
            const struct status_column *col = &tb->cols[c];
            int n = fprintf(f, " %c%s", col->flags & COL_DEFAULT ? '*' : ' ', col->name);
            wrap(f, col->help, 17, n);
        }
    }
}
