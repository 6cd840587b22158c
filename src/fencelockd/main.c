/* SPDX-License-Identifier: MIT */
/*
 * main.c - fencelockd, the supervisor: creates or adopts a region, serves
 * registrations on the socket beside it, and frees the locks of clients that
 * die (I5).  It is never on the clients' fast path: with it stopped, clients
 * keep acquiring and committing, and only death detection falls back to
 * lease expiry (I10).
 */
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "duration.h"
#include "fencelockd.h"

enum {
    EXIT_USAGE = 2,   /* bad command line */
    EXIT_REGION = 3,  /* the region cannot be created, is corrupt, or does not match */
    EXIT_BUSY = 4,    /* another fencelockd serves the region */
};

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
    "too (WatchdogSec=) it sends WATCHDOG=1 every half of that interval.\n"
    "\n"
    "Exit status: 0 stopped by a signal; 1 runtime error; 2 bad usage;\n"
    "3 region cannot be created, is corrupt, does not match the options, or was\n"
    "truncated, or its directory or file is controlled by another user; or the state file is corrupt or unwritable, the epoch space is\n"
    "spent, or this boot's id cannot be read;\n"
    "4 another fencelockd serves the region.\n";

struct options {
    const char *region;
    const char *state;
    uint64_t min_token;
    uint64_t flush_interval_ns; /* 0: only at a clean stop */
    const char *log_path;
    bool syslog;
    const char *metrics_file;
    uint64_t metrics_interval_ns;
    struct fl__params params;
    bool given[5];
    bool huge_pages;     /* --huge-pages */
    gid_t gid;           /* --group, (gid_t)-1 if not given */
    unsigned mode;       /* --mode of the region file and socket */
    bool access_given;   /* --group or --mode */
};

static int parse_u32(const char *name, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "fencelockd: --%s: '%s' is not a number in %u..%u\n", name, s, lo, hi);
        return -1;
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
        return -1;
    }
    if ((v != 0 || !zero_ok) && (v < INTERVAL_MIN_NS || v > INTERVAL_MAX_NS)) {
        fprintf(stderr, "fencelockd: --%s: '%s' is not a duration from 100ms to 24h%s\n", name,
                s, zero_ok ? " (or 0)" : "");
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
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
    o->flush_interval_ns = 30ull * FL__NS_PER_S;
    o->metrics_interval_ns = 15ull * FL__NS_PER_S;
    o->gid = (gid_t)-1;
    bool mode_given = false;
    o->params = (struct fl__params){FL__DEFAULT_LOCKS, FL__DEFAULT_RECORDS,
                                    FL__DEFAULT_RECORD_SIZE, FL__DEFAULT_CLIENTS,
                                    FL__DEFAULT_SPARE_BUFFERS};
    int c;
    while ((c = getopt_long(argc, argv, "r:hV", longopts, NULL)) != -1) {
        int err = 0;
        switch (c) {
        case 'r': o->region = optarg; break;
        case 'L': err = parse_u32("locks", optarg, 1, FL__MAX_LOCKS, &o->params.locks); o->given[0] = true; break;
        case 'R': err = parse_u32("records", optarg, 1, FL__MAX_RECORDS, &o->params.records); o->given[1] = true; break;
        case 'S': err = parse_u32("record-size", optarg, FL__MIN_RECORD_SIZE, FL__MAX_RECORD_SIZE, &o->params.record_size); o->given[2] = true; break;
        case 'C': err = parse_u32("clients", optarg, 1, FL__MAX_CLIENTS, &o->params.clients); o->given[3] = true; break;
        case 'B': err = parse_u32("spare-buffers", optarg, 1, 1u << 20, &o->params.spare_buffers); o->given[4] = true; break;
        case 'H': o->huge_pages = true; break;
        case 's': o->state = optarg; break;
        case 'm': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-' || v >= FL_TOKEN_MAX) {
                fprintf(stderr, "fencelockd: --min-token: '%s' is not a token below %llu\n",
                        optarg, (unsigned long long)FL_TOKEN_MAX);
                err = -1;
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
        case 'h': fputs(usage_text, stdout); exit(0);
        case 'V': printf("fencelockd %d.%d.%d\n", FL_VERSION_MAJOR, FL_VERSION_MINOR, FL_VERSION_PATCH); exit(0);
        default: fputs("Try 'fencelockd --help'.\n", stderr); return -1;
        }
        if (err)
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "fencelockd: unexpected argument '%s'\nTry 'fencelockd --help'.\n",
                argv[optind]);
        return -1;
    }
    if (!mode_given)
        o->mode = o->gid != (gid_t)-1 ? 0660 : 0600;
    return 0;
}

