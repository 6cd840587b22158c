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

/* The help, in the form of util-linux's: what a user needs at the terminal.
 * The rest (the fencing, the processes and signals, examples) is in the
 * run section of fencelock(1), docs/man/fencelock.1. */
const char run_usage[] =
    "Usage:\n"
    "  fencelock run [options] KEY [--] COMMAND [ARGUMENT...]\n"
    "  fencelock run [options] KEY -c STRING\n"
    "\n"
    "Run COMMAND holding the lock of KEY, with its fencing token in its environment.\n"
    "\n"
    "Options:\n"
    "  -r, --region PATH           the region file or etcd:// URI (default: see\n"
    "                              Environment)\n"
    "  -l, --lease DURATION        lease length (default 30s, at least 250ms),\n"
    "                              renewed each time a third of it has passed\n"
    "  -w, --wait DURATION         give up if KEY is still held after DURATION\n"
    "                              (default: wait as long as it takes)\n"
    "  -n, --no-wait               give up at once if KEY is held (--wait 0)\n"
    "  -E, --conflict-exit-code N  exit status if KEY is not acquired (default 75)\n"
    "  -c, --command STRING        run STRING with sh -c instead of COMMAND\n"
    "  -k, --kill-after DURATION   after a lost lease, SIGKILL that long after\n"
    "                              SIGTERM (default 5s; 0: SIGKILL at once)\n"
    "      --require-supervisor    exit 3 instead of running COMMAND when no\n"
    "                              fencelockd registers fencelock run\n"
    "\n"
    "  -h, --help                  display this help\n"
    "\n"
    "Arguments:\n"
    "  KEY      any 1 to 127 bytes; options come before it (-c may follow it)\n"
    "  COMMAND  looked up in PATH, run in a process group of its own; '--' is\n"
    "           needed before a COMMAND that starts with '-'\n"
    "\n" CLI_DURATION_TEXT
    "\n"
    "Environment of COMMAND: fencelock run's own, plus\n"
    "  FENCELOCK_KEY     KEY\n"
    "  FENCELOCK_TOKEN   the fencing token, in decimal: carry it to every write\n"
    "                    (in SQL: ... AND fence_token <= $FENCELOCK_TOKEN)\n"
    "  FENCELOCK_REGION  the region opened: its absolute path, so COMMAND may\n"
    "                    change directory, or its etcd:// or etcds:// URI\n"
    "\n" CLI_ENVIRONMENT_TEXT
    "\n"
    "Exit status:\n"
    "  N    COMMAND's exit status; 128+N if COMMAND was killed by signal N\n"
    "  2    bad usage\n"
    "  3    the region cannot be opened, or no supervisor (--require-supervisor)\n"
    "  75   KEY was not acquired in time (--wait, --no-wait); -E N makes it N\n"
    "  76   the lease was lost while COMMAND ran: COMMAND was terminated\n"
    "  125  fencelock run itself failed\n"
    "  126  COMMAND was found but could not be run\n"
    "  127  COMMAND was not found\n"
    "  2, 3 and 75 mean that COMMAND did not run.\n"
    "\n"
    "For more details see fencelock(1).\n";

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
