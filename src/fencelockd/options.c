/* SPDX-License-Identifier: MIT */
/*
 * options.c - fencelockd's command line: the help text (its exit statuses
 * come from the one table, FLD_EXIT_TABLE in fencelockd.h) and the parser.
 * Every mistake is one "fencelockd: ..." line on stderr, and the caller
 * exits FLD_EXIT_USAGE: nothing is opened before the command line is good.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "fencelockd.h"

static const char usage_text[] =
    "Usage: fencelockd [OPTIONS]\n"
    "\n"
    "Supervise a fencelock region: create it if absent (or adopt it as found),\n"
    "register client processes on the Unix socket REGION.sock, and release the\n"
    "locks of clients that die. Runs in the foreground and logs one JSON object\n"
    "per line on stderr.\n"
    "\n"
    "Options:\n"
    "  -r, --region PATH        region file (default: $FENCELOCK_REGION, else\n"
    "                           /run/fencelock/region for root,\n"
    "                           $XDG_RUNTIME_DIR/fencelock/region for a user, or\n"
    "                           /dev/shm/fencelock-UID/region when neither exists)\n"
    "      --group GROUP        share the region with GROUP (a name or number):\n"
    "                           the region file and REGION.sock belong to it\n"
    "      --mode MODE          octal mode of the region file and REGION.sock\n"
    "                           [0600; 0660 with --group]; within 0666, with\n"
    "                           0600, never writable by others\n"
    "      --locks N            lock slots (distinct keys) of a new region [4096]\n"
    "      --records N          fenced records of a new region [1024]\n"
    "      --record-size BYTES  largest record value, 8..65536 [1024]\n"
    "      --clients N          client table size, 1..65535 [1024]\n"
    "      --spare-buffers N    commit buffers beyond one per record, for commits\n"
    "                           in flight [64]\n"
    "      --huge-pages         back the region with transparent huge pages where\n"
    "                           the kernel allows it (tmpfs mounted with huge=...);\n"
    "                           elsewhere a warning (huge_pages_unavailable), not\n"
    "                           a failure\n"
    "      --state PATH         durable state file holding the token epoch (default:\n"
    "                           /var/lib/fencelock/NAME.state for root, else\n"
    "                           $XDG_STATE_HOME/fencelock/NAME.state)\n"
    "      --min-token N        every new token is greater than N (moving a region\n"
    "                           to a new file or host: pass its greatest token)\n"
    "      --flush-interval D   msync the region every DURATION D, 0 = only at a\n"
    "                           clean stop [30s] (matters for a region on disk)\n"
    "      --log PATH           append the log to PATH instead of stderr (reopened\n"
    "                           on SIGHUP, for logrotate)\n"
    "      --syslog             copy every log line to syslog (journald)\n"
    "      --metrics-file PATH  rewrite PATH atomically with Prometheus metrics\n"
    "                           (node_exporter's textfile collector)\n"
    "      --metrics-interval D DURATION between metrics-file rewrites [15s]\n"
    "  -h, --help               show this help\n"
    "  -V, --version            show the version\n"
    "\n"
    "A DURATION is a decimal number of seconds (30, 0.5), or a decimal number\n"
    "with a unit: us, ms, s, m or h (as in 500ms, 2m); both intervals are at\n"
    "least 100ms and at most 24h.\n"
    "\n"
    "Creation parameters apply to a new region; given for an existing region\n"
    "they must match it, or fencelockd refuses to start. --group and --mode are\n"
    "applied to an existing region too (logged as region_access_changed; exit 3\n"
    "if that is not permitted).\n"
    "\n"
    "Access: a directory fencelockd creates for the region is 0700, or with\n"
    "--group 0750 and the group (group r-x when MODE gives the group anything,\n"
    "others r-x when it gives others anything; never group-writable); an\n"
    "existing one is left as it is. The region's directory must be owned by\n"
    "fencelockd's user or root and not writable by all without the sticky bit,\n"
    "and the region file owned by that user, root or the directory's owner:\n"
    "else another user could replace the region, and fencelockd exits 3\n"
    "(region_untrusted). Members of GROUP can forge the region's state: share it\n"
    "only with users you trust (README, Trust model).\n"
    "\n"
    "Tokens are EPOCH << 40 | COUNTER. At every start fencelockd writes a new\n"
    "epoch to the state file (fsync) before any token of it is handed out, so\n"
    "tokens keep increasing across restarts, crashes, power loss and reboots.\n"
    "New clients are admitted only once the region is ready: this boot's epoch\n"
    "durable, the floor raised, the old boot's leases voided and every record's\n"
    "value checked against its checksum (records it cannot vouch for are logged\n"
    "as record_unvouched and read as EBADMSG until committed again). A start\n"
    "that fails leaves the region refusing clients (fl_open: EAGAIN).\n"
    "\n"
    "Log events: start, found, epoch_advanced, client_registered, client_gone,\n"
    "lock_released_by_death, lease_takeover, fencing_rejection, retry_loop,\n"
    "events_dropped, new_boot, lease_voided, client_refused, fd_limit_low,\n"
    "records_unvouched, record_unvouched, huge_pages, huge_pages_unavailable, stop;\n"
    "errors (epoch_space_spent, boot_id_unreadable, region_truncated, ...) name\n"
    "what failed. client_gone\n"
    "says \"closed\" only for a client that called fl_close (it says goodbye on\n"
    "the socket), \"died\" otherwise.\n"
    "\n"
    "Open files: every client costs two descriptors (connection and pidfd). At\n"
    "start fencelockd raises its soft RLIMIT_NOFILE to what --clients needs (about\n"
    "2 per client + 90), up to the hard limit; if the hard limit is lower it logs\n"
    "fd_limit_low with both numbers and how many clients fit (raise LimitNOFILE=\n"
    "or ulimit -Hn). A client it has no descriptors for is refused at once: its\n"
    "fl_open fails with EUSERS and fl_last_error() says the supervisor is out of\n"
    "file descriptors; each such refusal is counted in a client_refused line\n"
    "(at most one a second).\n"
    "\n"
    "Signals: SIGTERM or SIGINT stop it cleanly; clients keep working. SIGHUP\n"
    "reopens the --log file.\n"
    "With $NOTIFY_SOCKET set it reports READY=1 (systemd Type=notify) once the\n"
    "region is ready, and STOPPING=1 when a signal stops it; with $WATCHDOG_USEC\n"
    "too (WatchdogSec=) it sends WATCHDOG=1 every half of that interval.\n";

/* Print text from column 5, words wrapped before column 80. */
static void print_wrapped(const char *text)
{
    enum { INDENT = 5, WIDTH = 79 };
    int col = INDENT;
    while (*text) {
        size_t word = strcspn(text, " ");
        if (col > INDENT && col + 1 + (int)word > WIDTH) {
            printf("\n%*s", INDENT, "");
            col = INDENT;
        } else if (col > INDENT) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)word, text);
        col += (int)word;
        text += word;
        text += strspn(text, " ");
    }
    putchar('\n');
}

