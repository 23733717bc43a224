# Acceptance: mixture of experts under expert parallelism reproduces the serial run.
# A scaled-down mixtral-tiny (2 layers, hidden 64, 4 experts top-2, GQA, swiglu experts, load-
# balancing loss and z-loss on), global batch 8 sequences of 32 tokens, micro-batch 1, 20 iterations,
# once dropless (capacity factor 0) and once with capacity factor 1.0 (tokens dropped per sequence,
# docs/moe.md: the drop rule makes the same tokens drop in every layout), each layout compared with
# the serial run of the same recipe:
#   ep=2 (dp 2), ep=4 (dp 4), tp2 x ep2 with sequence parallelism (4 ranks, expert tensor
#   parallelism = tp), pp2 x ep2 (4 ranks), ep2 x dp2 with the distributed optimizer (4 ranks:
#   expert state sharded over expert-dp 2, dense state over dp 4).
# Every layout routes the same tokens to the same experts, drops the same assignments and computes
# each token's expert outputs from the same weights; only the order of fp32 sums differs (expert
# weight gradients summed over rows in another grouping, over expert-dp instead of one buffer, tp
# partial products, the grad norm by shard), so losses agree to fp32 rounding carried through 20
# AdamW steps: the equivalence tolerance of tp / pp / dp, 1e-4 relative on losses and 1e-3 on grad
# norms. A wrong expert shard, a missed or doubled expert gradient reduction, a token routed to the
# wrong rank or a layout-dependent drop moves the loss by > 1e-3 within a few steps.
# Checkpoints: the capacity-1.0 run saved at ep=2 x tp 2 (4 ranks, distributed optimizer) after 10
# iterations and resumed at ep=1 (1 rank) and at ep=4 (dp 4): iterations 11..20 against the serial
# run's, same tolerance (expert tensors are saved as global (layers * experts, rows, cols) pieces).
# The DeepSeek-V3 router (sigmoid, expert bias, groups, scaling, seq_aux_loss): a sharded run against the
# serial one, and its expert bias through checkpoints (bit-exact serial resume; a pp 2 x ep 2 save resumed
# serially), at the end.
# Also: the metrics carry load_balancing_loss, expert_load and dropped_tokens, the log line the
# load_balancing_loss field, and the aux-loss values agree across layouts too.
source test/e2e_lib.sh
need_data
ITERS=20
MOE=(--config configs/mixtral-tiny.yaml --num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 64
     --seq-length 32 --num-experts 4 --global-batch-size 8)
BASE=(--train-iters $ITERS --micro-batch-size 1 --set logging.interval=1 --set logging.eval_interval=0 --set training.threads=1)
parallel() { # parallel REF NAME RANKS ARGS...
  local ref=$1 name=$2 n=$3; shift 3
  launched "$name" "$n" "$@"
  compare "$TMP/$ref.jsonl" "$TMP/$name.jsonl" "$name" $ITERS 1e-4 1e-3
  local wa na; read -r wa na <<<"$(worst load_balancing_loss "$TMP/$ref.jsonl" "$TMP/$name.jsonl")"
  echo "$name: worst relative load_balancing_loss difference $wa"
  awk -v w="$wa" 'BEGIN { exit !(w + 0 <= 1e-4) }' || fail "$name: load-balancing loss differs from the serial run"
}
for cf in 0 1.0; do
  C=(--moe-expert-capacity-factor $cf)
  serial "serial-$cf" "${MOE[@]}" "${C[@]}"
  grep -q '"expert_load":\[' "$TMP/serial-$cf.jsonl" || fail "metrics have no expert_load"
  grep -q 'load_balancing_loss: ' "$TMP/serial-$cf.log" || fail "the iteration line has no load_balancing_loss"
  dropped=$(json_field "$TMP/serial-$cf.jsonl" dropped_tokens | tail -n 1)
  echo "capacity factor $cf: $dropped assignments dropped at the last iteration"
  if [ "$cf" = 0 ]; then [ "$dropped" = 0 ] || fail "dropless run dropped $dropped"; else [ "$dropped" != 0 ] || fail "capacity 1.0 dropped nothing"; fi
  parallel "serial-$cf" "ep=2 cf=$cf" 2 "${MOE[@]}" "${C[@]}" --expert-model-parallel-size 2
  grep -q "ep 2)" "$TMP/ep=2 cf=$cf.log" || fail "ep=2: the run did not report ep 2"
  parallel "serial-$cf" "ep=4 cf=$cf" 4 "${MOE[@]}" "${C[@]}" --expert-model-parallel-size 4
  parallel "serial-$cf" "tp2 sp ep2 cf=$cf" 4 "${MOE[@]}" "${C[@]}" --expert-model-parallel-size 2 \
    --tensor-model-parallel-size 2 --sequence-parallel
  parallel "serial-$cf" "pp2 ep2 cf=$cf" 4 "${MOE[@]}" "${C[@]}" --expert-model-parallel-size 2 \
    --pipeline-model-parallel-size 2
  parallel "serial-$cf" "ep2 dp4 distributed cf=$cf" 4 "${MOE[@]}" "${C[@]}" --expert-model-parallel-size 2 \
    --use-distributed-optimizer
