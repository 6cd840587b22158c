/* SPDX-License-Identifier: MIT */
/*
 * rec_semantics.c - the documented results of fl_commit / fl_commit_token /
 * fl_read / fl_commit_u64 / fl_read_u64, one behaviour per test, each on a fresh
 * region made with fl__region_create (no supervisor needed: I10).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/shm.h"
#include "rec_common.h"

#define LEASE (60 * TH_S)

static fl_region *fresh(const char *name, uint32_t records, uint32_t record_size,
                        uint32_t spare, const char **path_out)
{
    const char *path = rc_path(name);
    struct fl__params p = {.locks = 16, .records = records, .record_size = record_size,
                           .clients = 8, .spare_buffers = spare};
    assert_int_equal(fl__test_region_create_ready(path, &p), 0);
    if (path_out)
        *path_out = path;
    return rc_open(path);
}

static fl_lease take(fl_region *r, const char *key)
{
    fl_lease l;
    assert_int_equal(fl_acquire(r, key, LEASE, 0, &l), 0);
    return l;
}

static void check_value(fl_region *r, const char *rec, const void *want, size_t want_len,
                         uint64_t want_fence)
{
    unsigned char buf[2048];
    size_t len = 12345;
    uint64_t fence = 0;
    assert_int_equal(fl_read(r, rec, buf, sizeof buf, &len, &fence), 0);
    assert_int_equal(len, want_len);
    if (want_len)
        assert_memory_equal(buf, want, want_len);
    assert_int_equal(fence, want_fence);
}

static fl_record_info info_of(fl_region *r, const char *rec)
{
    fl_record_info info;
    assert_true(rc_record_info(r, rec, &info));
    return info;
}

/* I2, I8: fl_commit_token is fl_commit by key and token.  Every error it
 * documents, and that a token the key issued commits, a stale one is
 * refused with the accepted token, a lost lease's token commits only until
 * a newer one has. */
