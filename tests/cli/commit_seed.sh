#!/bin/sh
# SPDX-License-Identifier: MIT
# commit_seed.sh - the seed scenario from a shell, with fencelock run and
# fencelock commit only (run by cli_commit.c, which starts fencelockd
# and sets FENCELOCK_REGION; $1 is the fencelock binary).  I2, I4:
#   A holds `job` (lease 300ms) and its command gets ready to commit;
#   A's fencelock run is stopped (SIGSTOP), so its lease is not renewed;
#   B waits for `job`, takes it over when A's lease has run out, commits B;
#   A's command, still running with A's token, commits: refused, exit 77;
#   fencelock read shows B's data and B's token.
# Events are ordered by FIFOs and by B's exit, never by sleeps: B can only
# acquire once A's lease has passed, which is what proves A was stopped
# past it.
set -eu
PATH=$(dirname "$1"):$PATH
export PATH
dir=$(mktemp -d)
export dir
runA=
trap '[ -n "$runA" ] && kill -CONT "$runA" 2>/dev/null; rm -rf "$dir"' EXIT
mkfifo "$dir/a_ready" "$dir/a_go" "$dir/a_done"

fencelock run --lease 300ms --kill-after 0 job -c '
    echo "$FENCELOCK_TOKEN" > "$dir/a_ready"
    read go < "$dir/a_go"
    st=0
    echo A | fencelock commit out 2> "$dir/a_err" || st=$?
    echo "$st" > "$dir/a_done"' 2> "$dir/a_run_err" &
runA=$!
tokA=$(cat "$dir/a_ready")
kill -STOP "$runA"     # A's lease is no longer renewed

# B waits for A's lease to run out, takes job over and commits.
fencelock run job -c 'echo B | fencelock commit out && echo "$FENCELOCK_TOKEN" > "$dir/b_token"'
tokB=$(cat "$dir/b_token")
[ "$tokB" -gt "$tokA" ] || { echo "B's token $tokB is not above A's $tokA"; exit 1; }

# A's command goes on with its stale token: refused.
echo go > "$dir/a_go"
stA=$(cat "$dir/a_done")
[ "$stA" = 77 ] || { echo "A's commit exited $stA, want 77"; cat "$dir/a_err"; exit 1; }
grep -q "accepted token $tokB" "$dir/a_err" ||
    { echo "A's message does not name B's token:"; cat "$dir/a_err"; exit 1; }
kill -CONT "$runA"
st=0
wait "$runA" || st=$?
runA=
[ "$st" = 76 ] || { echo "A's fencelock run exited $st, want 76 (lease lost)"; exit 1; }

# The record holds B's data and token.
data=$(fencelock read out 2> "$dir/read_err")
[ "$data" = B ] || { echo "read '$data', want B"; exit 1; }
grep -qx "fence $tokB" "$dir/read_err" || { echo "read's fence:"; cat "$dir/read_err"; exit 1; }
echo "seed scenario: A token $tokA refused (77), B token $tokB kept"
