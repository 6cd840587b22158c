/* SPDX-License-Identifier: MIT */
/*
 * main.c - fl_chaos: the chaos harness of issue 8 (see chaos.h and
 * docs/chaos.md).  Runs a seeded fault-injection run against a private
 * fencelockd, then checks the logs; exits 0 only with zero violations.
 */
#include "chaos.h"
#include "duration.h"
#include "linz.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef FENCELOCKD_PATH
#define FENCELOCKD_PATH "fencelockd"
#endif

static const char usage[] =
    "Usage: fl_chaos [OPTIONS]\n"
    "       fl_chaos --check DIR\n"
    "       fl_chaos --check-history FILE\n"
    "\n"
    "Chaos run against a private fencelockd: N workers acquire keys, commit\n"
    "self-checking values and read records while the controller pauses\n"
    "(SIGSTOP/SIGCONT) and kills (SIGKILL) workers, kills and restarts the\n"
    "supervisor, and loads the machine with stress-ng.  Then every log is\n"
    "checked against the invariants I1-I8.  Exit status: 0 no violation,\n"
    "1 violations (the seed to replay is printed), 2 bad usage, 3 set-up failed.\n"
    "\n"
    "Options:\n"
    "  --duration D         run time: seconds (90, 0.5) or with a unit: 500ms,\n"
    "                       90s, 5m, 1h [60s]\n"
    "  --seed N             seed of every random choice [from the clock; printed]\n"
    "  --workers N          concurrent workers, 1..64 [6]\n"
    "  --keys N             keys, 1..32 [4]\n"
    "  --records-per-key N  records fenced by each key, 1..8 [2]\n"
    "  --lease-ms N         nominal lease; workers use N/2..2N [50]\n"
    "  --slack-ms N         scheduling slack of every timing bound [2000]\n"
    "  --pause-every-ms N   mean time between pauses, 0 = none [250]\n"
    "  --kill-every-ms N    mean time between worker kills, 0 = none [2000]\n"
    "  --restart-every-ms N mean time between supervisor kills, 0 = none [10000]\n"
    "  --down-max-ms N      longest supervisor down time [1500]\n"
    "  --stress LEVEL       none | light (stressors pinned to CPU 0) | full [light]\n"
    "  --no-stress          same as --stress none\n"
    "  --spare-buffers N    fencelockd --spare-buffers [64]\n"
    "  --dir DIR            run directory for logs, kept [a new /tmp/flchaos.XXXXXX,\n"
    "                       removed after a run without violations]\n"
    "  --keep               keep the run directory even without violations\n"
    "  --fencelockd PATH    the supervisor binary [" FENCELOCKD_PATH "]\n"
    "  --check DIR          only check the logs of an earlier run in DIR\n"
    "  --check-history FILE check a history of commits, reads and acquisitions\n"
    "                       for linearizability (linz.h: the format; written by\n"
    "                       the etcd fault test etcd_linz); exit 0 or 1\n"
    "  -h, --help           this help\n";

static int parse_num(const char *name, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "fl_chaos: --%s: '%s' is not a number in %ld..%ld\n", name, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static uint64_t clock_seed(void)
{
    uint64_t s = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, &s, sizeof s) != (ssize_t)sizeof s)
            s = 0;
        close(fd);
    }
    if (!s)
        s = ch_now() ^ ((uint64_t)getpid() << 32);
    return s % 1000000000000ull; /* short enough to type */
}

static void replay_hint(const struct ch_config *c)
{
    printf("seed: %" PRIu64 "\n", c->seed);
    printf("replay: tools/chaos --seed %" PRIu64 " --duration %.0fs --workers %d --keys %d "
           "--records-per-key %d --lease-ms %.0f --stress %s\n",
           c->seed, c->duration_ns / 1e9, c->workers, c->keys, c->rpk, c->lease_ns / 1e6,
           c->stress == CH_STRESS_FULL ? "full" : c->stress == CH_STRESS_LIGHT ? "light" : "none");
}

