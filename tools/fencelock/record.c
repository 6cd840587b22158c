/* SPDX-License-Identifier: MIT */
/*
 * record.c - `fencelock commit` and `fencelock read`: fenced records from a
 * shell script.  commit is fl_commit_token() with the key and token that
 * `fencelock run` hands its command ($FENCELOCK_KEY, $FENCELOCK_TOKEN), so
 * that inside `fencelock run KEY -c '... | fencelock commit RECORD'` a stale
 * holder's commit is refused (I2) with its own exit status; read is
 * fl_read(), the value to stdout and its fence token to stderr, or both in
 * JSON.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fencelock.h"
#include "json.h"
#include "keytext.h"

const char commit_usage[] =
    "Usage: fencelock commit [OPTIONS] RECORD [FILE]\n"
    "\n"
    "Commit the bytes of FILE (or of standard input, also when FILE is -) to the\n"
    "fenced record RECORD with a fencing token of KEY: the commit takes effect if\n"
    "and only if the token is at least the greatest token RECORD has accepted\n"
    "(greater, with --strict).  A record is created by its first commit and bound\n"
    "to KEY: it accepts tokens of KEY only.\n"
    "\n"
    "Run under `fencelock run KEY`, which sets FENCELOCK_KEY and FENCELOCK_TOKEN,\n"
    "it needs no --key or --token:\n"
    "  fencelock run jobs/report -c 'make-report | fencelock commit report'\n"
    "A holder that was paused past its lease while another process took KEY and\n"
    "committed is refused (exit status 77): ownership is lost, never retry.\n"
    "\n"
    "Options:\n"
    CLI_REGION_OPTION_TEXT
    "  -k, --key KEY      the key whose token fences the commit (default:\n"
    "                     $FENCELOCK_KEY)\n"
    "  -t, --token T      the fencing token, in decimal (default:\n"
    "                     $FENCELOCK_TOKEN)\n"
    "  -s, --strict       accept only a token greater than the greatest accepted\n"
    "                     (one commit per acquisition)\n"
    "  -h, --help         show this help and exit\n"
    "\n"
    "The token must be one that KEY issued; it need not be current: the record\n"
    "compares tokens, which is what makes a stale holder harmless.  The value is\n"
    "at most the region's record size (fencelockd --record-size, 1024 bytes by\n"
    "default).  KEY and RECORD are any 1 to 127 bytes.\n"
    "\n" CLI_ENVIRONMENT_TEXT
    "  FENCELOCK_KEY     KEY when --key is not given\n"
    "  FENCELOCK_TOKEN   the token when --token is not given\n"
    "\n"
    "Exit status:\n"
    "  0   the commit was accepted\n"
    "  1   runtime error: FILE cannot be read, out of memory, library error\n"
    "  2   bad usage: unknown option, missing RECORD, no KEY or token, a token\n"
    "      that is not a number or that KEY never issued, bad KEY or RECORD\n"
    "  3   the region cannot be opened or is not a valid region\n"
    "  4   KEY was never acquired in this region (nothing was created)\n"
    "  65  the value is larger than the region's record size (nothing committed)\n"
    "  73  no room: the record is new and the record table is full, or no\n"
    "      commit buffer is free\n"
    "  77  rejected as stale: RECORD has accepted a greater token (or an equal\n"
    "      one, with --strict); stderr names it.  Ownership is lost.\n"
    "  78  RECORD is fenced by another key than KEY\n";

const char read_usage[] =
    "Usage: fencelock read [OPTIONS] RECORD\n"
    "\n"
    "Write the current value of the fenced record RECORD to standard output,\n"
    "exactly the bytes of one accepted commit, and the token that committed it\n"
    "to standard error as \"fence TOKEN\".\n"
    "\n"
    "Options:\n"
    CLI_REGION_OPTION_TEXT
    "      --json         write one JSON object to standard output instead:\n"
    "                     {\"record\":..., \"key\":..., \"fence\":..., \"data_base64\":...}\n"
    "                     (key: the key that fences RECORD; fence: the token, a\n"
    "                     number; data_base64: the value, base64)\n"
    "  -h, --help         show this help and exit\n"
    "\n"
    "The region is opened read-only and without registering.\n"
    "\n" CLI_ENVIRONMENT_TEXT
    "\n"
    "Exit status:\n"
    "  0  the value was written\n"
    "  1  runtime error: cannot write the output, out of memory, library error\n"
    "  2  bad usage: unknown option, missing or extra argument, bad RECORD\n"
    "  3  the region cannot be opened or is not a valid region\n"
    "  4  RECORD does not exist (was never committed)\n"
    "  5  RECORD's value cannot be vouched for: after an unclean stop of a region\n"
    "     on disk, fencelockd found it torn; the next commit replaces it\n";

enum {
    COMMIT_EXIT_TOO_LARGE = 65, /* EX_DATAERR */
    COMMIT_EXIT_NO_ROOM = 73,   /* EX_CANTCREAT */
    COMMIT_EXIT_STALE = 77,     /* ownership lost */
    COMMIT_EXIT_OTHER_KEY = 78, /* the record is fenced by another key */
    READ_EXIT_UNVOUCHED = 5,
};

