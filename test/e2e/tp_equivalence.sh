# Acceptance: tensor parallelism (and sequence parallelism) reproduce the serial run.
# Same recipe, same global batch (8 sequences, micro-batch 2), 20 iterations:
#   gpt-tiny:   tp=2, tp=2 +SP, tp=4, tp=4 +SP, and tp=2 x dp=2 with the distributed optimizer
#   llama-tiny: (GQA, 4 query / 2 kv heads) tp=2, tp=2 +SP, tp=2 +SP x dp=2 distributed;
#               tp=4 (+SP) needs kv_heads % 4 == 0: run with model.kv_heads=4 against its own
#               serial run (the GQA split itself is covered at tp=2)
# each compared with the tp=1 run of the same recipe. The runs start from the same weights (each
# rank initialises its shard as the slice of the full tensor) and differ only in the order of
# fp32 sums (K-split GEMMs add tp partial products; SP sums norm-weight gradients by token
# slice; the grad norm is summed by shard), so values agree to fp32 rounding carried through 20
# AdamW steps: tolerance 1e-4 relative on every loss and 1e-3 relative on grad norms, as for dp
# (measured ~1e-7 on both). A wrong shard, a missing or doubled reduction or a wrong vocab slice
# moves the loss by > 1e-2 within a few steps. Also: the validation message for kv_heads % tp.
source test/e2e_lib.sh
need_data
ITERS=20
BASE=(--train-iters $ITERS --micro-batch-size 2 --set logging.interval=1 --set logging.eval_interval=0)
parallel() { # parallel REF NAME RANKS TP ARGS...
  equiv_run "$1" "$2" "$3" --tensor-model-parallel-size "$4" "tp $4" "${@:5}"
}
GPT=(--config configs/gpt-tiny.yaml)
LLAMA=(--config configs/llama-tiny.yaml)
serial gpt1 "${GPT[@]}"
parallel gpt1 "gpt tp=2" 2 2 "${GPT[@]}"
parallel gpt1 "gpt tp=2 sp" 2 2 "${GPT[@]}" --sequence-parallel
grep -q "tp 2 sequence-parallel" "$TMP/gpt tp=2 sp.log" || fail "sequence parallelism not reported"
parallel gpt1 "gpt tp=4" 4 4 "${GPT[@]}"
parallel gpt1 "gpt tp=4 sp" 4 4 "${GPT[@]}" --sequence-parallel
parallel gpt1 "gpt tp=2 dp=2 distributed-optimizer" 4 2 "${GPT[@]}" --use-distributed-optimizer
grep -q "tp 2, dp 2" "$TMP/gpt tp=2 dp=2 distributed-optimizer.log" || fail "tp 2 x dp 2 not reported"
serial llama1 "${LLAMA[@]}"
parallel llama1 "llama tp=2" 2 2 "${LLAMA[@]}"
parallel llama1 "llama tp=2 sp" 2 2 "${LLAMA[@]}" --sequence-parallel
parallel llama1 "llama tp=2 sp dp=2 distributed-optimizer" 4 2 "${LLAMA[@]}" --sequence-parallel --use-distributed-optimizer
serial llama1kv4 "${LLAMA[@]}" --set model.kv_heads=4
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
# 2.2e-5 on the grad norm, and 4.7e-4 / 3.9e-3 with the tp sum of its gradient left out (at the
# default lr and warmup that mistake moved the loss by only 1e-6); RMSNorm (llama), and LayerNorm
# with bias plus zero-centred gamma (gpt)
parallel gpt1 "gpt layernorm-1p tp=2" 2 2 "${GPT[@]}" --apply-layernorm-1p
variant_base
serial llama1qk "${LLAMA[@]}" --qk-layernorm
parallel llama1qk "llama qk-layernorm tp=2" 2 2 "${LLAMA[@]}" --qk-layernorm
parallel llama1qk "llama qk-layernorm tp=2 sp" 2 2 "${LLAMA[@]}" --qk-layernorm --sequence-parallel
serial gpt1qk1p "${GPT[@]}" --qk-layernorm --apply-layernorm-1p
parallel gpt1qk1p "gpt qk-layernorm 1p tp=2 sp" 2 2 "${GPT[@]}" --qk-layernorm --apply-layernorm-1p --sequence-parallel
# a head size other than hidden / heads (Megatron's --kv-channels: 4 heads of 48 on hidden 128, so
# q/k/v are 192 wide and the output projection maps 192 to 128), with the qk norm over the 48
# channels, tp=2 + SP against its own serial run, same tolerances
# the weightless L2 qk norm (--qk-l2-norm; no parameters: nothing to sum over tp), tp=2 + SP
# against its own serial run, same tolerances
serial llama1l2 "${LLAMA[@]}" --qk-l2-norm
parallel llama1l2 "llama qk-l2-norm tp=2 sp" 2 2 "${LLAMA[@]}" --qk-l2-norm --sequence-parallel
serial llama1hd "${LLAMA[@]}" --kv-channels 48 --qk-layernorm
parallel llama1hd "llama kv-channels 48 tp=2 sp" 2 2 "${LLAMA[@]}" --kv-channels 48 --qk-layernorm --sequence-parallel
# squared ReLU (--squared-relu: relu(h)^2 on the non-gated MLP, each rank's F/tp hidden units and
# their fc bias), gpt at tp=2 + SP against its own serial run, same tolerances
serial gpt1r2 "${GPT[@]}" --squared-relu
parallel gpt1r2 "gpt squared-relu tp=2 sp" 2 2 "${GPT[@]}" --squared-relu --sequence-parallel
