/* SPDX-License-Identifier: MIT */
/*
 * run.c - `fencelock run`: hold a key's lock for as long as a command runs,
 * the fenced counterpart of flock(1) and `etcdctl lock`.
 *
 * The command gets the fencing token in its environment and must carry it to
 * every write it makes; the lock alone protects nothing once a holder can be
 * paused past its lease.  What this program adds is the supervision:
 *
 *   1. acquire KEY (waiting as --wait says; signals have their default
 *      effect until the command starts);
 *   2. block the signals it forwards and read them from a signalfd, together
 *      with SIGCHLD; ignore SIGPIPE (a message to a stderr nobody reads must
 *      never end the supervision); become a child subreaper, so that every
 *      process the command starts stays a descendant of this one, however
 *      it detaches (setsid, double fork);
 *   3. fork the command into a process group of its own (and hand it the
 *      terminal when we have it), set FENCELOCK_KEY, FENCELOCK_TOKEN and
 *      FENCELOCK_REGION, and hold it before exec until the lease is kept
 *      alive (fl_keepalive_start): the command never runs unrenewed;
 *   4. poll the signalfd and the keepalive's fd: forward signals to the
 *      command's process group; on the loss of the lease send the group and
 *      every other descendant SIGTERM, then SIGKILL after --kill-after, and
 *      exit RUN_EXIT_LEASE_LOST; when the command exits, end the descendants
 *      it left running the same way;
 *   5. once no descendant is left alive (all reaped), stop renewing and
 *      release: the lock covers the command and every process it started.
 *
 * Signals are sent before anything is reported: a report can fail or block
 * (stderr a full or broken pipe), a signal not sent is a stale writer left
 * running.
 *
 * The child is forked while this process is still single-threaded (the
 * keepalive thread starts after the fork), so it may set its environment and
 * print freely before exec.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "clocks.h"
#include "duration.h"
#include "fencelock.h"
#include "keytext.h"
#include "proc_stat.h"
#include "run.h"

#define DEFAULT_LEASE_NS (30 * CLI_NS_PER_S)
#define DEFAULT_KILL_AFTER_NS (5 * CLI_NS_PER_S)
/* The shortest lease the keepalive renews reliably on a loaded machine, with
 * margin: docs/run-lease.md has the measurement (50ms already failed under
 * load; 100ms held: 250ms leaves 2.5 times that margin). */
#define MIN_LEASE_NS (250 * CLI_NS_PER_MS)
/* Lease deadlines are microseconds of CLOCK_MONOTONIC in 48 bits (see
 * CAVEATS in fencelock.h): now + lease must stay below this. */
#define LEASE_DEADLINE_LIMIT_NS (((1ull << 48) - 1) * 1000ull)
/* While waiting for descendants to end after SIGTERM: how often to look
 * again (the exit of a process that is not our child wakes nobody here). */
#define RESCAN_MS 100

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

/* Signals forwarded to the command's process group. */
static const int forwarded_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM,
                                        SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH};

/* ---- the command line ------------------------------------------------------ */

struct run_options {
    const char *region; /* NULL: the default */
    uint64_t lease_ns;
    int64_t wait_ns; /* FL_WAIT_FOREVER, 0 (try once) or a timeout */
    uint64_t kill_after_ns;
    int conflict_exit; /* exit status when the key is not acquired */
    const char *key;
    char key_text[FL_KEYTEXT_MAX]; /* key as messages show it */
    char *shell_command[4]; /* sh -c STRING, when -c is given */
    char **command; /* NULL-terminated, at least one word */
    bool require_supervisor; /* --require-supervisor: never run unregistered */
};

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
static int parse_run_args(int argc, char **argv, struct run_options *o)
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

/* ---- running the command --------------------------------------------------- */

struct runner {
    const struct run_options *o;
    fl_region *r;
    fl_lease lease;
    fl_keepalive *k;
    sigset_t old_mask; /* to restore in the child */
    struct sigaction old_pipe; /* SIGPIPE as we got it, to restore in the child */
    int sfd;           /* signalfd of the forwarded signals, SIGCHLD and SIGTTOU */
    pid_t child;       /* the command; also its process group */
    bool foreground;   /* stdin is our terminal and we were in front: COMMAND gets it */
    bool child_done;
    int child_status; /* wait status */
    bool lost;
    int lost_err;
    bool loss_said; /* the loss was reported when the command was signalled */
    bool term_sent, kill_sent;
    bool leftovers;   /* ending what the command left running after its exit */
    uint64_t kill_at; /* CLOCK_MONOTONIC */
};

