/* SPDX-License-Identifier: MIT */
/*
 * status.c - `fencelock status`: a view of one region as it is now, as
 * aligned tables for people or one JSON document for programs.
 *
 * This file is the command: its help, its options, and which view to show.
 * The views are in status_*.c, one a file (status.h lists them).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "duration.h"
#include "fencelock.h"
#include "status.h"

/* The help before and after the columns, which status_columns.c lists. */
static const char usage_head[] =
    "Usage: fencelock status [-r PATH] [--prefix PREFIX] [-o [TABLE:]LIST]...\n"
    "       fencelock status [-r PATH] [--prefix PREFIX] --json\n"
    "       fencelock status [-r PATH] [--json] KEY\n"
    "       fencelock status [-r PATH] [--prefix PREFIX] [--json] --watch [INTERVAL]\n"
    "                        [--count N]\n"
    "\n"
    "Show a fencelock region as it is now: its parameters and supervisor, the\n"
    "client processes registered with the supervisor, every lock key and every\n"
    "fenced record.  With KEY, show that one key and the records it fences in\n"
    "detail.  With --watch, show a view refreshed every INTERVAL, with rates\n"
    "per second, most active keys first (like top).\n"
    "\n"
    "The region is opened read-only and without registering: status works on a\n"
    "read-only file and with or without a running fencelockd, and it changes\n"
    "nothing.  The numbers are read from shared memory while other processes\n"
    "work, one field at a time: a near-instant view, not an atomic snapshot.\n"
    "Process ids are those of the supervisor's pid namespace; whether the\n"
    "supervisor is running is checked in the caller's.\n"
    "\n"
    "Options:\n"
    CLI_REGION_OPTION_TEXT
    "      --json         print one JSON document instead of tables (with\n"
    "                     --watch: one document per refresh)\n"
    "      --prefix PREFIX\n"
    "                     show only the keys that start with PREFIX and the\n"
    "                     records whose name or key starts with PREFIX (bytes,\n"
    "                     compared exactly)\n"
    "      --watch [INTERVAL]\n"
    "                     refresh every INTERVAL (500ms, 2s, 1.5s, 1m; a bare\n"
    "                     number is seconds; 50ms to 1h) [2s]\n"
    "      --count N      with --watch: stop after N refreshes\n"
    "  -o, --output [TABLE:][+]LIST\n"
    "                     the columns of a table: LIST names them, comma-\n"
    "                     separated, in order (any case); +LIST adds them to\n"
    "                     the defaults; TABLE is clients, locks or records\n"
    "                     [locks]; one -o per table (a later one for the same\n"
    "                     table replaces, with + extends, the earlier)\n"
    "      --output-all   every column of every table\n"
    "      --list-columns show the columns of each table and exit\n"
    "  -h, --help         show this help and exit\n"
    "\n";

