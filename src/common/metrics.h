/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - every counter of a region in the Prometheus text exposition
 * format (version 0.0.4), for `fencelock metrics` and fencelockd's
 * --metrics-file (node_exporter's textfile collector reads either).
 */
#ifndef FL_METRICS_H
#define FL_METRICS_H
#include <stdio.h>

#include "fencelock.h"

/* Write the metrics of r to f.  Returns 0, or a negative errno from the
 * inspection API (the output is then incomplete). */
int fl__metrics_write(FILE *f, fl_region *r);

/* Write s as the inside of a Prometheus label value: backslash, double quote
 * and newline escaped; other control bytes and bytes that are not valid
 * UTF-8 shown as the text \xNN (with its backslash escaped). */
void fl__metrics_label(FILE *f, const char *s);

#endif