/* Send sig to the command's process group, and to the command itself if it
 * has left the group (setsid, setpgid): each process gets it once. */
static void signal_command(struct runner *rn, int sig)
{
    if (!rn->child_done && getpgid(rn->child) != rn->child)
        kill(rn->child, sig);
    kill(-rn->child, sig); /* ESRCH once the group is empty: nothing to do */
}

/* In the child, between fork and exec.  The parent is single-threaded at the
 * fork, so stdio and setenv are safe here. */
static void exec_command(struct runner *rn, int go_fd, pid_t parent)
{
    /* If fencelock run dies, the lock is freed at once: tell the command. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(RUN_EXIT_FAILED);
    setpgid(0, 0);
    if (rn->foreground)
        tcsetpgrp(STDIN_FILENO, getpid()); /* SIGTTOU is blocked: no stop */
    char token[32];
    snprintf(token, sizeof token, "%" PRIu64, rn->lease.token);
    if (setenv("FENCELOCK_KEY", rn->o->key, 1) != 0 ||
        setenv("FENCELOCK_TOKEN", token, 1) != 0 ||
        setenv(FL_REGION_ENV, fl_region_path(rn->r), 1) != 0) {
        fl__say("cannot set the environment of %s: %s", rn->o->command[0], strerror(errno));
        _exit(RUN_EXIT_FAILED);
    }
    /* Wait until the lease is kept alive; EOF means the parent gave up. */
    char go;
    if (read(go_fd, &go, 1) != 1)
        _exit(RUN_EXIT_FAILED);
    sigprocmask(SIG_SETMASK, &rn->old_mask, NULL);
    sigaction(SIGPIPE, &rn->old_pipe, NULL); /* ignored only for our own messages */
    execvp(rn->o->command[0], rn->o->command);
    int e = errno;
    fl__say("cannot run '%s': %s", rn->o->command[0], strerror(e));
    _exit(e == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC);
}

/* The command was stopped from the terminal (^Z): stop as well, so that the
 * shell sees the job stopped and takes the terminal; when continued, hand the
 * terminal back if we are in front again, and continue the command. */
static void follow_job_stop(struct runner *rn)
{
    if (tcgetpgrp(STDIN_FILENO) == rn->child)
        tcsetpgrp(STDIN_FILENO, getpgrp());
    kill(getpid(), SIGSTOP); /* stops here until SIGCONT */
    if (tcgetpgrp(STDIN_FILENO) == getpgrp())
        tcsetpgrp(STDIN_FILENO, rn->child);
    signal_command(rn, SIGCONT);
}

/* Reap every child that has changed state: the command, and processes it
 * left behind (reparented to us, the subreaper).  follow_stops: a stop of
 * the command from the terminal stops us too (not while killing). */
static void reap(struct runner *rn, bool follow_stops)
{
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG | (rn->foreground && follow_stops ? WUNTRACED : 0));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        if (w != rn->child)
            continue; /* an orphan of the command: reaped, nothing more */
        if (WIFSTOPPED(st)) {
            if (!rn->child_done)
                follow_job_stop(rn);
            continue;
        }
        rn->child_done = true;
        rn->child_status = st;
    }
}

/* ---- the command's descendants ---------------------------------------------- */

/* The lock covers the command and every process it starts.  Since this
 * process is a child subreaper, all of them stay its descendants: a process
 * whose parent exits is reparented here, however it left the command's
 * process group (setsid, setpgid, double fork).  They are found by walking
 * /proc (ppid links; /proc/PID/task/TID/children needs CONFIG_PROC_CHILDREN,
 * which not every kernel has) and signalled through pidfds checked against
 * the start time read in the walk, so that a pid reused meanwhile by an
 * unrelated process is never signalled. */

/* One process as /proc/PID/stat shows it. */
struct proc {
    pid_t pid, ppid, pgrp;
    char state;               /* 'Z' zombie, 'X' dead, else alive */
    unsigned long long start; /* clock ticks after boot: with pid, names one process */
};

struct proc_list {
    struct proc *v;
    size_t n, cap;
};

static bool proc_alive(const struct proc *p) { return p->state != 'Z' && p->state != 'X'; }

static bool read_proc(pid_t pid, struct proc *p)
{
    struct fl__proc_stat st;
    if (fl__proc_stat_read(pid, &st) != 0)
        return false;
    p->pid = pid;
    p->ppid = st.ppid;
    p->pgrp = st.pgrp;
    p->state = st.state;
    p->start = st.start_time;
    return true;
}

