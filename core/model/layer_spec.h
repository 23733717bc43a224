/* layer_spec.h — the transformer layer described once: which norm (LayerNorm / RMSNorm, its bias,
 * Megatron's zero-centred gamma), which attention (rotary or learned positions, a norm on each
 * query and key head, or multi-latent attention), which MLP (GeLU, SwiGLU, squared ReLU, mixture of experts) and whether the linear layers
 * carry biases. Built from the recipe (mt_layer_spec_of) into the parameter layout (pl.spec), and
 * read from there by everything that runs or counts a layer: the parameter table
 * (model_layout.c), the training forward and backward (train/model_fwd.c, model_bwd.c), the
 * KV-cache decoder (train/generate_kv.c), checkpoints and the Hugging Face export, and the planner
 * (through the layout). Dimensions (heads, widths) stay in the layout. Pure: no I/O. */
#ifndef MT_LAYER_SPEC_H
#define MT_LAYER_SPEC_H

#include "core/recipe/recipe.h"

typedef struct {
    mt_norm kind;   /* MT_NORM_LAYERNORM | MT_NORM_RMSNORM */
    int bias;       /* a learned bias beside the weight (LayerNorm only) */
    int one_plus;   /* zero-centred gamma (Megatron's --apply-layernorm-1p): the weight is stored as w,
                       initialised to 0, and applied as 1 + w */
    float eps;
} mt_norm_spec;

/* the MLP's activation: GeLU (tanh approximation; fused into the fc GEMM where the backend can),
 * SwiGLU (gated: the fc rows are [gate; up], out = silu(gate) * up), squared ReLU (relu(h)^2,
 * Megatron's squared_relu in megatron/core/activations.py, --squared-relu; not gated) */
typedef enum { MT_MLP_GELU = 0, MT_MLP_SWIGLU, MT_MLP_SQUARED_RELU } mt_mlp_kind;

/* the norm on each query and key head: none, a learned norm of the model's kind, or the
 * weightless L2 norm (RMSNorm with a weight of ones that is no parameter) */
typedef enum { MT_QK_NORM_NONE = 0, MT_QK_NORM_LEARNED, MT_QK_NORM_L2 } mt_qk_norm_kind;

typedef struct {
    mt_norm_spec norm;  /* every norm of the model: the layer's two, the final one, the qk norms */
    /* attention */
    int rope;           /* rotary embeddings of q and k (rope_theta); 0: learned positions (wpe) */
    float rope_theta;
    int rope_dim;       /* channels of each q / k head that rotate (Megatron: int(head_dim *
                           rotary_percent)); the rest pass through. 0: the whole head */
    int rope_interleaved; /* rotated pairs are adjacent channels (2i, 2i + 1) (--rotary-interleaved);
                           0: the two halves (i, i + rope_dim / 2) */
    float llama3_factor, llama3_low, llama3_high; /* Llama 3.x's frequency scaling (factor 0: off) */
    int llama3_orig_max;
    float rope_interp;  /* positions divided by this (1: none) */
    mt_qk_norm_kind qk_norm; /* a norm over head_dim on every query and key head, after the qkv
                           projection and before RoPE: LEARNED, of kind `norm` with weights (and bias)
                           of shape [head_dim] per layer (Megatron's --qk-layernorm); L2, Megatron's
                           L2Norm (megatron/core/transformer/torch_norm.py: x * rsqrt(mean(x^2) +
                           eps), eps = the model's norm eps; --qk-l2-norm), no parameters */
    /* multi-latent attention (Megatron's MLASelfAttention; 0 = standard attention). The layer's
       queries: q = x W_q, or with q_lora q = norm(x W_qd) W_qu; keys and values from one latent:
       [c | k_pe] = x W_kvd, [k_nope | v] per head = norm(c) W_kvu (norms: mla_norm); each query head [q_nope | q_pe]
       and the shared k_pe are rotated (pairs (2i, 2i + 1), Megatron's mla_rotary_interleaved, YaRN
       frequencies when yarn_factor > 1, cos / sin times yarn_mscale); key head = [k_nope | k_pe].
       The attention core runs on heads of max(qk_dim + pos_dim, v_dim) channels, the shorter parts
       zero-padded (train/model_mla.c) */
    int mla;
    int mla_norm;       /* the latents' norms q_layernorm / kv_layernorm (of the model's norm kind; without a
                           q latent, the norm Megatron fuses into linear_q_proj: q = norm(x) W_q): Megatron
                           builds them with --qk-layernorm only (gpt_layer_specs.py, mla_qk_norm_config.py),
                           else they are IdentityOp */
    int q_lora, kv_lora, qk_dim, pos_dim, v_dim;
    float yarn_factor;  /* > 1: YaRN frequencies (rope_type yarn); else plain RoPE */
    float yarn_mscale;  /* YaRN's concentration factor on cos / sin (1 without YaRN) */
    float yarn_beta_fast, yarn_beta_slow;
    int yarn_orig_max;
    float softmax_mscale; /* Megatron: softmax_scale = mscale^2 / sqrt(qk_dim + pos_dim), mscale from
                           yarn_get_mscale(factor, mscale_all_dim) */
    /* MLP */
    mt_mlp_kind mlp;    /* the expert MLP's activation too when moe */
    int moe;            /* the MLP is a mixture of experts (model.moe.experts > 0) */
    int moe_shared;     /* beside the routed experts, shared experts: one MLP of the experts' activation and no
                           biases, model.moe.shared_ffn wide, through which every token goes (Megatron's
                           SharedExpertMLP, megatron/core/transformer/moe/shared_experts.py) */
    int moe_shared_gate;/* its output times sigmoid(x . w_gate) per token (--moe-shared-expert-gate) */
    int bias;           /* biases in the linear layers (qkv, proj, fc, fcproj) */
    int qkv_bias;       /* a bias on qkv (set with bias too; alone: Qwen2's --add-qkv-bias) */
} mt_layer_spec;

mt_layer_spec mt_layer_spec_of(const mt_recipe *r);

/* the ops a norm of this spec calls: LayerNorm's keep the row mean */
static inline int mt_norm_is_layernorm(const mt_norm_spec *n) { return n->kind == MT_NORM_LAYERNORM; }

/* the model keeps a buffer of ones (max(C, head_dim) wide): zero-centred gamma adds it to every
 * norm weight, and the L2 qk norm applies it as its weight */
static inline int mt_layer_spec_norm_ones(const mt_layer_spec *s) {
    return s->norm.one_plus || s->qk_norm == MT_QK_NORM_L2;
}

#endif
