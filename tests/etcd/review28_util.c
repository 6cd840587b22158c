/* SPDX-License-Identifier: MIT */
/*
 * review28_util.c - the pieces the tests of issue 28's hostile review
 * (etcd_review28, etcd_review28_misuse) share (review28_util.h): their one
 * member; raw requests that show a key's queue as etcd holds it (entries,
 * values, leases and what etcd still gives them), delete a key, and wait
 * for a number of live entries; an fl_acquire on a thread of its own.
 */
#include "review28_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>

ec_cluster cl;

int review28_group_setup(void **state)
{
    (void)state;
    ec_start(&cl, 1);
    return 0;
}

int review28_group_teardown(void **state)
{
    (void)state;
    ec_stop_all(&cl);
    return 0;
}

void pause_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

double secs(uint64_t ns) { return (double)ns / 1e9; }

/* ---- raw etcd: the queue as it is ---- */

char *b64(const void *p, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = p;
    char *o = malloc(4 * (n / 3 + 1) + 1), *q = o;
    assert_non_null(o);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        *q++ = t[v >> 18 & 63];
        *q++ = t[v >> 12 & 63];
        *q++ = i + 1 < n ? t[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? t[v & 63] : '=';
    }
    *q = '\0';
    return o;
}

static size_t unb64(const char *in, unsigned char *out, size_t cap)
{
    size_t n = 0;
    unsigned v = 0;
    int bits = 0;
    for (; *in && *in != '='; in++) {
        const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *p = strchr(t, *in);
        if (!p)
            break;
        v = v << 6 | (unsigned)(p - t);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n < cap)
                out[n] = (unsigned char)(v >> bits & 0xff);
            n++;
        }
    }
    return n < cap ? n : cap;
}

/* POST body to member 0 and parse the answer (fails the test otherwise). */
static json_t *etcd_call(const char *path, const char *body)
{
    static char out[1 << 20];
    int st = ec_post(&cl, 0, path, body, out, sizeof out);
    if (st != 200)
        fail_msg("etcd %s: status %d: %.300s", path, st, out);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j)
        fail_msg("etcd %s: not JSON: %.300s", path, out);
    return j;
}

static uint64_t jnum(json_t *o, const char *f)
{
    json_t *v = json_object_get(o, f);
    return json_is_string(v) ? strtoull(json_string_value(v), NULL, 10)
                             : json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

/* PREFIX/lock/KEY NUL .. KEY \1, oldest first: how many (at most max in e). */
int queue_of(const char *prefix, const char *key, struct qent *e, int max)
{
    char k0[512], k1[512];
    int n = snprintf(k0, sizeof k0, "%s/lock/%s", prefix, key);
    memcpy(k1, k0, (size_t)n);
    k0[n] = '\0';
    k1[n] = '\1';
    char *a = b64(k0, (size_t)n + 1), *b = b64(k1, (size_t)n + 1);
    char body[2048];
    snprintf(body, sizeof body,
             "{\"key\":\"%s\",\"range_end\":\"%s\",\"sort_order\":\"ASCEND\","
             "\"sort_target\":\"CREATE\"}",
             a, b);
    free(a);
    free(b);
    json_t *j = etcd_call("/v3/kv/range", body);
    json_t *kvs = json_object_get(j, "kvs");
    int cnt = 0;
    size_t i;
    json_t *kv;
    json_array_foreach(kvs, i, kv) {
        if (e && cnt < max) {
            struct qent *q = &e[cnt];
            memset(q, 0, sizeof *q);
            q->klen = unb64(json_string_value(json_object_get(kv, "key")), q->key,
                            sizeof q->key);
            json_t *v = json_object_get(kv, "value");
            size_t vn = unb64(json_is_string(v) ? json_string_value(v) : "",
                              (unsigned char *)q->value, sizeof q->value - 1);
            q->value[vn] = '\0';
            q->lease = jnum(kv, "lease");
            q->c = jnum(kv, "create_revision");
            q->mod = jnum(kv, "mod_revision");
        }
        cnt++;
    }
    json_decref(j);
    return cnt;
}

/* Live ("W") entries of a key's queue. */
int live_of(const char *prefix, const char *key)
{
    struct qent e[64];
    int n = queue_of(prefix, key, e, 64), live = 0;
    for (int i = 0; i < n && i < 64; i++)
        live += e[i].value[0] == 'W';
    return live;
}

void etcd_del(const void *k, size_t n)
{
    char *a = b64(k, n), body[1024];
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", a);
    free(a);
    json_decref(etcd_call("/v3/kv/deleterange", body));
}

/* Seconds etcd still gives lease id (-1: gone). */
static int64_t lease_left(uint64_t id)
{
    char body[128];
    snprintf(body, sizeof body, "{\"ID\":\"%" PRIu64 "\"}", id);
    json_t *j = etcd_call("/v3/lease/timetolive", body);
    json_t *t = json_object_get(j, "TTL");
    int64_t ttl = json_is_string(t) ? strtoll(json_string_value(t), NULL, 10)
                                    : json_is_integer(t) ? json_integer_value(t) : -1;
    json_decref(j);
    return ttl;
}

/* Wait (polled, bounded) until the key's queue has n live entries. */
bool wait_live(const char *prefix, const char *key, int n, int timeout_ms)
{
    for (uint64_t end = th_now_ns() + MS(timeout_ms); th_now_ns() < end; pause_ms(20))
        if (live_of(prefix, key) == n)
            return true;
    return live_of(prefix, key) == n;
}

void dump_queue(const char *prefix, const char *key)
{
    struct qent e[16];
    int n = queue_of(prefix, key, e, 16);
    printf("# queue of %s/%s: %d entr%s\n", prefix, key, n, n == 1 ? "y" : "ies");
    for (int i = 0; i < n && i < 16; i++)
        printf("#   c=%" PRIu64 " mod=%" PRIu64 " lease=%" PRIu64 " (%" PRId64 " s left) '%s'\n",
               e[i].c, e[i].mod, e[i].lease, e[i].lease ? lease_left(e[i].lease) : -1,
               e[i].value);
}

const char *direct_uri(const char *prefix, char *buf, size_t cap)
{
    return ec_uri(&cl, 0, prefix, buf, cap);
}

struct timed_acq take_within_lease(fl_region *d, const char *key, fl_lease *l)
{
    struct timed_acq t = {0};
    uint64_t t0 = th_now_ns();
    t.rc = fl_acquire(d, key, S(2), (int64_t)(S(2) + SLACK), l);
    t.took = th_now_ns() - t0;
    snprintf(t.why, sizeof t.why, "%s", t.rc ? fl_last_error() : "");
    return t;
}

/* ---- an fl_acquire on a thread of its own ---- */

void *acq_main(void *arg)
{
    struct acq_arg *a = arg;
    a->rc = fl_acquire(a->r, a->key, a->lease_ns, a->timeout_ns, &a->l);
    a->t_ret = th_now_ns();
    atomic_store(&a->done, 1);
    return NULL;
}

bool wait_done(struct acq_arg *a, int timeout_ms)
{
    for (uint64_t end = th_now_ns() + MS(timeout_ms); th_now_ns() < end; pause_ms(10))
        if (atomic_load(&a->done))
            return true;
    return atomic_load(&a->done);
}
