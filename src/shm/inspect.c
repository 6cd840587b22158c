/* SPDX-License-Identifier: MIT */
/*
 * inspect.c - the read-only inspection of a region for tools: its header
 * (fl_region_info_get), a lock slot (fl_lock_info_get: its pair, counters
 * and holder fields, as slot.c's state machine leaves them; slot.c, THE
 * STATE PAIR and COUNTERS) and its client table (fl_client_info_get).  The
 * record view lives beside the code that owns those words (record.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"
#include "arch/pair.h" /* fl__pair_load */

int fl__shm_region_info_get(fl_region *h, fl_region_info *info)
{
    struct fl__shm *r = fl__shm_of(h);
    memset(info, 0, sizeof *info);
    info->format_version = FL__FORMAT_VERSION;
    info->lock_capacity = r->lock_capacity;
    info->record_capacity = r->record_capacity;
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    info->locks_used = fl__keytab_used(&t);
    fl__keytab_records(r, &t);
    info->records_used = fl__keytab_used(&t);
    info->record_size = r->record_size;
    info->buffer_count = r->buffer_count;
    info->client_capacity = r->client_capacity - 1;
    info->file_size = r->size;
    info->created_unix_ns = r->hdr->created_unix_ns;
    /* relaxed: a snapshot for display; nothing is ordered by it */
    info->token_floor = atomic_load_explicit(&r->hdr->token_floor, memory_order_relaxed);
    info->epoch = FL_TOKEN_EPOCH(info->token_floor);
    info->supervisor_pid = atomic_load_explicit(&r->hdr->supervisor_pid, memory_order_relaxed);
    info->run_state = atomic_load_explicit(&r->hdr->run_state, memory_order_relaxed);
    info->started_unix_ns = atomic_load_explicit(&r->hdr->started_unix_ns, memory_order_relaxed);
    info->clean_unix_ns = atomic_load_explicit(&r->hdr->clean_unix_ns, memory_order_relaxed);
    info->events_dropped = atomic_load_explicit(&r->hdr->events_dropped, memory_order_relaxed);
    memcpy(info->boot_id, r->hdr->boot_id, sizeof info->boot_id);
    info->boot_id[sizeof info->boot_id - 1] = '\0';
    info->same_boot = fl__same_boot(r) ? 1 : 0;
    char boot[FL__BOOT_ID_SIZE];
    /* acquire: as in fl__await_ready */
    info->ready = fl__read_boot_id(boot) == 0 &&
                  atomic_load_explicit(&r->hdr->ready_boot, memory_order_acquire) ==
                      fl__boot_tag(boot);
    info->records_unvouched =
        atomic_load_explicit(&r->hdr->records_unvouched, memory_order_relaxed);
    info->clients_refused = atomic_load_explicit(&r->hdr->clients_refused, memory_order_relaxed);
    info->served = fl__region_served(r) ? 1 : 0;
    return 0;
}

int fl__shm_lock_info_get(fl_region *h, uint32_t index, fl_lock_info *info)
{
    struct fl__shm *r = fl__shm_of(h);
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    if (index >= fl__keytab_used(&t))
        return fl__fail(-ERANGE, "lock slot %u is beyond the %u in use", index,
                        fl__keytab_used(&t));
    memset(info, 0, sizeof *info);
    if (fl__key_published(&t, index, info->key) != 0)
        return fl__fail(-ENOENT, "lock slot %u holds no published key", index);
    struct fl__slot *sl = fl__slot_at(r, index);
    /* The counters before the pair: a release counted between the two
     * reads (by an acquisition after it) can then be missed, never counted
     * twice (slot.c, COUNTERS).  relaxed: display only. */
    uint64_t c[FL__C_COUNT];
    for (int i = 0; i < FL__C_COUNT; i++)
        c[i] = atomic_load_explicit(&sl->counters[i], memory_order_relaxed);
    uint64_t s = 0, l = 0;
    fl__pair_load(&sl->pair, &s, &l);
    uint64_t now = fl__now(r);
    info->token = s >> FL__TOKEN_SHIFT;
    if (s & FL__HELD) {
        int64_t left = (int64_t)(fl__deadline_ns(r, l) - now);
        bool void_boot = r->other_boot;
        info->state = (left > 0 && !void_boot) ? FL_LOCK_HELD : FL_LOCK_EXPIRED;
        info->lease_left_ns = void_boot ? -1 : left;
        info->holder_client = fl__owner(l);
    } else {
        info->state = FL_LOCK_FREE;
        if (l & FL__FREED_BY_DEATH)
            info->last_release = FL_LEASE_OWNER_DIED;
        else if (l & FL__FREED_VOID)
            info->last_release = FL_LEASE_EXPIRED;
    }
    /* relaxed: display only */
    info->holder_pid = atomic_load_explicit(&sl->holder_pid, memory_order_relaxed);
    info->holder_client_id = atomic_load_explicit(&sl->holder_client_id, memory_order_relaxed);
    info->waiters = atomic_load_explicit(&sl->waiters, memory_order_relaxed);
    info->acquisitions = c[FL__C_ACQUISITIONS];
    info->contended = c[FL__C_CONTENDED];
    info->expiries_taken = c[FL__C_EXPIRIES_TAKEN];
    info->deaths = c[FL__C_DEATHS];
    info->renewals = c[FL__C_RENEWALS];
    info->renew_failed = c[FL__C_RENEW_FAILED];
    /* The last holding's release is counted by the next acquisition: a
     * free pair with no FREED_* mark after a token was issued is one more. */
    info->releases = c[FL__C_RELEASES] + (!(s & FL__HELD) && l == 0 && info->token != 0);
    info->release_failed = c[FL__C_RELEASE_FAILED];
    info->busy = c[FL__C_BUSY];
    info->timeouts = c[FL__C_TIMEOUTS];
    info->last_stale_token = atomic_load_explicit(&sl->last_stale_token, memory_order_relaxed);
    info->last_stale_pid = atomic_load_explicit(&sl->last_stale_pid, memory_order_relaxed);
    info->last_stale_op = atomic_load_explicit(&sl->last_stale_op, memory_order_relaxed);
    return 0;
}

int fl__shm_client_info_get(fl_region *h, uint32_t index, fl_client_info *info)
{
    struct fl__shm *r = fl__shm_of(h);
    if (index == 0 || index >= r->client_capacity)
        return fl__fail(-ERANGE, "client index %u out of 1..%u", index, r->client_capacity - 1);
    memset(info, 0, sizeof *info);
    struct fl__client *e = &r->clients[index];
    /* acquire: the supervisor fills the entry before it publishes the state */
    uint32_t state = atomic_load_explicit(&e->state, memory_order_acquire);
    if (state != FL__CLIENT_ATTACHED && state != FL__CLIENT_ADOPTED)
        return fl__fail(-ENOENT, "client table entry %u is free", index);
    info->index = index;
    info->pid = atomic_load_explicit(&e->pid, memory_order_relaxed);
    info->uid = atomic_load_explicit(&e->uid, memory_order_relaxed);
    info->attached = state == FL__CLIENT_ATTACHED;
    info->client_id = atomic_load_explicit(&e->client_id, memory_order_relaxed);
    return 0;
}
