# Acceptance: context parallelism reproduces the serial run.
# Same recipe (2 layers, sequences of 32 tokens, global batch 4, micro-batch 2), 20 iterations:
#   gpt-tiny (learned positions) and llama-tiny (RoPE, GQA 4 query / 2 kv heads):
#   cp=2, cp=4, cp=2 x tp=2 with sequence parallelism, cp=2 x pp=2, cp=2 x dp=2 with the
#   distributed optimizer (4 ranks at most), each against the cp=1 run of the same recipe; for
#   llama also cp=2 with full recompute, gpt cp=2 with selective recompute, and the cp=2 x dp=2 run's checkpoint resumed at cp=1.
# cp rank r holds chunks r and 2cp-1-r of the 2cp chunks of every sequence (Megatron's causal load
# balance), embedded / rotated at their global positions; attention is a ring of K/V blocks
# merged by logsumexp, its backward a ring of dK/dV partials. The runs start from the same weights
# and read the same samples; they differ only in the order of fp32 sums: the softmax over a
# row's keys is split into per-block partial softmaxes merged by exp(lse) weights instead of one
# online pass, dK/dV sum their partials in ring order, the loss and gradients sum over cp ranks.
# So values agree to fp32 rounding carried through 20 AdamW steps: tolerance 1e-4 relative on
# every loss and 1e-3 on grad norms, as the tp and dp tests use (measured ~1e-7). A wrong chunk,
# a wrong position, a missed or doubled block moves the loss by > 1e-2 within a few steps.
# Also: the refusal of cp with MoE; --cp-comm-type a2a (the same exact attention) taken with a note,
# an unknown --cp-comm-type refused.
source test/e2e_lib.sh
need_data
ITERS=20
BASE=(--train-iters $ITERS --micro-batch-size 2 --global-batch-size 4 --seq-length 32 --set model.layers=2 --set logging.interval=1 --set logging.eval_interval=0)
parallel() { # parallel REF NAME RANKS CP ARGS...
  equiv_run "$1" "$2" "$3" --context-parallel-size "$4" "cp $4 ring attention" "${@:5}"
}
for arch in gpt llama; do
  CFG=(--config configs/$arch-tiny.yaml)
  serial $arch "${CFG[@]}"
  parallel $arch "$arch cp=2" 2 2 "${CFG[@]}"
  parallel $arch "$arch cp=4" 4 4 "${CFG[@]}"
  parallel $arch "$arch cp=2 tp=2 sp" 4 2 "${CFG[@]}" --tensor-model-parallel-size 2 --sequence-parallel
  parallel $arch "$arch cp=2 pp=2" 4 2 "${CFG[@]}" --pipeline-model-parallel-size 2
  # the llama run also saves at iteration 10: its checkpoint (dp x cp optimizer shards) is resumed at cp = 1 below
  save=(); [ $arch = llama ] && save=(--save "$TMP/ck" --save-interval 10)
  parallel $arch "$arch cp=2 dp=2 distributed-optimizer" 4 2 "${CFG[@]}" --use-distributed-optimizer "${save[@]}"
done
# multi-latent attention: its rotated parts at the chunks' global positions, the ring over its
# zero-padded heads (q latent and latent norms, value heads of 16 against query / key heads of 24 + 8)
MLA=(--config configs/gpt-tiny.yaml --multi-latent-attention --q-lora-rank 48 --kv-lora-rank 32 --qk-head-dim 24
  --qk-pos-emb-head-dim 8 --v-head-dim 16 --qk-layernorm)
serial gptmla "${MLA[@]}"
parallel gptmla "gpt mla cp=2" 2 2 "${MLA[@]}"
LLAMA=(--config configs/llama-tiny.yaml)
# full recompute reruns each layer's forward (and its ring) in backward: the same losses
parallel llama "llama cp=2 full recompute" 2 2 "${LLAMA[@]}" --recompute-granularity full \
  --recompute-method uniform --recompute-num-layers 1
# selective recompute reruns the attention core (the forward ring) before its backward
parallel gpt "gpt cp=2 selective recompute" 2 2 --config configs/gpt-tiny.yaml --recompute-granularity selective
# a cp=2 x dp=2 save resumed serially continues the serial trajectory (iterations 11 .. 20)
"$MTRAIN" "${LLAMA[@]}" "${BASE[@]}" --load "$TMP/ck" --ckpt-step 10 --metrics "$TMP/resume.jsonl" >"$TMP/resume.log" 2>&1 \
  || { tail -n 20 "$TMP/resume.log"; fail "resuming the cp=2 save at cp=1 failed"; }
grep '"lm_loss"' "$TMP/llama.jsonl" | tail -n 10 >"$TMP/llama-last10.jsonl"
compare "$TMP/llama-last10.jsonl" "$TMP/resume.jsonl" "llama cp=2 save resumed at cp=1" 10 1e-4 1e-3
grep -q "tp 2 sequence-parallel, cp 2" "$TMP/gpt cp=2 tp=2 sp.log" || fail "cp 2 x tp 2 sp not reported"
grep -q "cp 2 ring attention (16 tokens per rank), dp 2" "$TMP/llama cp=2 dp=2 distributed-optimizer.log" \
  || fail "cp 2 x dp 2 not reported"
# refusals: clear messages, before any training
"$MTRAIN" check --world-size 2 --config configs/gpt-tiny.yaml "${BASE[@]}" --context-parallel-size 2 --cp-comm-type a2a \
  >/dev/null 2>"$TMP/a2a.log" || { cat "$TMP/a2a.log"; fail "--cp-comm-type a2a should be taken"; }
grep -q "cp-comm-type a2a: the attention is computed by the p2p ring" "$TMP/a2a.log" || { cat "$TMP/a2a.log"; fail "no --cp-comm-type note"; }
if "$MTRAIN" check --world-size 2 --config configs/gpt-tiny.yaml "${BASE[@]}" --context-parallel-size 2 \
     --cp-comm-type ring >/dev/null 2>"$TMP/ring.log"; then fail "--cp-comm-type ring should be refused"; fi
grep -q "cp-comm-type ring: p2p, a2a, allgather or a2a+p2p" "$TMP/ring.log" || { cat "$TMP/ring.log"; fail "no --cp-comm-type message"; }
if "$MTRAIN" launch -n 2 -- --config configs/gpt-tiny.yaml "${BASE[@]}" --context-parallel-size 2 \
     --num-experts 4 >"$TMP/moe.log" 2>&1; then fail "cp with MoE should be refused"; fi
grep -q "context parallelism with MoE layers" "$TMP/moe.log" || { cat "$TMP/moe.log"; fail "no cp x MoE message"; }
echo "cp_equivalence: ok"
