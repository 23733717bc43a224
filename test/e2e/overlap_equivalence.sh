# Acceptance (overlapped gradient reduction): --overlap-grad-reduce (and
# --overlap-param-gather with the distributed optimizer) reduce the same sums in the same order as
# the reduction after backward, bucket by bucket on a communication thread, so every iteration's
# lm_loss and grad_norm are BIT-identical (tolerance 0: the metrics print them with %.9g, exact
# for the fp32 sums they come from) to the run without overlap, over 10 iterations:
#   dp=2 allreduce; dp=2 distributed optimizer with the parameter gather overlapped too;
#   pp=2 x dp=2 (1F1B: a stage's gradients are final after its last micro-batch's backward) with
#   the distributed optimizer and both overlaps; tp=2 x dp=2 with sequence parallelism (the
#   tp-partial norm weights go to the tail bucket, reduced after the tp pre-reduction); cp=2 x
#   dp=2 with the distributed optimizer (the reduce-scatter over dp x cp).
# The bucket size is small (20000 elements) so the 0.8M-parameter model has ~13 buckets per stage.
# Also: --overlap-param-gather without the distributed optimizer is refused naming the key, and a
# rank killed (kill -9) during an overlapped run ends the job non-zero with every survivor naming it.
source test/e2e_lib.sh
need_data
BASE=(--config configs/gpt-tiny.yaml --data-path "$DATA" --train-iters 10 --micro-batch-size 1 --global-batch-size 8
      --seq-length 64 --set logging.interval=5 --set logging.eval_interval=0)
OV=(--overlap-grad-reduce --ddp-bucket-size 20000)
run() { # run NAME RANKS ARGS...
  local name=$1 n=$2; shift 2
  "$MTRAIN" launch -n "$n" -- "${BASE[@]}" --metrics "$TMP/$name.jsonl" "$@" >"$TMP/$name.log" 2>&1 \
    || { tail -n 30 "$TMP/$name.log"; fail "run $name failed"; }
}
bits() { grep -o '"lm_loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$TMP/$1.jsonl"; }
same() { # same REF NEW: identical loss and grad-norm text on all 10 iterations, and NEW overlapped
  local n; n=$(bits "$1" | wc -l)
  [ "$n" -eq 10 ] || fail "$1: expected 10 iterations in the metrics, got $n"
  diff <(bits "$1") <(bits "$2") >"$TMP/$2.diff" || { cat "$TMP/$2.diff"; fail "$2 differs from $1"; }
  grep -q "overlapped gradient .* in [0-9]* buckets" "$TMP/$2.log" || { cat "$TMP/$2.log"; fail "$2: no overlap line"; }
  local nb; nb=$(sed -n 's/.*overlapped gradient .* in \([0-9]*\) buckets.*/\1/p' "$TMP/$2.log" | head -1)
  [ "$nb" -gt 2 ] || fail "$2: only $nb buckets (the test needs several)"
  echo "$2: 10 iterations bit-identical to $1 ($nb buckets): $(grep -o 'overlapped gradient reduction.*hidden)' "$TMP/$2.log" | head -1)"
}
run dp2 2
run dp2-ov 2 "${OV[@]}"
same dp2 dp2-ov
run dp2-dist 2 --use-distributed-optimizer
run dp2-dist-ov 2 --use-distributed-optimizer "${OV[@]}" --overlap-param-gather
same dp2-dist dp2-dist-ov
grep -q "parameter allgather overlapped" "$TMP/dp2-dist-ov.log" || fail "dp2-dist-ov: parameter gather not overlapped"
run pp2dp2 4 --pipeline-model-parallel-size 2 --use-distributed-optimizer
run pp2dp2-ov 4 --pipeline-model-parallel-size 2 --use-distributed-optimizer "${OV[@]}" --overlap-param-gather
same pp2dp2 pp2dp2-ov
run tp2dp2 4 --tensor-model-parallel-size 2 --sequence-parallel
run tp2dp2-ov 4 --tensor-model-parallel-size 2 --sequence-parallel "${OV[@]}"
same tp2dp2 tp2dp2-ov
grep -q "(1 after the pre-reductions" "$TMP/tp2dp2-ov.log" || fail "tp2dp2-ov: the tp-partial norms are not in a tail bucket"
# cp=2 x dp=2: the dense gradients are reduced over dp x cp (4 ranks) bucket by bucket
run cp2dp2 4 --context-parallel-size 2 --use-distributed-optimizer
run cp2dp2-ov 4 --context-parallel-size 2 --use-distributed-optimizer "${OV[@]}" --overlap-param-gather
same cp2dp2 cp2dp2-ov

# refused: the parameter gather belongs to the distributed optimizer
if "$MTRAIN" "${BASE[@]}" --overlap-grad-reduce --overlap-param-gather >"$TMP/refused.log" 2>&1; then
  fail "--overlap-param-gather without --use-distributed-optimizer was accepted"
fi
grep -q "parallel.overlap_param_gather.*distributed_optimizer" "$TMP/refused.log" || { cat "$TMP/refused.log"; fail "no message naming the key"; }
echo "refused: $(grep -m1 overlap_param_gather "$TMP/refused.log" | cut -c1-160)"

# a dead peer during overlapped reductions: a clear error naming it, no hang, nothing left behind
shm_before=$(shm_segments)
ARGS=(--config configs/gpt-tiny.yaml --data-path "$DATA" --train-iters 100000 --micro-batch-size 1 --global-batch-size 8
      --seq-length 64 --set logging.interval=1 --set logging.eval_interval=0 --use-distributed-optimizer "${OV[@]}"
      --overlap-param-gather)
run_case overlap-kill9 KILL 300 "rank 2 .*died"
shm_after=$(shm_segments)
[ "$shm_after" -le "$shm_before" ] || { ls -la /dev/shm; fail "segments left in /dev/shm"; }
echo "no segments left in /dev/shm"
