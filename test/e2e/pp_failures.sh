# Acceptance (issue 5, item 4): a dead or stuck pipeline stage ends the job. pp=2 x dp=2 on 4
# ranks (ranks 2 and 3 hold stage 1): rank 2 is killed (kill -9) or stopped (SIGSTOP) while
# activations and gradients cross the stages; every other rank exits non-zero naming rank 2
# (its pipeline peer rank 0 in a send/recv, its dp peer rank 3 in the gradient allreduce, rank 1
# through both), `mtrain launch` returns non-zero within 30 s, no process and no /dev/shm segment
# is left. The same pattern as dp_failures.sh.
source test/e2e_lib.sh
need_data
shm_before=$(ls /dev/shm | grep -c '^mtrain-' || true)
ARGS=(--config configs/gpt-tiny.yaml --train-iters 100000 --micro-batch-size 2 --set logging.interval=1
      --set logging.eval_interval=0 --pipeline-model-parallel-size 2)

rank_pid() { # rank_pid LAUNCHER_PID RANK: pid of that rank's process
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=$2"; then echo "$p"; return; fi
  done
}
wait_iter() { # wait until the log shows an iteration line (training is in its loop)
  for _ in $(seq 1 300); do grep -q "iteration " "$1" 2>/dev/null && return 0; sleep 0.1; done
  cat "$1"; fail "training did not start"
}

run_case() { # run_case NAME SIGNAL TIMEOUT_S EXPECTED_TEXT
  local name="$1" sig="$2" tmo="$3" want="$4"
  "$MTRAIN" launch -n 4 -- "${ARGS[@]}" --set parallel.timeout_s=$tmo >"$TMP/$name.log" 2>&1 &
  local launcher=$!
  wait_iter "$TMP/$name.log"
  grep -q "pp 2" "$TMP/$name.log" || { cat "$TMP/$name.log"; fail "$name: not a pp=2 run"; }
  local victim; victim=$(rank_pid $launcher 2)
  [ -n "$victim" ] || fail "$name: could not find rank 2's pid"
  local t0; t0=$(date +%s.%N)
  kill -$sig "$victim"
  local rc=0
  for _ in $(seq 1 300); do kill -0 $launcher 2>/dev/null || break; sleep 0.1; done
  if kill -0 $launcher 2>/dev/null; then kill -9 $launcher; cat "$TMP/$name.log"; fail "$name: launcher still running after 30 s"; fi
  wait $launcher; rc=$?
  local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  echo "$name: launcher exited $rc after ${dt}s"
  [ $rc -ne 0 ] || fail "$name: launcher exited 0"
  grep -q "$want" "$TMP/$name.log" || { tail -n 20 "$TMP/$name.log"; fail "$name: no message naming rank 2 ('$want')"; }
  local n_err; n_err=$(grep -c "mtrain: error:" "$TMP/$name.log" || true)
  echo "$name: $n_err ranks reported an error; e.g.: $(grep -m1 'mtrain: error:' "$TMP/$name.log" | cut -c1-200)"
  [ "$n_err" -ge 3 ] || { tail -n 20 "$TMP/$name.log"; fail "$name: expected the 3 surviving ranks to report the failure"; }
  sleep 0.5
  pgrep -f "parallel.timeout_s=$tmo" >/dev/null && fail "$name: ranks left running"
  return 0
}
run_case kill9 KILL 300 "rank 2 .*died"
run_case sigstop STOP 5 "rank 2"
shm_after=$(ls /dev/shm | grep -c '^mtrain-' || true)
[ "$shm_after" -le "$shm_before" ] || { ls -la /dev/shm; fail "segments left in /dev/shm"; }
echo "no segments left in /dev/shm"
