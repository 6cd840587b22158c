/* SPDX-License-Identifier: MIT */
/*
 * etcd.h - the etcd backend's own state and its layers (keys.c, lease.c,
 * queue.c, lock.c, wait.c, pool.c, entry.c, record.c, inspect.c, backend.c),
 * above the client (client.h).  Not installed.
 *
 * LAYOUT.  Under the region URI's PREFIX, four kinds of keys:
 *
 *   PREFIX/epoch         "N": the token epoch (epoch.c), 1 .. 2^23 - 1
 *   PREFIX/lock/KEY\0ID  the queue of KEY: one entry per acquisition, made by
 *                        its acquire Txn (ID: 32 hex digits, unique to the
 *                        call: entry.c).  Its create_revision c numbers the
 *                        acquisition: token E << 40 | c.  While live it is
 *                        attached to its caller's etcd lease:
 *                          "W %07E PID HOST"   waiting; the oldest live
 *                                              entry holds KEY
 *                        and etcd deletes it when that lease ends (an expiry,
 *                        or a waiter's place given up).  When its holder ends
 *                        the holding, the release Txn rewrites it without a
 *                        lease:
 *                          "R %07E %020T"      released
 *                          "D %07E %020T"      abandoned by fl_close (as a
 *                                              death: FL_LEASE_OWNER_DIED)
 *                        and it stays until the next holder's release
 *                        deletes it: the entry behind it learns from that one
 *                        write, on its watch, that it holds KEY now and how
 *                        the holding before ended (queue.c, QUEUE).
 *   PREFIX/last/KEY      "q%07E": rewritten by every acquire Txn with its
 *                        epoch, so its mod_revision is the c of KEY's newest
 *                        entry: E << 40 | mod_revision is the newest token KEY
 *                        handed out or queued (fl_commit_token), and the
 *                        acquire Txn compares it to refuse an epoch set back.
 *                        The 'q' tells this layout from the one before 0.2
 *                        ("%07E H"), which neither reads as its own.
 *   PREFIX/rec/NAME      KEY NUL %020(T) %020(S) DATA: the record's binding,
 *                        the greatest token it accepted, the sequence number of
 *                        that commit among its holding's commits (0 for
 *                        fl_commit_token), its value (record.c).
 *
 * etcd keys are bytes; KEY and NAME are the caller's bytes (1..FL_KEY_MAX,
 * no NUL), so KEY\0 .. KEY\1 is exactly KEY's queue.  PREFIX's rules
 * (uri.c) keep prefixes from sharing keys.
 *
 * LEASES.  Holdings and waiting entries live on etcd leases the handle keeps
 * and reuses (pool.c): one lease carries one entry at a time, and a lease
 * whose entry was released goes back to the handle's pool for the next
 * acquisition of the same TTL, kept alive meanwhile by the pool's thread.
 * So a warm handle takes a free key in one request and releases it in one.
 *
 * THREADS.  A handle may be shared by threads.  Requests run outside any
 * lock (the client is thread-safe); the handle's key table and inspection
 * snapshot are under `lock`, the pool under its own, neither held across a
 * request.
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
/* An entry's ID: 16 hex digits of the handle's nonce, 16 of its counter. */
#define FL__ETCD_ID_LEN 32
/* An entry's value: "W %07E PID HOST" or "R %07E %020T" (entry.c). */
#define FL__ETCD_HOSTNAME_MAX 64
#define FL__ETCD_ENTRY_VALUE_MAX (2 + 8 + 11 + FL__ETCD_HOSTNAME_MAX + 1)
/* The marker "q%07E"; read with room for the layout before 0.2's, so that
 * it is named as such (entry.c). */
#define FL__ETCD_MARK_MAX 16
#define FL__ETCD_MARK_READ_MAX 64
/* Inspection: at most this many keys and records in a snapshot. */
#define FL__ETCD_SNAP_MAX 100000u

