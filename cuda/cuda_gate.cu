/* cuda_gate.cu — the MoE shared experts' sigmoid gate on the GPU (backend.h: moe_gate_fwd, moe_gate_bwd,
 * moe_gate_logit_bwd), bf16 rows, fp32 maths; the reference is core/cpu/cpu_ops_gate.c.
 * Rule: one block per token row for the row ops (a block reduction of the dot product, then the
 * elementwise part); the weight gradient one thread per column summing the rows in order, so it does not
 * depend on the launch shape. */
#include "cuda/cuda_common.cuh"

#define GATE_THREADS 256

/* sum of v over the block (GATE_THREADS threads), returned to every thread */
__device__ static float gate_block_sum(float v, float *red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
        __syncthreads();
    }
    const float s = red[0];
    __syncthreads();
    return s;
}

__global__ void moe_gate_fwd_kernel(bf16 *out, float *gate, const bf16 *y, const bf16 *x, const bf16 *w, int C) {
    __shared__ float red[GATE_THREADS];
    const size_t row = (size_t)blockIdx.x * C;
    float z = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) z += __bfloat162float(x[row + c]) * __bfloat162float(w[c]);
    z = gate_block_sum(z, red);
    const float g = 1.f / (1.f + expf(-z));
    if (threadIdx.x == 0) gate[blockIdx.x] = g;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        out[row + c] = __float2bfloat16(__bfloat162float(out[row + c]) + g * __bfloat162float(y[row + c]));
}

__global__ void moe_gate_bwd_kernel(bf16 *dy, float *dz, const bf16 *dout, const bf16 *y, const float *gate, int C) {
    __shared__ float red[GATE_THREADS];
    const size_t row = (size_t)blockIdx.x * C;
    const float g = gate[blockIdx.x];
    float s = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float d = __bfloat162float(dout[row + c]);
        s += d * __bfloat162float(y[row + c]);
        dy[row + c] = __float2bfloat16(g * d);
    }
    s = gate_block_sum(s, red);
    if (threadIdx.x == 0) dz[blockIdx.x] = s * g * (1.f - g);
}

__global__ void moe_gate_dw_kernel(float *dw, const float *dz, const bf16 *x, int N, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.f;
    for (int t = 0; t < N; t++) s += dz[t] * __bfloat162float(x[(size_t)t * C + c]);
    dw[c] += s;
}

__global__ void moe_gate_dx_kernel(bf16 *dx, const float *dz, const bf16 *w, int N, int C) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C) return;
    const size_t t = i / C, c = i % C;
    dx[i] = __float2bfloat16(__bfloat162float(dx[i]) + dz[t] * __bfloat162float(w[c]));
}

mt_status mt_cuda_moe_gate_fwd(mt_backend *be, const mt_moe_gate_fwd_args *a) {
    if (a->N <= 0) return MT_OK;
    moe_gate_fwd_kernel<<<a->N, GATE_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (float *)a->gate, (const bf16 *)a->y, (const bf16 *)a->x, (const bf16 *)a->w, a->C);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_moe_gate_bwd(mt_backend *be, const mt_moe_gate_bwd_args *a) {
    if (a->N <= 0) return MT_OK;
    moe_gate_bwd_kernel<<<a->N, GATE_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->dy, (float *)a->dz, (const bf16 *)a->dout, (const bf16 *)a->y, (const float *)a->gate, a->C);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_moe_gate_logit_bwd(mt_backend *be, const mt_moe_gate_logit_bwd_args *a) {
    if (a->N <= 0) return MT_OK;
    cudaStream_t s = mt_cuda_ctx_of(be)->stream;
    moe_gate_dw_kernel<<<(a->C + GATE_THREADS - 1) / GATE_THREADS, GATE_THREADS, 0, s>>>(
        (float *)a->dw, (const float *)a->dz, (const bf16 *)a->x, a->N, a->C);
    CUDA_CHECK_LAUNCH();
    if (!a->dx) return MT_OK;
    const size_t n = (size_t)a->N * a->C;
    moe_gate_dx_kernel<<<(unsigned)((n + GATE_THREADS - 1) / GATE_THREADS), GATE_THREADS, 0, s>>>(
        (bf16 *)a->dx, (const float *)a->dz, (const bf16 *)a->w, a->N, a->C);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
