#!/usr/bin/env bash
# scripts/gpu-check.sh — the one prepared check for a lent GPU machine: one H200, a CUDA 13 +
# PyTorch image where nothing can be installed, at most 10 minutes a call, at most 8 files back
# and the last 12,000 characters of output. It runs from the GPU kit (scripts/gpu-kit.sh, `make
# gpu-kit`), which carries the host binaries built on a CPU machine, the Debian libraries they
# need, the data and the CUDA module's sources; only the CUDA module is built there, with that
# machine's nvcc. On the GPU machine (README, "Checking a GPU machine"):
#
#   bash gpu-kit/run.sh --out "$OUT"         unpacks the kit, runs this script from it
#   bash gpu-kit/run.sh --dry-run --out DIR  on a CPU machine: the same paths and fallbacks, GPU
#                                            steps "skipped: dry run" (make test runs it)
#   scripts/gpu-check.sh --prepare           (CPU machine, used by gpu-kit.sh) the GPT-2 BPE
#                                            corpus and gpt-tiny's CPU reference losses in data/
#
# It also runs from a source tree (./mtrain, build/test/ops/*, build/libmtrain_cuda.so as the
# prebuilt module). Options: --out DIR (what comes back: gpu-check.json, gpu-check-logs.tar.gz,
# gpu-check-summary.txt; nothing else is written there), --work DIR (logs and builds; default a
# fresh /tmp folder), --report FILE (default OUT/gpu-check.json), --data-dir DIR (default data),
# --budget-s N (default 480: the whole check), --essential-s N (default 360: when the steps that
# give the essential figures, run first, should be done; the report says when they were),
# --skip-reference (with --prepare). Environment: ARCH
# (default 90a on compute capability 9.0), JOBS (default nproc), PYTHON (default python3),
# GPU_CHECK_LOSS_ITERS (default 50; the kit's test makes and checks a shorter reference).
#
# Steps, each under its own timeout cut to what is left of the budget (essential first):
#   build        the CUDA module from src/ with this machine's nvcc for the one arch (no -Werror),
#                cuBLASLt / NCCL / cuDNN found in the toolkit or in the pip wheels' folders
#                (site-packages/nvidia/*/lib); no NCCL: a stand-in library, the nccl step is
#                skipped; the build fails or no nvcc: the kit's prebuilt module, said so
#   parity       test_cuda_parity + test_cuda_parity_train: every backend op against the CPU
#                backend by normalised MSE (tolerances in test/ops/cuda_parity_check.h)
#   loss         gpt-tiny 50 iterations, bf16 on the GPU against the kit's fp32 CPU losses: |diff|
#                at the last iteration and its mean over the last 10 below 0.05 nats (bf16
#                rounding drifts by a few hundredths this early; a wrong kernel gives 0.5+)
#   hf_logprobs  (on the CPUs, beside the build) the Hugging Face export of a gpt-tiny and a
#                llama-tiny save loaded with transformers' from_pretrained: per-token
#                log-probabilities of the golden prompts against mtrain's (fp32), |diff| <= 1e-3
#   peer_* / throughput_*   the PyTorch peer (SDPA flash attention, torch.compile) and then mtrain
#                on gpt125m (seq 1024, 16 x 2 micro-batches) and gpt1.3b (seq 2048, 4 x 2):
#                median tokens/s, ms/iteration, TFLOP/s and MFU after warm-up, and their ratio
#   ops_*        gpt125m (6 iterations) and gpt1.3b (4) with logging.timing_level 3: each backend
#                op's own time per iteration (the device waits after every op), the table printed,
#                and `mtrain plan --compare` of the run on this device (the cost model's GEMM,
#                attention, elementwise and optimizer terms beside the measured op classes)
#   gemm         bench_cuda_gemm: the CUDA backend's GEMM ops alone (gpt1.3b's layer shapes, 8192^3, 4096^3;
#                plain, with bias, GELU / dGELU epilogues, backward) in TFLOP/s beside the planner's shape
#                model for this device: where the step's GEMM time goes beyond the model
#   fp8_gemm     (PyTorch) fp8 E4M3 against bf16 GEMMs on a Llama 2 7B layer's shapes and 8192^3 through
#                torch._scaled_mm (cuBLASLt): fast accumulation and the split accumulator Transformer
#                Engine's backward uses, and sustained bf16 and fp8 runs' TFLOP/s (last second over the
#                short rate), SM clock and power: the planner's GEMM rates (fp8 about 1.96x bf16) under
#                a training step's power draw (docs/plan.md)
#   attention    (PyTorch) causal attention forward and forward + backward through SDPA's cuDNN and
#                FlashAttention-2 backends, bf16, 32 heads of 128, sequence 4K / 16K / 32K: the rate the
#                planner's attention term assumes (docs/plan.md)
#   nccl         test_comm_nccl (every call of the NCCL communicator)
#   sanitizer    compute-sanitizer memcheck on gpt-tiny, llama-tiny, mixtral-tiny (2 iterations);
#                a runtime whose sanitizer refuses the device is reported, not failed
# After every step the report, the summary and the log tarball in --out are rewritten, so a call
# cut short still returns what ran; the last lines printed are the summary table of every figure.
# Exit 0 when no step failed (a dry run: its plumbing checks passed).
set -u
SELF_DIR=$(cd "$(dirname "$0")" && pwd)
if [ -x "$SELF_DIR/bin/mtrain" ]; then KIT=1; ROOT=$SELF_DIR; else KIT=0; ROOT=$(cd "$SELF_DIR/.." && pwd); fi

