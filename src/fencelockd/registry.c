/* SPDX-License-Identifier: MIT */
/*
 * registry.c - the supervisor's client registry and death reaping (I5).
 *
 * Each client process keeps one connection open for its life.  We learn its
 * pid and uid from the kernel (SO_PEERCRED, translated into our pid
 * namespace), give it a client table index, and watch two things: the
 * connection (closed by fl_close or by the kernel when the process exits)
 * and a pidfd of the process (exit is seen even if a forked child inherited
 * the connection).  Either event reaps the index: every lock it holds is
 * freed as released-by-death and its waiters are woken, its in-flight commit
 * buffers are released, and only then is the index reused.  After each
 * round of events in which clients went away, the sleepers of every key are
 * woken (fl__slots_wake_sleepers: one may have died between its release and
 * its wake).
 *
 * A clean fl_close sends a goodbye on the connection before it shuts it
 * down; only then is the client logged "closed".  An end of the connection
 * without one is a death ("died"), even while the dying process still shows
 * in /proc (the kernel closes its descriptors before it is gone).
 *
 * Clients beyond those the open-files limit has room for are refused with
 * -EMFILE (admit.c), as are those whose pidfd cannot be had for lack of
 * descriptors: a client registered without one would silently lose the
 * death detection of a forked child that inherited its connection.
 *
 * The client table in the region is written only through here (supervise.h:
 * fl__sup_client_attach, _adopt, _reap).  After a supervisor
 * restart (registry_adopt) the entries of clients that are still running are
 * kept and watched by pid; a pid whose start time changed belongs to another
 * process now, and its entry is reaped (the repair re-checks, as LMDB's
 * reader table does, because pids are reused).
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fencelockd.h"

#define MAX_PENDING REGISTRY_MAX_PENDING

struct client {
    int conn;   /* -1 when adopted (no connection) */
    int pidfd;  /* -1 when the kernel has no pidfd_open */
    bool used;
    uint32_t pid;       /* as registered: our own copy, for the log and */
    uint64_t client_id; /* the goodbye check (the region's is shared memory) */
};

struct registry {
    struct fl__shm *r;
    uint64_t dev, ino; /* the region file, told to each client in its reply */
    struct client *clients; /* by client table index; [0] unused */
    uint32_t capacity;
    int pending[MAX_PENDING]; /* accepted, hello not read yet */
    int npending;
    /* what each pollfd of the last registry_pollfds call stands for */
    struct tag { int kind; uint32_t index; } *tags;
    int ntags;
    bool wake_pending; /* sleepers to wake at the end of this round */
    uint32_t used;      /* clients registered or adopted */
    uint32_t fd_limit;  /* most clients the open-files limit has room for */
    uint64_t departures; /* clients reaped so far */
    uint64_t refused_full; /* registrations refused: client table full */
};

enum { TAG_PENDING, TAG_CONN, TAG_PIDFD };

