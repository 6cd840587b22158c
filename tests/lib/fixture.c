/* SPDX-License-Identifier: MIT */
/* fixture.c - see fixture.h. */
#include "fixture.h"

#include <signal.h>
#include <string.h>

int fx_setup(void **state)
{
    fx_env *e = *state;
    assert_true(e->agents >= 0 && e->agents <= FX_AGENTS_MAX);
    memset(&e->d, 0, sizeof e->d);
    e->ro = NULL;
    memset(e->a, 0, sizeof e->a);
    ag_daemon_start(&e->d, th_path(e->name));
    assert_int_equal(fl_open_readonly(e->d.region, &e->ro), 0);
    for (int i = 0; i < e->agents; i++)
        ag_start(&e->a[i], e->d.region);
    for (int i = 0; i < e->agents; i++)
        assert_int_equal(e->a[i].open_rc, 0);
    return 0;
}

int fx_teardown(void **state)
{
    fx_env *e = *state;
    /* Everything is stopped before the agents' statuses are checked, so
     * that a failed check leaves no process behind. */
    int st[FX_AGENTS_MAX] = {0};
    for (int i = 0; i < e->agents; i++)
        if (!e->a[i].reaped)
            st[i] = ag_stop(&e->a[i]);
    fl_close(e->ro);
    e->ro = NULL;
    th_daemon_stop(&e->d, SIGTERM);
    int rc = ag_teardown(state);
    for (int i = 0; i < e->agents; i++)
        assert_int_equal(st[i], 0);
    return rc;
}
