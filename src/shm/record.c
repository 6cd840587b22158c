/* SPDX-License-Identifier: MIT */
/*
 * record.c - fenced records: commits that a stale holder cannot corrupt,
 * even when it is paused in the middle of one.
 * Its Promela model is src/shm/record.pml (ctest -R model_record): change them together.
 *
 * THE PROTOCOL
 *
 * A record's value lives in a buffer of the shared pool; the record holds
 * one 64-bit reference to its current buffer:
 *
 *     cur = (buffer + 1) << 40 | generation        (0: never committed)
 *
 * Every buffer has a state word (kind, owner client, generation):
 *
 *     FREE(g)             nobody uses it
 *     STAGING(owner, g)   owner is writing a value into it; only owner writes
 *     PUBLISHED(g)        it was made current by a commit; its header and
 *                         bytes never change while its state stays so
 *
 * A commit with token T on record R:
 *   1. claims a buffer: CAS FREE(g) -> STAGING(me, g+1), or recycles garbage
 *      (below) the same way; writes T, the length and the bytes into it;
 *   2. reads cur, then the token F and version V of the buffer cur names,
 *      then cur again: an unchanged cur proves F and V were read from the
 *      current value (cur never takes the same value twice: generations
 *      grow);
 *   3. if T < F (or T == F with FL_COMMIT_STRICT): rejects, -ESTALE;
 *   4. CAS cur from what it read to (my buffer, g+1).  Success means cur did
 *      not change since step 2, so F was still the greatest accepted token
 *      when the new value took effect: the comparison and the publication
 *      are one atomic step (I2).  On failure it goes back to step 2;
 *   5. marks its buffer PUBLISHED(g+1).
 *
 * Garbage: a PUBLISHED(g) buffer that its record's cur no longer names was
 * replaced; cur never names it again, so any committer may claim it.  The
 * committer that replaced a buffer remembers it (a process-local hint, not
 * a holding) and tries it first at its next commit, so the pool is rarely
 * scanned and an idle process holds no buffer at all.
 *
 * Readers (also on read-only mappings: no atomic write on the read path)
 * load cur, copy the named buffer with relaxed 8-byte loads, and load cur
 * again; an unchanged cur proves the buffer was current, so not claimable,
 * for the whole copy (I3).  Otherwise they retry.  The release fence a
 * claimer issues before writing into a recycled buffer makes a reader that
 * saw any of those bytes also see the cur that replaced it.
 *
 * WHAT A PAUSE OR A DEATH DOES (I2, I3, I4)
 * - Stopped anywhere in steps 1-3, then resumed after a newer commit: its
 *   CAS in step 4 fails (cur changed) and it re-reads F: rejected.  Its bytes
 *   were only ever in its own STAGING buffer, which no reader follows.
 * - Stopped forever anywhere: it holds one STAGING buffer, nothing else.
 *   Writers and readers of the record never wait for it (there is no lock).
 *   That buffer is the one thing a client holds beyond its lease: it cannot
 *   be taken back while its owner may still write into it.  The pool has
 *   --spare-buffers beyond one per record for commits in flight and such
 *   holdouts; when they are all taken, commits fail with -ENOSPC, they
 *   never wait.
 * - Stopped between steps 4 and 5: its buffer is current but still STAGING;
 *   nobody recycles a STAGING buffer, so the value stays readable.
 * - Killed anywhere: fencelockd reaps its STAGING buffers: the one cur names
 *   becomes PUBLISHED, the others FREE (fl__buffers_reap_client).  Buffers of
 *   unregistered clients (no supervisor when they opened) cannot be told
 *   apart from live ones and are never reaped: one buffer leaks per such
 *   death mid-commit.
 *
 * BINDING (I8): the first commit to a record binds it, with one CAS, to the
 * lock slot of its lease; a lease of any other slot gets -EXDEV.  A lease
 * whose token its slot never issued is refused (-EINVAL), so a corrupt or
 * forged lease cannot poison a record with a huge token.
 */