MODE=gpu; REPORT=""; OUT_DIR="$PWD/gpu-check-out"; WORK=""; DATA_DIR=""; BUDGET_S=480; ESSENTIAL_S=360; SKIP_REF=0
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) MODE=prepare ;;
    --dry-run) MODE=dry ;;
    --report) REPORT=$(abspath "${2:?--report needs a file}"); shift ;;
    --out) OUT_DIR=$(abspath "${2:?--out needs a folder}"); shift ;;
    --work) WORK=$(abspath "${2:?--work needs a folder}"); shift ;;
    --data-dir) DATA_DIR=$(abspath "${2:?--data-dir needs a folder}"); shift ;;
    --budget-s) BUDGET_S="${2:?--budget-s needs seconds}"; shift ;;
    --essential-s) ESSENTIAL_S="${2:?--essential-s needs seconds}"; shift ;;
    --skip-reference) SKIP_REF=1 ;;
    -h|--help) sed -n '2,/^set -u$/{/^set -u$/d;p}' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for n in "$BUDGET_S" "$ESSENTIAL_S"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: '$n': expected seconds (--budget-s, --essential-s)" >&2; exit 2; }
done
cd "$ROOT" || exit 1
[ -n "$DATA_DIR" ] || DATA_DIR="$ROOT/data"
T_START=$(date +%s)
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
PY="${PYTHON:-python3}"
LOSS_ITERS="${GPU_CHECK_LOSS_ITERS:-50}"; LOSS_TOL=0.05; WARMUP=5; HF_TOL=1e-3
REF_DIR="$DATA_DIR/gpu-check"
REF_LOSSES="$REF_DIR/gpt-tiny-cpu.jsonl"
BYTE_DATA="$DATA_DIR/kjv_text_document"
BPE_DATA="$DATA_DIR/kjv_gpt2_text_document"
VOCAB="$DATA_DIR/gpt2-vocab.json"
MERGES="$DATA_DIR/gpt2-merges.txt"
HF_DIR="$DATA_DIR/hf-check"
if [ $KIT -eq 1 ]; then
  MT="$ROOT/bin/mtrain"; TBIN="$ROOT/bin"; SRC="$ROOT/src"; PEERS="$ROOT/peers"; PREBUILT="$ROOT/module/libmtrain_cuda.so"
  GEMM_BIN="$ROOT/bin/bench_cuda_gemm"
else
  MT="${MTRAIN:-$ROOT/mtrain}"; TBIN="$ROOT/build/test/ops"; SRC="$ROOT"; PEERS="$ROOT/scripts/gpu-kit"; PREBUILT="$ROOT/build/libmtrain_cuda.so"
  GEMM_BIN="$ROOT/build/test/bench_cuda_gemm"
fi

# ---- every run's arguments, defined once: the dry run checks exactly what the GPU run runs ----
COMMON=(--set checkpoint.dir= --save-interval 0 --eval-interval 0 --bf16)
LOSS_ARGS=(--config configs/gpt-tiny.yaml --data-path "$BYTE_DATA" --seed 1234 --train-iters $LOSS_ITERS
           --log-interval 10 "${COMMON[@]}")
