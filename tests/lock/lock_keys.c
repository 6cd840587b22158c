/* SPDX-License-Identifier: MIT */
/*
 * lock_keys.c - the key index (src/shm/keys.c): names to lock slots.
 *
 * I1 depends on it: a key with two slots would have two token sequences.
 * Many keys get distinct hashes and distinct slots and are found again
 * (also through another handle); similar keys (prefixes, one differing
 * byte, 127-byte keys, non-ASCII bytes) stay apart; two processes racing
 * to create the same new keys (in lockstep, key by key, so that about half
 * the creations really lose a race; each racer drops the spare entry a lost
 * race leaves it, so the losers stay visible as unpublished slots) never
 * produce two published slots for one key, and every successful
 * acquisition's token lands on the one slot.
 * I9: a corrupt index is reported (-EPROTO), never followed out of bounds.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

static const struct fl__params params = {.locks = 2048, .records = 8, .record_size = 64,
                                         .clients = 8, .spare_buffers = 4};

#define NMANY 1500

static void many_key(int i, char *buf, size_t cap) { snprintf(buf, cap, "many/%d", i); }

/* Acquire (try) and release key; returns the slot. */
static uint32_t touch(fl_region *r, const char *key)
{
    fl_lease l;
    int rc = fl_acquire(r, key, TH_S, 0, &l);
    if (rc != 0)
        fail_msg("acquire %s: %s (%s)", key, fl_err_name(rc), fl_last_error());
    assert_int_equal(fl_release(r, &l), 0);
    return l.slot;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* I1 */
static void test_many_keys(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("many.region"));
    assert_int_equal(fl__test_region_create_ready(path, &params), 0);
    fl_region *r;
    assert_int_equal(fl_open(path, &r), 0);
    static uint32_t slot[NMANY], hash[NMANY], sorted[NMANY];
    char key[64];
    for (int i = 0; i < NMANY; i++) {
        many_key(i, key, sizeof key);
        slot[i] = touch(r, key);
    }
    /* distinct slots, distinct hashes, hashes that spread over the buckets */
    memcpy(sorted, slot, sizeof slot);
    qsort(sorted, NMANY, sizeof sorted[0], cmp_u32);
    for (int i = 1; i < NMANY; i++)
        assert_true(sorted[i] != sorted[i - 1]);
    for (int i = 0; i < NMANY; i++)
        hash[i] = fl__slot_at(fl__shm_of(r), slot[i])->key.hash;
    memcpy(sorted, hash, sizeof hash);
    qsort(sorted, NMANY, sizeof sorted[0], cmp_u32);
    for (int i = 1; i < NMANY; i++)
        assert_true(sorted[i] != sorted[i - 1]);
    for (int i = 0; i < NMANY; i++)
        sorted[i] = hash[i] & fl__shm_of(r)->lock_index_mask;
    qsort(sorted, NMANY, sizeof sorted[0], cmp_u32);
    int buckets = 1;
    for (int i = 1; i < NMANY; i++)
        buckets += sorted[i] != sorted[i - 1];
    print_message("%d keys: %d distinct home buckets of %u\n", NMANY, buckets,
                  fl__shm_of(r)->lock_index_mask + 1);
    assert_true(buckets > NMANY / 2);

    /* lookups after creation: the same slot, by the index and by acquire */
    struct fl__keytab t;
    fl__keytab_locks(fl__shm_of(r), &t);
    for (int i = 0; i < NMANY; i++) {
        many_key(i, key, sizeof key);
        uint32_t idx = UINT32_MAX;
        assert_int_equal(fl__key_find(&t, key, strlen(key), &idx), 0);
        assert_int_equal(idx, slot[i]);
        assert_int_equal(touch(r, key), slot[i]);
        fl_lock_info li;
        assert_int_equal(fl_lock_info_get(r, slot[i], &li), 0);
        assert_string_equal(li.key, key);
        assert_int_equal(li.token, 2);
    }
    uint32_t idx;
    assert_int_equal(fl__key_find(&t, "many/x", 6, &idx), -ENOENT);
    assert_int_equal(fl__key_find(&t, "many/1500", 9, &idx), -ENOENT);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    assert_int_equal(ri.locks_used, NMANY);
    fl_close(r);

    /* another handle finds them too */
    assert_int_equal(fl_open(path, &r), 0);
    for (int i = 0; i < NMANY; i += 7) {
        many_key(i, key, sizeof key);
        assert_int_equal(touch(r, key), slot[i]);
    }
    fl_close(r);
}

