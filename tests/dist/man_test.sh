#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The manual pages render without a single groff warning, and say what the
# programs say: every subcommand and long option of `fencelock --help`, every
# option of `fencelockd --help`, every FL_API function of fencelock.h, and
# the version -V prints.  A new option or function without its manual line
# fails here.
set -euo pipefail
src=$1 fencelockd=$2 fencelock=$3
man=$src/docs/man
fail=0
bad() { echo "man_test: $*" >&2; fail=1; }

for page in fencelock.1 fencelockd.8 fencelock.3; do
  # -ww: all warnings; -z: no output; stderr must stay empty.
  out=$(groff -man -ww -z -Tutf8 "$man/$page" 2>&1) || bad "$page: groff failed"
  [ -z "$out" ] || bad "$page: groff warnings:"$'\n'"$out"
done

# What -V prints, in the same form for both programs.
[ "$("$fencelockd" -V)" = "$("$fencelockd" --version)" ] || bad "fencelockd -V differs from --version"
version=$("$fencelock" -V | sed 's/^fencelock //')
[ "$("$fencelockd" -V)" = "fencelockd $version" ] || bad "fencelockd -V: '$("$fencelockd" -V)', want 'fencelockd $version'"
for page in fencelock.1 fencelockd.8 fencelock.3; do
  grep -q "^\.TH .*\"fencelock $version\"" "$man/$page" || bad "$page: .TH does not say fencelock $version"
done

# roff spells a hyphen in an option \-: --region is \-\-region.
roff_opt() { printf '%s' "$1" | sed 's/-/\\-/g'; }
# The long options of a help text: those its option lines start with.
help_opts() { grep -oE -- '^ +(-[a-zA-Z], )?--[a-z][a-z-]*' | grep -oE -- '--[a-z-]+' | sort -u; }
has() { grep -qF -- "$2" "$man/$1"; }

# fencelockd(8): every long option of its help, and -V.
for o in $("$fencelockd" --help | help_opts); do
  has fencelockd.8 "$(roff_opt "$o")" || bad "fencelockd.8 lacks $o"
done
has fencelockd.8 '\-V' || bad "fencelockd.8 lacks -V"
# ... and the exit statuses of its help (FLD_EXIT_TABLE, fencelockd.h), each
# in EXIT STATUS, and no other.
help_codes=$("$fencelockd" --help | sed -n '/^Exit status:/,$p' | grep -oE '^  [0-9]+  ' | tr -d ' ' | sort -n | tr '\n' ' ')
man_codes=$(sed -n '/^\.SH "EXIT STATUS"/,/^\.SH "LOG/p' "$man/fencelockd.8" | grep -oE '^\.B [0-9]+$' | cut -d' ' -f2 | sort -n | tr '\n' ' ')
[ -n "$help_codes" ] || bad "fencelockd --help lists no exit status"
[ "$help_codes" = "$man_codes" ] || bad "exit statuses: fencelockd --help has '$help_codes', fencelockd.8 '$man_codes'"

# fencelock(1): every command of the list, with its own section, and every
# long option of the command's help.
commands=$("$fencelock" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }' | grep -v '^help$')
[ -n "$commands" ] || bad "no commands found in fencelock --help"
for c in $commands help commit read; do
  grep -q "^\.SS \"$c " "$man/fencelock.1" || bad "fencelock.1 has no section for $c"
done
for c in $commands; do
  for o in $("$fencelock" "$c" --help | help_opts); do
    has fencelock.1 "$(roff_opt "$o")" || bad "fencelock.1 lacks $c $o"
  done
done

# fencelock(3): every function of the header in the NAME line, the synopsis
# and a paragraph of its own.
for fn in $(grep -oE '^FL_API [^(]*\bfl_[a-z0-9_]+\(' "$src/include/fencelock.h" | grep -oE 'fl_[a-z0-9_]+\($' | tr -d '('); do
  sed -n '/^\.SH NAME/,/^\.SH /p' "$man/fencelock.3" | grep -qw "$fn" || bad "fencelock.3: $fn not in NAME"
  has fencelock.3 " $fn(" || has fencelock.3 "*$fn(" || bad "fencelock.3: $fn not in SYNOPSIS"
  has fencelock.3 ".BR $fn ()" || has fencelock.3 ".BR $fn \"()" || bad "fencelock.3: no paragraph names $fn"
done

[ "$fail" -eq 0 ] && echo "man pages: ok"
exit "$fail"
