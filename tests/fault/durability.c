/* SPDX-License-Identifier: MIT */
/*
 * durability.c - tokens never go backwards (I1) across supervisor restarts,
 * SIGKILL of everything, a simulated host crash, and a reboot (I11); corrupt
 * files are refused and left untouched (I9).
 *
 * Real fencelockd processes, real client processes, real SIGKILL.  A reboot is
 * simulated through FENCELOCK_TEST_BOOT_ID_FILE (read by the library and the
 * supervisor instead of /proc/sys/kernel/random/boot_id).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "shm/shm.h"

#define LEASE (60ull * TH_S)

static uint64_t acquire_release(const char *region, const char *key)
{
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease l;
    int err = fl_acquire(r, key, LEASE, 5 * (int64_t)TH_S, &l);
    if (err)
        fail_msg("acquire %s: %s (%s)", key, fl_err_name(err), fl_last_error());
    assert_int_equal(fl_release(r, &l), 0);
    fl_close(r);
    return l.token;
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp --sparse=never '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

static uint64_t file_sum(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    uint64_t h = 1469598103934665603ull;
    unsigned char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
    close(fd);
    return h;
}

/* I1: a clean stop and a SIGKILL of the supervisor, then restarts. */
static void test_restart_clean_and_killed(void **state)
{
    (void)state;
    const char *region = strdup(th_path("restart"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    uint64_t t1 = acquire_release(region, "k");
    assert_int_equal(FL_TOKEN_EPOCH(t1), 1);
    int st = th_daemon_stop(&d, SIGTERM);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_true(th_daemon_log_wait(&d, "\"last_run\":\"clean_shutdown\"", 1, 5000));
    uint64_t t2 = acquire_release(region, "k");
    assert_true(t2 > t1);
    th_daemon_stop(&d, SIGKILL);

    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_true(th_daemon_log_wait(&d, "\"last_run\":\"unclean_shutdown\"", 1, 5000));
    uint64_t t3 = acquire_release(region, "k");
    assert_true(t3 > t2);
    assert_true(FL_TOKEN_EPOCH(t3) > FL_TOKEN_EPOCH(t2));
    th_daemon_stop(&d, SIGKILL);
    free((void *)region);
}

struct hammer {
    const char *region;
    int keys;
};

/* Acquire keys round-robin forever, writing each token to the parent. */
static int hammer_child(void *arg, int in, int out)
{
    (void)in;
    struct hammer *h = arg;
    fl_region *r;
    if (fl_open(h->region, &r) != 0)
        return 1;
    char line[64];
    for (unsigned i = 0;; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%u", i % (unsigned)h->keys);
        fl_lease l;
        if (fl_acquire(r, key, LEASE, FL_WAIT_FOREVER, &l) != 0)
            continue; /* the supervisor is being killed around us: keep going */
        fl_release(r, &l); /* before the write: a full pipe must not hold the key */
        int n = snprintf(line, sizeof line, "%s %llu\n", key, (unsigned long long)l.token);
        if (write(out, line, (size_t)n) != n)
            return 0;
    }
}

/* Read everything the children wrote so far; keep the greatest token per key. */
static void drain(int fd, uint64_t *max, int keys, int want_lines)
{
    int got = 0;
    char buf[128];
    while (got < want_lines && th_recv(fd, buf, sizeof buf, 10000) == 0) {
        unsigned k;
        unsigned long long t;
        if (sscanf(buf, "k%u %llu", &k, &t) == 2 && k < (unsigned)keys && t > max[k])
            max[k] = t;
        got++;
    }
    assert_int_equal(got, want_lines);
}

/* I1: the host-crash simulation.  The copy of the region taken while clients
 * acquire is "what reached the disk"; everything is killed, the copy is put
 * back, and everything starts again. */
static void test_host_crash_revert(void **state)
{
    (void)state;
    enum { KEYS = 4 };
    const char *region = strdup(th_path("crash"));
    const char *snapshot = strdup(th_path("crash.snapshot"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    struct hammer h = {region, KEYS};
    th_child a, b;
    assert_int_equal(th_child_start(&a, hammer_child, &h), 0);
    assert_int_equal(th_child_start(&b, hammer_child, &h), 0);
    uint64_t max[KEYS] = {0};
    drain(a.from_child, max, KEYS, 200);
    copy_file(region, snapshot); /* the disk lags behind ... */
    drain(a.from_child, max, KEYS, 1000);
    /* ... while tokens move on, even into a new epoch the snapshot has never
     * seen: only the durable state file knows of it. */
    th_daemon_stop(&d, SIGKILL);
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    uint64_t newest = 0;
    for (int lines = 0; FL_TOKEN_EPOCH(newest) < 2 && lines < 1000000; lines += 100) {
        drain(a.from_child, max, KEYS, 100); /* past what the pipe held before */
        for (int k = 0; k < KEYS; k++)
            newest = max[k] > newest ? max[k] : newest;
    }
    assert_int_equal(FL_TOKEN_EPOCH(newest), 2);
    drain(b.from_child, max, KEYS, 2000);
    /* Everything dies at once: clients, then the supervisor, no clean stop. */
    kill(a.pid, SIGKILL);
    kill(b.pid, SIGKILL);
    th_daemon_stop(&d, SIGKILL);
    drain(a.from_child, max, KEYS, 0);
    th_child_wait(&a, 5000);
    th_child_wait(&b, 5000);
    copy_file(snapshot, region);

    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    for (int k = 0; k < KEYS; k++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        uint64_t t = acquire_release(region, key);
        if (t <= max[k])
            fail_msg("key %s: token %llu after the crash, but %llu was issued before", key,
                     (unsigned long long)t, (unsigned long long)max[k]);
    }
    th_daemon_stop(&d, SIGKILL);
    free((void *)region);
    free((void *)snapshot);
}

static void write_boot_id(const char *path, const char *id)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", id);
    fclose(f);
}

struct holder {
    const char *region;
};

static int hold_child(void *arg, int in, int out)
{
    (void)in;
    struct holder *h = arg;
    fl_region *r;
    if (fl_open(h->region, &r) != 0)
        return 1;
    fl_lease l;
    if (fl_acquire(r, "held", LEASE, 0, &l) != 0)
        return 2;
    char line[64];
    int n = snprintf(line, sizeof line, "%llu\n", (unsigned long long)l.token);
    if (write(out, line, (size_t)n) != n)
        return 3;
    pause();
    return 0;
}

static int wait_child(void *arg, int in, int out)
{
    (void)in;
    (void)out;
    struct holder *h = arg;
    fl_region *r;
    if (fl_open(h->region, &r) != 0)
        return 1;
    fl_lease l;
    fl_acquire(r, "held", LEASE, FL_WAIT_FOREVER, &l); /* killed while asleep */
    return 2;
}

/* The lock info of `key` (the slots are few: scan them). */
static fl_lock_info key_info(fl_region *r, const char *key)
{
    fl_lock_info li;
    for (uint32_t i = 0; fl_lock_info_get(r, i, &li) != -ERANGE; i++)
        if (strcmp(li.key, key) == 0)
            return li;
    fail_msg("no lock slot for key %s", key);
    return li;
}

/* I11: a new boot voids every lease of the old one; the region keeps its
 * tokens (I1).  The waiter counts of the old boot start again from zero
 * (its waiters are gone with it). */
static void test_reboot_voids_leases(void **state)
{
    (void)state;
    const char *region = strdup(th_path("reboot"));
    const char *boot = strdup(th_path("boot_id"));
    write_boot_id(boot, "11111111-1111-1111-1111-111111111111");
    setenv("FENCELOCK_TEST_BOOT_ID_FILE", boot, 1);
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    struct holder h = {region};
    th_child c;
    assert_int_equal(th_child_start(&c, hold_child, &h), 0);
    char line[64];
    assert_int_equal(th_recv(c.from_child, line, sizeof line, 10000), 0);
    uint64_t old = strtoull(line, NULL, 10);
    th_child w;
    assert_int_equal(th_child_start(&w, wait_child, &h), 0);
    fl_region *ro;
    assert_int_equal(fl_open_readonly(region, &ro), 0);
    for (int i = 0; i < 2000 && key_info(ro, "held").waiters == 0; i++)
        usleep(5000); /* until the waiter is counted; bounded */
    assert_int_equal(key_info(ro, "held").waiters, 1);
    fl_close(ro);
    /* The machine "goes down": supervisor first, so nobody frees the lock. */
    th_daemon_stop(&d, SIGKILL);
    kill(c.pid, SIGKILL);
    kill(w.pid, SIGKILL);
    th_child_wait(&c, 5000);
    th_child_wait(&w, 5000);

    write_boot_id(boot, "22222222-2222-2222-2222-222222222222");
    fl_region *r;
    assert_int_equal(fl_open(region, &r), -EAGAIN); /* not adopted yet */
    assert_non_null(strstr(fl_last_error(), region));

    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_true(th_daemon_log_wait(&d, "\"event\":\"new_boot\"", 1, 5000));
    assert_true(th_daemon_log_wait(&d, "\"event\":\"lease_voided\"", 1, 5000));
    assert_int_equal(fl_open(region, &r), 0);
    assert_int_equal(key_info(r, "held").waiters, 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "held", LEASE, 0, &l), 0); /* no wait for the 60 s lease */
    assert_true(l.flags & FL_LEASE_EXPIRED);
    assert_true(l.token > old);
    fl_release(r, &l);
    fl_close(r);
    th_daemon_stop(&d, SIGKILL);
    unsetenv("FENCELOCK_TEST_BOOT_ID_FILE");
    free((void *)region);
    free((void *)boot);
}

/* Run fencelockd on a file, expect it to refuse with exit status 3 and a
 * message naming the file, and the file to be unchanged. */
static void expect_refused(const char *region, const char *needle)
{
    uint64_t before = file_sum(region);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "'%s' --region '%s' --state '%s.state' 2>'%s.err'", FENCELOCKD_PATH,
             region, region, region);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    char err[1400], text[4096] = "";
    snprintf(err, sizeof err, "%s.err", region);
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    if (!strstr(text, region) || !strstr(text, needle))
        fail_msg("fencelockd said: %s (wanted the path and '%s')", text, needle);
    assert_true(file_sum(region) == before);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    close(fd);
}

static void patch(const char *path, off_t off, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, p, n, off), (ssize_t)n);
    close(fd);
}

