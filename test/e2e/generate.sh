# mtrain generate. For a briefly trained gpt-tiny, llama-tiny (GQA, RoPE, SwiGLU, untied) and
# mixtral-tiny (top-2 MoE, trained dropless with model.moe.capacity_factor 0; both decoders route
# dropless whatever the recipe's capacity, as a one-token step has no sequence to cap): the
# KV-cache decoder (the training forward one token at a time over a cache) and full recomputation
# through the model's forward over the padded sequence give the same token ids, greedily and when
# sampling (temperature 1, top-k 40, top-p 0.95, the same seed: the two paths compute the
# same logits up to fp32 rounding, so the same draws pick the same tokens); the same seed gives the
# same text twice and another seed gives another text.
source test/e2e_lib.sh
need_data
ids() { grep "generated ids:" "$1" | sed 's/.*generated ids: //'; }
gen() { # gen OUT CFG CKPT ARGS... (and the model's extra recipe settings, X)
  local out=$1 cfg=$2 ck=$3; shift 3
  "$MTRAIN" generate --config "$cfg" "${X[@]}" --load "$ck" --prompt "And God said" --max-new-tokens 24 --show-tokens "$@" \
    >"$out.txt" 2>"$out.err" || { cat "$out.err"; fail "generate $* failed"; }
  [ -n "$(ids "$out.err")" ] || { cat "$out.err"; fail "no generated ids ($*)"; }
}
for m in gpt-tiny llama-tiny mixtral-tiny; do
  X=(); [ $m = mixtral-tiny ] && X=(--set model.moe.capacity_factor=0)
  "$MTRAIN" --config configs/$m.yaml "${X[@]}" --train-iters 40 --micro-batch-size 2 --global-batch-size 2 \
    --set logging.eval_interval=0 --set logging.interval=40 --save "$TMP/$m" >"$TMP/$m.log" 2>&1 \
    || { tail "$TMP/$m.log"; fail "$m training failed"; }
  gen "$TMP/$m-greedy-kv" configs/$m.yaml "$TMP/$m" --temperature 0
  gen "$TMP/$m-greedy-full" configs/$m.yaml "$TMP/$m" --temperature 0 --no-kv-cache
  [ "$(ids "$TMP/$m-greedy-kv.err")" = "$(ids "$TMP/$m-greedy-full.err")" ] || fail "$m: greedy KV cache and full recomputation differ"
  S=(--temperature 1 --top-k 40 --top-p 0.95)
  gen "$TMP/$m-s5-kv" configs/$m.yaml "$TMP/$m" "${S[@]}" --seed 5
  gen "$TMP/$m-s5-full" configs/$m.yaml "$TMP/$m" "${S[@]}" --seed 5 --no-kv-cache
  gen "$TMP/$m-s5-again" configs/$m.yaml "$TMP/$m" "${S[@]}" --seed 5
  gen "$TMP/$m-s6" configs/$m.yaml "$TMP/$m" "${S[@]}" --seed 6
  [ "$(ids "$TMP/$m-s5-kv.err")" = "$(ids "$TMP/$m-s5-full.err")" ] || fail "$m: sampled KV cache and full recomputation differ"
  cmp -s "$TMP/$m-s5-kv.txt" "$TMP/$m-s5-again.txt" || fail "$m: the same seed gave another text"
  ! cmp -s "$TMP/$m-s5-kv.txt" "$TMP/$m-s6.txt" || fail "$m: seeds 5 and 6 gave the same text"
  echo "$m: KV cache == full recomputation (greedy and sampled); seed 5: $(head -c 80 "$TMP/$m-s5-kv.txt" | tr '\n' ' ')"
