/* layer_spec.c — the layer spec of a recipe (layer_spec.h). */
#include "core/model/layer_spec.h"

#include <math.h>
#include <string.h>

/* Megatron's _yarn_get_mscale (yarn_rotary_pos_embedding.py) */
static float yarn_get_mscale(float scale, float mscale) {
    return scale <= 1.0f ? 1.0f : (float)(0.1 * mscale * log((double)scale) + 1.0);
}

mt_layer_spec mt_layer_spec_of(const mt_recipe *r) {
    const mt_model_cfg *m = &r->model;
    mt_layer_spec s;
    memset(&s, 0, sizeof s);
    s.norm.kind = m->norm;
    s.norm.bias = m->norm == MT_NORM_LAYERNORM;
    s.norm.eps = m->norm_eps;
    s.norm.one_plus = m->norm_1p;
    s.rope = m->position == MT_POS_ROPE;
    s.rope_theta = m->rope_theta;
    if (s.rope && m->rotary_percent < 1.0f) s.rope_dim = (int)(mt_recipe_head_dim(r) * (double)m->rotary_percent);
    s.rope_interleaved = s.rope && m->rope_interleaved;
    if (s.rope && m->rope_scaling) {
        s.llama3_factor = m->rope_scaling_factor;
        s.llama3_low = m->rope_low_freq_factor;
        s.llama3_high = m->rope_high_freq_factor;
        s.llama3_orig_max = m->rope_original_max_position;
    }
    s.rope_interp = m->rotary_interpolation;
    /* Megatron's layer specs (gpt_layer_specs.py): L2Norm if qk_l2_norm, else the qk layernorm */
    s.qk_norm = m->qk_l2_norm ? MT_QK_NORM_L2 : m->qk_layernorm ? MT_QK_NORM_LEARNED : MT_QK_NORM_NONE;
    if (m->mla.enabled) {
        const float f = m->mla.rotary_scaling_factor;
        s.mla = 1;
        s.mla_norm = m->qk_layernorm;
        s.qk_norm = MT_QK_NORM_NONE; /* --qk-layernorm means the latents' norms here */
        s.q_lora = m->mla.q_lora_rank;
        s.kv_lora = m->mla.kv_lora_rank;
        s.qk_dim = m->mla.qk_head_dim;
        s.pos_dim = m->mla.qk_pos_head_dim;
        s.v_dim = m->mla.v_head_dim;
        /* YaRN with a factor <= 1 is RoPE: its interpolated frequencies equal the extrapolated ones and
           every mscale is 1 (Megatron's YarnRotaryEmbedding / _yarn_get_concentration_factor) */
        s.yarn_factor = m->mla.rope_yarn && f > 1.0f ? f : 1.0f;
        s.yarn_mscale = m->mla.rope_yarn ? yarn_get_mscale(f, m->mla.mscale) / yarn_get_mscale(f, m->mla.mscale_all_dim)
                                         : 1.0f;
        s.yarn_beta_fast = m->mla.yarn_beta_fast;
        s.yarn_beta_slow = m->mla.yarn_beta_slow;
        s.yarn_orig_max = m->mla.yarn_original_max_position;
        /* Megatron's MLASelfAttention takes the softmax mscale from YaRN's arguments whatever the rope type */
        const float ms = yarn_get_mscale(f, m->mla.mscale_all_dim);
        s.softmax_mscale = ms * ms;
    }
    s.mlp = m->activation == MT_ACT_SWIGLU         ? MT_MLP_SWIGLU
            : m->activation == MT_ACT_SQUARED_RELU ? MT_MLP_SQUARED_RELU
                                                   : MT_MLP_GELU;
    s.moe = m->moe.experts > 0;
    s.moe_shared = s.moe && m->moe.shared_ffn > 0;
    s.moe_shared_gate = s.moe_shared && m->moe.shared_gate;
    s.bias = m->bias;
    s.qkv_bias = m->bias || m->qkv_bias;
    return s;
}
