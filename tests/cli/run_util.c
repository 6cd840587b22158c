/* SPDX-License-Identifier: MIT */
/*
 * run_util.c - what the tests of `fencelock run` share (run_util.h): the
 * group set-up, run_probe started under fencelock run, and the keys as this
 * process sees them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "run_util.h"

#ifndef RUN_PROBE_PATH
#define RUN_PROBE_PATH "run_probe"
#endif

th_daemon daemon_;
fl_region *region_;

int setup(void **state)
{
    (void)state;
    if (th_daemon_start(&daemon_, th_path("region"), NULL) != 0)
        return -1;
    return fl_open(daemon_.region, &region_) == 0 ? 0 : -1;
}

int teardown(void **state)
{
    (void)state;
    fl_close(region_);
    th_daemon_stop(&daemon_, SIGTERM);
    return 0;
}

void start_probe_with(struct probe_run *pr, const char *const *options, const char *key,
                      const char *const *probe_args, bool broken_stderr)
{
    const char *argv[32] = {FENCELOCK_TOOL_PATH, "run"};
    int n = 2;
    for (int i = 0; options && options[i]; i++)
        argv[n++] = options[i];
    argv[n++] = key;
    argv[n++] = "--";
    argv[n++] = RUN_PROBE_PATH;
    for (int i = 0; probe_args && probe_args[i]; i++)
        argv[n++] = probe_args[i];
    argv[n] = NULL;
    sp_opts o = {.region = daemon_.region, .stdin_pipe = true, .report_pipe = true,
                 .stderr_broken_pipe = broken_stderr};
    sp_start(&pr->p, &o, argv);
    char buf[1024];
    int pid, pgid;
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, "ready");
    assert_int_equal(sscanf(buf, "ready %d %d", &pid, &pgid), 2);
    pr->probe = pid;
    pr->probe_pgid = pgid;
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, "env");
    assert_int_equal(sscanf(buf, "env %127s %31s %511s", pr->key, pr->token, pr->region), 3);
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, "fds");
    assert_int_equal(sscanf(buf, "fds %d", &pr->extra_fds), 1);
    snprintf(pr->fds_line, sizeof pr->fds_line, "%s", buf);
}

void start_probe(struct probe_run *pr, const char *const *options, const char *key,
                 const char *const *probe_args)
{
    start_probe_with(pr, options, key, probe_args, false);
}

fl_lock_info lock_info(const char *key)
{
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(region_, &ri), 0);
    fl_lock_info li;
    memset(&li, 0, sizeof li);
    for (uint32_t i = 0; i < ri.locks_used; i++)
        if (fl_lock_info_get(region_, i, &li) == 0 && strcmp(li.key, key) == 0)
            return li;
    fail_msg("no key %s", key);
    return li;
}

void expect_signal(struct probe_run *pr, pid_t pid, int sig)
{
    char buf[256], want[64];
    snprintf(want, sizeof want, "signal %d %d", (int)pid, sig);
    sp_line(&pr->p, pr->p.report, buf, sizeof buf, T_LINE, want);
    assert_string_equal(buf, want);
}

fl_lease take_over(const char *key)
{
    fl_lease l;
    int err = fl_acquire(region_, key, 30 * TH_S, 20 * (int64_t)TH_S, &l);
    if (err)
        fail_msg("acquire %s: %s", key, fl_strerror(err));
    return l;
}

bool key_free(const char *key)
{
    fl_lease l;
    int err = fl_acquire(region_, key, 1 * TH_S, 0, &l);
    if (err == 0)
        assert_int_equal(fl_release(region_, &l), 0);
    return err == 0;
}
