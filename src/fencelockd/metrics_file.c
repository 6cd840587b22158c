/* SPDX-License-Identifier: MIT */
/*
 * metrics_file.c - fencelockd --metrics-file: the Prometheus text file for
 * node_exporter's textfile collector, replaced atomically (write a temporary
 * file beside it, then rename) so the collector never reads half of it.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/metrics.h"
#include "fencelockd.h"

int metrics_file_write(struct fl__shm *r, const char *path)
{
    char tmp[FL__PATH_PLUS_SIZE];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    const char *step = "creating the temporary file";
    int err = 0;
    FILE *f = fopen(tmp, "we");
    if (!f) {
        err = neg_errno();
        log_errorf("metrics_file_failed", "cannot write %s (temporary file %s): %s failed: %s",
                   path, tmp, step, strerror(-err));
        return err;
    }
    err = fl__metrics_write(f, fl__sup_handle(r));
    if (err)
        step = "reading the region's metrics";
    if (fclose(f) != 0 && !err) {
        err = neg_errno();
        step = "writing the temporary file";
    }
    if (!err && rename(tmp, path) != 0) {
        err = neg_errno();
        step = "renaming the temporary file onto it";
    }
    if (err) {
        log_errorf("metrics_file_failed", "cannot write %s (temporary file %s): %s failed: %s",
                   path, tmp, step, strerror(-err));
        if (unlink(tmp) != 0 && errno != ENOENT)
            log_errorf("metrics_file_failed", "cannot remove %s: %s", tmp, strerror(errno));
    }
    return err;
}