static int proc_push(struct proc_list *l, const struct proc *p)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        struct proc *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *p;
    return 0;
}

static bool proc_listed(const struct proc_list *l, pid_t pid)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].pid == pid)
            return true;
    return false;
}

/* Every descendant of this process, zombies included, into out (emptied
 * first; free out->v).  0, or -1 if /proc cannot be read. */
static int list_descendants(struct proc_list *out)
{
    out->n = 0;
    struct proc_list all = {0};
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        struct proc p;
        if (*end || pid <= 0 || !read_proc((pid_t)pid, &p))
            continue; /* not a process, or gone meanwhile */
        if (proc_push(&all, &p) != 0) {
            rc = -1;
            break;
        }
    }
    closedir(d);
    /* Parents are not always listed before their children (pids wrap):
     * repeat until a pass adds nothing. */
    pid_t self = getpid();
    for (bool grew = rc == 0; grew;) {
        grew = false;
        for (size_t i = 0; i < all.n; i++) {
            const struct proc *p = &all.v[i];
            if ((p->ppid == self || proc_listed(out, p->ppid)) && !proc_listed(out, p->pid)) {
                if (proc_push(out, p) != 0) {
                    rc = -1;
                    break;
                }
                grew = true;
            }
        }
    }
    free(all.v);
    return rc;
}

/* A pidfd of p if it is still the process listed (same start time); else
 * -1 with errno ESRCH, or another errno if that cannot be known. */
static int proc_pidfd(const struct proc *p)
{
    int fd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    if (fd < 0)
        return -1;
    struct proc now;
    if (!read_proc(p->pid, &now) || now.start != p->start) {
        close(fd);
        errno = ESRCH;
        return -1;
    }
    return fd;
}

/* Send sig to p unless it is gone (or its pid now names another process). */
static void signal_proc(const struct proc *p, int sig)
{
    int fd = proc_pidfd(p);
    if (fd >= 0) {
        syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
        close(fd);
    } else if (errno != ESRCH) {
        kill(p->pid, sig); /* no pidfd (ENOSYS, EMFILE): by pid, as before them */
    }
}

/* Send sig (then SIGCONT if cont, so that a stopped process can act on it)
 * to the command's process group and to every descendant outside it, each
 * once.  Returns how many live descendants are outside the group; -1 if
 * they cannot be listed (then the group and the command are signalled). */
static int signal_all(struct runner *rn, int sig, bool cont)
{
    struct proc_list l = {0};
    if (list_descendants(&l) != 0) {
        free(l.v);
        signal_command(rn, sig);
        if (cont)
            signal_command(rn, SIGCONT);
        return -1;
    }
    int others = 0;
    for (int round = 0; round < (cont ? 2 : 1); round++) {
        int s = round == 0 ? sig : SIGCONT;
        kill(-rn->child, s); /* ESRCH once the group is empty: nothing to do */
        for (size_t i = 0; i < l.n; i++) {
            if (proc_alive(&l.v[i]) && l.v[i].pgrp != rn->child) {
                signal_proc(&l.v[i], s);
                others += round == 0;
            }
        }
    }
    free(l.v);
    return others;
}

static bool group_gone(const struct runner *rn)
{
    return kill(-rn->child, 0) != 0 && errno == ESRCH;
}

/* How many descendants are alive: > 0 or 0.  If they cannot be listed, the
 * command and its group stand for them all. */
static int count_alive(const struct runner *rn)
{
    struct proc_list l = {0};
    int alive = 0;
    if (list_descendants(&l) != 0)
        alive = !rn->child_done || !group_gone(rn);
    else
        for (size_t i = 0; i < l.n; i++)
            alive += proc_alive(&l.v[i]);
    free(l.v);
    return alive;
}

/* Without /proc: wait for the command and the rest of its group that are
 * our children.  SIGKILL cannot be caught, so this ends. */
static void reap_killed(struct runner *rn)
{
    int st;
    while (!rn->child_done) {
        pid_t w = waitpid(rn->child, &st, 0);
        if (w == rn->child && !WIFSTOPPED(st)) {
            rn->child_done = true;
            rn->child_status = st;
        } else if (w < 0 && errno != EINTR) {
            break;
        }
    }
    while (waitpid(-rn->child, &st, 0) > 0 || errno == EINTR) {
    }
}