/* I1: keys that look alike stay apart */
static void test_similar_keys(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("similar.region"));
    assert_int_equal(fl__test_region_create_ready(path, &params), 0);
    fl_region *r;
    assert_int_equal(fl_open(path, &r), 0);
    char keys[64][FL_KEY_MAX + 1];
    int n = 0;
    snprintf(keys[n++], sizeof keys[0], "a");
    snprintf(keys[n++], sizeof keys[0], "aa");
    snprintf(keys[n++], sizeof keys[0], "aaa");
    snprintf(keys[n++], sizeof keys[0], "A");
    snprintf(keys[n++], sizeof keys[0], "a\xff");
    snprintf(keys[n++], sizeof keys[0], "\xc3\xa9t\xc3\xa9");
    snprintf(keys[n++], sizeof keys[0], "a b");
    snprintf(keys[n++], sizeof keys[0], "a\tb");
    for (int c = 0; c < 16; c++) { /* 127-byte keys differing in the last byte */
        memset(keys[n], 'x', FL_KEY_MAX);
        keys[n][FL_KEY_MAX - 1] = (char)('a' + c);
        keys[n++][FL_KEY_MAX] = '\0';
    }
    for (int c = 0; c < 16; c++) { /* ... and in the first byte */
        memset(keys[n], 'y', FL_KEY_MAX);
        keys[n][0] = (char)('a' + c);
        keys[n++][FL_KEY_MAX] = '\0';
    }
    for (int c = 0; c < 16; c++) { /* prefixes of one another */
        memset(keys[n], 'z', (size_t)c + 100);
        keys[n++][c + 100] = '\0';
    }
    uint32_t slots[64];
    for (int i = 0; i < n; i++)
        slots[i] = touch(r, keys[i]);
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++)
            assert_true(slots[i] != slots[j]);
        assert_int_equal(touch(r, keys[i]), slots[i]);
        fl_lock_info li;
        assert_int_equal(fl_lock_info_get(r, slots[i], &li), 0);
        assert_string_equal(li.key, keys[i]);
    }
    fl_close(r);
}

/* ---- two processes creating the same keys ---- */

#define RACE_ROUNDS 10
#define RACE_KEYS 200

static char race_path[512];
/* Shared with the racers: the round they may start, and one arrival count
 * per key: both racers arrive at each key before either creates it, so
 * every key is a real race (spinning: both start within nanoseconds). */
struct race_shared {
    _Atomic int go;
    _Atomic int arrive[RACE_ROUNDS * RACE_KEYS];
};
static struct race_shared *race;

static int racer(void *arg, int in, int out)
{
    (void)arg;
    (void)in;
    fl_region *r;
    if (fl_open(race_path, &r) != 0)
        return 10;
    char buf[96], key[64]; /* "done" and three longs */
    for (int round = 0; round < RACE_ROUNDS; round++) {
        th_send(out, "ready");
        uint64_t give_up = th_now_ns() + 30 * TH_S;
        while (atomic_load(&race->go) <= round)
            if (th_now_ns() > give_up)
                return 11;
        long ok = 0, bad = 0, lost = 0;
        for (int i = 0; i < RACE_KEYS; i++) {
            snprintf(key, sizeof key, "race/%d/%d", round, i);
            _Atomic int *a = &race->arrive[round * RACE_KEYS + i];
            atomic_fetch_add(a, 1);
            while (atomic_load(a) < 2)
                if (th_now_ns() > give_up)
                    return 12;
            fl_lease l;
            int rc = fl_acquire(r, key, 10 * TH_S, 0, &l);
            if (atomic_exchange(&fl__shm_of(r)->spare_slot, 0) != 0)
                lost++; /* we created an entry, met the other's: a race lost */
            if (rc == 0) {
                ok++;
                if (fl_release(r, &l) != 0)
                    bad++;
            } else if (rc != -EBUSY) {
                bad++;
            }
        }
        snprintf(buf, sizeof buf, "done %ld %ld %ld", ok, bad, lost);
        th_send(out, buf);
    }
    fl_close(r);
    return 0;
}

