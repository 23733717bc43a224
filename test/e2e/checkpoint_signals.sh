#!/usr/bin/env bash
# test/e2e/checkpoint_signals.sh — acceptance (checkpoints, stop signals): SIGTERM mid-run under
# `mtrain launch`, mpirun and srun: every rank saves the same iteration and exits 0; the resumed
# run continues bit for bit. Also SIGUSR1 (what Slurm's --signal sends).
# Every run is gpt-tiny at tp 2 x dp 2 (4 ranks), 40 iterations. One uninterrupted 40-iteration
# run under `mtrain launch` is the reference. For each launcher a chain of runs shares one
# checkpoint folder: a run is stopped by a signal a few iterations after it started (or after
# its resume), the next one resumes it with --load, the last one finishes the 40 iterations. Each
# stopped run must:
#   - exit with the launcher status 0 (mpirun after its own SIGTERM: 1, see below);
#   - log "stopping after iteration N: <signal>, checkpoint saved" with N after the signal;
#   - leave the tracker naming N, and `mtrain checkpoint inspect` exit 0 with "iteration N" and
#     "verified: 4 files" (every rank wrote its file of that same save);
#   - have logged iterations FROM+1..N whose iteration, consumed samples, lm_loss, lr and grad_norm
#     strings equal the reference's (%.9g: the same bits), and loaded iteration FROM when resumed;
#   - leave no process with its MT_E2E_MARK running.
# The chains (the signal goes out once the log shows iteration FROM+3):
#   mtrain launch: SIGTERM to the launcher (passed on to every rank); SIGTERM to rank 2 alone (the
#                  others learn of it through the end-of-iteration allreduce(max) vote, rank 0
#                  logs the stop); SIGTERM to the launcher's whole process group (each rank gets
#                  it twice: directly and passed on); SIGUSR1 to the launcher; then the rest.
#   mpirun:        SIGUSR1 to mpirun; SIGTERM to mpirun; SIGTERM to rank 2 (mpirun exits 0: the
#                  ranks still finalize with it, bounded by a second); then the rest.
#   srun:          `scancel --signal=TERM` (slurmstepd signals the tasks); SIGUSR1 to srun; the rest.
# What the launchers do with a signal (observed: OpenMPI 4.1.4, Slurm 22.05.8):
#   - mtrain launch passes SIGTERM / SIGINT / SIGHUP on at once, gives the ranks
#     MT_LAUNCH_STOP_GRACE_S (300 s) before it kills them, exits 0 when every rank exits 0, and
#     a second signal kills. It must pass SIGUSR1 / SIGUSR2 on as well (a launcher killed by one
#     takes its ranks with it: PR_SET_PDEATHSIG).
#   - mpirun passes SIGUSR1 / SIGUSR2 on at once ("mpirun: Forwarding signal 10 to job") and then
#     ends with the ranks' status. Its own SIGTERM is an abort: SIGCONT to the ranks, then
#     odls_base_sigkill_timeout seconds (default 1) later SIGTERM to each rank's process group,
#     SIGKILL as many seconds after that, and mpirun exits 1 whatever the ranks did (SIGTERM
#     cannot be put in ess_base_forward_signals: "The system does not support trapping and
#     forwarding of the specified signal"). The timeout is both the delay and the ranks' time to
#     save; this test sets it from the mpirun chain's own ms/iteration (see below). The save completes,
#     but a rank's teardown can still be SIGKILLed by mpirun's abort (mtrain skips the PMIx finalize
#     there, which mpirun no longer serves): rank statuses are reported, not checked. Under
#     mpirun, SIGUSR1 / SIGUSR2 are the clean stop (sbatch --signal=USR1@T).
#   - srun turns its own SIGTERM into SIGKILL of the tasks ("srun: forcing job termination"), so
#     nothing can be saved that way; the SIGTERM of a Slurm job reaches the tasks from slurmstepd
#     (time limit, preemption, scancel), done here with `scancel --signal=TERM`. srun passes
#     SIGUSR1 on.
# mpirun and srun cases are skipped with a SKIP line when the tool is missing (exit 77 at the end
# when all else passed): make test installs them (scripts/install-deps.sh). The one-machine Slurm
# needs root. 30-50 s on 2 cores.
# The srun chain runs first (right after the reference), so that stopping the one-machine Slurm
# (seconds of waiting for its daemons to exit) happens in the background during the mtrain
# launch chain; the test waits for it before it ends. No run evaluates the test set at its end
# (logging.eval_iters=0): nothing here reads it.
source test/e2e_lib.sh
need_data
REPO="$PWD"
private_mtrain
no_outer_launcher --batch
export OMP_NUM_THREADS=1 # the same arithmetic under every launcher (4 ranks share the cores anyway)
slurm_up=""
slurm_stop="" # the background stop-local.sh, once the srun chain is done
on_exit() {
  [ -n "$slurm_up" ] && "$REPO/scripts/slurm/stop-local.sh" >/dev/null 2>&1
  [ -n "$slurm_stop" ] && wait "$slurm_stop" 2>/dev/null
  cleanup # e2e_lib.sh: kills what is left with this test's marks (by pid), removes $TMP
}
trap on_exit EXIT

