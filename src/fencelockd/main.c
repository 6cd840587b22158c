/* SPDX-License-Identifier: MIT */
/*
 * main.c - fencelockd, the supervisor: creates or adopts a region, serves
 * registrations on the socket beside it, and frees the locks of clients that
 * die (I5).  It is never on the clients' fast path: with it stopped, clients
 * keep acquiring and committing, and only death detection falls back to
 * lease expiry (I10).
 *
 * struct daemon is the running supervisor.  daemon_init takes it from the
 * command line to a ready region, one step after the other, and is where a
 * failed step becomes an exit status (enum fld_exit, fencelockd.h); the
 * step itself has logged why.  daemon_tick is one turn of the event loop.
 * daemon_stop undoes whatever init made, finished or not, with the clean
 * shutdown of a region it served, and returns the exit status.
 *
 * Readiness is the last step of init (I1): until then fl_open admits no
 * new client, so a start that fails anywhere leaves the region refusing
 * them, and nothing after it can fail.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/clocks.h"
#include "fencelockd.h"

/* How long a turn of the loop waits at most: how often client events reach
 * the log (clients never wake us: no system call on their side). */
#define TICK_POLL_MS 100

struct daemon {
    struct options o;
    char path[FL__PATH_SIZE];                                        /* the region */
    char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];     /* REGION.sock */
    char state_path[FL__PATH_SIZE];                                  /* the epoch's file */
    struct fl__shm *r;
    bool running;  /* run_state says RUNNING: stopping flushes and marks it clean */
    int sfd;       /* signalfd of SIGTERM, SIGINT, SIGHUP; -1 */
    int lfd;       /* the listening socket; -1 */
    struct registry *g;
    struct event_log *events;
    struct pollfd *fds; /* [0] signals, [1] listener, then the registry's */
    int max_fds;
    uint64_t last_flush, last_tick, last_metrics; /* fl__monotonic_ns */
    enum fld_exit status;
};

/* ---- the steps of daemon_init; each logs its own failure ---- */

/* The region, socket and state paths (before the log is open: stderr). */
static int resolve_paths(struct daemon *d)
{
    int err = fl__region_resolve_path(d->o.region, d->path, sizeof d->path);
    if (err) {
        fprintf(stderr, "fencelockd: %s\n", fl_last_error());
        return err;
    }
    err = fl__socket_path(d->path, d->sock_path, sizeof d->sock_path);
    if (err) {
        fprintf(stderr,
                "fencelockd: region path %s is too long: its socket %s.sock does not fit a "
                "Unix socket address (%zu bytes)\n",
                d->path, d->path, sizeof d->sock_path - 1);
        return err;
    }
    if (d->o.state) {
        int n = snprintf(d->state_path, sizeof d->state_path, "%s", d->o.state);
        if (n < 0 || (size_t)n >= sizeof d->state_path) {
            fprintf(stderr, "fencelockd: --state: path too long (%zu bytes)\n",
                    strlen(d->o.state));
            return -ENAMETOOLONG;
        }
    }
    return 0;
}

/* SIGTERM, SIGINT and SIGHUP come through a descriptor the loop polls;
 * SIGPIPE is ignored (a client that hangs up is not a reason to die). */
static int signals_open(struct daemon *d)
{
    const char *step = "ignore SIGPIPE";
    sigset_t sigs;
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        goto fail;
    step = "block SIGTERM, SIGINT and SIGHUP";
    if (sigemptyset(&sigs) != 0 || sigaddset(&sigs, SIGTERM) != 0 ||
        sigaddset(&sigs, SIGINT) != 0 || sigaddset(&sigs, SIGHUP) != 0 ||
        sigprocmask(SIG_BLOCK, &sigs, NULL) != 0)
        goto fail;
    step = "make a signal descriptor (signalfd)";
    d->sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    if (d->sfd < 0)
        goto fail;
    return 0;
fail:;
    int err = neg_errno();
    log_errorf("signals_failed", "cannot %s: %s; fencelockd could not stop cleanly on a signal",
               step, strerror(-err));
    return err;
}

/* Map the region, creating it (and its directory) if there is none. */
static int open_region(struct daemon *d)
{
    const struct options *o = &d->o;
    int err = fl__region_map(d->path, false, &d->r);
    if (err == -ENOENT) {
        /* A directory that cannot be made is logged; the creation below
         * then fails and says so too, with what it could not do. */
        (void)access_make_dir(d->path, o->gid, o->mode);
        err = fl__region_create_shared(d->path, &o->params, o->gid, o->mode);
        if (err && err != -EEXIST) {
            log_error("region_create_failed", fl_last_error());
            return err;
        }
        if (!err) {
            log_begin("info", "region_created");
            log_str("region", d->path);
            log_u64("locks", o->params.locks);
            log_u64("records", o->params.records);
            log_u64("record_size", o->params.record_size);
            log_u64("clients", o->params.clients);
            log_end();
        }
        err = fl__region_map(d->path, false, &d->r); /* ours, or one created meanwhile */
    }
    if (err == -EPERM)
        log_error("region_untrusted", fl_last_error());
    else if (err)
        log_error("region_invalid", fl_last_error());
    return err;
}

