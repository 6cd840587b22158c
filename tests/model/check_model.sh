#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Check a Promela model with spin: generate the verifier (spin -a), compile
# it with gcc, run an exhaustive search, fail on any error.  See README.md.
#
#   check_model.sh MODEL.pml [-DNAME[=VALUE]...]
#       Safety: assertion violations and invalid end states, exhaustive
#       (-DSAFETY, lossless -DCOLLAPSE compression).  Fails on any error and
#       on an incomplete search (depth or memory bound reached), printing
#       the counterexample.
#   check_model.sh --np MODEL.pml [-D...]
#       Non-progress cycles instead (pan -l).  The models have no progress
#       labels, so any cycle fails: every execution must end.
#   check_model.sh --each-fails BUG_A,BUG_B [--np] MODEL.pml [-D...]
#       For each BUG_X, the model compiled with -DBUG_X must FAIL (show that
#       the checks catch that bug); fails if one passes.  With --np, the
#       non-progress search must fail.
#   check_model.sh --sync MODEL.pml C_FILE
#       The git blob of C_FILE must be one of those on the model's
#       "C-VERSION:" line: the model was checked against this C code.
#
# Exit status: 0 passed, 1 failed, 77 spin or gcc missing (ctest: skipped).
# FL_MODEL_KEEP=1 keeps the work directory (pan.c, the trail) for study.
# FL_MODEL_MEMLIM=MB bounds pan's memory (default 2048); a search that
# reaches the bound is incomplete, hence a failure.
set -euo pipefail
memlim=${FL_MODEL_MEMLIM:-2048}
[[ $memlim =~ ^[1-9][0-9]{0,6}$ ]] || {
  echo "FL_MODEL_MEMLIM must be a number of megabytes, not '$memlim'" >&2
  exit 1
}

mode=safety
kind=safety
bugs=""
while [ $# -gt 0 ]; do
  case "$1" in
  --np) kind=np; [ "$mode" = safety ] && mode=np; shift ;;
  --each-fails) mode=bugs; bugs=$2; shift 2 ;;
  --sync) mode=sync; shift ;;
  *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,23p' "$0"; exit 1; }
model=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
[ -f "$model" ] || { echo "no model $model" >&2; exit 1; }

blob_of() { # the git blob id of a file, without needing git
  { printf 'blob %d\0' "$(wc -c <"$1")"; cat "$1"; } | sha1sum | cut -d' ' -f1
}

if [ "$mode" = sync ]; then
  cfile=$1
  have=$(blob_of "$cfile")
  line=$(sed -n '/C-VERSION: .* git-blob/,/\*\//p' "$model" | head -3)
  want=$(grep -oE '\b[0-9a-f]{40}\b' <<<"$line" || true)
  if [ -n "$want" ] && grep -qx "$have" <<<"$want"; then
    echo "$(basename "$model") matches $(basename "$cfile") (blob $have)"
    exit 0
  fi
  cat >&2 <<EOF
$(basename "$cfile") changed since $(basename "$model") was last checked against it:
  $(basename "$cfile") is blob $have
  the model says: ${line:-(no C-VERSION line)}
Re-read the protocol in both files, bring the model up to date, run
ctest -R model_ until it passes, then put $have on the model's C-VERSION line.
EOF
  exit 1
fi

for tool in spin gcc; do
  command -v "$tool" >/dev/null || { echo "$tool not installed: model check skipped" >&2; exit 77; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/fl-model.XXXXXX")
if [ "${FL_MODEL_KEEP:-0}" = 1 ]; then
  echo "work directory: $work"
else
  trap 'rm -rf "$work"' EXIT
  trap 'exit 1' HUP INT TERM # a ctest timeout: clean up all the same
fi
cd "$work"

# One verification run.  $1: safety|np; $2: gcc optimisation; rest: -D flags.
# Sets `out` to pan's report; returns 0 if pan reported no error and the
# search was complete, 1 on an error, 2 on an incomplete search.
verify() {
  local kind=$1 opt=$2
  shift 2
  rm -f pan pan.* ./*.trail
  spin -a "$@" "$model" >spin.out 2>&1 || { cat spin.out; return 3; }
  local cflags=(-w "$opt" -DCOLLAPSE -DMEMLIM="$memlim")
  local runflags=(-m20000 -n)
  if [ "$kind" = np ]; then
    cflags+=(-DNP)
    runflags+=(-l)
  else
    cflags+=(-DSAFETY)
  fi
  gcc "${cflags[@]}" -o pan pan.c || return 3
  out=$(./pan "${runflags[@]}" 2>&1) || true
  if ! grep -q 'errors: 0$' <<<"$out"; then
    return 1
  fi
  local incomplete='max search depth too small|out of memory|MEMLIM|[Ss]earch not completed'
  if grep -qE "$incomplete" <<<"$out"; then
    return 2
  fi
  return 0
}

summary() { # one line: states, depth, time
  local states depth secs
  states=$(grep -oE '^ *[0-9.e+]+ states, stored' <<<"$out" | grep -oE '[0-9.e+]+' | head -1)
  depth=$(grep -oE 'depth reached [0-9]+' <<<"$out" | grep -oE '[0-9]+$')
  secs=$(grep -oE 'elapsed time [0-9.e+-]+' <<<"$out" | grep -oE '[0-9.e+-]+$')
  echo "${states:-?} states stored, depth ${depth:-?}, ${secs:-?} s"
}

trail() { # the counterexample, as spin replays it
  local t
  t=$(find . -maxdepth 1 -name '*.trail' | head -1)
  [ -n "$t" ] || return 0
  echo "---- counterexample (spin -t -p) ----"
  spin -k "$t" -t -p "$@" "$model" 2>&1 | grep -vE '^\s*$' | tail -200
  echo "---- end of counterexample ----"
}

name=$(basename "$model")
case "$mode" in
safety | np)
  rc=0
  verify "$mode" -O2 "$@" || rc=$?
  case $rc in
  0)
    echo "$name $* ($mode): errors: 0, $(summary)"
    exit 0
    ;;
  1)
    echo "$name $* ($mode): FAILED"
    grep -E 'pan:|error|violat|invalid|cycle' <<<"$out" | head -20
    trail "$@"
    exit 1
    ;;
  2)
    echo "$name $* ($mode): INCOMPLETE search (bound reached), treated as a failure"
    echo "$out"
    exit 1
    ;;
  *) exit 1 ;;
  esac
  ;;
bugs)
  failed=0
  IFS=, read -r -a list <<<"$bugs"
  for bug in "${list[@]}"; do
    rc=0
    verify "$kind" -O0 "$@" "-D$bug" || rc=$?
    if [ $rc = 1 ]; then
      what=$(grep -m1 -oE 'pan:1: .*\(at depth [0-9]+\)' <<<"$out" || echo "error")
      echo "$name -D$bug $*: fails as it must: $what"
    else
      echo "$name -D$bug $*: NOT caught (the checks miss this bug)"
      [ $rc = 2 ] && echo "(incomplete search)"
      failed=1
    fi
  done
  exit $failed
  ;;
esac
