#!/usr/bin/env python3
"""fp8_gemm.py - fp8 against bf16 GEMMs on the lent GPU, the question `mtrain plan` cannot settle on a CPU.

The planner runs an fp8 layer's GEMMs at the device's fp8 peak times the bf16 sustained fraction (about
1.96x bf16 on a 5B layer, which Transformer Engine's own GEMM benchmark bears out at 1.92x). Against NVIDIA's
published runs of the same layouts in bf16 and in fp8 (dgxc-benchmarking; docs/plan.md, "H100-era published
runs") the planned fp8 speed-up is right (median 1.00 over 8 pairs), yet both precisions' runs are planned
about 15% fast. One candidate common to both: a training step keeps the tensor cores busy for minutes, under
the power limit, and the rates the plan rests on come from short benchmarks. Transformer Engine also runs the
input- and weight-gradient GEMMs with the split accumulator (module/base.py: _2X_ACC_DGRAD = _2X_ACC_WGRAD =
True), which its benchmark does not. This script measures both on this GPU with the image's PyTorch
(torch._scaled_mm, tensor-wise scales: cuBLASLt, the library Transformer Engine calls):

  - every shape of a Llama 2 7B layer's forward GEMMs at 4096 tokens (QKV, projection, MLP up, MLP down)
    and 8192^3, in bf16, in fp8 E4M3 with fast accumulation (Transformer Engine's forward) and with the
    split accumulator (its backward): median TFLOP/s over timed batches of back-to-back products,
    cycling through 3 input sets so that no operand stays in L2;
  - two sustained runs, 8192^3 in bf16 and in fp8 with the split accumulator, for --sustain-s seconds each:
    TFLOP/s in the first and the last second, the last second over the short benchmark's rate of the same
    product, and the SM clock and board power nvidia-smi reads right after.

Random-normal operands (scaled into E4M3's range): the power a product draws depends on its bits.
Output: one JSON line per measurement (stdout and --json FILE), then a summary line with the
fp8 / bf16 ratios (median over the shapes). Exit 0 measured or dry run done, 3 torch, its fp8
products or a GPU missing (the caller reports a skip), 1 anything else. Standard library + torch only.

    fp8_gemm.py --json out.jsonl              on the GPU machine
    fp8_gemm.py --dry-run --json out.jsonl    plumbing: the shapes and their FLOPs, no timing
"""

import argparse
import statistics
import subprocess
import sys
import time

from probe_io import emit

# (name, M, N, K): out[M x N] = in[M x K] . W^T, Llama 2 7B (hidden 4096, SwiGLU 11008) at 4096 tokens
SHAPES = [
    ("llama2-7b qkv", 4096, 12288, 4096),
    ("llama2-7b proj", 4096, 4096, 4096),
    ("llama2-7b fc1", 4096, 22016, 4096),
    ("llama2-7b fc2", 4096, 4096, 11008),
    ("square 8192", 8192, 8192, 8192),
]
KINDS = [("bf16", None), ("e4m3", True), ("e4m3", False)]  # (dtype, fast accumulation)


