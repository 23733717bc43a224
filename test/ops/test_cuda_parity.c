/* test_cuda_parity.c — ggml-style backend parity: every op the CUDA backend has is run on the
 * CUDA backend and on the CPU backend (the reference) from the same inputs, and the results
 * are compared by normalised MSE, nmse = sum((cuda - cpu)^2) / sum(cpu^2).
 *
 * Inputs are drawn on the host and rounded to bf16 first, so both backends see bit-identical
 * values (the CPU backend gets them as fp32, the CUDA backend as bf16). What remains is
 *  - bf16 rounding of CUDA's activation outputs: relative error <= 2^-8 (8-bit significand),
 *    mean square ~ 3e-6 for well-spread values  -> tolerance TOL_ACT = 1e-4. (Checked on the
 *    CPU by a stand-in backend that rounds the reference's act outputs to bf16: nmse 2.8e-6
 *    typical, 7.3e-6 worst over these shapes, so 1e-4 leaves >10x margin and still fails on
 *    any real indexing or formula error, which gives nmse ~ 1);
 *  - fp32 summation order for f32 outputs (weight gradients, mean/rstd): the products of bf16
 *    values are exact in fp32, only the order of the fp32 sums differs -> nmse ~ 1e-12;
 *    tolerance TOL_F32 = 1e-6 still catches any wrong index or missing term.
 * Accumulating outputs (+=) start from random values; for f32 gradients the increment
 * (result - initial) is compared, so a small wrong increment cannot hide under a large start.
 *
 * Runs here too: before anything else it checks that mt_backend_cuda_create fails cleanly
 * (MT_ERR_CUDA or MT_ERR_UNSUPPORTED, message naming --backend cpu) when there is no GPU.
 * Then, without a GPU, it exits 77 with "skipped: <reason>" as its last line. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/status.h"
#include "test/test.h"

#define TOL_ACT 1e-4
#define TOL_F32 1e-6

/* ---- host helpers ---- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static uint16_t f32_to_bf16(float f) { /* round to nearest even (no NaNs in this test) */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

/* n values scale * U[-1,1) + offset, rounded to bf16 so both backends see the same numbers */
static float *host_rand(size_t n, float scale, float offset) {
    float *x = malloc(n * sizeof *x + 1);
    for (size_t i = 0; i < n; i++) x[i] = round_bf16(scale * frand() + offset);
    return x;
}

static double nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (!(num == num)) return INFINITY;
    return den > 0 ? num / den : num;
}

/* A tensor on both backends. */
typedef struct {
    void *cpu, *gpu;
    size_t n;
    mt_dtype dtype_gpu; /* MT_F32 for f32 tensors, cuda->act (bf16) for act tensors */
} pair_t;

static mt_backend g_cpu, g_cuda;

static void up(mt_backend *be, void *dev, const float *host, size_t n, mt_dtype dt) {
    if (dt == MT_F32) {
        CHECK(be->i->copy_h2d(be, dev, host, n * 4) == MT_OK);
        return;
    }
    uint16_t *h = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) h[i] = f32_to_bf16(host[i]);
    CHECK(be->i->copy_h2d(be, dev, h, n * 2) == MT_OK);
    free(h);
}

static void down(mt_backend *be, float *host, const void *dev, size_t n, mt_dtype dt) {
    if (dt == MT_F32) {
        CHECKF(be->i->copy_d2h(be, host, dev, n * 4) == MT_OK, "%s", mt_last_error());
        return;
    }
    uint16_t *h = malloc(n * 2 + 2);
    CHECKF(be->i->copy_d2h(be, h, dev, n * 2) == MT_OK, "%s", mt_last_error());
    for (size_t i = 0; i < n; i++) host[i] = bf16_to_f32(h[i]);
    free(h);
}

/* is_act: the tensor is in the backend's compute dtype (act), else always f32 */
static pair_t pair_new(const float *host, size_t n, int is_act) {
    pair_t p = {NULL, NULL, n, is_act ? g_cuda.act : MT_F32};
    mt_dtype dc = is_act ? g_cpu.act : MT_F32;
    if (g_cpu.i->alloc(&g_cpu, n * mt_dtype_bytes(dc), &p.cpu) != MT_OK ||
        g_cuda.i->alloc(&g_cuda, n * mt_dtype_bytes(p.dtype_gpu), &p.gpu) != MT_OK) {
        fprintf(stderr, "alloc failed: %s\n", mt_last_error());
        exit(1);
    }
    if (host) {
        up(&g_cpu, p.cpu, host, n, dc);
        up(&g_cuda, p.gpu, host, n, p.dtype_gpu);
    }
    return p;
}

static void pair_free(pair_t *p) {
    g_cpu.i->free(&g_cpu, p->cpu);
    g_cuda.i->free(&g_cuda, p->gpu);
}

