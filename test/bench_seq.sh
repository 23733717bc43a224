#!/usr/bin/env bash
# test/bench_seq.sh — activation memory and step time against the sequence length (part of
# `make bench`): a gpt125m shape (configs/gpt125m.yaml: hidden 768, 12
# heads, vocabulary 50257) cut to BENCH_SEQ_LAYERS layers (default 2) to keep it short, one
# sequence per step, T in BENCH_SEQ_T (default 256 1024 4096 8192), recompute none / selective /
# full, on the CPU backend (fp32). Per run: the trainer's activation buffer and `mtrain plan`'s
# activation figure for the same recipe, the process's peak resident memory (weights, gradients,
# Adam state and activations; the weights part is the same for every T but the position table),
# and the time of iteration 2 (iteration 1 also faults its pages in). Attention is flash-style:
# no T x T buffer exists any more; the last columns give what a path that keeps the fp32 softmax
# probabilities for backward (the pre-flash design) would need for them: H T^2 4 bytes per layer,
# for these layers and for gpt125m's 12. Prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN="${MTRAIN:-./mtrain}"
LAYERS="${BENCH_SEQ_LAYERS:-2}"
read -r -a TS <<<"${BENCH_SEQ_T:-256 1024 4096 8192}"
[ -x "$MTRAIN" ] || { echo "bench_seq: $MTRAIN not built (make)"; exit 1; }
if ! MTRAIN="$MTRAIN" ./scripts/fetch-corpus-gpt2.sh data >/dev/null 2>&1; then
  echo "bench_seq: skipped: data/corpus_text_document could not be made (GPT-2 tokenizer files: npm?)"
  exit 0
fi
out=$(mktemp -d /tmp/mtrain-bench-seq.XXXXXX); trap 'rm -rf "$out"' EXIT
H=12
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "sequence length: gpt125m shape with $LAYERS layers, batch 1, fp32 CPU backend, $(nproc) cores (load average $(cut -d' ' -f1 /proc/loadavg))"
printf '| %5s | %-9s | %9s | %9s | %9s | %10s | %14s | %14s |\n' "T" "recompute" "acts MiB" "plan MiB" \
  "peak MiB" "step ms" "TxT MiB ($LAYERS L)" "TxT MiB (12 L)"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' "-------" "-----------" "-----------" "-----------" "-----------" \
  "------------" "----------------" "----------------"
for T in "${TS[@]}"; do
  for rc in none selective full; do
    ARGS=(--config configs/gpt125m.yaml --num-layers "$LAYERS" --seq-length "$T" --micro-batch-size 1
      --global-batch-size 1 --set training.backend=cpu --set training.precision=fp32 --set training.recompute=$rc)
    "$MTRAIN" "${ARGS[@]}" --train-iters 2 --set logging.interval=1 --eval-interval 0 --eval-iters 0 \
      --set checkpoint.dir= --set checkpoint.save_interval=0 >"$out/log" 2>&1 ||
      { tail -n 20 "$out/log"; echo "bench_seq: T $T recompute $rc failed"; exit 1; }
    acts=$(grep -o '[0-9.]* MiB activations per rank' "$out/log" | head -n 1 | cut -d' ' -f1)
    peak=$(grep -o 'peak memory [0-9.]* MiB' "$out/log" | cut -d' ' -f3)
    step=$(grep " iteration  *2/" "$out/log" | sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/')
    plan=$("$MTRAIN" plan --gpus 1 "${ARGS[@]}" --json | grep -o '"acts_bytes": [0-9.]*' | head -n 1 |
      awk '{ printf "%.1f", $2 / 1048576 }')
    txt=$(awk -v t="$T" -v h="$H" 'BEGIN { printf "%.0f", h * t * t * 4 }')
    printf '| %5s | %-9s | %9s | %9s | %9s | %10s | %14s | %14s |\n' "$T" "$rc" "$acts" "$plan" "$peak" "$step" \
      "$(mib $((txt * LAYERS)))" "$(mib $((txt * 12)))"
  done
done
