# Acceptance: mixture-of-experts models through the Hugging Face chain as MixtralForCausalLM.
# A shrunk mixtral-tiny (2 layers, hidden 64, 4 experts of width 64, top-2; capacity factor 0.25 in
# training, so that a scorer that kept the capacity rule would drop assignments: measured 3e-2 off
# the reference) is trained at ep 2 x tp 2 with the distributed optimizer (4 ranks) and at pp 2, then:
#   - exported (fp32; bf16 in 40 KB shards + index: every bf16 tensor == round-to-nearest-even of the
#     fp32 one), and the NumPy reference test/ref/hf_logprobs.py (float64, Mixtral's forward from
#     the HF files alone: softmax router over all experts, top-2, renormalised, SwiGLU experts)
#     gives the per-token log-probabilities `mtrain logprobs` gives on configs/golden_prompts.jsonl
#     (the golden-prompt gate, `mtrain logprobs --compare`), within 1e-4 (fp32 against
#     float64; measured 4e-7), for the save of each layout; mtrain logprobs at ep 2 x tp 2 and at
#     pp 2 equals its 1-rank score within 1e-5 (fp32 summation order only). Scoring is dropless.
#   - export -> import -> export is byte-identical (weights and config.json); fine-tuning from the
#     import at ep 2 gives the losses of fine-tuning from the original save at 1 rank (8 iterations,
#     the equivalence tolerance: 1e-4 relative on losses, 1e-3 on grad norms).
#   - generate: the KV cache and full recomputation give the same greedy ids, and so does the
#     reference's greedy decode of the export.
#   - broken Mixtral folders are refused naming what is wrong, nothing written: the expert count of
#     config.json not the recipe's, a missing expert tensor, an extra expert, a router of another
#     kind (scoring_func sigmoid, norm_topk_prob false), shared experts, a sliding window, another
#     RoPE in transformers' rope_parameters (which, at the recipe's theta, imports); and the
#     export of a model Mixtral cannot express (moe.pre_softmax) is refused naming the key.
# Shared experts with their gate (model.moe.shared_ffn 96, shared_gate, q / k / v biases) trained at ep 2 x tp 2
# export as Qwen2MoeForCausalLM (config.json fields, tensor names and shapes) and the reference's Qwen2-MoE
# forward gives mtrain's log-probabilities within 1e-4 (measured 4e-7; without the shared expert in the
# reference 4e-2 off, without its gate 3e-2); ungated shared experts are refused naming model.moe.shared_gate.
source test/e2e_lib.sh
source test/hf_lib.sh
need_data
numpy_python
[ -n "$PY" ] || fail "numpy is missing (python3 and /usr/bin/python3): install Debian's python3-numpy (scripts/install-deps.sh)"
T0=$(date +%s.%N)
CFG=configs/mixtral-tiny.yaml
NET=(--config $CFG --num-layers 2 --hidden-size 64 --set model.ffn_hidden=64 --set model.moe.experts=4
     --set model.moe.capacity_factor=0.25 --set logging.eval_interval=0)
TRAIN=(--train-iters 3 --micro-batch-size 1 --global-batch-size 2 --lr 3e-3 --set optimizer.warmup_iters=0)
PROMPTS=configs/golden_prompts.jsonl

run train-eptp "$MTRAIN" launch -n 4 -- "${NET[@]}" "${TRAIN[@]}" --tensor-model-parallel-size 2 \
  --expert-model-parallel-size 2 --use-distributed-optimizer --save "$TMP/eptp"
grep -q "tp 2" "$TMP/train-eptp.log" || fail "training did not run at tp 2"
run train-pp "$MTRAIN" launch -n 2 -- "${NET[@]}" "${TRAIN[@]}" --pipeline-model-parallel-size 2 --save "$TMP/pp"
T1=$(date +%s.%N)

