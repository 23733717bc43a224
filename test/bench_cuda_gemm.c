/* bench_cuda_gemm.c — `make bench` and the GPU check's gemm step: the CUDA backend's GEMM ops (cuBLASLt)
 * timed one shape at a time, beside the planner's shape model for the same device (docs/plan.md, "GEMM
 * efficiency by shape"). It answers two questions a training step's op table cannot: how fast cuBLASLt
 * runs a layer's GEMM alone, and what the epilogues (bias, GELU, dGELU, the fp32 weight-gradient
 * accumulation) cost on top of the plain GEMM.
 *
 * Shapes (M rows of tokens, N output features, K input features; out = inp @ weight^T): gpt1.3b's layer at
 * its gpu-check micro-batch (M = 4 x 2048): QKV, projection, fc1, fc2 and the output layer; and the squares
 * whose measured rates the planner is built on or checked against (8192^3 on an H200, 4096^3 in XLA's
 * sm_90 table, test/unit/test_plan_gemm_hopper.c). Per shape: fwd (plain), fwd + bias, bwd (dinp =, and
 * dweight += in fp32), and gelu_fwd / dgelu_bwd where the layer has them (fc1 / fc2). Operands are
 * uniform random bf16 (a GPU's clock under its power limit depends on the data; training's is random-like).
 * Each row: the best of 3 timings of `reps` back-to-back calls after 3 warm-up calls, one sync per timing.
 * Columns: ms per call, TFLOP/s (2MNK forward, 4MNK backward), the shape model's TFLOP/s for the device
 * (model; "-" when the device is not in the planner's table) and measured / model. A line per row starts
 * with "GEMM_ROW " and holds the same figures as JSON, for the gpu-check report.
 *
 * Usage: bench_cuda_gemm [--gpu NAME] [--reps N] [--dry-run]   (NAME: a planner device, e.g. h200; default:
 * the one whose name cudaGetDeviceProperties reports). Without a GPU (or a CUDA build) it prints
 * "skipped: <reason>" and exits 77. --dry-run: the same rows on the CPU backend with every dimension / 16
 * and one call per timing (the GPU check's dry run: the plumbing and the report's parser, no speed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "plan/plan.h"

/* The planner's device for a CUDA device name (exact names, as core/device_peak.c matches them). */
static const char *planner_device(const char *device_name) {
    static const struct {
        const char *cuda, *plan;
    } k_map[] = { { "NVIDIA H100 80GB HBM3", "h100-80g" }, { "NVIDIA H100 PCIe", "h100-pcie" }, { "NVIDIA H200", "h200" },
                  { "NVIDIA A100-SXM4-80GB", "a100-80g" }, { "NVIDIA A100-SXM4-40GB", "a100-40g" } };
    for (size_t i = 0; i < sizeof k_map / sizeof k_map[0]; i++) {
        const size_t n = strlen(k_map[i].cuda);
        if (strncmp(device_name, k_map[i].cuda, n) == 0 && (device_name[n] == '\0' || strncmp(device_name + n, " (", 2) == 0))
            return k_map[i].plan;
    }
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    mt_backend be;
    void *inp, *weight, *bias, *out, *pre, *dout, *dinp, *dweight, *dbias; /* the largest shape's sizes */
} bench;

/* A device buffer of n elements of dtype dt, filled with uniform random values in [-scale, scale). */
static void *rand_buffer(bench *b, size_t n, mt_dtype dt, float scale, uint64_t *rng) {
    void *dev = NULL;
    const size_t eb = mt_dtype_bytes(dt);
    unsigned char *host = malloc(n * eb);
    if (!host || b->be.i->alloc(&b->be, n * eb, &dev) != MT_OK) {
        fprintf(stderr, "bench_cuda_gemm: out of memory (%zu bytes): %s\n", n * eb, mt_last_error());
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        const float v = scale * ((float)(*rng >> 40) / (float)(1ull << 24) * 2.0f - 1.0f);
        if (dt == MT_F32) memcpy(host + i * 4, &v, 4);
        else { const uint16_t h = mt_f32_to_bf16(v); memcpy(host + i * 2, &h, 2); }
    }
    if (b->be.i->copy_h2d(&b->be, dev, host, n * eb) != MT_OK) { fprintf(stderr, "copy: %s\n", mt_last_error()); exit(1); }
    free(host);
    return dev;
}

