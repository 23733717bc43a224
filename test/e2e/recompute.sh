# Full activation recompute (real recomputation, not a flag): training.recompute = full
# (--recompute-granularity full --recompute-method uniform --recompute-num-layers 1) keeps only
# every layer's input (the residual stream) and one layer's other activations; backward reruns
# each layer's forward from its saved input just before the layer's backward. The rerun is the
# same ops on the same inputs, so lm_loss and grad_norm are BITWISE those of the run without
# recompute: serial, at pp 2 (1F1B and interleaved: each in-flight micro-batch's slot keeps its own inputs) and
# at tp 2 with sequence parallelism (the rerun repeats the forward collectives on every rank).
# The trainer's printed activation memory falls and equals `mtrain plan`'s for the recipe.
# Selective recompute (--recompute-granularity selective, Megatron's --recompute-activations) reruns
# the attention core from the saved qkv in backward: the same bits again, a little less memory
# (the core's output and logsumexp are one shared slice), equal to the plan's figure too.
# (test/unit/test_act_memory.c measures the peak memory of none / selective / full against the plan.)
# MoE layers too (with shared experts, at ep 2): lm_loss, grad_norm and load_balancing_loss bitwise equal.
source test/e2e_lib.sh
need_data
ITERS=3
BASE=(--train-iters $ITERS --micro-batch-size 2 --set logging.interval=1 --set logging.eval_interval=0)
RC=(--recompute-granularity full --recompute-method uniform --recompute-num-layers 1)
run() { # run NAME RANKS ARGS...
  launched "$@"
}
bits() { grep -o '"\(lm_loss\|grad_norm\)":[^,}]*' "$1"; }
same() { # same REF NAME: bitwise-identical losses and grad norms
  [ "$(bits "$TMP/$1.jsonl" | wc -l)" -eq $((2 * ITERS)) ] || fail "$2: expected $ITERS iterations of metrics"
  cmp -s <(bits "$TMP/$1.jsonl") <(bits "$TMP/$2.jsonl") || { paste <(bits "$TMP/$1.jsonl") <(bits "$TMP/$2.jsonl"); fail "$2 differs from $1"; }
  echo "$2: lm_loss and grad_norm bitwise equal to $1 ($ITERS iterations)"
}
mib() { grep -o '[0-9.]* MiB activations per rank' "$1" | head -1 | cut -d' ' -f1; }
for model in gpt llama; do
  CFG=(--config configs/$model-tiny.yaml)
  run "$model" 1 "${CFG[@]}"
  run "$model full" 1 "${CFG[@]}" "${RC[@]}"
  same "$model" "$model full"
  run "$model selective" 1 "${CFG[@]}" --recompute-activations
  same "$model" "$model selective"
  a=$(mib "$TMP/$model.log"); b=$(mib "$TMP/$model full.log"); s=$(mib "$TMP/$model selective.log")
  echo "$model: activations $a MiB without recompute, $s MiB selective, $b MiB with full recompute"
  awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > 0 && b < 0.6 * a) }' || fail "$model: full recompute did not cut activation memory ($a -> $b MiB)"
  awk -v a="$a" -v s="$s" -v b="$b" 'BEGIN { exit !(s < a && s > b) }' || fail "$model: selective should keep less than none, more than full ($a, $s, $b MiB)"
  for rc in none selective full; do
    p=$("$MTRAIN" plan --gpus 1 "${CFG[@]}" --micro-batch-size 2 --set training.recompute=$rc --json | grep -o '"acts_bytes": [0-9.]*' | head -1 | awk '{ printf "%.1f", $2 / 1048576 }')
    case $rc in none) t=$a ;; selective) t=$s ;; full) t=$b ;; esac
    [ "$p" = "$t" ] || fail "$model recompute $rc: mtrain plan says $p MiB of activations, the trainer $t MiB"
    echo "$model recompute $rc: plan $p MiB = trainer $t MiB"
  done
  run "$model pp=2" 2 "${CFG[@]}" --pipeline-model-parallel-size 2
  run "$model pp=2 full" 2 "${CFG[@]}" --pipeline-model-parallel-size 2 "${RC[@]}"
  same "$model pp=2" "$model pp=2 full"
