#!/usr/bin/env bash
# test/e2e/launch_restarts.sh — `mtrain launch --max-restarts M` (torchrun's automatic restarts),
# with `mtrain bootstrap-check` as the job (its --fail-rank / --sleep faults confined to the
# first attempts by --if-restart-below K; every rank prints the MT_RESTART_COUNT and
# TORCHELASTIC_RESTART_COUNT it sees), 4 ranks:
#   (a) --max-restarts 2, rank 2 exits 3 on attempts 0 and 1: the job succeeds on attempt 2, exit
#       0, two restart lines naming rank 2 and its cause, the ranks saw restart counts 0, 1, 2
#   (b) --max_restarts=1, rank 1 exits 5 on every attempt: exit 5, "restarts exhausted", 1 restart
#   (c) --max-restarts 1, kill -9 of rank 2 while the ranks sleep: "was killed by signal 9",
#       restarted once, the clean attempt 1 ends the job with 0
#   (d) --max-restarts 3, SIGTERM to the launcher: passed on, no restart, exit 143; (d2) SIGINT
#       to the launcher's whole process group (a Ctrl-C) counts once: exit 130, no restart
#   (e) --max-restarts -1 / x / no value: a clear error, exit 2; --max-restarts=1 and
#       --max_restarts 1 accepted; without the option a failure is not restarted (today's
#       launcher) and the ranks see MT_RESTART_COUNT=0
# Each time no process of the case may be left (found by its MT_E2E_MARK, never by name) and the
# launcher's private PMIx tmpdirs must be gone. Run from the repo root; MTRAIN defaults to ./mtrain.
set -u
source test/e2e_lib.sh
[ -x "$MTRAIN" ] || { echo "skip: $MTRAIN not built"; exit 77; }
# a private copy: a concurrent `make` relinking ./mtrain must not pull the binary from under the ranks
cp "$MTRAIN" "$TMP/mtrain" && MTRAIN="$TMP/mtrain"
export TMPDIR="$TMP/launch-tmp" # the launcher's private PMIx dirs go here: must end empty
mkdir -p "$TMPDIR"
# the ranks must not inherit a launcher from whoever runs the tests
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT MT_BOOTSTRAP MT_STORE_PORT
unset MT_RESTART_COUNT TORCHELASTIC_RESTART_COUNT
for v in $(env | grep -oE '^PMIX_[A-Z0-9_]+' | grep -v '^PMIX_MCA_'); do unset "$v"; done
# The failing rank's peers sleep (--sleep 30) instead of waiting in the final fence: from there
# they would see the failure and exit 1 themselves, sometimes reaped before the failing rank, and
# the launcher would name the first it reaped. Sleeping, they get SIGTERM after the peer grace:
# 0.5 s instead of the default 10 s.
export MT_LAUNCH_PEER_GRACE_S=0.5

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }
show() { sed 's/^/  | /' "$@" | tail -n 40; }
timings=()
# after_case NAME: nothing of the case left running, no PMIx tmpdir left
after_case() {
  local left _
  for _ in $(seq 1 20); do left=$(marked_pids "$TMP/$1"); [ -z "$left" ] && break; sleep 0.05; done
  [ -z "$left" ] || { ps -o pid,stat,args -p $left; kill -KILL $left 2>/dev/null; fail "($1) processes left running: $left"; }
  [ -z "$(ls -A "$TMPDIR")" ] || fail "($1) left $(ls "$TMPDIR") in TMPDIR"
}
# restart_counts FILE: "K:N" for each MT_RESTART_COUNT K the ranks printed, N = how many ranks
# printed it with a matching TORCHELASTIC_RESTART_COUNT
restart_counts() {
  sed -nE 's/^\[r[0-9]+\] bootstrap-check: rank=[0-9]+ MT_RESTART_COUNT=([0-9]+) TORCHELASTIC_RESTART_COUNT=\1$/\1/p' "$1" |
    sort -n | uniq -c | awk '{printf "%s%s:%s", sep, $2, $1; sep=" "}'
}
wait_lines() { # wait_lines FILE N SECONDS: until FILE has N ok lines
  local _
  for _ in $(seq 1 $(($3 * 20))); do
    [ "$(grep -c ' ok$' "$1" 2>/dev/null)" -ge "$2" ] && return 0
    sleep 0.05
  done
  return 1
}
wait_exit() { # wait_exit PID SECONDS: until PID is gone; sets rc to its status (124 on timeout)
  local _
  for _ in $(seq 1 $(($2 * 20))); do
    if ! kill -0 "$1" 2>/dev/null; then wait "$1"; rc=$?; return 0; fi
    sleep 0.05
  done
  rc=124
  return 1
}
rank_of() { # rank_of MARK RANK: the pid of that rank among the processes marked MARK
  local p
  for p in $(marked_pids "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=$2" && { echo "$p"; return; }
  done
}

# ---- (a) rank 2 fails on attempts 0 and 1; attempt 2 succeeds ----
t0=$(now)
MT_E2E_MARK="$TMP/a" timeout 60 "$MTRAIN" launch -n 4 --max-restarts 2 -- bootstrap-check --timeout 30 \
  --fail-rank 2 --fail-code 3 --sleep 30 --if-restart-below 2 >"$TMP/a.out" 2>"$TMP/a.err"; rc=$?
dt=$(since "$t0"); timings+=("(a) 2 restarts, then success: ${dt} s")
[ $rc -eq 0 ] || { show "$TMP/a.out" "$TMP/a.err"; fail "(a) launcher exited $rc, expected 0"; }
n=$(grep -c "^mtrain launch: rank 2 exited with status 3; restarting all 4 ranks (restart [12] of 2)$" "$TMP/a.err")
[ "$n" = 2 ] && grep -q "(restart 1 of 2)$" "$TMP/a.err" && grep -q "(restart 2 of 2)$" "$TMP/a.err" ||
  { show "$TMP/a.err"; fail "(a) expected the restart lines 1 of 2 and 2 of 2 naming rank 2, got $n"; }
[ "$(grep -c 'restarting' "$TMP/a.err")" = 2 ] || { show "$TMP/a.err"; fail "(a) more than 2 restarts"; }
counts=$(restart_counts "$TMP/a.out")
[ "$counts" = "0:4 1:4 2:4" ] || { show "$TMP/a.out"; fail "(a) restart counts seen by the ranks: '$counts', expected 0:4 1:4 2:4"; }
[ "$(grep -c ' ok$' "$TMP/a.out")" = 12 ] || fail "(a) expected 12 ok lines (3 attempts x 4 ranks)"
after_case a
echo "ok: (a) rank 2 exits 3 twice: 2 restarts, attempt 2 exits 0, the ranks saw restart counts $counts (${dt} s)"

# ---- (b) rank 1 fails every time: restarts exhausted ----
t0=$(now)
MT_E2E_MARK="$TMP/b" timeout 60 "$MTRAIN" launch -n 4 --max_restarts=1 -- bootstrap-check --timeout 30 \
  --fail-rank 1 --fail-code 5 --sleep 30 >"$TMP/b.out" 2>"$TMP/b.err"; rc=$?
dt=$(since "$t0"); timings+=("(b) 1 restart, exhausted: ${dt} s")
[ $rc -eq 5 ] || { show "$TMP/b.out" "$TMP/b.err"; fail "(b) launcher exited $rc, expected 5 (the rank's status)"; }
[ "$(grep -c 'restarting' "$TMP/b.err")" = 1 ] &&
  grep -q "^mtrain launch: rank 1 exited with status 5; restarting all 4 ranks (restart 1 of 1)$" "$TMP/b.err" ||
  { show "$TMP/b.err"; fail "(b) expected exactly 1 restart line naming rank 1"; }
grep -q "^mtrain launch: rank 1 exited with status 5; restarts exhausted (1 of 1 used)" "$TMP/b.err" ||
  { show "$TMP/b.err"; fail "(b) no 'restarts exhausted' line"; }
counts=$(restart_counts "$TMP/b.out")
[ "$counts" = "0:4 1:4" ] || { show "$TMP/b.out"; fail "(b) restart counts '$counts', expected 0:4 1:4"; }
after_case b
echo "ok: (b) rank 1 exits 5 every time: 1 restart, then 'restarts exhausted' and exit 5 (${dt} s)"

# ---- (c) kill -9 of rank 2 while the ranks sleep; the restarted attempt runs clean ----
MT_E2E_MARK="$TMP/c" "$MTRAIN" launch -n 4 --max-restarts 1 -- bootstrap-check --timeout 30 \
  --sleep 30 --if-restart-below 1 >"$TMP/c.out" 2>"$TMP/c.err" &
lp=$!
wait_lines "$TMP/c.out" 4 20 || { show "$TMP/c.out" "$TMP/c.err"; fail "(c) the ranks did not start"; }
victim=$(rank_of "$TMP/c" 2)
[ -n "$victim" ] || fail "(c) could not find rank 2's pid"
t0=$(now)
kill -KILL "$victim"
wait_exit $lp 30 || { show "$TMP/c.err"; fail "(c) launcher still running 30 s after the kill"; }
dt=$(since "$t0"); timings+=("(c) kill -9 of a rank -> restarted attempt done: ${dt} s")
[ $rc -eq 0 ] || { show "$TMP/c.out" "$TMP/c.err"; fail "(c) launcher exited $rc, expected 0 (attempt 1 runs clean)"; }
grep -q "^mtrain launch: rank 2 was killed by signal 9 (Killed); restarting all 4 ranks (restart 1 of 1)$" "$TMP/c.err" ||
  { show "$TMP/c.err"; fail "(c) no restart line saying rank 2 was killed by signal 9"; }
[ "$(grep -c 'restarting' "$TMP/c.err")" = 1 ] || { show "$TMP/c.err"; fail "(c) expected exactly 1 restart"; }
counts=$(restart_counts "$TMP/c.out")
[ "$counts" = "0:4 1:4" ] || { show "$TMP/c.out"; fail "(c) restart counts '$counts', expected 0:4 1:4"; }
after_case c
echo "ok: (c) kill -9 of rank 2 (pid $victim): 'killed by signal 9', 1 restart, exit 0 after ${dt} s"

# ---- (d) SIGTERM to the launcher: passed on, never restarted ----
MT_E2E_MARK="$TMP/d" "$MTRAIN" launch -n 4 --max-restarts 3 -- bootstrap-check --timeout 30 --sleep 30 \
  >"$TMP/d.out" 2>"$TMP/d.err" &
lp=$!
wait_lines "$TMP/d.out" 4 20 || { show "$TMP/d.out" "$TMP/d.err"; fail "(d) the ranks did not start"; }
t0=$(now)
kill -TERM $lp
wait_exit $lp 30 || { show "$TMP/d.err"; fail "(d) launcher still running 30 s after SIGTERM"; }
dt=$(since "$t0"); timings+=("(d) SIGTERM to the launcher -> all gone: ${dt} s")
[ $rc -eq 143 ] || { show "$TMP/d.err"; fail "(d) launcher exited $rc, expected 143"; }
grep -q "restart" "$TMP/d.err" && { show "$TMP/d.err"; fail "(d) restarted after SIGTERM"; }
grep -q "passing it to the 4 running rank" "$TMP/d.err" || { show "$TMP/d.err"; fail "(d) SIGTERM not passed on"; }
[ "$(grep -c ' ok$' "$TMP/d.out")" = 4 ] || fail "(d) expected one attempt's 4 ok lines"
after_case d
echo "ok: (d) SIGTERM to the launcher: passed to the ranks, no restart, exit 143 after ${dt} s"

# ---- (d2) SIGINT to the whole process group (a Ctrl-C): the launcher and its attempt's
# supervisor both get it, and it counts once: passed on, not "again", no restart, exit 130 ----
MT_E2E_MARK="$TMP/d2" setsid "$MTRAIN" launch -n 4 --max-restarts 3 -- bootstrap-check --timeout 30 --sleep 30 \
  >"$TMP/d2.out" 2>"$TMP/d2.err" &
lp=$!
wait_lines "$TMP/d2.out" 4 20 || { show "$TMP/d2.out" "$TMP/d2.err"; fail "(d2) the ranks did not start"; }
[ "$(ps -o pgid= -p $lp | tr -d ' ')" = "$lp" ] || fail "(d2) setsid did not make the launcher a group leader"
t0=$(now)
kill -INT -- -$lp
wait_exit $lp 30 || { show "$TMP/d2.err"; fail "(d2) launcher still running 30 s after SIGINT"; }
dt=$(since "$t0"); timings+=("(d2) SIGINT to the process group -> all gone: ${dt} s")
[ $rc -eq 130 ] || { show "$TMP/d2.err"; fail "(d2) launcher exited $rc, expected 130"; }
[ "$(grep -c "passing it to the 4 running rank" "$TMP/d2.err")" = 1 ] && ! grep -qE "got Interrupt again|restart" "$TMP/d2.err" ||
  { show "$TMP/d2.err"; fail "(d2) a Ctrl-C did not count exactly once"; }
after_case d2
echo "ok: (d2) SIGINT to the process group: counted once, no restart, exit 130 after ${dt} s"

# ---- (e) option values; without the option a failure is final ----
for bad in "--max-restarts -1" "--max-restarts x" "--max_restarts=x" "--max-restarts=-2"; do
  # shellcheck disable=SC2086
  "$MTRAIN" launch -n 2 $bad -- bootstrap-check >/dev/null 2>"$TMP/e.err"; rc=$?
  [ $rc -eq 2 ] && grep -q "^mtrain launch: error: --max.restarts.*expected a number of restarts" "$TMP/e.err" ||
    fail "(e) '$bad': exit $rc, $(cat "$TMP/e.err")"
done
"$MTRAIN" launch -n 2 --max-restarts >/dev/null 2>"$TMP/e.err"; rc=$?
[ $rc -eq 2 ] && grep -q "needs a value" "$TMP/e.err" || fail "(e) '--max-restarts' last: exit $rc, $(cat "$TMP/e.err")"
for good in "--max-restarts=1" "--max_restarts 1"; do
  # shellcheck disable=SC2086
  MT_E2E_MARK="$TMP/e" timeout 60 "$MTRAIN" launch -n 2 $good -- bootstrap-check >"$TMP/e.out" 2>"$TMP/e.err"; rc=$?
  [ $rc -eq 0 ] && [ "$(restart_counts "$TMP/e.out")" = "0:2" ] ||
    { show "$TMP/e.out" "$TMP/e.err"; fail "(e) '$good': exit $rc"; }
done
MT_RESTART_COUNT=7 MT_E2E_MARK="$TMP/e" timeout 60 "$MTRAIN" launch -n 4 -- bootstrap-check --timeout 30 \
  --fail-rank 2 --fail-code 3 --sleep 30 >"$TMP/e.out" 2>"$TMP/e.err"; rc=$?
[ $rc -eq 3 ] && ! grep -q restart "$TMP/e.err" && [ "$(restart_counts "$TMP/e.out")" = "0:4" ] ||
  { show "$TMP/e.out" "$TMP/e.err"; fail "(e) without --max-restarts: exit $rc (expected 3, no restart, counts 0)"; }
after_case e
echo "ok: (e) bad values exit 2 naming the option; both spellings accepted; no option: no restart, MT_RESTART_COUNT=0"

# ---- (f) a wrong recipe (an unknown key; a layout the world cannot hold) exits MT_EXIT_CONFIG (2)
# on every rank; the launcher does not restart what every attempt would repeat ----
for bad in "--set model.bogus=1" "--tensor-model-parallel-size 4"; do
  # shellcheck disable=SC2086
  MT_E2E_MARK="$TMP/f" timeout 60 "$MTRAIN" launch -n 2 --max-restarts 2 -- --config configs/gpt-tiny.yaml \
    --train-iters 1 $bad >"$TMP/f.out" 2>"$TMP/f.err"; rc=$?
  [ $rc -eq 2 ] && ! grep -q 'restarting all' "$TMP/f.err" &&
    grep -q "exited with status 2; not restarting: status 2 is mtrain's for a wrong command line or recipe" "$TMP/f.err" ||
    { show "$TMP/f.out" "$TMP/f.err"; fail "(f) '$bad' with --max-restarts 2: exit $rc, expected 2 and no restart"; }
done
after_case f
echo "ok: (f) a wrong recipe exits 2 on each rank and is not restarted (an unknown key, tp 4 on 2 ranks)"

echo "timings:"
for t in "${timings[@]}"; do echo "  $t"; done
echo "all checks passed"
