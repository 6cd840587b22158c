/* SPDX-License-Identifier: MIT */
/*
 * keys.c - the etcd handle's key table: the keys a handle has used,
 * interned on first use (a key's index is its fl_lease.slot and fl_key.slot,
 * never reused while the handle lives), an open-addressing index over them,
 * and what the handle knows of each (etcd.h, struct fl__etcd_key): the
 * newest token it has seen, and its own holding (token, its queue entry and
 * the released one before it, etcd lease, thread, a release without an
 * answer, a lease move of unknown outcome).  Each
 * function takes fl__etcd.lock and drops it before it returns: no request
 * is ever made with it held.  And the etcd keys of a key (fl__etcd_keys_of).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "etcd.h"

uint32_t fl__etcd_tid(void)
{
    static _Thread_local uint32_t tid;
    if (!tid)
        tid = (uint32_t)syscall(SYS_gettid);
    return tid;
}

static uint32_t fl__hash(const char *key, size_t len)
{
    uint64_t h = fl__checksum(key, len);
    return (uint32_t)(h ^ (h >> 32));
}

/* Find key (under e->lock): its index, or -ENOENT. */
static int fl__find_locked(struct fl__etcd *e, const char *key, size_t len, uint32_t *idx)
{
    if (!e->index_cap)
        return -ENOENT;
    uint32_t mask = e->index_cap - 1;
    for (uint32_t i = fl__hash(key, len) & mask;; i = (i + 1) & mask) {
        uint32_t v = e->index[i];
        if (!v)
            return -ENOENT;
        struct fl__etcd_key *k = e->keys[v - 1];
        if (k->len == len && memcmp(k->name, key, len) == 0) {
            *idx = v - 1;
            return 0;
        }
    }
}

static int fl__grow_index_locked(struct fl__etcd *e)
{
    uint32_t cap = e->index_cap ? e->index_cap * 2 : 64;
    uint32_t *idx = calloc(cap, sizeof *idx);
    if (!idx)
        return -ENOMEM;
    for (uint32_t k = 0; k < e->nkeys; k++) {
        struct fl__etcd_key *key = e->keys[k];
        uint32_t i = fl__hash(key->name, key->len) & (cap - 1);
        while (idx[i])
            i = (i + 1) & (cap - 1);
        idx[i] = k + 1;
    }
    free(e->index);
    e->index = idx;
    e->index_cap = cap;
    return 0;
}

/* The slot of key, created on first use: 0, -ENOSPC, -ENOMEM. */
int fl__etcd_intern(struct fl__etcd *e, const char *key, size_t len, uint32_t *slot)
{
    pthread_mutex_lock(&e->lock);
    int err = fl__find_locked(e, key, len, slot);
    if (err != -ENOENT)
        goto out;
    if (e->nkeys >= FL__ETCD_KEYS_MAX) {
        err = fl__fail(-ENOSPC, "etcd %s: this handle has used %u keys, its most: open "
                                "another handle",
                       e->c.uri.prefix, FL__ETCD_KEYS_MAX);
        goto out;
    }
    if (e->nkeys == e->kcap) {
        uint32_t cap = e->kcap ? e->kcap * 2 : 16;
        struct fl__etcd_key **keys = realloc(e->keys, cap * sizeof(struct fl__etcd_key *));
        if (!keys)
            goto nomem;
        e->keys = keys;
        e->kcap = cap;
    }
    if ((e->nkeys + 1) * 2 > e->index_cap && fl__grow_index_locked(e) != 0)
        goto nomem;
    struct fl__etcd_key *k = calloc(1, sizeof *k);
    if (!k)
        goto nomem;
    k->len = (uint32_t)len;
    memcpy(k->name, key, len);
    e->keys[e->nkeys] = k;
    uint32_t mask = e->index_cap - 1;
    uint32_t i = fl__hash(key, len) & mask;
    while (e->index[i])
        i = (i + 1) & mask;
    e->index[i] = e->nkeys + 1;
    *slot = e->nkeys++;
    err = 0;
    goto out;
nomem:
    err = fl__fail(-ENOMEM, "out of memory");
out:
    pthread_mutex_unlock(&e->lock);
    return err;
}

int fl__etcd_resolve(struct fl__etcd *e, const char *key, uint32_t *slot)
{
    int klen = fl__key_check(key);
    if (klen < 0)
        return klen;
    if (e->h.readonly)
        return fl__fail(-EINVAL, "fl_key_resolve: read-only region handle");
    return fl__etcd_intern(e, key, (size_t)klen, slot);
}

int fl__etcd_slot_key(struct fl__etcd *e, uint32_t slot, char key[FL_KEY_MAX + 1],
                      uint64_t *newest)
{
    pthread_mutex_lock(&e->lock);
    int err = 0;
    if (slot >= e->nkeys)
        err = -EINVAL;
    else {
        memcpy(key, e->keys[slot]->name, e->keys[slot]->len + 1);
        if (newest)
            *newest = e->keys[slot]->newest;
    }
    pthread_mutex_unlock(&e->lock);
    return err;
}