/* SIGKILL the command's group and every descendant, wait until none is
 * alive, and reap those that are our children.  SIGKILL cannot be caught,
 * so this ends (unless a process hangs uninterruptibly in the kernel: then
 * the lock stays held with it, which is what it must do). */
static void kill_all(struct runner *rn)
{
    for (;;) {
        kill(-rn->child, SIGKILL);
        struct proc_list l = {0};
        if (list_descendants(&l) != 0) {
            free(l.v);
            signal_command(rn, SIGKILL);
            reap_killed(rn);
            return;
        }
        int *fds = calloc(l.n ? l.n : 1, sizeof *fds);
        size_t alive = 0, waiting = 0;
        for (size_t i = 0; i < l.n; i++) {
            if (!proc_alive(&l.v[i]))
                continue;
            alive++;
            int fd = proc_pidfd(&l.v[i]);
            if (fd >= 0) {
                syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
                if (fds)
                    fds[waiting++] = fd;
                else
                    close(fd);
            } else if (errno != ESRCH) {
                kill(l.v[i].pid, SIGKILL);
            }
        }
        /* A pidfd becomes readable when its process has exited (its
         * children are reparented to us by then). */
        for (size_t i = 0; i < waiting; i++) {
            struct pollfd pf = {.fd = fds[i], .events = POLLIN};
            while (poll(&pf, 1, -1) < 0 && errno == EINTR) {
            }
            close(fds[i]);
        }
        if (alive > waiting) {
            /* Some could not be waited for by pidfd: look again shortly. */
            struct timespec ts = {0, (long)(10 * CLI_NS_PER_MS)};
            nanosleep(&ts, NULL);
        }
        free(fds);
        free(l.v);
        reap(rn, false);
        if (alive == 0)
            return;
    }
}

static void send_kill(struct runner *rn)
{
    char grace[32];
    cli_format_duration(rn->o->kill_after_ns, CLI_DURATION_EXACT, grace, sizeof grace);
    int alive = count_alive(rn);
    if (alive > 0)
        signal_all(rn, SIGKILL, false); /* first: the report may block or fail */
    rn->kill_sent = true;
    if (rn->term_sent && alive > 0) {
        if (rn->leftovers)
            fl__say("%d process%s left by %s still running %s after SIGTERM; sending SIGKILL",
                    alive, alive == 1 ? "" : "es", rn->o->command[0], grace);
        else
            fl__say("%s (process group %d) is still running %s after SIGTERM; sending SIGKILL",
                    rn->o->command[0], (int)rn->child, grace);
    }
    kill_all(rn);
}

static void lease_lost(struct runner *rn, int err)
{
    if (rn->lost)
        return;
    rn->lost = true;
    rn->lost_err = err ? err : -ESTALE;
    if (rn->child_done)
        return; /* reported when we finish; what it left is ending already */
    /* Act first, report after: a report to a stderr whose reader is gone or
     * does not read must not keep a stale command running. */
    bool now = rn->o->kill_after_ns == 0;
    int others = signal_all(rn, now ? SIGKILL : SIGTERM, !now);
    if (!now) {
        rn->term_sent = true;
        rn->kill_at = fl__monotonic_clock_ns() + rn->o->kill_after_ns;
    }
    const char *why = rn->lost_err == -ESTALE
                          ? "the lease ran out or another process took the key"
                          : fl_strerror(rn->lost_err);
    char outside[96] = "";
    if (others > 0)
        snprintf(outside, sizeof outside, " and %d process%s it started outside that group",
                 others, others == 1 ? "" : "es");
    fl__say("lost the lease of '%s' (token %" PRIu64 ": %s); %s %s (process group %d)%s",
            rn->o->key_text, rn->lease.token, why,
            now ? "sending SIGKILL to" : "sending SIGTERM to", rn->o->command[0], (int)rn->child,
            outside);
    rn->loss_said = true;
    if (now)
        send_kill(rn);
}

/* The command exited and alive of its descendants still run: end them
 * before the lock is released, the same way as after a loss. */
static void end_leftovers(struct runner *rn, int alive)
{
    bool now = rn->o->kill_after_ns == 0;
    rn->leftovers = true;
    signal_all(rn, now ? SIGKILL : SIGTERM, !now);
    if (!now) {
        rn->term_sent = true;
        rn->kill_at = fl__monotonic_clock_ns() + rn->o->kill_after_ns;
    }
    fl__say("%s exited and left %d process%s running; sending %s to %s before releasing '%s'",
            rn->o->command[0], alive, alive == 1 ? "" : "es", now ? "SIGKILL" : "SIGTERM",
            alive == 1 ? "it" : "them", rn->o->key_text);
    if (now)
        send_kill(rn);
}

