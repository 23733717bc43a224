#!/usr/bin/env bash
# test/e2e/faults_import.sh — `mtrain import --format hf` never builds a model other than the one
# the Hugging Face folder describes. From the export of a tiny llama and a tiny gpt save (whose
# unchanged import must succeed), one change each, each refused (exit non-zero) with a message
# naming the field or tensor:
#   llama config.json: rope_theta 500000, rms_norm_eps 1e-6, rms_norm_eps absent (transformers'
#     default 1e-6 differs from the recipe's 1e-5), a llama3, a linear and a yarn rope_scaling, a llama3 or another theta's
#     rope_parameters (transformers' newer RoPE record), hidden_act gelu,
#     attention_bias true;
#   gpt config.json: activation_function relu, layer_norm_epsilon 1e-3,
#     scale_attn_by_inverse_layer_idx true;
#   weights: an extra unknown tensor, a NaN in one weight, a 1-D tensor one element short (its
#     shape printed as [63], not [630]).
# Tiny models (1 layer, hidden 64), one training iteration each: a few seconds.
source test/e2e_lib.sh
source test/hf_lib.sh
need_data
PY=""
for p in python3 /usr/bin/python3; do "$p" -c 'import json, struct' 2>/dev/null && { PY=$p; break; }; done
[ -n "$PY" ] || { echo "SKIP: no python3 for editing the files"; exit 77; }
NET=(--num-layers 1 --hidden-size 64 --seq-length 64 --threads 1 --set logging.eval_interval=0)
export_tiny() { # export_tiny NAME CONFIG
  "$MTRAIN" --config "$2" "${NET[@]}" --train-iters 1 --save "$TMP/$1-ck" >"$TMP/$1-train.log" 2>&1 ||
    { cat "$TMP/$1-train.log"; fail "$1: training failed"; }
  "$MTRAIN" export --load "$TMP/$1-ck" --format hf --output "$TMP/$1-hf" >"$TMP/$1-export.log" 2>&1 ||
    { cat "$TMP/$1-export.log"; fail "$1: export failed"; }
  "$MTRAIN" import --format hf --input "$TMP/$1-hf" --save "$TMP/$1-same" --config "$2" "${NET[@]}" \
    >"$TMP/$1-same.log" 2>&1 || { cat "$TMP/$1-same.log"; fail "$1: the unchanged export does not import"; }
}
# refused NAME CONFIG TEXT EDIT...: a copy of NAME's export, EDIT run on it, imported with CONFIG: refused
refused() {
  local name=$1 cfg=$2; shift 2
  IMPORT=(--config "$cfg" "${NET[@]}")
  hf_refused "$TMP/$name-hf" "$@"
}
export_tiny llama configs/llama-tiny.yaml
export_tiny gpt configs/gpt-tiny.yaml
L=configs/llama-tiny.yaml
refused llama $L "rope_theta is 500000, the recipe" cfg "c['rope_theta'] = 500000.0"
refused llama $L "rms_norm_eps is 1e-06, the recipe" cfg "c['rms_norm_eps'] = 1e-6"
refused llama $L "rms_norm_eps is absent, the recipe" cfg "del c['rms_norm_eps']"
refused llama $L "rope_scaling is Llama 3.x's (rope_type \"llama3\"), the recipe $L computes RoPE without Llama 3.x's frequency scaling (model.rope_scaling)" cfg "c['rope_scaling'] = {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}"
refused llama $L 'hidden_act is "gelu"' cfg "c['hidden_act'] = 'gelu'"
refused llama $L "rope_parameters is Llama 3.x's (rope_type \"llama3\")" cfg "c['rope_parameters'] = {'rope_type': 'llama3', 'factor': 8.0, 'rope_theta': 10000.0}"
refused llama $L "factor is 2, the recipe $L computes 1 (model.rotary_interpolation)" cfg "c['rope_scaling'] = {'rope_type': 'linear', 'factor': 2.0}"
refused llama $L 'rope_scaling.rope_type is "yarn"' cfg "c['rope_scaling'] = {'rope_type': 'yarn', 'factor': 4.0}"
refused llama $L "rope_theta is 500000" cfg "c['rope_parameters'] = {'rope_type': 'default', 'rope_theta': 500000.0}; del c['rope_theta']"
refused llama $L "attention_bias is true" cfg "c['attention_bias'] = True"
G=configs/gpt-tiny.yaml
refused gpt $G 'activation_function is "relu"' cfg "c['activation_function'] = 'relu'"
refused gpt $G "layer_norm_epsilon is 0.001, the recipe" cfg "c['layer_norm_epsilon'] = 1e-3"
refused gpt $G "scale_attn_by_inverse_layer_idx is true" cfg "c['scale_attn_by_inverse_layer_idx'] = True"
refused llama $L "tensor model.layers.0.self_attn.q_norm.weight is not part of the model" add model.layers.0.self_attn.q_norm.weight
refused gpt $G "tensor transformer.h.0.mlp.c_fc.weight holds NaN at element 0" nan transformer.h.0.mlp.c_fc.weight
refused gpt $G "tensor transformer.ln_f.weight has shape [63], expected [64]" shrink transformer.ln_f.weight
echo "PASS: $HF_CASE changed imports refused, the unchanged ones imported"
