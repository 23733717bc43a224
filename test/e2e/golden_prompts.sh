# Acceptance: `mtrain logprobs` on a sharded checkpoint, against itself across layouts and against
# an independent NumPy reference of the Hugging Face export.
#   For gpt-tiny, llama-tiny (GQA: 4 query / 2 kv heads) and llama-tiny with q / k / v biases and Llama
#   3.x's RoPE scaling (Qwen2ForCausalLM, rope_scaling llama3): train 20 iterations at tp 2 x pp 2
#   (4 ranks, --save), then score configs/golden_prompts.jsonl (10 prompts + completions) with
#   `mtrain logprobs` on 1 rank and under `mtrain launch -n 2` at tp 2 (and gpt at tp 2 x pp 2 +
#   SP on 4 ranks): the same per-token logprobs within 1e-5 (only the order of fp32 sums differs;
#   measured ~5e-7).
#   Then `mtrain export --format hf` of that checkpoint, test/ref/hf_logprobs.py (float64 NumPy,
#   written from transformers' GPT2LMHeadModel / LlamaForCausalLM, reading the safetensors file
#   itself) on the export with mtrain's token ids: max |difference| < 1e-4 (fp32 against float64;
#   measured ~1e-6 with a stand-in exporter). And the gate must catch the classic converter bug:
#   the export with two attention heads of layer 0 swapped in q/k/v (not in the output
#   projection) must fail `--compare` (measured 2e-2 gpt, 4e-1 llama).
#   Also the errors: a sequence longer than model.seq_length + 1, no --load, files that do not
#   score the same text.
# Until `mtrain export` exists (it says "not implemented yet") the export part is skipped and the
# test exits 77 (skip) after the mtrain-only checks.
source test/e2e_lib.sh
source test/hf_lib.sh
need_data
PROMPTS=configs/golden_prompts.jsonl
[ "$(grep -c . "$PROMPTS")" -eq 10 ] || fail "$PROMPTS: expected 10 prompts"
numpy_python # NumPy for the reference: the first python3 on PATH that has it, else Debian's
TRAIN=(--train-iters 20 --micro-batch-size 1 --global-batch-size 4 --lr 3e-3 --set optimizer.warmup_iters=0
       --set logging.interval=1 --set logging.eval_interval=0)
export_missing=0

model() { # model NAME CONFIG [FLAG...]: the flags change the model (its training and scoring alike)
  local name=$1 cfg=$2 ck="$TMP/$1.ckpt" t0
  shift 2
  t0=$(date +%s.%N)
  run "$name-train" "$MTRAIN" launch -n 4 -- --config "$cfg" "$@" "${TRAIN[@]}" --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --save "$ck"
  grep -q "tp 2, pp 2" "$TMP/$name-train.log" || fail "$name: training did not run at tp 2 x pp 2"
  local L=(logprobs --config "$cfg" "$@" --load "$ck" --prompts "$PROMPTS")
  run "$name-lp1" "$MTRAIN" "${L[@]}" --output "$TMP/$name.1.jsonl"
  run "$name-lp2" "$MTRAIN" launch -n 2 -- "${L[@]}" --output "$TMP/$name.tp2.jsonl" --tensor-model-parallel-size 2
  grep -q "2 ranks: tp 2, pp 1" "$TMP/$name-lp2.log" || { cat "$TMP/$name-lp2.log"; fail "$name: logprobs did not run at tp 2"; }
  [ "$(grep -c '"logprobs": \[' "$TMP/$name.1.jsonl")" -eq 10 ] || fail "$name: expected 10 scored lines"
  within "$name 1 rank vs tp 2" "$TMP/$name.1.jsonl" "$TMP/$name.tp2.jsonl" 1e-5
  if [ "$name" = gpt ]; then
    run "$name-lp4" "$MTRAIN" launch -n 4 -- "${L[@]}" --output "$TMP/$name.tp2pp2.jsonl" --tensor-model-parallel-size 2 \
      --pipeline-model-parallel-size 2 --sequence-parallel
    within "$name 1 rank vs tp 2 x pp 2 sp" "$TMP/$name.1.jsonl" "$TMP/$name.tp2pp2.jsonl" 1e-5
    # short sequences run through a 64-position scoring view, not padded to model.seq_length 128:
    # the same logprobs as at full length (MT_LOGPROBS_FULL_LENGTH=1) within 1e-5 (fp32 GEMM
    # slicing over fewer rows; measured 0 here, 4.8e-7 at seq_length 1024)
    printf '%s\n' '{"prompt": "In the beginning", "completion": " God created"}' \
      '{"prompt": "And God said,", "completion": " Let there be light"}' '{"prompt": "A", "completion": "men."}' >"$TMP/short.jsonl"
    local S=(logprobs --config "$cfg" --load "$ck" --prompts "$TMP/short.jsonl")
    run "$name-short" "$MTRAIN" "${S[@]}" --output "$TMP/$name.short.jsonl"
    grep -q "sequences run at up to 64 of model.seq_length 128 positions" "$TMP/$name-short.log" ||
      { cat "$TMP/$name-short.log"; fail "$name: short prompts did not run at 64 positions"; }
    MT_LOGPROBS_FULL_LENGTH=1 run "$name-shortfull" "$MTRAIN" "${S[@]}" --output "$TMP/$name.shortfull.jsonl"
    grep -q "up to 128 of model.seq_length 128" "$TMP/$name-shortfull.log" || fail "$name: MT_LOGPROBS_FULL_LENGTH ignored"
    within "$name short prompts: 64-position view vs full length" "$TMP/$name.short.jsonl" "$TMP/$name.shortfull.jsonl" 1e-5
  fi
  # the Hugging Face export against the NumPy reference
  if ! "$MTRAIN" export --load "$ck" --format hf --output "$TMP/$name.hf" >"$TMP/$name-export.log" 2>&1; then
    if grep -q "not implemented yet" "$TMP/$name-export.log"; then
      echo "$name: mtrain export is not implemented yet: export checks skipped"
      export_missing=1
      return 0
    fi
    cat "$TMP/$name-export.log"; fail "$name: mtrain export failed"
  fi
  [ -n "$PY" ] || fail "numpy is missing (python3 and /usr/bin/python3): install Debian's python3-numpy (scripts/install-deps.sh)"
  [ -f "$TMP/$name.hf/config.json" ] || fail "$name: the export has no config.json"
  run "$name-ref" "$PY" test/ref/hf_logprobs.py "$TMP/$name.hf" "$TMP/$name.1.jsonl" "$TMP/$name.ref.jsonl"
  within "$name mtrain vs NumPy reference of the export" "$TMP/$name.1.jsonl" "$TMP/$name.ref.jsonl" 1e-4
  # the classic bug: heads 0 and 1 of layer 0 swapped in q/k/v must not pass
  run "$name-swap" "$PY" test/ref/hf_logprobs.py --swap-heads --layer 0 --heads 0 1 "$TMP/$name.hf" "$TMP/$name.bad"
  run "$name-refbad" "$PY" test/ref/hf_logprobs.py "$TMP/$name.bad" "$TMP/$name.1.jsonl" "$TMP/$name.bad.jsonl"
  local rc=0
  "$MTRAIN" logprobs --compare "$TMP/$name.1.jsonl" "$TMP/$name.bad.jsonl" --tol 1e-4 >"$TMP/$name.bad.cmp" 2>&1 || rc=$?
  echo "$name swapped heads: $(cat "$TMP/$name.bad.cmp") (exit $rc)"
  [ $rc -eq 1 ] || fail "$name: --compare of the export with swapped heads exited $rc, expected 1 (difference over the tolerance)"
  echo "$name: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
}

