/* SPDX-License-Identifier: MIT */
/*
 * keys.c - the key index: names to lock slots (and record names to records).
 *
 * DESIGN: an open-addressing hash table of 32-bit buckets beside an array of
 * entries, each entry carrying its own key bytes.  A bucket holds the top 8
 * bits of the key's hash and entry + 1 (24 bits); 0 is empty.  The hash bits
 * let a probe pass over 255 of 256 other keys without touching their entry
 * (a cache miss each, and a TLB miss in a large region).
 * Entries are handed out by one counter and never freed; buckets go from
 * empty to full once and never change again.
 *
 * Creating a key:
 *   1. take an unused entry (bump `next`, bounded by capacity: -ENOSPC);
 *   2. write the key bytes and hash into it (nobody else can see it yet);
 *   3. walk the key's probe sequence: at the first empty bucket, CAS it from
 *      0 to our entry (release: publishes step 2).
 *   If a bucket on the way holds the same key, somebody created it first:
 *   use theirs and keep our entry as this process's spare for next time.
 *
 * Why no lock is needed, and what a pause does (I4):
 * - All creators of one key walk the same probe sequence, and a bucket once
 *   filled never changes, so the first CAS into that sequence wins and every
 *   other creator meets the winner's entry before any empty bucket: a key can
 *   never get two entries (two token sequences for one key would break I1).
 * - A creator stopped forever after step 1 or 2 holds one invisible entry: it
 *   costs one unit of capacity and blocks nobody.  Stopped after step 3, its
 *   key is complete and usable by everybody.
 * - Lookups never wait: they read buckets and immutable entry keys only.
 * Shared memory is untrusted: bucket values are bounds-checked against the
 * entries handed out, key lengths are clamped, probes are bounded.
 */
#include <string.h>

#include "shm.h"

/*
 * THE KEY HASH (format 5).  Eight bytes at a time: each little-endian word
 * of the key is folded into the state by a 64 x 64 -> 128-bit multiply whose
 * halves are xored (one `mul`, about 4 cycles); the length seeds the state.
 * Formats up to 4 hashed byte by byte with FNV-1a (a dependent multiply per
 * byte: 17 of them for a 17-byte key), the largest share of a lookup after
 * the clock read (docs/benchmarks.md).  The 32 bits kept are the xor of the two
 * halves: the low bits pick the home bucket, the top 8 become the bucket's
 * tag.  Quality: keys are chosen by trusted programs, not by an adversary;
 * a collision costs a probe, never correctness (keys are compared in full).
 *
 * Loads never reach past the key's last byte (the caller's string may end
 * at a page boundary) and never assemble bytes in memory: a tail built by
 * byte stores and read back as one word stalls the load on store
 * forwarding (about 12 cycles).  Instead the last word is one 8-byte load
 * ending at the last byte, shifted right past the bytes already hashed;
 * keys shorter than 8 bytes are put together in registers from two
 * overlapping 4-byte loads, or from the first, middle and last byte.
 * memcpy() of a constant size is how C spells an unaligned load; it
 * compiles to one mov.
 */