done
# checkpoint: save at ep 2 x tp 2, resume at ep 1 and at ep 4
"$MTRAIN" launch -n 4 -- "${MOE[@]}" "${C[@]}" "${BASE[@]}" --expert-model-parallel-size 2 --tensor-model-parallel-size 2 \
  --use-distributed-optimizer --save "$TMP/ck" --exit-interval 10 >"$TMP/save.log" 2>&1 || { tail -n 20 "$TMP/save.log"; fail "save run failed"; }
tail10() { grep -o '"iteration":[0-9]*,[^}]*' "$1" | awk -F'[:,]' '$2 > 10' | sed 's/^/{/; s/$/}/'; }
tail10 "$TMP/serial-1.0.jsonl" >"$TMP/serial-tail.jsonl"
for ep in 1 4; do
  cmd=("$MTRAIN"); [ $ep -gt 1 ] && cmd=("$MTRAIN" launch -n $ep --)
  "${cmd[@]}" "${MOE[@]}" "${C[@]}" "${BASE[@]}" --expert-model-parallel-size $ep --load "$TMP/ck" \
    --metrics "$TMP/resume-$ep.jsonl" >"$TMP/resume-$ep.log" 2>&1 || { tail -n 20 "$TMP/resume-$ep.log"; fail "resume at ep $ep failed"; }
  grep -q "loaded checkpoint" "$TMP/resume-$ep.log" || fail "resume at ep $ep did not load the checkpoint"
  compare "$TMP/serial-tail.jsonl" "$TMP/resume-$ep.jsonl" "saved at ep 2 x tp 2, resumed at ep $ep" 10 1e-4 1e-3
done
# The DeepSeek-V3 router (docs/moe.md): sigmoid scores, the expert bias (rate 0.01: it moves the choice within a
# few steps), 2 of 4 groups of 2 experts, top 4, the weights x 2.5, seq_aux_loss; 10 iterations, dropless. The
# sharded run (tp 2 with sequence parallelism x ep 2 x dp 2, distributed optimizer: the bias's token counts
# summed over dp) against the serial one, the tolerance above. Then its checkpoint: the serial run saved after 5
# iterations and resumed reproduces iterations 6..10 of the uninterrupted run bit for bit (the expert bias is in
# the save: without it the resumed run chooses other experts).
ITERS=10
BASE=(--train-iters $ITERS --micro-batch-size 1 --set logging.interval=1 --set logging.eval_interval=0 --set training.threads=1)
DS=("${MOE[@]}" --num-experts 8 --moe-router-topk 4 --moe-router-score-function sigmoid --moe-router-enable-expert-bias
    --moe-router-bias-update-rate 0.01 --moe-router-num-groups 4 --moe-router-group-topk 2
    --moe-router-topk-scaling-factor 2.5 --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 0.001
    --moe-expert-capacity-factor 0)
serial ds "${DS[@]}"
parallel ds "deepseek router tp2 sp ep2 dp2" 4 "${DS[@]}" --expert-model-parallel-size 2 --tensor-model-parallel-size 2 \
  --sequence-parallel --use-distributed-optimizer
"$MTRAIN" "${DS[@]}" "${BASE[@]}" --save "$TMP/ck-ds" --exit-interval 5 >"$TMP/ds-save.log" 2>&1 ||
  { tail -n 20 "$TMP/ds-save.log"; fail "deepseek router: the save run failed"; }
"$MTRAIN" "${DS[@]}" "${BASE[@]}" --load "$TMP/ck-ds" --metrics "$TMP/ds-resume.jsonl" >"$TMP/ds-resume.log" 2>&1 ||
  { tail -n 20 "$TMP/ds-resume.log"; fail "deepseek router: the resume failed"; }
grep -o '"iteration":[0-9]*,[^}]*' "$TMP/ds.jsonl" | awk -F'[:,]' '$2 > 5' | sed 's/^/{/; s/$/}/' >"$TMP/ds-tail.jsonl"
compare "$TMP/ds-tail.jsonl" "$TMP/ds-resume.jsonl" "deepseek router saved after 5, resumed" 5 0 0
# the bias of every pipeline stage reaches the save: saved at pp 2 x ep 2 (dp 2), resumed serially
"$MTRAIN" launch -n 4 -- "${DS[@]}" "${BASE[@]}" --pipeline-model-parallel-size 2 --expert-model-parallel-size 2 \
  --save "$TMP/ck-ds-pp" --exit-interval 5 >"$TMP/ds-save-pp.log" 2>&1 ||
  { tail -n 20 "$TMP/ds-save-pp.log"; fail "deepseek router: the pp 2 x ep 2 save failed"; }
"$MTRAIN" "${DS[@]}" "${BASE[@]}" --load "$TMP/ck-ds-pp" --metrics "$TMP/ds-resume-pp.jsonl" >"$TMP/ds-resume-pp.log" 2>&1 ||
  { tail -n 20 "$TMP/ds-resume-pp.log"; fail "deepseek router: the resume of the pp 2 x ep 2 save failed"; }
compare "$TMP/ds-tail.jsonl" "$TMP/ds-resume-pp.jsonl" "deepseek router saved at pp 2 x ep 2 after 5, resumed serially" 5 1e-4 1e-3
echo "PASS"
