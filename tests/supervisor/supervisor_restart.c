/* SPDX-License-Identifier: MIT */
/*
 * supervisor_restart.c - the supervisor killed with SIGKILL and restarted.
 *
 * I10: clients that were open keep acquiring, renewing and releasing while
 * no supervisor runs, and a client opening meanwhile works unregistered.
 * I1: after the restart, tokens continue above every earlier token.
 * I5 across a restart: a client registered before the restart and killed
 * after it still has its lock released by the new supervisor (it adopted
 * the client and watches its pid: "client_adopted", then
 * "lock_released_by_death"); a registered client that died while no
 * supervisor ran has its lock released when the new one starts.
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
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"

#define LONG_LEASE AG_S(60)
#define LEASE AG_S(5)

/* Line number (1-based) of the first log line containing both needles, 0 if none. */
static int log_line_of(const th_daemon *d, const char *n1, const char *n2)
{
    char path[600];
    snprintf(path, sizeof path, "%s.log", d->region);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[8192];
    int no = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        no++;
        if (strstr(line, n1) && (!n2 || strstr(line, n2))) {
            found = no;
            break;
        }
    }
    fclose(f);
    return found;
}

/* I10 I1 I5 */
static void test_supervisor_sigkill_and_restart(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("restart.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);

    ag C, V, X, N, M, W;
    ag_start(&C, region); /* keeps working throughout */
    ag_start(&V, region); /* killed after the restart, holding a lock */
    ag_start(&X, region); /* killed while no supervisor runs, holding a lock */
    assert_int_equal(C.registered, 1);
    assert_int_equal(V.registered, 1);
    assert_int_equal(X.registered, 1);

    uint64_t max_token = 0;
    ag_reply r = ag_do(&C, "loop r/k 20 %llu", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    assert_int_equal(FL_TOKEN_COUNTER(r.token), 20);
    max_token = r.token;
    ag_reply rx = ag_do(&X, "acq x r/x %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rx.rc, 0);

    /* the supervisor dies */
    int st = th_daemon_stop(&d, SIGKILL);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    /* I10: open clients keep working */
    r = ag_do(&C, "loop r/k 50 %llu", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    assert_true(r.token > max_token);
    max_token = r.token;
    r = ag_do(&C, "acq c r/k %llu 0", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    assert_true(r.token > max_token);
    max_token = r.token;
    assert_int_equal(ag_do(&C, "renew c %llu", (unsigned long long)LEASE).rc, 0);
    assert_int_equal(ag_do(&C, "check c").rc, 0);
    assert_int_equal(ag_do(&C, "rel c").rc, 0);
    /* ... and wait for each other: a release wakes a waiter without a supervisor */
    ag_reply rc = ag_do(&C, "acq c r/c %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rc.rc, 0);
    ag_send(&V, "acq vc r/c %llu %lld", (unsigned long long)LEASE, (long long)AG_S(30));
    assert_true(ag_wait_waiters(ro, "r/c", 1, 20000));
    assert_true(ag_wait_sleeping(V.c.pid, 20000));
    assert_int_equal(ag_do(&C, "rel c").rc, 0);
    ag_reply rvc;
    assert_int_equal(ag_read(&V, &rvc, 30000), 0);
    assert_int_equal(rvc.rc, 0);
    assert_int_equal(rvc.token, rc.token + 1);
    assert_int_equal(rvc.flags, 0);
    assert_int_equal(ag_do(&V, "rel vc").rc, 0);
    /* a client opening now works, unregistered */
    ag_start(&N, region);
    assert_int_equal(N.open_rc, 0);
    assert_int_equal(N.registered, 0);
    r = ag_do(&N, "loop r/k 10 %llu", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    assert_true(r.token > max_token);
    max_token = r.token;
    /* V, registered with the dead supervisor, takes a lock now */
    ag_reply rv = ag_do(&V, "acq v r/v %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rv.rc, 0);
    /* X dies while nobody watches: its lock stays held for now */
    ag_kill(&X);
    fl_lock_info li;
    assert_int_equal(ag_lock_info(ro, "r/x", &li), 0);
    assert_int_equal(li.state, FL_LOCK_HELD);

    /* a new supervisor adopts the region as it finds it */
    th_daemon d2;
    ag_daemon_start(&d2, region);
    assert_true(th_daemon_log_wait(&d2, "client_adopted", 2, 10000));
    char pidv[64], pidc[64];
    snprintf(pidv, sizeof pidv, "\"pid\":%d}", (int)V.c.pid);
    snprintf(pidc, sizeof pidc, "\"pid\":%d}", (int)C.c.pid);
    int adopted_v = log_line_of(&d2, "client_adopted", pidv);
    assert_true(adopted_v > 0);
    assert_true(log_line_of(&d2, "client_adopted", pidc) > 0);

    /* X's lock was released when the new supervisor found X gone */
    assert_true(th_daemon_log_wait(&d2, "lock_released_by_death", 1, 10000));
    assert_true(log_line_of(&d2, "lock_released_by_death", "\"key\":\"r/x\"") > 0);
    assert_int_equal(ag_lock_info(ro, "r/x", &li), 0);
    assert_int_equal(li.state, FL_LOCK_FREE);
    assert_int_equal(li.last_release, FL_LEASE_OWNER_DIED);

    /* I1: tokens continue above every earlier one, for old and new clients
     * (the new supervisor started a new epoch) */
    r = ag_do(&C, "loop r/k 10 %llu", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    assert_true(r.token > max_token);
    assert_true(FL_TOKEN_EPOCH(r.token) > FL_TOKEN_EPOCH(max_token));
    max_token = r.token;
    ag_start(&M, region);
    assert_int_equal(M.open_rc, 0);
    assert_int_equal(M.registered, 1);
    r = ag_do(&M, "acq m r/k %llu 0", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    assert_true(r.token > max_token);
    assert_int_equal(ag_do(&M, "rel m").rc, 0);
    r = ag_do(&M, "acq m r/x %llu 0", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    assert_true(r.token > rx.token);
    assert_true(r.flags & FL_LEASE_OWNER_DIED);
    assert_int_equal(ag_do(&M, "rel m").rc, 0);

    /* every live client has its own client table entry */
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(ro, &ri), 0);
    int seen_c = 0, seen_v = 0, seen_m = 0;
    for (uint32_t i = 1; i <= ri.client_capacity; i++) {
        fl_client_info ci;
        if (fl_client_info_get(ro, i, &ci) != 0)
            continue;
        if (ci.pid == (uint32_t)C.c.pid) {
            seen_c++;
            assert_int_equal(ci.attached, 0);
        }
        if (ci.pid == (uint32_t)V.c.pid) {
            seen_v++;
            assert_int_equal(ci.attached, 0);
        }
        if (ci.pid == (uint32_t)M.c.pid) {
            seen_m++;
            assert_int_equal(ci.attached, 1);
        }
        assert_true(ci.pid != (uint32_t)X.c.pid);
    }
    assert_int_equal(seen_c, 1);
    assert_int_equal(seen_v, 1);
    assert_int_equal(seen_m, 1);

    /* I5: V, adopted, dies holding r/v while W waits: the new supervisor frees it */
    ag_start(&W, region);
    assert_int_equal(W.open_rc, 0);
    ag_send(&W, "acq w r/v %llu %lld", (unsigned long long)LONG_LEASE, (long long)AG_S(50));
    assert_true(ag_wait_waiters(ro, "r/v", 1, 20000));
    assert_true(ag_wait_sleeping(W.c.pid, 20000));
    uint64_t t_kill = th_now_ns();
    ag_kill(&V);
    ag_reply rw;
    assert_int_equal(ag_read(&W, &rw, 40000), 0);
    assert_int_equal(rw.rc, 0);
    assert_true(rw.token > rv.token);
    assert_true(rw.flags & FL_LEASE_OWNER_DIED);
    assert_true(rw.t_end - t_kill < AG_S(10));
    assert_true(th_daemon_log_wait(&d2, "lock_released_by_death", 2, 10000));
    int released_v = log_line_of(&d2, "lock_released_by_death", "\"key\":\"r/v\"");
    assert_true(released_v > adopted_v);
    assert_int_equal(ag_do(&W, "rel w").rc, 0);

    /* C, adopted, still works with the new supervisor */
    r = ag_do(&C, "loop r/k 5 %llu", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    assert_true(r.token > max_token);

    ag_stop(&C);
    ag_stop(&N);
    ag_stop(&M);
    ag_stop(&W);
    fl_close(ro);
    th_daemon_stop(&d2, SIGTERM);
}

/* I5 I10: fl_close of a handle adopted by a restarted supervisor still
 * releases its locks "as if the process had died" (fencelock.h, fl_close). */
static void test_adopted_client_close_releases(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("adoptclose.region");
    ag_daemon_start(&d, region);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    ag H, W;
    ag_start(&H, region);
    assert_int_equal(H.registered, 1);
    th_daemon_stop(&d, SIGKILL);
    th_daemon d2;
    ag_daemon_start(&d2, region);
    assert_true(th_daemon_log_wait(&d2, "client_adopted", 1, 10000));

    ag_reply rh = ag_do(&H, "acq h ac/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    ag_start(&W, region);
    assert_int_equal(W.registered, 1);
    ag_send(&W, "acq w ac/key %llu %lld", (unsigned long long)LONG_LEASE, (long long)AG_S(15));
    assert_true(ag_wait_waiters(ro, "ac/key", 1, 20000));
    assert_true(ag_wait_sleeping(W.c.pid, 20000));
    uint64_t t_close = th_now_ns();
    assert_int_equal(ag_do(&H, "close").rc, 0); /* H lives on without its handle */
    ag_reply rw;
    assert_int_equal(ag_read(&W, &rw, 40000), 0);
    if (rw.rc != 0)
        fail_msg("the lock of a closed adopted handle was not released: waiter got %s "
                 "after %.1f s (lease 60 s)",
                 fl_err_name(rw.rc), (double)(rw.t_end - t_close) / 1e9);
    assert_true(rw.flags & FL_LEASE_OWNER_DIED);
    assert_true(rw.t_end - t_close < AG_S(10));
    assert_int_equal(ag_do(&W, "rel w").rc, 0);
    ag_stop(&W);
    ag_stop(&H);
    fl_close(ro);
    th_daemon_stop(&d2, SIGTERM);
}

/* I10: a stopped (not dead) supervisor does not stop its clients: opening
 * gives up on it and works unregistered, and locking goes on. */
static void test_stopped_supervisor_does_not_block(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("stopped.region");
    ag_daemon_start(&d, region);
    ag A, B;
    ag_start(&A, region);
    assert_int_equal(A.registered, 1);
    assert_int_equal(kill(d.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(d.pid, 10000));

    ag_reply r = ag_do(&A, "loop st/k 20 %llu", (unsigned long long)LEASE);
    assert_int_equal(r.rc, 0);
    uint64_t t0 = th_now_ns();
    ag_start(&B, region);
    assert_int_equal(B.open_rc, 0);
    assert_int_equal(B.registered, 0);
    print_message("open with a stopped supervisor took %.2f s\n",
                  (double)(th_now_ns() - t0) / 1e9);
    ag_reply rb = ag_do(&B, "acq b st/k %llu 0", (unsigned long long)LEASE);
    assert_int_equal(rb.rc, 0);
    assert_true(rb.token > r.token);
    assert_int_equal(ag_do(&B, "rel b").rc, 0);

    /* continued, the supervisor carries on and new clients register again */
    assert_int_equal(kill(d.pid, SIGCONT), 0);
    ag C;
    ag_start(&C, region);
    assert_int_equal(C.open_rc, 0);
    assert_int_equal(C.registered, 1);
    assert_int_equal(ag_do(&C, "loop st/k 5 %llu", (unsigned long long)LEASE).rc, 0);
    ag_stop(&A);
    ag_stop(&B);
    ag_stop(&C);
    int st = th_daemon_stop(&d, SIGTERM);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* I10: stopping the supervisor (cleanly or not) frees nobody's lock: live
 * holders keep them, through the stop and the restart. */
static void test_stop_keeps_live_holders_locks(void **state)
{
    (void)state;
    th_daemon d;
    const char *region = th_path("keep.region");
    ag_daemon_start(&d, region);
    ag H, P;
    ag_start(&H, region);
    ag_start(&P, region);
    assert_int_equal(H.registered, 1);
    ag_reply rh = ag_do(&H, "acq h keep/key %llu 0", (unsigned long long)LONG_LEASE);
    assert_int_equal(rh.rc, 0);
    for (int round = 0; round < 2; round++) {
        int st = th_daemon_stop(&d, round == 0 ? SIGTERM : SIGKILL);
        assert_true(round == 0 ? WIFEXITED(st) : WIFSIGNALED(st));
        assert_int_equal(ag_do(&H, "check h").rc, 0);
        assert_int_equal(ag_do(&P, "acq p keep/key %llu 0", (unsigned long long)LEASE).rc,
                         -EBUSY);
        ag_daemon_start(&d, region);
        assert_true(th_daemon_log_wait(&d, "client_adopted", 2 * (round + 1), 10000));
        assert_int_equal(ag_do(&H, "check h").rc, 0);
        assert_int_equal(ag_do(&P, "acq p keep/key %llu 0", (unsigned long long)LEASE).rc,
                         -EBUSY);
    }
    assert_int_equal(ag_do(&H, "renew h %llu", (unsigned long long)LONG_LEASE).rc, 0);
    assert_int_equal(ag_do(&H, "rel h").rc, 0);
    ag_reply rp = ag_do(&P, "acq p keep/key %llu 0", (unsigned long long)LEASE);
    assert_int_equal(rp.rc, 0);
    assert_true(rp.token > rh.token);
    assert_int_equal(rp.flags, 0);
    assert_int_equal(ag_do(&P, "rel p").rc, 0);
    ag_stop(&H);
    ag_stop(&P);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_supervisor_sigkill_and_restart, ag_teardown),
        cmocka_unit_test_teardown(test_stop_keeps_live_holders_locks, ag_teardown),
        cmocka_unit_test_teardown(test_adopted_client_close_releases, ag_teardown),
        cmocka_unit_test_teardown(test_stopped_supervisor_does_not_block, ag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
