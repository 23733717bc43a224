# Acceptance (HF export / import, 2): import(export(checkpoint)) holds the same weights bit for bit
# (the re-export of the import is byte-identical to the first export: every weight that export
# writes, i.e. all of them but the vocabulary padding rows), for gpt-tiny and llama-tiny (GQA,
# untied) saved at tp2 x pp2; and importing into another layout trains on like the original:
# the imported weights at tp 2 against the original save at 1 rank, both weights-only
# (--finetune: fresh optimizer, iteration 0), 8 iterations within the tp equivalence tolerance
# (1e-4 relative on losses, 1e-3 on grad norms; fp32 summation order only). Also the errors: a
# recipe whose shape is not config.json's, a missing tensor, a misshapen tensor, a missing file. And
# Llama 3.x's RoPE scaling: config.json's rope_scaling out and back, refused where the recipe differs.
source test/e2e_lib.sh
need_data
PY=""
for p in python3 /usr/bin/python3; do "$p" -c 'import json, struct' 2>/dev/null && { PY=$p; break; }; done
BASE=(--train-iters 8 --micro-batch-size 1 --set logging.interval=1 --set logging.eval_interval=0)
roundtrip() { # roundtrip NAME CONFIG
  local name=$1 cfg=$2
  "$MTRAIN" launch -n 4 -- --config "$cfg" "${BASE[@]}" --train-iters 4 --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --save "$TMP/$name-ck" >"$TMP/$name-train.log" 2>&1 \
    || { tail -n 20 "$TMP/$name-train.log"; fail "$name: training failed"; }
  "$MTRAIN" export --load "$TMP/$name-ck" --format hf --output "$TMP/$name-hf" >"$TMP/$name-export.log" 2>&1 \
    || { cat "$TMP/$name-export.log"; fail "$name: export failed"; }
  "$MTRAIN" import --format hf --input "$TMP/$name-hf" --save "$TMP/$name-imported" --config "$cfg" \
    >"$TMP/$name-import.log" 2>&1 || { cat "$TMP/$name-import.log"; fail "$name: import failed"; }
  "$MTRAIN" checkpoint inspect "$TMP/$name-imported" >/dev/null || fail "$name: the imported save does not verify"
  "$MTRAIN" export --load "$TMP/$name-imported" --format hf --output "$TMP/$name-hf2" >/dev/null 2>&1 \
    || fail "$name: export of the import failed"
  cmp "$TMP/$name-hf/model.safetensors" "$TMP/$name-hf2/model.safetensors" \
    || fail "$name: export(import(export)) differs from export: the import changed weights"
  cmp "$TMP/$name-hf/config.json" "$TMP/$name-hf2/config.json" || fail "$name: config.json differs after the round trip"
  echo "$name: import of the export re-exports byte for byte ($(stat -c %s "$TMP/$name-hf/model.safetensors") bytes)"
  # training on: the import at tp 2 vs the original save at 1 rank, both from the weights alone
  "$MTRAIN" --config "$cfg" "${BASE[@]}" --load "$TMP/$name-ck" --finetune --metrics "$TMP/$name-orig.jsonl" \
    >"$TMP/$name-orig.log" 2>&1 || { tail "$TMP/$name-orig.log"; fail "$name: training from the original save failed"; }
  "$MTRAIN" launch -n 2 -- --config "$cfg" "${BASE[@]}" --tensor-model-parallel-size 2 --load "$TMP/$name-imported" \
    --finetune --metrics "$TMP/$name-imp.jsonl" >"$TMP/$name-imp.log" 2>&1 \
    || { tail "$TMP/$name-imp.log"; fail "$name: training from the import at tp 2 failed"; }
  grep -q "finetune: starting at iteration 0" "$TMP/$name-imp.log" || fail "$name: the import was not loaded as a finetune"
  compare "$TMP/$name-orig.jsonl" "$TMP/$name-imp.jsonl" "$name: imported at tp 2 vs original" 8 1e-4 1e-3
}
roundtrip gpt configs/gpt-tiny.yaml
roundtrip llama configs/llama-tiny.yaml

