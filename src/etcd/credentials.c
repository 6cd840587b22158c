/* SPDX-License-Identifier: MIT */
/*
 * credentials.c - where a client's TLS files, user and password come from.
 *
 * Each comes from the region URI when it names it (uri.c), else from the
 * environment:
 *
 *   cacert=FILE         $FENCELOCK_ETCD_CACERT         etcds:// only
 *   cert=FILE           $FENCELOCK_ETCD_CERT           etcds:// only
 *   key=FILE            $FENCELOCK_ETCD_KEY            etcds:// only
 *   USER@ (userinfo)    $FENCELOCK_ETCD_USER
 *   password-file=FILE  $FENCELOCK_ETCD_PASSWORD_FILE, then $FENCELOCK_ETCD_PASSWORD
 *
 * The TLS variables are ignored for a plain etcd:// URI (a process may
 * reach clusters of both kinds with one environment); the query's TLS keys
 * are refused there (uri.c).  Every file is read here, once, whole, so that
 * a wrong name fails fl_open with the file's name instead of a TLS error at
 * the first request; opened without blocking, and only regular files (a
 * FIFO named there would wait for a writer).  curl gets the TLS files'
 * bytes from memory (http.c): it never opens them, so a file replaced later
 * (by a FIFO, or a certificate renewed) changes nothing for this handle.
 * A user without a password, or a password without a user, is -EINVAL: the
 * one is a request etcd will refuse, the other a credential that would be
 * silently unused.
 *
 * The password is kept for re-authentication (auth.c): in memory the
 * client wipes before freeing it, never in a message.  A password file is
 * its content up to a final newline ("\n" or "\r\n"); it must not be empty
 * nor hold a NUL, and is at most FL__ETCD_PASSWORD_MAX bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"

#define FL__ETCD_PASSWORD_MAX 4096
#define FL__ETCD_PEM_MAX (1u << 20) /* a CA bundle, a certificate, a key */

/* Open path for reading to see that it can be (where: what named it, for
 * the message).  0, or -errno with the reason. */
/* Open path for reading without blocking (a FIFO would wait for a writer
 * forever) and see that it is a regular file: the fd, or -errno. */
static int fl__open_regular(const char *shown, const char *where, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int err = -errno;
        return fl__etcd_fail(err, "etcd %s: %s %s: %s", shown, where, path, strerror(-err));
    }
    struct stat st;
    int err = 0;
    if (fstat(fd, &st) != 0)
        err = fl__etcd_fail(-errno, "etcd %s: %s %s: %s", shown, where, path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        err = fl__etcd_fail(-EINVAL, "etcd %s: %s %s: not a regular file", shown, where, path);
    if (err) {
        close(fd);
        return err;
    }
    return fd;
}

/* Read the regular file at path whole (at most max bytes) into a malloc'd
 * buffer with a NUL after the bytes: 0 with *out and *len, or -errno with
 * the reason (where: what named the file).  Wiped when refused. */
