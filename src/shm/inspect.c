/* SPDX-License-Identifier: MIT */
/*
 * inspect.c - the read-only inspection of a region for tools: its header
 * (fl_region_info_get) and its client table (fl_client_info_get).  The lock
 * and record views live beside the code that owns those words (slot.c,
 * record.c).
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
