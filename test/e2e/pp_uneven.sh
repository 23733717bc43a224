# Acceptance: uneven pipeline stages (Megatron's --decoder-first/last-pipeline-num-layers and
# --account-for-embedding/loss-in-pipeline-split) reproduce the serial run, and their checkpoints
# load in other layouts.
# gpt-tiny (tied embeddings: the wte sync between the first and the last stage) and llama-tiny
# (untied), global batch 8, micro-batch 2 (m = 4), 10 iterations, each against the pp=1 run of the
# same depth:
#   gpt 7 layers on pp=2 as 3 + 4 (--decoder-first-pipeline-num-layers 3), and the same split by
#     --account-for-embedding-in-pipeline-split ((7 + 1) / 2 = 4, the first stage one fewer);
#   gpt 7 layers on pp=4 as 1 + 2 + 2 + 2 (first stage 1, last 2, the middle split evenly);
#   llama 7 layers on pp=2 as 4 + 3 (--account-for-loss-in-pipeline-split);
#   interleaved (Megatron-Core's get_num_layers_to_build / get_transformer_layer_offset): gpt 6 layers
#     on pp=4 x vpp=2 with both ends counted (8 chunks of one place: the first chunk embeds only, the
#     last computes the loss only); the embedding alone counted in the checkpoint part below.
# Why they agree: a stage initialises its layers from the serial run's init streams by global layer
# index (the layout's layer0 from the recipe's one split rule), and runs the serial ops on the same
# inputs; only fp32 summation order differs (grad norm per stage, tied wte gradient in two parts), as
# in pp_equivalence.sh, whose tolerance this is: 1e-4 relative on every loss, 1e-3 on grad norms
# (measured: 0 to 1e-7). A stage holding other layers than the serial run's at those places draws
# other weights (test_pp_layout.c checks the uneven stages' weights against the serial model's
# bitwise), and the losses leave the tolerance from the first iteration.
# Checkpoints (global layer indices in the files): the 3 + 4 run saves at iteration 5 (exit) and is
# resumed serially, in the same layout and as 4 + 3; iterations 6..10 against the serial run, same
# tolerance; the same save is also resumed as pp 4 x vpp 2 with the embedding counted, and a save of the
# 6-layer interleaved layout (both ends counted) resumed serially. The saves are scored by `mtrain
# logprobs` (serially and in their layouts) and the first exported as one Hugging Face model. Refused
# with the reason: first / last stage counts with the interleaved schedule, and ends counted in places
# that do not split into pp x vpp chunks.
# Single-process runs that do not depend on each other (the 7-layer serial references; the two serial
# resumes; the two serial logprobs) run two at a time, each on one thread (--threads 1: the pair fills
# the 2 cores, where one process on 2 threads does not; values as on 2 threads to fp32 rounding,
# measured <= 1e-7); every check on them is the same.
source test/e2e_lib.sh
need_data
ITERS=10
BASE=(--train-iters $ITERS --micro-batch-size 2 --set logging.interval=1 --set logging.eval_interval=0)
BG=()
bg() { "$@" & BG+=($!); } # bg FUNCTION ARGS...: in the background (its own checks, failing its subshell)
wait_bg() { # the background jobs, each must have passed
  local p bad=0
  for p in "${BG[@]}"; do wait "$p" || bad=1; done
  BG=()
  [ $bad -eq 0 ] || fail "a background run failed (above)"
}
GPT=(--config configs/gpt-tiny.yaml)
LLAMA=(--config configs/llama-tiny.yaml)
uneven() { # uneven REF NAME RANKS PP "SPLIT" ARGS...: the run reports the split and matches REF
  local ref=$1 name=$2 n=$3 pp=$4 split=$5; shift 5
  launched "$name" "$n" "$@" --pipeline-model-parallel-size "$pp"
  grep -q "pp $pp (layers $split)" "$TMP/$name.log" || { grep -m3 "pp $pp" "$TMP/$name.log"; fail "$name: no 'pp $pp (layers $split)'"; }
  compare "$TMP/$ref.jsonl" "$TMP/$name.jsonl" "$name" $ITERS 1e-4 1e-3
}
bg serial gpt7 "${GPT[@]}" --num-layers 7 --threads 1
bg serial llama7 "${LLAMA[@]}" --num-layers 7 --threads 1
wait_bg
uneven gpt7 "gpt 7 layers pp=2 first 3" 2 2 "3/4" "${GPT[@]}" --num-layers 7 --decoder-first-pipeline-num-layers 3
uneven gpt7 "gpt 7 layers pp=2 embedding counted" 2 2 "3/4" "${GPT[@]}" --num-layers 7 \
  --account-for-embedding-in-pipeline-split