# --- export, fp32 and bf16 shards ---
run export-eptp "$MTRAIN" export --load "$TMP/eptp" --format hf --output "$TMP/hf"
grep -q "dropless" "$TMP/export-eptp.log" || { cat "$TMP/export-eptp.log"; fail "no note that Mixtral routes dropless"; }
run export-bf16 "$MTRAIN" export --load "$TMP/eptp" --format hf --output "$TMP/hf16" --dtype bf16 --max-shard-size 40KB
"$PY" - "$TMP/hf" "$TMP/hf16" <<'EOF' || fail "the exported folders"
import json, os, sys
sys.path.insert(0, 'test/ref')
import numpy as np
from hf_logprobs import load_model_dir
c, t = load_model_dir(sys.argv[1])
want = {'architectures': ['MixtralForCausalLM'], 'model_type': 'mixtral', 'num_local_experts': 4,
        'num_experts_per_tok': 2, 'hidden_size': 64, 'intermediate_size': 64, 'num_hidden_layers': 2,
        'num_attention_heads': 4, 'num_key_value_heads': 2, 'head_dim': 16, 'rms_norm_eps': 1e-5,
        'rope_theta': 10000.0, 'sliding_window': None, 'router_jitter_noise': 0.0, 'router_aux_loss_coef': 0.01,
        'tie_word_embeddings': False, 'hidden_act': 'silu', 'torch_dtype': 'float32'}
for k, v in want.items():
    assert c.get(k, '<missing>') == v, f'config.json {k}: {c.get(k, "<missing>")!r}, expected {v!r}'
names = {'model.embed_tokens.weight': (257, 64), 'model.norm.weight': (64,), 'lm_head.weight': (257, 64)}
for l in range(2):
    p = f'model.layers.{l}.'
    names.update({p + 'input_layernorm.weight': (64,), p + 'post_attention_layernorm.weight': (64,),
                  p + 'self_attn.q_proj.weight': (64, 64), p + 'self_attn.k_proj.weight': (32, 64),
                  p + 'self_attn.v_proj.weight': (32, 64), p + 'self_attn.o_proj.weight': (64, 64),
                  p + 'block_sparse_moe.gate.weight': (4, 64)})
    for e in range(4):
        q = p + f'block_sparse_moe.experts.{e}.'
        names.update({q + 'w1.weight': (64, 64), q + 'w3.weight': (64, 64), q + 'w2.weight': (64, 64)})
assert {k: v[1] for k, v in t.items()} == names, f'tensors: {sorted(set(t) ^ set(names))}'
assert all(v[0] == 'F32' for v in t.values())
c16, t16 = load_model_dir(sys.argv[2])
assert c16['torch_dtype'] == 'bfloat16' and set(t16) == set(t)
wm = json.load(open(os.path.join(sys.argv[2], 'model.safetensors.index.json')))['weight_map']
assert set(wm) == set(t) and len(set(wm.values())) >= 3, 'index'
for k, (dt, shape, raw) in t.items():
    u = raw.astype(np.float32).view(np.uint32).astype(np.uint64)
    rne = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert t16[k][0] == 'BF16' and np.array_equal(t16[k][2], rne), f'{k}: bf16 is not the rounded fp32'
print(f'export: {len(t)} tensors as MixtralForCausalLM; bf16 in {len(set(wm.values()))} shards == RNE(fp32)')
EOF

# --- logprobs: mtrain in each layout, and the reference of the export ---
LP=(logprobs "${NET[@]}" --prompts "$PROMPTS")
run lp-eptp-1 "$MTRAIN" "${LP[@]}" --load "$TMP/eptp" --output "$TMP/eptp.1.jsonl"
grep -q "dropless" "$TMP/lp-eptp-1.log" || { cat "$TMP/lp-eptp-1.log"; fail "mtrain logprobs does not say it routes dropless"; }
run lp-eptp-4 "$MTRAIN" launch -n 4 -- "${LP[@]}" --load "$TMP/eptp" --output "$TMP/eptp.4.jsonl" \
  --tensor-model-parallel-size 2 --expert-model-parallel-size 2
within "ep 2 x tp 2 save: 1 rank vs ep 2 x tp 2" "$TMP/eptp.1.jsonl" "$TMP/eptp.4.jsonl" 1e-5
run ref-eptp "$PY" test/ref/hf_logprobs.py "$TMP/hf" "$TMP/eptp.1.jsonl" "$TMP/eptp.ref.jsonl"
within "ep 2 x tp 2 save: mtrain vs NumPy reference of the export" "$TMP/eptp.1.jsonl" "$TMP/eptp.ref.jsonl" 1e-4
run export-pp "$MTRAIN" export --load "$TMP/pp" --format hf --output "$TMP/hfpp"
run lp-pp-1 "$MTRAIN" "${LP[@]}" --load "$TMP/pp" --output "$TMP/pp.1.jsonl"
run lp-pp-2 "$MTRAIN" launch -n 2 -- "${LP[@]}" --load "$TMP/pp" --output "$TMP/pp.2.jsonl" --pipeline-model-parallel-size 2
within "pp 2 save: 1 rank vs pp 2" "$TMP/pp.1.jsonl" "$TMP/pp.2.jsonl" 1e-5
run ref-pp "$PY" test/ref/hf_logprobs.py "$TMP/hfpp" "$TMP/pp.1.jsonl" "$TMP/pp.ref.jsonl"
within "pp 2 save: mtrain vs NumPy reference of the export" "$TMP/pp.1.jsonl" "$TMP/pp.ref.jsonl" 1e-4
T2=$(date +%s.%N)

