# Batch-size ramp-up (Megatron's --rampup-batch-size START INC SAMPLES):
#  1. the global batch of each iteration (the consumed-samples steps of the metrics file) is the one
#     Megatron's RampupBatchsizeNumMicroBatches gives, computed here from its rule: n = (G - START) /
#     INC increments, one every SAMPLES / n samples, G once more than SAMPLES are consumed;
#  2. the learning rate follows Megatron's sample-based schedule: warmup over warmup_iters * G
#     samples (lr = peak * samples / (warmup * G));
#  3. dp 2 and pp 2 (the pipeline's table rebuilt at each batch change) reproduce the serial run's
#     losses: the same tolerance as dp_equivalence (1e-4 relative: reduction order over ~20 AdamW steps);
#  4. --train-samples with ramp-up counts iterations as Megatron's update_train_iters does;
#  5. a ramp-up that does not divide is refused naming the key.
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
echo "ok: rampup"