static int open_region(const char *region, bool readonly, fl_region **r)
{
    int err = readonly ? fl_open_readonly(region, r) : fl_open(region, r);
    return err ? cli_open_failed(region, err) : -1;
}

/* ---- commit ----------------------------------------------------------------- */

/* Read fd to its end, at most cap bytes into buf; *len = bytes read, and
 * *more = there was more.  0, or -errno. */
static int read_all(int fd, char *buf, size_t cap, size_t *len, bool *more)
{
    size_t n = 0;
    *more = false;
    for (;;) {
        char extra;
        char *at = n < cap ? buf + n : &extra;
        ssize_t got = read(fd, at, n < cap ? cap - n : 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if (got == 0)
            break;
        if (n >= cap) {
            *more = true;
            break;
        }
        n += (size_t)got;
    }
    *len = n;
    return 0;
}

/* A token in decimal: 1..FL_TOKEN_MAX.  -1 and *out, or bad usage. */
static int parse_token(const char *text, const char *from, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = text;
    bool over = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (FL_TOKEN_MAX - (uint64_t)(*p - '0')) / 10)
            over = true;
        else
            v = v * 10 + (uint64_t)(*p - '0');
    }
    if (p == text || *p || over || v == 0) {
        char shown[FL_KEYTEXT_MAX];
        fl__keytext(text, shown, sizeof shown);
        return fl__usage_error("%s '%s' is not a token (a decimal number from 1 to %" PRIu64
                               ")",
                               from, shown, FL_TOKEN_MAX);
    }
    *out = v;
    return -1;
}

