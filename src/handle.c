/* SPDX-License-Identifier: MIT */
/*
 * handle.c - the base every backend's handle starts with (core.h, struct
 * fl_region), made here once for all of them.
 */
#include <stdio.h>
#include <unistd.h>

#include "core.h"

void fl__handle_init(fl_region *h, const struct fl__backend *be, const char *name,
                     bool readonly)
{
    h->be = be;
    h->readonly = readonly;
    h->pid = (uint32_t)getpid();
    h->key_cookie = 0; /* api.c tags the handle once its open succeeded */
    h->keeper = NULL;
    pthread_mutex_init(&h->keeper_lock, NULL);
    snprintf(h->path, sizeof h->path, "%s", name);
    fl__handle_bind_process(h);
}

void fl__handle_fini(fl_region *h, bool inherited)
{
    /* In a forked child keeper_lock is left as it is: a parent's thread may
     * have held it at the fork, and the child's copy would stay locked. */
    if (!inherited)
        pthread_mutex_destroy(&h->keeper_lock);
}
