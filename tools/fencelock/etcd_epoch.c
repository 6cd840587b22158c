/* SPDX-License-Identifier: MIT */
/*
 * etcd_epoch.c - `fencelock etcd-epoch`: show, or bump, the token epoch of
 * an etcd region (docs/etcd.md, "Restoring a snapshot").
 *
 * Tokens on etcd are epoch << 40 | revision.  A snapshot restore brings the
 * revision back; the operator bumps the epoch before clients resume, so that
 * every later token exceeds every earlier one.  The library does the work:
 * fl_etcd_epoch() (fencelock.h, the operator's entry point), whose
 * fl_last_error() this prints.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "fencelock.h"

const char etcd_epoch_usage[] =
    "Usage: fencelock etcd-epoch [OPTIONS]\n"
    "\n"
    "Show the token epoch of an etcd region, or bump it.  Tokens on etcd are\n"
    "EPOCH << 40 | REVISION, REVISION being etcd's.  Restoring an etcd snapshot\n"
    "(etcdctl snapshot restore) brings the revision back to the snapshot's, so\n"
    "tokens would repeat: after a restore, and before any client resumes, bump\n"
    "the epoch once.  Clients that were running across the restore refuse to\n"
    "hand out tokens (ENOTRECOVERABLE) until it is bumped.\n"
    "\n"
    "Options:\n"
    "  -r, --region URI   the etcd region, etcd://HOST:PORT[,HOST:PORT...]/PREFIX\n"
    "                     or etcds://[USER@]HOST:PORT.../PREFIX[?cacert=FILE&...]\n"
    "                     for TLS (default: $FENCELOCK_REGION)\n"
    "  -b, --bump         set the epoch to one more than the current one\n"
    "  -a, --at-least N   with --bump: to N if that is more.  Use it when the\n"
    "                     cluster was restored from the same snapshot before, or\n"
    "                     its epoch was bumped after the snapshot was taken: N\n"
    "                     must exceed every epoch ever used (as `fencelock\n"
    "                     etcd-epoch` printed them, or the highest token >> 40)\n"
    "  -h, --help         show this help and exit\n"
    "\n"
    "Prints \"epoch N\", or \"epoch N -> M\" after a bump.\n"
    "\n"
    "Environment:\n"
    "  FENCELOCK_REGION           the region when --region is not given\n"
    "  FENCELOCK_ETCD_TIMEOUT_MS  per-request timeout (default 2000)\n"
    "  FENCELOCK_ETCD_CACERT, FENCELOCK_ETCD_CERT, FENCELOCK_ETCD_KEY,\n"
    "  FENCELOCK_ETCD_USER, FENCELOCK_ETCD_PASSWORD_FILE, FENCELOCK_ETCD_PASSWORD\n"
    "                             TLS files and credentials the URI does not give\n"
    "\n"
    "Exit status:\n"
    "  0  the epoch was shown or bumped\n"
    "  1  runtime error: no endpoint answered, the outcome of the bump is\n"
    "     unknown (run it again without --bump to see), a bad answer, a\n"
    "     refusal (a certificate that does not verify, a wrong password, a\n"
    "     user without permission on the prefix)\n"
    "  2  bad usage: unknown option, extra argument, a bad N\n"
    "  3  the region is not an etcd URI, is malformed, names a file that\n"
    "     cannot be read, or this fencelock was built without etcd support\n";

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fencelock etcd-epoch: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'fencelock etcd-epoch --help'.\n", stderr);
    return CLI_EXIT_USAGE;
}

int etcd_epoch_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"bump", no_argument, NULL, 'b'},
        {"at-least", required_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *region = NULL;
    bool bump = false;
    uint64_t at_least = 0;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":r:ba:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            region = optarg;
            break;
        case 'b':
            bump = true;
            break;
        case 'a': {
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || !*optarg || *end || optarg[0] == '-' || v == 0)
                return usage_error("--at-least '%s': not an epoch (a positive number)", optarg);
            at_least = v;
            break;
        }
        case 'h':
            fputs(etcd_epoch_usage, stdout);
            return cli_finish_stdout();
        case ':':
            return usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (at_least && !bump)
        return usage_error("--at-least goes with --bump");
    if (!region || !*region)
        region = getenv(FL_REGION_ENV);
    if (!region || !*region)
        return usage_error("no region: give --region etcd://HOST:PORT/PREFIX or set %s",
                           FL_REGION_ENV);
    fl_etcd_epoch_result res;
    int err = fl_etcd_epoch(region, bump ? FL_ETCD_EPOCH_BUMP : 0, at_least, &res);
    if (err && !res.asked) { /* the region's own: its string, a file, no etcd support */
        fprintf(stderr, "fencelock etcd-epoch: %s\n", fl_last_error());
        return err == -ENOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_REGION;
    }
    if (err) {
        fprintf(stderr, "fencelock etcd-epoch: %s (%s)\n", fl_last_error(), fl_err_name(err));
        return CLI_EXIT_RUNTIME;
    }
    if (bump)
        printf("epoch %" PRIu64 " -> %" PRIu64 "\n", res.before, res.after);
    else
        printf("epoch %" PRIu64 "\n", res.before);
    return cli_finish_stdout();
}
