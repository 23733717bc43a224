# Acceptance: tensor parallelism (and sequence parallelism) reproduce the serial run.
# Same recipe, same global batch (8 sequences, micro-batch 2), 10 iterations:
#   gpt-tiny:   tp=2, tp=2 +SP, tp=4, tp=4 +SP, and tp=2 x dp=2 with the distributed optimizer
#   llama-tiny: (GQA, 4 query / 2 kv heads) tp=2, tp=2 +SP, tp=2 +SP x dp=2 distributed;
#               tp=4 (+SP) needs kv_heads % 4 == 0: run with model.kv_heads=4 against its own
#               serial run (the GQA split itself is covered at tp=2)
# each compared with the tp=1 run of the same recipe. The runs start from the same weights (each
# rank initialises its shard as the slice of the full tensor) and differ only in the order of
# fp32 sums (K-split GEMMs add tp partial products; SP sums norm-weight gradients by token
# slice; the grad norm is summed by shard), so values agree to fp32 rounding carried through 10
# AdamW steps: tolerance 1e-4 relative on every loss and 1e-3 relative on grad norms, as for dp
# (measured ~1e-7 on both). A wrong shard, a missing or doubled reduction or a wrong vocab slice
# moves the loss by > 1e-2 within a few steps, and every step's loss and grad norm is compared, so
# 10 steps (20 before) leave that margin at half the cost (gpt-tiny's loss falls 5.60 -> 4.73 over
# them: each step's update shows in the next loss). A wrong gradient of a small replicated tensor
# barely moves the loss at the default lr (the qk norm below: 1e-6), at 10 steps or 20: the
# layer-variant cases at lr 0.01 below are there for that.
# Also: the validation message for kv_heads % tp.
# The serial references run first, two at a time, each on one thread (--threads 1: the pair fills
# the 2 cores, where one process on 2 threads does not; its values equal the 2-thread run's to fp32
# rounding, measured <= 1e-7); they share nothing, and each parallel run below is compared with its
# own reference as before.
source test/e2e_lib.sh
need_data
ITERS=10
BASE=(--train-iters $ITERS --micro-batch-size 2 --set logging.interval=1 --set logging.eval_interval=0)
parallel() { # parallel REF NAME RANKS TP ARGS...
  equiv_run "$1" "$2" "$3" --tensor-model-parallel-size "$4" "tp $4" "${@:5}"
}
GPT=(--config configs/gpt-tiny.yaml)
LLAMA=(--config configs/llama-tiny.yaml)
MUP=(--use-mup --mup-base-hidden-size 32 --mup-embedding-mult 2)
MLA=(--multi-latent-attention --q-lora-rank 48 --kv-lora-rank 32 --qk-head-dim 24 --qk-pos-emb-head-dim 8
  --v-head-dim 16 --qk-layernorm --num-layers 2 --seq-length 64)
# the serial references (what each is for: at its comparisons below), two at a time
bg_serial gpt1 "${GPT[@]}"; bg_serial llama1 "${LLAMA[@]}"; wait_serials
bg_serial llama1kv4 "${LLAMA[@]}" --set model.kv_heads=4; bg_serial --variant gpt1mla "${GPT[@]}" "${MLA[@]}"; wait_serials
bg_serial --variant llama1qk "${LLAMA[@]}" --qk-layernorm; bg_serial --variant gpt1qk1p "${GPT[@]}" --qk-layernorm --apply-layernorm-1p
wait_serials
bg_serial --variant llama1l2 "${LLAMA[@]}" --qk-l2-norm; bg_serial --variant llama1hd "${LLAMA[@]}" --kv-channels 48 --qk-layernorm
wait_serials
bg_serial --variant gpt1r2 "${GPT[@]}" --squared-relu; bg_serial --variant gpt1mup "${GPT[@]}" "${MUP[@]}"; wait_serials
parallel gpt1 "gpt tp=2" 2 2 "${GPT[@]}"
parallel gpt1 "gpt tp=2 sp" 2 2 "${GPT[@]}" --sequence-parallel
grep -q "tp 2 sequence-parallel" "$TMP/gpt tp=2 sp.log" || fail "sequence parallelism not reported"
parallel gpt1 "gpt tp=4" 4 4 "${GPT[@]}"
parallel gpt1 "gpt tp=4 sp" 4 4 "${GPT[@]}" --sequence-parallel
parallel gpt1 "gpt tp=2 dp=2 distributed-optimizer" 4 2 "${GPT[@]}" --use-distributed-optimizer
grep -q "tp 2, dp 2" "$TMP/gpt tp=2 dp=2 distributed-optimizer.log" || fail "tp 2 x dp 2 not reported"
parallel llama1 "llama tp=2" 2 2 "${LLAMA[@]}"
parallel llama1 "llama tp=2 sp" 2 2 "${LLAMA[@]}" --sequence-parallel
parallel llama1 "llama tp=2 sp dp=2 distributed-optimizer" 4 2 "${LLAMA[@]}" --sequence-parallel --use-distributed-optimizer
parallel llama1kv4 "llama kv_heads=4 tp=4" 4 4 "${LLAMA[@]}" --set model.kv_heads=4
parallel llama1kv4 "llama kv_heads=4 tp=4 sp" 4 4 "${LLAMA[@]}" --set model.kv_heads=4 --sequence-parallel
# kv heads that do not split over tp: a validation error naming the key, before any training
if "$MTRAIN" launch -n 4 -- "${LLAMA[@]}" "${BASE[@]}" --tensor-model-parallel-size 4 >"$TMP/kv.log" 2>&1; then
  fail "llama-tiny (2 kv heads) at tp=4 should be refused"
