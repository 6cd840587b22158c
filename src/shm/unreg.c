/* SPDX-License-Identifier: MIT */
/*
 * unreg.c - the header's table of unregistered clients (format.h, 328..1359).
 *
 * UNREGISTERED CLIENTS (I12).  A client that opened a region but could not
 * register with its supervisor (none running, a socket it may not connect
 * to, a supervisor that did not answer) works on, but its locks outlive its
 * death until their leases end.  That must not go unseen: its fl_open notes
 * pid, uid, start time and the reason in a small table in the region's
 * header, and `fencelock status` (fl_unregistered_info_get) lists the
 * entries whose process still runs.
 *
 * The table is display only, written by any client and trusted by nobody:
 * FL__UNREG_COUNT entries, claimed round-robin by a fetch-add of unreg_next,
 * so the latest 32 unregistered opens are kept and the oldest overwritten.
 * Each entry is a seqlock: the writer stores seq = 0, fills the fields,
 * then stores its claim number + 1 (release); a reader copies the fields
 * between two loads of seq and keeps the copy only if both are the same
 * nonzero value.  Two writers 32 claims apart on one entry at the same
 * moment can mix fields; a reader may then show a wrong pid or reason, never
 * crash, and nothing but the display depends on it.  fl_close clears its own
 * entry (compare-and-swap of the seq it wrote), so a process that closed its
 * unregistered handle and runs on is not listed.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/clocks.h"
#include "shm.h"

void fl__unreg_note(struct fl__shm *r, int err)
{
    if (r->h.readonly)
        return;
    /* relaxed: claiming a distinct entry needs no ordering */
    uint32_t claim = atomic_fetch_add_explicit(&r->hdr->unreg_next, 1, memory_order_relaxed);
    uint32_t seq = claim + 1 ? claim + 1 : 1; /* never 0 */
    struct fl__unreg *e = &r->hdr->unreg[claim % FL__UNREG_COUNT];
    atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
    /* release fence: a reader that sees a field below also sees seq = 0
     * (or a later seq), so it never pairs our fields with an older seq */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&e->pid, r->h.pid, memory_order_relaxed);
    atomic_store_explicit(&e->uid, (uint32_t)getuid(), memory_order_relaxed);
    atomic_store_explicit(&e->reason, (uint32_t)(err < 0 ? -err : err), memory_order_relaxed);
    atomic_store_explicit(&e->start_time, fl__process_start_time((pid_t)r->h.pid),
                          memory_order_relaxed);
    atomic_store_explicit(&e->time_unix_ns, fl__wall_clock_ns() /* display only */,
                          memory_order_relaxed);
    /* release: the fields above are visible to a reader that sees seq */
    atomic_store_explicit(&e->seq, seq, memory_order_release);
    r->unreg_entry = claim % FL__UNREG_COUNT;
    r->unreg_seq = seq;
}

void fl__unreg_clear(struct fl__shm *r)
{
    if (!r->unreg_seq || r->h.readonly)
        return;
    struct fl__unreg *e = &r->hdr->unreg[r->unreg_entry % FL__UNREG_COUNT];
    uint32_t want = r->unreg_seq;
    /* relaxed: display only; if another client has claimed the entry since,
     * its seq differs and the entry stays its */
    atomic_compare_exchange_strong_explicit(&e->seq, &want, 0, memory_order_relaxed,
                                            memory_order_relaxed);
    r->unreg_seq = 0;
}

int fl__shm_unregistered_info_get(fl_region *h, uint32_t index, fl_unregistered_info *info)
{
    struct fl__shm *r = fl__shm_of(h);
    if (index >= FL__UNREG_COUNT)
        return fl__fail(-ERANGE, "unregistered-client index %u out of 0..%u", index,
                        FL__UNREG_COUNT - 1);
    memset(info, 0, sizeof *info);
    const struct fl__unreg *e = &r->hdr->unreg[index];
    /* acquire: pairs with the writer's release store of seq */
    uint32_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
    uint32_t pid = atomic_load_explicit(&e->pid, memory_order_relaxed);
    uint32_t uid = atomic_load_explicit(&e->uid, memory_order_relaxed);
    uint32_t reason = atomic_load_explicit(&e->reason, memory_order_relaxed);
    uint64_t start = atomic_load_explicit(&e->start_time, memory_order_relaxed);
    uint64_t when = atomic_load_explicit(&e->time_unix_ns, memory_order_relaxed);
    /* acquire fence: the loads above complete before seq is read again, so
     * an unchanged seq means no writer began (its seq = 0) in between */
    atomic_thread_fence(memory_order_acquire);
    uint32_t again = atomic_load_explicit(&e->seq, memory_order_relaxed);
    if (seq == 0 || seq != again)
        return fl__fail(-ENOENT, "unregistered-client entry %u is empty", index);
    /* Untrusted: a pid that cannot be a process, an errno out of range. */
    if (pid == 0 || pid > (1u << 22))
        return fl__fail(-ENOENT, "unregistered-client entry %u is not valid", index);
    if (reason == 0 || reason > 4095)
        reason = EIO;
    uint64_t now_start = fl__process_start_time((pid_t)pid);
    if (now_start == 0 || (start != 0 && now_start != start))
        return fl__fail(-ENOENT, "unregistered client %u (entry %u) no longer runs", pid,
                        index);
    info->pid = pid;
    info->uid = uid;
    info->reason = -(int32_t)reason;
    info->start_time = start;
    info->opened_unix_ns = when;
    return 0;
}