/* I9: corrupt, truncated, foreign and wrong-version files are refused by the
 * supervisor and left exactly as they were. */
static void test_corrupt_files_untouched(void **state)
{
    (void)state;
    char good[600];
    snprintf(good, sizeof good, "%s", th_path("good"));
    struct fl__params p = {8, 4, 64, 4, 2};
    assert_int_equal(fl__region_create(good, &p), 0);
    struct stat st;
    assert_int_equal(stat(good, &st), 0);

    char path[600];
    snprintf(path, sizeof path, "%s", th_path("empty"));
    write_bytes(path, "", 0);
    expect_refused(path, "empty");

    snprintf(path, sizeof path, "%s", th_path("garbage"));
    char junk[5000];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 131 + 7);
    write_bytes(path, junk, sizeof junk);
    expect_refused(path, "not a fencelock region");

    snprintf(path, sizeof path, "%s", th_path("truncated"));
    copy_file(good, path);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    expect_refused(path, "truncated");

    snprintf(path, sizeof path, "%s", th_path("version"));
    copy_file(good, path);
    uint32_t v = 99;
    patch(path, 8, &v, sizeof v);
    expect_refused(path, "format version 99");

    snprintf(path, sizeof path, "%s", th_path("checksum"));
    copy_file(good, path);
    uint32_t caps = 9;
    patch(path, offsetof(struct fl__header, lock_capacity), &caps, sizeof caps);
    expect_refused(path, "checksum");
}

