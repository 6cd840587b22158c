#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# layers_test.sh TOP - the layer check (tools/check-layers, tools/layers)
# passes on the tree, and fails, naming the file and the rule, on a copy of
# it with one include of a layer above (core including the shared-memory
# backend's header) and one of a sibling (etcd including it), and on
# copies with the forms a regular expression on `#include "..."` misses:
# <...>, no space, a comment before it, a macro, a file of another kind.
set -euo pipefail
top=$1
"$top/tools/check-layers" "$top"
work=$(mktemp -d /tmp/fllayers.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tools"
cp -r "$top/src" "$top/include" "$work/"
cp -r "$top/tools/fencelock" "$top/tools/layers" "$work/tools/"
echo '#include "shm/shm.h"' >>"$work/src/api.c"
echo '#include "../shm/shm.h"' >>"$work/src/etcd/b64.c"
if out=$("$top/tools/check-layers" "$work" 2>&1); then
  echo "layers_test: the check passed a tree that breaks the layers:" >&2
  echo "$out" >&2
  exit 1
fi
echo "$out"
grep -q '^src/api.c:[0-9]*: core includes src/shm/shm.h, of shm: a layer above it' <<<"$out"
grep -q '^src/etcd/b64.c:[0-9]*: etcd includes src/shm/shm.h, of shm: a sibling layer' <<<"$out"
# Each of these compiles, and each breaks the layers.
rm -rf "$work/src" && cp -r "$top/src" "$work/"
echo '#include <shm/shm.h>' >>"$work/src/api.c"
echo '#include"shm/shm.h"' >>"$work/src/clock.c"
echo '/* x */ #include "shm/shm.h"' >>"$work/src/error.c"
printf '#define FL_H "shm/shm.h"\n#include FL_H\n' >>"$work/src/hash.c"
echo '#include "shm/shm.h"' >"$work/src/laundered.inc"
echo '#include "laundered.inc"' >>"$work/src/version.c"
if out=$("$top/tools/check-layers" "$work" 2>&1); then
  echo "layers_test: the check passed a tree that breaks the layers:" >&2
  echo "$out" >&2
  exit 1
fi
echo "$out"
for f in api.c clock.c error.c laundered.inc; do
  grep -q "^src/$f:[0-9]*: core includes src/shm/shm.h, of shm: a layer above it" <<<"$out"
done
grep -q '^src/hash.c:[0-9]*: #include FL_H: a computed include' <<<"$out"
echo "layers_test: the check passes the tree and refuses every planted include"
