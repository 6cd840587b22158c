/* SPDX-License-Identifier: MIT */
/*
 * worker.c - a chaos worker and the final phase (see chaos.h).
 *
 * A worker loops until its end time: acquire a random key with a random
 * short lease (one in twenty long) and a random timeout (try, bounded, or
 * forever); then a few
 * operations while holding it: commits of self-checking values to the key's
 * records (sometimes FL_COMMIT_STRICT, rarely with another key's lease to
 * probe I8), reads of any record, renewals, checks, and "work" (a sleep,
 * sometimes past the lease, as a paused or slow holder would); then release,
 * or let the lease run out.  Every call is logged before and after it.
 * The controller's SIGSTOP/SIGKILL land anywhere in this loop.
 */
#include "chaos.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * CH_S + (uint64_t)ts.tv_nsec;
}

/* Log fields are separated by spaces: free text gets underscores. */
static void underscores(char *out, size_t cap, const char *in)
{
    size_t n = 0;
    for (; in[n] && n + 1 < cap; n++)
        out[n] = in[n] == ' ' || in[n] == '\n' ? '_' : in[n];
    out[n] = '\0';
}

struct wstate {
    const struct ch_config *c;
    ch_log log;
    fl_region *r;
    uint32_t wid;
    uint64_t seq; /* commits made so far: (wid, seq) names every value */
    ch_rng rng;
    bool bound[CH_MAX_RECORDS]; /* records known to be bound (seen committed) */
    unsigned char buf[65536];
};

#define BEGIN(w, fmt, ...) \
    ch_log_line(&(w)->log, "B %" PRIu64 " %" PRIu64 " " fmt, (w)->log.op, ch_now(), __VA_ARGS__)
#define END(w, fmt, ...) \
    ch_log_line(&(w)->log, "A %" PRIu64 " %" PRIu64 " " fmt, (w)->log.op++, ch_now(), __VA_ARGS__)

static int do_acquire(struct wstate *w, int key, uint64_t lease_ns, int64_t timeout, fl_lease *l)
{
    char name[64];
    ch_key_name(name, sizeof name, key);
    BEGIN(w, "acq key=%d lease=%" PRIu64 " to=%" PRId64, key, lease_ns, timeout);
    uint64_t c0 = cpu_ns();
    int rc = fl_acquire(w->r, name, lease_ns, timeout, l);
    uint64_t c1 = cpu_ns();
    if (rc == 0)
        END(w, "acq key=%d rc=0 tok=%" PRIu64 " dl=%" PRIu64 " fl=%u cpu=%" PRIu64, key, l->token,
            l->deadline_ns, l->flags, c1 - c0);
    else
        END(w, "acq key=%d rc=%d cpu=%" PRIu64 " err=%s", key, rc, c1 - c0, fl_err_name(rc));
    return rc;
}

static int do_commit(struct wstate *w, int key, int rec, const fl_lease *l, bool strict,
                     bool xkey)
{
    char name[64];
    ch_rec_name(name, sizeof name, rec);
    size_t len = (size_t)ch_rng_range(&w->rng, CH_VAL_MIN, (uint64_t)w->c->record_size);
    uint64_t seq = ++w->seq;
    uint64_t sum = ch_value_make(w->buf, len, w->wid, (uint32_t)rec, seq, l->token);
    BEGIN(w, "commit key=%d rec=%d tok=%" PRIu64 " seq=%" PRIu64 " len=%zu sum=%" PRIu64
             " strict=%d xkey=%d",
          key, rec, l->token, seq, len, sum, strict, xkey);
    uint64_t acc = 0;
    int rc = fl_commit(w->r, l, name, w->buf, len, strict ? FL_COMMIT_STRICT : 0, &acc);
    END(w, "commit rec=%d rc=%d acc=%" PRIu64 " err=%s", rec, rc, acc, rc ? fl_err_name(rc) : "-");
    if (rc == 0)
        w->bound[rec] = true;
    return rc;
}

static int do_read(struct wstate *w, int rec)
{
    char name[64];
    ch_rec_name(name, sizeof name, rec);
    BEGIN(w, "read rec=%d", rec);
    size_t len = 0;
    uint64_t fence = 0;
    int rc = fl_read(w->r, name, w->buf, sizeof w->buf, &len, &fence);
    if (rc != 0) {
        END(w, "read rec=%d rc=%d err=%s", rec, rc, fl_err_name(rc));
        return rc;
    }
    struct ch_value v = {0};
    const char *why = ch_value_parse(w->buf, len, &v);
    if (!why) {
        END(w, "read rec=%d rc=0 fence=%" PRIu64 " len=%zu w=%u vrec=%u seq=%" PRIu64
               " vtok=%" PRIu64 " sum=%" PRIu64 " ok=1",
            rec, fence, len, v.wid, v.rec, v.seq, v.token, v.sum);
        w->bound[rec] = true;
    } else {
        /* Torn or foreign bytes: log what was read, as hex, for the report. */
        char hex[2 * 1024 + 1];
        size_t n = len < 1024 ? len : 1024;
        for (size_t i = 0; i < n; i++)
            snprintf(hex + 2 * i, 3, "%02x", w->buf[i]);
        hex[2 * n] = '\0';
        char reason[128];
        underscores(reason, sizeof reason, why);
        END(w, "read rec=%d rc=0 fence=%" PRIu64 " len=%zu ok=0 why=%s hex=%s", rec, fence, len,
            reason, hex);
    }
    return 0;
}