# --- export -> import -> export, and fine-tuning from the import in another layout ---
run import "$MTRAIN" import --format hf --input "$TMP/hf" --save "$TMP/imported" "${NET[@]}"
run export-imp "$MTRAIN" export --load "$TMP/imported" --format hf --output "$TMP/hf2"
cmp "$TMP/hf/model.safetensors" "$TMP/hf2/model.safetensors" || fail "export(import(export)) differs from the export"
cmp "$TMP/hf/config.json" "$TMP/hf2/config.json" || fail "config.json differs after the round trip"
echo "import of the export re-exports byte for byte ($(stat -c %s "$TMP/hf/model.safetensors") bytes)"
FT=(--train-iters 8 --micro-batch-size 1 --global-batch-size 2 --set logging.interval=1 --finetune)
run ft-orig "$MTRAIN" "${NET[@]}" "${FT[@]}" --load "$TMP/eptp" --metrics "$TMP/ft-orig.jsonl"
run ft-imp "$MTRAIN" launch -n 2 -- "${NET[@]}" "${FT[@]}" --expert-model-parallel-size 2 --load "$TMP/imported" \
  --metrics "$TMP/ft-imp.jsonl"
compare "$TMP/ft-orig.jsonl" "$TMP/ft-imp.jsonl" "fine-tuning: the import at ep 2 vs the original save at 1 rank" 8 1e-4 1e-3
T3=$(date +%s.%N)

# --- generation: KV cache, full recomputation, the reference's greedy decode ---
ids() { grep "$2 ids:" "$1" | sed "s/.*$2 ids: *//"; }
G=(generate "${NET[@]}" --load "$TMP/eptp" --prompt "And God said" --max-new-tokens 16 --temperature 0 --show-tokens)
"$MTRAIN" "${G[@]}" >"$TMP/gen-kv.txt" 2>"$TMP/gen-kv.err" || { cat "$TMP/gen-kv.err"; fail "generate (KV cache)"; }
"$MTRAIN" "${G[@]}" --no-kv-cache >"$TMP/gen-full.txt" 2>"$TMP/gen-full.err" || { cat "$TMP/gen-full.err"; fail "generate"; }
kv=$(ids "$TMP/gen-kv.err" generated); full=$(ids "$TMP/gen-full.err" generated); prompt=$(ids "$TMP/gen-kv.err" prompt)
[ -n "$kv" ] && [ "$kv" = "$full" ] || fail "greedy KV cache ($kv) and full recomputation ($full) differ"
echo "{\"prompt_tokens\": [$(echo $prompt | tr ' ' ',')]}" >"$TMP/gen-prompt.jsonl"
run ref-greedy "$PY" test/ref/hf_logprobs.py --greedy 16 "$TMP/hf" "$TMP/gen-prompt.jsonl" "$TMP/gen-ref.jsonl"
# equal ids, or (fp32 against float64) a first difference where the reference's top two logits are
# within 1e-4 of each other: a near-tie, not a wrong model
"$PY" - "$TMP/gen-ref.jsonl" "$kv" <<'EOF' || fail "mtrain's greedy ids differ from the reference's"
import json, sys
r = json.load(open(sys.argv[1]))
got = [int(x) for x in sys.argv[2].split()]
ref, margins = r["tokens"], r["margins"]
k = next((i for i in range(min(len(got), len(ref))) if got[i] != ref[i]), None)
if k is None and len(got) == len(ref):
    print(f'generate: KV cache == full recomputation == reference greedy decode: {got}')
elif k is not None and margins[k] < 1e-4:
    print(f'generate: mtrain and the reference part at token {k} on a near-tie (margin {margins[k]:.1e}): {got} / {ref}')
