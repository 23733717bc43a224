#!/usr/bin/env bash
# test/run.sh — runs every test and ends with one summary line.
#   C tests:      build/test/{unit,ops}/*  (built by `make`; exit 0 pass, 77 skip, else fail)
#   script tests: test/e2e/*.sh            (run from the repo root with MTRAIN=./mtrain)
# Usage: test/run.sh [name-filter]. Logs of failed tests are printed; all logs stay in build/test-logs/.
set -u
cd "$(dirname "$0")/.."
filter="${1:-}"
export MTRAIN="$PWD/mtrain"
logs=build/test-logs
rm -rf "$logs"; mkdir -p "$logs"
pass=0; fail=0; skip=0; failed=()
tests=()
for t in build/test/unit/* build/test/ops/*; do [ -x "$t" ] && tests+=("$t"); done
for t in test/e2e/*.sh; do [ -f "$t" ] && tests+=("$t"); done
start_all=$(date +%s)
for t in "${tests[@]}"; do
  name="${t#build/}"; name="${name%.sh}"
  if [ -n "$filter" ] && [[ "$name" != *"$filter"* ]]; then continue; fi
  log="$logs/$(echo "$name" | tr '/' '_').log"
  t0=$(date +%s.%N)
  if [[ "$t" == *.sh ]]; then bash "$t" >"$log" 2>&1; rc=$?; else "$t" >"$log" 2>&1; rc=$?; fi
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  if [ $rc -eq 0 ]; then
    pass=$((pass+1)); printf 'PASS  %-40s %6ss\n' "$name" "$dt"
  elif [ $rc -eq 77 ]; then
    skip=$((skip+1)); printf 'SKIP  %-40s %6ss  (%s)\n' "$name" "$dt" "$(tail -n 1 "$log")"
  else
    fail=$((fail+1)); failed+=("$name"); printf 'FAIL  %-40s %6ss  (exit %d)\n' "$name" "$dt" "$rc"
    sed 's/^/    | /' "$log" | tail -n 40
  fi
done
echo "tests: $pass passed, $fail failed, $skip skipped ($(( $(date +%s) - start_all ))s)"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
