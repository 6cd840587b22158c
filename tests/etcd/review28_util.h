/* SPDX-License-Identifier: MIT */
/*
 * review28_util.h - what the tests of issue 28's hostile review
 * (etcd_review28, etcd_review28_misuse) share: their one member, the queue
 * of a key as it is in etcd (read with raw requests, not through the
 * library), an operator's deletion, and an fl_acquire on a thread of its
 * own (review28_util.c).
 */
#ifndef FL_TEST_REVIEW28_UTIL_H
#define FL_TEST_REVIEW28_UTIL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_harness.h"

#define S(x) ((uint64_t)(x) * TH_S)
#define MS(x) ((uint64_t)(x) * TH_MS)
/* What a waiter may be kept past the lease of the entry before it. */
#define SLACK S(4)

/* The one member (the relays front one member), a prefix per test:
 * started by review28_group_setup. */
extern ec_cluster cl;

int review28_group_setup(void **state);
int review28_group_teardown(void **state);

void pause_ms(int ms);
double secs(uint64_t ns);

/* ---- raw etcd: the queue as it is ---- */

/* p's n bytes in base64 (malloc'd; fails the test). */
char *b64(const void *p, size_t n);

/* One entry of a key's queue. */
struct qent {
    unsigned char key[512];
    size_t klen;
    char value[128];
    uint64_t lease, c, mod;
};

/* PREFIX/lock/KEY NUL .. KEY \1, oldest first: how many (at most max in e). */
int queue_of(const char *prefix, const char *key, struct qent *e, int max);
/* Live ("W") entries of a key's queue. */
int live_of(const char *prefix, const char *key);
/* Delete etcd key k (n bytes), as `etcdctl del` would. */
void etcd_del(const void *k, size_t n);
/* Wait (polled, bounded) until the key's queue has n live entries. */
bool wait_live(const char *prefix, const char *key, int n, int timeout_ms);
void dump_queue(const char *prefix, const char *key);
/* The URI of prefix on the member, into buf. */
const char *direct_uri(const char *prefix, char *buf, size_t cap);

/* ---- the proof that nothing was left holding a key ---- */

/* What a timed fl_acquire answered, and how long it took. */
struct timed_acq {
    int rc;
    uint64_t took;  /* ns */
    char why[512];  /* fl_last_error() when rc != 0, else "" */
};
/* d asks for key with a lease of 2 s, waiting up to one such lease and
 * SLACK: what a phantom entry left by an earlier call (on a lease of 2 s)
 * could delay it by.  On success the caller releases *l. */
struct timed_acq take_within_lease(fl_region *d, const char *key, fl_lease *l);

/* ---- an fl_acquire on a thread of its own ---- */

struct acq_arg {
    fl_region *r;
    const char *key;
    uint64_t lease_ns;
    int64_t timeout_ns;
    fl_lease l;
    _Atomic int done;
    int rc;
    uint64_t t_ret;
};

/* The thread (pthread_create(..., acq_main, a)): fl_acquire into a->l. */
void *acq_main(void *arg);
/* True once the thread's fl_acquire returned, waiting up to timeout_ms. */
bool wait_done(struct acq_arg *a, int timeout_ms);

#endif
