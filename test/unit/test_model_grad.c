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
    char kv[256];
    snprintf(kv, sizeof kv, "%s", variant ? variant : "");
    for (char *save = NULL, *s = strtok_r(kv, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(s, '=');
        CHECK(eq != NULL);
        if (!eq) return;
        *eq = 0;
        CHECKF(mt_recipe_set(&r, s, eq + 1, "test") == MT_OK, "%s", mt_last_error());
    }
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
    check_model("gpt", NULL, "model.activation=squared_relu");
    check_model("llama", "uniform", "model.activation=squared_relu");
    /* partial and interleaved RoPE (--rotary-percent 0.5: 2 of each head's 4 channels rotate) */
    check_model("llama", NULL, "model.rotary_percent=0.5");
    check_model("llama", NULL, "model.rope_interleaved=true,model.head_dim=6,model.rotary_percent=0.67");
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