static void print_usage(void)
{
    fputs(usage_text, stdout);
    fputs("\nExit status:\n", stdout);
#define FLD_EXIT_HELP(name, status, text)                                                  \
    printf("  %d  ", (status));                                                             \
    print_wrapped(text);
    FLD_EXIT_TABLE(FLD_EXIT_HELP)
#undef FLD_EXIT_HELP
}

static int parse_u32(const char *name, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "fencelockd: --%s: '%s' is not a number in %u..%u\n", name, s, lo, hi);
        return -EINVAL;
    }
    *out = (uint32_t)v;
    return 0;
}

/* Intervals are checked on each turn of the event loop, which polls at most
 * 100 ms: a shorter one would not be kept. */
#define INTERVAL_MIN_NS (100ull * 1000000ull)
#define INTERVAL_MAX_NS (86400ull * FL__NS_PER_S)

/* A DURATION (src/common/duration.c, the grammar of every fencelock
 * program): a bare number is seconds, as these options always took it. */
static int parse_interval(const char *name, const char *s, bool zero_ok, uint64_t *out)
{
    const char *why = NULL;
    uint64_t v = 0;
    if (cli_parse_duration(s, &v, &why) != 0) {
        fprintf(stderr, "fencelockd: --%s: '%s': %s\n", name, s, why);
        return -EINVAL;
    }
    if ((v != 0 || !zero_ok) && (v < INTERVAL_MIN_NS || v > INTERVAL_MAX_NS)) {
        fprintf(stderr, "fencelockd: --%s: '%s' is not a duration from 100ms to 24h%s\n", name,
                s, zero_ok ? " (or 0)" : "");
        return -EINVAL;
    }
    *out = v;
    return 0;
}

