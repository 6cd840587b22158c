/* SPDX-License-Identifier: MIT */
/*
 * run_args.c - the command line of `fencelock run`: its help text, and its
 * options, KEY and COMMAND parsed into struct run_options.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "clocks.h"
#include "duration.h"
#include "fencelock.h"
#include "keytext.h"
#include "run.h"
#include "run_parts.h"

#define DEFAULT_LEASE_NS (30 * CLI_NS_PER_S)
#define DEFAULT_KILL_AFTER_NS (5 * CLI_NS_PER_S)
/* The shortest lease the keepalive renews reliably on a loaded machine, with
 * margin: docs/run-lease.md has the measurement (50ms already failed under
 * load; 100ms held: 250ms leaves 2.5 times that margin). */
#define MIN_LEASE_NS (250 * CLI_NS_PER_MS)
/* Lease deadlines are microseconds of CLOCK_MONOTONIC in 48 bits (see
 * CAVEATS in fencelock.h): now + lease must stay below this. */
#define LEASE_DEADLINE_LIMIT_NS (((1ull << 48) - 1) * 1000ull)

const char run_usage[] =
    "Usage: fencelock run [OPTIONS] KEY [--] COMMAND [ARGUMENT...]\n"
    "       fencelock run [OPTIONS] KEY -c STRING\n"
    "\n"
    "Hold the lock of KEY for as long as COMMAND runs: acquire KEY, run COMMAND\n"
    "with the fencing token in its environment, renew the lease in the background\n"
    "while it runs, release the lock when it exits, and exit with its status.\n"
    "\n"
    "The lock alone does not protect a resource: fencelock run can be paused past\n"
    "its lease (SIGSTOP, swapping, a stalled VM) while COMMAND goes on, and by\n"
    "then another process may hold KEY.  COMMAND must carry $FENCELOCK_TOKEN to\n"
    "every write it makes, so that the resource refuses a stale holder: in SQL,\n"
    "  UPDATE t SET ..., fence_token = $FENCELOCK_TOKEN\n"
    "   WHERE key = ... AND fence_token <= $FENCELOCK_TOKEN\n"
    "with zero rows changed meaning \"ownership lost: stop\" (docs/write-paths.md).\n"
    "\n"
    "When a renewal fails (the lease was lost: for example fencelock run was\n"
    "stopped past its lease and another process took KEY), fencelock run sends\n"
    "SIGTERM to COMMAND's process group and to every other process COMMAND\n"
    "started, then SIGKILL to those still there after --kill-after, waits for\n"
    "them all, says so on stderr and exits with status 76.\n"
    "\n"
    "Options (they come before KEY; -c may also follow it):\n"
    "  -r, --region PATH      the region file (default: $FENCELOCK_REGION, else\n"
    "                         /run/fencelock/region for root, else\n"
    "                         $XDG_RUNTIME_DIR/fencelock/region, else\n"
    "                         /dev/shm/fencelock-UID/region)\n"
    "  -l, --lease DURATION   lease length (default 30s, at least 250ms: the\n"
    "                         shortest that renewal keeps on a loaded machine);\n"
    "                         renewed each time a third of it has passed; at\n"
    "                         most 2^48 us (8.9 years) less the time since boot\n"
    "  -w, --wait DURATION    give up with status 75 (or -E's) if KEY is still\n"
    "                         held after DURATION, a bare number being seconds\n"
    "                         as in flock -w (default: wait as long as it takes)\n"
    "  -n, --no-wait          give up at once if KEY is held (same as --wait 0)\n"
    "  -E, --conflict-exit-code N\n"
    "                         exit status when KEY is not acquired (--wait,\n"
    "                         --no-wait), 0 to 255 (default 75)\n"
    "  -c, --command STRING   run STRING with sh -c instead of COMMAND; may also\n"
    "                         come right after KEY, as in flock KEY -c STRING\n"
    "  -k, --kill-after DURATION\n"
    "                         after the lease is lost, time between SIGTERM and\n"
    "                         SIGKILL (default 5s; 0: SIGKILL at once)\n"
    "      --require-supervisor\n"
    "                         exit 3 instead of running COMMAND when no fencelockd\n"
    "                         registers this process (none running, or its socket\n"
    "                         refuses us: mode, group); without it fencelock run\n"
    "                         warns once on stderr and runs unregistered (if it\n"
    "                         dies, KEY stays held until the lease ends)\n"
    "  -h, --help             show this help and exit\n"
    "\n"
    "KEY is any 1 to 127 bytes (UTF-8, spaces: quote it for the shell); messages\n"
    "show a backslash as \\\\ and other bytes outside printable ASCII as \\xNN.\n"
    "COMMAND and its arguments follow KEY, passed on unchanged; COMMAND is looked\n"
    "up in PATH.  A '--' between KEY and COMMAND is optional, and needed when\n"
    "COMMAND starts with '-'.\n" CLI_DURATION_TEXT
    "\n"
    "Environment of COMMAND: fencelock run's own, plus\n"
    "  FENCELOCK_KEY     KEY\n"
    "  FENCELOCK_TOKEN   the fencing token of this acquisition, in decimal; it\n"
    "                    fits a signed 64-bit integer (SQL BIGINT)\n"
    "  FENCELOCK_REGION  the region that was opened: its absolute path (a\n"
    "                    relative --region or $FENCELOCK_REGION is taken from\n"
    "                    the working directory of fencelock run, so COMMAND may\n"
    "                    change directory), or the etcd:// or etcds:// URI\n"
    "\n"
    "Processes and signals:\n"
    "  COMMAND runs in a process group of its own, so that all of it can be\n"
    "  signalled.  When fencelock run's standard input is the terminal and it is\n"
    "  in the foreground, COMMAND's group gets the terminal (the keys ^C and ^Z\n"
    "  reach COMMAND; when ^Z stops it, fencelock run stops too, and continues it\n"
    "  when continued).\n"
    "  SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM and SIGWINCH\n"
    "  sent to fencelock run are forwarded to COMMAND's process group.  While\n"
    "  fencelock run still waits for KEY they have their default effect.\n"
    "  SIGSTOP stops fencelock run, not COMMAND; its lease is not renewed while\n"
    "  it is stopped, so a stop longer than the lease loses the lease, and COMMAND\n"
    "  is terminated as soon as fencelock run continues.\n"
    "  The lock covers COMMAND and every process it starts, also those that leave\n"
    "  its process group (setsid, double fork): fencelock run is their subreaper.\n"
    "  When COMMAND exits and some of them still run, they get SIGTERM, SIGKILL\n"
    "  after --kill-after, and KEY is released only when none is left; the exit\n"
    "  status is COMMAND's.\n"
    "  If fencelock run is killed (SIGKILL), fencelockd frees KEY at once and\n"
    "  COMMAND itself gets SIGTERM; the other processes it started get nothing,\n"
    "  go on with the stale token (only the check at the resource stops them).\n"
    "  SIGPIPE is ignored by fencelock run and restored for COMMAND.\n"
    "\n" CLI_ENVIRONMENT_TEXT
    "\n"
    "Exit status:\n"
    "  N    COMMAND's exit status; 128+N if COMMAND was killed by signal N\n"
    "  2    bad usage: unknown option, bad DURATION or KEY, --lease out of range,\n"
    "       missing COMMAND, both -c and COMMAND\n"
    "  3    the region cannot be opened or is not a valid region, or (with\n"
    "       --require-supervisor) no supervisor registered fencelock run\n"
    "  75   KEY could not be acquired in time (--wait, --no-wait); -E N makes\n"
    "       it N\n"
    "  76   the lease was lost while COMMAND ran: COMMAND was terminated (or had\n"
    "       exited by the time the loss was noticed)\n"
    "  125  fencelock run itself failed (out of resources, library error); COMMAND\n"
    "       did not run, or was killed\n"
    "  126  COMMAND was found but could not be run\n"
    "  127  COMMAND was not found\n"
    "  2, 3 and 75 mean that COMMAND did not run.\n"
    "\n"
    "Examples:\n"
    "  fencelock run nightly-report -- ./make-report --out /srv/reports\n"
    "  fencelock run --no-wait cron/cleanup -- ./cleanup.sh || echo \"status $?\"\n"
    "  fencelock run -n -E 0 cron/cleanup ./cleanup.sh     (skip quietly if busy)\n"
    "  fencelock run -w 10 jobs/build -c 'make && make install'\n"
    "  fencelock run jobs/out -c 'produce | fencelock commit out'\n"
    "  fencelock run --wait 10s --lease 5s db/invoices -- sh -c 'sqlite3 app.db \\\n"
    "      \"UPDATE invoices SET state = 1, fence_token = $FENCELOCK_TOKEN\n"
    "        WHERE id = 42 AND fence_token <= $FENCELOCK_TOKEN; SELECT changes();\"'\n";

