/* cuda_parity_check.h — what test_cuda_parity.c and test_cuda_parity_train.c share: ggml-style
 * backend parity, where an op is run on the CUDA backend and on the CPU backend (the reference)
 * from the same inputs and the results are compared by normalised MSE,
 * nmse = sum((cuda - cpu)^2) / sum(cpu^2).
 *
 * Inputs are drawn on the host and rounded to bf16 first, so both backends see bit-identical
 * values (the CPU backend gets them as fp32, the CUDA backend as bf16). What remains is
 *  - bf16 rounding of CUDA's activation outputs: relative error <= 2^-8 (8-bit significand),
 *    mean square ~ 3e-6 for well-spread values  -> tolerance TOL_ACT = 1e-4. (Checked on the
 *    CPU by a stand-in backend that rounds the reference's act outputs to bf16, created in place
 *    of g_cuda by mt_backend_cpu_create: nmse 2.8e-6 typical, 7.3e-6 worst over the matmul and
 *    norm shapes, so 1e-4 leaves >10x margin and still fails on any real indexing or formula
 *    error, which gives nmse ~ 1; over every other op of both tests, largest nmse 1.5e-5 (a
 *    single element: one rounding is at most 2^-8 relative), 7e-6 for any multi-element output);
 *  - fp32 summation order for f32 outputs (weight gradients, mean/rstd): the products of bf16
 *    values are exact in fp32, only the order of the fp32 sums differs -> nmse ~ 1e-12;
 *    tolerance TOL_F32 = 1e-6 still catches any wrong index or missing term.
 * Accumulating outputs (+=) start from random values; for f32 gradients the increment
 * (result - initial) is compared, so a small wrong increment cannot hide under a large start.
 * Each test file says which of its outputs fall under which tolerance and why. Header-only:
 * every function is static inline, so a test that uses only some of them compiles without
 * unused-function warnings. */
#ifndef MT_TEST_CUDA_PARITY_CHECK_H
#define MT_TEST_CUDA_PARITY_CHECK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/status.h"
#include "test/test.h"

#define TOL_ACT 1e-4
#define TOL_F32 1e-6

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static inline float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static inline float round_bf16(float f) { return mt_bf16_to_f32(mt_f32_to_bf16(f)); }

/* n values scale * U[-1,1) + offset, rounded to bf16 so both backends see the same numbers */
static inline float *host_rand(size_t n, float scale, float offset) {
    float *x = malloc(n * sizeof *x + 1);
    for (size_t i = 0; i < n; i++) x[i] = round_bf16(scale * frand() + offset);
    return x;
}

static inline double nmse(const float *a, const float *b, size_t n) {
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

static inline void up(mt_backend *be, void *dev, const float *host, size_t n, mt_dtype dt) {
    if (dt == MT_F32) {
        CHECK(be->i->copy_h2d(be, dev, host, n * 4) == MT_OK);
        return;
    }
    uint16_t *h = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) h[i] = mt_f32_to_bf16(host[i]);
    CHECK(be->i->copy_h2d(be, dev, h, n * 2) == MT_OK);
    free(h);
}

static inline void down(mt_backend *be, float *host, const void *dev, size_t n, mt_dtype dt) {
    if (dt == MT_F32) {
        CHECKF(be->i->copy_d2h(be, host, dev, n * 4) == MT_OK, "%s", mt_last_error());
        return;
    }
    uint16_t *h = malloc(n * 2 + 2);
    CHECKF(be->i->copy_d2h(be, h, dev, n * 2) == MT_OK, "%s", mt_last_error());
    for (size_t i = 0; i < n; i++) host[i] = mt_bf16_to_f32(h[i]);
    free(h);
}

/* is_act: the tensor is in the backend's compute dtype (act), else always f32 */
static inline pair_t pair_new(const float *host, size_t n, int is_act) {
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

static inline void pair_free(pair_t *p) {
    g_cpu.i->free(&g_cpu, p->cpu);
    g_cuda.i->free(&g_cuda, p->gpu);
}

/* Downloads both sides; if init != NULL compares the increments (result - init). */
static inline void compare(const char *what, const pair_t *p, int is_act, const float *init, double tol) {
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

/* An i32 tensor (tokens, targets) on both backends, same bits on each. */
static inline pair_t ipair_new(const int32_t *host, size_t n) {
    pair_t p = {NULL, NULL, n, MT_F32};
    if (g_cpu.i->alloc(&g_cpu, n * 4, &p.cpu) != MT_OK || g_cuda.i->alloc(&g_cuda, n * 4, &p.gpu) != MT_OK) {
        fprintf(stderr, "alloc failed: %s\n", mt_last_error());
        exit(1);
    }
    CHECK(g_cpu.i->copy_h2d(&g_cpu, p.cpu, host, n * 4) == MT_OK);
    CHECK(g_cuda.i->copy_h2d(&g_cuda, p.gpu, host, n * 4) == MT_OK);
    return p;
}

/* Puts the same host values into an existing pair on both sides (resets an in-place input). */
static inline void pair_set(pair_t *p, const float *host, int is_act) {
    up(&g_cpu, p->cpu, host, p->n, is_act ? g_cpu.act : MT_F32);
    up(&g_cuda, p->gpu, host, p->n, p->dtype_gpu);
}

/* The CUDA side of an f32 tensor, downloaded twice after two identical runs, must match bit for
 * bit; `first` holds the first run's values. */
static inline void check_same_bits(const char *what, const float *first, const pair_t *p) {
    float *second = malloc(p->n * sizeof *second + 1);
    down(&g_cuda, second, p->gpu, p->n, MT_F32);
    CHECKF(memcmp(first, second, p->n * sizeof *second) == 0,
           "%s differs between two identical runs (not deterministic)", what);
    free(second);
}

/* Creates the backend under test (CUDA, device 0) and the reference (CPU, all cores) and prints
 * both; 0 when either fails (the message is printed). */
static inline int parity_open(void) {
    mt_status st = mt_backend_cuda_create(&g_cuda, 0);
    if (st != MT_OK) {
        fprintf(stderr, "mt_backend_cuda_create: %s\n", mt_last_error());
        return 0;
    }
    st = mt_backend_cpu_create(&g_cpu, 0);
    if (st != MT_OK) {
        fprintf(stderr, "mt_backend_cpu_create: %s\n", mt_last_error());
        return 0;
    }
    printf("cuda backend: %s (act %s, peak %.0f TFLOP/s); reference: %s\n", g_cuda.device_name,
           mt_dtype_name(g_cuda.act), g_cuda.peak_tflops, g_cpu.device_name);
    return 1;
}

static inline void parity_close(void) {
    mt_backend_destroy(&g_cuda);
    mt_backend_destroy(&g_cpu);
}

#endif