/* Refuse an existing region whose parameters differ from those given. */
static int check_params(const fl_region *r, const struct options *o)
{
    struct fl__params have;
    fl__region_params(r, &have);
    static const char *names[] = {"locks", "records", "record-size", "clients", "spare-buffers"};
    uint32_t h[] = {have.locks, have.records, have.record_size, have.clients, have.spare_buffers};
    uint32_t w[] = {o->params.locks, o->params.records, o->params.record_size, o->params.clients,
                    o->params.spare_buffers};
    for (int i = 0; i < 5; i++)
        if (o->given[i] && h[i] != w[i]) {
            char msg[FL__PATH_MSG_SIZE];
            snprintf(msg, sizeof msg,
                     "region %s was created with --%s %u, not %u; drop the option to adopt it "
                     "as it is, or use another region path",
                     r->path, names[i], h[i], w[i]);
            log_error("region_mismatch", msg);
            return -1;
        }
    return 0;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* display only, never for leases */
    return (uint64_t)ts.tv_sec * FL__NS_PER_S + (uint64_t)ts.tv_nsec;
}

static int open_region(const struct options *o, const char *path, fl_region **out)
{
    int err = fl__region_map(path, false, out);
    if (err == -ENOENT) {
        access_make_dir(path, o->gid, o->mode);
        err = fl__region_create_shared(path, &o->params, o->gid, o->mode);
        if (err && err != -EEXIST) {
            log_error("region_create_failed", fl_last_error());
            return err;
        }
        if (!err) {
            log_begin("info", "region_created");
            log_str("region", path);
            log_u64("locks", o->params.locks);
            log_u64("records", o->params.records);
            log_u64("record_size", o->params.record_size);
            log_u64("clients", o->params.clients);
            log_end();
        }
        err = fl__region_map(path, false, out);
    }
    if (err == -EPERM)
        log_error("region_untrusted", fl_last_error());
    else if (err)
        log_error("region_invalid", fl_last_error());
    return err;
}

static void log_voided(void *ctx, uint32_t slot, uint64_t token)
{
    fl_region *r = ctx;
    char key[FL_KEY_MAX + 1] = "";
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    fl__key_published(&t, slot, key);
    log_begin("info", "lease_voided");
    log_str("key", key);
    log_u64("token", token);
    log_end();
}

/* A region written during an earlier boot: every lease in it is void (I11),
 * every client in its table is gone, and so is every commit in flight.
 * now: this boot's id.  Runs while the region is not ready (no client of
 * this boot can have opened it). */
static void adopt_boot(fl_region *r, const char now[FL__BOOT_ID_SIZE])
{
    char had[FL__BOOT_ID_SIZE];
    memcpy(had, r->hdr->boot_id, sizeof had);
    had[39] = '\0';
    if (strcmp(now, had) == 0)
        return;
    uint32_t voided = fl__slots_void_all(r, log_voided, r);
    for (uint32_t i = 1; i < r->client_capacity; i++)
        atomic_store_explicit(&r->clients[i].state, FL__CLIENT_FREE, memory_order_relaxed);
    uint32_t buffers = fl__buffers_reap_all(r);
    memcpy(r->hdr->boot_id, now, FL__BOOT_ID_SIZE);
    log_begin("info", "new_boot");
    log_str("previous_boot", had);
    log_str("boot", now);
    log_u64("leases_voided", voided);
    log_u64("buffers_released", buffers);
    log_end();
}

static void log_unvouched(void *ctx, uint32_t record)
{
    fl_region *r = ctx;
    char name[FL_KEY_MAX + 1] = "";
    struct fl__keytab t;
    fl__keytab_records(r, &t);
    fl__key_published(&t, record, name);
    log_begin("error", "record_unvouched");
    log_str("record", name);
    log_str("message", "its value does not match the checksum its commit wrote (pages of a "
                       "region on disk reached it from different moments); reads answer "
                       "EBADMSG until it is committed again");
    log_end();
}

