#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cmake --install into a temporary DESTDIR, then check what a distribution
# gets: the manual pages render with man -l (and `man fl_commit` finds
# fencelock(3) through its link page), the systemd units pass
# `systemd-analyze verify` with ExecStart naming the installed fencelockd,
# the system unit's hardening rates "OK" or better in `systemd-analyze
# security --offline`, and the bash completion is where bash-completion
# looks.  systemd-analyze verify loads the unit files offline: it needs no
# running systemd (CI runs in a container where systemd is not PID 1).
set -euo pipefail
build=$1 prefix=$2 bindir=$3 mandir=$4 sysunitdir=$5 userunitdir=$6 compdir=$7 units=${8:-1}
dest=$(mktemp -d /tmp/fl-dist.XXXXXX)
trap 'rm -rf "$dest"' EXIT
DESTDIR=$dest cmake --install "$build" >/dev/null
fail=0
bad() { echo "install_test: $*" >&2; fail=1; }
under() { case $1 in /*) echo "$dest$1" ;; *) echo "$dest$prefix/$1" ;; esac; }
M=$(under "$mandir") S=$(under "$sysunitdir") U=$(under "$userunitdir") C=$(under "$compdir")

# Manual pages, read as a user would.
for page in man1/fencelock.1 man8/fencelockd.8 man3/fencelock.3; do
  [ -f "$M/$page" ] || { bad "missing $M/$page"; continue; }
  out=$(MANWIDTH=80 man -l "$M/$page" 2>&1 >/dev/null) || bad "man -l $page failed"
  [ -z "$out" ] || bad "man -l $page: $out"
  MANWIDTH=80 man -l "$M/$page" 2>/dev/null | grep -q "^NAME" || bad "man -l $page shows no NAME"
done
for fn in fl_open fl_commit fl_keepalive_stop fl_client_info_get; do
  [ -f "$M/man3/$fn.3" ] || bad "missing link page $fn.3"
done
MANWIDTH=80 MANPATH=$M man 3 fl_commit 2>/dev/null | grep -q "fl_commit" ||
  bad "man fl_commit does not show fencelock(3)"

# Bash completion, under the name bash-completion loads on demand.
[ -f "$C/fencelock" ] || bad "missing $C/fencelock"

# systemd units, unless configured out (-DFL_INSTALL_SYSTEMD=OFF).
if [ "$units" != 1 ]; then
  [ ! -e "$S/fencelockd.service" ] || bad "units installed although FL_INSTALL_SYSTEMD is off"
  [ "$fail" -eq 0 ] && echo "install: man pages, completion: ok (units not installed)"
  exit "$fail"
fi
if ! command -v systemd-analyze >/dev/null; then
  bad "systemd-analyze not found (Debian package systemd; tools/bootstrap installs it)"
  exit 1
fi
for unit in "$S/fencelockd.service" "$U/fencelockd.service"; do
  [ -f "$unit" ] || { bad "missing $unit"; continue; }
  grep -qx "ExecStart=$bindir/fencelockd .*" "$unit" || bad "$unit: ExecStart is not $bindir/fencelockd"
done
[ "$fail" -eq 0 ] || exit 1
grep -qx 'Type=notify' "$S/fencelockd.service" || bad "system unit is not Type=notify"
grep -qx 'ExecStart=.* --region /run/fencelock/region .*' "$S/fencelockd.service" ||
  bad "system unit does not serve /run/fencelock/region"
grep -qx 'ExecStart=.* --region %t/fencelock/region' "$U/fencelockd.service" ||
  bad "user unit does not serve %t/fencelock/region"
[ -x "$dest$bindir/fencelockd" ] || bad "fencelockd not installed at $dest$bindir"
# verify checks that ExecStart's binary exists; the binary is in DESTDIR, so
# check a copy whose only change is that prefix.  The Documentation= pages
# are looked up with man, in the installed pages.
mkdir -p "$dest/check/system" "$dest/check/user" "$dest/xdg"
sed "s|^ExecStart=$bindir/|ExecStart=$dest$bindir/|" "$S/fencelockd.service" > "$dest/check/system/fencelockd.service"
sed "s|^ExecStart=$bindir/|ExecStart=$dest$bindir/|" "$U/fencelockd.service" > "$dest/check/user/fencelockd.service"
# verify exits 0 on unknown keys and bad values: any output is a failure.
out=$(MANPATH=$M systemd-analyze verify "$dest/check/system/fencelockd.service" 2>&1) ||
  bad "systemd-analyze verify (system) failed"
[ -z "$out" ] || bad "systemd-analyze verify (system): $out"
out=$(MANPATH=$M XDG_RUNTIME_DIR=$dest/xdg systemd-analyze --user verify \
        "$dest/check/user/fencelockd.service" 2>&1) || bad "systemd-analyze --user verify failed"
[ -z "$out" ] || bad "systemd-analyze --user verify: $out"
# Exposure 0 (best) .. 10; 2.0 or less is "OK".
if systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
  systemd-analyze security --offline=yes --threshold=20 "$dest/check/system/fencelockd.service" \
    >"$dest/security.txt" 2>&1 || { cat "$dest/security.txt" >&2; bad "system unit exposure above 2.0"; }
fi

[ "$fail" -eq 0 ] && echo "install: man pages, units, completion: ok"
exit "$fail"