#include <string.h>
#include <sys/types.h>

#include "shm.h"

#define FL__REF_SHIFT 40

static inline uint64_t fl__ref(uint32_t buf, uint64_t gen)
{
    return ((uint64_t)buf + 1) << FL__REF_SHIFT | gen;
}
static inline uint64_t fl__buf_state(uint64_t kind, uint32_t owner, uint64_t gen)
{
    return kind << FL__BUF_KIND_SHIFT | (uint64_t)owner << FL__BUF_OWNER_SHIFT | gen;
}
static inline uint64_t fl__state_kind(uint64_t st) { return st >> FL__BUF_KIND_SHIFT; }
static inline uint32_t fl__state_owner(uint64_t st)
{
    return (uint32_t)((st >> FL__BUF_OWNER_SHIFT) & FL__BUF_OWNER_MASK);
}
static inline uint64_t fl__state_gen(uint64_t st) { return st & FL__BUF_GEN_MASK; }

/* Decode cur into buffer index and generation; false if out of range. */
static bool fl__ref_decode(const struct fl__shm *r, uint64_t cur, uint32_t *buf, uint64_t *gen)
{
    uint64_t b = (cur & ~FL__CUR_UNVOUCHED) >> FL__REF_SHIFT;
    if (b == 0 || b > r->buffer_count)
        return false;
    *buf = (uint32_t)(b - 1);
    *gen = cur & FL__BUF_GEN_MASK;
    return true;
}

/* Try to claim buffer i seen in state st for this handle.  Recycles FREE
 * buffers and PUBLISHED ones their record no longer names.  st must have
 * been loaded with acquire: PUBLISHED is stored (release) after the CAS that
 * made the buffer current, so our later read of cur sees that CAS or a later
 * value, never an older cur that would make a current buffer look like
 * garbage. */
