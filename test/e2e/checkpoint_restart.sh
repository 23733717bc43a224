# Acceptance (checkpoints, 6): `mtrain launch --max-restarts 2` with a rank killed mid-run: the
# launcher restarts the job, the new attempt resumes from the latest save in checkpoint.dir (the
# ranks see MT_RESTART_COUNT = 1, and checkpoint.load is empty), the job finishes with exit 0, and
# its final loss — every iteration after the resume, in fact — equals the uninterrupted run's
# (same strings: the same bits, since the resume is exact on the same layout). A restarted attempt
# without checkpoint.dir says that it starts again from iteration 0. A requeued Slurm job
# (SLURM_RESTART_COUNT >= 1) resumes from checkpoint.dir the same way.
# 20 iterations (it was 30): the kill comes after iteration 7, the resume is from the save of
# iteration 5 (or 10), and every resumed iteration is compared, so 10+ of them already show any
# difference; more only repeat the comparison. The 1-iteration runs of the restart note and the
# Slurm requeue runs use 32-token sequences, 2 per batch: what they check (a note, which save is
# loaded) does not depend on the batch. No run evaluates the test set at its end
# (logging.eval_iters=0): nothing here reads it.
source test/e2e_lib.sh
need_data
ITERS=20
ARGS=(--config configs/gpt-tiny.yaml --train-iters $ITERS --micro-batch-size 1 --tensor-model-parallel-size 2
      --set logging.interval=1 --set logging.eval_interval=0 --set logging.eval_iters=0)
