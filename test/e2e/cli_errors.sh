# Bad input gets a clear error and a non-zero exit, never a crash: recipe errors through the
# CLI (key + line in the message), unknown flags, the CUDA backend on a machine without a
# GPU, and a corrupt / truncated dataset.
source test/e2e_lib.sh
need_data
expect_error() { # expect_error "needle" cmd...: non-zero exit (not a signal) and needle in stderr
  local needle="$1"; shift
  "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  [ $rc -ne 0 ] || fail "expected failure: $*"
  [ $rc -lt 128 ] || fail "crashed with signal $((rc-128)): $*"
  grep -qF -- "$needle" "$TMP/err" || { cat "$TMP/err"; fail "message lacks '$needle': $*"; }
  echo "ok ($rc): $* -> $(head -c 200 "$TMP/err" | head -n 1)"
}
cp configs/gpt-tiny.yaml "$TMP/r.yaml"
printf 'model:\n  layers: 2\n  hiden: 64\n' >"$TMP/typo.yaml"
expect_error "model.hidden" "$MTRAIN" check --config "$TMP/typo.yaml"
expect_error "typo.yaml:3" "$MTRAIN" check --config "$TMP/typo.yaml"
printf 'model:\n  layers: two\n' >"$TMP/type.yaml"
expect_error "type.yaml:2" "$MTRAIN" check --config "$TMP/type.yaml"
expect_error "model.heads" "$MTRAIN" check --config configs/gpt-tiny.yaml --set model.heads=3
expect_error "parallel.tensor" "$MTRAIN" check --config configs/gpt-tiny.yaml --tensor-model-parallel-size 3
expect_error "but the world has 2" "$MTRAIN" check --config configs/gpt-tiny.yaml --tensor-model-parallel-size 2 --set parallel.data=2 --world-size 2
# fill-in-the-middle: Megatron's own refusals (mock data; a split token without a fragment rate), and a sentinel
# that is no token of the byte tokenizer named with its key before the first step
expect_error "data.fim.enabled: with data.mock" "$MTRAIN" check --config configs/gpt-tiny.yaml --fim-data --mock-data
expect_error "data.fim.fragment_rate: is not set" "$MTRAIN" check --config configs/gpt-tiny.yaml --fim-data --fim-split-sample '#'
expect_error "data.fim.prefix_token: fim token '<fim_prefix>' is not one token of the byte tokenizer" \
  "$MTRAIN" --config configs/gpt-tiny.yaml --fim-data --train-iters 1 --threads 1
# muP with multi-latent attention: the two softmax scales are not combined, refused naming the key
expect_error "model.mup.enabled: with multi-latent attention is not implemented" "$MTRAIN" check --config configs/gpt-tiny.yaml \
  --multi-latent-attention --q-lora-rank 48 --kv-lora-rank 32 --qk-head-dim 24 --qk-pos-emb-head-dim 8 --v-head-dim 16 --use-mup
# no recipe: flags alone define the run, and what they leave unset is named with its flag
expect_error "model.layers: not set; add \`layers: N\` under \`model:\` in the recipe, or pass --num-layers N" "$MTRAIN" train
expect_error "unknown argument" "$MTRAIN" --config configs/gpt-tiny.yaml --no-such-flag
# every unknown argument in one message, each with the nearest flag
expect_error "--nmu-layers 4: unknown; did you mean --num-layers?" "$MTRAIN" check --config configs/gpt-tiny.yaml --nmu-layers 4 --lr-warmup-iterz 3 --frobnicate
expect_error "--lr-warmup-iterz 3: unknown; did you mean --lr-warmup-iters?" "$MTRAIN" check --config configs/gpt-tiny.yaml --nmu-layers 4 --lr-warmup-iterz 3 --frobnicate
expect_error "3 unknown arguments" "$MTRAIN" check --config configs/gpt-tiny.yaml --nmu-layers 4 --lr-warmup-iterz 3 --frobnicate
# refused Megatron flags: all of them, each with its reason
expect_error "--reset-position-ids: positions restart per document: not implemented" "$MTRAIN" check --config configs/gpt-tiny.yaml --reset-position-ids --eod-mask-loss
expect_error "--eod-mask-loss: masking the end-of-document token's loss is not implemented" "$MTRAIN" check --config configs/gpt-tiny.yaml --reset-position-ids --eod-mask-loss
# --mock-data: Megatron's mock ids 1..4094 must fit the model's vocabulary
expect_error "data.mock: the mock documents hold the ids 1 to 4094" "$MTRAIN" --config configs/gpt-tiny.yaml --mock-data --train-iters 1
# Megatron's rules: --normalization's two names, dropout 0 only
expect_error "--normalization Foo: LayerNorm or RMSNorm" "$MTRAIN" check --config configs/gpt-tiny.yaml --normalization Foo
expect_error "--hidden-dropout 0.1: dropout is not implemented" "$MTRAIN" check --config configs/gpt-tiny.yaml --hidden-dropout 0.1
expect_error "cannot open" "$MTRAIN" --config /nonexistent/recipe.yaml
# every problem of a command line in one report: refused, value, rule, unknown and layout together
expect_error "5 problems with the command line" "$MTRAIN" check --config configs/gpt-tiny.yaml --reset-position-ids --eod-mask-loss --lr abc --normalization Foo --hidden-dropout 0.1 --nmu-layers 4 --tensor-model-parallel-size 3
for needle in "--reset-position-ids: positions restart" "--lr abc: optimizer.lr" "--normalization Foo: LayerNorm or RMSNorm" \
    "--nmu-layers 4: unknown; did you mean --num-layers?" "model.heads: 4 heads do not split over parallel.tensor = 3"; do
  grep -qF -- "$needle" "$TMP/err" || { cat "$TMP/err"; fail "the one report lacks '$needle'"; }