/* One key this handle has used: index = fl_lease.slot. */
struct fl__etcd_key {
    uint32_t len;
    char name[FL_KEY_MAX + 1];
    /* Under fl__etcd.lock: */
    uint64_t newest;     /* greatest token of the key this handle has seen */
    uint64_t held_token; /* this handle's latest acquisition (0: none); its
                            entry's create_revision is the token's revision */
    char held_id[FL__ETCD_ID_LEN + 1]; /* ... its entry */
    char pred_id[FL__ETCD_ID_LEN + 1]; /* ... the released entry before it,
                                          which its release deletes ("": none) */
    uint64_t held_lease; /* ... the etcd lease its entry is on (renew may move it) */
    uint64_t held_ttl;   /* ... that lease's TTL (s) */
    uint64_t held_until; /* ... and how long etcd keeps it at least (local ns) */
    uint32_t held_tid;   /* ... and the thread that made it (-EDEADLK) */
    bool release_unsure; /* ... whose fl_release had no answer (may have
                            taken effect): a retry's "R T" is its own */
    bool tainted;        /* ... whose acquire Txn had an attempt without an
                            answer: it may still arrive, so the lease is
                            revoked, never pooled, when the holding ends */
    uint64_t moving_lease; /* ... a renew's new etcd lease whose move of the entry
                              had no known outcome (0: none): the entry is on it or
                              on held_lease, and both are kept (lock.c, RENEW) */
    uint64_t moving_ttl, moving_until; /* ... that lease's TTL and end */
};

/* What inspect.c keeps between fl_region_info_get and the per-index calls. */
struct fl__etcd_snap;

/* One etcd lease that carries nothing, kept for the next acquisition. */
struct fl__etcd_pooled {
    uint64_t id, ttl;
    uint64_t until; /* etcd keeps it at least until then (local ns) */
    uint64_t used;  /* when it was last handed out or given back (local ns) */
    bool renewing;  /* the pool's thread is renewing it */
};
#define FL__ETCD_POOL_MAX 8

/* The handle's leases (pool.c): those carrying nothing, kept alive for
 * reuse, and those to revoke, both served by one thread. */
struct fl__etcd_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started, stop;
    struct fl__etcd_pooled idle[FL__ETCD_POOL_MAX];
    unsigned n;
    uint64_t *revoke; /* queued lease ids, oldest first */
    size_t nrev, caprev;
};

/* The backend's handle: the base every backend's handle starts with
 * (core.h), then the etcd backend's own state. */
struct fl__etcd {
    struct fl_region h;
    struct fl__etcd_client c;
    char host[FL__ETCD_HOSTNAME_MAX + 1];
    /* What makes entry IDs unique: a random nonce per handle and a counter.
     * relaxed: only each value's uniqueness matters. */
    uint64_t nonce;
    _Atomic uint64_t next_id;
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
    struct fl__etcd_pool pool;
};
_Static_assert(offsetof(struct fl__etcd, h) == 0, "an fl_region * of this backend is a struct fl__etcd *");

/* The revision of a token: its queue entry's create_revision. */
static inline uint64_t fl__etcd_rev(uint64_t token) { return token & (FL__ETCD_REV_LIMIT - 1); }
/* KEY of k (struct fl__etcd_keys *), for "%.*s" in messages: after
 * PREFIX/last/ in k->last. */
#define FL__KEY_OF(e, k)                                                                      \
    (int)((k)->last_len - ((e)->c.uri.prefix_len + 6)), (k)->last + (e)->c.uri.prefix_len + 6

/* A holding, as the lower layers see it (backend.c maps it to fl_lease). */
struct fl__etcd_lease {
    uint64_t token;
    uint64_t deadline_ns;
    uint64_t lease_id;
    uint32_t slot;
    uint32_t flags;
};

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
/* This handle's holding of slot, if it is the holding of token: a copy of
 * the key's state (true), or false. */
bool fl__etcd_held(struct fl__etcd *e, uint32_t slot, uint64_t token, struct fl__etcd_key *out);
/* Whether the calling thread holds slot by an unexpired lease (-EDEADLK):
 * 1, or 2 when a release of it had no answer (it may be over); then *id is
 * its entry.  0: not. */
int fl__etcd_held_by_me(struct fl__etcd *e, uint32_t slot, char id[FL__ETCD_ID_LEN + 1]);
/* The holding of token at slot begins (by this thread): its entry, the
 * released entry before it, its lease, TTL and the lease's end, and whether
 * a request of its acquisition that puts an entry on that lease may still
 * arrive (tainted: the lease is revoked, not pooled, when it ends). */
void fl__etcd_set_held(struct fl__etcd *e, uint32_t slot, uint64_t token, const char *id,
                       const char *pred_id, uint64_t lease, uint64_t ttl, uint64_t until,
                       bool tainted);
