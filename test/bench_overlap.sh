#!/usr/bin/env bash
# test/bench_overlap.sh — overlapped gradient reduction on the CPU backend (not part of make test):
# dp = 2 under `mtrain launch` on a mid-size GPT (gpt-tiny scaled to hidden 384, 6 heads, 6
# layers, seq 128; ~11M parameters, so one reduction moves ~44 MB per rank), with and without
# --overlap-grad-reduce (and, with the distributed optimizer, --overlap-param-gather), buckets of
# 1M elements. Each row: ms/iteration of the logging rank (mean over the iterations after the
# first), the step-time ratio against the same optimizer's run without overlap (measured in this
# run), the dp communication the main thread waited for per iteration (all of it without overlap;
# the exposed waits with it) and the share of the baseline's wait that overlap saved, and with
# overlap the time the communication thread spent in the bucket collectives and the share of it
# hidden (1 - exposed / thread time), for the gradients behind backward and the parameter gather
# behind the next forward. The thread's time includes waiting for the peer to finish the same
# bucket (the ranks are not in lockstep), so it exceeds the baseline's wait: "saved" is the
# conservative measure of what overlap hides, "hidden" the thread-side one.
# On 2 shared cores the communication thread competes with the compute threads for the cores (and
# for memory bandwidth), so the hidden share is real but the step-time gain is small or negative;
# on GPUs the collectives run on the network / NVLink instead. Each row is the best (lowest
# ms/iteration) of REPEATS rounds, each round running every configuration once.
# Usage: test/bench_overlap.sh [iterations [repeats]]   (default 5 iterations, best of 2 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN=./mtrain
ITERS=${1:-5}
REPEATS=${2:-2}
out=$(mktemp -d /tmp/mtrain-bench-overlap.XXXXXX); trap 'rm -rf "$out"' EXIT
RECIPE=(--config configs/gpt-tiny.yaml --set model.hidden=384 --set model.heads=6 --set model.layers=6
        --seq-length 128 --micro-batch-size 2 --global-batch-size 8 --train-iters "$ITERS"
        --set logging.interval=1 --set logging.eval_interval=0 --backend cpu --ddp-bucket-size 1000000)
run_once() { # run_once ARGS... -> "ms dp_ms reduce_ms reduce_hidden gather_ms gather_hidden" of the logging rank
  "$MTRAIN" launch -n 2 -- "${RECIPE[@]}" "$@" >"$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  local ms dp red=- rh=- ga=- gh=- line
  ms=$(grep "mtrain: finished" "$out/log" | sed -E 's/.*: ([0-9.]+) ms\/iteration.*/\1/')
  dp=$(grep "mtrain: communication" "$out/log" | sed -E 's/.*dp ([0-9.]+) ms\).*/\1/')
  if line=$(grep "mtrain: overlapped gradient reduction" "$out/log"); then
    red=$(sed -E 's/.*reduction ([0-9.]+) ms\/iteration.*/\1/' <<<"$line")
    rh=$(sed -E 's/.*backward \(([0-9.]+)% hidden\).*/\1%/' <<<"$line")
    if grep -q "parameter gather" <<<"$line"; then
      ga=$(sed -E 's/.*parameter gather ([0-9.]+) ms\/iteration.*/\1/' <<<"$line")
      gh=$(sed -E 's/.*forward \(([0-9.]+)% hidden\).*/\1%/' <<<"$line")
    fi
  fi
  echo "$ms $dp $red $rh $ga $gh"
}
CONFIGS=("" "--overlap-grad-reduce" "--use-distributed-optimizer" "--use-distributed-optimizer --overlap-grad-reduce"
         "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather")
best=("" "" "" "" "")
for _ in $(seq "$REPEATS"); do # rounds over every configuration, so drift in the machine's load hits all alike
  for i in "${!CONFIGS[@]}"; do
    read -r -a extra <<<"${CONFIGS[$i]}"
    r=$(run_once "${extra[@]}")
    if [ -z "${best[$i]}" ] || awk -v a="${r%% *}" -v b="${best[$i]%% *}" 'BEGIN { exit !(a < b) }'; then best[$i]=$r; fi
  done
done
row() { # row NAME BASELINE_FIELDS FIELDS
  local name=$1 base_ms base_dp ms dp red rh ga gh
  read -r base_ms base_dp _ <<<"$2"
  read -r ms dp red rh ga gh <<<"$3"
  local ratio saved
  ratio=$(awk -v a="$ms" -v b="$base_ms" 'BEGIN { printf "%.3f", a / b }')
  saved=$(awk -v a="$dp" -v b="$base_dp" 'BEGIN { printf "%.1f%%", 100 * (1 - a / b) }')
  printf '| %-30s | %8s | %6s | %10s | %7s | %10s | %7s | %10s | %7s |\n' "$name" "$ms" "$ratio" "$dp" "$saved" "$red" "$rh" \
    "$ga" "$gh"
}
echo "CPU backend, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "dp 2, gpt hidden 384, 6 heads, 6 layers, seq 128, micro-batch 2, global batch 8, buckets of 1M elements, $ITERS iterations, best of $REPEATS rounds"
printf '| %-30s | %8s | %6s | %10s | %7s | %10s | %7s | %10s | %7s |\n' "run" "ms/iter" "ratio" "dp wait ms" "saved" \
  "reduce ms" "hidden" "gather ms" "hidden"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' "--------------------------------" "----------" "--------" "------------" \
  "---------" "------------" "---------" "------------" "---------"
row "allreduce after backward" "${best[0]}" "${best[0]}"
row "allreduce overlapped" "${best[0]}" "${best[1]}"
row "distributed, after backward" "${best[2]}" "${best[2]}"
row "distributed, grads overlapped" "${best[2]}" "${best[3]}"
row "distributed, grads + params" "${best[2]}" "${best[4]}"
