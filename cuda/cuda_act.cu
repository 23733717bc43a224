/* cuda_act.cu — elementwise ops on the CUDA backend: GeLU (tanh approximation) forward and
 * backward, SwiGLU forward and backward, squared ReLU forward and backward, add, and the
 * f32 -> act (bf16) cast.
 * Rules kept (backend.h): activations and their gradients are bf16, all arithmetic in fp32;
 * activation gradients are overwritten (=). Same formulas as core/cpu/cpu_ops_act.c (GeLU as
 * x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)); expf here vs the CPU's polynomial exp
 * differ by ~1 ulp, far below the bf16 rounding of the outputs.
 * Shape of the work: grid-stride loops over size_t indices; GeLU, squared ReLU, add and the cast move 8
 * elements per thread step with 16-byte loads and stores (uint4) when every pointer is 16-byte
 * aligned, the last n % 8 elements (or all of them, unaligned) one per thread. */
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

__global__ void scale_kernel(bf16 *x, float s, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * s);
}

__global__ void cast_kernel(bf16 *dst, const float *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

/* ---- 16-byte vectorised forms: 8 bf16 (or 8 f32 in, 8 bf16 out) per step ---- */

__device__ __forceinline__ float gelu_f(float x) {
    const float u = GELU_K * (x + GELU_C * x * x * x);
    return x * sigmoidf_dev(2.0f * u);
}
__device__ __forceinline__ float gelu_grad_f(float x, float dy) {
    const float u = GELU_K * (x + GELU_C * x * x * x);
    const float s = sigmoidf_dev(2.0f * u);
    const float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
    return dy * (s + 2.0f * x * s * (1.0f - s) * du);
}

/* The elementwise maps: out[i] = f(a[i], b[i]), b the output gradient of the backward maps (unused
 * by the forward ones). Squared ReLU as core/cpu/cpu_ops_act.c: r = x > 0 ? x : 0, y = r^2, dy/dx = 2r. */
enum { MAP_GELU = 0, MAP_GELU_GRAD, MAP_ADD, MAP_RELU2, MAP_RELU2_GRAD };

template <int OP> __device__ __forceinline__ float map_f(float x, float z) {
    if (OP == MAP_GELU) return gelu_f(x);
    if (OP == MAP_GELU_GRAD) return gelu_grad_f(x, z);
    if (OP == MAP_ADD) return x + z;
    const float r = x > 0.0f ? x : 0.0f;
    return OP == MAP_RELU2 ? r * r : z * 2.0f * r;
}

/* one element per thread step: the scalar tail, or everything when a pointer is not 16-byte aligned */
template <int OP> __global__ void map_kernel(bf16 *out, const bf16 *a, const bf16 *b, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(map_f<OP>(__bfloat162float(a[i]), b ? __bfloat162float(b[i]) : 0.0f));
}

/* n_vec vectors of 8 */
template <int OP> __global__ void map_vec_kernel(bf16 *out, const bf16 *a, const bf16 *b, size_t n_vec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += (size_t)gridDim.x * blockDim.x) {
        const mt_vec8 x = mt_ld8(a + 8 * i);
        mt_vec8 y, z = {};
        if (b) z = mt_ld8(b + 8 * i);
#pragma unroll
        for (int k = 0; k < 8; k++) y.v[k] = map_f<OP>(x.v[k], z.v[k]);
        mt_st8(out + 8 * i, y);
    }
}

__global__ void cast_vec_kernel(bf16 *dst, const float *src, size_t n_vec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += (size_t)gridDim.x * blockDim.x)
        mt_st8(dst + 8 * i, mt_ld8(src + 8 * i));
}

/* how many leading elements the vector kernels take: n rounded down to 8 when all of the
 * pointers are 16-byte aligned, else 0 */
static size_t vec_part(size_t n, const void *p0, const void *p1, const void *p2) {
    return mt_cuda_aligned16(p0) && mt_cuda_aligned16(p1) && (!p2 || mt_cuda_aligned16(p2)) ? n / 8 * 8 : 0;
}

/* out = map OP of a (and b) over n elements: the vector kernel over the leading multiple of 8 when
 * every pointer is 16-byte aligned, the scalar kernel over the rest */
