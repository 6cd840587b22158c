#!/bin/sh
# SPDX-License-Identifier: MIT
# The measurements and soaks of issue 28's hostile review (README.md), on a
# throwaway single etcd member on loopback.  Not part of ctest: they print.
#   tests/etcd/review28/run-probes.sh BUILD_DIR [OLD_LIB_DIR]
# BUILD_DIR: a build of this tree (libfencelock.so); OLD_LIB_DIR: a build of
# fd9933c's library (`git archive fd9933c | tar -x -C DIR/src`, then
# `cmake -S DIR/src -B DIR/b && cmake --build DIR/b --target fencelock`),
# for the mixed-layout probe.  Ports 23791/23801 must be free.
set -eu
B=$(cd "$1" && pwd)
OLD=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../../.." && pwd)
T=$(mktemp -d)
trap 'kill $EPID 2>/dev/null; rm -rf "$T"' EXIT
etcd --name p --data-dir "$T/d" --listen-client-urls http://127.0.0.1:23791 \
  --advertise-client-urls http://127.0.0.1:23791 --listen-peer-urls http://127.0.0.1:23801 \
  --initial-advertise-peer-urls http://127.0.0.1:23801 \
  --initial-cluster p=http://127.0.0.1:23801 >"$T/etcd.log" 2>&1 &
EPID=$!
for i in $(seq 50); do
  ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:23791 get x >/dev/null 2>&1 && break
  sleep 0.2
done
for p in deep soak many mix; do
  cc -O1 -I"$SRC/include" -o "$T/$p" "$HERE/$p.c" -L"$B" -lfencelock -lpthread
done
U=etcd://127.0.0.1:23791
echo "== enqueue+leave cost against queue depth (fake live entries)"
for d in 0 200 2000 10000; do
  LD_LIBRARY_PATH=$B "$T/deep" "$U/deep$d" 1 >/dev/null
  [ "$d" -gt 0 ] && python3 "$HERE/fill.py" http://127.0.0.1:23791 "deep$d" "$d" >/dev/null
  printf 'depth %s: ' "$d"
  LD_LIBRARY_PATH=$B "$T/deep" "$U/deep$d" 20
done
echo "== 200 threads of one handle, 3 rounds each"
LD_LIBRARY_PATH=$B timeout 300 "$T/many" "$U/many" 200 3
SOAK=${SOAK_SECONDS:-120}
echo "== 6 processes, random SIGSTOPs of 1..4 s, $SOAK s"
LD_LIBRARY_PATH=$B timeout 300 "$T/soak" "$U/soak" "$SOAK"
if [ -n "$OLD" ]; then
  echo "== mixed layouts (new: this tree, old: $OLD)"
  NEW="env LD_LIBRARY_PATH=$B $T/mix"
  OLDC="env LD_LIBRARY_PATH=$OLD $T/mix"
  # (wait for the clients by pid: a bare `wait` would wait for etcd too)
  $NEW "$U/mix" k 0 3000 & h=$!; sleep 1; $OLDC "$U/mix" k 1000 0; wait $h
  $OLDC "$U/mix" k2 0 3000 & h=$!; sleep 1; $NEW "$U/mix" k2 1000 0; wait $h
  both=0
  for i in $(seq 15); do
    $OLDC "$U/mix" "r$i" 0 1500 >"$T/o$i" & a=$!
    $NEW "$U/mix" "r$i" 0 1500 >"$T/n$i" & b=$!
    wait $a $b
    if grep -q '^acq 0' "$T/o$i" && grep -q '^acq 0' "$T/n$i"; then both=$((both + 1)); fi
  done
  echo "fresh keys raced by both layouts: $both of 15 held by both (must be 0)"
fi