else:
    sys.exit(f'mtrain {got} vs reference {ref}: first difference at {k} (reference margin {margins[k] if k is not None else "-"})')
EOF

# --- broken folders: refused by name, nothing written ---
IMPORT=("${NET[@]}")
refused() { hf_refused "$TMP/hf" "$@"; }
refused "num_local_experts is 8, the recipe" cfg "c['num_local_experts'] = 8"
refused "num_experts_per_tok is 1, the recipe" cfg "c['num_experts_per_tok'] = 1"
refused 'scoring_func is "sigmoid"' cfg "c['scoring_func'] = 'sigmoid'"
refused "norm_topk_prob is false" cfg "c['norm_topk_prob'] = False"
refused "n_shared_experts is 2" cfg "c['n_shared_experts'] = 2"
refused "sliding_window is 16" cfg "c['sliding_window'] = 16"
refused "rope_theta is 500000, the recipe" \
  cfg "c['rope_parameters'] = {'rope_type': 'default', 'rope_theta': 500000.0}; del c['rope_theta']"
refused 'rope_type is "yarn"' cfg "c['rope_parameters'] = {'rope_type': 'yarn', 'factor': 4.0, 'rope_theta': 10000.0}"
# transformers' newer form of the same model imports: rope_parameters in place of rope_theta
cp -r "$TMP/hf" "$TMP/hf-rp"
"$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['rope_parameters'] = {'rope_type': 'default',
  'rope_theta': c.pop('rope_theta')}; json.dump(c, open(p, 'w'))" "$TMP/hf-rp/config.json"
run import-rp "$MTRAIN" import --format hf --input "$TMP/hf-rp" --save "$TMP/imported-rp" "${NET[@]}"
refused "no tensor model.layers.1.block_sparse_moe.experts.3.w2.weight" rename \
  model.layers.1.block_sparse_moe.experts.3.w2.weight model.layers.1.block_sparse_moe.experts.3.wX.weight
refused "tensor model.layers.0.block_sparse_moe.experts.4.w1.weight is not part of the model" add \
  model.layers.0.block_sparse_moe.experts.4.w1.weight
run train-pre "$MTRAIN" "${NET[@]}" --train-iters 1 --micro-batch-size 1 --global-batch-size 1 \
  --set model.moe.pre_softmax=true --save "$TMP/pre"
rc=0; "$MTRAIN" export --load "$TMP/pre" --format hf --output "$TMP/hfpre" >"$TMP/pre-export.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "model.moe.pre_softmax" "$TMP/pre-export.log" && grep -q "MixtralForCausalLM cannot express" \
  "$TMP/pre-export.log" && [ ! -e "$TMP/hfpre" ] && [ ! -e "$TMP/hfpre.tmp" ] \
  || { cat "$TMP/pre-export.log"; fail "export of a pre-softmax router: exit $rc, expected 1 naming model.moe.pre_softmax"; }
echo "refused export: $(grep -m1 error "$TMP/pre-export.log" | cut -c1-200)"
# --- shared experts with their gate: Qwen2MoeForCausalLM (q / k / v biases, norm_topk_prob true) ---
QNET=("${NET[@]}" --set model.moe.shared_ffn=96 --set model.moe.shared_gate=true --set model.qkv_bias=true)
run train-q "$MTRAIN" launch -n 4 -- "${QNET[@]}" "${TRAIN[@]}" --tensor-model-parallel-size 2 \
  --expert-model-parallel-size 2 --use-distributed-optimizer --save "$TMP/q"
run export-q "$MTRAIN" export --load "$TMP/q" --format hf --output "$TMP/hfq"
"$PY" - "$TMP/hfq" <<'EOF' || fail "the Qwen2-MoE export"
import sys
sys.path.insert(0, 'test/ref')
from hf_logprobs import load_model_dir
c, t = load_model_dir(sys.argv[1])
want = {'architectures': ['Qwen2MoeForCausalLM'], 'model_type': 'qwen2_moe', 'num_experts': 4, 'num_experts_per_tok': 2,
        'moe_intermediate_size': 64, 'shared_expert_intermediate_size': 96, 'norm_topk_prob': True, 'qkv_bias': True,
        'decoder_sparse_step': 1, 'mlp_only_layers': [], 'use_sliding_window': False, 'tie_word_embeddings': False}
