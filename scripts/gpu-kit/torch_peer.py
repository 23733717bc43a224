#!/usr/bin/env python3
"""torch_peer.py - the PyTorch peer that gpu-check.sh times right before mtrain on the same GPU.

A GPT-2 (learned positions, pre-LayerNorm, GeLU tanh MLP, tied embeddings, vocabulary padded to
50304 as mtrain pads 50257) trained for a few steps with the image's PyTorch as a well-tuned user
would: bf16 autocast over fp32 weights, scaled_dot_product_attention restricted to the flash
kernel (causal), torch.compile of each transformer block (regional compilation: the
same graph for every layer, compiled once), fused AdamW, gradient accumulation over the same micro-batches as
mtrain's run. Random token ids: only speed is measured. Output: one JSON line per model on stdout
(and appended to --json FILE), with tokens/s, ms/iteration and MFU counted exactly as mtrain
counts it (core/model/model_flops.c: Megatron's formula, attention over the full T x T square,
x3 for forward + backward, no recomputation) over the dense bf16 peak passed in --peak-tflops.

    torch_peer.py --model gpt125m --seq 1024 --micro-batch 16 --grad-accum 2 --steps 12 --warmup 4
    torch_peer.py --model gpt1.3b --seq 2048 --micro-batch 4 --grad-accum 2 ...
    torch_peer.py --flops gpt125m --seq 1024     model FLOPs per token (no torch needed)
    torch_peer.py --dry-run                      plumbing: arguments, FLOPs, whether torch + CUDA exist

Exit status: 0 measured (or dry run done), 3 torch or a GPU missing (the caller reports a skip),
1 anything else. Standard library + torch only.
"""

import argparse
import math
import sys
import time

from probe_io import emit

MODELS = {  # name: (layers, hidden, heads); GPT-2 BPE vocabulary padded to 50304
    "gpt125m": (12, 768, 12),
    "gpt1.3b": (24, 2048, 16),
    "gpt-tiny-shape": (2, 128, 4),
}
VOCAB_PADDED = 50304


def flops_per_token(layers, hidden, heads, seq, vocab=VOCAB_PADDED):
    """Training FLOPs per token, mtrain's count (model_flops.c) for a GPT with ffn = 4 hidden."""
    c = float(hidden)
    attn_lin = 2.0 * (3 * c * c + c * c)
    mlp = 2.0 * (4 * c * c + c * 4 * c)
    attn_core = 2.0 * 2.0 * seq * c
    fwd = layers * (attn_lin + attn_core + mlp) + 2.0 * c * vocab
    return 3.0 * fwd


def build_model(torch, layers, hidden, heads, seq):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden)
            self.c_attn = nn.Linear(hidden, 3 * hidden)
            self.c_proj = nn.Linear(hidden, hidden)
            self.ln_2 = nn.LayerNorm(hidden)
            self.c_fc = nn.Linear(hidden, 4 * hidden)
            self.mlp_proj = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB_PADDED, hidden)
            self.wpe = nn.Embedding(seq, hidden)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(hidden)

        def forward(self, idx, targets):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))

    return GPT()


def measure(torch, args, layers, hidden, heads):
    dev = torch.device("cuda")
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = build_model(torch, layers, hidden, heads, args.seq).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    if not args.no_compile:  # regional compilation: one graph for the block, reused by every layer
        for blk in model.blocks:  # (whole-model compilation of 24 layers takes minutes of the lease)
            blk.compile()
    step_model = model
    try:  # flash attention only: the peer must not silently take the math kernel
        from torch.nn.attention import SDPBackend, sdpa_kernel
        attn_ctx = lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION])  # noqa: E731
    except ImportError:  # older torch
        attn_ctx = lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)  # noqa: E731
    x = torch.randint(0, 50257, (args.grad_accum, args.micro_batch, args.seq), device=dev)
    y = torch.randint(0, 50257, (args.grad_accum, args.micro_batch, args.seq), device=dev)

    def step():
        for i in range(args.grad_accum):
            with torch.autocast("cuda", dtype=torch.bfloat16), attn_ctx():
                loss = step_model(x[i], y[i]) / args.grad_accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.time()
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.time() - t0
    times = []
    for _ in range(args.steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        loss = step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    ms = times[len(times) // 2]
    tokens = args.grad_accum * args.micro_batch * args.seq
    tps = tokens / (ms / 1000.0)
    fpt = flops_per_token(layers, hidden, heads, args.seq)
    tflops = fpt * tps / 1e12
    return {
        "peer": "pytorch", "model": args.model, "torch": torch.__version__, "compiled": not args.no_compile,
        "attention": "sdpa flash", "params": n_params, "seq": args.seq, "micro_batch": args.micro_batch,
        "grad_accum": args.grad_accum, "steps_timed": args.steps, "warmup_s": round(warm_s, 1),
        "ms_per_iter": round(ms, 3), "tokens_per_s": round(tps, 1), "tflops_per_gpu": round(tflops, 2),
        "mfu": round(tflops / args.peak_tflops, 4) if args.peak_tflops > 0 else None,
        "flops_per_token": fpt, "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "final_loss": round(float(loss) * args.grad_accum, 4),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="gpt125m")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--grad-accum", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100 / H200 SXM: 989)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", help="append the result line to this file too")
    ap.add_argument("--flops", metavar="MODEL", help="print MODEL's training FLOPs per token at --seq and exit")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.flops:
        if args.flops not in MODELS:
            sys.exit("torch_peer.py: error: unknown model %r (one of %s)" % (args.flops, ", ".join(sorted(MODELS))))
        print("%.17g" % flops_per_token(*MODELS[args.flops], args.seq))
        return 0
    layers, hidden, heads = MODELS[args.model]
    if hidden % heads or args.seq < 1 or args.micro_batch < 1 or args.grad_accum < 1 or args.steps < 1:
        sys.exit("torch_peer.py: error: bad shape or counts")
    try:
        import torch
    except ImportError:
        emit({"peer": "pytorch", "model": args.model, "skipped": "torch is not installed"}, args.json)
        return 0 if args.dry_run else 3
    if not torch.cuda.is_available():
        emit({"peer": "pytorch", "model": args.model, "torch": torch.__version__, "skipped": "no CUDA device"}, args.json)
        return 0 if args.dry_run else 3
    if args.dry_run:
        emit({"peer": "pytorch", "model": args.model, "torch": torch.__version__, "dry_run": True}, args.json)
        return 0
    rec = measure(torch, args, layers, hidden, heads)
    if not math.isfinite(rec["final_loss"]):
        rec["error"] = "loss is not finite"
    emit(rec, args.json)
    return 0 if "error" not in rec else 1


if __name__ == "__main__":
    sys.exit(main())