/* Downloads both sides; if init != NULL compares the increments (result - init). */
static void compare(const char *what, const pair_t *p, int is_act, const float *init, double tol) {
    float *c = malloc(p->n * sizeof *c + 1), *g = malloc(p->n * sizeof *g + 1);
    down(&g_cpu, c, p->cpu, p->n, is_act ? g_cpu.act : MT_F32);
    down(&g_cuda, g, p->gpu, p->n, p->dtype_gpu);
    if (init)
        for (size_t i = 0; i < p->n; i++) {
            c[i] -= init[i];
            g[i] -= init[i];
        }
    double e = nmse(g, c, p->n);
    printf("    %-30s nmse %.3e (tol %.0e) %s\n", what, e, tol, e < tol ? "ok" : "FAIL");
    CHECKF(e < tol, "%s: nmse %.3e >= %.0e", what, e, tol);
    free(c);
    free(g);
}

#define RUN_BOTH(op, args_cpu, args_gpu)                                                     \
    do {                                                                                     \
        mt_status s1_ = MT_BE_CALL(&g_cpu, op, &(args_cpu));                                 \
        CHECKF(s1_ == MT_OK, "cpu %s: %s", #op, mt_last_error());                           \
        mt_status s2_ = MT_BE_CALL(&g_cuda, op, &(args_gpu));                                \
        CHECKF(s2_ == MT_OK, "cuda %s: %s", #op, mt_last_error());                          \
        if (s2_ == MT_OK) {                                                                  \
            s2_ = g_cuda.i->sync(&g_cuda);                                                   \
            CHECKF(s2_ == MT_OK, "cuda %s (sync): %s", #op, mt_last_error());               \
        }                                                                                    \
    } while (0)

/* ---- matmul ---- */

static void test_matmul(int M, int N, int K, int with_bias, int accumulate_dinp) {
    printf("  matmul M=%d N=%d K=%d bias=%d accumulate_dinp=%d\n", M, N, K, with_bias,
           accumulate_dinp);
    float ws = 1.0f / sqrtf((float)K);
    float *h_inp = host_rand((size_t)M * K, 1.0f, 0.0f);
    float *h_w = host_rand((size_t)N * K, ws, 0.0f);
    float *h_b = host_rand((size_t)N, 0.5f, 0.0f);
    float *h_dout = host_rand((size_t)M * N, 1.0f, 0.0f);
    float *h_dinp0 = host_rand((size_t)M * K, 1.0f, 0.0f);
    float *h_dw0 = host_rand((size_t)N * K, 1.0f, 0.0f);
    float *h_db0 = host_rand((size_t)N, 1.0f, 0.0f);

    pair_t inp = pair_new(h_inp, (size_t)M * K, 1), w = pair_new(h_w, (size_t)N * K, 1);
    pair_t b = pair_new(h_b, (size_t)N, 1), out = pair_new(NULL, (size_t)M * N, 1);
    pair_t dout = pair_new(h_dout, (size_t)M * N, 1), dinp = pair_new(h_dinp0, (size_t)M * K, 1);
    pair_t dw = pair_new(h_dw0, (size_t)N * K, 0), db = pair_new(h_db0, (size_t)N, 0);

    mt_matmul_fwd_args fc = {out.cpu, inp.cpu, w.cpu, with_bias ? b.cpu : NULL, M, N, K};
    mt_matmul_fwd_args fg = {out.gpu, inp.gpu, w.gpu, with_bias ? b.gpu : NULL, M, N, K};
    RUN_BOTH(matmul_fwd, fc, fg);
    compare("fwd out (act)", &out, 1, NULL, TOL_ACT);

    mt_matmul_bwd_args bc = {dinp.cpu, dw.cpu, with_bias ? db.cpu : NULL, dout.cpu, inp.cpu, w.cpu,
                             M, N, K, accumulate_dinp};
    mt_matmul_bwd_args bg = {dinp.gpu, dw.gpu, with_bias ? db.gpu : NULL, dout.gpu, inp.gpu, w.gpu,
                             M, N, K, accumulate_dinp};
    RUN_BOTH(matmul_bwd, bc, bg);
    compare(accumulate_dinp ? "bwd dinp += (act)" : "bwd dinp = (act)", &dinp, 1, NULL, TOL_ACT);
    compare("bwd dweight += (f32, increment)", &dw, 0, h_dw0, TOL_F32);
    if (with_bias) compare("bwd dbias += (f32, increment)", &db, 0, h_db0, TOL_F32);

    pair_t *all[] = {&inp, &w, &b, &out, &dout, &dinp, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_inp); free(h_w); free(h_b); free(h_dout); free(h_dinp0); free(h_dw0); free(h_db0);
}

/* ---- layernorm / rmsnorm ---- */

static void test_norm(int rms, int N, int C) {
    const char *name = rms ? "rmsnorm" : "layernorm";
    printf("  %s N=%d C=%d\n", name, N, C);
    float *h_inp = host_rand((size_t)N * C, 2.0f, 0.5f); /* nonzero mean, spread 2 */
    float *h_w = host_rand((size_t)C, 0.2f, 1.0f);
    float *h_b = host_rand((size_t)C, 0.2f, 0.0f);
    float *h_dout = host_rand((size_t)N * C, 1.0f, 0.0f);
    float *h_dinp0 = host_rand((size_t)N * C, 1.0f, 0.0f);
    float *h_dw0 = host_rand((size_t)C, 1.0f, 0.0f);
    float *h_db0 = host_rand((size_t)C, 1.0f, 0.0f);
    float *h_mean = malloc((size_t)N * sizeof(float)), *h_rstd = malloc((size_t)N * sizeof(float));
    const float eps = 1e-5f;

    pair_t inp = pair_new(h_inp, (size_t)N * C, 1), w = pair_new(h_w, (size_t)C, 1);
    pair_t b = pair_new(h_b, (size_t)C, 1), out = pair_new(NULL, (size_t)N * C, 1);
    pair_t mean = pair_new(NULL, (size_t)N, 0), rstd = pair_new(NULL, (size_t)N, 0);
    pair_t dout = pair_new(h_dout, (size_t)N * C, 1), dinp = pair_new(h_dinp0, (size_t)N * C, 1);
    pair_t dw = pair_new(h_dw0, (size_t)C, 0), db = pair_new(h_db0, (size_t)C, 0);

    mt_norm_fwd_args fc = {out.cpu, rms ? NULL : mean.cpu, rstd.cpu, inp.cpu, w.cpu,
                           rms ? NULL : b.cpu, N, C, eps};
    mt_norm_fwd_args fg = {out.gpu, rms ? NULL : mean.gpu, rstd.gpu, inp.gpu, w.gpu,
                           rms ? NULL : b.gpu, N, C, eps};
    mt_status s = rms ? MT_BE_CALL(&g_cpu, rmsnorm_fwd, &fc) : MT_BE_CALL(&g_cpu, layernorm_fwd, &fc);
    if (s == MT_ERR_UNSUPPORTED) { /* the reference is still being written: say so, don't fail */
        printf("    not compared: %s\n", mt_last_error());
        goto done;
    }
    CHECKF(s == MT_OK, "cpu %s_fwd: %s", name, mt_last_error());
    s = rms ? MT_BE_CALL(&g_cuda, rmsnorm_fwd, &fg) : MT_BE_CALL(&g_cuda, layernorm_fwd, &fg);
    CHECKF(s == MT_OK, "cuda %s_fwd: %s", name, mt_last_error());
    CHECKF(g_cuda.i->sync(&g_cuda) == MT_OK, "cuda %s_fwd (sync): %s", name, mt_last_error());
    compare("fwd out (act)", &out, 1, NULL, TOL_ACT);
    if (!rms) compare("fwd mean (f32)", &mean, 0, NULL, TOL_F32);
    compare("fwd rstd (f32)", &rstd, 0, NULL, TOL_F32);

    /* backward from the CPU's saved statistics on both sides: isolates the backward kernel */
    if (!rms) down(&g_cpu, h_mean, mean.cpu, (size_t)N, MT_F32);
    down(&g_cpu, h_rstd, rstd.cpu, (size_t)N, MT_F32);
    if (!rms) up(&g_cuda, mean.gpu, h_mean, (size_t)N, MT_F32);
    up(&g_cuda, rstd.gpu, h_rstd, (size_t)N, MT_F32);

    mt_norm_bwd_args bc = {dinp.cpu, dw.cpu, rms ? NULL : db.cpu, dout.cpu, inp.cpu, w.cpu,
                           rms ? NULL : mean.cpu, rstd.cpu, N, C};
    mt_norm_bwd_args bg = {dinp.gpu, dw.gpu, rms ? NULL : db.gpu, dout.gpu, inp.gpu, w.gpu,
                           rms ? NULL : mean.gpu, rstd.gpu, N, C};
    s = rms ? MT_BE_CALL(&g_cpu, rmsnorm_bwd, &bc) : MT_BE_CALL(&g_cpu, layernorm_bwd, &bc);
    CHECKF(s == MT_OK, "cpu %s_bwd: %s", name, mt_last_error());
    s = rms ? MT_BE_CALL(&g_cuda, rmsnorm_bwd, &bg) : MT_BE_CALL(&g_cuda, layernorm_bwd, &bg);
    CHECKF(s == MT_OK, "cuda %s_bwd: %s", name, mt_last_error());
    CHECKF(g_cuda.i->sync(&g_cuda) == MT_OK, "cuda %s_bwd (sync): %s", name, mt_last_error());
    compare("bwd dinp += (act)", &dinp, 1, NULL, TOL_ACT);
    compare("bwd dweight += (f32, increment)", &dw, 0, h_dw0, TOL_F32);
    if (!rms) compare("bwd dbias += (f32, increment)", &db, 0, h_db0, TOL_F32);

    /* determinism: the same backward again from the same start gives the same bits */
    {
        float *first = malloc((size_t)C * sizeof(float)), *second = malloc((size_t)C * sizeof(float));
        down(&g_cuda, first, dw.gpu, (size_t)C, MT_F32);
        up(&g_cuda, dw.gpu, h_dw0, (size_t)C, MT_F32);
        up(&g_cuda, dinp.gpu, h_dinp0, (size_t)N * C, g_cuda.act);
        s = rms ? MT_BE_CALL(&g_cuda, rmsnorm_bwd, &bg) : MT_BE_CALL(&g_cuda, layernorm_bwd, &bg);
        CHECKF(s == MT_OK, "cuda %s_bwd (repeat): %s", name, mt_last_error());
        down(&g_cuda, second, dw.gpu, (size_t)C, MT_F32);
        CHECKF(memcmp(first, second, (size_t)C * sizeof(float)) == 0,
               "%s_bwd dweight differs between two identical runs (not deterministic)", name);
        free(first);
        free(second);
    }
done:;
    pair_t *all[] = {&inp, &w, &b, &out, &mean, &rstd, &dout, &dinp, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_inp); free(h_w); free(h_b); free(h_dout); free(h_dinp0); free(h_dw0); free(h_db0);
    free(h_mean); free(h_rstd);
}

int main(void) {
    char why[512] = "";
    int have_gpu = mt_cuda_available(why, sizeof why);

    /* Runs everywhere (CI included): without a GPU, creating the CUDA backend must fail
     * cleanly, with a status (not a crash) and a message that names the way out. */
    if (!have_gpu) {
        mt_backend be;
        memset(&be, 0xAB, sizeof be);
        mt_clear_error();
        mt_status st = mt_backend_cuda_create(&be, 0);
        CHECKF(st == MT_ERR_CUDA || st == MT_ERR_UNSUPPORTED, "status %d (%s)", (int)st,
               mt_status_name(st));
        CHECK_STR_CONTAINS(mt_last_error(), "--backend cpu");
        CHECK(be.i == NULL && be.ctx == NULL);
        CHECK(why[0] != 0);
        printf("no-GPU path: mt_backend_cuda_create -> %s: %s\n", mt_status_name(st), mt_last_error());
        printf("%s: %d checks, %d failed\n", __FILE__, mt_test_checks, mt_test_failures);
        if (mt_test_failures) return 1;
        printf("skipped: %s\n", why);
        return 77;
    }

    printf("CUDA: %s\n", why);
    mt_status st = mt_backend_cuda_create(&g_cuda, 0);
    if (st != MT_OK) {
        fprintf(stderr, "mt_backend_cuda_create: %s\n", mt_last_error());
        return 1;
    }
    st = mt_backend_cpu_create(&g_cpu, 0);
    if (st != MT_OK) {
        fprintf(stderr, "mt_backend_cpu_create: %s\n", mt_last_error());
        return 1;
    }
    printf("cuda backend: %s (act %s, peak %.0f TFLOP/s); reference: %s\n", g_cuda.device_name,
           mt_dtype_name(g_cuda.act), g_cuda.peak_tflops, g_cpu.device_name);

    /* (M, N, K): aligned, odd, a single row, GPT-2 124M shapes */
    test_matmul(64, 128, 96, 1, 0);
    test_matmul(37, 51, 23, 1, 1);
    test_matmul(1, 7, 5, 0, 0);
    test_matmul(3, 1, 1, 1, 1);
    test_matmul(256, 2304, 768, 1, 0);  /* qkv */
    test_matmul(256, 768, 3072, 1, 1);  /* mlp proj */
    test_matmul(130, 203, 517, 0, 1);   /* odd everything, no bias */
    test_matmul(64, 128, 96, 1, 0);     /* same shape again: served from the plan cache */

    for (int rms = 0; rms <= 1; rms++) {
        test_norm(rms, 4, 768);
        test_norm(rms, 37, 23);
        test_norm(rms, 3, 5);
        test_norm(rms, 1, 1);
        test_norm(rms, 130, 1600);
        test_norm(rms, 2, 4099);
        test_norm(rms, 1024, 768);
    }

    mt_backend_destroy(&g_cuda);
    mt_backend_destroy(&g_cpu);
    TEST_MAIN_END();
}