static void test_commit_token(void **state)
{
    (void)state;
    fl_region *r = fresh("bytoken", 4, 16, 4, NULL);
    uint64_t acc = 0;
    /* A key never acquired issued no token: -ENOENT, nothing created. */
    assert_int_equal(fl_commit_token(r, "never", 1, "rec", "x", 1, 0, &acc), -ENOENT);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    assert_int_equal(ri.locks_used, 0);
    assert_int_equal(ri.records_used, 0);
    fl_lease a = take(r, "k");
    assert_int_equal(fl_release(r, &a), 0);
    /* Tokens the key never issued. */
    assert_int_equal(fl_commit_token(r, "k", 0, "rec", "x", 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit_token(r, "k", a.token + 1, "rec", "x", 1, 0, &acc), -EINVAL);
    /* Bad arguments. */
    assert_int_equal(fl_commit_token(NULL, "k", a.token, "rec", "x", 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit_token(r, NULL, a.token, "rec", "x", 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit_token(r, "", a.token, "rec", "x", 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit_token(r, "k", a.token, NULL, "x", 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit_token(r, "k", a.token, "rec", NULL, 1, 0, &acc), -EINVAL);
    assert_int_equal(fl_commit_token(r, "k", a.token, "rec", "x", 1, 0x80, &acc), -EINVAL);
    char big[17] = {0};
    assert_int_equal(fl_commit_token(r, "k", a.token, "rec", big, 17, 0, &acc), -EMSGSIZE);
    /* A released lease's token still commits: the fence compares tokens. */
    assert_int_equal(fl_commit_token(r, "k", a.token, "rec", "A", 1, 0, &acc), 0);
    assert_int_equal(acc, a.token);
    check_value(r, "rec", "A", 1, a.token);
    fl_lease b = take(r, "k");
    assert_int_equal(fl_commit_token(r, "k", b.token, "rec", "B", 1, FL_COMMIT_STRICT, &acc), 0);
    /* Now the older token is stale: -ESTALE, *accepted the newer, no effect. */
    acc = 0;
    assert_int_equal(fl_commit_token(r, "k", a.token, "rec", "a", 1, 0, &acc), -ESTALE);
    assert_int_equal(acc, b.token);
    assert_int_equal(fl_commit_token(r, "k", b.token, "rec", "b", 1, FL_COMMIT_STRICT, &acc),
                     -ESTALE);
    check_value(r, "rec", "B", 1, b.token);
    /* I8: a record bound to k refuses another key's token. */
    fl_lease o = take(r, "other");
    assert_int_equal(fl_commit_token(r, "other", o.token, "rec", "o", 1, 0, &acc), -EXDEV);
    check_value(r, "rec", "B", 1, b.token);
    fl_close(r);
}

/* I2: T >= F is accepted, so one lease commits as often as it likes; a strict
 * commit accepts only T > F. */
static void test_equal_token_and_strict(void **state)
{
    (void)state;
    fl_region *r = fresh("equal", 4, 64, 4, NULL);
    fl_lease l = take(r, "k");
    uint64_t acc = 0;
    assert_int_equal(fl_commit(r, &l, "rec", "first", 5, 0, &acc), 0);
    assert_int_equal(acc, l.token);
    acc = 0;
    assert_int_equal(fl_commit(r, &l, "rec", "second", 6, 0, &acc), 0);
    assert_int_equal(acc, l.token);
    check_value(r, "rec", "second", 6, l.token);
    fl_record_info before = info_of(r, "rec");
    assert_int_equal(before.accepted_token, l.token);
    assert_int_equal(before.version, 2);
    assert_int_equal(before.commits, 2);
    assert_int_equal(before.rejections, 0);

    /* strict: the equal token is rejected, and *accepted names it */
    acc = 0;
    assert_int_equal(fl_commit(r, &l, "rec", "third", 5, FL_COMMIT_STRICT, &acc), -ESTALE);
    assert_int_equal(acc, l.token);
    check_value(r, "rec", "second", 6, l.token);
    fl_record_info after = info_of(r, "rec");
    assert_int_equal(after.accepted_token, before.accepted_token);
    assert_int_equal(after.version, before.version);
    assert_int_equal(after.commits, before.commits);
    assert_int_equal(after.size, 6);
    assert_int_equal(after.rejections, 1);
    assert_int_equal(after.last_rejected_token, l.token);

    /* strict with a greater token is accepted */
    assert_int_equal(fl_release(r, &l), 0);
    fl_lease l2 = take(r, "k");
    assert_true(l2.token > l.token);
    assert_int_equal(fl_commit(r, &l2, "rec", "fourth", 6, FL_COMMIT_STRICT, &acc), 0);
    assert_int_equal(acc, l2.token);
    check_value(r, "rec", "fourth", 6, l2.token);
    assert_int_equal(info_of(r, "rec").version, 3);
    fl_close(r);
}

/* I2: a smaller token is rejected with *accepted set, and the rejection has
 * no visible effect at all. */
static void test_smaller_token_rejected_without_effect(void **state)
{
    (void)state;
    fl_region *r = fresh("smaller", 4, 64, 4, NULL);
    fl_lease old = take(r, "k");
    assert_int_equal(fl_commit(r, &old, "rec", "old-1", 5, 0, NULL), 0);
    assert_int_equal(fl_release(r, &old), 0);
    fl_lease cur = take(r, "k");
    assert_true(cur.token > old.token);
    assert_int_equal(fl_commit(r, &cur, "rec", "current value", 13, 0, NULL), 0);
    fl_record_info before = info_of(r, "rec");

    uint64_t acc = 0;
    assert_int_equal(fl_commit(r, &old, "rec", "stale bytes that must not show", 30, 0, &acc),
                     -ESTALE);
    assert_int_equal(acc, cur.token);
    /* NULL accepted is allowed */
    assert_int_equal(fl_commit(r, &old, "rec", "stale again", 11, 0, NULL), -ESTALE);
    /* a strict stale commit too */
    acc = 0;
    assert_int_equal(fl_commit(r, &old, "rec", "x", 1, FL_COMMIT_STRICT, &acc), -ESTALE);
    assert_int_equal(acc, cur.token);

    check_value(r, "rec", "current value", 13, cur.token);
    fl_record_info after = info_of(r, "rec");
    assert_int_equal(after.accepted_token, cur.token);
    assert_int_equal(after.version, before.version);
    assert_int_equal(after.commits, before.commits);
    assert_int_equal(after.size, 13);
    assert_int_equal(after.rejections, before.rejections + 3);
    assert_int_equal(after.last_rejected_token, old.token);
    assert_string_equal(after.bound_key, "k");

    /* the current holder still commits */
    assert_int_equal(fl_commit(r, &cur, "rec", "next", 4, 0, NULL), 0);
    check_value(r, "rec", "next", 4, cur.token);
    fl_close(r);
}

/* I8: a record is bound to the key of its first commit. */
static void test_other_key_is_exdev(void **state)
{
    (void)state;
    fl_region *r = fresh("exdev", 4, 64, 4, NULL);
    fl_lease a = take(r, "key-a");
    fl_lease b = take(r, "key-b");
    assert_int_equal(fl_commit(r, &a, "rec", "by a", 4, 0, NULL), 0);
    fl_record_info before = info_of(r, "rec");
    uint64_t acc = 777;
    assert_int_equal(fl_commit(r, &b, "rec", "by b", 4, 0, &acc), -EXDEV);
    assert_non_null(strstr(fl_last_error(), "key-a")); /* names the key that fences it */
    assert_int_equal(fl_commit(r, &b, "rec", "by b", 4, FL_COMMIT_STRICT, &acc), -EXDEV);
    assert_int_equal(fl_commit_u64(r, &b, "rec", 5, 0, &acc), -EXDEV);
    check_value(r, "rec", "by a", 4, a.token);
    fl_record_info after = info_of(r, "rec");
    assert_string_equal(after.bound_key, "key-a");
    assert_int_equal(after.version, before.version);
    assert_int_equal(after.commits, before.commits);
    assert_int_equal(after.accepted_token, a.token);
    /* even when the other key's token is greater, and after a released */
    assert_int_equal(fl_release(r, &a), 0);
    assert_int_equal(fl_release(r, &b), 0);
    fl_lease b2 = take(r, "key-b");
    assert_true(b2.token > a.token);
    assert_int_equal(fl_commit(r, &b2, "rec", "by b2", 5, 0, &acc), -EXDEV);
    check_value(r, "rec", "by a", 4, a.token);
    /* the other key binds its own records */
    assert_int_equal(fl_commit(r, &b2, "rec-b", "by b2", 5, 0, NULL), 0);
    assert_string_equal(info_of(r, "rec-b").bound_key, "key-b");
    fl_close(r);
}

/* I2 I3: every size from 0 to the record size round-trips exactly;
 * record_size + 1 is -EMSGSIZE with no effect. */
static void test_sizes(void **state)
{
    (void)state;
    const uint32_t rs = 200;
    fl_region *r = fresh("sizes", 8, rs, 4, NULL);
    fl_lease l = take(r, "k");
    unsigned char data[256];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 7 + 3);
    size_t sizes[] = {0, 1, 7, 8, 9, 15, 16, rs - 1, rs, 0, 8, 1};
    uint64_t version = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        assert_int_equal(fl_commit(r, &l, "rec", n ? data : NULL, n, 0, NULL), 0);
        version++;
        check_value(r, "rec", data, n, l.token);
        assert_int_equal(info_of(r, "rec").size, n);
        assert_int_equal(info_of(r, "rec").version, version);
        /* an exact-size buffer is enough */
        unsigned char exact[256];
        size_t len = 0;
        uint64_t fence = 0;
        assert_int_equal(fl_read(r, "rec", n ? exact : NULL, n, &len, &fence), 0);
        assert_int_equal(len, n);
        if (n)
            assert_memory_equal(exact, data, n);
    }
    /* data may be NULL only when len is 0 */
    assert_int_equal(fl_commit(r, &l, "rec", NULL, 1, 0, NULL), -EINVAL);
    /* one byte too many: -EMSGSIZE, nothing changes, the record is not created */
    assert_int_equal(fl_commit(r, &l, "rec", data, rs + 1, 0, NULL), -EMSGSIZE);
    assert_non_null(strstr(fl_last_error(), "200"));
    assert_int_equal(fl_commit(r, &l, "new-rec", data, rs + 1, 0, NULL), -EMSGSIZE);
    check_value(r, "rec", data, 1, l.token);
    assert_int_equal(info_of(r, "rec").version, version);
    unsigned char b[8];
    size_t len;
    uint64_t fence;
    assert_int_equal(fl_read(r, "new-rec", b, sizeof b, &len, &fence), -ENOENT);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    assert_int_equal(ri.record_size, rs);
    fl_close(r);
}

/* I9: -ENOSPC, with a message saying why, when the record table is full;
 * existing records keep working. */
static void test_record_table_full(void **state)
{
    (void)state;
    fl_region *r = fresh("full", 2, 64, 4, NULL);
    fl_lease l = take(r, "k");
    assert_int_equal(fl_commit(r, &l, "one", "1", 1, 0, NULL), 0);
    assert_int_equal(fl_commit(r, &l, "two", "2", 1, 0, NULL), 0);
    assert_int_equal(fl_commit(r, &l, "three", "3", 1, 0, NULL), -ENOSPC);
    assert_non_null(strstr(fl_last_error(), "record table full"));
    assert_int_equal(fl_commit_u64(r, &l, "four", 4, 0, NULL), -ENOSPC);
    unsigned char b[8];
    size_t len;
    uint64_t fence;
    assert_int_equal(fl_read(r, "three", b, sizeof b, &len, &fence), -ENOENT);
    fl_region_info ri;
    assert_int_equal(fl_region_info_get(r, &ri), 0);
    assert_int_equal(ri.records_used, 2);
    assert_int_equal(ri.record_capacity, 2);
    assert_int_equal(fl_commit(r, &l, "one", "11", 2, 0, NULL), 0);
    check_value(r, "one", "11", 2, l.token);
    check_value(r, "two", "2", 1, l.token);
    fl_close(r);
}

/* I9 I3: fl_read errors: -ENOENT, -ENOBUFS (nothing copied, *len set),
 * -EINVAL. */
static void test_read_errors(void **state)
{
    (void)state;
    fl_region *r = fresh("readerr", 4, 64, 4, NULL);
    unsigned char buf[64];
    size_t len = 99;
    uint64_t fence = 99;
    assert_int_equal(fl_read(r, "never", buf, sizeof buf, &len, &fence), -ENOENT);
    fl_lease l = take(r, "k");
    const char v[] = "twenty bytes of data";
    assert_int_equal(fl_commit(r, &l, "rec", v, 20, 0, NULL), 0);
    assert_int_equal(fl_read(r, "never", buf, sizeof buf, &len, &fence), -ENOENT);

    memset(buf, 0xAB, sizeof buf);
    len = 0;
    assert_int_equal(fl_read(r, "rec", buf, 19, &len, &fence), -ENOBUFS);
    assert_int_equal(len, 20);
    for (size_t i = 0; i < sizeof buf; i++)
        assert_int_equal(buf[i], 0xAB); /* nothing copied */
    len = 0;
    assert_int_equal(fl_read(r, "rec", NULL, 0, &len, &fence), -ENOBUFS);
    assert_int_equal(len, 20);
    assert_int_equal(fl_read(r, "rec", buf, 20, &len, &fence), 0);
    assert_memory_equal(buf, v, 20);

    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, NULL, &fence), -EINVAL);
    assert_int_equal(fl_read(r, "rec", buf, sizeof buf, &len, NULL), -EINVAL);
    assert_int_equal(fl_read(r, "rec", NULL, 8, &len, &fence), -EINVAL);
    assert_int_equal(fl_read(r, "", buf, sizeof buf, &len, &fence), -EINVAL);
    char longname[FL_KEY_MAX + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(fl_read(r, longname, buf, sizeof buf, &len, &fence), -EINVAL);
    assert_int_equal(fl_commit(r, &l, longname, "x", 1, 0, NULL), -EINVAL);
    assert_int_equal(fl_commit(r, &l, "", "x", 1, 0, NULL), -EINVAL);
    assert_int_equal(fl_commit(r, &l, NULL, "x", 1, 0, NULL), -EINVAL);
    assert_int_equal(fl_read(r, NULL, buf, sizeof buf, &len, &fence), -EINVAL);
    /* a name of exactly FL_KEY_MAX bytes is fine */
    longname[FL_KEY_MAX] = '\0';
    assert_int_equal(fl_commit(r, &l, longname, "y", 1, 0, NULL), 0);
    check_value(r, longname, "y", 1, l.token);
    fl_close(r);
}

/* I2 I9: a lease the region never issued is -EINVAL and changes nothing: it
 * can neither poison a record with a huge token nor create one. */
static void test_forged_lease(void **state)
{
    (void)state;
    const char *path;
    fl_region *r = fresh("forged", 4, 64, 4, &path);
    fl_lease l = take(r, "k");
    assert_int_equal(fl_commit(r, &l, "rec", "real", 4, 0, NULL), 0);
    fl_record_info before = info_of(r, "rec");

    fl_lease f = l;
    f.token = l.token + 1; /* the slot's next token: never issued */
    assert_int_equal(fl_commit(r, &f, "rec", "forged", 6, 0, NULL), -EINVAL);
    f.token = FL_TOKEN_MAX;
    assert_int_equal(fl_commit(r, &f, "rec", "forged", 6, 0, NULL), -EINVAL);
    assert_int_equal(fl_commit_u64(r, &f, "rec", 1, 0, NULL), -EINVAL);
    f.token = 0;
    assert_int_equal(fl_commit(r, &f, "rec", "forged", 6, 0, NULL), -EINVAL);
    f = l;
    f.slot = 12; /* within capacity, never handed out */
    assert_int_equal(fl_commit(r, &f, "rec", "forged", 6, 0, NULL), -EINVAL);
    f.slot = 0xFFFFFFFFu;
    assert_int_equal(fl_commit(r, &f, "rec", "forged", 6, 0, NULL), -EINVAL);
    /* a forged lease does not create records either */
    f = l;
    f.token = l.token + 100;
    assert_int_equal(fl_commit(r, &f, "brand-new", "forged", 6, 0, NULL), -EINVAL);
    unsigned char b[8];
    size_t len;
    uint64_t fence;
    assert_int_equal(fl_read(r, "brand-new", b, sizeof b, &len, &fence), -ENOENT);
    /* other bad arguments */
    assert_int_equal(fl_commit(r, &l, "rec", "x", 1, 0x80, NULL), -EINVAL);
    assert_int_equal(fl_commit(r, NULL, "rec", "x", 1, 0, NULL), -EINVAL);
    assert_int_equal(fl_commit(NULL, &l, "rec", "x", 1, 0, NULL), -EINVAL);

    check_value(r, "rec", "real", 4, l.token);
    fl_record_info after = info_of(r, "rec");
    assert_int_equal(after.accepted_token, before.accepted_token);
    assert_int_equal(after.version, before.version);
    assert_int_equal(after.commits, before.commits);
    /* the genuine lease still works, and its token is still the greatest */
    assert_int_equal(fl_commit(r, &l, "rec", "real-2", 6, 0, NULL), 0);
    check_value(r, "rec", "real-2", 6, l.token);

    /* a read-only handle can read but not commit */
    fl_region *ro = NULL;
    assert_int_equal(fl_open_readonly(path, &ro), 0);
    assert_int_equal(fl_commit(ro, &l, "rec", "x", 1, 0, NULL), -EINVAL);
    check_value(ro, "rec", "real-2", 6, l.token);
    fl_close(ro);
    fl_close(r);
}

/* I2 I3: the fenced-pointer helpers: 8 little-endian bytes, fenced like any
 * commit. */
static void test_u64_round_trip(void **state)
{
    (void)state;
    fl_region *r = fresh("u64", 4, 64, 4, NULL);
    fl_lease l = take(r, "k");
    uint64_t values[] = {0, 1, 0x0102030405060708ull, UINT64_MAX, FL_TOKEN_MAX, 52};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        uint64_t acc = 0, v = 1234, fence = 0;
        assert_int_equal(fl_commit_u64(r, &l, "ptr", values[i], 0, &acc), 0);
        assert_int_equal(acc, l.token);
        assert_int_equal(fl_read_u64(r, "ptr", &v, &fence), 0);
        assert_int_equal(v, values[i]);
        assert_int_equal(fence, l.token);
    }
    assert_int_equal(fl_commit_u64(r, &l, "ptr", 0x0102030405060708ull, 0, NULL), 0);
    unsigned char raw[16];
    size_t len = 0;
    uint64_t fence = 0;
    assert_int_equal(fl_read(r, "ptr", raw, sizeof raw, &len, &fence), 0);
    assert_int_equal(len, 8);
    const unsigned char le[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    assert_memory_equal(raw, le, 8);

    /* strict on the same token: rejected */
    uint64_t acc = 0;
    assert_int_equal(fl_commit_u64(r, &l, "ptr", 9, FL_COMMIT_STRICT, &acc), -ESTALE);
    assert_int_equal(acc, l.token);
    /* stale: rejected, pointer unchanged */
    assert_int_equal(fl_release(r, &l), 0);
    fl_lease l2 = take(r, "k");
    assert_int_equal(fl_commit_u64(r, &l2, "ptr", 77, 0, NULL), 0);
    assert_int_equal(fl_commit_u64(r, &l, "ptr", 66, 0, &acc), -ESTALE);
    assert_int_equal(acc, l2.token);
    uint64_t v = 0;
    assert_int_equal(fl_read_u64(r, "ptr", &v, &fence), 0);
    assert_int_equal(v, 77);
    assert_int_equal(fence, l2.token);

    /* not a pointer record: -EPROTO for other lengths, -ENOENT when absent */
    assert_int_equal(fl_commit(r, &l2, "blob", "seven b", 7, 0, NULL), 0);
    assert_int_equal(fl_read_u64(r, "blob", &v, &fence), -EPROTO);
    assert_int_equal(fl_commit(r, &l2, "blob", "nine byte", 9, 0, NULL), 0);
    assert_int_equal(fl_read_u64(r, "blob", &v, &fence), -EPROTO);
    assert_int_equal(fl_read_u64(r, "absent", &v, &fence), -ENOENT);
    assert_int_equal(fl_read_u64(r, "ptr", NULL, &fence), -EINVAL);
    fl_close(r);
}

/* ---- an idle process must not hold the pool (I4, fl_commit's -ENOSPC) ----
 * fl_commit documents -ENOSPC "when no commit buffer is free (all are current
 * values or in-flight commits)", and fencelockd's --spare-buffers are "for
 * commits in flight".  A process that committed and then went idle (or was
 * stopped for ever) has no commit in flight, so it must not make another
 * process's commit fail.  (Regression: each handle used to keep the buffer
 * its last commit replaced as a held spare, so one idle process exhausted
 * this pool.) */
static int idle_committer(void *arg, int in, int out)
{
    fl_region *r = rc_open(arg);
    fl_lease l;
    if (fl_acquire(r, "k", LEASE, 10 * (int64_t)TH_S, &l) != 0)
        return 1;
    int a = fl_commit(r, &l, "rec", "idle-1", 6, 0, NULL);
    int b = fl_commit(r, &l, "rec", "idle-2", 6, 0, NULL); /* replaces its own value */
    fl_release(r, &l);
    th_sendf(out, "done %d %d", a, b);
    th_expect(in, "exit", 60000); /* idle, handle open, no commit in flight */
    fl_close(r);
    return 0;
}

/* I4 */
static void test_idle_process_holds_no_buffer(void **state)
{
    (void)state;
    const char *path;
    /* one record, one buffer beyond it: room for exactly one commit in flight */
    fl_region *r = fresh("idle", 1, 64, 1, &path);
    th_child c;
    rc_child(&c, idle_committer, (void *)path);
    char buf[128];
    int a, b;
    assert_int_equal(sscanf(rc_recv(c.from_child, buf, sizeof buf, 20000), "done %d %d", &a, &b),
                     2);
    assert_int_equal(a, 0);
    assert_int_equal(b, 0);
    /* stopped for ever outside any commit, as far as the others can tell */
    assert_int_equal(kill(c.pid, SIGSTOP), 0);
    assert_true(th_wait_stopped(c.pid, 20000));

    fl_lease l = take(r, "k");
    int rc = fl_commit(r, &l, "rec", "other process", 13, 0, NULL);
    if (rc != 0)
        fprintf(stderr, "BUG: commit while another process idles: %s (%s)\n", fl_err_name(rc),
                fl_last_error());
    kill(c.pid, SIGCONT);
    th_send(c.to_child, "exit");
    assert_int_equal(rc_child_exit(&c, 20000), 0);
    assert_int_equal(rc, 0);
    check_value(r, "rec", "other process", 13, l.token);
    fl_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_token_and_strict),
        cmocka_unit_test(test_smaller_token_rejected_without_effect),
        cmocka_unit_test(test_other_key_is_exdev),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_record_table_full),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_forged_lease),
        cmocka_unit_test(test_u64_round_trip),
        cmocka_unit_test(test_idle_process_holds_no_buffer),
        cmocka_unit_test(test_commit_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
