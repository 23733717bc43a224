#!/usr/bin/env bash
# test/e2e/faults_launch.sh — the launcher cases of the fault-injection sweep, each
# with the five checks of test/faults_lib.sh (exit status, a message naming the culprit, no
# process left, nothing new in /dev/shm, nothing left in the case's TMPDIR):
#   mpirun_kill9      SIGKILL of mpirun mid-training: each rank prints "lost the connection to the
#                     PMIx server" and exits non-zero within a few seconds (mpirun itself died of
#                     the SIGKILL; the ranks' statuses come from a wrapper that writes them to files)
#   launch_kill9      SIGKILL of `mtrain launch` mid-training leaves its mtrain-launch.<pid>.*
#                     folder; the next `mtrain launch` removes it, and keeps folders whose owner is
#                     alive or unknown (no owner file)
#   launch_sigterm_spawning / launch_sigint_spawning
#                     SIGTERM / SIGINT (the latter with --max-restarts 1: the supervisor path) to
#                     `mtrain launch -n 64` while it still spawns: exits 143 / 130 within 5 s (it reaps
#                     for at most 2 s; the rest is margin for a loaded 2-core machine), no
#                     rank left; and -n 64 on this machine's few CPUs warns "ranks on N CPU(s)"
#   launch_refuse_4096 `-n 4096` (over 64 ranks per CPU) is refused without --oversubscribe
#   env_missing_rank  env:// with WORLD_SIZE=3 and rank 2 missing, parallel.timeout_s=3: rank 0
#                     prints "waiting for rank(s) 2 (of WORLD_SIZE=3)" and its timeout names
#                     parallel.timeout_s
#   env_duplicate_rank RANK=1 given twice: "rank 1 joined twice (first pid ...)", every rank exits
#                     non-zero at once; env_duplicate_rank0: a second RANK=0 says "rank 0 joined twice"
#   srun_kill9        SIGKILL of srun under the one-machine Slurm (scripts/slurm/with-local.sh): once
#                     with-local.sh is done, no slurmstepd of that job (found by pid: the parent of
#                     its ranks) is alive and no new /tmp/spmix_appdir_* is left. Skipped (77 at the
#                     end when all else passed) only when Slurm cannot start here.
# Tiny runs: gpt-tiny, --threads 1, 2-3 ranks. About 50 s on 2 cores. env_missing_rank, which only
# waits out its 3 s timeout, runs in a background subshell (its own case variables, marker, TMPDIR,
# log and port range) while the two duplicate-rank cases run; its lines are printed after theirs.
source test/e2e_lib.sh
source test/faults_lib.sh
need_data
REPO="$PWD"
private_mtrain
no_outer_launcher --batch
export OMP_NUM_THREADS=1
TRAIN=(--config configs/gpt-tiny.yaml --train-iters 100000 --micro-batch-size 2 --threads 1
       --set logging.interval=1 --set logging.eval_interval=0)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
timings=(); skips=()
log_has() { grep -qF -- "$1" "$TMP/$CASE.log" || { tail -n 20 "$TMP/$CASE.log"; echo "no '$1' in the log"; return 1; }; }
wait_marked() { # wait_marked N SECONDS: until N processes carry the case's marker
  local i
  for ((i = 0; i < $2 * 10; i++)); do [ "$(marked_pids "$CASE_MARK" | wc -w)" -ge "$1" ] && return 0; sleep 0.1; done
  fail "$CASE: $1 processes did not start within $2 s"
}

# ---- SIGKILL of mpirun during training ----
if command -v mpirun >/dev/null; then
  t0=$(now)
  fault_begin mpirun_kill9
  cat >"$TMP/rank_wrap.sh" <<'EOF'
