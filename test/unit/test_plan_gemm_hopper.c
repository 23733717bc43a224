/* test_plan_gemm_hopper.c — the planner's GEMM shape model (docs/plan.md, "GEMM efficiency by shape")
 * against GEMM rates measured on Hopper that the model was not built from. bf16: OpenXLA's default matmul
 * performance table, `kDefaultMatmulPTable` in xla/service/gpu/model/matmul_interpolator_data.h
 * (as vendored in tensorflow/tensorflow at commit 372d578bb861, third_party/xla/...), its "sm_90"
 * entries, "bf16xbf16->bf16" FLOP/s of a batched GEMM b x (m x k) . (k x n). The table does not name the
 * part; 4096^3 at 783 TFLOP/s is above the H100 PCIe's 756 peak, so it is an SXM-class sm_90 (132 SMs,
 * 989 TFLOP/s dense bf16), the planner's "h100-80g".
 *
 * The rows below are all 57 entries of that table (it holds sm_90 only at that commit; b 1-4, m, n, k
 * 256-4096) whose output covers at least one full wave of the model's 128 x 256 tiles (b * ceil(m/128) *
 * ceil(n/256) >= 132) and whose k is at least 1024: the shapes of a transformer layer's GEMMs in training. Smaller shapes are not asserted: there cuBLAS switches to smaller tiles or split-K, which
 * the model does not describe (it is pessimistic there, down to 0.3x, and says so in docs/plan.md).
 *
 * Tolerance: every row within 15% (the model's per-tile and per-wave terms are the ones it has; the
 * table's own repeats are not published) and the median of predicted / measured in [0.90, 1.05]: the
 * model may be a little pessimistic on these shapes (its sustained rate is a best-of-sweep figure
 * through a fixed tile) but must not be optimistic, which is the direction that matters for the
 * published H100 runs (docs/plan.md, "H100-era published runs"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan/plan.h"
#include "test/test.h"

typedef struct {
    int b, m, n, k;
    double tflops; /* measured, the table's FLOP/s / 1e12, to 0.1 */
} xla_row;