static int pidfd_open_compat(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

int registry_new(struct fl__shm *r, struct registry **out)
{
    struct stat st;
    if (fstat(fl__sup_region_fd(r), &st) != 0) {
        int err = neg_errno();
        log_errorf("region_stat_failed", "cannot stat region %s: %s", fl_region_path(fl__sup_handle(r)),
                   strerror(-err));
        return err;
    }
    struct registry *g = calloc(1, sizeof *g);
    if (g) {
        g->capacity = fl__sup_client_capacity(r);
        g->clients = calloc(g->capacity, sizeof *g->clients);
        g->tags = calloc((size_t)registry_max_fds(g), sizeof *g->tags);
    }
    if (!g || !g->clients || !g->tags) {
        registry_free(g);
        log_error("out_of_memory", "cannot allocate the client registry");
        return -ENOMEM;
    }
    g->r = r;
    g->dev = (uint64_t)st.st_dev;
    g->ino = (uint64_t)st.st_ino;
    for (uint32_t i = 0; i < g->capacity; i++)
        g->clients[i].conn = g->clients[i].pidfd = -1;
    g->fd_limit = g->capacity;
    *out = g;
    return 0;
}

void registry_free(struct registry *g)
{
    if (!g)
        return;
    if (g->clients)
        for (uint32_t i = 0; i < g->capacity; i++) {
            if (g->clients[i].conn >= 0)
                close(g->clients[i].conn);
            if (g->clients[i].pidfd >= 0)
                close(g->clients[i].pidfd);
        }
    for (int i = 0; i < g->npending; i++)
        close(g->pending[i]);
    free(g->clients);
    free(g->tags);
    free(g);
}

int registry_max_fds(const struct registry *g) { return MAX_PENDING + 2 * (int)g->capacity; }

void registry_set_fd_limit(struct registry *g, uint32_t clients) { g->fd_limit = clients; }

uint64_t registry_departures(const struct registry *g) { return g->departures; }

struct reap_ctx {
    struct registry *g;
    uint32_t index, pid;
    uint64_t client_id;
    const char *reason;
};

static void log_freed(void *ctx, uint32_t slot, uint64_t token)
{
    struct reap_ctx *c = ctx;
    char key[FL_KEY_MAX + 1];
    (void)fl__sup_lock_key(c->g->r, slot, key); /* "" if unpublished */
    log_begin("info", "lock_released_by_death");
    log_str("key", key);
    log_u64("token", token);
    log_u64("client", c->index);
    log_u64("client_id", c->client_id);
    log_u64("pid", c->pid);
    log_str("reason", c->reason);
    log_end();
}

/* Free everything client i holds, then the index itself.  Its pid and id
 * are those we registered or adopted (g->clients[i]). */
static void reap(struct registry *g, uint32_t i, const char *reason)
{
    struct client *cl = &g->clients[i];
    struct reap_ctx c = {
        .g = g, .index = i, .pid = cl->pid, .client_id = cl->client_id, .reason = reason};
    struct fl__sup_reaped freed;
    fl__sup_client_reap(g->r, i, log_freed, &c, &freed);
    if (cl->conn >= 0)
        close(cl->conn);
    if (cl->pidfd >= 0)
        close(cl->pidfd);
    cl->conn = cl->pidfd = -1;
    if (cl->used)
        g->used--;
    cl->used = false;
    g->departures++;
    g->wake_pending = true;
    log_begin("info", "client_gone");
    log_u64("client", i);
    log_u64("client_id", c.client_id);
    log_u64("pid", c.pid);
    log_str("reason", reason);
    log_u64("locks_released", freed.locks);
    log_u64("buffers_released", freed.buffers);
    log_end();
}

/* After reaping, wake every key's sleepers, once per round of events: the
 * client may have died between a release and its wake-up call
 * (fl__slots_wake_sleepers says why and what it costs). */
static void wake_after_reaping(struct registry *g)
{
    if (!g->wake_pending)
        return;
    g->wake_pending = false;
    fl__slots_wake_sleepers(g->r);
}

void registry_adopt(struct registry *g)
{
    /* Wake every sleeper once at start: an earlier supervisor may have been
     * killed between a reap and its wake pass, or a client that was never
     * registered may have died between a release and its wake while none
     * ran; nothing in the region says so. */
    g->wake_pending = true;
    for (uint32_t i = 1; i < g->capacity; i++) {
        struct fl__sup_client e;
        if (!fl__sup_client_read(g->r, i, &e))
            continue;
        struct client *cl = &g->clients[i];
        cl->pid = e.pid;
        cl->client_id = e.client_id;
        if (!fl__sup_client_alive(g->r, i)) {
            reap(g, i, "gone_while_unsupervised");
            continue;
        }
        cl->used = true;
        g->used++;
        cl->pidfd = pidfd_open_compat((pid_t)e.pid);
        if (cl->pidfd < 0 && errno == ESRCH) {
            reap(g, i, "gone_while_unsupervised");
            continue;
        }
        /* Any other pidfd failure (an old kernel, no descriptor): the
         * client is watched by pid once a second instead (registry_tick). */
        fl__sup_client_adopt(g->r, i);
        log_begin("info", "client_adopted");
        log_u64("client", i);
        log_u64("client_id", e.client_id);
        log_u64("pid", e.pid);
        log_end();
    }
    wake_after_reaping(g);
}

void registry_accept(struct registry *g, int fd)
{
    if (g->npending == MAX_PENDING) {
        /* Connections that never say hello must not lock real clients out:
         * the oldest one goes. */
        log_begin("warn", "connection_dropped");
        log_str("message", "too many connections without a hello: dropped the oldest");
        log_end();
        close(g->pending[0]);
        memmove(g->pending, g->pending + 1, (MAX_PENDING - 1) * sizeof g->pending[0]);
        g->npending--;
    }
    g->pending[g->npending++] = fd;
}

/* Send a reply: 0, or -errno (the client is gone, or never reads: the
 * caller decides; nothing is logged for a refusal nobody hears). */
static int reply(int fd, const struct fl__reply *m)
{
    ssize_t n = send(fd, m, sizeof *m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == (ssize_t)sizeof *m)
        return 0;
    return n < 0 ? neg_errno() : -EMSGSIZE; /* SOCK_SEQPACKET: all or nothing */
}

void registry_refuse(int fd, int status)
{
    /* A refused client learns why if it still listens; one that does not
     * has nothing to learn (its fl_open fails on the closed connection). */
    (void)reply(fd, &(struct fl__reply){.magic = FL__REPLY_MAGIC, .status = status});
}

/* Refuse a client for lack of descriptors (counted and logged by admit.c). */
static void refuse_no_fds(int fd, pid_t pid)
{
    registry_refuse(fd, -EMFILE);
    close(fd);
    admit_refused(pid);
}

/* Read the hello of a pending connection; the fd is ours to keep or close. */
static void hello(struct registry *g, int fd)
{
    unsigned char buf[sizeof(struct fl__hello) + 1]; /* +1: a longer message is caught */
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        close(fd);
        return;
    }
    if (n < 0)
        return; /* spurious; keep waiting (cannot happen after POLLIN, harmless) */
    struct fl__hello h;
    char why[160];
    int err = fl__hello_parse(buf, (size_t)n, &h, why, sizeof why);
    if (err) {
        log_begin("warn", "bad_message");
        log_str("message", why);
        struct ucred peer;
        socklen_t plen = sizeof peer;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &plen) == 0)
            log_u64("pid", (uint64_t)peer.pid);
        log_end();
        registry_refuse(fd, err);
        close(fd);
        return;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
        log_error("bad_peer", "no peer credentials");
        close(fd);
        return;
    }
    uint32_t i = 1;
    while (i < g->capacity && g->clients[i].used)
        i++;
    if (i == g->capacity) {
        g->refused_full++;
        admit_count_refusal();
        log_begin("warn", "client_refused");
        log_u64("pid", (uint64_t)cred.pid);
        log_str("reason", "client table full");
        log_end();
        registry_refuse(fd, -EUSERS);
        close(fd);
        return;
    }
    if (g->used >= g->fd_limit) {
        refuse_no_fds(fd, cred.pid);
        return;
    }
    int pidfd = pidfd_open_compat(cred.pid);
    if (pidfd < 0 && errno == ESRCH) {
        close(fd); /* died right after saying hello */
        return;
    }
    if (pidfd < 0 && (errno == EMFILE || errno == ENFILE)) {
        refuse_no_fds(fd, cred.pid);
        return;
    }
    /* The entry records the start time, which tells this process from a
     * later one with its pid (an adopting supervisor reaps on a mismatch):
     * without a descriptor to read it, refuse rather than record a wrong one. */
    uint64_t id = 0;
    if (fl__sup_client_attach(g->r, i, cred.pid, cred.uid, &id) != 0) {
        if (pidfd >= 0)
            close(pidfd);
        refuse_no_fds(fd, cred.pid);
        return;
    }
    g->clients[i] = (struct client){
        .conn = fd, .pidfd = pidfd, .used = true, .pid = (uint32_t)cred.pid, .client_id = id};
    g->used++;
    err = reply(fd, &(struct fl__reply){.magic = FL__REPLY_MAGIC,
                                        .client = i,
                                        .client_id = id,
                                        .flags = FL__REPLY_TAKES_GOODBYE,
                                        .dev = g->dev,
                                        .ino = g->ino});
    if (err) {
        /* It hung up, or never reads: it cannot have its index, so it holds
         * nothing; the entry goes back at once. */
        log_begin("warn", "reply_failed");
        log_u64("client", i);
        log_u64("pid", (uint64_t)cred.pid);
        log_str("message", strerror(-err));
        log_end();
        reap(g, i, "died");
        return;
    }
    log_begin("info", "client_registered");
    log_u64("client", i);
    log_u64("client_id", id);
    log_u64("pid", (uint64_t)cred.pid);
    log_u64("uid", (uint64_t)cred.uid);
    log_end();
}