/* Read the signalfd dry: forward, or reap on SIGCHLD. */
static int drain_signals(struct runner *rn)
{
    for (;;) {
        struct signalfd_siginfo si;
        ssize_t n = read(rn->sfd, &si, sizeof si);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n != (ssize_t)sizeof si) {
            fl__say("cannot read signals: %s", n < 0 ? strerror(errno) : "short read");
            return -1;
        }
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD)
            reap(rn, true);
        else if (sig != SIGTTOU) /* only blocked, for tcsetpgrp */
            signal_command(rn, sig);
    }
}

/* Milliseconds until the SIGKILL is due, rounded up, and at most RESCAN_MS
 * (descendants that are not our children end unseen); -1 if none is due. */
static int poll_timeout(const struct runner *rn)
{
    if (!rn->term_sent || rn->kill_sent)
        return -1;
    uint64_t now = fl__monotonic_clock_ns();
    if (now >= rn->kill_at)
        return 0;
    uint64_t ms = (rn->kill_at - now + CLI_NS_PER_MS - 1) / CLI_NS_PER_MS; /* rounded up */
    return ms > RESCAN_MS ? RESCAN_MS : (int)ms;
}

/* Until the command and every process it started have ended (the last ones
 * by SIGKILL at the latest).  0, or -1 on a failure of our own. */
static int supervise(struct runner *rn)
{
    int kfd = fl_keepalive_fd(rn->k);
    for (;;) {
        if (rn->child_done) {
            if (rn->kill_sent)
                return 0;
            int alive = count_alive(rn);
            if (alive == 0)
                return 0;
            if (!rn->term_sent)
                end_leftovers(rn, alive);
            if (rn->kill_sent)
                return 0;
        }
        /* The eventfd stays readable once the lease is lost: stop polling it. */
        struct pollfd p[2] = {{.fd = rn->sfd, .events = POLLIN},
                              {.fd = rn->lost ? -1 : kfd, .events = POLLIN}};
        int n = poll(p, 2, poll_timeout(rn));
        if (n < 0 && errno != EINTR) {
            fl__say("poll: %s", strerror(errno));
            return -1;
        }
        if (n > 0 && (p[0].revents & POLLIN) && drain_signals(rn) != 0)
            return -1;
        if (n > 0 && p[1].revents)
            lease_lost(rn, fl_keepalive_status(rn->k, NULL));
        if (rn->term_sent && !rn->kill_sent && fl__monotonic_clock_ns() >= rn->kill_at)
            send_kill(rn);
    }
}

static int exit_status_of(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return RUN_EXIT_FAILED;
}

/* Stop renewing, release, and choose the exit status. */
static int finish(struct runner *rn, int failed)
{
    fl_lease l = rn->lease;
    int err = fl_keepalive_stop(rn->k, &l);
    rn->k = NULL;
    if (err && !rn->lost) {
        rn->lost = true;
        rn->lost_err = err;
    }
    /* Also after a loss: an expired lease nobody took over is freed. */
    err = fl_release(rn->r, &l);
    if (err == -ESTALE && !rn->lost) {
        rn->lost = true;
        rn->lost_err = err;
    } else if (err && err != -ESTALE) {
        fl__say("cannot release '%s': %s", rn->o->key_text, fl__library_error(err));
        failed = 1;
    }
    if (rn->foreground && tcgetpgrp(STDIN_FILENO) == rn->child)
        tcsetpgrp(STDIN_FILENO, getpgrp());
    if (failed)
        return RUN_EXIT_FAILED;
    int status = exit_status_of(rn->child_status);
    if (rn->lost) {
        if (!rn->loss_said)
            fl__say("lost the lease of '%s' (token %" PRIu64 ": %s) while %s ran; it exited with "
                    "status %d",
                    rn->o->key_text, rn->lease.token,
                    rn->lost_err == -ESTALE ? "the lease ran out or another process took the key"
                                            : fl_strerror(rn->lost_err),
                    rn->o->command[0], status);
        return RUN_EXIT_LEASE_LOST;
    }
    return status;
}

/* Block what we forward, and SIGCHLD and SIGTTOU, and read them from a
 * signalfd.  The keepalive thread, started later, inherits the mask, so no
 * thread of ours takes these signals the default way. */
