/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the Prometheus text exposition of a region's counters.
 *
 * The families are the fields of src/common/info_fields.h that have a
 * metric_type, in the order of the lists: the region's, then one sample per
 * key, then one per record.  Every family has one HELP and one TYPE line,
 * then its samples, and each family's samples are together (the format
 * requires it), so the walk over keys and records is done once per family.
 * Keys are arbitrary bytes but label values must be UTF-8, and two keys
 * must never give the same label (a series twice is invalid text): see
 * fl__metrics_label.
 */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "info_fields.h"

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    size_t n = (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && p[0] < 0xc2) || (n == 4 && p[0] > 0xf4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
        return 0; /* overlong, or a surrogate */
    if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
        return 0;
    return n;
}

/* The label value is the key with a backslash doubled and \xNN standing
 * for each byte that is not UTF-8 text (a control byte other than newline,
 * or not part of a valid sequence); then escaped as the format says.  The
 * doubling is what keeps distinct keys distinct: the byte 0xff is \xff, the
 * four characters \xff are \\xff, and a label reads back to one key only. */
void fl__metrics_label(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p == '\\') {
            fputs("\\\\\\\\", f); /* \\ in the value, each escaped */
            p++;
        } else if (*p == '"') {
            fputs("\\\"", f);
            p++;
        } else if (*p == '\n') {
            fputs("\\n", f);
            p++;
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\\\x%02x", *p++);
        } else {
            size_t n = utf8_len(p);
            if (n == 0) {
                fprintf(f, "\\\\x%02x", *p++);
            } else {
                fwrite(p, 1, n, f);
                p += n;
            }
        }
    }
}

struct snapshot {
    fl_region_info region;
    fl_lock_info *locks;
    size_t nlocks;
    fl_record_info *records;
    size_t nrecords;
};

static int take(fl_region *r, struct snapshot *s)
{
    int err = fl_region_info_get(r, &s->region);
    if (err)
        return err;
    s->locks = calloc(s->region.locks_used + 1, sizeof *s->locks);
    s->records = calloc(s->region.records_used + 1, sizeof *s->records);
    if (!s->locks || !s->records)
        return -ENOMEM;
    for (uint32_t i = 0; i < s->region.locks_used; i++)
        if (fl_lock_info_get(r, i, &s->locks[s->nlocks]) == 0)
            s->nlocks++;
    for (uint32_t i = 0; i < s->region.records_used; i++)
        if (fl_record_info_get(r, i, &s->records[s->nrecords]) == 0)
            s->nrecords++;
    return 0;
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP fencelock_%s %s\n# TYPE fencelock_%s %s\n", name, help, name, type);
}

/* The start of a sample, up to its value: the name and the labels. */
static void region_sample(FILE *f, const char *name, const fl_region_info *g)
{
    (void)g;
    fprintf(f, "fencelock_%s", name);
}

static void lock_sample(FILE *f, const char *name, const fl_lock_info *l)
{
    fprintf(f, "fencelock_%s{key=\"", name);
    fl__metrics_label(f, l->key);
    fputs("\"}", f);
}

static void record_sample(FILE *f, const char *name, const fl_record_info *c)
{
    fprintf(f, "fencelock_%s{record=\"", name);
    fl__metrics_label(f, c->name);
    fputs("\",key=\"", f);
    fl__metrics_label(f, c->bound_key);
    fputs("\"}", f);
}

/* A field as a sample, by its format (info_fields.h).  A format missing
 * here cannot be a metric: giving one a metric_type fails to compile. */
#define NUMBER_NUM(x, f) ((uint64_t)(x)->f)
#define NUMBER_FLAG(x, f) ((uint64_t)((x)->f != 0))
#define NUMBER_LOCK_STATE(x, f) ((uint64_t)((x)->f == FL_LOCK_HELD))
#define NUMBER_NUM_HELD NUMBER_NUM /* the NUM_* differ in tables only */
#define NUMBER_NUM_HOLDER NUMBER_NUM
#define NUMBER_NUM_STALE NUMBER_NUM
#define NUMBER_NUM_REJECTED NUMBER_NUM

/* One family of the entries whose metric_type is COUNTER or GAUGE: HELP,
 * TYPE, then a sample of each of the n rows; NONE writes nothing. */
#define FAMILY_NONE(...)
#define FAMILY_COUNTER(...) FAMILY("counter", __VA_ARGS__)
#define FAMILY_GAUGE(...) FAMILY("gauge", __VA_ARGS__)
#define FAMILY(type, name, help, field, format, sample, rows, n)                                \
    family(f, name, type, help);                                                              \
    for (size_t k = 0; k < (n); k++) {                                                        \
        sample(f, name, &(rows)[k]);                                                          \
        fprintf(f, " %" PRIu64 "\n", NUMBER_##format(&(rows)[k], field));                     \
    }

int fl__metrics_write(FILE *f, fl_region *r)
{
    struct snapshot s;
    memset(&s, 0, sizeof s);
    int err = take(r, &s);
    if (err) {
        free(s.locks);
        free(s.records);
        return err;
    }
#define REGION_FAMILY(field, format, json, type, name, help)                                    \
    FAMILY_##type(name, help, field, format, region_sample, &s.region, 1)
#define NO_VIEW(name)
#define LOCK_FAMILY(field, format, column, json, flags, chelp, type, name, help)                 \
    FAMILY_##type(name, help, field, format, lock_sample, s.locks, s.nlocks)
#define RECORD_FAMILY(field, format, column, json, flags, chelp, type, name, help)               \
    FAMILY_##type(name, help, field, format, record_sample, s.records, s.nrecords)
    FL_REGION_INFO_FIELDS(REGION_FAMILY, NO_VIEW)
    FL_LOCK_INFO_FIELDS(LOCK_FAMILY)
    FL_RECORD_INFO_FIELDS(RECORD_FAMILY)
#undef REGION_FAMILY
#undef NO_VIEW
#undef LOCK_FAMILY
#undef RECORD_FAMILY
    free(s.locks);
    free(s.records);
    return 0;
}