steps() { grep -o '"iteration":[0-9]*,"consumed_samples":[0-9]*,"lm_loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1"; }
"$MTRAIN" launch -n 4 -- "${ARGS[@]}" --metrics "$TMP/straight.jsonl" >"$TMP/straight.log" 2>&1 \
  || { tail -n 20 "$TMP/straight.log"; fail "uninterrupted run failed"; }
mark="$TMP/restart"
MT_E2E_MARK="$mark" "$MTRAIN" launch -n 4 --max-restarts 2 -- "${ARGS[@]}" --save "$TMP/ck" --save-interval 5 \
  --metrics "$TMP/restart.jsonl" >"$TMP/restart.log" 2>&1 &
launcher=$!
# kill rank 2 once the first save exists and training went on past it
for _ in $(seq 1 600); do
  [ -f "$TMP/ck/latest_checkpointed_iteration.txt" ] && grep -q "iteration        7/" "$TMP/restart.log" && break
  sleep 0.05
done
grep -q "iteration        7/" "$TMP/restart.log" || { cat "$TMP/restart.log"; fail "the run did not reach iteration 7"; }
victim=""
for p in $(marked_pids "$mark"); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=2" && tr '\0' '\n' <"/proc/$p/environ" |
    grep -qx "MT_RESTART_COUNT=0" && { victim=$p; break; }
done
[ -n "$victim" ] || fail "could not find rank 2 of the first attempt"
killed_after=$(grep -c '"iteration"' "$TMP/restart.jsonl" || true)
kill -KILL "$victim"
rc=0
for _ in $(seq 1 1200); do kill -0 $launcher 2>/dev/null || break; sleep 0.1; done
kill -0 $launcher 2>/dev/null && { cat "$TMP/restart.log"; fail "the restarted job did not finish within 120 s"; }
wait $launcher || rc=$?
[ $rc -eq 0 ] || { tail -n 30 "$TMP/restart.log"; fail "the job exited $rc after the restart"; }
grep -q "mtrain launch: rank 2 was killed by signal 9 (Killed); restarting all 4 ranks (restart 1 of 2)" "$TMP/restart.log" \
  || { cat "$TMP/restart.log"; fail "no restart line naming rank 2 and signal 9"; }
grep -q "loaded checkpoint .*iter_00000" "$TMP/restart.log" || { cat "$TMP/restart.log"; fail "the restarted attempt did not load a save"; }
resumed=$(grep -o "loaded checkpoint [^:]*: iteration [0-9]*" "$TMP/restart.log" | grep -o "[0-9]*$")
echo "rank 2 killed after $killed_after logged iterations; the restarted attempt resumed at iteration $resumed"
[ -n "$resumed" ] && [ "$resumed" -ge 5 ] || fail "resumed at '$resumed', expected a save of iteration 5 or later"
want=$(steps "$TMP/straight.jsonl" | awk -F'[:,]' -v from="$resumed" '$2 > from')
got=$(steps "$TMP/restart.jsonl")
[ "$(echo "$got" | wc -l)" -eq $((ITERS - resumed)) ] || fail "the restarted attempt logged $(echo "$got" | wc -l) iterations, expected $((ITERS - resumed))"
[ "$want" = "$got" ] || { diff <(echo "$want") <(echo "$got") | head; fail "the restarted job's iterations differ from the uninterrupted run's"; }
final_s=$(grep "final lm loss" "$TMP/straight.log" | grep -o "final lm loss [0-9.]*")
final_r=$(grep "final lm loss" "$TMP/restart.log" | grep -o "final lm loss [0-9.]*")
echo "uninterrupted: $final_s; with a restart: $final_r"
[ -n "$final_s" ] && [ "$final_s" = "$final_r" ] || fail "final losses differ"
[ -z "$(marked_pids "$mark")" ] || fail "ranks left running"
echo "restart from checkpoint: ok"

# a restarted attempt (MT_RESTART_COUNT >= 1, as the launcher sets it) with no checkpoint.dir says
# that it starts again from iteration 0; with --save, or on the first attempt, it says nothing
one=(--config configs/gpt-tiny.yaml --train-iters 1 --micro-batch-size 1 --global-batch-size 2 --seq-length 32
     --set logging.eval_interval=0 --set logging.eval_iters=0)
MT_RESTART_COUNT=1 "$MTRAIN" "${one[@]}" >"$TMP/r1.out" 2>"$TMP/r1.err" || { cat "$TMP/r1.err"; fail "restart 1 without --save failed"; }
grep -q "note: restart 1 of this job (MT_RESTART_COUNT) without checkpoint.dir (--save): training starts again from iteration 0" "$TMP/r1.err" ||
  { cat "$TMP/r1.err"; fail "a restart without --save does not say it starts from iteration 0"; }
MT_RESTART_COUNT=1 "$MTRAIN" "${one[@]}" --save "$TMP/ck1" >"$TMP/r2.out" 2>"$TMP/r2.err" || { cat "$TMP/r2.err"; fail "restart 1 with --save failed"; }
MT_RESTART_COUNT=0 "$MTRAIN" "${one[@]}" >"$TMP/r3.out" 2>"$TMP/r3.err" || { cat "$TMP/r3.err"; fail "attempt 0 failed"; }
! grep -q "note: restart" "$TMP/r2.err" "$TMP/r3.err" || fail "the restart note appears with --save or on the first attempt"
echo "restart note without --save: ok"

# a requeued Slurm job (sbatch --requeue: Slurm sets SLURM_RESTART_COUNT >= 1 in the job's
# environment) with --save resumes from the latest save in it, as a launcher restart does
"$MTRAIN" "${one[@]}" --train-iters 4 --save "$TMP/sl" --save-interval 2 >"$TMP/sl1.log" 2>&1 ||
  { cat "$TMP/sl1.log"; fail "the first Slurm attempt failed"; }
SLURM_RESTART_COUNT=1 "$MTRAIN" "${one[@]}" --train-iters 6 --save "$TMP/sl" --save-interval 2 >"$TMP/sl2.log" 2>&1 ||
  { cat "$TMP/sl2.log"; fail "the requeued attempt failed"; }
grep -q "loaded checkpoint .*iter_0000004.*: iteration 4" "$TMP/sl2.log" ||
  { cat "$TMP/sl2.log"; fail "a requeued Slurm job (SLURM_RESTART_COUNT=1) did not resume from the save of iteration 4"; }
SLURM_RESTART_COUNT=1 "$MTRAIN" "${one[@]}" >"$TMP/sl3.out" 2>"$TMP/sl3.err" || { cat "$TMP/sl3.err"; fail "requeue without --save failed"; }
grep -q "note: restart 1 of this job (SLURM_RESTART_COUNT) without checkpoint.dir" "$TMP/sl3.err" ||
  { cat "$TMP/sl3.err"; fail "a requeued job without --save does not say it starts from iteration 0"; }
echo "requeued Slurm job (SLURM_RESTART_COUNT): resumes from the latest save: ok"
