/* test_model_grad.c — the whole model's backward (model.c's wiring of the ops) checked
 * against finite differences, for GPT and for Llama with grouped-query attention.
 * Directional test: for random unit directions d over ALL parameters,
 *   (L(p + h d) - L(p - h d)) / 2h  ==  grad . d
 * L is the mean token loss of one micro-batch computed in fp32. With h = 1e-2 the
 * central-difference truncation error is O(h^2 * |L'''|) ~ 1e-5 and the fp32 rounding of
 * L (~3 * 6e-8 = 2e-7 absolute) contributes ~2e-7 / (2h) = 1e-5; directional derivatives here
 * are ~1e-1..1e0, so a 2% relative tolerance (plus 2e-4 absolute) is comfortably above the
 * noise and far below what any wiring mistake (a missing or doubled gradient path) gives.
 * Full recompute (uniform: every layer; block 1: the first layer recomputed, the second kept):
 * the same finite-difference checks, and the gradient bitwise equal to the one without it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "train/model.h"
#include "core/recipe/recipe.h"
#include "core/rng.h"
#include "test/test.h"
#include "test/unit/grad_check.h"
#include "test/unit/tiny_model.h"

static double loss_of(mt_model *m, const int32_t *tokens, float dloss, int backward, int n_tok) {
    float loss = 0, gsq = 0;
    if (mt_model_zero_grads(m) != MT_OK) return NAN;
    if (mt_model_step_micro(m, tokens, dloss, backward) != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        return NAN;
    }
    if (mt_model_read_scalars(m, &loss, &gsq) != MT_OK) return NAN;
    return (double)(loss / n_tok);
}

static float *g_ref[2]; /* gradient without recompute, per arch */

/* variant: NULL, or a layer variant's recipe settings "key=value[,key=value]" (checked against
 * finite differences only; the bitwise recompute comparison uses the plain models) */
static void check_model(const char *arch, const char *rc_method, const char *variant) {
    static mt_recipe r;
    tiny_recipe(&r, arch, 6);
    if (rc_method) {
        CHECK(mt_recipe_set(&r, "training.recompute", "full", "test") == MT_OK);
        CHECK(mt_recipe_set(&r, "training.recompute_method", rc_method, "test") == MT_OK);
    }
    CHECK(mt_recipe_set(&r, "model.init_std", "0.2", "test") == MT_OK);
    if (!strcmp(arch, "llama")) {
        CHECK(mt_recipe_set(&r, "model.kv_heads", "2", "test") == MT_OK);
        CHECK(mt_recipe_set(&r, "model.ffn_hidden", "24", "test") == MT_OK);
    } else {
        CHECK(mt_recipe_set(&r, "model.tie_embeddings", "true", "test") == MT_OK);
    }
    if (rc_method && !strcmp(rc_method, "block"))
        CHECK(mt_recipe_set(&r, "training.recompute_num_layers", "1", "test") == MT_OK);
    if (!set_recipe_csv(&r, variant)) return;
    if (variant) arch = variant; /* names the checks below */
    static grad_check c;
    if (grad_check_open(&c, &r, loss_of) != MT_OK) return;
    const size_t n = c.m.pl.n_elems;
    grad_check_base(&c, n);
    const int ai = !strcmp(arch, "llama");
    CHECK(c.m.pl.recompute == (rc_method ? (!strcmp(rc_method, "block") ? 1 : 2) : 0));
    if (variant) {
    } else if (!rc_method) {
        free(g_ref[ai]);
        g_ref[ai] = malloc(n * 4);
        memcpy(g_ref[ai], c.g, n * 4);
    } else {
        CHECKF(g_ref[ai] && memcmp(g_ref[ai], c.g, n * 4) == 0, "%s recompute %s: gradient differs from the run without",
               arch, rc_method);
        printf("%s recompute full %s: gradient bitwise equal to the one without recompute\n", arch, rc_method);
    }

    for (int trial = 0; trial < 4; trial++) {
        double fd, gd;
        grad_check_direction(&c, 0, n, 99, (uint64_t)trial, 1e-2, &fd, &gd);
        printf("%s trial %d: finite difference %.6f, analytic %.6f\n", arch, trial, fd, gd);
        CHECK_NEAR(gd, fd, 2e-4, 2e-2);
    }
    /* per-tensor check: a direction inside one tensor at a time catches a tensor whose
     * gradient is wrong but small relative to the total */
    for (int ti = 0; ti < c.m.pl.n_tensors; ti++) {
        const mt_param_tensor *t = &c.m.pl.t[ti];
        double fd, gd;
        grad_check_direction(&c, t->offset, t->offset + t->n, 5, (uint64_t)ti, 1e-2, &fd, &gd);
        printf("%s tensor %-9s: finite difference %.6f, analytic %.6f\n", arch, t->name, fd, gd);
        CHECKF(fabs(gd - fd) <= 2e-4 + 2e-2 * fabs(fd), "%s tensor %s: fd %.6g analytic %.6g", arch, t->name, fd, gd);
    }
    grad_check_close(&c);
}

static void check_arch(const char *arch, const char *rc_method) { check_model(arch, rc_method, NULL); }