enum { V_FWD, V_FWD_BIAS, V_BWD, V_GELU_FWD, V_DGELU_BWD };
static const char *const k_variant[] = { "fwd", "fwd+bias", "bwd", "gelu_fwd", "dgelu_bwd" };

static mt_status call(bench *b, int v, int M, int N, int K) {
    const struct mt_backend_i *i = b->be.i;
    switch (v) {
    case V_FWD: case V_FWD_BIAS: {
        const mt_matmul_fwd_args a = { b->out, b->inp, b->weight, v == V_FWD_BIAS ? b->bias : NULL, M, N, K };
        return i->matmul_fwd(&b->be, &a);
    }
    case V_BWD: {
        const mt_matmul_bwd_args a = { b->dinp, b->dweight, NULL, b->dout, b->inp, b->weight, M, N, K, 0 };
        return i->matmul_bwd(&b->be, &a);
    }
    case V_GELU_FWD: {
        const mt_matmul_gelu_fwd_args a = { b->out, b->pre, b->inp, b->weight, b->bias, M, N, K };
        return i->matmul_gelu_fwd ? i->matmul_gelu_fwd(&b->be, &a) : MT_ERR_UNSUPPORTED;
    }
    default: { /* the GEMM consuming gelu(pre): inp and pre are (M, K) */
        const mt_matmul_dgelu_bwd_args a = { b->dinp, b->dweight, b->dbias, b->dout, b->inp, b->weight, b->pre, M, N, K };
        return i->matmul_dgelu_bwd ? i->matmul_dgelu_bwd(&b->be, &a) : MT_ERR_UNSUPPORTED;
    }
    }
}

