/* SPDX-License-Identifier: MIT */
/*
 * client.c - registration with the supervisor.
 *
 * A client connects to the Unix socket beside the region (PATH.sock), says
 * hello, and keeps the connection open for its life.  The supervisor learns
 * the peer's credentials from the kernel (SO_PEERCRED), assigns a client
 * table index and id, and when the connection closes or the process exits
 * it frees every lock that index still holds (I5).  A clean fl_close says
 * goodbye first (fl__client_goodbye), so the supervisor's log tells a close
 * ("closed") from a death ("died") without guessing from /proc.  The connection is the
 * only system-call path of the library besides futex waits and wakes (and
 * the timer-slack prctl calls of a timed wait, wait.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "shm.h"

/* How long fl_open waits for a supervisor's answer before it opens the
 * region unregistered (a stopped supervisor must not stop its clients). */
#define FL__REGISTER_TIMEOUT_MS 2000

int fl__socket_path(const char *region_path, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s.sock", region_path);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    return 0;
}

int fl__client_register(struct fl__shm *r)
{
    r->goodbye = false;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (fl__socket_path(r->h.path, addr.sun_path, sizeof addr.sun_path) != 0)
        return fl__fail(-ENAMETOOLONG, "socket path for %s exceeds %zu bytes", r->h.path,
                        sizeof addr.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fl__fail(fl__neg_errno(), "socket: %s", strerror(errno));
    struct timeval tv = {.tv_sec = FL__REGISTER_TIMEOUT_MS / 1000,
                         .tv_usec = (suseconds_t)(FL__REGISTER_TIMEOUT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int err;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        err = fl__fail(fl__neg_errno(), "no supervisor at %s: %s", addr.sun_path, strerror(errno));
        goto fail;
    }
    struct fl__hello hello = {.magic = FL__HELLO_MAGIC, .version = FL__PROTO_VERSION,
                              .pid = r->h.pid};
    /* A supervisor out of descriptors may answer (a refusal) and hang up
     * before it reads the hello: then the send fails but the reply is there
     * to read, and the first recv may report the hang-up (ECONNRESET)
     * before it. */
    /* EINTR: a signal with a handler (the socket's timeouts make these calls
     * not restartable even under SA_RESTART) must not turn a registered open
     * into an unregistered one; each retry waits at most the timeout again. */
    ssize_t w;
    do
        w = send(fd, &hello, sizeof hello, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    bool sent = w == (ssize_t)sizeof hello;
    unsigned char buf[sizeof(struct fl__reply) + 1]; /* +1: a longer message is caught */
    ssize_t n;
    do
        n = recv(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == ECONNRESET)
        n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    struct fl__reply reply;
    char why[160];
    if (!sent && n <= 0) {
        err = fl__fail(-ECONNREFUSED, "supervisor at %s did not take our hello", addr.sun_path);
        goto fail;
    }
    if (n < 0) {
        err = fl__fail(-ECONNREFUSED, "supervisor at %s did not answer: %s", addr.sun_path,
                       strerror(errno));
        goto fail;
    }
    if (fl__reply_parse(buf, (size_t)n, r->client_capacity, &reply, why, sizeof why) != 0) {
        err = fl__fail(-ECONNREFUSED, "supervisor at %s: malformed reply: %s", addr.sun_path,
                       why);
        goto fail;
    }
    if (reply.status == -EMFILE || reply.status == -ENFILE) {
        /* The supervisor's resources, not ours: -EMFILE would send the caller
         * looking for a leak in its own process. */
        err = fl__fail(-EUSERS,
                       "the supervisor at %s refused registration: it is out of file "
                       "descriptors (raise its LimitNOFILE= / ulimit -n, or lower its "
                       "--clients)",
                       addr.sun_path);
        goto fail;
    }
    if (reply.status == -EUSERS) {
        err = fl__fail(-EUSERS,
                       "the supervisor at %s refused registration: its client table is "
                       "full (fencelockd --clients)",
                       addr.sun_path);
        goto fail;
    }
    if (reply.status != 0) {
        err = reply.status;
        fl__set_error("supervisor at %s refused registration: %s", addr.sun_path,
                 fl_strerror(err));
        goto fail;
    }
    struct stat st;
    if (fstat(r->fd, &st) != 0 || st.st_dev != reply.dev || st.st_ino != reply.ino) {
        err = fl__fail(-ENXIO,
                       "region %s: the supervisor serves another file under this name "
                       "(was the region replaced?)",
                       r->h.path);
        goto fail;
    }
    r->sock = fd;
    r->client = reply.client;
    r->client_id = reply.client_id;
    r->goodbye = (reply.flags & FL__REPLY_TAKES_GOODBYE) != 0;
    return 0;
fail:
    close(fd);
    return err;
}

void fl__client_goodbye(struct fl__shm *r)
{
    if (!r || r->sock < 0 || !r->goodbye)
        return;
    r->goodbye = false;
    struct fl__goodbye m = {.magic = FL__GOODBYE_MAGIC, .client_id = r->client_id};
    /* Best effort: if it is not delivered (the supervisor is gone, or its
     * socket buffer is full), the supervisor logs a death where there was a
     * close; nothing is held any more either way. */
    send(r->sock, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
}
