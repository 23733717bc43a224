#!/usr/bin/env bash
# test/bench_pp.sh — the pipeline bubble measured against the formula on the CPU backend (not
# part of make test). pp = 4 stages (one rank each, `mtrain launch -n 4`), an 8-layer GPT
# (gpt-tiny with model.layers=8: 2 layers per stage, or 2 chunks of 1 with vpp = 2), micro-batch 1,
# m in {1, 2, 4, 8, 16} micro-batches per iteration (global batch = m). Each row: the schedule,
# m, the measured bubble (1 - F/B time / schedule time, summed over the 4 stages: the mean
# stage's idle share, as the simulator reports it; averaged over the iterations after the
# first), the formula (p-1)/(m+p-1) (interleaved: (p-1)/(v m+p-1)), and ms/iteration.
# Interleaved 1F1B (vpp = 2) runs at the same m where Megatron allows it (m % p == 0).
# Why the measured value exceeds the formula: the last stage also computes the output layer
# and the loss, the first the embedding (stages are not equal), and transfers and the
# activation copies are not free; with ranks x threads > cores the stages also compete for
# cores, which inflates both columns (run it on a machine with >= 4 free cores).
# Usage: [P=stages] test/bench_pp.sh [iterations]   (default 4 stages, 8 iterations)
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN=./mtrain
ITERS=${1:-8}
P=${P:-4} # P=2 test/bench_pp.sh: two stages (no oversubscription on a 2-core machine)
out=$(mktemp -d /tmp/mtrain-bench-pp.XXXXXX); trap 'rm -rf "$out"' EXIT
RECIPE=(--config configs/gpt-tiny.yaml --set model.layers=8 --set model.hidden=256 --set model.heads=4
        --seq-length 128 --micro-batch-size 1 --train-iters "$ITERS" --set logging.interval=1
        --set logging.eval_interval=0 --backend cpu --pipeline-model-parallel-size $P)
row() { # row NAME M VPP
  local name=$1 m=$2 v=$3
  "$MTRAIN" launch -n $P -- "${RECIPE[@]}" --global-batch-size "$m" --virtual-pipeline-model-parallel-size "$v" \
    --metrics "$out/m.jsonl" >"$out/log" 2>&1 || { tail -n 20 "$out/log" >&2; exit 1; }
  # mean over iterations 2..ITERS of bubble and ms/iteration
  awk -v name="$name" -v m="$m" -F'[:,}]' '
    { for (i = 1; i < NF; i++) { k = $i; gsub(/[{" ]/, "", k); v[k] = $(i + 1) } }
    v["iteration"] > 1 { b += v["bubble"]; f = v["bubble_formula"]; ms += v["ms_per_iter"]; n++ }
    END { printf "%-12s %4d %11.1f%% %11.1f%% %12.1f\n", name, m, 100 * b / n, 100 * f, ms / n }' "$out/m.jsonl"
}
printf "%-12s %4s %12s %12s %12s\n" schedule m measured formula ms/iter
for m in 1 2 4 8 16; do row 1f1b "$m" 1; done
for m in 4 8 16; do [ $((m % P)) -eq 0 ] && row "interleaved" "$m" 2; done
echo "(pp=$P, $(nproc) cores, each row the mean of iterations 2..$ITERS; formula: 1f1b (p-1)/(m+p-1), interleaved (p-1)/(2m+p-1))"
