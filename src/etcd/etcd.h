/* SPDX-License-Identifier: MIT */
/*
 * etcd.h - the etcd backend's own state and its layers (keys.c, lease.c,
 * lock.c, wait.c, record.c, inspect.c, backend.c), above the client
 * (client.h).  Not installed.
 *
 * LAYOUT.  Under the region URI's PREFIX, four kinds of keys:
 *
 *   PREFIX/epoch       "N": the token epoch (epoch.c), 1 .. 2^23 - 1
 *   PREFIX/lock/KEY    "E PID HOST", attached to the holder's etcd lease:
 *                      exists while KEY is held.  E is the epoch it was
 *                      created under; its create_revision r makes the
 *                      token E << 40 | r.  etcd deletes it when the lease
 *                      ends: that is a lease expiry.
 *   PREFIX/last/KEY    how the latest holding of KEY stands, written in the
 *                      same Txns (no lease: it outlives holders), always
 *                      starting with that holding's epoch in 7 digits (the
 *                      acquire Txn compares it: lock.c, ACQUIRE):
 *                        "%07E H"        held (or expired while held):
 *                                        written by the acquire Txn, so its
 *                                        mod_revision is r and the holding's
 *                                        token is E << 40 | r
 *                        "%07E R %020T"  released by its holder
 *                        "%07E D %020T"  abandoned by fl_close (as a death: the
 *                                        next holder sees FL_LEASE_OWNER_DIED)
 *                      An acquire that finds "H" in it (prev_kv) took over
 *                      a holding that ended without release:
 *                      FL_LEASE_EXPIRED.  It also says which tokens KEY
 *                      issued (fl_commit_token).
 *   PREFIX/rec/NAME    KEY NUL %020(T) %020(S) DATA: the record's binding,
 *                      the greatest token it accepted, the sequence number of
 *                      that commit among its holding's commits (0 for
 *                      fl_commit_token), its value (record.c).
 *
 * etcd keys are bytes; KEY and NAME are the caller's bytes (1..FL_KEY_MAX,
 * no NUL).  PREFIX's rules (uri.c) keep prefixes from sharing keys.
 *
 * THREADS.  A handle may be shared by threads.  Requests run outside any
 * lock (the client is thread-safe); the handle's key table and inspection
 * snapshot are under `lock`, which is never held across a request.
 */
#ifndef FL_ETCD_H
#define FL_ETCD_H

#include "client.h"
#include "../core.h"

/* Largest record value: etcd takes requests up to 1.5 MiB by default, and
 * a commit Txn carries the value twice (the nested form, record.c). */
#define FL__ETCD_RECORD_MAX (512u << 10)
/* KEY NUL %020(T) %020(S) before the data (record.c). */
#define FL__ETCD_TOKEN_DIGITS 20
#define FL__ETCD_SEQ_DIGITS 20
#define FL__ETCD_RECORD_HDR_MAX (FL_KEY_MAX + 1 + FL__ETCD_TOKEN_DIGITS + FL__ETCD_SEQ_DIGITS)
/* etcd's largest lease TTL (seconds: MaxLeaseTTL). */
#define FL__ETCD_TTL_MAX 9000000000ull
/* Keys a handle interns (its fl_lease.slot numbers); never shrunk. */
#define FL__ETCD_KEYS_MAX (1u << 20)
/* A lock value "E PID HOST". */
#define FL__ETCD_HOSTNAME_MAX 64
#define FL__ETCD_LOCK_VALUE_MAX (FL__ETCD_EPOCH_TEXT_MAX + 12 + FL__ETCD_HOSTNAME_MAX)
/* A marker "%07E H" or "%07E R %020T". */
#define FL__ETCD_MARK_MAX 32
/* Inspection: at most this many keys and records in a snapshot. */
#define FL__ETCD_SNAP_MAX 100000u

/* One key this handle has used: index = fl_lease.slot. */
struct fl__etcd_key {
    uint32_t len;
    char name[FL_KEY_MAX + 1];
    /* Under fl__etcd.lock: */
    uint64_t newest;     /* greatest token of the key this handle has seen */
    uint64_t held_token; /* this handle's latest acquisition (0: none) */
    uint64_t held_lease; /* ... its etcd lease (renew may move it) */
    uint32_t held_tid;   /* ... and the thread that made it (-EDEADLK) */
    bool release_unsure; /* ... whose fl_release had no answer (may have
                            taken effect): a retry's "R T" is its own */
    uint64_t moving_lease; /* ... a renew's new etcd lease whose move of the key
                              had no known outcome (0: none): the key is on it or
                              on held_lease, and both are kept (lock.c, RENEW) */
};

/* What inspect.c keeps between fl_region_info_get and the per-index calls. */
struct fl__etcd_snap;

