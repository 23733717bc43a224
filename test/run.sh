#!/usr/bin/env bash
# test/run.sh — runs every test and ends with one summary line.
#   C tests:      build/test/{unit,ops}/NAME for each test/{unit,ops}/NAME.c (built by `make`;
#                 exit 0 pass, 77 skip, else fail; a binary whose source is gone is not run)
#   script tests: test/e2e/*.sh            (run from the repo root with MTRAIN=./mtrain)
# Each test runs in its own session / process group under `timeout` (MT_TEST_TIMEOUT seconds,
# default 300: SIGTERM to the group, SIGKILL 10 s later); a timed-out test fails, and whatever
# the test left in its process group is killed when it ends (by that group id, nothing else).
# Usage: test/run.sh [name-filter]. Logs of failed tests are printed; all logs stay in build/test-logs/.
set -u
cd "$(dirname "$0")/.."
filter="${1:-}"
tmo="${MT_TEST_TIMEOUT:-300}"
[[ "$tmo" =~ ^[1-9][0-9]*$ ]] || { echo "test/run.sh: MT_TEST_TIMEOUT=$tmo: expected a number of seconds" >&2; exit 2; }
export MTRAIN="$PWD/mtrain"
logs=build/test-logs
rm -rf "$logs"; mkdir -p "$logs"
pass=0; fail=0; skip=0; failed=()
tests=()
for src in test/unit/*.c test/ops/*.c; do [ -f "$src" ] && tests+=("build/${src%.c}"); done
for t in test/e2e/*.sh; do [ -f "$t" ] && tests+=("$t"); done

pgid="" # process group of the test running now
kill_group() { # kill_group SIG: signal what is left of the current test's process group
  [ -n "$pgid" ] && kill -"$1" -- "-$pgid" 2>/dev/null
}
left_in_group() { # how many live (not zombie) processes are in the current test's process group
  [ -n "$pgid" ] || { echo 0; return; }
  ps -e -o pgid=,stat= | awk -v g="$pgid" '$1 == g && $2 !~ /^Z/' | wc -l
}
on_signal() { # run.sh interrupted (Ctrl-C, SIGTERM): the test is in another session, stop it too
  kill_group TERM; sleep 1; kill_group KILL
  echo "test/run.sh: interrupted"; exit 130
}
trap on_signal INT TERM HUP

start_all=$(date +%s)
for t in "${tests[@]}"; do
  name="${t#build/}"; name="${name%.sh}"
  if [ -n "$filter" ] && [[ "$name" != *"$filter"* ]]; then continue; fi
  log="$logs/$(echo "$name" | tr '/' '_').log"
  if [[ "$t" != *.sh ]] && [ ! -x "$t" ]; then
    fail=$((fail+1)); failed+=("$name"); printf 'FAIL  %-40s %6ss  (not built: make all)\n' "$name" "0.0"
    continue
  fi
  cmd=("$t"); [[ "$t" == *.sh ]] && cmd=(bash "$t")
  t0=$(date +%s.%N)
  # setsid: a new session and process group whose id is the pid of this background job (a
  # non-interactive shell's job is no group leader, so setsid does not fork); timeout signals
  # the whole group
  setsid timeout --kill-after=10 -s TERM "$tmo" "${cmd[@]}" >"$log" 2>&1 </dev/null &
  pgid=$!
  wait "$pgid" 2>/dev/null; rc=$?
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  n_left=$(left_in_group)
  if [ "$n_left" -gt 0 ]; then
    kill_group TERM; sleep 0.5; kill_group KILL
    echo "test/run.sh: killed $n_left process(es) the test left in its process group $pgid" >>"$log"
  fi
  pgid=""
  timed_out=0
  if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && awk -v d="$dt" -v m="$tmo" 'BEGIN{exit !(d + 0.5 >= m)}'; then timed_out=1; fi
  if [ $timed_out -eq 0 ] && [ $rc -eq 0 ]; then
    pass=$((pass+1)); printf 'PASS  %-40s %6ss\n' "$name" "$dt"
  elif [ $timed_out -eq 0 ] && [ $rc -eq 77 ]; then
    skip=$((skip+1)); printf 'SKIP  %-40s %6ss  (%s)\n' "$name" "$dt" "$(tail -n 1 "$log")"
  else
    fail=$((fail+1)); failed+=("$name")
    if [ $timed_out -eq 1 ]; then why="timeout after $tmo s"; else why="exit $rc"; fi
    printf 'FAIL  %-40s %6ss  (%s)\n' "$name" "$dt" "$why"
    # the test's own verdict lines first (CI's report keeps only part of a long output), then
    # the end of its log, each line cut to 200 characters
    grep -aE 'FAIL|[Ff]ailed|error|not ok' "$log" | head -n 8 | cut -c1-200 | sed 's/^/    ! /'
    tail -n 30 "$log" | cut -c1-200 | sed 's/^/    | /'
  fi
done
echo "tests: $pass passed, $fail failed, $skip skipped ($(( $(date +%s) - start_all ))s)"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
