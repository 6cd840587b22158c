/* SPDX-License-Identifier: MIT */
/* rec_common.c - see rec_common.h. */
#include "rec_common.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- payloads ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static void body(unsigned char *p, size_t n, uint64_t token, uint32_t tag)
{
    uint64_t s = mix(token ^ ((uint64_t)tag << 32) ^ 0x9e3779b97f4a7c15ull) | 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; /* xorshift64 */
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (unsigned char)(s >> 24);
    }
}

static uint64_t pl_hash(const unsigned char *buf, size_t len)
{
    uint64_t h = fnv(0xcbf29ce484222325ull, buf, 16);
    return fnv(h, buf + PL_HDR, len - PL_HDR);
}

void pl_make(void *out, size_t len, uint64_t token, uint32_t tag)
{
    unsigned char *buf = out;
    if (len < PL_HDR)
        abort();
    put64(buf, token);
    put32(buf + 8, (uint32_t)len);
    put32(buf + 12, tag);
    body(buf + PL_HDR, len - PL_HDR, token, tag);
    put64(buf + 16, pl_hash(buf, len));
}

const char *pl_check(const void *in, size_t len, uint64_t fence, uint32_t *tag)
{
    const unsigned char *buf = in;
    if (len < PL_HDR)
        return "shorter than a payload header";
    if (get64(buf) != fence)
        return "token in the payload differs from the fence";
    if (get32(buf + 8) != len)
        return "length in the payload differs from the read length";
    if (get64(buf + 16) != pl_hash(buf, len))
        return "checksum mismatch (torn or foreign bytes)";
    uint32_t t = get32(buf + 12);
    static _Thread_local unsigned char want[65536];
    if (len - PL_HDR > sizeof want)
        return "too long";
    body(want, len - PL_HDR, fence, t);
    if (memcmp(want, buf + PL_HDR, len - PL_HDR) != 0)
        return "body differs from the one its token generates";
    if (tag)
        *tag = t;
    return NULL;
}

size_t pl_len(uint64_t token, uint32_t tag, size_t max)
{
    uint64_t h = mix(token * 31 + tag);
    return PL_HDR + (size_t)(h % (max - PL_HDR + 1));
}

/* ---- regions and children ---- */

const char *rc_path(const char *name)
{
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", th_tmpdir(), name);
    return b;
}

void rc_daemon(th_daemon *d, const char *name, const char *const *extra)
{
    if (th_daemon_start(d, rc_path(name), extra) != 0) {
        fprintf(stderr, "rec: fencelockd did not start on %s\n", rc_path(name));
        abort();
    }
}

fl_region *rc_open(const char *path)
{
    fl_region *r = NULL;
    int rc = fl_open(path, &r);
    if (rc != 0) {
        fprintf(stderr, "rec[%d]: fl_open(%s): %s (%s)\n", (int)getpid(), path, fl_err_name(rc),
                fl_last_error());
        abort();
    }
    return r;
}

void rc_child(th_child *c, th_child_fn fn, void *arg)
{
    fflush(NULL);
    if (th_child_start(c, fn, arg) != 0) {
        perror("th_child_start");
        abort();
    }
}

char *rc_recv(int fd, char *buf, size_t cap, int timeout_ms)
{
    if (th_recv(fd, buf, cap, timeout_ms) != 0) {
        fprintf(stderr, "rec[%d]: no message within %d ms\n", (int)getpid(), timeout_ms);
        abort();
    }
    return buf;
}

int rc_child_exit(th_child *c, int timeout_ms)
{
    int st = th_child_wait(c, timeout_ms);
    if (st == -1)
        return -1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return 1000 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int rc_record_index(fl_region *r, const char *name)
{
    fl_record_info info;
    for (uint32_t i = 0;; i++) {
        int rc = fl_record_info_get(r, i, &info);
        if (rc == -ERANGE)
            return -1;
        if (rc == 0 && strcmp(info.name, name) == 0)
            return (int)i;
    }
}

bool rc_record_info(fl_region *r, const char *name, fl_record_info *info)
{
    int i = rc_record_index(r, name);
    return i >= 0 && fl_record_info_get(r, (uint32_t)i, info) == 0;
}

/* ---- ptrace: profiling a whole fl_commit ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int tr_profile_commit(pid_t pid, tr_published_fn is_published, void *ctx, tr_profile *out)
{
    memset(out, 0, sizeof *out);
    out->cas_step = -1;
    tr_ctx t;
    if (tr_run_to(&t, pid, (uintptr_t)&fl_commit, 1000000) != 0)
        return -1;
    size_t cap = 1u << 16, n = 0;
    uint64_t *trace = malloc(cap * sizeof *trace);
    if (!trace)
        return -1;
    int rc = 0;
    while (!t.returned) {
        uint8_t insn[8];
        uint64_t rip = tr_rip(pid, insn);
        bool cx = tr_is_lock_cmpxchg(insn);
        long at = t.steps;
        if (n == cap) {
            uint64_t *bigger = realloc(trace, 2 * cap * sizeof *trace);
            if (!bigger) {
                rc = -1;
                break;
            }
            trace = bigger;
            cap *= 2;
        }
        trace[n++] = rip;
        if (tr_step(&t, 1, NULL, NULL) != 0) {
            rc = -1;
            break;
        }
        out->cmpxchg_seen += cx;
        if (out->cas_step < 0 && is_published(ctx)) {
            out->cas_step = at;
            out->cas_rip = rip;
            out->cas_locked = cx;
        }
        if (t.steps > 20000000) {
            fprintf(stderr, "rec: fl_commit did not return within 20M instructions\n");
            rc = -1;
            break;
        }
    }
    if (rc == 0 && out->cas_step >= 0) {
        uint64_t *sorted = malloc(n * sizeof *sorted);
        if (!sorted) {
            free(trace);
            return -1;
        }
        memcpy(sorted, trace, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, cmp_u64);
        for (int i = 0; i < TR_NEAR_COUNT; i++) {
            long s = out->cas_step - TR_NEAR_BEFORE + i;
            if (s < 0 || (size_t)s >= n)
                continue;
            uint64_t rip = trace[s];
            out->near_rip[i] = rip;
            uint64_t *lo = bsearch(&rip, sorted, n, sizeof *sorted, cmp_u64);
            while (lo > sorted && lo[-1] == rip)
                lo--;
            out->near_unique[i] = (size_t)(lo - sorted) + 1 == n || lo[1] != rip;
        }
        free(sorted);
    }
    free(trace);
    out->total = t.steps;
    if (rc != 0)
        return rc;
    return tr_detach(pid);
}
