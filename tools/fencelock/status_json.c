/* SPDX-License-Identifier: MIT */
/*
 * status_json.c - `fencelock status --json`: one document for programs.
 *
 * The members of region, clients, locks and records are the entries of
 * src/common/info_fields.h, every one of them, in their order, named by
 * their json and typed by their format: each field is listed once for the
 * tables, the document and the metrics alike.  libsmartcols could write
 * JSON from the same table, but not this document, whose shape scripts
 * depend on: it writes one {"TABLE": [...]} object per table (no "time",
 * "region" or "skipped" beside them), passes bytes above 0x7f through where
 * we promise \u00NN escapes that decode as Latin-1 to the key's bytes, and
 * cannot write a nested object.  So the document is written here, from the
 * columns.
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

/* A member of the JSON type of v. */
static void j_value(struct jobject *j, const char *key, struct col_value v)
{
    switch (v.type) {
    case COL_U64: j_u64(j, key, v.u); break;
    case COL_I64: j_i64(j, key, v.i); break;
    case COL_BOOL: j_bool(j, key, v.b); break;
    case COL_STR: j_str(j, key, v.s); break;
    }
}

/* The members of "region" that are no field of fl_region_info (V entries
 * of FL_REGION_INFO_FIELDS, at the place the list gives them). */
static void view_path(struct jobject *j, const char *key, const struct snapshot *s)
{
    j_str(j, key, s->path);
}

static void view_clients_used(struct jobject *j, const char *key, const struct snapshot *s)
{
    j_u64(j, key, s->n_clients);
}

static void view_token_epoch_shift(struct jobject *j, const char *key, const struct snapshot *s)
{
    (void)s;
    j_u64(j, key, FL_TOKEN_EPOCH_SHIFT);
}

static void view_created(struct jobject *j, const char *key, const struct snapshot *s)
{
    char created[64];
    format_utc_time(s->region.created_unix_ns, created, sizeof created);
    j_str(j, key, created);
}

void json_region(FILE *f, const struct snapshot *s)
{
    const fl_region_info *g = &s->region;
    struct jobject j = j_begin(f);
#define REGION_MEMBER(field, format, json, ...) j_value(&j, json, VALUE_##format(g, field));
#define REGION_VIEW(name) view_##name(&j, #name, s);
    FL_REGION_INFO_FIELDS(REGION_MEMBER, REGION_VIEW)
#undef REGION_MEMBER
#undef REGION_VIEW
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
        j_value(&j, col->json, v);
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
void status_json_array(FILE *f, const struct status_table *t, const void *rows, size_t n, bool last)
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
    status_json_array(f, &status_tables[TABLE_CLIENTS], s->clients, s->n_clients, false);
    unreg_print_json(f, &s->unreg);
    status_json_array(f, &status_tables[TABLE_LOCKS], s->locks, s->n_locks, false);
    status_json_array(f, &status_tables[TABLE_RECORDS], s->records, s->n_records, false);
    fputs("  \"skipped\": ", f);
    json_skipped(f, &s->skipped);
    fputs("\n}\n", f);
}