#!/usr/bin/env bash
# one rank under mpirun: its output and exit status go to files (mpirun, their reader, is killed)
r=$OMPI_COMM_WORLD_RANK
"$@" >"$MT_RANK_LOG.r$r" 2>&1
echo "rank $r exit $?" >>"$MT_RANK_LOG.status"
EOF
  chmod +x "$TMP/rank_wrap.sh"
  root_flags=(); [ "$(id -u)" = 0 ] && root_flags=(--allow-run-as-root)
  # mpirun's own session folder: mpirun is SIGKILLed here, so it cannot remove it (not ours to fix)
  mkdir -p "$TMP/ompi-session"
  fault_start env MT_RANK_LOG="$TMP/mpirun_kill9.rank" OMPI_MCA_orte_tmpdir_base="$TMP/ompi-session" \
    mpirun "${root_flags[@]}" --oversubscribe -n 2 "$TMP/rank_wrap.sh" "$MTRAIN" "${TRAIN[@]}"
  for _ in $(seq 1 300); do grep -q "iteration " "$TMP/mpirun_kill9.rank.r0" 2>/dev/null && break; sleep 0.1; done
  grep -q "iteration " "$TMP/mpirun_kill9.rank.r0" 2>/dev/null || { cat "$TMP/mpirun_kill9.log"; fail "mpirun_kill9: training did not start"; }
  kill -KILL "$CASE_PID"; wait "$CASE_PID" 2>/dev/null
  t1=$(now)
  for _ in $(seq 1 100); do [ "$(cat "$TMP/mpirun_kill9.rank.status" 2>/dev/null | wc -l)" = 2 ] && break; sleep 0.1; done
  dt=$(since "$t1")
  cat "$TMP/mpirun_kill9.rank.r0" "$TMP/mpirun_kill9.rank.r1" "$TMP/mpirun_kill9.rank.status" >>"$TMP/mpirun_kill9.log" 2>/dev/null
  echo "mpirun_kill9: ranks: $(tr '\n' ' ' <"$TMP/mpirun_kill9.rank.status" 2>/dev/null) ${dt}s after the SIGKILL"
  CASE_RC=1 # nonzero when both ranks ended non-zero
  [ "$(grep -c 'exit [1-9]' "$TMP/mpirun_kill9.rank.status" 2>/dev/null)" = 2 ] || CASE_RC=0
  awk -v d="$dt" 'BEGIN { exit !(d <= 8) }' || fail "mpirun_kill9: the ranks took ${dt}s to stop"
  both_ranks_said() { grep -q "rank 0: lost the connection to the PMIx server" "$TMP/$CASE.log" &&
                      grep -q "rank 1: lost the connection to the PMIx server" "$TMP/$CASE.log"; }
  fault_end nonzero "lost the connection to the PMIx server (mpirun or srun ended?): stopping" both_ranks_said
  rm -rf "$TMP/ompi-session"
  timings+=("mpirun_kill9 $(since "$t0") s")
else
  echo "SKIP: mpirun_kill9: mpirun not installed (Debian openmpi-bin)"; skips+=(mpirun)
fi

# ---- SIGKILL of mtrain launch, then a later mtrain launch cleans up ----
t0=$(now)
fault_begin launch_kill9
fault_start "$MTRAIN" launch -n 2 -- "${TRAIN[@]}"
wait_iter "$TMP/$CASE.log"
kill -KILL "$CASE_PID"; wait "$CASE_PID" 2>/dev/null
left=$(marked_pids "$CASE_MARK")
for _ in $(seq 1 30); do [ -z "$left" ] && break; sleep 0.1; left=$(marked_pids "$CASE_MARK"); done
[ -z "$left" ] || fail "launch_kill9: ranks $left outlived the SIGKILLed launcher"
stale=$(ls -d "$CASE_TMPDIR"/mtrain-launch.* 2>/dev/null | wc -l)
[ "$stale" -ge 1 ] || fail "launch_kill9: expected the killed launcher's folder in TMPDIR"
# folders that must stay: a live owner (this shell), and one without an owner file
live="$CASE_TMPDIR/mtrain-launch.$$.live01"; unknown="$CASE_TMPDIR/mtrain-launch.1.nofile"
mkdir "$live" "$unknown"
echo "pid $$ start $(awk '{print $22}' /proc/$$/stat) pidns $(readlink /proc/$$/ns/pid)" >"$live/owner"
fault_run "$MTRAIN" launch -n 2 -- bootstrap-check
[ -d "$live" ] && [ -d "$unknown" ] || fail "launch_kill9: a folder with a live or unknown owner was removed"
rm -rf "$live" "$unknown"
fault_end 0 "removed 1 stale mtrain-launch.* folder(s)"
timings+=("launch_kill9 $(since "$t0") s")