static bool fl__buffer_claim(struct fl__shm *r, uint32_t i, uint64_t st)
{
    struct fl__buffer *b = fl__buffer_at(r, i);
    uint64_t gen = fl__state_gen(st);
    if (gen == FL__BUF_GEN_MASK)
        return false; /* generation space spent: retired for good, never reused (no ABA) */
    switch (fl__state_kind(st)) {
    case FL__BUF_FREE:
        break;
    case FL__BUF_PUBLISHED: {
        /* relaxed: the record field is immutable while the state is PUBLISHED(gen),
         * which the CAS below re-checks */
        uint32_t rec = atomic_load_explicit(&b->record, memory_order_relaxed);
        /* acquire: a cur that still names us must be seen as such */
        if (rec < r->record_capacity &&
            atomic_load_explicit(&r->records[rec].cur, memory_order_acquire) == fl__ref(i, gen))
            return false; /* the current value of its record */
        break;
    }
    default:
        return false; /* STAGING: somebody's commit in flight */
    }
    uint64_t mine = fl__buf_state(FL__BUF_STAGING, r->client, gen + 1);
    if (!atomic_compare_exchange_strong_explicit(&b->state, &st, mine, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    /* release: orders everything before (our reads of cur proving the buffer
     * garbage) before the bytes we are about to write, for readers that still
     * copy the old value (see the protocol above) */
    atomic_thread_fence(memory_order_release);
    return true;
}

/* A STAGING buffer of ours, or -ENOSPC.  Tries the buffer this handle last
 * replaced or gave back first (a hint: it is not held, anyone may claim it),
 * then scans the pool from the region-wide hint. */
static int fl__buffer_get(struct fl__shm *r, uint32_t *out)
{
    /* relaxed: a process-local hint; the claim CAS decides */
    uint32_t hint = atomic_exchange_explicit(&r->buffer_hint, 0, memory_order_relaxed);
    if (hint && hint <= r->buffer_count) {
        struct fl__buffer *b = fl__buffer_at(r, hint - 1);
        /* acquire: see fl__buffer_claim */
        if (fl__buffer_claim(r, hint - 1, atomic_load_explicit(&b->state, memory_order_acquire))) {
            *out = hint - 1;
            return 0;
        }
    }
    /* relaxed: where to start scanning, nothing more */
    uint32_t start = atomic_load_explicit(&r->hdr->buffer_hint, memory_order_relaxed);
    for (uint32_t n = 0; n < r->buffer_count; n++) {
        uint32_t i = (uint32_t)(((uint64_t)start + n) % r->buffer_count);
        struct fl__buffer *b = fl__buffer_at(r, i);
        /* acquire: see fl__buffer_claim */
        uint64_t st = atomic_load_explicit(&b->state, memory_order_acquire);
        if (fl__buffer_claim(r, i, st)) {
            atomic_store_explicit(&r->hdr->buffer_hint, i + 1, memory_order_relaxed);
            *out = i;
            return 0;
        }
    }
    return -ENOSPC;
}

/* Give back a STAGING buffer of ours that was never published, and remember
 * it as this handle's hint for the next commit. */
static void fl__buffer_put(struct fl__shm *r, uint32_t i)
{
    struct fl__buffer *b = fl__buffer_at(r, i);
    uint64_t st = atomic_load_explicit(&b->state, memory_order_relaxed);
    /* release: our writes into it happen before anyone's claim of it */
    atomic_store_explicit(&b->state, fl__buf_state(FL__BUF_FREE, 0, fl__state_gen(st)),
                          memory_order_release);
    atomic_store_explicit(&r->buffer_hint, i + 1, memory_order_relaxed);
}

/*
 * THE BUFFER SUM.  A region on disk comes back from a host crash as
 * whatever pages reached the disk, each from its own moment: a record's cur
 * may name a buffer whose header or data pages are older or newer than the
 * commit that made it current.  Each committer therefore folds what it
 * writes (record, token, length, generation, the data words) into a 64-bit
 * sum in the buffer's header, and the supervisor, when it adopts a region,
 * recomputes the sum of every current value (fl__records_vouch).  The fold
 * runs in the copy loop the commit already has, one multiply per 8 bytes;
 * readers never compute it (torn pages only exist before the supervisor
 * has readied the region, and no client opens before that).
 */
static inline uint64_t fl__sum_mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 32);
}

static inline uint64_t fl__sum_header(uint32_t record, uint64_t token, uint32_t len,
                                      uint64_t gen)
{
    uint64_t h = fl__sum_mix(0x6a09e667f3bcc908ull, (uint64_t)record << 32 | len);
    return fl__sum_mix(fl__sum_mix(h, token), gen);
}

static void fl__buffer_fill(struct fl__shm *r, uint32_t i, uint64_t gen, uint32_t record,
                            uint64_t token, const void *data, size_t len)
{
    struct fl__buffer *b = fl__buffer_at(r, i);
    /* relaxed: published by the release CAS on cur */
    atomic_store_explicit(&b->record, record, memory_order_relaxed);
    atomic_store_explicit(&b->token, token, memory_order_relaxed);
    atomic_store_explicit(&b->len, (uint32_t)len, memory_order_relaxed);
    atomic_store_explicit(&b->writer_pid, r->h.pid, memory_order_relaxed);
    uint64_t sum = fl__sum_header(record, token, (uint32_t)len, gen);
    const unsigned char *src = data;
    size_t whole = len / 8;
    for (size_t w = 0; w < whole; w++) { /* fixed-size copies: one load each */
        uint64_t v;
        memcpy(&v, src + w * 8, 8);
        atomic_store_explicit(&b->data[w], v, memory_order_relaxed);
        sum = fl__sum_mix(sum, v);
    }
    if (len % 8) {
        uint64_t v = 0;
        memcpy(&v, src + whole * 8, len % 8);
        atomic_store_explicit(&b->data[whole], v, memory_order_relaxed);
        sum = fl__sum_mix(sum, v);
    }
    atomic_store_explicit(&b->sum, sum, memory_order_relaxed);
}

