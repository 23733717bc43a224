#!/usr/bin/env python3
"""attn_rate.py - causal attention's rate on the lent GPU, the other term `mtrain plan` cannot settle on a CPU.

NeMo's long-sequence Llama 2 7B runs (4K to 1M tokens, attention 19-97% of the step) come out 14-25% faster
in the plan than published (docs/plan.md, "H100-era published runs"). The plan runs a fused attention as
its two forward GEMMs at FlashAttention-3's published rate, bounded by a roofline that counts the score
tile, without per-tile cost, the causal half, and the backward at 2.5x the forward. Transformer Engine ran
cuDNN's fused attention on Hopper in those runs (attention.py, v1.4 on: "Select FusedAttention on sm90").
This script times causal attention forward and forward + backward with the image's PyTorch
(scaled_dot_product_attention restricted to one backend: cuDNN, then FlashAttention-2), bf16, head dim
128, 32 heads (Llama 2 7B), batch 1, at sequence 4096, 16384 and 32768, random-normal inputs.

Rates in the causal count FlashAttention reports: forward 4 * b * h * s^2 * d / 2 FLOPs, backward 2.5x that.
Output: one JSON line per (backend, sequence) on stdout and --json FILE, then a summary line.
Exit 0 measured or dry run done, 3 torch, a GPU or every backend missing (the caller reports a skip),
1 anything else. Standard library + torch only.

    attn_rate.py --json out.jsonl              on the GPU machine
    attn_rate.py --dry-run --json out.jsonl    plumbing: the shapes and their FLOPs, no timing
"""

import argparse
import statistics
import sys
import time

from probe_io import emit

HEADS, HEAD_DIM, SEQS = 32, 128, (4096, 16384, 32768)
BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION")


def fwd_flops(s):
    return 4.0 * HEADS * s * s * HEAD_DIM / 2.0  # causal: half of the s x s square


def timed(torch, fn, seconds):
    """median ms of fn() over repeated calls for `seconds` (3 at least), each bracketed by CUDA events."""
    per, t_end = [], time.time() + seconds
    while time.time() < t_end or len(per) < 3:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        per.append(e0.elapsed_time(e1))
    return statistics.median(per)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per backend, sequence and pass")
    ap.add_argument("--json", help="append every line to this file too")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.seconds <= 0:
        sys.exit("attn_rate.py: error: --seconds must be > 0")
    if args.dry_run:
        for b in BACKENDS:
            for s in SEQS:
                emit({"attn": b, "seq": s, "heads": HEADS, "head_dim": HEAD_DIM, "causal": True,
                      "fwd_gflop": fwd_flops(s) / 1e9, "dry_run": True}, args.json)
        return 0
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        emit({"attn": "all", "skipped": "torch (with torch.nn.attention) is not installed: %s" % e}, args.json)
        return 3
    if not torch.cuda.is_available():
        emit({"attn": "all", "torch": torch.__version__, "skipped": "no CUDA device"}, args.json)
        return 3
    rates, measured = {}, 0
    for b in BACKENDS:
        backend = getattr(SDPBackend, b, None)
        for s in SEQS:
            rec = {"attn": b, "seq": s, "heads": HEADS, "head_dim": HEAD_DIM, "causal": True}
            if backend is None:
                emit(dict(rec, skipped="this PyTorch has no SDPBackend.%s" % b), args.json)
                continue
            q, k, v = (torch.randn(1, HEADS, s, HEAD_DIM, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            dout = torch.randn_like(q)
            try:
                with sdpa_kernel([backend]):
                    def fwd():
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

                    def fwd_bwd():
                        o = fwd()
                        o.backward(dout)
                        q.grad = k.grad = v.grad = None

                    fwd_bwd()  # warm-up: the backend's plan or kernel choice
                    torch.cuda.synchronize()
                    with torch.no_grad():
                        ms_f = timed(torch, fwd, args.seconds)
                    ms_fb = timed(torch, fwd_bwd, args.seconds)
            except RuntimeError as e:  # the backend refuses this shape or device
                emit(dict(rec, skipped=str(e).split("\n")[0][:200]), args.json)
                continue
            f = fwd_flops(s)
            rate_f, rate_fb = f / (ms_f * 1e-3) / 1e12, 3.5 * f / (ms_fb * 1e-3) / 1e12
            rates[(b, s)] = rate_fb
            measured += 1
            emit(dict(rec, fwd_ms=round(ms_f, 3), fwd_bwd_ms=round(ms_fb, 3), fwd_tflops=round(rate_f, 1),
                      fwd_bwd_tflops=round(rate_fb, 1)), args.json)
            del q, k, v, dout
    if measured == 0:
        return 3
    emit({"attn": "summary", "fwd_bwd_tflops": {"%s %d" % k: round(v, 1) for k, v in sorted(rates.items())}}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
