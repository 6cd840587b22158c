/* SPDX-License-Identifier: MIT */
/*
 * metrics_cmd.c - `fencelock metrics`: every counter of a region in the
 * Prometheus text exposition format, for node_exporter's textfile collector
 * (`fencelock metrics > DIR/fencelock.prom.tmp && mv ...`) or any scraper
 * that runs a command.  The writer is shared with fencelockd's
 * --metrics-file (src/common/metrics.c), so both give the same families.
 *
 * Like status, it opens the region read-only and without registering.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fencelock.h"
#include "guard.h"
#include "metrics.h"

const char metrics_usage[] =
    "Usage: fencelock metrics [-r PATH | --region PATH]\n"
    "\n"
    "Print every counter of a fencelock region in the Prometheus text exposition\n"
    "format (version 0.0.4): one HELP and one TYPE line per family, then its\n"
    "samples.  node_exporter's textfile collector reads it from a *.prom file;\n"
    "fencelockd --metrics-file PATH writes the same text to a file every\n"
    "--metrics-interval (15s by default), replacing it atomically.\n"
    "\n"
    "The region is opened read-only and without registering, with or without a\n"
    "running fencelockd; nothing changes.\n"
    "\n"
    "Options:\n"
    CLI_REGION_OPTION_TEXT
    "  -h, --help         show this help and exit\n"
    "\n"
    "Families (every name starts with fencelock_):\n"
    "  supervisor_up, epoch, token_floor, locks_used, lock_capacity,\n"
    "  records_used, record_capacity (gauges), events_dropped_total (counter):\n"
    "      the region\n"
    "  lock_acquisitions_total, lock_contended_total, lock_expiries_taken_total,\n"
    "  lock_deaths_total, lock_renewals_total, lock_renew_failed_total,\n"
    "  lock_releases_total, lock_release_failed_total, lock_busy_total,\n"
    "  lock_timeouts_total (counters), lock_held,\n"
    "  lock_waiters, lock_token (gauges): one sample per key, label key\n"
    "  record_commits_total, record_rejections_total, record_repeats_total\n"
    "  (counters), record_accepted_token, record_last_rejected_token,\n"
    "  record_version (gauges): one sample per record, labels record and key\n"
    "      (the key that fences it, empty if unbound)\n"
    "Label values are UTF-8 text: a key or name with each backslash doubled,\n"
    "and the text \\xNN for each byte that is not UTF-8 and each control byte\n"
    "but newline; then escaped as the format says (\\\\, \\\" and \\n).  So two\n"
    "keys never share a series: the byte 0xff is the value \\xff, the four\n"
    "characters \\xff are \\\\xff (written \\\\\\\\xff in the text).\n"
    "docs/signals.md says what each one means and what normal looks like.\n"
    "\n" CLI_ENVIRONMENT_TEXT "\n" CLI_EXIT_STATUS_TEXT
    "\n"
    "Examples:\n"
    "  fencelock metrics\n"
    "  fencelock metrics -r /run/myapp/locks > /var/lib/node_exporter/fencelock.prom.$$ &&\n"
    "      mv /var/lib/node_exporter/fencelock.prom.$$ /var/lib/node_exporter/fencelock.prom\n"
    "  fencelock metrics | grep '^fencelock_record_rejections_total'\n";

/* Returns -1 to go on, else the exit status (help shown, or bad usage). */
static int parse_metrics_args(int argc, char **argv, const char **region)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (cli_region_option(optarg, region) != 0)
                return FL__EXIT_USAGE;
            break;
        case 'h':
            fputs(metrics_usage, stdout);
            return cli_finish_stdout();
        default: /* ':' or '?' */
            return fl__option_error(c, argv, longopts);
        }
    }
    if (optind < argc)
        return fl__usage_error("unexpected argument '%s'", argv[optind]);
    return -1;
}

/* Open region (NULL: the default) and print its metrics; shown is its path
 * for messages. */
static int print_metrics(const char *region, const char *shown)
{
    /* volatile: read after the jump below (it changes after sigsetjmp) */
    fl_region *volatile r = NULL;
    /* A file truncated under us: SIGBUS on its lost pages (guard.h).  What
     * was printed before stays printed; the exit status says it is void. */
    if (sigsetjmp(cli_bus_env, 1) != 0) {
        fflush(stdout);
        if (r)
            fl_close(r); /* touches no page of the mapping */
        return cli_region_truncated(shown);
    }
    cli_bus_arm();
    fl_region *opened = NULL;
    int err = fl_open_readonly(region, &opened); /* NULL: $FENCELOCK_REGION, else the default */
    r = opened;
    if (err) {
        cli_bus_disarm();
        fprintf(stderr, "fencelock: %s\n", fl__library_error(err));
        return cli_open_status(err);
    }
    err = fl__metrics_write(stdout, r);
    cli_bus_disarm();
    fl_close(r);
    if (err) {
        fprintf(stderr, "fencelock: reading the region: %s\n", fl__library_error(err));
        return CLI_EXIT_RUNTIME;
    }
    return cli_finish_stdout();
}

int metrics_main(int argc, char **argv)
{
    const char *region = NULL;
    int rc = parse_metrics_args(argc, argv, &region);
    if (rc >= 0)
        return rc;
    if (region && strlen(region) >= PATH_MAX) {
        fprintf(stderr, "fencelock: region path too long (%zu bytes)\n", strlen(region));
        return CLI_EXIT_REGION;
    }
    char shown[PATH_MAX] = "the default region";
    if (region)
        snprintf(shown, sizeof shown, "%s", region);
    else
        fl_default_region_path(shown, sizeof shown); /* only for a message */
    return print_metrics(region, shown);
}
