# Acceptance (checkpoints, 1 and 2): a save and a resume change nothing; a resume into another
# layout continues the same trajectory.
# 1. Bit for bit: gpt-tiny and llama-tiny, 12 iterations straight against 6 + save (Megatron's
#    --exit-interval 6, so the schedule is the 12-iteration one) + resume for 6, serially and at
#    tp 2 x pp 2 x dp 2 with sequence parallelism and the distributed optimizer (8 ranks), and
#    gpt-tiny with multi-latent attention at tp 2 with sequence parallelism. The
#    resumed iterations' lm_loss and grad_norm must be the same strings (%.9g of the float sums:
#    nine digits tell any two floats apart), i.e. the same bits: the same weights, Adam moments,
#    step count, data position and schedule, summed in the same order.
# 2. Resharding: an 8-layer gpt-tiny saved at tp2 x pp2 x dp2 (distributed optimizer) after 6
#    iterations, resumed at 1 rank, tp 4, pp 4 x virtual pipeline 2, and dp 4 without the
#    distributed optimizer; iterations 7..12 against the serial run's: 1e-4 relative on losses,
#    1e-3 on grad norms, the tolerance of the tp / dp / pp equivalence tests (the layouts differ only
#    in fp32 summation order; a wrongly placed piece moves the loss by > 1e-2 at once).
# Why 6 + 6 (it was 10 + 10): every piece of restored state shows in the first two resumed
# iterations (the weights in the first loss and grad norm, the Adam moments and step count in the
# second's, the data position in every batch) and the schedule is linear warmup (30 iterations)
# throughout either way, so iterations beyond a few only repeat the comparison; 6 leave margin.
# No run evaluates the test set at its end (logging.eval_iters=0): nothing here reads it.
source test/e2e_lib.sh
need_data
ITERS=12
HALF=$((ITERS / 2)) # the save-and-exit iteration
BASE=(--train-iters $ITERS --micro-batch-size 1 --set logging.interval=1 --set logging.eval_interval=0
      --set logging.eval_iters=0)
PAR=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer)
run() { # run NAME RANKS ARGS...: a run (under the launcher when RANKS > 1), metrics to $TMP/NAME.jsonl
  local name=$1 n=$2; shift 2
  local cmd=("$MTRAIN"); [ "$n" -gt 1 ] && cmd=("$MTRAIN" launch -n "$n" --)
  "${cmd[@]}" "$@" "${BASE[@]}" --metrics "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 \
    || { tail -n 30 "$TMP/$name.log"; fail "$name run failed"; }
}
# the metrics lines of iterations > FROM: iteration, lm_loss and grad_norm only (times differ)
steps() { grep -o '"iteration":[0-9]*,"consumed_samples":[0-9]*,"lm_loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1" |
          awk -F'[:,]' -v from="$2" '$2 > from'; }
