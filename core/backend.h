/* backend.h — the device interface (ggml-backend style): a const table of function pointers
 * plus an opaque context. core/ and parallel/ never touch device memory; they call these.
 * Rules:
 *  - Ops take one argument struct each, so the table stays stable as ops grow.
 *  - Every buffer's dtype is stated in its comment: "act" = the compute dtype of the backend
 *    (fp32 on CPU, bf16 on CUDA), "f32" = always fp32 (gradients of weights, optimizer
 *    state, norm statistics, losses), "i32" = int32.
 *  - Backward (llm.c rule): weight gradients accumulate (+=); activation gradients are
 *    overwritten (=), except the residual stream: norm backwards ADD into dinp.
 *  - Weights are (out, in) row-major like torch.nn.Linear: y = x W^T + b.
 *  - Nothing here synchronises with the host except copy_d2h and sync. */
#ifndef MT_BACKEND_H
#define MT_BACKEND_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"


/* A device tensor view: data pointer into one of the big buffers, its dtype and count. */
typedef struct {
    void *data;
    mt_dtype dtype;
    size_t n;
} mt_tensor;

/* ---- op arguments ---- */

typedef struct {            /* out = inp @ weight^T + bias */
    void *out;              /* (M, N) act */
    const void *inp;        /* (M, K) act */
    const void *weight;     /* (N, K) act */
    const void *bias;       /* (N) act, or NULL */
    int M, N, K;
} mt_matmul_fwd_args;

typedef struct {
    void *dinp;             /* (M, K) act: = dout @ weight (+= if accumulate_dinp); NULL to skip */
    void *dweight;          /* (N, K) f32: += dout^T @ inp */
    void *dbias;            /* (N) f32: += sum over rows of dout; NULL if no bias */
    const void *dout;       /* (M, N) act */
    const void *inp;        /* (M, K) act */
    const void *weight;     /* (N, K) act */
    int M, N, K;
    int accumulate_dinp;
} mt_matmul_bwd_args;

typedef struct {            /* out = (x - mean) * rstd * weight + bias; rmsnorm: x * rstd * weight */
    void *out;              /* (N, C) act */
    void *mean;             /* (N) f32, saved (layernorm only; NULL for rmsnorm) */
    void *rstd;             /* (N) f32, saved */
    const void *inp;        /* (N, C) act */
    const void *weight;     /* (C) act */
    const void *bias;       /* (C) act (layernorm only) */
    int N, C;
    float eps;
} mt_norm_fwd_args;

typedef struct {
    void *dinp;             /* (N, C) act: += (residual stream) */
    void *dweight;          /* (C) f32: += */
    void *dbias;            /* (C) f32: += (layernorm only) */
    const void *dout;       /* (N, C) act */
    const void *inp;        /* (N, C) act */
    const void *weight;     /* (C) act */
    const void *mean;       /* (N) f32 (layernorm only) */
    const void *rstd;       /* (N) f32 */
    int N, C;
} mt_norm_bwd_args;

typedef struct {            /* GeLU, tanh approximation (GPT-2's "gelu_new") */
    void *out;              /* (n) act */
    const void *inp;        /* (n) act */
    size_t n;
} mt_gelu_fwd_args;

typedef struct {
    void *dinp;             /* (n) act, = dout * gelu'(inp) */
    const void *dout;       /* (n) act */
    const void *inp;        /* (n) act */
    size_t n;
} mt_gelu_bwd_args;

/* squared ReLU (Megatron's squared_relu, megatron/core/activations.py): out = max(inp, 0)^2, and
 * backward dinp = dout * 2 max(inp, 0) (dinp may be dout: in place). The fields of GeLU's ops. */
typedef mt_gelu_fwd_args mt_squared_relu_fwd_args;
typedef mt_gelu_bwd_args mt_squared_relu_bwd_args;

typedef struct {            /* out[r, j] = silu(inp[r, j]) * inp[r, F + j]: each row is [gate | up] */
    void *out;              /* (N, F) act */
    const void *inp;        /* (N, 2F) act */
    int N, F;
} mt_swiglu_fwd_args;

typedef struct {
    void *dinp;             /* (N, 2F) act, = */
    const void *dout;       /* (N, F) act */
    const void *inp;        /* (N, 2F) act */
    int N, F;
} mt_swiglu_bwd_args;

