/* SPDX-License-Identifier: MIT */
/*
 * lock_key_handle.c - key handles (fl_key_resolve, fl_acquire_key,
 * fl_acquire_key_cancelable) and the lock slot's counters, against a real
 * fencelockd.
 *
 * - A key handle names the same lock as its key: resolving creates the
 *   slot (free, token 0) and consumes no token; acquisitions by handle and
 *   by key, interleaved, one process and two, get strictly increasing
 *   tokens on the one slot (I1).
 * - It keeps fl_acquire's rules: -EBUSY, -ETIMEDOUT, -EDEADLK, -ECANCELED,
 *   takeover of an expired lease.
 * - It is refused (-EINVAL, nothing changed, no token consumed) when it
 *   is zeroed, comes from another region or from another handle of the
 *   same region (or from a forked parent), names a slot never issued, or is
 *   used with a read-only handle; resolving on a read-only handle, a bad
 *   key and NULL arguments are -EINVAL, a full table -ENOSPC, and a failed
 *   resolve leaves the handle zeroed (I9).
 * - Counters (fencelock.h, fl_lock_info): the exact ones (busy, timeouts,
 *   renewals, deaths, release failures) and the holder-written statistics
 *   (acquisitions, contended, expiries_taken, releases) in sequences where
 *   no holder is paused, where they are exact too; a release is counted by
 *   the next acquisition and shown while the key is free; a takeover or a
 *   death is not a release.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"

#define LONG (60 * TH_S)

static fl_lock_info info_of(fl_region *r, const char *key)
{
    fl_lock_info li;
    if (ag_lock_info(r, key, &li) != 0)
        fail_msg("key %s not in the region", key);
    return li;
}

static void start(th_daemon *d, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s", th_path(name));
    ag_daemon_start(d, path);
}

static bool zeroed(const fl_key *k)
{
    static const fl_key zero;
    return memcmp(k, &zero, sizeof zero) == 0;
}

/* I1: one lock, one token sequence, whichever way it is named */
static void test_resolve_and_acquire(void **state)
{
    (void)state;
    th_daemon d;
    char region[512];
    start(&d, "resolve.region", region, sizeof region);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);

    /* Resolving creates the key's slot, free, and consumes no token. */
    fl_key k;
    memset(&k, 0xa5, sizeof k);
    assert_int_equal(fl_key_resolve(r, "jobs/a", &k), 0);
    assert_int_not_equal(k.handle, 0);
    assert_int_equal(k.reserved0, 0);
    assert_int_equal(k.reserved[0], 0);
    assert_int_equal(k.reserved[1], 0);
    fl_lock_info li = info_of(r, "jobs/a");
    assert_int_equal(li.state, FL_LOCK_FREE);
    assert_int_equal(li.token, 0);
    assert_int_equal(li.acquisitions, 0);
    fl_key again;
    assert_int_equal(fl_key_resolve(r, "jobs/a", &again), 0);
    assert_memory_equal(&k, &again, sizeof k);

    /* By handle and by key, interleaved: one slot, tokens strictly up. */
    uint64_t last = 0;
    for (int i = 0; i < 40; i++) {
        fl_lease l;
        int rc = i % 3 == 0 ? fl_acquire(r, "jobs/a", LONG, 0, &l)
                            : fl_acquire_key(r, &k, LONG, i % 2 ? 0 : FL_WAIT_FOREVER, &l);
        assert_int_equal(rc, 0);
        assert_int_equal(l.slot, k.slot);
        assert_true(l.token > last);
        if (last)
            assert_int_equal(l.token, last + 1); /* nothing else consumed one */
        last = l.token;
        assert_int_equal(l.flags, 0);
        assert_int_equal(l.handle, 0);
        assert_int_equal(fl_check(r, &l), 0);
        assert_int_equal(fl_renew(r, &l, LONG), 0);
        assert_int_equal(fl_commit_u64(r, &l, "jobs/a/out", l.token, 0, NULL), 0);
        assert_int_equal(fl_release(r, &l), 0);
    }
    uint64_t value = 0, fence = 0;
    assert_int_equal(fl_read_u64(r, "jobs/a/out", &value, &fence), 0);
    assert_int_equal(value, last);
    assert_int_equal(fence, last);

    /* A key resolved after fl_acquire made it: the same slot. */
    fl_lease l;
    assert_int_equal(fl_acquire(r, "jobs/b", LONG, 0, &l), 0);
    fl_key kb;
    assert_int_equal(fl_key_resolve(r, "jobs/b", &kb), 0);
    assert_int_equal(kb.slot, l.slot);
    assert_int_not_equal(kb.slot, k.slot);
    assert_int_equal(kb.handle, k.handle); /* the tag is the region handle's */
    assert_int_equal(fl_release(r, &l), 0);

    /* The cancelable form. */
    fl_cancel *c;
    assert_int_equal(fl_cancel_new(&c), 0);
    assert_int_equal(fl_acquire_key_cancelable(r, &kb, LONG, 0, c, &l), 0);
    assert_int_equal(l.slot, kb.slot);
    assert_int_equal(fl_release(r, &l), 0);
    assert_int_equal(fl_acquire_key_cancelable(r, &kb, LONG, 0, NULL, &l), -EINVAL);
    fl_cancel_free(c);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* I1 I4: the waits and refusals of fl_acquire, by handle */
