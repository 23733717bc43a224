#!/usr/bin/env python3
"""hf_logprobs.py - an independent NumPy reference for `mtrain logprobs`.

Reads a Hugging Face model folder (config.json + model.safetensors, or a sharded
model.safetensors.index.json) with struct + json + numpy only, and computes, in float64, the
log-probability of every completion token of every line of an input JSON-lines file:

    hf_logprobs.py MODEL_DIR INPUT.jsonl OUTPUT.jsonl

INPUT lines hold already-tokenized ids, {"prompt_tokens": [...], "tokens": [...]} (the file
`mtrain logprobs` writes is such a file), so no tokenizer is involved. OUTPUT gets one line per
input line, the format `mtrain logprobs` writes:

    {"prompt": ..., "completion": ... (copied when the input has them),
     "prompt_tokens": [...], "tokens": [...], "logprobs": [log p(token | all before it)], "sum": s}

The forward passes follow the Hugging Face modelling code's conventions (transformers'
modeling_gpt2.py GPT2LMHeadModel and modeling_llama.py LlamaForCausalLM), not mtrain's:
  gpt2:  token + learned position embeddings; per block ln_1 -> attn -> residual, ln_2 -> mlp ->
         residual; LayerNorm (biased variance, layer_norm_epsilon); Conv1D weights stored
         (in, out), y = x @ W + b; c_attn fused [q | k | v] along its output; heads split
         (T, H, D) consecutively; softmax(q k^T / sqrt(D)) with a causal mask; c_proj; mlp c_fc ->
         activation_function (gelu_new: the tanh approximation) -> c_proj; ln_f; lm_head tied to
         wte (lm_head.weight used when the file has it and the config unties it).
  llama: embed_tokens; per layer input_layernorm -> self_attn -> residual,
         post_attention_layernorm -> mlp -> residual; RMSNorm x / sqrt(mean(x^2) + rms_norm_eps) * w;
         nn.Linear weights (out, in), y = x @ W^T; RoPE on q and k with rotate_half (first half /
         second half of each head, inv_freq = rope_theta^(-2i/head_dim), scaled as rope_scaling's
         rope_type llama3 or linear says (modeling_rope_utils.py), cos/sin of cat(f, f));
         grouped-query attention: kv head j serves query heads j*n_rep .. (j+1)*n_rep - 1
         (repeat_kv); o_proj; mlp down_proj(silu(gate_proj x) * up_proj x); final norm; lm_head
         (untied unless tie_word_embeddings).
  qwen2: llama's layer (Qwen2ForCausalLM, modeling_qwen2.py) with biases on q_proj, k_proj and v_proj
         alone (no sliding window).
  mixtral: llama's attention and norms (MixtralForCausalLM, modeling_mixtral.py); the MLP is the
         sparse block: router logits = h @ block_sparse_moe.gate.weight^T over all
         num_local_experts experts, softmax over all of them, the num_experts_per_tok largest
         probabilities (ties: the lower expert), renormalised to sum to 1, and
         y = sum_j w_j * w2_e(silu(w1_e h) * w3_e h) over the selected experts e; every token is
         routed (no capacity: Mixtral is dropless). Router fields Mixtral does not have
         (norm_topk_prob false, scoring_func other than softmax, shared experts) are refused.
  qwen2_moe: llama's attention (q / k / v biases when qkv_bias) and norms (Qwen2MoeForCausalLM,
         modeling_qwen2_moe.py); the MLP is the sparse block of Mixtral's router (renormalised only when
         norm_topk_prob) over experts gate_proj / up_proj / down_proj, plus the shared expert scaled per
         token by sigmoid(h . shared_expert_gate.weight); every layer sparse.

Greedy decoding (the argmax of each next-token distribution, full recomputation each step):

    hf_logprobs.py --greedy N MODEL_DIR INPUT.jsonl OUTPUT.jsonl

continues each line's prompt_tokens by N tokens (fewer when the model's positions run out) and
writes {"prompt_tokens": [...], "tokens": [the N generated ids], "margins": [...]} per line; a
margin is the chosen logit minus the runner-up's (a near-tie another precision may break the other
way).

Also a helper for tests that must see a broken export fail:

    hf_logprobs.py --swap-heads SRC_DIR DST_DIR [--layer 0] [--heads 0 1]

writes a copy of SRC_DIR whose layer's attention heads A and B are swapped in q, k and v (c_attn
columns and bias for gpt2; q_proj rows, and k_proj / v_proj rows of kv heads A and B when they
exist, for llama) but not in the output projection: the classic head-order bug of a converter.

Exit status: 0 on success, 2 on a bad input or an unsupported model (message on stderr).
"""

