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
# Mixed dense and MoE layers: a 4-layer pattern dense, MoE, MoE, dense at pp 2 x ep 2 and an 8-layer
# --moe-layer-freq 3 model at pp 2 x vpp 2 x tp 2 against their serial runs, and a save at pp 2 x tp 2 resumed on
# one rank (the section at the end).
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
# mixed dense and MoE layers (Megatron's --moe-layer-freq pattern; DeepSeek's dense first layer): 4 layers dense,
# MoE, MoE, dense (DeepSeek's whole MoE layer: gated shared experts, the sigmoid router with expert bias, 1 of 2
# groups, scaling and seq_aux_loss), the experts narrower than the dense MLP (--moe-ffn-hidden-size 32), 10 iterations. pp 2 x ep 2
# (each stage one dense and one MoE layer: its own slot maps) reproduces the serial run, and so does an 8-layer
# --moe-layer-freq 3 model at pp 2 x vpp 2 x tp 2 (sp); a save at pp 2 x tp 2
# after 5 iterations resumed on one rank (the per-kind stacks resharded across pipeline layouts) its 6..10, and
# refused with the MoE layers elsewhere
ITERS=10
BASE=(--train-iters $ITERS --micro-batch-size 1 --set logging.interval=1 --set logging.eval_interval=0 --set training.threads=1)
MIX=(--config configs/mixtral-tiny.yaml --num-layers 4 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 64
     --seq-length 32 --num-experts 4 --global-batch-size 8 --moe-layer-freq "([0]+[1]*2+[0])" --moe-ffn-hidden-size 32
     --moe-expert-capacity-factor 0 --moe-shared-expert-intermediate-size 48 --moe-shared-expert-gate
     --moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-bias-update-rate 0.01
     --moe-router-num-groups 2 --moe-router-group-topk 1 --moe-router-topk-scaling-factor 2.5
     --moe-router-load-balancing-type seq_aux_loss)
serial mixed "${MIX[@]}"
parallel mixed "mixed pp2 ep2" 4 "${MIX[@]}" --expert-model-parallel-size 2 --pipeline-model-parallel-size 2
# ... and under full recompute (each kind's activations in the recompute slices; the rerun routes once)
parallel mixed "mixed pp2 ep2 full recompute" 4 "${MIX[@]}" --expert-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --set training.recompute=full
# 8 layers, --moe-layer-freq 3 (MoE layers 0, 3, 6), interleaved: pp 2 x vpp 2 x tp 2 with sequence parallelism, each
# model chunk of 2 layers its own mix (one chunk all dense)
MIX8=("${MIX[@]}"); MIX8[3]=8; MIX8[17]=3
serial mixed8 "${MIX8[@]}"
parallel mixed8 "mixed8 pp2 vpp2 tp2 sp" 4 "${MIX8[@]}" --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 \
  --tensor-model-parallel-size 2 --sequence-parallel
"$MTRAIN" launch -n 4 -- "${MIX[@]}" "${BASE[@]}" --pipeline-model-parallel-size 2 --tensor-model-parallel-size 2 \
  --save "$TMP/ckmix" --exit-interval 5 >"$TMP/savemix.log" 2>&1 || { tail -n 20 "$TMP/savemix.log"; fail "mixed save run failed"; }
grep -o '"iteration":[0-9]*,[^}]*' "$TMP/mixed.jsonl" | awk -F'[:,]' '$2 > 5' | sed 's/^/{/; s/$/}/' >"$TMP/mixed-tail.jsonl"
"$MTRAIN" "${MIX[@]}" "${BASE[@]}" --load "$TMP/ckmix" --metrics "$TMP/mixed-resume.jsonl" >"$TMP/mixed-resume.log" 2>&1 ||
  { tail -n 20 "$TMP/mixed-resume.log"; fail "mixed resume on one rank failed"; }