template <int OP>
static mt_status map_launch(mt_backend *be, const char *op, void *out, const void *a, const void *b, size_t n) {
    if (n == 0) return MT_OK;
    if (!out || !a || (OP != MAP_GELU && OP != MAP_RELU2 && !b))
        return mt_errorf(MT_ERR_INTERNAL, "cuda %s: NULL tensor (n=%zu)", op, n);
    cudaStream_t s = mt_cuda_ctx_of(be)->stream;
    const size_t nv = vec_part(n, out, a, b);
    if (nv) {
        map_vec_kernel<OP><<<act_blocks(nv / 8), ACT_THREADS, 0, s>>>((bf16 *)out, (const bf16 *)a, (const bf16 *)b,
                                                                       nv / 8);
        CUDA_CHECK_LAUNCH();
    }
    if (n > nv) {
        map_kernel<OP><<<act_blocks(n - nv), ACT_THREADS, 0, s>>>((bf16 *)out + nv, (const bf16 *)a + nv,
                                                                   b ? (const bf16 *)b + nv : nullptr, n - nv);
        CUDA_CHECK_LAUNCH();
    }
    return MT_OK;
}

mt_status mt_cuda_gelu_fwd(mt_backend *be, const mt_gelu_fwd_args *a) {
    return map_launch<MAP_GELU>(be, "gelu_fwd", a->out, a->inp, nullptr, a->n);
}

mt_status mt_cuda_gelu_bwd(mt_backend *be, const mt_gelu_bwd_args *a) {
    return map_launch<MAP_GELU_GRAD>(be, "gelu_bwd", a->dinp, a->inp, a->dout, a->n);
}

mt_status mt_cuda_squared_relu_fwd(mt_backend *be, const mt_squared_relu_fwd_args *a) {
    return map_launch<MAP_RELU2>(be, "squared_relu_fwd", a->out, a->inp, nullptr, a->n);
}

mt_status mt_cuda_squared_relu_bwd(mt_backend *be, const mt_squared_relu_bwd_args *a) {
    return map_launch<MAP_RELU2_GRAD>(be, "squared_relu_bwd", a->dinp, a->inp, a->dout, a->n);
}

mt_status mt_cuda_swiglu_fwd(mt_backend *be, const mt_swiglu_fwd_args *a) {
    mt_status st = mt_op_check_swiglu("cuda", "swiglu_fwd", a->N, a->F, a->out && a->inp);
    if (st != MT_OK) return st;
    const size_t n = (size_t)a->N * a->F;
    if (n == 0) return MT_OK;
    swiglu_fwd_kernel<<<act_blocks(n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (const bf16 *)a->inp, n, a->F);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_swiglu_bwd(mt_backend *be, const mt_swiglu_bwd_args *a) {
    mt_status st = mt_op_check_swiglu("cuda", "swiglu_bwd", a->N, a->F, a->dinp && a->dout && a->inp);
    if (st != MT_OK) return st;
    const size_t n = (size_t)a->N * a->F;
    if (n == 0) return MT_OK;
    swiglu_bwd_kernel<<<act_blocks(n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->dinp, (const bf16 *)a->dout, (const bf16 *)a->inp, n, a->F);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_add(mt_backend *be, const mt_add_args *a) {
    return map_launch<MAP_ADD>(be, "add", a->out, a->a, a->b, a->n);
}

mt_status mt_cuda_scale(mt_backend *be, const mt_scale_args *a) {
    if (a->n == 0) return MT_OK;
    if (!a->x) return mt_errorf(MT_ERR_INTERNAL, "cuda scale: NULL tensor (n=%zu)", a->n);
    scale_kernel<<<act_blocks(a->n), ACT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>((bf16 *)a->x, a->s, a->n);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_cast_f32_to_act(mt_backend *be, const mt_cast_args *a) {
    if (a->n == 0) return MT_OK;
    if (!a->dst || !a->src)
        return mt_errorf(MT_ERR_INTERNAL, "cuda cast_f32_to_act: NULL tensor (n=%zu)", a->n);
    if (a->dst == a->src) /* act is bf16 here: an in-place cast would overlap its own input */
        return mt_errorf(MT_ERR_INTERNAL, "cuda cast_f32_to_act: dst aliases src (f32 -> bf16 needs two buffers)");
    cudaStream_t s = mt_cuda_ctx_of(be)->stream;
    const size_t nv = vec_part(a->n, a->dst, a->src, NULL);
    if (nv) {
        cast_vec_kernel<<<act_blocks(nv / 8), ACT_THREADS, 0, s>>>((bf16 *)a->dst, (const float *)a->src, nv / 8);
        CUDA_CHECK_LAUNCH();
    }
    if (a->n > nv) {
        cast_kernel<<<act_blocks(a->n - nv), ACT_THREADS, 0, s>>>((bf16 *)a->dst + nv, (const float *)a->src + nv,
                                                                  a->n - nv);
        CUDA_CHECK_LAUNCH();
    }
    return MT_OK;
}
