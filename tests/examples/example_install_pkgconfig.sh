#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# In the prefix the fixture install_setup (tests/install) installed into, build
# and run a program from outside the tree with nothing but
# `cc app.c $(pkg-config --cflags --libs fencelock)`.
set -euo pipefail
prefix=$1
extra_cflags=${2:-}
tmp=$(mktemp -d /tmp/fl-install-app.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for f in include/fencelock.h bin/fencelockd bin/fencelock; do
  [ -e "$prefix/$f" ] || { echo "missing $f in the install"; exit 1; }
done
pc=$(find "$prefix" -name fencelock.pc)
[ -n "$pc" ] || { echo "no fencelock.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
ls "$libdir"/libfencelock.so* "$libdir"/libfencelock.a >/dev/null
cat > "$tmp/app.c" <<'C'
#include <fencelock.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    /* Link and call into the library; no region needed for this. */
    printf("%s\n", fl_err_name(-ESTALE_PLACEHOLDER));
    return strcmp(fl_strerror(0), "success") != 0;
}
C
sed -i 's/-ESTALE_PLACEHOLDER/-116/' "$tmp/app.c"
export PKG_CONFIG_PATH="$(dirname "$pc")"
# shellcheck disable=SC2046
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror $extra_cflags "$tmp/app.c" -o "$tmp/app" $(pkg-config --cflags --libs fencelock)
out=$(LD_LIBRARY_PATH="$libdir" "$tmp/app")
[ "$out" = "ESTALE" ] || { echo "app printed '$out'"; exit 1; }
echo "install + pkg-config: ok"
