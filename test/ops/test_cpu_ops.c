/* test_cpu_ops.c — the CPU backend's dense ops against a naive double-precision reference written
 * here, independently of core/cpu/cpu_ops_*.c: GEMM, layernorm / rmsnorm, GeLU / SwiGLU / squared ReLU (and the
 * backend's expf under them), add / sum / cast, RoPE and flash attention. The embedding, the
 * cross-entropy, AdamW, run-to-run determinism and the backend object are in
 * test_cpu_ops_train.c; the comparisons both use (forward vs the double reference on the same
 * inputs, backward vs double central finite differences) are in cpu_op_check.h.
 * Tolerances (|got - want| <= rtol |want| + atol_frac * max|want|):
 *  - reductions / GEMMs of K <= 300 fp32 terms: rtol 1e-5 (fp32 unit roundoff 6e-8 times a
 *    worst-case growth of ~sqrt(K)..K, with margin), atol_frac 1e-5 for entries that cancel;
 *  - elementwise ops built on the backend's polynomial expf (~2 ulp) and a handful of
 *    roundings: rtol 2e-6;
 *  - gradients (fp32 analytic vs double FD): rtol 1e-4, atol_frac 1e-5 — a backward chains
 *    two or three fp32 reductions (e.g. norm: two row means, then a difference of terms of
 *    similar size) each ~1e-6 relative, and the difference of nearly equal terms amplifies
 *    that by up to ~10-50x for individual entries.
 * Also checked: the accumulate rules (+= on weight grads and norm dinp, = on activation grads
 * unless accumulate_dinp), GQA, RoPE inverse = identity and its untouched columns. Every op
 * test runs twice: on a backend with all cores and on one with 3 threads. Exit code 0 when all
 * checks hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/ops/cpu_op_check.h"
#include "core/cpu/cpu_backend.h" /* mt_cpu_expf, the exp every softmax / sigmoid of the backend uses */

/* ---------------- the backend's vectorisable expf ---------------- */

static void test_expf(void) {
    /* documented: ~2 ulp over [-87.3, 88]; measured in relative terms (1 ulp <= 1.2e-7) */
    double worst = 0.0, worst_x = 0.0;
    for (int i = 0; i <= 2000000; i++) {
        const float x = -87.0f + 175.0f * (float)i / 2000000.0f;
        const double want = exp((double)x);
        const double rel = fabs((double)mt_cpu_expf(x) - want) / want;
        if (rel > worst) worst = rel, worst_x = x;
    }
    CHECKF(worst <= 3.0 * 1.1920929e-7, "mt_cpu_expf: worst relative error %.3g at x = %.9g", worst, worst_x);
    if (verbose)
        printf("  %-60s worst rel err %.3g (%.2f ulp)\n", "mt_cpu_expf on [-87, 88]", worst, worst / 1.1920929e-7);
    CHECK(mt_cpu_expf(0.0f) == 1.0f);
    CHECK(mt_cpu_expf(-1000.0f) >= 0.0f && mt_cpu_expf(-1000.0f) < 1.2e-38f); /* clamped, finite */
    CHECK(isfinite(mt_cpu_expf(1000.0f)) && mt_cpu_expf(1000.0f) > 1e38f);
    CHECK(isnan(mt_cpu_expf(NAN)));
}

/* ---------------- matmul ---------------- */

static void ref_matmul(double *out, const double *inp, const double *w, const double *b, int M, int N, int K) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = b ? b[n] : 0.0;
            for (int k = 0; k < K; k++) s += inp[(size_t)m * K + k] * w[(size_t)n * K + k];
            out[(size_t)m * N + n] = s;
        }
}

typedef struct {
    double *inp, *w, *b, *g, *out;
    int M, N, K;
} mm_ctx;

static double mm_loss(void *p) {
    mm_ctx *c = p;
    ref_matmul(c->out, c->inp, c->w, c->b, c->M, c->N, c->K);
    return dot_gd(c->g, c->out, (size_t)c->M * c->N);
}