/* Rotary embedding, in place, as Megatron-Core's RotaryEmbedding: for each of the B*T rows (row
 * stride `row_stride` elements), heads 0..n_heads-1 of size D starting at the row's start;
 * position of row b*T+t is pos_offset + t. The first R = rot_dim channels of each head rotate
 * (0: R = D; the other D - R pass through: partial rotary, --rotary-percent), pair i of R/2 by
 * angle pos * theta^(-2i/R): channels (i, i + R/2) (rotate_half, as HF Llama) or, interleaved,
 * (2i, 2i + 1) (--rotary-interleaved). Backward (inverse = true) rotates by -angle: it is the
 * transpose of the forward, applied in place to the gradient. */
typedef struct {
    void *x;                /* (B, T, row_stride) act, in place */
    int B, T, n_heads, D, row_stride, pos_offset;
    float theta;
    int inverse;
    int rot_dim;            /* channels rotated per head, even, <= D; 0 = D */
    int interleaved;        /* pairs (2i, 2i + 1) instead of (i, i + rot_dim / 2) */
    /* YaRN (Megatron's YarnRotaryEmbedding; multi-latent attention): yarn_factor > 1 blends the
       frequencies theta^(-2i/R) and theta^(-2i/R) / factor by the linear ramp between the correction
       dimensions of beta_fast and beta_slow at yarn_orig_max positions (mt_rope_inv_freq); cos and sin
       are multiplied by yarn_mscale (0: 1). Zero fields: plain RoPE */
    float yarn_factor, yarn_mscale, yarn_beta_fast, yarn_beta_slow;
    int yarn_orig_max;
    /* Llama 3.x's frequency scaling (llama3_factor > 0; low / high frequency factors, original
       context llama3_orig_max) and position interpolation (pos_interp > 0 and != 1: positions divided
       by it), applied to every frequency after YaRN (core/rope_scale.h). Zero fields: off */
    float llama3_factor, llama3_low, llama3_high;
    int llama3_orig_max;
    float pos_interp;
} mt_rope_args;

/* Causal softmax attention with grouped-query heads. qkv rows are [q heads (H*D) | k heads
 * (KV*D) | v heads (KV*D)]; query head h reads kv head h / (H / KV). Scale 1/sqrt(D) unless the args say.
 * Flash-style (docs/architecture.md, "Attention"): no (T, T) matrix is stored anywhere. The
 * forward keeps, per query row, lse = m + log(l), the logsumexp of its scaled scores; the
 * backward recomputes the probabilities tile by tile as exp(s - lse). */
typedef struct {
    void *out;              /* (B, T, H*D) act */
    void *lse;              /* (B, H, T) f32, saved: logsumexp_j<=t of q_t . k_j / sqrt(D) */
    const void *qkv;        /* (B, T, (H + 2KV)*D) act */
    int B, T, H, KV, D;
    float scale;            /* the softmax scale on q . k (mt_attn_scale: 0 = 1/sqrt(D)) */
} mt_attention_fwd_args;

typedef struct {
    void *dqkv;             /* (B, T, (H + 2KV)*D) act, = */
    void *delta;            /* (B, H, T) f32 scratch: rowsum(dout * out) */
    const void *dout;       /* (B, T, H*D) act */
    const void *qkv;        /* (B, T, (H + 2KV)*D) act */
    const void *out;        /* (B, T, H*D) act from forward */
    const void *lse;        /* (B, H, T) f32 from forward */
    int B, T, H, KV, D;
    float scale;            /* the forward's */
} mt_attention_bwd_args;

/* One block of context-parallel (ring) attention, same heads as above, with global positions:
 * query rows [q0, q0 + Tq) of this rank's qkv (B sequences of T rows) sit at global positions
 * q_pos, q_pos + 1, ...; key / value rows [k0, k0 + Tk) of kv (B, T, 2*KV*D), the packed k | v
 * columns of a qkv (this rank's own, or a peer's received over the ring), at k_pos, k_pos + 1, ...; key j is visible to query i when k_pos + j <= q_pos + i (causal by
 * global position: an earlier chunk is seen fully, the same chunk diagonally, a later one not at
 * all). Forward: merge = 0 writes the block's softmax output and logsumexp into out / lse rows
 * [q0, q0 + Tq); merge = 1 combines them with what is there (two partial softmaxes over disjoint
 * key sets: lse = log(e^lse + e^lse_blk), out = (e^lse out + e^lse_blk out_blk) / e^lse_new).
 * A row that sees no key of the block gets out 0, lse -inf. Backward, from the FINAL out and lse
 * of the query rows: dQ rows [q0, q0 + Tq) += into dqkv's q columns, dK / dV rows [k0, k0 + Tk) +=
 * into dkv (packed as kv), delta rows [q0, q0 + Tq) = rowsum(dout * out) (scratch). Same tiles and loop order as attention_fwd / attention_bwd. */
