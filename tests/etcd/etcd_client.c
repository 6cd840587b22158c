/* SPDX-License-Identifier: MIT */
/*
 * etcd_client.c - the etcd client's pieces without a cluster: the
 * region URI (every malformed form, every bad prefix byte, the reserved
 * segments that keep prefixes apart), strict base64, the untrusted-answer
 * accessors (wrong types, signs, huge numbers, bad base64), and the record
 * and marker formats.
 *
 * I9 (untrusted input: each gets a clear error, nothing crashes), I13 (the
 * etcd layout keeps every prefix's keys its own).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "etcd/etcd.h"
#include "shown.h"

/* I9 I13 */
static void test_uri_good(void **state)
{
    (void)state;
    struct fl__etcd_uri u;
    assert_int_equal(fl__etcd_uri_parse("etcd://127.0.0.1:2379/app", &u), 0);
    assert_int_equal(u.n, 1);
    assert_string_equal(u.ep[0].url, "http://127.0.0.1:2379");
    assert_string_equal(u.ep[0].name, "127.0.0.1:2379");
    assert_string_equal(u.prefix, "app");

    assert_int_equal(fl__etcd_uri_parse("etcd://a.example:1,b-2.example:65535,[::1]:3/x/y_z.1/",
                                        &u), 0);
    assert_int_equal(u.n, 3);
    assert_string_equal(u.ep[1].url, "http://b-2.example:65535");
    assert_string_equal(u.ep[2].url, "http://[::1]:3");
    assert_string_equal(u.prefix, "x/y_z.1"); /* the trailing slash is dropped */
    assert_true(fl__etcd_is_uri("etcd://x"));
    assert_true(fl__etcd_is_uri("etcds://x"));
    assert_false(fl__etcd_is_uri("/run/fencelock/region"));
    assert_false(fl__etcd_is_uri("etcdx://x"));

    /* TLS, a user, the query's files (escaped), in any order. */
    assert_int_equal(fl__etcd_uri_parse("etcds://wor%40ker@a:1,[::1]:2/app?cacert=/etc/ca.pem&"
                                        "key=/k%20ey&cert=/c&password-file=/run/pw", &u), 0);
    assert_true(u.tls);
    assert_int_equal(u.n, 2);
    assert_string_equal(u.ep[0].url, "https://a:1");
    assert_string_equal(u.ep[1].url, "https://[::1]:2");
    assert_string_equal(u.user, "wor@ker");
    assert_string_equal(u.prefix, "app");
    assert_string_equal(u.cacert, "/etc/ca.pem");
    assert_string_equal(u.cert, "/c");
    assert_string_equal(u.key, "/k ey");
    assert_string_equal(u.password_file, "/run/pw");
    assert_int_equal(fl__etcd_uri_parse("etcd://w@h:1/app/?password-file=pw", &u), 0);
    assert_false(u.tls);
    assert_string_equal(u.user, "w");
    assert_string_equal(u.prefix, "app");
    assert_string_equal(u.password_file, "pw");
    assert_string_equal(u.cacert, "");
}

