/* SPDX-License-Identifier: MIT */
/*
 * cluster_harness.h - real etcd clusters for the etcd backend's tests, and
 * the pieces the fault-injection tests build on.
 *
 * A test starts its own members (the `etcd` binary of the etcd-server
 * package, or $FL_ETCD_BIN) on loopback ports chosen for this process (a
 * range derived from the pid, each port checked free, below the ephemeral
 * range so outgoing connections never take them), with private data
 * directories under th_tmpdir() and its own --initial-cluster-token, so
 * tests run in parallel (ctest -j) without meeting.  It waits until a member
 * answers a linearizable range (bounded, polled: no sleep races), and stops
 * members by pid.  Every member dies with the test (PR_SET_PDEATHSIG and an
 * atexit handler), so a failed or hung test leaves nothing running.
 *
 * What a fault test needs: kill (SIGKILL/SIGTERM) and restart a member on
 * its data, stop and continue it (SIGSTOP/SIGCONT), find the leader, save a
 * snapshot and restore every member from it (etcdctl), URIs naming any
 * subset of the members, and a raw request to one member.  Failures of the
 * harness itself fail the test (cmocka) with the member's log tail.
 *
 * Network namespaces (ec_netns_*, root only): a member may run in a
 * namespace of its own, joined to this host by a veth pair with addresses
 * of 10.213.X.0/24 (a /24 no interface uses), and be cut off (the
 * namespace's end of the veth down) and joined again; ec_start_on() puts
 * members on given addresses and namespaces.  Namespaces are deleted at exit
 * even after a failure, and ones left by a test process that was killed are
 * deleted by the next creation.
 *
 * The cluster and namespace code (cluster.c, cluster_netns.c) has no
 * cmocka: the benchmarks (bench/etcd.c) link it too.  Its failures go to
 * ec_fail(), which cluster_harness.c defines for the tests (the test fails
 * with the message).
 *
 * Also here: a fake etcd (ec_fake_*), an HTTP server on a loopback port
 * whose answers the test scripts, for the untrusted-answer tests; and
 * ec_agent_*, a child process with its own fl_region handle on a URI, driven
 * over a pipe (acquire, commit, renew, release), for scenarios across
 * processes ("hosts": each agent may name another member).
 */
#ifndef FL_TEST_CLUSTER_HARNESS_H
#define FL_TEST_CLUSTER_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fencelock.h"
#include "harness.h"

#define EC_MAX_MEMBERS 5

typedef struct ec_member {
    pid_t pid;           /* 0: not running */
    bool paused;         /* SIGSTOPped by ec_pause */
    int client_port, peer_port;
    char host[32];       /* the address it listens on (127.0.0.1 unless placed) */
    char netns[32];      /* the network namespace it runs in ("" : this one) */
    char name[16];
    char data_dir[600];
    char log_path[600];
} ec_member;

typedef struct ec_cluster {
    int n;
    ec_member m[EC_MAX_MEMBERS];
    char token[64];            /* --initial-cluster-token */
    char initial_cluster[1024];
    int generation;            /* data directories made so far (restores make new ones) */
    /* A secured cluster (ec_start_secure, or FL_ETCD_SECURE=1): TLS on the
     * client and peer ports (members verify clients' certificates), RBAC
     * on, simple tokens that end after --auth-token-ttl (EC_AUTH_TTL_S).
     * Clients are the user "worker", whose one role is granted read-write
     * on each PREFIX/ that ec_uri() names, and nothing else. */
    bool secure;
    char ca[600];              /* the CA certificate (PEM) */
    char cert[600], key[600];  /* the client certificate (no CN) and its key */
    char password_file[600];   /* worker's password */
    char root_password[32];    /* etcdctl's, as root */
    char prefixes[64][64];     /* the prefixes granted to worker so far */
    int nprefixes;
    bool auth_on;              /* RBAC enabled: raw requests go as root */
} ec_cluster;

#define EC_AUTH_TTL_S 3        /* --auth-token-ttl of a secured cluster */
#define EC_WORKER "worker"     /* the user of a secured cluster's clients */
#define EC_ROLE "fencelock"    /* worker's role */

/* A failure of the harness: reports fmt and does not return (defined by
 * the program: cluster_harness.c fails the cmocka test). */
void ec_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Start n members and wait until the cluster answers (fails the test).
 * With FL_ETCD_SECURE=1 in the environment the cluster is secured (see
 * ec_cluster.secure): a plain test becomes its TLS and RBAC variant. */
