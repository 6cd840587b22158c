/* SPDX-License-Identifier: MIT */
/*
 * supervise.c - the supervisor's side of the region that belongs to no
 * other protocol: the client table, the token floor, the boot id, the run
 * state, the header's counters, and the compositions fencelockd asks for
 * (adopt a new boot, reap a client, vouch for the records).  The lock words,
 * buffers, the event ring and readiness keep their own files; this one only
 * calls them.  supervise.h says in which context each function may run.
 *
 * Orderings: the supervisor is the only writer of every field written here,
 * in one thread, so it reads them back relaxed.  Clients read the floor
 * relaxed (slot.c orders tokens by the slot's CAS); tools read the client
 * table and the counters for display.  What a client must see before it may
 * open the region (the voided leases, the floor, the vouched records) is
 * published by the release store of ready_boot (ready.c, READINESS).
 */
#include <string.h>
#include <sys/mman.h>

#include "shm.h"

_Static_assert(FL__SUP_RUN_NEVER == FL__RUN_NEVER && FL__SUP_RUN_RUNNING == FL__RUN_RUNNING &&
                   FL__SUP_RUN_CLEAN == FL__RUN_CLEAN,
               "supervise.h names the run states of format.h");
_Static_assert(FL__SUP_EVENT_REJECTED == FL__EV_REJECTED &&
                   FL__SUP_EVENT_TAKEOVER == FL__EV_TAKEOVER &&
                   FL__SUP_EVENT_ABANDONED == FL__EV_ABANDONED &&
                   FL__SUP_EVENT_REPEAT == FL__EVF_REPEAT && FL__SUP_EVENT_DIED == FL__EVF_DIED,
               "supervise.h names the event types of format.h");
_Static_assert(sizeof(((struct fl__header *)0)->boot_id) == FL__BOOT_ID_SIZE,
               "a boot id buffer holds the header's field");

/* Commit buffers beyond one per record: records plus spares stay within
 * what a buffer reference can name. */
#define FL__MAX_SPARE_BUFFERS (1u << 20)
_Static_assert(FL__MAX_RECORDS + FL__MAX_SPARE_BUFFERS <= FL__MAX_BUFFERS,
               "the greatest region still names every buffer");

void fl__params_limits(struct fl__params *min, struct fl__params *max)
{
    *min = (struct fl__params){.locks = 1, .records = 1, .record_size = FL__MIN_RECORD_SIZE,
                               .clients = 1, .spare_buffers = 1};
    *max = (struct fl__params){.locks = FL__MAX_LOCKS, .records = FL__MAX_RECORDS,
                               .record_size = FL__MAX_RECORD_SIZE, .clients = FL__MAX_CLIENTS,
                               .spare_buffers = FL__MAX_SPARE_BUFFERS};
}

/* ---- the mapping ---- */

fl_region *fl__sup_handle(const struct fl__shm *r) { return (fl_region *)&r->h; }

int fl__sup_region_fd(const struct fl__shm *r) { return r->fd; }

void fl__sup_region_mapping(const struct fl__shm *r, const void **base, size_t *size)
{
    *base = r->base;
    *size = r->size;
}

int fl__sup_region_flush(struct fl__shm *r)
{
    return msync(r->base, r->size, MS_SYNC) == 0 ? 0 : fl__neg_errno();
}

/* ---- serving ---- */

uint32_t fl__sup_supervisor_pid(const struct fl__shm *r)
{
    /* relaxed: display only (the serving lock says who serves) */
    return atomic_load_explicit(&r->hdr->supervisor_pid, memory_order_relaxed);
}

void fl__sup_set_supervisor_pid(struct fl__shm *r, uint32_t pid)
{
    /* relaxed: display only */
    atomic_store_explicit(&r->hdr->supervisor_pid, pid, memory_order_relaxed);
}

enum fl__sup_run fl__sup_last_run(const struct fl__shm *r)
{
    /* relaxed: written by supervisors only, read once at start */
    uint32_t run = atomic_load_explicit(&r->hdr->run_state, memory_order_relaxed);
    return run == FL__RUN_CLEAN     ? FL__SUP_RUN_CLEAN
           : run == FL__RUN_RUNNING ? FL__SUP_RUN_RUNNING
                                    : FL__SUP_RUN_NEVER;
}

