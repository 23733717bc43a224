/* test_cuda_parity.c — CUDA vs CPU parity (the method and the two tolerances, TOL_ACT for bf16
 * act outputs and TOL_F32 for fp32 ones, in cuda_parity_check.h) of the layer ops: GEMM (and its
 * plan cache), layernorm / rmsnorm, the fused add + norm and GEMM + GeLU epilogues, init_normal,
 * GeLU / SwiGLU / add / cast, sum, RoPE, attention (the whole sequence, and one context-parallel
 * ring step's blocks with copy_rows), the MoE router / dispatch / combine and the shared experts' gate; plus, here only,
 * the no-GPU failure of mt_backend_cuda_create, device placement and a full CUDA op table. The
 * embedding, the cross-entropy and AdamW are in test_cuda_parity_train.c.
 * The two tolerances cover every op here, for the reasons given in the header:
 *  - act outputs (GEMM out / dinp, norm out / dinp, the fused outputs, gelu, swiglu, add, cast,
 *    rope, attention out / dqkv, the MoE router's dlogits and row copies / weighted sums) are one
 *    bf16 rounding of an fp32 result -> TOL_ACT;
 *  - f32 outputs (weight gradient increments, mean/rstd, attention lse, sum) differ only by fp32
 *    summation order, expf vs the CPU's polynomial exp (~1 ulp) and FMA contraction -> TOL_F32.
 *    sum and the norm's weight gradient are also required to repeat bit for bit (no float
 *    atomics).
 * MoE (route, route backward, permute, unpermute and its backward): routing decisions (top-k
 * experts, dispatch rows, counts) must be equal exactly; see test_moe for the rest.
 * Attention with D in {32, 64, 96, 128} runs on tensor cores (cuda/cuda_attention_mma.cu), which
 * also round the probabilities P and dS to bf16 before their GEMMs (as FlashAttention-2): one
 * more 2^-9 relative rounding per term of sums over many keys, which averages out: a NumPy
 * model of exactly these roundings (64-key tiles, online softmax) gives nmse 3e-6 .. 6e-6 for
 * out, dq, dk and dv at the shapes below, so TOL_ACT holds with a 16x margin; other head sizes (and
 * MT_CUDA_ATTENTION=fp32, tested too) run the fp32 CUDA-core kernels. The mma kernels take
 * exp2 of log2(e)-scaled scores where the others take exp: the same function to fp32 rounding.
 * Attention backward and the norm backwards start from the CPU's saved statistics (attention:
 * out and lse) on both sides, so a forward difference cannot mask or cause a backward one.
 *
 * Runs here too: before anything else it checks that mt_backend_cuda_create fails cleanly
 * (MT_ERR_CUDA or MT_ERR_UNSUPPORTED, message naming --backend cpu) when there is no GPU.
 * Then, without a GPU, it exits 77 with "skipped: <reason>" as its last line. With a GPU it
 * first checks placement: the backend on the last visible device names "(cuda:N-1)", one past
 * it is MT_ERR_CUDA, and host_memory is 0 for CUDA and 1 for the CPU reference. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/ops/cuda_parity_check.h"

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

/* ---- fused ops (backend.h, "fused ops") ---- */

static void test_add_norm(int rms, int N, int C) {
    printf("  add_%s_fwd N=%d C=%d\n", rms ? "rmsnorm" : "layernorm", N, C);
    float *h_a = host_rand((size_t)N * C, 2.0f, 0.5f), *h_b = host_rand((size_t)N * C, 0.5f, 0.0f);
    float *h_w = host_rand((size_t)C, 0.2f, 1.0f), *h_bias = host_rand((size_t)C, 0.2f, 0.0f);
    pair_t a = pair_new(h_a, (size_t)N * C, 1), b = pair_new(h_b, (size_t)N * C, 1);
    pair_t w = pair_new(h_w, (size_t)C, 1), bias = pair_new(h_bias, (size_t)C, 1);
    pair_t resid = pair_new(NULL, (size_t)N * C, 1), out = pair_new(NULL, (size_t)N * C, 1);
    pair_t mean = pair_new(NULL, (size_t)N, 0), rstd = pair_new(NULL, (size_t)N, 0);
    mt_add_norm_fwd_args fc = {resid.cpu, out.cpu, rms ? NULL : mean.cpu, rstd.cpu, a.cpu, b.cpu, w.cpu,
                               rms ? NULL : bias.cpu, N, C, 1e-5f};
    mt_add_norm_fwd_args fg = {resid.gpu, out.gpu, rms ? NULL : mean.gpu, rstd.gpu, a.gpu, b.gpu, w.gpu,
                               rms ? NULL : bias.gpu, N, C, 1e-5f};
    if (rms)
        RUN_BOTH(add_rmsnorm_fwd, fc, fg);
    else
        RUN_BOTH(add_layernorm_fwd, fc, fg);
    compare("out_resid = a + b (act)", &resid, 1, NULL, TOL_ACT);
    compare("out = norm(out_resid) (act)", &out, 1, NULL, TOL_ACT);
    if (!rms) compare("mean (f32)", &mean, 0, NULL, TOL_F32);
    compare("rstd (f32)", &rstd, 0, NULL, TOL_F32);
    /* the fused kernel against the GPU's own add + norm: the same roundings, so the same bits */
    {
        pair_t r2 = pair_new(NULL, (size_t)N * C, 1), o2 = pair_new(NULL, (size_t)N * C, 1);
        mt_add_args ad = {r2.gpu, a.gpu, b.gpu, (size_t)N * C};
        CHECK(MT_BE_CALL(&g_cuda, add, &ad) == MT_OK);
        mt_norm_fwd_args nf = {o2.gpu, rms ? NULL : mean.gpu, rstd.gpu, r2.gpu, w.gpu, rms ? NULL : bias.gpu, N, C,
                               1e-5f};
        CHECK((rms ? MT_BE_CALL(&g_cuda, rmsnorm_fwd, &nf) : MT_BE_CALL(&g_cuda, layernorm_fwd, &nf)) == MT_OK);
        float *x1 = malloc((size_t)N * C * 4), *x2 = malloc((size_t)N * C * 4);
        down(&g_cuda, x1, out.gpu, (size_t)N * C, g_cuda.act);
        down(&g_cuda, x2, o2.gpu, (size_t)N * C, g_cuda.act);
        CHECKF(memcmp(x1, x2, (size_t)N * C * 4) == 0, "add_norm: fused differs from the GPU's add + norm");
        free(x1), free(x2);
        pair_free(&r2), pair_free(&o2);
    }
    pair_t *all[] = {&a, &b, &w, &bias, &resid, &out, &mean, &rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_a), free(h_b), free(h_w), free(h_bias);
}