done
# block method: the first N layers of each model chunk recomputed, the others keep everything
# (one shared slice serves the recomputed layers: block 1 saves nothing, block 2 of 4 a quarter)
BLK=(--recompute-granularity full --recompute-method block --recompute-num-layers 2)
run "gpt block2" 1 --config configs/gpt-tiny.yaml "${BLK[@]}"
same gpt "gpt block2"
c=$(mib "$TMP/gpt block2.log"); a=$(mib "$TMP/gpt.log"); b=$(mib "$TMP/gpt full.log")
awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { exit !(c > b && c < a) }' || fail "block 2 of 4 layers: $c MiB should lie between $b and $a"
p=$("$MTRAIN" plan --gpus 1 --config configs/gpt-tiny.yaml --micro-batch-size 2 "${BLK[@]}" --json | grep -o '"acts_bytes": [0-9.]*' | head -1 | awk '{ printf "%.1f", $2 / 1048576 }')
[ "$p" = "$c" ] || fail "block 2: mtrain plan says $p MiB of activations, the trainer $c MiB"
echo "gpt block 2: activations $c MiB (plan $p MiB)"
# pp 2, block 1: each stage's chunk of 2 layers recomputes its first layer and keeps the second
run "gpt pp=2 block1" 2 --config configs/gpt-tiny.yaml --pipeline-model-parallel-size 2 --recompute-granularity full \
  --recompute-method block --recompute-num-layers 1
same "gpt pp=2" "gpt pp=2 block1"
run "gpt pp=2 vpp=2" 2 --config configs/gpt-tiny.yaml --pipeline-model-parallel-size 2 --virtual-pipeline-model-parallel-size 2
run "gpt pp=2 vpp=2 full" 2 --config configs/gpt-tiny.yaml --pipeline-model-parallel-size 2 \
  --virtual-pipeline-model-parallel-size 2 "${RC[@]}"
same "gpt pp=2 vpp=2" "gpt pp=2 vpp=2 full"
run "gpt tp=2 sp" 2 --config configs/gpt-tiny.yaml --tensor-model-parallel-size 2 --sequence-parallel
run "gpt tp=2 sp full" 2 --config configs/gpt-tiny.yaml --tensor-model-parallel-size 2 --sequence-parallel "${RC[@]}"
same "gpt tp=2 sp" "gpt tp=2 sp full"
run "gpt tp=2 sp selective" 2 --config configs/gpt-tiny.yaml --tensor-model-parallel-size 2 --sequence-parallel \
  --recompute-activations
same "gpt tp=2 sp" "gpt tp=2 sp selective"
run "gpt pp=2 selective" 2 --config configs/gpt-tiny.yaml --pipeline-model-parallel-size 2 --recompute-activations
same "gpt pp=2" "gpt pp=2 selective"
# MoE layers (with gated shared experts) at ep 2: the rerun routes the same tokens again (the all-to-alls
# repeated), its MoE statistics are not counted twice
M=(--config configs/mixtral-tiny.yaml --num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 64
   --seq-length 32 --num-experts 4 --global-batch-size 4 --expert-model-parallel-size 2
   --moe-shared-expert-intermediate-size 64 --moe-shared-expert-gate)
run "moe ep=2" 2 "${M[@]}"
run "moe ep=2 full" 2 "${M[@]}" "${RC[@]}"
same "moe ep=2" "moe ep=2 full"
cmp -s <(grep -o '"load_balancing_loss":[^,}]*' "$TMP/moe ep=2.jsonl") \
  <(grep -o '"load_balancing_loss":[^,}]*' "$TMP/moe ep=2 full.jsonl") || fail "moe: the load-balancing loss differs under full recompute"
# what is not implemented is refused, naming the key
if "$MTRAIN" --config configs/gpt-tiny.yaml "${BASE[@]}" --recompute-granularity full --recompute-method uniform \
     --recompute-num-layers 2 >"$TMP/u2.log" 2>&1; then
  fail "uniform recompute in units of 2 layers should be refused"
fi
grep -q "training.recompute_num_layers" "$TMP/u2.log" || { cat "$TMP/u2.log"; fail "no training.recompute_num_layers in the refusal"; }
echo "refused: $(grep -m1 'recompute_num_layers' "$TMP/u2.log" | cut -c1-200)"
echo "recompute: ok"
