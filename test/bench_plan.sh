#!/usr/bin/env bash
# test/bench_plan.sh — the plan's cost model against this machine's own runs (not part of make test;
# the target: every row within 15% of the measured run). Rows: gpt125m (GPT-2 small) at micro-batch 4 x seq 64 (1 rank, all cores),
# and gpt-tiny at tp = 2, pp = 2, dp = 2, and dp = 2 with --overlap-grad-reduce (the gradient buckets reduced by
# the communication thread during the backward: the plan's overlap formula, docs/plan.md "Overlap") (two
# ranks under `mtrain launch`, one thread each on 2 cores).
# One measurement of a row = `mtrain plan --probe` (the CPU backend's GEMM, stream, op and attention
# rates, alone and with 2 ranks at once, and the shared-memory communicator's latency and bandwidth),
# immediately followed by the run on the CPU backend, and `mtrain plan --device` predicting that run's
# step from that probe: the probe is taken in the same run, within seconds of it.
# measured = the median ms_per_iter of the run's metrics JSONL after the first (warm-up) iteration.
# On a shared machine each number moves with the other load (the same run's step by +-25% between
# repeats), so each row is measured R times, the rows interleaved (row 1, row 2, ..., row 1, row 2, ...)
# so that a slow phase of the host falls on every row, and the table gives per row the median predicted,
# the median measured, their ratio (predicted / measured), the spread (min..max) of both over the R
# repetitions, and each repetition's own ratio: the machine's noise beside the model's error.
# Usage: test/bench_plan.sh [R [gpt-tiny iterations [gpt125m iterations]]]   (default 3, 40 and 4;
# about 3 minutes on an idle 2-core machine)
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN=./mtrain
REPS=${1:-3}
TINY_ITERS=${2:-40}
BIG_ITERS=${3:-4}
out=$(mktemp -d /tmp/mtrain-bench-plan.XXXXXX); trap 'rm -rf "$out"' EXIT
COMMON=(--backend cpu --set training.precision=fp32 --set logging.interval=1 --set logging.eval_interval=0)
TINY=(--config configs/gpt-tiny.yaml --train-iters "$TINY_ITERS")
NAMES=("gpt125m B4 x T64 (1 rank)" "gpt-tiny tp=2" "gpt-tiny pp=2" "gpt-tiny dp=2" "gpt-tiny dp=2 overlap")
RANKS=(1 2 2 2 2)
row_args() { # row_args I: the recipe arguments of row I
  case "$1" in
    0) echo --config configs/gpt125m.yaml --set training.micro_batch=4 --set training.global_batch=4 \
         --seq-length 64 --train-iters "$BIG_ITERS" --mock-data --set parallel.data=1 ;;
    1) echo "${TINY[@]}" --tensor-model-parallel-size 2 ;;
    2) echo "${TINY[@]}" --pipeline-model-parallel-size 2 ;;
    3) echo "${TINY[@]}" --set training.global_batch=16 ;;
    4) echo "${TINY[@]}" --set training.global_batch=16 --overlap-grad-reduce ;;
  esac
}
median_ms() { # median ms_per_iter after the first iteration
  python3 - "$1" <<'PY'
import json, sys
ms = [json.loads(l)["ms_per_iter"] for l in open(sys.argv[1]) if '"ms_per_iter"' in l][1:]
ms.sort()
print("%.2f" % (ms[len(ms) // 2] if ms else float("nan")))
PY
}
measure() { # measure I REP: one probe, the run, the prediction; appends "I pred meas" to $out/results
  local i="$1" rep="$2" n="${RANKS[$1]}" args pred meas
  read -r -a args <<<"$(row_args "$i")"
  "$MTRAIN" plan --probe "$out/prof.json" >/dev/null
  rm -f "$out/m.jsonl"
  if [ "$n" -eq 1 ]; then
    "$MTRAIN" "${args[@]}" "${COMMON[@]}" --metrics "$out/m.jsonl" >"$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  else
    "$MTRAIN" launch -n "$n" -- "${args[@]}" "${COMMON[@]}" --metrics "$out/m.jsonl" >"$out/log" 2>&1 \
      || { cat "$out/log" >&2; exit 1; }
  fi
  meas=$(median_ms "$out/m.jsonl")
  pred=$("$MTRAIN" plan "${args[@]}" "${COMMON[@]}" --gpus "$n" --device "$out/prof.json" --json |
         python3 -c 'import json, sys; print("%.2f" % (1000 * json.load(sys.stdin)["cost_model"]["step_s"]))')
  echo "$i $pred $meas" >>"$out/results"
  printf '  repetition %d, %-26s predicted %9s ms, measured %9s ms (load %s)\n' "$rep" "${NAMES[$i]}" "$pred" "$meas" \
    "$(cut -d' ' -f1 /proc/loadavg)"
}
echo "CPU backend, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto}, $REPS repetitions, load $(cut -d' ' -f1 /proc/loadavg)"
: >"$out/results"
for rep in $(seq 1 "$REPS"); do
  for i in 0 1 2 3 4; do measure "$i" "$rep"; done
done
echo "load at the end $(cut -d' ' -f1 /proc/loadavg)"
python3 - "$out/results" "${NAMES[@]}" <<'PY'
import sys
names = sys.argv[2:]
rows = {}
for line in open(sys.argv[1]):
    i, p, m = line.split()
    rows.setdefault(int(i), []).append((float(p), float(m)))
def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
print("| %-26s | %12s | %18s | %11s | %17s | %6s | %-22s |" % ("run", "predicted ms", "predicted min..max",
      "measured ms", "measured min..max", "ratio", "ratio per repetition"))
print("|%s|%s|%s|%s|%s|%s|%s|" % ("-" * 28, "-" * 14, "-" * 20, "-" * 13, "-" * 19, "-" * 8, "-" * 24))
for i in sorted(rows):
    p = [x[0] for x in rows[i]]
    m = [x[1] for x in rows[i]]
    fmt = (lambda x: "%.0f" % x) if median(m) >= 1000 else (lambda x: "%.1f" % x)
    print("| %-26s | %12s | %18s | %11s | %17s | %6.2f | %-22s |" % (names[i], fmt(median(p)),
          fmt(min(p)) + ".." + fmt(max(p)), fmt(median(m)), fmt(min(m)) + ".." + fmt(max(m)),
          median(p) / median(m), " ".join("%.2f" % (a / b) for a, b in rows[i])))
PY