done
# --help after a subcommand is the usage, not an unknown flag
for sub in check train; do
  "$MTRAIN" $sub --help >"$TMP/out" 2>&1 || fail "mtrain $sub --help failed"
  grep -q "^usage:" "$TMP/out" || fail "mtrain $sub --help printed no usage"
  if grep -q "unknown" "$TMP/out"; then fail "mtrain $sub --help: $(head -n 2 "$TMP/out")"; fi
done
# CUDA backend on a machine without a GPU (or a build without CUDA): a clear error
if ! command -v nvidia-smi >/dev/null 2>&1; then
  expect_error "--backend cpu" "$MTRAIN" --config configs/gpt-tiny.yaml --backend cuda --train-iters 1
fi
# corrupt data: truncated .bin, truncated .idx, garbage .idx; each names the file
cp "$DATA.idx" "$TMP/d_text_document.idx"; head -c 1000 "$DATA.bin" >"$TMP/d_text_document.bin"
expect_error "d_text_document" "$MTRAIN" --config configs/gpt-tiny.yaml --set data.path="$TMP/d_text_document" --train-iters 1
cp "$DATA.bin" "$TMP/e_text_document.bin"; head -c 500 "$DATA.idx" >"$TMP/e_text_document.idx"
expect_error "e_text_document.idx" "$MTRAIN" --config configs/gpt-tiny.yaml --set data.path="$TMP/e_text_document" --train-iters 1
head -c 4096 /dev/urandom >"$TMP/f_text_document.idx"; cp "$DATA.bin" "$TMP/f_text_document.bin"
expect_error "f_text_document.idx" "$MTRAIN" --config configs/gpt-tiny.yaml --set data.path="$TMP/f_text_document" --train-iters 1
expect_error "missing_text_document" "$MTRAIN" --config configs/gpt-tiny.yaml --set data.path="$TMP/missing_text_document" --train-iters 1
# a feature the trainer does not have yet is refused, naming the key
expect_error "model.moe.top_k (top_k above 64)" "$MTRAIN" --config configs/gpt-tiny.yaml --set model.moe.experts=80 --set model.moe.top_k=65 --train-iters 1
# a checkpoint to load that is not there: named, with the fix (test/e2e/checkpoint_safety.sh has the rest)
expect_error "checkpoint.load: $TMP/no-such-ckpt" "$MTRAIN" --config configs/gpt-tiny.yaml --load "$TMP/no-such-ckpt" --train-iters 1
# a metrics file that cannot be written
expect_error "/nonexistent/dir/m.jsonl" "$MTRAIN" --config configs/gpt-tiny.yaml --train-iters 1 --metrics /nonexistent/dir/m.jsonl
# values reported as written, bounds as they are
expect_error "optimizer.lr: out of range: 1e+308 is above the maximum 10" "$MTRAIN" check --config configs/gpt-tiny.yaml --set optimizer.lr=1e308
expect_error "optimizer.eps: out of range: 0 is not above 0 (excluded)" "$MTRAIN" check --config configs/gpt-tiny.yaml --adam-eps 0
expect_error "neither RANK nor WORLD_SIZE is set" env -u RANK -u WORLD_SIZE MT_BOOTSTRAP=env "$MTRAIN" bootstrap-check
echo "all CLI error cases gave clear messages"
# data tokenised with a larger vocabulary than the model's: refused before the first step, naming the file
if [ -f data/gpt2-vocab.json ]; then
  head -n 20 data/kjv.jsonl >"$TMP/small.jsonl"
  "$MTRAIN" preprocess --input "$TMP/small.jsonl" --output-prefix "$TMP/g2" --tokenizer-type GPT2BPETokenizer \
    --vocab-file data/gpt2-vocab.json --merge-file data/gpt2-merges.txt >/dev/null 2>&1 || fail "preprocess (GPT-2)"
  expect_error "g2_text_document.bin: token id" "$MTRAIN" --config configs/gpt-tiny.yaml --data-path "$TMP/g2_text_document" --train-iters 1 --eval-interval 0
  grep -q "outside the model's vocabulary of 257" "$TMP/err" || fail "the vocabulary message lacks the model's size"
  if grep -q "iteration " "$TMP/err" "$TMP/out"; then fail "training started before the vocabulary check"; fi
fi
echo "the vocabulary mismatch was caught before the first step"