# errors: each names what is wrong, exits 1, leaves no save
expect_fail() { # expect_fail NAME NEEDLE ARGS...
  local name=$1 needle=$2; shift 2
  if "$MTRAIN" import --format hf "$@" >"$TMP/$name.log" 2>&1; then cat "$TMP/$name.log"; fail "$name: import succeeded"; fi
  grep -q -- "$needle" "$TMP/$name.log" || { cat "$TMP/$name.log"; fail "$name: no '$needle' in the message"; }
  echo "$name: $(grep -m1 error "$TMP/$name.log" | cut -c1-160)"
}
expect_fail shape "n_layer is 4, the recipe" --input "$TMP/gpt-hf" --save "$TMP/e1" --config configs/gpt-tiny.yaml --num-layers 2
expect_fail arch "model_type is \"gpt2\"" --input "$TMP/gpt-hf" --save "$TMP/e2" --config configs/llama-tiny.yaml
[ ! -e "$TMP/e1" ] && [ ! -e "$TMP/e2" ] || fail "a failed import left a checkpoint folder"
cp -r "$TMP/gpt-hf" "$TMP/bad-missing"; rm "$TMP/bad-missing/model.safetensors"
expect_fail missing-file "model.safetensors: cannot open" --input "$TMP/bad-missing" --save "$TMP/e3" --config configs/gpt-tiny.yaml
if [ -n "$PY" ]; then
  # rename one tensor / change one shape in the safetensors header (same header length)
  edit() { # edit SRC DST OLD NEW: replace a string of the header by one of the same length
    "$PY" - "$1" "$2" "$3" "$4" <<'PYEOF'
import struct, sys
src, dst, old, new = sys.argv[1:]
b = open(src, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = b[8:8 + n].decode()
assert old in h and len(old) == len(new), (old, new)
open(dst, 'wb').write(b[:8] + h.replace(old, new, 1).encode() + b[8 + n:])
PYEOF
  }
  cp -r "$TMP/gpt-hf" "$TMP/bad-name"
  edit "$TMP/gpt-hf/model.safetensors" "$TMP/bad-name/model.safetensors" "transformer.h.1.attn.c_proj.weight" "transformer.h.1.attn.c_proj.weighX"
  expect_fail missing-tensor "no tensor transformer.h.1.attn.c_proj.weight" --input "$TMP/bad-name" --save "$TMP/e4" --config configs/gpt-tiny.yaml
else
  echo "SKIP: no python3 for the header edits (missing / misshapen tensor cases)"
fi
# squared ReLU (--squared-relu) exports as GPT-2 with activation_function "relu2"; the import takes it
# back under a squared-ReLU recipe and refuses it under gelu, naming the key
"$MTRAIN" --config configs/gpt-tiny.yaml --squared-relu "${BASE[@]}" --train-iters 1 --save "$TMP/r2-ck" \
  >"$TMP/r2-train.log" 2>&1 || { tail "$TMP/r2-train.log"; fail "squared ReLU: training failed"; }
"$MTRAIN" export --load "$TMP/r2-ck" --format hf --output "$TMP/r2-hf" >"$TMP/r2-export.log" 2>&1 \
  || { cat "$TMP/r2-export.log"; fail "squared ReLU: export failed"; }
grep -q '"activation_function": "relu2"' "$TMP/r2-hf/config.json" || fail "squared ReLU: config.json without relu2"
"$MTRAIN" import --format hf --input "$TMP/r2-hf" --save "$TMP/r2-imported" --config configs/gpt-tiny.yaml \
  --squared-relu >"$TMP/r2-import.log" 2>&1 || { cat "$TMP/r2-import.log"; fail "squared ReLU: import failed"; }
"$MTRAIN" checkpoint inspect "$TMP/r2-imported" >/dev/null || fail "squared ReLU: the imported save does not verify"
echo "squared ReLU: exported as relu2 and imported back"
expect_fail relu2-as-gelu "model.activation" --input "$TMP/r2-hf" --save "$TMP/e5" --config configs/gpt-tiny.yaml
# Llama 3.x's RoPE scaling (--use-rope-scaling) exports as config.json's rope_scaling {rope_type llama3, ...}
# as Llama 3.1's; the import takes it back under the same recipe and refuses it without the scaling or with
# another factor, naming the key; another rope_type (yarn) is refused as a model mtrain does not compute
RS=(--use-rope-scaling --rope-scaling-factor 4 --set model.rope_original_max_position=32)
"$MTRAIN" --config configs/llama-tiny.yaml "${RS[@]}" "${BASE[@]}" --train-iters 1 --save "$TMP/rs-ck" \
  >"$TMP/rs-train.log" 2>&1 || { tail "$TMP/rs-train.log"; fail "rope scaling: training failed"; }
"$MTRAIN" export --load "$TMP/rs-ck" --format hf --output "$TMP/rs-hf" >"$TMP/rs-export.log" 2>&1 \
  || { cat "$TMP/rs-export.log"; fail "rope scaling: export failed"; }
if [ -n "$PY" ]; then
  "$PY" - "$TMP/rs-hf/config.json" <<'PYEOF' || fail "rope scaling: config.json's rope_scaling is not Llama 3.1's form"
import json, sys
rs = json.load(open(sys.argv[1]))["rope_scaling"]
want = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32}
assert rs == want and isinstance(rs["factor"], float), rs
PYEOF
fi
"$MTRAIN" import --format hf --input "$TMP/rs-hf" --save "$TMP/rs-imported" --config configs/llama-tiny.yaml "${RS[@]}" \
  >"$TMP/rs-import.log" 2>&1 || { cat "$TMP/rs-import.log"; fail "rope scaling: import failed"; }