int commit_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"key", required_argument, NULL, 'k'},
        {"token", required_argument, NULL, 't'},
        {"strict", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *region = NULL, *key = NULL, *token_text = NULL;
    unsigned flags = 0;
    opterr = 0;
    optind = 1;
    int c, rc;
    while ((c = getopt_long(argc, argv, ":r:k:t:sh", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (cli_region_option(optarg, &region) != 0)
                return FL__EXIT_USAGE;
            break;
        case 'k': key = optarg; break;
        case 't': token_text = optarg; break;
        case 's': flags |= FL_COMMIT_STRICT; break;
        case 'h':
            fputs(commit_usage, stdout);
            return cli_finish_stdout();
        default: /* ':' or '?' */
            return fl__option_error(c, argv, longopts);
        }
    }
    if (optind >= argc)
        return fl__usage_error("missing RECORD");
    const char *record = argv[optind];
    const char *file = optind + 1 < argc ? argv[optind + 1] : NULL;
    if (optind + 2 < argc)
        return fl__usage_error("unexpected argument '%s'", argv[optind + 2]);
    if ((rc = cli_check_name("RECORD", record)) >= 0)
        return rc;
    const char *key_from = "--key", *token_from = "--token";
    if (!key) {
        key = getenv("FENCELOCK_KEY");
        key_from = "FENCELOCK_KEY";
        if (!key)
            return fl__usage_error("no KEY: give --key, or run under fencelock run "
                                   "(which sets FENCELOCK_KEY)");
    }
    if (!token_text) {
        token_text = getenv("FENCELOCK_TOKEN");
        token_from = "FENCELOCK_TOKEN";
        if (!token_text)
            return fl__usage_error("no token: give --token, or run under fencelock run "
                                   "(which sets FENCELOCK_TOKEN)");
    }
    if ((rc = cli_check_name(key_from, key)) >= 0)
        return rc;
    uint64_t token = 0;
    if ((rc = parse_token(token_text, token_from, &token)) >= 0)
        return rc;

    int fd = STDIN_FILENO;
    if (file && strcmp(file, "-") != 0) {
        fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fl__say("cannot open %s: %s", file, strerror(errno));
            return CLI_EXIT_RUNTIME;
        }
    }
    fl_region *r;
    if ((rc = open_region(region, false, &r)) >= 0) {
        if (fd != STDIN_FILENO)
            close(fd);
        return rc;
    }
    fl_region_info ri;
    int err = fl_region_info_get(r, &ri);
    char *buf = err ? NULL : malloc(ri.record_size ? ri.record_size : 1);
    size_t len = 0;
    bool more = false;
    if (err || !buf) {
        fl__say("%s", err ? fl__library_error(err) : "out of memory");
        rc = CLI_EXIT_RUNTIME;
    } else if ((err = read_all(fd, buf, ri.record_size, &len, &more)) != 0) {
        fl__say("cannot read %s: %s", file && strcmp(file, "-") ? file : "standard input",
                strerror(-err));
        rc = CLI_EXIT_RUNTIME;
    } else if (more) {
        fl__say("the value is larger than the region's record size (%" PRIu32
                " bytes): nothing committed",
                ri.record_size);
        rc = COMMIT_EXIT_TOO_LARGE;
    }
    if (fd != STDIN_FILENO)
        close(fd);
    if (rc >= 0) {
        free(buf);
        fl_close(r);
        return rc;
    }
    char key_text[FL_KEYTEXT_MAX], rec_text[FL_KEYTEXT_MAX];
    fl__keytext(key, key_text, sizeof key_text);
    fl__keytext(record, rec_text, sizeof rec_text);
    uint64_t accepted = 0;
    err = fl_commit_token(r, key, token, record, buf, len, flags, &accepted);
    free(buf);
    switch (err) {
    case 0: rc = CLI_EXIT_OK; break;
    case -ESTALE:
        fl__say("rejected as stale: '%s' has accepted token %" PRIu64 "; token %" PRIu64
                " of '%s' no longer owns it%s",
                rec_text, accepted, token, key_text,
                accepted == token ? " (--strict: one commit per token)" : "");
        rc = COMMIT_EXIT_STALE;
        break;
    case -ENOENT:
        fl__say("key '%s' was never acquired in this region", key_text);
        rc = CLI_EXIT_NO_KEY;
        break;
    case -EINVAL:
        fl__say("token %" PRIu64 " was never issued by key '%s' (%s)", token, key_text,
                fl__library_error(err));
        rc = CLI_EXIT_USAGE;
        break;
    case -EXDEV:
        fl__say("%s", fl__library_error(err));
        rc = COMMIT_EXIT_OTHER_KEY;
        break;
    case -EMSGSIZE:
        fl__say("%s", fl__library_error(err));
        rc = COMMIT_EXIT_TOO_LARGE;
        break;
    case -ENOSPC:
        fl__say("%s", fl__library_error(err));
        rc = COMMIT_EXIT_NO_ROOM;
        break;
    case -EPROTO:
        fl__say("%s", fl__library_error(err));
        rc = CLI_EXIT_REGION;
        break;
    default:
        fl__say("cannot commit to '%s': %s", rec_text, fl__library_error(err));
        rc = CLI_EXIT_RUNTIME;
        break;
    }
    fl_close(r);
    return rc;
}