import argparse
import json
import math
import os
import shutil
import struct
import sys

try:
    import numpy as np
except ImportError:  # pragma: no cover
    sys.stderr.write("hf_logprobs.py: error: numpy is missing (Debian: apt-get install python3-numpy; "
                     "or run with /usr/bin/python3)\n")
    sys.exit(2)


class RefError(Exception):
    pass


# ---------------------------------------------------------------- safetensors

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
           "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
           "BOOL": np.bool_}


def read_safetensors(path):
    """{name: (dtype string, shape, raw numpy array in the stored dtype; BF16 as uint16)}"""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise RefError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise RefError("%s: header of %d bytes past the end of the file" % (path, n))
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except ValueError as e:
        raise RefError("%s: bad safetensors header: %s" % (path, e))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        if dt not in _DTYPES:
            raise RefError("%s: tensor %s has dtype %s, not supported" % (path, name, dt))
        shape = tuple(int(s) for s in info["shape"])
        b0, b1 = (int(x) for x in info["data_offsets"])
        npdt = np.dtype(_DTYPES[dt]).newbyteorder("<")
        count = int(np.prod(shape)) if shape else 1
        if b1 - b0 != count * npdt.itemsize or base + b1 > len(data):
            raise RefError("%s: tensor %s: %d bytes for shape %s of %s" % (path, name, b1 - b0, shape, dt))
        arr = np.frombuffer(data, dtype=npdt, count=count, offset=base + b0).reshape(shape)
        out[name] = (dt, shape, arr)
    return out


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype string, shape, raw array)} written in name order"""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        dt, shape, arr = tensors[name]
        raw = np.ascontiguousarray(arr, dtype=np.dtype(_DTYPES[dt]).newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def to_f64(entry):
    dt, shape, arr = entry
    if dt == "BF16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dt in ("F32", "F16", "F64"):
        return arr.astype(np.float64)
    raise RefError("tensor of dtype %s is not a floating-point weight" % dt)


def load_model_dir(d):
    """(config dict, {name: raw entry}) from a Hugging Face folder"""
    cfg_path = os.path.join(d, "config.json")
    try:
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
    except OSError as e:
        raise RefError("%s: %s" % (cfg_path, e.strerror))
    except ValueError as e:
        raise RefError("%s: not JSON: %s" % (cfg_path, e))
    single = os.path.join(d, "model.safetensors")
    index = os.path.join(d, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(single):
        tensors = read_safetensors(single)
    elif os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            wm = json.load(f).get("weight_map", {})
        for fname in sorted(set(wm.values())):
            part = read_safetensors(os.path.join(d, fname))
            for k, v in part.items():
                if k in tensors:
                    raise RefError("%s: tensor %s is in two shards" % (d, k))
                tensors[k] = v
        missing = [k for k in wm if k not in tensors]
        if missing:
            raise RefError("%s: the index names %s but no shard holds it" % (d, missing[0]))
    else:
        raise RefError("%s: neither model.safetensors nor model.safetensors.index.json" % d)
    return cfg, tensors


class Weights:
    """float64 views of the tensors, looked up with or without the model's prefix"""

    def __init__(self, tensors, prefixes):
        self.t = tensors
        self.prefixes = prefixes
        self.used = set()

    def find(self, name):
        for p in self.prefixes:
            if p + name in self.t:
                return p + name
        return None

    def has(self, name):
        return self.find(name) is not None

    def get(self, name, shape=None):
        k = self.find(name)
        if k is None:
            raise RefError("the checkpoint has no tensor %s (tried prefixes %s)" % (name, self.prefixes))
        self.used.add(k)
        w = to_f64(self.t[k])
        if shape is not None and tuple(w.shape) != tuple(shape):
            raise RefError("tensor %s has shape %s, expected %s" % (k, tuple(w.shape), tuple(shape)))
        return w