def smi():
    """SM clock (MHz) and board power (W) as nvidia-smi reads them now; None where it cannot."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.split("\n")[0].split(",")
        return float(out[0]), float(out[1])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None, None


def operands(torch, M, N, K, dtype, n_sets=3):
    """n_sets of (a, b) with a [M x K] row-major, b [K x N] column-major (what _scaled_mm takes)."""
    sets = []
    for _ in range(n_sets):
        a = torch.randn(M, K, device="cuda")
        w = torch.randn(N, K, device="cuda")
        if dtype == "bf16":
            sets.append((a.to(torch.bfloat16), w.to(torch.bfloat16).t()))
        else:  # E4M3's largest normal is 448: randn * 64 keeps nearly every value in range
            sets.append(((a * 64).to(torch.float8_e4m3fn), (w * 64).to(torch.float8_e4m3fn).t()))
    return sets


def product(torch, dtype, fast):
    one = torch.ones((), device="cuda", dtype=torch.float32)
    if dtype == "bf16":
        return lambda a, b: torch.matmul(a, b)

    def mm(a, b):
        r = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)
        return r[0] if isinstance(r, tuple) else r  # PyTorch 2.1-2.3 return (out, amax)
    return mm


def time_batches(torch, fn, sets, seconds, batch=20):
    """ms per product of each batch of `batch` back-to-back products, batches for `seconds` (3 at least)."""
    per = []
    t_end = time.time() + seconds
    i = 0
    while time.time() < t_end or len(per) < 3:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(batch):
            a, b = sets[i % len(sets)]
            fn(a, b)
            i += 1
        e1.record()
        e1.synchronize()
        per.append(e0.elapsed_time(e1) / batch)
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=0.6, help="timed seconds per shape and kind")
    ap.add_argument("--sustain-s", type=float, default=8.0, help="each sustained run's length")
    ap.add_argument("--json", help="append every line to this file too")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.seconds <= 0 or args.sustain_s < 2:
        sys.exit("fp8_gemm.py: error: --seconds must be > 0 and --sustain-s >= 2")
    if args.dry_run:
        for name, M, N, K in SHAPES:
            for dtype, fast in KINDS:
                emit({"fp8_gemm": name, "M": M, "N": N, "K": K, "dtype": dtype, "fast_accum": fast,
                      "gflop": 2.0 * M * N * K / 1e9, "dry_run": True}, args.json)
        return 0
    try:
        import torch
    except ImportError:
        emit({"fp8_gemm": "all", "skipped": "torch is not installed"}, args.json)
        return 3
    if not torch.cuda.is_available() or not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        emit({"fp8_gemm": "all", "torch": torch.__version__, "skipped": "no CUDA device or no fp8 products"}, args.json)
        return 3
    if torch.cuda.get_device_capability() < (8, 9):
        emit({"fp8_gemm": "all", "skipped": "compute capability below 8.9: no fp8 tensor cores"}, args.json)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    rates = {}
    for name, M, N, K in SHAPES:
        for dtype, fast in KINDS:
            sets = operands(torch, M, N, K, dtype)
            fn = product(torch, dtype, fast)
            for a, b in sets:  # warm-up: cuBLASLt's heuristics and workspace
                fn(a, b)
            torch.cuda.synchronize()
            ms = statistics.median(time_batches(torch, fn, sets, args.seconds))
            tflops = 2.0 * M * N * K / (ms * 1e-3) / 1e12
            rates[(name, dtype, fast)] = tflops
            emit({"fp8_gemm": name, "M": M, "N": N, "K": K, "dtype": dtype, "fast_accum": fast,
                  "ms": round(ms, 4), "tflops": round(tflops, 1)}, args.json)
            del sets
    # the sustained runs: bf16, and fp8 with the split accumulator (as a training step's backward runs it)
    name, M, N, K = SHAPES[-1]
    flop = 2.0 * M * N * K
    sus = {}
    for dtype, fast in (("bf16", None), ("e4m3", False)):
        sets = operands(torch, M, N, K, dtype)
        fn = product(torch, dtype, fast)
        t0 = time.time()
        per = time_batches(torch, fn, sets, args.sustain_s, batch=10)
        clock, power = smi()
        span = time.time() - t0
        n_s = max(1, int(len(per) / span))  # batches per second
        first = flop / (statistics.median(per[:n_s]) * 1e-3) / 1e12
        last = flop / (statistics.median(per[-n_s:]) * 1e-3) / 1e12
        sus[dtype] = (last / first, last / rates[(name, dtype, fast)], clock, power)
        emit({"fp8_gemm": "sustained " + name, "dtype": dtype, "fast_accum": fast, "seconds": round(span, 1),
              "tflops_first_s": round(first, 1), "tflops_last_s": round(last, 1),
              "last_s_over_short": round(sus[dtype][1], 3), "sm_clock_mhz": clock, "power_w": power}, args.json)
        del sets
    ratio = {}
    for label, fast in (("fast", True), ("split", False)):
        ratio[label] = statistics.median(rates[(n, "e4m3", fast)] / rates[(n, "bf16", None)] for n, *_ in SHAPES)
    emit({"fp8_gemm": "summary", "fp8_fast_over_bf16": round(ratio["fast"], 3),
          "fp8_split_over_bf16": round(ratio["split"], 3),
          "sustained_bf16_over_short": round(sus["bf16"][1], 3), "sustained_fp8_over_short": round(sus["e4m3"][1], 3),
          "sustained_last_over_first": round(sus["e4m3"][0], 3),
          "sm_clock_mhz": sus["e4m3"][2], "power_w": sus["e4m3"][3],
          "bf16_sm_clock_mhz": sus["bf16"][2], "bf16_power_w": sus["bf16"][3]}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
