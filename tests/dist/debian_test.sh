#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# debian/ agrees with the project it packages (docs/building.md, "Debian
# packages"), checked on every test run; building and installing the packages
# is tools/test-deb's (it needs root and installs into /usr):
#   - debian/changelog's upstream version is project()'s (which
#     include/fencelock.h must say too: CMakeLists.txt checks that);
#   - the shared library's package is named for the SONAME's major version,
#     in debian/control and in the symbols file;
#   - debian/libfencelock0.symbols lists every public function (FL_API in
#     include/fencelock.h) by name, each under a version node of the linker
#     version script src/fencelock.map, plus one NODE@NODE line per node, and
#     nothing else: a new function is a new line with the version that adds
#     it, so a program using it depends on that version (a pattern such as
#     (symver)FENCELOCK_0 would take any new function in at 0.1.0, and
#     dpkg-gensymbols -c4 could not see it).
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
  [ -n "$map_nodes" ] || bad "no version node found in src/fencelock.map"
  other=$(sed -n '2,$p' "$symbols" | grep -vE '^\* Build-Depends-Package: libfencelock-dev$|^ [A-Za-z0-9_.]+@[A-Za-z0-9_.]+ [0-9][^ ]*$' || true)
  [ -z "$other" ] || bad "$symbols: lines other than 'NAME@NODE VERSION': $other"
  node_lines=$(sed -nE 's/^ ([A-Za-z0-9_.]+)@([A-Za-z0-9_.]+) .*/\1 \2/p' "$symbols" | awk '$1 !~ /^fl_/ && $1 == $2 {print $1}' | sort)
  [ "$map_nodes" = "$node_lines" ] ||
    bad "version nodes of src/fencelock.map ($(tr '\n' ' ' <<<"$map_nodes")) and NODE@NODE lines of $symbols ($(tr '\n' ' ' <<<"$node_lines")) differ"
  api=$(grep -oE '^FL_API [^(]*[^a-z0-9_]fl_[a-z0-9_]+\(' "$src/include/fencelock.h" | grep -oE 'fl_[a-z0-9_]+\($' | tr -d '(' | sort)
  listed=$(sed -nE 's/^ (fl_[a-z0-9_]+)@.*/\1/p' "$symbols" | sort)
  [ -n "$api" ] || bad "no FL_API function found in include/fencelock.h"
  missing=$(comm -23 <(echo "$api") <(echo "$listed"))
  extra=$(comm -13 <(echo "$api") <(echo "$listed"))
  [ -z "$missing" ] || bad "$symbols lacks public functions of include/fencelock.h (add 'NAME@NODE VERSION', VERSION the one that adds it): $(tr '\n' ' ' <<<"$missing")"
  [ -z "$extra" ] || bad "$symbols lists functions include/fencelock.h does not declare: $(tr '\n' ' ' <<<"$extra")"
  bad_node=$(sed -nE 's/^ fl_[a-z0-9_]+@([A-Za-z0-9_.]+) .*/\1/p' "$symbols" | sort -u | comm -23 - <(echo "$map_nodes"))
  [ -z "$bad_node" ] || bad "$symbols names version nodes src/fencelock.map lacks: $bad_node"
else
  bad "missing $symbols"
fi

[ "$fail" -eq 0 ] && echo "debian/: version $deb_version of project $version, $lib, symbols: every public function listed: ok"
exit "$fail"