for k, v in want.items():
    assert c.get(k, '<missing>') == v, f'config.json {k}: {c.get(k, "<missing>")!r}, expected {v!r}'
p = 'model.layers.1.mlp.'
shapes = {p + 'gate.weight': (4, 64), p + 'experts.3.gate_proj.weight': (64, 64), p + 'experts.3.down_proj.weight': (64, 64),
          p + 'shared_expert.gate_proj.weight': (96, 64), p + 'shared_expert.up_proj.weight': (96, 64),
          p + 'shared_expert.down_proj.weight': (64, 96), p + 'shared_expert_gate.weight': (1, 64),
          'model.layers.1.self_attn.k_proj.bias': (32,)}
for k, v in shapes.items():
    assert k in t and t[k][1] == v, f'{k}: {t[k][1] if k in t else "missing"}, expected {v}'
assert len(t) == 3 + 2 * (9 + 1 + 4 * 3 + 4), f'{len(t)} tensors'  # per layer: attention and norms 9, router, experts, shared
print(f'export: {len(t)} tensors as Qwen2MoeForCausalLM')
EOF
run lp-q "$MTRAIN" logprobs "${QNET[@]}" --prompts "$PROMPTS" --load "$TMP/q" --output "$TMP/q.1.jsonl"
run ref-q "$PY" test/ref/hf_logprobs.py "$TMP/hfq" "$TMP/q.1.jsonl" "$TMP/q.ref.jsonl"
within "shared experts, ep 2 x tp 2 save: mtrain vs NumPy reference of the Qwen2-MoE export" "$TMP/q.1.jsonl" \
  "$TMP/q.ref.jsonl" 1e-4
# ... and back: export -> import -> export byte for byte (weights and config.json)
run import-q "$MTRAIN" import --format hf --input "$TMP/hfq" --save "$TMP/q-imported" "${QNET[@]}"
run export-q2 "$MTRAIN" export --load "$TMP/q-imported" --format hf --output "$TMP/hfq2"
cmp "$TMP/hfq/model.safetensors" "$TMP/hfq2/model.safetensors" || fail "Qwen2-MoE: export(import(export)) differs"
cmp "$TMP/hfq/config.json" "$TMP/hfq2/config.json" || fail "Qwen2-MoE: config.json differs after the round trip"
echo "Qwen2-MoE: import of the export re-exports byte for byte ($(stat -c %s "$TMP/hfq/model.safetensors") bytes)"
# a Qwen2-MoE folder with another shared width: refused naming the key
"$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['shared_expert_intermediate_size'] = 48
json.dump(c, open(p, 'w'))" "$TMP/hfq2/config.json"
rc=0; "$MTRAIN" import --format hf --input "$TMP/hfq2" --save "$TMP/q-bad" "${QNET[@]}" >"$TMP/q-bad.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "shared_expert_intermediate_size" "$TMP/q-bad.log" && grep -q "model.moe.shared_ffn" "$TMP/q-bad.log" &&
  [ ! -e "$TMP/q-bad" ] || { cat "$TMP/q-bad.log"; fail "Qwen2-MoE import with another shared width: exit $rc"; }
echo "refused import: $(grep -m1 error "$TMP/q-bad.log" | cut -c1-200)"
run train-qng "$MTRAIN" "${NET[@]}" --train-iters 1 --micro-batch-size 1 --global-batch-size 1 \
  --set model.moe.shared_ffn=96 --save "$TMP/qng"
rc=0; "$MTRAIN" export --load "$TMP/qng" --format hf --output "$TMP/hfqng" >"$TMP/qng-export.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "model.moe.shared_gate" "$TMP/qng-export.log" && [ ! -e "$TMP/hfqng" ] \
  || { cat "$TMP/qng-export.log"; fail "export of ungated shared experts: exit $rc, expected 1 naming model.moe.shared_gate"; }
echo "refused export: $(grep -m1 error "$TMP/qng-export.log" | cut -c1-200)"
T4=$(date +%s.%N)
awk -v a="$T0" -v b="$T1" -v c="$T2" -v d="$T3" -v e="$T4" 'BEGIN{printf "moe_hf: ok (training %.1f s, export + logprobs %.1f s, round trip + fine-tuning %.1f s, generate + errors %.1f s)\n", b-a, c-b, d-c, e-d}'