void fl__sup_mark_running(struct fl__shm *r, uint64_t started_unix_ns)
{
    /* relaxed: display only */
    atomic_store_explicit(&r->hdr->started_unix_ns, started_unix_ns, memory_order_relaxed);
    atomic_store_explicit(&r->hdr->run_state, FL__RUN_RUNNING, memory_order_relaxed);
}

void fl__sup_mark_clean(struct fl__shm *r, uint64_t clean_unix_ns)
{
    /* relaxed: display only; the caller flushes before and after */
    atomic_store_explicit(&r->hdr->clean_unix_ns, clean_unix_ns, memory_order_relaxed);
    atomic_store_explicit(&r->hdr->run_state, FL__RUN_CLEAN, memory_order_relaxed);
}

/* ---- a new boot ---- */

int fl__sup_adopt_boot(struct fl__shm *r, fl__freed_fn fn, void *ctx, struct fl__sup_boot *out)
{
    memset(out, 0, sizeof *out);
    int err = fl__read_boot_id(out->now);
    if (err)
        return err; /* nothing touched: fail closed (I11) */
    out->tag = fl__boot_tag(out->now);
    if (fl__region_boot_is(r, out->now, out->previous))
        return 0;
    out->new_boot = true;
    out->leases_voided = fl__slots_void_all(r, fn, ctx);
    for (uint32_t i = 1; i < r->client_capacity; i++)
        /* relaxed: no process of this boot runs on the region yet (START) */
        atomic_store_explicit(&r->clients[i].state, FL__CLIENT_FREE, memory_order_relaxed);
    out->buffers_released = fl__buffers_reap_all(r);
    /* Last: a supervisor killed before this line finds the old boot again
     * and does all of the above again, which is idempotent. */
    memcpy(r->hdr->boot_id, out->now, FL__BOOT_ID_SIZE);
    return 0;
}

/* ---- the token epoch ---- */

uint64_t fl__sup_token_floor(const struct fl__shm *r)
{
    /* relaxed: the supervisor is its only writer */
    return atomic_load_explicit(&r->hdr->token_floor, memory_order_relaxed);
}

int fl__sup_raise_floor(struct fl__shm *r, uint64_t floor)
{
    if (floor <= fl__sup_token_floor(r))
        return -ERANGE;
    /* seq_cst: after the durable write (a system call, so already ordered);
     * clients read it relaxed and order tokens by their slot's CAS */
    atomic_store(&r->hdr->token_floor, floor);
    return 0;
}

uint32_t fl__sup_lock_count(struct fl__shm *r)
{
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    return fl__keytab_used(&t);
}

uint64_t fl__sup_lock_token(struct fl__shm *r, uint32_t slot)
{
    return slot < fl__sup_lock_count(r) ? fl__slot_token(r, slot) : 0;
}

/* Copy entry idx of t's key into out: 0, or -ENOENT and "". */
static int fl__sup_key(const struct fl__keytab *t, uint32_t idx, char out[FL_KEY_MAX + 1])
{
    out[0] = '\0';
    if (idx >= fl__keytab_used(t))
        return -ENOENT;
    return fl__key_published(t, idx, out);
}

int fl__sup_lock_key(struct fl__shm *r, uint32_t slot, char out[FL_KEY_MAX + 1])
{
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    return fl__sup_key(&t, slot, out);
}

int fl__sup_record_key(struct fl__shm *r, uint32_t record, char out[FL_KEY_MAX + 1])
{
    struct fl__keytab t;
    fl__keytab_records(r, &t);
    return fl__sup_key(&t, record, out);
}

/* ---- records ---- */

uint32_t fl__sup_vouch_records(struct fl__shm *r, fl__unvouched_fn fn, void *ctx)
{
    uint32_t n = fl__records_vouch(r, fn, ctx);
    /* relaxed: display only */
    atomic_store_explicit(&r->hdr->records_unvouched, n, memory_order_relaxed);
    return n;
}

/* ---- the client table ---- */

uint32_t fl__sup_client_capacity(const struct fl__shm *r) { return r->client_capacity; }

