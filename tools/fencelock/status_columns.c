/* SPDX-License-Identifier: MIT */
/*
 * status_columns.c - the columns of `fencelock status`, made from the lists
 * of src/common/info_fields.h.
 *
 * As util-linux's lslocks keeps one infos[] array, every field shown for a
 * client, a lock or a record is one entry of those lists: its -o name (also
 * the table's header), its --json member, what it means (--help and
 * --list-columns print it), whether it is shown by default, and its format,
 * which says how its value reads and shows.  The tables (status_text.c,
 * through libsmartcols), the JSON document (status_json.c) and the watch
 * view (status_watch.c) are all drawn from the columns below, in their
 * order, so a new field of fencelock.h is one entry in info_fields.h.
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
    time_t t = (time_t)(unix_ns / CLI_NS_PER_S);
    struct tm tm;
    if (!localtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%d %H:%M:%S %Z", &tm) == 0)
        snprintf(buf, cap, "?");
}

/* The same for programs: RFC 3339 in UTC. */
void format_utc_time(uint64_t unix_ns, char *buf, size_t cap)
{
    time_t t = (time_t)(unix_ns / CLI_NS_PER_S);
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

/* The name of run_state as the JSON document gives it: with `served`, the
 * state of a run that has not ended cleanly tells running from died. */
const char *last_run_name(const fl_region_info *g)
{
    switch (g->run_state) {
    case FL_RUN_CLEAN: return "clean_shutdown";
    case FL_RUN_STARTED: return g->served ? "running" : "unclean_shutdown";
    default: return "never_served";
    }
}

/* Whether a number of this format means nothing yet in row, where a table
 * shows - (JSON keeps the number). */
static bool shows_dash(enum fl_info_format format, const void *row)
{
    const fl_lock_info *l = row;    /* the NUM_* of locks */
    const fl_record_info *c = row;  /* and of records */
    switch (format) {
    case FL_INFO_NUM_HELD: return l->state == FL_LOCK_FREE;
    case FL_INFO_NUM_HOLDER: return l->state == FL_LOCK_FREE || l->holder_client == 0;
    case FL_INFO_NUM_STALE: return !fl__op_name(l->last_stale_op);
    case FL_INFO_NUM_REJECTED: return c->rejections == 0;
    default: return false;
    }
}

bool column_right(const struct status_column *col)
{
    switch (col->format) {
    case FL_INFO_NUM:
    case FL_INFO_LEFT:
    case FL_INFO_NUM_HELD:
    case FL_INFO_NUM_HOLDER:
    case FL_INFO_NUM_STALE:
    case FL_INFO_NUM_REJECTED: return true;
    default: return false; /* words and text */
    }
}

bool column_wraps(const struct status_column *col)
{
    return col->format == FL_INFO_TEXT || col->format == FL_INFO_TEXT_OR_NULL;
}

void column_text(const struct status_column *col, const void *row, char *buf, size_t cap)
{
    if (col->text) {
        col->text(row, buf, cap);
        return;
    }
    if (col->format == FL_INFO_LEFT) {
        lock_left_text(row, buf, cap);
        return;
    }
    if (shows_dash(col->format, row)) {
        snprintf(buf, cap, "-");
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

/* value() of every field, as its format reads it (VALUE_* in status.h). */
#define VALUE_FUNCTION(T, table, field, format)                                                \
    static void table##_value_##field(const void *row, struct col_value *v)                   \
    {                                                                                         \
        *v = VALUE_##format((const T *)row, field);                                           \
    }
#define CLIENT_VALUE(field, format, ...) VALUE_FUNCTION(fl_client_info, client, field, format)
#define LOCK_VALUE(field, format, ...) VALUE_FUNCTION(fl_lock_info, lock, field, format)
#define RECORD_VALUE(field, format, ...) VALUE_FUNCTION(fl_record_info, record, field, format)
FL_CLIENT_INFO_FIELDS(CLIENT_VALUE)
FL_LOCK_INFO_FIELDS(LOCK_VALUE)
FL_RECORD_INFO_FIELDS(RECORD_VALUE)

/* The column of a list entry (its metric is not the tables' business). */
#define COLUMN(table, field, format, column, json, flags, help)                                \
    {column, json, flags, help, FL_INFO_##format, table##_value_##field, NULL},
#define CLIENT_COLUMN(field, format, column, json, flags, help, ...)                            \
    COLUMN(client, field, format, column, json, flags, help)
#define LOCK_COLUMN(field, format, column, json, flags, help, ...)                              \
    COLUMN(lock, field, format, column, json, flags, help)
#define RECORD_COLUMN(field, format, column, json, flags, help, ...)                            \
    COLUMN(record, field, format, column, json, flags, help)

const struct status_column client_columns[N_CLIENT_COLUMNS] = {
    FL_CLIENT_INFO_FIELDS(CLIENT_COLUMN)
};
const struct status_column lock_columns[N_LOCK_COLUMNS] = {FL_LOCK_INFO_FIELDS(LOCK_COLUMN)};
const struct status_column record_columns[N_RECORD_COLUMNS] = {
    FL_RECORD_INFO_FIELDS(RECORD_COLUMN)
};

const struct status_table status_tables[N_TABLES] = {
    [TABLE_CLIENTS] = {"Clients", "clients", client_columns, N_CLIENT_COLUMNS,
                       sizeof(fl_client_info)},
    [TABLE_LOCKS] = {"Locks", "locks", lock_columns, N_LOCK_COLUMNS, sizeof(fl_lock_info)},
    [TABLE_RECORDS] = {"Records", "records", record_columns, N_RECORD_COLUMNS,
                       sizeof(fl_record_info)},
};

_Static_assert(N_CLIENT_COLUMNS <= STATUS_MAX_COLUMNS, "too many columns");
_Static_assert(N_LOCK_COLUMNS <= STATUS_MAX_COLUMNS, "too many columns");
_Static_assert(N_RECORD_COLUMNS <= STATUS_MAX_COLUMNS, "too many columns");

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

/* The column descriptions of --help and --list-columns: wrapped to the
 * width of the rest of the help, each starting two blanks after the longest
 * name (" *RELEASE-STALE"). */
#define HELP_WIDTH 78
#define HELP_INDENT 17

/* Write text wrapped at HELP_WIDTH columns, its lines indented by indent
 * blanks; col is where the cursor is on the first line. */
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
        if (col > indent && col + 1 + len > HELP_WIDTH) {
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
            wrap(f, col->help, HELP_INDENT, n);
        }
    }
}