/* the loss of the MLA model of the tiny recipe + keys, with its q projection (q_w: q_lora 0) times qmul */
static double mla_loss(const char *keys, double qmul) {
    static mt_recipe r;
    tiny_recipe(&r, "gpt", GRAD_CHECK_T);
    if (!set_recipe_csv(&r, keys)) return NAN;
    static grad_check c;
    if (grad_check_open(&c, &r, loss_of) != MT_OK) return NAN;
    const mt_param_tensor *t = &c.m.pl.t[c.m.pl.idx.q_w];
    const size_t n = c.m.pl.n_elems;
    float *p = malloc(n * 4);
    c.be.i->copy_d2h(&c.be, p, c.m.params, n * 4);
    for (size_t i = t->offset; i < t->offset + t->n; i++) p[i] = (float)(p[i] * qmul);
    c.be.i->copy_h2d(&c.be, c.m.params, p, n * 4);
    free(p);
    const double loss = loss_of(&c.m, c.tokens, c.dloss, 0, c.n_tok);
    grad_check_close(&c);
    return loss;
}

/* Megatron's MLA softmax scale, mscale^2 / sqrt(qk_head_dim + qk_pos_head_dim) with mscale = 0.1 *
 * mscale_all_dim * ln(rotary_scaling_factor) + 1 (MLASelfAttention, _yarn_get_mscale), checked through
 * the scores' linearity in q: plain RoPE (the factor then changes nothing but this scale) with
 * mscale_all_dim 0.707 and factor 40 gives the loss of the same weights without them and q_w times
 * mscale^2 = 1.5896 (computed here from the formula). Heads of 4 + 2 query / key channels and 8 value
 * channels, so a scale from the core's padded head size (1/sqrt(8)) fails too. fp32 forward of 18
 * tokens: equal within 1e-5 relative; the unscaled pair differs by far more (printed, asserted > 1e-3). */
static void check_mla_softmax_scale(void) {
    const char *base = "model.mla.enabled=true,model.mla.kv_lora_rank=6,model.mla.qk_head_dim=4,"
                       "model.mla.qk_pos_head_dim=2,model.mla.v_head_dim=8,model.init_std=0.5,model.mla.rope_yarn=false";
    char keys[512];
    snprintf(keys, sizeof keys, "%s,model.mla.rotary_scaling_factor=40,model.mla.mscale_all_dim=0.707", base);
    const double ms = 0.1 * 0.707 * log(40.0) + 1.0;
    const double la = mla_loss(keys, 1.0), lb = mla_loss(base, ms * ms), l0 = mla_loss(base, 1.0);
    printf("MLA softmax scale: loss %.7f with mscale_all_dim, %.7f with q_w x %.4f instead, %.7f with neither\n",
           la, lb, ms * ms, l0);
    CHECK_NEAR(la, lb, 0.0, 1e-5);
    CHECKF(fabs(la - l0) > 1e-3, "the softmax mscale changed the loss by only %.3g", fabs(la - l0));
}

