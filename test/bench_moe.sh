#!/usr/bin/env bash
# test/bench_moe.sh — `make bench`: a mixture-of-experts model against the dense model of the same
# active FLOPs, measured in the same run: mixtral-tiny (8 SwiGLU experts of width F, top-2, router,
# capacity 1.0) against the same llama with one SwiGLU MLP of width 2F (the two experts a token
# visits), both serial; then mixtral-tiny at ep 2 (dp 2), with the share of the step spent in the
# expert all-to-alls. Speeds are ratios against the dense row; absolute times depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN=./mtrain
out=$(mktemp -d "${TMPDIR:-/tmp}/mtrain-bench-moe.XXXXXX"); trap 'rm -rf "$out"' EXIT
F=$(awk '/ffn_hidden:/{print $2; exit}' configs/mixtral-tiny.yaml)
COMMON=(--config configs/mixtral-tiny.yaml --train-iters 12 --set logging.eval_interval=0 --set logging.eval_iters=0
        --set logging.interval=1 --backend cpu)
ms_of() { grep -o 'finished [0-9]* iterations: [0-9.]* ms/iteration' "$1" | awk '{print $4}'; }
"$MTRAIN" "${COMMON[@]}" --set model.moe.experts=0 --set model.ffn_hidden=$((2 * F)) >"$out/dense.log" 2>&1 || { cat "$out/dense.log"; exit 1; }
"$MTRAIN" "${COMMON[@]}" >"$out/moe.log" 2>&1 || { cat "$out/moe.log"; exit 1; }
"$MTRAIN" launch -n 2 -- "${COMMON[@]}" --expert-model-parallel-size 2 --micro-batch-size 4 >"$out/ep2.log" 2>&1 || { tail "$out/ep2.log"; exit 1; }
dense=$(ms_of "$out/dense.log"); moe=$(ms_of "$out/moe.log"); ep2=$(ms_of "$out/ep2.log")
a2a=$(grep -o 'expert all-to-all [0-9.]* ms/iteration = [0-9.]*%' "$out/ep2.log" | head -n 1)
echo "mixture of experts vs dense of the same active FLOPs (mixtral-tiny shape, 12 iterations, mean after the first)"
printf '| %-58s | %14s | %12s |\n' "model" "ms/iteration" "vs dense"
printf '|%s|%s|%s|\n' "------------------------------------------------------------" "----------------" "--------------"
r() { awk -v n="$1" -v m="$2" -v d="$dense" 'BEGIN { printf "| %-58s | %14.1f | %11.2fx |\n", n, m, m / d }'; }
r "dense llama, SwiGLU width $((2 * F)) (serial)" "$dense"
r "MoE: 8 experts of width $F, top-2, capacity 1.0 (serial)" "$moe"
r "MoE at ep 2 (2 ranks, dp 2, per-rank step)" "$ep2"
echo "ep 2: ${a2a:-no all-to-all line} of the step (rank 0)"
