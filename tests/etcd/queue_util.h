/* SPDX-License-Identifier: MIT */
/*
 * queue_util.h - what the fair queue's tests (etcd_queue,
 * etcd_queue_faults, etcd_queue_netns) share besides their agents
 * (queue_agent.h): the cluster, one per program with a prefix per test;
 * the queue as inspection shows it; the checks; and the head-waiter
 * scenario, whose fault (stopped, killed, cut off) each program chooses.
 *
 * Two kinds of checks.  The invariants (mutual exclusion, tokens, commits,
 * errors, takeover bounds, everybody finishing) fail the test at once.  The
 * queue's contract (the waiters count, the order of service, the requests
 * per acquisition), and in test_leader_kill the answer of a release called
 * again after a lost answer, are checked as the test goes and reported
 * together at its end (`contract:` lines), so that one run shows all of
 * it, and a protocol without a queue (the herd before issue 28) still runs
 * every invariant: when the waiters count never shows a waiter, arrival is
 * approximated by a pause of QUEUE_FALLBACK_MS after the first 20 s wait,
 * and the order checks that follow fail anyway.
 */
#ifndef FL_TEST_QUEUE_UTIL_H
#define FL_TEST_QUEUE_UTIL_H

#include "queue_agent.h"

/* ---- the contract checks, reported at the end of each test ---- */

void contract_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void contract_reset(void);
/* Fail the test with every contract check that failed. */
void contract_report(const char *test);

/* ---- the cluster, one for the program; a prefix per test ---- */

extern ec_cluster cluster;

/* The URI of prefix on every member (a buffer of its own, reused). */
const char *uri_of(const char *prefix);
/* Each test's teardown: kill the agents it left, give the cluster its
 * members back. */
int teardown_test(void **state);
/* The group's: sh mapped, three members started (ec_start); all stopped. */
int queue_group_setup(void **state);
int queue_group_teardown(void **state);

/* ---- the queue as inspection shows it ---- */

/* Wait until the key's waiters count is want (an explicit wait, polled).
 * A count that does not get there is a contract failure. */
bool wait_waiters(fl_region *ro, const char *key, int want, const char *what);
/* Wait for acquisition number n (0-based, in order) within timeout_ms. */
struct acq_rec *wait_acq(uint32_t n, int timeout_ms, const char *what);
/* The invariants over the whole test: never two holders, tokens strictly
 * increasing in acquisition order. */
void check_exclusion_and_tokens(void);
void expect_commit_ok(const qr *q, int who);
/* The order of service against the expected one (agents' numbers). */
void check_order(uint32_t from, const int *want, int n, const char *what);
fl_region *open_ro(const char *prefix);
/* Start agent who and send it an acquisition that must wait: it must not
 * answer before the key's waiters count reaches queued (its arrival). */
void start_waiter(qa *a, int who, const char *uri, const char *netns, const char *tmo,
                  fl_region *ro, uint64_t lease, int64_t timeout, int flags, int queued);

/* ---- the head waiter ---- */

/* The head waiter W1 is stopped, killed or cut off; H releases. */
enum head_fault { HEAD_STOP, HEAD_KILL, HEAD_CUT };

/* Holder H, head waiter W1 (2 s lease), W2 and W3 behind it (10 s) on
 * prefix; W1 stopped, killed or (HEAD_CUT) cut off in namespace ns, which
 * the cluster's members are reached through (NULL for the others); then
 * H releases (queue_util.c says what must hold). */
void head_waiter(enum head_fault fault, const char *prefix, const ec_netns *ns);

#endif
