/* cuda_xent.cu — softmax cross-entropy fused with its backward (xent_fwd_bwd) and the three
 * vocab-parallel phases (xent_vp_max, xent_vp_sumexp, xent_vp_finish) of backend.h.
 * Rules kept: logits are bf16 (act) and are overwritten by d(loss)/d(logits) * dloss in bf16
 * (after xent_vp_sumexp they hold exp(x - max) in bf16); losses and stats are f32; padding
 * columns (global index >= V) never enter the max or the sum and get gradient 0; rows whose
 * target is < 0 are ignored (loss 0, gradient 0).
 * A target >= V is a data error on the CPU (checked on the host). Here the targets live on the
 * device and the ops must not synchronise, so such a row gets loss NaN and gradient 0: the
 * training loop's non-finite loss check then stops the run.
 * Shape of the work: one block per row, block-wide max and sum reductions (fixed tree, so
 * deterministic); exp in fp32 (expf), row sums accumulated per thread in double, then a
 * float block sum; loss = log(sum) - (x_t - max) in double as on the CPU. */
#include "cuda/cuda_common.cuh"

#define XENT_THREADS 512

/* grid.x = N */
__global__ void xent_fwd_bwd_kernel(bf16 *logits, float *losses, const int32_t *targets, int V, int Vp,
                                    float dloss) {
    __shared__ float sh[32];
    const int r = blockIdx.x;
    bf16 *x = logits + (size_t)r * Vp;
    const int t = targets[r];
    if (t < 0 || t >= V) { /* ignored row (or a bad target: NaN loss, see above) */
        for (int j = threadIdx.x; j < Vp; j += blockDim.x) x[j] = __float2bfloat16_rn(0.0f);
        if (threadIdx.x == 0) losses[r] = t < 0 ? 0.0f : __int_as_float(0x7fc00000);
        return;
    }
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, __bfloat162float(x[j]));
    mx = mt_block_max(mx, sh);
    const float xt = __bfloat162float(x[t]) - mx; /* read before the gradient overwrites it */
    double acc = 0.0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) acc += (double)expf(__bfloat162float(x[j]) - mx);
    const float sum = mt_block_sum((float)acc, sh); /* ends with __syncthreads: x[t] was read */
    if (threadIdx.x == 0) losses[r] = (float)(log((double)sum) - (double)xt);
    const float s = (float)(1.0 / (double)sum) * dloss;
    for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
        float g = 0.0f;
        if (j < V) {
            g = expf(__bfloat162float(x[j]) - mx) * s;
            if (j == t) g -= dloss;
        }
        x[j] = __float2bfloat16_rn(g);
    }
}

mt_status mt_cuda_xent_fwd_bwd(mt_backend *be, const mt_xent_args *a) {
    const int N = a->N, V = a->V, Vp = a->Vp;
    if (N < 0 || V <= 0 || Vp < V)
        return mt_errorf(MT_ERR_CONFIG, "cuda xent: bad shape N=%d V=%d Vp=%d (need V > 0, Vp >= V)", N, V, Vp);
    if (N == 0) return MT_OK;
    if (!a->logits || !a->losses || !a->targets) return mt_errorf(MT_ERR_INTERNAL, "cuda xent: NULL tensor");
    xent_fwd_bwd_kernel<<<(unsigned)N, XENT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->logits, (float *)a->losses, a->targets, V, Vp, a->dloss);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

/* ---- vocab-parallel phases; stats = [max | sum exp | target logit - max], each (N) ---- */

static mt_status vp_check(const char *op, const mt_xent_vp_args *a) {
    if (a->N < 0 || a->V <= 0 || a->n_cols < 0 || a->vocab_start < 0)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: bad shape N=%d V=%d vocab_start=%d n_cols=%d", op, a->N, a->V,
                         a->vocab_start, a->n_cols);
    if (a->N > 0 && (!a->stats || !a->targets || (a->n_cols > 0 && !a->logits)))
        return mt_errorf(MT_ERR_INTERNAL, "cuda %s: NULL tensor", op);
    return MT_OK;
}

/* columns of this shard that are real vocabulary entries: [0, n_valid) */
static int n_valid_cols(const mt_xent_vp_args *a) {
    long v = (long)a->V - a->vocab_start;
    if (v < 0) v = 0;
    return v < a->n_cols ? (int)v : a->n_cols;
}