bitwise() { # bitwise NAME RANKS ARGS...: straight vs HALF + save + resume
  local name=$1 n=$2; shift 2
  run "$name-straight" "$n" "$@"
  run "$name-first" "$n" "$@" --save "$TMP/$name-ck" --exit-interval $HALF
  grep -q "stopping after iteration $HALF: checkpoint.exit_interval reached, checkpoint saved" "$TMP/$name-first.log" \
    || { cat "$TMP/$name-first.log"; fail "$name: no save-and-exit at iteration $HALF"; }
  [ "$(cat "$TMP/$name-ck/latest_checkpointed_iteration.txt")" = $HALF ] || fail "$name: tracker does not name $HALF"
  [ "$(steps "$TMP/$name-first.jsonl" 0 | wc -l)" -eq $HALF ] || fail "$name: the first part ran $(steps "$TMP/$name-first.jsonl" 0 | wc -l) iterations, not $HALF"
  run "$name-resumed" "$n" "$@" --load "$TMP/$name-ck"
  # HALF iterations of 8 sequences (the global batch of both configs)
  grep -q "loaded checkpoint .*$(printf iter_%07d $HALF): iteration $HALF, $((HALF * 8)) consumed samples" "$TMP/$name-resumed.log" \
    || { cat "$TMP/$name-resumed.log"; fail "$name: the resume did not report loading iteration $HALF"; }
  local want got
  want=$(steps "$TMP/$name-straight.jsonl" $HALF); got=$(steps "$TMP/$name-resumed.jsonl" 0)
  [ "$(echo "$got" | wc -l)" -eq $HALF ] || fail "$name: the resumed run logged $(echo "$got" | wc -l) iterations, not $HALF"
  if [ "$want" != "$got" ]; then
    diff <(echo "$want") <(echo "$got") | head -n 6
    fail "$name: the resumed run differs from the straight run"
  fi
  echo "$name: iterations $((HALF + 1))..$ITERS after save + resume identical to the straight run ($(echo "$got" | tail -n 1 | cut -d, -f3))"
}
GPT=(--config configs/gpt-tiny.yaml)
LLAMA=(--config configs/llama-tiny.yaml)
bitwise gpt-serial 1 "${GPT[@]}"
bitwise llama-serial 1 "${LLAMA[@]}"
bitwise gpt-tp2pp2dp2 8 "${GPT[@]}" "${PAR[@]}"
bitwise llama-tp2pp2dp2 8 "${LLAMA[@]}" "${PAR[@]}"
# multi-latent attention at tp 2 with sequence parallelism: its replicated down projections and
# latent norms, the q / kv up projections split by heads, saved and resumed bit for bit (2 layers of
# 64 tokens: cheap)
MLA=(--multi-latent-attention --q-lora-rank 48 --kv-lora-rank 32 --qk-head-dim 24 --qk-pos-emb-head-dim 8
  --v-head-dim 16 --qk-layernorm --tensor-model-parallel-size 2 --sequence-parallel --num-layers 2 --seq-length 64)
bitwise gpt-mla-tp2 2 "${GPT[@]}" "${MLA[@]}"

# 2. resharding (8 layers so that pp 4 x vpp 2 fits)
G8=("${GPT[@]}" --num-layers 8)
run reshard-serial 1 "${G8[@]}"
run reshard-save 8 "${G8[@]}" "${PAR[@]}" --save "$TMP/reshard-ck" --exit-interval $HALF
reshard() { # reshard NAME RANKS ARGS...
  local name=$1 n=$2; shift 2
  run "$name" "$n" "${G8[@]}" "$@" --load "$TMP/reshard-ck"
  grep -q "saved at tp 2 pp 2 (vpp 1) dp 2 with the distributed optimizer on 8 rank(s)" "$TMP/$name.log" \
    || { cat "$TMP/$name.log"; fail "$name: did not load the tp2 x pp2 x dp2 save"; }
  steps "$TMP/reshard-serial.jsonl" $HALF >"$TMP/$name.ref"
  steps "$TMP/$name.jsonl" 0 >"$TMP/$name.got"
  [ "$(wc -l <"$TMP/$name.got")" -eq $HALF ] || fail "$name: $(wc -l <"$TMP/$name.got") iterations after the resume, not $HALF"
  # the same iterations, then the values within tolerance (compare() of e2e_lib.sh reads JSON lines)
  [ "$(cut -d, -f1 "$TMP/$name.ref")" = "$(cut -d, -f1 "$TMP/$name.got")" ] || fail "$name: resumed at other iterations"
  sed 's/^/{/; s/$/}/' "$TMP/$name.ref" >"$TMP/$name.ref.jsonl"; sed 's/^/{/; s/$/}/' "$TMP/$name.got" >"$TMP/$name.got.jsonl"
  compare "$TMP/$name.ref.jsonl" "$TMP/$name.got.jsonl" "resharded to $name" $HALF 1e-4 1e-3
}
reshard 1-rank 1
reshard tp4 4 --tensor-model-parallel-size 4
reshard pp4-vpp2 8 --pipeline-model-parallel-size 4 --virtual-pipeline-model-parallel-size 2
reshard dp4 4 --data-parallel-size 4
grep -q "tp 1, dp 4" "$TMP/dp4.log" || fail "dp4: the run did not report dp 4"
echo "checkpoint equivalence: ok"
