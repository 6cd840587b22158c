/* SPDX-License-Identifier: MIT */
/* duration.c - the one duration parser and formatter of every fencelock program; see duration.h. */
#include "duration.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define NS_PER_D (24ull * CLI_NS_PER_H) /* the brief form's largest unit */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

int cli_parse_duration(const char *text, uint64_t *ns, const char **why)
{
    const char *p = text;
    if (!p || !*p) {
        *why = "empty duration (give seconds, or a number with a unit: us, ms, s, m or h, as in 5s)";
        return -1;
    }
    if (*p == '-') {
        *why = "negative durations are not allowed";
        return -1;
    }
    if (*p == '+' || *p == ' ' || *p == '\t') {
        *why = "expected a number at the start (no sign or blanks), as in 5s";
        return -1;
    }
    /* Whole part. */
    uint64_t whole = 0;
    int whole_digits = 0;
    bool overflow = false;
    for (; is_digit(*p); p++, whole_digits++) {
        if (whole > (UINT64_MAX - 9) / 10)
            overflow = true;
        else
            whole = whole * 10 + (uint64_t)(*p - '0');
    }
    /* Fraction: up to nine digits, kept as nanoseconds of the unit's scale. */
    uint64_t frac = 0; /* the fraction times 10^9 */
    int frac_digits = 0;
    if (*p == '.') {
        p++;
        uint64_t scale = 100000000ull;
        for (; is_digit(*p); p++, frac_digits++) {
            if (frac_digits == 9) {
                *why = "too many decimals (at most nine)";
                return -1;
            }
            frac += (uint64_t)(*p - '0') * scale;
            scale /= 10;
        }
        if (frac_digits == 0) {
            *why = "expected digits after the decimal point, as in 1.5s";
            return -1;
        }
    }
    if (whole_digits == 0 && frac_digits == 0) {
        *why = "expected a number before the unit, as in 5s";
        return -1;
    }
    /* A bare number is seconds, as sleep(1), timeout(1) and flock -w read it. */
    uint64_t unit;
    if (*p == '\0' || strcmp(p, "s") == 0) {
        unit = CLI_NS_PER_S;
    } else if (strcmp(p, "us") == 0) {
        unit = CLI_NS_PER_US;
    } else if (strcmp(p, "ms") == 0) {
        unit = CLI_NS_PER_MS;
    } else if (strcmp(p, "m") == 0) {
        unit = CLI_NS_PER_M;
    } else if (strcmp(p, "h") == 0) {
        unit = CLI_NS_PER_H;
    } else {
        *why = "unknown unit (use us, ms, s, m or h, or no unit for seconds, as in 5s)";
        return -1;
    }
    /* frac is the fraction times 10^9.  Of a second or more it is always
     * whole nanoseconds; of a millisecond only up to its sixth decimal, of a
     * microsecond up to its third. */
    uint64_t frac_ns;
    if (unit < CLI_NS_PER_S) {
        uint64_t div = CLI_NS_PER_S / unit;
        if (frac % div != 0) {
            *why = "finer than a nanosecond";
            return -1;
        }
        frac_ns = frac / div;
    } else {
        frac_ns = frac * (unit / CLI_NS_PER_S); /* < 10^9 * 3600: no overflow */
    }
    if (overflow || whole > (CLI_DURATION_MAX_NS - frac_ns) / unit) {
        *why = "too long (at most 9223372036.854775807s, about 292 years)";
        return -1;
    }
    *ns = whole * unit + frac_ns;
    return 0;
}

/* whole.rest unit, with rest (of digits digits) printed only as far as it
 * is not zero: 1.5s, 250ms, 2.000001s. */
static void format_decimal(unsigned long long whole, unsigned long long rest, int digits,
                           const char *unit, char *buf, size_t cap)
{
    if (rest == 0) {
        snprintf(buf, cap, "%llu%s", whole, unit);
        return;
    }
    char frac[24];
    snprintf(frac, sizeof frac, "%0*llu", digits, rest);
    size_t n = strlen(frac);
    while (n > 0 && frac[n - 1] == '0')
        frac[--n] = '\0';
    snprintf(buf, cap, "%llu.%s%s", whole, frac, unit);
}

static void format_exact(uint64_t ns, char *buf, size_t cap)
{
    if (ns == 0) {
        snprintf(buf, cap, "0");
    } else if (ns % CLI_NS_PER_M == 0) {
        snprintf(buf, cap, "%llum", (unsigned long long)(ns / CLI_NS_PER_M));
    } else if (ns >= CLI_NS_PER_S) {
        format_decimal(ns / CLI_NS_PER_S, ns % CLI_NS_PER_S, 9, "s", buf, cap);
    } else {
        format_decimal(ns / CLI_NS_PER_MS, ns % CLI_NS_PER_MS, 6, "ms", buf, cap);
    }
}

/* Two fields of a larger and a smaller unit: 4m05s, 2h03m, 3d04h. */
static void format_two(uint64_t ns, uint64_t big, const char *big_unit, uint64_t small,
                       const char *small_unit, char *buf, size_t cap)
{
    snprintf(buf, cap, "%llu%s%02llu%s", (unsigned long long)(ns / big), big_unit,
             (unsigned long long)(ns % big / small), small_unit);
}

static void format_brief(uint64_t ns, char *buf, size_t cap)
{
    if (ns < CLI_NS_PER_US)
        snprintf(buf, cap, "<1us");
    else if (ns < CLI_NS_PER_MS)
        snprintf(buf, cap, "%lluus", (unsigned long long)(ns / CLI_NS_PER_US));
    else if (ns < CLI_NS_PER_S)
        snprintf(buf, cap, "%llums", (unsigned long long)(ns / CLI_NS_PER_MS));
    else if (ns < CLI_NS_PER_M) /* in hundredths of a second */
        format_decimal(ns / CLI_NS_PER_S, ns % CLI_NS_PER_S / (CLI_NS_PER_S / 100), 2, "s", buf,
                       cap);
    else if (ns < CLI_NS_PER_H)
        format_two(ns, CLI_NS_PER_M, "m", CLI_NS_PER_S, "s", buf, cap);
    else if (ns < NS_PER_D)
        format_two(ns, CLI_NS_PER_H, "h", CLI_NS_PER_M, "m", buf, cap);
    else
        format_two(ns, NS_PER_D, "d", CLI_NS_PER_H, "h", buf, cap);
}

void cli_format_duration(uint64_t ns, enum cli_duration_style style, char *buf, size_t cap)
{
    if (cap == 0)
        return;
    if (style == CLI_DURATION_BRIEF)
        format_brief(ns, buf, cap);
    else
        format_exact(ns, buf, cap);
}
