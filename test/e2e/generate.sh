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
# variant_kv NAME CFG ITERS WHAT: train CFG with the variant's settings X for ITERS iterations into
# $TMP/NAME, then the KV-cache decoder and full recomputation give the same sampled ids
variant_kv() {
  local name=$1 cfg=$2 iters=$3 what=$4
  "$MTRAIN" --config "$cfg" "${X[@]}" --train-iters "$iters" --micro-batch-size 2 --global-batch-size 2 \
    --set logging.eval_interval=0 --set logging.interval="$iters" --save "$TMP/$name" >"$TMP/$name.log" 2>&1 \
    || { tail "$TMP/$name.log"; fail "$what training failed"; }
  gen "$TMP/$name-kv" "$cfg" "$TMP/$name" "${S[@]}" --seed 5
  gen "$TMP/$name-full" "$cfg" "$TMP/$name" "${S[@]}" --seed 5 --no-kv-cache
  [ "$(ids "$TMP/$name-kv.err")" = "$(ids "$TMP/$name-full.err")" ] || fail "$what: KV cache and full recomputation differ"
  echo "$what: KV cache == full recomputation (sampled)"
}
# layer variants decode through the same forward: llama-tiny with the per-head qk norm and
# zero-centred gamma, its checkpoint (q_norm_w / k_norm_w by name), both decoders, sampled
X=(--set model.qk_layernorm=true --set model.norm_1p=true)
variant_kv qk configs/llama-tiny.yaml 20 "llama-tiny qk norm + 1p"
grep -q '"q_norm_w"' "$TMP"/qk/iter_*/manifest.json || fail "the checkpoint manifest has no q_norm_w"
# the weightless L2 qk norm (--qk-l2-norm): no tensors in the checkpoint, both decoders agree
X=(--qk-l2-norm)
variant_kv l2 configs/llama-tiny.yaml 4 "llama-tiny qk L2 norm"
! grep -q '"q_norm_w"' "$TMP"/l2/iter_*/manifest.json || fail "the L2 qk norm saved a q_norm_w (it has no weight)"
# a weightless variant has no tensor to miss: its key (MT_KF_FUNCTION in the key table) is compared
# with the save's, so generating without --qk-l2-norm is refused, naming the key
if "$MTRAIN" generate --config configs/llama-tiny.yaml --load "$TMP/l2" --prompt "And God said" --max-new-tokens 2 \
  >/dev/null 2>"$TMP/l2-off.err"; then
  fail "a qk-l2-norm checkpoint generated without model.qk_l2_norm"
fi
grep -q "model.qk_l2_norm" "$TMP/l2-off.err" || { cat "$TMP/l2-off.err"; fail "no model.qk_l2_norm in the refusal"; }
# squared ReLU (--squared-relu): both decoders agree; its checkpoint records model.activation, so
# loading it under the recipe's default gelu is refused, naming the key
X=(--squared-relu)
variant_kv r2 configs/gpt-tiny.yaml 4 "gpt-tiny squared ReLU"
if "$MTRAIN" generate --config configs/gpt-tiny.yaml --load "$TMP/r2" --prompt "And God said" --max-new-tokens 4 \
  >/dev/null 2>"$TMP/r2-gelu.err"; then
  fail "a squared-ReLU checkpoint loaded under model.activation gelu"
fi
grep -q "model.activation" "$TMP/r2-gelu.err" || { cat "$TMP/r2-gelu.err"; fail "no model.activation in the refusal"; }
echo "refused: $(grep -m1 'model.activation' "$TMP/r2-gelu.err" | cut -c1-160)"
# muP (--use-mup: m = 4, so the logits times 1/4; the embedding output times 2; the softmax scale
# sqrt(400) / head_dim^0 = 20, large so that the attention is peaked after 4 steps: a decoder that
# kept 1/sqrt(head_dim) sampled other tokens): both decoders apply the same multipliers
X=(--use-mup --mup-base-hidden-size 32 --mup-embedding-mult 2 --mup-base-head-dim 400 --mup-attn-scale-power 0)
variant_kv mup configs/gpt-tiny.yaml 4 "gpt-tiny muP"
# multi-latent attention: its qkv (zero-padded heads) goes through the same cache; YaRN (factor 4,
# mscale 0.7) with the latents' norms on gpt-tiny, both decoders, sampled and greedy
X=(--multi-latent-attention --q-lora-rank 48 --kv-lora-rank 32 --qk-head-dim 24 --qk-pos-emb-head-dim 8
  --v-head-dim 16 --qk-layernorm --rotary-scaling-factor 4 --mscale 0.7)
variant_kv mla configs/gpt-tiny.yaml 8 "gpt-tiny MLA (YaRN)"
grep -q '"kv_up_w"' "$TMP"/mla/iter_*/manifest.json || fail "the MLA checkpoint manifest has no kv_up_w"
gen "$TMP/mla-g-kv" configs/gpt-tiny.yaml "$TMP/mla" --temperature 0
gen "$TMP/mla-g-full" configs/gpt-tiny.yaml "$TMP/mla" --temperature 0 --no-kv-cache
[ "$(ids "$TMP/mla-g-kv.err")" = "$(ids "$TMP/mla-g-full.err")" ] || fail "MLA greedy: KV cache and full recomputation differ"
echo "generate: ok"
