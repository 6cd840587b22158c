/* SPDX-License-Identifier: MIT */
/*
 * cli_status_skipped.c - `fencelock status` says what it does not list.
 *
 * A lock slot or record in use whose key (name) is not published - abandoned
 * by a creator that lost a race, or corrupt - is not listed; the header's
 * count of keys in use still includes it.  The tool must say how many it
 * left out and why, in the tables, in the JSON document ("skipped") and in
 * the --watch view, instead of a silent gap (I12: what cannot be vouched for
 * is reported, not served).
 *
 * INTERNAL: the test creates the region with fl__test_region_create_ready, uses it
 * through the public API, then scribbles on its own writable mapping: the
 * published key of one lock slot and of one record is erased, and the
 * tables' counters of slots in use are raised past the published ones (as
 * slots handed out and never published).  The tool runs as its own process.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_util.h"
#include "harness.h"
#include "shm/shm.h"

static const struct fl__params params = {.locks = 64, .records = 8, .record_size = 64,
                                         .clients = 8, .spare_buffers = 4};

#define NO_KEY_LOCKS                                                                          \
    "no published key (abandoned by a creator that lost a race, or corrupt)"
#define NO_NAME_RECORDS                                                                       \
    "no published name (abandoned by a creator that lost a race, or corrupt)"

static void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

static void assert_not_contains(const char *text, const char *needle)
{
    if (strstr(text, needle))
        fail_msg("did not expect \"%s\" in:\n%s", needle, text);
}

static void assert_json(const char *json, const char *want, const char *expr)
{
    char *got = json_eval(json, expr);
    if (strcmp(got, want) != 0)
        fail_msg("%s is %s, want %s; document:\n%s", expr, got, want, json);
    free(got);
}

/* `fencelock status ARGS`: must succeed with nothing on stderr. */
static char *status(const char *const *args)
{
    run_result r;
    run_tool(&r, NULL, args);
    if (r.status != 0)
        fail_msg("status exited %d: %s", r.status, r.err);
    assert_string_equal(r.err, "");
    free(r.err);
    return r.out;
}

/* A region with keys k/0..k/3 (k/0 fencing records rec/a and rec/b); the
 * open handle is returned for scribbling. */
static fl_region *make_region(const char *path)
{
    assert_int_equal(fl__test_region_create_ready(path, &params), 0);
    fl_region *r;
    int rc = fl_open(path, &r);
    if (rc != 0)
        fail_msg("fl_open: %s", fl_last_error());
    for (int i = 3; i >= 0; i--) { /* k/0 last: its lease commits below */
        char key[16];
        snprintf(key, sizeof key, "k/%d", i);
        fl_lease l;
        assert_int_equal(fl_acquire(r, key, 10 * TH_S, 0, &l), 0);
        if (i == 0) {
            assert_int_equal(fl_commit(r, &l, "rec/a", "a", 1, 0, NULL), 0);
            assert_int_equal(fl_commit(r, &l, "rec/b", "b", 1, 0, NULL), 0);
        }
        assert_int_equal(fl_release(r, &l), 0);
    }
    return r;
}

/* The slot index of the lock (record) named name. */
static uint32_t lock_index(fl_region *r, const char *name)
{
    fl_lock_info info;
    for (uint32_t i = 0; fl_lock_info_get(r, i, &info) != -ERANGE; i++)
        if (fl_lock_info_get(r, i, &info) == 0 && strcmp(info.key, name) == 0)
            return i;
    fail_msg("no lock %s", name);
    return 0;
}

static uint32_t record_index(fl_region *r, const char *name)
{
    fl_record_info info;
    for (uint32_t i = 0; fl_record_info_get(r, i, &info) != -ERANGE; i++)
        if (fl_record_info_get(r, i, &info) == 0 && strcmp(info.name, name) == 0)
            return i;
    fail_msg("no record %s", name);
    return 0;
}

/* Unpublish k/1 and rec/b, and hand out 3 lock slots and 1 record slot that
 * are never published: 7 lock slots in use, 3 listed; 3 records, 1 listed. */
