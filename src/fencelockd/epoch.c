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

#include "../common/clocks.h"
#include "fencelockd.h"

/* The greatest epoch found in the region: the floor's and every key's. */
static uint64_t epoch_in_region(struct fl__shm *r)
{
    uint64_t e = FL_TOKEN_EPOCH(fl__sup_token_floor(r));
    uint32_t used = fl__sup_lock_count(r);
    for (uint32_t i = 0; i < used; i++) {
        uint64_t k = FL_TOKEN_EPOCH(fl__sup_lock_token(r, i));
        if (k > e)
            e = k;
    }
    return e;
}

/* Make epoch `next` durable, then raise the region's floor to it (and to
 * min_token).  0, or -errno after its line (the floor is unchanged). */
static int epoch_advance(struct fl__shm *r, const char *state_path, uint64_t next,
                         uint64_t min_token)
{
    if (next > FL_EPOCH_MAX) {
        log_errorf("epoch_space_spent",
                   "token epoch space spent (epoch %llu > %llu): no token greater than every "
                   "earlier one can be made: create a new region for new keys",
                   (unsigned long long)next, (unsigned long long)FL_EPOCH_MAX);
        return -EOVERFLOW;
    }
    int err = durable_store(state_path, next);
    if (err)
        return err;
    uint64_t floor = next << FL_TOKEN_EPOCH_SHIFT | 1; /* counters start at 1 */
    if (min_token > floor)
        floor = min_token;
    err = fl__sup_raise_floor(r, floor);
    if (err) {
        /* Cannot happen: next is above every epoch in the region.  Said
         * rather than assumed: a floor that went down would repeat tokens. */
        log_errorf("floor_not_raised", "token floor %llu is not above the region's %llu",
                   (unsigned long long)floor, (unsigned long long)fl__sup_token_floor(r));
        return err;
    }
    log_begin("info", "epoch_advanced");
    log_u64("epoch", next);
    log_u64("token_floor", floor);
    log_str("state_file", state_path);
    log_end();
    return 0;
}

int epoch_start(struct fl__shm *r, const char *state_path, uint64_t min_token)
{
    enum fl__sup_run run = fl__sup_last_run(r);
    const char *found = run == FL__SUP_RUN_CLEAN     ? "clean_shutdown"
                        : run == FL__SUP_RUN_RUNNING ? "unclean_shutdown"
                                                     : "never_served";
    uint64_t durable = 0;
    int err = durable_load(state_path, &durable);
    if (err == -ENOENT) {
        log_begin("warn", "no_durable_state");
        log_str("state_file", state_path);
        log_str("message", "no state file: starting above the tokens found in the region");
        log_end();
    } else if (err) {
        return err; /* durable_load said why */
    }
    uint64_t in_region = epoch_in_region(r);
    uint64_t base = durable > in_region ? durable : in_region;
    if (FL_TOKEN_EPOCH(min_token) > base)
        base = FL_TOKEN_EPOCH(min_token);
    /* Never wrap (I1): the next epoch must exist. */
    if (base >= FL_EPOCH_MAX) {
        log_errorf("epoch_space_spent",
                   "token epoch space spent: the greatest epoch handed out is %llu (state "
                   "file %s: %llu, region: %llu), the last epoch is %llu; no token greater than "
                   "every earlier one can be made: create a new region for new keys",
                   (unsigned long long)base, state_path, (unsigned long long)durable,
                   (unsigned long long)in_region, (unsigned long long)FL_EPOCH_MAX);
        return -EOVERFLOW;
    }
    log_begin("info", "found");
    log_str("region", fl_region_path(fl__sup_handle(r)));
    log_str("last_run", found);
    log_u64("durable_epoch", durable);
    log_u64("region_epoch", in_region);
    log_end();
    err = epoch_advance(r, state_path, base + 1, min_token + (min_token ? 1 : 0));
    if (err)
        return err;
    fl__sup_mark_running(r, fl__wall_clock_ns());
    return 0;
}

int epoch_check_counters(struct fl__shm *r, const char *state_path)
{
    uint64_t epoch = FL_TOKEN_EPOCH(fl__sup_token_floor(r));
    uint32_t used = fl__sup_lock_count(r);
    for (uint32_t i = 0; i < used; i++) {
        uint64_t tok = fl__sup_lock_token(r, i);
        if (FL_TOKEN_EPOCH(tok) == epoch &&
            FL_TOKEN_COUNTER(tok) >= (1ull << (FL_TOKEN_EPOCH_SHIFT - 1)))
            return epoch_advance(r, state_path, epoch + 1, 0);
    }
    return 0;
}
