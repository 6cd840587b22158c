/* SPDX-License-Identifier: MIT */
/*
 * region.c - create, validate and map a region file (layout: format.h).
 *
 * Creation is atomic: the file is built and preallocated under a temporary
 * name and linked into place, so nobody ever maps a half-written region, and
 * a full disk is an error at creation instead of a SIGBUS later.
 *
 * Opening trusts nothing: the header is read with pread() and checked (magic,
 * byte order, version, layout signature, checksum, every capacity and offset
 * recomputed from first principles, file size) before anything is mapped.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "../backend.h"
#include "../common/clocks.h"
#include "shm.h"


static uint64_t fl__align64(uint64_t v) { return (v + 63) & ~(uint64_t)63; }

static uint32_t fl__index_cap(uint32_t capacity)
{
    uint32_t c = 16;
    while (c < 2 * (uint64_t)capacity)
        c <<= 1;
    return c;
}

/* Fill the immutable layout fields of h from its capacities.  Returns 0, or
 * -EINVAL naming the parameter that is out of range. */
static int fl__layout(struct fl__header *h)
{
    if (h->lock_capacity < 1 || h->lock_capacity > FL__MAX_LOCKS)
        return fl__fail(-EINVAL, "lock capacity %u out of range 1..%u", h->lock_capacity,
                        FL__MAX_LOCKS);
    if (h->record_capacity < 1 || h->record_capacity > FL__MAX_RECORDS)
        return fl__fail(-EINVAL, "record capacity %u out of range 1..%u", h->record_capacity,
                        FL__MAX_RECORDS);
    if (h->record_size < FL__MIN_RECORD_SIZE || h->record_size > FL__MAX_RECORD_SIZE)
        return fl__fail(-EINVAL, "record size %u out of range %u..%u", h->record_size,
                        FL__MIN_RECORD_SIZE, FL__MAX_RECORD_SIZE);
    if (h->client_capacity < 2 || h->client_capacity > FL__MAX_CLIENTS + 1)
        return fl__fail(-EINVAL, "client capacity %u out of range 1..%u",
                        h->client_capacity - 1, FL__MAX_CLIENTS);
    if (h->buffer_count <= h->record_capacity || h->buffer_count > FL__MAX_BUFFERS)
        return fl__fail(-EINVAL, "buffer count %u out of range %u..%u", h->buffer_count,
                        h->record_capacity + 1, FL__MAX_BUFFERS);
    h->lock_index_cap = fl__index_cap(h->lock_capacity);
    h->record_index_cap = fl__index_cap(h->record_capacity);
    h->buffer_stride = fl__align64(FL__BUFFER_HDR_SIZE + (((uint64_t)h->record_size + 7) & ~7ull));
    uint64_t off = FL__HEADER_SIZE;
    h->clients_off = off;
    off = fl__align64(off + (uint64_t)h->client_capacity * FL__CLIENT_SIZE);
    h->slots_off = off;
    off = fl__align64(off + (uint64_t)h->lock_capacity * FL__SLOT_SIZE);
    h->lock_index_off = off;
    off = fl__align64(off + (uint64_t)h->lock_index_cap * 4);
    h->records_off = off;
    off = fl__align64(off + (uint64_t)h->record_capacity * FL__RECORD_SIZE);
    h->record_index_off = off;
    off = fl__align64(off + (uint64_t)h->record_index_cap * 4);
    h->buffers_off = off;
    off = fl__align64(off + (uint64_t)h->buffer_count * h->buffer_stride);
    h->event_count = FL__EVENT_COUNT;
    h->events_off = off;
    off += (uint64_t)h->event_count * FL__EVENT_SIZE;
    h->file_size = (off + 4095) & ~(uint64_t)4095;
    return 0;
}


int fl__region_create(const char *path, const struct fl__params *p)
{
    return fl__region_create_shared(path, p, (gid_t)-1, 0600);
}

