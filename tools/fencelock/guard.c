/* SPDX-License-Identifier: MIT */
/*
 * guard.c - SIGBUS from a region truncated under the tool: a clear error
 * and exit status 3 instead of a silent death (guard.h says how it is used).
 */
#include "guard.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

sigjmp_buf cli_bus_env;
static volatile sig_atomic_t bus_armed;
static bool bus_installed;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    /* si_code > 0: raised by the kernel for an access (a truncated mapping
     * gives BUS_ADRERR); <= 0: sent by a process, which gets its due. */
    if (bus_armed && si->si_code > 0) {
        bus_armed = 0;
        siglongjmp(cli_bus_env, 1); /* restores the mask saved by sigsetjmp */
    }
    /* Not ours to handle: the default action (the faulting access runs again
     * and dies of it; a sent signal is raised again, delivered on return). */
    signal(sig, SIG_DFL);
    if (si->si_code <= 0)
        raise(sig);
}

void cli_bus_arm(void)
{
    if (!bus_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, NULL);
        bus_installed = true;
    }
    bus_armed = 1;
}

void cli_bus_disarm(void) { bus_armed = 0; }

int cli_region_truncated(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        fprintf(stderr,
                "fencelock: region %s was truncated while being read (the file is now %lld "
                "bytes): another process shrank it, and it is no longer a valid region\n",
                path, (long long)st.st_size);
    else
        fprintf(stderr,
                "fencelock: region %s was truncated while being read: another process "
                "shrank it, and it is no longer a valid region\n",
                path);
    return CLI_EXIT_REGION;
}