done
# layer variants decode through the same forward: llama-tiny with the per-head qk norm and
# zero-centred gamma, its checkpoint (q_norm_w / k_norm_w by name), both decoders, sampled
X=(--set model.qk_layernorm=true --set model.norm_1p=true)
"$MTRAIN" --config configs/llama-tiny.yaml "${X[@]}" --train-iters 20 --micro-batch-size 2 --global-batch-size 2 \
  --set logging.eval_interval=0 --set logging.interval=20 --save "$TMP/qk" >"$TMP/qk.log" 2>&1 \
  || { tail "$TMP/qk.log"; fail "llama-tiny qk norm training failed"; }
grep -q '"q_norm_w"' "$TMP"/qk/iter_*/manifest.json || fail "the checkpoint manifest has no q_norm_w"
gen "$TMP/qk-kv" configs/llama-tiny.yaml "$TMP/qk" "${S[@]}" --seed 5
gen "$TMP/qk-full" configs/llama-tiny.yaml "$TMP/qk" "${S[@]}" --seed 5 --no-kv-cache
[ "$(ids "$TMP/qk-kv.err")" = "$(ids "$TMP/qk-full.err")" ] || fail "qk norm + 1p: KV cache and full recomputation differ"
echo "llama-tiny qk norm + 1p: KV cache == full recomputation (sampled)"
# the weightless L2 qk norm (--qk-l2-norm): no tensors in the checkpoint, both decoders agree
X=(--qk-l2-norm)
"$MTRAIN" --config configs/llama-tiny.yaml "${X[@]}" --train-iters 4 --micro-batch-size 2 --global-batch-size 2 \
  --set logging.eval_interval=0 --set logging.interval=4 --save "$TMP/l2" >"$TMP/l2.log" 2>&1 \
  || { tail "$TMP/l2.log"; fail "llama-tiny qk L2 norm training failed"; }
! grep -q '"q_norm_w"' "$TMP"/l2/iter_*/manifest.json || fail "the L2 qk norm saved a q_norm_w (it has no weight)"
gen "$TMP/l2-kv" configs/llama-tiny.yaml "$TMP/l2" "${S[@]}" --seed 5
gen "$TMP/l2-full" configs/llama-tiny.yaml "$TMP/l2" "${S[@]}" --seed 5 --no-kv-cache
[ "$(ids "$TMP/l2-kv.err")" = "$(ids "$TMP/l2-full.err")" ] || fail "qk L2 norm: KV cache and full recomputation differ"
echo "llama-tiny qk L2 norm: KV cache == full recomputation (sampled)"
# squared ReLU (--squared-relu): both decoders agree; its checkpoint records model.activation, so
# loading it under the recipe's default gelu is refused, naming the key
X=(--squared-relu)
"$MTRAIN" --config configs/gpt-tiny.yaml "${X[@]}" --train-iters 4 --micro-batch-size 2 --global-batch-size 2 \
  --set logging.eval_interval=0 --set logging.interval=4 --save "$TMP/r2" >"$TMP/r2.log" 2>&1 \
  || { tail "$TMP/r2.log"; fail "gpt-tiny squared ReLU training failed"; }
gen "$TMP/r2-kv" configs/gpt-tiny.yaml "$TMP/r2" "${S[@]}" --seed 5
gen "$TMP/r2-full" configs/gpt-tiny.yaml "$TMP/r2" "${S[@]}" --seed 5 --no-kv-cache
[ "$(ids "$TMP/r2-kv.err")" = "$(ids "$TMP/r2-full.err")" ] || fail "squared ReLU: KV cache and full recomputation differ"
echo "gpt-tiny squared ReLU: KV cache == full recomputation (sampled)"
if "$MTRAIN" generate --config configs/gpt-tiny.yaml --load "$TMP/r2" --prompt "And God said" --max-new-tokens 4 \
  >/dev/null 2>"$TMP/r2-gelu.err"; then
  fail "a squared-ReLU checkpoint loaded under model.activation gelu"
fi
grep -q "model.activation" "$TMP/r2-gelu.err" || { cat "$TMP/r2-gelu.err"; fail "no model.activation in the refusal"; }
echo "refused: $(grep -m1 'model.activation' "$TMP/r2-gelu.err" | cut -c1-160)"
echo "generate: ok"