typedef struct {
    void *out;              /* (B, T, H*D) act: rows [q0, q0 + Tq) written or merged */
    void *lse;              /* (B, H, T) f32: the same rows */
    const void *qkv;        /* (B, T, (H + 2KV)*D) act: the queries (q columns) */
    const void *kv;         /* (B, T, 2KV*D) act: the keys and values [k heads | v heads] */
    int B, T, H, KV, D;
    int q0, Tq, q_pos;      /* query rows and the global position of row q0 */
    int k0, Tk, k_pos;      /* key rows and the global position of row k0 */
    int merge;
    float scale;            /* as mt_attention_fwd_args */
} mt_attention_block_fwd_args;

typedef struct {
    void *dqkv;             /* (B, T, (H + 2KV)*D) act: dQ rows [q0, q0 + Tq) += */
    void *dkv;              /* (B, T, 2KV*D) act: dK, dV rows [k0, k0 + Tk) += (packed as kv) */
    void *delta;            /* (B, H, T) f32 scratch */
    const void *dout;       /* (B, T, H*D) act */
    const void *qkv;        /* (B, T, (H + 2KV)*D) act: the queries */
    const void *kv;         /* (B, T, 2KV*D) act: the keys and values [k heads | v heads] */
    const void *out;        /* (B, T, H*D) act: the final output of the query rows */
    const void *lse;        /* (B, H, T) f32: their final logsumexp */
    int B, T, H, KV, D;
    int q0, Tq, q_pos;
    int k0, Tk, k_pos;
    float scale;            /* as mt_attention_fwd_args */
} mt_attention_block_bwd_args;

/* The softmax scale an attention op applies: the args' scale, 0 meaning 1/sqrt(D) (muP's
 * 1 / D and others come from core/model/mup.h). */
static inline float mt_attn_scale(float scale, int D) { return scale > 0 ? scale : 1.0f / sqrtf((float)D); }

/* out[b,t,:] = wte[tokens[b,t] - vocab_start, :] (0 if the token is outside
 * [vocab_start, vocab_start + n_vocab): vocab-parallel shards) + wpe[pos_offset + t, :]. */
typedef struct {
    void *out;              /* (B, T, C) act */
    const int32_t *tokens;  /* (B, T) i32 */
    const void *wte;        /* (n_vocab, C) act */
    const void *wpe;        /* (max_position, C) act, or NULL (rope models) */
    int B, T, C, vocab_start, n_vocab, pos_offset;
} mt_embedding_fwd_args;

typedef struct {
    void *dwte;             /* (n_vocab, C) f32, += */
    void *dwpe;             /* (max_position, C) f32, +=, or NULL */
    const void *dout;       /* (B, T, C) act */
    const int32_t *tokens;  /* (B, T) i32 */
    int B, T, C, vocab_start, n_vocab, pos_offset;
} mt_embedding_bwd_args;

/* Softmax cross-entropy fused with its backward. Columns >= V of each row (vocabulary
 * padding) are excluded from the softmax and get gradient 0. Rows whose target is < 0 are
 * ignored (loss 0, gradient 0). logits are overwritten by dlogits * dloss. */
typedef struct {
    void *logits;           /* (N, Vp) act: in logits, out d(loss)/d(logits) * dloss */
    void *losses;           /* (N) f32, = -log softmax[target] */
    const int32_t *targets; /* (N) i32 */
    int N, V, Vp;
    float dloss;            /* gradient scale: 1 / (tokens in the global batch) */
} mt_xent_args;

/* Vocab-parallel softmax cross-entropy (Megatron's VocabParallelCrossEntropy) in three phases
 * around two allreduces over the tensor-parallel group, so the full logits are never gathered.
 * This rank holds logits columns [vocab_start, vocab_start + n_cols) of the padded vocabulary;
 * global columns >= V are padding (excluded from the softmax, gradient 0); rows whose target is
 * < 0 are ignored (loss 0, gradient 0). stats is (3, N) f32: rows [max | sum exp | target logit].
 *   xent_vp_max:    stats[0][r] = max of row r over this rank's valid columns (-inf if none)
 *                   -> caller: allreduce MAX of stats[0] over the tp group
 *   xent_vp_sumexp: logits[r][j] = exp(logits[r][j] - stats[0][r]) on valid columns;
 *                   stats[1][r] = their sum; stats[2][r] = logits[r][target] - stats[0][r] when the
 *                   target is in this shard, else 0   -> caller: allreduce SUM of stats[1..2]
 *   xent_vp_finish: losses[r] = log(stats[1][r]) - stats[2][r]; logits[r][j] = (exp / sum
 *                   - [j == target]) * dloss on valid columns, 0 on padding and ignored rows.
 * With one rank (vocab_start 0, n_cols = Vp) the three phases equal xent_fwd_bwd. */
