# Acceptance: uneven pipeline stages (Megatron's --decoder-first/last-pipeline-num-layers and
# --account-for-embedding/loss-in-pipeline-split) reproduce the serial run, and their checkpoints
# load in other layouts.
# gpt-tiny (tied embeddings: the wte sync between the first and the last stage) and llama-tiny
# (untied), global batch 8, micro-batch 2 (m = 4), 10 iterations, each against the pp=1 run of the
# same depth:
#   gpt 7 layers on pp=2 as 3 + 4 (--decoder-first-pipeline-num-layers 3), and the same split by
#     --account-for-embedding-in-pipeline-split ((7 + 1) / 2 = 4, the first stage one fewer);
#   gpt 7 layers on pp=4 as 1 + 2 + 2 + 2 (first stage 1, last 2, the middle split evenly);
#   llama 7 layers on pp=2 as 4 + 3 (--account-for-loss-in-pipeline-split).
# Why they agree: a stage initialises its layers from the serial run's init streams by global layer
# index (the layout's layer0 from the recipe's one split rule), and runs the serial ops on the same
# inputs; only fp32 summation order differs (grad norm per stage, tied wte gradient in two parts), as
# in pp_equivalence.sh, whose tolerance this is: 1e-4 relative on every loss, 1e-3 on grad norms
# (measured: 0 to 1e-7). A stage holding other layers than the serial run's at those places draws
# other weights (test_pp_layout.c checks the uneven stages' weights against the serial model's
# bitwise), and the losses leave the tolerance from the first iteration.
# Checkpoints (global layer indices in the files): the 3 + 4 run saves at iteration 5 (exit) and is
# resumed serially, in the same layout and as 4 + 3; iterations 6..10 against the serial run, same
# tolerance. The save is scored by `mtrain logprobs` (serially and over both splits) and exported as
# one Hugging Face model. Refused with the reason: uneven stages with the interleaved schedule.
source test/e2e_lib.sh
need_data
ITERS=10
BASE=(--train-iters $ITERS --micro-batch-size 2 --set logging.interval=1 --set logging.eval_interval=0)
GPT=(--config configs/gpt-tiny.yaml)
LLAMA=(--config configs/llama-tiny.yaml)
uneven() { # uneven REF NAME RANKS PP "SPLIT" ARGS...: the run reports the split and matches REF
  local ref=$1 name=$2 n=$3 pp=$4 split=$5; shift 5
  launched "$name" "$n" "$@" --pipeline-model-parallel-size "$pp"
  grep -q "pp $pp (layers $split)" "$TMP/$name.log" || { grep -m3 "pp $pp" "$TMP/$name.log"; fail "$name: no 'pp $pp (layers $split)'"; }
  compare "$TMP/$ref.jsonl" "$TMP/$name.jsonl" "$name" $ITERS 1e-4 1e-3
}
serial gpt7 "${GPT[@]}" --num-layers 7
uneven gpt7 "gpt 7 layers pp=2 first 3" 2 2 "3/4" "${GPT[@]}" --num-layers 7 --decoder-first-pipeline-num-layers 3
uneven gpt7 "gpt 7 layers pp=2 embedding counted" 2 2 "3/4" "${GPT[@]}" --num-layers 7 \
  --account-for-embedding-in-pipeline-split
uneven gpt7 "gpt 7 layers pp=4 first 1 last 2" 4 4 "1/2/2/2" "${GPT[@]}" --num-layers 7 \
  --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 2
serial llama7 "${LLAMA[@]}" --num-layers 7
uneven llama7 "llama 7 layers pp=2 loss counted" 2 2 "4/3" "${LLAMA[@]}" --num-layers 7 \
  --account-for-loss-in-pipeline-split

# checkpoints: saved at 3 + 4 after 5 iterations, resumed in three layouts
steps() { grep -o '"iteration":[0-9]*,"consumed_samples":[0-9]*,"lm_loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1" |
          awk -F'[:,]' -v from="$2" '$2 > from' | sed 's/^/{/; s/$/}/'; }