ITERS=40
LAYOUT=(--config configs/gpt-tiny.yaml --micro-batch-size 1 --tensor-model-parallel-size 2
        --set logging.interval=1 --set logging.eval_interval=0 --set logging.eval_iters=0 --train-iters $ITERS)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
show() { tail -n 25 "$1" | cut -c1-240 | sed 's/^/  | /'; }
# the metrics lines of iterations FROM < i <= TO: iteration, samples, lm_loss, lr and grad_norm
steps() { grep -o '"iteration":[0-9]*,"consumed_samples":[0-9]*,"lm_loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1" |
          awk -F'[:,]' -v from="$2" -v to="${3:-999999}" '$2 > from && $2 <= to'; }
timing() { echo "$*" >>"$TMP/timings"; } # a file: chains run in subshells
fails=()
skips=()

# ---- the reference: 40 iterations without a stop ----
t0=$(now)
"$MTRAIN" launch -n 4 -- "${LAYOUT[@]}" --metrics "$TMP/ref.jsonl" >"$TMP/ref.log" 2>&1 ||
  { show "$TMP/ref.log"; fail "the reference run failed"; }
[ "$(steps "$TMP/ref.jsonl" 0 | wc -l)" -eq $ITERS ] || fail "the reference run logged $(steps "$TMP/ref.jsonl" 0 | wc -l) iterations"
timing "reference, 40 iterations: $(since "$t0") s"
MS_PER_ITER=$(grep -oE "finished $ITERS iterations: [0-9.]+ ms/iteration" "$TMP/ref.log" | grep -oE '[0-9.]+ ms' | cut -d' ' -f1)
[ -n "$MS_PER_ITER" ] || { show "$TMP/ref.log"; fail "the reference run did not report its ms/iteration"; }