/* I1 */
static void test_racing_creators(void **state)
{
    (void)state;
    snprintf(race_path, sizeof race_path, "%s", th_path("race.region"));
    struct fl__params big = params;
    big.locks = 4096;
    assert_int_equal(fl__test_region_create_ready(race_path, &big), 0);
    race = mmap(NULL, sizeof *race, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(race != MAP_FAILED);
    memset(race, 0, sizeof *race);
    th_child c[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(th_child_start(&c[i], racer, NULL), 0);
    long successes[RACE_ROUNDS] = {0}, races_lost = 0;
    for (int round = 0; round < RACE_ROUNDS; round++) {
        for (int i = 0; i < 2; i++)
            th_expect(c[i].from_child, "ready", 20000);
        atomic_store(&race->go, round + 1);
        for (int i = 0; i < 2; i++) {
            char buf[64];
            long ok, bad, lost;
            assert_int_equal(th_recv(c[i].from_child, buf, sizeof buf, 30000), 0);
            assert_int_equal(sscanf(buf, "done %ld %ld %ld", &ok, &bad, &lost), 3);
            assert_int_equal(bad, 0);
            successes[round] += ok;
            races_lost += lost;
        }
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(th_child_wait(&c[i], 20000), 0);

    fl_region *r;
    assert_int_equal(fl_open(race_path, &r), 0);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    static int seen[RACE_ROUNDS][RACE_KEYS];
    memset(seen, 0, sizeof seen);
    uint64_t tokens[RACE_ROUNDS] = {0};
    uint32_t abandoned = 0;
    for (uint32_t s = 0; s < ri.locks_used; s++) {
        fl_lock_info li;
        int rc = fl_lock_info_get(r, s, &li);
        if (rc == -ENOENT) {
            abandoned++;
            continue;
        }
        assert_int_equal(rc, 0);
        int round, i;
        assert_int_equal(sscanf(li.key, "race/%d/%d", &round, &i), 2);
        assert_true(round >= 0 && round < RACE_ROUNDS && i >= 0 && i < RACE_KEYS);
        seen[round][i]++;
        tokens[round] += li.token;
        assert_true(li.token >= 1); /* every key was acquired at least once */
    }
    for (int round = 0; round < RACE_ROUNDS; round++) {
        for (int i = 0; i < RACE_KEYS; i++)
            if (seen[round][i] != 1)
                fail_msg("key race/%d/%d has %d published slots", round, i, seen[round][i]);
        /* every successful acquisition counted on the key's one slot */
        assert_int_equal(tokens[round], (uint64_t)successes[round]);
    }
    print_message("%d keys created by two racers: %ld creations lost a race; %u slots "
                  "used, %u unpublished\n",
                  RACE_ROUNDS * RACE_KEYS, races_lost, ri.locks_used, abandoned);
    munmap(race, sizeof *race);
    /* the racers dropped their spare entries (above): one per lost race */
    assert_true(ri.locks_used <= RACE_ROUNDS * RACE_KEYS + (uint32_t)races_lost);
    struct fl__keytab t;
    fl__keytab_locks(fl__shm_of(r), &t);
    for (int round = 0; round < RACE_ROUNDS; round++)
        for (int i = 0; i < RACE_KEYS; i++) {
            char key[64];
            snprintf(key, sizeof key, "race/%d/%d", round, i);
            uint32_t idx;
            assert_int_equal(fl__key_find(&t, key, strlen(key), &idx), 0);
            fl_lock_info li;
            assert_int_equal(fl_lock_info_get(r, idx, &li), 0);
            assert_string_equal(li.key, key);
        }
    fl_close(r);
}

/* I9: a corrupt index is an error, not a wild read */
static void test_corrupt_index(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("corrupt.region"));
    assert_int_equal(fl__test_region_create_ready(path, &params), 0);
    struct fl__shm *m;
    assert_int_equal(fl__region_map(path, false, &m), 0);
    fl_region *r = fl__sup_handle(m);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "ok", TH_S, 0, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);
    uint32_t used_slot = l.slot;
    /* every empty bucket now points past the table */
    for (uint32_t b = 0; b <= fl__shm_of(r)->lock_index_mask; b++)
        if (atomic_load(&fl__shm_of(r)->lock_index[b]) == 0)
            atomic_store(&fl__shm_of(r)->lock_index[b], 0xffffffffu);
    int rc = fl_acquire(r, "new-key", TH_S, 0, &l);
    assert_int_equal(rc, -EPROTO);
    assert_true(fl_last_error()[0] != '\0');
    /* buckets pointing at entries never handed out */
    for (uint32_t b = 0; b <= fl__shm_of(r)->lock_index_mask; b++)
        if (atomic_load(&fl__shm_of(r)->lock_index[b]) == 0xffffffffu)
            atomic_store(&fl__shm_of(r)->lock_index[b], 100);
    assert_int_equal(fl_acquire(r, "new-key", TH_S, 0, &l), -EPROTO);
    fl_lock_info li;
    /* The key's own bucket was never empty, so it was left alone: the key
     * is still found and described; only lookups of new keys meet the
     * corrupt buckets. */
    assert_int_equal(fl_lock_info_get(r, used_slot, &li), 0);
    assert_string_equal(li.key, "ok");
    fl__region_unmap(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_similar_keys),
        cmocka_unit_test(test_racing_creators),
        cmocka_unit_test(test_corrupt_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