static void test_wait_rules(void **state)
{
    (void)state;
    th_daemon d;
    char region[512];
    start(&d, "wait.region", region, sizeof region);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    ag other;
    ag_start(&other, region);
    assert_int_equal(other.open_rc, 0);
    fl_key k;
    assert_int_equal(fl_key_resolve(r, "w", &k), 0);

    /* Held by another process: busy, timeout; a wait ends at its release. */
    ag_reply a = ag_do(&other, "acq L w %llu 0", (unsigned long long)LONG);
    assert_int_equal(a.rc, 0);
    fl_lease l;
    assert_int_equal(fl_acquire_key(r, &k, LONG, 0, &l), -EBUSY);
    assert_int_equal(fl_acquire_key(r, &k, LONG, (int64_t)(20 * TH_MS), &l), -ETIMEDOUT);
    fl_cancel *c;
    assert_int_equal(fl_cancel_new(&c), 0);
    fl_cancel_trigger(c);
    assert_int_equal(fl_acquire_key_cancelable(r, &k, LONG, FL_WAIT_FOREVER, c, &l),
                     -ECANCELED);
    fl_cancel_reset(c);
    assert_int_equal(ag_do(&other, "rel L").rc, 0);
    assert_int_equal(fl_acquire_key_cancelable(r, &k, LONG, (int64_t)TH_S, c, &l), 0);
    assert_int_equal(l.token, a.token + 1); /* the refusals consumed none */

    /* Our own holding: a wait is -EDEADLK, a try -EBUSY. */
    fl_lease l2;
    assert_int_equal(fl_acquire_key(r, &k, LONG, FL_WAIT_FOREVER, &l2), -EDEADLK);
    assert_int_equal(fl_acquire_key(r, &k, LONG, 0, &l2), -EBUSY);
    assert_int_equal(fl_release(r, &l), 0);

    /* An expired lease is taken over by handle, with the flag. */
    a = ag_do(&other, "acq S w %llu 0", (unsigned long long)(1 * TH_MS));
    assert_int_equal(a.rc, 0);
    assert_int_equal(fl_acquire_key(r, &k, LONG, (int64_t)(5 * TH_S), &l), 0);
    assert_int_equal(l.token, a.token + 1);
    assert_true(l.flags & FL_LEASE_EXPIRED);
    assert_int_equal(ag_do(&other, "rel S").rc, -ESTALE);
    assert_int_equal(fl_release(r, &l), 0);
    fl_cancel_free(c);
    ag_stop(&other);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* Two processes, each with a handle for one key, one by name and one by
 * key handle, take the key in turns. */
static int alternate(void *arg, int in, int out)
{
    const char *region = arg;
    (void)in;
    fl_region *r;
    if (fl_open(region, &r) != 0)
        return 10;
    fl_key k;
    if (fl_key_resolve(r, "shared", &k) != 0)
        return 11;
    char line[64];
    for (int i = 0; i < 500; i++) {
        fl_lease l;
        int rc = i % 2 ? fl_acquire_key(r, &k, LONG, (int64_t)(20 * TH_S), &l)
                       : fl_acquire(r, "shared", LONG, (int64_t)(20 * TH_S), &l);
        if (rc != 0)
            return 12;
        snprintf(line, sizeof line, "%llu", (unsigned long long)l.token);
        th_send(out, line);
        if (fl_release(r, &l) != 0)
            return 13;
    }
    fl_close(r);
    return 0;
}

/* I1: tokens of two processes mixing key handles and names never repeat,
 * increase within each process and fill floor .. floor + N - 1 */
static void test_two_processes(void **state)
{
    (void)state;
    th_daemon d;
    char region[512];
    start(&d, "two.region", region, sizeof region);
    th_child c[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(th_child_start(&c[i], alternate, region), 0);
    static uint64_t all[1000];
    size_t n = 0;
    uint64_t last[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        char line[64];
        for (int j = 0; j < 500; j++) {
            if (th_recv(c[i].from_child, line, sizeof line, 30000) != 0)
                fail_msg("process %d stopped after %d acquisitions", i, j);
            uint64_t t = strtoull(line, NULL, 10);
            assert_true(t > last[i]);
            last[i] = t;
            all[n++] = t;
        }
        assert_int_equal(th_child_wait(&c[i], 20000), 0);
    }
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(ro, &ri), 0);
    static bool seen[1000];
    for (size_t i = 0; i < n; i++) {
        assert_true(all[i] >= ri.token_floor && all[i] < ri.token_floor + 1000);
        assert_false(seen[all[i] - ri.token_floor]); /* unique */
        seen[all[i] - ri.token_floor] = true;
    }
    fl_lock_info li = info_of(ro, "shared");
    assert_int_equal(li.token, ri.token_floor + 999);
    /* No holder was paused past a lease (60 s): the statistics are exact. */
    assert_int_equal(li.acquisitions, 1000);
    assert_int_equal(li.releases, 1000);
    assert_int_equal(li.expiries_taken, 0);
    fl_close(ro);
    th_daemon_stop(&d, SIGTERM);
}

/* I9: every key handle the region handle did not make is refused, with
 * nothing changed */
static void test_refused(void **state)
{
    (void)state;
    th_daemon d1, d2;
    char one[512], two[512];
    start(&d1, "refused1.region", one, sizeof one);
    start(&d2, "refused2.region", two, sizeof two);
    fl_region *r, *same, *other, *ro;
    assert_int_equal(fl_open(one, &r), 0);
    assert_int_equal(fl_open(one, &same), 0);
    assert_int_equal(fl_open(two, &other), 0);
    assert_int_equal(fl_open_readonly(one, &ro), 0);
    fl_key k, ko;
    assert_int_equal(fl_key_resolve(r, "k", &k), 0);
    assert_int_equal(fl_key_resolve(other, "k", &ko), 0);
    assert_int_equal(k.slot, ko.slot); /* both regions' first key: slot 0 */
    assert_int_not_equal(k.handle, ko.handle);
    fl_lease l;

    /* From another region, or another handle of the same region. */
    assert_int_equal(fl_acquire_key(other, &k, LONG, 0, &l), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "another region handle"));
    assert_int_equal(fl_acquire_key(r, &ko, LONG, 0, &l), -EINVAL);
    assert_int_equal(fl_acquire_key(same, &k, LONG, 0, &l), -EINVAL);
    /* Zeroed, or changed by hand. */
    fl_key z = {0};
    assert_int_equal(fl_acquire_key(r, &z, LONG, 0, &l), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "never resolved"));
    fl_key bad = k;
    bad.handle ^= 1;
    assert_int_equal(fl_acquire_key(r, &bad, LONG, 0, &l), -EINVAL);
    /* A slot this region never issued (one key so far: slot 0 only). */
    bad = k;
    bad.slot = 1;
    assert_int_equal(fl_acquire_key(r, &bad, LONG, 0, &l), -EINVAL);
    assert_non_null(strstr(fl_last_error(), "never issued"));
    bad.slot = UINT32_MAX;
    assert_int_equal(fl_acquire_key(r, &bad, LONG, 0, &l), -EINVAL);
    /* A read-only handle: no resolving, no acquiring. */
    fl_key kr;
    assert_int_equal(fl_key_resolve(ro, "k", &kr), -EINVAL);
    assert_true(zeroed(&kr));
    assert_int_equal(fl_acquire_key(ro, &k, LONG, 0, &l), -EINVAL);
    /* Arguments. */
    assert_int_equal(fl_key_resolve(NULL, "k", &kr), -EINVAL);
    assert_int_equal(fl_key_resolve(r, "k", NULL), -EINVAL);
    memset(&kr, 0xa5, sizeof kr);
    assert_int_equal(fl_key_resolve(r, NULL, &kr), -EINVAL);
    assert_true(zeroed(&kr)); /* a failed resolve leaves nothing usable */
    memset(&kr, 0xa5, sizeof kr);
    assert_int_equal(fl_key_resolve(r, "", &kr), -EINVAL);
    assert_true(zeroed(&kr));
    char longkey[FL_KEY_MAX + 2];
    memset(longkey, 'x', sizeof longkey - 1);
    longkey[FL_KEY_MAX + 1] = '\0';
    assert_int_equal(fl_key_resolve(r, longkey, &kr), -EINVAL);
    longkey[FL_KEY_MAX] = '\0';
    assert_int_equal(fl_key_resolve(r, longkey, &kr), 0); /* FL_KEY_MAX bytes: fine */
    assert_int_equal(fl_acquire_key(NULL, &k, LONG, 0, &l), -EINVAL);
    assert_int_equal(fl_acquire_key(r, NULL, LONG, 0, &l), -EINVAL);
    assert_int_equal(fl_acquire_key(r, &k, LONG, 0, NULL), -EINVAL);
    assert_int_equal(fl_acquire_key(r, &k, 0, 0, &l), -EINVAL);
    assert_int_equal(fl_acquire_key(r, &k, LONG, -2, &l), -EINVAL);

    /* Nothing above took a token or changed the lock. */
    fl_lock_info li = info_of(ro, "k");
    assert_int_equal(li.token, 0);
    assert_int_equal(li.acquisitions, 0);
    assert_int_equal(fl_acquire_key(r, &k, LONG, 0, &l), 0);
    assert_int_equal(FL_TOKEN_COUNTER(l.token), 1);
    assert_int_equal(fl_release(r, &l), 0);

    fl_close(ro);
    fl_close(other);
    fl_close(same);
    fl_close(r);
    th_daemon_stop(&d2, SIGTERM);
    th_daemon_stop(&d1, SIGTERM);
}

