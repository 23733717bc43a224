#!/usr/bin/env bash
# test/bench_plan.sh — the plan's cost model against this machine's own runs (not part of make test;
# issue 17's acceptance 2): for each row, `mtrain plan --probe` measures the CPU backend and the
# shared-memory communicator (GEMM rates, stream bandwidth, op cost, attention rate, 2-rank allreduce
# alpha and beta) just before the run, the run trains on the CPU backend, and `mtrain plan --device`
# predicts its step time from that profile. measured = the median ms_per_iter of the run's metrics
# JSONL over the iterations after the first (warm-up); ratio = predicted / measured.
# Rows: gpt125m (GPT-2 small) at micro-batch 4 x seq 64, and gpt-tiny at tp = 2, pp = 2, dp = 2
# (two ranks each under `mtrain launch`, one thread per rank on 2 cores).
# On a shared machine every number moves with the other load: each row is one probe + one run.
# Usage: test/bench_plan.sh [gpt-tiny iterations [gpt125m iterations]]   (default 40 and 4)
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN=./mtrain
TINY_ITERS=${1:-40}
BIG_ITERS=${2:-4}
out=$(mktemp -d /tmp/mtrain-bench-plan.XXXXXX); trap 'rm -rf "$out"' EXIT
COMMON=(--backend cpu --set training.precision=fp32 --set logging.interval=1 --set logging.eval_interval=0)
median_ms() { # median ms_per_iter after the first iteration
  python3 - "$1" <<'PY'
import json, sys
ms = [json.loads(l)["ms_per_iter"] for l in open(sys.argv[1]) if '"ms_per_iter"' in l][1:]
ms.sort()
print("%.1f" % (ms[len(ms) // 2] if ms else float("nan")))
PY
}
row() { # row NAME RANKS ARGS...
  local name="$1" n="$2"; shift 2
  "$MTRAIN" plan --probe "$out/prof.json" >/dev/null
  rm -f "$out/m.jsonl"
  if [ "$n" -eq 1 ]; then
    "$MTRAIN" "$@" "${COMMON[@]}" --metrics "$out/m.jsonl" >"$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  else
    "$MTRAIN" launch -n "$n" -- "$@" "${COMMON[@]}" --metrics "$out/m.jsonl" >"$out/log" 2>&1 \
      || { cat "$out/log" >&2; exit 1; }
  fi
  local meas pred
  meas=$(median_ms "$out/m.jsonl")
  pred=$("$MTRAIN" plan "$@" "${COMMON[@]}" --gpus "$n" --device "$out/prof.json" --json |
         python3 -c 'import json, sys; print("%.1f" % (1000 * json.load(sys.stdin)["cost_model"]["step_s"]))')
  printf '| %-34s | %12s | %11s | %6s |\n' "$name" "$pred" "$meas" \
    "$(awk -v p="$pred" -v m="$meas" 'BEGIN { printf "%.2f", p / m }')"
}
echo "CPU backend, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1 /proc/loadavg)"
printf '| %-34s | %12s | %11s | %6s |\n' "run" "predicted ms" "measured ms" "ratio"
printf '|%s|%s|%s|%s|\n' "------------------------------------" "--------------" "-------------" "--------"
TINY=(--config configs/gpt-tiny.yaml --train-iters "$TINY_ITERS")
row "gpt125m B4 x T64 (1 rank)" 1 --config configs/gpt125m.yaml --set training.micro_batch=4 \
  --set training.global_batch=4 --seq-length 64 --train-iters "$BIG_ITERS" --mock-data --set parallel.data=1
row "gpt-tiny tp=2" 2 "${TINY[@]}" --tensor-model-parallel-size 2
row "gpt-tiny pp=2" 2 "${TINY[@]}" --pipeline-model-parallel-size 2
row "gpt-tiny dp=2" 2 "${TINY[@]}" --set training.global_batch=16
