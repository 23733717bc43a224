#!/usr/bin/env bash
# test/bench_start.sh — start-up benchmark (part of `make bench`): configs/gpt125m.yaml
# (124M parameters, GPT-2 BPE on the KJV corpus) at micro/global batch 4 x sequence 64, from
# process start to the end of its first iteration. The end is the timestamp mtrain prints on
# the iteration-1 log line; the start is taken just before the exec. Also printed, from the same
# runs: iteration 1's own time (the trainer's timer), so start-up = the rest (recipe, data
# index, allocation, weight init), and a baseline measured here too: `mtrain check` of the same
# recipe (process start, libraries, recipe load and validation, no allocation). Median of
# BENCH_REPEATS runs (default 3). Target: at most 2 s on the 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN="${MTRAIN:-./mtrain}"
REPEATS="${BENCH_REPEATS:-3}"
[ -x "$MTRAIN" ] || { echo "bench_start: $MTRAIN not built (make)"; exit 1; }
if ! MTRAIN="$MTRAIN" ./scripts/fetch-corpus-gpt2.sh data >/dev/null 2>&1; then
  echo "bench_start: skipped: data/corpus_text_document could not be made (GPT-2 tokenizer files: npm?)"
  exit 0
fi
out=$(mktemp -d /tmp/mtrain-bench-start.XXXXXX); trap 'rm -rf "$out"' EXIT
ARGS=(--config configs/gpt125m.yaml --seq-length 64 --micro-batch-size 4 --global-batch-size 4 --train-iters 1
  --eval-interval 0 --eval-iters 0 --set checkpoint.dir= --set checkpoint.save_interval=0)
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: >"$out/check" >"$out/first" >"$out/iter"
for _ in $(seq 1 "$REPEATS"); do
  t0=$(now)
  "$MTRAIN" check "${ARGS[@]}" >/dev/null 2>&1 || { echo "bench_start: mtrain check failed"; exit 1; }
  awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f\n", b - a }' >>"$out/check"
  t0=$(now)
  "$MTRAIN" "${ARGS[@]}" >"$out/log" 2>&1 || { tail -n 20 "$out/log"; echo "bench_start: training run failed"; exit 1; }
  line=$(grep -m1 " iteration  *1/" "$out/log") || { cat "$out/log"; exit 1; }
  ts=$(sed -E 's/^ *\[([^]]+)\].*/\1/' <<<"$line")
  t1=$(date -d "$ts" +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }' >>"$out/first"
  sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/' <<<"$line" | awk '{ printf "%.3f\n", $1 / 1000 }' >>"$out/iter"
done
check=$(median <"$out/check"); first=$(median <"$out/first"); iter=$(median <"$out/iter")
startup=$(awk -v f="$first" -v i="$iter" 'BEGIN { printf "%.3f", f - i }')
echo "start-up: gpt125m, batch 4 x seq 64, $(nproc) cores, median of $REPEATS runs (load average $(cut -d' ' -f1 /proc/loadavg))"
printf '| %-58s | %9s |\n' "measure" "seconds"
printf '|%s|%s|\n' "------------------------------------------------------------" "-----------"
printf '| %-58s | %9s |\n' "baseline: \`mtrain check\`, same recipe (no allocation)" "$check"
printf '| %-58s | %9s |\n' "process start -> end of iteration 1" "$first"
printf '| %-58s | %9s |\n' "  of which iteration 1 itself (the trainer's timer)" "$iter"
printf '| %-58s | %9s |\n' "  of which start-up (data, allocation, weight init, ...)" "$startup"
awk -v f="$first" -v i="$iter" -v c="$check" 'BEGIN {
  printf "ratios: first iteration done at %.2fx iteration 1'\''s own time; start-up %.1fx the check baseline\n", f / i, (f - i) / c
  printf "target: process start -> end of iteration 1 at most 2 s: %s (%.2f s)\n", f <= 2 ? "met" : "NOT met", f }'