int main(int argc, char **argv) {
    const char *gpu = NULL;
    int reps = 20, dry = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--gpu") && a + 1 < argc) gpu = argv[++a];
        else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--dry-run")) dry = 1;
        else { fprintf(stderr, "usage: bench_cuda_gemm [--gpu NAME] [--reps N] [--dry-run]\n"); return 2; }
    }
    if (reps < 1) reps = 1;
    bench b;
    memset(&b, 0, sizeof b);
    if (dry) {
        if (mt_backend_cpu_create(&b.be, 0) != MT_OK) { fprintf(stderr, "cpu backend: %s\n", mt_last_error()); return 1; }
        reps = 1;
    } else if (mt_backend_cuda_create(&b.be, 0) != MT_OK) {
        printf("skipped: %s\n", mt_last_error());
        return 77;
    }
    const int div = dry ? 16 : 1;
    if (!gpu) gpu = planner_device(b.be.device_name);
    const mt_gpu_spec *g = gpu ? mt_gpu_find(gpu) : NULL;
    if (gpu && !g) { fprintf(stderr, "bench_cuda_gemm: --gpu %s: not a planner device (%s)\n", gpu, mt_gpu_names()); return 2; }
    const int T = 4 * 2048 / div, h = 2048 / div, F = 8192 / div, V = 50304 / div; /* gpt1.3b: micro-batch 4 x 2048,
                                                                                      vocabulary padded */
    const int S8 = 8192 / div, S4 = 4096 / div;
    const struct {
        const char *name;
        int M, N, K, gelu; /* gelu: 1 = also gelu_fwd, 2 = also dgelu_bwd */
    } shapes[] = { { "gpt1.3b qkv", T, 3 * h, h, 0 }, { "gpt1.3b proj", T, h, h, 0 }, { "gpt1.3b fc1", T, F, h, 1 },
                   { "gpt1.3b fc2", T, h, F, 2 },     { "gpt1.3b logits", T, V, h, 0 }, { "square 8192", S8, S8, S8, 0 },
                   { "square 4096", S4, S4, S4, 0 } };
    const size_t n_shapes = sizeof shapes / sizeof shapes[0];
    size_t mk = 0, nk = 0, mn = 0, n_max = 0;
    for (size_t s = 0; s < n_shapes; s++) {
        const size_t M = (size_t)shapes[s].M, N = (size_t)shapes[s].N, K = (size_t)shapes[s].K;
        mk = M * K > mk ? M * K : mk; nk = N * K > nk ? N * K : nk; mn = M * N > mn ? M * N : mn;
        n_max = N > n_max ? N : n_max;
    }
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    b.inp = rand_buffer(&b, mk, b.be.act, 1.0f, &rng);
    b.pre = rand_buffer(&b, mk > mn ? mk : mn, b.be.act, 1.0f, &rng);
    b.weight = rand_buffer(&b, nk, b.be.act, 0.02f, &rng);
    b.bias = rand_buffer(&b, n_max, b.be.act, 0.02f, &rng);
    b.out = rand_buffer(&b, mn, b.be.act, 1.0f, &rng);
    b.dout = rand_buffer(&b, mn, b.be.act, 1.0f, &rng);
    b.dinp = rand_buffer(&b, mk, b.be.act, 1.0f, &rng);
    b.dweight = rand_buffer(&b, nk, MT_F32, 1e-3f, &rng);
    b.dbias = rand_buffer(&b, n_max, MT_F32, 1e-3f, &rng);
    printf("device %s (planner device %s), %d calls per timing, best of 3\n", b.be.device_name, g ? g->name : "none", reps);
    printf("%-16s %-10s %6s %6s %6s %9s %9s %9s %7s\n", "shape", "op", "M", "N", "K", "ms", "TFLOP/s", "model", "ratio");
    int failed = 0;
    for (size_t s = 0; s < n_shapes; s++) {
        const int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        for (int v = V_FWD; v <= V_DGELU_BWD; v++) {
            if ((v == V_GELU_FWD && shapes[s].gelu != 1) || (v == V_DGELU_BWD && shapes[s].gelu != 2)) continue;
            const int bwd = v == V_BWD || v == V_DGELU_BWD;
            double best = INFINITY;
            mt_status st = MT_OK;
            for (int w = 0; w < 3 && st == MT_OK; w++) st = call(&b, v, M, N, K);
            if (st == MT_OK) st = b.be.i->sync(&b.be);
            for (int t = 0; t < 3 && st == MT_OK; t++) {
                const double t0 = now_s();
                for (int r = 0; r < reps && st == MT_OK; r++) st = call(&b, v, M, N, K);
                if (st == MT_OK) st = b.be.i->sync(&b.be);
                const double dt = (now_s() - t0) / reps;
                best = dt < best ? dt : best;
            }
            if (st != MT_OK) {
                printf("%-16s %-10s failed: %s\n", shapes[s].name, k_variant[v], mt_last_error());
                failed = 1;
                continue;
            }
            const double fl = (bwd ? 4.0 : 2.0) * M * (double)N * K, rate = fl / best / 1e12;
            double model = 0.0; /* the planner's time: forward one GEMM, backward its two (dinp M x K by N, dweight N x K by M) */
            if (g) {
                const double pk = g->peak_bf16_tflops * 1e12 * mt_gpu_sustained_frac(g);
                const double tm = bwd ? mt_plan_gemm_time(g, pk, 2.0, 1, M, K, N) + mt_plan_gemm_time(g, pk, 2.0, 1, N, K, M)
                                      : mt_plan_gemm_time(g, pk, 2.0, 1, M, N, K);
                model = tm > 0 ? fl / tm / 1e12 : 0.0;
            }
            char mod[16] = "-", ratio[16] = "-";
            if (model > 0) {
                snprintf(mod, sizeof mod, "%.0f", model);
                snprintf(ratio, sizeof ratio, "%.3f", rate / model);
            }
            printf("%-16s %-10s %6d %6d %6d %9.3f %9.1f %9s %7s\n", shapes[s].name, k_variant[v], M, N, K, 1e3 * best, rate,
                   mod, ratio);
            printf("GEMM_ROW {\"shape\": \"%s\", \"op\": \"%s\", \"M\": %d, \"N\": %d, \"K\": %d, \"ms\": %.4f, \"tflops\": %.1f, "
                   "\"model_tflops\": %.1f}\n", shapes[s].name, k_variant[v], M, N, K, 1e3 * best, rate, model);
        }
    }
    void *bufs[] = { b.inp, b.weight, b.bias, b.out, b.pre, b.dout, b.dinp, b.dweight, b.dbias };
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) b.be.i->free(&b.be, bufs[k]);
    mt_backend_destroy(&b.be);
    return failed;
}