int fl__region_create_shared(const char *path, const struct fl__params *p, gid_t gid,
                             unsigned mode)
{
    struct fl__header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, FL__MAGIC, sizeof FL__MAGIC);
    h.format_version = FL__FORMAT_VERSION;
    h.header_size = FL__HEADER_SIZE;
    h.byte_order = FL__BYTE_ORDER_MARK;
    h.layout_sig = FL__LAYOUT_SIG;
    h.lock_capacity = p->locks;
    h.record_capacity = p->records;
    h.record_size = p->record_size;
    h.client_capacity = p->clients + 1; /* entry 0 means "unregistered" */
    h.buffer_count = p->records + p->spare_buffers;
    int err = fl__layout(&h);
    if (err)
        return err;
    h.created_unix_ns = fl__wall_clock_ns(); /* display only, never for leases */
    h.checksum = fl__checksum(&h, FL__CHECKSUMMED_BYTES);
    atomic_init(&h.token_floor, 1);
    atomic_init(&h.next_client_id, 1);
    err = fl__read_boot_id(h.boot_id);
    if (err)
        return fl__fail(err, "cannot read the boot id: %s", strerror(-err));

    char tmp[FL__PATH_PLUS_SIZE];
    if (snprintf(tmp, sizeof tmp, "%s.new.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return fl__fail(-ENAMETOOLONG, "region path too long: %s", path);
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return fl__fail(fl__neg_errno(), "cannot create %s: %s", tmp, strerror(errno));
    /* Group and mode before the name appears: nobody sees the file with
     * other access than fencelockd --group/--mode asked for. */
    if (gid != (gid_t)-1 && fchown(fd, (uid_t)-1, gid) != 0) {
        err = fl__fail(fl__neg_errno(), "cannot give %s to group %u: %s", tmp, (unsigned)gid,
                       strerror(errno));
        goto fail;
    }
    if (fchmod(fd, (mode_t)mode) != 0) {
        err = fl__fail(fl__neg_errno(), "cannot chmod %s to %04o: %s", tmp, mode,
                       strerror(errno));
        goto fail;
    }
    /* The rest of the file stays zero: free slots, empty indexes, free buffers. */
    int rc = posix_fallocate(fd, 0, (off_t)h.file_size);
    if (rc != 0) {
        err = fl__fail(-rc, "cannot allocate %llu bytes for region %s: %s",
                       (unsigned long long)h.file_size, path, strerror(rc));
        goto fail;
    }
    if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        err = fl__fail(-EIO, "cannot write the header of %s", tmp);
        goto fail;
    }
    if (fsync(fd) != 0) {
        err = fl__fail(fl__neg_errno(), "fsync of %s failed: %s", tmp, strerror(errno));
        goto fail;
    }
    /* link() fails with EEXIST instead of replacing a region in use. */
    if (link(tmp, path) != 0) {
        err = fl__fail(fl__neg_errno(), "cannot create region %s: %s", path, strerror(errno));
        goto fail;
    }
    unlink(tmp);
    close(fd);
    return 0;
fail:
    unlink(tmp);
    close(fd);
    return err;
}

/* Check a header copied out of the file against the file's size. */
static int fl__validate(const char *path, const struct fl__header *h, uint64_t file_size)
{
    if (file_size == 0)
        return fl__fail(-EPROTO, "region %s: empty file (0 bytes): not a fencelock region",
                        path);
    if (memcmp(h->magic, FL__MAGIC, sizeof FL__MAGIC) != 0)
        return fl__fail(-EPROTO, "region %s: bad magic: not a fencelock region", path);
    if (file_size < FL__HEADER_SIZE)
        return fl__fail(-EPROTO, "region %s: truncated: %llu bytes, the header alone is %u",
                        path, (unsigned long long)file_size, FL__HEADER_SIZE);
    if (h->byte_order != FL__BYTE_ORDER_MARK)
        return fl__fail(-EPROTO, "region %s: written by a host of another byte order", path);
    if (h->format_version != FL__FORMAT_VERSION)
        return fl__fail(-EPROTONOSUPPORT,
                        "region %s: format version %u; this build reads version %u", path,
                        h->format_version, FL__FORMAT_VERSION);
    if (h->header_size != FL__HEADER_SIZE || h->layout_sig != FL__LAYOUT_SIG)
        return fl__fail(-EPROTO,
                        "region %s: layout signature %#x differs from this build's %#x "
                        "(built with other structure sizes)",
                        path, h->layout_sig, FL__LAYOUT_SIG);
    if (fl__checksum(h, FL__CHECKSUMMED_BYTES) != h->checksum)
        return fl__fail(-EPROTO, "region %s: header checksum mismatch: the header is corrupt",
                        path);
    struct fl__header want;
    memset(&want, 0, sizeof want);
    want.lock_capacity = h->lock_capacity;
    want.record_capacity = h->record_capacity;
    want.record_size = h->record_size;
    want.client_capacity = h->client_capacity;
    want.buffer_count = h->buffer_count;
    int err = fl__layout(&want);
    if (err)
        return fl__fail(-EPROTO, "region %s: bad parameters: %s", path, fl_last_error());
    if (want.lock_index_cap != h->lock_index_cap ||
        want.record_index_cap != h->record_index_cap || want.clients_off != h->clients_off ||
        want.slots_off != h->slots_off || want.lock_index_off != h->lock_index_off ||
        want.records_off != h->records_off || want.record_index_off != h->record_index_off ||
        want.buffers_off != h->buffers_off || want.buffer_stride != h->buffer_stride ||
        want.events_off != h->events_off || want.event_count != h->event_count ||
        want.file_size != h->file_size)
        return fl__fail(-EPROTO, "region %s: section offsets disagree with its capacities",
                        path);
    if (file_size < h->file_size)
        return fl__fail(-EPROTO, "region %s: truncated: %llu bytes, its header says %llu",
                        path, (unsigned long long)file_size, (unsigned long long)h->file_size);
    return 0;
}