__global__ void xent_vp_max_kernel(float *mx_out, const bf16 *logits, const int32_t *targets, int V, int nc,
                                   int nv) {
    __shared__ float sh[32];
    const int r = blockIdx.x;
    const int t = targets[r];
    if (t < 0 || t >= V) {
        if (threadIdx.x == 0) mx_out[r] = 0.0f;
        return;
    }
    const bf16 *x = logits + (size_t)r * nc;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < nv; j += blockDim.x) mx = fmaxf(mx, __bfloat162float(x[j]));
    mx = mt_block_max(mx, sh);
    if (threadIdx.x == 0) mx_out[r] = mx; /* -inf when this shard has no valid column */
}

__global__ void xent_vp_sumexp_kernel(float *stats, bf16 *logits, const int32_t *targets, int N, int V, int vs,
                                      int nc, int nv) {
    __shared__ float sh[32];
    const int r = blockIdx.x;
    const int t = targets[r];
    float *sum_out = stats + N, *xt_out = stats + 2 * (size_t)N;
    if (t < 0 || t >= V) {
        if (threadIdx.x == 0) {
            sum_out[r] = 0.0f;
            xt_out[r] = 0.0f;
        }
        return;
    }
    bf16 *x = logits + (size_t)r * nc;
    const float m = stats[r];
    const int local_t = t - vs;
    const bool t_here = local_t >= 0 && local_t < nv;
    const float xt = t_here ? __bfloat162float(x[local_t]) - m : 0.0f; /* read before overwrite */
    __syncthreads();
    double acc = 0.0;
    for (int j = threadIdx.x; j < nv; j += blockDim.x) {
        const float e = expf(__bfloat162float(x[j]) - m);
        acc += (double)e;
        x[j] = __float2bfloat16_rn(e);
    }
    const float sum = mt_block_sum((float)acc, sh);
    if (threadIdx.x == 0) {
        sum_out[r] = sum;
        xt_out[r] = xt;
    }
}

__global__ void xent_vp_finish_kernel(bf16 *logits, float *losses, const float *stats, const int32_t *targets,
                                      int N, int V, int vs, int nc, int nv, float dloss) {
    const int r = blockIdx.x;
    const int t = targets[r];
    bf16 *x = logits + (size_t)r * nc;
    if (t < 0 || t >= V) { /* ignored row (or a bad target: NaN loss) */
        for (int j = threadIdx.x; j < nc; j += blockDim.x) x[j] = __float2bfloat16_rn(0.0f);
        if (threadIdx.x == 0) losses[r] = t < 0 ? 0.0f : __int_as_float(0x7fc00000);
        return;
    }
    const float sum = stats[N + r], xt = stats[2 * (size_t)N + r];
    if (threadIdx.x == 0) losses[r] = (float)(log((double)sum) - (double)xt);
    const float s = (float)(1.0 / (double)sum) * dloss;
    const int local_t = t - vs;
    for (int j = threadIdx.x; j < nc; j += blockDim.x) {
        float g = 0.0f;
        if (j < nv) {
            g = __bfloat162float(x[j]) * s;
            if (j == local_t) g -= dloss;
        }
        x[j] = __float2bfloat16_rn(g);
    }
}

mt_status mt_cuda_xent_vp_max(mt_backend *be, const mt_xent_vp_args *a) {
    mt_status st = vp_check("xent_vp_max", a);
    if (st != MT_OK) return st;
    if (a->N == 0) return MT_OK;
    xent_vp_max_kernel<<<(unsigned)a->N, XENT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (float *)a->stats, (const bf16 *)a->logits, a->targets, a->V, a->n_cols, n_valid_cols(a));
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_xent_vp_sumexp(mt_backend *be, const mt_xent_vp_args *a) {
    mt_status st = vp_check("xent_vp_sumexp", a);
    if (st != MT_OK) return st;
    if (a->N == 0) return MT_OK;
    xent_vp_sumexp_kernel<<<(unsigned)a->N, XENT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (float *)a->stats, (bf16 *)a->logits, a->targets, a->N, a->V, a->vocab_start, a->n_cols, n_valid_cols(a));
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_xent_vp_finish(mt_backend *be, const mt_xent_vp_args *a) {
    mt_status st = vp_check("xent_vp_finish", a);
    if (st != MT_OK) return st;
    if (a->N > 0 && !a->losses) return mt_errorf(MT_ERR_INTERNAL, "cuda xent_vp_finish: NULL losses");
    if (a->N == 0) return MT_OK;
    xent_vp_finish_kernel<<<(unsigned)a->N, XENT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->logits, (float *)a->losses, (const float *)a->stats, a->targets, a->N, a->V, a->vocab_start,
        a->n_cols, n_valid_cols(a), a->dloss);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