/* Refuse an existing region whose parameters differ from those given. */
static int check_params(const struct daemon *d)
{
    struct fl__params have;
    fl__region_params(d->r, &have);
    const struct fl__params *want = &d->o.params;
    static const char *names[] = {"locks", "records", "record-size", "clients", "spare-buffers"};
    uint32_t h[] = {have.locks, have.records, have.record_size, have.clients, have.spare_buffers};
    uint32_t w[] = {want->locks, want->records, want->record_size, want->clients,
                    want->spare_buffers};
    for (int i = 0; i < 5; i++)
        if (d->o.given[i] && h[i] != w[i]) {
            log_errorf("region_mismatch",
                       "region %s was created with --%s %u, not %u; drop the option to adopt it "
                       "as it is, or use another region path",
                       d->path, names[i], h[i], w[i]);
            return -EINVAL;
        }
    return 0;
}

/* --huge-pages: a log line either way; running on small pages is not a
 * failure. */
static void apply_huge_pages(const struct daemon *d)
{
    uint64_t huge = 0;
    char why[FL__PATH_MSG_SIZE];
    int err = fl__region_huge_pages(d->r, &huge, why, sizeof why);
    if (err) {
        log_begin("warn", "huge_pages_unavailable");
        log_str("region", d->path);
        log_str("message", why);
        log_end();
        return;
    }
    const void *base;
    size_t size;
    fl__sup_region_mapping(d->r, &base, &size);
    log_begin("info", "huge_pages");
    log_str("region", d->path);
    log_u64("bytes", huge);
    log_u64("region_bytes", size);
    if (why[0])
        log_str("message", why);
    log_end();
}

/* Take the region's serving lock: -EBUSY when another fencelockd has it. */
static int lock_region(struct daemon *d)
{
    int err = fl__region_lock_serve(d->r);
    if (err == -EBUSY)
        log_errorf("already_served", "region %s is already served by fencelockd pid %u", d->path,
                   fl__sup_supervisor_pid(d->r));
    else if (err)
        log_errorf("lock_failed", "cannot lock region %s: %s", d->path, strerror(-err));
    return err;
}

static void log_voided(void *ctx, uint32_t slot, uint64_t token)
{
    char key[FL_KEY_MAX + 1];
    (void)fl__sup_lock_key(ctx, slot, key); /* "" if unpublished */
    log_begin("info", "lease_voided");
    log_str("key", key);
    log_u64("token", token);
    log_end();
}

/* A region written during an earlier boot: every lease in it is void (I11),
 * every client in its table is gone, and so is every commit in flight
 * (fl__sup_adopt_boot).  Runs while the region is not ready. */
static int adopt_boot(struct fl__shm *r, struct fl__sup_boot *boot)
{
    int err = fl__sup_adopt_boot(r, log_voided, r, boot);
    if (err) {
        log_errorf("boot_id_unreadable",
                   "cannot read this boot's id (/proc/sys/kernel/random/boot_id): %s; whether "
                   "the region's leases are still valid cannot be known (I11)",
                   strerror(-err));
        return err;
    }
    if (boot->new_boot) {
        log_begin("info", "new_boot");
        log_str("previous_boot", boot->previous);
        log_str("boot", boot->now);
        log_u64("leases_voided", boot->leases_voided);
        log_u64("buffers_released", boot->buffers_released);
        log_end();
    }
    return 0;
}

static void log_unvouched(void *ctx, uint32_t record)
{
    char name[FL_KEY_MAX + 1];
    (void)fl__sup_record_key(ctx, record, name); /* "" if unpublished */
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
static void vouch_records(struct fl__shm *r)
{
    uint32_t n = fl__sup_vouch_records(r, log_unvouched, r);
    if (n) {
        log_begin("warn", "records_unvouched");
        log_u64("records", n);
        log_end();
    }
}

/* Write the mapping back to its file (a no-op on tmpfs). */
static int flush_region(struct fl__shm *r)
{
    int err = fl__sup_region_flush(r);
    if (err)
        log_errorf("flush_failed", "cannot write region %s back to its file (msync): %s",
                   fl_region_path(fl__sup_handle(r)), strerror(-err));
    return err;
}

static int listen_socket(struct daemon *d)
{
    /* We hold the region's lock: a socket file there is a dead supervisor's. */
    if (unlink(d->sock_path) != 0 && errno != ENOENT) {
        int err = neg_errno();
        log_errorf("socket_failed", "cannot remove the old socket %s: %s", d->sock_path,
                   strerror(-err));
        return err;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, d->sock_path, sizeof addr.sun_path); /* resolve_paths sized it */
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 128) != 0) {
        int err = neg_errno();
        log_errorf("socket_failed", "cannot listen on %s: %s", d->sock_path, strerror(-err));
        if (fd >= 0)
            close(fd);
        return err;
    }
    d->lfd = fd;
    /* A socket the region's group cannot reach is logged; the owner's
     * clients still register, the group's run unregistered (and say so). */
    (void)access_socket(d->sock_path, d->r);
    return 0;
}

