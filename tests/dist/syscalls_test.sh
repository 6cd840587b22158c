#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The system unit's SystemCallFilter=@system-service lets fencelockd make
# every system call it makes: trace a real fencelockd (start, a client that
# registers, takes a lock and exits, SIGHUP, SIGTERM) with strace and look
# each call up in the set as systemd-analyze expands it.  A call outside it
# would kill the supervisor under systemd (SystemCallErrorNumber=EPERM:
# fail), which no other test can show without a running systemd.
set -euo pipefail
fencelockd=$1 fencelock=$2 unit=$3
for t in strace systemd-analyze; do
  command -v "$t" >/dev/null || { echo "syscalls_test: $t not found (tools/bootstrap installs it)" >&2; exit 1; }
done
filter=$(sed -n 's/^SystemCallFilter=//p' "$unit")
[ "$filter" = "@system-service" ] || { echo "syscalls_test: the unit's filter is '$filter'; update this test" >&2; exit 1; }
dir=$(mktemp -d /tmp/fl-sys.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

# The set, its nested groups expanded.
declare -A allowed seen
expand() {
  local g=$1 w
  [ -n "${seen[$g]:-}" ] && return
  seen[$g]=1
  for w in $(systemd-analyze syscall-filter "$g" | sed -n '2,$p' | grep -vE '^\s*#'); do
    case $w in @*) expand "$w" ;; *) allowed[$w]=1 ;; esac
  done
}
expand @system-service

region=$dir/region
strace -f -qq -o "$dir/trace" "$fencelockd" --region "$region" --state "$dir/state" 2>"$dir/log" &
pid=$!
# Ready: its start line is logged once the region is ready.
for _ in $(seq 1 400); do
  grep -q '"start"' "$dir/log" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/log" >&2; exit 1; }
  sleep 0.05 # polling for a log line with a deadline, not ordering events
done
grep -q '"start"' "$dir/log" || { echo "syscalls_test: fencelockd did not start" >&2; exit 1; }
"$fencelock" run --region "$region" k -- true
# Signals go to fencelockd itself (its pid is in the start line), not to strace.
daemon=$(grep -m1 '"start"' "$dir/log" | grep -oE '"pid":[0-9]+' | cut -d: -f2)
kill -HUP "$daemon"
kill -TERM "$daemon"
wait "$pid" || { echo "syscalls_test: fencelockd exited $?" >&2; cat "$dir/log" >&2; exit 1; }
pid=
grep -q '"stop"' "$dir/log" || { echo "syscalls_test: no clean stop" >&2; exit 1; }

calls=$(grep -oE '^[0-9]+ +[a-z0-9_]+\(' "$dir/trace" | grep -oE '[a-z0-9_]+\($' | tr -d '(' | sort -u)
[ -n "$calls" ] || { echo "syscalls_test: no system call traced" >&2; exit 1; }
fail=0
for c in $calls; do
  [ -n "${allowed[$c]:-}" ] || { echo "syscalls_test: $c is not in @system-service" >&2; fail=1; }
done
[ "$fail" -eq 0 ] && echo "syscalls: $(wc -w <<<"$calls") distinct calls, all in @system-service"
exit "$fail"
