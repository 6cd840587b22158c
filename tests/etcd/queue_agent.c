/* SPDX-License-Identifier: MIT */
/*
 * queue_agent.c - the agents of the fair queue's tests (queue_agent.h):
 * the child process, its commands and answers, and the parent's side; the
 * memory every process of a test shares, where each agent counts itself
 * as a holder and notes its acquisitions, so that the parent sees two
 * holders at once, the order of service and the tokens.  Shared by
 * etcd_queue, etcd_queue_faults and etcd_queue_netns.
 */
#include "queue_agent.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

/* ---- what every process of a test shares (MAP_SHARED, before fork) ---- */

struct shared *sh;

void queue_shared_map(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
}

void shared_reset(void)
{
    memset(sh, 0, sizeof *sh);
}

void pause_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

bool network_error(int rc)
{
    return rc == -EHOSTUNREACH || rc == -EAGAIN;
}

double secs(uint64_t ns)
{
    return (double)ns / 1e9;
}

/* =====================================================================
 * The agent: a child process with its own handle, driven by one-line
 * commands (ec_agent has no cancel, no loop and no shared counter).
 *
 *   acq KEY LEASE TIMEOUT FLAGS   fl_acquire (TIMEOUT -1: forever), then a
 *                                 strict commit of the token to "rec";
 *                                 FLAGS: 1 fl_acquire_cancelable (SIGUSR1
 *                                 triggers), 2 retry network errors,
 *                                 4 release right after the commit
 *   rel                           fl_release of the held lease (again after
 *                                 a network error, as docs/etcd.md says)
 *   loop KEY LEASE ROUNDS         acquire (forever), strict commit, release,
 *                                 ROUNDS times (0: until sh->stop)
 *   exit                          fl_close, exit 0
 *
 * Answers: "r RC TOKEN T0 T1 COMMIT_RC ACCEPTED NET REL_RC TEXT" for acq
 * and rel, "d ROUNDS NET_ACQ NET_COMMIT NET_REL STALE REL_STALE OTHER OTHER_RC
 * TEXT" for loop (STALE: strict commits refused; REL_STALE: releases
 * retried after a network error that answered -ESTALE before the lease's
 * deadline).
 * ===================================================================== */

static fl_cancel *agent_cancel;

static void on_usr1(int sig)
{
    (void)sig;
    fl_cancel_trigger(agent_cancel); /* async-signal-safe */
}

struct agent_arg {
    const char *uri, *netns, *timeout_ms;
    int who;
};

/* After fl_acquire returned 0: count the holder, note the acquisition. */
static int note_acquired(int who, const fl_lease *l)
{
    uint64_t now = th_now_ns();
    sh->slot[who].deadline = l->deadline_ns;
    sh->slot[who].token = l->token;
    int h = atomic_fetch_add(&sh->holders, 1) + 1;
    for (int m = atomic_load(&sh->max_holders); h > m;)
        if (atomic_compare_exchange_weak(&sh->max_holders, &m, h))
            break;
    if (h > 1 && atomic_fetch_add(&sh->overlaps, 1) == 0) {
        /* Who else holds, and was its lease still running? */
        char why[512] = "";
        size_t n = 0;
        for (int j = 0; j < MAXPROC && n < sizeof why; j++) {
            uint64_t t = sh->slot[j].token, d = sh->slot[j].deadline;
            if (j == who || !t)
                continue;
            n += (size_t)snprintf(why + n, sizeof why - n,
                                  "agent %d holds token %" PRIu64 " (%s: %.3f s %s); ", j,
                                  t, now < d ? "unexpired" : "EXPIRED",
                                  secs(now < d ? d - now : now - d),
                                  now < d ? "left" : "past its deadline");
        }
        snprintf(sh->overlap_why, sizeof sh->overlap_why,
                 "agent %d got token %" PRIu64 " while %d processes held the key: %.400s", who,
                 l->token, h, why);
    }
    uint32_t i = atomic_fetch_add(&sh->nacq, 1);
    if (i < MAXACQ) {
        sh->acq[i].who = who;
        sh->acq[i].token = l->token;
        sh->acq[i].t_acq = now;
        sh->acq[i].commit_rc = 1; /* not yet */
        atomic_store(&sh->acq[i].ready, 1);
    }
    return (int)i;
}

/* Before fl_release: the holder leaves the count. */
static void note_release(int who, int i)
{
    atomic_fetch_sub(&sh->holders, 1);
    sh->slot[who].token = 0;
    if (i >= 0 && i < MAXACQ)
        sh->acq[i].t_rel = th_now_ns();
}

static void strict_commit(fl_region *r, const fl_lease *l, int i, int *rc, uint64_t *acc)
{
    *acc = 0;
    *rc = fl_commit(r, l, "rec", &l->token, sizeof l->token, FL_COMMIT_STRICT, acc);
    if (i >= 0 && i < MAXACQ) {
        sh->acq[i].commit_rc = *rc;
        sh->acq[i].accepted = *acc;
    }
}

