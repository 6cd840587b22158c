/* SPDX-License-Identifier: MIT */
/* usage.c - messages about the command line and library errors; see usage.h. */
#include "usage.h"

#include <stdarg.h>
#include <stdio.h>

#include "fencelock.h"

static const char *program = "fencelock";

void fl__set_program(const char *name) { program = name; }

static void vsay(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void fl__say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

int fl__usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try '%s --help'.\n", program);
    return FL__EXIT_USAGE;
}

/* optopt is 0 for an unknown long option (always the whole word
 * argv[optind - 1]), the option's value for a long option given an argument
 * it does not take, and the character for an unknown short option, which
 * may sit inside a cluster like "-xj" that optind has not moved past.  A
 * short no-argument option (-h) cannot be rejected, so a match on a
 * no-argument option means its long form.  For ':' the option is what ends
 * the word it came in: "-r" or "--region". */
int fl__option_error(int c, char **argv, const struct option *longopts)
{
    if (c == ':')
        return fl__usage_error("option '%s' needs an argument", argv[optind - 1]);
    if (optopt == 0)
        return fl__usage_error("unknown option '%s'", argv[optind - 1]);
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == optopt && o->has_arg == no_argument)
            return fl__usage_error("option '--%s' takes no argument", o->name);
    return fl__usage_error("unknown option '-%c'", optopt);
}

const char *fl__library_error(int err)
{
    const char *detail = fl_last_error();
    return detail[0] ? detail : fl_strerror(err);
}