typedef struct {
    void *logits;           /* (N, n_cols) act: logits in, exp after sumexp, gradient after finish */
    void *stats;            /* (3, N) f32 */
    void *losses;           /* (N) f32, written by finish */
    const int32_t *targets; /* (N) i32, global vocabulary ids */
    int N, V, vocab_start, n_cols;
    float dloss;            /* gradient scale: 1 / (tokens in the global batch) */
} mt_xent_vp_args;

typedef struct {            /* dst[r * dst_stride + j] = src[r * src_stride + j], r < rows, j < cols
                               (act elements; strides >= cols): a column block of a row-major matrix */
    void *dst;
    const void *src;
    int rows, cols, dst_stride, src_stride;
} mt_copy_rows_args;

typedef struct {            /* x *= s (act, in place): muP's logit and embedding multipliers */
    void *x;
    size_t n;
    float s;
} mt_scale_args;

typedef struct {            /* out = a + b (all act) */
    void *out;
    const void *a, *b;
    size_t n;
} mt_add_args;

typedef struct {            /* *out (f32 scalar) += sum(x) or sum(x*x) over n f32 elements */
    void *out;
    const void *x;
    size_t n;
    int squares;
} mt_sum_args;

/* AdamW on one contiguous tensor, PyTorch/Megatron formulation: g = grad * grad_scale;
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; master -= lr * (m/bc1 / (sqrt(v/bc2) + eps)
 * + weight_decay * master); param = master in the compute dtype (param may == master). */
typedef struct {
    void *master;           /* (n) f32 */
    void *param;            /* (n) act, written from master; may alias master when act = f32 */
    const void *grad;       /* (n) f32 */
    void *m, *v;            /* (n) f32 */
    size_t n;
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    float bias_correction1, bias_correction2; /* 1 - beta^t */
    int moments_zero;       /* 1: m and v are known to be all zero (no step taken, none loaded): they
                               are read as 0 and only written, the same arithmetic (b1 * 0 + ...),
                               so each fresh page of them is touched once, by a write */
} mt_adamw_args;

typedef struct {            /* dst (act) = src (f32), n elements: master -> compute copies */
    void *dst;
    const void *src;
    size_t n;
} mt_cast_args;

/* ---- mixture of experts (train/model_moe.c; docs/moe.md) ---- */

/* MoE step statistics (f32, summed over micro-batches and MoE layers): [0] load-balancing loss
 * (without its coefficient), [1] z-loss (without its coefficient), [2] dropped assignments,
 * [3] routed assignments, then E routed-per-expert counts, then E kept-per-expert counts */
#define MT_MOE_STATS 4

/* MoE router, fp32 maths (the per-token rules are core/moe_rule.h's): per token row its scores
 * (probs: softmax of its E logits, or score SIGMOID: sigmoid of each), the top k experts (ties: the
 * lower index) by the score (softmax without pre_softmax: by the logit), plus bias (the expert bias,
 * choice only), among the group_topk best of n_groups groups when n_groups > 1; their weights
 * (mt_moe_weights: renormalised softmax, the probabilities themselves under pre_softmax, or the
 * chosen sigmoids over their sum) times scale; and the capacity rule: the assignments of each
 * sequence (T consecutive rows) to one expert are kept in token order up to cap (0: all kept).
 * pos is the assignment's row in the dispatch layout (experts in order, each expert's kept
 * assignments in token order), -1 when dropped (its weight then 0). counts: [0, E) kept per
 * expert, [E, 2E) routed per expert (before dropping). auxcnt: the load-balancing loss's own
 * routing (Megatron's compute_routing_scores_for_aux_loss: the plain top k of the aux scores q,
 * softmax probabilities or sigmoids over their row sum + 1e-20, no bias, no groups), counted per
 * expert, per sequence (row b*E + e) when seq_aux, else summed over the micro-batch (row 0).
 * bias_cnt (+=, NULL to skip): kept per expert, as f32 (the expert bias's token counts).
 * stats (+=, NULL to skip; MT_MOE_STATS layout of model_layout.h): [0] the load-balancing loss
 * E / (N^2 k) * sum_e (sum_t q) * auxcnt_e (Megatron's switch_load_balancing_loss_func without its
 * coefficient; seq_aux: the mean over sequences of that of each sequence, T tokens), [1] the
 * z-loss mean_t logsumexp(logits_t)^2, [2] dropped, [3] routed, then routed and kept per expert. */