SAN_TINY=(--config configs/gpt-tiny.yaml --data-path "$BYTE_DATA" --train-iters 2 "${COMMON[@]}")
SAN_LLAMA=(--config configs/llama-tiny.yaml --data-path "$BYTE_DATA" --train-iters 2 "${COMMON[@]}")
SAN_MOE=(--config configs/mixtral-tiny.yaml --data-path "$BYTE_DATA" --train-iters 2 "${COMMON[@]}")
# gpt125m: GPT-2 small at its context 1024; micro-batch 16 (llm.c's B=16..64 at T=1024), 2 micro-batches
TP_125M=(--config configs/gpt125m.yaml --data-path "$BPE_DATA" --vocab-file "$VOCAB" --merge-file "$MERGES"
         --micro-batch-size 16 --global-batch-size 32 --train-iters 20 --log-interval 5 "${COMMON[@]}")
PEER_125M=(--model gpt125m --seq 1024 --micro-batch 16 --grad-accum 2 --steps 10 --warmup 4)
# gpt1.3b: on one GPU (tp 1, no sequence parallelism); micro-batch 4 x 2048 keeps activations ~45 GiB
TP_13B=(--config configs/gpt1.3b.yaml --data-path "$BPE_DATA" --vocab-file "$VOCAB" --merge-file "$MERGES"
        --tensor-model-parallel-size 1 --set parallel.sequence_parallel=false
        --micro-batch-size 4 --global-batch-size 8 --train-iters 13 --log-interval 5 "${COMMON[@]}")
PEER_13B=(--model gpt1.3b --seq 2048 --micro-batch 4 --grad-accum 2 --steps 6 --warmup 3)
RECIPES="LOSS_ARGS SAN_TINY SAN_LLAMA SAN_MOE TP_125M TP_13B"
HF_MODELS="gpt-tiny llama-tiny"

ref_args() { local a="${LOSS_ARGS[*]}"; echo "${a//"$DATA_DIR/"/DATA/}"; } # the reference's arguments, wherever data/ lies

# ---- --prepare (CPU machine): the BPE corpus and the CPU reference under DATA_DIR ----
if [ "$MODE" = prepare ]; then
  set -e
  [ -x "$MT" ] || { echo "gpu-check --prepare: $MT missing: run make first" >&2; exit 1; }
  [ -f "$BYTE_DATA.idx" ] || MTRAIN="$MT" scripts/fetch-corpus.sh "$DATA_DIR"
  { [ -f "$VOCAB" ] && [ -f "$MERGES" ]; } || scripts/fetch-gpt2-tokenizer.sh "$DATA_DIR"
  if [ ! -f "$BPE_DATA.idx" ]; then
    [ -f "$DATA_DIR/kjv.jsonl" ] || { echo "gpu-check --prepare: $DATA_DIR/kjv.jsonl missing: run scripts/fetch-corpus.sh $DATA_DIR" >&2; exit 1; }
    "$MT" preprocess --input "$DATA_DIR/kjv.jsonl" --output-prefix "$DATA_DIR/kjv_gpt2" --vocab "$VOCAB" \
      --merges "$MERGES" --append-eod --workers "$JOBS" --quiet
  fi
  if [ $SKIP_REF -eq 0 ]; then
    mkdir -p "$REF_DIR"
    echo "gpu-check --prepare: gpt-tiny CPU reference, $LOSS_ITERS iterations -> $REF_LOSSES"
    "$MT" "${LOSS_ARGS[@]}" --backend cpu --metrics "$REF_LOSSES.tmp" >"$REF_DIR/gpt-tiny-cpu.log" 2>&1 ||
      { tail -n 20 "$REF_DIR/gpt-tiny-cpu.log"; exit 1; }
    mv "$REF_LOSSES.tmp" "$REF_LOSSES"
    ref_args >"$REF_DIR/gpt-tiny-cpu.args"
  fi
  echo "gpu-check --prepare: done; $DATA_DIR/ holds the corpora and reference (make gpu-kit packs them)"
  exit 0
fi

# ---- where things go: logs and builds in WORK, only three files in OUT_DIR ----
[ -n "$WORK" ] || WORK=$(mktemp -d /tmp/mtrain-gpu-check.XXXXXX)
LOGS="$WORK/logs"
mkdir -p "$OUT_DIR" "$LOGS" || exit 1
[ -n "$REPORT" ] || REPORT="$OUT_DIR/gpu-check.json"
SUMMARY="$OUT_DIR/gpu-check-summary.txt"
TARBALL="$OUT_DIR/gpu-check-logs.tar.gz"
source "$SELF_DIR/gpu-check-lib.sh" 2>/dev/null || source "$ROOT/scripts/gpu-check-lib.sh" || exit 1
gc_main
