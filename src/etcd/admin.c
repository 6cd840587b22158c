/* SPDX-License-Identifier: MIT */
/*
 * admin.c - fl_etcd_epoch() (include/fencelock.h), the operator's entry
 * point to an etcd region's token epoch: `fencelock etcd-epoch` calls it
 * after a snapshot restore (docs/etcd.md, "Restoring a snapshot").
 *
 * It opens no region handle: fl_open would create an absent epoch, and
 * fl_open_readonly reads one as 0 without saying whether the cluster was
 * asked.  It makes one client (client.h), reads or bumps PREFIX/epoch
 * (epoch.c), and frees the client before it returns.  `asked` in the result
 * tells the region's own failures (its string, the files it names: nothing
 * was sent) from the cluster's.
 *
 * Compiled into every build: without etcd support (FL_HAVE_ETCD unset) it
 * only says so, as fl_open does for an etcd:// region.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core.h"

#ifdef FL_HAVE_ETCD
#include "../shown.h"
#include "client.h"
#endif

_Static_assert(sizeof(fl_etcd_epoch_result) == 64,
               "fl_etcd_epoch_result changed size: ABI break");

int fl_etcd_epoch(const char *region, unsigned flags, uint64_t at_least,
                  fl_etcd_epoch_result *out)
{
    if (!region || !out)
        return fl__fail(-EINVAL, "fl_etcd_epoch: NULL argument");
    memset(out, 0, sizeof *out);
    if (flags & ~FL_ETCD_EPOCH_BUMP)
        return fl__fail(-EINVAL, "fl_etcd_epoch: unknown flags 0x%x", flags & ~FL_ETCD_EPOCH_BUMP);
    if (at_least && !(flags & FL_ETCD_EPOCH_BUMP))
        return fl__fail(-EINVAL, "fl_etcd_epoch: at_least goes with FL_ETCD_EPOCH_BUMP");
#ifndef FL_HAVE_ETCD
    return fl__fail(-EPROTONOSUPPORT,
                    "this fencelock was built without etcd support (libcurl and jansson)");
#else
    if (!fl__etcd_is_uri(region)) {
        char shown[FL__ETCD_URI_MAX];
        fl__region_shown(region, shown, sizeof shown);
        return fl__fail(-EINVAL, "'%s' is not an etcd region (etcd:// or etcds://): a region "
                                 "file's epoch is fencelockd's",
                        shown);
    }
    struct fl__etcd_client *c = calloc(1, sizeof *c);
    if (!c)
        return fl__fail(-ENOMEM, "out of memory");
    int err = fl__etcd_client_init(c, region);
    if (err) {
        free(c);
        return err;
    }
    out->asked = 1;
    if (flags & FL_ETCD_EPOCH_BUMP)
        err = fl__etcd_epoch_bump(c, at_least, &out->before, &out->after);
    else {
        err = fl__etcd_epoch_load(c, false, &out->before);
        out->after = out->before;
    }
    fl__etcd_client_destroy(c);
    free(c);
    if (err)
        out->before = out->after = 0;
    return err;
#endif
}