static inline uint64_t fl__load8(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* n = 1..7 bytes at p as a word, zero above them (little-endian). */
static inline uint64_t fl__load_short(const unsigned char *p, size_t n)
{
    if (n >= 4) { /* two 4-byte loads; where they overlap they hold the same bytes */
        uint32_t lo, hi;
        memcpy(&lo, p, sizeof lo);
        memcpy(&hi, p + n - 4, sizeof hi);
        return (uint64_t)lo | (uint64_t)hi << (8 * (n - 4));
    }
    return (uint64_t)p[0] | (uint64_t)p[n / 2] << (8 * (n / 2)) |
           (uint64_t)p[n - 1] << (8 * (n - 1));
}

/* The last 1..8 bytes of a key of len >= 8 bytes that start at p + done,
 * as a word: one load of the key's last 8 bytes, shifted past those before
 * p + done (already hashed or compared). */
static inline uint64_t fl__load_last(const unsigned char *p, size_t len, size_t done)
{
    return fl__load8(p + len - 8) >> (8 * (8 - (len - done)));
}

static inline uint64_t fl__fold(uint64_t x)
{
    unsigned __int128 m = (unsigned __int128)x * 0x9e3779b97f4a7c15ull;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

/* len is 1..FL_KEY_MAX (fl__key_check). */
static inline __attribute__((always_inline)) uint32_t fl__hash(const char *key, size_t len)
{
    const unsigned char *p = (const unsigned char *)key;
    uint64_t h = 0xcbf29ce484222325ull ^ len;
    if (len < 8) {
        h = fl__fold(h ^ fl__load_short(p, len));
    } else {
        size_t i = 0;
        for (; len - i > 8; i += 8)
            h = fl__fold(h ^ fl__load8(p + i));
        h = fl__fold(h ^ fl__load_last(p, len, i));
    }
    return (uint32_t)(h ^ (h >> 32));
}

/* a and b hold len (1..FL_KEY_MAX) bytes each: equal?  The same loads as
 * the hash (the common case: one or three words). */
static inline bool fl__bytes_equal(const char *a, const char *b, size_t len)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    if (len < 8)
        return fl__load_short(x, len) == fl__load_short(y, len);
    size_t i = 0;
    for (; len - i > 8; i += 8)
        if (fl__load8(x + i) != fl__load8(y + i))
            return false;
    return fl__load8(x + len - 8) == fl__load8(y + len - 8);
}

#define FL__BUCKET_ENTRY_MASK 0xffffffu
static inline uint32_t fl__bucket_tag(uint32_t hash) { return hash & 0xff000000u; }

static struct fl__key *fl__entry_key(const struct fl__keytab *t, uint32_t idx)
{
    return (struct fl__key *)(void *)(t->entries + (size_t)idx * t->stride + t->key_offset);
}

static inline void fl__keytab_of_locks(struct fl__shm *r, struct fl__keytab *t)
{
    t->entries = (char *)r->slots;
    t->stride = sizeof(struct fl__slot);
    t->key_offset = offsetof(struct fl__slot, key);
    t->capacity = r->lock_capacity;
    t->index = r->lock_index;
    t->index_mask = r->lock_index_mask;
    t->next = &r->hdr->next_lock;
    t->spare = &r->spare_slot;
}

void fl__keytab_locks(struct fl__shm *r, struct fl__keytab *t) { fl__keytab_of_locks(r, t); }

void fl__keytab_records(struct fl__shm *r, struct fl__keytab *t)
{
    t->entries = (char *)r->records;
    t->stride = sizeof(struct fl__record);
    t->key_offset = offsetof(struct fl__record, key);
    t->capacity = r->record_capacity;
    t->index = r->record_index;
    t->index_mask = r->record_index_mask;
    t->next = &r->hdr->next_record;
    t->spare = &r->spare_record;
}

uint32_t fl__keytab_used(const struct fl__keytab *t)
{
    /* relaxed: a count for bounds, not a publication; entries are published
     * through the index buckets (acquire) */
    uint32_t n = atomic_load_explicit(t->next, memory_order_relaxed);
    return n < t->capacity ? n : t->capacity;
}

static inline __attribute__((always_inline)) bool
fl__key_equal(const struct fl__key *k, const char *key, size_t len, uint32_t hash)
{
    /* The entry was published with release; our acquire load of the bucket
     * makes its bytes visible.  Plain reads: they never change after that. */
    return k->hash == hash && k->len == len && fl__bytes_equal(k->bytes, key, len);
}

/* Walk key's probe sequence. Returns 0 with *idx when found; -ENOENT with
 * *empty_at = first empty bucket; -EPROTO on corruption.  Inlined: in
 * fl__lock_find_or_create the table's stride and key offset are then
 * constants. */
static inline __attribute__((always_inline)) int fl__probe(const struct fl__keytab *t, const char *key, size_t len, uint32_t hash,
                     uint32_t *idx, uint32_t *empty_at)
{
    uint32_t used = fl__keytab_used(t);
    uint32_t b = hash & t->index_mask;
    for (uint32_t n = 0; n <= t->index_mask; n++, b = (b + 1) & t->index_mask) {
        /* acquire: pairs with the creator's release CAS, so the entry's key
         * bytes written before publication are visible */
        uint32_t bucket = atomic_load_explicit(&t->index[b], memory_order_acquire);
        if (bucket == 0) {
            *empty_at = b;
            return -ENOENT;
        }
        uint32_t v = bucket & FL__BUCKET_ENTRY_MASK;
        if (v == 0 || v > t->capacity)
            return fl__fail(-EPROTO, "key index bucket %u refers to entry %u of %u", b, v,
                            t->capacity);
        if (v > used) {
            /* Published entries were handed out first; re-read the counter
             * once in case it raced ahead of our first read. */
            used = fl__keytab_used(t);
            if (v > used)
                return fl__fail(-EPROTO, "key index bucket %u refers to unallocated entry %u",
                                b, v);
        }
        if (fl__bucket_tag(bucket) == fl__bucket_tag(hash) &&
            fl__key_equal(fl__entry_key(t, v - 1), key, len, hash)) {
            *idx = v - 1;
            return 0;
        }
    }
    return fl__fail(-EPROTO, "key index has no empty bucket (corrupt)");
}

int fl__key_find(const struct fl__keytab *t, const char *key, size_t len, uint32_t *idx)
{
    uint32_t empty = 0;
    return fl__probe(t, key, len, fl__hash(key, len), idx, &empty);
}

static int fl__entry_take(const struct fl__keytab *t, uint32_t *idx)
{
    uint32_t spare = atomic_exchange_explicit(t->spare, 0, memory_order_relaxed);
    if (spare) { /* process-local: relaxed is enough */
        *idx = spare - 1;
        return 0;
    }
    /* relaxed: the counter only hands out indexes; the entry's contents are
     * published later through the bucket CAS */
    uint32_t n = atomic_load_explicit(t->next, memory_order_relaxed);
    do {
        if (n >= t->capacity)
            return -ENOSPC;
    } while (!atomic_compare_exchange_weak_explicit(t->next, &n, n + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    *idx = n;
    return 0;
}

static void fl__entry_keep_spare(const struct fl__keytab *t, uint32_t idx)
{
    uint32_t old = atomic_exchange_explicit(t->spare, idx + 1, memory_order_relaxed);
    (void)old; /* a second spare (two threads racing) is leaked: one entry, rare */
}

static int fl__key_create(const struct fl__keytab *t, const char *key, size_t len,
                          uint32_t hash, uint32_t empty, uint32_t *idx);

static inline __attribute__((always_inline)) int
fl__find_or_create(const struct fl__keytab *t, const char *key, size_t len, uint32_t *idx)
{
    uint32_t hash = fl__hash(key, len), empty = 0;
    int err = fl__probe(t, key, len, hash, idx, &empty);
    if (__builtin_expect(err != -ENOENT, 1))
        return err;
    return fl__key_create(t, key, len, hash, empty, idx);
}

int fl__key_find_or_create(const struct fl__keytab *t, const char *key, size_t len,
                           uint32_t *idx)
{
    return fl__find_or_create(t, key, len, idx);
}

/* The creation behind fl__lock_find_or_create, out of line: its table of
 * its own, so that the caller's never leaves registers. */
static __attribute__((noinline)) int fl__lock_create(struct fl__shm *r, const char *key, size_t len,
                                                     uint32_t hash, uint32_t empty, uint32_t *idx)
{
    struct fl__keytab t;
    fl__keytab_of_locks(r, &t);
    return fl__key_create(&t, key, len, hash, empty, idx);
}

int fl__lock_find_or_create(struct fl__shm *r, const char *key, uint32_t *idx)
{
    int len = fl__key_check(key);
    if (len < 0)
        return len;
    struct fl__keytab t;
    fl__keytab_of_locks(r, &t);
    uint32_t hash = fl__hash(key, (size_t)len), empty = 0;
    int err = fl__probe(&t, key, (size_t)len, hash, idx, &empty);
    if (__builtin_expect(err != -ENOENT, 1))
        return err;
    return fl__lock_create(r, key, (size_t)len, hash, empty, idx);
}

/* Not found (the probe ended at bucket empty): create it. */
static int fl__key_create(const struct fl__keytab *t, const char *key, size_t len,
                          uint32_t hash, uint32_t empty, uint32_t *idx)
{
    uint32_t mine = 0;
    int err = fl__entry_take(t, &mine);
    if (err == -ENOSPC) {
        /* It may have been created meanwhile; only then is "full" wrong. */
        if (fl__probe(t, key, len, hash, idx, &empty) == 0)
            return 0;
        return fl__fail(-ENOSPC, "table full: all %u entries are in use", t->capacity);
    }
    struct fl__key *k = fl__entry_key(t, mine);
    memset(k->bytes, 0, sizeof k->bytes);
    memcpy(k->bytes, key, len);
    k->len = (uint32_t)len;
    k->hash = hash;
    uint32_t b = empty;
    for (uint32_t n = 0; n <= t->index_mask; n++, b = (b + 1) & t->index_mask) {
        uint32_t bucket = 0;
        /* release: publishes the key bytes written above; acquire on failure:
         * we read the winner's entry next */
        if (atomic_compare_exchange_strong_explicit(&t->index[b], &bucket,
                                                    fl__bucket_tag(hash) | (mine + 1),
                                                    memory_order_acq_rel,
                                                    memory_order_acquire)) {
            *idx = mine;
            return 0;
        }
        uint32_t v = bucket & FL__BUCKET_ENTRY_MASK;
        if (v == 0 || v > t->capacity)
            return fl__fail(-EPROTO, "key index bucket %u refers to entry %u", b, v);
        if (fl__bucket_tag(bucket) == fl__bucket_tag(hash) &&
            fl__key_equal(fl__entry_key(t, v - 1), key, len, hash)) {
            fl__entry_keep_spare(t, mine); /* lost the race to create it */
            *idx = v - 1;
            return 0;
        }
    }
    return fl__fail(-EPROTO, "key index has no empty bucket (corrupt)");
}

int fl__key_published(const struct fl__keytab *t, uint32_t idx, char out[FL_KEY_MAX + 1])
{
    const struct fl__key *k = fl__entry_key(t, idx);
    uint32_t len = k->len;
    if (len == 0 || len > FL_KEY_MAX)
        return -ENOENT;
    char key[FL_KEY_MAX + 1];
    memcpy(key, k->bytes, len);
    key[len] = '\0';
    if (strlen(key) != len)
        return -ENOENT; /* a NUL inside: corrupt or half-written */
    uint32_t found = 0;
    if (fl__key_find(t, key, len, &found) != 0 || found != idx)
        return -ENOENT; /* never published, or abandoned after a lost race */
    memcpy(out, key, len + 1);
    return 0;
}
