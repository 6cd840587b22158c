/* SPDX-License-Identifier: MIT */
/*
 * guard.h - reading a mapped region without dying when it shrinks.
 *
 * A region file truncated by another process (`truncate -s 4096 REGION`)
 * turns every access to the lost pages of our read-only mapping into SIGBUS,
 * which would kill the tool with no word said (I9).  The commands read the
 * mapping only inside a guarded stretch:
 *
 *     if (sigsetjmp(cli_bus_env, 1) != 0)
 *         return cli_region_truncated(path);   (says so; CLI_EXIT_REGION)
 *     cli_bus_arm();
 *     ... fl_*_info_get(), fl__metrics_write() ...
 *     cli_bus_disarm();
 *
 * A SIGBUS while armed jumps back to the sigsetjmp (which must be in a
 * function still running, hence a macro-free pattern the caller writes
 * out); a SIGBUS while disarmed, or sent by kill(), keeps its default
 * action.  Nothing the jump abandons holds a lock: the library's inspection
 * calls only load from the mapping.  At worst a descriptor or some memory
 * of the abandoned read is leaked, and the command ends right after.
 */
#ifndef FL_TOOL_GUARD_H
#define FL_TOOL_GUARD_H

#include <setjmp.h>

extern sigjmp_buf cli_bus_env;

/* Install the SIGBUS handler (once) and arm the jump to cli_bus_env. */
void cli_bus_arm(void);
/* Disarm: a SIGBUS from here on has its default action again. */
void cli_bus_disarm(void);
/* After the jump: say on stderr that the region at path was truncated while
 * being read (with its size now), and return CLI_EXIT_REGION.  (On a
 * terminal in the alternate screen, call it after leaving that screen.) */
int cli_region_truncated(const char *path);

#endif
