#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# layers_test.sh TOP - the layer check (tools/check-layers, tools/layers)
# passes on the tree, and fails, naming the file and the rule, on a copy of
# it with one include of a layer above (core including the shared-memory
# backend's header) and one of a sibling (etcd including it).
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
echo "layers_test: the check passes the tree and refuses both planted includes"