static void log_start(const struct daemon *d)
{
    struct fl__params p;
    fl__region_params(d->r, &p);
    uint64_t floor = fl__sup_token_floor(d->r);
    log_begin("info", "start");
    log_str("region", d->path);
    log_u64("pid", (uint64_t)getpid());
    log_u64("locks", p.locks);
    log_u64("records", p.records);
    log_u64("record_size", p.record_size);
    log_u64("clients", p.clients);
    log_u64("open_files_limit", admit_fd_limit());
    log_u64("token_floor", floor);
    log_u64("epoch", FL_TOKEN_EPOCH(floor));
    log_str("state_file", d->state_path);
    log_end();
}

static bool failed(struct daemon *d, enum fld_exit status)
{
    d->status = status;
    return false;
}

/* From the command line to a ready region: true when it serves; false with
 * d->status the exit status (FLD_EXIT_OK after --help or --version).
 * Whatever it made, daemon_stop undoes. */
static bool daemon_init(struct daemon *d, int argc, char **argv)
{
    *d = (struct daemon){.sfd = -1, .lfd = -1, .status = FLD_EXIT_OK};
    if (options_parse(argc, argv, &d->o) != 0)
        return failed(d, FLD_EXIT_USAGE);
    if (d->o.done)
        return false;
    if (resolve_paths(d) != 0)
        return failed(d, FLD_EXIT_USAGE);
    if (log_open(d->o.log_path, d->o.syslog) != 0)
        return failed(d, FLD_EXIT_LOG);
    if (signals_open(d) != 0)
        return failed(d, FLD_EXIT_FAILURE);

    if (open_region(d) != 0)
        return failed(d, FLD_EXIT_REGION);
    /* Without the handler (logged), a region truncated under us kills us by
     * SIGBUS instead of a region_truncated line: serving goes on. */
    (void)sigbus_arm(d->r);
    if (check_params(d) != 0)
        return failed(d, FLD_EXIT_REGION);
    int err = lock_region(d);
    if (err)
        return failed(d, err == -EBUSY ? FLD_EXIT_BUSY : FLD_EXIT_REGION);
    if (d->o.huge_pages)
        apply_huge_pages(d);
    /* --group/--mode of an existing region: before any client is admitted. */
    if (d->o.access_given && access_apply(d->r, d->o.gid, d->o.mode) != 0)
        return failed(d, FLD_EXIT_REGION);
    /* Until the region is readied below, fl_open refuses new clients (I1):
     * none may take a token from a floor this start has not made durable. */
    fl__region_set_ready(d->r, 0);
    struct fl__sup_boot boot;
    if (adopt_boot(d->r, &boot) != 0)
        return failed(d, FLD_EXIT_REGION);
    if (!d->o.state && durable_default_path(d->path, d->state_path, sizeof d->state_path) != 0)
        return failed(d, FLD_EXIT_REGION);
    if (epoch_start(d->r, d->state_path, d->o.min_token) != 0)
        return failed(d, FLD_EXIT_REGION);
    d->running = true;
    vouch_records(d->r);

    if (registry_new(d->r, &d->g) != 0)
        return failed(d, FLD_EXIT_FAILURE);
    registry_adopt(d->g);
    /* Two descriptors per client: raise the open-files limit before the
     * first client can connect (admit.c). */
    registry_set_fd_limit(d->g, admit_raise_fd_limit(fl__sup_client_capacity(d->r) - 1,
                                                     REGISTRY_MAX_PENDING));
    if (event_log_new(d->r, &d->events) != 0)
        return failed(d, FLD_EXIT_FAILURE);
    d->max_fds = registry_max_fds(d->g) + 2;
    d->fds = calloc((size_t)d->max_fds, sizeof *d->fds);
    if (!d->fds) {
        log_error("out_of_memory", "cannot allocate the poll set");
        return failed(d, FLD_EXIT_FAILURE);
    }
    if (listen_socket(d) != 0)
        return failed(d, FLD_EXIT_FAILURE);
    /* Without a reserve (logged), running out of descriptors pauses the
     * listener instead of refusing clients at once. */
    (void)admit_init(d->r);

    fl__sup_set_supervisor_pid(d->r, (uint32_t)getpid());
    log_start(d);
    fl__region_set_ready(d->r, boot.tag); /* after all of the above */
    /* A failure is logged; systemd then counts the start as failed when
     * its timeout passes, and clients are served meanwhile. */
    (void)notify_systemd("READY=1");
    d->last_flush = d->last_tick = fl__monotonic_ns(NULL);
    return true;
}

