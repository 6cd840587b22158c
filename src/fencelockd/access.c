/* SPDX-License-Identifier: MIT */
/*
 * access.c - who may use the region: fencelockd --group and --mode.
 *
 * Without them the region and its socket are 0600 and its directory (when
 * fencelockd makes it) 0700: one user.  With --group G --mode M:
 *
 *   - M is the mode of the region file and of its socket REGION.sock: its
 *     bits lie within 0666, it includes 0600 (fencelockd's own access), and
 *     it never gives others write (that would let every user forge the
 *     region's state).  Others' read (0004) is allowed: inspection only,
 *     but the socket needs write to connect, so others cannot register.
 *     --group without --mode means 0660.
 *   - the region file and the socket belong to group G (a name or a
 *     number; fencelockd must be root or a member of G).
 *   - a directory fencelockd makes for the region is 0700 plus r-x for the
 *     group if M gives the group anything, and r-x for others if M gives
 *     others anything (0750 for 0660), and belongs to G.  Never writable by
 *     the group: members reach the files by name, and none may replace
 *     them.  An existing directory is left as it is (it may be someone
 *     else's choice, e.g. systemd's RuntimeDirectory=); a warning says so
 *     when G could not reach the region through it.
 *   - an existing region gets G and M applied (fchown, fchmod) before any
 *     client is admitted, and a region_access_changed line says what it
 *     had; if that is not permitted (another user's file) fencelockd exits
 *     3.  Without the options an existing region keeps its access.
 *
 * The checks every opener makes on the directory and file are in
 * src/shm/paths.c; fencelockd applies the strict rule (the directory must be
 * its own or root's) because it creates files there.
 */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fencelockd.h"

int access_parse_group(const char *text, gid_t *gid)
{
    struct group *g = getgrnam(text);
    if (g) {
        *gid = g->gr_gid;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (text[0] >= '0' && text[0] <= '9' && !errno && !*end && v < (gid_t)-1) {
        *gid = (gid_t)v;
        return 0;
    }
    fprintf(stderr, "fencelockd: --group: no group named '%s' (give a group name or number)\n",
            text);
    return -EINVAL;
}

int access_parse_mode(const char *text, unsigned *mode)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 8);
    if (errno || end == text || *end || text[0] == '-' || text[0] == '+') {
        fprintf(stderr, "fencelockd: --mode: '%s' is not an octal mode such as 0660\n", text);
        return -EINVAL;
    }
    if (v & ~0666ul) {
        fprintf(stderr,
                "fencelockd: --mode %s: only read and write bits (within 0666) are allowed\n",
                text);
        return -EINVAL;
    }
    if ((v & 0600) != 0600) {
        fprintf(stderr, "fencelockd: --mode %s: the owner needs read and write (0600)\n", text);
        return -EINVAL;
    }
    if (v & 0002) {
        fprintf(stderr,
                "fencelockd: --mode %s: others may not write: every user could forge the "
                "region's state (share it with a group: --group NAME --mode 0660)\n",
                text);
        return -EINVAL;
    }
    *mode = (unsigned)v;
    return 0;
}

static unsigned dir_mode(unsigned mode)
{
    return 0700 | (mode & 0060 ? 0050 : 0) | (mode & 0006 ? 0005 : 0);
}

int access_make_dir(const char *region_path, gid_t gid, unsigned mode)
{
    char dir[FL__PATH_SIZE];
    int err = fl__region_dir(region_path, dir, sizeof dir);
    if (err) {
        log_errorf("mkdir_failed", "cannot name the directory of %s: %s", region_path,
                   strerror(-err));
        return err;
    }
    if (mkdir(dir, 0700) == 0) {
        /* umask does not decide: the mode is what --mode implies */
        if ((gid != (gid_t)-1 && chown(dir, (uid_t)-1, gid) != 0) ||
            chmod(dir, dir_mode(mode)) != 0) {
            err = neg_errno();
            log_errorf("mkdir_failed", "cannot set the group or mode of directory %s: %s", dir,
                       strerror(-err));
            return err;
        }
        return 0;
    }
    if (errno != EEXIST) {
        err = neg_errno();
        log_errorf("mkdir_failed", "cannot create directory %s: %s", dir, strerror(-err));
        return err;
    }
    /* An existing directory: only a warning if the group cannot reach it
     * (a stat that fails leaves that unknown; opening the region says more). */
    struct stat st;
    if (gid == (gid_t)-1 || stat(dir, &st) != 0)
        return 0;
    bool reachable = (st.st_mode & S_IXOTH) || (st.st_gid == gid && (st.st_mode & S_IXGRP));
    if (!reachable) {
        char msg[FL__PATH_MSG_SIZE];
        snprintf(msg, sizeof msg,
                 "directory %s (group %u, mode %04o) existed already and is left as it is, "
                 "but members of group %u cannot reach the region through it",
                 dir, (unsigned)st.st_gid, (unsigned)st.st_mode & 07777, (unsigned)gid);
        log_begin("warn", "region_dir_unreachable");
        log_str("message", msg);
        log_end();
    }
    return 0;
}

int access_apply(struct fl__shm *r, gid_t gid, unsigned mode)
{
    int fd = fl__sup_region_fd(r);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = neg_errno();
        log_errorf("region_access_failed", "cannot stat region %s: %s", fl_region_path(fl__sup_handle(r)),
                   strerror(-err));
        return err;
    }
    unsigned had = (unsigned)st.st_mode & 07777;
    bool group_ok = gid == (gid_t)-1 || st.st_gid == gid;
    if (group_ok && had == mode)
        return 0;
    if ((!group_ok && fchown(fd, (uid_t)-1, gid) != 0) ||
        (had != mode && fchmod(fd, (mode_t)mode) != 0)) {
        int err = neg_errno();
        log_errorf("region_access_failed",
                   "region %s (owner uid %u, group %u, mode %04o): cannot give it group %d and "
                   "mode %04o: %s",
                   fl_region_path(fl__sup_handle(r)), (unsigned)st.st_uid, (unsigned)st.st_gid, had,
                   gid == (gid_t)-1 ? -1 : (int)gid, mode, strerror(-err));
        return err;
    }
    log_begin("info", "region_access_changed");
    log_str("region", fl_region_path(fl__sup_handle(r)));
    log_u64("group_was", st.st_gid);
    log_u64("group", gid == (gid_t)-1 ? st.st_gid : gid);
    char m[16];
    snprintf(m, sizeof m, "%04o", had);
    log_str("mode_was", m);
    snprintf(m, sizeof m, "%04o", mode);
    log_str("mode", m);
    log_end();
    return 0;
}

int access_socket(const char *socket_path, struct fl__shm *r)
{
    /* Same access as the region file: whoever may map it may register. */
    struct stat st;
    if (fstat(fl__sup_region_fd(r), &st) != 0 || chown(socket_path, (uid_t)-1, st.st_gid) != 0 ||
        chmod(socket_path, st.st_mode & 0777) != 0) {
        int err = neg_errno();
        log_errorf("socket_access_failed", "cannot give socket %s the region's group and mode: %s",
                   socket_path, strerror(-err));
        return err;
    }
    return 0;
}
