# Batch-size ramp-up (Megatron's --rampup-batch-size START INC SAMPLES):
#  1. the global batch of each iteration (the consumed-samples steps of the metrics file) is the one
#     Megatron's RampupBatchsizeNumMicroBatches gives, computed here from its rule: n = (G - START) /
#     INC increments, one every SAMPLES / n samples, G once more than SAMPLES are consumed;
#  2. the learning rate follows Megatron's sample-based schedule: warmup over warmup_iters * G
#     samples (lr = peak * samples / (warmup * G));
#  3. dp 2 and pp 2 (the pipeline's table rebuilt at each batch change) reproduce the serial run's
#     losses: the same tolerance as dp_equivalence (1e-4 relative: reduction order over ~20 AdamW steps);
#  4. --train-samples with ramp-up counts iterations as Megatron's update_train_iters does;
#  5. a ramp-up that does not divide is refused naming the key;
#  6. the step schedule (Megatron's --step-batch-size-schedule, thresholds in tokens with K/M/B/T
#     suffixes, divided by seq_length into samples): the consumed samples of each iteration are those of
#     the schedule, walked here from its text; the learning rate is sample-based over
#     global_batch = micro_batch * dp (Megatron's default --global-batch-size with a schedule); a
#     checkpoint is saved before each step up (Megatron's train loop saves when the micro-batch count
#     changes) and a resume from it is the straight run, bit for bit; pp 2 reproduces the serial run
#     (1e-4 relative, as above); --train-samples counts iterations as update_train_iters' loop does;
#     an entry not a multiple of micro_batch * dp and --global-batch-size with a schedule are refused;
#  7. --eval-global-batch-size: evaluation iteration e reads samples [e EG, (e+1) EG) of the split, so
#     2 iterations of 4 at a training batch of 2 give the validation loss of a run whose global batch
#     is 4 (weights unchanged at lr 0: the same samples, the same token mean; bit for
#     bit serially, 1e-6 relative under dp 2, whose sum adds two ranks' partial sums, and pp 2), and
#     not the one of 2 iterations of 2 (what the flag changes); a value not a multiple of
#     micro_batch * dp is refused naming training.eval_global_batch.
source test/e2e_lib.sh
need_data
START=2 INC=2 SAMPLES=40 G=8 ITERS=16 WARM=30
BASE=(--config configs/gpt-tiny.yaml --train-iters $ITERS --micro-batch-size 1 --global-batch-size $G
      --rampup-batch-size $START $INC $SAMPLES --lr-warmup-iters $WARM --lr 1e-3 --set logging.interval=1
      --set logging.eval_interval=0)
serial serial
# 1. the batch sizes, from the consumed samples
awk -v s0=$START -v inc=$INC -v ns=$SAMPLES -v g=$G -v iters=$ITERS 'BEGIN {
  n = (g - s0) / inc; per = ns / n; c = 0
  for (i = 1; i <= iters; i++) {
    if (c > ns) b = g; else { b = s0 + int(c / per) * inc; if (b > g) b = g }
    c += b; print c
  } }' >"$TMP/want_consumed"
json_field "$TMP/serial.jsonl" consumed_samples >"$TMP/got_consumed"
diff "$TMP/want_consumed" "$TMP/got_consumed" >/dev/null || { paste "$TMP/want_consumed" "$TMP/got_consumed"; fail "consumed samples differ from Megatron's ramp-up rule"; }
echo "batch sizes: $(awk 'NR==1{p=0} {printf "%d ", $1-p; p=$1}' "$TMP/got_consumed")(Megatron's rule)"
grep -q "global batch size:     2 " "$TMP/serial.log" && grep -q "global batch size:     6 " "$TMP/serial.log" \
  || fail "the iteration line does not show the ramp-up batch sizes"
# 2. warmup by samples: lr = 1e-3 * consumed / (WARM * G)
paste <(json_field "$TMP/serial.jsonl" consumed_samples) <(json_field "$TMP/serial.jsonl" lr) | awk -v w=$WARM -v g=$G '
  { want = 1e-3 * $1 / (w * g); d = $2 - want; if (d < 0) d = -d; if (d > 1e-6 * want + 1e-12) { print; bad = 1 } }
  END { exit bad }' || fail "the learning rate does not follow the sample-based warmup"