void ec_start(ec_cluster *c, int n);
/* Start a secured cluster whatever the environment says. */
void ec_start_secure(ec_cluster *c, int n);
/* Turn RBAC on (what a secured cluster has): root, and the user worker with
 * its role, granted read-write on each prefix ec_uri() names.  On a plain
 * cluster too (users without TLS: tests of lost answers through a relay). */
void ec_enable_auth(ec_cluster *c);
/* True when FL_ETCD_SECURE=1. */
bool ec_secure_wanted(void);
/* Issue a certificate (PEM, cert and key files) signed by the secured
 * cluster c's CA, with subject subj ("/O=..."; the members' and the
 * client's carry no CommonName, which etcd's gateway refuses under RBAC)
 * and the openssl x509 extensions ext (lines "subjectAltName=...").
 * Fails the test if openssl does. */
void ec_tls_issue(const ec_cluster *c, const char *cert, const char *key, const char *subj,
                  const char *ext);
/* Run etcdctl against member i (as root on a secured cluster, with its TLS
 * files), with the arguments after out and cap (NULL-terminated): its exit
 * status, its output in out. */
int ec_etcdctl(const ec_cluster *c, int i, char *out, size_t cap, ...);
/* The same with member i listening on hosts[i] (NULL: 127.0.0.1) inside
 * network namespace netns[i] (NULL or "": this one); either array may be
 * NULL. */
void ec_start_on(ec_cluster *c, int n, const char *const *hosts, const char *const *netns);
/* SIGKILL every member that runs, and reap them. */
void ec_stop_all(ec_cluster *c);
/* SIGKILL and reap every member this process started, of any cluster: at
 * exit (registered by the first start), and before the namespaces are
 * deleted at exit (a member inside one keeps it alive). */
void ec_kill_leftovers(void);
/* Send sig (SIGKILL, SIGTERM) to member i and reap it. */
void ec_kill(ec_cluster *c, int i, int sig);
/* SIGSTOP / SIGCONT member i. */
void ec_pause(ec_cluster *c, int i);
void ec_resume(ec_cluster *c, int i);
/* Start member i again on its data directory, and wait until it answers. */
void ec_restart(ec_cluster *c, int i);
/* True once member i answers a linearizable range (a leader serves it). */
bool ec_wait_ready(const ec_cluster *c, int i, int timeout_ms);
/* The index of the member that is the leader (asked of a running member),
 * -1 if none could say within timeout_ms. */
int ec_leader(const ec_cluster *c, int timeout_ms);
/* "etcd://HOST:P,.../prefix" naming the members whose bit is set in
 * which (0: all), into buf; returns buf.  On a secured cluster:
 * "etcds://worker@HOST:P,.../prefix?cacert=..&cert=..&key=..&password-file=..",
 * and worker's role is granted read-write on prefix/ (once). */
const char *ec_uri(ec_cluster *c, unsigned which, const char *prefix, char *buf, size_t cap);
#define EC_ONLY(i) (1u << (i))
/* etcdctl snapshot save from member i into file (fails the test). */
void ec_snapshot_save(const ec_cluster *c, int i, const char *file);
/* Kill every member, restore each from file into a fresh data directory
 * (etcdctl snapshot restore), start them, and wait until they answer. */
void ec_snapshot_restore(ec_cluster *c, const char *file);
/* POST body to path of member i: the HTTP status (0 if no answer), the
 * answer in out (NUL-terminated, cut to cap). */
int ec_post(const ec_cluster *c, int i, const char *path, const char *body, char *out,
            size_t cap);
/* etcd's own Prometheus metrics (GET /metrics on a member's client port,
 * over TLS with the client's certificate on a secured cluster): the sum of
 * the series of metric name (a counter or gauge, e.g.
 * "grpc_server_msg_received_total") whose labels match filter, on member i.
 * filter: NULL or "" for every series, else matchers separated by commas,
 * each `label="value"` (the series has it) or `label!="value"` (it does
 * not), all of which must hold:
 *   ec_metric_sum(c, "grpc_server_msg_sent_total",
 *                 "grpc_method=\"Watch\",grpc_service=\"etcdserverpb.Watch\"")
 * Fails the test (ec_fail) when the member does not answer.  Counters
 * start at 0 when a member starts: compare values taken while every
 * member ran. */
double ec_metric(const ec_cluster *c, int i, const char *name, const char *filter);
/* The same summed over every member that runs and is not paused: what
 * the cluster as a whole received or sent. */
