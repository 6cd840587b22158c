/* SPDX-License-Identifier: MIT */
/*
 * inspect.c - fl_region_info_get, fl_lock_info_get and fl_record_info_get
 * on etcd, for `fencelock status`.
 *
 * etcd has no fixed tables, so fl_region_info_get takes a snapshot: one
 * range over PREFIX/last/ (every key ever acquired) and PREFIX/lock/ (the
 * queues: each key's holder, its waiters, how its last holding ended) and
 * one over PREFIX/rec/ (names only); index i of the other two calls is the
 * i-th key or record of the latest snapshot, in key order (-ERANGE past
 * it).  fl_lock_info_get asks etcd for the holder's lease time left;
 * fl_record_info_get reads the record.  What only a region
 * file knows (capacities, counters, clients, the supervisor) stays 0, the
 * value that means "unknown".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

struct fl__etcd_snap_lock {
    char key[FL_KEY_MAX + 1];
    bool valid;       /* a key fencelock could have written */
    bool corrupt;     /* a marker or an entry of it fencelock does not write */
    bool marked;      /* PREFIX/last/KEY exists: mark_token is its newest token */
    uint64_t mark_token;
    uint32_t live;    /* live entries: the holder and its waiters */
    uint64_t holder_c, holder_token, lease; /* the oldest live entry */
    uint32_t pid;
    char done;        /* the newest released entry's state ('R', 'D'; 0: none) */
    uint64_t done_c, done_token;
};

struct fl__etcd_snap {
    uint32_t nlocks, nrecs;
    struct fl__etcd_snap_lock *locks;
    char (*recs)[FL_KEY_MAX + 1];
    bool *rec_valid;
};

void fl__etcd_snap_free(struct fl__etcd_snap *s)
{
    if (!s)
        return;
    free(s->locks);
    free(s->recs);
    free(s->rec_valid);
    free(s);
}

/* The name after PREFIX/kind/ in kv's key (0: not a valid name). */
static size_t fl__name_of(const struct fl__etcd *e, const char *kind,
                          const struct fl__etcd_kv *kv, char out[FL_KEY_MAX + 1])
{
    size_t skip = e->c.uri.prefix_len + strlen(kind) + 2;
    out[0] = '\0';
    if (kv->key_len <= skip || kv->key_len - skip > FL_KEY_MAX)
        return 0;
    size_t n = kv->key_len - skip;
    if (memchr(kv->key + skip, '\0', n))
        return 0;
    memcpy(out, kv->key + skip, n);
    out[n] = '\0';
    return n;
}

static int fl__by_key(const void *a, const void *b)
{
    return strcmp(((const struct fl__etcd_snap_lock *)a)->key,
                  ((const struct fl__etcd_snap_lock *)b)->key);
}

/* The length of KEY in the key PREFIX/lock/KEY NUL ID of kv (skip: the
 * length of PREFIX/lock/), 0 when it is no key fencelock writes; *nul
 * whether the ID part is there (a key of the layout before 0.2 has none). */
static size_t fl__entry_key_name(const struct fl__etcd_kv *kv, size_t skip, bool *nul)
{
    *nul = false;
    if (kv->key_len <= skip)
        return 0;
    const unsigned char *name = kv->key + skip;
    const unsigned char *end = memchr(name, '\0', kv->key_len - skip);
    size_t len = end ? (size_t)(end - name) : kv->key_len - skip;
    *nul = end != NULL;
    return len <= FL_KEY_MAX ? len : 0;
}

/* By key, and of one key the copy that came from its marker first. */
static int fl__by_key_marked_first(const void *a, const void *b)
{
    const struct fl__etcd_snap_lock *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (int)y->marked - (int)x->marked;
}

/* Reply context for parse messages of snapshot entries. */
static const struct fl__etcd_reply *fl__ctx(const char *op)
{
    static _Thread_local struct fl__etcd_reply rp;
    rp.op = op;
    snprintf(rp.endpoint, sizeof rp.endpoint, "(snapshot)");
    return &rp;
}

