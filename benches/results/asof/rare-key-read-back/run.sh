#!/usr/bin/env bash
# ASOF JOIN (merge path, 2 threads) where one key's only right row is far
# before the left partition that asks for it. Usage:
#   run.sh BASE_CLI NEW_CLI DATA_DIR   (DATA_DIR: benches/data/wj-1000000)
# Prints each binary's join_time (EXPLAIN ANALYZE) over 7 alternating runs.
set -euo pipefail
here=$(dirname "$0")
for i in 1 2 3 4 5 6 7; do
  for b in "$1" "$2"; do
    t=$("$b" --threads 2 -t trades="$3/trades" -t prices="$3/prices" -f "$here/query.sql" 2>&1 \
      | grep -oE "AsofJoinExec.*" | grep -oE "join_time=[0-9.]+ms")
    echo "$(basename "$b") $t"
  done
done