static void test_matmul(int M, int N, int K, int with_bias) {
    char what[128];
    const size_t nI = (size_t)M * K, nW = (size_t)N * K, nO = (size_t)M * N;
    float *inp = frand(nI, -1, 1), *w = frand(nW, -1, 1), *b = with_bias ? frand((size_t)N, -1, 1) : NULL;
    float *out = fconst(nO, 777.0f);
    mt_matmul_fwd_args fa = {out, inp, w, b, M, N, K};
    OK(MT_BE_CALL(&be, matmul_fwd, &fa));
    mm_ctx c = {dcopy(inp, nI), dcopy(w, nW), b ? dcopy(b, (size_t)N) : NULL, NULL, dzeros(nO), M, N, K};
    double *want = dzeros(nO);
    ref_matmul(want, c.inp, c.w, c.b, M, N, K);
    snprintf(what, sizeof what, "matmul_fwd M=%d N=%d K=%d bias=%d", M, N, K, with_bias);
    check_close(what, out, want, nO, 1e-5, 1e-5);

    /* backward: dweight/dbias pre-filled (must accumulate), dinp pre-filled (must be
     * overwritten), then a second call with accumulate_dinp on top of a random dinp */
    float *g = frand(nO, -1, 1);
    c.g = dcopy(g, nO);
    float *dw0 = frand(nW, -1, 1), *db0 = frand((size_t)N, -1, 1);
    float *dw = fcopy(dw0, nW), *db = with_bias ? fcopy(db0, (size_t)N) : NULL;
    float *dinp = fconst(nI, 777.0f);
    mt_matmul_bwd_args ba = {dinp, dw, db, g, inp, w, M, N, K, 0};
    OK(MT_BE_CALL(&be, matmul_bwd, &ba));
    const size_t S = 400;
    snprintf(what, sizeof what, "matmul_bwd dinp(=) M=%d N=%d K=%d", M, N, K);
    fd_check(what, mm_loss, &c, c.inp, nI, dinp, NULL, S, 1e-4, 1e-5);
    snprintf(what, sizeof what, "matmul_bwd dweight(+=) M=%d N=%d K=%d", M, N, K);
    fd_check(what, mm_loss, &c, c.w, nW, dw, dw0, S, 1e-4, 1e-5);
    if (with_bias) {
        snprintf(what, sizeof what, "matmul_bwd dbias(+=) M=%d N=%d K=%d", M, N, K);
        fd_check(what, mm_loss, &c, c.b, (size_t)N, db, db0, S, 1e-4, 1e-5);
    }
    float *dinp0 = frand(nI, -1, 1), *dinp2 = fcopy(dinp0, nI);
    mt_matmul_bwd_args bb = {dinp2, NULL, NULL, g, inp, w, M, N, K, 1};
    OK(MT_BE_CALL(&be, matmul_bwd, &bb));
    snprintf(what, sizeof what, "matmul_bwd dinp(+= accumulate_dinp) M=%d N=%d K=%d", M, N, K);
    fd_check(what, mm_loss, &c, c.inp, nI, dinp2, dinp0, S, 1e-4, 1e-5);

    free(inp), free(w), free(b), free(out), free(g), free(dw0), free(db0), free(dw), free(db), free(dinp);
    free(dinp0), free(dinp2), free(want);
    free(c.inp), free(c.w), free(c.b), free(c.g), free(c.out);
}

/* ---------------- layernorm / rmsnorm ---------------- */

static void ref_norm(double *out, double *mean, double *rstd, const double *inp, const double *w, const double *b,
                     int N, int C, double eps, int centered) {
    for (int r = 0; r < N; r++) {
        const double *x = inp + (size_t)r * C;
        double mu = 0.0, var = 0.0;
        if (centered) {
            for (int j = 0; j < C; j++) mu += x[j];
            mu /= C;
        }
        for (int j = 0; j < C; j++) var += (x[j] - mu) * (x[j] - mu);
        var /= C;
        const double s = 1.0 / sqrt(var + eps);
        for (int j = 0; j < C; j++) out[(size_t)r * C + j] = (x[j] - mu) * s * w[j] + (b ? b[j] : 0.0);
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = s;
    }
}

typedef struct {
    double *inp, *w, *b, *g, *out;
    int N, C, centered;
    double eps;
} norm_ctx;

static double norm_loss(void *p) {
    norm_ctx *c = p;
    ref_norm(c->out, NULL, NULL, c->inp, c->w, c->b, c->N, c->C, c->eps, c->centered);
    return dot_gd(c->g, c->out, (size_t)c->N * c->C);
}

