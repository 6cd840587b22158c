/* SPDX-License-Identifier: MIT */
/*
 * fuzz_region_open.c - libFuzzer harness for opening untrusted region files
 * (I9): validation, mapping, and every read-only walk over shared memory a
 * tool or client makes (key index, lock slots, records, buffers, clients).
 *
 * Random bytes almost never pass the header checksum, so the input patches
 * a small valid region instead:
 *   byte 0        flags: bit 0 = recompute the header checksum after patching
 *                 (so the body is reached), bit 1 = truncate the file to the
 *                 length in the next two bytes times 64
 *   bytes 1..2    truncation length / 64 (when bit 1 is set)
 *   then repeated patches: u16 offset / 4 (little-endian), u8 length, bytes
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/shm.h"

static char template_path[256];
static unsigned char *template_bytes;
static size_t template_size;

static char template_dir[64];

static void remove_template(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", template_dir);
    if (system(cmd) != 0) { /* best effort */
    }
}

static void make_template(void)
{
    snprintf(template_dir, sizeof template_dir, "/tmp/flfuzz.XXXXXX");
    if (!mkdtemp(template_dir))
        abort();
    atexit(remove_template);
    const char *dir = template_dir;
    snprintf(template_path, sizeof template_path, "%s/region", dir);
    struct fl__params p = {.locks = 8, .records = 4, .record_size = 64, .clients = 4,
                           .spare_buffers = 2};
    if (fl__test_region_create_ready(template_path, &p) != 0)
        abort();
    /* Populate it: keys, a held lock, committed records. */
    fl_region *r;
    if (fl_open(template_path, &r) != 0)
        abort();
    /* "alpha" is held by a lease that has already expired when the harness
     * runs (its acquire takes it over and posts an event), "beta" by one
     * that has not (its acquire is refused): both paths on every input,
     * however much time has passed since the template was made. */
    fl_lease l;
    fl_acquire(r, "alpha", 1000ull, 0, &l);
    fl_commit(r, &l, "alpha/rec", "hello", 5, 0, NULL);
    fl_acquire(r, "beta", 3600ull * 1000000000ull, 0, &l);
    fl_commit_u64(r, &l, "beta/ptr", 42, 0, NULL);
    fl_close(r);
    FILE *f = fopen(template_path, "rb");
    fseek(f, 0, SEEK_END);
    template_size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    template_bytes = malloc(template_size);
    if (fread(template_bytes, 1, template_size, f) != template_size)
        abort();
    fclose(f);
}

static void walk(fl_region *r)
{
    fl_region_info ri;
    fl_region_info_get(r, &ri);
    for (uint32_t i = 0; i < ri.locks_used && i < 64; i++) {
        fl_lock_info li;
        fl_lock_info_get(r, i, &li);
    }
    for (uint32_t i = 0; i < ri.records_used && i < 64; i++) {
        fl_record_info ci;
        if (fl_record_info_get(r, i, &ci) == 0) {
            char buf[128];
            size_t len;
            uint64_t fence;
            fl_read(r, ci.name, buf, sizeof buf, &len, &fence);
        }
    }
    for (uint32_t i = 0; i <= ri.client_capacity && i < 64; i++) {
        fl_client_info ci;
        fl_client_info_get(r, i, &ci);
    }
    char buf[16];
    size_t len;
    uint64_t fence;
    fl_read(r, "alpha/rec", buf, sizeof buf, &len, &fence);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!template_bytes)
        make_template();
    unsigned char *img = malloc(template_size);
    memcpy(img, template_bytes, template_size);
    size_t len = template_size;
    if (size < 3) {
        free(img);
        return 0;
    }
    uint8_t flags = data[0];
    if (flags & 2) {
        size_t t = ((size_t)data[1] | (size_t)data[2] << 8) * 64;
        if (t < len)
            len = t;
    }
    size_t i = 3;
    while (i + 3 <= size) {
        size_t off = ((size_t)data[i] | (size_t)data[i + 1] << 8) * 4;
        size_t n = data[i + 2];
        i += 3;
        if (n > size - i)
            n = size - i;
        for (size_t k = 0; k < n && off + k < len; k++)
            img[off + k] = data[i + k];
        i += n;
    }
    if ((flags & 1) && len >= FL__CHECKSUMMED_BYTES + 8) {
        uint64_t sum = fl__checksum(img, FL__CHECKSUMMED_BYTES);
        memcpy(img + offsetof(struct fl__header, checksum), &sum, sizeof sum);
    }
    char path[300];
    snprintf(path, sizeof path, "%s.case", template_path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        if (write(fd, img, len) != (ssize_t)len) { /* short write: a truncated case */
        }
        close(fd);
    }
    free(img);
    fl_region *r;
    if (fl_open_readonly(path, &r) == 0) {
        walk(r);
        fl_close(r);
    }
    /* The writable open too (no supervisor listens: it opens unregistered). */
    if (fl_open(path, &r) == 0) {
        walk(r);
        fl_lease l;
        if (fl_acquire(r, "alpha", 1000000ull, 0, &l) == 0) {
            fl_commit(r, &l, "alpha/rec", "x", 1, 0, NULL);
            fl_lease stale = l;
            stale.token = l.token > 1 ? l.token - 1 : l.token;
            fl_commit(r, &stale, "alpha/rec", "y", 1, 0, NULL); /* a rejection: an event */
            fl_release(r, &l);
        }
        fl_acquire(r, "beta", 1000000ull, 0, &l);
        fl_close(r);
    }
    return 0;
}