static const char usage_tail[] =
    "On a terminal, a table wider than the terminal wraps its keys and names\n"
    "(KEY, NAME) within their cells: the lines of a cell stand one under the\n"
    "other, read as one, and share what the other columns leave of the width,\n"
    "never narrower than 16 columns.  Numbers and words are never cut, so a\n"
    "table of many columns may still be wider.  In a pipe or a file every key\n"
    "is whole on one line, as in --json.\n"
    "\n"
    "Unregistered clients (shown only when there are any; JSON: \"unregistered\"):\n"
    "  processes still running that opened the region but could not register\n"
    "  with a supervisor (none running, or its socket refused them: mode, group),\n"
    "  so their locks outlive them until the leases end: PID, UID, when they\n"
    "  opened, and the REASON; the region keeps the latest 32\n"
    "\n"
    "Slots in use that a table does not list are counted under it, one line per\n"
    "reason (\"3 of 40 lock slots not listed: no published key (...)\"): a slot\n"
    "with no published key or name (abandoned by a creator that lost a race, or\n"
    "corrupt), or with corrupt shared data.  The counts are for the whole region,\n"
    "also with --prefix.\n"
    "\n"
    "The region block also counts the events dropped from the supervisor's\n"
    "log (its event ring was full, or a client stopped while posting): the\n"
    "counters stay exact, only log lines are missing.\n"
    "\n"
    "One key (status KEY): every field of the key (state, token with its epoch\n"
    "and counter, holder, lease left, waiters, acquisitions, contended,\n"
    "takeovers, deaths, renewals and releases with those refused as stale, the\n"
    "last stale renewal or release: its operation, token and pid) and every\n"
    "record the key fences (accepted token, version, size, commits,\n"
    "rejections, repeats, and the last rejection: operation, token, pid and\n"
    "the token the record had accepted then).  A key that does not exist is an\n"
    "error, exit status 4.  Give KEY as its bytes (no escapes).\n"
    "\n"
    "Watch view (--watch): a header with the time, the supervisor, the epoch,\n"
    "the table fill and the dropped events, the region-wide rates, a line \"not\n"
    "listed: ...\" when slots in use are not listed (as below the tables), then\n"
    "the keys and the records, most active first (ties by name).  Rates are per\n"
    "second over the last refresh, - on the first.  On a terminal the view\n"
    "uses the alternate screen and is cut to the window; q or Ctrl-C quits\n"
    "(exit status 0), SIGINT, SIGTERM and SIGHUP restore the terminal and end\n"
    "it by that signal.  When standard output is not a terminal each refresh\n"
    "prints the whole view after a blank line, and a closed pipe ends it with\n"
    "status 0 (fencelock status --watch 1s | head works).\n"
    "  Keys:     KEY, STATE, ACQ/S (acquisitions), COMMIT/S (commits accepted\n"
    "            on the key's records), REJ/S (fencing rejections: commits\n"
    "            refused on the key's records plus renewals and releases\n"
    "            refused as stale), TAKEOVER/S (expired leases taken over),\n"
    "            WAITERS, LEFT, PID, TOKEN, and the totals ACQUIRED, COMMITS,\n"
    "            REJECTED (the same sum as REJ/S), REPEATS, TAKEOVERS\n"
    "  Records:  NAME, KEY, COMMIT/S, REJ/S, REPEAT/S, TOKEN, COMMITS,\n"
    "            REJECTED, REPEATS (rejections of a token the record had just\n"
    "            rejected: a client retrying instead of acquiring again)\n"
    "  Activity: ACQ/S + COMMIT/S + REJ/S for keys, COMMIT/S + REJ/S for\n"
    "            records.\n"
    "\n"
    "JSON output: one object with \"time\" (when the view was taken), \"region\"\n"
    "(an object) and the arrays \"clients\", \"locks\" and \"records\", one element\n"
    "per line.  Members are named after the fields of fencelock.h's\n"
    "fl_region_info, fl_client_info, fl_lock_info and fl_record_info; numbers\n"
    "are JSON numbers.  In addition the region has path, clients_used,\n"
    "supervisor_alive and created.  Times are RFC 3339 in UTC.  Every state and\n"
    "last_release is the word the tables show, null for -; bound_key is null if\n"
    "unbound; last_stale_op is \"renew\", \"release\" or null and last_rejected_op\n"
    "\"commit\", \"strict_commit\" or null.  lease_left_ns is in nanoseconds,\n"
    "negative once expired, 0 when free.  Keys and names are strings in which\n"
    "each byte outside printable ASCII is a \\u00NN escape: decoded as Latin-1\n"
    "they give the bytes back.  A lock's holder_pid, holder_client and\n"
    "holder_client_id name its latest holder, also after a release.  With KEY\n"
    "the document has \"time\", \"region\", \"lock\" (one object) and \"records\"\n"
    "(those the key fences).  The document of the whole region ends with\n"
    "\"skipped\": the slots in use not listed, {\"locks\": N, \"records\": N,\n"
    "\"reasons\": {\"locks\": {\"no_published_key\": N, \"corrupt\": N}, \"records\":\n"
    "{...}}}, every reason present, 0 when none.\n"
    "\n" CLI_ENVIRONMENT_TEXT "\n" CLI_EXIT_STATUS_TEXT
    "  4  status KEY: the region has no such key\n"
    "\n"
    "Examples:\n"
    "  fencelock status\n"
    "  FENCELOCK_REGION=/run/myapp/locks fencelock status\n"
    "  fencelock status orders/42\n"
    "  fencelock status --watch 1s --prefix orders/\n"
    "  fencelock status --json | jq -r '.locks[] | select(.waiters > 0) | .key'\n";