/* ---- read -------------------------------------------------------------------- */

static void base64(FILE *f, const unsigned char *p, size_t n)
{
    static const char abc[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        fputc(abc[v >> 18 & 63], f);
        fputc(abc[v >> 12 & 63], f);
        fputc(i + 1 < n ? abc[v >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? abc[v & 63] : '=', f);
    }
}

/* The key that fences record ("" if it cannot be found). */
static void bound_key(fl_region *r, const char *record, char *key, size_t cap)
{
    key[0] = '\0';
    fl_region_info ri;
    if (fl_region_info_get(r, &ri) != 0)
        return;
    for (uint32_t i = 0; i < ri.records_used; i++) {
        fl_record_info info;
        if (fl_record_info_get(r, i, &info) == 0 && strcmp(info.name, record) == 0) {
            snprintf(key, cap, "%s", info.bound_key);
            return;
        }
    }
}

int read_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"region", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *region = NULL;
    bool json = false;
    opterr = 0;
    optind = 1;
    int c, rc;
    while ((c = getopt_long(argc, argv, ":r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (cli_region_option(optarg, &region) != 0)
                return FL__EXIT_USAGE;
            break;
        case 'j': json = true; break;
        case 'h':
            fputs(read_usage, stdout);
            return cli_finish_stdout();
        default: /* ':' or '?' */
            return fl__option_error(c, argv, longopts);
        }
    }
    if (optind >= argc)
        return fl__usage_error("missing RECORD");
    if (optind + 1 < argc)
        return fl__usage_error("unexpected argument '%s'", argv[optind + 1]);
    const char *record = argv[optind];
    if ((rc = cli_check_name("RECORD", record)) >= 0)
        return rc;
    fl_region *r;
    if ((rc = open_region(region, true, &r)) >= 0)
        return rc;
    char rec_text[FL_KEYTEXT_MAX];
    fl__keytext(record, rec_text, sizeof rec_text);
    fl_region_info ri;
    int err = fl_region_info_get(r, &ri);
    size_t cap = err ? 0 : ri.record_size;
    unsigned char *buf = err ? NULL : malloc(cap ? cap : 1);
    size_t len = 0;
    uint64_t fence = 0;
    if (!err && !buf)
        err = -ENOMEM;
    if (!err)
        err = fl_read(r, record, buf, cap, &len, &fence);
    switch (err) {
    case 0: break;
    case -ENOENT:
        fl__say("no record '%s' (never committed)", rec_text);
        rc = CLI_EXIT_NO_KEY;
        break;
    case -EBADMSG:
        fl__say("the value of '%s' cannot be vouched for (torn by an unclean stop); the "
                "next commit replaces it",
                rec_text);
        rc = READ_EXIT_UNVOUCHED;
        break;
    case -EPROTO:
        fl__say("%s", fl__library_error(err));
        rc = CLI_EXIT_REGION;
        break;
    default:
        fl__say("cannot read '%s': %s", rec_text, fl__library_error(err));
        rc = CLI_EXIT_RUNTIME;
        break;
    }
    if (err) {
        free(buf);
        fl_close(r);
        return rc;
    }
    if (json) {
        char key[FL_KEY_MAX + 1];
        bound_key(r, record, key, sizeof key);
        fputs("{\"record\":", stdout);
        fl__json_string(stdout, record);
        fputs(",\"key\":", stdout);
        fl__json_string(stdout, key);
        printf(",\"fence\":%" PRIu64 ",\"data_base64\":\"", fence);
        base64(stdout, buf, len);
        fputs("\"}\n", stdout);
    } else {
        fwrite(buf, 1, len, stdout);
    }
    free(buf);
    fl_close(r);
    rc = cli_finish_stdout();
    if (rc == CLI_EXIT_OK && !json)
        fprintf(stderr, "fence %" PRIu64 "\n", fence);
    return rc;
}