static void test_norm(int N, int C, int centered) {
    char what[128];
    const char *name = centered ? "layernorm" : "rmsnorm";
    const size_t n = (size_t)N * C;
    const float eps = 1e-5f;
    /* an offset of 0.5 so the mean is not ~0 and centring matters */
    float *inp = frand(n, -0.5f, 1.5f), *w = frand((size_t)C, 0.5f, 1.5f);
    float *b = centered ? frand((size_t)C, -1, 1) : NULL;
    float *out = fconst(n, 777.0f), *mean = fconst((size_t)N, 777.0f), *rstd = fconst((size_t)N, 777.0f);
    mt_norm_fwd_args fa = {out, centered ? mean : NULL, rstd, inp, w, b, N, C, eps};
    if (centered)
        OK(MT_BE_CALL(&be, layernorm_fwd, &fa));
    else
        OK(MT_BE_CALL(&be, rmsnorm_fwd, &fa));
    norm_ctx c = {dcopy(inp, n), dcopy(w, (size_t)C), b ? dcopy(b, (size_t)C) : NULL, NULL, dzeros(n), N, C,
                  centered, (double)eps};
    double *want = dzeros(n), *wmean = dzeros((size_t)N), *wrstd = dzeros((size_t)N);
    ref_norm(want, wmean, wrstd, c.inp, c.w, c.b, N, C, c.eps, centered);
    /* C <= 300 terms per row statistic, accumulated in double by the backend: rel 1e-5 is
     * loose; the outputs are O(1) products of three fp32 roundings */
    snprintf(what, sizeof what, "%s_fwd out N=%d C=%d", name, N, C);
    check_close(what, out, want, n, 1e-5, 1e-6);
    snprintf(what, sizeof what, "%s_fwd rstd N=%d C=%d", name, N, C);
    check_close(what, rstd, wrstd, (size_t)N, 1e-6, 0);
    if (centered) {
        snprintf(what, sizeof what, "%s_fwd mean N=%d C=%d", name, N, C);
        check_close(what, mean, wmean, (size_t)N, 1e-6, 1e-6);
    }

    float *g = frand(n, -1, 1);
    c.g = dcopy(g, n);
    float *dinp0 = frand(n, -1, 1), *dw0 = frand((size_t)C, -1, 1), *db0 = frand((size_t)C, -1, 1);
    float *dinp = fcopy(dinp0, n), *dw = fcopy(dw0, (size_t)C), *db = fcopy(db0, (size_t)C);
    mt_norm_bwd_args ba = {dinp, dw, centered ? db : NULL, g, inp, w, centered ? mean : NULL, rstd, N, C};
    if (centered)
        OK(MT_BE_CALL(&be, layernorm_bwd, &ba));
    else
        OK(MT_BE_CALL(&be, rmsnorm_bwd, &ba));
    snprintf(what, sizeof what, "%s_bwd dinp(+=) N=%d C=%d", name, N, C);
    fd_check(what, norm_loss, &c, c.inp, n, dinp, dinp0, 400, 1e-4, 1e-5);
    snprintf(what, sizeof what, "%s_bwd dweight(+=) N=%d C=%d", name, N, C);
    fd_check(what, norm_loss, &c, c.w, (size_t)C, dw, dw0, 400, 1e-4, 1e-5);
    if (centered) {
        snprintf(what, sizeof what, "%s_bwd dbias(+=) N=%d C=%d", name, N, C);
        fd_check(what, norm_loss, &c, c.b, (size_t)C, db, db0, 400, 1e-4, 1e-5);
    } else {
        CHECK(memcmp(db, db0, (size_t)C * sizeof *db) == 0); /* rmsnorm: no bias, untouched */
    }
    free(inp), free(w), free(b), free(out), free(mean), free(rstd), free(g), free(dinp0), free(dw0), free(db0);
    free(dinp), free(dw), free(db), free(want), free(wmean), free(wrstd);
    free(c.inp), free(c.w), free(c.b), free(c.g), free(c.out);
}

/* ---------------- gelu / swiglu ---------------- */