# ---- SIGTERM / SIGINT while spawning; -n far above the cores warns ----
spawn_case() { # spawn_case NAME SIG EXPECTED_RC LAUNCHER_OPTS...
  local name=$1 sig=$2 want=$3; shift 3
  local t0; t0=$(now)
  fault_begin "$name"
  fault_start "$MTRAIN" launch -n 64 "$@" -- bootstrap-check --timeout 60
  wait_marked 4 20
  local t1; t1=$(now)
  kill -"$sig" "$CASE_PID"
  fault_wait 10
  local dt; dt=$(since "$t1")
  echo "$name: exited $CASE_RC ${dt}s after SIG$sig ($(grep -c 'kind=pmix' "$TMP/$name.log") of 64 ranks had bootstrapped)"
  awk -v d="$dt" 'BEGIN { exit !(d <= 5.0) }' || { tail -n 5 "$TMP/$name.log"; fail "$name: took ${dt}s to act on SIG$sig"; }
  warned() { log_has "ranks on $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) CPU(s)"; }
  fault_end "$want" "while starting the ranks" warned
  timings+=("$name $(since "$t0") s")
}
spawn_case launch_sigterm_spawning TERM 143
spawn_case launch_sigint_spawning INT 130 --max-restarts 1

fault_begin launch_refuse_4096
fault_run "$MTRAIN" launch -n 4096 -- bootstrap-check
fault_end 2 "pass --oversubscribe"

# ---- env:// ----
PORT_LO=20000
free_port() { echo $((PORT_LO + RANDOM % 15000)); } # the background case's ports: PORT_LO=35000
env_ranks() { # env_ranks WORLD RANK... -- ARGS: start one process per RANK, wait for all; exit: the worst status
  local world=$1; shift
  local ranks=() pids=() rc=0 r p
  while [ "$1" != -- ]; do ranks+=("$1"); shift; done; shift
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) WORLD_SIZE=$world
  for r in "${ranks[@]}"; do RANK=$r "$@" & pids+=($!); sleep 0.2; done
  for p in "${pids[@]}"; do wait "$p" || { s=$?; [ $s -gt $rc ] && rc=$s; }; done
  return $rc
}
( t0=$(now); PORT_LO=35000
  fault_begin env_missing_rank
  fault_start env_ranks 3 0 1 -- "$MTRAIN" "${TRAIN[@]}" --set parallel.timeout_s=3
  fault_wait 15
  progress() { log_has "waiting for rank(s) 2 (of WORLD_SIZE=3) to join at"; }
  fault_end nonzero "missing rank(s) 2 (parallel.timeout_s=3 sets the limit" progress
  echo "env_missing_rank $(since "$t0") s" >"$TMP/env_missing_rank.timing"
) >"$TMP/env_missing_rank.out" 2>&1 &
emr_pid=$!

t0=$(now)
fault_begin env_duplicate_rank
fault_start env_ranks 3 0 1 1 -- "$MTRAIN" "${TRAIN[@]}" --set parallel.timeout_s=30
fault_wait 10
all_three() { [ "$(grep -c 'rank 1 joined twice (first pid' "$TMP/$CASE.log")" -ge 3 ]; }
fault_end nonzero "each process needs its own RANK" all_three
timings+=("env_duplicate_rank $(since "$t0") s")

