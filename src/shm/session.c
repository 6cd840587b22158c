/* SPDX-License-Identifier: MIT */
/*
 * session.c - a client's life with a shared-memory region, the shm
 * backend's open and close (backend.h): open (map, wait until the
 * region is ready, register with its supervisor), close (stop the
 * keepalives, free the locks still held, say goodbye, unmap; in a forked
 * child only unmap), and the handle's accessors.  It sits above the mapping
 * (region.c), readiness (ready.c), registration (client.c), the lock words
 * (slot.c) and keepalive, and calls only down into them.
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

/* The backend's open (backend.h): `path` is resolved; `named` relaxes the
 * directory trust check for a path the caller named (paths.c). */
int fl__shm_open(const char *path, bool readonly, bool named, fl_region **out)
{
    struct fl__shm *r = NULL;
    int err = fl__region_map_named(path, readonly, named, &r);
    if (err)
        return err;
    if (!r)
        __builtin_unreachable(); /* set when err is 0 (for the analyzer) */
    if (readonly) {
        /* For inspection: no readiness wait, no registration; a region
         * that is not ready, or of an earlier boot, is shown as it is. */
        *out = &r->h;
        return 0;
    }
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
    if (!err)
        fl__life_start(r); /* best effort: life.c */
    if (err) {
        char why[1024];
        snprintf(why, sizeof why, "%s", fl_last_error());
        fl__unreg_note(r, err);
        fl__set_error("region %s opened unregistered (death detection off: locks of this "
                      "process end only at their lease deadlines): %s",
                      r->h.path, why);
    }
    *out = &r->h;
    return 0;
}

/* Tell the supervisor's log of a lock fl_close freed. */
static void fl__note_abandoned(void *ctx, uint32_t slot, uint64_t token)
{
    fl__event_post(ctx, &(struct fl__event_data){.type = FL__EV_ABANDONED,
                                                 .slot = slot,
                                                 .token = token});
}

void fl__shm_close(fl_region *h)
{
    struct fl__shm *r = fl__shm_of(h);
    if (!r)
        return;
    if (fl__handle_is_inherited(&r->h)) {
        /* A forked child closing its copy of a parent's handle: unmap and
         * close our copies only.  The parent's locks, registration and
         * keepalive thread (which does not exist in the child; its memory
         * is left as it is) stay the parent's.  Closing our copy of the
         * socket does not end the parent's connection. */
        munmap(r->base, r->size);
        close(r->fd);
        if (r->sock >= 0)
            close(r->sock);
        fl__handle_fini(&r->h, true);
        free((void *)r->held);
        free((void *)r->held_tid);
        fl__life_forget(r);
        free(r);
        return;
    }
    fl__keepalive_shutdown(&r->h);
    /* Locks still held through this handle are abandoned, as at a death: we
     * free them ourselves, which works whether or not the supervisor that
     * registered us still runs.  shutdown() ends the connection even where a
     * forked child holds a copy of the socket, so the supervisor releases
     * the client index at once. */
    if (r->client && !r->h.readonly)
        fl__slots_reap_client(r, r->client, fl__note_abandoned, r);
    /* After that reaping: the life word is given up (unlocked, not dead)
     * only once nothing is held under our entry (life.c). */
    fl__life_stop(r);
    /* After our own reaping: tells fencelockd this is a close, not a death
     * (its log says "closed" only then). */
    fl__client_goodbye(r);
    fl__unreg_clear(r);
    if (r->sock >= 0)
        shutdown(r->sock, SHUT_RDWR);
    fl__region_unmap(r);
}

int fl__shm_region_registered(const fl_region *h)
{
    const struct fl__shm *r = fl__shm_of_const(h);
    return r && r->sock >= 0 && !fl__handle_is_inherited(&r->h) ? 1 : 0;
}