# ---------------------------------------------------------------- the models

def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def causal_attention(q, k, v):
    """q: (H, T, D), k, v: (H, T, D) -> (T, H*D)"""
    H, T, D = q.shape
    s = q @ k.transpose(0, 2, 1) / math.sqrt(D)
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(1, 0, 2).reshape(T, H * D)


_erf = np.frompyfunc(math.erf, 1, 1)


def activation(name, x):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))
    if name == "relu":
        return np.maximum(x, 0.0)
    if name in ("silu", "swish"):
        return x / (1.0 + np.exp(-x))
    raise RefError("activation_function %r is not supported" % name)


class GPT2:
    def __init__(self, cfg, tensors):
        g = lambda *keys, default=None: next((cfg[k] for k in keys if k in cfg and cfg[k] is not None), default)
        self.C = int(g("n_embd", "hidden_size"))
        self.L = int(g("n_layer", "num_hidden_layers"))
        self.H = int(g("n_head", "num_attention_heads"))
        self.V = int(cfg["vocab_size"])
        self.P = int(g("n_positions", "n_ctx", "max_position_embeddings"))
        self.F = int(g("n_inner", default=4 * self.C))
        self.eps = float(g("layer_norm_epsilon", default=1e-5))
        self.act = g("activation_function", default="gelu_new")
        if self.C % self.H:
            raise RefError("config.json: n_embd %d is not a multiple of n_head %d" % (self.C, self.H))
        if cfg.get("scale_attn_weights", True) is not True:
            raise RefError("config.json: scale_attn_weights false is not supported")
        for k in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
            if cfg.get(k):
                raise RefError("config.json: %s is not supported" % k)
        w = Weights(tensors, ["transformer.", ""])
        C, F, V = self.C, self.F, self.V
        self.wte = w.get("wte.weight", (V, C))
        self.wpe = w.get("wpe.weight", (self.P, C))
        self.blocks = []
        for i in range(self.L):
            p = "h.%d." % i
            self.blocks.append({
                "ln1_w": w.get(p + "ln_1.weight", (C,)), "ln1_b": w.get(p + "ln_1.bias", (C,)),
                "attn_w": w.get(p + "attn.c_attn.weight", (C, 3 * C)), "attn_b": w.get(p + "attn.c_attn.bias", (3 * C,)),
                "proj_w": w.get(p + "attn.c_proj.weight", (C, C)), "proj_b": w.get(p + "attn.c_proj.bias", (C,)),
                "ln2_w": w.get(p + "ln_2.weight", (C,)), "ln2_b": w.get(p + "ln_2.bias", (C,)),
                "fc_w": w.get(p + "mlp.c_fc.weight", (C, F)), "fc_b": w.get(p + "mlp.c_fc.bias", (F,)),
                "fcp_w": w.get(p + "mlp.c_proj.weight", (F, C)), "fcp_b": w.get(p + "mlp.c_proj.bias", (C,)),
            })
        self.lnf_w = w.get("ln_f.weight", (C,))
        self.lnf_b = w.get("ln_f.bias", (C,))
        tied = cfg.get("tie_word_embeddings", True)
        if not tied:
            self.lm_head = w.get("lm_head.weight", (V, C))
        else:
            self.lm_head = self.wte
            if "lm_head.weight" in tensors:  # a tied model saved with its head: it must be wte
                head = to_f64(tensors["lm_head.weight"])
                if head.shape != self.wte.shape or not np.array_equal(head, self.wte):
                    raise RefError("tie_word_embeddings is true but lm_head.weight differs from wte.weight")

    def logits(self, ids):
        T = len(ids)
        if T > self.P:
            raise RefError("%d tokens but n_positions = %d" % (T, self.P))
        H, C = self.H, self.C
        D = C // H
        x = self.wte[ids] + self.wpe[np.arange(T)]
        for b in self.blocks:
            h = layer_norm(x, b["ln1_w"], b["ln1_b"], self.eps)
            qkv = h @ b["attn_w"] + b["attn_b"]  # Conv1D
            q, k, v = (qkv[:, j * C:(j + 1) * C].reshape(T, H, D).transpose(1, 0, 2) for j in range(3))
            x = x + causal_attention(q, k, v) @ b["proj_w"] + b["proj_b"]
            h = layer_norm(x, b["ln2_w"], b["ln2_b"], self.eps)
            h = activation(self.act, h @ b["fc_w"] + b["fc_b"])
            x = x + h @ b["fcp_w"] + b["fcp_b"]
        x = layer_norm(x, self.lnf_w, self.lnf_b, self.eps)
        return x @ self.lm_head.T


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


