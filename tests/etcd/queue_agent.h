/* SPDX-License-Identifier: MIT */
/*
 * queue_agent.h - the processes of the fair queue's tests (etcd_queue,
 * etcd_queue_faults, etcd_queue_netns): agents, child processes with a
 * handle of their own driven by one-line commands (queue_agent.c says
 * which), that count the holders and note every acquisition in memory all
 * of a test's processes share, and the parent's side of them (qa_*).
 * ec_agent (cluster_harness.h) has no cancel, no loop and no shared
 * counter, hence these.
 *
 * Lease lengths: holders and most waiters take 10 s or more, so that no
 * holding can run out in a test (the counter then means what it says); the
 * head waiters that are stopped, killed, cut off, cancelled or timed out
 * take 2 s (an etcd TTL of 2 s), the bound the ones behind them must not
 * wait past: the takeover is asserted within that lease + SLACK of the
 * release.
 */
#ifndef FL_TEST_QUEUE_AGENT_H
#define FL_TEST_QUEUE_AGENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster_harness.h"

#define S(x) ((uint64_t)((uint64_t)(x) * TH_S))
#define MS(x) ((uint64_t)((uint64_t)(x) * TH_MS))
#define AGENT_MS 30000
/* How long a waiter may take to show in the key's waiters count. */
#define QUEUE_WAIT_MS 20000
/* After one such wait ran out (a backend that does not count its queue),
 * each later one waits this long and goes on. */
#define QUEUE_FALLBACK_MS 1500
/* The lease of a waiter that is stopped, killed, cut off, cancelled or
 * timed out: the longest the ones behind it may be kept waiting. */
#define HEAD_LEASE S(2)
#define SLACK S(4)
#define HOLD_LEASE S(60) /* a holder the test releases itself */
#define LONG_LEASE S(10)

/* ---- what every process of a test shares (MAP_SHARED, before fork) ---- */

#define MAXPROC 32
#define MAXACQ 4096

struct acq_rec {
    _Atomic int ready; /* written last */
    int who;           /* the agent's number */
    int commit_rc;     /* its strict commit's result */
    uint64_t token, accepted;
    uint64_t t_acq;    /* fl_acquire returned (CLOCK_MONOTONIC, this host) */
    uint64_t t_rel;    /* fl_release called (0: not yet) */
};

struct shared {
    _Atomic int holders;     /* +1 after an acquisition, -1 before its release */
    _Atomic int max_holders;
    _Atomic int overlaps;
    char overlap_why[512];
    _Atomic uint32_t nacq;   /* acquisitions, in order (exclusion makes it one) */
    struct acq_rec acq[MAXACQ];
    struct {
        _Atomic uint64_t token, deadline; /* the holding, 0: none */
    } slot[MAXPROC];
    _Atomic int stop;        /* loops: finish the round, report, stop */
};

/* Mapped by the program's group set-up (queue_shared_map), before the
 * first agent is forked. */
extern struct shared *sh;

/* Map sh (shared with every agent forked after it); fails the test. */
void queue_shared_map(void);
void shared_reset(void);

void pause_ms(int ms);
/* -EHOSTUNREACH or -EAGAIN: nobody answered, or the answer is unknown. */
bool network_error(int rc);
double secs(uint64_t ns);

/* The commands' flags (acq KEY LEASE TIMEOUT FLAGS). */
#define F_CANCEL 1
#define F_RETRY 2
#define F_AUTOREL 4

/* ---- the parent's side of the agents ---- */

typedef struct qa {
    th_child c;
    int who;
    int open_rc;
} qa;

typedef struct qr {
    char kind;       /* 'r' or 'd' */
    int rc;
    uint64_t token, t0, t1;
    int commit_rc;
    uint64_t accepted;
    int net, rel_rc;
    /* loop */
    int rounds, net_acq, net_commit, net_rel, stale, rel_stale, other, other_rc;
    char text[400];
} qr;

/* Every agent started, so that a failed test leaves none behind (copies:
 * a failed test's own qa are on a stack that is gone). */
extern th_child live[MAXPROC];

/* Start agent who on uri (inside network namespace netns if not NULL or
 * "", with FENCELOCK_ETCD_TIMEOUT_MS=timeout_ms if not NULL); fails the
 * test unless its fl_open succeeds. */
void qa_start(qa *a, int who, const char *uri, const char *netns, const char *timeout_ms);
void qa_send(qa *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Read one answer within timeout_ms: true if one came. */
bool qa_read(qa *a, qr *q, int timeout_ms);
/* The same, failing the test without an answer (what: the command). */
qr qa_wait(qa *a, int timeout_ms, const char *what);
/* True if the agent has an answer waiting (it returned from its call). */
bool qa_answered(qa *a);
/* Let it exit (fl_close) and reap it: the test fails unless it exits 0. */
void qa_stop(qa *a);
/* SIGKILL and reap. */
void qa_kill(qa *a);

#endif