G7=("${GPT[@]}" --num-layers 7)
launched save 2 "${G7[@]}" --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 3 \
  --save "$TMP/ck" --exit-interval 5
resumed() { # resumed NAME RANKS ARGS...: loads the 3 + 4 save; iterations 6..10 match the serial run
  local name=$1 n=$2; shift 2
  launched "$name" "$n" "${G7[@]}" "$@" --load "$TMP/ck"
  grep -q "loaded checkpoint .*iter_0000005: iteration 5" "$TMP/$name.log" || { tail -n 20 "$TMP/$name.log"; fail "$name: did not load iteration 5"; }
  steps "$TMP/gpt7.jsonl" 5 >"$TMP/$name.ref.jsonl"
  steps "$TMP/$name.jsonl" 0 >"$TMP/$name.got.jsonl"
  compare "$TMP/$name.ref.jsonl" "$TMP/$name.got.jsonl" "3 + 4 save resumed $name" 5 1e-4 1e-3
}
resumed serially 1
resumed "as 3 + 4" 2 --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 3
resumed "as 4 + 3" 2 --pipeline-model-parallel-size 2 --decoder-last-pipeline-num-layers 3
# the save scored by `mtrain logprobs` serially, as 3 + 4 and as 4 + 3: the same per-token logprobs (the
# same weights and forward ops; 1e-5: fp32 rounding of the thread split, measured ~5e-7); and exported
# as one Hugging Face model of all 7 layers
printf '{"prompt": "In the beginning God created", "completion": " the heaven and the earth."}\n' >"$TMP/p.jsonl"
printf '{"prompt": "And God said,", "completion": " Let there be light: and there was light."}\n' >>"$TMP/p.jsonl"
LP=(logprobs "${G7[@]}" --load "$TMP/ck" --prompts "$TMP/p.jsonl")
"$MTRAIN" "${LP[@]}" --output "$TMP/lp1.jsonl" >"$TMP/lp1.log" 2>&1 || { cat "$TMP/lp1.log"; fail "serial logprobs failed"; }
for split in --decoder-first-pipeline-num-layers --decoder-last-pipeline-num-layers; do
  "$MTRAIN" launch -n 2 -- "${LP[@]}" --pipeline-model-parallel-size 2 $split 3 --output "$TMP/lp2.jsonl" \
    >"$TMP/lp2.log" 2>&1 || { tail -n 20 "$TMP/lp2.log"; fail "logprobs at pp 2 $split 3 failed"; }
  "$MTRAIN" logprobs --compare "$TMP/lp1.jsonl" "$TMP/lp2.jsonl" --tol 1e-5 || fail "logprobs at pp 2 $split 3 differ"
done
"$MTRAIN" export --load "$TMP/ck" --output "$TMP/hf" >"$TMP/export.log" 2>&1 || { cat "$TMP/export.log"; fail "export failed"; }
grep -q '"n_layer": 7' "$TMP/hf/config.json" || { cat "$TMP/hf/config.json"; fail "the export does not hold 7 layers"; }
grep -q "h.6.mlp.c_proj.weight" "$TMP/hf/model.safetensors" || fail "the export lacks layer 6 (the last stage's last)"

# uneven stages with interleaving: refused before training, with the reason
if "$MTRAIN" launch -n 2 -- "${G7[@]}" "${BASE[@]}" --num-layers 8 --pipeline-model-parallel-size 2 \
     --decoder-first-pipeline-num-layers 2 --virtual-pipeline-model-parallel-size 2 >"$TMP/vpp.log" 2>&1; then
  fail "uneven stages with virtual_pipeline 2 should be refused"
fi
grep -q "interleaved" "$TMP/vpp.log" || { tail -n 5 "$TMP/vpp.log"; fail "no reason for refusing uneven stages with vpp"; }
echo "refused: $(grep -m1 'interleaved' "$TMP/vpp.log" | cut -c1-200)"
echo "pp uneven: ok"
