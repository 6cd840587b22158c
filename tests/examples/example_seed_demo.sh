#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's demo scenario against a private region: a real fencelockd,
# two real processes, A stopped across its lease expiry, A's commit rejected.
set -euo pipefail
build=$1
dir=$(mktemp -d /tmp/fl-demo.XXXXXX)
export FENCELOCK_REGION=$dir/region
"$build/fencelockd" --state "$dir/state" 2>"$dir/log" &
daemon=$!
trap 'kill -KILL $daemon 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 400); do grep -q '"event":"start"' "$dir/log" && break; sleep 0.05; done
grep -q '"event":"start"' "$dir/log" || { cat "$dir/log"; exit 1; }
out=$("$build/examples/seed_demo")
echo "$out"
grep -Eq 'A +commit with token [0-9]+ -> ESTALE' <<<"$out"
grep -Eq 'B +commit with token [0-9]+ -> accepted' <<<"$out"
grep -q 'holds "frame rendered by B"' <<<"$out"
"$build/fencelock" status >/dev/null
