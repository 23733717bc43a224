/* test_mup.c — muP (core/model/mup.h) against Megatron-Core's definitions, written out here again:
 *   transformer_config.py, TransformerConfig.__post_init__ (use_mup):
 *     mup_width_mult m = hidden_size / mup_base_hidden_size (base = hidden_size when None);
 *     softmax_scale = (sqrt(mup_base_head_dim) if set else 1) / kv_channels ** mup_attn_scale_power;
 *     mup_output_mult = 1 / m when left at 1.0 and m != 1;
 *     init_method = normal(0, init_method_std / sqrt(m));
 *     output_layer_init_method = normal(0, init_method_std / (sqrt(2 L) sqrt(m)))
 *       (utils.py, mup_scaled_init_method_normal);
 *     embedding_init_method = normal(0, init_method_std) (word and position embeddings; the untied
 *       output layer too under muP: gpt_model.py);
 *   optimizer/__init__.py, get_mup_config_overrides (Adam): parameters with dim > 1 that are not
 *     is_embedding_parameter (the embedding's parameters and the output layer's weight,
 *     language_module.py) get max_lr, min_lr and eps times 1 / m; nothing at m = 1.
 * Then the wiring in a model on the CPU: each tensor's initial standard deviation (within 5 standard
 * errors of the sample std, sqrt(1 / 2n) relative, of its n values) and one AdamW step with every
 * gradient g = eps = 1e-8 and no weight decay: the first step moves each parameter by
 * lr' g / (g + eps') = lr' / (1 + eps' / g) with lr', eps' the tensor's (0.5 lr for the base
 * values, 0.8 lr / m for a hidden matrix), checked to 1e-3 relative (fp32 parameters of ~0.02
 * moved by ~1e-3: the rounding is ~1e-5 of the move). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/model/model_layout.h"
#include "core/model/mup.h"
#include "core/recipe/recipe.h"
#include "train/model.h"
#include "train/optim.h"
#include "test/test.h"
#include "test/unit/tiny_model.h"

#define HIDDEN 64
#define BASE 16 /* m = 4 */
#define LAYERS 2
#define STD 0.02

static int is_embedding_class(const char *name) {
    return !strcmp(name, "wte") || !strcmp(name, "wpe") || !strcmp(name, "lm_head");
}
static int is_output_projection(const char *name) {
    return !strcmp(name, "proj_w") || !strcmp(name, "fcproj_w") || !strcmp(name, "expert_fcproj_w");
}
/* Megatron's matrix-like parameter: more than one dimension (the layout's vectors have one row) */
static int is_matrix(const mt_param_tensor *t) { return t->full_rows > 1; }

static double want_std(const mt_param_tensor *t, double m) {
    if (is_embedding_class(t->name)) return STD;
    if (is_output_projection(t->name)) return STD / (sqrt(2.0 * LAYERS) * sqrt(m));
    return STD / sqrt(m);
}
static double want_adam_mult(const mt_param_tensor *t, double m) {
    return is_matrix(t) && !is_embedding_class(t->name) ? 1.0 / m : 1.0;
}

static void mup_recipe(mt_recipe *r, const char *base, int experts) {
    tiny_recipe(r, "gpt", 6);
    const char *const kv[][2] = {{"model.hidden", "64"}, {"model.tie_embeddings", "false"},
                                 {"model.mup.enabled", "true"}, {"model.mup.base_hidden", base}};
    set_recipe_keys(r, kv, sizeof kv / sizeof kv[0]);
    if (experts) set_recipe_int(r, "model.moe.experts", experts);
}