int options_parse(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"locks", required_argument, NULL, 'L'},
        {"records", required_argument, NULL, 'R'},
        {"record-size", required_argument, NULL, 'S'},
        {"clients", required_argument, NULL, 'C'},
        {"spare-buffers", required_argument, NULL, 'B'},
        {"huge-pages", no_argument, NULL, 'H'},
        {"state", required_argument, NULL, 's'},
        {"min-token", required_argument, NULL, 'm'},
        {"flush-interval", required_argument, NULL, 'f'},
        {"log", required_argument, NULL, 'l'},
        {"syslog", no_argument, NULL, 'y'},
        {"metrics-file", required_argument, NULL, 'M'},
        {"metrics-interval", required_argument, NULL, 'I'},
        {"group", required_argument, NULL, 'G'},
        {"mode", required_argument, NULL, 'O'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct options){
        .flush_interval_ns = 30ull * FL__NS_PER_S,
        .metrics_interval_ns = 15ull * FL__NS_PER_S,
        .gid = (gid_t)-1,
        .params = {FL__DEFAULT_LOCKS, FL__DEFAULT_RECORDS, FL__DEFAULT_RECORD_SIZE,
                   FL__DEFAULT_CLIENTS, FL__DEFAULT_SPARE_BUFFERS},
    };
    struct fl__params lo, hi, *p = &o->params;
    fl__params_limits(&lo, &hi);
    bool mode_given = false;
    int c;
    while ((c = getopt_long(argc, argv, "r:hV", longopts, NULL)) != -1) {
        int err = 0;
        switch (c) {
        case 'r': o->region = optarg; break;
        case 'L': err = parse_u32("locks", optarg, lo.locks, hi.locks, &p->locks); o->given[0] = true; break;
        case 'R': err = parse_u32("records", optarg, lo.records, hi.records, &p->records); o->given[1] = true; break;
        case 'S': err = parse_u32("record-size", optarg, lo.record_size, hi.record_size, &p->record_size); o->given[2] = true; break;
        case 'C': err = parse_u32("clients", optarg, lo.clients, hi.clients, &p->clients); o->given[3] = true; break;
        case 'B': err = parse_u32("spare-buffers", optarg, lo.spare_buffers, hi.spare_buffers, &p->spare_buffers); o->given[4] = true; break;
        case 'H': o->huge_pages = true; break;
        case 's': o->state = optarg; break;
        case 'm': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-' || v >= FL_TOKEN_MAX) {
                fprintf(stderr, "fencelockd: --min-token: '%s' is not a token below %llu\n",
                        optarg, (unsigned long long)FL_TOKEN_MAX);
                err = -EINVAL;
            }
            o->min_token = v;
            break;
        }
        case 'f': err = parse_interval("flush-interval", optarg, true, &o->flush_interval_ns); break;
        case 'l': o->log_path = optarg; break;
        case 'y': o->syslog = true; break;
        case 'M': o->metrics_file = optarg; break;
        case 'I': err = parse_interval("metrics-interval", optarg, false, &o->metrics_interval_ns); break;
        case 'G': err = access_parse_group(optarg, &o->gid); o->access_given = true; break;
        case 'O': err = access_parse_mode(optarg, &o->mode); mode_given = o->access_given = true; break;
        case 'h': print_usage(); o->done = true; return 0;
        case 'V': printf("fencelockd %d.%d.%d\n", FL_VERSION_MAJOR, FL_VERSION_MINOR, FL_VERSION_PATCH); o->done = true; return 0;
        default: fputs("Try 'fencelockd --help'.\n", stderr); return -EINVAL;
        }
        if (err)
            return err;
    }
    if (optind < argc) {
        fprintf(stderr, "fencelockd: unexpected argument '%s'\nTry 'fencelockd --help'.\n",
                argv[optind]);
        return -EINVAL;
    }
    if (!mode_given)
        o->mode = o->gid != (gid_t)-1 ? 0660 : 0600;
    return 0;
}