int fl__region_map(const char *path, bool readonly, struct fl__shm **out)
{
    return fl__region_map_named(path, readonly, false, out);
}

int fl__region_map_named(const char *path, bool readonly, bool named, struct fl__shm **out)
{
    /* Before the file is opened: a directory another user controls may
     * hold their file under this name (paths.c). */
    uid_t dir_owner;
    int cerr = fl__check_region_dir(path, named, &dir_owner);
    if (cerr)
        return cerr;
    if (strlen(path) >= FL__PATH_SIZE)
        return fl__fail(-ENAMETOOLONG, "region path too long");
    struct fl__shm *r = calloc(1, sizeof *r);
    if (!r)
        return fl__fail(-ENOMEM, "out of memory");
    /* a mapped region file is the shm backend's, for fl_open and fencelockd alike */
    fl__handle_init(&r->h, &fl__shm_backend, path, readonly);
    r->fd = -1;
    r->sock = -1;
    r->clock = fl__monotonic_ns;
    int err = 0;
    /* O_NONBLOCK: a FIFO or device under the name must not hang us in
     * open(); it is refused below as not a regular file. */
    r->fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK);
    if (r->fd < 0) {
        err = fl__neg_errno();
        if (err == -ENOENT)
            fl__set_error("region %s does not exist (is fencelockd running?)", path);
        else if (err == -EISDIR)
            err = fl__fail(-EPROTO, "region %s: not a regular file (a directory)", path);
        else
            fl__set_error("cannot open region %s: %s", path, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (fstat(r->fd, &st) != 0) {
        err = fl__fail(fl__neg_errno(), "cannot stat region %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        err = fl__fail(-EPROTO, "region %s: not a regular file", path);
        goto fail;
    }
    err = fl__check_region_file(path, &st, dir_owner);
    if (err)
        goto fail;
    struct fl__header h;
    memset(&h, 0, sizeof h);
    ssize_t n = pread(r->fd, &h, sizeof h, 0);
    if (n < 0) {
        err = fl__fail(fl__neg_errno(), "cannot read region %s: %s", path, strerror(errno));
        goto fail;
    }
    err = fl__validate(path, &h, (uint64_t)st.st_size);
    if (err)
        goto fail;
    void *base = mmap(NULL, h.file_size, readonly ? PROT_READ : PROT_READ | PROT_WRITE,
                      MAP_SHARED, r->fd, 0);
    if (base == MAP_FAILED) {
        err = fl__fail(fl__neg_errno(), "cannot map region %s: %s", path, strerror(errno));
        goto fail;
    }
    r->base = base;
    r->size = h.file_size;
    /* From here on only the validated local copy decides the layout; the
     * mapped header could be scribbled on by a buggy process. */
    r->hdr = (struct fl__header *)base;
    r->lock_capacity = h.lock_capacity;
    if (!readonly && (!(r->held = calloc(h.lock_capacity, sizeof *r->held)) ||
                      !(r->held_tid = calloc(h.lock_capacity, sizeof *r->held_tid)))) {
        err = fl__fail(-ENOMEM, "out of memory");
        munmap(r->base, r->size);
        goto fail;
    }
    r->lock_index_mask = h.lock_index_cap - 1;
    r->record_capacity = h.record_capacity;
    r->record_index_mask = h.record_index_cap - 1;
    r->record_size = h.record_size;
    r->buffer_count = h.buffer_count;
    r->client_capacity = h.client_capacity;
    r->buffer_stride = h.buffer_stride;
    r->clients = (struct fl__client *)(void *)(r->base + h.clients_off);
    r->slots = (struct fl__slot *)(void *)(r->base + h.slots_off);
    r->lock_index = (_Atomic uint32_t *)(void *)(r->base + h.lock_index_off);
    r->records = (struct fl__record *)(void *)(r->base + h.records_off);
    r->record_index = (_Atomic uint32_t *)(void *)(r->base + h.record_index_off);
    r->buffers = r->base + h.buffers_off;
    r->events = (struct fl__event *)(void *)(r->base + h.events_off);
    r->event_mask = h.event_count - 1;
    r->other_boot = !fl__same_boot(r);
    err = fl__read_timens_offset(&r->timens_ns);
    if (err) {
        munmap(r->base, r->size);
        goto fail;
    }
    *out = r;
    return 0;
fail:
    if (r->fd >= 0)
        close(r->fd);
    fl__handle_fini(&r->h, false);
    free((void *)r->held);
    free((void *)r->held_tid);
    free(r);
    return err;
}

void fl__region_unmap(struct fl__shm *r)
{
    if (!r)
        return;
    if (r->base)
        munmap(r->base, r->size);
    if (r->fd >= 0)
        close(r->fd);
    if (r->sock >= 0)
        close(r->sock);
    fl__handle_fini(&r->h, false);
    free((void *)r->held);
    free((void *)r->held_tid);
    free(r);
}

/*
 * HUGE PAGES (fencelockd --huge-pages).  A random lookup among a million
 * keys misses the TLB twice (index bucket, then slot) on 4 KiB pages; 2 MiB
 * pages take the page walks out (docs/benchmarks.md).  A region is a
 * shared file mapping, and the kernel backs those with transparent huge
 * pages only on tmpfs, and only where the mount allows it: tmpfs mounted
 * with huge=always, within_size or advise, or every tmpfs when
 * /sys/kernel/mm/transparent_hugepage/shmem_enabled is "force" ("deny"
 * turns it off everywhere; its other values are for the kernel's internal
 * shm mount, not for files).  The region was preallocated with small pages
 * (posix_fallocate), so marking the mapping MADV_HUGEPAGE is not enough:
 * MADV_COLLAPSE (Linux 6.1) copies the file's pages into huge ones now, in
 * the page cache, which every process mapping the file then shares; a
 * client's mapping is 2 MiB-aligned by the kernel on such a mount and maps
 * them with one PMD each, without doing anything itself.  Where the kernel
 * does not allow it, MADV_COLLAPSE fails (EINVAL) and nothing changes: the
 * caller warns and runs on small pages.
 */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define FL__TMPFS_MAGIC 0x01021994u

/* Bytes of the mapping that starts at base mapped by huge pages (PMDs), from
 * /proc/self/smaps; 0 if it cannot be read. */
static uint64_t fl__pmd_mapped(const void *base)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return 0;
    char line[FL__PATH_SIZE + 256]; /* a mapping's line ends with its path */
    bool ours = false;
    uint64_t kb = 0;
    static const char *const pmd[] = {"ShmemPmdMapped:", "FilePmdMapped:"};
    while (fgets(line, sizeof line, f)) {
        /* a mapping's first line is "lo-hi perms ...", its fields "Name: n kB" */
        char *end;
        unsigned long lo = strtoul(line, &end, 16);
        if (end != line && *end == '-') {
            if (ours)
                break; /* the next mapping */
            ours = lo == (unsigned long)(uintptr_t)base;
            continue;
        }
        for (size_t i = 0; ours && i < sizeof pmd / sizeof pmd[0]; i++)
            if (strncmp(line, pmd[i], strlen(pmd[i])) == 0)
                kb += strtoull(line + strlen(pmd[i]), NULL, 10);
    }
    fclose(f);
    return kb * 1024;
}

/* Why huge pages cannot back r's file: its file system, its mount's huge=
 * option, the shmem_enabled policy; what to change. */
static void fl__huge_why(const struct fl__shm *r, int err, char *why, size_t cap)
{
    struct statfs sfs;
    struct stat st;
    if (fstatfs(r->fd, &sfs) != 0 || fstat(r->fd, &st) != 0) {
        snprintf(why, cap, "MADV_COLLAPSE: %s", strerror(err));
        return;
    }
    if ((unsigned long)sfs.f_type != FL__TMPFS_MAGIC) {
        snprintf(why, cap,
                 "the region is not on tmpfs (file system magic %#lx): the kernel backs shared "
                 "file mappings with huge pages on tmpfs only (MADV_COLLAPSE: %s); put it on "
                 "a tmpfs mounted with huge=within_size",
                 (unsigned long)sfs.f_type, strerror(err));
        return;
    }
    /* The mount: /proc/self/mountinfo's line for this device, its
     * mount point and super-block options ("... - tmpfs SRC OPTS"). */
    char mnt[256] = "?", huge[32] = "never (no huge= option)", policy[32] = "?";
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f) {
        char line[1024], dev[32];
        snprintf(dev, sizeof dev, "%u:%u", major(st.st_dev), minor(st.st_dev));
        while (fgets(line, sizeof line, f)) {
            char id[32], parent[32], mdev[32], root[256], point[256];
            if (sscanf(line, "%31s %31s %31s %255s %255s", id, parent, mdev, root, point) != 5 ||
                strcmp(mdev, dev) != 0)
                continue;
            snprintf(mnt, sizeof mnt, "%s", point);
            const char *h = strstr(line, " - ");
            h = h ? strstr(h, "huge=") : NULL;
            if (h)
                snprintf(huge, sizeof huge, "%.*s", (int)strcspn(h + 5, ", \n"), h + 5);
        }
        fclose(f);
    }
    f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re");
    if (f) {
        char text[128] = "";
        if (fgets(text, sizeof text, f)) {
            const char *b = strchr(text, '['), *e = b ? strchr(b, ']') : NULL;
            if (b && e)
                snprintf(policy, sizeof policy, "%.*s", (int)(e - b - 1), b + 1);
        }
        fclose(f);
    }
    if (err == EAGAIN || err == ENOMEM) {
        snprintf(why, cap,
                 "the kernel found no free huge pages (MADV_COLLAPSE: %s; memory is short or "
                 "fragmented): tmpfs at %s, huge=%s, shmem_enabled [%s]",
                 strerror(err), mnt, huge, policy);
        return;
    }
    snprintf(why, cap,
             "tmpfs at %s has huge=%s and /sys/kernel/mm/transparent_hugepage/shmem_enabled "
             "is [%s] (MADV_COLLAPSE: %s): the kernel allows huge pages for this file only "
             "with huge=always, within_size or advise on the mount (mount -o "
             "remount,huge=within_size %s) or shmem_enabled \"force\"",
             mnt, huge, policy, strerror(err), mnt);
}