/* I14: a password written in the URI is refused, and no message shows it. */
static void test_uri_password_never_shown(void **state)
{
    (void)state;
    struct fl__etcd_uri u;
    static const char *const bad[] = {
        "etcds://worker:S3cr3t@h:1/app",
        "etcd://worker:S3cr3t@h:1,h:2/app?cacert=/x",
        "etcds://worker:S3cr3t@h:1/",
        "etcds://worker:S3cr3t@h:99999/app",
        "etcds://:S3cr3t@h:1/app",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(fl__etcd_uri_parse(bad[i], &u), -EINVAL);
        if (strstr(fl_last_error(), "S3cr3t"))
            fail_msg("'%s': the message shows the password: %s", bad[i], fl_last_error());
        assert_non_null(strstr(fl_last_error(), "***"));
    }
    assert_int_equal(fl__etcd_uri_parse("etcds://h:1/app?password=S3cr3t", &u), -EINVAL);
    assert_null(strstr(fl_last_error(), "S3cr3t"));
    assert_non_null(strstr(fl_last_error(), "password-file"));
    /* A password holding what ends a userinfo elsewhere is masked whole;
     * so is a query key that starts with "password", in any case. */
    static const char *const hold[][2] = {
        {"etcds://w:pw@h:1/p?cacert=/a", "etcds://w:***@h:1/p?cacert=/a"},
        {"etcds://worker:Ab/cD+ef@127.0.0.1:41001/app", "etcds://worker:***@127.0.0.1:41001/app"},
        {"etcds://worker:pa?ss@h:1/app", "etcds://worker:***@h:1/app"},
        {"etcds://worker:pa#ss@h:1/app", "etcds://worker:***@h:1/app"},
        {"etcds://worker:p@ss@h:1,[::1]:2/app", "etcds://worker:***@h:1,[::1]:2/app"},
        {"etcds://u:pw@h_1:2379/p", "etcds://u:***@h_1:2379/p"},
        {"etcds://u:pw@h:2379,h_2:1/p", "etcds://u:***@h:2379,h_2:1/p"},
        {"etcds://u:pw@/p", "etcds://u:***@/p"},
        {"etcds://u:pw@h:2379?x=1", "etcds://u:***@h:2379?x=1"},
        {"etcds://u:pw@h:2379#f", "etcds://u:***@h:2379#f"},
        {"etcds://u:pw@h:2379 /p", "etcds://u:***@h:2379 /p"},
        {"etcds://u:pw@h%31:2379/p", "etcds://u:***@h%31:2379/p"},
        {"etcds://u:Ab/cD@h_1:1/p", "etcds://u:***@h_1:1/p"},
        {"etcds:/u:pw@h_1:2379/p", "etcds:***@h_1:2379/p"},
        {"etcds://h:1/app?cacert=/x&Password=hunter2", "etcds://h:1/app?cacert=/x&Password***"},
        {"etcds://h:1/app?password%3Dhunter2&key=/k", "etcds://h:1/app?password***"},
        {"etcds://h:1/app?password=x#hunter2", "etcds://h:1/app?password***"},
        {"etcds://h:1/app?password=x&hunter2", "etcds://h:1/app?password***"},
        {"etcds://h:1/app? password=hunter2", "etcds://h:1/app? password***"},
        {"etcd://h/p?password=hunter2&x=a@b", "etcd://h/p?password***"},
        {"etcds:/worker:s3cret@h:1/app", "etcds:***@h:1/app"},
        {" etcds://worker:s3cret@h:1/app", " etcds://worker:***@h:1/app"},
        {"etcds://h:1/p?password-file=/pw", "etcds://h:1/p?password-file=/pw"},
        {"etcds://h:1/p", "etcds://h:1/p"},
    };
    char m[128];
    for (size_t i = 0; i < sizeof hold / sizeof hold[0]; i++) {
        fl__region_shown(hold[i][0], m, sizeof m);
        if (strcmp(m, hold[i][1]) != 0)
            fail_msg("'%s' shown as '%s', not '%s'", hold[i][0], m, hold[i][1]);
    }
    /* And the parser refuses each etcd URI of them without a fragment of it. */
    static const char *const secrets[] = {"pw", "Ab/cD+ef", "Ab/cD", "pa?ss", "pa#ss", "p@ss",
                                          "hunter2", "s3cret"};
    for (size_t i = 0; i < sizeof hold / sizeof hold[0] - 2; i++) {
        if (fl__etcd_uri_parse(hold[i][0], &u) != -EINVAL)
            fail_msg("'%s' parsed", hold[i][0]);
        for (size_t k = 0; k < sizeof secrets / sizeof secrets[0]; k++)
            if (strstr(fl_last_error(), secrets[k]) && strstr(hold[i][0], secrets[k]))
                fail_msg("'%s': the message shows '%s': %s", hold[i][0], secrets[k],
                         fl_last_error());
    }
    /* Unambiguous URIs with an '@' in a query's file still parse. */
    assert_int_equal(fl__etcd_uri_parse("etcds://h:1/p?cacert=/x@y/ca.pem", &u), 0);
    assert_string_equal(u.cacert, "/x@y/ca.pem");
    assert_int_equal(fl__etcd_uri_parse("etcds://w@h:1/p?cacert=/x@y/ca.pem", &u), 0);
    assert_string_equal(u.user, "w");
}

