/* SPDX-License-Identifier: MIT */
/*
 * epoch.c - advancing the token epoch.
 *
 * A token is epoch << 40 | counter.  The rule that keeps tokens increasing
 * across everything (I1): no token of epoch E is handed out before E is on
 * disk in the state file.  Clients never count a key into an epoch above the
 * region's floor (slot.c), and the floor is raised only here, only after the
 * durable write.  So after any crash, every token ever issued is below
 * (durable epoch + 1) << 40, and a supervisor that starts at durable + 1 is
 * above all of them, whatever state the region file came back in.
 */
#include <stdio.h>
#include <string.h>

#include "fencelockd.h"

uint64_t epoch_in_region(fl_region *r)
{
    /* relaxed: we are the only writer of the floor */
    uint64_t e = FL_TOKEN_EPOCH(atomic_load_explicit(&r->hdr->token_floor, memory_order_relaxed));
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    uint32_t used = fl__keytab_used(&t);
    for (uint32_t i = 0; i < used; i++) {
        uint64_t k = FL_TOKEN_EPOCH(fl__slot_token(r, i));
        if (k > e)
            e = k;
    }
    return e;
}

int epoch_advance(fl_region *r, const char *state_path, uint64_t next, uint64_t min_token,
                  char *err, size_t errcap)
{
    if (next > FL_EPOCH_MAX) {
        snprintf(err, errcap, "token epoch space spent (epoch %llu > %llu)",
                 (unsigned long long)next, (unsigned long long)FL_EPOCH_MAX);
        return -EOVERFLOW;
    }
    int rc = durable_store(state_path, next, err, errcap);
    if (rc)
        return rc;
    uint64_t floor = next << FL_TOKEN_EPOCH_SHIFT | 1; /* counters start at 1 */
    if (min_token > floor)
        floor = min_token;
    /* seq_cst: after the durable write (a system call, so already ordered);
     * clients read it relaxed and order tokens by their slot's CAS */
    atomic_store(&r->hdr->token_floor, floor);
    log_begin("info", "epoch_advanced");
    log_u64("epoch", next);
    log_u64("token_floor", floor);
    log_str("state_file", state_path);
    log_end();
    return 0;
}

int epoch_check_counters(fl_region *r, const char *state_path, char *err, size_t errcap)
{
    uint64_t floor = atomic_load_explicit(&r->hdr->token_floor, memory_order_relaxed);
    uint64_t epoch = FL_TOKEN_EPOCH(floor);
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    uint32_t used = fl__keytab_used(&t);
    for (uint32_t i = 0; i < used; i++) {
        uint64_t tok = fl__slot_token(r, i);
        if (FL_TOKEN_EPOCH(tok) == epoch &&
            FL_TOKEN_COUNTER(tok) >= (1ull << (FL_TOKEN_EPOCH_SHIFT - 1)))
            return epoch_advance(r, state_path, epoch + 1, 0, err, errcap);
    }
    return 0;
}