/* matmul_gelu_fwd (GELU_AUX_BIAS epilogue) and matmul_dgelu_bwd (DGELU epilogue) of a GPT MLP:
 * h = x Wfc^T + b, g = gelu(h); y = g Wproj^T; dh = (dy Wproj) * gelu'(h). Against the CPU's
 * unfused arithmetic; tolerance TOL_ACT: the GPU applies GeLU before the bf16 rounding of h. */
static void test_matmul_gelu(int M, int F, int C, int with_bias) {
    printf("  matmul_gelu M=%d F=%d C=%d bias=%d\n", M, F, C, with_bias);
    float *h_x = host_rand((size_t)M * C, 1.0f, 0.0f), *h_w = host_rand((size_t)F * C, 1.0f / sqrtf((float)C), 0.0f);
    float *h_b = host_rand((size_t)F, 0.5f, 0.0f), *h_v = host_rand((size_t)C * F, 1.0f / sqrtf((float)F), 0.0f);
    float *h_dy = host_rand((size_t)M * C, 1.0f, 0.0f), *h_dv0 = host_rand((size_t)C * F, 1.0f, 0.0f);
    pair_t x = pair_new(h_x, (size_t)M * C, 1), w = pair_new(h_w, (size_t)F * C, 1), b = pair_new(h_b, (size_t)F, 1);
    pair_t v = pair_new(h_v, (size_t)C * F, 1), dy = pair_new(h_dy, (size_t)M * C, 1);
    pair_t pre = pair_new(NULL, (size_t)M * F, 1), g = pair_new(NULL, (size_t)M * F, 1);
    pair_t dpre = pair_new(NULL, (size_t)M * F, 1), dv = pair_new(h_dv0, (size_t)C * F, 0);
    mt_matmul_gelu_fwd_args fc = {g.cpu, pre.cpu, x.cpu, w.cpu, with_bias ? b.cpu : NULL, M, F, C};
    mt_matmul_gelu_fwd_args fg = {g.gpu, pre.gpu, x.gpu, w.gpu, with_bias ? b.gpu : NULL, M, F, C};
    RUN_BOTH(matmul_gelu_fwd, fc, fg);
    compare("fwd pre (act)", &pre, 1, NULL, TOL_ACT);
    compare("fwd gelu(pre) (act)", &g, 1, NULL, TOL_ACT);
    /* the backward from the same g and pre on both sides (the CPU's): isolates the backward */
    {
        float *hg = malloc((size_t)M * F * 4), *hp = malloc((size_t)M * F * 4);
        down(&g_cpu, hg, g.cpu, (size_t)M * F, g_cpu.act);
        down(&g_cpu, hp, pre.cpu, (size_t)M * F, g_cpu.act);
        for (size_t i = 0; i < (size_t)M * F; i++) hg[i] = round_bf16(hg[i]), hp[i] = round_bf16(hp[i]);
        up(&g_cpu, g.cpu, hg, (size_t)M * F, g_cpu.act);
        up(&g_cpu, pre.cpu, hp, (size_t)M * F, g_cpu.act);
        up(&g_cuda, g.gpu, hg, (size_t)M * F, g_cuda.act);
        up(&g_cuda, pre.gpu, hp, (size_t)M * F, g_cuda.act);
        free(hg), free(hp);
    }
    mt_matmul_dgelu_bwd_args bc = {dpre.cpu, dv.cpu, NULL, dy.cpu, g.cpu, v.cpu, pre.cpu, M, C, F};
    mt_matmul_dgelu_bwd_args bg = {dpre.gpu, dv.gpu, NULL, dy.gpu, g.gpu, v.gpu, pre.gpu, M, C, F};
    RUN_BOTH(matmul_dgelu_bwd, bc, bg);
    compare("bwd dpre = (dy V) gelu'(pre) (act)", &dpre, 1, NULL, TOL_ACT);
    compare("bwd dweight += (f32, increment)", &dv, 0, h_dv0, TOL_F32);
    pair_t *all[] = {&x, &w, &b, &v, &dy, &pre, &g, &dpre, &dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_x), free(h_w), free(h_b), free(h_v), free(h_dy), free(h_dv0);
}

/* init_normal: the device's draws against the CPU's, bit for bit where the double log / cos of
 * both sides agree (cuda_init.cu: CUDA's are within 1-2 ulp, so an element may differ by one
 * fp32 ulp, about 1 in 10^8). Reports the count; fails on more than 1e-6 of the elements or
 * any difference above 1 ulp (that would be a different formula, not rounding). */
static void test_init_normal(size_t n, uint64_t offset) {
    printf("  init_normal n=%zu offset=%llu\n", n, (unsigned long long)offset);
    pair_t t = pair_new(NULL, n, 0);
    mt_init_normal_args ac = {t.cpu, n, 1234, 0x1234567890abcdefULL, offset, 0.02};
    mt_init_normal_args ag = {t.gpu, n, 1234, 0x1234567890abcdefULL, offset, 0.02};
    RUN_BOTH(init_normal, ac, ag);
    float *c = malloc(n * 4), *g = malloc(n * 4);
    down(&g_cpu, c, t.cpu, n, MT_F32);
    down(&g_cuda, g, t.gpu, n, MT_F32);
    size_t diff = 0, far = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&c[i], &g[i], 4) == 0) continue;
        diff++;
        int32_t ic, ig;
        memcpy(&ic, &c[i], 4), memcpy(&ig, &g[i], 4);
        if (ic - ig > 1 || ig - ic > 1) far++;
    }
    printf("    %zu of %zu elements differ from the CPU's (%zu by more than 1 ulp) %s\n", diff, n, far,
           far == 0 && (double)diff <= 1e-6 * (double)n ? "ok" : "FAIL");
    CHECKF(far == 0, "init_normal: %zu elements differ by more than 1 ulp", far);
    CHECKF((double)diff <= 1e-6 * (double)n, "init_normal: %zu of %zu elements differ", diff, n);
    free(c), free(g);
    pair_free(&t);
}

