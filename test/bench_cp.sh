#!/usr/bin/env bash
# test/bench_cp.sh — context-parallel speed on the CPU backend (not part of make test): a small GPT
# (gpt-tiny scaled to hidden 256, 4 heads, 4 layers) on long sequences (1024 tokens, where the
# attention core is a large share of the work), cp = 1 against cp = 2 (one rank per cp slot under
# `mtrain launch`, each with cores / ranks threads). Each row: ms/iteration (mean over the
# iterations after the first, from the logging rank), the ratio to the cp = 1 row measured in
# the same run, and the logging rank's time in the K/V ring exchange per iteration. On one node
# the ring is memory copies through shared memory; the ratio shows the cost of the split (the
# per-block launches, the logsumexp merges, the exchanges and the dp x cp gradient allreduce)
# against the same cores used by one rank (and a one-thread cp = 1 row: what one core does alone,
# so the cp = 1 row's own threading efficiency shows). Each row is the best of REPEATS runs (the
# harness, shared with bench_tp.sh, is test/bench_lib.sh).
# Usage: test/bench_cp.sh [iterations [repeats]]   (default 4 iterations, best of 2 runs)
source "$(dirname "$0")/bench_lib.sh" # also: set -euo pipefail, cd to the repository root
bench_init cp 4 "$@"
bench_gpt_tiny 256 4 4 1024 1 2
run_once() { # run_once CP ARGS... -> "ms ring_ms" of the logging rank
  bench_run "$1" --context-parallel-size "${@:2}"
  local ring=0 line
  if line=$(grep "mtrain: cp ring exchange" "$out/log"); then
    ring=$(sed -E 's/.*exchange ([0-9.]+) ms.*/\1/' <<<"$line")
  fi
  echo "$(bench_ms) $ring"
}
bench_machine
echo "gpt hidden 256, 4 heads, 4 layers, seq 1024, micro-batch 1, global batch 2, $ITERS iterations, best of $REPEATS runs"
printf '| %-15s | %10s | %14s | %12s |\n' "layout" "ms/iter" "ratio to cp=1" "ring ms/iter"
printf '|%s|%s|%s|%s|\n' "-----------------" "------------" "----------------" "--------------"
r=$(bench_best_of run_once 1); read -r base_ms _ <<<"$r"
printf '| %-15s | %10s | %14s | %12s |\n' "cp=1" "$base_ms" "1.00" "-"
r=$(bench_best_of run_once 1 --threads 1); read -r ms1 _ <<<"$r"
printf '| %-15s | %10s | %14s | %12s |\n' "cp=1 (1 thread)" "$ms1" "$(awk -v a="$ms1" -v b="$base_ms" 'BEGIN { printf "%.2f", a / b }')" "-"
r=$(bench_best_of run_once 2); read -r ms ring <<<"$r"
printf '| %-15s | %10s | %14s | %12s |\n' "cp=2" "$ms" "$(awk -v a="$ms" -v b="$base_ms" 'BEGIN { printf "%.2f", a / b }')" "$ring"