typedef struct {
    const void *logits;     /* (N, E) act */
    void *probs;            /* (N, E) f32: softmax probabilities or sigmoid scores */
    void *topi;             /* (N, k) i32 */
    void *topw;             /* (N, k) f32 */
    void *pos;              /* (N, k) i32 */
    void *counts;           /* (2E) i32, = */
    void *auxcnt;           /* (N / T, E) i32, = (row 0 only without seq_aux) */
    void *stats;            /* (MT_MOE_STATS + 2E) f32, +=; may be NULL */
    const void *bias;       /* (E) f32 expert bias, or NULL */
    void *bias_cnt;         /* (E) f32, +=; may be NULL */
    int N, E, k, T, cap, pre_softmax;
    int score;              /* MT_MOE_SCORE_SOFTMAX / _SIGMOID (core/moe_rule.h) */
    int n_groups, group_topk; /* group-limited routing (n_groups <= 1: off) */
    int seq_aux;            /* bool: the load-balancing loss per sequence */
    float scale;            /* the weights' factor (Megatron's topk scaling factor; 1: none) */
} mt_moe_route_args;

/* Router backward: dlogits = d/dlogits of (sum dw * weights) + aux_scale * aux + z_scale * z
 * (the weights of dropped assignments count with dw = 0: renormalised weights still depend on
 * their logits), with the forward's score, scale, seq_aux and T (aux of each sequence). */
typedef struct {
    void *dlogits;          /* (N, E) act, = */
    const void *logits;     /* (N, E) act */
    const void *probs;      /* (N, E) f32 */
    const void *topi;       /* (N, k) i32 */
    const void *auxcnt;     /* (N / T, E) i32 from the forward */
    const void *dw;         /* (N, k) f32 gradient of the combine weights */
    int N, E, k, T, pre_softmax, score, seq_aux;
    float scale;
    float aux_scale, z_scale;
} mt_moe_route_bwd_args;

/* Dispatch: out[pos[t, j]] = x[t] for every kept assignment. */
typedef struct {
    void *out;              /* (rows, C) act */
    const void *x;          /* (N, C) act */
    const void *pos;        /* (N, k) i32 */
    int N, k, C;
} mt_moe_permute_args;

/* Combine: out[t] = sum_j w[t, j] * y[pos[t, j]] over kept assignments (=; w NULL: weights 1, which is
 * the dispatch's backward). */
typedef struct {
    void *out;              /* (N, C) act, = */
    const void *y;          /* (rows, C) act */
    const void *pos;        /* (N, k) i32 */
    const void *w;          /* (N, k) f32 or NULL */
    int N, k, C;
} mt_moe_unpermute_args;

/* Combine backward: dy[pos[t, j]] = w[t, j] * dout[t]; dw[t, j] = <dout[t], y[pos[t, j]]> (0 when
 * dropped). Either output may be NULL, then not computed (dw NULL: y is not read): the weighted dispatch
 * alone (dy) or the weights' gradient alone (dw). */
typedef struct {
    void *dy;               /* (rows, C) act, = for the kept rows; or NULL */
    void *dw;               /* (N, k) f32, =; or NULL */
    const void *dout;       /* (N, C) act */
    const void *y;          /* (rows, C) act */
    const void *pos;        /* (N, k) i32 */
    const void *w;          /* (N, k) f32 */
    int N, k, C;
} mt_moe_unpermute_bwd_args;

/* The shared experts' gate (Megatron's SharedExpertMLP with --moe-shared-expert-gate, Qwen2-MoE's
 * shared_expert_gate; train/model_moe_shared.c), fp32 maths: per token row t
 *   gate[t] = sigmoid(<x[t], w>),  out[t] += gate[t] * y[t]. */
typedef struct {
    void *out;              /* (N, C) act, += */
    void *gate;             /* (N) f32, = */
    const void *y;          /* (N, C) act: the shared experts' output */
    const void *x;          /* (N, C) act: the layer's input */
    const void *w;          /* (C) act: w_gate */
    int N, C;
} mt_moe_gate_fwd_args;

/* Its backward through the product: dy[t] = gate[t] * dout[t] (=); dz[t] = gate[t] (1 - gate[t]) <dout[t],
 * y[t]> (=), the gradient of the gate's logit (a partial sum when y is one tp rank's partial output: sum
 * dz over the group before moe_gate_logit_bwd). */