/* The leases of released holdings, revoked by a thread (revoker.c). */
struct fl__etcd_revoker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started, stop;
    uint64_t *ids; /* queued lease ids, oldest first */
    size_t n, cap;
};

/* The backend's handle: the base every backend's handle starts with
 * (core.h), then the etcd backend's own state. */
struct fl__etcd {
    struct fl_region h;
    struct fl__etcd_client c;
    char host[FL__ETCD_HOSTNAME_MAX + 1];
    /* etcd's minimum lease TTL, learnt from grants it raised (0: not seen).
     * relaxed: a hint that saves a lease move in renew. */
    _Atomic uint64_t min_ttl;
    /* The sequence of this handle's commits (record.c, SEQUENCE).  relaxed:
     * only each value's uniqueness and the order of one thread's commits
     * matter, which the counter's modification order gives. */
    _Atomic uint64_t commit_seq;

    pthread_mutex_t lock; /* the key table and snap */
    struct fl__etcd_key **keys;
    uint32_t nkeys, kcap;
    uint32_t *index; /* open addressing: key index + 1, 0 empty */
    uint32_t index_cap;
    struct fl__etcd_snap *snap;
    struct fl__etcd_revoker revoker;
};
_Static_assert(offsetof(struct fl__etcd, h) == 0, "an fl_region * of this backend is a struct fl__etcd *");

/* A holding, as the lower layers see it (backend.c maps it to fl_lease). */
struct fl__etcd_lease {
    uint64_t token;
    uint64_t deadline_ns;
    uint64_t lease_id;
    uint32_t slot;
    uint32_t flags;
};

/* revoker.c: init at open; revoke_later queues a lease (or revokes it at
 * once if no thread can run); stop drains the queue and joins the thread;
 * forget, in a forked child, drops the parent's queue without joining. */
void fl__etcd_revoker_init(struct fl__etcd *e);
void fl__etcd_revoke_later(struct fl__etcd *e, uint64_t id);
void fl__etcd_revoker_stop(struct fl__etcd *e);
void fl__etcd_revoker_forget(struct fl__etcd *e);

/* backend.c */
int fl__etcd_open(const char *uri, bool readonly, struct fl__etcd **out);
void fl__etcd_close(struct fl__etcd *e);

/* keys.c: the key table (fl__etcd.lock is taken inside each call). */
/* fl_key_resolve: the handle's index of key (interned, never removed while
 * the handle lives), without a request: 0, -EINVAL, -ENOSPC, -ENOMEM. */
int fl__etcd_resolve(struct fl__etcd *e, const char *key, uint32_t *slot);
/* The slot of key, created on first use: 0, -ENOSPC, -ENOMEM. */
int fl__etcd_intern(struct fl__etcd *e, const char *key, size_t len, uint32_t *slot);
/* The key of slot (copied, NUL-terminated) and the newest token this
 * handle knows of it: 0 or -EINVAL (no such slot). */
int fl__etcd_slot_key(struct fl__etcd *e, uint32_t slot, char key[FL_KEY_MAX + 1],
                      uint64_t *newest);
/* Raise the handle's knowledge of key's newest token (if it has the key);
 * the same by slot. */
void fl__etcd_note_newest(struct fl__etcd *e, const char *key, size_t len, uint64_t token);
void fl__etcd_note_slot(struct fl__etcd *e, uint32_t slot, uint64_t newest);
/* The etcd lease of holding token at slot, as this handle knows it (hint
 * when it knows none: 0, or the lease id the caller's fl_lease carries). */
uint64_t fl__etcd_held_lease(struct fl__etcd *e, uint32_t slot, uint64_t token, uint64_t hint);
/* This thread's holding token at slot, on etcd lease `lease`, begins; and
 * ends (if it is still slot's holding). */
void fl__etcd_set_held(struct fl__etcd *e, uint32_t slot, uint64_t token, uint64_t lease);
void fl__etcd_clear_held(struct fl__etcd *e, uint32_t slot, uint64_t token);
/* An fl_release of holding token at slot had no definite answer (it may
 * have taken effect: its retry's "R T" is its own); and whether one had. */
void fl__etcd_note_release_unsure(struct fl__etcd *e, uint32_t slot, uint64_t token);
bool fl__etcd_release_was_unsure(struct fl__etcd *e, uint32_t slot, uint64_t token);
/* The etcd keys of a key: PREFIX/lock/KEY, PREFIX/last/KEY, PREFIX/epoch. */
struct fl__etcd_keys {
    char lock[FL__ETCD_KEY_MAX], last[FL__ETCD_KEY_MAX], epoch[FL__ETCD_KEY_MAX];
    size_t lock_len, last_len, epoch_len;
};
void fl__etcd_keys_of(const struct fl__etcd *e, const char *key, size_t len,
                      struct fl__etcd_keys *k);

