/* SPDX-License-Identifier: MIT */
/*
 * events.c - the event ring: clients tell the supervisor of fencing
 * rejections and lease takeovers without a system call and without ever
 * waiting for it.
 *
 * A bounded ring of FL__EVENT_COUNT entries in the region; many producers
 * (any client), one consumer (fencelockd).  Position p lives in entry
 * p % count, in round r = p / count, and the entry's seq word says where it
 * is in its cycle (zero-filled at creation = free in round 0):
 *
 *     seq == 2r       free for position p
 *     seq == 2r + 1   published by the producer of p
 *     seq == 2r + 2   read (or skipped) by the consumer: free for p + count
 *
 * Producer: read head p; if its entry is free for p, CAS head p -> p + 1 to
 * claim it, fill the fields, CAS seq 2r -> 2r + 1 (release).  If the entry
 * still holds round r - 1 the ring is full: the event is dropped (counted),
 * never waited for.  Counters in slots and records are exact either way;
 * events are only what the log shows.
 *
 * Consumer: read entries in order while they are published.  A position
 * claimed but not published for a second belongs to a producer that was
 * stopped or killed between claim and publish: the consumer skips it with a
 * CAS 2r -> 2r + 2, so that producer's late publish CAS fails and it cannot
 * step on the entry's next round (its late field stores can still garble
 * that one log line; nothing else reads events).
 */
#include <string.h>

#include "shm.h"

static unsigned fl__event_shift(const struct fl__shm *r)
{
    return (unsigned)__builtin_ctz(r->event_mask + 1);
}

void fl__event_post(struct fl__shm *r, const struct fl__event_data *d)
{
    struct fl__header *h = r->hdr;
    unsigned shift = fl__event_shift(r);
    /* relaxed: the claim CAS below decides; seq (acquire) orders the entry */
    uint64_t pos = atomic_load_explicit(&h->event_head, memory_order_relaxed);
    struct fl__event *e;
    uint64_t round;
    /* Bounded: on a corrupt ring (a seq ahead of a head that never moves)
     * an unbounded loop would hang the client; after this many rounds of
     * contention the event is dropped instead (I9). */
    for (int tries = 0;; tries++) {
        if (tries == 64) {
            atomic_fetch_add_explicit(&h->events_dropped, 1, memory_order_relaxed);
            return;
        }
        e = &r->events[pos & r->event_mask];
        round = pos >> shift;
        /* acquire: the consumer's release of this entry (its reads are done) */
        uint64_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
        if (seq == 2 * round) {
            if (atomic_compare_exchange_weak_explicit(&h->event_head, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
            continue; /* pos now holds the head that beat us */
        }
        if (seq < 2 * round) { /* the consumer has not freed it: full */
            atomic_fetch_add_explicit(&h->events_dropped, 1, memory_order_relaxed);
            return;
        }
        pos = atomic_load_explicit(&h->event_head, memory_order_relaxed);
    }
    /* relaxed stores, published by the release CAS of seq */
    /* on the host's clock, as the supervisor reads it (we may be in a time
     * namespace: clock.c) */
    atomic_store_explicit(&e->time_ns, fl__now(r) - (uint64_t)r->timens_ns,
                          memory_order_relaxed);
    atomic_store_explicit(&e->type, d->type, memory_order_relaxed);
    atomic_store_explicit(&e->pid, r->h.pid, memory_order_relaxed);
    atomic_store_explicit(&e->slot, d->slot, memory_order_relaxed);
    atomic_store_explicit(&e->record, d->record, memory_order_relaxed);
    atomic_store_explicit(&e->token, d->token, memory_order_relaxed);
    atomic_store_explicit(&e->other_token, d->other_token, memory_order_relaxed);
    atomic_store_explicit(&e->late_ns, d->late_ns, memory_order_relaxed);
    atomic_store_explicit(&e->op, d->op, memory_order_relaxed);
    atomic_store_explicit(&e->flags, d->flags, memory_order_relaxed);
    uint64_t want = 2 * round;
    atomic_compare_exchange_strong_explicit(&e->seq, &want, 2 * round + 1, memory_order_release,
                                            memory_order_relaxed);
}

uint32_t fl__events_drain(struct fl__shm *r, struct fl__event_reader *rd, fl__event_fn fn, void *ctx)
{
    struct fl__header *h = r->hdr;
    unsigned shift = fl__event_shift(r);
    uint32_t n = 0;
    /* At most one ring's worth per call: the supervisor's loop stays
     * responsive, and a corrupt ring cannot keep it here. */
    for (uint32_t step = 0; step <= r->event_mask; step++) {
        uint64_t pos = atomic_load_explicit(&h->event_tail, memory_order_relaxed);
        struct fl__event *e = &r->events[pos & r->event_mask];
        uint64_t round = pos >> shift;
        /* acquire: pairs with the producer's release CAS: its fields are visible */
        uint64_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
        if (seq == 2 * round + 1) {
            struct fl__event_data d = {
                .type = atomic_load_explicit(&e->type, memory_order_relaxed),
                .pid = atomic_load_explicit(&e->pid, memory_order_relaxed),
                .slot = atomic_load_explicit(&e->slot, memory_order_relaxed),
                .record = atomic_load_explicit(&e->record, memory_order_relaxed),
                .token = atomic_load_explicit(&e->token, memory_order_relaxed),
                .other_token = atomic_load_explicit(&e->other_token, memory_order_relaxed),
                .late_ns = atomic_load_explicit(&e->late_ns, memory_order_relaxed),
                .op = atomic_load_explicit(&e->op, memory_order_relaxed),
                .flags = atomic_load_explicit(&e->flags, memory_order_relaxed),
                .time_ns = atomic_load_explicit(&e->time_ns, memory_order_relaxed),
            };
            /* release: our reads above are done before producers reuse it */
            atomic_store_explicit(&e->seq, 2 * round + 2, memory_order_release);
            atomic_store_explicit(&h->event_tail, pos + 1, memory_order_relaxed);
            rd->stuck_pos = UINT64_MAX;
            fn(ctx, &d);
            n++;
            continue;
        }
        if (seq == 2 * round && pos < atomic_load_explicit(&h->event_head, memory_order_relaxed)) {
            /* Claimed, not yet published. */
            uint64_t now = fl__now(r);
            if (rd->stuck_pos != pos) {
                rd->stuck_pos = pos;
                rd->stuck_since = now;
                break;
            }
            if (now - rd->stuck_since < FL__NS_PER_S)
                break;
            uint64_t want = 2 * round;
            if (atomic_compare_exchange_strong_explicit(&e->seq, &want, 2 * round + 2,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire)) {
                atomic_fetch_add_explicit(&h->events_dropped, 1, memory_order_relaxed);
                atomic_store_explicit(&h->event_tail, pos + 1, memory_order_relaxed);
                rd->stuck_pos = UINT64_MAX;
            }
            continue; /* skipped, or published just now: look again */
        }
        break; /* empty */
    }
    return n;
}