t0=$(now)
fault_begin env_duplicate_rank0
fault_start env_ranks 2 0 0 -- "$MTRAIN" "${TRAIN[@]}" --set parallel.timeout_s=3
fault_wait 15
fault_end nonzero "rank 0 joined twice"
timings+=("env_duplicate_rank0 $(since "$t0") s")
emr_rc=0; wait "$emr_pid" || emr_rc=$?
cat "$TMP/env_missing_rank.out"
[ $emr_rc -eq 0 ] || fail "env_missing_rank (background) failed"
timings+=("$(cat "$TMP/env_missing_rank.timing")")
unset MASTER_ADDR MASTER_PORT WORLD_SIZE

# ---- SIGKILL of srun under the one-machine Slurm ----
slurm_ok=""
if [ "$(id -u)" = 0 ] && command -v slurmctld >/dev/null && command -v srun >/dev/null; then slurm_ok=1; fi
if [ -n "$slurm_ok" ]; then
  t0=$(now)
  fault_begin srun_kill9
  appdirs0=$(ls -d /tmp/spmix_appdir_* 2>/dev/null | sort)
  cat >"$TMP/srun_case.sh" <<'EOF'
#!/usr/bin/env bash
# runs inside with-local.sh: srun in the background, its pid for the test to kill
srun --mpi=pmix -n 2 "$@" &
echo $! >"$SRUN_PIDFILE"
wait $!
EOF
  fault_start env SRUN_PIDFILE="$TMP/srun.pid" MT_SLURM_LOCK_WAIT=120 \
    "$REPO/scripts/slurm/with-local.sh" bash "$TMP/srun_case.sh" "$MTRAIN" "${TRAIN[@]}"
  started=""
  for _ in $(seq 1 600); do
    grep -q "iteration " "$TMP/$CASE.log" 2>/dev/null && { started=1; break; }
    kill -0 "$CASE_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$started" ] && grep -qE "start-local.sh: (needs root|.* not found|node .* after 20 s)|slurmctld failed|slurmd failed" "$TMP/$CASE.log"; then
    fault_wait 30
    echo "SKIP: srun_kill9: the one-machine Slurm did not start: $(grep -m1 start-local "$TMP/$CASE.log")"
    skips+=(srun); rm -rf "$CASE_TMPDIR"/*
  else
    [ -n "$started" ] || { tail -n 20 "$TMP/$CASE.log"; fail "srun_kill9: training did not start"; }
    # the step's slurmstepd, by pid: the parent of the job's ranks (they carry the case's marker)
    stepds=""
    for p in $(marked_pids "$CASE_MARK"); do
      pp=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
      [ -n "$pp" ] && [ "$(cat "/proc/$pp/comm" 2>/dev/null)" = slurmstepd ] && stepds="$stepds $pp"
    done
    stepds=$(echo $stepds | tr ' ' '\n' | sort -u | tr '\n' ' ')
    [ -n "$stepds" ] || fail "srun_kill9: found no slurmstepd above the ranks"
    kill -KILL "$(cat "$TMP/srun.pid")"
    fault_wait 30
    for p in $stepds; do
      if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ]; then
        ps -o pid,ppid,args -p "$p"; kill -KILL "$p"; fail "srun_kill9: slurmstepd $p outlived with-local.sh"
      fi
    done
    appdirs1=$(ls -d /tmp/spmix_appdir_* 2>/dev/null | sort)
    new_appdirs=$(comm -13 <(echo "$appdirs0") <(echo "$appdirs1"))
    [ -z "$new_appdirs" ] || { echo "$new_appdirs"; fail "srun_kill9: the local Slurm left $new_appdirs"; }
    echo "srun_kill9: slurmstepd$stepds gone, no spmix_appdir left"
    fault_end nonzero ""
    timings+=("srun_kill9 $(since "$t0") s")
  fi
else
  echo "SKIP: srun_kill9: the one-machine Slurm needs root and slurmctld/srun (Debian slurmctld slurmd slurm-client)"
  skips+=(srun)
fi

echo "timings: ${timings[*]}"
if [ ${#skips[@]} -gt 0 ]; then echo "skipped: ${skips[*]}"; exit 77; fi
echo "faults_launch: all cases passed"