typedef struct {
    void *dy;               /* (N, C) act, = */
    void *dz;               /* (N) f32, = */
    const void *dout;       /* (N, C) act */
    const void *y;          /* (N, C) act */
    const void *gate;       /* (N) f32 from the forward */
    int N, C;
} mt_moe_gate_bwd_args;

/* ... and through the logit z[t] = <x[t], w>: dw += sum_t dz[t] x[t]; dx[t] += dz[t] w (dx NULL: skipped). */
typedef struct {
    void *dw;               /* (C) f32, += */
    void *dx;               /* (N, C) act, +=, or NULL */
    const void *dz;         /* (N) f32 */
    const void *x;          /* (N, C) act */
    const void *w;          /* (C) act */
    int N, C;
} mt_moe_gate_logit_bwd_args;

/* ---- fused ops (optional: a backend may leave them NULL; train/ then runs the unfused ops) ---- */

/* Residual add + norm in one pass: out_resid = a + b (rounded to act), then the layernorm /
 * rmsnorm of out_resid exactly as layernorm_fwd / rmsnorm_fwd would compute it from the stored
 * sum. No backward op: the norm backward already ADDS into the residual gradient, and the add's
 * backward is the identity on it, so the unfused backward is the fused one. */
typedef struct {
    void *out_resid;        /* (N, C) act, = a + b; may alias a */
    void *out;              /* (N, C) act, the norm of out_resid */
    void *mean;             /* (N) f32 (layernorm only; NULL for rmsnorm) */
    void *rstd;             /* (N) f32 */
    const void *a, *b;      /* (N, C) act */
    const void *weight;     /* (C) act */
    const void *bias;       /* (C) act (layernorm only; may be NULL) */
    int N, C;
    float eps;
} mt_add_norm_fwd_args;

/* pre = inp @ weight^T + bias; out = gelu(pre) (the tanh GeLU of gelu_fwd): matmul_fwd then
 * gelu_fwd in one op (cuBLASLt epilogue GELU_AUX_BIAS on CUDA). pre is kept for the backward. */
typedef struct {
    void *out;              /* (M, N) act, gelu(pre) */
    void *pre;              /* (M, N) act, the pre-activation (the epilogue's aux output) */
    const void *inp;        /* (M, K) act */
    const void *weight;     /* (N, K) act */
    const void *bias;       /* (N) act, or NULL */
    int M, N, K;
} mt_matmul_gelu_fwd_args;

/* matmul_bwd of the GEMM that consumes gelu(pre), with gelu_bwd applied to its input gradient:
 * dinp = (dout @ weight) * gelu'(pre) (=, never accumulated); dweight, dbias as matmul_bwd
 * (+=). On CUDA the dinp GEMM runs with the DGELU epilogue (aux = pre). */
typedef struct {
    void *dinp;             /* (M, K) act, = d(loss)/d(pre) */
    void *dweight;          /* (N, K) f32, += dout^T @ inp */
    void *dbias;            /* (N) f32, +=, or NULL */
    const void *dout;       /* (M, N) act */
    const void *inp;        /* (M, K) act: gelu(pre), the forward input of this GEMM */
    const void *weight;     /* (N, K) act */
    const void *pre;        /* (M, K) act: the pre-activation saved by matmul_gelu_fwd */
    int M, N, K;
} mt_matmul_dgelu_bwd_args;

/* Weight init on the device: out[e] = (f32)(std * mt_rng_normal(seed, stream, offset + e)),
 * e < n (core/rng.h; the double product rounded once to fp32, as train/model.c draws on the
 * host). */
typedef struct {
    void *out;              /* (n) f32 */
    size_t n;
    uint64_t seed, stream, offset;
    double std;
} mt_init_normal_args;

/* X(op, argument type, timer class, use): every op that takes one argument struct, once. The
 * table (struct mt_backend_i) declares them from this list, the timed backend wraps them
 * (core/backend_timed.h) and mt_model_check_backend (train/model.h) asks a backend for the ones
 * a model needs. Timer class: the MT_TM_OPS_* class of core/timing.h (sum's is its call's: a sum
 * of squares is the gradient norm, an optimizer op). Use, when a model needs the op:
 *   ALL        every model
 *   LAYERNORM / RMSNORM, GELU / SWIGLU / SQUARED_RELU, ROPE: the model's norm, activation, position
 *              encoding
 *   TP         tensor parallelism (parallel.tensor > 1)
 *   CP         context parallelism (parallel.context > 1)
 *   MOE        mixture of experts (model.moe.experts > 0)
 *   ROWS       row gathers: context parallelism, or a per-head qk norm (model.qk_layernorm)
 *   OPTIONAL   not asked up front: fused ops and device init (train/ runs the unfused ops or the
 *              host init when NULL), the cast of bf16 runs (MT_BE_CALL names it when missing) */
