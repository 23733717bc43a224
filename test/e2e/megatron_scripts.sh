# Megatron-LM's example launch scripts run as they are. The argument lists
# of examples/gpt3/train_gpt3_175b_distributed.sh and examples/llama/train_llama3_8b_h100_fp8.sh
# (test/megatron/*.args; only the paths filled in) pass `mtrain check` at the script's world size
# with no recipe file, and a scaled-down run of each — the same list with shape and length flags
# appended, which Megatron's parser also lets override (the last value wins) — trains on the CPU,
# saves, and resumes from its save through the script's own `--save X --load X`. The Mixtral
# script's list, scaled down by flags, trains at expert parallelism 2, saves (its commented-out
# --save / --load, a path) and resumes.
# Each resumed run trains one iteration past its save: what is checked there (it loaded the save
# and starts at the next iteration) needs no more. The Mixtral run that trains at ep 2 is the one
# that saves (its metrics and log give the ep 2, iteration and load-balancing checks).
source test/e2e_lib.sh
need_data
command -v python3 >/dev/null || fail "python3 missing (scripts/install-deps.sh installs it)"
# the GPT-3 list names GPT-2's vocab and merges: fetched here when `make test` has not (run alone)
if [ ! -f data/gpt2-vocab.json ] || [ ! -f data/gpt2-merges.txt ]; then
  ./scripts/fetch-gpt2-tokenizer.sh data >"$TMP/fetch_gpt2.log" 2>&1 \
    || { echo "skip: GPT-2 tokenizer files unavailable: $(tail -n 1 "$TMP/fetch_gpt2.log")"; exit 77; }
fi
# args FILE SUBSTITUTIONS...: the list with @NAME@ placeholders replaced (one argument per line)
args() {
  local f=$1; shift
  local sed_args=(); for kv in "$@"; do sed_args+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
  grep -v '^#' "$f" | sed "${sed_args[@]}"
}
mapfile -t GPT3 < <(args test/megatron/gpt3_175b.args DATA_PATH="$TMP/gpt2kjv_text_document" \
  VOCAB_FILE=data/gpt2-vocab.json MERGE_FILE=data/gpt2-merges.txt CHECKPOINT_PATH="$TMP/gpt3.ckpt" \
  TENSORBOARD_LOGS_PATH="$TMP/gpt3.tb" | tr ' ' '\n')

# --- GPT-3 175B: the whole list at the script's layout (tp 8 x pp 16 = 128 GPUs) ---
"$MTRAIN" check --world-size 128 "${GPT3[@]}" >"$TMP/gpt3.check" 2>"$TMP/gpt3.check.err" \
  || { cat "$TMP/gpt3.check.err"; fail "GPT-3 175B argument list: mtrain check refused it"; }
grep -q "^  layers: 96" "$TMP/gpt3.check" && grep -q "^  tensor: 8" "$TMP/gpt3.check" && grep -q "^  pipeline: 16" "$TMP/gpt3.check" \
  && grep -q "^  rampup_start: 16" "$TMP/gpt3.check" && grep -q "^  tokenizer: gpt2bpe" "$TMP/gpt3.check" \
  || { cat "$TMP/gpt3.check"; fail "GPT-3 175B: the resolved recipe is not the script's"; }
grep -q "fp16: trained in bf16 instead" "$TMP/gpt3.check.err" || fail "GPT-3 175B: no note for --fp16"
# warmup fraction .001 of 430000 decay iterations = 430
grep -q "^  warmup_iters: 430 " "$TMP/gpt3.check" || { grep warmup "$TMP/gpt3.check"; fail "--lr-warmup-fraction .001 of 430000 is not 430"; }
echo "GPT-3 175B: the script's argument list passes mtrain check at 128 ranks"

# scaled down: 4 ranks (tp 2 x pp 2), GPT-2 BPE corpus, batch ramp-up 4 -> 8, TensorBoard, save + resume
"$MTRAIN" preprocess --input data/kjv.jsonl --output-prefix "$TMP/gpt2kjv" --tokenizer-type GPT2BPETokenizer \
  --vocab-file data/gpt2-vocab.json --merge-file data/gpt2-merges.txt >"$TMP/pre.log" 2>&1 || { cat "$TMP/pre.log"; fail "preprocess"; }
SHRINK=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
        --micro-batch-size 2 --global-batch-size 8 --rampup-batch-size 4 2 16 --lr-decay-iters 8
        --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --log-interval 1 --save-interval 3
        --eval-interval 3 --eval-iters 1 --metrics "$TMP/gpt3.jsonl")
"$MTRAIN" launch -n 4 -- "${GPT3[@]}" "${SHRINK[@]}" --train-iters 6 >"$TMP/gpt3.log" 2>&1 \
  || { tail -n 30 "$TMP/gpt3.log"; fail "GPT-3 scaled-down run failed"; }