/* the pure functions, over every tensor of a dense and a MoE layout */
static void check_formulas(void) {
    static mt_recipe r;
    for (int experts = 0; experts <= 2; experts += 2) {
        mup_recipe(&r, "16", experts);
        if (tiny_batch_validate(&r, 2) != MT_OK) return;
        mt_param_layout pl;
        CHECKF(mt_param_layout_build(&r, &pl) == MT_OK, "%s", mt_last_error());
        const double m = (double)HIDDEN / BASE;
        CHECK_NEAR(mt_mup_width_mult(&r.model), m, 0, 0);
        int hidden = 0;
        for (int i = 0; i < pl.n_tensors; i++) {
            const mt_param_tensor *t = &pl.t[i];
            CHECKF(fabs(mt_mup_adam_mult(&r.model, t) - want_adam_mult(t, m)) == 0, "%s", t->name);
            hidden += mt_mup_is_hidden(t);
            if (t->init != MT_INIT_NORMAL && t->init != MT_INIT_NORMAL_OUTPUT) continue;
            CHECKF(fabs(mt_mup_init_std(&r.model, t, LAYERS) / want_std(t, m) - 1) < 1e-7, "%s: %g vs %g", t->name,
                   mt_mup_init_std(&r.model, t, LAYERS), want_std(t, m));
        }
        /* qkv, proj, fc, fcproj; MoE: qkv, proj, the router and the two expert weights */
        CHECKF(hidden == (experts ? 5 : 4), "%d hidden matrices", hidden);
    }
    /* softmax scale: head_dim 16; 1/16 by default, sqrt(16) / 16 = 1/4 with the base head dim 16 */
    CHECK_NEAR(mt_mup_softmax_scale(&r.model, 16), 1.0 / 16, 0, 1e-15);
    CHECK(mt_recipe_set(&r, "model.mup.base_head_dim", "16", "test") == MT_OK);
    CHECK_NEAR(mt_mup_softmax_scale(&r.model, 16), 0.25, 0, 1e-15);
    CHECK(mt_recipe_set(&r, "model.mup.base_head_dim", "0", "test") == MT_OK);
    CHECK(mt_recipe_set(&r, "model.mup.attn_scale_power", "0.5", "test") == MT_OK);
    CHECK_NEAR(mt_mup_softmax_scale(&r.model, 16), 0.25, 0, 1e-15);
    /* multipliers: logits 1 / m unless set; the embedding's as set */
    CHECK_NEAR(mt_mup_output_mult(&r.model), 0.25, 0, 0);
    CHECK_NEAR(mt_mup_embedding_mult(&r.model), 1.0, 0, 0);
    CHECK(mt_recipe_set(&r, "model.mup.output_mult", "0.5", "test") == MT_OK);
    CHECK(mt_recipe_set(&r, "model.mup.embedding_mult", "10", "test") == MT_OK);
    CHECK_NEAR(mt_mup_output_mult(&r.model), 0.5, 0, 0);
    CHECK_NEAR(mt_mup_embedding_mult(&r.model), 10.0, 0, 0);
    /* m = 1 (base = hidden, or unset): no lr / eps factor, no auto logit multiplier, base init */
    mup_recipe(&r, "0", 0);
    mt_param_layout pl;
    if (tiny_batch_validate(&r, 2) != MT_OK) return;
    CHECKF(mt_param_layout_build(&r, &pl) == MT_OK, "%s", mt_last_error());
    CHECK_NEAR(mt_mup_width_mult(&r.model), 1.0, 0, 0);
    CHECK_NEAR(mt_mup_output_mult(&r.model), 1.0, 0, 0);
    for (int i = 0; i < pl.n_tensors; i++) {
        CHECK(mt_mup_adam_mult(&r.model, &pl.t[i]) == 1.0);
        if (pl.t[i].init == MT_INIT_NORMAL || pl.t[i].init == MT_INIT_NORMAL_OUTPUT)
            CHECK_NEAR(mt_mup_init_std(&r.model, &pl.t[i], LAYERS), want_std(&pl.t[i], 1.0), 0, 1e-7);
    }
    /* muP off: Megatron's init_method_normal / scaled_init_method_normal, the attention's 1/sqrt(d) */
    CHECK(mt_recipe_set(&r, "model.mup.enabled", "false", "test") == MT_OK);
    CHECK_NEAR(mt_mup_softmax_scale(&r.model, 16), 0.25, 0, 1e-15);
    for (int i = 0; i < pl.n_tensors; i++)
        if (pl.t[i].init == MT_INIT_NORMAL || pl.t[i].init == MT_INIT_NORMAL_OUTPUT)
            CHECK_NEAR(mt_mup_init_std(&r.model, &pl.t[i], LAYERS),
                       is_output_projection(pl.t[i].name) ? STD / sqrt(2.0 * LAYERS) : STD, 0, 1e-7);
}

/* sample std of tensor ti's values (the real vocabulary rows of wte / lm_head) */
static double sample_std(const mt_model *m, int ti, size_t *n_out) {
    const mt_param_tensor *t = &m->pl.t[ti];
    const float *p = (const float *)m->params;
    const int rows = is_embedding_class(t->name) && strcmp(t->name, "wpe") ? m->pl.V : t->rows;
    double s = 0, s2 = 0;
    size_t n = 0;
    for (int l = 0; l < t->n_layers; l++)
        for (size_t e = 0; e < (size_t)rows * t->cols; e++) {
            const double x = p[mt_param_offset(&m->pl, ti, l) + e];
            s += x, s2 += x * x, n++;
        }
    *n_out = n;
    return sqrt(s2 / n - (s / n) * (s / n));
}