static double ref_gelu(double x) {
    const double k = sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double ref_silu(double x) { return x / (1.0 + exp(-x)); }

typedef struct {
    double *x, *g, *out;
    size_t n;
    int F; /* swiglu: rows of 2F inputs; 0 = gelu; -1 = squared ReLU */
} ew_ctx;

static double ref_squared_relu(double x) { return x > 0 ? x * x : 0.0; }

static double ew_loss(void *p) {
    ew_ctx *c = p;
    if (c->F <= 0) {
        for (size_t i = 0; i < c->n; i++) c->out[i] = c->F ? ref_squared_relu(c->x[i]) : ref_gelu(c->x[i]);
        return dot_gd(c->g, c->out, c->n);
    }
    const size_t N = c->n / (size_t)c->F;
    for (size_t r = 0; r < N; r++)
        for (int j = 0; j < c->F; j++)
            c->out[r * c->F + j] = ref_silu(c->x[r * 2 * c->F + j]) * c->x[r * 2 * c->F + c->F + j];
    return dot_gd(c->g, c->out, c->n);
}

static void test_gelu(void) {
    const size_t n = 1003;
    float *x = frand(n, -6, 6);
    x[0] = 0.0f, x[1] = -12.0f, x[2] = 12.0f, x[3] = 1e-4f, x[4] = -1e-4f, x[5] = -3.0f;
    float *out = fconst(n, 777.0f);
    mt_gelu_fwd_args fa = {out, x, n};
    OK(MT_BE_CALL(&be, gelu_fwd, &fa));
    ew_ctx c = {dcopy(x, n), NULL, dzeros(n), n, 0};
    double *want = dzeros(n);
    for (size_t i = 0; i < n; i++) want[i] = ref_gelu(c.x[i]);
    /* elementwise: one polynomial expf (~2 ulp) and ~8 roundings; atol for the tiny negative
     * tail (x=-12: gelu ~ -1e-30 level) */
    check_close("gelu_fwd", out, want, n, 2e-6, 1e-7);
    float *g = frand(n, -1, 1), *dinp = fconst(n, 777.0f);
    c.g = dcopy(g, n);
    mt_gelu_bwd_args ba = {dinp, g, x, n};
    OK(MT_BE_CALL(&be, gelu_bwd, &ba));
    fd_check("gelu_bwd dinp(=)", ew_loss, &c, c.x, n, dinp, NULL, n, 1e-4, 1e-6);
    free(x), free(out), free(g), free(dinp), free(want), free(c.x), free(c.g), free(c.out);
}

/* squared ReLU (Megatron's squared_relu): the forward is one fp32 product of exact inputs, so within one
 * rounding (rtol 1e-7) of the double reference; the backward against central differences (x = 0 exactly:
 * the kink, fd = g h / 2 ~ 5e-7 vs analytic 0, inside atol), then once more in place (dinp == dout) */
static void test_squared_relu(void) {
    const size_t n = 1003;
    float *x = frand(n, -6, 6);
    x[0] = 0.0f, x[1] = -12.0f, x[2] = 12.0f, x[3] = 1e-4f, x[4] = -1e-4f;
    float *out = fconst(n, 777.0f);
    mt_squared_relu_fwd_args fa = {out, x, n};
    OK(MT_BE_CALL(&be, squared_relu_fwd, &fa));
    ew_ctx c = {dcopy(x, n), NULL, dzeros(n), n, -1};
    double *want = dzeros(n);
    for (size_t i = 0; i < n; i++) want[i] = ref_squared_relu(c.x[i]);
    check_close("squared_relu_fwd", out, want, n, 1e-7, 0.0);
    float *g = frand(n, -1, 1), *dinp = fconst(n, 777.0f);
    c.g = dcopy(g, n);
    mt_squared_relu_bwd_args ba = {dinp, g, x, n};
    OK(MT_BE_CALL(&be, squared_relu_bwd, &ba));
    fd_check("squared_relu_bwd dinp(=)", ew_loss, &c, c.x, n, dinp, NULL, n, 1e-4, 1e-6);
    mt_squared_relu_bwd_args bi = {g, g, x, n}; /* in place, as the model's dense MLP backward runs it */
    OK(MT_BE_CALL(&be, squared_relu_bwd, &bi));
    CHECKF(memcmp(g, dinp, n * sizeof *g) == 0, "squared_relu_bwd in place differs from out of place");
    free(x), free(out), free(g), free(dinp), free(want), free(c.x), free(c.g), free(c.out);
}

static void test_swiglu(int N, int F) {
    char what[96];
    const size_t nI = (size_t)N * 2 * F, nO = (size_t)N * F;
    float *x = frand(nI, -4, 4), *out = fconst(nO, 777.0f);
    mt_swiglu_fwd_args fa = {out, x, N, F};
    OK(MT_BE_CALL(&be, swiglu_fwd, &fa));
    ew_ctx c = {dcopy(x, nI), NULL, dzeros(nO), nO, F};
    double *want = dzeros(nO);
    for (int r = 0; r < N; r++)
        for (int j = 0; j < F; j++)
            want[(size_t)r * F + j] = ref_silu(c.x[(size_t)r * 2 * F + j]) * c.x[(size_t)r * 2 * F + F + j];
    snprintf(what, sizeof what, "swiglu_fwd N=%d F=%d", N, F);
    check_close(what, out, want, nO, 2e-6, 1e-7);
    float *g = frand(nO, -1, 1), *dinp = fconst(nI, 777.0f);
    c.g = dcopy(g, nO);
    mt_swiglu_bwd_args ba = {dinp, g, x, N, F};
    OK(MT_BE_CALL(&be, swiglu_bwd, &ba));
    snprintf(what, sizeof what, "swiglu_bwd dinp(=) N=%d F=%d", N, F);
    fd_check(what, ew_loss, &c, c.x, nI, dinp, NULL, 600, 1e-4, 1e-6);
    free(x), free(out), free(g), free(dinp), free(want), free(c.x), free(c.g), free(c.out);
}

/* ---------------- add / sum / cast ---------------- */

static void test_add_sum_cast(void) {
    const size_t n = 70001; /* > the parallel threshold, odd */
    float *a = frand(n, -1, 1), *b = frand(n, -1, 1), *out = fconst(n, 777.0f);
    mt_add_args aa = {out, a, b, n};
    OK(MT_BE_CALL(&be, add, &aa));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != a[i] + b[i]; /* one fp32 rounding: exact */
    CHECKF(bad == 0, "add: %zu entries differ from a + b", bad);
    mt_scale_args sa = {out, n, 0.37f};
    OK(MT_BE_CALL(&be, scale, &sa));
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != (a[i] + b[i]) * 0.37f; /* one fp32 rounding: exact */
    CHECKF(bad == 0, "scale: %zu entries differ from x * 0.37", bad);

    const size_t sizes[] = {5, 100003};
    for (int si = 0; si < 2; si++)
        for (int sq = 0; sq < 2; sq++) {
            const size_t m = sizes[si];
            float *x = frand(m, -1, 1);
            double want = 1.5; /* the op accumulates into *out */
            for (size_t i = 0; i < m; i++) want += sq ? (double)x[i] * x[i] : (double)x[i];
            float acc = 1.5f;
            mt_sum_args sa = {&acc, x, m, sq};
            OK(MT_BE_CALL(&be, sum, &sa));
            /* accumulated in double by the backend, one final fp32 rounding: 1e-6 relative,
             * plus an absolute 1e-6 * n^0.5 for the signed sum that cancels */
            CHECK_NEAR(acc, want, 1e-6 * sqrt((double)m), 1e-6);
            free(x);
        }

    float *src = frand(n, -1, 1), *dst = fconst(n, 777.0f);
    mt_cast_args ca = {dst, src, n};
    OK(MT_BE_CALL(&be, cast_f32_to_act, &ca));
    CHECK(memcmp(dst, src, n * sizeof *dst) == 0);
    free(a), free(b), free(out), free(src), free(dst);
}

/* ---------------- rope ---------------- */

/* Megatron-Core's apply_rotary_pos_emb written out: t_rot = t[..., :R] with R = rot (0: D), the
 * rest passed through; inv_freq[i] = theta^(-2i/R); emb = cat(freqs, freqs) with rotate_half =
 * cat(-x2, x1) (pairs (i, i + R/2)), or, interleaved, emb = freqs repeated per pair with
 * rotate_half = stack(-x[1::2], x[::2]) (pairs (2i, 2i + 1)); out = t * cos(emb) + rotate_half(t) *
 * sin(emb). */
static int g_rope_rot, g_rope_interleaved; /* the variant under test (0, 0: whole head, halves) */
static void ref_rope(double *x, int B, int T, int H, int D, int stride, int pos_offset, double theta, int inverse) {
    const int R = g_rope_rot > 0 ? g_rope_rot : D, half = R / 2;
    double *rot = malloc((size_t)R * sizeof *rot), *emb = malloc((size_t)R * sizeof *emb);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                double *v = x + ((size_t)b * T + t) * stride + (size_t)h * D;
                for (int j = 0; j < R; j++) {
                    const int i = g_rope_interleaved ? j / 2 : j % half; /* the frequency of channel j */
                    emb[j] = (double)(pos_offset + t) * pow(theta, -2.0 * i / R) * (inverse ? -1 : 1);
                    if (g_rope_interleaved) rot[j] = j % 2 ? v[j - 1] : -v[j + 1];
                    else rot[j] = j < half ? -v[j + half] : v[j - half];
                }
                for (int j = 0; j < R; j++) v[j] = v[j] * cos(emb[j]) + rot[j] * sin(emb[j]);
            }
    free(rot), free(emb);
}