/* A signal is waiting: true to go on (SIGHUP), false to stop. */
static bool on_signal(struct daemon *d)
{
    struct signalfd_siginfo si;
    ssize_t n = read(d->sfd, &si, sizeof si);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true; /* spurious: nothing to do */
    if (n != (ssize_t)sizeof si) {
        log_errorf("signals_failed", "cannot read the signal descriptor: %s",
                   n < 0 ? strerror(errno) : "short read");
        d->status = FLD_EXIT_FAILURE;
        return false;
    }
    if (si.ssi_signo == SIGHUP) {
        (void)log_reopen(); /* a failure is logged in the file kept open */
        return true;
    }
    (void)notify_systemd("STOPPING=1"); /* before the clean shutdown; logged if it fails */
    event_log_drain(d->events);
    log_begin("info", "stop");
    log_str("signal", strsignal((int)si.ssi_signo));
    log_end();
    d->status = FLD_EXIT_OK;
    return false;
}

/* One turn of the event loop: periodic work, then one poll and what it
 * reported.  True to go on; false with d->status set to stop. */
static bool daemon_tick(struct daemon *d)
{
    uint64_t now = fl__monotonic_ns(NULL);
    event_log_drain(d->events);
    /* Failures of the periodic work are logged, and tried again at the
     * next interval: none stops the supervisor. */
    if (d->o.metrics_file && now - d->last_metrics >= d->o.metrics_interval_ns) {
        d->last_metrics = now;
        (void)metrics_file_write(d->r, d->o.metrics_file);
    }
    if (now - d->last_tick >= FL__NS_PER_S) {
        d->last_tick = now;
        registry_tick(d->g);
        admit_tick(now);
        (void)epoch_check_counters(d->r, d->state_path); /* the floor stays until it works */
    }
    if (d->o.flush_interval_ns && now - d->last_flush >= d->o.flush_interval_ns) {
        d->last_flush = now;
        (void)flush_region(d->r);
    }
    d->fds[0] = (struct pollfd){.fd = d->sfd, .events = POLLIN};
    /* A negative fd is skipped by poll: out of descriptors with nothing to
     * refuse clients with, the listener waits (admit.c). */
    d->fds[1] = (struct pollfd){
        .fd = admit_listening(registry_departures(d->g), now) ? d->lfd : -1, .events = POLLIN};
    int n = registry_pollfds(d->g, d->fds + 2, d->max_fds - 2);
    int rc = poll(d->fds, (nfds_t)n + 2, notify_watchdog(TICK_POLL_MS)); /* WATCHDOG=1 when due */
    if (rc < 0 && errno != EINTR) {
        log_errorf("poll_failed", "poll: %s", strerror(errno));
        d->status = FLD_EXIT_FAILURE;
        return false;
    }
    if (rc <= 0)
        return true;
    if (d->fds[0].revents && !on_signal(d))
        return false;
    if (d->fds[1].revents)
        admit_accept(d->lfd, d->g); /* refuses at once when out of descriptors */
    registry_handle(d->g, d->fds + 2, n);
    return true;
}

/* Undo what daemon_init made, in reverse; a region it served is flushed
 * and marked clean.  Returns the exit status. */
static int daemon_stop(struct daemon *d)
{
    if (d->lfd >= 0) {
        close(d->lfd);
        if (unlink(d->sock_path) != 0 && errno != ENOENT)
            log_errorf("socket_failed", "cannot remove socket %s: %s", d->sock_path,
                       strerror(errno));
    }
    if (d->r && d->running) {
        fl__sup_set_supervisor_pid(d->r, 0); /* tools ask the lock whether we serve */
        /* Clean shutdown: everything on disk first, then say so; a flush
         * that failed (logged) leaves the region saying "unclean". */
        if (flush_region(d->r) == 0) {
            fl__sup_mark_clean(d->r, fl__wall_clock_ns());
            (void)flush_region(d->r);
        }
    }
    admit_free();
    free(d->fds);
    event_log_free(d->events);
    registry_free(d->g);
    sigbus_disarm();
    fl__region_unmap(d->r);
    if (d->sfd >= 0)
        close(d->sfd);
    log_close();
    return (int)d->status;
}

int main(int argc, char **argv)
{
    struct daemon d;
    if (daemon_init(&d, argc, argv))
        while (daemon_tick(&d)) {
        }
    return daemon_stop(&d);
}
