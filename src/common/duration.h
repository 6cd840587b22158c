/* SPDX-License-Identifier: MIT */
/*
 * duration.h - durations as every fencelock program reads them (fencelock
 * run --lease/--wait/--kill-after, fencelock status --watch, fencelockd
 * --flush-interval/--metrics-interval, the chaos harness's --duration): a
 * decimal number of seconds ("30", "0.5"), or a decimal number with a unit,
 * us, ms, s, m or h ("250ms", "1.5s", "2m").  One parser, one grammar, and
 * one formatter, so that every program reads and prints times the same way.
 */
#ifndef FL_COMMON_DURATION_H
#define FL_COMMON_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* The units, in nanoseconds. */
#define CLI_NS_PER_US 1000ull
#define CLI_NS_PER_MS 1000000ull
#define CLI_NS_PER_S 1000000000ull
#define CLI_NS_PER_M (60ull * CLI_NS_PER_S)
#define CLI_NS_PER_H (60ull * CLI_NS_PER_M)

/* The grammar, for usage texts. */
#define CLI_DURATION_TEXT                                                                   \
    "A DURATION is a decimal number of seconds (30, 0.5), or a decimal number with\n"      \
    "a unit: us, ms, s, m or h (as in 250ms, 1.5s, 2m).\n"

/* Greatest duration accepted: what fits a signed 64-bit count of nanoseconds
 * (about 292 years), so that every parsed value is also a valid timeout. */
#define CLI_DURATION_MAX_NS ((uint64_t)INT64_MAX)

/* Parse text as a duration.  Returns 0 and sets *ns, or returns -1 and sets
 * *why to a static explanation ("unknown unit (use us, ms, s, m or h, ...)")
 * for a message such as "--lease '5x': <why>".  Rejected: the empty string,
 * a sign, blanks, an unknown unit, a number without digits, more than nine
 * decimals, more than CLI_DURATION_MAX_NS and a value that is not a whole
 * number of nanoseconds.  *ns is left alone on failure.  Async-signal-safe
 * and thread-safe (no state, no allocation). */
int cli_parse_duration(const char *text, uint64_t *ns, const char **why);

/* How cli_format_duration() writes a duration. */
enum cli_duration_style {
    /* Every nanosecond, in a form the parser reads back: "0", "250ms",
     * "0.25ms", "1.5s", "90s", "2m".  For messages that quote a DURATION
     * given or a limit to meet ("a lease must be at least 250ms"). */
    CLI_DURATION_EXACT,
    /* For people reading a view: the largest fitting unit, truncated (never
     * overstated) to at most two fields or two decimals: "<1us", "850us",
     * "300ms", "1.25s", "4m05s", "2h03m", "3d04h".  Not the parser's grammar. */
    CLI_DURATION_BRIEF,
};

/* Format ns in style.  Always NUL-terminates when cap > 0. */
void cli_format_duration(uint64_t ns, enum cli_duration_style style, char *buf, size_t cap);

#endif
