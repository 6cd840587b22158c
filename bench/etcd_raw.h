/* SPDX-License-Identifier: MIT */
/*
 * etcd_raw.h - question 9's own requests to etcd, beside fencelock's: raw
 * requests through etcd's JSON gateway on one kept-alive libcurl connection
 * (bench/etcd.c times them against fencelock's calls), and the gRPC
 * counters of each member's GET /metrics, summed over a cluster
 * (bench/etcd_herd.c counts what etcd serves per acquisition).
 */
#ifndef FB_ETCD_RAW_H
#define FB_ETCD_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "cluster_harness.h"

/* ---- raw requests ---- */
struct raw {
    CURL *h;
    char base[128];
    char *buf;
    size_t n, cap;
};

/* A connection to http://host:port (kept alive across requests). */
void raw_init(struct raw *r, const char *host, int port);
/* POST body to path; the parsed answer (the caller decrefs); dies on failure. */
json_t *raw_post(struct raw *r, const char *path, const char *body);
/* j[a][b] (b may be NULL), a number written as a decimal string (0 if absent). */
uint64_t jnum(json_t *j, const char *a, const char *b);
/* Base64 of n bytes at src, of a string, into out (4/3 the size, and a NUL). */
void b64(const void *src, size_t n, char *out);
void b64s(const char *s, char *out);
/* Grant a lease of ttl seconds: its ID; revoke lease id. */
uint64_t raw_grant(struct raw *r, int ttl);
void raw_revoke(struct raw *r, uint64_t id);

/* A watch of the keys [key, end) (raw bytes), from now on, on its own
 * connection and thread: the moment the first DELETE event among them
 * reaches this process. */
struct raw_watch;
struct raw_watch *raw_watch_start(const char *host, int port, const void *key, size_t klen,
                                  const void *end, size_t elen);
/* fb_now_ns() when the first DELETE arrived (0: none yet). */
uint64_t raw_watch_deleted(struct raw_watch *w);
/* Stop the watch and free it. */
void raw_watch_stop(struct raw_watch *w);

/* ---- what etcd counted ----
 * Every request of fencelock reaches etcd through its JSON gateway, which
 * makes it one gRPC message to the member's own server, so
 * grpc_server_msg_received_total counts fencelock's requests (a Watch's or
 * a LeaseKeepAlive's stream counts one message per watch created or
 * keepalive sent); grpc_server_msg_sent_total of etcdserverpb.Watch counts
 * the watch messages (creations, events) sent back. */

/* The methods reported one by one (the others count in the total only;
 * FBM_WATCH is etcdserverpb.Watch's, not the health service's). */
enum { FBM_TXN, FBM_RANGE, FBM_GRANT, FBM_REVOKE, FBM_KEEPALIVE, FBM_WATCH, FBM_NMETHODS };
extern const char *const fbm_method_names[FBM_NMETHODS];

typedef struct fbm_counts {
    double received;                 /* all methods, all members */
    double received_by[FBM_NMETHODS];
    double watch_sent;               /* etcdserverpb.Watch's messages sent */
} fbm_counts;

/* Scrape every running member of c and sum (dies if a member does not
 * answer). */
void fbm_scrape(const ec_cluster *c, fbm_counts *out);
/* (after - before) / n: per acquisition, n of them (n = 1: the difference). */
void fbm_per(const fbm_counts *before, const fbm_counts *after, double n, fbm_counts *out);
/* sum += x. */
void fbm_add(fbm_counts *sum, const fbm_counts *x);

#endif
