/* SPDX-License-Identifier: MIT */
/*
 * etcd_queue_netns.c - the fair queue of issue 28 (section 2) when its head
 * waiter is cut off in a network namespace, on a real three-member cluster
 * with real processes: the waiter behind it gets the key within the head's
 * etcd lease of the release; the head, joined again, re-queues, never takes
 * the key out of turn, and gets a token above every earlier one.  The same
 * scenario with the head stopped or killed is in etcd_queue_faults.c, and
 * the shared code (agents, checks, the scenario) in queue_agent.c and
 * queue_util.c.
 *
 * Needs root and ip: without them it exits 77 (SKIP), as etcd_netns does,
 * unless FL_REQUIRE_NETNS=1 (.ci/run, tools/test), which fails it.
 *
 * I1 I2 I4 I6 I13
 */
#include <stddef.h>
#include <stdio.h>
#include <setjmp.h>
#include <cmocka.h>

#include "queue_util.h"

static ec_netns ns; /* HEAD_CUT: W1's namespace */

/* I1 I2 I4 I6 I13 */
static void test_head_waiter_cut_off(void **state)
{
    (void)state;
    head_waiter(HEAD_CUT, "queue-cut", &ns);
    contract_report("test_head_waiter_cut_off");
}

static int group_setup(void **state)
{
    (void)state;
    queue_shared_map();
    /* Every member on this host's end of the veth; W1 inside the
     * namespace reaches them through it, until the cut. */
    const char *hosts[3] = {ns.host_addr, ns.host_addr, ns.host_addr};
    ec_start_on(&cluster, 3, hosts, NULL);
    return 0;
}

int main(void)
{
    char why[1024];
    if (ec_netns_create(&ns, why, sizeof why) != 0) {
        if (ec_netns_required()) {
            fprintf(stderr, "etcd_queue_netns: FAIL: FL_REQUIRE_NETNS=1 and no network "
                            "namespace: %s\n", why);
            return 1;
        }
        fprintf(stderr, "etcd_queue_netns: SKIPPED (exit 77): %s (CI sets FL_REQUIRE_NETNS=1 "
                        "and fails here)\n", why);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_head_waiter_cut_off, teardown_test),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, queue_group_teardown);
    ec_netns_destroy(&ns); /* also at exit, after a failure */
    return rc;
}