/* -E N: an exit status, 0..255.  -1 and *out set, or bad usage. */
static int parse_exit_code(const char *text, int *out)
{
    int v = 0;
    const char *p = text;
    for (; *p >= '0' && *p <= '9' && v <= 255; p++)
        v = v * 10 + (*p - '0');
    if (p == text || *p || v > 255) {
        char shown[256];
        fl__keytext(text, shown, sizeof shown);
        return fl__usage_error("--conflict-exit-code '%s': not an exit status from 0 to 255",
                               shown);
    }
    *out = v;
    return -1;
}

/* -1 and *ns set, or the exit status of bad usage. */
static int parse_duration_option(const char *option, const char *text, uint64_t *ns)
{
    const char *why;
    if (cli_parse_duration(text, ns, &why) == 0)
        return -1;
    char shown[256];
    fl__keytext(text, shown, sizeof shown);
    return fl__usage_error("%s '%s': %s", option, shown, why);
}

/* -1 if lease_ns is a lease fencelock run can keep, else the exit status of
 * bad usage.  The longest is what a region can record from now on, rounded
 * down to a whole minute (so that the limit printed is the one applied, and
 * the clock's advance until the acquisition has a little room). */
static int check_lease(const char *text, uint64_t lease_ns)
{
    char shown[256], limit[32];
    fl__keytext(text, shown, sizeof shown);
    if (lease_ns < MIN_LEASE_NS) {
        cli_format_duration(MIN_LEASE_NS, CLI_DURATION_EXACT, limit, sizeof limit);
        return fl__usage_error("--lease '%s': a lease must be at least %s (renewal cannot keep "
                               "a shorter one on a loaded machine)",
                               shown, limit);
    }
    uint64_t now = fl__monotonic_clock_ns();
    uint64_t room = now < LEASE_DEADLINE_LIMIT_NS ? LEASE_DEADLINE_LIMIT_NS - now : 0;
    uint64_t max = room / CLI_NS_PER_M * CLI_NS_PER_M;
    if (lease_ns > max) {
        cli_format_duration(max, CLI_DURATION_EXACT, limit, sizeof limit);
        return fl__usage_error("--lease '%s': longer than a region can record: at most %s now "
                               "(lease deadlines are microseconds of the monotonic clock below "
                               "2^48, about 8.9 years after boot)",
                               shown, limit);
    }
    return -1;
}

