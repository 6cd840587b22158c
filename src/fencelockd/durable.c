/* SPDX-License-Identifier: MIT */
/*
 * durable.c - the durable state file: the one fact that must survive a host
 * crash, power loss or reboot for tokens to stay increasing (I1): the
 * greatest token epoch that may have been handed out.
 *
 * The region itself lives on tmpfs (a reboot empties it) or, if on disk, may
 * come back from a crash as whatever the page cache had written.  So before
 * any token of epoch E is handed out, E is written here durably: to a
 * temporary file, fsync, rename over the old file, fsync the directory.  A
 * failed fsync is fatal for that write: the epoch is not used, and the
 * write is never retried as if it had succeeded (after a failed fsync the
 * kernel may have dropped the dirty pages and cleared the error).
 *
 * The format is text, for operators to read (never to lower):
 *   fencelock-state 1
 *   epoch 17
 *   checksum 87eae355fffc3b03
 * checksum is FNV-1a 64 of the first two lines, newlines included.  The
 * reader accepts exactly the text written for an epoch: no blanks, signs,
 * leading zeros or extra bytes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fencelockd.h"

int durable_default_path(const char *region, char *buf, size_t cap)
{
    char dir[FL__PATH_SIZE];
    if (getuid() == 0) {
        snprintf(dir, sizeof dir, "/var/lib/fencelock");
    } else {
        const char *xdg = getenv("XDG_STATE_HOME");
        const char *home = getenv("HOME");
        if (xdg && *xdg)
            snprintf(dir, sizeof dir, "%s/fencelock", xdg);
        else if (home && *home)
            snprintf(dir, sizeof dir, "%s/.local/state/fencelock", home);
        else {
            log_error("no_state_path", "cannot choose a state file (neither XDG_STATE_HOME nor "
                                       "HOME is set); give --state PATH");
            return -ENOENT;
        }
    }
    /* One state file per region path: readable name plus a hash of the path. */
    char name[96];
    size_t n = 0;
    for (const char *p = region; *p && n < 60; p++)
        if (*p != '/' || n > 0)
            name[n++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                                       (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'
                                   ? *p
                                   : '_');
    name[n] = '\0';
    int w = snprintf(buf, cap, "%s/%s-%08llx.state", dir, name,
                     (unsigned long long)(fl__checksum(region, strlen(region)) & 0xffffffffu));
    if (w < 0 || (size_t)w >= cap) {
        log_errorf("no_state_path", "the default state file under %s is too long a path; give "
                                    "--state PATH", dir);
        return -ENAMETOOLONG;
    }
    return 0;
}

/* The whole file for an epoch, as it is written; the reader accepts
 * exactly this text and nothing else.  Returns its length (body_len: the
 * length of the two checksummed lines). */
static size_t render(char *out, size_t cap, uint64_t epoch, size_t *body_len)
{
    int n = snprintf(out, cap, "fencelock-state 1\nepoch %llu\n", (unsigned long long)epoch);
    size_t len = n > 0 && (size_t)n < cap ? (size_t)n : 0;
    if (body_len)
        *body_len = len;
    snprintf(out + len, cap - len, "checksum %016llx\n",
             (unsigned long long)fl__checksum(out, len));
    return strlen(out);
}

int durable_load(const char *path, uint64_t *epoch)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int err = neg_errno();
        if (err != -ENOENT)
            log_errorf("state_invalid", "cannot read state file %s: %s", path, strerror(-err));
        return err;
    }
    char text[512];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int err = ferror(f) ? -EIO : 0;
    fclose(f); /* only read */
    if (err) {
        log_errorf("state_invalid", "cannot read state file %s: read error", path);
        return err;
    }
    text[n] = '\0';
    /* Read the epoch, then demand the file be exactly the text written for
     * it: no blanks, signs, leading zeros or trailing bytes anywhere. */
    static const char head[] = "fencelock-state 1\nepoch ";
    char *end;
    unsigned long long e = 0;
    bool ok = n > sizeof head - 1 && memcmp(text, head, sizeof head - 1) == 0 &&
              text[sizeof head - 1] >= '0' && text[sizeof head - 1] <= '9';
    if (ok) {
        errno = 0;
        e = strtoull(text + sizeof head - 1, &end, 10);
        ok = errno == 0;
    }
    char want[128];
    size_t body_len = 0, want_len = ok ? render(want, sizeof want, e, &body_len) : 0;
    if (!ok || n < body_len || memcmp(text, want, body_len) != 0) {
        log_errorf("state_invalid", "state file %s is not a fencelock state file (version 1)",
                   path);
        return -EPROTO;
    }
    if (n != want_len || memcmp(text, want, n) != 0) {
        log_errorf("state_invalid", "state file %s is corrupt (checksum mismatch); refusing to "
                                    "guess an epoch: restore it or start with --min-token", path);
        return -EPROTO;
    }
    *epoch = e;
    return 0;
}

static int mkdir_parents(char *dir)
{
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(dir, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return neg_errno();
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return neg_errno();
    return 0;
}

int durable_store(const char *path, uint64_t epoch)
{
    char dir[FL__PATH_SIZE];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    int rc = mkdir_parents(dir);
    if (rc) {
        log_errorf("epoch_not_durable", "cannot create directory %s: %s", dir, strerror(-rc));
        return rc;
    }
    char tmp[FL__PATH_PLUS_SIZE], text[256];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    size_t len = render(text, sizeof text, epoch, NULL);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = neg_errno();
        log_errorf("epoch_not_durable", "cannot create %s: %s", tmp, strerror(-rc));
        return rc;
    }
    const char *step = "write";
    ssize_t w = write(fd, text, len);
    if (w != (ssize_t)len) {
        if (w >= 0)
            errno = ENOSPC; /* a short write of a few bytes: the disk is full */
        goto fail;
    }
    step = "fsync";
    if (fsync(fd) != 0)
        goto fail;
    step = "close";
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    step = "rename";
    if (rename(tmp, path) != 0)
        goto fail;
    step = "fsync of the directory";
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        rc = neg_errno();
        if (dfd >= 0)
            close(dfd);
        log_errorf("epoch_not_durable", "%s of %s failed: %s", step, dir, strerror(-rc));
        return rc;
    }
    close(dfd); /* fsync said what close could */
    return 0;
fail:
    rc = neg_errno();
    log_errorf("epoch_not_durable", "%s of state file %s failed: %s", step, tmp, strerror(-rc));
    if (fd >= 0)
        close(fd);
    if (unlink(tmp) != 0 && errno != ENOENT)
        log_errorf("state_tmp_left", "cannot remove %s: %s", tmp, strerror(errno));
    return rc;
}