/* fl_release, again while the answer is unknown or nobody answered
 * (docs/etcd.md: the retry returns 0 if the first attempt took effect);
 * -ESTALE once the lease's deadline passed means it ran out meanwhile. */
static int release_until_known(fl_region *r, const fl_lease *l, int *net)
{
    int rc = fl_release(r, l);
    for (uint64_t end = th_now_ns() + S(30); network_error(rc) && th_now_ns() < end;) {
        (*net)++;
        pause_ms(50);
        rc = fl_release(r, l);
    }
    return rc;
}

static void answer(int out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void answer(int out, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    th_send(out, line);
}

static int agent_main(void *arg, int in, int out)
{
    const struct agent_arg *aa = arg;
    int who = aa->who;
    char line[1024];
    if (aa->timeout_ms)
        setenv("FENCELOCK_ETCD_TIMEOUT_MS", aa->timeout_ms, 1);
    if (aa->netns && aa->netns[0]) {
        int rc = ec_netns_enter(aa->netns);
        if (rc) {
            answer(out, "ready %d cannot enter namespace %s", rc, aa->netns);
            return 1;
        }
    }
    if (fl_cancel_new(&agent_cancel) != 0) {
        answer(out, "ready %d fl_cancel_new", -ENOMEM);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    fl_region *r = NULL;
    int rc = fl_open(aa->uri, &r);
    answer(out, "ready %d %s", rc, rc ? fl_last_error() : "");
    if (rc)
        return 1;
    fl_lease lease;
    memset(&lease, 0, sizeof lease);
    int held = -1; /* the acquisition's index while held, else -1 */
    bool holding = false;
    while (th_recv(in, line, sizeof line, 3600 * 1000) == 0) {
        char key[256];
        unsigned long long lease_ns = 0;
        long long timeout_ns = 0;
        int flags = 0, rounds = 0;
        if (sscanf(line, "acq %255s %llu %lld %d", key, &lease_ns, &timeout_ns, &flags) == 4) {
            int net = 0, crc = 1, relrc = 1;
            uint64_t acc = 0, t0 = th_now_ns();
            fl_lease l;
            memset(&l, 0, sizeof l);
            for (;;) {
                rc = (flags & F_CANCEL)
                         ? fl_acquire_cancelable(r, key, lease_ns, timeout_ns, agent_cancel, &l)
                         : fl_acquire(r, key, lease_ns, timeout_ns, &l);
                if (!(flags & F_RETRY) || !network_error(rc))
                    break;
                net++;
                pause_ms(100);
            }
            uint64_t t1 = th_now_ns();
            char why[300];
            snprintf(why, sizeof why, "%s", rc ? fl_last_error() : "");
            if (rc == 0) {
                lease = l;
                holding = true;
                held = note_acquired(who, &l);
                strict_commit(r, &l, held, &crc, &acc);
                if (crc)
                    snprintf(why, sizeof why, "commit: %s", fl_last_error());
                if (flags & F_AUTOREL) {
                    note_release(who, held);
                    relrc = release_until_known(r, &l, &net);
                    if (relrc)
                        snprintf(why, sizeof why, "release: %s", fl_last_error());
                    holding = false;
                    held = -1;
                }
            }
            answer(out, "r %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %d %" PRIu64 " %d %d %s", rc,
                   l.token, t0, t1, crc, acc, net, relrc, why);
        } else if (strcmp(line, "rel") == 0) {
            int net = 0;
            uint64_t t0 = th_now_ns();
            if (holding)
                note_release(who, held);
            rc = release_until_known(r, &lease, &net);
            holding = false;
            held = -1;
            answer(out, "r %d %" PRIu64 " %" PRIu64 " %" PRIu64 " 1 0 %d %d %s", rc,
                   lease.token, t0, th_now_ns(), net, rc, rc ? fl_last_error() : "");
        } else if (sscanf(line, "loop %255s %llu %d", key, &lease_ns, &rounds) == 3) {
            int done = 0, net_acq = 0, net_commit = 0, net_rel = 0, stale = 0, other = 0;
            int rel_stale = 0;
            int other_rc = 0;
            char other_why[300] = "";
            while (rounds ? done < rounds : !atomic_load(&sh->stop)) {
                fl_lease l;
                rc = fl_acquire(r, key, lease_ns, FL_WAIT_FOREVER, &l);
                if (network_error(rc)) {
                    net_acq++;
                    pause_ms(50);
                    continue;
                }
                if (rc) {
                    other++;
                    other_rc = rc;
                    snprintf(other_why, sizeof other_why, "acquire: %s", fl_last_error());
                    pause_ms(50);
                    continue;
                }
                int i = note_acquired(who, &l), crc;
                uint64_t acc;
                strict_commit(r, &l, i, &crc, &acc);
                if (network_error(crc))
                    net_commit++;
                else if (crc == -ESTALE) {
                    stale++;
                    snprintf(other_why, sizeof other_why, "strict commit of token %" PRIu64
                             ": %s", l.token, fl_last_error());
                } else if (crc || acc != l.token) {
                    other++;
                    other_rc = crc;
                    snprintf(other_why, sizeof other_why,
                             "strict commit of token %" PRIu64 " (accepted %" PRIu64 "): %s",
                             l.token, acc, crc ? fl_last_error() : "0 without its token");
                }
                note_release(who, i);
                int net_before = net_rel;
                rc = release_until_known(r, &l, &net_rel);
                uint64_t now = th_now_ns();
                if (rc == -ESTALE && now >= l.deadline_ns)
                    rc = 0; /* ran out while the network was gone */
                if (rc == -ESTALE && net_rel > net_before) {
                    /* The header: after -EHOSTUNREACH or -EAGAIN, "call
                     * fl_release() again with the same lease.  It returns 0
                     * when the earlier attempt took effect"; an unexpired
                     * lease cannot have ended any other way. */
                    rel_stale++;
                    snprintf(other_why, sizeof other_why,
                             "fl_release of token %" PRIu64 ", called again after %d network "
                             "error(s), answered -ESTALE with %.3f s left on the lease: %s",
                             l.token, net_rel - net_before, secs(l.deadline_ns - now),
                             fl_last_error());
                } else if (rc) {
                    other++;
                    other_rc = rc;
                    snprintf(other_why, sizeof other_why, "release of token %" PRIu64 ": %s",
                             l.token, fl_last_error());
                }
                done++;
            }
            answer(out, "d %d %d %d %d %d %d %d %d %s", done, net_acq, net_commit, net_rel,
                   stale, rel_stale, other, other_rc, other_why);
        } else if (strcmp(line, "exit") == 0) {
            break;
        } else {
            answer(out, "r %d 0 0 0 1 0 0 1 unknown command", -EINVAL);
        }
    }
    fl_close(r);
    return 0;
}

/* ---- the parent's side of the agents ---- */

/* Every agent started (queue_agent.h). */
th_child live[MAXPROC];

void qa_start(qa *a, int who, const char *uri, const char *netns, const char *timeout_ms)
{
    assert_true(who >= 0 && who < MAXPROC);
    memset(a, 0, sizeof *a);
    a->who = who;
    struct agent_arg aa = {uri, netns, timeout_ms, who};
    signal(SIGPIPE, SIG_IGN);
    assert_int_equal(th_child_start(&a->c, agent_main, &aa), 0);
    live[who] = a->c;
    char line[1200];
    if (th_recv(a->c.from_child, line, sizeof line, AGENT_MS) != 0)
        fail_msg("agent %d did not report", who);
    assert_int_equal(sscanf(line, "ready %d", &a->open_rc), 1);
    if (a->open_rc)
        fail_msg("agent %d: fl_open: %s", who, line);
}

void qa_send(qa *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    th_vsendf(a->c.to_child, fmt, ap);
    va_end(ap);
}

/* Read one answer within timeout_ms: true if one came. */
bool qa_read(qa *a, qr *q, int timeout_ms)
{
    char line[1200];
    memset(q, 0, sizeof *q);
    if (th_recv(a->c.from_child, line, sizeof line, timeout_ms) != 0)
        return false;
    unsigned long long t = 0, t0 = 0, t1 = 0, acc = 0;
    int pos = 0;
    if (line[0] == 'r' &&
        sscanf(line, "r %d %llu %llu %llu %d %llu %d %d %n", &q->rc, &t, &t0, &t1, &q->commit_rc,
               &acc, &q->net, &q->rel_rc, &pos) >= 8) {
        q->kind = 'r';
        q->token = t;
        q->t0 = t0;
        q->t1 = t1;
        q->accepted = acc;
    } else if (line[0] == 'd' &&
               sscanf(line, "d %d %d %d %d %d %d %d %d %n", &q->rounds, &q->net_acq,
                      &q->net_commit, &q->net_rel, &q->stale, &q->rel_stale, &q->other,
                      &q->other_rc, &pos) >= 8) {
        q->kind = 'd';
    } else
        fail_msg("agent %d: a malformed answer: %s", a->who, line);
    snprintf(q->text, sizeof q->text, "%s", line + pos);
    return true;
}

qr qa_wait(qa *a, int timeout_ms, const char *what)
{
    qr q;
    if (!qa_read(a, &q, timeout_ms))
        fail_msg("agent %d: no answer to %s within %d ms", a->who, what, timeout_ms);
    return q;
}

/* True if the agent has an answer waiting (it returned from its call). */
bool qa_answered(qa *a)
{
    struct pollfd p = {.fd = a->c.from_child, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

void qa_stop(qa *a)
{
    if (a->c.pid <= 0)
        return;
    kill(a->c.pid, SIGCONT);
    th_send(a->c.to_child, "exit");
    int st = th_child_wait(&a->c, 20000);
    a->c.pid = 0;
    live[a->who].pid = 0;
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("agent %d did not exit cleanly (status %d)", a->who, st);
}

void qa_kill(qa *a)
{
    if (a->c.pid <= 0)
        return;
    kill(a->c.pid, SIGKILL);
    th_child_wait(&a->c, 20000);
    a->c.pid = 0;
    live[a->who].pid = 0;
}
