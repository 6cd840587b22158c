/* SPDX-License-Identifier: MIT */
/* op_name.c - the names of FL_OP_*; see op_name.h. */
#include "op_name.h"

#include "fencelock.h"

const char *fl__op_name(uint32_t op)
{
    switch (op) {
    case FL_OP_COMMIT: return "commit";
    case FL_OP_STRICT_COMMIT: return "strict_commit";
    case FL_OP_RENEW: return "renew";
    case FL_OP_RELEASE: return "release";
    default: return NULL;
    }
}