int registry_pollfds(struct registry *g, struct pollfd *fds, int max)
{
    int n = 0;
    for (int i = 0; i < g->npending && n < max; i++, n++) {
        fds[n] = (struct pollfd){.fd = g->pending[i], .events = POLLIN};
        g->tags[n] = (struct tag){TAG_PENDING, (uint32_t)i};
    }
    for (uint32_t i = 1; i < g->capacity; i++) {
        struct client *cl = &g->clients[i];
        if (!cl->used)
            continue;
        if (cl->conn >= 0 && n < max) {
            fds[n] = (struct pollfd){.fd = cl->conn, .events = POLLIN};
            g->tags[n++] = (struct tag){TAG_CONN, i};
        }
        if (cl->pidfd >= 0 && n < max) {
            fds[n] = (struct pollfd){.fd = cl->pidfd, .events = POLLIN};
            g->tags[n++] = (struct tag){TAG_PIDFD, i};
        }
    }
    g->ntags = n;
    return n;
}

/* Read what a registered client sent: a goodbye (true), or nothing yet, or
 * a bad message (logged, ignored); *eof tells whether the connection ended. */
static bool read_goodbye(struct registry *g, uint32_t i, bool *eof)
{
    struct client *cl = &g->clients[i];
    *eof = false;
    unsigned char buf[sizeof(struct fl__goodbye) + 1]; /* +1: a longer message is caught */
    ssize_t n = recv(cl->conn, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN)
        return false;
    if (n <= 0) {
        *eof = true;
        return false;
    }
    struct fl__goodbye m;
    char why[160];
    uint64_t id = cl->client_id;
    int err = fl__goodbye_parse(buf, (size_t)n, &m, why, sizeof why);
    if (err == 0 && m.client_id == id)
        return true;
    if (err == 0)
        snprintf(why, sizeof why, "goodbye for client id %llu from client id %llu",
                 (unsigned long long)m.client_id, (unsigned long long)id);
    log_begin("warn", "bad_message");
    log_str("message", why);
    log_u64("client", i);
    log_u64("pid", cl->pid);
    log_end();
    return false;
}

