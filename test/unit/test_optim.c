/* test_optim.c — LR schedule and clipping factor against hand-computed values, and the
 * model's FLOPs formula against Megatron's closed form for GPT (ffn = 4h, no GQA):
 *   FLOPs/iter = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)). */
#include <math.h>

#include "core/model/model_layout.h"
#include "train/model.h"
#include "train/optim.h"
#include "core/recipe/recipe.h"
#include "test/test.h"
#include "test/unit/tiny_model.h"

int main(void) {
    mt_optimizer_cfg o = {0};
    o.lr = 1e-3f;
    o.min_lr = 1e-4f;
    o.warmup_iters = 10;
    o.decay = MT_DECAY_COSINE;
    /* warmup: linear from 0 */
    CHECK_NEAR(mt_lr_at(&o, 1, 110), 1e-4, 1e-9, 1e-6);
    CHECK_NEAR(mt_lr_at(&o, 5, 110), 5e-4, 1e-9, 1e-6);
    CHECK_NEAR(mt_lr_at(&o, 10, 110), 1e-3, 1e-9, 1e-6);
    /* cosine: halfway through decay = (max + min) / 2 */
    CHECK_NEAR(mt_lr_at(&o, 60, 110), 5.5e-4, 1e-9, 1e-5);
    CHECK_NEAR(mt_lr_at(&o, 110, 110), 1e-4, 1e-9, 1e-5);
    CHECK_NEAR(mt_lr_at(&o, 500, 110), 1e-4, 1e-9, 1e-5);
    o.decay = MT_DECAY_LINEAR;
    CHECK_NEAR(mt_lr_at(&o, 35, 110), 1e-3 - 0.9e-3 * 0.25, 1e-9, 1e-5);
    o.decay = MT_DECAY_CONSTANT;
    CHECK_NEAR(mt_lr_at(&o, 90, 110), 1e-3, 1e-9, 1e-6);
    o.decay = MT_DECAY_COSINE;
    o.decay_iters = 60; /* explicit decay horizon shorter than training */
    CHECK_NEAR(mt_lr_at(&o, 35, 110), 5.5e-4, 1e-9, 1e-5);
    CHECK_NEAR(mt_lr_at(&o, 70, 110), 1e-4, 1e-9, 1e-5);

    /* inverse-square-root (Megatron): lr * sqrt(warmup / step) after warmup, floored at min_lr */
    o.decay_iters = 0;
    o.decay = MT_DECAY_INV_SQRT;
    CHECK_NEAR(mt_lr_at(&o, 10, 1000), 1e-3, 1e-9, 1e-6);      /* end of warmup: sqrt(10/10) */
    CHECK_NEAR(mt_lr_at(&o, 40, 1000), 5e-4, 1e-9, 1e-6);      /* sqrt(10/40) = 1/2 */
    CHECK_NEAR(mt_lr_at(&o, 250, 1000), 2e-4, 1e-9, 1e-6);     /* sqrt(10/250) = 1/5 */
    CHECK_NEAR(mt_lr_at(&o, 900, 1000), 1e-3 / sqrt(90.0), 1e-9, 1e-6);
    o.min_lr = 3e-4f;
    CHECK_NEAR(mt_lr_at(&o, 250, 1000), 3e-4, 1e-9, 1e-6);     /* 2e-4 floored at min_lr */
    o.min_lr = 1e-4f;
    /* WSD: stable at lr until the last wsd_decay_iters of decay_iters, then the anneal to min_lr */
    o.decay = MT_DECAY_WSD;
    o.wsd_decay_iters = 20;
    o.wsd_decay = MT_WSD_LINEAR;
    CHECK_NEAR(mt_lr_at(&o, 80, 100), 1e-3, 1e-9, 1e-6);       /* anneal starts after step 80 */
    CHECK_NEAR(mt_lr_at(&o, 90, 100), 5.5e-4, 1e-9, 1e-6);     /* halfway, linear: (max + min) / 2 */
    CHECK_NEAR(mt_lr_at(&o, 100, 100), 1e-4, 1e-9, 1e-6);
    CHECK_NEAR(mt_lr_at(&o, 150, 100), 1e-4, 1e-9, 1e-6);
    o.wsd_decay = MT_WSD_COSINE;
    CHECK_NEAR(mt_lr_at(&o, 90, 100), 5.5e-4, 1e-9, 1e-6);     /* cos(pi/2) = 0: halfway too */
    o.wsd_decay = MT_WSD_EXPONENTIAL;                           /* 2 * 0.5^r - 1 at r = 1/2 */
    CHECK_NEAR(mt_lr_at(&o, 90, 100), 1e-4 + (2 * sqrt(0.5) - 1) * 0.9e-3, 1e-9, 1e-6);
    o.wsd_decay = MT_WSD_MINUS_SQRT;                            /* 1 - sqrt(1/2) */
    CHECK_NEAR(mt_lr_at(&o, 90, 100), 1e-4 + (1 - sqrt(0.5)) * 0.9e-3, 1e-9, 1e-6);
    /* decoupled: the same shape between decoupled_lr and decoupled_min_lr; off at 0 */
    o.decay = MT_DECAY_COSINE;
    CHECK_NEAR(mt_lr_decoupled_at(&o, 60, 110), mt_lr_at(&o, 60, 110), 0, 0);
    o.decoupled_lr = 5e-3f;
    o.decoupled_min_lr = 5e-4f;
    CHECK_NEAR(mt_lr_decoupled_at(&o, 5, 110), 2.5e-3, 1e-9, 1e-6); /* warmup */
    CHECK_NEAR(mt_lr_decoupled_at(&o, 60, 110), 2.75e-3, 1e-9, 1e-5); /* cosine halfway */
    CHECK_NEAR(mt_lr_at(&o, 60, 110), 5.5e-4, 1e-9, 1e-5);  /* the others unchanged */
    CHECK(mt_optim_is_embedding_or_output(&(mt_param_tensor){.name = "wte"}));
    CHECK(mt_optim_is_embedding_or_output(&(mt_param_tensor){.name = "lm_head"}));
    CHECK(!mt_optim_is_embedding_or_output(&(mt_param_tensor){.name = "wpe"}));
    CHECK(!mt_optim_is_embedding_or_output(&(mt_param_tensor){.name = "qkv_w"}));

    CHECK_NEAR(mt_clip_factor(0.5, 1.0), 1.0, 0, 0);
    CHECK_NEAR(mt_clip_factor(4.0, 1.0), 0.25, 1e-6, 0);
    CHECK_NEAR(mt_clip_factor(4.0, 0.0), 1.0, 0, 0);
    CHECK_NEAR(mt_clip_factor(NAN, 1.0), 1.0, 0, 0);

    /* FLOPs: GPT-2 small shape, compare with Megatron's closed form (V = padded vocab) */
    static mt_recipe r;
    mt_param_layout pl;
    config_layout(&r, "configs/gpt125m.yaml", &pl);
    const double s = pl.T, l = pl.L, h = pl.C, V = pl.Vp;
    const double megatron = 72.0 * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    CHECK_NEAR(mt_model_flops_per_seq(&pl, MT_RECOMPUTE_NONE), megatron, 0, 1e-12);
    /* full recompute: Narayanan et al. 2021's 96 B s l h^2 (1 + s/6h + V/16lh) (the logits not rerun) */
    const double megatron_full = 96.0 * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    CHECK_NEAR(mt_model_flops_per_seq(&pl, MT_RECOMPUTE_FULL), megatron_full, 0, 1e-12);
    /* selective: the attention core's forward again, 4 B s^2 h per layer (Korthikanti et al. 2022) */
    CHECK_NEAR(mt_model_flops_per_seq(&pl, MT_RECOMPUTE_SELECTIVE), megatron + 4.0 * s * s * h * l, 0, 1e-12);
    /* GPT-2 124M parameter count (tied embeddings; the 47 padding rows of wte excluded) */
    const double pad = (double)(pl.Vp - pl.V) * pl.C;
    CHECK_NEAR((double)pl.n_params - pad, 124439808.0, 0, 0);
    TEST_MAIN_END();
}
