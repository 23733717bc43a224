# test/bench_lib.sh — the harness test/bench_cp.sh and test/bench_tp.sh share (sourced, not run):
# one recipe run on one rank or on N ranks under `mtrain launch`, the logging rank's figures read
# from its log, and the best of REPEATS runs (on a shared machine a single run can be several times
# slower when another process takes a core). Sourcing it sets -euo pipefail and moves to the
# repository root; the caller then calls bench_init NAME DEFAULT_ITERS "$@" (ITERS, REPEATS) and
# sets the RECIPE array (mtrain's arguments; bench_gpt_tiny); a failed run prints its log and
# stops the bench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# bench_gpt_tiny HIDDEN HEADS LAYERS SEQ MICRO GLOBAL: RECIPE = gpt-tiny of that shape on the CPU
# backend, ITERS iterations, every iteration logged, no validation
bench_gpt_tiny() {
  RECIPE=(--config configs/gpt-tiny.yaml --set model.hidden="$1" --set model.heads="$2" --set model.layers="$3"
          --seq-length "$4" --set training.micro_batch="$5" --set training.global_batch="$6" --train-iters "$ITERS"
          --set logging.interval=1 --set logging.eval_interval=0 --backend cpu)
}

# bench_init NAME DEFAULT_ITERS [ITERATIONS [REPEATS]]: ITERS (DEFAULT_ITERS unless given) and
# REPEATS (default 2) from the bench's own arguments, MTRAIN, and a temp folder $out
# (/tmp/mtrain-bench-NAME.*) removed on exit
bench_init() {
  ITERS=${3:-$2}
  REPEATS=${4:-2}
  MTRAIN=./mtrain
  out=$(mktemp -d "/tmp/mtrain-bench-$1.XXXXXX")
  trap 'rm -rf "$out"' EXIT
}

# bench_run N FLAG ARGS...: RECIPE plus ARGS on one rank (N = 1), else on N ranks under
# `mtrain launch` with FLAG N added (e.g. --tensor-model-parallel-size); the log is $out/log
bench_run() {
  local n="$1" flag="$2"; shift 2
  if [ "$n" -eq 1 ]; then
    "$MTRAIN" "${RECIPE[@]}" "$@" >"$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  else
    "$MTRAIN" launch -n "$n" -- "${RECIPE[@]}" "$flag" "$n" "$@" >"$out/log" 2>&1 \
      || { cat "$out/log" >&2; exit 1; }
  fi
}

# bench_ms: the logging rank's ms/iteration (mean over the iterations after the first) in $out/log
bench_ms() { grep "mtrain: finished" "$out/log" | sed -E 's/.*: ([0-9.]+) ms\/iteration.*/\1/'; }

# bench_best_of CMD ARGS...: runs CMD (which prints "ms other-figures...") REPEATS times and
# prints the line with the lowest ms; exits 1 when a run fails
bench_best_of() {
  local best="" r
  for _ in $(seq "$REPEATS"); do
    r=$("$@") || exit 1
    if [ -z "$best" ] || awk -v a="${r%% *}" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then best=$r; fi
  done
  echo "$best"
}

# bench_machine: the first line of every table, the cores and CPU model it was measured on
bench_machine() {
  echo "CPU backend, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
}
