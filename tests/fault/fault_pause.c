/* SPDX-License-Identifier: MIT */
/*
 * fault_pause.c - a holder stopped (or killed) at arbitrary instructions.
 *
 * I4: a process stopped at any instruction inside acquire, renew, release
 * or key creation delays others by at most its own lease: a worker runs
 * acquire/renew/check/release on a hot key and creates new keys, with no
 * system calls when uncontended, so a SIGSTOP lands at an arbitrary user
 * instruction.  Each time it is stopped, another process must get the hot
 * key and the key the worker was creating (within a timeout far above the
 * worker's 30 ms lease).  I5: the same with SIGKILL.  I1: afterwards every
 * key has exactly one published slot, and the other process's tokens on
 * the hot key only grew.
 *
 * The random delay before each signal only chooses where the worker is hit;
 * no outcome depends on it.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent.h"

#define WORKER_LEASE AG_MS(30)
#define STOPS 30
#define KILLS 10
#define BUDGET 1000 /* new keys the worker may create per round */

struct pshared {
    _Atomic uint32_t budget; /* the worker creates keys p/new/0 .. budget-1 */
    _Atomic uint32_t n;      /* next new key the worker works on */
    _Atomic uint32_t stop;
    _Atomic uint32_t errors;
    _Atomic int first_error;
    _Atomic uint64_t iterations;
};

static struct pshared *ps;
static char region_path[512];

static void werr(int rc)
{
    atomic_fetch_add(&ps->errors, 1);
    int zero = 0;
    atomic_compare_exchange_strong(&ps->first_error, &zero, rc);
}

static int worker(void *arg, int in, int out)
{
    (void)arg;
    (void)in;
    fl_region *r;
    if (fl_open(region_path, &r) != 0)
        return 10;
    th_send(out, "ready");
    char key[64];
    uint64_t last_hot = 0;
    while (!atomic_load(&ps->stop)) {
        fl_lease l;
        int rc;
        uint32_t k = atomic_load(&ps->n);
        if (k < atomic_load(&ps->budget)) {
            snprintf(key, sizeof key, "p/new/%u", k);
            rc = fl_acquire(r, key, WORKER_LEASE, (int64_t)AG_S(10), &l);
            if (rc == 0) {
                rc = fl_release(r, &l);
                if (rc != 0 && rc != -ESTALE)
                    werr(rc);
            } else {
                werr(rc);
            }
            atomic_store(&ps->n, k + 1);
        }
        rc = fl_acquire(r, "p/hot", WORKER_LEASE, (int64_t)AG_S(10), &l);
        if (rc != 0) {
            werr(rc);
            continue;
        }
        if (l.token <= last_hot)
            werr(-EILSEQ); /* our own tokens must grow */
        last_hot = l.token;
        rc = fl_renew(r, &l, WORKER_LEASE);
        if (rc != 0 && rc != -ESTALE) /* -ESTALE: stopped past the lease, taken over */
            werr(rc);
        rc = fl_check(r, &l);
        if (rc != 0 && rc != -ESTALE)
            werr(rc);
        rc = fl_release(r, &l);
        if (rc != 0 && rc != -ESTALE)
            werr(rc);
        atomic_fetch_add(&ps->iterations, 1);
    }
    fl_close(r);
    return 0;
}

/* B takes the hot key and the key the worker was creating, then lets go. */
static void other_gets_through(ag *B, uint64_t *last_token)
{
    ag_reply r = ag_do(B, "acq b p/hot %llu %lld", (unsigned long long)AG_S(1),
                       (long long)AG_S(10));
    if (r.rc != 0)
        fail_msg("hot key: %s after %.3f s", fl_err_name(r.rc),
                 (double)(r.t_end - r.t_start) / 1e9);
    assert_true(r.token > *last_token);
    *last_token = r.token;
    assert_int_equal(ag_do(B, "rel b").rc, 0);
    uint32_t n = atomic_load(&ps->n);
    for (uint32_t k = n > 0 ? n - 1 : 0; k <= n; k++) {
        r = ag_do(B, "acq n p/new/%u %llu %lld", k, (unsigned long long)AG_S(1),
                  (long long)AG_S(10));
        if (r.rc != 0)
            fail_msg("key p/new/%u: %s after %.3f s", k, fl_err_name(r.rc),
                     (double)(r.t_end - r.t_start) / 1e9);
        assert_int_equal(ag_do(B, "rel n").rc, 0);
    }
}