static int do_renew(struct wstate *w, int key, fl_lease *l, uint64_t lease_ns)
{
    BEGIN(w, "renew key=%d tok=%" PRIu64 " lease=%" PRIu64, key, l->token, lease_ns);
    int rc = fl_renew(w->r, l, lease_ns);
    if (rc == 0)
        END(w, "renew key=%d rc=0 dl=%" PRIu64, key, l->deadline_ns);
    else
        END(w, "renew key=%d rc=%d err=%s", key, rc, fl_err_name(rc));
    return rc;
}

static int do_check(struct wstate *w, int key, const fl_lease *l)
{
    BEGIN(w, "check key=%d tok=%" PRIu64, key, l->token);
    int rc = fl_check(w->r, l);
    END(w, "check key=%d rc=%d", key, rc);
    return rc;
}

static int do_release(struct wstate *w, int key, const fl_lease *l)
{
    BEGIN(w, "release key=%d tok=%" PRIu64, key, l->token);
    int rc = fl_release(w->r, l);
    END(w, "release key=%d rc=%d err=%s", key, rc, rc ? fl_err_name(rc) : "-");
    return rc;
}

static void do_work(struct wstate *w, uint64_t ns)
{
    BEGIN(w, "work ns=%" PRIu64, ns);
    ch_sleep_ns(ns);
    END(w, "work ns=%" PRIu64, ns);
}

static int open_region(struct wstate *w)
{
    for (int attempt = 0; attempt < 200; attempt++) {
        BEGIN(w, "open pid=%d", (int)getpid());
        int rc = fl_open(w->c->region, &w->r);
        if (rc == 0) {
            END(w, "open rc=0 reg=%d", fl_region_registered(w->r));
            return 0;
        }
        char msg[256];
        underscores(msg, sizeof msg, fl_last_error());
        END(w, "open rc=%d err=%s msg=%s", rc, fl_err_name(rc), msg);
        ch_sleep_ns(20 * CH_MS);
    }
    return -1;
}

int ch_worker(const struct ch_config *c, int wid, uint64_t end_ns)
{
    static struct wstate w; /* the buffer is large: not on the stack */
    memset(&w, 0, sizeof w);
    w.c = c;
    w.wid = (uint32_t)wid;
    ch_rng_seed(&w.rng, c->seed, 1000 + (uint64_t)wid);
    char path[600];
    snprintf(path, sizeof path, "%s/w%d.log", c->dir, wid);
    if (ch_log_open(&w.log, path) != 0)
        return 10;
    if (open_region(&w) != 0)
        return 11;
    int nrec = c->keys * c->rpk;
    /* Leases this worker dropped (let expire) and may still hold: a wait of
     * its own on such a key would be -EDEADLK (fl_acquire's own-key rule). */
    static fl_lease dropped[CH_MAX_KEYS];
    static bool has_dropped[CH_MAX_KEYS];
    while (ch_now() < end_ns) {
        int key = (int)ch_rng_below(&w.rng, (uint64_t)c->keys);
        /* One lease in twenty is long (10..20 leases): a kill of its holder
         * must be detected by the supervisor long before it would expire (I5). */
        uint64_t lease = ch_rng_chance(&w.rng, 5)
                             ? ch_rng_range(&w.rng, 10 * c->lease_ns, 20 * c->lease_ns)
                             : ch_rng_range(&w.rng, c->lease_ns / 2, 2 * c->lease_ns);
        int64_t timeout;
        unsigned pick = (unsigned)ch_rng_below(&w.rng, 100);
        if (pick < 15)
            timeout = 0;
        else if (pick < 65)
            timeout = (int64_t)ch_rng_range(&w.rng, c->lease_ns / 2, 4 * c->lease_ns);
        else if (pick < 90)
            timeout = (int64_t)ch_rng_range(&w.rng, 4 * c->lease_ns, 20 * c->lease_ns);
        else
            timeout = FL_WAIT_FOREVER;
        fl_lease l;
        if (has_dropped[key] && timeout != 0) {
            /* As before the rule: wait until our dropped lease has run out
             * (or was taken over), then wait for the key. */
            while (fl_check(w.r, &dropped[key]) == 0)
                ch_sleep_ns(100 * 1000);
            has_dropped[key] = false;
        }
        int rc = do_acquire(&w, key, lease, timeout, &l);
        if (rc == 0)
            has_dropped[key] = false;
        if (rc != 0) {
            ch_sleep_ns(ch_rng_range(&w.rng, 0, 3 * CH_MS));
            continue;
        }
        int nops = (int)ch_rng_range(&w.rng, 1, 6);
        for (int i = 0; i < nops; i++) {
            unsigned a = (unsigned)ch_rng_below(&w.rng, 100);
            if (a < 45) {
                int rec = key * c->rpk + (int)ch_rng_below(&w.rng, (uint64_t)c->rpk);
                do_commit(&w, key, rec, &l, ch_rng_chance(&w.rng, 20), false);
            } else if (a < 48) {
                /* I8 probe: a lease of this key on a record bound to another key. */
                int rec = (int)ch_rng_below(&w.rng, (uint64_t)nrec);
                if (rec / c->rpk != key && w.bound[rec])
                    do_commit(&w, key, rec, &l, false, true);
            } else if (a < 68) {
                do_read(&w, (int)ch_rng_below(&w.rng, (uint64_t)nrec));
            } else if (a < 78) {
                do_renew(&w, key, &l, ch_rng_range(&w.rng, c->lease_ns / 2, 2 * c->lease_ns));
            } else if (a < 83) {
                do_check(&w, key, &l);
            } else if (a < 95) {
                do_work(&w, ch_rng_range(&w.rng, 0, lease / 2));
            } else {
                /* A slow holder: past its lease, then it carries on writing. */
                do_work(&w, lease + ch_rng_range(&w.rng, 0, 2 * lease));
            }
        }
        if (ch_rng_chance(&w.rng, 85))
            do_release(&w, key, &l);
        else {
            ch_log_line(&w.log, "N %" PRIu64 " %" PRIu64 " drop key=%d tok=%" PRIu64, w.log.op,
                        ch_now(), key, l.token); /* let it expire */
            dropped[key] = l;
            has_dropped[key] = true;
        }
        ch_sleep_ns(ch_rng_range(&w.rng, 0, 3 * CH_MS));
    }
    BEGIN(&w, "close n=%d", 0);
    fl_close(w.r);
    END(&w, "close n=%d", 0);
    return 0;
}