uneven gpt7 "gpt 7 layers pp=4 first 1 last 2" 4 4 "1/2/2/2" "${GPT[@]}" --num-layers 7 \
  --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 2
uneven llama7 "llama 7 layers pp=2 loss counted" 2 2 "4/3" "${LLAMA[@]}" --num-layers 7 \
  --account-for-loss-in-pipeline-split
# interleaved with the ends counted: Megatron's gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_
# pipeline_split's shape (6 layers, pp 4, vpp 2: 8 chunks of one place; stage 0's chunk 0 embeds only,
# stage 3's chunk 1 computes the loss only); the embedding alone counted is the resume below (7 layers
# + the embedding on pp 4 x vpp 2, against the serial run's iterations 6..10)
G6=("${GPT[@]}" --num-layers 6)
VPP6=(--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 --account-for-embedding-in-pipeline-split
      --account-for-loss-in-pipeline-split)
serial gpt6 "${G6[@]}"
uneven gpt6 "gpt 6 layers pp=4 vpp=2 both counted" 4 4 "0+1/1+1/1+1/1+0" "${G6[@]}" "${VPP6[@]}" \
  --save "$TMP/ckv" --save-interval 5
grep -q "schedule interleaved" "$TMP/gpt 6 layers pp=4 vpp=2 both counted.log" || fail "vpp 2 did not interleave"

# checkpoints: saved at 3 + 4 after 5 iterations, resumed in three layouts
steps() { grep -o '"iteration":[0-9]*,"consumed_samples":[0-9]*,"lm_loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1" |
          awk -F'[:,]' -v from="$2" '$2 > from' | sed 's/^/{/; s/$/}/'; }
G7=("${GPT[@]}" --num-layers 7)
launched save 2 "${G7[@]}" --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 3 \
  --save "$TMP/ck" --exit-interval 5
resumed() { # resumed NAME RANKS REF CKPT ARGS...: loads CKPT's iteration 5; iterations 6..10 match REF's serial run
  local name=$1 n=$2 ref=$3 ck=$4; shift 4
  launched "$name" "$n" "$@" --load "$ck"
  grep -q "loaded checkpoint .*iter_0000005: iteration 5" "$TMP/$name.log" || { tail -n 20 "$TMP/$name.log"; fail "$name: did not load iteration 5"; }
  steps "$TMP/$ref.jsonl" 5 >"$TMP/$name.ref.jsonl"
  steps "$TMP/$name.jsonl" 0 >"$TMP/$name.got.jsonl"
  compare "$TMP/$name.ref.jsonl" "$TMP/$name.got.jsonl" "save resumed $name" 5 1e-4 1e-3
}
bg resumed serially 1 gpt7 "$TMP/ck" "${G7[@]}" --threads 1
# (the interleaved run's save resumed serially, below, runs beside it)
bg resumed "6 layers vpp save serially" 1 gpt6 "$TMP/ckv" "${G6[@]}" --ckpt-step 5 --threads 1
wait_bg
resumed "as 3 + 4" 2 gpt7 "$TMP/ck" "${G7[@]}" --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 3
resumed "as 4 + 3" 2 gpt7 "$TMP/ck" "${G7[@]}" --pipeline-model-parallel-size 2 --decoder-last-pipeline-num-layers 3
# ... and into pp 4 x vpp 2 with the embedding counted (7 + 1 = 8 chunks of one, stage 0's first empty;
# --num-layers-per-virtual-pipeline-stage 1 counts the embedding, as Megatron's arguments.py does: vpp 2)
resumed "as pp 4 vpp 2 embedding counted" 4 gpt7 "$TMP/ck" "${G7[@]}" --pipeline-model-parallel-size 4 \
  --num-layers-per-virtual-pipeline-stage 1 --account-for-embedding-in-pipeline-split
