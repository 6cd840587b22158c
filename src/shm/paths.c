/* SPDX-License-Identifier: MIT */
/*
 * paths.c - whether the place of a region file can be trusted (where it is
 * by default: region_name.c).
 *
 * WHO MAY HAVE PUT IT THERE (I12).  A region is only as trustworthy as the
 * directory that holds its name: whoever may rename entries there may move
 * the region away and put a file of their own in its place (and squat a
 * predictable name such as /dev/shm/fencelock-UID before its user makes
 * it).  So, as ssh does for ~/.ssh and tmux for its socket directory, every
 * open (fl_open, fl_open_readonly, fencelockd) checks the region's directory
 * D (the path's parent; "." for a bare name) and the region file F:
 *
 *   - D's owner is the caller (effective uid) or root; for a path named
 *     explicitly (an argument, --region or $FENCELOCK_REGION; not for
 *     fencelockd, which creates files there) also any other user: naming a
 *     region in another user's directory trusts that user.
 *   - D is not writable by others (S_IWOTH) unless it has the sticky bit
 *     (then only an entry's owner may rename it, as in /tmp).  D may be
 *     group-writable: only its owner or root can make it so, and a group
 *     that may write the region can forge its state anyway (README "Trust
 *     model").  fencelockd --group makes D group-searchable, never
 *     group-writable.
 *   - F's owner is the caller, root, or D's owner.
 *
 * A refusal is -EPERM, with fl_last_error() naming the directory or file,
 * its owner and mode, and the rule.  The checks follow symbolic links (what
 * is checked is what is opened), and D is checked before F is opened.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

int fl__region_dir(const char *region_path, char *buf, size_t cap)
{
    const char *slash = strrchr(region_path, '/');
    int n;
    if (!slash)
        n = snprintf(buf, cap, ".");
    else if (slash == region_path)
        n = snprintf(buf, cap, "/");
    else
        n = snprintf(buf, cap, "%.*s", (int)(slash - region_path), region_path);
    if (n < 0 || (size_t)n >= cap)
        return fl__fail(-ENAMETOOLONG, "region path too long: %s", region_path);
    return 0;
}

int fl__check_region_dir(const char *region_path, bool named, uid_t *owner)
{
    char dir[FL__PATH_SIZE];
    int err = fl__region_dir(region_path, dir, sizeof dir);
    if (err)
        return err;
    struct stat st;
    if (stat(dir, &st) != 0) {
        /* Missing or unreachable: opening the region says so. */
        *owner = (uid_t)-1;
        return 0;
    }
    *owner = st.st_uid;
    uid_t me = geteuid();
    unsigned mode = (unsigned)st.st_mode & 07777;
    if (!named && st.st_uid != me && st.st_uid != 0)
        return fl__fail(-EPERM,
                        "region directory %s is owned by uid %u, not by you (uid %u) nor "
                        "root: another user made it and could replace the region in it; "
                        "refusing it (remove it, or name a region elsewhere)",
                        dir, (unsigned)st.st_uid, (unsigned)me);
    if ((mode & S_IWOTH) && !(mode & S_ISVTX))
        return fl__fail(-EPERM,
                        "region directory %s (owner uid %u, mode %04o) is writable by every "
                        "user without the sticky bit: anyone could replace the region in it; "
                        "refusing it (chmod o-w, or name a region elsewhere)",
                        dir, (unsigned)st.st_uid, mode);
    return 0;
}

int fl__check_region_file(const char *path, const struct stat *st, uid_t dir_owner)
{
    uid_t me = geteuid();
    if (st->st_uid == me || st->st_uid == 0 || st->st_uid == dir_owner)
        return 0;
    return fl__fail(-EPERM,
                    "region %s is owned by uid %u, neither you (uid %u), root, nor the owner "
                    "of its directory (uid %u): another user put it there; refusing it",
                    path, (unsigned)st->st_uid, (unsigned)me, (unsigned)dir_owner);
}