# rank_pids MARK RANK: the process(es) of that rank among those with MARK (PMIX_RANK=RANK)
rank_pids() {
  local p
  for p in $(marked_pids "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=$2" && echo "$p"
  done
}

# segment NAME CK FROM HOW EXPECT_RC LAUNCHER...: one run of a chain; CK is the chain's
# checkpoint folder, FROM the iteration its tracker names (0: a fresh start). HOW is how the
# signal is sent once the log shows iteration FROM+3: launcher:SIG (to the launcher's pid),
# group:SIG (its process group), rank2:SIG (rank 2's process only), scancel:SIG (scancel
# --signal=SIG of the job named NAME), or none (run to the end). Sets STOP (the iteration the run
# ended after). Exits (fails) on the first broken check.
segment() {
  local name=$1 ck=$2 from=$3 how=$4 want_rc=$5; shift 5
  local mark="$TMP/$name" log="$TMP/$name.log" load=()
  [ "$from" -gt 0 ] && load=(--load "$ck")
  local launcher=("$@")
  [ "${launcher[0]}" = srun ] && launcher=(srun -J "$name" "${launcher[@]:1}")
  # group:SIG: setsid makes the launcher lead its own process group; a background job of this
  # non-interactive shell is no group leader, so setsid does not fork and $! is the launcher.
  # Otherwise the launcher stays in this test's group (test/run.sh's timeout reaches it).
  local pre=(); [ "${how%%:*}" = group ] && pre=(setsid)
  MT_E2E_MARK="$mark" "${pre[@]}" "${launcher[@]}" "${LAYOUT[@]}" --save "$ck" "${load[@]}" \
    --metrics "$TMP/$name.jsonl" >"$log" 2>&1 &
  local lp=$! sig="${how#*:}" at=$((from + 3)) t0 rc
  if [ "$how" != none ]; then
    local i
    for i in $(seq 1 1200); do # up to 60 s
      grep -qE "\] iteration +$at/" "$log" 2>/dev/null && break
      kill -0 $lp 2>/dev/null || break
      sleep 0.05
    done
    grep -qE "\] iteration +$at/" "$log" || { show "$log"; fail "$name: iteration $at never came"; }
    case "$how" in
      launcher:*) kill -"$sig" $lp ;;
      group:*) kill -"$sig" -- -$lp ;;
      rank2:*)
        local victim; victim=$(rank_pids "$mark" 2)
        [ "$(echo "$victim" | wc -w)" = 1 ] || { show "$log"; fail "$name: rank 2's process not found (got '$victim')"; }
        kill -"$sig" "$victim" ;;
      scancel:*) scancel --signal="$sig" --name="$name" || fail "$name: scancel --signal=$sig failed" ;;
    esac
  fi
  t0=$(now)
  for i in $(seq 1 1200); do kill -0 $lp 2>/dev/null || break; sleep 0.05; done
  if kill -0 $lp 2>/dev/null; then show "$log"; fail "$name: still running 60 s after the signal"; fi
  wait $lp; rc=$?
  local dt; dt=$(since "$t0")
  [ "$rc" = "$want_rc" ] || { show "$log"; fail "$name: the launcher exited $rc, expected $want_rc"; }
  if [ "$how" = none ]; then
    STOP=$ITERS
    grep -q "mtrain: finished $ITERS iterations" "$log" || { show "$log"; fail "$name: did not finish $ITERS iterations"; }
  else
    local text=$sig # as strsignal() names it
    case "$sig" in TERM) text=Terminated ;; USR1) text="User defined signal 1" ;; USR2) text="User defined signal 2" ;; esac
    STOP=$(grep -oE "mtrain: stopping after iteration [0-9]+: $text, checkpoint saved" "$log" | grep -oE '[0-9]+' | head -n 1)
    [ -n "$STOP" ] || { show "$log"; fail "$name: no 'stopping after iteration N: $text, checkpoint saved'"; }
    [ "$STOP" -ge "$at" ] && [ "$STOP" -lt $ITERS ] || fail "$name: stopped after iteration $STOP, not in $at..$((ITERS - 1))"
  fi
  [ "$(cat "$ck/latest_checkpointed_iteration.txt" 2>/dev/null)" = "$STOP" ] ||
    fail "$name: the tracker names '$(cat "$ck/latest_checkpointed_iteration.txt" 2>/dev/null)', not $STOP"
  "$MTRAIN" checkpoint inspect "$ck" >"$TMP/$name.inspect" 2>&1 || { show "$TMP/$name.inspect"; fail "$name: checkpoint inspect failed"; }
  grep -q "^  iteration $STOP of $ITERS," "$TMP/$name.inspect" && grep -q "^verified: 4 files," "$TMP/$name.inspect" ||
    { show "$TMP/$name.inspect"; fail "$name: the save is not iteration $STOP with 4 verified files"; }
  if [ "$from" -gt 0 ]; then
    grep -qE "loaded checkpoint .*iter_$(printf '%07d' "$from"): iteration $from," "$log" ||
      { show "$log"; fail "$name: did not report loading iteration $from"; }
  fi
  local want got
  want=$(steps "$TMP/ref.jsonl" "$from" "$STOP"); got=$(steps "$TMP/$name.jsonl" 0)
  [ "$(echo "$got" | grep -c .)" -eq $((STOP - from)) ] ||
    fail "$name: logged $(echo "$got" | grep -c .) iterations, not $((STOP - from)) ($((from + 1))..$STOP)"
  if [ "$want" != "$got" ]; then
    diff <(echo "$want") <(echo "$got") | head -n 6
    fail "$name: iterations $((from + 1))..$STOP differ from the uninterrupted run"
  fi
  # no process with this run's mark may be left 0.3 s after the checks above; polled, so that the
  # usual case (all gone already) does not wait the 0.3 s
  local left deadline=$(( ${EPOCHREALTIME/./} + 300000 ))
  while left=$(marked_pids "$mark"); [ -n "$left" ] && [ "${EPOCHREALTIME/./}" -lt "$deadline" ]; do sleep 0.02; done
  if [ -n "$left" ]; then
    ps -o pid,stat,args -p $left | cut -c1-200
    kill -KILL $left 2>/dev/null # this test's own processes (found by their marker), by pid
    fail "$name: processes left running"
  fi
  local what="$how after iteration $at -> stopped after $STOP, launcher exit $rc ${dt} s after the signal"
  [ "$how" = none ] && what="resumed at $from, ran to $ITERS, launcher exit $rc"
  echo "ok: $name: $what; iterations $((from + 1))..$STOP identical to the uninterrupted run"
  timing "$name: $what"
}