/* I1: the state file is the authority; a corrupt one stops the supervisor
 * (it never guesses), and one it cannot write stops it too. */
static void test_state_file_errors(void **state)
{
    (void)state;
    const char *region = strdup(th_path("statefile"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    uint64_t t1 = acquire_release(region, "k");
    th_daemon_stop(&d, SIGTERM);

    char statef[600];
    snprintf(statef, sizeof statef, "%s.state", region);
    FILE *f = fopen(statef, "r+");
    assert_non_null(f);
    fputs("fencelock-state 1\nepoch 1\nchecksum 0000000000000000\n", f);
    fclose(f);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "'%s' --region '%s' --state '%s' 2>/dev/null", FENCELOCKD_PATH,
             region, statef);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);

    /* Missing state: starts above the tokens in the region. */
    unlink(statef);
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_true(th_daemon_log_wait(&d, "no_durable_state", 1, 5000));
    uint64_t t2 = acquire_release(region, "k");
    assert_true(t2 > t1);
    th_daemon_stop(&d, SIGTERM);

    /* A state file that cannot be written: refuse to start. */
    snprintf(cmd, sizeof cmd, "'%s' --region '%s' --state /proc/fencelock/state 2>/dev/null",
             FENCELOCKD_PATH, region);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    free((void *)region);
}

