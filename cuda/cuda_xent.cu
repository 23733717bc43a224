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
 * deterministic); exp in fp32 (expf). xent_fwd_bwd reads the row once for its statistics (an
 * online max and sum per thread, as flash attention's softmax) and once more to write the
 * gradient, 8 logits per 16-byte load when the rows allow; loss = log(sum) - (x_t - max) in
 * double as on the CPU. The vocab-parallel phases keep their separate passes (an allreduce sits
 * between them). */
#include "cuda/cuda_common.cuh"

#define XENT_THREADS 512

/* The logit of column j of row x (bf16), -inf for padding columns (j >= V). */
__device__ __forceinline__ float xent_col(const bf16 *x, int j, int V) {
    return j < V ? __bfloat162float(x[j]) : -INFINITY;
}

/* Folds logit v into a running (max m, sum s of exp(x - m)): online softmax, one pass. */
__device__ __forceinline__ void xent_online(float v, float &m, float &s) {
    if (v == -INFINITY) return;
    if (v > m) {
        s = s * expf(m - v) + 1.0f; /* m = -inf at first: s = 0 * 0 + 1 */
        m = v;
    } else {
        s += expf(v - m);
    }
}

/* grid.x = N. One read of the row for its statistics (each thread keeps an online max and sum,
 * combined in a fixed tree: the block max, then the block sum of each thread's sum rescaled to
 * it), one read-modify-write for the gradient; 16-byte loads and stores (8 logits) when `vec`
 * (Vp % 8 == 0 and the logits 16-byte aligned), else one logit per thread step. */
__global__ void xent_fwd_bwd_kernel(bf16 *logits, float *losses, const int32_t *targets, int V, int Vp,
                                    float dloss, int vec) {
    __shared__ float sh[32];
    const int r = blockIdx.x;
    bf16 *x = logits + (size_t)r * Vp;
    const int t = targets[r];
    if (t < 0 || t >= V) { /* ignored row (or a bad target: NaN loss, see above) */
        for (int j = threadIdx.x; j < Vp; j += blockDim.x) x[j] = __float2bfloat16_rn(0.0f);
        if (threadIdx.x == 0) losses[r] = t < 0 ? 0.0f : __int_as_float(0x7fc00000);
        return;
    }
    float m = -INFINITY, s = 0.0f;
    if (vec) {
        for (int j = 8 * threadIdx.x; j < Vp; j += 8 * blockDim.x) {
            const uint4 u = *reinterpret_cast<const uint4 *>(x + j);
            const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                xent_online(j + 2 * i < V ? mt_bf16_lo(w[i]) : -INFINITY, m, s);
                xent_online(j + 2 * i + 1 < V ? mt_bf16_hi(w[i]) : -INFINITY, m, s);
            }
        }
    } else {
        for (int j = threadIdx.x; j < V; j += blockDim.x) xent_online(__bfloat162float(x[j]), m, s);
    }
    const float mx = mt_block_max(m, sh);
    const float xt = __bfloat162float(x[t]) - mx; /* read before the gradient overwrites it */
    const float sum = mt_block_sum(m == -INFINITY ? 0.0f : s * expf(m - mx), sh); /* ends with __syncthreads */
    if (threadIdx.x == 0) losses[r] = (float)(log((double)sum) - (double)xt);
    const float sc = (float)(1.0 / (double)sum) * dloss;
    if (vec) {
        for (int j = 8 * threadIdx.x; j < Vp; j += 8 * blockDim.x) {
            const uint4 u = *reinterpret_cast<const uint4 *>(x + j);
            const unsigned w[4] = {u.x, u.y, u.z, u.w};
            unsigned o[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int j0 = j + 2 * i, j1 = j0 + 1;
                float g0 = j0 < V ? expf(mt_bf16_lo(w[i]) - mx) * sc : 0.0f;
                float g1 = j1 < V ? expf(mt_bf16_hi(w[i]) - mx) * sc : 0.0f;
                if (j0 == t) g0 -= dloss;
                if (j1 == t) g1 -= dloss;
                o[i] = mt_pack_bf16x2(g0, g1);
            }
            *reinterpret_cast<uint4 *>(x + j) = make_uint4(o[0], o[1], o[2], o[3]);
        }
    } else {
        for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
            float g = 0.0f;
            if (j < V) {
                g = expf(xent_col(x, j, V) - mx) * sc;
                if (j == t) g -= dloss;
            }
            x[j] = __float2bfloat16_rn(g);
        }
    }
}

mt_status mt_cuda_xent_fwd_bwd(mt_backend *be, const mt_xent_args *a) {
    const int N = a->N, V = a->V, Vp = a->Vp;
    if (N < 0 || V <= 0 || Vp < V)
        return mt_errorf(MT_ERR_CONFIG, "cuda xent: bad shape N=%d V=%d Vp=%d (need V > 0, Vp >= V)", N, V, Vp);
    if (N == 0) return MT_OK;
    if (!a->logits || !a->losses || !a->targets) return mt_errorf(MT_ERR_INTERNAL, "cuda xent: NULL tensor");
    const int vec = Vp % 8 == 0 && mt_cuda_aligned16(a->logits);
    xent_fwd_bwd_kernel<<<(unsigned)N, XENT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->logits, (float *)a->losses, a->targets, V, Vp, a->dloss, vec);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

/* ---- vocab-parallel phases; stats = [max | sum exp | target logit - max], each (N) ---- */

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
    mt_status st = mt_op_check_xent_vp("cuda", "xent_vp_max", a);
    if (st != MT_OK) return st;
    if (a->N == 0) return MT_OK;
    xent_vp_max_kernel<<<(unsigned)a->N, XENT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (float *)a->stats, (const bf16 *)a->logits, a->targets, a->V, a->n_cols, mt_xent_vp_valid_cols(a));
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_xent_vp_sumexp(mt_backend *be, const mt_xent_vp_args *a) {
    mt_status st = mt_op_check_xent_vp("cuda", "xent_vp_sumexp", a);
    if (st != MT_OK) return st;
    if (a->N == 0) return MT_OK;
    xent_vp_sumexp_kernel<<<(unsigned)a->N, XENT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (float *)a->stats, (bf16 *)a->logits, a->targets, a->N, a->V, a->vocab_start, a->n_cols,
        mt_xent_vp_valid_cols(a));
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_xent_vp_finish(mt_backend *be, const mt_xent_vp_args *a) {
    mt_status st = mt_op_check_xent_vp("cuda", "xent_vp_finish", a);
    if (st != MT_OK) return st;
    if (a->N > 0 && !a->losses) return mt_errorf(MT_ERR_INTERNAL, "cuda xent_vp_finish: NULL losses");
    if (a->N == 0) return MT_OK;
    xent_vp_finish_kernel<<<(unsigned)a->N, XENT_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->logits, (float *)a->losses, (const float *)a->stats, a->targets, a->N, a->V, a->vocab_start,
        a->n_cols, mt_xent_vp_valid_cols(a), a->dloss);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
