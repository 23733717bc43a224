# Acceptance: gpt-tiny trains on the real corpus (KJV bible, byte tokenizer) for 300
# iterations and its loss falls far below its start; a second run with the same seed gives a
# bitwise identical loss sequence (the CPU backend is deterministic for a fixed thread count).
# The second run is 40 iterations long with --lr-decay-iters 300, the first run's cosine schedule
# (its decay length is otherwise its own iteration count), so its losses and grad norms must equal
# the first run's first 40 bitwise: no third run is needed for the comparison. The seed-7 run that
# shows the comparison can fail needs only 5 iterations (a different initialisation differs from
# the first loss on); the short runs skip validation (logging.eval_interval=0), which none of
# their checks reads.
# Numbers: the start is ~ln(257) = 5.55 (uniform over the byte vocabulary); by iteration 300
# the model has learned English letter statistics and short words: the mean of the last 10
# logged losses must be below 2.6 (measured ~2.2 on this machine; 2.6 is about the loss of
# a unigram byte model, so passing requires real context modelling).
source test/e2e_lib.sh
need_data
"$MTRAIN" --config configs/gpt-tiny.yaml --set logging.interval=1 --metrics "$TMP/a.jsonl" --threads 2 >"$TMP/a.log" 2>&1 \
  || { cat "$TMP/a.log"; fail "training run failed"; }
first=$(json_field "$TMP/a.jsonl" lm_loss | head -n 1)
last10=$(json_field "$TMP/a.jsonl" lm_loss | tail -n 10 | awk '{s+=$1} END {printf "%.4f", s/NR}')
n=$(json_field "$TMP/a.jsonl" lm_loss | wc -l)
echo "gpt-tiny: $n iterations, first loss $first, mean of last 10 $last10"
[ "$n" -eq 300 ] || fail "expected 300 logged iterations, got $n"
awk -v f="$first" 'BEGIN{exit !(f > 5.0 && f < 6.0)}' || fail "first loss $first not near ln(257)=5.55"
awk -v l="$last10" 'BEGIN{exit !(l < 2.6)}' || fail "loss did not fall enough: $last10 >= 2.6"
grep -q "validation loss at iteration" "$TMP/a.log" || fail "no validation line"
grep -q "iteration      300/     300" "$TMP/a.log" || fail "no Megatron-style iteration line"
# determinism: same recipe + seed => identical losses (first 40 iterations of run a)
SHORT=(--lr-decay-iters 300 --set logging.interval=1 --set logging.eval_interval=0 --threads 2)
"$MTRAIN" --config configs/gpt-tiny.yaml --train-iters 40 "${SHORT[@]}" --metrics "$TMP/b.jsonl" >"$TMP/b.log" 2>&1 || fail "second run failed"
[ "$(json_field "$TMP/b.jsonl" lm_loss | wc -l)" -eq 40 ] || fail "second run: expected 40 logged iterations"
diff <(json_field "$TMP/a.jsonl" lm_loss | head -n 40) <(json_field "$TMP/b.jsonl" lm_loss) >/dev/null || fail "same seed gave different losses"
diff <(json_field "$TMP/a.jsonl" grad_norm | head -n 40) <(json_field "$TMP/b.jsonl" grad_norm) >/dev/null || fail "same seed gave different grad norms"
# a different seed must give a different trajectory (the check above can fail)
"$MTRAIN" --config configs/gpt-tiny.yaml --train-iters 5 --seed 7 "${SHORT[@]}" --metrics "$TMP/d.jsonl" >/dev/null 2>&1 || fail "seed-7 run failed"
[ "$(json_field "$TMP/d.jsonl" lm_loss | wc -l)" -eq 5 ] || fail "seed-7 run: expected 5 logged iterations"
! diff <(json_field "$TMP/b.jsonl" lm_loss | head -n 5) <(json_field "$TMP/d.jsonl" lm_loss) >/dev/null || fail "different seeds gave identical losses"
echo "determinism: identical losses and grad norms over 40 iterations (a rerun against run a); seed 7 differs"
# fill-in-the-middle (data.fim, Megatron's --fim-data): every segment rearranged around one-byte sentinels; the
# run trains with finite losses, and they differ from the plain run's (b) from the first iteration on, since the
# samples differ (the transform itself is checked token for token by test/unit/test_fim.c)
"$MTRAIN" --config configs/gpt-tiny.yaml --train-iters 5 --set logging.interval=1 --set logging.eval_interval=0 --metrics "$TMP/f.jsonl" --threads 2 \
  --fim-data --fim-rate 1 --fim-spm-rate 0.5 --fim-prefix-token '{' --fim-middle-token '}' --fim-suffix-token '~' \
  --fim-pad-token '|' >"$TMP/f.log" 2>&1 || { cat "$TMP/f.log"; fail "fim run failed"; }
grep -q "data.fim: rate 1, spm_rate 0.5; sentinels prefix 123 middle 125 suffix 126 pad 124" "$TMP/f.log" \
  || fail "no data.fim line naming the byte sentinels: $(grep fim "$TMP/f.log")"
[ "$(json_field "$TMP/f.jsonl" lm_loss | awk '$1 + 0 == $1 && $1 > 0 && $1 < 10' | wc -l)" -eq 5 ] \
  || fail "fim run: expected 5 finite losses, got $(json_field "$TMP/f.jsonl" lm_loss | tr '\n' ' ')"
! diff <(json_field "$TMP/b.jsonl" lm_loss | head -n 5) <(json_field "$TMP/f.jsonl" lm_loss) >/dev/null \
  || fail "fim run gave the plain run's losses"
[ "$(json_field "$TMP/b.jsonl" lm_loss | head -n 1)" != "$(json_field "$TMP/f.jsonl" lm_loss | head -n 1)" ] \
  || fail "fim run: first loss equals the plain run's"
echo "fim: 5 finite losses, first $(json_field "$TMP/f.jsonl" lm_loss | head -n 1) vs plain $(json_field "$TMP/b.jsonl" lm_loss | head -n 1)"
