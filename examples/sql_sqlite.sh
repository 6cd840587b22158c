#!/bin/sh
# SPDX-License-Identifier: MIT
# sql_sqlite.sh - the fenced SQL write from a shell script: `fencelock run`
# holds KEY while sqlite3 writes, and the write carries $FENCELOCK_TOKEN.
#
#   sql_sqlite.sh [--lease DURATION] KEY DB NAME < VALUE
#
# acquires KEY, prints "acquired KEY: token T (pid P)", reads the new value
# from standard input (the work done under the lock) and writes it to row
# NAME of table fenced_values in the SQLite database DB with
#
#   UPDATE fenced_values SET value = ..., fence_token = $FENCELOCK_TOKEN
#    WHERE name = ... AND fence_token <= $FENCELOCK_TOKEN;
#   SELECT changes();
#
# Zero rows changed means a newer holder has written the row: ownership is
# lost.  The script says so and exits 76 (the status `fencelock run` uses for
# a lost lease), and never retries with the same token.
#
# Note the single quotes around the inner script: $FENCELOCK_TOKEN must be
# expanded by the shell that `fencelock run` starts, not by the one that
# starts `fencelock run` (where it is not set yet).
#
# Exit status: 0 written; 76 ownership lost; 75 KEY could not be acquired;
# others as `fencelock run --help` says.  $FENCELOCK names the fencelock
# program (default: fencelock from PATH), $SQLITE3 the sqlite3 program.
set -eu
lease=30s
if [ "${1:-}" = --lease ]; then
    lease=$2
    shift 2
fi
if [ $# -ne 3 ]; then
    echo "usage: sql_sqlite.sh [--lease DURATION] KEY DB NAME < VALUE" >&2
    exit 2
fi
key=$1 db=$2 name=$3

exec "${FENCELOCK:-fencelock}" run --lease "$lease" "$key" -- sh -c '
    set -eu
    db=$1 name=$2
    sqlite3=${SQLITE3:-sqlite3}
    # A token is decimal digits; never paste anything else into SQL.
    case $FENCELOCK_TOKEN in
        "" | *[!0-9]*) echo "sql_sqlite.sh: bad FENCELOCK_TOKEN" >&2; exit 2 ;;
    esac
    echo "acquired $FENCELOCK_KEY: token $FENCELOCK_TOKEN (pid $$)"
    value=$(cat)    # the work done under the lock; it may be paused here
    # SQL string literals: double every single quote.
    quote() { printf "'\''%s'\''" "$(printf "%s" "$1" | sed "s/'\''/'\'''\''/g")"; }
    qname=$(quote "$name")
    changed=$("$sqlite3" -batch -bail "$db" <<SQL
.timeout 10000
CREATE TABLE IF NOT EXISTS fenced_values (
  name TEXT PRIMARY KEY, value TEXT NOT NULL, fence_token INTEGER NOT NULL DEFAULT 0);
INSERT OR IGNORE INTO fenced_values (name, value, fence_token) VALUES ($qname, '\'''\'', 0);
UPDATE fenced_values SET value = $(quote "$value"), fence_token = $FENCELOCK_TOKEN
 WHERE name = $qname AND fence_token <= $FENCELOCK_TOKEN;
SELECT changes();
SQL
)
    if [ "$changed" = 1 ]; then
        echo "written with token $FENCELOCK_TOKEN"
        exit 0
    fi
    current=$("$sqlite3" -batch "$db" "SELECT fence_token FROM fenced_values WHERE name = $qname")
    echo "ownership lost: row $name was written with token $current, ours is $FENCELOCK_TOKEN; stopping"
    exit 76
' sql_sqlite.sh "$db" "$name"