fi
grep -q "model.kv_heads: 2 key/value heads do not split over parallel.tensor = 4" "$TMP/kv.log" \
  || { cat "$TMP/kv.log"; fail "no kv_heads % tp message"; }
# only tp rank 0 of dp rank 0 logs iteration lines
[ "$(grep -c "iteration       $ITERS/" "$TMP/gpt tp=4.log")" -eq 1 ] || fail "expected exactly one rank to log"
# layer variants (core/model/layer_spec.h), same tolerances. Zero-centred gamma against the plain
# gpt serial run: 1 + w with w from 0 trains as w from 1 (norms have no weight decay), so only fp32
# rounding differs. The per-head qk norm (its weights are replicated and every rank's heads add to
# their gradient: summed over tp with or without SP) against its own serial run, 8 iterations at
# lr 0.01 without warmup, so that a wrong qk norm gradient shows: measured 2.5e-6 on the loss and
# 2.2e-5 on the grad norm against a 2-thread serial run (1.0e-5 / 8.3e-5 against the 1-thread one
# made here: other fp32 rounding, still 10x inside the tolerance), and 4.7e-4 / 3.9e-3 with the tp
# sum of its gradient left out (at the default lr and warmup that mistake moved the loss by only
# 1e-6); RMSNorm (llama), and LayerNorm with bias plus zero-centred gamma (gpt)
parallel gpt1 "gpt layernorm-1p tp=2" 2 2 "${GPT[@]}" --apply-layernorm-1p
variant_base
parallel llama1qk "llama qk-layernorm tp=2" 2 2 "${LLAMA[@]}" --qk-layernorm
parallel llama1qk "llama qk-layernorm tp=2 sp" 2 2 "${LLAMA[@]}" --qk-layernorm --sequence-parallel
parallel gpt1qk1p "gpt qk-layernorm 1p tp=2 sp" 2 2 "${GPT[@]}" --qk-layernorm --apply-layernorm-1p --sequence-parallel
# a head size other than hidden / heads (Megatron's --kv-channels: 4 heads of 48 on hidden 128, so
# q/k/v are 192 wide and the output projection maps 192 to 128), with the qk norm over the 48
# channels, tp=2 + SP against its own serial run, same tolerances
# the weightless L2 qk norm (--qk-l2-norm; no parameters: nothing to sum over tp), tp=2 + SP
# against its own serial run, same tolerances
parallel llama1l2 "llama qk-l2-norm tp=2 sp" 2 2 "${LLAMA[@]}" --qk-l2-norm --sequence-parallel
parallel llama1hd "llama kv-channels 48 tp=2 sp" 2 2 "${LLAMA[@]}" --kv-channels 48 --qk-layernorm --sequence-parallel
# squared ReLU (--squared-relu: relu(h)^2 on the non-gated MLP, each rank's F/tp hidden units and
# their fc bias), gpt at tp=2 + SP against its own serial run, same tolerances
parallel gpt1r2 "gpt squared-relu tp=2 sp" 2 2 "${GPT[@]}" --squared-relu --sequence-parallel
# muP (--use-mup, core/model/mup.h): m = 128 / 32 = 4, so the hidden matrices start at 1/2 of the
# init std and step with lr / 4 and eps / 4, the logits are times 1/4, the embedding output times 2
# (--mup-embedding-mult), the softmax scale 1 / head_dim. All of it is per parameter or per
# activation element, so tp=2 + SP x pp=2 (the last stage's copy of the tied word embedding keeps
# the base lr) matches its own serial run, same tolerances
parallel gpt1mup "gpt mup tp=2 sp pp=2" 4 2 "${GPT[@]}" "${MUP[@]}" --sequence-parallel --pipeline-model-parallel-size 2
grep -q "pp 2" "$TMP/gpt mup tp=2 sp pp=2.log" || fail "gpt mup: pp 2 not reported"
# multi-latent attention (Megatron's MLASelfAttention), against its own serial run, same
# tolerances, on a 2-layer gpt-tiny of 64 tokens (cheap): the q latent with its norm and the kv
# latent's norm (--qk-layernorm; LayerNorm with bias), value heads of 16 against query / key heads of
# 24 + 8 (the core's v part padded), tp=2 + SP: the replicated down projections and latent norms
# have their gradients summed over tp (left out, the loss moves by 1e-3 relative at iteration 2)
parallel gpt1mla "gpt mla tp=2 sp" 2 2 "${GPT[@]}" "${MLA[@]}" --sequence-parallel
