/* SPDX-License-Identifier: MIT */
/*
 * op_name.h - the names of the operations (FL_OP_* of fencelock.h) as the
 * programs write them: fencelock status (last_stale_op, last_rejected_op)
 * and fencelockd's log (the operation of a fencing_rejection).
 */
#ifndef FL_COMMON_OP_NAME_H
#define FL_COMMON_OP_NAME_H

#include <stdint.h>

/* "commit", "strict_commit", "renew" or "release"; NULL for anything else
 * (0: no operation yet). */
const char *fl__op_name(uint32_t op);

#endif