/* Check every record's value against its buffer sum (record.c); a region
 * on disk may come back from a host crash with pages of different moments.
 * Records that fail are marked, logged and counted, never served. */
static void vouch_records(fl_region *r)
{
    uint32_t n = fl__records_vouch(r, log_unvouched, r);
    /* relaxed: display only */
    atomic_store_explicit(&r->hdr->records_unvouched, n, memory_order_relaxed);
    if (n) {
        log_begin("warn", "records_unvouched");
        log_u64("records", n);
        log_end();
    }
}

/* --huge-pages: a log line either way; running on small pages is not a failure. */
static void apply_huge_pages(fl_region *r)
{
    uint64_t huge = 0;
    char why[FL__PATH_MSG_SIZE];
    int err = fl__region_huge_pages(r, &huge, why, sizeof why);
    if (err) {
        log_begin("warn", "huge_pages_unavailable");
        log_str("region", r->path);
        log_str("message", why);
        log_end();
        return;
    }
    log_begin("info", "huge_pages");
    log_str("region", r->path);
    log_u64("bytes", huge);
    log_u64("region_bytes", r->size);
    if (why[0])
        log_str("message", why);
    log_end();
}

/* Log what the last run left, then start a new epoch above every token that
 * may ever have been handed out (see epoch.c). */
static int start_epoch(fl_region *r, const struct options *o, const char *state_path)
{
    uint32_t run = atomic_load_explicit(&r->hdr->run_state, memory_order_relaxed);
    const char *found = run == FL__RUN_CLEAN     ? "clean_shutdown"
                        : run == FL__RUN_RUNNING ? "unclean_shutdown"
                                                 : "never_served";
    char err[FL__PATH_MSG_SIZE];
    uint64_t durable = 0;
    int rc = durable_load(state_path, &durable, err, sizeof err);
    if (rc == -ENOENT) {
        log_begin("warn", "no_durable_state");
        log_str("state_file", state_path);
        log_str("message", "no state file: starting above the tokens found in the region");
        log_end();
    } else if (rc) {
        log_error("state_invalid", err);
        return -1;
    }
    uint64_t in_region = epoch_in_region(r);
    uint64_t base = durable > in_region ? durable : in_region;
    if (FL_TOKEN_EPOCH(o->min_token) > base)
        base = FL_TOKEN_EPOCH(o->min_token);
    /* Never wrap (I1): the next epoch must exist. */
    if (base >= FL_EPOCH_MAX) {
        snprintf(err, sizeof err,
                 "token epoch space spent: the greatest epoch handed out is %llu (state "
                 "file %s: %llu, region: %llu), the last epoch is %llu; no token greater than "
                 "every earlier one can be made: create a new region for new keys",
                 (unsigned long long)base, state_path, (unsigned long long)durable,
                 (unsigned long long)in_region, (unsigned long long)FL_EPOCH_MAX);
        log_error("epoch_space_spent", err);
        return -1;
    }
    log_begin("info", "found");
    log_str("region", r->path);
    log_str("last_run", found);
    log_u64("durable_epoch", durable);
    log_u64("region_epoch", in_region);
    log_end();
    if (epoch_advance(r, state_path, base + 1, o->min_token + (o->min_token ? 1 : 0), err,
                      sizeof err) != 0) {
        log_error("epoch_not_durable", err);
        return -1;
    }
    atomic_store_explicit(&r->hdr->started_unix_ns, wall_ns(), memory_order_relaxed);
    atomic_store_explicit(&r->hdr->run_state, FL__RUN_RUNNING, memory_order_relaxed);
    return 0;
}

/* Write the mapping back to its file (a no-op on tmpfs). */
static void flush_region(fl_region *r)
{
    if (msync(r->base, r->size, MS_SYNC) != 0)
        log_error("flush_failed", strerror(errno));
}