/* The holding of token at slot is now on lease (its TTL and end), and its
 * entry may be on `moving` instead (0: it is not). */
void fl__etcd_set_lease(struct fl__etcd *e, uint32_t slot, uint64_t token, uint64_t lease,
                        uint64_t ttl, uint64_t until, uint64_t moving, uint64_t moving_ttl,
                        uint64_t moving_until);
/* ... ends, if it is still slot's holding: true when this call ended it. */
bool fl__etcd_clear_held(struct fl__etcd *e, uint32_t slot, uint64_t token);
/* An fl_release of holding token at slot had no definite answer (it may
 * have taken effect: its retry's "R T" is its own). */
void fl__etcd_note_release_unsure(struct fl__etcd *e, uint32_t slot, uint64_t token);
/* The etcd keys of a key: PREFIX/lock/KEY\0 .. KEY\1 (its queue), PREFIX/last/KEY,
 * PREFIX/epoch. */
struct fl__etcd_keys {
    char q0[FL__ETCD_KEY_MAX], q1[FL__ETCD_KEY_MAX], last[FL__ETCD_KEY_MAX],
        epoch[FL__ETCD_KEY_MAX];
    size_t q_len, last_len, epoch_len; /* q0 and q1 have the same length */
};
void fl__etcd_keys_of(const struct fl__etcd *e, const char *key, size_t len,
                      struct fl__etcd_keys *k);

/* entry.c: an entry's name and values, and what the queue's ranges say. */
/* A new ID, unique to this handle's call. */
void fl__etcd_new_id(struct fl__etcd *e, char id[FL__ETCD_ID_LEN + 1]);
/* The entry key PREFIX/lock/KEY\0ID of k's key into buf; its length. */
size_t fl__etcd_entry_key(const struct fl__etcd_keys *k, const char *id,
                          char buf[FL__ETCD_KEY_MAX]);
/* An entry of a queue, parsed. */
struct fl__etcd_entry {
    char id[FL__ETCD_ID_LEN + 1];
    char state;          /* 'W' live, 'R' released, 'D' abandoned by fl_close */
    uint64_t epoch, token; /* token: E << 40 | c (live), or the value's (R, D) */
    uint32_t pid;        /* live */
    uint64_t c, mod_revision, lease;
    unsigned char value[FL__ETCD_ENTRY_VALUE_MAX]; /* as read (a compare's operand) */
    size_t value_len;
};
/* Parse kv as an entry of k's queue: 0 or -EPROTO. */
int fl__etcd_entry_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_keys *k,
                         const struct fl__etcd_kv *kv, struct fl__etcd_entry *out);
/* The first entry of a range answer of k's queue: 1 found, 0 none, or -EPROTO. */
int fl__etcd_entry_first(const struct fl__etcd_reply *rp, const struct fl__etcd_keys *k,
                         const json_t *range, struct fl__etcd_entry *out);
/* Values: a live entry's, a released one's (state 'R' or 'D'), the marker's. */
int fl__etcd_live_value(const struct fl__etcd *e, uint64_t epoch, char *buf, size_t cap);
int fl__etcd_done_value(char state, uint64_t token, char *buf, size_t cap);
int fl__etcd_mark_value(uint64_t epoch, char *buf, size_t cap);
/* Parse the marker: 0 with the epoch and the newest token (E << 40 |
 * mod_revision); -ENOMSG for the layout before 0.2 (digits first); -EPROTO. */
int fl__etcd_mark_parse(const struct fl__etcd_reply *rp, const struct fl__etcd_kv *kv,
                        uint64_t *epoch, uint64_t *newest);

/* lease.c: the TTLs and grants of the etcd leases entries live on. */
/* The TTL (s) to ask for a lease of lease_ns: 0 or -EOVERFLOW. */
int fl__etcd_ttl(struct fl__etcd *e, uint64_t lease_ns, uint64_t *ttl);
/* Grant a lease for ttl: *id, *granted, and *until = the local time taken
 * before the request left plus the TTL granted (the lease's end at the
 * earliest). */
int fl__etcd_lease_grant(struct fl__etcd *e, uint64_t ttl, uint64_t *id, uint64_t *granted,
                         uint64_t *until);
/* Keep lease id alive: 0 with *until (0 when etcd no longer has it), or
 * the request's error. */
int fl__etcd_lease_renew(struct fl__etcd *e, uint64_t id, uint64_t *until);