/* ---- elementwise: gelu, squared ReLU, swiglu, add, scale, cast ---- */

static void test_elementwise(size_t n, int N, int F) {
    printf("  gelu/squared_relu/add/cast n=%zu, swiglu N=%d F=%d\n", n, N, F);
    float *h_x = host_rand(n, 3.0f, 0.0f), *h_y = host_rand(n, 1.0f, 0.0f), *h_d = host_rand(n, 1.0f, 0.0f);
    float *h_f32 = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++) h_f32[i] = 2.0f * frand(); /* not bf16-exact: the cast rounds */
    const size_t ns = (size_t)N * F;
    float *h_g = host_rand(2 * ns, 3.0f, 0.0f), *h_gd = host_rand(ns, 1.0f, 0.0f);

    pair_t x = pair_new(h_x, n, 1), y = pair_new(h_y, n, 1), d = pair_new(h_d, n, 1);
    pair_t out = pair_new(NULL, n, 1), f32 = pair_new(h_f32, n, 0);
    pair_t g = pair_new(h_g, 2 * ns, 1), gd = pair_new(h_gd, ns, 1);
    pair_t gout = pair_new(NULL, ns, 1), gdinp = pair_new(NULL, 2 * ns, 1);

    mt_gelu_fwd_args gfc = {out.cpu, x.cpu, n}, gfg = {out.gpu, x.gpu, n};
    RUN_BOTH(gelu_fwd, gfc, gfg);
    compare("gelu fwd out (act)", &out, 1, NULL, TOL_ACT);
    mt_gelu_bwd_args gbc = {out.cpu, d.cpu, x.cpu, n}, gbg = {out.gpu, d.gpu, x.gpu, n};
    RUN_BOTH(gelu_bwd, gbc, gbg);
    compare("gelu bwd dinp = (act)", &out, 1, NULL, TOL_ACT);

    for (int bwd = 0; bwd < 2; bwd++) { /* squared ReLU forward, then backward (dout = d) */
        mt_squared_relu_fwd_args rfc = {out.cpu, x.cpu, n}, rfg = {out.gpu, x.gpu, n};
        mt_squared_relu_bwd_args rbc = {out.cpu, d.cpu, x.cpu, n}, rbg = {out.gpu, d.gpu, x.gpu, n};
        if (bwd) RUN_BOTH(squared_relu_bwd, rbc, rbg);
        else RUN_BOTH(squared_relu_fwd, rfc, rfg);
        compare(bwd ? "squared_relu bwd dinp = (act)" : "squared_relu fwd out (act)", &out, 1, NULL, TOL_ACT);
    }

    mt_add_args ac = {out.cpu, x.cpu, y.cpu, n}, ag = {out.gpu, x.gpu, y.gpu, n};
    RUN_BOTH(add, ac, ag);
    compare("add out (act)", &out, 1, NULL, TOL_ACT);
    mt_scale_args xc = {out.cpu, n, 0.37f}, xg = {out.gpu, n, 0.37f};
    RUN_BOTH(scale, xc, xg);
    compare("scale out (act)", &out, 1, NULL, TOL_ACT);

    mt_cast_args cc = {out.cpu, f32.cpu, n}, cg = {out.gpu, f32.gpu, n};
    RUN_BOTH(cast_f32_to_act, cc, cg);
    compare("cast_f32_to_act (act)", &out, 1, NULL, TOL_ACT);

    mt_swiglu_fwd_args sfc = {gout.cpu, g.cpu, N, F}, sfg = {gout.gpu, g.gpu, N, F};
    RUN_BOTH(swiglu_fwd, sfc, sfg);
    compare("swiglu fwd out (act)", &gout, 1, NULL, TOL_ACT);
    mt_swiglu_bwd_args sbc = {gdinp.cpu, gd.cpu, g.cpu, N, F}, sbg = {gdinp.gpu, gd.gpu, g.gpu, N, F};
    RUN_BOTH(swiglu_bwd, sbc, sbg);
    compare("swiglu bwd dinp = (act)", &gdinp, 1, NULL, TOL_ACT);

    pair_t *all[] = {&x, &y, &d, &out, &f32, &g, &gd, &gout, &gdinp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_x); free(h_y); free(h_d); free(h_f32); free(h_g); free(h_gd);
}

/* ---- sum (f32 in, f32 scalar +=) ---- */

static void test_sum(size_t n, int squares) {
    printf("  sum n=%zu squares=%d\n", n, squares);
    float *h_x = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++) h_x[i] = frand() + 0.25f; /* f32, not bf16-rounded: sum reads f32 */
    float h_out0 = 3.5f;
    pair_t x = pair_new(h_x, n, 0), out = pair_new(&h_out0, 1, 0);
    mt_sum_args c = {out.cpu, x.cpu, n, squares}, g = {out.gpu, x.gpu, n, squares};
    RUN_BOTH(sum, c, g);
    compare(squares ? "sum of squares += (f32, increment)" : "sum += (f32, increment)", &out, 0, &h_out0, TOL_F32);
    float first;
    down(&g_cuda, &first, out.gpu, 1, MT_F32);
    up(&g_cuda, out.gpu, &h_out0, 1, MT_F32);
    CHECKF(MT_BE_CALL(&g_cuda, sum, &g) == MT_OK, "cuda sum (repeat): %s", mt_last_error());
    check_same_bits("sum", &first, &out);
    pair_free(&x);
    pair_free(&out);
    free(h_x);
}

/* ---- rope (in place) ---- */

/* rot: rotary channels per head (0: all), interleaved: adjacent pairs (Megatron's --rotary-percent,
 * --rotary-interleaved); scaled: Llama 3.1's frequency scaling (factor 8, 1 / 4, original 8192) and
 * position interpolation by 2 (--use-rope-scaling, --rotary-seq-len-interpolation-factor) */
