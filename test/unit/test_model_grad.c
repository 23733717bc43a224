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
#include "test/unit/tiny_model.h"

static float loss_of(mt_model *m, const int32_t *tokens, float dloss, int backward, int n_tok) {
    float loss = 0, gsq = 0;
    if (mt_model_zero_grads(m) != MT_OK) return NAN;
    if (mt_model_step_micro(m, tokens, dloss, backward) != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        return NAN;
    }
    if (mt_model_read_scalars(m, &loss, &gsq) != MT_OK) return NAN;
    return loss / n_tok;
}

typedef struct {
    mt_model *m;
    mt_backend *be;
    const int32_t *tokens;
    float dloss;
    int n_tok;
    size_t n;              /* parameter elements */
    const float *p0, *g;   /* parameters and their gradient at the base point */
    float *p, *d;          /* scratch: perturbed parameters, direction */
} directional_ctx;

/* A random unit direction d over parameter elements [lo, hi) (zero elsewhere, seeded by
 * (seed, stream)): *fd = central difference of the loss along d with h = 1e-2, *gd = g . d. */
static void directional(const directional_ctx *c, size_t lo, size_t hi, uint64_t seed, uint64_t stream, double *fd,
                        double *gd) {
    const double h = 1e-2;
    double norm = 0, dot = 0;
    memset(c->d, 0, c->n * 4);
    for (size_t i = lo; i < hi; i++) {
        c->d[i] = (float)mt_rng_normal(seed, stream, i);
        norm += (double)c->d[i] * c->d[i];
    }
    norm = sqrt(norm);
    for (size_t i = lo; i < hi; i++) {
        c->d[i] = (float)(c->d[i] / norm);
        dot += (double)c->g[i] * c->d[i];
    }
    double l[2];
    for (int k = 0; k < 2; k++) {
        const float sign = k == 0 ? 1.0f : -1.0f;
        for (size_t i = 0; i < c->n; i++) c->p[i] = c->p0[i] + sign * (float)h * c->d[i];
        c->be->i->copy_h2d(c->be, c->m->params, c->p, c->n * 4);
        l[k] = loss_of(c->m, c->tokens, c->dloss, 0, c->n_tok);
    }
    c->be->i->copy_h2d(c->be, c->m->params, c->p0, c->n * 4);
    *fd = (l[0] - l[1]) / (2 * h);
    *gd = dot;
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
    tiny_batch_validate(&r, 3);

    mt_backend be;
    mt_model m;
    if (tiny_model_open(&m, &be, &r, 3) != MT_OK) return;
    const int B = 3, T = 6, N = B * T;
    int32_t tokens[3 * 7];
    for (int i = 0; i < B * (T + 1); i++) tokens[i] = (int32_t)(mt_rng_u64(7, 1, i) % 37);
    const float dloss = 1.0f / N;
    const size_t n = m.pl.n_elems;
    float *p0 = malloc(n * 4), *g = malloc(n * 4), *p = malloc(n * 4), *d = malloc(n * 4);
    be.i->copy_d2h(&be, p0, m.params, n * 4);
    loss_of(&m, tokens, dloss, 1, N);
    be.i->copy_d2h(&be, g, m.grads, n * 4);
    const int ai = !strcmp(arch, "llama");
    CHECK(m.pl.recompute == (rc_method ? (!strcmp(rc_method, "block") ? 1 : 2) : 0));
    if (variant) {
    } else if (!rc_method) {
        free(g_ref[ai]);
        g_ref[ai] = malloc(n * 4);
        memcpy(g_ref[ai], g, n * 4);
    } else {
        CHECKF(g_ref[ai] && memcmp(g_ref[ai], g, n * 4) == 0, "%s recompute %s: gradient differs from the run without",
               arch, rc_method);
        printf("%s recompute full %s: gradient bitwise equal to the one without recompute\n", arch, rc_method);
    }

    const directional_ctx dc = {&m, &be, tokens, dloss, N, n, p0, g, p, d};
    for (int trial = 0; trial < 4; trial++) {
        double fd, gd;
        directional(&dc, 0, n, 99, (uint64_t)trial, &fd, &gd);
        printf("%s trial %d: finite difference %.6f, analytic %.6f\n", arch, trial, fd, gd);
        CHECK_NEAR(gd, fd, 2e-4, 2e-2);
    }
    /* per-tensor check: a direction inside one tensor at a time catches a tensor whose
     * gradient is wrong but small relative to the total */
    for (int ti = 0; ti < m.pl.n_tensors; ti++) {
        const mt_param_tensor *t = &m.pl.t[ti];
        double fd, gd;
        directional(&dc, t->offset, t->offset + t->n, 5, (uint64_t)ti, &fd, &gd);
        printf("%s tensor %-9s: finite difference %.6f, analytic %.6f\n", arch, t->name, fd, gd);
        CHECKF(fabs(gd - fd) <= 2e-4 + 2e-2 * fabs(fd), "%s tensor %s: fd %.6g analytic %.6g", arch, t->name, fd, gd);
    }
    free(p0);
    free(g);
    free(p);
    free(d);
    mt_model_free(&m);
    mt_backend_destroy(&be);
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