static const xla_row k_rows[] = {
    { 4, 1024, 2048, 2048, 712.7 }, { 2, 2048, 4096, 1024, 678.7 }, { 2, 4096, 4096, 2048, 763.0 },
    { 4, 4096, 1024, 1024, 673.8 }, { 1, 4096, 4096, 4096, 783.3 }, { 2, 4096, 1024, 4096, 750.6 },
    { 4, 512, 4096, 1024, 592.2 }, { 4, 4096, 512, 1024, 589.0 }, { 2, 2048, 2048, 1024, 600.2 },
    { 2, 1024, 4096, 1024, 596.5 }, { 4, 2048, 2048, 2048, 725.7 }, { 2, 4096, 2048, 4096, 783.2 },
    { 4, 4096, 4096, 4096, 793.1 }, { 4, 2048, 1024, 2048, 710.6 }, { 4, 4096, 512, 4096, 728.6 },
    { 2, 2048, 2048, 2048, 717.7 }, { 4, 4096, 1024, 4096, 777.6 }, { 2, 4096, 4096, 4096, 807.7 },
    { 1, 2048, 4096, 1024, 594.2 }, { 4, 4096, 2048, 4096, 808.7 }, { 4, 1024, 4096, 1024, 674.9 },
    { 1, 4096, 4096, 2048, 738.7 }, { 4, 2048, 2048, 1024, 674.0 }, { 2, 4096, 1024, 1024, 598.2 },
    { 1, 4096, 2048, 4096, 758.4 }, { 4, 4096, 4096, 2048, 764.6 }, { 4, 1024, 2048, 1024, 598.2 },
    { 4, 2048, 4096, 1024, 688.6 }, { 4, 4096, 512, 2048, 703.6 }, { 4, 512, 4096, 2048, 699.7 },
    { 2, 4096, 2048, 1024, 680.9 }, { 2, 2048, 2048, 4096, 756.7 }, { 4, 4096, 1024, 2048, 720.5 },
    { 4, 2048, 4096, 4096, 801.9 }, { 4, 4096, 2048, 2048, 759.3 }, { 2, 1024, 4096, 2048, 714.6 },
    { 2, 4096, 4096, 1024, 693.0 }, { 2, 2048, 4096, 2048, 729.1 }, { 1, 2048, 4096, 4096, 753.6 },
    { 4, 2048, 1024, 1024, 596.5 }, { 4, 1024, 4096, 4096, 773.5 }, { 1, 4096, 2048, 2048, 716.1 },
    { 4, 512, 4096, 4096, 730.1 }, { 4, 2048, 4096, 2048, 752.5 }, { 1, 4096, 2048, 1024, 593.2 },
    { 4, 4096, 4096, 1024, 725.5 }, { 4, 1024, 2048, 4096, 743.6 }, { 2, 1024, 4096, 4096, 747.7 },
    { 2, 4096, 1024, 2048, 713.4 }, { 2, 2048, 4096, 4096, 779.3 }, { 4, 2048, 2048, 4096, 779.1 },
    { 1, 4096, 4096, 1024, 677.4 }, { 4, 1024, 4096, 2048, 718.7 }, { 4, 4096, 2048, 1024, 687.9 },
    { 2, 4096, 2048, 2048, 733.3 }, { 1, 2048, 4096, 2048, 715.4 }, { 4, 2048, 1024, 4096, 745.0 },
};
#define N_ROWS (sizeof k_rows / sizeof k_rows[0])

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_xla_sm90_bf16(void) {
    const mt_gpu_spec *g = mt_gpu_find("h100-80g");
    CHECK(g != NULL && g->n_sms == 132);
    if (!g) return;
    const double sustained = g->peak_bf16_tflops * 1e12 * mt_gpu_sustained_frac(g);
    double r[N_ROWS];
    for (size_t i = 0; i < N_ROWS; i++) {
        const xla_row *w = &k_rows[i];
        CHECK(w->b * ceil(w->m / 128.0) * ceil(w->n / 256.0) >= g->n_sms && w->k >= 1024); /* the selection rule */
        const double t = mt_plan_gemm_time(g, sustained, 2.0, w->b, w->m, w->n, w->k);
        const double pred = 2.0 * w->b * w->m * w->n * w->k / t / 1e12;
        r[i] = pred / w->tflops;
        CHECKF(fabs(r[i] - 1.0) <= 0.15, "b %d %d x %d x %d: predicted %.0f TFLOP/s, XLA's table %.1f (%.3f)", w->b,
               w->m, w->n, w->k, pred, w->tflops, r[i]);
    }
    qsort(r, N_ROWS, sizeof r[0], cmp_double);
    const double med = N_ROWS % 2 ? r[N_ROWS / 2] : 0.5 * (r[N_ROWS / 2 - 1] + r[N_ROWS / 2]);
    printf("shape model / XLA sm_90 bf16 table: %zu shapes, median %.3f, %.3f .. %.3f\n", N_ROWS, med, r[0],
           r[N_ROWS - 1]);
    CHECKF(med >= 0.90 && med <= 1.05, "median predicted / measured %.3f outside [0.90, 1.05]", med);
}

/* The plan's time of one M x N x K GEMM on device g in bf16 (*t16) and in fp8 (*t8), each at its precision's
 * peak times the device's sustained fraction. */
static void gemm_bf16_fp8(const mt_gpu_spec *g, double M, double N, double K, double *t16, double *t8) {
    const double s = mt_gpu_sustained_frac(g);
    *t16 = mt_plan_gemm_time(g, g->peak_bf16_tflops * 1e12 * s, 2.0, 1, M, N, K);
    *t8 = mt_plan_gemm_time(g, g->peak_fp8_tflops * 1e12 * s, 1.0, 1, M, N, K);
}

