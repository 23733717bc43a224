#!/usr/bin/env bash
# test/bench.sh — `make bench`: training speed of the CPU backend on this machine, as a table.
# gpt125m (GPT-2 small, fp32 on CPU) at micro-batch 4 x seq 64 and gpt-tiny at its recipe
# shape; each row: ms/iteration (mean after the first), tokens/s, achieved GFLOP/s (Megatron's
# FLOPs formula), peak memory. The reference points for gpt125m 4x64 on this 2-core machine
# (from the issue): llm.c's CPU trainer 5.1 s, PyTorch 1.13 + OpenBLAS 2.2 s; target < 1.2 s.
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN=./mtrain
DATA=data/kjv_text_document
out=$(mktemp -d /tmp/mtrain-bench.XXXXXX); trap 'rm -rf "$out"' EXIT
row() { # row NAME ARGS...
  local name="$1"; shift
  "$MTRAIN" "$@" --set data.path=$DATA --set logging.eval_interval=0 --backend cpu >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
  local line; line=$(grep "^mtrain: finished" "$out/log")
  local ms tps gf mem
  ms=$(sed -E 's/.*: ([0-9.]+) ms\/iteration.*/\1/' <<<"$line")
  tps=$(sed -E 's/.* ([0-9.]+) tokens\/s.*/\1/' <<<"$line")
  gf=$(sed -E 's/.* ([0-9.]+) GFLOP\/s.*/\1/' <<<"$line")
  mem=$(sed -E 's/.*peak memory ([0-9.]+) MiB.*/\1/' <<<"$line")
  printf '| %-28s | %10s | %10s | %10s | %10s |\n' "$name" "$ms" "$tps" "$gf" "$mem"
}
echo "CPU backend, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto}"
printf '| %-28s | %10s | %10s | %10s | %10s |\n' "recipe" "ms/iter" "tokens/s" "GFLOP/s" "peak MiB"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------" "------------" "------------" "------------" "------------"
row "gpt125m mb4 x seq64 (fp32)" --config configs/gpt125m.yaml --set training.micro_batch=4 --set training.global_batch=4 \
    --seq-length 64 --train-iters 6 --set logging.interval=1 --set training.precision=fp32 --set checkpoint.dir= --set checkpoint.save_interval=0
row "gpt-tiny (recipe shape)" --config configs/gpt-tiny.yaml --train-iters 30 --set logging.interval=10
row "llama-tiny (recipe shape)" --config configs/llama-tiny.yaml --train-iters 30 --set logging.interval=10
