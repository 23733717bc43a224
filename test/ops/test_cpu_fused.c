/* test_cpu_fused.c — the fused ops of backend.h on the CPU backend against the unfused ops they
 * replace, with EXACT equality (memcmp): the CPU reference runs the same arithmetic in the same
 * order, which is what keeps a model's losses bit-identical whether it calls the fused ops or
 * not. Covered: add_layernorm_fwd (with and without bias) and add_rmsnorm_fwd against add +
 * norm (out_resid, out, mean, rstd; also in place, out_resid == a); matmul_gelu_fwd against
 * matmul_fwd + gelu_fwd (with and without bias, K = 0); matmul_dgelu_bwd against matmul_bwd +
 * gelu_bwd (dinp, and dweight / dbias accumulated onto nonzero values); init_normal against
 * (float)(std * mt_rng_normal) at an offset, for 1 and 4 threads; and train/model.c's device-side
 * init path (taken by a backend without host memory that offers init_normal, i.e. CUDA), run
 * here on a CPU backend that reports host_memory = 0, against the host path: the same weights
 * bit for bit, for a GPT and a Llama (norm weights, biases, output-scaled projections). Shapes are odd (not multiples
 * of 8 or of the column blocks) so every remainder loop runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test/test.h"
#include "test/unit/tiny_model.h"
#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "core/rng.h"
#include "train/model.h"

static mt_backend be;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float urand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *rnd(size_t n, float scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = scale * urand();
    return x;
}

static float *dup(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

#define SAME(a, b, n, what) CHECKF(memcmp((a), (b), (size_t)(n) * sizeof(float)) == 0, "%s differs", what)

static void test_add_norm(int layernorm, int with_bias, int in_place) {
    const int N = 37, C = 301;
    const size_t n = (size_t)N * C;
    float *a = rnd(n, 2.0f), *b = rnd(n, 0.5f), *w = rnd(C, 1.0f), *bias = rnd(C, 0.1f);
    float *r1 = calloc(n, 4), *o1 = calloc(n, 4), *m1 = calloc(N, 4), *s1 = calloc(N, 4);
    float *o2 = calloc(n, 4), *m2 = calloc(N, 4), *s2 = calloc(N, 4);
    float *a2 = dup(a, n);
    /* unfused: add, then the norm of the stored sum */
    mt_add_args ad = {.out = r1, .a = a, .b = b, .n = n};
    CHECK(MT_BE_CALL(&be, add, &ad) == MT_OK);
    mt_norm_fwd_args na = {.out = o1, .mean = layernorm ? m1 : NULL, .rstd = s1, .inp = r1, .weight = w,
                           .bias = layernorm && with_bias ? bias : NULL, .N = N, .C = C, .eps = 1e-5f};
    CHECK((layernorm ? MT_BE_CALL(&be, layernorm_fwd, &na) : MT_BE_CALL(&be, rmsnorm_fwd, &na)) == MT_OK);
    /* fused */
    float *r2 = in_place ? a2 : calloc(n, 4);
    mt_add_norm_fwd_args fa = {.out_resid = r2, .out = o2, .mean = layernorm ? m2 : NULL, .rstd = s2, .a = a2,
                               .b = b, .weight = w, .bias = layernorm && with_bias ? bias : NULL, .N = N, .C = C,
                               .eps = 1e-5f};
    CHECK((layernorm ? MT_BE_CALL(&be, add_layernorm_fwd, &fa) : MT_BE_CALL(&be, add_rmsnorm_fwd, &fa)) == MT_OK);
    SAME(r1, r2, n, "add_norm out_resid");
    SAME(o1, o2, n, "add_norm out");
    SAME(s1, s2, N, "add_norm rstd");
    if (layernorm) SAME(m1, m2, N, "add_norm mean");
    if (!in_place) free(r2);
    free(a), free(b), free(w), free(bias), free(r1), free(o1), free(m1), free(s1), free(o2), free(m2), free(s2);
    free(a2);
}

