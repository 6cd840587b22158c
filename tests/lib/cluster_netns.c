/* SPDX-License-Identifier: MIT */
/* cluster_netns.c - network namespaces for the etcd backend's tests (see
 * cluster_harness.h): a namespace joined to this host by a veth pair on a
 * /24 of 10.213.0.0/16 that no interface uses, cut off and joined again
 * with `ip`, entered by a member (cluster.c) or an agent; deleted at exit,
 * and the ones a killed test process left deleted by the next creation.
 * Root only.  No cmocka here (the benchmarks link it with cluster.c): a
 * failure goes to ec_fail(). */
#include "cluster_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- network namespaces ---- */

/* Copies of the namespaces alive (a test that failed may have lost its own). */
static ec_netns ec_live_ns[8];

static const char *ec_ip_bin(void)
{
    if (access("/usr/sbin/ip", X_OK) == 0)
        return "/usr/sbin/ip";
    if (access("/sbin/ip", X_OK) == 0)
        return "/sbin/ip";
    return "ip";
}

/* Run `ip ARGS...` (NULL-terminated); its exit status, its output in out. */
static int ec_ip(char *out, size_t cap, ...)
{
    const char *argv[16] = {ec_ip_bin()};
    int n = 1;
    va_list ap;
    va_start(ap, cap);
    for (const char *a; n < 15 && (a = va_arg(ap, const char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char dummy[512];
    return ec_run(argv, 10000, out ? out : dummy, out ? cap : sizeof dummy);
}

bool ec_netns_required(void)
{
    const char *v = getenv("FL_REQUIRE_NETNS");
    return v && strcmp(v, "1") == 0;
}

static void ec_netns_delete(const ec_netns *n)
{
    ec_ip(NULL, 0, "link", "del", n->host_if, NULL); /* takes the namespace's end too */
    ec_ip(NULL, 0, "netns", "del", n->name, NULL);
}

static pid_t ec_ns_owner; /* the process that made the namespaces */

static void ec_netns_atexit(void)
{
    if (getpid() != ec_ns_owner)
        return; /* a forked child that called exit(): not its namespaces */
    ec_kill_leftovers(); /* a member inside keeps the namespace alive */
    for (size_t i = 0; i < sizeof ec_live_ns / sizeof ec_live_ns[0]; i++)
        if (ec_live_ns[i].created) {
            ec_netns_delete(&ec_live_ns[i]);
            ec_live_ns[i].created = false;
        }
}

/* Namespaces (and their host-side veths) left by a test process that is
 * gone (killed by ctest's timeout, say): named fl<PID><letter>. */
static void ec_netns_reap_stale(void)
{
    char out[4096];
    if (ec_ip(out, sizeof out, "netns", "list", NULL) != 0)
        return;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        int pid = 0;
        char letter = 0, name[32], host_if[32];
        if (sscanf(line, "fl%d%c", &pid, &letter) != 2 || pid <= 0 || letter < 'a' ||
            letter > 'z')
            continue;
        if (kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(name, sizeof name, "fl%d%c", pid, letter);
        snprintf(host_if, sizeof host_if, "fh%d%c", pid, letter);
        ec_ip(NULL, 0, "link", "del", host_if, NULL);
        ec_ip(NULL, 0, "netns", "del", name, NULL);
    }
}

/* A /24 of 10.213.0.0/16 that no interface of this host uses. */
static int ec_free_subnet(void)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return -1;
    bool used[256] = {false};
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        uint32_t a = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
        if ((a >> 16) == ((10u << 8) | 213u))
            used[(a >> 8) & 0xff] = true;
    }
    freeifaddrs(ifs);
    for (int k = 0; k < 250; k++) {
        int x = 1 + (int)((getpid() + k) % 250);
        if (!used[x])
            return x;
    }
    return -1;
}

int ec_netns_create(ec_netns *n, char *why, size_t cap)
{
    static int seq;
    memset(n, 0, sizeof *n);
    if (geteuid() != 0) {
        snprintf(why, cap, "network namespaces need root (euid %d)", (int)geteuid());
        return -1;
    }
    char out[1024];
    if (ec_ip(out, sizeof out, "-V", NULL) != 0) {
        snprintf(why, cap, "the ip command (iproute2) does not run: %s", out);
        return -1;
    }
    /* One creator at a time on this host (ctest -j): the subnet check and
     * the creation are one step. */
    int lock = open("/tmp/fencelock-test-netns.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock >= 0)
        flock(lock, LOCK_EX);
    ec_netns_reap_stale();
    int x = ec_free_subnet();
    char letter = (char)('a' + seq++ % 26);
    snprintf(n->name, sizeof n->name, "fl%d%c", (int)getpid(), letter);
    snprintf(n->host_if, sizeof n->host_if, "fh%d%c", (int)getpid(), letter);
    snprintf(n->ns_if, sizeof n->ns_if, "fn%d%c", (int)getpid(), letter);
    snprintf(n->host_addr, sizeof n->host_addr, "10.213.%d.1", x);
    snprintf(n->ns_addr, sizeof n->ns_addr, "10.213.%d.2", x);
    char host_cidr[24], ns_cidr[24];
    snprintf(host_cidr, sizeof host_cidr, "%s/24", n->host_addr);
    snprintf(ns_cidr, sizeof ns_cidr, "%s/24", n->ns_addr);
    int rc = 0;
    const char *step = "";
    if (x < 0) {
        rc = -1;
        snprintf(out, sizeof out, "every /24 of 10.213.0.0/16 is in use");
        step = "choose a subnet";
    }
#define EC_STEP(what, ...)                                                                    \
    do {                                                                                      \
        if (rc == 0 && ec_ip(out, sizeof out, __VA_ARGS__, NULL) != 0) {                      \
            rc = -1;                                                                          \
            step = what;                                                                      \
        }                                                                                     \
    } while (0)
    EC_STEP("ip netns add", "netns", "add", n->name);
    if (rc == 0) {
        n->created = true;
        for (size_t i = 0; i < sizeof ec_live_ns / sizeof ec_live_ns[0]; i++)
            if (!ec_live_ns[i].created) {
                ec_live_ns[i] = *n; /* the names: the addresses follow */
                break;
            }
        static bool registered;
        if (!registered) {
            ec_ns_owner = getpid();
            atexit(ec_netns_atexit);
            registered = true;
        }
    }
    EC_STEP("ip link add (veth)", "link", "add", n->host_if, "type", "veth", "peer", "name",
            n->ns_if, "netns", n->name);
    EC_STEP("ip addr add (host)", "addr", "add", host_cidr, "dev", n->host_if);
    EC_STEP("ip link set up (host)", "link", "set", n->host_if, "up");
    EC_STEP("ip addr add (namespace)", "-n", n->name, "addr", "add", ns_cidr, "dev", n->ns_if);
    EC_STEP("ip link set up (namespace)", "-n", n->name, "link", "set", n->ns_if, "up");
    EC_STEP("ip link set lo up (namespace)", "-n", n->name, "link", "set", "lo", "up");
#undef EC_STEP
    if (lock >= 0)
        close(lock);
    if (rc != 0) {
        snprintf(why, cap, "%s failed: %s", step, out);
        ec_netns_destroy(n);
        return -1;
    }
    return 0;
}

void ec_netns_cut(const ec_netns *n)
{
    char out[1024];
    if (ec_ip(out, sizeof out, "-n", n->name, "link", "set", n->ns_if, "down", NULL) != 0)
        ec_fail("cutting namespace %s off: %s", n->name, out);
}

void ec_netns_heal(const ec_netns *n)
{
    char out[1024];
    if (ec_ip(out, sizeof out, "-n", n->name, "link", "set", n->ns_if, "up", NULL) != 0)
        ec_fail("joining namespace %s again: %s", n->name, out);
}

void ec_netns_destroy(ec_netns *n)
{
    if (!n->created)
        return;
    ec_netns_delete(n);
    for (size_t i = 0; i < sizeof ec_live_ns / sizeof ec_live_ns[0]; i++)
        if (ec_live_ns[i].created && strcmp(ec_live_ns[i].name, n->name) == 0)
            ec_live_ns[i].created = false;
    n->created = false;
}

int ec_netns_enter(const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = setns(fd, CLONE_NEWNET) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}