int main(int argc, char **argv)
{
    static struct ch_config c = {
        .duration_ns = 60 * CH_S,
        .workers = 6,
        .keys = 4,
        .rpk = 2,
        .lease_ns = 50 * CH_MS,
        .slack_ns = 2000 * CH_MS,
        .pause_mean_ns = 250 * CH_MS,
        .kill_mean_ns = 2000 * CH_MS,
        .dkill_mean_ns = 10000 * CH_MS,
        .ddown_max_ns = 1500 * CH_MS,
        .stress = CH_STRESS_LIGHT,
        .spare_buffers = 64,
        .record_size = 1024,
    };
    snprintf(c.fencelockd, sizeof c.fencelockd, "%s", FENCELOCKD_PATH);
    const char *check_dir = NULL, *check_history = NULL;
    bool have_seed = false;
    enum { O_DUR = 256, O_SEED, O_WORKERS, O_KEYS, O_RPK, O_LEASE, O_SLACK, O_PAUSE, O_KILL,
           O_RESTART, O_DOWN, O_STRESS, O_NOSTRESS, O_SPARE, O_DIR, O_KEEP, O_DAEMON, O_CHECK,
           O_CHECK_HISTORY };
    static const struct option opts[] = {
        {"duration", required_argument, NULL, O_DUR},
        {"seed", required_argument, NULL, O_SEED},
        {"workers", required_argument, NULL, O_WORKERS},
        {"keys", required_argument, NULL, O_KEYS},
        {"records-per-key", required_argument, NULL, O_RPK},
        {"lease-ms", required_argument, NULL, O_LEASE},
        {"slack-ms", required_argument, NULL, O_SLACK},
        {"pause-every-ms", required_argument, NULL, O_PAUSE},
        {"kill-every-ms", required_argument, NULL, O_KILL},
        {"restart-every-ms", required_argument, NULL, O_RESTART},
        {"down-max-ms", required_argument, NULL, O_DOWN},
        {"stress", required_argument, NULL, O_STRESS},
        {"no-stress", no_argument, NULL, O_NOSTRESS},
        {"spare-buffers", required_argument, NULL, O_SPARE},
        {"dir", required_argument, NULL, O_DIR},
        {"keep", no_argument, NULL, O_KEEP},
        {"fencelockd", required_argument, NULL, O_DAEMON},
        {"check", required_argument, NULL, O_CHECK},
        {"check-history", required_argument, NULL, O_CHECK_HISTORY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    long v;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case O_DUR:
            {
                /* The one duration grammar of every program (src/common/duration.c). */
                const char *why;
                if (cli_parse_duration(optarg, &c.duration_ns, &why) != 0) {
                    fprintf(stderr, "fl_chaos: --duration: '%s': %s\n", optarg, why);
                    return 2;
                }
            }
            break;
        case O_SEED: {
            char *end;
            errno = 0;
            c.seed = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end) {
                fprintf(stderr, "fl_chaos: --seed: '%s' is not a number\n", optarg);
                return 2;
            }
            have_seed = true;
            break;
        }
#define NUM(name, lo, hi, dst, mul) \
    if (parse_num(name, optarg, lo, hi, &v) != 0) \
        return 2; \
    dst = (__typeof__(dst))v * (mul); \
    break;
        case O_WORKERS: NUM("workers", 1, CH_MAX_WORKERS, c.workers, 1)
        case O_KEYS: NUM("keys", 1, CH_MAX_KEYS, c.keys, 1)
        case O_RPK: NUM("records-per-key", 1, CH_MAX_RPK, c.rpk, 1)
        case O_LEASE: NUM("lease-ms", 2, 60000, c.lease_ns, CH_MS)
        case O_SLACK: NUM("slack-ms", 1, 600000, c.slack_ns, CH_MS)
        case O_PAUSE: NUM("pause-every-ms", 0, 3600000, c.pause_mean_ns, CH_MS)
        case O_KILL: NUM("kill-every-ms", 0, 3600000, c.kill_mean_ns, CH_MS)
        case O_RESTART: NUM("restart-every-ms", 0, 3600000, c.dkill_mean_ns, CH_MS)
        case O_DOWN: NUM("down-max-ms", 0, 600000, c.ddown_max_ns, CH_MS)
        case O_SPARE: NUM("spare-buffers", 1, 1 << 20, c.spare_buffers, 1)
#undef NUM
        case O_STRESS:
            if (!strcmp(optarg, "none"))
                c.stress = CH_STRESS_NONE;
            else if (!strcmp(optarg, "light"))
                c.stress = CH_STRESS_LIGHT;
            else if (!strcmp(optarg, "full"))
                c.stress = CH_STRESS_FULL;
            else {
                fprintf(stderr, "fl_chaos: --stress: none, light or full\n");
                return 2;
            }
            break;
        case O_NOSTRESS: c.stress = CH_STRESS_NONE; break;
        case O_DIR: snprintf(c.dir, sizeof c.dir, "%s", optarg); c.keep = true; break;
        case O_KEEP: c.keep = true; break;
        case O_DAEMON: snprintf(c.fencelockd, sizeof c.fencelockd, "%s", optarg); break;
        case O_CHECK: check_dir = optarg; break;
        case O_CHECK_HISTORY: check_history = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "fl_chaos: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (check_history) {
        lz_history *h = lz_new();
        if (lz_load(h, check_history) != 0) {
            fprintf(stderr, "fl_chaos: %s: cannot read it\n", check_history);
            lz_free(h);
            return 3;
        }
        long v = lz_check(h, stdout, 0);
        lz_free(h);
        return v ? 1 : 0;
    }
    if (check_dir) {
        if (ch_config_read(&c, check_dir) != 0) {
            fprintf(stderr, "fl_chaos: %s/config: cannot read it\n", check_dir);
            return 3;
        }
        long viol = ch_check(&c);
        if (viol != 0)
            replay_hint(&c);
        return viol == 0 ? 0 : viol < 0 ? 3 : 1;
    }

    if (!have_seed)
        c.seed = clock_seed();
    if (!c.dir[0]) {
        snprintf(c.dir, sizeof c.dir, "/tmp/flchaos.XXXXXX");
        if (!mkdtemp(c.dir)) {
            perror("fl_chaos: mkdtemp");
            return 3;
        }
    } else if (mkdir(c.dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fl_chaos: %s: %s\n", c.dir, strerror(errno));
        return 3;
    }
    /* The region on tmpfs, as recommended (lock words stay in memory). */
    char shm[] = "/dev/shm/flchaos.XXXXXX";
    if (!mkdtemp(shm)) {
        perror("fl_chaos: mkdtemp /dev/shm");
        return 3;
    }
    snprintf(c.region, sizeof c.region, "%s/region", shm);

    printf("seed: %" PRIu64 "\n", c.seed);
    printf("chaos: %.0f s, %d workers, %d keys x %d records, lease %.0f ms, stress %s, dir %s\n",
           c.duration_ns / 1e9, c.workers, c.keys, c.rpk, c.lease_ns / 1e6,
           c.stress == CH_STRESS_FULL ? "full" : c.stress == CH_STRESS_LIGHT ? "light" : "none",
           c.dir);
    int rc = ch_controller(&c);
    /* The region is not needed for checking: the final phase read it. */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", shm);
    if (system(cmd) != 0) { /* best effort */
    }
    long viol = ch_check(&c);
    if (rc != 0 && viol == 0)
        viol = 1;
    if (viol != 0) {
        printf("FAILED: %ld violation(s); logs kept in %s (violations.txt lists them all)\n",
               viol < 0 ? 0 : viol, c.dir);
        replay_hint(&c);
        return viol < 0 ? 3 : 1;
    }
    printf("OK: no violations; seed: %" PRIu64 "\n", c.seed);
    if (!c.keep) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", c.dir);
        if (system(cmd) != 0) { /* best effort */
        }
    } else {
        printf("logs kept in %s\n", c.dir);
    }
    return 0;
}
