/* cuda_act.cu — elementwise ops on the CUDA backend: GeLU (tanh approximation) forward and
 * backward, SwiGLU forward and backward, add, and the f32 -> act (bf16) cast.
 * Rules kept (backend.h): activations and their gradients are bf16, all arithmetic in fp32;
 * activation gradients are overwritten (=). Same formulas as core/cpu/cpu_ops_act.c (GeLU as
 * x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)); expf here vs the CPU's polynomial exp
 * differ by ~1 ulp, far below the bf16 rounding of the outputs.
 * Shape of the work: one thread per element, grid-stride loops over size_t indices. */
#include "cuda/cuda_common.cuh"

#define ACT_THREADS 256
#define ACT_MAX_BLOCKS 65535u

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

static unsigned act_blocks(size_t n) {
    unsigned b = mt_cuda_ceil_div(n < (size_t)ACT_MAX_BLOCKS * ACT_THREADS ? n : (size_t)ACT_MAX_BLOCKS * ACT_THREADS,
                                  ACT_THREADS);
    return b ? b : 1u;
}

__device__ __forceinline__ float sigmoidf_dev(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void gelu_fwd_kernel(bf16 *out, const bf16 *inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = __bfloat162float(inp[i]);
        const float u = GELU_K * (x + GELU_C * x * x * x);
        out[i] = __float2bfloat16_rn(x * sigmoidf_dev(2.0f * u));
    }
}

__global__ void gelu_bwd_kernel(bf16 *dinp, const bf16 *dout, const bf16 *inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = __bfloat162float(inp[i]);
        const float u = GELU_K * (x + GELU_C * x * x * x);
        const float s = sigmoidf_dev(2.0f * u);
        const float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
        dinp[i] = __float2bfloat16_rn(__bfloat162float(dout[i]) * (s + 2.0f * x * s * (1.0f - s) * du));
    }
}

/* element i of the (N, F) output: row r = i / F, column j = i % F; input row is [gate | up] */
__global__ void swiglu_fwd_kernel(bf16 *out, const bf16 *inp, size_t n, int F) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)F, j = i % (size_t)F;
        const bf16 *row = inp + r * 2 * (size_t)F;
        const float g = __bfloat162float(row[j]), u = __bfloat162float(row[F + j]);
        out[i] = __float2bfloat16_rn(g * sigmoidf_dev(g) * u);
    }
}

__global__ void swiglu_bwd_kernel(bf16 *dinp, const bf16 *dout, const bf16 *inp, size_t n, int F) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)F, j = i % (size_t)F;
        const bf16 *row = inp + r * 2 * (size_t)F;
        bf16 *drow = dinp + r * 2 * (size_t)F;
        const float g = __bfloat162float(row[j]), u = __bfloat162float(row[F + j]);
        const float dy = __bfloat162float(dout[i]);
        const float s = sigmoidf_dev(g);
        /* silu'(g) = s (1 + g (1 - s)) */
        drow[j] = __float2bfloat16_rn(dy * u * s * (1.0f + g * (1.0f - s)));
        drow[F + j] = __float2bfloat16_rn(dy * g * s);
    }
}

__global__ void add_kernel(bf16 *out, const bf16 *a, const bf16 *b, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

__global__ void cast_kernel(bf16 *dst, const float *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

mt_status mt_cuda_gelu_fwd(mt_backend *be, const mt_gelu_fwd_args *a) {
    if (a->n == 0) return MT_OK;
    if (!a->out || !a->inp) return mt_errorf(MT_ERR_INTERNAL, "cuda gelu_fwd: NULL tensor (n=%zu)", a->n);
    gelu_fwd_kernel<<<act_blocks(a->n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (const bf16 *)a->inp, a->n);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_gelu_bwd(mt_backend *be, const mt_gelu_bwd_args *a) {
    if (a->n == 0) return MT_OK;
    if (!a->dinp || !a->dout || !a->inp)
        return mt_errorf(MT_ERR_INTERNAL, "cuda gelu_bwd: NULL tensor (n=%zu)", a->n);
    gelu_bwd_kernel<<<act_blocks(a->n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->dinp, (const bf16 *)a->dout, (const bf16 *)a->inp, a->n);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

static mt_status swiglu_check(const char *op, int N, int F, int all_set) {
    if (N < 0 || F < 0) return mt_errorf(MT_ERR_CONFIG, "cuda %s: negative shape N=%d F=%d", op, N, F);
    if ((size_t)N * F > 0 && !all_set)
        return mt_errorf(MT_ERR_INTERNAL, "cuda %s: NULL tensor (N=%d F=%d)", op, N, F);
    return MT_OK;
}

mt_status mt_cuda_swiglu_fwd(mt_backend *be, const mt_swiglu_fwd_args *a) {
    mt_status st = swiglu_check("swiglu_fwd", a->N, a->F, a->out && a->inp);
    if (st != MT_OK) return st;
    const size_t n = (size_t)a->N * a->F;
    if (n == 0) return MT_OK;
    swiglu_fwd_kernel<<<act_blocks(n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (const bf16 *)a->inp, n, a->F);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_swiglu_bwd(mt_backend *be, const mt_swiglu_bwd_args *a) {
    mt_status st = swiglu_check("swiglu_bwd", a->N, a->F, a->dinp && a->dout && a->inp);
    if (st != MT_OK) return st;
    const size_t n = (size_t)a->N * a->F;
    if (n == 0) return MT_OK;
    swiglu_bwd_kernel<<<act_blocks(n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->dinp, (const bf16 *)a->dout, (const bf16 *)a->inp, n, a->F);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_add(mt_backend *be, const mt_add_args *a) {
    if (a->n == 0) return MT_OK;
    if (!a->out || !a->a || !a->b) return mt_errorf(MT_ERR_INTERNAL, "cuda add: NULL tensor (n=%zu)", a->n);
    add_kernel<<<act_blocks(a->n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (const bf16 *)a->a, (const bf16 *)a->b, a->n);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_cast_f32_to_act(mt_backend *be, const mt_cast_args *a) {
    if (a->n == 0) return MT_OK;
    if (!a->dst || !a->src)
        return mt_errorf(MT_ERR_INTERNAL, "cuda cast_f32_to_act: NULL tensor (n=%zu)", a->n);
    if (a->dst == a->src) /* act is bf16 here: an in-place cast would overlap its own input */
        return mt_errorf(MT_ERR_INTERNAL, "cuda cast_f32_to_act: dst aliases src (f32 -> bf16 needs two buffers)");
    cast_kernel<<<act_blocks(a->n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->dst, (const float *)a->src, a->n);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
