/* SPDX-License-Identifier: MIT */
/*
 * region_name.c - the region string: the one an fl_open caller gave, or
 * else the default, before any backend is chosen (api.c picks the backend
 * from it, backends.c).
 *
 * THE DEFAULT PATH (fl_default_region_path): $FENCELOCK_REGION if set; for
 * root /run/fencelock/region (the system-wide region); for a user
 * $XDG_RUNTIME_DIR/fencelock/region (a 0700 directory the login manager
 * makes for the user); only when neither exists (XDG_RUNTIME_DIR unset, not
 * absolute or not a directory; /run missing) the old
 * /dev/shm/fencelock-UID/region.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

bool fl__path_is_named(const char *region_path)
{
    if (region_path && *region_path)
        return true;
    const char *env = getenv(FL_REGION_ENV);
    return env && *env;
}

static bool fl__is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int fl_default_region_path(char *buf, size_t cap)
{
    if (!buf)
        return fl__fail(-EINVAL, "fl_default_region_path: buf is NULL");
    const char *env = getenv(FL_REGION_ENV);
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (env && *env)
        n = snprintf(buf, cap, "%s", env);
    else if (getuid() == 0 && fl__is_dir("/run"))
        n = snprintf(buf, cap, "/run/fencelock/region");
    else if (getuid() != 0 && xdg && xdg[0] == '/' && fl__is_dir(xdg))
        n = snprintf(buf, cap, "%s/fencelock/region", xdg);
    else
        n = snprintf(buf, cap, "/dev/shm/fencelock-%u/region", (unsigned)getuid());
    if (n < 0 || (size_t)n >= cap)
        return fl__fail(-ENAMETOOLONG, "default region path does not fit in %zu bytes", cap);
    return 0;
}

int fl__region_resolve_path(const char *path, char *buf, size_t cap)
{
    if (path && *path) {
        size_t n = strlen(path);
        if (n >= cap)
            return fl__fail(-ENAMETOOLONG, "region path too long (%zu bytes)", n);
        memcpy(buf, path, n + 1);
        return 0;
    }
    return fl_default_region_path(buf, cap);
}