#define MT_BACKEND_OPS(X)                                                       \
    X(matmul_fwd, mt_matmul_fwd_args, GEMM, ALL)                                \
    X(matmul_bwd, mt_matmul_bwd_args, GEMM, ALL)                                \
    X(matmul_gelu_fwd, mt_matmul_gelu_fwd_args, GEMM, OPTIONAL)                 \
    X(matmul_dgelu_bwd, mt_matmul_dgelu_bwd_args, GEMM, OPTIONAL)               \
    X(attention_fwd, mt_attention_fwd_args, ATTN, ALL)                          \
    X(attention_bwd, mt_attention_bwd_args, ATTN, ALL)                          \
    X(attention_block_fwd, mt_attention_block_fwd_args, ATTN, CP)               \
    X(attention_block_bwd, mt_attention_block_bwd_args, ATTN, CP)               \
    X(layernorm_fwd, mt_norm_fwd_args, NORM, LAYERNORM)                         \
    X(layernorm_bwd, mt_norm_bwd_args, NORM, LAYERNORM)                         \
    X(rmsnorm_fwd, mt_norm_fwd_args, NORM, RMSNORM)                             \
    X(rmsnorm_bwd, mt_norm_bwd_args, NORM, RMSNORM)                             \
    X(add_layernorm_fwd, mt_add_norm_fwd_args, NORM, OPTIONAL)                  \
    X(add_rmsnorm_fwd, mt_add_norm_fwd_args, NORM, OPTIONAL)                    \
    X(gelu_fwd, mt_gelu_fwd_args, ELEM, GELU)                                   \
    X(gelu_bwd, mt_gelu_bwd_args, ELEM, GELU)                                   \
    X(swiglu_fwd, mt_swiglu_fwd_args, ELEM, SWIGLU)                             \
    X(swiglu_bwd, mt_swiglu_bwd_args, ELEM, SWIGLU)                             \
    X(squared_relu_fwd, mt_squared_relu_fwd_args, ELEM, SQUARED_RELU)           \
    X(squared_relu_bwd, mt_squared_relu_bwd_args, ELEM, SQUARED_RELU)           \
    X(rope, mt_rope_args, ELEM, ROPE)                                           \
    X(embedding_fwd, mt_embedding_fwd_args, ELEM, ALL)                          \
    X(embedding_bwd, mt_embedding_bwd_args, ELEM, ALL)                          \
    X(xent_fwd_bwd, mt_xent_args, ELEM, ALL)                                    \
    X(xent_vp_max, mt_xent_vp_args, ELEM, TP)                                   \
    X(xent_vp_sumexp, mt_xent_vp_args, ELEM, TP)                                \
    X(xent_vp_finish, mt_xent_vp_args, ELEM, TP)                                \
    X(add, mt_add_args, ELEM, ALL)                                              \
    X(scale, mt_scale_args, ELEM, OPTIONAL)                                     \
    X(moe_route, mt_moe_route_args, ELEM, MOE)                                  \
    X(moe_route_bwd, mt_moe_route_bwd_args, ELEM, MOE)                          \
    X(moe_permute, mt_moe_permute_args, ELEM, MOE)                              \
    X(moe_unpermute, mt_moe_unpermute_args, ELEM, MOE)                          \
    X(moe_unpermute_bwd, mt_moe_unpermute_bwd_args, ELEM, MOE)                  \
    X(moe_gate_fwd, mt_moe_gate_fwd_args, ELEM, MOE)                            \
    X(moe_gate_bwd, mt_moe_gate_bwd_args, ELEM, MOE)                            \
    X(moe_gate_logit_bwd, mt_moe_gate_logit_bwd_args, ELEM, MOE)                \
    X(adamw, mt_adamw_args, OPT, ALL)                                           \
    X(cast_f32_to_act, mt_cast_args, OPT, OPTIONAL)                             \
    X(copy_rows, mt_copy_rows_args, MEM, ROWS)                                  \
    X(init_normal, mt_init_normal_args, MEM, OPTIONAL)                          \
    X(sum, mt_sum_args, ELEM, ALL)