# 3. layouts
for layout in "dp2:-n 2" "pp2:-n 2 --pipeline-model-parallel-size 2"; do
  name=${layout%%:*}; read -r -a extra <<<"${layout#*:}"
  n=${extra[1]}; flags=("${extra[@]:2}")
  "$MTRAIN" launch -n $n -- "${BASE[@]}" "${flags[@]}" --metrics "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 \
    || { tail -n 20 "$TMP/$name.log"; fail "$name run failed"; }
  compare "$TMP/serial.jsonl" "$TMP/$name.jsonl" "$name" $ITERS 1e-4 1e-3
done
# 4. --train-samples 60 with this ramp-up: the iteration count of Megatron's update_train_iters (its
#    loop, written again here: ramp-up iterations while consumed <= SAMPLES, then the rest at G)
want=$(awk -v s0=$START -v inc=$INC -v ns=$SAMPLES -v g=$G -v total=60 'BEGIN {
  n = (g - s0) / inc; per = ns / n; c = 0; it = 0
  while (c <= ns && c <= total) { if (c > ns) b = g; else { b = s0 + int(c / per) * inc; if (b > g) b = g }; c += b; it++ }
  print it + int((total - c) / g) }')
got=$("$MTRAIN" check --config configs/gpt-tiny.yaml --micro-batch-size 2 --global-batch-size $G \
  --rampup-batch-size $START $INC $SAMPLES --train-samples 60 2>/dev/null | awk '/^training:/{t=1} t && /^  iters:/{print $2; exit}')
[ "$got" = "$want" ] || fail "--train-samples 60 with ramp-up: $got iterations, Megatron's count is $want"
echo "--train-samples 60 with ramp-up: $got iterations (Megatron's update_train_iters)"
# 5. refused
rc=0; "$MTRAIN" check --config configs/gpt-tiny.yaml --micro-batch-size 2 --global-batch-size 8 \
  --rampup-batch-size 3 2 40 >"$TMP/bad.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "training.rampup_start" "$TMP/bad.log" || { cat "$TMP/bad.log"; fail "a ramp-up that does not divide was not refused"; }
# 6. the step schedule: 2 sequences from 0 tokens, 4 from 1280 (10 samples at T 128), 8 from 3.84K (30)
SCHED='0:2 1280:4 3.84K:8' ITERS=12 T=128
BASE=(--config configs/gpt-tiny.yaml --train-iters $ITERS --micro-batch-size 1 --step-batch-size-schedule "$SCHED"
      --lr-warmup-iters $WARM --lr 1e-3 --set logging.interval=1 --set logging.eval_interval=0)
walk() { # walk TOTAL_SAMPLES MAX_ITERS: the consumed samples after each iteration (Megatron's loop)
  awk -v sched="$SCHED" -v T=$T -v total="$1" -v iters="$2" 'BEGIN {
    n = split(sched, e, " ")
    for (i = 1; i <= n; i++) { split(e[i], p, ":"); m = 1; x = p[1]
      if (x ~ /[Kk]$/) { m = 1e3; x = substr(x, 1, length(x) - 1) }
      if (x ~ /[Mm]$/) { m = 1e6; x = substr(x, 1, length(x) - 1) }
      if (x ~ /[Bb]$/) { m = 1e9; x = substr(x, 1, length(x) - 1) }
      at[i] = int(int(x * m) / T); bs[i] = p[2] }
    c = 0; for (it = 0; it < iters && c < total; it++) { b = bs[1]; for (i = 1; i <= n; i++) if (c >= at[i]) b = bs[i]; c += b; print c } }'
}
serial sched --save "$TMP/ck" --save-interval 1000
walk 1e18 $ITERS >"$TMP/want_sched"
json_field "$TMP/sched.jsonl" consumed_samples >"$TMP/got_sched"
diff "$TMP/want_sched" "$TMP/got_sched" >/dev/null || { paste "$TMP/want_sched" "$TMP/got_sched"; fail "consumed samples differ from the step schedule"; }
echo "step schedule '$SCHED': batch sizes $(awk '{printf "%d ", $1-p; p=$1}' "$TMP/got_sched")"
grep -q "global batch size:     4 " "$TMP/sched.log" && grep -q "global batch size:     8 " "$TMP/sched.log" \
  || fail "the iteration line does not show the schedule's batch sizes"
paste "$TMP/got_sched" <(json_field "$TMP/sched.jsonl" lr) | awk -v w=$WARM '$1 <= w {
  want = 1e-3 * $1 / w; d = $2 - want; if (d < 0) d = -d; if (d > 1e-6 * want + 1e-12) { print; bad = 1 } }
  END { exit bad }' || fail "the learning rate does not follow the sample-based warmup over micro_batch * dp"
