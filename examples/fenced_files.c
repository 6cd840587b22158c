/* SPDX-License-Identifier: MIT */
/*
 * fenced_files.c - fencing a resource that has no conditional write: files.
 *
 * A file system cannot compare tokens, so a file is never overwritten in
 * place.  Every writer writes a new, immutable file named after its token,
 * and only a small pointer, a fenced record in the region, says which file
 * is current:
 *
 *   write:  DIR/.NAME.<token>.tmp.<pid>   write, fsync
 *           rename -> DIR/NAME.<token>    (never over an existing file), fsync DIR
 *           fl_commit_u64(NAME, token, FL_COMMIT_STRICT)   the pointer: fenced
 *   read:   fl_read_u64(NAME) -> g; open DIR/NAME.<g>
 *   gc:     fl_read_u64(NAME) -> P; delete DIR/NAME.<g> (and its temporaries) for g < P
 *
 * A holder paused past its lease may still write its file when it wakes up,
 * but its commit of the pointer is refused (-ESTALE): a newer token has been
 * accepted.  Its file stays behind and is never current.  Only the pointer
 * makes a file current, and the pointer only moves to greater tokens.
 *
 * Why one file per token, written once: if a holder overwrote NAME.<t> while
 * the pointer already said t, the new bytes would be current without any
 * fenced check, also when written by a holder that has lost the lock (before
 * the next holder commits).  So the rename refuses to replace an existing
 * file (RENAME_NOREPLACE) and the commit is strict (one generation per
 * acquisition): to write again, acquire again.
 *
 * Why garbage collection is safe without any lock: the pointer's greatest
 * accepted token P only grows, and a commit of g < P is refused forever, so
 * a file NAME.<g> with g < P can never become current again, whoever still
 * holds an old token.  Files with g > P are writes in progress (or writes
 * whose commit was refused because P moved past them later) and are kept; the
 * current file g == P is kept.  A reader that read the pointer just before
 * it moved may find its file deleted: it reads the pointer again and, if it
 * moved, opens the new file (read_current below).  An open file stays
 * readable after it is deleted.
 *
 * Usage:
 *   fenced_files write [--lease-ms N] KEY DIR NAME < DATA
 *       acquire KEY, print "acquired KEY: token T", read DATA from standard
 *       input (the work done under the lock), write DIR/NAME.<T> and commit
 *       the pointer record NAME
 *   fenced_files read DIR NAME     copy the current file to standard output
 *   fenced_files gc DIR NAME       delete the generations older than the current one
 *
 * NAME is also the record's name, bound to KEY by its first commit.  The
 * region is $FENCELOCK_REGION, else the default.  Exit status: 0 done;
 * 1 error; 2 bad usage; 3 region error; 76 ownership lost (the pointer
 * accepted a newer token: our file was left behind, not current).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fencelock.h"

#define EXIT_USAGE 2
#define EXIT_REGION 3
#define EXIT_OWNERSHIP_LOST 76

static int usage(void)
{
    fputs("usage: fenced_files write [--lease-ms N] KEY DIR NAME < DATA\n"
          "       fenced_files read DIR NAME\n"
          "       fenced_files gc DIR NAME\n",
          stderr);
    return EXIT_USAGE;
}

/* A NAME is one path component that cannot be mistaken for our temporaries. */
static bool good_name(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n <= FL_KEY_MAX && name[0] != '.' && !strchr(name, '/');
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* rename(from, to) that fails with EEXIST instead of replacing to. */
static int rename_noreplace(const char *from, const char *to)
{
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -errno;
    /* A file system without RENAME_NOREPLACE: link() never replaces either. */
    if (link(from, to) != 0)
        return -errno;
    unlink(from);
    return 0;
}

/* Write DIR/NAME.<token> atomically and durably: readers never see a partial
 * file, and after a crash the name holds all of the data or does not exist.
 * -EEXIST if this token already wrote its generation. */
static int fenced_file_write(const char *dir, const char *name, uint64_t token,
                             const void *data, size_t len)
{
    char tmp[4096], final[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s.%" PRIu64 ".tmp.%d", dir, name, token, (int)getpid());
    snprintf(final, sizeof final, "%s/%s.%" PRIu64, dir, name, token);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int err = write_all(fd, data, len);
    if (!err && fsync(fd) != 0)
        err = -errno;
    if (close(fd) != 0 && !err)
        err = -errno;
    if (!err)
        err = rename_noreplace(tmp, final);
    if (err) {
        unlink(tmp);
        return err;
    }
    /* The rename is durable before the pointer can name the file. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    err = fsync(dfd) == 0 ? 0 : -errno;
    close(dfd);
    return err;
}

/* Open the current generation of NAME: 0 and *fd, *gen; -ENOENT if nothing
 * was ever committed; another negative errno on failure. */
static int fenced_file_open_current(fl_region *r, const char *dir, const char *name, int *fd,
                                    uint64_t *gen)
{
    uint64_t g, fence;
    int err = fl_read_u64(r, name, &g, &fence);
    for (int tries = 0; !err && tries < 100; tries++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.%" PRIu64, dir, name, g);
        *fd = open(path, O_RDONLY | O_CLOEXEC);
        if (*fd >= 0) {
            *gen = g;
            return 0;
        }
        if (errno != ENOENT)
            return -errno;
        /* Deleted by gc after a newer generation became current: follow the
         * pointer.  If it did not move, the current file is really missing. */
        uint64_t again;
        err = fl_read_u64(r, name, &again, &fence);
        if (!err && again == g)
            return -EIO;
        g = again;
    }
    return err ? err : -EAGAIN;
}

/* Delete DIR/NAME.<g> and DIR/.NAME.<g>.tmp.* for every g below the current
 * pointer; *removed counts them.  Safe at any time, without the lock (see the
 * top of this file). */
static int fenced_file_gc(fl_region *r, const char *dir, const char *name, int *removed)
{
    uint64_t current, fence;
    *removed = 0;
    int err = fl_read_u64(r, name, &current, &fence);
    if (err)
        return err == -ENOENT ? 0 : err; /* nothing is current: nothing is known to be old */
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    size_t nlen = strlen(name);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *p = e->d_name;
        bool temporary = p[0] == '.';
        if (temporary)
            p++;
        if (strncmp(p, name, nlen) != 0 || p[nlen] != '.')
            continue;
        p += nlen + 1;
        /* The generation: decimal digits without a leading zero. */
        if (*p < '1' || *p > '9')
            continue;
        uint64_t g = 0;
        bool overflow = false;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (g > (UINT64_MAX - 9) / 10)
                overflow = true;
            g = g * 10 + (uint64_t)(*p - '0');
        }
        if (overflow || (temporary ? strncmp(p, ".tmp.", 5) != 0 : *p != '\0'))
            continue; /* not one of ours */
        if (g >= current)
            continue; /* current, or a write in progress */
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            (*removed)++;
        else if (errno != ENOENT)
            err = -errno;
    }
    closedir(d);
    return err;
}

/* All of standard input. */
static char *read_stdin(size_t *len)
{
    size_t cap = 4096;
    char *buf = malloc(cap);
    *len = 0;
    ssize_t n;
    while (buf && (n = read(0, buf + *len, cap - *len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            return NULL;
        }
        *len += (size_t)n;
        if (*len == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    return buf;
}

static int write_cmd(int argc, char **argv)
{
    uint64_t lease_ns = 5000000000ull;
    int i = 0;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--lease-ms") == 0 && i + 1 < argc)
            lease_ns = strtoull(argv[++i], NULL, 10) * 1000000ull;
        else
            return usage();
    }
    if (argc - i != 3 || lease_ns == 0 || !good_name(argv[i + 2]))
        return usage();
    const char *key = argv[i], *dir = argv[i + 1], *name = argv[i + 2];

    fl_region *r;
    int err = fl_open(NULL, &r);
    if (err) {
        fprintf(stderr, "fenced_files: %s\n", fl_last_error());
        return EXIT_REGION;
    }
    fl_lease lease;
    err = fl_acquire(r, key, lease_ns, FL_WAIT_FOREVER, &lease);
    if (err) {
        fprintf(stderr, "fenced_files: acquire %s: %s\n", key, fl_strerror(err));
        fl_close(r);
        return 1;
    }
    printf("acquired %s: token %" PRIu64 "\n", key, lease.token);
    fflush(stdout);

    int status = 1;
    size_t len;
    char *data = read_stdin(&len); /* the work: may take long, may be paused */
    if (!data) {
        fprintf(stderr, "fenced_files: cannot read the data\n");
    } else if ((err = fenced_file_write(dir, name, lease.token, data, len)) != 0) {
        fprintf(stderr, "fenced_files: writing %s/%s.%" PRIu64 ": %s\n", dir, name, lease.token,
                err == -EEXIST ? "exists already: this token wrote its generation (acquire again)"
                               : strerror(-err));
    } else {
        uint64_t accepted = 0;
        err = fl_commit_u64(r, &lease, name, lease.token, FL_COMMIT_STRICT, &accepted);
        if (err == 0) {
            printf("current: %s/%s.%" PRIu64 "\n", dir, name, lease.token);
            status = 0;
        } else if (err == -ESTALE) {
            printf("ownership lost: %s points to generation %" PRIu64 ", ours is %" PRIu64
                   "; %s/%s.%" PRIu64 " stays behind, never current; stopping\n",
                   name, accepted, lease.token, dir, name, lease.token);
            status = EXIT_OWNERSHIP_LOST;
        } else {
            fprintf(stderr, "fenced_files: commit %s: %s\n", name, fl_last_error());
        }
    }
    free(data);
    fl_release(r, &lease);
    fl_close(r);
    return status;
}

static int open_readonly(fl_region **r)
{
    int err = fl_open_readonly(NULL, r);
    if (err)
        fprintf(stderr, "fenced_files: %s\n", fl_last_error());
    return err;
}

static int read_cmd(const char *dir, const char *name)
{
    fl_region *r;
    if (!good_name(name))
        return usage();
    if (open_readonly(&r))
        return EXIT_REGION;
    int fd;
    uint64_t gen;
    int err = fenced_file_open_current(r, dir, name, &fd, &gen);
    fl_close(r);
    if (err) {
        fprintf(stderr, "fenced_files: %s: %s\n", name,
                err == -ENOENT ? "nothing written yet"
                : err == -EIO  ? "the current generation's file is missing"
                               : strerror(-err));
        return 1;
    }
    char buf[65536];
    ssize_t n;
    int status = 0;
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || write_all(1, buf, (size_t)n) != 0) {
            status = 1;
            break;
        }
    }
    close(fd);
    return status;
}

static int gc_cmd(const char *dir, const char *name)
{
    fl_region *r;
    if (!good_name(name))
        return usage();
    if (open_readonly(&r))
        return EXIT_REGION;
    int removed;
    int err = fenced_file_gc(r, dir, name, &removed);
    fl_close(r);
    printf("removed %d old generation%s of %s\n", removed, removed == 1 ? "" : "s", name);
    if (err) {
        fprintf(stderr, "fenced_files: gc: %s\n", strerror(-err));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "write") == 0)
        return write_cmd(argc - 2, argv + 2);
    if (argc == 4 && strcmp(argv[1], "read") == 0)
        return read_cmd(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "gc") == 0)
        return gc_cmd(argv[2], argv[3]);
    return usage();
}
