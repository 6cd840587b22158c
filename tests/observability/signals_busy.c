/* SPDX-License-Identifier: MIT */
/*
 * signals_busy.c - failed attempts leave a trace: every try that finds a key
 * held (-EBUSY, `fencelock run -n`) and every wait that gives up
 * (-ETIMEDOUT, `fencelock run --wait`) is counted on the key, and shown by
 * `fencelock status --json` and `fencelock metrics`.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "fencelock.h"
#include "harness.h"

static fl_lock_info info_of(fl_region *r, const char *key)
{
    fl_lock_info li;
    for (uint32_t i = 0; fl_lock_info_get(r, i, &li) != -ERANGE; i++)
        if (strcmp(li.key, key) == 0)
            return li;
    fail_msg("no key %s", key);
    return li;
}

static int run_tool(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* I12: a failed attempt is never silent */
static void test_busy_and_timeouts_counted(void **state)
{
    (void)state;
    const char *region = strdup(th_path("busy.region"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease held, l;
    assert_int_equal(fl_acquire(r, "job", 60 * TH_S, 0, &held), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fl_acquire(r, "job", TH_S, 0, &l), -EBUSY);
    /* Waits from another handle (a wait on one's own holding is -EDEADLK). */
    fl_region *r2;
    assert_int_equal(fl_open(region, &r2), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(fl_acquire(r2, "job", TH_S, 2 * (int64_t)TH_MS, &l), -ETIMEDOUT);
    fl_close(r2);
    fl_lock_info li = info_of(r, "job");
    assert_int_equal(li.busy, 3);
    assert_int_equal(li.timeouts, 2);

    /* The CLI's -n and --wait: exit 75, and counted. */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' run --region '%s' -n job -- true 2>/dev/null",
             FENCELOCK_TOOL_PATH, region);
    assert_int_equal(run_tool(cmd), 75);
    snprintf(cmd, sizeof cmd, "'%s' run --region '%s' --wait 10ms job -- true 2>/dev/null",
             FENCELOCK_TOOL_PATH, region);
    assert_int_equal(run_tool(cmd), 75);
    li = info_of(r, "job");
    assert_int_equal(li.busy, 4);
    assert_int_equal(li.timeouts, 3);

    snprintf(cmd, sizeof cmd,
             "'%s' status --region '%s' --json | python3 -c \"import json,sys; "
             "l=[k for k in json.load(sys.stdin)['locks'] if k['key']=='job'][0]; "
             "sys.exit(0 if (l['busy'],l['timeouts'])==(4,3) else 1)\"",
             FENCELOCK_TOOL_PATH, region);
    assert_int_equal(run_tool(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' metrics --region '%s' | grep -q '^fencelock_lock_busy_total{key=\"job\"} 4$' && "
             "'%s' metrics --region '%s' | grep -q '^fencelock_lock_timeouts_total{key=\"job\"} 3$'",
             FENCELOCK_TOOL_PATH, region, FENCELOCK_TOOL_PATH, region);
    assert_int_equal(run_tool(cmd), 0);
    assert_int_equal(fl_release(r, &held), 0);
    fl_close(r);
    th_daemon_stop(&d, SIGTERM);
    free((void *)region);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_and_timeouts_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