/* Step 2: the greatest accepted token and version, from a validated
 * snapshot.  0 with *cur_out; -EPROTO on a corrupt reference. */
static int fl__record_current(struct fl__shm *r, struct fl__record *rec, uint64_t *cur_out,
                              uint64_t *token, uint64_t *version)
{
    for (;;) {
        /* acquire: pairs with the committer's release CAS: its buffer's header is visible */
        uint64_t cur = atomic_load_explicit(&rec->cur, memory_order_acquire);
        if (cur == 0 || (cur & FL__CUR_UNVOUCHED)) {
            /* Unvouched: the token the lost value was written with is not
             * known, but it came before the crash, and every token of this
             * boot's epochs is greater than every earlier token (I1): any
             * lease of this boot may replace it. */
            *cur_out = cur;
            *token = 0;
            *version = 0;
            return 0;
        }
        uint32_t bi = 0;
        uint64_t gen = 0;
        if (!fl__ref_decode(r, cur, &bi, &gen))
            return fl__fail(-EPROTO, "region %s: record refers to buffer %llu of %u", r->h.path,
                            (unsigned long long)(cur >> FL__REF_SHIFT), r->buffer_count);
        struct fl__buffer *b = fl__buffer_at(r, bi);
        uint64_t t = atomic_load_explicit(&b->token, memory_order_relaxed);
        uint64_t v = atomic_load_explicit(&b->version, memory_order_relaxed);
        /* acquire fence: the loads above complete before cur is re-read */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&rec->cur, memory_order_relaxed) == cur) {
            *cur_out = cur;
            *token = t;
            *version = v;
            return 0;
        }
    }
}

static int fl__commit_args(struct fl__shm *r, const fl_lease *lease, const void *data, size_t len,
                           unsigned flags)
{
    if (r->h.readonly)
        return fl__fail(-EINVAL, "fl_commit: read-only region handle");
    if (!data && len > 0)
        return fl__fail(-EINVAL, "fl_commit: data is NULL");
    if (flags & ~FL_COMMIT_STRICT)
        return fl__fail(-EINVAL, "fl_commit: unknown flags %#x", flags);
    if (len > r->record_size)
        return fl__fail(-EMSGSIZE, "fl_commit: %zu bytes exceed the record size %u", len,
                        r->record_size);
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    if (lease->slot >= fl__keytab_used(&t))
        return fl__fail(-EINVAL, "fl_commit: lease names slot %u, which this region never issued",
                        lease->slot);
    if (lease->token == 0 || lease->token > fl__slot_token(r, lease->slot))
        return fl__fail(-EINVAL, "fl_commit: token %llu was never issued by its lock",
                        (unsigned long long)lease->token);
    return 0;
}

/* Bind rec to slot on first use (I8).  0 or -EXDEV. */
static int fl__record_bind(struct fl__shm *r, struct fl__record *rec, uint32_t slot,
                           const char *record)
{
    uint32_t want = slot + 1, bound = 0;
    /* acq_rel/acquire: the binding is a plain fact, but keep it ordered
     * before our commit so no commit is ever seen on an unbound record */
    if (atomic_compare_exchange_strong_explicit(&rec->bound_slot, &bound, want,
                                                memory_order_acq_rel, memory_order_acquire) ||
        bound == want)
        return 0;
    char other[FL_KEY_MAX + 1] = "?";
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    if (bound - 1 < fl__keytab_used(&t))
        fl__key_published(&t, bound - 1, other);
    return fl__fail(-EXDEV, "record \"%s\" is fenced by key \"%s\", not by this lease's key",
                    record, other);
}