model gpt configs/gpt-tiny.yaml
model llama configs/llama-tiny.yaml
# biases on q / k / v alone (--add-qkv-bias: exported as Qwen2ForCausalLM) and Llama 3.x's RoPE scaling (as
# Llama 3.1, on an original context of 16 positions so that the prompts' positions reach the scaled
# frequencies: config.json's rope_scaling), both of which the reference applies
model qwen2-rs configs/llama-tiny.yaml --add-qkv-bias --use-rope-scaling --rope-scaling-factor 4 \
  --set model.rope_original_max_position=16

# errors
G=(--config configs/gpt-tiny.yaml --load "$TMP/gpt.ckpt")
long="$(printf 'a%.0s' $(seq 1 200))"
printf '{"prompt": "%s", "completion": " b"}\n' "$long" >"$TMP/long.jsonl"
if "$MTRAIN" logprobs "${G[@]}" --prompts "$TMP/long.jsonl" --output "$TMP/long.out" >"$TMP/long.log" 2>&1; then
  fail "a sequence longer than model.seq_length + 1 should be refused"
fi
grep -q "long.jsonl:1: 200 prompt + 2 completion tokens are more than model.seq_length + 1 = 129" "$TMP/long.log" \
  || { cat "$TMP/long.log"; fail "no message naming the line and model.seq_length"; }
[ ! -e "$TMP/long.out" ] || fail "a failed run left its output file"
rc=0; "$MTRAIN" logprobs --config configs/gpt-tiny.yaml --prompts "$PROMPTS" --output "$TMP/x.jsonl" >"$TMP/noload.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "pass --load DIR" "$TMP/noload.log" || { cat "$TMP/noload.log"; fail "no --load: expected exit 2 naming --load"; }
head -n 9 "$TMP/gpt.1.jsonl" >"$TMP/nine.jsonl"
rc=0; "$MTRAIN" logprobs --compare "$TMP/gpt.1.jsonl" "$TMP/nine.jsonl" >"$TMP/nine.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "ends after 9 line(s)" "$TMP/nine.log" || { cat "$TMP/nine.log"; fail "files of different lengths: expected exit 2"; }
sed '1s/"tokens": \[32,/"tokens": [33,/' "$TMP/gpt.1.jsonl" >"$TMP/othertok.jsonl"
rc=0; "$MTRAIN" logprobs --compare "$TMP/gpt.1.jsonl" "$TMP/othertok.jsonl" >"$TMP/othertok.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "completion tokens differ at index 0 (32 vs 33)" "$TMP/othertok.log" \
  || { cat "$TMP/othertok.log"; fail "different tokens: expected exit 2 naming the index"; }
echo "errors: too long, no --load, different lengths, different tokens: as expected"

if [ $export_missing -eq 1 ]; then
  echo "skip: mtrain export is not implemented yet (the mtrain-only checks passed)"
  exit 77
fi
echo "golden prompts: pass"
