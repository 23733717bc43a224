# Acceptance: the Llama-style tiny recipe (RMSNorm, SwiGLU, RoPE, GQA 4 heads / 2 kv heads,
# untied, no biases) trains on the real corpus: over 200 iterations the mean of the last 10
# losses falls below 2.8 from ~5.55 at the start (measured ~2.4).
source test/e2e_lib.sh
need_data
"$MTRAIN" --config configs/llama-tiny.yaml --train-iters 200 --set logging.interval=1 --set logging.eval_interval=0 --metrics "$TMP/a.jsonl" --threads 2 >"$TMP/a.log" 2>&1 \
  || { cat "$TMP/a.log"; fail "training run failed"; }
first=$(json_field "$TMP/a.jsonl" lm_loss | head -n 1)
last10=$(json_field "$TMP/a.jsonl" lm_loss | tail -n 10 | awk '{s+=$1} END {printf "%.4f", s/NR}')
echo "llama-tiny: first loss $first, mean of last 10 $last10"
awk -v f="$first" 'BEGIN{exit !(f > 5.0 && f < 6.0)}' || fail "first loss $first not near ln(257)=5.55"
awk -v l="$last10" 'BEGIN{exit !(l < 2.8)}' || fail "loss did not fall enough: $last10 >= 2.8"