[ -d "$TMP/ck/iter_0000005" ] && [ -d "$TMP/ck/iter_0000010" ] || { ls "$TMP/ck"; fail "no save before the steps up (iterations 5 and 10)"; }
serial resumed --load "$TMP/ck" --ckpt-step 5
paste <(json_field "$TMP/sched.jsonl" lm_loss | tail -n 7) <(json_field "$TMP/resumed.jsonl" lm_loss) \
  <(json_field "$TMP/sched.jsonl" consumed_samples | tail -n 7) <(json_field "$TMP/resumed.jsonl" consumed_samples) \
  | awk '$1 != $2 || $3 != $4 { bad = 1 } END { exit bad || NR != 7 }' \
  || fail "the run resumed at iteration 5 (10 samples) is not the straight run across the step"
echo "resumed at iteration 5 across the step to 4: iterations 6-12 equal the straight run bit for bit"
launched sched_pp2 2 --pipeline-model-parallel-size 2
compare "$TMP/sched.jsonl" "$TMP/sched_pp2.jsonl" sched_pp2 $ITERS 1e-4 1e-3
want=$(walk 100 1e18 | wc -l)
got=$("$MTRAIN" check --config configs/gpt-tiny.yaml --micro-batch-size 1 --step-batch-size-schedule "$SCHED" \
  --train-samples 100 2>/dev/null | awk '/^training:/{t=1} t && /^  iters:/{print $2; exit}')
[ "$got" = "$want" ] || fail "--train-samples 100 with the schedule: $got iterations, Megatron's count is $want"
rc=0; "$MTRAIN" check --config configs/gpt-tiny.yaml --micro-batch-size 2 --step-batch-size-schedule '0:2 1280:5' \
  --train-iters 20 >"$TMP/bad.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "training.batch_schedule.*5 .*micro_batch \* dp" "$TMP/bad.log" || { cat "$TMP/bad.log"; fail "a schedule entry of 5 at micro_batch 2 was not refused"; }
rc=0; "$MTRAIN" check --config configs/gpt-tiny.yaml --global-batch-size 8 --step-batch-size-schedule '0:8' \
  >"$TMP/bad.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "training.global_batch" "$TMP/bad.log" || { cat "$TMP/bad.log"; fail "--global-batch-size with a schedule was not refused"; }
# 7. the evaluation batch
BASE=(--config configs/gpt-tiny.yaml --train-iters 1 --micro-batch-size 1 --lr 0 --min-lr 0
      --set logging.eval_interval=1 --set data.split=969,30,0)
serial eval_g4 --global-batch-size 4 --set logging.eval_iters=2
serial eval_e4 --global-batch-size 2 --eval-global-batch-size 4 --set logging.eval_iters=2
serial eval_g2 --global-batch-size 2 --set logging.eval_iters=2
launched eval_dp2 2 --global-batch-size 2 --eval-global-batch-size 4 --set logging.eval_iters=2
launched eval_pp2 2 --global-batch-size 2 --eval-global-batch-size 4 --set logging.eval_iters=2 --pipeline-model-parallel-size 2
ref=$(json_field "$TMP/eval_g4.jsonl" val_loss)
for run in eval_e4:0 eval_dp2:1e-6 eval_pp2:1e-6; do
  v=$(json_field "$TMP/${run%%:*}.jsonl" val_loss)
  awk -v a="$ref" -v b="$v" -v tol="${run#*:}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= tol * a) }' \
    || fail "${run%%:*}: validation loss $v, not the global-batch-4 run's $ref (relative tolerance ${run#*:})"
done
[ "$(json_field "$TMP/eval_g2.jsonl" val_loss)" != "$ref" ] || fail "2 iterations of 2 give the loss of 2 of 4: the check cannot tell"
echo "eval-global-batch-size 4 (serial, dp 2, pp 2): validation loss $ref, the global-batch-4 run's;" \
  "2 x 2 samples give $(json_field "$TMP/eval_g2.jsonl" val_loss)"
rc=0; "$MTRAIN" check --config configs/gpt-tiny.yaml --micro-batch-size 2 --eval-global-batch-size 3 \
  >"$TMP/bad.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "training.eval_global_batch: 3 is not a multiple of micro_batch\*dp" "$TMP/bad.log" \
  || { cat "$TMP/bad.log"; fail "an evaluation batch of 3 at micro_batch 2 was not refused"; }
echo "ok: rampup, step schedule, eval batch"