"$MTRAIN" export --load "$TMP/rs-imported" --format hf --output "$TMP/rs-hf2" >/dev/null 2>&1 || fail "rope scaling: re-export failed"
cmp "$TMP/rs-hf/config.json" "$TMP/rs-hf2/config.json" && cmp "$TMP/rs-hf/model.safetensors" "$TMP/rs-hf2/model.safetensors" \
  || fail "rope scaling: export(import(export)) differs"
echo "rope scaling: exported as rope_type llama3 and imported back byte for byte"
expect_fail rs-unscaled "model.rope_scaling" --input "$TMP/rs-hf" --save "$TMP/e6" --config configs/llama-tiny.yaml
expect_fail rs-factor "model.rope_scaling_factor" --input "$TMP/rs-hf" --save "$TMP/e7" --config configs/llama-tiny.yaml \
  --use-rope-scaling --set model.rope_original_max_position=32
cp -r "$TMP/rs-hf" "$TMP/rs-yarn"
sed -i 's/"rope_type": "llama3"/"rope_type": "yarn"/' "$TMP/rs-yarn/config.json"
expect_fail rs-yarn 'rope_type is "yarn"' --input "$TMP/rs-yarn" --save "$TMP/e8" --config configs/llama-tiny.yaml "${RS[@]}"
[ ! -e "$TMP/e6" ] && [ ! -e "$TMP/e7" ] && [ ! -e "$TMP/e8" ] || fail "a failed import left a checkpoint folder"
# biases on q / k / v alone (--add-qkv-bias, Qwen2 / Qwen2.5) export as Qwen2ForCausalLM (q_proj / k_proj /
# v_proj biases, none on o_proj or the MLP) and import back; a Llama recipe is refused naming model.qkv_bias
"$MTRAIN" --config configs/llama-tiny.yaml --add-qkv-bias "${BASE[@]}" --train-iters 1 --save "$TMP/qw-ck" \
  >"$TMP/qw-train.log" 2>&1 || { tail "$TMP/qw-train.log"; fail "qkv bias: training failed"; }
"$MTRAIN" export --load "$TMP/qw-ck" --format hf --output "$TMP/qw-hf" >"$TMP/qw-export.log" 2>&1 \
  || { cat "$TMP/qw-export.log"; fail "qkv bias: export failed"; }
grep -q '"model_type": "qwen2"' "$TMP/qw-hf/config.json" || fail "qkv bias: config.json is not Qwen2's"
"$MTRAIN" import --format hf --input "$TMP/qw-hf" --save "$TMP/qw-imported" --config configs/llama-tiny.yaml --add-qkv-bias \
  >"$TMP/qw-import.log" 2>&1 || { cat "$TMP/qw-import.log"; fail "qkv bias: import failed"; }
"$MTRAIN" export --load "$TMP/qw-imported" --format hf --output "$TMP/qw-hf2" >/dev/null 2>&1 || fail "qkv bias: re-export failed"
cmp "$TMP/qw-hf/model.safetensors" "$TMP/qw-hf2/model.safetensors" || fail "qkv bias: export(import(export)) differs"
echo "qkv bias: exported as Qwen2ForCausalLM and imported back byte for byte"
expect_fail qw-as-llama "model.qkv_bias" --input "$TMP/qw-hf" --save "$TMP/e9" --config configs/llama-tiny.yaml
echo "hf import: ok"