grep -q "loaded checkpoint" "$TMP/mixed-resume.log" || fail "mixed resume did not load the checkpoint"
compare "$TMP/mixed-tail.jsonl" "$TMP/mixed-resume.jsonl" "mixed: saved at pp 2 x tp 2, resumed on one rank" 5 1e-4 1e-3
# the same tensor shapes with other MoE layers (MoE, dense, dense, MoE) would load silently: refused by the save's recipe
MIX2=("${MIX[@]}"); MIX2[17]="([1]+[0]*2+[1])"
"$MTRAIN" "${MIX2[@]}" "${BASE[@]}" --load "$TMP/ckmix" >"$TMP/mixed-other.log" 2>&1 && fail "a save with other MoE layers loaded"
grep -q "layer 0 is a dense layer in the save and a MoE layer here" "$TMP/mixed-other.log" ||
  { tail -n 5 "$TMP/mixed-other.log"; fail "other MoE layers: not refused by name"; }
echo "ok: a save with other MoE layers is refused"
# shared experts (model_moe_shared.c; Megatron's SharedExpertMLP with Qwen2-MoE's sigmoid gate), dropless, 10
# iterations: tp 2 with SP x ep 2 with the distributed optimizer (the shared MLP split over tp like the dense
# one, its partial output joining the routed experts' before the one reduction), saving at iteration 5 and
# resumed serially (shared tensors resharded from tp 2 to 1), and pp 2 x ep 2 under full recompute (every MoE
# layer's forward rerun before its backward: the same routing, its statistics counted once) against the serial run
S=(--moe-expert-capacity-factor 0 --moe-shared-expert-intermediate-size 96 --moe-shared-expert-gate)
serial serial-shared "${MOE[@]}" "${S[@]}"
parallel serial-shared "tp2 sp ep2 shared" 4 "${MOE[@]}" "${S[@]}" --expert-model-parallel-size 2 \
  --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer --save "$TMP/ck-shared" --save-interval 5
parallel serial-shared "pp2 ep2 shared full recompute" 4 "${MOE[@]}" "${S[@]}" --expert-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --set training.recompute=full
grep -o '"iteration":[0-9]*,[^}]*' "$TMP/serial-shared.jsonl" | awk -F'[:,]' '$2 > 5' | sed 's/^/{/; s/$/}/' \
  >"$TMP/serial-shared-tail.jsonl"
"$MTRAIN" "${MOE[@]}" "${S[@]}" "${BASE[@]}" --load "$TMP/ck-shared" --ckpt-step 5 --metrics "$TMP/resume-shared.jsonl" \
  >"$TMP/resume-shared.log" 2>&1 || { tail -n 20 "$TMP/resume-shared.log"; fail "resume of the shared-expert save failed"; }
grep -q "loaded checkpoint" "$TMP/resume-shared.log" || fail "the shared-expert resume did not load the checkpoint"
compare "$TMP/serial-shared-tail.jsonl" "$TMP/resume-shared.jsonl" "shared experts saved at tp 2 x ep 2, resumed at 1" 5 1e-4 1e-3
# The DeepSeek-V3 router (docs/moe.md): sigmoid scores, the expert bias (rate 0.01: it moves the choice within a
# few steps), 2 of 4 groups of 2 experts, top 4, the weights x 2.5, seq_aux_loss; 10 iterations, dropless. The
# sharded run (tp 2 with sequence parallelism x ep 2 x dp 2, distributed optimizer: the bias's token counts
# summed over dp) against the serial one, the tolerance above. Then its checkpoint: the serial run saved after 5
# iterations and resumed reproduces iterations 6..10 of the uninterrupted run bit for bit (the expert bias is in
# the save: without it the resumed run chooses other experts).
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
# Llama 4's routing (ModelOpt's --export-moe-apply-probs-on-input: the weight scales the expert's input, the output
# added with weight 1), sigmoid top-1 with a shared expert, 10 iterations: tp 2 with SP x ep 2 (the weights'
# gradient <dx_expert, x> summed over tp; the dispatch buffers of ep > 1) against the serial run
L4=("${MOE[@]}" --moe-router-topk 1 --moe-router-score-function sigmoid --export-moe-apply-probs-on-input
    --moe-expert-capacity-factor 0 --moe-shared-expert-intermediate-size 64)
serial l4 "${L4[@]}"
parallel l4 "llama 4 routing tp2 sp ep2" 4 "${L4[@]}" --expert-model-parallel-size 2 --tensor-model-parallel-size 2 \
  --sequence-parallel
echo "PASS"