/* I9 */
static void test_uri_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "etcd://",                       /* nothing */
        "etcd://127.0.0.1:2379",         /* no /PREFIX */
        "etcd://127.0.0.1:2379/",        /* empty prefix */
        "etcd:///app",                   /* no endpoint */
        "etcd://127.0.0.1/app",          /* no port */
        "etcd://127.0.0.1:/app",         /* empty port */
        "etcd://127.0.0.1:0/app",        /* port 0 */
        "etcd://127.0.0.1:65536/app",    /* port too big */
        "etcd://127.0.0.1:12x/app",      /* not a number */
        "etcd://:2379/app",              /* no host */
        "etcd://h:1,,h:2/app",           /* empty endpoint */
        "etcd://h:1,/app",               /* trailing comma */
        "etcd://us:er@h:1/app",          /* a password */
        "etcd://u@v@h:1/app",            /* two '@' */
        "etcd://@h:1/app",               /* an empty user */
        "etcd://u%0a@h:1/app",           /* a control byte in the user */
        "etcd://u%4@h:1/app",            /* a bad escape */
        "etcd://u!@h:1/app",             /* a reserved byte in the user */
        "etcd://h:1/app?",               /* an empty query */
        "etcd://h:1/app?cacert=/x",      /* TLS files on a plain URI */
        "etcds://h:1/app?cacert=",       /* an empty file name */
        "etcds://h:1/app?cacert",        /* no value */
        "etcds://h:1/app?cacert=/a&cacert=/b", /* twice */
        "etcds://h:1/app?cacert=/a&",    /* an empty pair */
        "etcds://h:1/app?nosuch=1",      /* an unknown key */
        "etcds://h:1/app?password=x",    /* a password in the query */
        "etcds://h:1/app?key=%zz",       /* a bad escape */
        "etcds://h:1/app?key=a%00b",     /* NUL */
        "etcds://h:1/app#frag",          /* a fragment */
        "etcds://",                      /* nothing */
        "etcd://h:1?x=1/app",            /* query */
        "etcd://h%41:1/app",             /* escapes */
        "etcd://h_x:1/app",              /* '_' in a host */
        "etcd://[zz]:1/app",             /* not IPv6 */
        "etcd://[::1]/app",              /* IPv6 without a port */
        "http://127.0.0.1:2379/app",     /* another scheme */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct fl__etcd_uri u;
        int err = fl__etcd_uri_parse(bad[i], &u);
        if (err != -EINVAL)
            fail_msg("'%s' parsed as %d, not -EINVAL", bad[i], err);
        assert_non_null(strstr(fl_last_error(), "etcd") ? "" : NULL);
    }
    char many[1024] = "etcd://";
    for (int i = 0; i < FL__ETCD_MAX_ENDPOINTS + 1; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sh:%d", i ? "," : "", i + 1);
    strcat(many, "/p");
    struct fl__etcd_uri u;
    assert_int_equal(fl__etcd_uri_parse(many, &u), -EINVAL);
    char longhost[400];
    memset(longhost, 'a', sizeof longhost);
    snprintf(longhost, sizeof longhost, "etcd://%0300d:1/p", 0);
    assert_int_equal(fl__etcd_uri_parse(longhost, &u), -EINVAL);
}