static void fl__note_rejection(struct fl__shm *r, struct fl__record *rec, uint32_t ri,
                               const fl_lease *lease, uint64_t accepted, unsigned flags)
{
    /* relaxed: counters and a last-seen sample for the status tool; fields of
     * one sample may mix under concurrent rejections */
    uint64_t n = atomic_fetch_add_explicit(&rec->rejections, 1, memory_order_relaxed);
    /* A token among the last four rejected here: a client retrying a stale
     * token instead of acquiring again (the retry-loop signal). */
    bool repeat = false;
    for (int i = 0; i < 4; i++)
        repeat |= atomic_load_explicit(&rec->recent_rejected[i], memory_order_relaxed) ==
                  lease->token;
    atomic_store_explicit(&rec->recent_rejected[n % 4], lease->token, memory_order_relaxed);
    if (repeat)
        atomic_fetch_add_explicit(&rec->repeats, 1, memory_order_relaxed);
    uint32_t op = (flags & FL_COMMIT_STRICT) ? FL__OP_STRICT_COMMIT : FL__OP_COMMIT;
    atomic_store_explicit(&rec->last_rejected_token, lease->token, memory_order_relaxed);
    atomic_store_explicit(&rec->last_rejected_accepted, accepted, memory_order_relaxed);
    atomic_store_explicit(&rec->last_rejected_pid, r->h.pid, memory_order_relaxed);
    atomic_store_explicit(&rec->last_rejected_op, op, memory_order_relaxed);
    fl__event_post(r, &(struct fl__event_data){.type = FL__EV_REJECTED,
                                               .slot = lease->slot,
                                               .record = ri + 1,
                                               .token = lease->token,
                                               .other_token = accepted,
                                               .op = op,
                                               .flags = repeat ? FL__EVF_REPEAT : 0});
}

int fl__shm_commit(fl_region *h, const fl_lease *lease, const char *record, const void *data,
              size_t len, unsigned flags, uint64_t *accepted)
{
    struct fl__shm *r = fl__shm_of(h);
    int err = fl__commit_args(r, lease, data, len, flags);
    if (err)
        return err;
    int klen = fl__key_check(record);
    if (klen < 0)
        return klen;
    /* The buffer first: a commit that cannot get one changes nothing, not
     * even the record table or a binding. */
    uint32_t mine = 0;
    if (fl__buffer_get(r, &mine) != 0)
        return fl__fail(-ENOSPC,
                        "region %s: no free commit buffer (%u buffers: current values plus "
                        "commits in flight)",
                        r->h.path, r->buffer_count);
    struct fl__keytab t;
    fl__keytab_records(r, &t);
    uint32_t ri = 0;
    err = fl__key_find_or_create(&t, record, (size_t)klen, &ri);
    if (err == -ENOSPC)
        err = fl__fail(-ENOSPC, "region %s: record table full (%u records); cannot add \"%s\"",
                       r->h.path, r->record_capacity, record);
    struct fl__record *rec = err ? NULL : &r->records[ri];
    if (!err)
        err = fl__record_bind(r, rec, lease->slot, record);
    if (err) {
        fl__buffer_put(r, mine);
        return err;
    }
    struct fl__buffer *b = fl__buffer_at(r, mine);
    /* relaxed: our own STAGING state, written by our claim */
    uint64_t my_gen = fl__state_gen(atomic_load_explicit(&b->state, memory_order_relaxed));
    fl__buffer_fill(r, mine, my_gen, ri, lease->token, data, len);
    uint64_t my_ref = fl__ref(mine, my_gen);

    for (;;) {
        uint64_t cur = 0, f = 0, v = 0;
        err = fl__record_current(r, rec, &cur, &f, &v);
        if (err) {
            fl__buffer_put(r, mine);
            return err;
        }
        if (lease->token < f || ((flags & FL_COMMIT_STRICT) && lease->token == f)) {
            fl__buffer_put(r, mine);
            fl__note_rejection(r, rec, ri, lease, f, flags);
            if (accepted)
                *accepted = f;
            return fl__fail(-ESTALE, "commit of token %llu to \"%s\" rejected: it accepted %llu",
                            (unsigned long long)lease->token, record, (unsigned long long)f);
        }
        /* relaxed: published by the CAS below */
        atomic_store_explicit(&b->version, v + 1, memory_order_relaxed);
        /* release: our buffer's bytes and header before the reference to it;
         * acquire on failure is not needed: fl__record_current re-reads */
        if (atomic_compare_exchange_strong_explicit(&rec->cur, &cur, my_ref,
                                                    memory_order_release,
                                                    memory_order_relaxed)) {
            /* Step 5.  A stop here leaves our buffer STAGING and current:
             * safe, nobody recycles STAGING buffers (see the protocol). */
            atomic_store_explicit(&b->state, fl__buf_state(FL__BUF_PUBLISHED, 0, my_gen),
                                  memory_order_release);
            atomic_fetch_add_explicit(&rec->commits, 1, memory_order_relaxed);
            /* The value we replaced is garbage now: our next commit tries
             * it first, without holding it meanwhile. */
            uint32_t old = 0;
            uint64_t old_gen = 0;
            if (fl__ref_decode(r, cur, &old, &old_gen))
                atomic_store_explicit(&r->buffer_hint, old + 1, memory_order_relaxed);
            if (accepted)
                *accepted = lease->token;
            return 0;
        }
    }
}

