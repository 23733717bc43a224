/* cpu_backend.h — internal to the CPU backend (cpu_*.c): its context, the op entry points the
 * table in cpu_backend.c points at, and small inline helpers shared by the op files.
 * Rules kept by every CPU op: fp32 throughout ("act" = f32); no allocation inside an op;
 * OpenMP loops are `parallel for schedule(static)` over independent rows / column blocks and
 * never use reduction clauses, so results are bitwise identical run to run for a fixed
 * thread count; bad arguments return MT_ERR_* via mt_errorf, never abort. */
#ifndef MT_CPU_BACKEND_H
#define MT_CPU_BACKEND_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/backend.h"
#include "core/op_check.h"

typedef struct {
    int n_threads;
    char device_name[64];
} mt_cpu_ctx;

/* The backend's OpenMP team size: every parallel region names it (num_threads), so two
 * backends with different counts in one process do not disturb each other. */
static inline int mt_cpu_nt(const mt_backend *be) { return ((const mt_cpu_ctx *)be->ctx)->n_threads; }

/* Starts n_threads - 1 threads at once, with the stack OpenMP would give them, and stops them:
 * MT_ERR_CONFIG naming training.threads and the count that started when the system refuses one
 * (cpu_threads.c). n_cpus: the CPUs this process may run on, for the message. */
mt_status mt_cpu_threads_probe(int n_threads, int n_cpus);

/* Work (elements touched) below which an op's loop stays on one thread: an OpenMP fork costs
 * a few microseconds, and the result does not depend on the thread count anyway. */
#define MT_CPU_PAR_MIN 32768

/* matmul (cpu_ops_matmul.c) */
void mt_cpu_sgemm(int n_threads, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
mt_status mt_cpu_matmul_fwd(mt_backend *be, const mt_matmul_fwd_args *a);
mt_status mt_cpu_matmul_bwd(mt_backend *be, const mt_matmul_bwd_args *a);
/* norms (cpu_ops_norm.c) */
mt_status mt_cpu_layernorm_fwd(mt_backend *be, const mt_norm_fwd_args *a);
mt_status mt_cpu_layernorm_bwd(mt_backend *be, const mt_norm_bwd_args *a);
mt_status mt_cpu_rmsnorm_fwd(mt_backend *be, const mt_norm_fwd_args *a);
mt_status mt_cpu_rmsnorm_bwd(mt_backend *be, const mt_norm_bwd_args *a);
/* elementwise (cpu_ops_act.c) */
mt_status mt_cpu_gelu_fwd(mt_backend *be, const mt_gelu_fwd_args *a);
mt_status mt_cpu_gelu_bwd(mt_backend *be, const mt_gelu_bwd_args *a);
mt_status mt_cpu_swiglu_fwd(mt_backend *be, const mt_swiglu_fwd_args *a);
mt_status mt_cpu_swiglu_bwd(mt_backend *be, const mt_swiglu_bwd_args *a);
mt_status mt_cpu_squared_relu_fwd(mt_backend *be, const mt_squared_relu_fwd_args *a);
mt_status mt_cpu_squared_relu_bwd(mt_backend *be, const mt_squared_relu_bwd_args *a);
mt_status mt_cpu_add(mt_backend *be, const mt_add_args *a);
mt_status mt_cpu_scale(mt_backend *be, const mt_scale_args *a);
mt_status mt_cpu_sum(mt_backend *be, const mt_sum_args *a);
mt_status mt_cpu_cast_f32_to_act(mt_backend *be, const mt_cast_args *a);
/* attention (cpu_ops_attention.c) */
mt_status mt_cpu_rope(mt_backend *be, const mt_rope_args *a);
mt_status mt_cpu_attention_fwd(mt_backend *be, const mt_attention_fwd_args *a);
mt_status mt_cpu_attention_bwd(mt_backend *be, const mt_attention_bwd_args *a);
mt_status mt_cpu_attention_block_fwd(mt_backend *be, const mt_attention_block_fwd_args *a);
mt_status mt_cpu_attention_block_bwd(mt_backend *be, const mt_attention_block_bwd_args *a);
mt_status mt_cpu_copy_rows(mt_backend *be, const mt_copy_rows_args *a);
/* embedding and loss (cpu_ops_embed.c) */
mt_status mt_cpu_embedding_fwd(mt_backend *be, const mt_embedding_fwd_args *a);
mt_status mt_cpu_embedding_bwd(mt_backend *be, const mt_embedding_bwd_args *a);
mt_status mt_cpu_xent_fwd_bwd(mt_backend *be, const mt_xent_args *a);
/* vocab-parallel cross-entropy phases (cpu_ops_xent.c) */
mt_status mt_cpu_xent_vp_max(mt_backend *be, const mt_xent_vp_args *a);
mt_status mt_cpu_xent_vp_sumexp(mt_backend *be, const mt_xent_vp_args *a);
mt_status mt_cpu_xent_vp_finish(mt_backend *be, const mt_xent_vp_args *a);
/* mixture of experts (cpu_ops_moe.c) */
mt_status mt_cpu_moe_route(mt_backend *be, const mt_moe_route_args *a);
mt_status mt_cpu_moe_route_bwd(mt_backend *be, const mt_moe_route_bwd_args *a);
mt_status mt_cpu_moe_permute(mt_backend *be, const mt_moe_permute_args *a);
mt_status mt_cpu_moe_unpermute(mt_backend *be, const mt_moe_unpermute_args *a);
mt_status mt_cpu_moe_unpermute_bwd(mt_backend *be, const mt_moe_unpermute_bwd_args *a);
/* the shared experts' sigmoid gate (cpu_ops_gate.c) */
mt_status mt_cpu_moe_gate_fwd(mt_backend *be, const mt_moe_gate_fwd_args *a);
mt_status mt_cpu_moe_gate_bwd(mt_backend *be, const mt_moe_gate_bwd_args *a);
mt_status mt_cpu_moe_gate_logit_bwd(mt_backend *be, const mt_moe_gate_logit_bwd_args *a);
/* fused ops and device-style init (cpu_ops_fused.c) */
mt_status mt_cpu_add_layernorm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a);
mt_status mt_cpu_add_rmsnorm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a);
mt_status mt_cpu_matmul_gelu_fwd(mt_backend *be, const mt_matmul_gelu_fwd_args *a);
mt_status mt_cpu_matmul_dgelu_bwd(mt_backend *be, const mt_matmul_dgelu_bwd_args *a);
mt_status mt_cpu_init_normal(mt_backend *be, const mt_init_normal_args *a);
/* optimizer (cpu_ops_optim.c) */
mt_status mt_cpu_adamw(mt_backend *be, const mt_adamw_args *a);