/* pool.c: the handle's reusable leases and its lease thread. */
void fl__etcd_pool_init(struct fl__etcd *e);
/* A lease of ttl that carries nothing: from the pool (renewed first if more
 * than half its TTL has passed), else granted.  *granted is its TTL. */
int fl__etcd_lease_take(struct fl__etcd *e, uint64_t ttl, uint64_t *id, uint64_t *granted,
                        uint64_t *until);
/* Give back a lease that carries nothing now, alive until `until`. */
void fl__etcd_lease_give(struct fl__etcd *e, uint64_t id, uint64_t ttl, uint64_t until);
/* Revoke a lease off the caller's path (it may carry an entry nobody will
 * use: it goes with it); 0 is ignored. */
void fl__etcd_revoke_later(struct fl__etcd *e, uint64_t id);
/* fl_close: revoke what is pooled or queued, and join the thread. */
void fl__etcd_pool_stop(struct fl__etcd *e);
/* In a forked child: drop the parent's pool without touching it. */
void fl__etcd_pool_forget(struct fl__etcd *e);

/* wait.c: fl_acquire (and its _cancelable and _key forms). */
int fl__etcd_acquire(struct fl__etcd *e, const char *key, uint64_t lease_ns, int64_t timeout_ns,
                     fl_cancel *cancel, struct fl__etcd_lease *out);

/* queue.c: the Txns of the queue; lock.c: a holding's. */
/* What an enqueue (or a look at the queue) found for our entry. */
struct fl__etcd_place {
    uint64_t c;            /* our entry's create_revision (0: not queued) */
    uint64_t token;        /* its token: the enqueue's epoch << 40 | c */
    bool head;             /* ours is the oldest live entry: we hold the key */
    uint32_t flags;        /* head: FL_LEASE_* of the holding before */
    struct fl__etcd_entry pred; /* the entry just before ours (pred.state 0: none) */
    bool pred_is_head;     /* pred is live and holds the key */
    char pred_pred[FL__ETCD_ID_LEN + 1]; /* pred_is_head: the released entry before it */
    uint64_t holder;       /* !head: the holder's token (0: unknown) */
    uint64_t revision;     /* the answer's revision (watch from the next) */
    bool epoch_moved;      /* nothing done: the epoch changed; try again */
    bool ambiguous;        /* an attempt of the acquire Txn had no answer: it
                              may still arrive (etcd.h, fl__etcd_key.tainted) */
};
/* The acquire Txn: queue entry id of k's key on lease (try: only if the
 * key is free).  0 with *p; -EBUSY (try, held: p->holder); 1 when the
 * lease ran out before the Txn was applied; or an error. */
int fl__etcd_enqueue(struct fl__etcd *e, const struct fl__etcd_keys *k, const char *id,
                     uint64_t lease, bool try_only, struct fl__etcd_place *p);
/* Look at the queue around our entry id (created at c): one read.  0 with
 * *p (p->c 0: our entry is gone), or an error.  had_pred: an entry was
 * before ours (none now means it vanished unreleased: FL_LEASE_EXPIRED). */
int fl__etcd_look(struct fl__etcd *e, const struct fl__etcd_keys *k, const char *id, uint64_t c,
                  bool had_pred, struct fl__etcd_place *p);
/* Leave the queue: delete our waiting entry id if p->pred is still as
 * known.  0 when it is gone; 1 when we turned out to hold the key (*p
 * says how); 2 when another entry is before ours now (*p says which: try
 * again); or an error (-EAGAIN: unknown). */
int fl__etcd_leave(struct fl__etcd *e, const struct fl__etcd_keys *k, const char *id,
                   struct fl__etcd_place *p);
int fl__etcd_renew(struct fl__etcd *e, struct fl__etcd_lease *l, uint64_t lease_ns);
int fl__etcd_release(struct fl__etcd *e, const struct fl__etcd_lease *l);
int fl__etcd_check(struct fl__etcd *e, const struct fl__etcd_lease *l);
/* fl_close: release every holding of the handle as abandoned ("D"). */
void fl__etcd_abandon_all(struct fl__etcd *e);
/* The newest token key handed out or queued, read from its marker (0 never
 * acquired), and the marker's mod_revision. */
int fl__etcd_newest(struct fl__etcd *e, const char *key, size_t len, uint64_t *newest,
                    uint64_t *mark_rev);

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