/* I9 I13 */
static void test_prefix_bytes(void **state)
{
    (void)state;
    struct fl__etcd_uri u;
    static const char *const bad[] = {
        "a b", "a\tb", "a\"b", "a*b", "a:b", "a\\b", "a//b", "/a", "a/./b", "a/../b",
        "lock", "a/last", "rec/b", "a/epoch/b", ".", "..", "caf\xc3\xa9", "a\x7f",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char uri[256];
        snprintf(uri, sizeof uri, "etcd://127.0.0.1:1/%s", bad[i]);
        int err = fl__etcd_uri_parse(uri, &u);
        if (err != -EINVAL)
            fail_msg("prefix '%s' parsed as %d, not -EINVAL", bad[i], err);
        assert_non_null(strstr(fl_last_error(), "PREFIX"));
    }
    char longp[400] = "etcd://h:1/";
    memset(longp + strlen(longp), 'p', 200);
    longp[11 + 200] = '\0';
    assert_int_equal(fl__etcd_uri_parse(longp, &u), -EINVAL);
    /* Allowed: the layout's names inside a segment, dots and dashes. */
    assert_int_equal(fl__etcd_uri_parse("etcd://h:1/locks/lastly/.hidden/a-b_c", &u), 0);
}

/* I9 */
static void test_base64(void **state)
{
    (void)state;
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    for (size_t n = 0; n <= sizeof all; n++) {
        char *t = fl__b64_encode(all, n);
        assert_non_null(t);
        assert_int_equal(strlen(t), (n + 2) / 3 * 4);
        unsigned char *back = NULL;
        size_t len = 0;
        assert_int_equal(fl__b64_decode(t, strlen(t), &back, &len), 0);
        assert_int_equal(len, n);
        assert_memory_equal(back, all, n);
        free(back);
        free(t);
    }
    static const char *const bad[] = {"A", "AB", "ABC", "A===", "AB=C", "A B=", "ab!d",
                                      "AB==AB==", "AB=" /* length */, "AR==" /* bits */};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char *out = (unsigned char *)"x";
        size_t len = 1;
        int err = fl__b64_decode(bad[i], strlen(bad[i]), &out, &len);
        if (err != -EINVAL)
            fail_msg("'%s' decoded (%d)", bad[i], err);
        assert_null(out);
    }
}

