/* cuda_optim.cu — AdamW on one contiguous tensor, exactly as backend.h states it (PyTorch /
 * Megatron formulation, decoupled weight decay applied to the f32 master):
 *   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   master -= lr * (m/bc1 / (sqrt(v/bc2) + eps) + wd * master); param (bf16) = master.
 * Rules kept: master, grad, m, v are f32; param is the bf16 compute copy, rounded to nearest
 * even from the new master (skipped when param is NULL or aliases master). Elementwise, one
 * thread per element: deterministic. The same operation order as core/cpu/cpu_ops_optim.c; nvcc
 * may contract a*b+c into an FMA, so results may differ from the CPU by ~1 ulp. */
#include "cuda/cuda_common.cuh"

#define ADAMW_THREADS 256
#define ADAMW_MAX_BLOCKS 65535u

struct adamw_hp {
    float lr, b1, b2, eps, wd, gs, bc1, bc2;
};

__global__ void adamw_kernel(float *master, bf16 *param, const float *grad, float *m, float *v, size_t n,
                             adamw_hp h, int zero) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float g = grad[i] * h.gs;
        const float mi = h.b1 * (zero ? 0.0f : m[i]) + (1.0f - h.b1) * g; /* zero: moments known 0 */
        const float vi = h.b2 * (zero ? 0.0f : v[i]) + (1.0f - h.b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float w = master[i];
        const float nw = w - h.lr * ((mi / h.bc1) / (sqrtf(vi / h.bc2) + h.eps) + h.wd * w);
        master[i] = nw;
        if (param) param[i] = __float2bfloat16_rn(nw);
    }
}

mt_status mt_cuda_adamw(mt_backend *be, const mt_adamw_args *a) {
    mt_status st = mt_op_check_adamw("cuda", a);
    if (st != MT_OK || a->n == 0) return st;
    adamw_hp h = {a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->grad_scale, a->bias_correction1,
                  a->bias_correction2};
    bf16 *param = a->param == a->master ? NULL : (bf16 *)a->param;
    size_t want = (a->n + ADAMW_THREADS - 1) / ADAMW_THREADS;
    unsigned blocks = want > ADAMW_MAX_BLOCKS ? ADAMW_MAX_BLOCKS : (unsigned)want;
    adamw_kernel<<<blocks, ADAMW_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (float *)a->master, param, (const float *)a->grad, (float *)a->m, (float *)a->v, a->n, h, a->moments_zero);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