/* A commit by key and token: the fence compares only tokens, so these two
 * are all it needs (see the header for why that is safe).  The key is
 * looked up, never created: a key never acquired issued no token. */
int fl__shm_commit_token(fl_region *h, const char *key, uint64_t token, const char *record,
                    const void *data, size_t len, unsigned flags, uint64_t *accepted)
{
    struct fl__shm *r = fl__shm_of(h);
    int klen = fl__key_check(key);
    if (klen < 0)
        return klen;
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    uint32_t idx = 0;
    int err = fl__key_find(&t, key, (size_t)klen, &idx);
    if (err == -ENOENT)
        return fl__fail(-ENOENT, "fl_commit_token: key \"%s\" was never acquired in %s", key,
                        r->h.path);
    if (err)
        return err;
    /* fl__commit_args checks that the key issued the token: 0 < token <=
     * the newest token of the slot, exactly as for a lease. */
    const fl_lease lease = {.token = token, .slot = idx};
    return fl__shm_commit(&r->h, &lease, record, data, len, flags, accepted);
}

int fl__shm_read(fl_region *h, const char *record, void *buf, size_t cap, size_t *len,
            uint64_t *fence)
{
    struct fl__shm *r = fl__shm_of(h);
    size_t klen = strlen(record); /* api.c checked the arguments and the name */
    struct fl__keytab t;
    fl__keytab_records(r, &t);
    uint32_t ri = 0;
    int err = fl__key_find(&t, record, klen, &ri);
    if (err == -ENOENT)
        return fl__fail(-ENOENT, "record \"%s\" was never committed", record);
    if (err)
        return err;
    struct fl__record *rec = &r->records[ri];
    unsigned char *dst = buf;
    for (;;) {
        /* acquire: pairs with the committer's release CAS on cur */
        uint64_t cur = atomic_load_explicit(&rec->cur, memory_order_acquire);
        if (cur == 0)
            return fl__fail(-ENOENT, "record \"%s\" was never committed", record);
        if (cur & FL__CUR_UNVOUCHED)
            return fl__fail(-EBADMSG,
                            "region %s: record \"%s\": its value could not be vouched for "
                            "after an unclean stop (pages of a region on disk reached it from "
                            "different moments); the next commit replaces it",
                            r->h.path, record);
        uint32_t bi = 0;
        uint64_t gen = 0;
        if (!fl__ref_decode(r, cur, &bi, &gen))
            return fl__fail(-EPROTO, "region %s: record \"%s\" refers to a buffer out of range",
                            r->h.path, record);
        struct fl__buffer *b = fl__buffer_at(r, bi);
        /* relaxed loads, validated by the re-read of cur below (seqlock style) */
        uint32_t n = atomic_load_explicit(&b->len, memory_order_relaxed);
        uint64_t tok = atomic_load_explicit(&b->token, memory_order_relaxed);
        bool fits = n <= cap;
        if (n <= r->record_size && fits) {
            size_t words = n / 8;
            for (size_t w = 0; w < words; w++) {
                uint64_t v = atomic_load_explicit(&b->data[w], memory_order_relaxed);
                memcpy(dst + w * 8, &v, 8);
            }
            if (n % 8) {
                uint64_t v = atomic_load_explicit(&b->data[words], memory_order_relaxed);
                memcpy(dst + words * 8, &v, n % 8);
            }
        }
        /* acquire fence: every load above completes before cur is re-read */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&rec->cur, memory_order_relaxed) != cur)
            continue; /* replaced while we copied: the copy may be torn */
        if (n > r->record_size)
            return fl__fail(-EPROTO, "region %s: record \"%s\" has length %u > record size %u",
                            r->h.path, record, n, r->record_size);
        *len = n;
        if (!fits)
            return fl__fail(-ENOBUFS, "record \"%s\" holds %u bytes; buffer has %zu", record, n,
                            cap);
        *fence = tok;
        return 0;
    }
}

