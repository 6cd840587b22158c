#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# debian/ agrees with the project it packages (docs/building.md, "Debian
# packages"), checked on every test run; building and installing the packages
# is tools/test-deb's (it needs root and installs into /usr):
#   - debian/changelog's upstream version is project()'s (which
#     include/fencelock.h must say too: CMakeLists.txt checks that);
#   - the shared library's package is named for the SONAME's major version,
#     in debian/control and in the symbols file;
#   - debian/libfencelock0.symbols has one (symver) line per version node of
#     the linker version script src/fencelock.map, and no other.
set -euo pipefail
src=$1 version=$2 major=$3
fail=0
bad() { echo "debian_test: $*" >&2; fail=1; }

first=$(head -n1 "$src/debian/changelog")
deb_version=$(sed -nE '1s/^fencelock \(([^)]*)\) .*/\1/p' "$src/debian/changelog")
[ -n "$deb_version" ] || bad "debian/changelog's first line is not 'fencelock (VERSION) ...': $first"
upstream=${deb_version%-*}
[ "$upstream" = "$version" ] ||
  bad "debian/changelog says $deb_version, project() says $version: add a changelog entry $version-1 (dch -v $version-1)"

lib=libfencelock$major
grep -qx "Package: $lib" "$src/debian/control" || bad "debian/control has no package $lib (SONAME libfencelock.so.$major)"
symbols=$src/debian/$lib.symbols
if [ -f "$symbols" ]; then
  head -n1 "$symbols" | grep -qx "libfencelock.so.$major $lib #MINVER#" ||
    bad "$symbols: first line is not 'libfencelock.so.$major $lib #MINVER#'"
  map_nodes=$(grep -oE '^[A-Za-z0-9_.]+[[:space:]]*\{' "$src/src/fencelock.map" | tr -d '{ \t' | sort)
  sym_nodes=$(sed -nE 's/^ \(symver\)([^ ]+) .*/\1/p' "$symbols" | sort)
  [ -n "$map_nodes" ] || bad "no version node found in src/fencelock.map"
  [ "$map_nodes" = "$sym_nodes" ] ||
    bad "version nodes of src/fencelock.map ($(tr '\n' ' ' <<<"$map_nodes")) and (symver) lines of $symbols ($(tr '\n' ' ' <<<"$sym_nodes")) differ"
  other=$(sed -n '2,$p' "$symbols" | grep -vE '^\* Build-Depends-Package: |^ \(symver\)[^ ]+ [0-9][^ ]*$' || true)
  [ -z "$other" ] || bad "$symbols: lines other than (symver) patterns: $other"
else
  bad "missing $symbols"
fi

[ "$fail" -eq 0 ] && echo "debian/: version $deb_version of project $version, $lib, symbols by version node: ok"
exit "$fail"
