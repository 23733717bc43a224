/* hf_export.c — the pure part of hf_export.h: which recipes transformers can express, the
 * tensor mapping (names, shapes, blocks, transposes), value extraction and conversion, sharding
 * and size parsing. No I/O. */
#include "core/ckpt/hf_export.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/mup.h"

static mt_status unsupported(const mt_recipe *r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mt_status unsupported(const mt_recipe *r, const char *key, const char *fmt, ...) {
    char why[400], where[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const char *tail =
        r->model.moe.experts > 0 && r->model.moe.shared_ffn > 0
            ? "Hugging Face's Qwen2MoeForCausalLM cannot express this model; export supports mixture-of-experts models "
              "with shared experts with model.arch: llama, model.position: rope, model.norm: rmsnorm, model.activation: "
              "swiglu, model.bias: false, model.moe.shared_gate: true, model.moe.layer_freq: 1"
        : r->model.moe.experts > 0
            ? "Hugging Face's MixtralForCausalLM cannot express this model; export supports mixture-of-experts models "
              "with model.arch: llama, model.position: rope, model.norm: rmsnorm, model.activation: swiglu, "
              "model.bias: false, model.moe.pre_softmax: false, every layer a MoE layer (model.moe.layer_freq: 1), the "
              "softmax router without groups, scaling or expert bias"
        : r->model.arch == MT_ARCH_LLAMA
            ? "Hugging Face's LlamaForCausalLM cannot express this model; export supports llama with "
              "model.position: rope, model.norm: rmsnorm, model.activation: swiglu"
            : "Hugging Face's GPT2LMHeadModel cannot express this model; export supports gpt with "
              "model.position: learned, model.norm: layernorm, model.activation: gelu or squared_relu, "
              "model.tie_embeddings: true, model.bias: true, model.kv_heads = model.heads";
    return mt_errorf(MT_ERR_UNSUPPORTED, "%s: %s (%s): %s", key, why, mt_recipe_where(r, key, where, sizeof where),
                     tail);
}

/* what Mixtral's sparse block cannot express: its router is softmax over every expert, the top k,
 * the k probabilities renormalised (== softmax over the k selected logits, mtrain's default), each
 * expert a bias-free SwiGLU, every layer sparse, no shared expert */
static mt_status check_moe(const mt_recipe *r) {
    const mt_model_cfg *c = &r->model;
    if (c->arch != MT_ARCH_LLAMA)
        return unsupported(r, "model.arch", "gpt with %d experts: transformers has no GPT-2 mixture of experts",
                           c->moe.experts);
    if (c->moe.shared_ffn > 0 && !c->moe.shared_gate)
        return unsupported(r, "model.moe.shared_gate", "false: shared experts without a gate; Qwen2-MoE's shared "
                           "expert always has one (mlp.shared_expert_gate), and Mixtral has no shared experts");
    if (c->moe.pre_softmax && c->moe.shared_ffn <= 0)
        return unsupported(r, "model.moe.pre_softmax", "true: the top-k probabilities weigh the experts as they are; "
                           "Mixtral renormalises them to sum to 1 (transformers' Qwen3MoeForCausalLM has this router, "
                           "norm_topk_prob: false, but also per-head query / key norms; exporting to it is not "
                           "implemented)");
    if (c->moe.score_function != 0)
        return unsupported(r, "model.moe.score_function", "sigmoid: Mixtral's router takes the softmax (DeepSeek-V3's "
                           "sigmoid router is not exported)");
    if (c->moe.topk_scaling_factor != 1.0f)
        return unsupported(r, "model.moe.topk_scaling_factor", "%g: Mixtral's routing weights are not scaled",
                           (double)c->moe.topk_scaling_factor);
    if (c->moe.num_groups > 1 && c->moe.group_topk > 0)
        return unsupported(r, "model.moe.num_groups", "%d groups: Mixtral routes among all experts (no group-limited "
                           "routing)", c->moe.num_groups);
    if (c->moe.expert_bias)
        return unsupported(r, "model.moe.expert_bias", "true: Mixtral's router has no expert bias");
    if (c->moe.apply_probs_on_input)
        return unsupported(r, "model.moe.apply_probs_on_input", "true: Mixtral weighs the experts' outputs "
                           "(transformers' Llama 4 weighs the input; exporting to it is not implemented)");
    const int n_moe = mt_recipe_moe_layers(r, 0, c->layers);
    if (n_moe != c->layers)
        return unsupported(r, c->moe.layer_pattern[0] ? "model.moe.layer_pattern" : "model.moe.layer_freq",
                           "%d dense MLP layers among the %d: mixed dense and MoE layers; every Mixtral layer is "
                           "sparse (exporting a mixed model to a DeepSeek / Llama 4 layout is not implemented)",
                           c->layers - n_moe, c->layers);
    if (mt_recipe_moe_ffn_hidden(r) != c->ffn_hidden)
        return unsupported(r, "model.moe.ffn_hidden", "%d, model.ffn_hidden %d: Mixtral's experts have the width "
                           "intermediate_size; set model.moe.ffn_hidden: 0 (or equal to model.ffn_hidden)",
                           c->moe.ffn_hidden, c->ffn_hidden);
    if (c->bias)
        return unsupported(r, "model.bias", "true: the attention and expert biases (expert_fc_b, expert_fcproj_b) "
                           "have no place in Mixtral, whose layers have none");
    return MT_OK;
}

mt_status mt_hf_model_from_recipe(const mt_recipe *r, mt_hf_model *m) {
    const mt_model_cfg *c = &r->model;
    memset(m, 0, sizeof *m);
    if (c->moe.experts > 0) {
        const mt_status st = check_moe(r);
        if (st != MT_OK) return st;
    }
    if (c->mup.enabled) { /* muP's forward: transformers' GPT-2 / Llama have none of its multipliers */
        const int D = c->head_dim > 0 ? c->head_dim : c->hidden / c->heads;
        const double attn = mt_mup_softmax_scale(c, D) * sqrt((double)D);
        if (mt_mup_output_mult(c) != 1.0 || mt_mup_embedding_mult(c) != 1.0 || fabs(attn - 1.0) > 1e-9)
            return unsupported(r, "model.mup.enabled", "true: muP's softmax scale %g (GPT-2 and Llama: 1/sqrt(%d)), "
                               "logit multiplier %g and embedding multiplier %g (GPT-2 and Llama: 1) have no field in "
                               "GPT-2 or Llama", mt_mup_softmax_scale(c, D), D, mt_mup_output_mult(c),
                               mt_mup_embedding_mult(c));
    }
    if (c->mla.enabled)
        return unsupported(r, "model.mla.enabled", "true: multi-latent attention's low-rank query / key / value "
                           "projections have no field in GPT-2 or Llama (transformers' DeepseekV3ForCausalLM has "
                           "them; exporting to it is not implemented)");
    if (c->no_rope_layers[0])
        return unsupported(r, "model.no_rope_layers", "'%.60s': layers without RoPE have no field in GPT-2 or Llama "
                           "(transformers' Llama 4 has no_rope_layers; exporting to it is not implemented)",
                           c->no_rope_layers);
    if (c->qk_l2_norm)
        return unsupported(r, "model.qk_l2_norm", "true: the per-head L2 norm of queries and keys (--qk-l2-norm) "
                           "has no field in GPT-2 or Llama (transformers' Llama 4 has one; exporting to it is not "
                           "implemented)");
    if (c->qk_layernorm)
        return unsupported(r, "model.qk_layernorm", "true: the per-head query / key norm (--qk-layernorm) has no "
                           "field in GPT-2 or Llama (transformers' Qwen3 and OLMo-2 have one; exporting to them is "
                           "not implemented)");
    if (c->arch == MT_ARCH_GPT) {
        if (c->position != MT_POS_LEARNED) return unsupported(r, "model.position", "rope");
        if (c->norm != MT_NORM_LAYERNORM) return unsupported(r, "model.norm", "rmsnorm");
        if (c->activation == MT_ACT_SWIGLU) return unsupported(r, "model.activation", "swiglu");
        if (!c->tie_embeddings)
            return unsupported(r, "model.tie_embeddings", "false: GPT-2's output layer is the word embedding");
        if (!c->bias) return unsupported(r, "model.bias", "false: GPT-2's layers all have biases");
        if (c->kv_heads > 0 && c->kv_heads != c->heads)
            return unsupported(r, "model.kv_heads", "%d of %d heads: GPT-2 has no grouped-query attention",
                               c->kv_heads, c->heads);
    } else {
        if (c->position != MT_POS_ROPE) return unsupported(r, "model.position", "learned");
        if (c->norm != MT_NORM_RMSNORM) return unsupported(r, "model.norm", "layernorm");
        if (c->activation != MT_ACT_SWIGLU)
            return unsupported(r, "model.activation", "%s: Llama's MLP is the gated down(silu(gate) * up) (a "
                               "squared-ReLU model exports with model.arch gpt, as GPT-2 with activation_function "
                               "relu2)", c->activation == MT_ACT_GELU ? "gelu" : "squared_relu");
    }
    if (c->head_dim > 0 && c->head_dim * c->heads != c->hidden)
        return unsupported(r, "model.head_dim", "%d: a head size other than hidden / heads is not exported yet",
                           c->head_dim);
    if (c->position == MT_POS_ROPE && (c->rotary_percent < 1.0f || c->rope_interleaved))
        return unsupported(r, c->rope_interleaved ? "model.rope_interleaved" : "model.rotary_percent",
                           "partial or interleaved RoPE: Hugging Face's Llama rotates the two halves of the whole head");
    if (c->position == MT_POS_ROPE && c->rope_scaling && c->rotary_interpolation != 1.0f)
        return unsupported(r, "model.rotary_interpolation", "%g with model.rope_scaling: config.json's rope_scaling "
                           "holds one kind, Llama 3.x's or linear interpolation, not both",
                           (double)c->rotary_interpolation);
    if (c->qkv_bias && !c->bias && (c->arch == MT_ARCH_GPT || (c->moe.experts > 0 && c->moe.shared_ffn <= 0)))
        return unsupported(r, "model.qkv_bias", "true %s: biases on q / k / v alone export as Qwen2ForCausalLM, a "
                           "dense Llama-like model", c->arch == MT_ARCH_GPT ? "with model.arch gpt" : "with experts");
    if (c->moe.experts > 0 && (c->rope_scaling || c->rotary_interpolation != 1.0f))
        return unsupported(r, c->rope_scaling ? "model.rope_scaling" : "model.rotary_interpolation",
                           "RoPE frequency scaling with experts: not exported (only Llama's config.json is written "
                           "with rope_scaling)");
    m->arch = c->arch;
    m->L = c->layers;
    m->C = c->hidden;
    m->H = c->heads;
    m->KV = c->kv_heads > 0 ? c->kv_heads : c->heads;
    m->D = c->heads > 0 ? c->hidden / c->heads : 0;
    m->F = c->ffn_hidden > 0 ? c->ffn_hidden : 4 * c->hidden;
    m->V = c->vocab;
    m->max_pos = c->max_position > 0 ? c->max_position : c->seq_length;
    m->tied = c->tie_embeddings;
    m->bias = c->bias;
    m->qkv_bias = !c->bias && c->qkv_bias;
    m->norm_1p = c->norm_1p;
    m->squared_relu = c->activation == MT_ACT_SQUARED_RELU;
    m->norm_eps = c->norm_eps;
    m->rope_theta = c->rope_theta;
    m->rope_llama3 = c->position == MT_POS_ROPE && c->rope_scaling;
    m->rope_factor = c->rope_scaling_factor;
    m->rope_low = c->rope_low_freq_factor;
    m->rope_high = c->rope_high_freq_factor;
    m->rope_orig_max = c->rope_original_max_position;
    m->rope_linear = c->position == MT_POS_ROPE ? c->rotary_interpolation : 1.0f;
    m->init_std = c->init_std;
    m->E = c->moe.experts;
    m->top_k = m->E > 0 ? c->moe.top_k : 0;
    m->aux_coeff = c->moe.aux_loss_coeff;
    m->Fs = m->E > 0 ? c->moe.shared_ffn : 0;
    m->norm_topk = !c->moe.pre_softmax;
    m->bos = m->eos = -1;
    if (m->E > 0 && (m->top_k < 1 || m->top_k > m->E))
        return mt_errorf(MT_ERR_CONFIG, "hf export: model.moe.top_k %d of %d experts", m->top_k, m->E);
    if (m->L <= 0 || m->C <= 0 || m->H <= 0 || m->D * m->H != m->C || m->V <= 0 || m->max_pos <= 0 ||
        m->KV <= 0 || m->H % m->KV)
        return mt_errorf(MT_ERR_CONFIG, "hf export: invalid model dimensions in the recipe (layers %d, hidden %d, "
                         "heads %d, kv_heads %d, vocab %d)", m->L, m->C, m->H, m->KV, m->V);
    return MT_OK;
}

typedef struct {
    mt_hf_tensor *out;
    int max, n;
} plan_ctx;

static void add(plan_ctx *p, const char *src, int layer, int r0, int nr, int c0, int nc, int transpose, int n_dims,
                const char *fmt, ...) __attribute__((format(printf, 10, 11)));
static void add(plan_ctx *p, const char *src, int layer, int r0, int nr, int c0, int nc, int transpose, int n_dims,
                const char *fmt, ...) {
    if (p->out && p->n < p->max) {
        mt_hf_tensor *t = &p->out[p->n];
        memset(t, 0, sizeof *t);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->name, sizeof t->name, fmt, ap);
        va_end(ap);
        t->src = src;
        t->layer = layer;
        t->r0 = r0, t->nr = nr, t->c0 = c0, t->nc = nc;
        t->transpose = transpose;
        t->n_dims = n_dims;
        if (n_dims == 1) {
            t->shape[0] = (int64_t)nr * nc;
        } else {
            t->shape[0] = transpose ? nc : nr;
            t->shape[1] = transpose ? nr : nc;
        }
    }
    p->n++;
}

/* a whole (1, n) vector of each layer */
#define VEC_LAYERS(src, n, ...)                                                  \
    for (int l = 0; l < m->L; l++) add(&p, src, l, 0, 1, 0, n, 0, 1, __VA_ARGS__)

static void plan_gpt(const mt_hf_model *m, plan_ctx *pp) {
    plan_ctx p = *pp;
    const int C = m->C, F = m->F, Q = m->H * m->D;
    add(&p, "wte", 0, 0, m->V, 0, C, 0, 2, "transformer.wte.weight");
    add(&p, "wpe", 0, 0, m->max_pos, 0, C, 0, 2, "transformer.wpe.weight");
    VEC_LAYERS("ln1_w", C, "transformer.h.%d.ln_1.weight", l);
    VEC_LAYERS("ln1_b", C, "transformer.h.%d.ln_1.bias", l);
    for (int l = 0; l < m->L; l++) add(&p, "qkv_w", l, 0, 3 * Q, 0, C, 1, 2, "transformer.h.%d.attn.c_attn.weight", l);
    VEC_LAYERS("qkv_b", 3 * Q, "transformer.h.%d.attn.c_attn.bias", l);
    for (int l = 0; l < m->L; l++) add(&p, "proj_w", l, 0, C, 0, Q, 1, 2, "transformer.h.%d.attn.c_proj.weight", l);
    VEC_LAYERS("proj_b", C, "transformer.h.%d.attn.c_proj.bias", l);
    VEC_LAYERS("ln2_w", C, "transformer.h.%d.ln_2.weight", l);
    VEC_LAYERS("ln2_b", C, "transformer.h.%d.ln_2.bias", l);
    for (int l = 0; l < m->L; l++) add(&p, "fc_w", l, 0, F, 0, C, 1, 2, "transformer.h.%d.mlp.c_fc.weight", l);
    VEC_LAYERS("fc_b", F, "transformer.h.%d.mlp.c_fc.bias", l);
    for (int l = 0; l < m->L; l++) add(&p, "fcproj_w", l, 0, C, 0, F, 1, 2, "transformer.h.%d.mlp.c_proj.weight", l);
    VEC_LAYERS("fcproj_b", C, "transformer.h.%d.mlp.c_proj.bias", l);
    add(&p, "lnf_w", 0, 0, 1, 0, C, 0, 1, "transformer.ln_f.weight");
    add(&p, "lnf_b", 0, 0, 1, 0, C, 0, 1, "transformer.ln_f.bias");
    *pp = p;
}

static void plan_llama_tail(const mt_hf_model *m, plan_ctx *p) {
    add(p, "lnf_w", 0, 0, 1, 0, m->C, 0, 1, "model.norm.weight");
    if (!m->tied) add(p, "lm_head", 0, 0, m->V, 0, m->C, 0, 2, "lm_head.weight");
}

static void plan_llama(const mt_hf_model *m, plan_ctx *pp) {
    plan_ctx p = *pp;
    const int C = m->C, F = m->F, Q = m->H * m->D, K = m->KV * m->D;
    const char *const pre = "model.layers";
    add(&p, "wte", 0, 0, m->V, 0, C, 0, 2, "model.embed_tokens.weight");
    VEC_LAYERS("ln1_w", C, "%s.%d.input_layernorm.weight", pre, l);
    for (int l = 0; l < m->L; l++) {
        add(&p, "qkv_w", l, 0, Q, 0, C, 0, 2, "%s.%d.self_attn.q_proj.weight", pre, l);
        add(&p, "qkv_w", l, Q, K, 0, C, 0, 2, "%s.%d.self_attn.k_proj.weight", pre, l);
        add(&p, "qkv_w", l, Q + K, K, 0, C, 0, 2, "%s.%d.self_attn.v_proj.weight", pre, l);
    }
    if (m->bias || m->qkv_bias)
        for (int l = 0; l < m->L; l++) {
            add(&p, "qkv_b", l, 0, 1, 0, Q, 0, 1, "%s.%d.self_attn.q_proj.bias", pre, l);
            add(&p, "qkv_b", l, 0, 1, Q, K, 0, 1, "%s.%d.self_attn.k_proj.bias", pre, l);
            add(&p, "qkv_b", l, 0, 1, Q + K, K, 0, 1, "%s.%d.self_attn.v_proj.bias", pre, l);
        }
    for (int l = 0; l < m->L; l++) add(&p, "proj_w", l, 0, C, 0, Q, 0, 2, "%s.%d.self_attn.o_proj.weight", pre, l);
    if (m->bias) VEC_LAYERS("proj_b", C, "%s.%d.self_attn.o_proj.bias", pre, l);
    VEC_LAYERS("ln2_w", C, "%s.%d.post_attention_layernorm.weight", pre, l);
    if (m->E > 0 && m->Fs > 0) { /* Qwen2-MoE's sparse block: the router, the experts, the gated shared expert */
        for (int l = 0; l < m->L; l++) add(&p, "router_w", l, 0, m->E, 0, C, 0, 2, "%s.%d.mlp.gate.weight", pre, l);
        for (int l = 0; l < m->L; l++)
            for (int e = 0; e < m->E; e++) {
                add(&p, "expert_fc_w", l * m->E + e, 0, F, 0, C, 0, 2, "%s.%d.mlp.experts.%d.gate_proj.weight", pre, l, e);
                add(&p, "expert_fc_w", l * m->E + e, F, F, 0, C, 0, 2, "%s.%d.mlp.experts.%d.up_proj.weight", pre, l, e);
            }
        for (int l = 0; l < m->L; l++)
            for (int e = 0; e < m->E; e++)
                add(&p, "expert_fcproj_w", l * m->E + e, 0, C, 0, F, 0, 2, "%s.%d.mlp.experts.%d.down_proj.weight", pre,
                    l, e);
        const int Fs = m->Fs;
        for (int l = 0; l < m->L; l++) {
            add(&p, "shared_fc_w", l, 0, Fs, 0, C, 0, 2, "%s.%d.mlp.shared_expert.gate_proj.weight", pre, l);
            add(&p, "shared_fc_w", l, Fs, Fs, 0, C, 0, 2, "%s.%d.mlp.shared_expert.up_proj.weight", pre, l);
        }
        for (int l = 0; l < m->L; l++)
            add(&p, "shared_fcproj_w", l, 0, C, 0, Fs, 0, 2, "%s.%d.mlp.shared_expert.down_proj.weight", pre, l);
        for (int l = 0; l < m->L; l++)
            add(&p, "shared_gate_w", l, 0, 1, 0, C, 0, 2, "%s.%d.mlp.shared_expert_gate.weight", pre, l);
        plan_llama_tail(m, &p);
        *pp = p;
        return;
    }
    if (m->E > 0) { /* Mixtral's sparse block: gate = the router, w1 / w3 / w2 = gate / up / down */
        const char *const moe = "block_sparse_moe";
        for (int l = 0; l < m->L; l++) add(&p, "router_w", l, 0, m->E, 0, C, 0, 2, "%s.%d.%s.gate.weight", pre, l, moe);
        for (int l = 0; l < m->L; l++)
            for (int e = 0; e < m->E; e++) {
                add(&p, "expert_fc_w", l * m->E + e, 0, F, 0, C, 0, 2, "%s.%d.%s.experts.%d.w1.weight", pre, l, moe, e);
                add(&p, "expert_fc_w", l * m->E + e, F, F, 0, C, 0, 2, "%s.%d.%s.experts.%d.w3.weight", pre, l, moe, e);
            }
        for (int l = 0; l < m->L; l++)
            for (int e = 0; e < m->E; e++)
                add(&p, "expert_fcproj_w", l * m->E + e, 0, C, 0, F, 0, 2, "%s.%d.%s.experts.%d.w2.weight", pre, l,
                    moe, e);
        plan_llama_tail(m, &p);
        *pp = p;
        return;
    }
    for (int l = 0; l < m->L; l++) {
        add(&p, "fc_w", l, 0, F, 0, C, 0, 2, "%s.%d.mlp.gate_proj.weight", pre, l);
        add(&p, "fc_w", l, F, F, 0, C, 0, 2, "%s.%d.mlp.up_proj.weight", pre, l);
    }
    if (m->bias)
        for (int l = 0; l < m->L; l++) {
            add(&p, "fc_b", l, 0, 1, 0, F, 0, 1, "%s.%d.mlp.gate_proj.bias", pre, l);
            add(&p, "fc_b", l, 0, 1, F, F, 0, 1, "%s.%d.mlp.up_proj.bias", pre, l);
        }
    for (int l = 0; l < m->L; l++) add(&p, "fcproj_w", l, 0, C, 0, F, 0, 2, "%s.%d.mlp.down_proj.weight", pre, l);
    if (m->bias) VEC_LAYERS("fcproj_b", C, "%s.%d.mlp.down_proj.bias", pre, l);
    plan_llama_tail(m, &p);
    *pp = p;
}

int mt_hf_plan(const mt_hf_model *m, mt_hf_tensor *out, int max) {
    plan_ctx p = {.out = out, .max = out ? max : 0, .n = 0};
    if (m->arch == MT_ARCH_GPT)
        plan_gpt(m, &p);
    else
        plan_llama(m, &p);
    static const char *const norm_w[] = {"ln1_w", "ln2_w", "lnf_w"};
    for (int i = 0; m->norm_1p && i < p.n && i < p.max; i++) /* zero-centred gamma: exported as 1 + w */
        for (size_t k = 0; k < sizeof norm_w / sizeof norm_w[0]; k++)
            if (!strcmp(out[i].src, norm_w[k])) out[i].offset = 1.0f;
    return p.n;
}

int mt_hf_source_shape(const mt_hf_model *m, const char *src, int64_t *layers, int64_t *rows, int64_t *cols) {
    const int64_t C = m->C, F = m->F, Q = (int64_t)m->H * m->D, K = (int64_t)m->KV * m->D, L = m->L;
    const int gpt = m->arch == MT_ARCH_GPT, b = m->bias, fcr = gpt ? F : 2 * F, moe = m->E > 0, mlp = !moe;
    const struct {
        const char *name;
        int present;
        int64_t layers, rows, cols;
    } tab[] = {
        {"wte", 1, 1, m->V, C},           {"wpe", gpt, 1, m->max_pos, C},  {"ln1_w", 1, L, 1, C},
        {"ln1_b", gpt, L, 1, C},          {"qkv_w", 1, L, Q + 2 * K, C},   {"qkv_b", b || m->qkv_bias, L, 1, Q + 2 * K},
        {"proj_w", 1, L, C, Q},           {"proj_b", b, L, 1, C},          {"ln2_w", 1, L, 1, C},
        {"ln2_b", gpt, L, 1, C},          {"fc_w", mlp, L, fcr, C},        {"fc_b", mlp && b, L, 1, fcr},
        {"fcproj_w", mlp, L, C, F},       {"fcproj_b", mlp && b, L, 1, C}, {"lnf_w", 1, 1, 1, C},
        {"lnf_b", gpt, 1, 1, C},          {"lm_head", !m->tied, 1, m->V, C},
        {"router_w", moe, L, m->E, C},    {"expert_fc_w", moe, L * m->E, fcr, C},
        {"expert_fcproj_w", moe, L * m->E, C, F},
        {"shared_fc_w", m->Fs > 0, L, 2 * (int64_t)m->Fs, C}, {"shared_fcproj_w", m->Fs > 0, L, C, m->Fs},
        {"shared_gate_w", m->Fs > 0, L, 1, C},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(tab[i].name, src)) {
            if (!tab[i].present) return 0;
            *layers = tab[i].layers;
            *rows = tab[i].rows;
            *cols = tab[i].cols;
            return 1;
        }
    return 0;
}

void mt_hf_extract(const mt_hf_tensor *t, const float *layer_data, int64_t cols, float *out) {
    const int64_t nr = t->nr, nc = t->nc, B = 32;
    const float *src = layer_data + (size_t)t->r0 * (size_t)cols + t->c0;
    if (!t->transpose) {
        for (int64_t i = 0; i < nr; i++) memcpy(out + (size_t)i * nc, src + (size_t)i * cols, (size_t)nc * sizeof *out);
        for (int64_t i = 0; t->offset != 0.0f && i < nr * nc; i++) out[i] += t->offset;
        return;
    }
    for (int64_t i0 = 0; i0 < nr; i0 += B) /* in 32 x 32 tiles: both sides stay in cache */
        for (int64_t j0 = 0; j0 < nc; j0 += B) {
            const int64_t i1 = i0 + B < nr ? i0 + B : nr, j1 = j0 + B < nc ? j0 + B : nc;
            for (int64_t j = j0; j < j1; j++)
                for (int64_t i = i0; i < i1; i++) out[(size_t)j * nr + i] = src[(size_t)i * cols + j];
        }
}

void mt_hf_insert(const mt_hf_tensor *t, const float *in, int64_t cols, float *layer_data, uint8_t *seen,
                  uint64_t *twice) {
    for (int i = 0; i < t->nr; i++)
        for (int j = 0; j < t->nc; j++) {
            const size_t d = (size_t)(t->r0 + i) * (size_t)cols + (size_t)(t->c0 + j);
            const float v = t->transpose ? in[(size_t)j * t->nr + i] : in[(size_t)i * t->nc + j];
            *twice += seen[d];
            seen[d] = 1;
            layer_data[d] = v - t->offset;
        }
}

void mt_hf_convert(const float *in, size_t n, mt_dtype dt, void *out) {
    if (dt == MT_F32) {
        memcpy(out, in, n * 4);
        return;
    }
    uint16_t *o = out;
    for (size_t i = 0; i < n; i++) o[i] = mt_f32_to_bf16(in[i]);
}

int mt_hf_shard_plan(const uint64_t *bytes, int n, uint64_t max_bytes, int *shard_of) {
    int shard = -1;
    uint64_t cur = 0;
    for (int i = 0; i < n; i++) {
        if (shard < 0 || bytes[i] > max_bytes || cur + bytes[i] > max_bytes || cur > max_bytes) {
            shard++;
            cur = 0;
        }
        shard_of[i] = shard;
        cur += bytes[i];
    }
    return shard + 1;
}

mt_status mt_hf_parse_size(const char *text, uint64_t *bytes) {
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1},           {"B", 1},          {"KB", 1000ull},      {"MB", 1000000ull},
                 {"GB", 1000000000ull}, {"TB", 1000000000000ull}, {"KIB", 1ull << 10}, {"MIB", 1ull << 20},
                 {"GIB", 1ull << 30}, {"TIB", 1ull << 40}};
    char *end = NULL;
    errno = 0;
    const double v = strtod(text, &end);
    if (end == text || errno || !(v > 0)) goto bad;
    while (*end == ' ') end++;
    char unit[8] = "";
    size_t k = 0;
    for (; end[k] && k < sizeof unit - 1; k++) unit[k] = (char)toupper((unsigned char)end[k]);
    unit[k] = 0;
    if (end[k]) goto bad;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(unit, units[i].unit)) {
            const double b = v * (double)units[i].mult;
            if (b < 1 || b > 1.8e19) goto bad;
            *bytes = (uint64_t)b;
            return MT_OK;
        }
bad:
    return mt_errorf(MT_ERR_CONFIG, "--max-shard-size %s: expected a positive size in bytes, optionally with a unit "
                     "(KB, MB, GB = 10^3, 10^6, 10^9 as Hugging Face's; KiB, MiB, GiB = 2^10, 2^20, 2^30), e.g. 5GB",
                     text);
}