/* Release the STAGING buffers of `client` (or of every owner, if `all`). */
static uint32_t fl__buffers_reap_where(struct fl__shm *r, uint32_t client, bool all)
{
    uint32_t touched = 0;
    for (uint32_t i = 0; i < r->buffer_count; i++) {
        struct fl__buffer *b = fl__buffer_at(r, i);
        uint64_t st = atomic_load_explicit(&b->state, memory_order_acquire);
        if (fl__state_kind(st) != FL__BUF_STAGING || (!all && fl__state_owner(st) != client))
            continue;
        /* The owner is dead: this buffer can no longer become current, and
         * only its owner could have made it so. */
        uint64_t gen = fl__state_gen(st);
        uint32_t rec = atomic_load_explicit(&b->record, memory_order_relaxed);
        bool current = rec < r->record_capacity &&
                       atomic_load_explicit(&r->records[rec].cur, memory_order_acquire) ==
                           fl__ref(i, gen);
        uint64_t to = fl__buf_state(current ? FL__BUF_PUBLISHED : FL__BUF_FREE, 0, gen);
        if (atomic_compare_exchange_strong_explicit(&b->state, &st, to, memory_order_acq_rel,
                                                    memory_order_relaxed))
            touched++;
    }
    return touched;
}

uint32_t fl__buffers_reap_client(struct fl__shm *r, uint32_t client)
{
    if (client == 0)
        return 0; /* unregistered: cannot be told from a live writer (see above) */
    return fl__buffers_reap_where(r, client, false);
}

uint32_t fl__buffers_reap_all(struct fl__shm *r) { return fl__buffers_reap_where(r, 0, true); }

/* Does the buffer cur names hold what record ri's commit wrote into it? */
static bool fl__buffer_vouches(const struct fl__shm *r, uint32_t ri, uint64_t cur)
{
    uint32_t bi = 0;
    uint64_t gen = 0;
    if (!fl__ref_decode(r, cur, &bi, &gen))
        return false;
    struct fl__buffer *b = fl__buffer_at(r, bi);
    /* acquire: as a reader's (the caller re-reads cur after us) */
    uint64_t st = atomic_load_explicit(&b->state, memory_order_acquire);
    uint64_t kind = fl__state_kind(st);
    if ((kind != FL__BUF_PUBLISHED && kind != FL__BUF_STAGING) || fl__state_gen(st) != gen)
        return false;
    /* relaxed: immutable while cur names the buffer, which the caller re-checks */
    uint32_t rec = atomic_load_explicit(&b->record, memory_order_relaxed);
    uint32_t len = atomic_load_explicit(&b->len, memory_order_relaxed);
    if (rec != ri || len > r->record_size)
        return false;
    uint64_t sum =
        fl__sum_header(rec, atomic_load_explicit(&b->token, memory_order_relaxed), len, gen);
    for (size_t w = 0; w < ((size_t)len + 7) / 8; w++)
        sum = fl__sum_mix(sum, atomic_load_explicit(&b->data[w], memory_order_relaxed));
    return sum == atomic_load_explicit(&b->sum, memory_order_relaxed);
}