int fl__etcd_region_info(struct fl__etcd *e, fl_region_info *info)
{
    memset(info, 0, sizeof *info);
    uint64_t epoch = 0, rev = 0, rev2 = 0, rev3 = 0;
    int err = fl__etcd_epoch_load(&e->c, false, &epoch);
    if (err)
        return err;
    struct fl__etcd_kv *marks = NULL, *locks = NULL, *recs = NULL;
    uint32_t nm = 0, nl = 0, nr = 0;
    err = fl__etcd_range_prefix(&e->c, "last", FL__ETCD_MARK_READ_MAX, FL__ETCD_SNAP_MAX, &marks, &nm,
                                &rev);
    if (!err)
        err = fl__etcd_range_prefix(&e->c, "lock", FL__ETCD_ENTRY_VALUE_MAX, FL__ETCD_SNAP_MAX,
                                    &locks, &nl, &rev2);
    if (!err)
        err = fl__etcd_range_prefix(&e->c, "rec", 0, FL__ETCD_SNAP_MAX, &recs, &nr, &rev3);
    struct fl__etcd_snap *s = err ? NULL : calloc(1, sizeof *s);
    if (!err && !s)
        err = fl__fail(-ENOMEM, "out of memory");
    if (!err) {
        s->locks = calloc((size_t)nm + nl + 1, sizeof *s->locks);
        s->recs = calloc((size_t)nr + 1, sizeof *s->recs);
        s->rec_valid = calloc((size_t)nr + 1, sizeof *s->rec_valid);
        if (!s->locks || !s->recs || !s->rec_valid)
            err = fl__fail(-ENOMEM, "out of memory");
    }
    /* Every marker is a key; a key with entries and no marker (one an
     * operator deleted) is added. */
    for (uint32_t i = 0; !err && i < nm; i++) {
        struct fl__etcd_snap_lock *l = &s->locks[s->nlocks++];
        l->valid = fl__name_of(e, "last", &marks[i], l->key) > 0;
        uint64_t epoch = 0;
        if (l->valid)
            l->marked = true;
        if (l->valid && fl__etcd_mark_parse(fl__ctx("status"), &marks[i], &epoch,
                                            &l->mark_token) != 0)
            l->corrupt = true;
    }
    /* The keys of the entries too (a key whose marker is gone has only
     * those), once each: sorted, a marker's copy first, duplicates dropped. */
    size_t skip = e->c.uri.prefix_len + 6; /* PREFIX/lock/ */
    for (uint32_t i = 0; !err && i < nl; i++) {
        bool nul;
        size_t len = fl__entry_key_name(&locks[i], skip, &nul);
        if (!len)
            continue;
        struct fl__etcd_snap_lock *l = &s->locks[s->nlocks++];
        memcpy(l->key, locks[i].key + skip, len);
        l->valid = true;
    }
    if (!err) {
        qsort(s->locks, s->nlocks, sizeof *s->locks, fl__by_key_marked_first);
        uint32_t kept = 0;
        for (uint32_t i = 0; i < s->nlocks; i++)
            if (kept == 0 || strcmp(s->locks[kept - 1].key, s->locks[i].key) != 0)
                s->locks[kept++] = s->locks[i];
        s->nlocks = kept;
    }
    /* PREFIX/lock/KEY NUL ID: each entry to its key's counts. */
    for (uint32_t i = 0; !err && i < nl; i++) {
        bool nul;
        size_t len = fl__entry_key_name(&locks[i], skip, &nul);
        if (!len)
            continue;
        struct fl__etcd_snap_lock probe = {0}, *l;
        memcpy(probe.key, locks[i].key + skip, len);
        l = bsearch(&probe, s->locks, s->nlocks, sizeof *s->locks, fl__by_key);
        if (!l)
            continue; /* cannot be: every entry's key was added above */
        struct fl__etcd_keys k;
        fl__etcd_keys_of(e, l->key, len, &k);
        struct fl__etcd_entry en;
        if (!nul || fl__etcd_entry_parse(fl__ctx("status"), &k, &locks[i], &en) != 0) {
            l->corrupt = true; /* e.g. a lock key of the layout before 0.2 */
            continue;
        }
        if (en.state == 'W') {
            l->live++;
            if (!l->holder_c || en.c < l->holder_c) {
                l->holder_c = en.c;
                l->holder_token = en.token;
                l->lease = en.lease;
                l->pid = en.pid;
            }
        } else if (en.c > l->done_c) {
            l->done = en.state;
            l->done_c = en.c;
            l->done_token = en.token;
        }
    }
    if (!err)
        qsort(s->locks, s->nlocks, sizeof *s->locks, fl__by_key);
    for (uint32_t i = 0; !err && i < nr; i++) {
        s->rec_valid[s->nrecs] = fl__name_of(e, "rec", &recs[i], s->recs[s->nrecs]) > 0;
        s->nrecs++;
    }
    fl__etcd_kvs_free(marks, nm);
    fl__etcd_kvs_free(locks, nl);
    fl__etcd_kvs_free(recs, nr);
    if (err) {
        fl__etcd_snap_free(s);
        return err;
    }
    pthread_mutex_lock(&e->lock);
    fl__etcd_snap_free(e->snap);
    e->snap = s;
    pthread_mutex_unlock(&e->lock);
    if (rev3 > rev)
        rev = rev3;
    info->locks_used = s->nlocks;
    info->records_used = s->nrecs;
    info->record_size = FL__ETCD_RECORD_MAX;
    info->epoch = epoch;
    info->token_floor = epoch && rev + 1 < FL__ETCD_REV_LIMIT
                            ? epoch << FL__ETCD_EPOCH_SHIFT | (rev + 1) : 0;
    info->ready = epoch != 0; /* the first client of the prefix makes the epoch */
    /* run_state, served, supervisor_pid, same_boot, boot_id: a supervisor's
     * and a boot's, which etcd has neither of: 0, unknown. */
    return 0;
}

