/* cpu_ops_act.c — elementwise ops on the CPU: GeLU (tanh approximation), SwiGLU, squared ReLU, add, the
 * (squared) sum used for norms and losses, and the f32 -> act cast (a copy on this fp32
 * backend).
 * Rules: activation gradients are overwritten (=); inner loops are straight-line fp32 code the
 * compiler vectorises (no per-element calls: exp comes from mt_cpu_expf); sum runs over
 * fixed-size blocks combined in order, so it is deterministic for any thread count. */
#include "core/cpu/cpu_backend.h"

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* 0.5 (1 + tanh(u)) == sigmoid(2u): the tanh-GeLU as x * sigmoid(2u), u = k (x + c x^3). */

mt_status mt_cpu_gelu_fwd(mt_backend *be, const mt_gelu_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    if (a->n == 0) return MT_OK;
    if (!a->out || !a->inp) return mt_errorf(MT_ERR_INTERNAL, "cpu gelu_fwd: NULL tensor (n=%zu)", a->n);
    float *out = a->out;
    const float *inp = a->inp;
    const long n = (long)a->n;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= MT_CPU_PAR_MIN)
    for (long i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = GELU_K * (x + GELU_C * x * x * x);
        out[i] = x * mt_cpu_sigmoidf(2.0f * u);
    }
    return MT_OK;
}

mt_status mt_cpu_gelu_bwd(mt_backend *be, const mt_gelu_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    if (a->n == 0) return MT_OK;
    if (!a->dinp || !a->dout || !a->inp) return mt_errorf(MT_ERR_INTERNAL, "cpu gelu_bwd: NULL tensor (n=%zu)", a->n);
    float *dinp = a->dinp;
    const float *dout = a->dout, *inp = a->inp;
    const long n = (long)a->n;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= MT_CPU_PAR_MIN)
    for (long i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = GELU_K * (x + GELU_C * x * x * x);
        const float s = mt_cpu_sigmoidf(2.0f * u);
        /* d/dx x s(2u) = s + x s (1 - s) 2 u',  u' = k (1 + 3 c x^2) */
        const float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
        dinp[i] = dout[i] * (s + 2.0f * x * s * (1.0f - s) * du);
    }
    return MT_OK;
}

mt_status mt_cpu_swiglu_fwd(mt_backend *be, const mt_swiglu_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_swiglu("cpu", "swiglu_fwd", a->N, a->F, a->out && a->inp);
    if (st != MT_OK) return st;
    const int N = a->N, F = a->F;
    float *out = a->out;
    const float *inp = a->inp;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * F >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++) {
        const float *g = inp + (size_t)r * 2 * F, *u = g + F;
        float *o = out + (size_t)r * F;
        for (int j = 0; j < F; j++) o[j] = g[j] * mt_cpu_sigmoidf(g[j]) * u[j];
    }
    return MT_OK;
}

mt_status mt_cpu_swiglu_bwd(mt_backend *be, const mt_swiglu_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_swiglu("cpu", "swiglu_bwd", a->N, a->F, a->dinp && a->dout && a->inp);
    if (st != MT_OK) return st;
    const int N = a->N, F = a->F;
    float *dinp = a->dinp;
    const float *dout = a->dout, *inp = a->inp;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * F >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++) {
        const float *g = inp + (size_t)r * 2 * F, *u = g + F, *dy = dout + (size_t)r * F;
        float *dg = dinp + (size_t)r * 2 * F, *du = dg + F;
        for (int j = 0; j < F; j++) {
            const float s = mt_cpu_sigmoidf(g[j]);
            const float silu = g[j] * s;
            /* silu'(g) = s (1 + g (1 - s)) */
            dg[j] = dy[j] * u[j] * s * (1.0f + g[j] * (1.0f - s));
            du[j] = dy[j] * silu;
        }
    }
    return MT_OK;
}

/* squared ReLU: y = r^2, dy/dx = 2 r, r = max(x, 0) (x > 0 ? x : 0, so the gradient at 0 is 0).
 * out = y (dout NULL: forward) or dout * dy/dx (backward; out may be dout). */