static int setup_signals(struct runner *rn)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof forwarded_signals / sizeof forwarded_signals[0]; i++)
        sigaddset(&set, forwarded_signals[i]);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTTOU);
    if (sigprocmask(SIG_BLOCK, &set, &rn->old_mask) != 0) {
        fl__say("sigprocmask: %s", strerror(errno));
        return -1;
    }
    rn->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (rn->sfd < 0) {
        fl__say("signalfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Start the command held before exec, keep the lease alive, let it go. */
static int start_command(struct runner *rn)
{
    int go[2];
    if (pipe2(go, O_CLOEXEC) != 0) {
        fl__say("pipe: %s", strerror(errno));
        return -1;
    }
    rn->foreground = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fl__say("fork: %s", strerror(errno));
        close(go[0]);
        close(go[1]);
        return -1;
    }
    if (pid == 0) {
        close(go[1]);
        exec_command(rn, go[0], parent);
    }
    close(go[0]);
    rn->child = pid;
    /* Also here, so that the group exists before we signal it. */
    setpgid(pid, pid);
    if (rn->foreground)
        tcsetpgrp(STDIN_FILENO, pid);
    int err = fl_keepalive_start(rn->r, &rn->lease, rn->o->lease_ns, NULL, NULL, &rn->k);
    if (err) {
        close(go[1]); /* the command exits without running */
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (rn->foreground && tcgetpgrp(STDIN_FILENO) == pid)
            tcsetpgrp(STDIN_FILENO, getpgrp());
        if (err == -ESTALE) {
            fl__say("lost the lease of '%s' (token %" PRIu64 ") before %s could start",
                    rn->o->key_text, rn->lease.token, rn->o->command[0]);
            fl_release(rn->r, &rn->lease);
            return RUN_EXIT_LEASE_LOST;
        }
        fl__say("cannot keep the lease of '%s' alive: %s", rn->o->key_text,
                fl__library_error(err));
        fl_release(rn->r, &rn->lease);
        return -1;
    }
    if (write(go[1], "g", 1) != 1) {
        /* The child died before exec (it was killed): its status tells. */
    }
    close(go[1]);
    return 0;
}

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

/* COMMAND may change directory: a relative region (-r, or $FENCELOCK_REGION
 * without -r) is made absolute against our working directory before it is
 * opened, so that $FENCELOCK_REGION names the region opened wherever COMMAND
 * uses it.  Joined, not realpath(): the supervisor's socket is found beside
 * the name as given (NAME.sock), which resolving a symbolic link would move.
 * An etcd:// or etcds:// URI is no path and stays as it is.  -1 to go on
 * (o->region set when it changed), else the exit status. */
static int absolute_region(struct run_options *o, char *buf, size_t cap)
{
    const char *given = o->region ? o->region : getenv(FL_REGION_ENV);
    if (!given || !given[0] || given[0] == '/' || strncmp(given, "etcd://", 7) == 0 ||
        strncmp(given, "etcds://", 8) == 0)
        return -1; /* unset or empty: the default path, which is absolute */
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
    o->region = buf;
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
    int rc = parse_run_args(argc, argv, &o);
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
    if ((rc = absolute_region(&o, region, sizeof region)) >= 0)
        return rc;
    if ((rc = open_region(&o, &rn.r)) >= 0)
        return rc;
    if ((rc = acquire(&rn)) >= 0) {
        fl_close(rn.r);
        return rc;
    }
    /* Processes the command leaves behind become ours to reap, so that after
     * a lost lease the whole group can be seen to end. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (setup_signals(&rn) != 0) {
        fl_release(rn.r, &rn.lease);
        fl_close(rn.r);
        return RUN_EXIT_FAILED;
    }
    rc = start_command(&rn);
    if (rc != 0) {
        fl_close(rn.r);
        return rc > 0 ? rc : RUN_EXIT_FAILED;
    }
    int failed = supervise(&rn) != 0;
    if (failed && count_alive(&rn) > 0) {
        /* Cannot watch them any more: do not leave them running unsupervised. */
        signal_all(&rn, SIGKILL, false);
        fl__say("stopping %s (process group %d) and every process it started", o.command[0],
                (int)rn.child);
        rn.kill_sent = true;
        kill_all(&rn);
    }
    rc = finish(&rn, failed);
    close(rn.sfd);
    fl_close(rn.r);
    return rc;
}