static int fl__file_read(const char *shown, const char *where, const char *path, size_t max,
                         unsigned char **out, size_t *len)
{
    int fd = fl__open_regular(shown, where, path);
    if (fd < 0)
        return fd;
    unsigned char *buf = malloc(max + 2);
    if (!buf) {
        close(fd);
        return fl__etcd_fail(-ENOMEM, "out of memory");
    }
    size_t n = 0;
    int err = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, max + 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            err = fl__etcd_fail(-errno, "etcd %s: %s %s: %s", shown, where, path,
                                strerror(errno));
            break;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n > max) {
            err = fl__etcd_fail(-EINVAL, "etcd %s: %s %s: longer than %zu bytes", shown, where,
                                path, max);
            break;
        }
    }
    close(fd);
    if (!err && n == 0)
        err = fl__etcd_fail(-EINVAL, "etcd %s: %s %s: the file is empty", shown, where, path);
    if (err) {
        explicit_bzero(buf, max + 2);
        free(buf);
        return err;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* Take file name from the environment variable env when the URI left dst
 * empty.  where gets what named it. */
static int fl__from_env(const char *shown, char *dst, const char *env, const char *key,
                        char *where, size_t wcap)
{
    if (dst[0]) {
        snprintf(where, wcap, "%s=", key);
        return 0;
    }
    snprintf(where, wcap, "$%s", env);
    const char *v = getenv(env);
    if (!v || !*v)
        return 0;
    if (strlen(v) > FL__ETCD_FILE_MAX)
        return fl__etcd_fail(-EINVAL, "etcd %s: $%s: longer than %d bytes", shown, env,
                             FL__ETCD_FILE_MAX);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

/* Read the password file at path into a malloc'd string: its content up to
 * a final newline, not empty, without NUL. */
static int fl__password_read(const char *shown, const char *where, const char *path,
                             char **out)
{
    unsigned char *buf = NULL;
    size_t n = 0;
    int err = fl__file_read(shown, where, path, FL__ETCD_PASSWORD_MAX, &buf, &n);
    if (err)
        return err;
    if (n && buf[n - 1] == '\n')
        n--;
    if (n && buf[n - 1] == '\r')
        n--;
    if (n == 0)
        err = fl__etcd_fail(-EINVAL, "etcd %s: %s %s: the file is empty", shown, where, path);
    else if (memchr(buf, '\0', n))
        err = fl__etcd_fail(-EINVAL, "etcd %s: %s %s: the password holds a NUL byte", shown,
                            where, path);
    if (err) {
        explicit_bzero(buf, n);
        free(buf);
        return err;
    }
    buf[n] = '\0';
    *out = (char *)buf;
    return 0;
}

int fl__etcd_creds_load(struct fl__etcd_client *c)
{
    struct fl__etcd_uri *u = &c->uri;
    const char *shown = u->shown;
    char where[64];
    int err = 0;
    if (u->tls) {
        static const struct {
            size_t off;
            const char *env, *key;
        } files[] = {
            {offsetof(struct fl__etcd_uri, cacert), FL__ETCD_CACERT_ENV, "cacert"},
            {offsetof(struct fl__etcd_uri, cert), FL__ETCD_CERT_ENV, "cert"},
            {offsetof(struct fl__etcd_uri, key), FL__ETCD_KEY_ENV, "key"},
        };
        struct fl__etcd_pem *pem[] = {&c->cacert_pem, &c->cert_pem, &c->key_pem};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            char *dst = (char *)u + files[i].off;
            err = fl__from_env(shown, dst, files[i].env, files[i].key, where, sizeof where);
            if (!err && dst[0])
                err = fl__file_read(shown, where, dst, FL__ETCD_PEM_MAX, &pem[i]->data,
                                    &pem[i]->len);
            if (err)
                return err;
        }
        if (u->key[0] && !u->cert[0])
            return fl__etcd_fail(-EINVAL, "etcd %s: a client key without its certificate "
                                          "(cert=FILE or $%s)",
                                 shown, FL__ETCD_CERT_ENV);
    }
    if (!u->user[0]) {
        const char *v = getenv(FL__ETCD_USER_ENV);
        if (v && *v) {
            size_t n = strlen(v);
            bool ok = n <= FL__ETCD_USER_MAX;
            for (size_t i = 0; ok && i < n; i++)
                ok = (unsigned char)v[i] >= 0x20 && v[i] != 0x7f;
            if (!ok)
                return fl__etcd_fail(-EINVAL, "etcd %s: $%s: not a user name (1..%d bytes, no "
                                              "control bytes)",
                                     shown, FL__ETCD_USER_ENV, FL__ETCD_USER_MAX);
            memcpy(u->user, v, n + 1);
        }
    }
    err = fl__from_env(shown, u->password_file, FL__ETCD_PASSWORD_FILE_ENV, "password-file",
                       where, sizeof where);
    if (err)
        return err;
    if (u->password_file[0]) {
        err = fl__password_read(shown, where, u->password_file, &c->password);
        if (err)
            return err;
    } else {
        const char *v = getenv(FL__ETCD_PASSWORD_ENV);
        if (v && *v && !(c->password = strdup(v)))
            return fl__etcd_fail(-ENOMEM, "out of memory");
    }
    if (u->user[0] && !c->password)
        return fl__etcd_fail(-EINVAL,
                             "etcd %s: user \"%s\" has no password: give password-file=FILE, "
                             "$%s or $%s",
                             shown, u->user, FL__ETCD_PASSWORD_FILE_ENV, FL__ETCD_PASSWORD_ENV);
    if (!u->user[0] && c->password)
        return fl__etcd_fail(-EINVAL,
                             "etcd %s: a password is given (%s) but no user: write "
                             "etcds://USER@HOST:PORT/PREFIX or set $%s",
                             shown, u->password_file[0] ? where : "$" FL__ETCD_PASSWORD_ENV,
                             FL__ETCD_USER_ENV);
    return 0;
}