int fl__region_huge_pages(struct fl__shm *r, uint64_t *huge, char *why, size_t cap)
{
    *huge = 0;
    why[0] = '\0';
    if (madvise(r->base, r->size, MADV_HUGEPAGE) != 0) {
        int err = errno;
        snprintf(why, cap, "madvise(MADV_HUGEPAGE): %s (a kernel without transparent huge "
                 "pages)", strerror(err));
        return -err;
    }
    int err = madvise(r->base, r->size, MADV_COLLAPSE) == 0 ? 0 : errno;
    *huge = fl__pmd_mapped(r->base);
    if (*huge > 0) {
        if (err)
            snprintf(why, cap, "in part: MADV_COLLAPSE: %s", strerror(err));
        return 0;
    }
    if (!err)
        err = EOPNOTSUPP; /* collapsed, yet nothing is mapped huge: say what we see */
    fl__huge_why(r, err, why, cap);
    return -err;
}

void fl__region_params(const struct fl__shm *r, struct fl__params *p)
{
    p->locks = r->lock_capacity;
    p->records = r->record_capacity;
    p->record_size = r->record_size;
    p->clients = r->client_capacity - 1;
    p->spare_buffers = r->buffer_count - r->record_capacity;
}

void fl__region_set_clock(struct fl__shm *r, fl__clock_fn fn, void *ctx)
{
    r->clock = fn ? fn : fl__monotonic_ns;
    r->clock_ctx = ctx;
}

bool fl__region_boot_is(const struct fl__shm *r, const char id[FL__BOOT_ID_SIZE],
                        char had[FL__BOOT_ID_SIZE])
{
    memcpy(had, r->hdr->boot_id, FL__BOOT_ID_SIZE);
    had[FL__BOOT_ID_SIZE - 1] = '\0'; /* shared bytes: never trust the terminator */
    return strcmp(id, had) == 0;
}

bool fl__same_boot(const struct fl__shm *r)
{
    char now[FL__BOOT_ID_SIZE], had[FL__BOOT_ID_SIZE];
    if (fl__read_boot_id(now) != 0)
        return false; /* cannot tell: fail closed, the leases are not vouched for (I11) */
    return fl__region_boot_is(r, now, had);
}