/* ---- the final phase -------------------------------------------------------- */

int ch_final(const struct ch_config *c)
{
    static struct wstate w;
    memset(&w, 0, sizeof w);
    w.c = c;
    w.wid = CH_FINAL_WID;
    ch_rng_seed(&w.rng, c->seed, 999);
    char path[600];
    snprintf(path, sizeof path, "%s/final.log", c->dir);
    if (ch_log_open(&w.log, path) != 0)
        return 10;
    if (open_region(&w) != 0)
        return 11;
    fl_region_info ri;
    if (fl_region_info_get(w.r, &ri) == 0)
        ch_log_line(&w.log, "I 0 %" PRIu64 " region floor=%" PRIu64 " epoch=%" PRIu64
                            " locks=%u records=%u buffers=%u served=%d",
                    ch_now(), ri.token_floor, ri.epoch, ri.locks_used, ri.records_used,
                    ri.buffer_count, ri.served);
    /* Every lock: free, or held by a lease of its own (no worker is alive). */
    for (uint32_t i = 0; i < ri.locks_used; i++) {
        fl_lock_info li;
        int rc = fl_lock_info_get(w.r, i, &li);
        if (rc != 0) {
            ch_log_line(&w.log, "I 0 %" PRIu64 " lockinfo index=%u rc=%d", ch_now(), i, rc);
            continue;
        }
        ch_log_line(&w.log,
                    "I 0 %" PRIu64 " lockinfo index=%u key=%s state=%d token=%" PRIu64
                    " holder=%u left=%" PRId64 " waiters=%u last_release=%u acquisitions=%" PRIu64
                    " deaths=%" PRIu64 " expiries=%" PRIu64,
                    ch_now(), i, li.key, li.state, li.token, li.holder_pid, li.lease_left_ns,
                    li.waiters, li.last_release, li.acquisitions, li.deaths, li.expiries_taken);
    }
    for (uint32_t i = 0; i < ri.records_used; i++) {
        fl_record_info rf;
        if (fl_record_info_get(w.r, i, &rf) != 0)
            continue;
        ch_log_line(&w.log,
                    "I 0 %" PRIu64 " recinfo name=%s bound=%s accepted=%" PRIu64
                    " version=%" PRIu64 " commits=%" PRIu64 " rejections=%" PRIu64,
                    ch_now(), rf.name, rf.bound_key[0] ? rf.bound_key : "-", rf.accepted_token,
                    rf.version, rf.commits, rf.rejections);
    }
    /* Every key can be taken, every record read (the final values) and
     * rewritten (no commit buffer leaked for good), then read back. */
    int failures = 0;
    for (int key = 0; key < c->keys; key++) {
        fl_lease l;
        int rc = do_acquire(&w, key, 10 * CH_S, (int64_t)(4 * c->lease_ns + c->slack_ns), &l);
        if (rc != 0) {
            failures++;
            continue;
        }
        for (int j = 0; j < c->rpk; j++)
            do_read(&w, key * c->rpk + j);
        for (int j = 0; j < c->rpk; j++) {
            int rec = key * c->rpk + j;
            if (do_commit(&w, key, rec, &l, true, false) != 0)
                failures++;
            do_read(&w, rec);
        }
        if (do_release(&w, key, &l) != 0)
            failures++;
    }
    BEGIN(&w, "close n=%d", 0);
    fl_close(w.r);
    END(&w, "close n=%d", 0);
    return failures ? 1 : 0;
}