# chain NAME LAUNCHER_RC_FOR_HOW... : runs segments HOW1 HOW2 ... then `none`, each resuming the
# last; entries are HOW=RC; the launcher command follows "--"
chain() {
  local name=$1; shift
  local hows=() from=0 k=0 h h1
  while [ "$1" != -- ]; do hows+=("$1"); shift; done
  shift
  hows+=(none=0)
  for h in "${hows[@]}"; do
    k=$((k + 1))
    h1=${h%%=*}
    segment "$name-$k-${h1/:/-}" "$TMP/$name-ck" "$from" "${h%%=*}" "${h##*=}" "$@"
    from=$STOP
  done
}
# a chain runs in a subshell: its first failure ends it (fail of e2e_lib.sh exits), the others run on
run_chain() {
  local name=$1 t0; t0=$(now)
  ( chain "$@" ) || fails+=("$name")
  timing "chain $name: $(since "$t0") s"
}

# ---- srun on a one-machine Slurm ----
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: srun: the one-machine Slurm needs root: the srun cases did not run"; skips+=(srun)
elif ! command -v slurmctld >/dev/null || ! command -v srun >/dev/null || ! command -v scancel >/dev/null; then
  echo "SKIP: srun: Slurm not installed (Debian slurmctld slurmd slurm-client): the srun cases did not run"; skips+=(srun)
else
  exec 9>/tmp/mtrain-slurm.lock # other test runs that want Slurm take turns
  if ! flock -w 300 9; then
    echo "FAIL: another run held /tmp/mtrain-slurm.lock for 300 s"; fails+=(srun)
  else
    t0=$(now)
    slurm_up=1
    if "$REPO/scripts/slurm/start-local.sh" >"$TMP/slurm-start.log" 2>&1; then
      timing "Slurm start: $(since "$t0") s"
      export SLURM_CONF=/tmp/mtrain-slurm/slurm.conf
      run_chain srun scancel:TERM=0 launcher:USR1=0 -- srun --mpi=pmix -n 4 "$MTRAIN"
      unset SLURM_CONF
    else
      show "$TMP/slurm-start.log"; echo "FAIL: scripts/slurm/start-local.sh failed"; fails+=(srun)
    fi
    # stop it in the background while the next chains run; the lock (fd 9, shared with the
    # subshell) is let go when the stop is done; waited for at the end
    ( "$REPO/scripts/slurm/stop-local.sh" >/dev/null 2>&1; flock -u 9 ) &
    slurm_stop=$!
    slurm_up=""
    exec 9>&-
  fi
fi

# ---- mtrain launch ----
run_chain launch launcher:TERM=0 rank2:TERM=0 group:TERM=0 launcher:USR1=0 -- "$MTRAIN" launch -n 4 --

