/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the Prometheus text exposition of a region's counters.
 *
 * Every family has one HELP and one TYPE line, then its samples, and each
 * family's samples are together (the format requires it), so the walk over
 * keys and records is done once per family.  Keys are arbitrary bytes but
 * label values must be UTF-8: see fl__metrics_label.
 */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

void fl__metrics_label(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p == '\\') {
            fputs("\\\\", f);
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

static void sample(FILE *f, const char *name, uint64_t v)
{
    fprintf(f, "fencelock_%s %" PRIu64 "\n", name, v);
}

enum lock_field {
    L_ACQ, L_CONT, L_EXP, L_DEATH, L_RENEW, L_RENEW_FAIL, L_REL, L_REL_FAIL, L_BUSY, L_TIMEOUTS, L_HELD, L_WAIT,
    L_TOKEN
};

static uint64_t lock_value(const fl_lock_info *l, enum lock_field k)
{
    switch (k) {
    case L_ACQ: return l->acquisitions;
    case L_CONT: return l->contended;
    case L_EXP: return l->expiries_taken;
    case L_DEATH: return l->deaths;
    case L_RENEW: return l->renewals;
    case L_RENEW_FAIL: return l->renew_failed;
    case L_REL: return l->releases;
    case L_REL_FAIL: return l->release_failed;
    case L_BUSY: return l->busy;
    case L_TIMEOUTS: return l->timeouts;
    case L_HELD: return l->state == FL_LOCK_HELD;
    case L_WAIT: return l->waiters;
    case L_TOKEN: return l->token;
    }
    return 0;
}

enum record_field { R_COMMITS, R_REJ, R_REP, R_TOKEN, R_LAST_REJ, R_VERSION };

static uint64_t record_value(const fl_record_info *c, enum record_field k)
{
    switch (k) {
    case R_COMMITS: return c->commits;
    case R_REJ: return c->rejections;
    case R_REP: return c->repeats;
    case R_TOKEN: return c->accepted_token;
    case R_LAST_REJ: return c->last_rejected_token;
    case R_VERSION: return c->version;
    }
    return 0;
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
    const fl_region_info *g = &s.region;
    static const struct { const char *name, *type, *help; int field; } regionf[] = {
        {"supervisor_up", "gauge", "1 if a fencelockd serves the region.", 0},
        {"epoch", "gauge", "Current token epoch (tokens are epoch << 40 | counter).", 1},
        {"token_floor", "gauge", "Every new token is at least this.", 2},
        {"locks_used", "gauge", "Lock slots (keys) in use.", 3},
        {"lock_capacity", "gauge", "Lock slots the region holds.", 4},
        {"records_used", "gauge", "Records in use.", 5},
        {"record_capacity", "gauge", "Records the region holds.", 6},
        {"events_dropped_total", "counter",
         "Events the supervisor log never showed (ring full or a stopped client).", 7},
    };
    for (size_t i = 0; i < sizeof regionf / sizeof regionf[0]; i++) {
        uint64_t v[] = {(uint64_t)g->served, g->epoch, g->token_floor, g->locks_used,
                        g->lock_capacity, g->records_used, g->record_capacity,
                        g->events_dropped};
        family(f, regionf[i].name, regionf[i].type, regionf[i].help);
        sample(f, regionf[i].name, v[regionf[i].field]);
    }
    static const struct { const char *name, *type, *help; enum lock_field k; } lockf[] = {
        {"lock_acquisitions_total", "counter", "Successful acquisitions of the key.", L_ACQ},
        {"lock_contended_total", "counter", "Acquisitions that found the key held.", L_CONT},
        {"lock_expiries_taken_total", "counter",
         "Acquisitions that took over a lease whose holder let it expire.", L_EXP},
        {"lock_deaths_total", "counter",
         "Holdings released by the supervisor because the holder died.", L_DEATH},
        {"lock_renewals_total", "counter", "Successful lease renewals.", L_RENEW},
        {"lock_renew_failed_total", "counter", "Renewals refused: ownership was lost.",
         L_RENEW_FAIL},
        {"lock_releases_total", "counter", "Releases.", L_REL},
        {"lock_release_failed_total", "counter", "Releases refused as stale.", L_REL_FAIL},
        {"lock_busy_total", "counter", "Tries that found the key held (EBUSY).", L_BUSY},
        {"lock_timeouts_total", "counter", "Waits that ended with the key still held (ETIMEDOUT).",
         L_TIMEOUTS},
        {"lock_held", "gauge", "1 while an unexpired lease holds the key.", L_HELD},
        {"lock_waiters", "gauge", "Processes waiting for the key.", L_WAIT},
        {"lock_token", "gauge", "Latest fencing token handed out for the key.", L_TOKEN},
    };
    for (size_t i = 0; i < sizeof lockf / sizeof lockf[0]; i++) {
        family(f, lockf[i].name, lockf[i].type, lockf[i].help);
        for (size_t k = 0; k < s.nlocks; k++) {
            fprintf(f, "fencelock_%s{key=\"", lockf[i].name);
            fl__metrics_label(f, s.locks[k].key);
            fprintf(f, "\"} %" PRIu64 "\n", lock_value(&s.locks[k], lockf[i].k));
        }
    }
    static const struct { const char *name, *type, *help; enum record_field k; } recf[] = {
        {"record_commits_total", "counter", "Commits the record accepted.", R_COMMITS},
        {"record_rejections_total", "counter",
         "Commits refused because the record had accepted a newer token.", R_REJ},
        {"record_repeats_total", "counter",
         "Rejections of a token already rejected on the record: a retry loop.", R_REP},
        {"record_accepted_token", "gauge", "Greatest token the record accepted.", R_TOKEN},
        {"record_last_rejected_token", "gauge", "Token of the last rejected commit.",
         R_LAST_REJ},
        {"record_version", "gauge", "Number of accepted commits (the value's version).",
         R_VERSION},
    };
    for (size_t i = 0; i < sizeof recf / sizeof recf[0]; i++) {
        family(f, recf[i].name, recf[i].type, recf[i].help);
        for (size_t k = 0; k < s.nrecords; k++) {
            fprintf(f, "fencelock_%s{record=\"", recf[i].name);
            fl__metrics_label(f, s.records[k].name);
            fputs("\",key=\"", f);
            fl__metrics_label(f, s.records[k].bound_key);
            fprintf(f, "\"} %" PRIu64 "\n", record_value(&s.records[k], recf[i].k));
        }
    }
    free(s.locks);
    free(s.records);
    return 0;
}
