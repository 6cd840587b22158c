/* SPDX-License-Identifier: MIT */
/*
 * status.h - what the views of `fencelock status` share.
 *
 * One file per view, as git's builtin/ keeps one command a file:
 *   status.c           the command: usage, options, which view to show
 *   status_snapshot.c  reading the region (guarded against SIGBUS) into a
 *                      struct snapshot; --prefix and KEY filtering
 *   status_columns.c   the columns of the clients, locks and records tables,
 *                      each defined once (name, JSON member, description,
 *                      value); -o parsing; value formatting for people
 *   status_text.c      the region block and the tables, drawn by libsmartcols
 *   status_json.c      the --json document, written from the same columns
 *   status_key.c       status KEY: one key and its records in detail
 *   status_watch.c     --watch: the refreshing view with rates
 */
#ifndef FL_TOOL_STATUS_H
#define FL_TOOL_STATUS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "clocks.h"
#include "duration.h"
#include "fencelock.h"
#include "info_fields.h"
#include "keytext.h"
#include "op_name.h"
#include "status_unreg.h"
#include "usage.h"

/* ---- the snapshot (status_snapshot.c) ---------------------------------------- */

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

struct skip_reason_text {
    const char *name;                      /* the JSON member */
    const char *brief_lock, *brief_record; /* what the watch view's header says */
    const char *lock;                      /* what the tables say for lock slots */
    const char *record;                    /* and for records */
};
extern const struct skip_reason_text skip_reasons[SKIP_REASONS];

struct skipped {
    uint32_t locks[SKIP_REASONS];
    uint32_t records[SKIP_REASONS];
};

uint32_t skipped_total(const uint32_t *by_reason);