/* Returns -1 to go on, else the exit status (help shown, or bad usage). */
int run_parse_args(int argc, char **argv, struct run_options *o)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"lease", required_argument, NULL, 'l'},
        {"wait", required_argument, NULL, 'w'},
        {"no-wait", no_argument, NULL, 'n'},
        {"kill-after", required_argument, NULL, 'k'},
        {"require-supervisor", no_argument, NULL, 'S'},
        {"conflict-exit-code", required_argument, NULL, 'E'},
        {"command", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    o->lease_ns = DEFAULT_LEASE_NS;
    o->wait_ns = FL_WAIT_FOREVER;
    o->kill_after_ns = DEFAULT_KILL_AFTER_NS;
    o->conflict_exit = RUN_EXIT_NOT_ACQUIRED;
    bool wait_given = false, no_wait = false;
    const char *string = NULL; /* -c STRING */
    opterr = 0; /* our messages name the subcommand and give the hint */
    optind = 1;
    int c, rc;
    uint64_t ns;
    /* '+': options end at the first non-option (KEY), so that nothing of
     * COMMAND is ever taken for an option of ours. */
    while ((c = getopt_long(argc, argv, "+:r:l:w:nk:E:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (cli_region_option(optarg, &o->region) != 0)
                return FL__EXIT_USAGE;
            break;
        case 'l':
            if ((rc = parse_duration_option("--lease", optarg, &o->lease_ns)) >= 0)
                return rc;
            if ((rc = check_lease(optarg, o->lease_ns)) >= 0)
                return rc;
            break;
        case 'w':
            if ((rc = parse_duration_option("--wait", optarg, &ns)) >= 0)
                return rc;
            o->wait_ns = (int64_t)ns; /* the parser caps durations at INT64_MAX */
            wait_given = true;
            break;
        case 'n': no_wait = true; break;
        case 'k':
            if ((rc = parse_duration_option("--kill-after", optarg, &o->kill_after_ns)) >= 0)
                return rc;
            break;
        case 'S': o->require_supervisor = true; break;
        case 'E':
            if ((rc = parse_exit_code(optarg, &o->conflict_exit)) >= 0)
                return rc;
            break;
        case 'c':
            if (string)
                return fl__usage_error("-c/--command given twice");
            string = optarg;
            break;
        case 'h':
            fputs(run_usage, stdout);
            /* run's own failures are 125: 1 could be COMMAND's */
            return cli_finish_stdout() == CLI_EXIT_OK ? CLI_EXIT_OK : RUN_EXIT_FAILED;
        default: /* ':' or '?' */
            return fl__option_error(c, argv, longopts);
        }
    }
    if (wait_given && no_wait)
        return fl__usage_error("--wait and --no-wait exclude each other");
    if (no_wait)
        o->wait_ns = 0;
    if (optind >= argc)
        return fl__usage_error("missing KEY and COMMAND: fencelock run KEY COMMAND");
    o->key = argv[optind];
    if ((rc = cli_check_name("KEY", o->key)) >= 0)
        return rc;
    fl__keytext(o->key, o->key_text, sizeof o->key_text);
    char **rest = argv + optind + 1;
    /* flock's form: KEY -c STRING (options before KEY are parsed above). */
    static const char command_prefix[] = "--command=";
    const size_t command_prefix_len = sizeof command_prefix - 1;
    bool joined = rest[0] && strncmp(rest[0], command_prefix, command_prefix_len) == 0;
    if (rest[0] && !string &&
        (strcmp(rest[0], "-c") == 0 || strcmp(rest[0], "--command") == 0 || joined)) {
        if (joined) {
            string = rest[0] + command_prefix_len;
            rest += 1;
        } else if (!rest[1]) {
            return fl__usage_error("option '%s' needs an argument", rest[0]);
        } else {
            string = rest[1];
            rest += 2;
        }
    }
    if (string) {
        if (rest[0]) {
            char shown[256];
            fl__keytext(rest[0], shown, sizeof shown);
            return fl__usage_error("unexpected argument '%s': -c STRING and COMMAND exclude "
                                   "each other",
                                   shown);
        }
        if (!string[0])
            return fl__usage_error("-c: the command STRING is empty");
        o->shell_command[0] = "sh";
        o->shell_command[1] = "-c";
        o->shell_command[2] = (char *)string;
        o->shell_command[3] = NULL;
        o->command = o->shell_command;
        return -1;
    }
    if (!rest[0])
        return fl__usage_error("missing COMMAND after KEY");
    if (strcmp(rest[0], "--") == 0) {
        rest++;
        if (!rest[0])
            return fl__usage_error("missing COMMAND after '--'");
    } else if (rest[0][0] == '-') {
        char shown[256];
        fl__keytext(rest[0], shown, sizeof shown);
        return fl__usage_error("expected COMMAND after KEY, found '%s' (options go before KEY; "
                               "write '--' before a COMMAND that starts with '-')",
                               shown);
    }
    if (!rest[0][0])
        return fl__usage_error("COMMAND is empty");
    o->command = rest;
    return -1;
}