class Llama:
    def __init__(self, cfg, tensors):
        self.C = int(cfg["hidden_size"])
        self.L = int(cfg["num_hidden_layers"])
        self.H = int(cfg["num_attention_heads"])
        self.KV = int(cfg.get("num_key_value_heads") or self.H)
        self.D = int(cfg.get("head_dim") or self.C // self.H)
        self.F = int(cfg["intermediate_size"])
        self.V = int(cfg["vocab_size"])
        self.P = int(cfg.get("max_position_embeddings") or 0)
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.theta = float(cfg.get("rope_theta", 10000.0))
        self.act = cfg.get("hidden_act", "silu")
        self.rope_scaling = cfg.get("rope_scaling") or None
        if self.rope_scaling is not None:
            kind = self.rope_scaling.get("rope_type", self.rope_scaling.get("type"))
            if kind not in ("llama3", "linear", "default"):
                raise RefError("config.json: rope_scaling %r is not supported" % (self.rope_scaling,))
        if self.H % self.KV:
            raise RefError("config.json: num_attention_heads %d is not a multiple of num_key_value_heads %d"
                           % (self.H, self.KV))
        attn_bias, mlp_bias = bool(cfg.get("attention_bias", False)), bool(cfg.get("mlp_bias", False))
        # Qwen2 (modeling_qwen2.py): q_proj, k_proj, v_proj with bias=True, o_proj without, no MLP biases
        # Qwen2-MoE: the same, unless its config's qkv_bias (default true) says otherwise
        qkv_bias = attn_bias or cfg.get("model_type") == "qwen2" or (cfg.get("model_type") == "qwen2_moe" and
                                                                      bool(cfg.get("qkv_bias", True)))
        if cfg.get("model_type") == "qwen2" and cfg.get("use_sliding_window"):
            raise RefError("config.json: use_sliding_window is not supported")
        w = Weights(tensors, ["model.", ""])
        C, H, KV, D, F, V = self.C, self.H, self.KV, self.D, self.F, self.V
        self.embed = w.get("embed_tokens.weight", (V, C))
        self.layers = []
        for i in range(self.L):
            p = "layers.%d." % i
            lay = {
                "in_norm": w.get(p + "input_layernorm.weight", (C,)),
                "q": w.get(p + "self_attn.q_proj.weight", (H * D, C)),
                "k": w.get(p + "self_attn.k_proj.weight", (KV * D, C)),
                "v": w.get(p + "self_attn.v_proj.weight", (KV * D, C)),
                "o": w.get(p + "self_attn.o_proj.weight", (C, H * D)),
                "post_norm": w.get(p + "post_attention_layernorm.weight", (C,)),
            }
            lay.update(self.mlp_weights(w, p))
            zeros = lambda n: np.zeros(n)
            lay["qb"] = w.get(p + "self_attn.q_proj.bias", (H * D,)) if qkv_bias else zeros(H * D)
            lay["kb"] = w.get(p + "self_attn.k_proj.bias", (KV * D,)) if qkv_bias else zeros(KV * D)
            lay["vb"] = w.get(p + "self_attn.v_proj.bias", (KV * D,)) if qkv_bias else zeros(KV * D)
            lay["ob"] = w.get(p + "self_attn.o_proj.bias", (C,)) if attn_bias else zeros(C)
            if mlp_bias:
                lay.update({"gb": w.get(p + "mlp.gate_proj.bias", (F,)), "ub": w.get(p + "mlp.up_proj.bias", (F,)),
                            "db": w.get(p + "mlp.down_proj.bias", (C,))})
            self.layers.append(lay)
        self.norm = w.get("norm.weight", (C,))
        if cfg.get("tie_word_embeddings", False):
            self.lm_head = self.embed
        else:
            if "lm_head.weight" not in tensors:
                raise RefError("tie_word_embeddings is false but the checkpoint has no lm_head.weight")
            self.lm_head = to_f64(tensors["lm_head.weight"])
            if self.lm_head.shape != (V, C):
                raise RefError("lm_head.weight has shape %s, expected %s" % (self.lm_head.shape, (V, C)))

    def scaled(self, inv_freq):
        """transformers' modeling_rope_utils: rope_type "linear" divides every frequency by factor;
        "llama3" (_compute_llama3_parameters) keeps those of wavelength < old / high_freq_factor, divides
        those of wavelength > old / low_freq_factor by factor and blends those between"""
        rs = self.rope_scaling
        kind = rs and rs.get("rope_type", rs.get("type"))
        if kind == "linear":
            return inv_freq / float(rs["factor"])
        if kind != "llama3":
            return inv_freq
        factor, low, high = float(rs["factor"]), float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        old = float(rs["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv_freq
        out = np.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return np.where(medium, smoothed, out)

    def logits(self, ids):
        T = len(ids)
        if self.P and T > self.P:
            raise RefError("%d tokens but max_position_embeddings = %d" % (T, self.P))
        H, KV, D = self.H, self.KV, self.D
        rep = H // KV
        inv_freq = self.scaled(1.0 / (self.theta ** (np.arange(0, D, 2, dtype=np.float64) / D)))
        freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb)[None], np.sin(emb)[None]  # (1, T, D)
        x = self.embed[ids]
        for a in self.layers:
            h = rms_norm(x, a["in_norm"], self.eps)
            q = (h @ a["q"].T + a["qb"]).reshape(T, H, D).transpose(1, 0, 2)
            k = (h @ a["k"].T + a["kb"]).reshape(T, KV, D).transpose(1, 0, 2)
            v = (h @ a["v"].T + a["vb"]).reshape(T, KV, D).transpose(1, 0, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = np.repeat(k, rep, axis=0)  # repeat_kv: kv head j for query heads j*rep .. j*rep+rep-1
            v = np.repeat(v, rep, axis=0)
            x = x + causal_attention(q, k, v) @ a["o"].T + a["ob"]
            x = x + self.mlp(a, rms_norm(x, a["post_norm"], self.eps))
        x = rms_norm(x, self.norm, self.eps)
        return x @ self.lm_head.T

    def mlp_weights(self, w, p):
        F, C = self.F, self.C
        return {"gate": w.get(p + "mlp.gate_proj.weight", (F, C)), "up": w.get(p + "mlp.up_proj.weight", (F, C)),
                "down": w.get(p + "mlp.down_proj.weight", (C, F))}

    def mlp(self, a, h):
        g = activation(self.act, h @ a["gate"].T + a.get("gb", 0.0))
        return (g * (h @ a["up"].T + a.get("ub", 0.0))) @ a["down"].T + a.get("db", 0.0)


def routed_experts(act, h, router, experts, k, renorm):
    """The routed experts' sum of transformers' Mixtral / Qwen2-MoE sparse blocks: router logits h @ router^T,
    softmax over all experts, the k largest (lower expert first on ties), renormalised to sum 1 when renorm,
    y = sum_j w_j * down_e(act(gate_e h) * up_e h); experts: (gate, up, down) weights per expert"""
    z = h @ router.T  # (T, E)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    top = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    wt = np.take_along_axis(p, top, axis=-1)
    if renorm:
        wt /= wt.sum(axis=-1, keepdims=True)
    y = np.zeros_like(h)
    for e, (wg, wu, wd) in enumerate(experts):
        rows, slot = np.nonzero(top == e)
        if len(rows):
            he = h[rows]
            y[rows] += wt[rows, slot][:, None] * ((activation(act, he @ wg.T) * (he @ wu.T)) @ wd.T)
    return y


class Mixtral(Llama):
    """MixtralForCausalLM: Llama's layers with the sparse block of softmax-top-k-renormalised experts"""

    def __init__(self, cfg, tensors):
        self.E = int(cfg.get("num_local_experts", 8))
        self.K = int(cfg.get("num_experts_per_tok", 2))
        if not 1 <= self.K <= self.E:
            raise RefError("config.json: num_experts_per_tok %d of %d experts" % (self.K, self.E))
        if cfg.get("norm_topk_prob", True) is not True or cfg.get("scoring_func", "softmax") != "softmax":
            raise RefError("config.json: a router other than Mixtral's (softmax, top-k, renormalised) is not supported")
        for k in ("n_shared_experts", "shared_expert_intermediate_size", "num_shared_experts"):
            if cfg.get(k):
                raise RefError("config.json: %s %r: shared experts are not supported" % (k, cfg[k]))
        if cfg.get("sliding_window") is not None and int(cfg["sliding_window"]) < int(cfg.get("max_position_embeddings")
                                                                                     or 0):
            raise RefError("config.json: sliding_window %r is not supported" % (cfg["sliding_window"],))
        cfg = dict(cfg, rms_norm_eps=cfg.get("rms_norm_eps", 1e-5), rope_theta=cfg.get("rope_theta", 1e6),
                   attention_bias=False, mlp_bias=False)
        Llama.__init__(self, cfg, tensors)

    def mlp_weights(self, w, p):
        E, F, C = self.E, self.F, self.C
        q = p + "block_sparse_moe."
        return {"router": w.get(q + "gate.weight", (E, C)),
                "experts": [(w.get(q + "experts.%d.w1.weight" % e, (F, C)), w.get(q + "experts.%d.w3.weight" % e, (F, C)),
                             w.get(q + "experts.%d.w2.weight" % e, (C, F))) for e in range(E)]}

    def mlp(self, a, h):
        return routed_experts(self.act, h, a["router"], a["experts"], self.K, True)


class Qwen2Moe(Llama):
    """Qwen2MoeForCausalLM (modeling_qwen2_moe.py): Llama's layers (q / k / v biases when qkv_bias, true by
    default) with Qwen2MoeSparseMoeBlock: router logits = h @ mlp.gate.weight^T, softmax over all num_experts,
    the num_experts_per_tok largest (ties: the lower expert), renormalised when norm_topk_prob, y = sum_j w_j *
    down_e(silu(gate_e h) * up_e h) + sigmoid(h . shared_expert_gate) * shared_expert(h); every layer sparse
    (decoder_sparse_step 1, no mlp_only_layers)"""

    def __init__(self, cfg, tensors):
        self.E = int(cfg.get("num_experts", 60))
        self.K = int(cfg.get("num_experts_per_tok", 4))
        self.norm_topk = bool(cfg.get("norm_topk_prob", False))
        self.Fe = int(cfg.get("moe_intermediate_size", 1408))
        self.Fs = int(cfg.get("shared_expert_intermediate_size", 5632))
        if not 1 <= self.K <= self.E:
            raise RefError("config.json: num_experts_per_tok %d of %d experts" % (self.K, self.E))
        if int(cfg.get("decoder_sparse_step", 1)) != 1 or cfg.get("mlp_only_layers"):
            raise RefError("config.json: dense layers (decoder_sparse_step, mlp_only_layers) are not supported")
        if cfg.get("use_sliding_window"):
            raise RefError("config.json: use_sliding_window is not supported")
        Llama.__init__(self, dict(cfg, attention_bias=False, mlp_bias=False), tensors)

    def mlp_weights(self, w, p):
        E, F, Fs, C = self.E, self.Fe, self.Fs, self.C
        q = p + "mlp."
        return {"router": w.get(q + "gate.weight", (E, C)),
                "experts": [(w.get(q + "experts.%d.gate_proj.weight" % e, (F, C)),
                             w.get(q + "experts.%d.up_proj.weight" % e, (F, C)),
                             w.get(q + "experts.%d.down_proj.weight" % e, (C, F))) for e in range(E)],
                "shared": (w.get(q + "shared_expert.gate_proj.weight", (Fs, C)),
                           w.get(q + "shared_expert.up_proj.weight", (Fs, C)),
                           w.get(q + "shared_expert.down_proj.weight", (C, Fs))),
                "shared_gate": w.get(q + "shared_expert_gate.weight", (1, C))}

    def mlp(self, a, h):
        y = routed_experts(self.act, h, a["router"], a["experts"], self.K, self.norm_topk)
        wg, wu, wd = a["shared"]
        s = 1.0 / (1.0 + np.exp(-(h @ a["shared_gate"].T)))  # (T, 1)
        return y + s * ((activation(self.act, h @ wg.T) * (h @ wu.T)) @ wd.T)


def build_model(cfg, tensors):
    mt = cfg.get("model_type")
    arch = " ".join(cfg.get("architectures") or [])
    if mt == "gpt2" or "GPT2" in arch:
        return GPT2(cfg, tensors)
    if mt == "mixtral" or "Mixtral" in arch:
        return Mixtral(cfg, tensors)
    if mt == "qwen2_moe" or "Qwen2Moe" in arch:
        return Qwen2Moe(cfg, tensors)
    if mt in ("llama", "qwen2") or "Llama" in arch or "Qwen2" in arch:
        return Llama(cfg, tensors)
    raise RefError("config.json: model_type %r (architectures %r): only gpt2, llama, qwen2, mixtral and qwen2_moe are "
                   "supported"
                   % (mt, arch))


def log_softmax(z):
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def score(model, prompt, completion):
    ids = list(prompt) + list(completion)
    if not prompt:
        raise RefError("empty prompt_tokens: the first token needs a context")
    for t in ids:
        if not (0 <= t < model.V):
            raise RefError("token id %d outside the vocabulary [0, %d)" % (t, model.V))
    lp = log_softmax(model.logits(np.asarray(ids, dtype=np.int64)))
    n = len(prompt)
    return [float(lp[n - 1 + k, completion[k]]) for k in range(len(completion))]


def read_lines(inp):
    """(line number, record with integer lists prompt_tokens / tokens) of a JSON-lines file"""
    with open(inp, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise RefError("%s:%d: %s" % (inp, no, e))
            pt, ct = rec.get("prompt_tokens"), rec.get("tokens", [])
            if not isinstance(pt, list) or not isinstance(ct, list) or \
                    not all(isinstance(t, int) for t in pt + ct):
                raise RefError("%s:%d: expected integer arrays \"prompt_tokens\" and \"tokens\"" % (inp, no))
            yield no, rec


def write_lines(outp, lines_out):
    tmp = outp + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for s in lines_out:
            f.write(s + "\n")
    os.replace(tmp, outp)


def run_greedy(model_dir, n_new, inp, outp):
    cfg, tensors = load_model_dir(model_dir)
    model = build_model(cfg, tensors)
    limit = getattr(model, "P", 0) or 1 << 30
    lines_out = []
    for no, rec in read_lines(inp):
        ids = list(rec["prompt_tokens"])
        if not ids:
            raise RefError("%s:%d: empty prompt_tokens" % (inp, no))
        out, margins = [], []
        while len(out) < n_new and len(ids) < limit:
            z = model.logits(np.asarray(ids, dtype=np.int64))[-1]
            nxt = int(np.argmax(z))  # the first index on ties
            margins.append(float(z[nxt] - np.max(np.delete(z, nxt))) if len(z) > 1 else float("inf"))
            out.append(nxt)
            ids.append(nxt)
        lines_out.append(json.dumps({"prompt_tokens": rec["prompt_tokens"], "tokens": out, "margins": margins}))
    write_lines(outp, lines_out)
    return len(lines_out), type(model).__name__


def run_logprobs(model_dir, inp, outp):
    cfg, tensors = load_model_dir(model_dir)
    model = build_model(cfg, tensors)
    lines_out = []
    for no, rec in read_lines(inp):
        pt, ct = rec["prompt_tokens"], rec["tokens"]
        try:
            lps = score(model, pt, ct)
        except RefError as e:
            raise RefError("%s:%d: %s" % (inp, no, e))
        o = {}
        for k in ("prompt", "completion"):
            if k in rec:
                o[k] = rec[k]
        o.update({"prompt_tokens": pt, "tokens": ct, "logprobs": lps, "sum": float(sum(lps))})
        lines_out.append(json.dumps(o, ensure_ascii=False))
    write_lines(outp, lines_out)
    return len(lines_out), type(model).__name__


# ---------------------------------------------------------------- the broken-export helper

def swap_heads(src, dst, layer, a, b):
    cfg, tensors = load_model_dir(src)
    model = build_model(cfg, tensors)  # validates the folder
    tensors = {k: (dt, shape, np.array(arr)) for k, (dt, shape, arr) in tensors.items()}  # writable copies

    def key(prefixes, name):
        for p in prefixes:
            if p + name in tensors:
                return p + name
        raise RefError("%s: no tensor %s" % (src, name))

    def swap_blocks(arr, axis, size, i, j):
        sl = [slice(None)] * arr.ndim
        si, sj = list(sl), list(sl)
        si[axis] = slice(i * size, (i + 1) * size)
        sj[axis] = slice(j * size, (j + 1) * size)
        tmp = arr[tuple(si)].copy()
        arr[tuple(si)] = arr[tuple(sj)]
        arr[tuple(sj)] = tmp

    if isinstance(model, GPT2):
        H, C = model.H, model.C
        D = C // H
        if not (0 <= layer < model.L and 0 <= a < H and 0 <= b < H and a != b):
            raise RefError("--layer %d --heads %d %d: out of range (%d layers, %d heads)" % (layer, a, b, model.L, H))
        wk = key(["transformer.", ""], "h.%d.attn.c_attn.weight" % layer)
        bk = key(["transformer.", ""], "h.%d.attn.c_attn.bias" % layer)
        for part in range(3):  # q, k, v: column blocks of the (in, out) Conv1D weight
            for k_, axis in ((wk, 1), (bk, 0)):
                arr = tensors[k_][2]
                view = arr[:, part * C:(part + 1) * C] if axis == 1 else arr[part * C:(part + 1) * C]
                swap_blocks(view, axis, D, a, b)
    else:
        H, KV, D = model.H, model.KV, model.D
        if not (0 <= layer < model.L and 0 <= a < H and 0 <= b < H and a != b):
            raise RefError("--layer %d --heads %d %d: out of range (%d layers, %d heads)" % (layer, a, b, model.L, H))
        p = "layers.%d.self_attn." % layer
        swap_blocks(tensors[key(["model.", ""], p + "q_proj.weight")][2], 0, D, a, b)
        if a < KV and b < KV:
            swap_blocks(tensors[key(["model.", ""], p + "k_proj.weight")][2], 0, D, a, b)
            swap_blocks(tensors[key(["model.", ""], p + "v_proj.weight")][2], 0, D, a, b)
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):  # config, tokenizer files, ...: everything but the weights
        sp = os.path.join(src, name)
        if os.path.isfile(sp) and not name.endswith(".safetensors") and name != "model.safetensors.index.json":
            shutil.copyfile(sp, os.path.join(dst, name))
    write_safetensors(os.path.join(dst, "model.safetensors"), tensors, {"format": "pt"})


def main(argv):
    ap = argparse.ArgumentParser(description="NumPy float64 reference logprobs of a Hugging Face GPT-2 / Llama / Mixtral "
                                             "folder (see the module docstring)")
    ap.add_argument("--swap-heads", action="store_true",
                    help="write a copy of MODEL_DIR to the second path with two attention heads swapped in q/k/v")
    ap.add_argument("--greedy", type=int, metavar="N", default=0,
                    help="continue each line's prompt_tokens by N greedy tokens instead of scoring")
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--heads", type=int, nargs=2, default=[0, 1])
    ap.add_argument("paths", nargs="+", metavar="PATH")
    args = ap.parse_args(argv)
    try:
        if args.swap_heads:
            if len(args.paths) != 2:
                ap.error("--swap-heads takes SRC_DIR DST_DIR")
            swap_heads(args.paths[0], args.paths[1], args.layer, args.heads[0], args.heads[1])
            print("hf_logprobs.py: %s -> %s with heads %d and %d of layer %d swapped in q/k/v"
                  % (args.paths[0], args.paths[1], args.heads[0], args.heads[1], args.layer))
            return 0
        if len(args.paths) != 3:
            ap.error("expected MODEL_DIR INPUT.jsonl OUTPUT.jsonl")
        if args.greedy > 0:
            n, kind = run_greedy(args.paths[0], args.greedy, args.paths[1], args.paths[2])
            print("hf_logprobs.py: %s (%s), %d lines, %d greedy tokens each -> %s"
                  % (args.paths[0], kind, n, args.greedy, args.paths[2]))
            return 0
        n, kind = run_logprobs(*args.paths)
        print("hf_logprobs.py: %s (%s), %d lines -> %s" % (args.paths[0], kind, n, args.paths[2]))
        return 0
    except (RefError, OSError) as e:
        sys.stderr.write("hf_logprobs.py: error: %s\n" % e)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