typedef struct {
    double *x, *work, *g;
    size_t n;
    int B, T, H, D, stride, pos_offset;
    double theta;
} rope_ctx;

static double rope_loss(void *p) {
    rope_ctx *c = p;
    memcpy(c->work, c->x, c->n * sizeof *c->work);
    ref_rope(c->work, c->B, c->T, c->H, c->D, c->stride, c->pos_offset, c->theta, 0);
    return dot_gd(c->g, c->work, c->n);
}

static void test_rope(int B, int T, int H, int D, int extra, int pos_offset) {
    char what[128];
    const int stride = H * D + extra;
    const size_t n = (size_t)B * T * stride;
    const float theta = 10000.0f;
    float *x0 = frand(n, -1, 1), *x = fcopy(x0, n);
    mt_rope_args ra = {x, B, T, H, D, stride, pos_offset, theta, 0, g_rope_rot, g_rope_interleaved, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    OK(MT_BE_CALL(&be, rope, &ra));
    double *want = dcopy(x0, n);
    ref_rope(want, B, T, H, D, stride, pos_offset, theta, 0);
    /* a rotation: two products and a sum per entry, angle computed in double: ~2 ulp */
    snprintf(what, sizeof what, "rope fwd B=%d T=%d H=%d D=%d pos_offset=%d rot=%d interleaved=%d", B, T, H, D,
             pos_offset, g_rope_rot, g_rope_interleaved);
    check_close(what, x, want, n, 1e-6, 1e-6);
    size_t untouched_bad = 0; /* columns past H*D must be left alone */
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int j = H * D; j < stride; j++) untouched_bad += x[r * stride + j] != x0[r * stride + j];
    CHECKF(untouched_bad == 0, "rope touched %zu entries beyond n_heads * D", untouched_bad);
    /* inverse after forward = identity, up to fp32 rotation rounding */
    ra.inverse = 1;
    OK(MT_BE_CALL(&be, rope, &ra));
    double *orig = dcopy(x0, n);
    snprintf(what, sizeof what, "rope fwd then inverse = identity B=%d T=%d H=%d D=%d", B, T, H, D);
    check_close(what, x, orig, n, 1e-6, 1e-6);
    /* backward (inverse applied to g) = d/dx sum(g * rope(x)) */
    float *g = frand(n, -1, 1), *dx = fcopy(g, n);
    mt_rope_args rb = {dx, B, T, H, D, stride, pos_offset, theta, 1, g_rope_rot, g_rope_interleaved, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    OK(MT_BE_CALL(&be, rope, &rb));
    rope_ctx c = {dcopy(x0, n), dzeros(n), dcopy(g, n), n, B, T, H, D, stride, pos_offset, (double)theta};
    /* the extra columns of g pass through unchanged; rope_loss has identity there too */
    snprintf(what, sizeof what, "rope bwd (inverse) B=%d T=%d H=%d D=%d", B, T, H, D);
    fd_check(what, rope_loss, &c, c.x, n, dx, NULL, 400, 1e-4, 1e-5);
    free(x0), free(x), free(want), free(orig), free(g), free(dx), free(c.x), free(c.work), free(c.g);
}

/* ---------------- attention ---------------- */

/* Naive causal softmax attention in double: the full score row per query, no tiling. lse (B, H, T)
 * gets log sum_j exp(s_j) of the scaled scores (the flash kernel's saved statistic). */
static void ref_attention(double *out, double *lse, const double *qkv, int B, int T, int H, int KV, int D) {
    const int S3 = (H + 2 * KV) * D, group = H / KV;
    const double scale = 1.0 / sqrt((double)D);
    double *p = malloc((size_t)T * sizeof *p);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int kvh = h / group;
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * S3 + (size_t)h * D;
                double mx = -1e300;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * S3 + (size_t)(H + kvh) * D;
                    double s = 0.0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d];
                    p[j] = s * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                double sum = 0.0;
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                if (lse) lse[((size_t)b * H + h) * T + i] = mx + log(sum);
                double *o = out + ((size_t)b * T + i) * H * D + (size_t)h * D;
                for (int d = 0; d < D; d++) o[d] = 0.0;
                for (int j = 0; j <= i; j++) {
                    p[j] /= sum;
                    const double *v = qkv + ((size_t)b * T + j) * S3 + (size_t)(H + KV + kvh) * D;
                    for (int d = 0; d < D; d++) o[d] += p[j] * v[d];
                }
            }
        }
    free(p);
}