static int listen_socket(const char *region_path, const fl_region *r)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (fl__socket_path(region_path, addr.sun_path, sizeof addr.sun_path) != 0) {
        log_error("socket_failed", "region path too long for a Unix socket path (108 bytes)");
        return -1;
    }
    /* We hold the region's lock: a socket file there is a dead supervisor's. */
    unlink(addr.sun_path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 128) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot listen on %s: %s", addr.sun_path, strerror(errno));
        log_error("socket_failed", msg);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    access_socket(addr.sun_path, r);
    return fd;
}

int main(int argc, char **argv)
{
    struct options o = {0};
    if (parse_args(argc, argv, &o) != 0)
        return EXIT_USAGE;
    char path[FL__PATH_SIZE];
    if (fl__region_resolve_path(o.region, path, sizeof path) != 0) {
        fprintf(stderr, "fencelockd: %s\n", fl_last_error());
        return EXIT_USAGE;
    }
    signal(SIGPIPE, SIG_IGN);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    if (log_open(o.log_path, o.syslog) != 0) {
        fprintf(stderr, "fencelockd: cannot open log %s: %s\n", o.log_path, strerror(errno));
        return EXIT_USAGE;
    }

    fl_region *r;
    if (open_region(&o, path, &r) != 0)
        return EXIT_REGION;
    sigbus_arm(r); /* a region truncated under us: a log line and exit 3, not a silent death */
    if (check_params(r, &o) != 0) {
        fl__region_unmap(r);
        return EXIT_REGION;
    }
    int lerr = fl__region_lock_serve(r);
    if (lerr) {
        char msg[FL__PATH_PLUS_SIZE];
        if (lerr == -EBUSY)
            snprintf(msg, sizeof msg, "region %s is already served by fencelockd pid %u", path,
                     atomic_load_explicit(&r->hdr->supervisor_pid, memory_order_relaxed));
        else
            snprintf(msg, sizeof msg, "cannot lock region %s: %s", path, strerror(-lerr));
        log_error(lerr == -EBUSY ? "already_served" : "lock_failed", msg);
        fl__region_unmap(r);
        return lerr == -EBUSY ? EXIT_BUSY : EXIT_REGION;
    }
    if (o.huge_pages)
        apply_huge_pages(r);
    /* --group/--mode of an existing region: before any client is admitted. */
    if (o.access_given && access_apply(r, o.gid, o.mode) != 0) {
        fl__region_unmap(r);
        return EXIT_REGION;
    }
    /* Until the region is readied below, fl_open refuses new clients (I1): none may
     * take a token from a floor this start has not made durable. */
    fl__region_set_ready(r, 0);
    char boot[FL__BOOT_ID_SIZE];
    int berr = fl__read_boot_id(boot);
    if (berr) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "cannot read this boot's id (/proc/sys/kernel/random/boot_id): %s; whether "
                 "the region's leases are still valid cannot be known (I11)",
                 strerror(-berr));
        log_error("boot_id_unreadable", msg);
        fl__region_unmap(r);
        return EXIT_REGION;
    }
    adopt_boot(r, boot);
    char state_path[FL__PATH_SIZE];
    if (o.state)
        snprintf(state_path, sizeof state_path, "%s", o.state);
    else if (durable_default_path(path, state_path, sizeof state_path) != 0) {
        log_error("no_state_path", "cannot choose a state file (no HOME); give --state PATH");
        return EXIT_REGION;
    }
    if (start_epoch(r, &o, state_path) != 0) {
        fl__region_unmap(r);
        return EXIT_REGION;
    }
    vouch_records(r);
    struct registry *g = registry_new(r);
    if (!g) {
        log_error("out_of_memory", "cannot allocate the client registry");
        return 1;
    }
    registry_adopt(g);
    /* Two descriptors per client: raise the open-files limit before the
     * first client can connect (admit.c). */
    registry_set_fd_limit(g, admit_raise_fd_limit(r->client_capacity - 1, REGISTRY_MAX_PENDING));
    int lfd = listen_socket(path, r);
    if (lfd < 0)
        return 1;
    admit_init(r);
    atomic_store_explicit(&r->hdr->supervisor_pid, (uint32_t)getpid(), memory_order_relaxed);

    struct fl__params p;
    fl__region_params(r, &p);
    log_begin("info", "start");
    log_str("region", path);
    log_u64("pid", (uint64_t)getpid());
    log_u64("locks", p.locks);
    log_u64("records", p.records);
    log_u64("record_size", p.record_size);
    log_u64("clients", p.clients);
    log_u64("open_files_limit", admit_fd_limit());
    log_u64("token_floor", atomic_load_explicit(&r->hdr->token_floor, memory_order_relaxed));
    log_u64("epoch", FL_TOKEN_EPOCH(atomic_load_explicit(&r->hdr->token_floor,
                                                         memory_order_relaxed)));
    log_str("state_file", state_path);
    log_end();
    fl__region_set_ready(r, fl__boot_tag(boot)); /* after all of the above */
    notify_systemd("READY=1");

    struct event_log *events = event_log_new(r);
    if (!events)
        return 1;
    int max = registry_max_fds(g) + 2;
    struct pollfd *fds = calloc((size_t)max, sizeof *fds);
    if (!fds)
        return 1;
    int status = 0;
    uint64_t last_flush = fl__monotonic_ns(NULL), last_tick = last_flush, last_metrics = 0;
    for (;;) {
        uint64_t now = fl__monotonic_ns(NULL);
        event_log_drain(events);
        if (o.metrics_file && now - last_metrics >= o.metrics_interval_ns) {
            last_metrics = now;
            int err = metrics_file_write(r, o.metrics_file);
            if (err) {
                char msg[FL__PATH_MSG_SIZE];
                snprintf(msg, sizeof msg, "cannot write %s: %s", o.metrics_file, strerror(-err));
                log_error("metrics_file_failed", msg);
            }
        }
        if (now - last_tick >= FL__NS_PER_S) {
            last_tick = now;
            registry_tick(g);
            admit_tick(now);
            char err[FL__PATH_MSG_SIZE];
            if (epoch_check_counters(r, state_path, err, sizeof err) != 0)
                log_error("epoch_not_durable", err);
        }
        if (o.flush_interval_ns && now - last_flush >= o.flush_interval_ns) {
            last_flush = now;
            flush_region(r);
        }
        fds[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
        /* A negative fd is skipped by poll: out of descriptors with nothing
         * to refuse clients with, the listener waits (admit.c). */
        fds[1] = (struct pollfd){
            .fd = admit_listening(registry_departures(g), now) ? lfd : -1, .events = POLLIN};
        int n = registry_pollfds(g, fds + 2, max - 2);
        /* 100 ms: how often client events reach the log (clients never wake us:
         * no system call on their side) */
        int rc = poll(fds, (nfds_t)n + 2, notify_watchdog(100)); /* WATCHDOG=1 when due */
        if (rc < 0 && errno != EINTR) {
            log_error("poll_failed", strerror(errno));
            status = 1;
            break;
        }
        if (rc <= 0)
            continue;
        if (fds[0].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si) {
                /* spurious: nothing to do */
            } else if (si.ssi_signo == SIGHUP) {
                if (log_reopen() != 0)
                    log_error("log_reopen_failed", strerror(errno));
            } else {
                notify_systemd("STOPPING=1"); /* before the clean shutdown below */
                event_log_drain(events);
                log_begin("info", "stop");
                log_str("signal", strsignal((int)si.ssi_signo));
                log_end();
                break;
            }
        }
        if (fds[1].revents)
            admit_accept(lfd, g); /* refuses at once when out of descriptors */
        registry_handle(g, fds + 2, n);
    }
    char sock[FL__PATH_PLUS_SIZE];
    if (fl__socket_path(path, sock, sizeof sock) == 0)
        unlink(sock);
    /* relaxed: display only (tools ask the region lock whether we still serve) */
    atomic_store_explicit(&r->hdr->supervisor_pid, 0, memory_order_relaxed);
    /* Clean shutdown: everything on disk first, then say so. */
    flush_region(r);
    atomic_store_explicit(&r->hdr->clean_unix_ns, wall_ns(), memory_order_relaxed);
    atomic_store_explicit(&r->hdr->run_state, FL__RUN_CLEAN, memory_order_relaxed);
    flush_region(r);
    close(lfd);
    admit_free();
    free(fds);
    event_log_free(events);
    registry_free(g);
    fl__region_unmap(r);
    return status;
}
