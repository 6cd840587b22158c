#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build a libFuzzer harness with clang (ASan + UBSan) and run it for a bounded
# time on a scratch copy of its corpus.
#   run_fuzz.sh HARNESS [SECONDS]     e.g. run_fuzz.sh region_open 30
# FL_FUZZ_SECONDS overrides SECONDS; FL_FUZZ_KEEP=1 merges new inputs into
# the corpus in the repository.  A crash fails the run and leaves the input
# in the scratch directory: copy it into corpus/HARNESS/ to keep it as a
# regression test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
name=$1
seconds=${FL_FUZZ_SECONDS:-${2:-30}}
command -v clang >/dev/null || { echo "run_fuzz: clang is not installed" >&2; exit 1; }
work=$(mktemp -d /tmp/flfuzz-run.XXXXXX)
trap 'rm -rf "$work"' EXIT
# Sources beyond src/*.c and src/shm/*.c: the library's one in src/common/
# (proc_stat.c), and those a harness parses with.
extra=()
case "$name" in
  text) extra=("$top/src/common/duration.c" "$top/src/fencelockd/durable.c") ;;
esac
clang -g -O1 -std=c11 -D_GNU_SOURCE -mcx16 -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all -I"$top/include" -I"$top/src" \
  "$top"/src/*.c "$top"/src/shm/*.c "$top/src/common/proc_stat.c" "${extra[@]}" "$here/fuzz_$name.c" -o "$work/fuzz" -lurcu-memb -lurcu-common -lpthread
mkdir -p "$work/corpus"
cp -r "$here/corpus/$name/." "$work/corpus/" 2>/dev/null || true
cd "$work"
# Crashes, leaks and hangs are kept where they can be read after the run.
artifacts=${FL_FUZZ_ARTIFACTS:-/tmp/fencelock-fuzz-artifacts/$name}
mkdir -p "$artifacts"
# -timeout: one input may take this long on a loaded machine before it
# counts as a hang (a normal one takes well under a millisecond).
status=0
./fuzz -max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" corpus > log 2>&1 || status=$?
tail -n 12 log
if [ "$status" -ne 0 ]; then
  echo "run_fuzz: the fuzzer failed (status $status); its input is kept in $artifacts" >&2
  exit "$status"
fi
if [ "${FL_FUZZ_KEEP:-0}" = 1 ]; then
  ./fuzz -merge=1 "$here/corpus/$name" corpus >/dev/null 2>&1
fi