/* Naive backward in double (the old kernel's algorithm: a full probability row per query):
 * dp_j = dO . v_j, ds_j = p_j (dp_j - sum_l p_l dp_l) scale, dq = sum ds_j k_j,
 * dk_j += ds_j q, dv_j += p_j dO. dqkv (B, T, (H + 2KV) D) is overwritten. */
static void ref_attention_bwd(double *dqkv, const double *qkv, const double *dout, int B, int T, int H, int KV,
                              int D) {
    const int S3 = (H + 2 * KV) * D, group = H / KV;
    const double scale = 1.0 / sqrt((double)D);
    double *p = malloc((size_t)T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
    memset(dqkv, 0, (size_t)B * T * S3 * sizeof *dqkv);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int kvh = h / group;
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * S3 + (size_t)h * D;
                const double *dO = dout + ((size_t)b * T + i) * H * D + (size_t)h * D;
                double mx = -1e300, sum = 0.0, dot = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * S3 + (size_t)(H + kvh) * D;
                    const double *v = k + (size_t)KV * D;
                    double s = 0.0, e = 0.0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d], e += dO[d] * v[d];
                    p[j] = s * scale;
                    dp[j] = e;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j <= i; j++) p[j] /= sum, dot += p[j] * dp[j];
                double *dq = dqkv + ((size_t)b * T + i) * S3 + (size_t)h * D;
                for (int j = 0; j <= i; j++) {
                    const double ds = p[j] * (dp[j] - dot) * scale;
                    const size_t kr = ((size_t)b * T + j) * S3;
                    const double *k = qkv + kr + (size_t)(H + kvh) * D;
                    double *dk = dqkv + kr + (size_t)(H + kvh) * D, *dv = dk + (size_t)KV * D;
                    for (int d = 0; d < D; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                        dv[d] += p[j] * dO[d];
                    }
                }
            }
        }
    free(p);
    free(dp);
}

