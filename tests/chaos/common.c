/* SPDX-License-Identifier: MIT */
/* common.c - see chaos.h: clock, seeded randomness, values, logs, config file. */
#include "chaos.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t ch_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * CH_S + (uint64_t)ts.tv_nsec;
}

void ch_sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / CH_S), .tv_nsec = (long)(t % CH_S)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

void ch_sleep_ns(uint64_t ns)
{
    ch_sleep_until(ch_now() + ns);
}

/* splitmix64: seeds the generator from (seed, stream) so that every role
 * (controller schedule, each worker) has its own reproducible stream. */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ch_rng_seed(ch_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull);
    r->s = splitmix64(&x);
    if (r->s == 0)
        r->s = 1;
}

/* xorshift64* */
uint64_t ch_rng_next(ch_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

uint64_t ch_rng_below(ch_rng *r, uint64_t n)
{
    return n ? ch_rng_next(r) % n : 0;
}

uint64_t ch_rng_range(ch_rng *r, uint64_t lo, uint64_t hi)
{
    return hi <= lo ? lo : lo + ch_rng_below(r, hi - lo + 1);
}

bool ch_rng_chance(ch_rng *r, unsigned percent)
{
    return ch_rng_below(r, 100) < percent;
}

static double rng_unit(ch_rng *r) /* (0, 1] */
{
    return ((double)(ch_rng_next(r) >> 11) + 1.0) / 9007199254740992.0;
}

uint64_t ch_rng_exp(ch_rng *r, uint64_t mean)
{
    double v = -log(rng_unit(r)) * (double)mean;
    return v > 1e18 ? (uint64_t)1e18 : (uint64_t)v;
}

uint64_t ch_rng_logu(ch_rng *r, uint64_t lo, uint64_t hi)
{
    if (hi <= lo || lo == 0)
        return lo;
    double v = exp(log((double)lo) + rng_unit(r) * (log((double)hi) - log((double)lo)));
    return (uint64_t)v;
}

void ch_key_name(char *buf, size_t cap, int key)
{
    snprintf(buf, cap, "chaos/k%d", key);
}

void ch_rec_name(char *buf, size_t cap, int rec)
{
    snprintf(buf, cap, "chaos/rec%d", rec);
}

/* ---- values ---------------------------------------------------------------- */

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

uint64_t ch_value_make(void *buf, size_t len, uint32_t wid, uint32_t rec, uint64_t seq,
                       uint64_t token)
{
    unsigned char *p = buf;
    put64(p, CH_VAL_MAGIC);
    put32(p + 8, wid);
    put32(p + 12, rec);
    put64(p + 16, seq);
    put64(p + 24, token);
    put32(p + 32, (uint32_t)len);
    put32(p + 36, 0);
    ch_rng g;
    ch_rng_seed(&g, token ^ ((uint64_t)wid << 32), seq);
    for (size_t i = CH_VAL_HDR; i < len - 8; i++)
        p[i] = (unsigned char)(ch_rng_next(&g) >> 56);
    uint64_t sum = fnv1a(p, len - 8);
    put64(p + len - 8, sum);
    return sum;
}

const char *ch_value_parse(const void *buf, size_t len, struct ch_value *v)
{
    const unsigned char *p = buf;
    if (len < CH_VAL_MIN)
        return "too short";
    if (get64(p) != CH_VAL_MAGIC)
        return "bad magic";
    v->wid = get32(p + 8);
    v->rec = get32(p + 12);
    v->seq = get64(p + 16);
    v->token = get64(p + 24);
    v->len = get32(p + 32);
    v->sum = get64(p + len - 8);
    if (v->len != len)
        return "length field differs from the read length";
    if (fnv1a(p, len - 8) != v->sum)
        return "checksum mismatch";
    ch_rng g;
    ch_rng_seed(&g, v->token ^ ((uint64_t)v->wid << 32), v->seq);
    for (size_t i = CH_VAL_HDR; i < len - 8; i++)
        if (p[i] != (unsigned char)(ch_rng_next(&g) >> 56))
            return "filler differs from its writer's";
    return NULL;
}

/* ---- logs ------------------------------------------------------------------ */

int ch_log_open(ch_log *l, const char *path)
{
    l->op = 0;
    l->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    return l->fd < 0 ? -errno : 0;
}

void ch_log_line(ch_log *l, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    /* One write(2) per line with O_APPEND: a SIGKILL leaves whole lines. */
    ssize_t w = write(l->fd, buf, (size_t)n);
    (void)w;
}

/* ---- the config file --------------------------------------------------------- */

int ch_config_write(const struct ch_config *c)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config", c->dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fprintf(f,
            "seed %" PRIu64 "\nduration_ns %" PRIu64 "\nworkers %d\nkeys %d\nrpk %d\n"
            "lease_ns %" PRIu64 "\nslack_ns %" PRIu64 "\npause_mean_ns %" PRIu64 "\n"
            "kill_mean_ns %" PRIu64 "\ndkill_mean_ns %" PRIu64 "\nddown_max_ns %" PRIu64 "\n"
            "stress %d\nspare_buffers %d\nrecord_size %d\nregion %s\n",
            c->seed, c->duration_ns, c->workers, c->keys, c->rpk, c->lease_ns, c->slack_ns,
            c->pause_mean_ns, c->kill_mean_ns, c->dkill_mean_ns, c->ddown_max_ns, c->stress,
            c->spare_buffers, c->record_size, c->region);
    return fclose(f) == 0 ? 0 : -EIO;
}

int ch_config_read(struct ch_config *c, const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    char name[64], val[500];
    while (fscanf(f, "%63s %499s", name, val) == 2) {
        uint64_t u = strtoull(val, NULL, 10);
        if (!strcmp(name, "seed")) c->seed = u;
        else if (!strcmp(name, "duration_ns")) c->duration_ns = u;
        else if (!strcmp(name, "workers")) c->workers = (int)u;
        else if (!strcmp(name, "keys")) c->keys = (int)u;
        else if (!strcmp(name, "rpk")) c->rpk = (int)u;
        else if (!strcmp(name, "lease_ns")) c->lease_ns = u;
        else if (!strcmp(name, "slack_ns")) c->slack_ns = u;
        else if (!strcmp(name, "pause_mean_ns")) c->pause_mean_ns = u;
        else if (!strcmp(name, "kill_mean_ns")) c->kill_mean_ns = u;
        else if (!strcmp(name, "dkill_mean_ns")) c->dkill_mean_ns = u;
        else if (!strcmp(name, "ddown_max_ns")) c->ddown_max_ns = u;
        else if (!strcmp(name, "stress")) c->stress = (int)u;
        else if (!strcmp(name, "spare_buffers")) c->spare_buffers = (int)u;
        else if (!strcmp(name, "record_size")) c->record_size = (int)u;
        else if (!strcmp(name, "region")) snprintf(c->region, sizeof c->region, "%s", val);
    }
    fclose(f);
    return c->keys > 0 && c->rpk > 0 ? 0 : -EINVAL;
}
