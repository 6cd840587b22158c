/* SPDX-License-Identifier: MIT */
/*
 * run_duration.c - the one duration parser of every program
 * (src/common/duration.c: fencelock run and status, fencelockd, the chaos
 * harness): what is accepted, exactly what it means, what is refused and
 * why, that the exact format reads back, and the brief one of the views.
 * I9: bad text gets a reason, never a guessed value.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "duration.h"

#define MS 1000000ull
#define S 1000000000ull

static void test_accepted(void **state)
{
    (void)state;
    const struct {
        const char *text;
        uint64_t ns;
    } ok[] = {
        {"0", 0},          {"00", 0},          {"0.0", 0},           {"0ms", 0},
        {"0s", 0},         {"0m", 0},          {"1ms", MS},          {"250ms", 250 * MS},
        {"1s", S},         {"1.5s", 1500 * MS}, {".5s", 500 * MS},   {"2m", 120 * S},
        {"1.25m", 75 * S}, {"0.001ms", 1000},  {"0.000001ms", 1},    {"0.000000001s", 1},
        {"30s", 30 * S},   {"007s", 7 * S},    {"9223372036.854775807s", (uint64_t)INT64_MAX},
        {"153722867m", 153722867ull * 60 * S},
        /* A bare number is seconds (flock -w, sleep, timeout), decimals too. */
        {"5", 5 * S},      {"1.5", 1500 * MS}, {"0.5", 500 * MS},    {".25", 250 * MS},
        {"30", 30 * S},    {"9223372036.854775807", (uint64_t)INT64_MAX},
        /* Microseconds and hours. */
        {"1us", 1000},     {"250us", 250000},  {"0.001us", 1},       {"1.5us", 1500},
        {"1h", 3600 * S},  {"1.5h", 5400 * S}, {"0.000000001h", 3600},
        {"2562047h", 2562047ull * 3600 * S},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t ns = 12345;
        const char *why = NULL;
        if (cli_parse_duration(ok[i].text, &ns, &why) != 0)
            fail_msg("'%s' refused: %s", ok[i].text, why);
        if (ns != ok[i].ns)
            fail_msg("'%s' = %llu ns, want %llu", ok[i].text, (unsigned long long)ns,
                     (unsigned long long)ok[i].ns);
    }
}

/* I9 */
static void test_refused(void **state)
{
    (void)state;
    const struct {
        const char *text;
        const char *why;
    } bad[] = {
        {"", "empty"},
        {"-1s", "negative"},
        {"-0", "negative"},
        {"+1s", "expected a number"},
        {" 1s", "expected a number"},
        {"5x", "unknown unit"},
        {"5 s", "unknown unit"},
        {"5s ", "unknown unit"},
        {"5S", "unknown unit"},
        {"5sec", "unknown unit"},
        {"5H", "unknown unit"},
        {"5min", "unknown unit"},
        {"5ns", "unknown unit"},
        {"0.0001us", "finer than a nanosecond"},
        {"2562048h", "too long"},
        {"9223372036.854775808", "too long"},
        {"1.", "expected digits after the decimal point"},
        {".", "expected digits after the decimal point"},
        {"1..5", "expected digits after the decimal point"},
        {"1e3s", "unknown unit"},
        {"s", "expected a number"},
        {"ms", "expected a number"},
        {".s", "expected digits after the decimal point"},
        {"1.s", "expected digits after the decimal point"},
        {"1.0000000001s", "too many decimals"},
        {"0.0000001ms", "finer than a nanosecond"},
        {"9223372036.854775808s", "too long"},
        {"153722868m", "too long"},
        {"99999999999999999999999s", "too long"},
        {"0x10s", "unknown unit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t ns = 12345;
        const char *why = NULL;
        if (cli_parse_duration(bad[i].text, &ns, &why) == 0)
            fail_msg("'%s' accepted as %llu ns", bad[i].text, (unsigned long long)ns);
        assert_non_null(why);
        if (!strstr(why, bad[i].why))
            fail_msg("'%s': \"%s\", want \"%s\"", bad[i].text, why, bad[i].why);
        assert_int_equal(ns, 12345); /* untouched */
    }
    const char *why = NULL;
    uint64_t ns;
    assert_int_equal(cli_parse_duration(NULL, &ns, &why), -1);
}

static void test_format_reads_back(void **state)
{
    (void)state;
    const struct {
        uint64_t ns;
        const char *text;
    } cases[] = {
        {0, "0"},         {MS, "1ms"},         {250 * MS, "250ms"},  {250000, "0.25ms"},
        {1, "0.000001ms"}, {S, "1s"},           {1500 * MS, "1.5s"},  {90 * S, "90s"},
        {120 * S, "2m"},  {S + 1, "1.000000001s"}, {(uint64_t)INT64_MAX, "9223372036.854775807s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        cli_format_duration(cases[i].ns, CLI_DURATION_EXACT, buf, sizeof buf);
        assert_string_equal(buf, cases[i].text);
        uint64_t back;
        const char *why;
        assert_int_equal(cli_parse_duration(buf, &back, &why), 0);
        assert_int_equal(back, cases[i].ns);
    }
    char tiny[4];
    cli_format_duration(250 * MS, CLI_DURATION_EXACT, tiny, sizeof tiny);
    assert_int_equal(strlen(tiny), 3); /* truncated, terminated */
}

/* The brief form of the views: the largest fitting unit, truncated (a
 * lease with 1.259s left shows 1.25s, never more than it has). */
static void test_format_brief(void **state)
{
    (void)state;
    const uint64_t us = 1000, m = 60 * S, h = 60 * m, d = 24 * h;
    const struct {
        uint64_t ns;
        const char *text;
    } cases[] = {
        {0, "<1us"},           {999, "<1us"},          {us, "1us"},
        {850 * us + 999, "850us"}, {300 * MS + 999999, "300ms"}, {S, "1s"},
        {1500 * MS, "1.5s"},   {1259 * MS, "1.25s"},   {S + 50 * MS, "1.05s"},
        {m - 1, "59.99s"},     {m, "1m00s"},           {4 * m + 5 * S + 999 * MS, "4m05s"},
        {h, "1h00m"},          {2 * h + 3 * m + 59 * S, "2h03m"},
        {d, "1d00h"},          {3 * d + 4 * h + 59 * m, "3d04h"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        cli_format_duration(cases[i].ns, CLI_DURATION_BRIEF, buf, sizeof buf);
        assert_string_equal(buf, cases[i].text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_format_reads_back),
        cmocka_unit_test(test_format_brief),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