static void check_index(fl_region *ro, uint32_t created)
{
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(ro, &ri), 0);
    uint8_t *seen = calloc(created + 2, 1);
    assert_non_null(seen);
    for (uint32_t s = 0; s < ri.locks_used; s++) {
        fl_lock_info li;
        int rc = fl_lock_info_get(ro, s, &li);
        if (rc == -ENOENT)
            continue;
        assert_int_equal(rc, 0);
        unsigned k;
        if (sscanf(li.key, "p/new/%u", &k) == 1) {
            assert_true(k < created + 2);
            if (seen[k]++)
                fail_msg("key %s has two published slots", li.key);
        }
    }
    for (uint32_t k = 0; k < created; k++)
        if (!seen[k])
            fail_msg("key p/new/%u was never published", k);
    free(seen);
}

/* I4 I1 */
static void test_stopped_anywhere(void **state)
{
    (void)state;
    snprintf(region_path, sizeof region_path, "%s", th_path("pause.region"));
    th_daemon d;
    const char *extra[] = {"--locks", "65536", NULL};
    ag_daemon_start_x(&d, region_path, extra);
    ps = mmap(NULL, sizeof *ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(ps != MAP_FAILED);
    memset(ps, 0, sizeof *ps);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region_path, &ro), 0);
    ag B;
    ag_start(&B, region_path);
    assert_int_equal(B.open_rc, 0);
    th_child w;
    assert_int_equal(th_child_start(&w, worker, NULL), 0);
    th_expect(w.from_child, "ready", 20000);

    uint64_t last = 0;
    int mid = 0; /* stops that hit the worker while it was creating keys */
    unsigned seed = (unsigned)getpid();
    for (int i = 0; i < STOPS; i++) {
        atomic_fetch_add(&ps->budget, BUDGET);
        usleep((useconds_t)(rand_r(&seed) % 3000)); /* where to hit it, see the top */
        assert_int_equal(kill(w.pid, SIGSTOP), 0);
        assert_true(th_wait_stopped(w.pid, 10000));
        mid += atomic_load(&ps->n) < atomic_load(&ps->budget);
        other_gets_through(&B, &last);
        assert_int_equal(kill(w.pid, SIGCONT), 0);
    }
    atomic_store(&ps->stop, 1);
    assert_int_equal(th_child_wait(&w, 20000), 0);
    print_message("worker: %llu hot-key rounds, %u keys created, %d of %d stops while "
                  "creating keys, %u unexpected errors\n",
                  (unsigned long long)atomic_load(&ps->iterations), atomic_load(&ps->n), mid,
                  STOPS, atomic_load(&ps->errors));
    if (atomic_load(&ps->errors))
        fail_msg("the worker saw %u unexpected results, first %s", atomic_load(&ps->errors),
                 fl_err_name(atomic_load(&ps->first_error)));
    check_index(ro, atomic_load(&ps->n));
    ag_stop(&B);
    fl_close(ro);
    munmap(ps, sizeof *ps);
    th_daemon_stop(&d, SIGTERM);
}

/* I5 I4 I1 */
static void test_killed_anywhere(void **state)
{
    (void)state;
    snprintf(region_path, sizeof region_path, "%s", th_path("kill.region"));
    th_daemon d;
    const char *extra[] = {"--locks", "16384", NULL};
    ag_daemon_start_x(&d, region_path, extra);
    ps = mmap(NULL, sizeof *ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(ps != MAP_FAILED);
    memset(ps, 0, sizeof *ps);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region_path, &ro), 0);
    ag B;
    ag_start(&B, region_path);
    assert_int_equal(B.open_rc, 0);
    uint64_t last = 0;
    unsigned seed = (unsigned)getpid() * 7;
    for (int i = 0; i < KILLS; i++) {
        th_child w;
        assert_int_equal(th_child_start(&w, worker, NULL), 0);
        th_expect(w.from_child, "ready", 20000);
        atomic_fetch_add(&ps->budget, BUDGET);
        usleep((useconds_t)(rand_r(&seed) % 3000)); /* where to hit it, see the top */
        assert_int_equal(kill(w.pid, SIGKILL), 0);
        int st = th_child_wait(&w, 20000);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        other_gets_through(&B, &last);
    }
    if (atomic_load(&ps->errors))
        fail_msg("the workers saw %u unexpected results, first %s", atomic_load(&ps->errors),
                 fl_err_name(atomic_load(&ps->first_error)));
    check_index(ro, atomic_load(&ps->n));
    ag_stop(&B);
    fl_close(ro);
    munmap(ps, sizeof *ps);
    th_daemon_stop(&d, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stopped_anywhere, ag_teardown),
        cmocka_unit_test_teardown(test_killed_anywhere, ag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
