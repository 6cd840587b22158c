#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The bash completion of fencelock: load it into a bash, set COMP_WORDS and
# COMP_CWORD as readline would, call the function, compare the candidates.
# Every subcommand of `fencelock --help` must be offered.
set -euo pipefail
script=$1 fencelock=$2
# shellcheck source=/dev/null
source "$script"
fail=0
complete_line() { # words...; the last word is the one being completed
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _fencelock fencelock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]:-}"
  printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//'
}
expect() { # want, words...
  local want=$1; shift
  local got
  got=$(complete_line "$@")
  if [ "$got" != "$want" ]; then
    echo "completion_test: '$*': got '$got', want '$want'" >&2
    fail=1
  fi
}
[ "$(complete -p fencelock)" = "complete -F _fencelock fencelock" ] || { echo "not registered" >&2; fail=1; }

expect "commit etcd-epoch help metrics read run status" fencelock ""
expect "metrics" fencelock me
expect "--help --version -V -h" fencelock -
expect "--help --version" fencelock --
expect "--count --help --json --list-columns --output --output-all --prefix --region --watch" fencelock status --
expect "--command --conflict-exit-code --help --kill-after --lease --no-wait --region --require-supervisor --wait" fencelock run -r /x --
expect "--lease" fencelock run --l
expect "--no-wait" fencelock run --n
expect "--help --key --region --strict --token" fencelock commit --
expect "--json" fencelock read --j
expect "read run" fencelock help r
expect "" fencelock run --lease ""
# --region takes a path; after run's -- comes a command.
dir=$(mktemp -d /tmp/fl-comp.XXXXXX)
trap 'rm -rf "$dir"' EXIT
touch "$dir/region" "$dir/regional"
expect "$dir/region $dir/regional" fencelock status --region "$dir/reg"
expect "$dir/region $dir/regional" fencelock commit rec/1 "$dir/reg"
expect "" fencelock commit --key "$dir/reg"
case " $(complete_line fencelock run KEY -- bas) " in
  *" bash "*) ;;
  *) echo "completion_test: no command offered after run --" >&2; fail=1 ;;
esac

# Every command the tool lists is offered.
for c in $("$fencelock" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'); do
  case " $(complete_line fencelock "") " in
    *" $c "*) ;;
    *) echo "completion_test: command $c not offered" >&2; fail=1 ;;
  esac
done
[ "$fail" -eq 0 ] && echo "completion: ok"
exit "$fail"
