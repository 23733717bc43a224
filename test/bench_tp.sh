#!/usr/bin/env bash
# test/bench_tp.sh — tensor-parallel speed on the CPU backend (not part of make test): a
# mid-size GPT (gpt-tiny scaled to hidden 512, 8 heads, 6 layers, seq 128; ~19M parameters)
# at tp = 1, 2, 4, with and without sequence parallelism, one rank per tp slot under
# `mtrain launch`. Each row: ms/iteration (mean over the iterations after the first, from the
# logging rank), the time that rank spent inside tp collectives per iteration and its share of
# the iteration, and collectives per iteration. The comm time is wall time in the collective
# calls, so it includes waiting for slower peers (load imbalance, and oversubscription when
# ranks x threads > cores: the launcher gives each rank cores/ranks threads, at least 1).
# Each row is the best (lowest ms/iteration) of REPEATS runs (the harness, shared with
# bench_cp.sh, is test/bench_lib.sh).
# Usage: test/bench_tp.sh [iterations [repeats]]   (default 6 iterations, best of 2 runs)
source "$(dirname "$0")/bench_lib.sh" # also: set -euo pipefail, cd to the repository root
bench_init tp 6 "$@"
bench_gpt_tiny 512 8 6 128 4 8
run_once() { # run_once TP ARGS... -> "ms comm collectives" of the logging rank
  bench_run "$1" --tensor-model-parallel-size "${@:2}"
  local comm=0 coll=0 line
  if line=$(grep "mtrain: communication" "$out/log"); then
    comm=$(sed -E 's/.*tp ([0-9.]+) ms in.*/\1/' <<<"$line")
    coll=$(sed -E 's/.* in ([0-9]+) collectives.*/\1/' <<<"$line")
  fi
  echo "$(bench_ms) $comm $coll"
}
row() { # row NAME TP ARGS...
  local name="$1" tp="$2" best; shift 2
  best=$(bench_best_of run_once "$tp" "$@")
  read -r ms comm coll <<<"$best"
  local share; share=$(awk -v c="$comm" -v m="$ms" 'BEGIN { printf "%.1f%%", 100 * c / m }')
  printf '| %-22s | %10s | %12s | %8s | %11s |\n' "$name" "$ms" "$comm" "$share" "$coll"
}
bench_machine
echo "gpt hidden 512, 8 heads, 6 layers, seq 128, micro-batch 4, global batch 8, $ITERS iterations, best of $REPEATS runs"
printf '| %-22s | %10s | %12s | %8s | %11s |\n' "layout" "ms/iter" "tp comm ms" "share" "collectives"
printf '|%s|%s|%s|%s|%s|\n' "------------------------" "------------" "--------------" "----------" "-------------"
row "tp=1" 1
row "tp=1 (1 thread)" 1 --threads 1
row "tp=2" 2
row "tp=2 sequence-parallel" 2 --sequence-parallel
row "tp=4" 4
row "tp=4 sequence-parallel" 4 --sequence-parallel