/* fp8 against bf16 on the same shapes: Transformer Engine's GEMM benchmark (docs/features/low_precision_training/
 * speedups.rst, NVIDIA/TransformerEngine at commit 03b5742fb857), a 5B layer (hidden 4096, intermediate 16384,
 * M = 31 x 512 = 15,872 tokens; the 12 GEMMs of a layer: QKV, projection, MLP up, MLP down, each forward,
 * dgrad and wgrad) on an H200 NVL: "In pre-quantized mode, raw FP8 reaches 1.92x over BF16" (operands already
 * fp8: the kernels alone, what the plan's GEMM term models; its fp8 casts are a separate term). Tolerance 5%:
 * the published figure has two digits and the H200 NVL is a 600 W part, the plan's h200 the SXM one (the ratio,
 * not the rate, is compared). */
static void test_te_fp8_over_bf16(void) {
    const mt_gpu_spec *g = mt_gpu_find("h200");
    CHECK(g != NULL);
    if (!g) return;
    const double M = 31 * 512, h = 4096, F = 16384;
    const double fwd[4][2] = { { 3 * h, h }, { h, h }, { F, h }, { h, F } }; /* (N, K) of each forward GEMM */
    double t16 = 0, t8 = 0;
    for (int i = 0; i < 4; i++) {
        const double N = fwd[i][0], K = fwd[i][1];
        const double shapes[3][3] = { { M, N, K }, { M, K, N }, { N, K, M } }; /* fprop, dgrad, wgrad */
        for (int j = 0; j < 3; j++) {
            double a, b;
            gemm_bf16_fp8(g, shapes[j][0], shapes[j][1], shapes[j][2], &a, &b);
            t16 += a;
            t8 += b;
        }
    }
    printf("5B layer, 12 GEMMs: fp8 / bf16 speed-up %.3f (Transformer Engine on an H200 NVL: 1.92)\n", t16 / t8);
    CHECKF(fabs(t16 / t8 / 1.92 - 1.0) <= 0.05, "fp8 over bf16 %.3f, published 1.92", t16 / t8);
}

/* The shapes the GPU check's fp8_gemm step times (scripts/gpu-kit/fp8_gemm.py: a Llama 2 7B layer's forward
 * GEMMs at 4096 tokens and 8192^3): the plan's fp8 / bf16 speed-up on each, which that step's measured ratios
 * (fast accumulation, and the split accumulator of Transformer Engine's backward) are to be read against.
 * Guarded to the model's present range (1.8-2.0: twice the peak, less fp8's larger per-tile cost k0). */
static void test_fp8_gemm_step_shapes(void) {
    const mt_gpu_spec *g = mt_gpu_find("h200");
    CHECK(g != NULL);
    if (!g) return;
    static const struct { const char *name; double M, N, K; } shapes[] = {
        { "llama2-7b qkv", 4096, 12288, 4096 }, { "llama2-7b proj", 4096, 4096, 4096 },
        { "llama2-7b fc1", 4096, 22016, 4096 }, { "llama2-7b fc2", 4096, 4096, 11008 }, { "square 8192", 8192, 8192, 8192 },
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const double fl = 2.0 * shapes[i].M * shapes[i].N * shapes[i].K;
        double t16, t8;
        gemm_bf16_fp8(g, shapes[i].M, shapes[i].N, shapes[i].K, &t16, &t8);
        printf("fp8_gemm step shape %-15s h200 model: bf16 %.0f, fp8 %.0f TFLOP/s, fp8 / bf16 %.3f\n", shapes[i].name,
               fl / t16 / 1e12, fl / t8 / 1e12, t16 / t8);
        CHECKF(t16 / t8 >= 1.8 && t16 / t8 <= 2.0, "%s: model fp8 / bf16 %.3f", shapes[i].name, t16 / t8);
    }
}

int main(void) {
    test_xla_sm90_bf16();
    test_te_fp8_over_bf16();
    test_fp8_gemm_step_shapes();
    TEST_MAIN_END();
}
