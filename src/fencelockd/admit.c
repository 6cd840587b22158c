/* SPDX-License-Identifier: MIT */
/*
 * admit.c - file descriptors: the open-files limit fencelockd needs, and
 * the accept path when they run out (I5, I7, I12).
 *
 * Every registered client costs two descriptors (its connection and a pidfd
 * of its process), every connection that has not said hello yet one.  At
 * start fencelockd raises its soft RLIMIT_NOFILE to what --clients needs, up
 * to the hard limit, and says so in the log when the hard limit is too low
 * (with how many clients fit); the registry then refuses clients beyond
 * those that fit, keeping a few descriptors for the supervisor's own work
 * (the durable state file, the metrics file, log reopening).
 *
 * Descriptors can still run out (connections that never say hello, or a
 * system-wide shortage).  accept() then fails with EMFILE and leaves the
 * connection in the backlog: the listening socket stays readable, and a
 * loop that only retries spins a core forever while every client waits out
 * its registration timeout and runs unregistered.  So a reserve descriptor
 * (/dev/null) is kept open: on EMFILE or ENFILE it is closed, the
 * connection is accepted, answered at once with the refusal -EMFILE (the
 * client's fl_open fails with -EUSERS and a message naming the cause), and
 * closed, and the reserve is reopened.  If the reserve cannot be had back,
 * the listener is not polled until a client leaves, or for a second.
 * Refusals are counted and logged at most once a second.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fencelockd.h"

/* Descriptors kept for the supervisor's own work beyond those open at start:
 * the state file and its directory (epoch advance), the metrics file, a
 * reopened log, /proc reads, syslog. */
#define FD_SPARE 16

static struct {
    int reserve;               /* /dev/null, given up to accept a refusal; -1 when lost */
    bool paused;               /* the listener is not polled (no reserve to refuse with) */
    uint64_t paused_ns, departures_at_pause;
    uint64_t refused_total;    /* registrations refused for lack of descriptors */
    uint64_t refused_unlogged; /* of which not in the log yet */
    uint64_t last_log_ns;
    int64_t last_pid;          /* of the last refused client, -1 when unknown */
    uint64_t limit;            /* the soft RLIMIT_NOFILE in force */
    struct fl__shm *region;         /* where refusals are counted for the status tool */
} A = {.reserve = -1, .last_pid = -1};

/* Descriptors open now (the directory stream's own excluded). */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 16; /* no /proc: a generous guess */
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n > 0 ? n - 1 : 0;
}

uint32_t admit_raise_fd_limit(uint32_t clients, int pending)
{
    /* What is open now, plus the listening socket and the reserve. */
    uint64_t base = (uint64_t)open_fds() + 2 + FD_SPARE;
    uint64_t need = base + (uint64_t)pending + 2ull * clients;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        log_error("fd_limit_unknown", strerror(errno));
        return clients;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit want = rl;
        want.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl = want;
        else
            log_error("fd_limit_failed", strerror(errno));
    }
    A.limit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
    if (A.limit >= need)
        return clients;
    /* Pending connections are transient and refused at accept when
     * descriptors run out: the clients that fit are counted without them. */
    uint64_t fit = A.limit > base ? (A.limit - base) / 2 : 0;
    if (fit > clients)
        fit = clients;
    char msg[400];
    snprintf(msg, sizeof msg,
             "the hard limit of open files (RLIMIT_NOFILE) is %llu, below the %llu that "
             "--clients needs; %llu clients fit, the others are refused: raise LimitNOFILE= "
             "(systemd) or ulimit -Hn, or lower --clients",
             (unsigned long long)A.limit, (unsigned long long)need, (unsigned long long)fit);
    log_begin("warn", "fd_limit_low");
    log_u64("open_files_limit", A.limit);
    log_u64("open_files_needed", need);
    log_u64("clients", clients);
    log_u64("clients_fit", fit);
    log_str("message", msg);
    log_end();
    return (uint32_t)fit;
}

uint64_t admit_fd_limit(void) { return A.limit; }

/* Take the reserve back if it is not held: 0, or -errno (then the accept
 * path pauses the listener instead: see above). */
static int reserve_take(void)
{
    if (A.reserve < 0)
        A.reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return A.reserve >= 0 ? 0 : neg_errno();
}