static void conn_event(struct registry *g, uint32_t i)
{
    bool eof;
    if (read_goodbye(g, i, &eof))
        reap(g, i, "closed"); /* its locks are already free: fl_close freed them */
    else if (eof)
        reap(g, i, "died"); /* no goodbye: it exited, or was killed */
}

void registry_handle(struct registry *g, const struct pollfd *fds, int n)
{
    if (n > g->ntags)
        n = g->ntags;
    /* Pending hellos first, compacting the pending list afterwards. */
    int keep[MAX_PENDING], nkeep = 0;
    bool handled[MAX_PENDING] = {false};
    for (int k = 0; k < n; k++) {
        if (g->tags[k].kind != TAG_PENDING || !fds[k].revents)
            continue;
        handled[g->tags[k].index] = true;
    }
    int pending[MAX_PENDING], np = g->npending;
    memcpy(pending, g->pending, sizeof pending);
    for (int i = 0; i < np; i++)
        if (!handled[i])
            keep[nkeep++] = pending[i];
    memcpy(g->pending, keep, sizeof keep);
    g->npending = nkeep;
    for (int i = 0; i < np; i++)
        if (handled[i])
            hello(g, pending[i]);

    for (int k = 0; k < n; k++) {
        if (!fds[k].revents || g->tags[k].kind == TAG_PENDING)
            continue;
        uint32_t i = g->tags[k].index;
        if (!g->clients[i].used)
            continue; /* reaped by an earlier event of this round */
        if (g->tags[k].kind == TAG_PIDFD) {
            /* It exited; a goodbye it sent first still makes it a close. */
            bool eof;
            bool bye = g->clients[i].conn >= 0 && read_goodbye(g, i, &eof);
            reap(g, i, bye ? "closed" : "died");
        }
        else if (fds[k].fd == g->clients[i].conn)
            conn_event(g, i);
    }
    wake_after_reaping(g);
}

void registry_tick(struct registry *g)
{
    /* Adopted clients without a pidfd (very old kernels) are polled by pid. */
    for (uint32_t i = 1; i < g->capacity; i++) {
        struct client *cl = &g->clients[i];
        if (cl->used && cl->conn < 0 && cl->pidfd < 0 && !fl__sup_client_alive(g->r, i))
            reap(g, i, "died");
    }
    wake_after_reaping(g);
}

uint64_t registry_refused_full(const struct registry *g) { return g->refused_full; }
