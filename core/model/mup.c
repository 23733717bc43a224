/* mup.c — muP's multipliers, learning-rate / eps factors and init stds (mup.h, Megatron-Core's
 * definitions cited there). */
#include "core/model/mup.h"

#include <math.h>
#include <string.h>

double mt_mup_width_mult(const mt_model_cfg *c) {
    if (!c->mup.enabled) return 1.0;
    const int base = c->mup.base_hidden > 0 ? c->mup.base_hidden : c->hidden;
    return (double)c->hidden / (double)base;
}

double mt_mup_softmax_scale(const mt_model_cfg *c, int head_dim) {
    if (!c->mup.enabled) return 1.0 / sqrt((double)head_dim);
    const double base = c->mup.base_head_dim > 0 ? sqrt((double)c->mup.base_head_dim) : 1.0;
    return base / pow((double)head_dim, (double)c->mup.attn_scale_power);
}

double mt_mup_output_mult(const mt_model_cfg *c) {
    if (!c->mup.enabled) return 1.0;
    const double m = mt_mup_width_mult(c);
    if (c->mup.output_mult == 1.0f && m != 1.0) return 1.0 / m; /* Megatron's auto setting */
    return (double)c->mup.output_mult;
}

double mt_mup_embedding_mult(const mt_model_cfg *c) { return c->mup.enabled ? (double)c->mup.embedding_mult : 1.0; }

int mt_mup_is_embedding_class(const mt_param_tensor *t) {
    return !strcmp(t->name, "wte") || !strcmp(t->name, "wpe") || !strcmp(t->name, "lm_head");
}

/* matrix-like: the layout's weight-decayed tensors are its matrices (biases and norm weights,
 * Megatron's one-dimensional parameters, are not decayed) */
int mt_mup_is_hidden(const mt_param_tensor *t) { return t->decay && !mt_mup_is_embedding_class(t); }

double mt_mup_adam_mult(const mt_model_cfg *c, const mt_param_tensor *t) {
    const double m = mt_mup_width_mult(c);
    return m != 1.0 && mt_mup_is_hidden(t) ? 1.0 / m : 1.0;
}

double mt_mup_init_std(const mt_model_cfg *c, const mt_param_tensor *t, int layers) {
    const double out_scale = 1.0 / sqrt(2.0 * layers);
    const double sd = t->init == MT_INIT_NORMAL_OUTPUT ? c->init_std * out_scale : c->init_std;
    if (!c->mup.enabled || mt_mup_is_embedding_class(t)) return sd;
    return sd / sqrt(mt_mup_width_mult(c));
}