double ec_metric_sum(const ec_cluster *c, const char *name, const char *filter);
/* Run a command (argv NULL-terminated) with a timeout: its exit status
 * (0..255), or -1 (did not start, killed by a signal, or timed out). Its
 * output goes to out (cut to cap) when out is not NULL, else to the test's
 * stderr. */
int ec_run(const char *const *argv, int timeout_ms, char *out, size_t cap);

/* ---- network namespaces (root) ---- */
typedef struct ec_netns {
    bool created;
    char name[32];                /* ip netns name: fl<PID><letter> */
    char host_if[16], ns_if[16];  /* the veth pair's two ends */
    char host_addr[16];           /* 10.213.X.1, on this namespace's end */
    char ns_addr[16];             /* 10.213.X.2, inside the namespace */
} ec_netns;
/* Create a namespace joined by a veth pair: 0, or -1 with the reason in why
 * (not root, no ip command, no namespaces). */
int ec_netns_create(ec_netns *n, char *why, size_t cap);
/* Cut the namespace off (its end of the veth down: nothing goes in or out,
 * silently), and join it again.  Fail the test if ip fails. */
void ec_netns_cut(const ec_netns *n);
void ec_netns_heal(const ec_netns *n);
/* Delete the veth pair and the namespace (stop its members first). */
void ec_netns_destroy(ec_netns *n);
/* Move the calling process (a child) into namespace name: 0 or -errno. */
int ec_netns_enter(const char *name);
/* True when FL_REQUIRE_NETNS=1 (.ci/run, tools/test): a namespace that
 * cannot be made fails the test instead of skipping it. */
bool ec_netns_required(void);

/* ---- a fake etcd ---- */
typedef struct ec_fake ec_fake;
/* What the fake answers a request for path with body (the request body):
 * return the HTTP status and write the answer into out (NUL-terminated);
 * a status of 0 closes the connection without an answer, -1 never answers
 * (holds the connection open until the fake stops). */
typedef int (*ec_fake_fn)(void *arg, const char *path, const char *body, char *out,
                          size_t cap);
/* Start a fake on a free loopback port; its port in *port.  Each answer
 * closes its connection ("Connection: close"). */
ec_fake *ec_fake_start(ec_fake_fn fn, void *arg, int *port);
/* The same, keeping connections alive for the next request, as etcd does
 * (a status of 0 then closes a kept-alive connection without an answer). */
ec_fake *ec_fake_start_keepalive(ec_fake_fn fn, void *arg, int *port);
/* Close the fake's listening socket: later connections are refused.  Only
 * from the fake's own callback (its thread), or before ec_fake_stop. */
void ec_fake_stop_listening(ec_fake *f);
void ec_fake_stop(ec_fake *f);
/* Requests the fake has answered so far. */
unsigned ec_fake_requests(const ec_fake *f);
/* Send a fake's request on to a real member on 127.0.0.1:port (a fake that
 * relays, and loses the answers a test wants lost): the member's HTTP
 * status and answer in out, or 0 when it could not be reached. */
int ec_relay(int port, const char *path, const char *body, char *out, size_t cap);

/* ---- agents: a child process with its own handle ---- */
typedef struct ec_agent {
    th_child c;
    int open_rc;
} ec_agent;
typedef struct ec_reply {
    int rc;
    uint64_t token;    /* acq: the lease's token */
    uint64_t value;    /* commit: the accepted token; read: the fence */
    uint32_t flags;
    char text[256];    /* read: the value; any failure: fl_last_error() */
} ec_reply;
/* Start an agent that opens uri (fl_open); check a->open_rc.
 * Commands (ec_agent_do), one line each, nanosecond durations:
 *   acq KEY LEASE TIMEOUT    fl_acquire (TIMEOUT -1: wait forever); keeps the lease
 *   commit RECORD TEXT       fl_commit with the kept lease
 *   strict RECORD TEXT       the same with FL_COMMIT_STRICT
 *   read RECORD              fl_read
 *   renew LEASE              fl_renew of the kept lease
 *   check                    fl_check of the kept lease
 *   rel                      fl_release of the kept lease
 *   exit                     fl_close and exit */
void ec_agent_start(ec_agent *a, const char *uri);
/* The same, the agent running inside network namespace netns. */
void ec_agent_start_in(ec_agent *a, const char *uri, const char *netns);
ec_reply ec_agent_do(ec_agent *a, int timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Send a command without waiting; ec_agent_read reads its answer. */
void ec_agent_send(ec_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ec_agent_read(ec_agent *a, ec_reply *rp, int timeout_ms);
void ec_agent_stop(ec_agent *a);

#endif
