#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configuring with the optional dependencies unavailable succeeds, and says,
# in one STATUS line per part, what it turned off (issue 13):
#  1. cmocka, SQLite and libpq hidden (pkg-config sees only liburcu; SQLite3
#     disabled): examples and tests off, the library and programs configure;
#  2. only cmocka hidden: the tests off, the examples still built.
# (install_setup builds the library and programs with all three parts off.)
set -euo pipefail
src=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work/pc"
urcu_pc=$(pkg-config --variable pcfiledir liburcu-memb)
for m in liburcu-memb liburcu-common liburcu smartcols; do
  [ -e "$urcu_pc/$m.pc" ] && ln -s "$urcu_pc/$m.pc" "$work/pc/"
done
# count PATTERN FILE: lines of FILE matching PATTERN
count() { grep -c -- "$1" "$2" || true; }

PKG_CONFIG_LIBDIR=$work/pc PKG_CONFIG_PATH= cmake -S "$src" -B "$work/none" \
  -DFL_BUILD_TESTS=ON -DFL_BUILD_EXAMPLES=ON -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON \
  >"$work/none.log" 2>&1 || { cat "$work/none.log"; fail "configure without the optional deps"; }
cat "$work/none.log"
[ "$(count 'SQLite3 not found.*FL_BUILD_EXAMPLES is OFF' "$work/none.log")" = 1 ] || fail "no (or more than one) line for the examples"
[ "$(count 'FL_BUILD_TESTS is OFF' "$work/none.log")" = 1 ] || fail "no (or more than one) line for the tests"
[ ! -e "$work/none/tests" ] || fail "tests configured without cmocka"
[ ! -e "$work/none/examples" ] || fail "examples configured without SQLite"

PKG_CONFIG_LIBDIR=$work/pc PKG_CONFIG_PATH= \
  cmake -S "$src" -B "$work/nocmocka" -DFL_BUILD_TESTS=ON -DFL_BUILD_EXAMPLES=ON \
  >"$work/nocmocka.log" 2>&1 || { cat "$work/nocmocka.log"; fail "configure without cmocka"; }
[ "$(count 'cmocka not found.*FL_BUILD_TESTS is OFF' "$work/nocmocka.log")" = 1 ] || { cat "$work/nocmocka.log"; fail "no line for cmocka"; }
[ ! -e "$work/nocmocka/tests" ] || fail "tests configured without cmocka"
[ -e "$work/nocmocka/examples" ] || fail "examples not configured although SQLite is there"

rm -rf "$work"
echo "optional dependencies missing: configure succeeds, one line each: ok"