uint32_t fl__records_vouch(struct fl__shm *r, fl__unvouched_fn fn, void *ctx)
{
    struct fl__keytab t;
    fl__keytab_records(r, &t);
    uint32_t used = fl__keytab_used(&t), unvouched = 0;
    for (uint32_t i = 0; i < used; i++) {
        struct fl__record *rec = &r->records[i];
        for (;;) {
            /* acquire: pairs with a committer's release CAS, as in fl_read */
            uint64_t cur = atomic_load_explicit(&rec->cur, memory_order_acquire);
            if (cur == 0)
                break;
            bool ok = !(cur & FL__CUR_UNVOUCHED) && fl__buffer_vouches(r, i, cur);
            /* acquire fence: the buffer's loads complete before cur is re-read */
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&rec->cur, memory_order_relaxed) != cur)
                continue; /* a live commit replaced it: its writer vouches for it */
            if (ok)
                break;
            /* relaxed: the flag orders nothing; the CAS fails if a commit
             * replaced the value meanwhile, and we look again */
            if ((cur & FL__CUR_UNVOUCHED) ||
                atomic_compare_exchange_strong_explicit(&rec->cur, &cur,
                                                        cur | FL__CUR_UNVOUCHED,
                                                        memory_order_relaxed,
                                                        memory_order_relaxed)) {
                unvouched++;
                if (fn)
                    fn(ctx, i);
                break;
            }
        }
    }
    return unvouched;
}

int fl__shm_record_info_get(fl_region *h, uint32_t index, fl_record_info *info)
{
    struct fl__shm *r = fl__shm_of(h);
    struct fl__keytab t;
    fl__keytab_records(r, &t);
    if (index >= fl__keytab_used(&t))
        return fl__fail(-ERANGE, "record %u is beyond the %u in use", index,
                        fl__keytab_used(&t));
    memset(info, 0, sizeof *info);
    if (fl__key_published(&t, index, info->name) != 0)
        return fl__fail(-ENOENT, "record %u holds no published name", index);
    struct fl__record *rec = &r->records[index];
    /* relaxed: display only */
    uint32_t bound = atomic_load_explicit(&rec->bound_slot, memory_order_relaxed);
    struct fl__keytab lt;
    fl__keytab_locks(r, &lt);
    if (bound && bound - 1 < fl__keytab_used(&lt))
        fl__key_published(&lt, bound - 1, info->bound_key);
    uint64_t cur = 0, tok = 0, ver = 0;
    if (fl__record_current(r, rec, &cur, &tok, &ver) == 0 && (cur & FL__CUR_UNVOUCHED)) {
        info->unvouched = 1;
    } else if (cur) {
        info->accepted_token = tok;
        info->version = ver;
        uint32_t bi = 0;
        uint64_t gen = 0;
        if (fl__ref_decode(r, cur, &bi, &gen)) {
            uint32_t n = atomic_load_explicit(&fl__buffer_at(r, bi)->len, memory_order_relaxed);
            info->size = n <= r->record_size ? n : 0;
        }
    }
    info->commits = atomic_load_explicit(&rec->commits, memory_order_relaxed);
    info->rejections = atomic_load_explicit(&rec->rejections, memory_order_relaxed);
    info->last_rejected_token =
        atomic_load_explicit(&rec->last_rejected_token, memory_order_relaxed);
    info->last_rejected_pid = atomic_load_explicit(&rec->last_rejected_pid, memory_order_relaxed);
    info->last_rejected_accepted =
        atomic_load_explicit(&rec->last_rejected_accepted, memory_order_relaxed);
    info->last_rejected_op = atomic_load_explicit(&rec->last_rejected_op, memory_order_relaxed);
    info->repeats = atomic_load_explicit(&rec->repeats, memory_order_relaxed);
    return 0;
}
