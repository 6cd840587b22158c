#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's demo scenario against a private region: a real fencelockd,
# two real processes, A stopped across its lease expiry, A's commit rejected.
#   example_seed_demo.sh BUILD                           the build tree's programs
#   example_seed_demo.sh FENCELOCKD FENCELOCK SEED_DEMO  any others (tools/test-deb:
#                                                        the installed ones)
set -euo pipefail
if [ $# -eq 3 ]; then
  fencelockd=$1 fencelock=$2 seed_demo=$3
else
  fencelockd=$1/fencelockd fencelock=$1/fencelock seed_demo=$1/examples/seed_demo
fi
dir=$(mktemp -d /tmp/fl-demo.XXXXXX)
export FENCELOCK_REGION=$dir/region
"$fencelockd" --state "$dir/state" 2>"$dir/log" &
daemon=$!
trap 'kill -KILL $daemon 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 400); do grep -q '"event":"start"' "$dir/log" && break; sleep 0.05; done
grep -q '"event":"start"' "$dir/log" || { cat "$dir/log"; exit 1; }
out=$("$seed_demo")
echo "$out"
grep -Eq 'A +commit with token [0-9]+ -> ESTALE' <<<"$out"
grep -Eq 'B +commit with token [0-9]+ -> accepted' <<<"$out"
grep -q 'holds "frame rendered by B"' <<<"$out"
"$fencelock" status >/dev/null