/*
 * status_usage is what `fencelock help status` and `status --help` print:
 * the text above with each table's columns between, written here from
 * the column definitions so that a column is described in one place.
 * main.c takes the array as it takes every command's text, so it is filled
 * before main() runs.
 */
char status_usage[STATUS_USAGE_MAX];

__attribute__((constructor)) static void build_status_usage(void)
{
    /* One byte short: the text stays NUL-terminated even if it were cut. */
    FILE *f = fmemopen(status_usage, sizeof status_usage - 1, "w");
    if (!f)
        return;
    setvbuf(f, NULL, _IONBF, 0);
    fputs(usage_head, f);
    columns_describe(f);
    fputs("\n", f);
    fputs(usage_tail, f);
    fclose(f);
}

/* ---- the command ----------------------------------------------------------- */

struct status_options {
    const char *region; /* NULL: the default */
    bool json;
    const char *prefix; /* NULL: every key */
    const char *key;    /* status KEY */
    bool watch;
    uint64_t interval_ns;
    unsigned long count;                     /* refreshes before stopping, 0: no limit */
    struct column_choice columns[N_TABLES];  /* what the tables show */
    const char *output;                      /* the first -o or --output-all, NULL: none */
};

/* long-only options: outside the range of short ones */
enum { OPT_JSON = 256, OPT_PREFIX, OPT_WATCH, OPT_COUNT, OPT_OUTPUT_ALL, OPT_LIST_COLUMNS };

/* --watch INTERVAL: by default, and its bounds (as the help says). */
#define INTERVAL_DEFAULT (2 * CLI_NS_PER_S)
#define INTERVAL_MIN (50 * CLI_NS_PER_MS)
#define INTERVAL_MAX CLI_NS_PER_H

/* A refresh interval: a DURATION (500ms, 2s, 1.5s, 1m), or a bare number of
 * seconds as watch(1) and top(1) take it. */
static int parse_interval(const char *s, uint64_t *ns)
{
    char with_unit[64];
    if (*s && strspn(s, "0123456789.") == strlen(s) && strlen(s) < sizeof with_unit - 1) {
        snprintf(with_unit, sizeof with_unit, "%ss", s);
        s = with_unit;
    }
    const char *why;
    uint64_t v;
    if (cli_parse_duration(s, &v, &why) != 0 || v < INTERVAL_MIN || v > INTERVAL_MAX)
        return -1;
    *ns = v;
    return 0;
}

static int bad_interval(const char *s)
{
    return fl__usage_error("--watch: '%s' is not an interval from 50ms to 1h (like 500ms, 2s "
                           "or 1m)",
                           s);
}