/* lease.c */
/* The TTL (s) to ask for a lease of lease_ns: 0 or -EOVERFLOW. */
int fl__etcd_ttl(struct fl__etcd *e, uint64_t lease_ns, uint64_t *ttl);
/* Grant a lease for ttl: *id, *granted, and *base the local time taken
 * before the request left (the deadline's origin). */
int fl__etcd_lease_grant(struct fl__etcd *e, uint64_t ttl, uint64_t *id, uint64_t *granted,
                         uint64_t *base);
/* Best effort: revoke a lease we will not use (0: none), fl_last_error()
 * left as it was. */
void fl__etcd_lease_drop(struct fl__etcd *e, uint64_t id);

/* wait.c: fl_acquire (and its _cancelable and _key forms). */
int fl__etcd_acquire(struct fl__etcd *e, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                     fl_cancel *cancel, struct fl__etcd_lease *out);

/* lock.c */
/* What one acquire Txn found.  fl__etcd_acquire_txn returns 0 with it, 1
 * when the lease ran out before the Txn was applied, or an error. */
struct fl__etcd_try {
    bool won;
    uint64_t token;        /* won: ours; else the holder's (0: free) */
    uint64_t holder_lease; /* !won: the holder's lease */
    uint32_t flags;        /* won: FL_LEASE_* */
    uint64_t revision;     /* the answer's revision (watch from the next one) */
    bool epoch_moved;      /* !won and free: the epoch changed; try again */
};
int fl__etcd_acquire_txn(struct fl__etcd *e, const struct fl__etcd_keys *k, uint64_t lease,
                         struct fl__etcd_try *t);
int fl__etcd_renew(struct fl__etcd *e, struct fl__etcd_lease *l, uint64_t lease_ns);
int fl__etcd_release(struct fl__etcd *e, const struct fl__etcd_lease *l);
int fl__etcd_check(struct fl__etcd *e, const struct fl__etcd_lease *l);
/* fl_close: release every holding of the handle as abandoned ("D"). */
void fl__etcd_abandon_all(struct fl__etcd *e);
/* The newest token key issued, read from its marker (0 never acquired),
 * and the marker's mod_revision. */
int fl__etcd_newest(struct fl__etcd *e, const char *key, size_t len, uint64_t *newest,
                    uint64_t *mark_rev);
/* Parse a marker value: 0 with *state ('H', 'R', 'D') and *token (for H,
 * E << 40 | mod_rev), or -EPROTO. */
int fl__etcd_mark_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                        char *state, uint64_t *token);
/* Parse a lock value: the epoch and pid in it, or -EPROTO. */
int fl__etcd_lock_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                        uint64_t *epoch, uint32_t *pid);

/* record.c */
int fl__etcd_commit(struct fl__etcd *e, const struct fl__etcd_lease *l, const char *record,
                    const void *data, size_t len, unsigned flags, uint64_t *accepted);
int fl__etcd_commit_token(struct fl__etcd *e, const char *key, uint64_t token,
                          const char *record, const void *data, size_t len, unsigned flags,
                          uint64_t *accepted);
int fl__etcd_read(struct fl__etcd *e, const char *record, void *buf, size_t cap, size_t *len,
                  uint64_t *fence);
/* A record's value split (fl__etcd_record_parse). */
struct fl__etcd_record {
    size_t key_len;  /* the bound key: the value's first key_len bytes */
    uint64_t token;  /* the greatest accepted token */
    uint64_t seq;    /* its commit's place among its holding's commits (0: by token) */
    size_t data_off; /* where the committed bytes start */
};
/* Split a record value into its bound key, token, sequence and data: 0 or
 * -EPROTO. */
int fl__etcd_record_parse(const struct fl__etcd_reply *rp, const unsigned char *v, size_t n,
                          struct fl__etcd_record *out);
/* Range record `name` (one request, fl_read's and fl_record_info_get's):
 * 0 with *kv (free it with fl__etcd_kv_free) and *out; -ENOENT ("record
 * NAME " + missing) when it does not exist; or the request's error.  *rp
 * is to be freed with fl__etcd_reply_free in every case. */
int fl__etcd_record_get(struct fl__etcd *e, const char *name, size_t name_len,
                        const char *missing, struct fl__etcd_reply *rp, struct fl__etcd_kv *kv,
                        struct fl__etcd_record *out);

/* inspect.c */
int fl__etcd_region_info(struct fl__etcd *e, fl_region_info *info);
int fl__etcd_lock_info(struct fl__etcd *e, uint32_t index, fl_lock_info *info);
int fl__etcd_record_info(struct fl__etcd *e, uint32_t index, fl_record_info *info);
void fl__etcd_snap_free(struct fl__etcd_snap *s);

/* The calling thread's id (cached). */
uint32_t fl__etcd_tid(void);

#endif /* FL_ETCD_H */