int main(void) {
    /* layer variants (core/model/layer_spec.h): zero-centred gamma on LayerNorm and RMSNorm, the
       per-head qk norm (LayerNorm with bias, RMSNorm with GQA), both together under full recompute */
    check_model("gpt", NULL, "model.norm_1p=true");
    check_model("llama", NULL, "model.norm_1p=true");
    check_model("gpt", NULL, "model.qk_layernorm=true");
    check_model("llama", NULL, "model.qk_layernorm=true");
    check_model("llama", "uniform", "model.qk_layernorm=true,model.norm_1p=true");
    /* a head size other than hidden / heads (Megatron's --kv-channels): 4 heads of 6 on hidden 16,
       with GQA and the qk norm over the 6 channels */
    check_model("gpt", NULL, "model.head_dim=6");
    check_model("llama", NULL, "model.head_dim=6,model.qk_layernorm=true");
    /* the weightless L2 qk norm (Megatron's --qk-l2-norm: RMSNorm over head_dim applying the
       model's ones) on a LayerNorm model, and with GQA and zero-centred gamma; a head wider than
       the hidden size (4 heads of 24 on hidden 16) reads the ones, and zero-centred gamma adds them
       to the learned qk norm's weights, past hidden: the ones are max(hidden, head) wide */
    check_model("gpt", NULL, "model.qk_l2_norm=true");
    check_model("llama", NULL, "model.qk_l2_norm=true,model.norm_1p=true");
    check_model("llama", NULL, "model.head_dim=24,model.qk_l2_norm=true");
    check_model("llama", NULL, "model.head_dim=24,model.qk_layernorm=true,model.norm_1p=true");
    /* squared ReLU (Megatron's --squared-relu: relu(h)^2, not gated; C^1, so the kink at 0 costs the
       central difference only O(h) on the few hidden units within h of it): with fc biases, without
       biases on RMSNorm + GQA under full recompute (the experts' squared ReLU: test_moe.c) */
    /* mixed dense and MoE layers (model.moe.layer_pattern / layer_freq): the dense MLP stacked over the dense
       layer, the router and the experts (narrower: model.moe.ffn_hidden) over the MoE one; no aux / z loss (the
       objective here is the token loss; test_moe.c checks those); top_k = experts: no routing flips under the
       finite differences' steps */
    check_model("llama", NULL, "model.moe.experts=2,model.moe.top_k=2,model.moe.layer_pattern=01,model.moe.ffn_hidden=8,"
                "model.moe.aux_loss_coeff=0,model.moe.capacity_factor=0");
    check_model("gpt", NULL, "model.moe.experts=2,model.moe.top_k=2,model.moe.layer_freq=2,model.moe.aux_loss_coeff=0,"
                "model.moe.capacity_factor=0");
    check_model("gpt", NULL, "model.activation=squared_relu");
    check_model("llama", "uniform", "model.activation=squared_relu");
    /* partial and interleaved RoPE (--rotary-percent 0.5: 2 of each head's 4 channels rotate) */
    check_model("llama", NULL, "model.rotary_percent=0.5");
    check_model("llama", NULL, "model.rope_interleaved=true,model.head_dim=6,model.rotary_percent=0.67");
    /* muP (core/model/mup.h): m = 16 / 8 = 2, so the logits times 1/2 (tied), the embedding output
       times 3, the softmax scale 1 / head_dim = 1/4; untied Llama with GQA: logits times 0.7, softmax
       scale sqrt(2) / 4^0.75. Each multiplier's backward is one of the scalings these check */
    check_model("gpt", NULL, "model.mup.enabled=true,model.mup.base_hidden=8,model.mup.embedding_mult=3");
    check_model("llama", NULL, "model.mup.enabled=true,model.mup.base_hidden=4,model.mup.output_mult=0.7,"
                "model.mup.base_head_dim=2,model.mup.attn_scale_power=0.75");
    /* multi-latent attention (Megatron's MLASelfAttention): a plain q projection, no latent norms,
       heads of 4 + 4 query / key channels and 6 value channels (the core's v part zero-padded to 8);
       the q latent with its norm and the kv latent's norm (--qk-layernorm; RMSNorm, zero-centred
       gamma), heads of 4 + 2 = 6 = v; LayerNorm latent norms with bias and YaRN (factor 4, mscale
       0.7: frequencies blended, cos / sin scaled) under full and selective recompute */
    const char *mla = "model.mla.enabled=true,model.mla.kv_lora_rank=6,model.mla.qk_head_dim=4";
    char v[512];
    snprintf(v, sizeof v, "%s,model.mla.qk_pos_head_dim=4,model.mla.v_head_dim=6", mla);
    check_model("gpt", NULL, v);
    snprintf(v, sizeof v, "%s,model.kv_heads=4,model.mla.q_lora_rank=8,model.mla.qk_pos_head_dim=2,"
             "model.mla.v_head_dim=6,model.qk_layernorm=true,model.norm_1p=true", mla);
    check_model("llama", NULL, v);
    snprintf(v, sizeof v, "%s,model.mla.q_lora_rank=8,model.mla.qk_pos_head_dim=4,model.mla.v_head_dim=2,"
             "model.qk_layernorm=true,model.mla.rotary_scaling_factor=4,model.mla.mscale=0.7", mla);
    check_model("gpt", "uniform", v);
    snprintf(v, sizeof v, "%s,model.mla.q_lora_rank=8,model.mla.qk_pos_head_dim=4,model.mla.v_head_dim=6,"
             "training.recompute=selective", mla);
    check_model("gpt", NULL, v);
    /* --qk-layernorm without a q latent: the norm Megatron fuses into linear_q_proj (q = norm(x1) W_q), on
       RMSNorm with zero-centred gamma and on LayerNorm with its bias under full recompute; values wider than
       the query / key heads (v 8 > 4 + 2: the core's q / k parts zero-padded, the softmax scale from 6);
       YaRN's softmax mscale (mscale_all_dim) */
    snprintf(v, sizeof v, "%s,model.kv_heads=4,model.mla.qk_pos_head_dim=2,model.mla.v_head_dim=8,"
             "model.qk_layernorm=true,model.norm_1p=true", mla);
    check_model("llama", NULL, v);
    snprintf(v, sizeof v, "%s,model.mla.qk_pos_head_dim=4,model.mla.v_head_dim=6,model.qk_layernorm=true,"
             "model.mla.rotary_scaling_factor=40,model.mla.mscale_all_dim=0.707", mla);
    check_model("gpt", "uniform", v);
    check_mla_softmax_scale();
    /* a layer without RoPE (Megatron's --no-rope-freq, Llama 4's NoPE layers): layer 0 of 2, with the
       weightless query / key L2 norm Llama 4 pairs with it */
    check_model("llama", NULL, "model.no_rope_layers=([1]+[0]),model.qk_l2_norm=true");
    check_arch("gpt", NULL);
    check_arch("llama", NULL);
    check_arch("gpt", "uniform");
    check_arch("llama", "uniform");
    check_arch("gpt", "block");
    check_arch("llama", "block");
    free(g_ref[0]);
    free(g_ref[1]);
    TEST_MAIN_END();
}