static void scribble(fl_region *r)
{
    fl__slot_at(fl__shm_of(r), lock_index(r, "k/1"))->key.len = 0;
    fl__shm_of(r)->records[record_index(r, "rec/b")].key.len = 0;
    atomic_fetch_add(&fl__shm_of(r)->hdr->next_lock, 3);
    atomic_fetch_add(&fl__shm_of(r)->hdr->next_record, 1);
}

/* I12 */
static void test_nothing_skipped(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("clean.region"));
    fl_region *r = make_region(path);
    char *out = status((const char *const[]){"status", "-r", path, NULL});
    assert_not_contains(out, "not listed");
    free(out);
    char *json = status((const char *const[]){"status", "-r", path, "--json", NULL});
    assert_json(json,
                "{\"locks\": 0, \"records\": 0, \"reasons\": {\"locks\": {\"no_published_key\": 0, "
                "\"corrupt\": 0}, \"records\": {\"no_published_key\": 0, \"corrupt\": 0}}}",
                "d['skipped']");
    free(json);
    fl_close(r);
}

/* I12 */
static void test_tables_say_what_is_skipped(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("skip.region"));
    fl_region *r = make_region(path);
    scribble(r);

    char *out = status((const char *const[]){"status", "-r", path, NULL});
    assert_contains(out, "Locks:        7 of 64 keys in use");
    assert_contains(out, "\n  4 of 7 lock slots not listed: " NO_KEY_LOCKS "\n");
    assert_contains(out, "\n  2 of 3 record slots not listed: " NO_NAME_RECORDS "\n");
    /* under its own table: the lock line before "Records", the record line after */
    assert_true(strstr(out, "lock slots not listed") < strstr(out, "\nRecords\n"));
    assert_true(strstr(out, "record slots not listed") > strstr(out, "\nRecords\n"));
    char *f[16];
    int n = table_row(out, "Locks", 0, "k/1", f, 16);
    assert_int_equal(n, 0);
    n = table_row(out, "Locks", 0, "k/2", f, 16);
    assert_true(n > 0);
    free_fields(f, n);
    free(out);

    /* region-wide: --prefix does not hide the count */
    out = status((const char *const[]){"status", "-r", path, "--prefix", "k/3", NULL});
    assert_contains(out, "\n  4 of 7 lock slots not listed: " NO_KEY_LOCKS "\n");
    free(out);
    fl_close(r);
}

/* I12 */
static void test_json_says_what_is_skipped(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("json.region"));
    fl_region *r = make_region(path);
    scribble(r);
    char *json = status((const char *const[]){"status", "-r", path, "--json", NULL});
    assert_json(json, "[7, 3, 3, 1]",
                "[d['region']['locks_used'], len(d['locks']), d['region']['records_used'], "
                "len(d['records'])]");
    assert_json(json,
                "{\"locks\": 4, \"records\": 2, \"reasons\": {\"locks\": {\"no_published_key\": 4, "
                "\"corrupt\": 0}, \"records\": {\"no_published_key\": 2, \"corrupt\": 0}}}",
                "d['skipped']");
    free(json);
    fl_close(r);
}

/* I12 */
static void test_watch_says_what_is_skipped(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", th_path("watch.region"));
    fl_region *r = make_region(path);
    scribble(r);
    char *out =
        status((const char *const[]){"status", "-r", path, "--watch", "50ms", "--count", "1",
                                     NULL});
    assert_contains(out, "\nnot listed:  4 of 7 lock slots (no published key)  2 of 3 record "
                         "slots (no published name)\n");
    free(out);
    char *json = status((const char *const[]){"status", "-r", path, "--watch", "50ms", "--count",
                                              "1", "--json", NULL});
    assert_json(json, "[4, 2]", "[d['skipped']['locks'], d['skipped']['records']]");
    free(json);
    fl_close(r);
}

static int need_python(void **state)
{
    (void)state;
    if (!have_python3())
        skip();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_nothing_skipped, need_python),
        cmocka_unit_test_setup(test_tables_say_what_is_skipped, need_python),
        cmocka_unit_test_setup(test_json_says_what_is_skipped, need_python),
        cmocka_unit_test_setup(test_watch_says_what_is_skipped, need_python),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
