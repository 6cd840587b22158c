#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs like a library (issue 13), one step per ctest test:
#   setup SRC WORK MAINBUILD  configure and build SRC privately (WORK/build:
#                             library and programs only, -Werror), install
#                             into WORK/prefix; MAINBUILD's install_manifest.txt
#                             must stay as it was
#   programs SRC WORK VERSION the installed fencelock and fencelockd run with
#                             LD_LIBRARY_PATH unset, also after the prefix moved
#   find_package ...          an outside CMake project: find_package(fencelock)
#   pkgconfig ...             an outside program: pkg-config --cflags --libs
#   symbols ...               the shared library exports fl_* only, versioned
set -euo pipefail
step=$1 src=$2 work=$3
prefix=$work/prefix
unset LD_LIBRARY_PATH
fail() { echo "FAIL: $*" >&2; exit 1; }

case "$step" in
setup)
  main=$4
  before=$(sha256sum "$main/install_manifest.txt" 2>/dev/null || echo none)
  rm -rf "$work"
  mkdir -p "$work"
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFL_WERROR=ON \
    -DFL_BUILD_TESTS=OFF -DFL_BUILD_EXAMPLES=OFF -DFL_BUILD_BENCH=OFF >"$work/configure.log" \
    || { cat "$work/configure.log"; fail "configure"; }
  cmake --build "$work/build" -j2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
  cmake --install "$work/build" --prefix "$prefix" >/dev/null
  after=$(sha256sum "$main/install_manifest.txt" 2>/dev/null || echo none)
  [ "$before" = "$after" ] || fail "$main/install_manifest.txt changed"
  for f in include/fencelock.h bin/fencelockd bin/fencelock lib/libfencelock.a \
      lib/libfencelock.so lib/pkgconfig/fencelock.pc lib/cmake/fencelock/fencelock-config.cmake \
      lib/cmake/fencelock/fencelock-config-version.cmake share/doc/fencelock/LICENSE; do
    [ -e "$prefix/$f" ] || fail "missing $f in the install"
  done
  echo "installed into $prefix"
  ;;
programs)
  version=$4
  readelf -d "$prefix/bin/fencelock" | grep -q 'RUNPATH.*\$ORIGIN/\.\./lib' \
    || fail "bin/fencelock has no \$ORIGIN-relative RUNPATH"
  # The prefix is wherever the files are: move it and run again.
  rm -rf "$work/moved"; cp -a "$prefix" "$work/moved"
  for p in "$prefix" "$work/moved"; do
    out=$(env -u LD_LIBRARY_PATH "$p/bin/fencelock" --version) || fail "$p/bin/fencelock --version"
    [ "$out" = "fencelock $version" ] || fail "fencelock --version printed '$out'"
    out=$(env -u LD_LIBRARY_PATH "$p/bin/fencelockd" --version) || fail "$p/bin/fencelockd --version"
    [ "$out" = "fencelockd $version" ] || fail "fencelockd --version printed '$out'"
  done
  rm -rf "$work/moved"
  echo "installed programs run from any prefix: ok"
  ;;
find_package)
  version=$4
  b=$work/consumer
  rm -rf "$b"
  cmake -S "$src/tests/install/consumer" -B "$b" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$b.log" 2>&1 || { cat "$b.log"; fail "configure consumer"; }
  cmake --build "$b" >>"$b.log" 2>&1 || { cat "$b.log"; fail "build consumer"; }
  out=$("$b/app_shared") || fail "app_shared"
  [ "$out" = "$version" ] || fail "app_shared: fl_version() is '$out', project $version"
  readelf -d "$b/app_shared" | grep -q 'NEEDED.*libfencelock\.so\.0' || fail "app_shared is not dynamic"
  out=$("$b/app_static") || fail "app_static"
  [ "$out" = "$version" ] || fail "app_static: fl_version() is '$out', project $version"
  if readelf -d "$b/app_static" | grep -q 'NEEDED.*libfencelock'; then fail "app_static is not static"; fi
  echo "find_package(fencelock): shared and static apps build and run: ok"
  ;;
pkgconfig)
  version=$4
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  [ "$(pkg-config --modversion fencelock)" = "$version" ] || fail "pkg-config --modversion"
  pkg-config --print-requires-private fencelock | grep -qx 'liburcu-memb' \
    || fail "fencelock.pc lacks Requires.private: liburcu-memb"
  if grep -q -- '-lurcu' "$prefix/lib/pkgconfig/fencelock.pc"; then fail "hard-coded -lurcu in fencelock.pc"; fi
  app=$src/tests/install/consumer/app.c
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Werror "$app" -o "$work/app_pc" $(pkg-config --cflags --libs fencelock) \
    -Wl,-rpath,"$prefix/lib"
  out=$("$work/app_pc") || fail "app_pc"
  [ "$out" = "$version" ] || fail "app_pc: fl_version() is '$out'"
  # Static: the archive plus what --static adds (liburcu-memb through Requires.private).
  libs=$(pkg-config --static --libs fencelock)
  grep -q -- '-lurcu-memb' <<<"$libs" || fail "pkg-config --static --libs lacks liburcu: $libs"
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Werror "$app" -o "$work/app_pc_static" $(pkg-config --cflags fencelock) \
    $(sed "s|-lfencelock|$prefix/lib/libfencelock.a|" <<<"$libs")
  out=$("$work/app_pc_static") || fail "app_pc_static"
  [ "$out" = "$version" ] || fail "app_pc_static: fl_version() is '$out'"
  echo "pkg-config fencelock: shared and static apps build and run: ok"
  ;;
symbols)
  lib=$prefix/lib/libfencelock.so
  readelf -d "$lib" | grep -q 'SONAME.*\[libfencelock\.so\.0\]' || fail "SONAME is not libfencelock.so.0"
  [ "$(readlink "$prefix/lib/libfencelock.so.0")" = "libfencelock.so.$4" ] || fail "libfencelock.so.0 -> $(readlink "$prefix/lib/libfencelock.so.0")"
  syms=$(nm -D --defined-only "$lib")
  echo "$syms"
  bad=$(grep -Ev '^[0-9a-f]+ A FENCELOCK_0$|^[0-9a-f]+ [TDRB] fl_[a-z0-9][a-z0-9_]*@@FENCELOCK_0$' <<<"$syms" || true)
  [ -z "$bad" ] || fail "exported beyond fl_*@@FENCELOCK_0: $bad"
  grep -q ' fl_version@@FENCELOCK_0$' <<<"$syms" || fail "fl_version not exported"
  grep -q ' fl_open@@FENCELOCK_0$' <<<"$syms" || fail "fl_open not exported"
  echo "exports: fl_* only, version node FENCELOCK_0: ok"
  ;;
*) fail "unknown step $step" ;;
esac