typedef struct {
    double *qkv, *g, *out;
    int B, T, H, KV, D;
} att_ctx;

static double att_loss(void *p) {
    att_ctx *c = p;
    ref_attention(c->out, NULL, c->qkv, c->B, c->T, c->H, c->KV, c->D);
    return dot_gd(c->g, c->out, (size_t)c->B * c->T * c->H * c->D);
}

/* worst |got - want| / max|want| over n entries (printed with MT_TEST_VERBOSE=1) */
static double worst_rel(const float *got, const double *want, size_t n) {
    double e = 0.0, mx = 1e-300;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        e = d > e ? d : e;
        mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
    }
    return e / mx;
}

/* Flash attention forward against the naive double reference (out and lse), backward against
 * the naive double backward (every entry) and central finite differences of the double forward
 * (fd_samples entries). Tiles: 64 query x 128 key rows, so T = 1, 7, 64, 65, 130, 300 cover a
 * single partial tile, an exact query tile, a one-row tail, query rows that see none of a key
 * tile, and several partial diagonals. */
static void test_attention(int B, int T, int H, int KV, int D, size_t fd_samples) {
    char what[128];
    const size_t nQKV = (size_t)B * T * (H + 2 * KV) * D, nO = (size_t)B * T * H * D, nL = (size_t)B * H * T;
    /* scale 2 so the softmax is far from uniform */
    float *qkv = frand(nQKV, -2, 2), *out = fconst(nO, 777.0f), *lse = fconst(nL, 777.0f);
    mt_attention_fwd_args fa = {out, lse, qkv, B, T, H, KV, D, 0};
    OK(MT_BE_CALL(&be, attention_fwd, &fa));
    att_ctx c = {dcopy(qkv, nQKV), NULL, dzeros(nO), B, T, H, KV, D};
    double *want = dzeros(nO), *wlse = dzeros(nL);
    ref_attention(want, wlse, c.qkv, B, T, H, KV, D);
    /* scores: D-term dot products; exp (~2 ulp), a T-term sum and the online rescaling
     * (one extra rounding per key tile); out: T-term sum */
    snprintf(what, sizeof what, "attention_fwd out B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    check_close(what, out, want, nO, 1e-5, 1e-5);
    snprintf(what, sizeof what, "attention_fwd lse B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    check_close(what, lse, wlse, nL, 1e-5, 1e-6);
    const double e_out = worst_rel(out, want, nO), e_lse = worst_rel(lse, wlse, nL);

    float *g = frand(nO, -1, 1), *dqkv = fconst(nQKV, 777.0f), *delta = fconst(nL, 777.0f);
    c.g = dcopy(g, nO);
    mt_attention_bwd_args ba = {dqkv, delta, g, qkv, out, lse, B, T, H, KV, D, 0};
    OK(MT_BE_CALL(&be, attention_bwd, &ba));
    double *wd = dzeros(nQKV);
    ref_attention_bwd(wd, c.qkv, c.g, B, T, H, KV, D);
    snprintf(what, sizeof what, "attention_bwd dqkv vs naive B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    check_close(what, dqkv, wd, nQKV, 1e-4, 1e-5);
    snprintf(what, sizeof what, "attention_bwd dqkv(=) vs FD B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    fd_check(what, att_loss, &c, c.qkv, nQKV, dqkv, NULL, fd_samples, 1e-4, 1e-5);
    if (verbose)
        printf("  attention B=%d T=%d H=%d KV=%d D=%d: worst |diff|/max vs double: out %.2e lse %.2e dqkv %.2e\n", B,
               T, H, KV, D, e_out, e_lse, worst_rel(dqkv, wd, nQKV));
    free(qkv), free(out), free(lse), free(g), free(dqkv), free(delta), free(want), free(wlse), free(wd);
    free(c.qkv), free(c.g), free(c.out);
}

/* Every op test of this file, on the backend `be` currently holds. */
static void test_all_ops(void) {
    test_matmul(7, 5, 3, 1);
    test_matmul(7, 5, 3, 0);
    test_matmul(1, 1, 1, 1);
    test_matmul(33, 20, 17, 1);
    test_matmul(64, 48, 256, 1); /* large enough to be sliced over the threads */
    test_matmul(130, 70, 40, 0);

    test_norm(7, 5, 1);
    test_norm(16, 77, 1);
    test_norm(3, 300, 1);
    test_norm(7, 5, 0);
    test_norm(16, 77, 0);
    test_norm(3, 300, 0);

    test_gelu();
    test_squared_relu();
    test_swiglu(7, 5);
    test_swiglu(9, 33);
    test_add_sum_cast();

    test_rope(2, 5, 3, 8, 4, 3);
    test_rope(1, 3, 2, 64, 0, 5000); /* long-context positions: angles ~5e3 rad */
    test_rope(3, 4, 1, 2, 2, 0);
    /* Megatron's variants: partial rotary (--rotary-percent 0.5: 4 of 8 channels, the other 4 left
       alone, which the reference's pass-through checks), interleaved pairs, and both */
    g_rope_rot = 4;
    test_rope(2, 5, 3, 8, 4, 3);
    g_rope_rot = 0, g_rope_interleaved = 1;
    test_rope(2, 5, 3, 8, 4, 3);
    g_rope_rot = 6;
    test_rope(1, 3, 2, 10, 0, 7);
    g_rope_rot = 0, g_rope_interleaved = 0;

    test_attention(2, 7, 4, 2, 8, 600);   /* GQA, 2 query heads per kv head */
    test_attention(2, 7, 4, 1, 8, 600);   /* multi-query */
    test_attention(1, 9, 3, 3, 5, 600);   /* MHA, odd D */
    test_attention(1, 1, 2, 1, 4, 600);   /* T = 1 */
    test_attention(1, 64, 2, 2, 8, 200);  /* exactly one 64-row query tile */
    test_attention(1, 65, 4, 2, 8, 200);  /* one-row tail tile, GQA */
    test_attention(2, 130, 4, 2, 8, 150); /* three tiles, partial last one, GQA */
    test_attention(1, 300, 2, 1, 16, 60); /* five tiles, multi-query */
}

int main(void) {
    /* all cores, then 3 threads: uneven GEMM slices and work splits whatever the machine */
    CPU_OP_CHECK_MAIN(test_expf, test_all_ops);
}
