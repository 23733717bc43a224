/* layer_spec.c — the layer spec of a recipe (layer_spec.h). */
#include "core/model/layer_spec.h"

#include <string.h>

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
    /* Megatron's layer specs (gpt_layer_specs.py): L2Norm if qk_l2_norm, else the qk layernorm */
    s.qk_norm = m->qk_l2_norm ? MT_QK_NORM_L2 : m->qk_layernorm ? MT_QK_NORM_LEARNED : MT_QK_NORM_NONE;
    s.mlp = m->activation == MT_ACT_SWIGLU         ? MT_MLP_SWIGLU
            : m->activation == MT_ACT_SQUARED_RELU ? MT_MLP_SQUARED_RELU
                                                   : MT_MLP_GELU;
    s.moe = m->moe.experts > 0;
    s.bias = m->bias;
    return s;
}