/* I1: --min-token, for a region moved to a new file or host. */
static void test_min_token(void **state)
{
    (void)state;
    const char *region = strdup(th_path("moved"));
    const char *extra[] = {"--min-token", "123456789012345", NULL};
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, extra), 0);
    /* Every token, of this key and of others, and after a restart too. */
    uint64_t prev = 123456789012345ull;
    for (int i = 0; i < 5; i++) {
        uint64_t t = acquire_release(region, "k");
        assert_true(t > prev);
        prev = t;
        assert_true(acquire_release(region, i % 2 ? "other" : "third") > 123456789012345ull);
    }
    th_daemon_stop(&d, SIGKILL);
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    assert_true(acquire_release(region, "k") > prev);
    assert_true(acquire_release(region, "fresh") > 123456789012345ull);
    th_daemon_stop(&d, SIGKILL);
    free((void *)region);
}

/* I1: a key's counter never runs into an epoch that is not durable: without
 * a supervisor the library refuses; with one, the epoch advances first. */
static void test_counter_exhaustion(void **state)
{
    (void)state;
    const char *region = strdup(th_path("exhaust"));
    th_daemon d;
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    uint64_t t = acquire_release(region, "k");
    th_daemon_stop(&d, SIGTERM);

    /* Put the key's token at the last counter of its epoch (an internal
     * write into the region, as if 2^40 - 2 acquisitions had happened). */
    struct fl__shm *m;
    assert_int_equal(fl__region_map(region, false, &m), 0);
    uint64_t last = (FL_TOKEN_EPOCH(t) << FL_TOKEN_EPOCH_SHIFT) | ((1ull << 40) - 1);
    atomic_store(&m->slots[0].pair.state, last << 1);
    fl__region_unmap(m);
    fl_region *r;
    assert_int_equal(fl_open(region, &r), 0);
    fl_lease l;
    assert_int_equal(fl_acquire(r, "k", LEASE, 0, &l), -EOVERFLOW);
    assert_non_null(strstr(fl_last_error(), "epoch"));
    fl_close(r);

    /* A supervisor starts a new epoch; the key continues above. */
    assert_int_equal(th_daemon_start(&d, region, NULL), 0);
    uint64_t t2 = acquire_release(region, "k");
    assert_true(t2 > last);

    /* Half-spent counter while running: the supervisor advances the epoch. */
    assert_int_equal(fl__region_map(region, false, &m), 0);
    uint64_t half = (FL_TOKEN_EPOCH(t2) << FL_TOKEN_EPOCH_SHIFT) | (1ull << 39);
    atomic_store(&m->slots[0].pair.state, half << 1);
    fl__region_unmap(m);
    /* Two epochs came from the two starts (the log is appended to); wait for
     * the third, from the supervisor's periodic check. */
    assert_true(th_daemon_log_wait(&d, "\"event\":\"epoch_advanced\"", 3, 10000));
    uint64_t t3 = acquire_release(region, "k");
    assert_true(FL_TOKEN_EPOCH(t3) == FL_TOKEN_EPOCH(t2) + 1);
    th_daemon_stop(&d, SIGKILL);
    free((void *)region);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_clean_and_killed),
        cmocka_unit_test(test_host_crash_revert),
        cmocka_unit_test(test_reboot_voids_leases),
        cmocka_unit_test(test_corrupt_files_untouched),
        cmocka_unit_test(test_state_file_errors),
        cmocka_unit_test(test_min_token),
        cmocka_unit_test(test_counter_exhaustion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