grep -q "saved checkpoint at iteration 6" "$TMP/gpt3.log" || fail "GPT-3 scaled-down run: no save at 6"
ls "$TMP/gpt3.tb"/events.out.tfevents.* >/dev/null 2>&1 || fail "GPT-3 scaled-down run: no TensorBoard file"
"$MTRAIN" launch -n 4 -- "${GPT3[@]}" "${SHRINK[@]}" --train-iters 7 --metrics "$TMP/gpt3b.jsonl" >"$TMP/gpt3b.log" 2>&1 \
  || { tail -n 30 "$TMP/gpt3b.log"; fail "GPT-3 resumed run failed"; }
grep -q "loaded checkpoint" "$TMP/gpt3b.log" || { tail "$TMP/gpt3b.log"; fail "the resumed run did not load the save"; }
[ "$(json_field "$TMP/gpt3b.jsonl" iteration | head -n 1)" = 7 ] || fail "the resumed run did not start at iteration 7"
echo "GPT-3 scaled down: trained 6 iterations at tp 2 x pp 2 with ramp-up, saved, resumed at 7"

# --- Llama-3 8B: the whole list (tp 1, cp 1, 8 GPUs: dp 8) ---
L3TOK=data/llama3-tokenizer.json
mapfile -t LLAMA < <(args test/megatron/llama3_8b.args DATA_PATH="$TMP/l3kjv_text_document" TOKENIZER_MODEL="$L3TOK" \
  DATA_CACHE_PATH="$TMP/l3cache" CHECKPOINT_PATH="$TMP/l3.ckpt" TENSORBOARD_LOGS_PATH="$TMP/l3.tb" | tr ' ' '\n')
"$MTRAIN" check --world-size 8 "${LLAMA[@]}" >"$TMP/l3.check" 2>"$TMP/l3.check.err" \
  || { cat "$TMP/l3.check.err"; fail "Llama-3 8B argument list: mtrain check refused it"; }
# Megatron's meanings: GQA 8 groups, SwiGLU 14336 (the script gives no --normalization: Megatron's default
# LayerNorm stays), rope base 1e6, iterations = 1953125000 / 128, sequence parallelism off at tp 1
for want in "kv_heads: 8" "ffn_hidden: 14336" "position: rope" "rope_theta: 1e+06" "iters: 15258789" \
            "sequence_parallel: false" "tokenizer: hf" "decoupled_lr: 0.0005" "timeout_s: 3600"; do
  grep -q "^  $want" "$TMP/l3.check" || { cat "$TMP/l3.check"; fail "Llama-3 8B: resolved recipe lacks '$want'"; }
done
grep -q "sequence-parallel: turned off" "$TMP/l3.check.err" || fail "Llama-3 8B: no note that --sequence-parallel was turned off at tp 1"
echo "Llama-3 8B: the script's argument list passes mtrain check at 8 ranks"
if [ -f "$L3TOK" ]; then
  "$MTRAIN" preprocess --input data/kjv.jsonl --output-prefix "$TMP/l3kjv" --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model "$L3TOK" >"$TMP/pre3.log" 2>&1 || { cat "$TMP/pre3.log"; fail "preprocess (Llama-3)"; }
  SHRINK3=(--num-layers 2 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 4 --num-query-groups 2
           --kv-channels 16 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1 --global-batch-size 4
           --train-samples 16 --lr-decay-samples 16 --lr-warmup-samples 4 --eval-interval 2 --eval-iters 1
           --save-interval 2 --metrics "$TMP/l3.jsonl" --set logging.profile_path="$TMP/l3.profile.json")
  "$MTRAIN" launch -n 2 -- "${LLAMA[@]}" "${SHRINK3[@]}" >"$TMP/l3.log" 2>&1 \
    || { tail -n 30 "$TMP/l3.log"; fail "Llama-3 scaled-down run failed"; }
  grep -q "saved checkpoint at iteration 4" "$TMP/l3.log" || { tail "$TMP/l3.log"; fail "Llama-3 scaled-down run: no save at 4"; }
  "$MTRAIN" launch -n 2 -- "${LLAMA[@]}" "${SHRINK3[@]}" --train-samples 20 --metrics "$TMP/l3b.jsonl" >"$TMP/l3b.log" 2>&1 \
    || { tail -n 30 "$TMP/l3b.log"; fail "Llama-3 resumed run failed"; }
  [ "$(json_field "$TMP/l3b.jsonl" iteration | head -n 1)" = 5 ] || fail "the Llama-3 resumed run did not start at iteration 5"
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$TMP/l3.profile.json" || fail "the script's --profile wrote no valid trace"
  echo "Llama-3 scaled down: 4 iterations at dp 2 with the Llama-3 tokenizer, saved, resumed at 5; its --profile trace loads"
else
  echo "Llama-3 scaled-down run skipped: $L3TOK missing (scripts/fetch-llama3-tokenizer.sh data; make test runs it)"
fi