static json_t *parse(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

/* I9 */
static void test_accessors(void **state)
{
    (void)state;
    struct fl__etcd_reply rp = {.op = "txn", .endpoint = "10.0.0.1:2379"};
    uint64_t v = 7;
    json_t *j = parse("{\"a\":\"42\",\"b\":17,\"c\":\"-1\",\"d\":\"9223372036854775808\","
                      "\"e\":{},\"f\":\"12a\",\"g\":\"\",\"h\":null,\"i\":\"null\","
                      "\"t\":true,\"s\":\"x\",\"o\":{\"k\":1},\"arr\":[1]}");
    assert_int_equal(fl__etcd_u64(&rp, j, "a", &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(fl__etcd_u64(&rp, j, "b", &v), 0);
    assert_int_equal(v, 17);
    assert_int_equal(fl__etcd_u64(&rp, j, "missing", &v), 0); /* absent: zero */
    assert_int_equal(v, 0);
    assert_int_equal(fl__etcd_u64(&rp, j, "h", &v), 0);
    assert_int_equal(v, 0);
    static const char *const bad[] = {"c", "d", "e", "f", "g", "i", "t"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(fl__etcd_u64(&rp, j, bad[i], &v), -EPROTO);
        assert_non_null(strstr(fl_last_error(), "10.0.0.1:2379"));
        assert_non_null(strstr(fl_last_error(), bad[i]));
    }
    bool b = false;
    assert_int_equal(fl__etcd_bool(&rp, j, "t", &b), 0);
    assert_true(b);
    assert_int_equal(fl__etcd_bool(&rp, j, "s", &b), -EPROTO);
    json_t *o = NULL;
    assert_int_equal(fl__etcd_obj(&rp, j, "o", &o), 0);
    assert_non_null(o);
    assert_int_equal(fl__etcd_obj(&rp, j, "arr", &o), -EPROTO);
    assert_int_equal(fl__etcd_arr(&rp, j, "o", &o), -EPROTO);
    json_decref(j);

    /* kvs: bad base64, a live key without a create revision, too long */
    struct fl__etcd_kv kv;
    j = parse("{\"key\":\"!!\",\"create_revision\":\"1\",\"mod_revision\":\"1\"}");
    assert_int_equal(fl__etcd_kv_parse(&rp, j, 100, &kv), -EPROTO);
    json_decref(j);
    j = parse("{\"key\":\"YQ==\",\"value\":\"YQ==\"}");
    assert_int_equal(fl__etcd_kv_parse(&rp, j, 100, &kv), -EPROTO);
    json_decref(j);
    j = parse("{\"key\":\"YQ==\",\"value\":\"YWFhYWFhYWE=\",\"create_revision\":\"2\","
              "\"mod_revision\":\"3\"}");
    assert_int_equal(fl__etcd_kv_parse(&rp, j, 4, &kv), -EPROTO);
    assert_int_equal(fl__etcd_kv_parse(&rp, j, 100, &kv), 0);
    assert_int_equal(kv.value_len, 8);
    assert_int_equal(kv.create_revision, 2);
    fl__etcd_kv_free(&kv);
    json_decref(j);

    /* a Txn answer whose responses are of the wrong kind */
    j = parse("{\"succeeded\":true,\"responses\":[{\"response_range\":{}}]}");
    assert_int_equal(fl__etcd_txn_resp(&rp, j, 0, "response_put", &o), -EPROTO);
    assert_int_equal(fl__etcd_txn_resp(&rp, j, 1, "response_range", &o), -EPROTO);
    assert_int_equal(fl__etcd_txn_resp(&rp, j, 0, "response_range", &o), 0);
    json_decref(j);
    j = parse("{\"kvs\":[{\"key\":\"YQ==\",\"create_revision\":\"1\",\"mod_revision\":\"1\"},"
              "{\"key\":\"Yg==\",\"create_revision\":\"1\",\"mod_revision\":\"1\"}]}");
    assert_int_equal(fl__etcd_range_first(&rp, j, 10, &kv), -EPROTO); /* two for one key */
    json_decref(j);
}

/* I9 */
static void test_values(void **state)
{
    (void)state;
    struct fl__etcd_reply rp = {.op = "range", .endpoint = "e:1"};
    uint64_t t;
    struct fl__etcd_record rec;
    const char ok[] = "job\0" "00000001099511627777" "00000000000000000042" "data";
    assert_int_equal(fl__etcd_record_parse(&rp, (const unsigned char *)ok, sizeof ok - 1, &rec),
                     0);
    assert_int_equal(rec.key_len, 3);
    assert_int_equal(rec.token, 1099511627777ull);
    assert_int_equal(rec.seq, 42);
    assert_int_equal(rec.data_off, 44);
    static const struct { const char *v; size_t n; } bad[] = {
        {"job", 3},                                                    /* no NUL */
        {"\0" "00000000000000000001" "00000000000000000000", 41},      /* empty key */
        {"job\0" "00000000000000000001" "0000000000000000000", 43},    /* 19 digits */
        {"job\0" "00000000000000000001", 24},                          /* no sequence */
        {"job\0" "0000000000000000000x" "00000000000000000000", 44},   /* not a digit */
        {"job\0" "00000000000000000001" "0000000000000000000x", 44},   /* not a digit */
        {"job\0" "00000000000000000000" "00000000000000000000", 44},   /* token 0 */
        {"job\0" "99999999999999999999" "00000000000000000000", 44},   /* beyond int63 */
        {"job\0" "00000000000000000001" "99999999999999999999", 44},   /* beyond int63 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(fl__etcd_record_parse(&rp, (const unsigned char *)bad[i].v, bad[i].n,
                                               &rec), -EPROTO);

    struct fl__etcd_kv kv = {.key = (unsigned char *)"p/last/k", .key_len = 8, .mod_revision = 5};
    uint64_t epoch;
    static const char *const marks_bad[] = {"", "q", "q000001", "q00000001", "q000000a",
                                            "q0000000", "q9999999", "Q0000001", "q0000001 "};
    for (size_t i = 0; i < sizeof marks_bad / sizeof marks_bad[0]; i++) {
        kv.value = (unsigned char *)marks_bad[i];
        kv.value_len = strlen(marks_bad[i]);
        if (fl__etcd_mark_parse(&rp, &kv, &epoch, &t) != -EPROTO)
            fail_msg("marker '%s' parsed", marks_bad[i]);
    }
    /* the layout before 0.2 is named as such, not read as this one's */
    kv.value = (unsigned char *)"0000003 H";
    kv.value_len = 9;
    assert_int_equal(fl__etcd_mark_parse(&rp, &kv, &epoch, &t), -ENOMSG);
    kv.value = (unsigned char *)"q0000003";
    kv.value_len = 8;
    assert_int_equal(fl__etcd_mark_parse(&rp, &kv, &epoch, &t), 0);
    assert_int_equal(epoch, 3);
    assert_int_equal(t, (3ull << 40) | 5);

    /* queue entries: PREFIX/lock/KEY NUL ID */
    struct fl__etcd_keys k = {.q_len = 9};
    memcpy(k.q0, "p/lock/k\0", 9);
    char key[64];
    memcpy(key, "p/lock/k\0" "0123456789abcdef0123456789abcdef", 41);
    struct fl__etcd_kv ekv = {.key = (unsigned char *)key, .key_len = 41, .create_revision = 7,
                              .mod_revision = 9, .lease = 42};
    struct fl__etcd_entry en;
    ekv.value = (unsigned char *)"W 0000002 4242 host-a";
    ekv.value_len = strlen((char *)ekv.value);
    assert_int_equal(fl__etcd_entry_parse(&rp, &k, &ekv, &en), 0);
    assert_int_equal(en.state, 'W');
    assert_int_equal(en.epoch, 2);
    assert_int_equal(en.pid, 4242);
    assert_int_equal(en.token, (2ull << 40) | 7);
    assert_string_equal(en.id, "0123456789abcdef0123456789abcdef");
    ekv.value = (unsigned char *)"D 0000001 00000001099511627777";
    ekv.value_len = 30;
    assert_int_equal(fl__etcd_entry_parse(&rp, &k, &ekv, &en), 0);
    assert_int_equal(en.state, 'D');
    assert_int_equal(en.token, 1099511627777ull);
    static const char *const entries_bad[] = {
        "", "W", "W 0000002", "W 0000002 ", "W 0000002 x h", "W 0000000 1 h",
        "W 8388608 1 h", "W 0000002 99999999999 h", "X 0000002 1 h", "W0000002 1 h",
        "R 0000001 1", "R 0000001 0000000000000000000x", "R 0000002 00000001099511627777",
        "R 0000001 00000000000000000000", "R 0000001 000000010995116277770"};
    for (size_t i = 0; i < sizeof entries_bad / sizeof entries_bad[0]; i++) {
        ekv.value = (unsigned char *)entries_bad[i];
        ekv.value_len = strlen(entries_bad[i]);
        if (fl__etcd_entry_parse(&rp, &k, &ekv, &en) != -EPROTO)
            fail_msg("entry '%s' parsed", entries_bad[i]);
    }
    /* a key outside the queue, or without a well-formed ID */
    ekv.value = (unsigned char *)"W 0000002 4242 host-a";
    ekv.value_len = strlen((char *)ekv.value);
    static const char *const keys_bad[] = {"p/lock/j\0" "0123456789abcdef0123456789abcdef",
                                           "p/lock/k\0" "0123456789ABCDEF0123456789abcdef",
                                           "p/lock/k\0" "0123456789abcdef0123456789abcde/"};
    for (size_t i = 0; i < sizeof keys_bad / sizeof keys_bad[0]; i++) {
        ekv.key = (unsigned char *)keys_bad[i];
        assert_int_equal(fl__etcd_entry_parse(&rp, &k, &ekv, &en), -EPROTO);
    }
    ekv.key = (unsigned char *)key;
    ekv.key_len = 40; /* an ID one digit short */
    assert_int_equal(fl__etcd_entry_parse(&rp, &k, &ekv, &en), -EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uri_good),     cmocka_unit_test(test_uri_malformed),
        cmocka_unit_test(test_uri_password_never_shown),
        cmocka_unit_test(test_prefix_bytes), cmocka_unit_test(test_base64),
        cmocka_unit_test(test_accessors),    cmocka_unit_test(test_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