int admit_init(struct fl__shm *r)
{
    A.region = r;
    int err = reserve_take();
    if (err) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "cannot open the reserve descriptor (/dev/null): %s; when descriptors run "
                 "out, new clients wait instead of being refused at once",
                 strerror(-err));
        log_begin("warn", "fd_reserve_failed");
        log_str("message", msg);
        log_end();
    }
    return err;
}

void admit_count_refusal(void)
{
    if (A.region)
        fl__sup_count_refusal(A.region);
}

void admit_free(void)
{
    if (A.reserve >= 0)
        close(A.reserve);
    A.reserve = -1;
}

static void log_refusals(uint64_t now)
{
    if (!A.refused_unlogged)
        return;
    char msg[200];
    snprintf(msg, sizeof msg,
             "out of file descriptors (limit %llu): raise LimitNOFILE= (systemd) or ulimit -n, "
             "or lower --clients",
             (unsigned long long)A.limit);
    log_begin("warn", "client_refused");
    if (A.last_pid >= 0)
        log_u64("pid", (uint64_t)A.last_pid);
    log_str("reason", "out of file descriptors");
    log_u64("refused", A.refused_unlogged);
    log_u64("refused_total", A.refused_total);
    log_str("message", msg);
    log_end();
    A.refused_unlogged = 0;
    A.last_log_ns = now;
}

void admit_refused(pid_t pid)
{
    admit_count_refusal();
    A.refused_total++;
    A.refused_unlogged++;
    A.last_pid = pid > 0 ? pid : -1;
    uint64_t now = fl__monotonic_ns(NULL);
    /* At most one line a second; admit_tick writes what is left over. */
    if (A.last_log_ns == 0 || now - A.last_log_ns >= FL__NS_PER_S)
        log_refusals(now);
}

void admit_tick(uint64_t now)
{
    if (now - A.last_log_ns >= FL__NS_PER_S)
        log_refusals(now);
}

uint64_t admit_refused_total(void) { return A.refused_total; }

bool admit_listening(uint64_t departures, uint64_t now)
{
    if (!A.paused)
        return true;
    /* A client that left gave back its descriptors; a second is the bound
     * for any other way they come back (closed pending connections, another
     * process's exit under ENFILE). */
    if (departures != A.departures_at_pause || now - A.paused_ns >= FL__NS_PER_S) {
        A.paused = false;
        (void)reserve_take(); /* without it, the next shortage pauses us again */
    }
    return !A.paused;
}

/* Accept one connection with the reserve's descriptor and refuse it at once.
 * accept() fails with EMFILE before it looks at the backlog, so an empty
 * backlog is only seen here. */
enum refusal { REFUSED, BACKLOG_EMPTY, NO_RESERVE };
static enum refusal refuse_one(int lfd)
{
    if (A.reserve < 0)
        return NO_RESERVE;
    close(A.reserve);
    A.reserve = -1;
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    int accept_errno = errno;
    if (fd >= 0) {
        struct ucred cred;
        socklen_t len = sizeof cred;
        pid_t pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
        /* Read the hello if it is there: a socket closed with unread data
         * makes the client's first recv fail with ECONNRESET instead of
         * returning our reply (the client retries once, client.c).  One not
         * sent yet is refused all the same: the client's send then fails,
         * and it reads the reply. */
        char hello[sizeof(struct fl__hello) + 1];
        while (recv(fd, hello, sizeof hello, MSG_DONTWAIT) > 0) {
        }
        registry_refuse(fd, -EMFILE);
        close(fd);
        admit_refused(pid);
    }
    if (reserve_take() != 0)
        return NO_RESERVE;
    if (fd < 0 && (accept_errno == EAGAIN || accept_errno == EWOULDBLOCK))
        return BACKLOG_EMPTY;
    return REFUSED; /* or ECONNABORTED and the like: try the next one */
}

void admit_accept(int lfd, struct registry *g)
{
    for (;;) {
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd >= 0) {
            registry_accept(g, cfd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            enum refusal how = errno == EMFILE || errno == ENFILE ? refuse_one(lfd) : NO_RESERVE;
            if (how == REFUSED)
                continue;
            if (how == BACKLOG_EMPTY)
                return;
            /* Nothing to refuse with: stop polling the listener (poll would
             * report it readable at once, forever). */
            A.paused = true;
            A.paused_ns = fl__monotonic_ns(NULL);
            A.departures_at_pause = registry_departures(g);
        }
        return; /* EAGAIN: the backlog is empty */
    }
}
