/* SPDX-License-Identifier: MIT */
/*
 * session.c - a client's life with a region: fl_open (map, wait until the
 * region is ready, register with its supervisor), fl_close (stop the
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

#include "internal.h"

int fl_open(const char *region_path, fl_region **out)
{
    if (!out)
        return fl__fail(-EINVAL, "fl_open: out is NULL");
    char path[FL__PATH_SIZE];
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
    char path[FL__PATH_SIZE];
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
