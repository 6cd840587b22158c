#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ctest go_install (issue 26): the binding as a Go user gets it.
#   install_test.sh PREFIX SRC WORK GO
# PREFIX is a fencelock installed as a packager installs it (the fixture
# install_setup of tests/install); SRC is bindings/go.  A program of another
# module (testdata/outside) requires the binding by its module path, with
# `replace` pointing at SRC as a user's local checkout would; it is built
# with PKG_CONFIG_PATH at the prefix and the rpath README's Go section
# gives (CGO_LDFLAGS from `pkg-config --variable=libdir`), and runs against
# the prefix's fencelockd with LD_LIBRARY_PATH unset.  Without the rpath the
# same build does not find the library: the prefix is not in the loader's
# path, so the rpath is what makes it run.
set -euo pipefail
prefix=$1 src=$2 work=$3 go=$4
unset LD_LIBRARY_PATH
fail() { echo "FAIL: $*" >&2; exit 1; }

[ -e "$prefix/lib/pkgconfig/fencelock.pc" ] || fail "no installed fencelock in $prefix (fixture install_setup)"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# A header changed under the same prefix must not reuse a cached build of
# the binding (go's cache does not hash headers found through pkg-config).
sum=$(sha256sum "$prefix/include/fencelock.h" | cut -c1-16)
export CGO_CFLAGS="-g -O2 -DFL_HEADER_SUM=$sum"

rm -rf "$work"
mkdir -p "$work/app"
cp "$src/testdata/outside/main.go" "$work/app/"
cat >"$work/app/go.mod" <<EOF
module example.com/outside

go 1.19

require github.com/fencelock/fencelock/bindings/go v0.0.0

replace github.com/fencelock/fencelock/bindings/go => $src
EOF
cd "$work/app"
libdir=$(pkg-config --variable=libdir fencelock)
CGO_LDFLAGS="-Wl,-rpath,$libdir" "$go" build -o outside . || fail "go build with the rpath"
readelf -d outside | grep -E 'R(UN)?PATH' | grep -qF "$libdir" || fail "outside has no rpath to $libdir"
"$go" build -o outside-no-rpath . || fail "go build without the rpath"
if out=$(./outside-no-rpath 2>&1); then
  fail "ran without an rpath: is $libdir in the loader's path? ($out)"
fi
echo "$out" | grep -q 'libfencelock' || fail "without the rpath: $out"

# The region's directory is short: REGION.sock must fit sun_path.
rdir=$(mktemp -d /tmp/flgo-install.XXXXXX)
"$prefix/bin/fencelockd" --region "$rdir/region" --state "$rdir/state" 2>"$work/fencelockd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$rdir"' EXIT
out=$(./outside "$rdir/region") || { cat "$work/fencelockd.log"; fail "outside: $out"; }
echo "$out"
echo "$out" | grep -q '"written from another module" fenced by token [1-9]' || fail "outside printed: $out"
echo "an outside module built against $prefix runs without LD_LIBRARY_PATH: ok"