/* exp(x) for fp32 in straight-line code that GCC vectorises inside a loop (glibc's expf is an
 * opaque call and stays scalar without -ffast-math). Cephes-style: x = n ln2 + r, |r| <~
 * ln2/2, degree-6 polynomial for e^r, 2^n built from exponent bits. Max error ~2 ulp. Inputs
 * are clamped to [-87.33, 88]: below, the result is ~1.2e-38 instead of a denormal or 0;
 * above, e^88 ~ 1.6e38 instead of inf, which is what softmax / sigmoid need. A NaN input
 * passes both clamps and the polynomial, so the result is NaN (a diverged run stays visible). */
static inline float mt_cpu_expf(float x) {
    x = x < -87.33654f ? -87.33654f : x;
    x = x > 88.0f ? 88.0f : x;
    /* n = round(x / ln2) in [-126, 127]; adding and removing 1.5 * 2^23 rounds to nearest in
     * fp32 arithmetic (floorf would block vectorisation; no -ffast-math, so it is not folded) */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;                    /* ln2 split hi + lo */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &e, sizeof scale);
    return p * scale;
}

/* sigmoid(x) = 1 / (1 + e^-x), vectorisable. */
static inline float mt_cpu_sigmoidf(float x) { return 1.0f / (1.0f + mt_cpu_expf(-x)); }

/* Sum of n floats in double with 8 independent lanes (vectorises; fixed order, so
 * deterministic). */
static inline double mt_cpu_sum_d(const float *x, size_t n) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += (double)x[i + l];
    for (; i < n; i++) acc[i & 7] += (double)x[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* Max of n >= 1 floats with 8 lanes (vectorises). */
static inline float mt_cpu_max_f(const float *x, size_t n) {
    float m[8];
    for (int l = 0; l < 8; l++) m[l] = x[0];
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float r = m[0];
    for (int l = 1; l < 8; l++) r = m[l] > r ? m[l] : r;
    return r;
}

#endif
