# Megatron's rerun state machine (train/rerun.h; --rerun-mode validate_results with
# --error-injection-rate / --error-injection-type) on 2 ranks (pp 2: the first stage validates only
# its gradient norm, the last its loss too, and both follow one verdict), against an uninjected run
# of the same layout:
# - transient_error on the non-fatal spiky-loss check (rate 1: every loss rank, every iteration but
#   the first, which Megatron never validates): each such iteration is rerun in place, found
#   "not reproducible", and training goes on: every iteration's loss and grad norm are the
#   uninjected run's (same strings: mtrain's reruns are bit for bit);
# - persistent_error (rate 4: 1 in 4 calls of a rank; the first iteration N with an injection, read
#   from the log, is 2 or 3 for the seed): iteration N is rerun, reproduced, the state before it
#   saved as iteration N-1 and every rank exits 16; resumed on the same node the
#   job exits 16 again ("rescheduled on the same GPU"); resumed on another node (MT_RERUN_NODE_NAME)
#   iteration N is run a third time: "Possible persistent error!!", exit 17; the same save resumed
#   with --rerun-mode disabled ignores the pending rerun and trains on with the uninjected run's
#   losses (the save is the state before iteration N, exactly);
# - on 1 rank: transient_error on the fatal NaN check (Megatron's default checks) exits 17 at once
#   with nothing saved; correct_result exits 16, and its resume elsewhere finds the result correct
#   ("Correct result (but possible Application error)"), exit 17; the tracker file gets Megatron's
#   lines (status initial_run, first_rerun_reproducible, second_rerun_reproducible); report_stats
#   reruns every iteration and finds every validated value identical.
source test/e2e_lib.sh
need_data
private_mtrain
no_outer_launcher
BASE=(--config configs/gpt-tiny.yaml --train-iters 3 --micro-batch-size 1 --global-batch-size 4 --set logging.interval=1
      --set logging.eval_interval=0 --set logging.eval_iters=0)
PAR=(--pipeline-model-parallel-size 2)
INJ=(--rerun-mode validate_results --error-injection-rate)
steps() { grep -o '"iteration":[0-9]*,"consumed_samples":[0-9]*,"lm_loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1"; }
run() { # run NAME EXPECTED_RC ARGS...: mtrain launch -n 2 (or 1 with NAME *1), log in $TMP/NAME.log
  local name=$1 want=$2 n=2 rc=0; shift 2
  case "$name" in *1) n=1 ;; esac
  "$MTRAIN" launch -n $n -- "${BASE[@]}" "$@" >"$TMP/$name.log" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || { tail -n 25 "$TMP/$name.log"; fail "$name: exit $rc, expected $want"; }
}
has() { grep -qF -- "$2" "$TMP/$1.log" || { tail -n 25 "$TMP/$1.log"; fail "$1: no line with: $2"; }; }
hasnt() { ! grep -qF -- "$2" "$TMP/$1.log" || fail "$1: unexpected line: $(grep -F -- "$2" "$TMP/$1.log" | head -n 1)"; }

run base 0 "${PAR[@]}" --metrics "$TMP/base.jsonl"
[ "$(steps "$TMP/base.jsonl" | wc -l)" -eq 3 ] || fail "the uninjected run logged $(steps "$TMP/base.jsonl" | wc -l) of 3 iterations"

# transient fault on a non-fatal check: reruns, the same numbers
run transient 0 "${PAR[@]}" --metrics "$TMP/transient.jsonl" "${INJ[@]}" 1 --error-injection-type transient_error \
  --no-check-for-nan-in-loss-and-grad --check-for-spiky-loss
for it in 2 3; do has transient "iteration #$it: Possible transient error!!"; done
hasnt transient "iteration #1:"
has transient "WARNING:megatron.core.rerun_state_machine:Injecting error type Transient error"
has transient "Continuing normal execution because failed validation was not fatal"
[ "$(grep -c "Need to rerun step to check reproducibility" "$TMP/transient.log")" -eq 2 ] || fail "transient: not 2 reruns"
[ "$(steps "$TMP/transient.jsonl")" = "$(steps "$TMP/base.jsonl")" ] ||
  { diff <(steps "$TMP/base.jsonl") <(steps "$TMP/transient.jsonl"); fail "transient: losses differ from the uninjected run"; }

