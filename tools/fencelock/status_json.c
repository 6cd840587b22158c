/* SPDX-License-Identifier: MIT */
/*
 * status_json.c - `fencelock status --json`: one document for programs.
 *
 * The members of clients, locks and records are the columns of
 * status_columns.c, every one of them, in its order, named by its json and
 * typed by its value(): each field is listed once for the tables and the
 * document alike.  libsmartcols could write JSON from the same table, but
 * not this document, whose shape scripts depend on: it writes one
 * {"TABLE": [...]} object per table (no "time", "region" or "skipped"
 * beside them), passes bytes above 0x7f through where we promise \u00NN
 * escapes that decode as Latin-1 to the key's bytes, and cannot write a
 * nested object.  So the document is written here, from the columns.
 */
#include <inttypes.h>
#include <stdio.h>

#include "json.h"
#include "status.h"

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
    fl__json_string(j->f, key);
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
        fl__json_string(j->f, v);
    else
        fputs("null", j->f);
}

static void j_end(struct jobject *j) { fputc('}', j->f); }

void json_region(FILE *f, const struct snapshot *s)
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
    j_str(&j, "last_run", g->run_state == FL_RUN_CLEAN ? "clean_shutdown"
                          : g->run_state == FL_RUN_STARTED
                              ? (s->supervisor_alive ? "running" : "unclean_shutdown")
                              : "never_served");
    j_u64(&j, "started_unix_ns", g->started_unix_ns);
    j_u64(&j, "clean_unix_ns", g->clean_unix_ns);
    j_str(&j, "boot_id", g->boot_id);
    j_bool(&j, "same_boot", g->same_boot != 0);
    j_bool(&j, "ready", g->ready != 0);
    j_u64(&j, "records_unvouched", g->records_unvouched);
    j_u64(&j, "clients_refused", g->clients_refused);
    j_u64(&j, "created_unix_ns", g->created_unix_ns);
    j_str(&j, "created", created);
    j_u64(&j, "events_dropped", g->events_dropped);
    j_end(&j);
}

void json_row(FILE *f, const struct status_table *t, const void *row)
{
    struct jobject j = j_begin(f);
    for (size_t c = 0; c < t->ncols; c++) {
        const struct status_column *col = &t->cols[c];
        if (!col->json)
            continue;
        struct col_value v;
        col->value(row, &v);
        switch (v.type) {
        case COL_U64: j_u64(&j, col->json, v.u); break;
        case COL_I64: j_i64(&j, col->json, v.i); break;
        case COL_BOOL: j_bool(&j, col->json, v.b); break;
        case COL_STR: j_str(&j, col->json, v.s); break;
        }
    }
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

/* An array member named after the table, one element per line so that line
 * tools work too. */
void json_array(FILE *f, const struct status_table *t, const void *rows, size_t n, bool last)
{
    fputs("  ", f);
    fl__json_string(f, t->name);
    fputs(": [", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        json_row(f, t, (const char *)rows + i * t->row_size);
    }
    fputs(n ? "\n  ]" : "]", f);
    fputs(last ? "\n" : ",\n", f);
}

void print_json(FILE *f, const struct snapshot *s)
{
    fputs("{\n  \"time\": ", f);
    fl__json_now(f);
    fputs(",\n  \"region\": ", f);
    json_region(f, s);
    fputs(",\n", f);
    json_array(f, &status_tables[TABLE_CLIENTS], s->clients, s->n_clients, false);
    unreg_print_json(f, &s->unreg);
    json_array(f, &status_tables[TABLE_LOCKS], s->locks, s->n_locks, false);
    json_array(f, &status_tables[TABLE_RECORDS], s->records, s->n_records, false);
    fputs("  \"skipped\": ", f);
    json_skipped(f, &s->skipped);
    fputs("\n}\n", f);
}
