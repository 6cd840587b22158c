/* SPDX-License-Identifier: MIT */
/*
 * ready.c - whether a supervisor serves a region, and whether the region is
 * ready for clients of this boot (READINESS below).  Used by the session
 * (fl_open), the supervisor (fencelockd readies the region and takes its
 * lock) and the inspection API; it calls only down, into the mapping.
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

#include "shm.h"

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

int fl__region_lock_serve(struct fl__shm *r)
{
    struct flock l = fl__whole_file(F_WRLCK);
    if (fcntl(r->fd, F_OFD_SETLK, &l) == 0)
        return 0;
    return errno == EAGAIN || errno == EACCES ? -EBUSY : fl__neg_errno();
}

bool fl__region_served(const struct fl__shm *r)
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

/* How long fl_open waits for a supervisor that is starting to ready the
 * region (make its epoch durable, raise the floor, vouch for the records):
 * milliseconds normally; a state file on a slow disk may take longer. */
#define FL__READY_WAIT_NS (5ull * FL__NS_PER_S)

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
int fl__await_ready(struct fl__shm *r)
{
    char boot[FL__BOOT_ID_SIZE];
    int err = fl__read_boot_id(boot);
    if (err)
        return fl__fail(-EIO,
                        "region %s: cannot read this boot's id (%s): whether its leases are "
                        "still valid cannot be known, so it is not opened",
                        r->h.path, strerror(-err));
    uint64_t want = fl__boot_tag(boot);
    uint64_t give_up = fl__monotonic_ns(NULL) + FL__READY_WAIT_NS;
    for (;;) {
        /* acquire: see the ordering above */
        uint32_t seq = atomic_load_explicit(&r->hdr->ready_wake, memory_order_acquire);
        uint64_t have = atomic_load_explicit(&r->hdr->ready_boot, memory_order_acquire);
        if (have == want) {
            /* r->other_boot was read from the header's boot_id when the
             * region was mapped, maybe before a starting supervisor wrote
             * this boot's id there; it writes boot_id before its release
             * store of ready_boot, so after our acquire load saw the tag a
             * fresh read sees this boot's id (a stale one would refuse a
             * ready region for FL__READY_WAIT_NS, then fail with -EAGAIN) */
            r->other_boot = !fl__same_boot(r);
            if (!r->other_boot)
                return 0;
        }
        uint64_t now = fl__monotonic_ns(NULL);
        if (!fl__region_served(r) || now >= give_up) {
            if (r->other_boot)
                return fl__fail(-EAGAIN,
                                "region %s: written during an earlier boot; start fencelockd "
                                "to adopt it (it voids the old leases)",
                                r->h.path);
            return fl__fail(-EAGAIN,
                            "region %s: not ready: no fencelockd has made this boot's token "
                            "epoch durable for it yet (%s)",
                            r->h.path,
                            fl__region_served(r) ? "fencelockd is still starting"
                                                 : "start fencelockd; if it failed to start, "
                                                   "its log says why");
        }
        /* Wake now and then to notice a supervisor that died starting. */
        uint64_t until = now + 100000000ull < give_up ? now + 100000000ull : give_up;
        fl__futex_wait(&r->hdr->ready_wake, seq, until);
    }
}

void fl__region_set_ready(struct fl__shm *r, uint64_t boot_tag)
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
    struct fl__shm *r = NULL;
    err = fl__region_map(path, false, &r);
    if (err)
        return err;
    if (!r)
        __builtin_unreachable(); /* set when err is 0 (for the analyzer) */
    char boot[FL__BOOT_ID_SIZE];
    err = fl__read_boot_id(boot);
    if (!err)
        fl__region_set_ready(r, fl__boot_tag(boot));
    fl__region_unmap(r);
    return err;
}

