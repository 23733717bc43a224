/* test_optim.c — LR schedule and clipping factor against hand-computed values, and the
 * model's FLOPs formula against Megatron's closed form for GPT (ffn = 4h, no GQA):
 *   FLOPs/iter = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)). */
#include <math.h>

#include "core/model/model_layout.h"
#include "train/model.h"
#include "train/optim.h"
#include "core/recipe/recipe.h"
#include "test/test.h"

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

    CHECK_NEAR(mt_clip_factor(0.5, 1.0), 1.0, 0, 0);
    CHECK_NEAR(mt_clip_factor(4.0, 1.0), 0.25, 1e-6, 0);
    CHECK_NEAR(mt_clip_factor(4.0, 0.0), 1.0, 0, 0);
    CHECK_NEAR(mt_clip_factor(NAN, 1.0), 1.0, 0, 0);

    /* FLOPs: GPT-2 small shape, compare with Megatron's closed form (V = padded vocab) */
    static mt_recipe r;
    mt_recipe_defaults(&r);
    CHECK(mt_recipe_load_file(&r, "configs/gpt125m.yaml") == MT_OK);
    CHECK(mt_recipe_validate(&r, 1) == MT_OK);
    mt_param_layout pl;
    CHECK(mt_param_layout_build(&r, &pl) == MT_OK);
    const double s = pl.T, l = pl.L, h = pl.C, V = pl.Vp;
    const double megatron = 72.0 * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    CHECK_NEAR(mt_model_flops_per_seq(&pl, 0), megatron, 0, 1e-12);
    CHECK_NEAR(mt_model_flops_per_seq(&pl, 1), megatron * 4.0 / 3.0, 0, 1e-12);
    /* GPT-2 124M parameter count (tied embeddings; the 47 padding rows of wte excluded) */
    const double pad = (double)(pl.Vp - pl.V) * pl.C;
    CHECK_NEAR((double)pl.n_params - pad, 124439808.0, 0, 0);
    TEST_MAIN_END();
}