# the script's default MOCK branch: --mock-data with Megatron's NullTokenizer (eod = --vocab-size)
MOCK=(--mock-data --tokenizer-type NullTokenizer --vocab-size 128256 --data-cache-path "$TMP/l3cache" --tiktoken-pattern v2
      --split 99,1,0 --no-create-attention-mask-in-dataloader --no-mmap-bin-files --num-workers 1)
mapfile -t LLAMA_MOCK < <(grep -v '^#' test/megatron/llama3_8b.args | sed -e "s|@CHECKPOINT_PATH@|$TMP/l3m.ckpt|; s|@TENSORBOARD_LOGS_PATH@|$TMP/l3m.tb|" \
  | grep -v -e '^--data-path' -e '^--tokenizer-' -e '^--data-cache-path' -e '^--split' -e '^--vocab-size' | tr ' ' '\n')
"$MTRAIN" launch -n 2 -- "${LLAMA_MOCK[@]}" "${MOCK[@]}" --num-layers 2 --hidden-size 64 --ffn-hidden-size 128 \
  --num-attention-heads 4 --num-query-groups 2 --kv-channels 16 --seq-length 32 --max-position-embeddings 32 \
  --global-batch-size 4 --train-samples 8 --lr-decay-samples 8 --lr-warmup-samples 4 --eval-interval 2 --eval-iters 1 \
  --save-interval 2 --metrics "$TMP/l3m.jsonl" --set logging.profile_path="$TMP/l3m.profile.json" >"$TMP/l3m.log" 2>&1 || { tail -n 30 "$TMP/l3m.log"; fail "Llama-3 MOCK branch failed"; }
[ "$(json_field "$TMP/l3m.jsonl" iteration | tail -n 1)" = 2 ] || fail "the MOCK run did not train its 2 iterations"
echo "Llama-3 8B, the script's MOCK branch (--mock-data, NullTokenizer): trained at dp 2"

# --- Mixtral 8x7B: the script's argument list, scaled down by flags, trains at ep 2 (dp 2) ---
mapfile -t MIX < <(args test/megatron/mixtral_8x7b.args DATA_PATH="$TMP/l3kjv_text_document" TOKENIZER_MODEL="$L3TOK" | tr ' ' '\n')
rc=0; "$MTRAIN" check --world-size 2 "${MIX[@]}" >"$TMP/mix.out" 2>"$TMP/mix.err" || rc=$?
[ $rc -eq 0 ] || { cat "$TMP/mix.err"; fail "Mixtral: the script's argument list does not pass mtrain check at 2 ranks"; }
grep -q "unknown" "$TMP/mix.err" && fail "Mixtral: an unknown flag"
if [ -f "$L3TOK" ]; then
  # the script's commented-out --save / --load (a path): the run saves at 3, and a longer run resumes there
  # (the script's --no-load-optim --no-load-rng: the weights and the iteration, a fresh optimizer)
  MIXS=("${MIX[@]}" --num-layers 2 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 4 --seq-length 32
        --max-position-embeddings 32 --save "$TMP/mix.ckpt" --load "$TMP/mix.ckpt" --save-interval 3)
  "$MTRAIN" launch -n 2 -- "${MIXS[@]}" --train-iters 3 --metrics "$TMP/mix.jsonl" >"$TMP/mix.log" 2>&1 \
    || { tail -n 30 "$TMP/mix.log"; fail "Mixtral scaled-down run failed"; }
  grep -q "2 experts top-2, ep 2" "$TMP/mix.log" || { head -n 5 "$TMP/mix.log"; fail "Mixtral: the run did not report ep 2"; }
  [ "$(json_field "$TMP/mix.jsonl" iteration | tail -n 1)" = 3 ] || fail "the Mixtral run did not train its 3 iterations"
  grep -q '"load_balancing_loss"' "$TMP/mix.jsonl" || fail "Mixtral: no load_balancing_loss in the metrics"
  echo "Mixtral 8x7B scaled down: the script's flags train 3 iterations at ep 2 x dp 2 with the distributed optimizer"
  grep -q "saved checkpoint at iteration 3" "$TMP/mix.log" || { tail -n 20 "$TMP/mix.log"; fail "Mixtral: no save at 3"; }
  "$MTRAIN" launch -n 2 -- "${MIXS[@]}" --train-iters 4 --metrics "$TMP/mixr.jsonl" >"$TMP/mixr.log" 2>&1 \
    || { tail -n 30 "$TMP/mixr.log"; fail "Mixtral resumed run failed"; }
  grep -q "loaded checkpoint" "$TMP/mixr.log" || { tail -n 20 "$TMP/mixr.log"; fail "Mixtral: the resumed run did not load the save"; }
  [ "$(json_field "$TMP/mixr.jsonl" iteration | head -n 1)" = 4 ] || fail "Mixtral: the resumed run did not start at iteration 4"
  echo "Mixtral 8x7B scaled down: saved at 3, resumed at 4"
else
  echo "Mixtral scaled-down run skipped: $L3TOK missing (scripts/fetch-llama3-tokenizer.sh data; make test runs it)"
fi
