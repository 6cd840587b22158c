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

/* Write s as the inside of a Prometheus label value.  The value is s with
 * each backslash doubled and the text \xNN for each control byte but
 * newline and each byte that is not valid UTF-8, so that distinct keys
 * give distinct values; then backslash, double quote and newline are
 * escaped as the format says. */
void fl__metrics_label(FILE *f, const char *s);

#endif