static void check_model(void) {
    static mt_recipe r;
    mup_recipe(&r, "16", 0);
    const char *const kv[][2] = {{"optimizer.eps", "1e-8"}, {"optimizer.weight_decay", "0"}};
    set_recipe_keys(&r, kv, 2);
    if (tiny_batch_validate(&r, 2) != MT_OK) return;
    mt_backend be;
    static mt_model m;
    if (tiny_model_open(&m, &be, &r, 2) != MT_OK) return;
    const double mult = (double)HIDDEN / BASE;
    CHECK_NEAR(m.logit_mult, 0.25, 0, 0);
    CHECK_NEAR(m.attn_scale, 1.0 / 16, 0, 0);
    for (int ti = 0; ti < m.pl.n_tensors; ti++) {
        const mt_param_tensor *t = &m.pl.t[ti];
        if (t->init != MT_INIT_NORMAL && t->init != MT_INIT_NORMAL_OUTPUT) continue;
        size_t n;
        const double sd = sample_std(&m, ti, &n), want = want_std(t, mult);
        CHECKF(fabs(sd / want - 1) < 5 * sqrt(0.5 / n), "%s: init std %g, want %g (n %zu)", t->name, sd, want, n);
    }
    const size_t n = m.pl.n_elems;
    float *before = malloc(n * sizeof *before);
    CHECK(before != NULL);
    if (!before) return;
    memcpy(before, m.params, n * sizeof *before);
    float *g = m.grads;
    for (size_t i = 0; i < n; i++) g[i] = 1e-8f;
    const double lr = 1e-2;
    CHECKF(mt_optim_step(&m, &r.optimizer, 1, lr, lr, 1.0) == MT_OK, "%s", mt_last_error());
    const float *p = m.params;
    for (int ti = 0; ti < m.pl.n_tensors; ti++) {
        const mt_param_tensor *t = &m.pl.t[ti];
        const double f = want_adam_mult(t, mult), want = lr * f / (1.0 + 1e-8 * f / 1e-8);
        const size_t o = mt_param_offset(&m.pl, ti, 0), len = (size_t)t->n_layers * t->rows * t->cols;
        double worst = 0;
        for (size_t e = 0; e < len; e++) {
            const double rel = fabs((before[o + e] - p[o + e]) / want - 1);
            if (rel > worst) worst = rel;
        }
        CHECKF(worst < 1e-3, "%s: the step moved it by %g of lr %g x %g / (1 + %g)", t->name, worst, lr, f, f);
    }
    free(before);
    mt_model_free(&m);
    mt_backend_destroy(&be);
}

/* Megatron's muP at m = 1 with mup_base_head_dim = head_dim is the model without muP: no lr / eps
 * override (get_mup_config_overrides returns {}), no logit multiplier, the base init, and the softmax
 * scale sqrt(16) / 16 = 1/4 = 1/sqrt(16). A forward / backward and one AdamW step give the same bits;
 * with Megatron's default attention (1 / head_dim) the loss differs. */
static void check_width_one(void) {
    static mt_recipe r0, r1;
    tiny_recipe(&r0, "gpt", 6);
    set_recipe_int(&r0, "model.hidden", HIDDEN);
    r1 = r0;
    const char *const kv[][2] = {{"model.mup.enabled", "true"}, {"model.mup.base_hidden", "64"},
                                 {"model.mup.base_head_dim", "16"}};
    set_recipe_keys(&r1, kv, 3);
    if (tiny_batch_validate(&r0, 2) != MT_OK || tiny_batch_validate(&r1, 2) != MT_OK) return;
    const int32_t tok[2 * 7] = {1, 5, 9, 2, 30, 7, 11, 3, 3, 8, 21, 36, 0, 4};
    mt_backend be[2];
    static mt_model m[2];
    float loss[2], gsq[2];
    for (int k = 0; k < 2; k++) {
        if (tiny_model_open(&m[k], &be[k], k ? &r1 : &r0, 2) != MT_OK) return;
        CHECK(mt_model_zero_grads(&m[k]) == MT_OK && mt_model_step_micro(&m[k], tok, 1.0f / 12, 1) == MT_OK);
        CHECK(mt_model_read_scalars(&m[k], &loss[k], &gsq[k]) == MT_OK);
        CHECK(mt_optim_step(&m[k], &r0.optimizer, 1, 1e-2, 1e-2, 1.0) == MT_OK);
    }
    const size_t n = m[0].pl.n_elems * sizeof(float);
    CHECK(loss[0] == loss[1] && gsq[0] == gsq[1] && m[1].pl.n_elems == m[0].pl.n_elems);
    CHECK(!memcmp(m[0].grads, m[1].grads, n) && !memcmp(m[0].params, m[1].params, n));
    mt_model_free(&m[1]);
    mt_backend_destroy(&be[1]);
    CHECK(mt_recipe_set(&r1, "model.mup.base_head_dim", "0", "test") == MT_OK);
    if (tiny_model_open(&m[1], &be[1], &r1, 2) != MT_OK) return;
    CHECK(mt_model_zero_grads(&m[1]) == MT_OK && mt_model_step_micro(&m[1], tok, 1.0f / 12, 1) == MT_OK);
    CHECK(mt_model_read_scalars(&m[1], &loss[1], &gsq[1]) == MT_OK);
    CHECKF(fabs(loss[1] - loss[0]) > 1e-6 * fabs(loss[0]), "1/d attention: loss %.9g, 1/sqrt(d): %.9g", loss[1],
           loss[0]);
    for (int k = 0; k < 2; k++) {
        mt_model_free(&m[k]);
        mt_backend_destroy(&be[k]);
    }
}

int main(void) {
    check_formulas();
    check_model();
    check_width_one();
    TEST_MAIN_END();
}