static void test_matmul_gelu(int M, int N, int K, int with_bias) {
    const size_t mn = (size_t)M * N;
    float *x = rnd((size_t)M * K, 1.0f), *w = rnd((size_t)N * K, 0.3f), *b = rnd(N, 0.2f);
    float *pre1 = calloc(mn + 1, 4), *out1 = calloc(mn + 1, 4), *pre2 = calloc(mn + 1, 4), *out2 = calloc(mn + 1, 4);
    mt_matmul_fwd_args mf = {.out = pre1, .inp = x, .weight = w, .bias = with_bias ? b : NULL, .M = M, .N = N, .K = K};
    CHECK(MT_BE_CALL(&be, matmul_fwd, &mf) == MT_OK);
    mt_gelu_fwd_args gf = {.out = out1, .inp = pre1, .n = mn};
    CHECK(MT_BE_CALL(&be, gelu_fwd, &gf) == MT_OK);
    mt_matmul_gelu_fwd_args ff = {.out = out2, .pre = pre2, .inp = x, .weight = w, .bias = with_bias ? b : NULL,
                                  .M = M, .N = N, .K = K};
    CHECK(MT_BE_CALL(&be, matmul_gelu_fwd, &ff) == MT_OK);
    SAME(pre1, pre2, mn, "matmul_gelu pre");
    SAME(out1, out2, mn, "matmul_gelu out");

    /* backward of the GEMM that reads gelu(pre): y (M, P) = out1 (M, N) V (P, N)^T */
    const int P = 19;
    float *v = rnd((size_t)P * N, 0.3f), *dy = rnd((size_t)M * P, 1.0f);
    float *dw1 = rnd((size_t)P * N, 0.01f), *db1 = rnd(P, 0.01f);
    float *dw2 = dup(dw1, (size_t)P * N), *db2 = dup(db1, P);
    float *dtmp = calloc(mn + 1, 4), *dpre1 = calloc(mn + 1, 4), *dpre2 = rnd(mn, 9.0f); /* = must overwrite */
    mt_matmul_bwd_args mb = {.dinp = dtmp, .dweight = dw1, .dbias = db1, .dout = dy, .inp = out1, .weight = v,
                             .M = M, .N = P, .K = N, .accumulate_dinp = 0};
    CHECK(MT_BE_CALL(&be, matmul_bwd, &mb) == MT_OK);
    mt_gelu_bwd_args gb = {.dinp = dpre1, .dout = dtmp, .inp = pre1, .n = mn};
    CHECK(MT_BE_CALL(&be, gelu_bwd, &gb) == MT_OK);
    mt_matmul_dgelu_bwd_args fb = {.dinp = dpre2, .dweight = dw2, .dbias = db2, .dout = dy, .inp = out1, .weight = v,
                                   .pre = pre1, .M = M, .N = P, .K = N};
    CHECK(MT_BE_CALL(&be, matmul_dgelu_bwd, &fb) == MT_OK);
    SAME(dpre1, dpre2, mn, "matmul_dgelu dinp");
    SAME(dw1, dw2, (size_t)P * N, "matmul_dgelu dweight");
    SAME(db1, db2, P, "matmul_dgelu dbias");
    free(x), free(w), free(b), free(pre1), free(out1), free(pre2), free(out2);
    free(v), free(dy), free(dw1), free(db1), free(dw2), free(db2), free(dtmp), free(dpre1), free(dpre2);
}

static void test_init_normal(int threads) {
    mt_backend b1;
    CHECK(mt_backend_cpu_create(&b1, threads) == MT_OK);
    const size_t n = 70001; /* above the op's parallel threshold */
    const uint64_t seed = 1234, stream = mt_hash_str("blocks.fc.weight") ^ 0x9e3779b97f4a7c15ULL, off = 12345;
    const double sd = 0.02 * (1.0 / 2.8284271247461903);
    float *got = calloc(n, 4), *want = calloc(n, 4);
    for (size_t e = 0; e < n; e++) want[e] = (float)(sd * mt_rng_normal(seed, stream, off + e));
    mt_init_normal_args ia = {.out = got, .n = n, .seed = seed, .stream = stream, .offset = off, .std = sd};
    CHECK(MT_BE_CALL(&b1, init_normal, &ia) == MT_OK);
    SAME(want, got, n, "init_normal");
    mt_backend_destroy(&b1);
    free(got), free(want);
}

static int init_normal_calls;
static mt_status (*mt_cpu_table_init_normal)(mt_backend *, const mt_init_normal_args *);
static mt_status counting_init_normal(mt_backend *b, const mt_init_normal_args *a) {
    init_normal_calls++;
    return mt_cpu_table_init_normal(b, a);
}

static void test_model_device_init(const char *arch) {
    static mt_recipe r;
    tiny_recipe(&r, arch, 6);
    if (strcmp(arch, "llama") == 0) CHECK(mt_recipe_set(&r, "model.ffn_hidden", "48", "test") == MT_OK);
    if (tiny_batch_validate(&r, 1) != MT_OK) return;
    mt_backend dev_like = be;
    dev_like.host_memory = 0; /* the CPU's buffers are still host memory: only the init path changes */
    struct mt_backend_i counting = *be.i; /* count the init_normal calls: the device path must run */
    mt_cpu_table_init_normal = be.i->init_normal;
    counting.init_normal = counting_init_normal;
    dev_like.i = &counting;
    init_normal_calls = 0;
    mt_model mh, md;
    CHECK(mt_model_init(&mh, &r, &be, 1, 1, 0) == MT_OK);
    CHECK(mt_model_init(&md, &r, &dev_like, 1, 1, 0) == MT_OK);
    CHECKF(init_normal_calls > 0, "%s: the device-side init path did not run", arch);
    CHECK(mh.pl.n_elems == md.pl.n_elems);
    CHECKF(memcmp(mh.params, md.params, mh.pl.n_elems * sizeof(float)) == 0, "%s: device-init weights differ", arch);
    mt_model_free(&mh);
    mt_model_free(&md);
}

int main(void) {
    CHECK(mt_backend_cpu_create(&be, 0) == MT_OK);
    for (int in_place = 0; in_place < 2; in_place++) {
        test_add_norm(1, 1, in_place);
        test_add_norm(1, 0, in_place);
        test_add_norm(0, 0, in_place);
    }
    test_matmul_gelu(33, 150, 47, 1);
    test_matmul_gelu(33, 150, 47, 0);
    test_matmul_gelu(5, 9, 0, 1); /* K = 0: pre = bias */
    test_matmul_gelu(300, 130, 20, 1); /* above the parallel threshold */
    test_init_normal(1);
    test_init_normal(4);
    test_model_device_init("gpt");
    test_model_device_init("llama");
    mt_backend_destroy(&be);
    TEST_MAIN_END();
}