grep -q "pp 4 (layers 0+1/1+1/1+1/1+1) x vpp 2" "$TMP/as pp 4 vpp 2 embedding counted.log" \
  || fail "7 layers + the embedding: not 0+1/1+1/1+1/1+1 x vpp 2"
# the interleaved run's save at iteration 5 (both ends counted: chunks without layers write nothing) resumed
# serially: "6 layers vpp save serially" above, beside the 3 + 4 save's serial resume
# the save scored by `mtrain logprobs` serially, as 3 + 4 and as 4 + 3: the same per-token logprobs (the
# same weights and forward ops; 1e-5: fp32 rounding of the thread split, measured ~5e-7); and exported
# as one Hugging Face model of all 7 layers
printf '{"prompt": "In the beginning God created", "completion": " the heaven and the earth."}\n' >"$TMP/p.jsonl"
printf '{"prompt": "And God said,", "completion": " Let there be light: and there was light."}\n' >>"$TMP/p.jsonl"
LP=(logprobs "${G7[@]}" --load "$TMP/ck" --prompts "$TMP/p.jsonl")
LPV=(logprobs "${G6[@]}" --load "$TMP/ckv" --prompts "$TMP/p.jsonl")
lp_serial() { # lp_serial NAME WHAT ARGS...: mtrain ARGS on one thread, output NAME.jsonl
  "$MTRAIN" "${@:3}" --threads 1 --output "$TMP/$1.jsonl" >"$TMP/$1.log" 2>&1 || { cat "$TMP/$1.log"; fail "$2 failed"; }
}
bg lp_serial lp1 "serial logprobs" "${LP[@]}"
bg lp_serial lpv1 "serial logprobs of the vpp save" "${LPV[@]}"
wait_bg
for split in --decoder-first-pipeline-num-layers --decoder-last-pipeline-num-layers; do
  "$MTRAIN" launch -n 2 -- "${LP[@]}" --pipeline-model-parallel-size 2 $split 3 --output "$TMP/lp2.jsonl" \
    >"$TMP/lp2.log" 2>&1 || { tail -n 20 "$TMP/lp2.log"; fail "logprobs at pp 2 $split 3 failed"; }
  "$MTRAIN" logprobs --compare "$TMP/lp1.jsonl" "$TMP/lp2.jsonl" --tol 1e-5 || fail "logprobs at pp 2 $split 3 differ"
done
# the interleaved save scored serially and in its own layout: the same logprobs, same tolerance
# (its serial scores, lpv1, made above beside lp1)
"$MTRAIN" launch -n 4 -- "${LPV[@]}" "${VPP6[@]}" --output "$TMP/lpv4.jsonl" \
  >"$TMP/lpv4.log" 2>&1 || { tail -n 20 "$TMP/lpv4.log"; fail "logprobs at pp 4 vpp 2 both counted failed"; }
"$MTRAIN" logprobs --compare "$TMP/lpv1.jsonl" "$TMP/lpv4.jsonl" --tol 1e-5 || fail "logprobs at pp 4 vpp 2 both counted differ"
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
# 6 layers + the embedding = 7 places do not split into pp 4 x vpp 2 chunks: refused by mtrain check, naming both
if "$MTRAIN" check --world-size 4 "${G6[@]}" "${BASE[@]}" --pipeline-model-parallel-size 4 \
     --num-virtual-stages-per-pipeline-rank 2 --account-for-embedding-in-pipeline-split >"$TMP/v7.log" 2>&1; then
  fail "6 layers + the embedding over pp 4 x vpp 2 should be refused"
fi
grep -q "parallel.embedding_in_split: .*= 7 do not split into parallel.pipeline x parallel.virtual_pipeline = 4 x 2" \
  "$TMP/v7.log" || { cat "$TMP/v7.log"; fail "no message for 7 places over pp 4 x vpp 2"; }
echo "refused: $(grep -m1 'do not split' "$TMP/v7.log" | cut -c1-200)"
echo "pp uneven: ok"
