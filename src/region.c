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
#include <time.h>
#include <unistd.h>

#include "internal.h"

uint64_t fl__checksum(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

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

int fl__region_resolve_path(const char *path, char *buf, size_t cap)
{
    if (path && *path) {
        size_t n = strlen(path);
        if (n >= cap)
            return fl__fail(-ENAMETOOLONG, "region path too long (%zu bytes)", n);
        memcpy(buf, path, n + 1);
        return 0;
    }
    return fl_default_region_path(buf, cap);
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
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* display only, never for leases */
    h.created_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    h.checksum = fl__checksum(&h, FL__CHECKSUMMED_BYTES);
    atomic_init(&h.token_floor, 1);
    atomic_init(&h.next_client_id, 1);
    err = fl__read_boot_id(h.boot_id);
    if (err)
        return fl__fail(err, "cannot read the boot id: %s", strerror(-err));

    char tmp[4200];
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

int fl__region_map(const char *path, bool readonly, fl_region **out)
{
    return fl__region_map_named(path, readonly, false, out);
}

int fl__region_map_named(const char *path, bool readonly, bool named, fl_region **out)
{
    /* Before the file is opened: a directory another user controls may
     * hold their file under this name (paths.c). */
    uid_t dir_owner;
    int cerr = fl__check_region_dir(path, named, &dir_owner);
    if (cerr)
        return cerr;
    fl_region *r = calloc(1, sizeof *r);
    if (!r)
        return fl__fail(-ENOMEM, "out of memory");
    r->fd = -1;
    r->sock = -1;
    r->readonly = readonly;
    r->clock = fl__monotonic_ns;
    r->pid = (uint32_t)getpid();
    pthread_mutex_init(&r->keeper_lock, NULL);
    int err = 0;
    size_t plen = strlen(path);
    if (plen >= sizeof r->path) {
        err = fl__fail(-ENAMETOOLONG, "region path too long");
        goto fail;
    }
    memcpy(r->path, path, plen + 1);
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
    fl__handle_bind_process(r);
    *out = r;
    return 0;
fail:
    if (r->fd >= 0)
        close(r->fd);
    pthread_mutex_destroy(&r->keeper_lock);
    free((void *)r->held);
    free((void *)r->held_tid);
    free(r);
    return err;
}

void fl__region_unmap(fl_region *r)
{
    if (!r)
        return;
    if (r->base)
        munmap(r->base, r->size);
    if (r->fd >= 0)
        close(r->fd);
    if (r->sock >= 0)
        close(r->sock);
    pthread_mutex_destroy(&r->keeper_lock);
    free((void *)r->held);
    free((void *)r->held_tid);
    free(r);
}

void fl__region_params(const fl_region *r, struct fl__params *p)
{
    p->locks = r->lock_capacity;
    p->records = r->record_capacity;
    p->record_size = r->record_size;
    p->clients = r->client_capacity - 1;
    p->spare_buffers = r->buffer_count - r->record_capacity;
}

void fl__region_set_clock(fl_region *r, fl__clock_fn fn, void *ctx)
{
    r->clock = fn ? fn : fl__monotonic_ns;
    r->clock_ctx = ctx;
}

bool fl__same_boot(const fl_region *r)
{
    char now[40], had[40];
    if (fl__read_boot_id(now) != 0)
        return false; /* cannot tell: fail closed, the leases are not vouched for (I11) */
    memcpy(had, r->hdr->boot_id, sizeof had);
    had[39] = '\0';
    return strcmp(now, had) == 0;
}

static bool fl__region_served(const fl_region *r);

/* How long fl_open waits for a supervisor that is starting to ready the
 * region (make its epoch durable, raise the floor, vouch for the records):
 * milliseconds normally; a state file on a slow disk may take longer. */
#define FL__READY_WAIT_NS (5ull * 1000000000ull)

/*
 * READINESS (I1).  A client may take tokens only from a floor that is the
 * current epoch's, made durable by a supervisor in this boot.  The
 * supervisor clears the header's ready_boot when it starts, and stores this
 * boot's tag there (release) only once the epoch is on disk, the floor
 * raised and the records vouched for; a start that fails leaves it clear.
 * So a region just created, one of an earlier boot, or one whose supervisor
 * failed to start is refused; while a supervisor is starting (it holds the
 * region's lock) we sleep on ready_wake for at most FL__READY_WAIT_NS.
 * Handles opened before a restart keep working (I10): the memory they work
 * on is this boot's, and its tokens only grow.
 *
 * Ordering: we load ready_wake (acquire) before ready_boot; the supervisor
 * stores ready_boot before it bumps ready_wake.  If we saw neither, the bump
 * comes later and our futex wait returns at once: no lost wakeup.  The
 * acquire load of ready_boot that matches makes the floor stored before it
 * visible to this thread, and through the caller's own synchronization to
 * every thread that gets the handle.
 */
static int fl__await_ready(fl_region *r)
{
    char boot[40];
    int err = fl__read_boot_id(boot);
    if (err)
        return fl__fail(-EIO,
                        "region %s: cannot read this boot's id (%s): whether its leases are "
                        "still valid cannot be known, so it is not opened",
                        r->path, strerror(-err));
    uint64_t want = fl__boot_tag(boot);
    uint64_t give_up = fl__monotonic_ns(NULL) + FL__READY_WAIT_NS;
    for (;;) {
        /* acquire: see the ordering above */
        uint32_t seq = atomic_load_explicit(&r->hdr->ready_wake, memory_order_acquire);
        uint64_t have = atomic_load_explicit(&r->hdr->ready_boot, memory_order_acquire);
        if (have == want && !r->other_boot)
            return 0;
        uint64_t now = fl__monotonic_ns(NULL);
        if (!fl__region_served(r) || now >= give_up) {
            if (r->other_boot)
                return fl__fail(-EAGAIN,
                                "region %s: written during an earlier boot; start fencelockd "
                                "to adopt it (it voids the old leases)",
                                r->path);
            return fl__fail(-EAGAIN,
                            "region %s: not ready: no fencelockd has made this boot's token "
                            "epoch durable for it yet (%s)",
                            r->path,
                            fl__region_served(r) ? "fencelockd is still starting"
                                                 : "start fencelockd; if it failed to start, "
                                                   "its log says why");
        }
        /* Wake now and then to notice a supervisor that died starting. */
        uint64_t until = now + 100000000ull < give_up ? now + 100000000ull : give_up;
        fl__futex_wait(&r->hdr->ready_wake, seq, until);
    }
}

void fl__region_set_ready(fl_region *r, uint64_t boot_tag)
{
    if (!boot_tag) {
        /* seq_cst: a plain store would do (a client that still sees the
         * old tag opens a region readied in this boot), nothing here is hot */
        atomic_store(&r->hdr->ready_boot, 0);
        return;
    }
    /* release: the floor, the voided leases and the marked records are
     * visible to a client whose acquire load sees the tag */
    atomic_store_explicit(&r->hdr->ready_boot, boot_tag, memory_order_release);
    /* release: after the tag, so a waiter that sees the bump sees the tag */
    atomic_fetch_add_explicit(&r->hdr->ready_wake, 1, memory_order_release);
    fl__futex_wake_all(&r->hdr->ready_wake);
}

int fl__test_region_create_ready(const char *path, const struct fl__params *p)
{
    int err = fl__region_create(path, p);
    if (err)
        return err;
    fl_region *r = NULL;
    err = fl__region_map(path, false, &r);
    if (err)
        return err;
    if (!r)
        __builtin_unreachable(); /* set when err is 0 (for the analyzer) */
    char boot[40];
    err = fl__read_boot_id(boot);
    if (!err)
        fl__region_set_ready(r, fl__boot_tag(boot));
    fl__region_unmap(r);
    return err;
}

int fl_open(const char *region_path, fl_region **out)
{
    if (!out)
        return fl__fail(-EINVAL, "fl_open: out is NULL");
    char path[4096];
    int err = fl__region_resolve_path(region_path, path, sizeof path);
    if (err)
        return err;
    fl_region *r = NULL;
    err = fl__region_map_named(path, false, fl__path_is_named(region_path), &r);
    if (err)
        return err;
    if (!r)
        __builtin_unreachable(); /* set when err is 0 (for the analyzer) */
    err = fl__await_ready(r);
    if (err) {
        fl__region_unmap(r);
        return err;
    }
    err = fl__client_register(r);
    if (err == -ENXIO || err == -EUSERS || err == -ENOMEM || err == -EMFILE ||
        err == -ENFILE) {
        fl__region_unmap(r);
        return err;
    }
    /* Any other failure to register (no supervisor, a socket we may not
     * connect to, a supervisor that just died) leaves the handle working
     * unregistered (I10), but never silently (I12): the region notes us for
     * `fencelock status`, and fl_last_error() says why. */
    if (err) {
        char why[1024];
        snprintf(why, sizeof why, "%s", fl_last_error());
        fl__unreg_note(r, err);
        fl__set_error("region %s opened unregistered (death detection off: locks of this "
                      "process end only at their lease deadlines): %s",
                      r->path, why);
    }
    *out = r;
    return 0;
}

int fl_open_readonly(const char *region_path, fl_region **out)
{
    if (!out)
        return fl__fail(-EINVAL, "fl_open_readonly: out is NULL");
    char path[4096];
    int err = fl__region_resolve_path(region_path, path, sizeof path);
    if (err)
        return err;
    return fl__region_map_named(path, true, fl__path_is_named(region_path), out);
}

/* Tell the supervisor's log of a lock fl_close freed. */
static void fl__note_abandoned(void *ctx, uint32_t slot, uint64_t token)
{
    fl__event_post(ctx, &(struct fl__event_data){.type = FL__EV_ABANDONED,
                                                 .slot = slot,
                                                 .token = token});
}

void fl_close(fl_region *r)
{
    if (!r)
        return;
    if (fl__handle_is_inherited(r)) {
        /* A forked child closing its copy of a parent's handle: unmap and
         * close our copies only.  The parent's locks, registration and
         * keepalive thread (which does not exist in the child; its memory
         * is left as it is) stay the parent's.  Closing our copy of the
         * socket does not end the parent's connection. */
        munmap(r->base, r->size);
        close(r->fd);
        if (r->sock >= 0)
            close(r->sock);
        /* keeper_lock is not destroyed: a parent's thread may have held it
         * at the fork, and the child's copy would stay locked. */
        free((void *)r->held);
    free((void *)r->held_tid);
        free(r);
        return;
    }
    fl__keepalive_shutdown(r);
    /* Locks still held through this handle are abandoned, as at a death: we
     * free them ourselves, which works whether or not the supervisor that
     * registered us still runs.  shutdown() ends the connection even where a
     * forked child holds a copy of the socket, so the supervisor releases
     * the client index at once. */
    if (r->client && !r->readonly)
        fl__slots_reap_client(r, r->client, fl__note_abandoned, r);
    /* After our own reaping: tells fencelockd this is a close, not a death
     * (its log says "closed" only then). */
    fl__client_goodbye(r);
    fl__unreg_clear(r);
    if (r->sock >= 0)
        shutdown(r->sock, SHUT_RDWR);
    fl__region_unmap(r);
}

int fl_region_registered(const fl_region *r)
{
    return r && r->sock >= 0 && !fl__handle_is_inherited(r) ? 1 : 0;
}

const char *fl_region_path(const fl_region *r) { return r ? r->path : ""; }

/*
 * WHO SERVES THE REGION.  The supervisor holds an exclusive open-file-
 * description lock (F_OFD_SETLK, F_WRLCK) on the whole region file while it
 * serves it; the kernel drops it when the supervisor dies.  Anyone may ask
 * whether it is held with F_OFD_GETLK, which tests without taking anything:
 * clients ask in a loop while a supervisor starts (fl_open), so a probe
 * that took a lock, however briefly, could make a starting supervisor
 * believe another one serves the region.  The probe uses a new open file
 * description of the same file: a lock held through our own description
 * (in fencelockd itself) never conflicts with us.
 */
static struct flock fl__whole_file(short type)
{
    struct flock l;
    memset(&l, 0, sizeof l);
    l.l_type = type;
    l.l_whence = SEEK_SET; /* l_start = l_len = 0: the whole file */
    return l;
}

int fl__region_lock_serve(fl_region *r)
{
    struct flock l = fl__whole_file(F_WRLCK);
    if (fcntl(r->fd, F_OFD_SETLK, &l) == 0)
        return 0;
    return errno == EAGAIN || errno == EACCES ? -EBUSY : fl__neg_errno();
}

static bool fl__region_served(const fl_region *r)
{
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", r->fd);
    int fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    struct flock l = fl__whole_file(F_WRLCK);
    bool served = fcntl(fd, F_OFD_GETLK, &l) == 0 && l.l_type != F_UNLCK;
    close(fd);
    return served;
}

int fl_region_info_get(fl_region *r, fl_region_info *info)
{
    if (!r || !info)
        return fl__fail(-EINVAL, "fl_region_info_get: NULL argument");
    int err = fl__handle_check(r, "fl_region_info_get");
    if (err)
        return err;
    memset(info, 0, sizeof *info);
    info->format_version = FL__FORMAT_VERSION;
    info->lock_capacity = r->lock_capacity;
    info->record_capacity = r->record_capacity;
    struct fl__keytab t;
    fl__keytab_locks(r, &t);
    info->locks_used = fl__keytab_used(&t);
    fl__keytab_records(r, &t);
    info->records_used = fl__keytab_used(&t);
    info->record_size = r->record_size;
    info->buffer_count = r->buffer_count;
    info->client_capacity = r->client_capacity - 1;
    info->file_size = r->size;
    info->created_unix_ns = r->hdr->created_unix_ns;
    /* relaxed: a snapshot for display; nothing is ordered by it */
    info->token_floor = atomic_load_explicit(&r->hdr->token_floor, memory_order_relaxed);
    info->epoch = FL_TOKEN_EPOCH(info->token_floor);
    info->supervisor_pid = atomic_load_explicit(&r->hdr->supervisor_pid, memory_order_relaxed);
    info->run_state = atomic_load_explicit(&r->hdr->run_state, memory_order_relaxed);
    info->started_unix_ns = atomic_load_explicit(&r->hdr->started_unix_ns, memory_order_relaxed);
    info->clean_unix_ns = atomic_load_explicit(&r->hdr->clean_unix_ns, memory_order_relaxed);
    info->events_dropped = atomic_load_explicit(&r->hdr->events_dropped, memory_order_relaxed);
    memcpy(info->boot_id, r->hdr->boot_id, sizeof info->boot_id);
    info->boot_id[sizeof info->boot_id - 1] = '\0';
    info->same_boot = fl__same_boot(r) ? 1 : 0;
    char boot[40];
    /* acquire: as in fl__await_ready */
    info->ready = fl__read_boot_id(boot) == 0 &&
                  atomic_load_explicit(&r->hdr->ready_boot, memory_order_acquire) ==
                      fl__boot_tag(boot);
    info->records_unvouched =
        atomic_load_explicit(&r->hdr->records_unvouched, memory_order_relaxed);
    info->clients_refused = atomic_load_explicit(&r->hdr->clients_refused, memory_order_relaxed);
    info->served = fl__region_served(r) ? 1 : 0;
    return 0;
}

int fl_client_info_get(fl_region *r, uint32_t index, fl_client_info *info)
{
    if (!r || !info)
        return fl__fail(-EINVAL, "fl_client_info_get: NULL argument");
    int err = fl__handle_check(r, "fl_client_info_get");
    if (err)
        return err;
    if (index == 0 || index >= r->client_capacity)
        return fl__fail(-ERANGE, "client index %u out of 1..%u", index, r->client_capacity - 1);
    memset(info, 0, sizeof *info);
    struct fl__client *e = &r->clients[index];
    /* acquire: the supervisor fills the entry before it publishes the state */
    uint32_t state = atomic_load_explicit(&e->state, memory_order_acquire);
    if (state != FL__CLIENT_ATTACHED && state != FL__CLIENT_ADOPTED)
        return fl__fail(-ENOENT, "client table entry %u is free", index);
    info->index = index;
    info->pid = atomic_load_explicit(&e->pid, memory_order_relaxed);
    info->uid = atomic_load_explicit(&e->uid, memory_order_relaxed);
    info->attached = state == FL__CLIENT_ATTACHED;
    info->client_id = atomic_load_explicit(&e->client_id, memory_order_relaxed);
    return 0;
}