/* I9: a full lock table refuses a new key's handle, not an existing one */
static void test_full_table(void **state)
{
    (void)state;
    th_daemon d;
    char region[512];
    snprintf(region, sizeof region, "%s", th_path("full.region"));
    ag_daemon_start_x(&d, region, (const char *const[]){"--locks", "2", NULL});
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_key a, b, c;
    assert_int_equal(fl_key_resolve(r, "a", &a), 0);
    assert_int_equal(fl_key_resolve(r, "b", &b), 0);
    memset(&c, 0xa5, sizeof c);
    assert_int_equal(fl_key_resolve(r, "c", &c), -ENOSPC);
    assert_true(zeroed(&c));
    assert_int_equal(fl_key_resolve(r, "a", &c), 0);
    fl_lease l;
    assert_int_equal(fl_acquire_key(r, &c, LONG, 0, &l), 0);
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

/* I9 I12: a key handle kept across fork() is refused by the child's own handle */
static int forked(void *arg, int in, int out)
{
    const char *region = arg;
    (void)in;
    (void)out;
    fl_region *r;
    if (fl_open(region, &r) != 0)
        return 10;
    fl_key k;
    if (fl_key_resolve(r, "f", &k) != 0)
        return 11;
    pid_t pid = fork();
    if (pid < 0)
        return 12;
    if (pid == 0) {
        fl_lease l;
        /* the parent's handle: -ECHILD; our own, with the parent's key: -EINVAL */
        if (fl_acquire_key(r, &k, LONG, 0, &l) != -ECHILD)
            _exit(20);
        fl_region *mine;
        if (fl_open(region, &mine) != 0)
            _exit(21);
        if (fl_acquire_key(mine, &k, LONG, 0, &l) != -EINVAL)
            _exit(22);
        fl_key kc;
        if (fl_key_resolve(mine, "f", &kc) != 0 || kc.slot != k.slot ||
            kc.handle == k.handle || fl_acquire_key(mine, &kc, LONG, 0, &l) != 0 ||
            fl_release(mine, &l) != 0)
            _exit(23);
        fl_close(mine);
        _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 13;
    if (WEXITSTATUS(st) != 0)
        return WEXITSTATUS(st);
    fl_lease l;
    if (fl_acquire_key(r, &k, LONG, 0, &l) != 0 || FL_TOKEN_COUNTER(l.token) != 2)
        return 14;
    fl_close(r);
    return 0;
}

static void test_fork(void **state)
{
    (void)state;
    th_daemon d;
    char region[512];
    start(&d, "fork.region", region, sizeof region);
    th_child c;
    assert_int_equal(th_child_start(&c, forked, region), 0);
    int st = th_child_wait(&c, 30000);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    th_daemon_stop(&d, SIGTERM);
}

/* I4 I5: which counters count what; the statistics are exact when no holder
 * is paused past its lease */
static void test_counters(void **state)
{
    (void)state;
    th_daemon d;
    char region[512];
    start(&d, "counters.region", region, sizeof region);
    fl_region *r, *ro;
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    fl_key k;
    assert_int_equal(fl_key_resolve(r, "c", &k), 0);
    fl_lease l;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(i % 2 ? fl_acquire_key(r, &k, LONG, 0, &l)
                               : fl_acquire(r, "c", LONG, 0, &l),
                         0);
        fl_lock_info li = info_of(ro, "c");
        /* held: the releases before this holding, all counted by now */
        assert_int_equal(li.acquisitions, (uint64_t)i + 1);
        assert_int_equal(li.releases, (uint64_t)i);
        assert_int_equal(fl_renew(r, &l, LONG), 0);
        assert_int_equal(fl_release(r, &l), 0);
        li = info_of(ro, "c");
        /* free: this release is the next acquisition's to count, and shown */
        assert_int_equal(li.releases, (uint64_t)i + 1);
    }
    /* Refusals: exact counters of their own, none of the holder's. */
    ag other;
    ag_start(&other, region);
    ag_reply a = ag_do(&other, "acq H c %llu 0", (unsigned long long)LONG);
    assert_int_equal(a.rc, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fl_acquire_key(r, &k, LONG, 0, &l), -EBUSY);
    assert_int_equal(fl_acquire_key(r, &k, LONG, (int64_t)TH_MS, &l), -ETIMEDOUT);
    fl_lease stale = l;
    stale.token = a.token - 1; /* the last holding of ours: released */
    stale.slot = k.slot;
    assert_int_equal(fl_release(r, &stale), -ESTALE);
    assert_int_equal(fl_renew(r, &stale, LONG), -ESTALE);
    fl_lock_info li = info_of(ro, "c");
    assert_int_equal(li.busy, 3);
    assert_int_equal(li.timeouts, 1);
    assert_int_equal(li.release_failed, 1);
    assert_int_equal(li.renew_failed, 1);
    assert_int_equal(li.renewals, 10);
    assert_int_equal(li.acquisitions, 11);
    assert_int_equal(li.releases, 10); /* held by the agent: no pending release */
    assert_int_equal(li.contended, 0);
    /* A death is not a release. */
    ag_kill(&other);
    uint64_t until = th_now_ns() + 10 * TH_S;
    /* The reap frees the pair (one CAS), wakes, and only then counts the
     * death: a reader may see the key free with deaths still 0, so wait
     * for both (seen under qemu, where the window is wide). */
    while (((li = info_of(ro, "c")).state != FL_LOCK_FREE || li.deaths == 0) &&
           th_now_ns() < until)
        usleep(1000); /* the supervisor reaps within milliseconds */
    assert_int_equal(li.state, FL_LOCK_FREE);
    assert_int_equal(li.deaths, 1);
    assert_int_equal(li.releases, 10);
    assert_int_equal(fl_acquire_key(r, &k, 1000, 0, &l), 0); /* 1 us lease */
    assert_true(l.flags & FL_LEASE_OWNER_DIED);
    /* An expired lease taken over is neither a release nor, for the
     * taker, anything but a contended acquisition that took it over. */
    while (fl_check(r, &l) == 0)
        ; /* a 1 us lease: ends at once */
    fl_lease t;
    assert_int_equal(fl_acquire(r, "c", LONG, 0, &t), 0);
    assert_true(t.flags & FL_LEASE_EXPIRED);
    assert_int_equal(fl_release(r, &l), -ESTALE);
    assert_int_equal(fl_release(r, &t), 0);
    li = info_of(ro, "c");
    assert_int_equal(li.acquisitions, 13);
    assert_int_equal(li.expiries_taken, 1);
    assert_int_equal(li.contended, 1);
    assert_int_equal(li.releases, 11); /* 10, and the taker's, pending */
    assert_int_equal(li.release_failed, 2);
    assert_int_equal(li.deaths, 1);
    fl_close(ro);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_resolve_and_acquire, ag_teardown),
        cmocka_unit_test_teardown(test_wait_rules, ag_teardown),
        cmocka_unit_test_teardown(test_two_processes, ag_teardown),
        cmocka_unit_test_teardown(test_refused, ag_teardown),
        cmocka_unit_test_teardown(test_full_table, ag_teardown),
        cmocka_unit_test_teardown(test_fork, ag_teardown),
        cmocka_unit_test_teardown(test_counters, ag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