struct snapshot {
    char path[PATH_MAX];
    char backend[16]; /* fl_region_backend(): "shm", "etcd" */
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

void free_snapshot(struct snapshot *s);
/* Open the region at path read-only and copy out everything shown. */
int take_snapshot(const char *path, struct snapshot *s);
/* Open the region (*r) or read it again into s, each with the mapping
 * guarded (guard.h): a SIGBUS sets *truncated and returns CLI_EXIT_REGION,
 * the message left to the caller.  After a truncation in guarded_read the
 * handle may only be closed; after one in guarded_open there is no handle. */
int guarded_open(const char *path, fl_region **r, bool *truncated);
int guarded_read(fl_region *r, const char *path, struct snapshot *s, bool *truncated);
/* Keep the keys that start with prefix and the records whose name or bound
 * key does (NULL keeps everything). */
void filter_prefix(struct snapshot *s, const char *prefix);
/* The lock whose key is key, or NULL. */
const fl_lock_info *find_lock(const struct snapshot *s, const char *key);
/* Keep only the records fenced by key. */
void keep_records_of(struct snapshot *s, const char *key);

/* "fencelock: WHAT: out of memory" on stderr and CLI_EXIT_RUNTIME. */
int out_of_memory(const char *what);

/* ---- columns (status_columns.c) ------------------------------------------- */

/* A value as the JSON document types it; the tables show it as text. */
enum col_type { COL_U64, COL_I64, COL_BOOL, COL_STR };
struct col_value {
    enum col_type type;
    union {
        uint64_t u;
        int64_t i;
        bool b;
        const char *s; /* NULL: JSON null, "-" in a table */
    };
};

static inline struct col_value col_u64(uint64_t u)
{
    return (struct col_value){.type = COL_U64, .u = u};
}
static inline struct col_value col_i64(int64_t i)
{
    return (struct col_value){.type = COL_I64, .i = i};
}
static inline struct col_value col_bool(bool b)
{
    return (struct col_value){.type = COL_BOOL, .b = b};
}
static inline struct col_value col_str(const char *s)
{
    return (struct col_value){.type = COL_STR, .s = s};
}

/* The value of field f of a row x in each format of info_fields.h. */
#define VALUE_NUM(x, f) col_u64((x)->f)
#define VALUE_FLAG(x, f) col_bool((x)->f != 0)
#define VALUE_TEXT(x, f) col_str((x)->f)
#define VALUE_TEXT_OR_NULL(x, f) col_str((x)->f[0] ? (x)->f : NULL)
#define VALUE_LOCK_STATE(x, f) col_str(lock_state_name((x)->f))
#define VALUE_RUN_STATE(x, f) col_str(last_run_name(x))
#define VALUE_OP(x, f) col_str(fl__op_name((x)->f))
#define VALUE_RELEASE(x, f) col_str(last_release_name(x))
#define VALUE_ATTACHED(x, f) col_str((x)->f ? "attached" : "adopted")
#define VALUE_LEFT(x, f) col_i64((x)->f)
#define VALUE_NUM_HELD VALUE_NUM /* the NUM_* differ in tables only (column_text) */
#define VALUE_NUM_HOLDER VALUE_NUM
#define VALUE_NUM_STALE VALUE_NUM
#define VALUE_NUM_REJECTED VALUE_NUM

enum {
    COL_DEFAULT = FL_INFO_DEFAULT, /* shown without -o */
};

/*
 * One column of a table: its name (for -o and the header), its member in
 * --json (NULL: none), what it means (for --help and --list-columns), and
 * how to get it from a row.  The columns of the status tables are made from
 * the lists of info_fields.h: value() as JSON types it, shown in a table as
 * its format says (column_text).  The watch view adds columns of its own,
 * which have text() only.
 */
struct status_column {
    const char *name;
    const char *json;
    unsigned flags;
    const char *help;
    enum fl_info_format format;
    void (*value)(const void *row, struct col_value *v);
    void (*text)(const void *row, char *buf, size_t cap);
};

/* The columns of each table, in the order of info_fields.h, and their
 * indexes (LOCK_COL_waiters, RECORD_COL_commits, ...). */
#define COL_ID_CLIENT(field, ...) CLIENT_COL_##field,
#define COL_ID_LOCK(field, ...) LOCK_COL_##field,
#define COL_ID_RECORD(field, ...) RECORD_COL_##field,
enum { FL_CLIENT_INFO_FIELDS(COL_ID_CLIENT) N_CLIENT_COLUMNS };
enum { FL_LOCK_INFO_FIELDS(COL_ID_LOCK) N_LOCK_COLUMNS };
enum { FL_RECORD_INFO_FIELDS(COL_ID_RECORD) N_RECORD_COLUMNS };
#undef COL_ID_CLIENT
#undef COL_ID_LOCK
#undef COL_ID_RECORD
extern const struct status_column client_columns[N_CLIENT_COLUMNS];
extern const struct status_column lock_columns[N_LOCK_COLUMNS];
extern const struct status_column record_columns[N_RECORD_COLUMNS];

/* A table: its title, its columns in the order --json writes them, and the
 * size of its rows. */
struct status_table {
    const char *title; /* "Locks" */
    const char *name;  /* "locks": the TABLE: of -o and the JSON array */
    const struct status_column *cols;
    size_t ncols;
    size_t row_size;
};

enum { TABLE_CLIENTS, TABLE_LOCKS, TABLE_RECORDS, N_TABLES };
extern const struct status_table status_tables[N_TABLES];

#define STATUS_MAX_COLUMNS 32

/* The columns a table shows, as indexes into its cols[]. */
struct column_choice {
    int ids[STATUS_MAX_COLUMNS];
    size_t n;
};

/* Every table's default columns. */
void columns_default(struct column_choice choice[N_TABLES]);
/* Every column of every table (--output-all). */
void columns_all(struct column_choice choice[N_TABLES]);
/* Apply one -o argument, "[TABLE:][+]NAME,NAME...": 0, or -1 with the
 * problem in why. */
int columns_parse(struct column_choice choice[N_TABLES], const char *arg, char *why,
                  size_t why_cap);
/* The columns of every table with what they mean (--help, --list-columns). */
void columns_describe(FILE *f);

/* The text of a cell: col's text(), or its value() as its format shows it
 * in a table. */
void column_text(const struct status_column *col, const void *row, char *buf, size_t cap);
/* Whether a column aligns right: numbers do, words and text do not. */
bool column_right(const struct status_column *col);
/* Whether a column may wrap to fit a terminal: keys and names (text) do. */
bool column_wraps(const struct status_column *col);

/* ---- formatting for people (status_columns.c) ----------------------------- */

/* Room for a key with every byte escaped as \xNN, and its NUL. */
#define ESCAPED_MAX FL_KEYTEXT_MAX
/* Room for any table cell. */
#define CELL_MAX (ESCAPED_MAX + 8)

void format_size(uint64_t bytes, char *buf, size_t cap);
void format_local_time(uint64_t unix_ns, char *buf, size_t cap);
void format_utc_time(uint64_t unix_ns, char *buf, size_t cap);
const char *lock_state_name(int state);
const char *last_release_name(const fl_lock_info *l);
const char *last_run_name(const fl_region_info *g);
void lock_left_text(const fl_lock_info *l, char *buf, size_t cap);

/* ---- the views ------------------------------------------------------------ */

/* Draw rows (n of them, row_size apart) with the columns cols through
 * libsmartcols, under a header line, each line indented by two blanks.
 * fit: when stdout is a terminal, fit its width by wrapping the columns
 * column_wraps() names (the watch view cuts its lines itself).  Returns 0
 * or -ENOMEM. */
int print_columns(FILE *f, const struct status_column *const *cols, size_t ncols,
                  const void *rows, size_t row_size, size_t n, bool fit);

/* status_text.c: the region block, then each table with the columns chosen. */
int print_text(FILE *f, const struct snapshot *s, const struct column_choice choice[N_TABLES]);

/* status_json.c */
void print_json(FILE *f, const struct snapshot *s);
void json_region(FILE *f, const struct snapshot *s);
void json_row(FILE *f, const struct status_table *t, const void *row);
void status_json_array(FILE *f, const struct status_table *t, const void *rows, size_t n, bool last);

/* status_key.c: status KEY; exit status. */
int show_key(const char *key, bool json, struct snapshot *s);

/* status_watch.c: --watch; exit status. */
struct watch_options {
    const char *prefix;
    bool json;
    uint64_t interval_ns;
    unsigned long count; /* refreshes before stopping, 0: no limit */
};
int watch_main(const struct watch_options *o, const char *path);

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

#endif
