# test/faults_lib.sh — the checks of the fault-injection sweep (test/e2e/faults_*.sh), sourced
# after test/e2e_lib.sh. Every case asserts the same five things:
#   1. the exit status it expects (a number, or "nonzero");
#   2. a message naming the culprit (a file, a key, a rank) in the output;
#   3. no process it started is left (found by the MT_E2E_MARK marker, see e2e_lib.sh);
#   4. nothing new in /dev/shm and nothing left in the case's own temporary directory (TMPDIR is
#      set to a fresh folder per case, so launcher / PMIx / preprocess temporaries land there);
#   5. no partial or mixed file under a final name (the case passes its own check to fault_end).
# Usage:
#   fault_begin NAME                 start a case: its TMPDIR, marker and /dev/shm baseline
#   fault_run CMD...                 run CMD to completion (CASE_RC), output in $TMP/NAME.log
#   fault_start CMD...               run CMD in the background (CASE_PID), output in $TMP/NAME.log
#   fault_wait SECONDS               wait for CASE_PID; fails the test if it is still running then
#   fault_end RC TEXT [CHECK...]     assert 1-4, then run `CHECK...` (must exit 0) for 5
# Cases run one after another; a case's TMPDIR may be inspected before fault_end.

CASE=""; CASE_TMPDIR=""; CASE_MARK=""; CASE_SHM0=0; CASE_RC=0; CASE_PID=""

fault_begin() {
  CASE="$1"; CASE_TMPDIR="$TMP/$1.tmpdir"; CASE_MARK="$TMP/$1"; CASE_RC=0; CASE_PID=""
  rm -rf "$CASE_TMPDIR"; mkdir -p "$CASE_TMPDIR"
  CASE_SHM0=$(shm_segments)
}

fault_run() {
  CASE_RC=0
  MT_E2E_MARK="$CASE_MARK" TMPDIR="$CASE_TMPDIR" "$@" >"$TMP/$CASE.log" 2>&1 </dev/null || CASE_RC=$?
}

fault_start() {
  MT_E2E_MARK="$CASE_MARK" TMPDIR="$CASE_TMPDIR" "$@" >"$TMP/$CASE.log" 2>&1 </dev/null &
  CASE_PID=$!
}

fault_wait() {
  local i n=$(( $1 * 10 ))
  for ((i = 0; i < n; i++)); do kill -0 "$CASE_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$CASE_PID" 2>/dev/null; then
    kill -KILL "$CASE_PID" 2>/dev/null
    tail -n 20 "$TMP/$CASE.log"; fail "$CASE: still running after $1 s"
  fi
  CASE_RC=0; wait "$CASE_PID" || CASE_RC=$?
}

# fault_wait_log TEXT [SECONDS]: wait until the case's log shows TEXT (default 30 s)
fault_wait_log() {
  local i n=$(( ${2:-30} * 10 ))
  for ((i = 0; i < n; i++)); do grep -q -- "$1" "$TMP/$CASE.log" 2>/dev/null && return 0; sleep 0.1; done
  tail -n 20 "$TMP/$CASE.log"; fail "$CASE: '$1' did not appear within ${2:-30} s"
}

fault_end() {
  local want="$1" text="$2"; shift 2
  if [ "$want" = nonzero ]; then
    [ "$CASE_RC" -ne 0 ] || { tail -n 20 "$TMP/$CASE.log"; fail "$CASE: exited 0, expected a failure"; }
  else
    [ "$CASE_RC" -eq "$want" ] || { tail -n 20 "$TMP/$CASE.log"; fail "$CASE: exited $CASE_RC, expected $want"; }
  fi
  if [ -n "$text" ]; then
    grep -qF -- "$text" "$TMP/$CASE.log" || { tail -n 20 "$TMP/$CASE.log"; fail "$CASE: no message '$text'"; }
  fi
  local left="" i
  for i in 1 2 3 4 5 6 7 8 9 10; do left=$(marked_pids "$CASE_MARK"); [ -z "$left" ] && break; sleep 0.2; done
  if [ -n "$left" ]; then
    ps -o pid,stat,args -p $left; kill -KILL $left 2>/dev/null
    fail "$CASE: processes left running"
  fi
  local shm; shm=$(shm_segments)
  [ "$shm" -le "$CASE_SHM0" ] || { ls -la /dev/shm | grep mtrain-; fail "$CASE: /dev/shm segments left ($CASE_SHM0 before, $shm after)"; }
  if [ -n "$(ls -A "$CASE_TMPDIR")" ]; then
    ls -laR "$CASE_TMPDIR" | head -n 20; fail "$CASE: files left in its temporary directory"
  fi
  if [ $# -gt 0 ]; then "$@" || fail "$CASE: output check '$*' failed"; fi
  echo "ok  $CASE: exit $CASE_RC$([ -n "$text" ] && echo ", '$text'")"
}