# ---- mpirun ----
if command -v mpirun >/dev/null; then
  root_flags=(); [ "$(id -u)" = 0 ] && root_flags=(--allow-run-as-root)
  # mpirun's own SIGTERM: the ranks get it odls_base_sigkill_timeout s later, save, and mpirun
  # exits 1 (its abort). That timeout is both the delay and the ranks' time to finish the
  # iteration and save: about 15 iterations of the first segment (1..3 s), so that the signal still lands
  # mid-run on a fast machine and the save has several iterations' time on a slow one. mpirun's
  # event loop sleeps through both timeouts, so a rank that waited in the PMIx finalize fence
  # would be SIGKILLed after its save: mtrain leaves without it under mpirun's SIGTERM. The ranks'
  # exit statuses are reported, not checked: once the first rank is gone mpirun's abort kills
  # what is left of the job, a rank's wrapper included (they come from a wrapper that survives
  # the signals mpirun sends to each rank's process group). The save itself is checked: every
  # rank's file of the same iteration.
  cat >"$TMP/rank_status.sh" <<'EOF'
#!/usr/bin/env bash
trap 'true' TERM USR1 USR2
"$@"; rc=$?
echo "$rc" >"$MT_RANK_STATUS.$OMPI_COMM_WORLD_RANK"
exit $rc
EOF
  chmod +x "$TMP/rank_status.sh"
  MPIRUN=(mpirun "${root_flags[@]}" --oversubscribe -n 4)
  t0=$(now)
  if ( export MT_RANK_STATUS="$TMP/mpirun-status"
       segment mpirun-1-launcher-USR1 "$TMP/mpirun-ck" 0 launcher:USR1 0 "${MPIRUN[@]}" "$MTRAIN"
       from=$STOP
       # the kill timeout from this chain's own speed, measured just now under mpirun (the median
       # of the first segment's iterations after its first): the reference ran minutes earlier,
       # and on a shared machine the load in between can change the speed several times over
       ms=$(grep -oE 'elapsed time per iteration \(ms\): [0-9.]+' "$TMP/mpirun-1-launcher-USR1.log" |
            awk '{print $NF}' | tail -n +2 | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}')
       [ -n "$ms" ] || ms=$MS_PER_ITER
       KILL_T=$(awk -v ms="$ms" 'BEGIN { t = int(15 * ms / 1000 + 0.5); if (t < 1) t = 1; if (t > 3) t = 3; print t }')
       [[ "$KILL_T" =~ ^[1-3]$ ]] || fail "odls_base_sigkill_timeout '$KILL_T' from $ms ms/iteration"
       segment mpirun-2-launcher-TERM "$TMP/mpirun-ck" "$from" launcher:TERM 1 "${MPIRUN[@]}" \
         --mca odls_base_sigkill_timeout "$KILL_T" "$TMP/rank_status.sh" "$MTRAIN"
       st=""; for r in 0 1 2 3; do st="$st $(cat "$MT_RANK_STATUS.$r" 2>/dev/null || echo killed)"; done
       echo "mpirun-2-launcher-TERM (odls_base_sigkill_timeout $KILL_T at $ms ms/iteration):" \
            "rank exit statuses:$st (mpirun itself 1: its abort path)"
       from=$STOP # SIGTERM to one rank: every rank saves, finalizes, and mpirun exits 0
       segment mpirun-3-rank2-TERM "$TMP/mpirun-ck" "$from" rank2:TERM 0 "${MPIRUN[@]}" "$MTRAIN"
       from=$STOP
       segment mpirun-4-none "$TMP/mpirun-ck" "$from" none 0 "${MPIRUN[@]}" "$MTRAIN"
     ); then :; else fails+=(mpirun); fi
  timing "chain mpirun: $(since "$t0") s"
else
  echo "SKIP: mpirun not installed (Debian openmpi-bin): the mpirun cases did not run"; skips+=(mpirun)
fi

if [ -n "$slurm_stop" ]; then
  t0=$(now)
  wait "$slurm_stop"
  slurm_stop=""
  timing "Slurm stop (in the background): waited $(since "$t0") s for it at the end"
fi

echo "timings:"
sed 's/^/  /' "$TMP/timings"
[ ${#fails[@]} -eq 0 ] || { echo "FAIL: checkpoint signals: failed: ${fails[*]}"; exit 1; }
[ ${#skips[@]} -eq 0 ] || { echo "checkpoint signals: all run cases passed; skipped: ${skips[*]}"; exit 77; }
echo "checkpoint signals: ok"