static void test_rope_variant_scaled(int B, int T, int H, int D, int stride, int pos_offset, int rot, int interleaved,
                                     int scaled) {
    printf("  rope B=%d T=%d heads=%d D=%d row_stride=%d pos_offset=%d rot=%d interleaved=%d%s\n", B, T, H, D, stride,
           pos_offset, rot, interleaved, scaled ? " llama3-scaled, interpolation 2" : "");
    const size_t n = (size_t)B * T * stride;
    float *h_x = host_rand(n, 1.0f, 0.0f);
    pair_t x = pair_new(h_x, n, 1);
    for (int inverse = 0; inverse <= 1; inverse++) {
        pair_set(&x, h_x, 1);
        mt_rope_args c = {x.cpu, B, T, H, D, stride, pos_offset, 10000.0f, inverse, rot, interleaved, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        mt_rope_args g = {x.gpu, B, T, H, D, stride, pos_offset, 10000.0f, inverse, rot, interleaved, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        if (scaled) {
            c.llama3_factor = g.llama3_factor = 8.0f;
            c.llama3_low = g.llama3_low = 1.0f;
            c.llama3_high = g.llama3_high = 4.0f;
            c.llama3_orig_max = g.llama3_orig_max = 8192;
            c.pos_interp = g.pos_interp = 2.0f;
            c.theta = g.theta = 500000.0f;
        }
        RUN_BOTH(rope, c, g);
        compare(inverse ? "rope inverse, in place (act)" : "rope forward, in place (act)", &x, 1, NULL, TOL_ACT);
    }
    pair_free(&x);
    free(h_x);
}

static void test_rope_variant(int B, int T, int H, int D, int stride, int pos_offset, int rot, int interleaved) {
    test_rope_variant_scaled(B, T, H, D, stride, pos_offset, rot, interleaved, 0);
}

static void test_rope(int B, int T, int H, int D, int stride, int pos_offset) {
    test_rope_variant(B, T, H, D, stride, pos_offset, 0, 0);
}

/* ---- attention (causal, GQA, flash-style: out and the per-row logsumexp) ---- */

/* The tensors of both attention checks, on both backends: qkv and dout random, out, lse,
 * delta, dqkv; h_out / h_lse: host staging of out / lse. */
typedef struct {
    size_t nq, nout, nl;
    float *h_qkv, *h_dout, *h_out, *h_lse;
    pair_t qkv, dout, out, lse, delta, dqkv;
} att_tensors;

static att_tensors att_tensors_new(int B, int T, int H, int KV, int D) {
    att_tensors t;
    t.nq = (size_t)B * T * (H + 2 * KV) * D;
    t.nout = (size_t)B * T * H * D;
    t.nl = (size_t)B * H * T;
    t.h_qkv = host_rand(t.nq, 1.5f, 0.0f);
    t.h_dout = host_rand(t.nout, 1.0f, 0.0f);
    t.h_out = malloc(t.nout * sizeof(float) + 1);
    t.h_lse = malloc(t.nl * sizeof(float) + 1);
    t.qkv = pair_new(t.h_qkv, t.nq, 1);
    t.dout = pair_new(t.h_dout, t.nout, 1);
    t.out = pair_new(NULL, t.nout, 1);
    t.lse = pair_new(NULL, t.nl, 0);
    t.delta = pair_new(NULL, t.nl, 0);
    t.dqkv = pair_new(NULL, t.nq, 1);
    return t;
}

static void att_tensors_free(att_tensors *t) {
    pair_t *all[] = {&t->qkv, &t->dout, &t->out, &t->lse, &t->delta, &t->dqkv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(t->h_qkv);
    free(t->h_dout);
    free(t->h_out);
    free(t->h_lse);
}

/* Both sides' out and lse set to the CPU's (out rounded to bf16), so that an attention backward
 * check isolates the backward kernels. */
static void start_bwd_from_cpu(att_tensors *t) {
    down(&g_cpu, t->h_out, t->out.cpu, t->nout, g_cpu.act);
    for (size_t i = 0; i < t->nout; i++) t->h_out[i] = round_bf16(t->h_out[i]);
    pair_set(&t->out, t->h_out, 1);
    down(&g_cpu, t->h_lse, t->lse.cpu, t->nl, MT_F32);
    pair_set(&t->lse, t->h_lse, 0);
}

/* the softmax scale the attention tests pass (0: the ops' 1/sqrt(D); muP passes others) */
static float g_att_scale;

static void test_attention(int B, int T, int H, int KV, int D) {
    printf("  attention B=%d T=%d H=%d KV=%d D=%d\n", B, T, H, KV, D);
    att_tensors t = att_tensors_new(B, T, H, KV, D);
    mt_attention_fwd_args fc = {t.out.cpu, t.lse.cpu, t.qkv.cpu, B, T, H, KV, D, g_att_scale};
    mt_attention_fwd_args fg = {t.out.gpu, t.lse.gpu, t.qkv.gpu, B, T, H, KV, D, g_att_scale};
    RUN_BOTH(attention_fwd, fc, fg);
    compare("fwd out (act)", &t.out, 1, NULL, TOL_ACT);
    compare("fwd lse (f32 logsumexp per row)", &t.lse, 0, NULL, TOL_F32);

    /* backward from the CPU's out (rounded to bf16 on both sides) and lse: isolates the
     * backward kernels */
    start_bwd_from_cpu(&t);
    mt_attention_bwd_args bc = {t.dqkv.cpu, t.delta.cpu, t.dout.cpu, t.qkv.cpu, t.out.cpu, t.lse.cpu,
                                B, T, H, KV, D, g_att_scale};
    mt_attention_bwd_args bg = {t.dqkv.gpu, t.delta.gpu, t.dout.gpu, t.qkv.gpu, t.out.gpu, t.lse.gpu,
                                B, T, H, KV, D, g_att_scale};
    RUN_BOTH(attention_bwd, bc, bg);
    compare("bwd dqkv = (act)", &t.dqkv, 1, NULL, TOL_ACT);
    att_tensors_free(&t);
}

/* ---- context parallelism: one ring step's blocks (attention_block_fwd / _bwd) and copy_rows ---- */

/* Query chunk = local rows [Tc, 2 Tc) at global position 3 Tc against two packed K / V blocks: rows
 * [0, Tc) at position 0 (seen fully; writes) and rows [Tc, 2 Tc) at 3 Tc (the diagonal; merges).
 * The backward starts from the CPU's out / lse on both sides, as test_attention does. */
static void test_attention_block(int B, int H, int KV, int D, int Tc) {
    const int T = 2 * Tc;
    printf("  attention_block B=%d T=%d H=%d KV=%d D=%d\n", B, T, H, KV, D);
    att_tensors t = att_tensors_new(B, T, H, KV, D);
    const size_t S3 = (size_t)(H + 2 * KV) * D, SK = (size_t)2 * KV * D, nk = (size_t)B * T * SK;
    float *h_kv = host_rand(nk, 1.5f, 0.0f);
    pair_t kv = pair_new(h_kv, nk, 1), dkv = pair_new(NULL, nk, 1), packed = pair_new(NULL, nk, 1);
    for (int blk = 0; blk < 2; blk++) {
        mt_attention_block_fwd_args c = {t.out.cpu, t.lse.cpu, t.qkv.cpu, kv.cpu, B, T, H, KV, D, Tc, Tc, 3 * Tc,
                                         blk * Tc, Tc, blk * 3 * Tc, blk, g_att_scale};
        mt_attention_block_fwd_args g = {t.out.gpu, t.lse.gpu, t.qkv.gpu, kv.gpu, B, T, H, KV, D, Tc, Tc, 3 * Tc,
                                         blk * Tc, Tc, blk * 3 * Tc, blk, g_att_scale};
        RUN_BOTH(attention_block_fwd, c, g);
    }
    compare("block fwd out, merged (act)", &t.out, 1, NULL, TOL_ACT);
    compare("block fwd lse, merged (f32)", &t.lse, 0, NULL, TOL_F32);
    start_bwd_from_cpu(&t);
    for (int blk = 0; blk < 2; blk++) {
        mt_attention_block_bwd_args c = {t.dqkv.cpu, dkv.cpu, t.delta.cpu, t.dout.cpu, t.qkv.cpu, kv.cpu,
                                         t.out.cpu, t.lse.cpu, B, T, H, KV, D, Tc, Tc, 3 * Tc, blk * Tc, Tc,
                                         blk * 3 * Tc, g_att_scale};
        mt_attention_block_bwd_args g = {t.dqkv.gpu, dkv.gpu, t.delta.gpu, t.dout.gpu, t.qkv.gpu, kv.gpu,
                                         t.out.gpu, t.lse.gpu, B, T, H, KV, D, Tc, Tc, 3 * Tc, blk * Tc, Tc,
                                         blk * 3 * Tc, g_att_scale};
        RUN_BOTH(attention_block_bwd, c, g);
    }
    compare("block bwd dq += (act)", &t.dqkv, 1, NULL, TOL_ACT);
    compare("block bwd dk, dv += (act)", &dkv, 1, NULL, TOL_ACT);
    const size_t es_c = mt_dtype_bytes(g_cpu.act), es_g = mt_dtype_bytes(g_cuda.act);
    mt_copy_rows_args cc = {packed.cpu, (const char *)t.qkv.cpu + (size_t)H * D * es_c, B * T, (int)SK, (int)SK,
                            (int)S3};
    mt_copy_rows_args cg = {packed.gpu, (const char *)t.qkv.gpu + (size_t)H * D * es_g, B * T, (int)SK, (int)SK,
                            (int)S3};
    RUN_BOTH(copy_rows, cc, cg);
    compare("copy_rows k|v columns (act)", &packed, 1, NULL, TOL_ACT);
    pair_t *all[] = {&kv, &dkv, &packed};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_kv);
    att_tensors_free(&t);
}

/* ---- mixture of experts: router, dispatch, combine ---- */

/* An i32 tensor must be the same on both sides, element for element (routing decisions). */
static void compare_i32(const char *what, const pair_t *p) {
    int32_t *c = malloc(p->n * sizeof *c + 4), *g = malloc(p->n * sizeof *g + 4);
    CHECK(g_cpu.i->copy_d2h(&g_cpu, c, p->cpu, p->n * 4) == MT_OK);
    CHECKF(g_cuda.i->copy_d2h(&g_cuda, g, p->gpu, p->n * 4) == MT_OK, "%s", mt_last_error());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < p->n; i++)
        if (c[i] != g[i] && bad++ == 0) first = i;
    printf("    %-30s %zu of %zu differ (exact) %s\n", what, bad, p->n, bad ? "FAIL" : "ok");
    CHECKF(bad == 0, "%s: %zu of %zu elements differ, first at %zu: cpu %d cuda %d", what, bad, p->n, first,
           bad ? c[first] : 0, bad ? g[first] : 0);
    free(c);
    free(g);
}

/* Route N = B*T tokens over E experts (top k, capacity cap per sequence of T; 0 = dropless), then
 * run the router backward, the dispatch, the combine (weighted and unweighted) and its backward
 * from the CPU's routing on both sides, so one routing difference cannot cascade. Tolerances:
 * probabilities, weights and statistics are fp32 maths on identical bf16 logits (expf vs the
 * CPU's double exp: ~1 ulp) -> TOL_F32; top-k indices, rows and counts must match exactly (a
 * softmax keeps the logits' order, and ties go to the lower index on both); dlogits and the row
 * copies / weighted sums are one bf16 rounding of an fp32 result -> TOL_ACT. */
static void test_moe(int B, int T, int E, int k, int cap, int pre_softmax, int C, int score, int groups, int seq_aux) {
    printf("  moe B=%d T=%d E=%d top-%d cap=%d pre_softmax=%d C=%d score=%d groups=%d seq_aux=%d\n", B, T, E, k, cap,
           pre_softmax, C, score, groups, seq_aux);
    const int N = B * T;
    const size_t nk = (size_t)N * k, nst = (size_t)MT_MOE_STATS + 2 * (size_t)E;
    float *h_logits = host_rand((size_t)N * E, 2.0f, 0.0f);
    float *h_stats0 = host_rand(nst, 1.0f, 0.0f);
    pair_t logits = pair_new(h_logits, (size_t)N * E, 1), probs = pair_new(NULL, (size_t)N * E, 0);
    pair_t topw = pair_new(NULL, nk, 0), stats = pair_new(h_stats0, nst, 0);
    int32_t *h_zero = calloc(nk + 2 * (size_t)E + 1, sizeof(int32_t));
    pair_t topi = ipair_new(h_zero, nk), pos = ipair_new(h_zero, nk), counts = ipair_new(h_zero, 2 * (size_t)E);
    int32_t *h_zero2 = calloc((size_t)B * E + 1, sizeof(int32_t));
    pair_t auxcnt = ipair_new(h_zero2, (size_t)B * E);

    mt_moe_route_args rc = {.logits = logits.cpu, .probs = probs.cpu, .topi = topi.cpu, .topw = topw.cpu,
                            .pos = pos.cpu, .counts = counts.cpu, .auxcnt = auxcnt.cpu, .stats = stats.cpu,
                            .N = N, .E = E, .k = k, .T = T, .cap = cap, .pre_softmax = pre_softmax,
                            .score = score, .n_groups = groups, .group_topk = groups ? 2 : 0, .seq_aux = seq_aux,
                            .scale = 2.5f};
    mt_moe_route_args rg = rc;
    rg.logits = logits.gpu, rg.probs = probs.gpu, rg.topi = topi.gpu, rg.topw = topw.gpu, rg.pos = pos.gpu;
    rg.counts = counts.gpu, rg.auxcnt = auxcnt.gpu, rg.stats = stats.gpu;
    RUN_BOTH(moe_route, rc, rg);
    compare("route probs (f32)", &probs, 0, NULL, TOL_F32);
    compare("route top-k weights (f32)", &topw, 0, NULL, TOL_F32);
    compare("route stats += (f32, increment)", &stats, 0, h_stats0, TOL_F32);
    compare_i32("route top-k experts (i32)", &topi);
    compare_i32("route dispatch rows (i32)", &pos);
    compare_i32("route counts (i32)", &counts);
    compare_i32("route aux-loss counts (i32)", &auxcnt);

    /* the CPU's routing on both sides from here on */
    float *h_probs = malloc((size_t)N * E * sizeof(float) + 1), *h_topw = malloc(nk * sizeof(float) + 1);
    int32_t *h_topi = malloc(nk * 4 + 4), *h_pos = malloc(nk * 4 + 4), *h_counts = malloc(2 * (size_t)E * 4 + 4);
    down(&g_cpu, h_probs, probs.cpu, (size_t)N * E, MT_F32);
    down(&g_cpu, h_topw, topw.cpu, nk, MT_F32);
    CHECK(g_cpu.i->copy_d2h(&g_cpu, h_topi, topi.cpu, nk * 4) == MT_OK);
    CHECK(g_cpu.i->copy_d2h(&g_cpu, h_pos, pos.cpu, nk * 4) == MT_OK);
    CHECK(g_cpu.i->copy_d2h(&g_cpu, h_counts, counts.cpu, 2 * (size_t)E * 4) == MT_OK);
    pair_set(&probs, h_probs, 0);
    pair_set(&topw, h_topw, 0);
    CHECK(g_cuda.i->copy_h2d(&g_cuda, topi.gpu, h_topi, nk * 4) == MT_OK);
    CHECK(g_cuda.i->copy_h2d(&g_cuda, pos.gpu, h_pos, nk * 4) == MT_OK);
    CHECK(g_cuda.i->copy_h2d(&g_cuda, counts.gpu, h_counts, 2 * (size_t)E * 4) == MT_OK);
    int rows = 0;
    for (int e = 0; e < E; e++) rows += h_counts[e];
    if (rows == 0) rows = 1;

    /* router backward */
    float *h_dw = host_rand(nk, 1.0f, 0.0f);
    pair_t dw = pair_new(h_dw, nk, 0), dlogits = pair_new(NULL, (size_t)N * E, 1);
    mt_moe_route_bwd_args bc = {.dlogits = dlogits.cpu, .logits = logits.cpu, .probs = probs.cpu, .topi = topi.cpu,
                                .auxcnt = auxcnt.cpu, .dw = dw.cpu, .N = N, .E = E, .k = k, .T = T,
                                .pre_softmax = pre_softmax, .score = score, .seq_aux = seq_aux, .scale = 2.5f,
                                .aux_scale = 0.01f, .z_scale = 0.001f};
    mt_moe_route_bwd_args bg = bc;
    bg.dlogits = dlogits.gpu, bg.logits = logits.gpu, bg.probs = probs.gpu, bg.topi = topi.gpu;
    bg.auxcnt = auxcnt.gpu, bg.dw = dw.gpu;
    RUN_BOTH(moe_route_bwd, bc, bg);
    compare("route bwd dlogits = (act)", &dlogits, 1, NULL, TOL_ACT);

    /* dispatch, combine, combine backward */
    float *h_x = host_rand((size_t)N * C, 1.0f, 0.0f), *h_y = host_rand((size_t)rows * C, 1.0f, 0.0f);
    float *h_dout = host_rand((size_t)N * C, 1.0f, 0.0f);
    pair_t x = pair_new(h_x, (size_t)N * C, 1), disp = pair_new(NULL, (size_t)rows * C, 1);
    pair_t y = pair_new(h_y, (size_t)rows * C, 1), comb = pair_new(NULL, (size_t)N * C, 1);
    pair_t dout = pair_new(h_dout, (size_t)N * C, 1), dy = pair_new(NULL, (size_t)rows * C, 1);
    pair_t dwc = pair_new(NULL, nk, 0);
    mt_moe_permute_args pc = {disp.cpu, x.cpu, pos.cpu, N, k, C}, pg = {disp.gpu, x.gpu, pos.gpu, N, k, C};
    RUN_BOTH(moe_permute, pc, pg);
    compare("permute (dispatch rows, act)", &disp, 1, NULL, TOL_ACT);
    mt_moe_unpermute_args uc = {comb.cpu, y.cpu, pos.cpu, topw.cpu, N, k, C};
    mt_moe_unpermute_args ug = {comb.gpu, y.gpu, pos.gpu, topw.gpu, N, k, C};
    RUN_BOTH(moe_unpermute, uc, ug);
    compare("unpermute weighted = (act)", &comb, 1, NULL, TOL_ACT);
    uc.w = NULL;
    ug.w = NULL;
    RUN_BOTH(moe_unpermute, uc, ug);
    compare("unpermute unweighted = (act)", &comb, 1, NULL, TOL_ACT);
    mt_moe_unpermute_bwd_args ubc = {dy.cpu, dwc.cpu, dout.cpu, y.cpu, pos.cpu, topw.cpu, N, k, C};
    mt_moe_unpermute_bwd_args ubg = {dy.gpu, dwc.gpu, dout.gpu, y.gpu, pos.gpu, topw.gpu, N, k, C};
    RUN_BOTH(moe_unpermute_bwd, ubc, ubg);
    compare("unpermute bwd dy (act)", &dy, 1, NULL, TOL_ACT);
    compare("unpermute bwd dw = (f32)", &dwc, 0, NULL, TOL_F32);

    pair_t *all[] = {&logits, &probs, &topw, &stats, &topi, &pos, &counts, &auxcnt, &dw, &dlogits,
                     &x, &disp, &y, &comb, &dout, &dy, &dwc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_logits); free(h_stats0); free(h_zero); free(h_zero2); free(h_probs); free(h_topw); free(h_topi); free(h_pos);
    free(h_counts); free(h_dw); free(h_x); free(h_y); free(h_dout);
}

/* The shared experts' sigmoid gate: forward (gate f32, out += act), its backward through the product (dy act,
 * dz f32) from the CPU's gate on both sides, and through the logit (dw += f32, dx += act). dz and dw are fp32
 * sums of bf16 products (fp32 order and expf vs the CPU's double exp) -> TOL_F32; the act outputs are one bf16
 * rounding of an fp32 result -> TOL_ACT. */
static void test_moe_gate(int N, int C) {
    printf("  moe shared-expert gate N=%d C=%d\n", N, C);
    float *h_x = host_rand((size_t)N * C, 1.0f, 0.0f), *h_y = host_rand((size_t)N * C, 1.0f, 0.0f);
    float *h_out = host_rand((size_t)N * C, 1.0f, 0.0f), *h_w = host_rand((size_t)C, 0.3f, 0.0f);
    float *h_dout = host_rand((size_t)N * C, 1.0f, 0.0f), *h_dw = host_rand((size_t)C, 1.0f, 0.0f);
    float *h_gate = malloc((size_t)N * sizeof(float) + 1), *h_dz = malloc((size_t)N * sizeof(float) + 1);
    pair_t x = pair_new(h_x, (size_t)N * C, 1), y = pair_new(h_y, (size_t)N * C, 1), w = pair_new(h_w, (size_t)C, 1);
    pair_t out = pair_new(h_out, (size_t)N * C, 1), gate = pair_new(NULL, (size_t)N, 0);
    pair_t dout = pair_new(h_dout, (size_t)N * C, 1), dy = pair_new(NULL, (size_t)N * C, 1);
    pair_t dz = pair_new(NULL, (size_t)N, 0), dw = pair_new(h_dw, (size_t)C, 0), dx = pair_new(h_out, (size_t)N * C, 1);
    mt_moe_gate_fwd_args fc = {out.cpu, gate.cpu, y.cpu, x.cpu, w.cpu, N, C};
    mt_moe_gate_fwd_args fg = {out.gpu, gate.gpu, y.gpu, x.gpu, w.gpu, N, C};
    RUN_BOTH(moe_gate_fwd, fc, fg);
    compare("gate = sigmoid(x . w) (f32)", &gate, 0, NULL, TOL_F32);
    compare("out += gate * y (act)", &out, 1, NULL, TOL_ACT);
    down(&g_cpu, h_gate, gate.cpu, (size_t)N, MT_F32); /* the CPU's gate on both sides from here on */
    pair_set(&gate, h_gate, 0);
    mt_moe_gate_bwd_args bc = {dy.cpu, dz.cpu, dout.cpu, y.cpu, gate.cpu, N, C};
    mt_moe_gate_bwd_args bg = {dy.gpu, dz.gpu, dout.gpu, y.gpu, gate.gpu, N, C};
    RUN_BOTH(moe_gate_bwd, bc, bg);
    compare("gate bwd dy = gate * dout (act)", &dy, 1, NULL, TOL_ACT);
    compare("gate bwd dz (f32)", &dz, 0, NULL, TOL_F32);
    down(&g_cpu, h_dz, dz.cpu, (size_t)N, MT_F32);
    pair_set(&dz, h_dz, 0);
    mt_moe_gate_logit_bwd_args lc = {dw.cpu, dx.cpu, dz.cpu, x.cpu, w.cpu, N, C};
    mt_moe_gate_logit_bwd_args lg = {dw.gpu, dx.gpu, dz.gpu, x.gpu, w.gpu, N, C};
    RUN_BOTH(moe_gate_logit_bwd, lc, lg);
    compare("gate logit bwd dw += (f32)", &dw, 0, h_dw, TOL_F32);
    compare("gate logit bwd dx += (act)", &dx, 1, NULL, TOL_ACT);
    pair_t *all[] = {&x, &y, &w, &out, &gate, &dout, &dy, &dz, &dw, &dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_x); free(h_y); free(h_out); free(h_w); free(h_dout); free(h_dw); free(h_gate); free(h_dz);
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
        CHECK(mt_cuda_device_count() == 0);
        printf("no-GPU path: mt_backend_cuda_create -> %s: %s\n", mt_status_name(st), mt_last_error());
        printf("%s: %d checks, %d failed\n", __FILE__, mt_test_checks, mt_test_failures);
        if (mt_test_failures) return 1;
        printf("skipped: %s\n", why);
        return 77;
    }

    printf("CUDA: %s\n", why);
    /* placement, before the backend under test exists (create makes its device current on
     * this thread, and the ops below run on device 0): the last device gets "(cuda:N-1)" in
     * its name, one past it is a clear error */
    const int n_dev = mt_cuda_device_count();
    CHECK(n_dev >= 1);
    mt_backend other;
    mt_status st = mt_backend_cuda_create(&other, n_dev);
    CHECKF(st == MT_ERR_CUDA, "create on device %d of %d: %s", n_dev, n_dev, mt_status_name(st));
    if (st == MT_ERR_CUDA) CHECK_STR_CONTAINS(mt_last_error(), "CUDA_VISIBLE_DEVICES");
    st = mt_backend_cuda_create(&other, n_dev - 1);
    CHECKF(st == MT_OK, "create on device %d: %s", n_dev - 1, mt_last_error());
    if (st == MT_OK) {
        char want[32];
        snprintf(want, sizeof want, "(cuda:%d)", n_dev - 1);
        CHECK_STR_CONTAINS(other.device_name, want);
        CHECK(other.device == n_dev - 1 && other.host_memory == 0);
        mt_backend_destroy(&other);
    }
    if (!parity_open()) return 1;
    /* placement: the name carries the device index; memory kinds for the communicators */
    CHECK_STR_CONTAINS(g_cuda.device_name, "(cuda:0)");
    CHECK(g_cuda.device == 0 && g_cuda.host_memory == 0);
    CHECK(g_cpu.device == -1 && g_cpu.host_memory == 1);

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

    for (int rms = 0; rms <= 1; rms++) {
        test_add_norm(rms, 37, 23);
        test_add_norm(rms, 1024, 768);
    }
    test_matmul_gelu(64, 512, 128, 1);   /* fused epilogues (F, C multiples of 8) */
    test_matmul_gelu(256, 3072, 768, 1); /* GPT-2 124M MLP */
    test_matmul_gelu(37, 51, 23, 0);     /* odd: the unfused fallback */
    test_init_normal(1000, 0);
    test_init_normal((size_t)50 << 20, 12345); /* 52M draws: the rare last-bit cases show up here */

    /* every op of backend.h is in the CUDA table now (those of test_cuda_parity_train.c included) */
    {
        const void *const *ops = (const void *const *)&g_cuda.i->matmul_fwd;
        const size_t n_ops = (sizeof(struct mt_backend_i) - offsetof(struct mt_backend_i, matmul_fwd)) / sizeof(void *);
        for (size_t i = 0; i < n_ops; i++) CHECKF(ops[i] != NULL, "CUDA op #%zu of the table is NULL", i);
    }

    test_elementwise(1, 1, 1);
    test_elementwise(1000, 7, 33);
    test_elementwise(1003, 5, 8); /* 16-byte vectors for the first 1000, then the scalar tail */
    test_elementwise((size_t)1 << 20, 256, 2048); /* gpt-2-ish MLP: 256 rows of 4*512 */

    test_sum(1, 0);
    test_sum(1000, 1);
    test_sum((size_t)3 << 20, 0);      /* many blocks */
    test_sum((size_t)124439808, 1);    /* GPT-2 124M parameter count: the grad-norm shape */

    test_rope(1, 1, 1, 2, 2, 0);
    test_rope(2, 37, 4, 64, 4 * 64 + 2 * 2 * 64, 5); /* q (4 heads) inside a GQA qkv row */
    test_rope_variant(2, 37, 4, 64, 4 * 64 + 2 * 2 * 64, 5, 32, 0);
    test_rope_variant(2, 37, 4, 64, 4 * 64 + 2 * 2 * 64, 5, 0, 1);
    test_rope_variant_scaled(2, 37, 4, 128, 4 * 128 + 2 * 2 * 128, 100000, 0, 0, 1); /* Llama 3.1's frequencies */
    test_rope(2, 128, 12, 64, 3 * 768, 0);            /* q of a GPT-2 qkv row */

    test_attention(1, 1, 1, 1, 8);
    test_attention(2, 17, 4, 2, 16);   /* GQA, group 2 */
    test_attention_block(2, 4, 2, 16, 40); /* GQA; chunks of 40 rows (CUDA 32-row tiles inside a block) */
    test_attention_block(1, 2, 1, 8, 3);
    test_attention(1, 33, 6, 1, 40);   /* MQA, odd T, D not a multiple of 32 */
    test_attention(2, 64, 4, 4, 64);   /* MHA */
    test_attention(1, 300, 2, 1, 128); /* several tiles, partial last one, D = 128 */
    test_attention(1, 130, 12, 12, 64); /* gpt125m head shape, T not a multiple of the tiles */
    test_attention(2, 200, 8, 2, 32);  /* tensor cores, GQA group 4, several 64-row tiles */
    test_attention(1, 77, 3, 1, 96);   /* tensor cores, D = 96, MQA */
    test_attention(1, 1024, 2, 2, 128); /* gpt1.3b's head size at a long T: 16 x 16 tiles */
    g_att_scale = 1.0f / 32; /* muP's 1 / head_dim: tensor-core kernels, and the ring blocks */
    test_attention(2, 200, 8, 2, 32);
    test_attention_block(2, 4, 2, 16, 40);
    g_att_scale = 0;
    /* the fp32 CUDA-core kernels for the head sizes the tensor-core kernels also take */
    setenv("MT_CUDA_ATTENTION", "fp32", 1);
    printf("  (MT_CUDA_ATTENTION=fp32: the CUDA-core kernels)\n");
    test_attention(1, 130, 12, 12, 64);
    test_attention(1, 300, 2, 1, 128);
    test_attention(2, 200, 8, 2, 32);
    g_att_scale = 1.0f / 64;
    test_attention(1, 130, 12, 12, 64);
    g_att_scale = 0;
    unsetenv("MT_CUDA_ATTENTION");

    test_moe(1, 1, 2, 1, 0, 0, 8, 0, 0, 0);      /* one token */
    test_moe(2, 16, 8, 2, 0, 0, 64, 0, 0, 0);    /* mixtral-like top-2 of 8, dropless, renormalised */
    test_moe(2, 32, 8, 2, 5, 0, 48, 0, 0, 0);    /* capacity 5 per sequence: drops */
    test_moe(3, 20, 4, 1, 6, 1, 40, 0, 0, 0);    /* switch-style top-1, weights = probabilities, drops */
    test_moe(2, 128, 64, 6, 0, 1, 128, 0, 0, 0); /* many experts, top-6 */
    test_moe(2, 32, 16, 4, 0, 0, 48, 1, 4, 1);   /* DeepSeek-V3-like: sigmoid, 2 of 4 groups, seq aux */
    test_moe(2, 32, 16, 4, 6, 1, 48, 0, 4, 0);   /* softmax pre_softmax, groups, drops */
    test_moe(2, 32, 8, 1, 0, 0, 48, 1, 0, 0);    /* sigmoid top-1: the weight is the score */
    test_moe_gate(1, 1);
    test_moe_gate(37, 23);    /* odd shapes */
    test_moe_gate(256, 768);  /* more rows than a block's threads per column sum */

    parity_close();
    TEST_MAIN_END();
}
