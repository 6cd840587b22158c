/* SPDX-License-Identifier: MIT */
/*
 * fixture.h - the set-up the lock tests repeated in each test, written once
 * as a cmocka per-test fixture: a private fencelockd on a region of its own
 * (ag_daemon_start), a read-only handle on that region for inspection, and
 * agents (agent.h) that opened it.
 *
 *   fx_unit_test(test_try_and_timeout, "try.region", 2),
 *
 * and the test takes its fx_env from *state.
 *
 * fx_setup checks what the tests checked after these steps (the read-only
 * open returns 0, each agent's fl_open returned 0).  fx_teardown stops
 * every agent the test did not stop or kill itself (each must exit with
 * status 0), closes the handle, stops fencelockd with SIGTERM unless the
 * test stopped it, then kills whatever is left (ag_teardown).
 */
#ifndef FL_TEST_FIXTURE_H
#define FL_TEST_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent.h"
#include "fencelock.h"
#include "harness.h"

#define FX_AGENTS_MAX 8

typedef struct fx_env {
    const char *name; /* the region's file name in th_tmpdir() (given) */
    int agents;       /* how many agents to start, 0..FX_AGENTS_MAX (given) */
    th_daemon d;      /* the supervisor; d.region is the region's path */
    fl_region *ro;    /* fl_open_readonly(d.region) */
    ag a[FX_AGENTS_MAX];
} fx_env;

/* cmocka setup and teardown; *state is the test's fx_env. */
int fx_setup(void **state);
int fx_teardown(void **state);

/* A test f with its own fx_env: fencelockd on th_path(region_name), n agents. */
#define fx_unit_test(f, region_name, n)                                                 \
    cmocka_unit_test_prestate_setup_teardown(f, fx_setup, fx_teardown,                  \
                                             (&(fx_env){.name = (region_name), .agents = (n)}))

#endif
