/* SPDX-License-Identifier: MIT */
/*
 * cli.c - what the subcommands share beyond src/common (cli.h): how a
 * command's output is finished, the rule for a KEY or RECORD argument, and
 * the exit status of a region that cannot be opened.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fencelock.h"

/* Output must reach stdout: `fencelock status > file` on a full disk is an
 * error, not a success. */
int cli_finish_stdout(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return CLI_EXIT_OK;
    fprintf(stderr, "fencelock: cannot write the output: %s\n",
            errno ? strerror(errno) : "write error");
    return CLI_EXIT_RUNTIME;
}

int cli_check_name(const char *what, const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return fl__usage_error("%s is empty (1 to %d bytes)", what, FL_KEY_MAX);
    if (n > FL_KEY_MAX)
        return fl__usage_error("%s is %zu bytes long (1 to %d bytes)", what, n, FL_KEY_MAX);
    return -1;
}

int cli_open_status(int err)
{
    return err == -ENOMEM || err == -EMFILE || err == -ENFILE ? CLI_EXIT_RUNTIME
                                                               : CLI_EXIT_REGION;
}

int cli_open_failed(const char *region, int err)
{
    const char *detail = fl__library_error(err);
    int rc = cli_open_status(err);
    char path[PATH_MAX];
    if (region)
        snprintf(path, sizeof path, "%s", region);
    else if (fl_default_region_path(path, sizeof path) != 0)
        snprintf(path, sizeof path, "(default)");
    /* A URI, or anything with a userinfo's '@', is never echoed: it may hold
     * a password the library refused (its message names the region with the
     * password masked). */
    if (rc == CLI_EXIT_RUNTIME || strstr(detail, path) || strstr(path, "://") ||
        strchr(path, '@'))
        fl__say("cannot open the region: %s", detail);
    else
        fl__say("cannot open region %s: %s", path, detail);
    return rc;
}

int cli_region_option(const char *arg, const char **region)
{
    if (!arg[0])
        return fl__usage_error("--region: the path is empty");
    *region = arg;
    return 0;
}