void fl__etcd_note_newest(struct fl__etcd *e, const char *key, size_t len, uint64_t token)
{
    uint32_t slot;
    pthread_mutex_lock(&e->lock);
    if (fl__find_locked(e, key, len, &slot) == 0 && e->keys[slot]->newest < token)
        e->keys[slot]->newest = token;
    pthread_mutex_unlock(&e->lock);
}

void fl__etcd_note_slot(struct fl__etcd *e, uint32_t slot, uint64_t newest)
{
    pthread_mutex_lock(&e->lock);
    if (e->keys[slot]->newest < newest)
        e->keys[slot]->newest = newest;
    pthread_mutex_unlock(&e->lock);
}

bool fl__etcd_held(struct fl__etcd *e, uint32_t slot, uint64_t token, struct fl__etcd_key *out)
{
    pthread_mutex_lock(&e->lock);
    bool held = slot < e->nkeys && token && e->keys[slot]->held_token == token;
    if (held)
        *out = *e->keys[slot];
    pthread_mutex_unlock(&e->lock);
    return held;
}

int fl__etcd_held_by_me(struct fl__etcd *e, uint32_t slot, char id[FL__ETCD_ID_LEN + 1])
{
    uint64_t now = fl__etcd_now_ns();
    pthread_mutex_lock(&e->lock);
    const struct fl__etcd_key *k = slot < e->nkeys ? e->keys[slot] : NULL;
    /* Before held_until etcd cannot have ended the holding: only its
     * release (which clears held_token) can have, or a release whose
     * answer was lost. */
    int mine = k && k->held_token && k->held_tid == fl__etcd_tid() && now < k->held_until
                   ? (k->release_unsure ? 2 : 1)
                   : 0;
    if (mine)
        memcpy(id, k->held_id, FL__ETCD_ID_LEN + 1);
    pthread_mutex_unlock(&e->lock);
    return mine;
}

void fl__etcd_set_held(struct fl__etcd *e, uint32_t slot, uint64_t token, const char *id,
                       const char *pred_id, uint64_t lease, uint64_t ttl, uint64_t until,
                       bool tainted)
{
    pthread_mutex_lock(&e->lock);
    struct fl__etcd_key *k = e->keys[slot];
    k->held_token = token;
    snprintf(k->held_id, sizeof k->held_id, "%s", id);
    snprintf(k->pred_id, sizeof k->pred_id, "%s", pred_id);
    k->held_lease = lease;
    k->held_ttl = ttl;
    k->held_until = until;
    k->held_tid = fl__etcd_tid();
    k->tainted = tainted;
    k->release_unsure = false;
    k->moving_lease = k->moving_ttl = k->moving_until = 0;
    if (k->newest < token)
        k->newest = token;
    pthread_mutex_unlock(&e->lock);
}

void fl__etcd_set_lease(struct fl__etcd *e, uint32_t slot, uint64_t token, uint64_t lease,
                        uint64_t ttl, uint64_t until, uint64_t moving, uint64_t moving_ttl,
                        uint64_t moving_until)
{
    pthread_mutex_lock(&e->lock);
    struct fl__etcd_key *k = slot < e->nkeys ? e->keys[slot] : NULL;
    if (k && k->held_token == token) {
        k->held_lease = lease;
        k->held_ttl = ttl;
        k->held_until = until;
        k->moving_lease = moving;
        k->moving_ttl = moving_ttl;
        k->moving_until = moving_until;
    }
    pthread_mutex_unlock(&e->lock);
}

bool fl__etcd_clear_held(struct fl__etcd *e, uint32_t slot, uint64_t token)
{
    pthread_mutex_lock(&e->lock);
    bool cleared = slot < e->nkeys && token && e->keys[slot]->held_token == token;
    if (cleared) {
        struct fl__etcd_key *k = e->keys[slot];
        k->held_token = k->held_lease = k->held_ttl = k->held_until = 0;
        k->moving_lease = k->moving_ttl = k->moving_until = 0;
        k->held_id[0] = k->pred_id[0] = '\0';
        k->release_unsure = k->tainted = false;
    }
    pthread_mutex_unlock(&e->lock);
    return cleared;
}

/* Note that an fl_release of holding token at slot had no definite answer
 * (it may have taken effect: its retry's "R T" is its own). */
void fl__etcd_note_release_unsure(struct fl__etcd *e, uint32_t slot, uint64_t token)
{
    pthread_mutex_lock(&e->lock);
    if (slot < e->nkeys && e->keys[slot]->held_token == token)
        e->keys[slot]->release_unsure = true;
    pthread_mutex_unlock(&e->lock);
}

void fl__etcd_keys_of(const struct fl__etcd *e, const char *key, size_t len,
                      struct fl__etcd_keys *k)
{
    /* KEY's queue is [PREFIX/lock/KEY NUL, PREFIX/lock/KEY \1): KEY has no
     * NUL, so no other key's entries fall in it. */
    char name[FL_KEY_MAX + 2];
    memcpy(name, key, len);
    name[len] = '\0';
    k->q_len = fl__etcd_key(&e->c, "lock", name, len + 1, k->q0);
    memcpy(k->q1, k->q0, k->q_len);
    k->q1[k->q_len - 1] = '\1';
    k->last_len = fl__etcd_key(&e->c, "last", key, len, k->last);
    k->epoch_len = fl__etcd_key(&e->c, NULL, "epoch", 5, k->epoch);
}