static mt_status squared_relu_map(mt_backend *be, const char *op, float *out, const float *inp, const float *dout,
                                  size_t n_elems, int backward) {
    const int nt = mt_cpu_nt(be);
    if (n_elems == 0) return MT_OK;
    if (!out || !inp || (backward && !dout)) return mt_errorf(MT_ERR_INTERNAL, "cpu %s: NULL tensor (n=%zu)", op, n_elems);
    const long n = (long)n_elems;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= MT_CPU_PAR_MIN)
    for (long i = 0; i < n; i++) {
        const float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        out[i] = backward ? dout[i] * 2.0f * r : r * r;
    }
    return MT_OK;
}

mt_status mt_cpu_squared_relu_fwd(mt_backend *be, const mt_squared_relu_fwd_args *a) {
    return squared_relu_map(be, "squared_relu_fwd", a->out, a->inp, NULL, a->n, 0);
}

mt_status mt_cpu_squared_relu_bwd(mt_backend *be, const mt_squared_relu_bwd_args *a) {
    return squared_relu_map(be, "squared_relu_bwd", a->dinp, a->inp, a->dout, a->n, 1);
}

mt_status mt_cpu_add(mt_backend *be, const mt_add_args *a) {
    const int nt = mt_cpu_nt(be);
    if (a->n == 0) return MT_OK;
    if (!a->out || !a->a || !a->b) return mt_errorf(MT_ERR_INTERNAL, "cpu add: NULL tensor (n=%zu)", a->n);
    float *out = a->out;
    const float *x = a->a, *y = a->b;
    const long n = (long)a->n;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= MT_CPU_PAR_MIN)
    for (long i = 0; i < n; i++) out[i] = x[i] + y[i];
    return MT_OK;
}

/* sum: the input is cut into at most SUM_MAX_BLOCKS blocks of a size that depends only on n;
 * each block is summed in double (8 lanes), the block sums are added in order. */
#define SUM_MAX_BLOCKS 1024
#define SUM_MIN_BLOCK 16384

mt_status mt_cpu_sum(mt_backend *be, const mt_sum_args *a) {
    const int nt = mt_cpu_nt(be);
    if (!a->out) return mt_errorf(MT_ERR_INTERNAL, "cpu sum: NULL output");
    if (a->n == 0) return MT_OK;
    if (!a->x) return mt_errorf(MT_ERR_INTERNAL, "cpu sum: NULL input (n=%zu)", a->n);
    const float *x = a->x;
    const size_t n = a->n;
    size_t block = (n + SUM_MAX_BLOCKS - 1) / SUM_MAX_BLOCKS;
    if (block < SUM_MIN_BLOCK) block = SUM_MIN_BLOCK;
    block = (block + 7) & ~(size_t)7;
    const int n_blocks = (int)((n + block - 1) / block);
    double part[SUM_MAX_BLOCKS];
    const int squares = a->squares;
#pragma omp parallel for schedule(static) num_threads(nt) if (n_blocks > 1)
    for (int b = 0; b < n_blocks; b++) {
        const size_t i0 = (size_t)b * block;
        const size_t len = n - i0 < block ? n - i0 : block;
        const float *p = x + i0;
        if (!squares) {
            part[b] = mt_cpu_sum_d(p, len);
        } else {
            double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            size_t i = 0;
            for (; i + 8 <= len; i += 8)
                for (int l = 0; l < 8; l++) acc[l] += (double)p[i + l] * p[i + l];
            for (; i < len; i++) acc[i & 7] += (double)p[i] * p[i];
            part[b] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        }
    }
    double total = 0.0;
    for (int b = 0; b < n_blocks; b++) total += part[b];
    float *out = a->out;
    *out = (float)((double)*out + total);
    return MT_OK;
}

mt_status mt_cpu_cast_f32_to_act(mt_backend *be, const mt_cast_args *a) {
    (void)be;
    if (a->n == 0 || a->dst == a->src) return MT_OK;
    if (!a->dst || !a->src) return mt_errorf(MT_ERR_INTERNAL, "cpu cast_f32_to_act: NULL tensor (n=%zu)", a->n);
    memmove(a->dst, a->src, a->n * sizeof(float)); /* act is f32 here: a plain copy */
    return MT_OK;
}