# persistent fault: save + 16, resume on the same node: 16, elsewhere: 17
run persistent 16 "${PAR[@]}" --save "$TMP/ck" "${INJ[@]}" 4 --error-injection-type persistent_error
N=$(grep -o "Unexpected result [^ ]* on rank [0-9]* at iteration #[0-9]*" "$TMP/persistent.log" | head -n 1 | grep -o "[0-9]*$")
[ "$N" = 2 ] || [ "$N" = 3 ] || fail "persistent: no rejected result at iteration 2 or 3 (got '$N')"
has persistent "First rerun: unexpected result is reproducible within the tolerance"
has persistent "Saving a checkpoint and exiting now. Please resume the job from the checkpoint to rerun the last iteration and establish a diagnostic"
has persistent "saved checkpoint at iteration $((N - 1)) "
has persistent "mtrain: stopping at iteration $N: result validation (rerun state machine), checkpoint of the state before it saved, exit code 16"
grep -E "iteration #$N: First rerun" "$TMP/persistent.log" | grep -qE "^\[r[01] tp0 pp[01] dp0\] ERROR:megatron.core.rerun_state_machine:Rank [01], node [^,]+, device [0-9]+," ||
  fail "persistent: the first-rerun error does not name its rank, node and device"
[ "$(cat "$TMP/ck/latest_checkpointed_iteration.txt")" = $((N - 1)) ] || fail "persistent: the save is not iteration $((N - 1))"
grep -q "\"rerun_state_machine\": \"state=will_rerun_from_checkpoint iteration=$N world=2" "$TMP/ck/iter_000000$((N - 1))/manifest.json" ||
  fail "persistent: the save's manifest holds no pending rerun of iteration $N"
run again 16 "${PAR[@]}" --load "$TMP/ck" "${INJ[@]}" 4 --error-injection-type persistent_error
has again "Getting RerunStateMachine state from checkpoint. Will rerun step."
has again "Got rescheduled on the same GPU. Need to resume again from the same checkpoint"
has again "Exiting now. Please resume the job from the same checkpoint to rerun the last iteration and establish a diagnostic"
MT_RERUN_NODE_NAME=elsewhere run elsewhere 17 "${PAR[@]}" --load "$TMP/ck" "${INJ[@]}" 4 --error-injection-type persistent_error
has elsewhere "Second rerun: unexpected result is not reproducible on a different GPU, therefore was likely incorrect"
grep -qE "ERROR:megatron\.core\.rerun_state_machine:Rank [0-9]+, node elsewhere, device [0-9]+, iteration #$N: Possible persistent error!!" \
  "$TMP/elsewhere.log" || fail "elsewhere: no 'Possible persistent error!!' naming the node and iteration $N"
has elsewhere "Exiting now. A checkpoint at the last iteration already exists if further examination is needed"
run ignored 0 "${PAR[@]}" --load "$TMP/ck" --rerun-mode disabled --metrics "$TMP/ignored.jsonl"
has ignored "RerunStateMachine disabled via CLI, ignoring machine state saved in checkpoint"
[ "$(steps "$TMP/ignored.jsonl")" = "$(steps "$TMP/base.jsonl" | tail -n $((4 - N)))" ] ||
  { diff <(steps "$TMP/base.jsonl" | tail -n $((4 - N))) <(steps "$TMP/ignored.jsonl"); fail "the rerun save resumed: losses differ"; }

# one rank: a transient fault on a fatal check; a correct result
run fatal1 17 --train-iters 2 --save "$TMP/ck1" "${INJ[@]}" 1
has fatal1 "iteration #2: Possible transient error!!"
has fatal1 "Exiting now. The job can be resumed from a previous checkpoint"
[ ! -e "$TMP/ck1/iter_0000001" ] || fail "fatal1: a transient fault saved a checkpoint"
TR="$TMP/tracker.txt"
run correct1 16 --train-iters 2 --save "$TMP/ck2" "${INJ[@]}" 1 --error-injection-type correct_result --result-rejected-tracker-filename "$TR"
has correct1 "Injecting error type Expected result"
MT_RERUN_NODE_NAME=elsewhere run resumed1 17 --train-iters 2 --load "$TMP/ck2" "${INJ[@]}" 1 --error-injection-type correct_result \
  --result-rejected-tracker-filename "$TR"
has resumed1 "Second rerun: unexpected result is reproducible on a different GPU, therefore it was likely correct"
has resumed1 "iteration #2: Correct result (but possible Application error) (found NaN in local forward loss calculation)!"
for s in initial_run first_rerun_reproducible second_rerun_reproducible; do
  grep -qE "^ts=.+ node=.+ device=[0-9]+ jobID=.+ rank=0 iteration=2 status=$s result=.+ message='found NaN in local forward loss calculation'$" "$TR" ||
    { cat "$TR"; fail "tracker: no $s line for iteration 2"; }
done
# report_stats: every iteration rerun once, the differences reported every other iteration: none
run stats1 0 --train-iters 3 --rerun-mode report_stats
has stats1 "INFO:megatron.core.rerun_state_machine:Stats on computation determinism in validation calls"
has stats1 "  From validation call 'found NaN in local forward loss calculation':"
[ "$(grep -c " samples, all identical$" "$TMP/stats1.log")" -eq 8 ] || fail "stats1: not 2 reports x 4 calls found identical"
hasnt stats1 "rel. variability"
echo "rerun state machine: transient reruns keep the losses, persistent saves + 16 then 17 elsewhere, correct result 16 then 17"