int fl__etcd_lock_info(struct fl__etcd *e, uint32_t index, fl_lock_info *info)
{
    memset(info, 0, sizeof *info);
    pthread_mutex_lock(&e->lock);
    struct fl__etcd_snap_lock l;
    bool have = e->snap && index < e->snap->nlocks;
    if (have)
        l = e->snap->locks[index];
    pthread_mutex_unlock(&e->lock);
    if (!have)
        return fl__fail(-ERANGE, "fl_lock_info_get: index %" PRIu32 " is past the last "
                                 "fl_region_info_get snapshot",
                        index);
    if (!l.valid)
        return fl__fail(-ENOENT, "fl_lock_info_get: index %" PRIu32 ": not a key fencelock "
                                 "writes", index);
    memcpy(info->key, l.key, sizeof info->key);
    if (l.corrupt)
        return fl__fail(-EPROTO, "fl_lock_info_get: key \"%s\": its marker or a queue entry "
                                 "is not what fencelock writes (the etcd layout before 0.2, "
                                 "or corrupt)",
                        l.key);
    if (l.live) {
        int64_t left = 0;
        uint64_t granted = 0;
        int err = fl__etcd_timetolive(&e->c, l.lease, &left, &granted);
        if (err)
            return err;
        info->token = l.holder_token;
        info->state = left > 0 ? FL_LOCK_HELD : FL_LOCK_EXPIRED;
        info->lease_left_ns = left > 0 ? left * (int64_t)FL__NS_PER_S : -1;
        info->holder_pid = l.pid;
        info->waiters = l.live - 1;
        return 0;
    }
    info->state = FL_LOCK_FREE;
    info->token = l.mark_token > l.done_token ? l.mark_token : l.done_token;
    if (l.done && l.done_token >= l.mark_token)
        info->last_release = l.done == 'D' ? FL_LEASE_OWNER_DIED : 0;
    else if (l.marked)
        info->last_release = FL_LEASE_EXPIRED; /* the newest entry vanished unreleased */
    return 0;
}

int fl__etcd_record_info(struct fl__etcd *e, uint32_t index, fl_record_info *info)
{
    memset(info, 0, sizeof *info);
    char name[FL_KEY_MAX + 1];
    pthread_mutex_lock(&e->lock);
    bool have = e->snap && index < e->snap->nrecs;
    bool valid = have && e->snap->rec_valid[index];
    if (have)
        memcpy(name, e->snap->recs[index], sizeof name);
    pthread_mutex_unlock(&e->lock);
    if (!have)
        return fl__fail(-ERANGE, "fl_record_info_get: index %" PRIu32 " is past the last "
                                 "fl_region_info_get snapshot",
                        index);
    if (!valid)
        return fl__fail(-ENOENT, "fl_record_info_get: index %" PRIu32 ": not a record name "
                                 "fencelock writes", index);
    struct fl__etcd_reply rp;
    struct fl__etcd_kv kv;
    struct fl__etcd_record got;
    int err = fl__etcd_record_get(e, name, strlen(name), "is gone since the snapshot", &rp, &kv,
                                  &got);
    if (!err) {
        memcpy(info->name, name, sizeof info->name);
        memcpy(info->bound_key, kv.value, got.key_len);
        info->bound_key[got.key_len] = '\0';
        info->accepted_token = got.token;
        info->version = kv.version; /* puts since creation: accepted commits */
        info->size = (uint32_t)(kv.value_len - got.data_off);
        info->commits = kv.version;
        fl__etcd_kv_free(&kv);
    }
    fl__etcd_reply_free(&rp);
    return err;
}