/* Returns -1 to go on, else the exit status (help shown, or bad usage). */
static int parse_status_args(int argc, char **argv, struct status_options *o)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, OPT_JSON},
        {"prefix", required_argument, NULL, OPT_PREFIX},
        {"watch", optional_argument, NULL, OPT_WATCH},
        {"count", required_argument, NULL, OPT_COUNT},
        {"output", required_argument, NULL, 'o'},
        {"output-all", no_argument, NULL, OPT_OUTPUT_ALL},
        {"list-columns", no_argument, NULL, OPT_LIST_COLUMNS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our messages name the subcommand and give the hint */
    optind = 1;
    o->interval_ns = INTERVAL_DEFAULT;
    columns_default(o->columns);
    bool interval_given = false;
    int c;
    while ((c = getopt_long(argc, argv, ":r:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (cli_region_option(optarg, &o->region) != 0)
                return FL__EXIT_USAGE;
            break;
        case OPT_JSON: o->json = true; break;
        case OPT_PREFIX: o->prefix = optarg; break;
        case OPT_WATCH:
            o->watch = true;
            if (optarg) {
                if (parse_interval(optarg, &o->interval_ns) != 0)
                    return bad_interval(optarg);
                interval_given = true;
            }
            break;
        case OPT_COUNT: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-' || v == 0 || v > UINT32_MAX)
                return fl__usage_error("--count: '%s' is not a number of refreshes (1 or "
                                       "more)",
                                       optarg);
            o->count = (unsigned long)v;
            break;
        }
        case 'o': {
            char why[160];
            if (columns_parse(o->columns, optarg, why, sizeof why) != 0)
                return fl__usage_error("--output: %s (see --list-columns)", why);
            if (!o->output)
                o->output = "--output";
            break;
        }
        case OPT_OUTPUT_ALL:
            columns_all(o->columns);
            if (!o->output)
                o->output = "--output-all";
            break;
        case OPT_LIST_COLUMNS:
            columns_describe(stdout);
            return cli_finish_stdout();
        case 'h':
            fputs(status_usage, stdout);
            return cli_finish_stdout();
        default: /* ':' or '?' */
            return fl__option_error(c, argv, longopts);
        }
    }
    if (o->watch) {
        /* --watch 1s: the word after it is its interval. */
        if (optind < argc && !interval_given) {
            if (parse_interval(argv[optind], &o->interval_ns) != 0)
                return bad_interval(argv[optind]);
            optind++;
        }
    } else if (optind < argc) {
        o->key = argv[optind++];
    }
    if (optind < argc)
        return fl__usage_error("unexpected argument '%s'", argv[optind]);
    if (o->count && !o->watch)
        return fl__usage_error("--count needs --watch");
    /* The columns are those of the tables; the JSON document has them all. */
    if (o->output && (o->json || o->watch || o->key))
        return fl__usage_error("%s chooses the columns of the tables: not with %s",
                               o->output, o->json ? "--json" : o->watch ? "--watch" : "KEY");
    if (o->key) {
        if (!o->key[0])
            return fl__usage_error("the key is empty");
        if (strlen(o->key) > FL_KEY_MAX)
            return fl__usage_error("the key is longer than %d bytes", FL_KEY_MAX);
        if (o->prefix)
            return fl__usage_error("give a KEY or --prefix, not both");
    }
    return -1;
}

int status_main(int argc, char **argv)
{
    struct status_options o;
    memset(&o, 0, sizeof o);
    int rc = parse_status_args(argc, argv, &o);
    if (rc >= 0)
        return rc;

    char path[PATH_MAX];
    if (o.region) {
        if (strlen(o.region) >= sizeof path) {
            fprintf(stderr, "fencelock: region path too long (%zu bytes)\n", strlen(o.region));
            return CLI_EXIT_REGION;
        }
        snprintf(path, sizeof path, "%s", o.region);
    } else {
        /* Resolved here, not inside fl_open_readonly, because it is shown. */
        int err = fl_default_region_path(path, sizeof path);
        if (err) {
            fprintf(stderr, "fencelock: %s\n", fl__library_error(err));
            return CLI_EXIT_REGION;
        }
    }
    if (o.watch) {
        struct watch_options w = {o.prefix, o.json, o.interval_ns, o.count};
        return watch_main(&w, path);
    }

    struct snapshot s;
    memset(&s, 0, sizeof s);
    rc = take_snapshot(path, &s);
    if (rc == CLI_EXIT_OK) {
        if (o.key) {
            rc = show_key(o.key, o.json, &s);
        } else {
            filter_prefix(&s, o.prefix);
            if (o.json)
                print_json(stdout, &s);
            else if (print_text(stdout, &s, o.columns) != 0)
                rc = out_of_memory("drawing the tables");
            if (rc == CLI_EXIT_OK)
                rc = cli_finish_stdout();
        }
    }
    free_snapshot(&s);
    return rc;
}
