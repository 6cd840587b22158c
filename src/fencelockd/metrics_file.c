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

int metrics_file_write(fl_region *r, const char *path)
{
    char tmp[FL__PATH_PLUS_SIZE];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "we");
    if (!f)
        return fl__neg_errno();
    int err = fl__metrics_write(f, r);
    if (fclose(f) != 0 && !err)
        err = fl__neg_errno();
    if (!err && rename(tmp, path) != 0)
        err = fl__neg_errno();
    if (err)
        unlink(tmp);
    return err;
}
