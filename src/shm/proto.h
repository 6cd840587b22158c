/* SPDX-License-Identifier: MIT */
/*
 * proto.h - the registration protocol between a client (client.c) and its
 * supervisor (fencelockd's registry.c): fixed-size messages on the
 * SOCK_SEQPACKET socket REGION.sock, and their parsers (proto.c), which
 * check every field of untrusted bytes (I9).
 *
 *   client -> supervisor   hello     once, right after connect
 *   supervisor -> client   reply     the client index and id, or a refusal
 *   client -> supervisor   goodbye   fl_close's clean close, just before it
 *                                    shuts the connection down
 *
 * Both ends include this header: the library through shm.h, the
 * supervisor through supervise.h.  It needs nothing else.
 */
#ifndef FL_PROTO_H
#define FL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define FL__HELLO_MAGIC 0x31434c46u /* "FLC1" */
#define FL__REPLY_MAGIC 0x31534c46u /* "FLS1" */
#define FL__GOODBYE_MAGIC 0x31424c46u /* "FLB1" */
#define FL__PROTO_VERSION 1u
struct fl__hello {
    uint32_t magic;
    uint32_t version;
    uint32_t pid;      /* informational: the client's own view of its pid */
    uint32_t reserved;
};
/* Refusal statuses: -EUSERS the client table is full; -EMFILE the supervisor
 * is out of file descriptors (the client's fl_open returns -EUSERS for both,
 * fl_last_error() says which); -EPROTO, -EPROTONOSUPPORT a bad hello. */
struct fl__reply {
    uint32_t magic;
    int32_t status;    /* 0 or -errno */
    uint32_t client;   /* client table index */
    uint32_t flags;    /* FL__REPLY_*; 0 from supervisors older than the flag */
    uint64_t client_id;
    uint64_t dev, ino; /* the region file the supervisor serves */
};
#define FL__REPLY_TAKES_GOODBYE 0x1u /* send a goodbye before a clean close */
/* A clean close, sent by fl_close (fl__client_goodbye) on the registration
 * socket just before it shuts the socket down.  Without it the end of the
 * connection is a death ("died" in the log), whatever /proc still shows. */
struct fl__goodbye {
    uint32_t magic;
    uint32_t reserved;  /* 0 */
    uint64_t client_id; /* the id the reply assigned */
};

/* Parse a hello from untrusted bytes: 0, -EPROTO or -EPROTONOSUPPORT, with
 * the reason in why.  Any thread; no state. */
int fl__hello_parse(const void *buf, size_t n, struct fl__hello *out, char *why, size_t whycap);
/* Parse a supervisor's reply: 0 or -EPROTO (reason in why); out->status may
 * itself be a refusal (negative errno). */
int fl__reply_parse(const void *buf, size_t n, uint32_t client_capacity, struct fl__reply *out,
                    char *why, size_t whycap);
/* Parse a message from a registered client (a goodbye): 0 or -EPROTO with
 * the reason in why.  The caller compares client_id with its table. */
int fl__goodbye_parse(const void *buf, size_t n, struct fl__goodbye *out, char *why,
                      size_t whycap);

#endif /* FL_PROTO_H */