bool fl__sup_client_read(const struct fl__shm *r, uint32_t i, struct fl__sup_client *out)
{
    if (i == 0 || i >= r->client_capacity)
        return false;
    struct fl__client *e = &r->clients[i];
    /* acquire: pairs with the release store of the state that published
     * the fields (ours, or an earlier supervisor's) */
    if (atomic_load_explicit(&e->state, memory_order_acquire) == FL__CLIENT_FREE)
        return false;
    out->pid = atomic_load_explicit(&e->pid, memory_order_relaxed);
    out->uid = atomic_load_explicit(&e->uid, memory_order_relaxed);
    out->client_id = atomic_load_explicit(&e->client_id, memory_order_relaxed);
    out->start_time = atomic_load_explicit(&e->start_time, memory_order_relaxed);
    return true;
}

bool fl__sup_client_alive(const struct fl__shm *r, uint32_t i)
{
    if (i == 0 || i >= r->client_capacity)
        return false;
    struct fl__client *e = &r->clients[i];
    /* relaxed: the supervisor is the table's only writer */
    pid_t pid = (pid_t)atomic_load_explicit(&e->pid, memory_order_relaxed);
    uint64_t start = atomic_load_explicit(&e->start_time, memory_order_relaxed);
    uint64_t now_start = fl__process_start_time(pid);
    return now_start != 0 && now_start == start;
}

int fl__sup_client_attach(struct fl__shm *r, uint32_t i, pid_t pid, uid_t uid, uint64_t *id)
{
    if (i == 0 || i >= r->client_capacity)
        return -EINVAL;
    errno = 0;
    uint64_t start_time = fl__process_start_time(pid);
    if (start_time == 0 && (errno == EMFILE || errno == ENFILE))
        return -errno;
    struct fl__client *e = &r->clients[i];
    /* relaxed: a counter only the supervisor advances */
    uint64_t cid = atomic_fetch_add_explicit(&r->hdr->next_client_id, 1, memory_order_relaxed);
    /* relaxed stores, published by the release store of the state */
    atomic_store_explicit(&e->pid, (uint32_t)pid, memory_order_relaxed);
    atomic_store_explicit(&e->uid, (uint32_t)uid, memory_order_relaxed);
    atomic_store_explicit(&e->client_id, cid, memory_order_relaxed);
    atomic_store_explicit(&e->start_time, start_time, memory_order_relaxed);
    atomic_store_explicit(&e->state, FL__CLIENT_ATTACHED, memory_order_release);
    *id = cid;
    return 0;
}

void fl__sup_client_adopt(struct fl__shm *r, uint32_t i)
{
    if (i == 0 || i >= r->client_capacity)
        return;
    /* release: as the store that attached it */
    atomic_store_explicit(&r->clients[i].state, FL__CLIENT_ADOPTED, memory_order_release);
}

void fl__sup_client_reap(struct fl__shm *r, uint32_t i, fl__freed_fn fn, void *ctx,
                         struct fl__sup_reaped *out)
{
    *out = (struct fl__sup_reaped){0};
    if (i == 0 || i >= r->client_capacity)
        return;
    out->locks = fl__slots_reap_client(r, i, fn, ctx);
    out->buffers = fl__buffers_reap_client(r, i);
    /* release: the reaping above happens before the entry reads free (we
     * hand it out again ourselves, but tools read the table) */
    atomic_store_explicit(&r->clients[i].state, FL__CLIENT_FREE, memory_order_release);
}

void fl__sup_count_refusal(struct fl__shm *r)
{
    /* relaxed: a counter for the status tool; the supervisor is its only writer */
    atomic_fetch_add_explicit(&r->hdr->clients_refused, 1, memory_order_relaxed);
}

/* ---- events ---- */

uint64_t fl__sup_events_dropped(const struct fl__shm *r)
{
    /* relaxed: a counter, compared with the last value seen */
    return atomic_load_explicit(&r->hdr->events_dropped, memory_order_relaxed);
}

uint64_t fl__sup_host_now_ns(const struct fl__shm *r)
{
    /* host time = our time - our namespace's offset (clock.c) */
    return fl__monotonic_ns(NULL) - (uint64_t)r->timens_ns;
}
