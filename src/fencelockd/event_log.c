/* SPDX-License-Identifier: MIT */
/*
 * event_log.c - turning the clients' event ring into log lines: each fencing
 * rejection and each takeover of an expired lease, and a warning when a
 * client keeps resubmitting a token that was already rejected (a retry loop
 * that should have acquired again).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clocks.h"
#include "../common/op_name.h"
#include "fencelockd.h"

/* Warn about one (pid, record, token) retry loop once, not at every retry. */
#define WARNED_SLOTS 64

struct warned {
    uint32_t pid, record;
    uint64_t token;
};

struct event_log {
    struct fl__shm *r;
    struct fl__event_reader reader;
    uint64_t dropped_seen;
    struct warned warned[WARNED_SLOTS];
    unsigned next_warned;
};

int event_log_new(struct fl__shm *r, struct event_log **out)
{
    struct event_log *l = calloc(1, sizeof *l);
    if (!l) {
        log_error("out_of_memory", "cannot allocate the event log");
        return -ENOMEM;
    }
    l->r = r;
    l->reader.stuck_pos = UINT64_MAX;
    l->dropped_seen = fl__sup_events_dropped(r);
    *out = l;
    return 0;
}

void event_log_free(struct event_log *l) { free(l); }

/* Names from shared memory: bounds-checked, published entries only ("" for
 * any other: a name the log cannot vouch for is not printed). */
static void key_name(struct fl__shm *r, uint32_t slot, char out[FL_KEY_MAX + 1])
{
    (void)fl__sup_lock_key(r, slot, out);
}

/* record: index + 1, 0 for none (fl__event_data). */
static void record_name(struct fl__shm *r, uint32_t record, char out[FL_KEY_MAX + 1])
{
    out[0] = '\0';
    if (record > 0)
        (void)fl__sup_record_key(r, record - 1, out);
}

static bool already_warned(struct event_log *l, const struct fl__event_data *d)
{
    for (unsigned i = 0; i < WARNED_SLOTS; i++) {
        const struct warned *w = &l->warned[i];
        if (w->pid == d->pid && w->record == d->record && w->token == d->token)
            return true;
    }
    l->warned[l->next_warned++ % WARNED_SLOTS] =
        (struct warned){.pid = d->pid, .record = d->record, .token = d->token};
    return false;
}

/* When the event happened, on the wall clock: the ring records monotonic
 * time, the log shows wall time. */
static uint64_t event_unix_ns(const struct fl__shm *r, const struct fl__event_data *d)
{
    uint64_t wall = fl__wall_clock_ns(); /* display only */
    uint64_t mono = fl__sup_host_now_ns(r); /* host time, as d's */
    uint64_t age = mono > d->time_ns ? mono - d->time_ns : 0;
    return wall > age ? wall - age : wall;
}

static void on_event(void *ctx, const struct fl__event_data *d)
{
    struct event_log *l = ctx;
    uint64_t when = event_unix_ns(l->r, d);
    char key[FL_KEY_MAX + 1], record[FL_KEY_MAX + 1];
    key_name(l->r, d->slot, key);
    if (d->type == FL__SUP_EVENT_TAKEOVER) {
        log_begin_at("info", "lease_takeover", when);
        log_str("key", key);
        log_u64("token", d->token);
        log_u64("previous_token", d->token ? d->other_token : 0);
        log_u64("late_ns", d->late_ns);
        log_u64("pid", d->pid);
        log_end();
        return;
    }
    if (d->type == FL__SUP_EVENT_ABANDONED) {
        log_begin_at("info", "lock_released_by_death", when);
        log_str("key", key);
        log_u64("token", d->token);
        if (d->flags & FL__SUP_EVENT_DIED) { /* a waiter saw the holder's life word die */
            log_u64("freed_by_pid", d->pid);
            log_str("reason", "died");
        } else {
            log_u64("pid", d->pid);
            log_str("reason", "closed");
        }
        log_end();
        return;
    }
    if (d->type != FL__SUP_EVENT_REJECTED)
        return;
    record_name(l->r, d->record, record);
    uint64_t generation = fl__sup_lock_token(l->r, d->slot); /* 0 for a bad index */
    bool repeat = d->flags & FL__SUP_EVENT_REPEAT;
    log_begin_at("info", "fencing_rejection", when);
    log_str("key", key);
    if (d->record)
        log_str("record", record);
    log_u64("rejected_token", d->token);
    log_u64("latest_accepted_token", d->other_token);
    log_u64("generation", generation);
    const char *op = fl__op_name(d->op);
    log_str("operation", op ? op : "unknown");
    log_u64("pid", d->pid);
    log_bool("repeat", repeat);
    log_end();
    if (repeat && !already_warned(l, d)) {
        log_begin_at("warn", "retry_loop", when);
        log_u64("pid", d->pid);
        log_str("key", key);
        log_str("record", record);
        log_u64("token", d->token);
        log_str("message", "a client resubmits a token that was already rejected; it must "
                           "stop, acquire again and recompute instead");
        log_end();
    }
}

void event_log_drain(struct event_log *l)
{
    fl__events_drain(l->r, &l->reader, on_event, l);
    uint64_t dropped = fl__sup_events_dropped(l->r);
    if (dropped != l->dropped_seen) {
        log_begin("warn", "events_dropped");
        log_u64("count", dropped - l->dropped_seen);
        log_u64("total", dropped);
        log_str("message", "the event ring overflowed or a client stopped while posting; "
                           "counters are exact, only these log lines are missing");
        log_end();
        l->dropped_seen = dropped;
    }
}
