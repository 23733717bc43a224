#!/usr/bin/env python3
"""hf_check.py - the Hugging Face export of an mtrain save, loaded by a real client.

    hf_check.py MODEL_DIR MTRAIN.jsonl [--tol 1e-3] [--device cpu|cuda] [--dry-run]

MODEL_DIR is `mtrain export --format hf` output; MTRAIN.jsonl is `mtrain logprobs` output for the
same save (fp32, CPU backend): per line prompt_tokens, tokens and logprobs (log p of each
completion token given all tokens before it). The model is loaded with the image's transformers
(AutoModelForCausalLM.from_pretrained, float32, eager attention, TF32 off), run on the same token
ids, and each completion token's log-softmax compared with mtrain's. Passes when the largest
absolute difference is <= --tol (1e-3: two fp32 forwards of a small model that sum in different
orders differ by ~1e-6; a wrong weight layout, head order or norm epsilon gives 1e-2 and more).
Prints one JSON line: {"check": "hf_transformers", "max_abs_diff": ..., "pass": ...}.
Exit status: 0 pass (or dry run done), 1 over the tolerance or an error, 3 torch / transformers
missing (the caller reports a skip). The dry run checks the inputs only (no torch needed).
"""

import argparse
import json
import os
import sys


def load_lines(path):
    lines = []
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            d = json.loads(raw)
            for key in ("prompt_tokens", "tokens", "logprobs"):
                if key not in d:
                    raise ValueError("%s line %d: no %r (expected `mtrain logprobs` output)" % (path, n, key))
            if len(d["tokens"]) != len(d["logprobs"]) or not d["prompt_tokens"]:
                raise ValueError("%s line %d: tokens and logprobs differ in length, or no prompt" % (path, n))
            lines.append(d)
    if not lines:
        raise ValueError("%s: no lines" % path)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("mtrain_jsonl")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    name = os.path.basename(os.path.normpath(args.model_dir))
    out = {"check": "hf_transformers", "model": name, "tolerance": args.tol}
    try:
        lines = load_lines(args.mtrain_jsonl)
        if not os.path.isfile(os.path.join(args.model_dir, "config.json")):
            raise ValueError("%s: no config.json (expected `mtrain export --format hf` output)" % args.model_dir)
    except (OSError, ValueError) as e:
        out["error"] = str(e)
        print(json.dumps(out), flush=True)
        return 1
    out["sequences"] = len(lines)
    out["tokens"] = sum(len(d["tokens"]) for d in lines)
    try:
        import torch
        import transformers
    except ImportError as e:
        out["skipped"] = "torch / transformers missing (%s)" % e
        print(json.dumps(out), flush=True)
        return 0 if args.dry_run else 3
    if args.dry_run:
        out["dry_run"] = True
        print(json.dumps(out), flush=True)
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out["transformers"] = transformers.__version__
    load = transformers.AutoModelForCausalLM.from_pretrained
    try:  # transformers >= 4.56 names it dtype (torch_dtype before)
        model = load(args.model_dir, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        model = load(args.model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model = model.float().to(args.device).eval()
    worst = 0.0
    with torch.no_grad():
        for d in lines:
            ids = d["prompt_tokens"] + d["tokens"]
            x = torch.tensor([ids[:-1]], device=args.device)
            logp = torch.log_softmax(model(x).logits.float()[0], dim=-1)
            p0 = len(d["prompt_tokens"]) - 1
            for i, (tok, want) in enumerate(zip(d["tokens"], d["logprobs"])):
                worst = max(worst, abs(float(logp[p0 + i, tok]) - float(want)))
    out["max_abs_diff"] = worst
    out["pass"] = worst <= args.tol
    print(json.dumps(out), flush=True)
    return 0 if out["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