/* The use column of MT_BACKEND_OPS as values (MT_OP_USE_##use). */
typedef enum {
    MT_OP_USE_ALL,
    MT_OP_USE_LAYERNORM,
    MT_OP_USE_RMSNORM,
    MT_OP_USE_GELU,
    MT_OP_USE_SWIGLU,
    MT_OP_USE_SQUARED_RELU,
    MT_OP_USE_ROPE,
    MT_OP_USE_TP,
    MT_OP_USE_CP,
    MT_OP_USE_MOE,
    MT_OP_USE_ROWS,
    MT_OP_USE_OPTIONAL,
    MT_OP_USE_COUNT
} mt_op_use;

typedef struct mt_backend mt_backend;

struct mt_backend_i {
    const char *name;
    void (*destroy)(mt_backend *be);
    mt_status (*alloc)(mt_backend *be, size_t n_bytes, void **out); /* zeroed, >= 256-aligned */
    void (*free)(mt_backend *be, void *ptr);
    mt_status (*memset_zero)(mt_backend *be, void *ptr, size_t n_bytes);
    mt_status (*copy_h2d)(mt_backend *be, void *dst, const void *src, size_t n_bytes);
    mt_status (*copy_d2h)(mt_backend *be, void *dst, const void *src, size_t n_bytes);
    mt_status (*copy_d2d)(mt_backend *be, void *dst, const void *src, size_t n_bytes);
    mt_status (*sync)(mt_backend *be);

    /* the ops of MT_BACKEND_OPS: mt_status (*op)(mt_backend *be, const argument type *a) */
#define MT_BACKEND_OP_FIELD_(op, argt, cls, use) mt_status (*op)(mt_backend *be, const argt *a);
    MT_BACKEND_OPS(MT_BACKEND_OP_FIELD_)
#undef MT_BACKEND_OP_FIELD_
};

/* One created backend. host_memory says where the pointers alloc returns live: 1 = ordinary
 * host memory the CPU may read and write directly (CPU backend), 0 = device memory reachable
 * only through copy_h2d / copy_d2h (CUDA backend). A communicator that touches buffers with
 * the CPU (the shared-memory one, parallel/comm_shm) must refuse a backend with
 * host_memory == 0 and say which communicator the device needs instead (NCCL). */
struct mt_backend {
    const struct mt_backend_i *i;
    void *ctx;
    mt_dtype act;           /* compute dtype of activations and weights */
    const char *device_name; /* for logs: "cpu (8 threads)", "NVIDIA H100 80GB HBM3 (cuda:1)" */
    double peak_tflops;     /* dense peak of the device in its compute dtype (0 = unknown) */
    int host_memory;        /* 1: alloc'd buffers are host memory (CPU); 0: device memory (CUDA) */
    int device;             /* CUDA device index (as CUDA_VISIBLE_DEVICES numbers them); -1 on CPU */
    struct mt_op_timers *op_timers; /* non-NULL while i is the timed table (core/backend_timed.h) */
};

/* CPU backend: fp32, OpenBLAS GEMMs, OpenMP loops with n_threads threads (0 = all cores). */
mt_status mt_backend_cpu_create(mt_backend *be, int n_threads);
/* An OPENBLAS_CORETYPE worth setting before OpenBLAS loads (e.g. "SKYLAKEX" on AVX-512 CPUs
 * that OpenBLAS runs with AVX2 kernels), or NULL. cmd/ sets it and re-executes itself. */
const char *mt_cpu_blas_better_coretype(void);
/* CUDA backend (cuda/): bf16 activations, on CUDA device `device` (0-based among the devices
 * CUDA_VISIBLE_DEVICES leaves visible; the create calls cudaSetDevice(device) on the calling
 * thread, and device_name ends with "(cuda:<device>)"). One process per GPU: the trainer passes
 * the rank's local rank (train/backend_select.c). Fails with MT_ERR_CUDA and a clear message
 * when there is no GPU or `device` is not below the visible device count, and
 * MT_ERR_UNSUPPORTED when this build has no CUDA. */
mt_status mt_backend_cuda_create(mt_backend *be, int device);
/* Number of visible CUDA devices (0 without a GPU or without CUDA in this build). */
int mt_cuda_device_count(void);
/* 1 if this build contains the CUDA backend and a GPU is present (no crash without one). */
int mt_cuda_available(char *why, size_t why_bytes);
void mt_backend_destroy(mt_backend *be);

/* Returns MT_ERR_UNSUPPORTED naming the op when a backend leaves it NULL. */
#define MT_BE_CALL(be, op, args)                                                           \
    ((be)->i->op ? (be)->i->op((be), (args))                                               \
                 : mt_errorf(MT_ERR_UNSUPPORTED, "backend '%s' has no op '%s' yet", (be)->i->name, #op))

#endif
