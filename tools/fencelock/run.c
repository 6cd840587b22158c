/* SPDX-License-Identifier: MIT */
/*
 * run.c - `fencelock run`: hold a key's lock for as long as a command runs,
 * the fenced counterpart of flock(1) and `etcdctl lock`.
 *
 * The lock alone protects nothing once a holder can be paused past its
 * lease, so the command gets the fencing token in its environment and must
 * carry it to every write; what this program adds is the supervision, so
 * that the lock covers the command and every process it starts, and a lost
 * lease ends them.  Here: the region, KEY, and the steps in order; the
 * command line is run_args.c, the supervision run_supervise.c, the walk of
 * the command's descendants run_tree.c.  docs/run-lease.md has the design,
 * fencelock(1) what a user sees.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cli.h"
#include "duration.h"
#include "fencelock.h"
#include "keytext.h"
#include "run.h"
#include "run_parts.h"

/* An unregistered handle works, but if we die KEY stays held until the
 * lease ends: say so once (fl_last_error() has the reason), or refuse with
 * --require-supervisor.  -1 to go on, else the exit status. */
static int check_registered(const struct run_options *o, fl_region *r)
{
    if (fl_region_registered(r))
        return -1;
    const char *why = fl_last_error();
    if (o->require_supervisor) {
        fl__say("--require-supervisor: not running %s: %s", o->command[0], why);
        fl_close(r);
        return CLI_EXIT_REGION;
    }
    fl__say("warning: %s; if fencelock run dies, '%s' stays held until its lease ends", why,
            o->key);
    return -1;
}

/* COMMAND may change directory: a relative region path (-r, or
 * $FENCELOCK_REGION without -r) reaches it made absolute against our working
 * directory, so that $FENCELOCK_REGION names the region opened wherever
 * COMMAND uses it.  Joined, not realpath(): the supervisor's socket is found
 * beside the name as given (NAME.sock), which resolving a symbolic link
 * would move.  Only a region file's path: what the library opened decides
 * (fl_region_backend), never the text, so a URI of any scheme stays as it
 * is.  *env: what COMMAND gets.  -1 to go on, else the exit status. */
static int absolute_region(fl_region *r, char *buf, size_t cap, const char **env)
{
    const char *given = fl_region_path(r);
    *env = given;
    if (strcmp(fl_region_backend(r), "shm") != 0 || given[0] == '/')
        return -1;
    while (given[0] == '.' && given[1] == '/') {
        given += 2; /* "./region" is "DIR/region", not "DIR/./region" */
        while (given[0] == '/')
            given++;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) {
        fl__say("cannot make the region path '%s' absolute: the working directory: %s",
                given, strerror(errno));
        return RUN_EXIT_FAILED;
    }
    int n = snprintf(buf, cap, "%s%s%s", cwd, strcmp(cwd, "/") == 0 ? "" : "/", given);
    if (n < 0 || (size_t)n >= cap) {
        fl__say("region path too long: %s/%s", cwd, given);
        return CLI_EXIT_REGION;
    }
    *env = buf;
    return -1;
}

static int open_region(const struct run_options *o, fl_region **r)
{
    int err = fl_open(o->region, r);
    if (err == 0)
        return check_registered(o, *r);
    int rc = cli_open_failed(o->region, err);
    return rc == CLI_EXIT_RUNTIME ? RUN_EXIT_FAILED : rc; /* run's own failures are 125 */
}

static int acquire(struct runner *rn)
{
    const struct run_options *o = rn->o;
    int err = fl_acquire(rn->r, o->key, o->lease_ns, o->wait_ns, &rn->lease);
    if (err == 0)
        return -1;
    char waited[32], shown[FL_KEYTEXT_MAX];
    fl__keytext(o->key, shown, sizeof shown);
    switch (err) {
    case -EBUSY:
        fl__say("'%s' is held by another process (not waiting)", shown);
        return o->conflict_exit;
    case -ETIMEDOUT:
        cli_format_duration((uint64_t)o->wait_ns, CLI_DURATION_EXACT, waited, sizeof waited);
        fl__say("'%s' is still held after waiting %s", shown, waited);
        return o->conflict_exit;
    case -EPROTO:
        fl__say("cannot acquire '%s': %s", shown, fl__library_error(err));
        return CLI_EXIT_REGION;
    default:
        fl__say("cannot acquire '%s': %s", shown, fl__library_error(err));
        return RUN_EXIT_FAILED;
    }
}

int run_main(int argc, char **argv)
{
    struct run_options o = {0};
    int rc = run_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;

    struct runner rn = {.o = &o, .sfd = -1, .child = -1};
    /* A message to a broken pipe (stderr to `| head` that has exited) must
     * not kill us: not before COMMAND runs (the exit status would lie), and
     * above all not while it runs unsupervised.  Restored for COMMAND. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &rn.old_pipe);
    char region[PATH_MAX];
    if ((rc = open_region(&o, &rn.r)) >= 0)
        return rc;
    if ((rc = absolute_region(rn.r, region, sizeof region, &rn.region_env)) >= 0) {
        fl_close(rn.r);
        return rc;
    }
    if ((rc = acquire(&rn)) >= 0) {
        fl_close(rn.r);
        return rc;
    }
    /* Processes the command leaves behind become ours to reap, so that after
     * a lost lease the whole group can be seen to end. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (run_setup_signals(&rn) != 0) {
        fl_release(rn.r, &rn.lease);
        fl_close(rn.r);
        return RUN_EXIT_FAILED;
    }
    rc = run_start_command(&rn);
    if (rc != 0) {
        fl_close(rn.r);
        return rc > 0 ? rc : RUN_EXIT_FAILED;
    }
    int failed = run_supervise(&rn) != 0;
    if (failed)
        run_kill_unwatched(&rn); /* cannot watch them any more: none left unwatched */
    rc = run_finish(&rn, failed);
    close(rn.sfd);
    fl_close(rn.r);
    return rc;
}
