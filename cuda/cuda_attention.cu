/* cuda_attention.cu — flash-style causal softmax attention with grouped-query heads, forward
 * and backward, on bf16 qkv / out / dout; per query row only the f32 logsumexp lse (B, H, T) is
 * saved, as backend.h states it. qkv rows are [q heads (H*D) | k heads (KV*D) | v heads (KV*D)];
 * query head h reads kv head h / (H / KV); scale 1/sqrt(D).
 * Head sizes 32, 64, 96 and 128 run on tensor cores (cuda_attention_mma.cu; docs/cuda.md); this
 * file keeps the delta kernel both paths share and, for every other head size (or with
 * MT_CUDA_ATTENTION=fp32), the fp32 CUDA-core kernels below:
 * a direct port of the CPU reference (core/cpu/cpu_ops_attention.c; algorithm and tiling in
 * docs/architecture.md, "Attention"), written for correctness, not speed (no tensor cores):
 *  forward, one block per (query tile of CU_BQ rows, batch*head): the Q tile, the output
 *    accumulator and the per-row running max m / sum l live in shared memory; for each key tile
 *    of CU_BK rows up to the causal limit: K, V tile -> shared, s = scale q k^T (masked to
 *    -inf in the future), one warp per row updates m, l and turns s into p = exp(s - m),
 *    then o = alpha o + p V. out = o / l, lse = m + log l.
 *  backward (no atomics: every output element has one writer, summing in a fixed order):
 *    1. delta[t] = dO_t . O_t, one warp per (row, batch*head);
 *    2. dQ, one block per (query tile, batch*head): for each key tile at or below the
 *       diagonal, p = exp(s - lse), dS = p (dO V^T - delta) * scale, dQ += dS K;
 *    3. dK, dV, one block per (key tile, batch*kv head): for each query head of the group and
 *       each query tile at or below the diagonal, recompute p and dS, dV += p^T dO,
 *       dK += dS^T Q.
 *  dqkv is overwritten (=) entirely (its q, k and v parts). All arithmetic in fp32.
 * Tiles are 32 x 32 here (the CPU uses 64 x 64): with every operand staged in fp32 shared
 * memory, the dK/dV kernel needs (4 CU_BK + 2 CU_BQ) D + 2 CU_BQ CU_BK + 2 CU_BQ floats, which is
 * 104 KiB at D = 128 — inside the opt-in limit of A100 / H100 (163 / 227 KiB). */
#include "cuda/cuda_common.cuh"

#include <stdlib.h>
#include <string.h>

#define CU_BQ 32        /* query rows per tile */
#define CU_BK 32        /* key rows per tile */
#define ATT_THREADS 256 /* 8 warps */

__device__ __forceinline__ int cu_min(int a, int b) { return a < b ? a : b; }

/* grid (n_query_tiles, B*H); dynamic shared memory: fwd_smem_floats(D) floats */
__global__ void att_fwd_kernel(bf16 *out, float *lse, const bf16 *qkv, int T, int H, int KV, int D, float scale) {
    extern __shared__ float sm[];
    float *qs = sm, *ks = qs + CU_BQ * D, *vs = ks + CU_BK * D, *os = vs + CU_BK * D, *ss = os + CU_BQ * D;
    float *ms = ss + CU_BQ * CU_BK, *ls = ms + CU_BQ, *al = ls + CU_BQ;
    const int qt = blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D, SO = H * D, tid = threadIdx.x, nth = blockDim.x;
    const int lane = tid & 31, warp = tid >> 5, n_warps = nth >> 5;
    const int r0 = qt * CU_BQ, nr = cu_min(CU_BQ, T - r0);
    const bf16 *base = qkv + (size_t)b * T * S3;
    const bf16 *q = base + (size_t)h * D, *k = base + (size_t)(H + g) * D, *v = base + (size_t)(H + KV + g) * D;

    for (int e = tid; e < CU_BQ * D; e += nth) {
        const int r = e / D, d = e % D;
        qs[e] = r < nr ? __bfloat162float(q[(size_t)(r0 + r) * S3 + d]) : 0.0f;
        os[e] = 0.0f;
    }
    for (int r = tid; r < CU_BQ; r += nth) ms[r] = -INFINITY, ls[r] = 0.0f;
    const int kend = r0 + nr;
    for (int c0 = 0; c0 < kend; c0 += CU_BK) {
        const int nc = cu_min(CU_BK, kend - c0);
        __syncthreads(); /* the previous tile's ks, vs, ss are no longer read */
        for (int e = tid; e < CU_BK * D; e += nth) {
            const int c = e / D, d = e % D;
            ks[e] = c < nc ? __bfloat162float(k[(size_t)(c0 + c) * S3 + d]) : 0.0f;
            vs[e] = c < nc ? __bfloat162float(v[(size_t)(c0 + c) * S3 + d]) : 0.0f;
        }
        __syncthreads();
        for (int e = tid; e < CU_BQ * CU_BK; e += nth) {
            const int r = e / CU_BK, c = e % CU_BK;
            float s = -INFINITY;
            if (r < nr && c < nc && c0 + c <= r0 + r) {
                float acc = 0.0f;
                for (int d = 0; d < D; d++) acc += qs[r * D + d] * ks[c * D + d];
                s = acc * scale;
            }
            ss[e] = s;
        }
        __syncthreads();
        /* online softmax: one warp per row */
        for (int r = warp; r < CU_BQ; r += n_warps) {
            float mx = -INFINITY;
            for (int c = lane; c < CU_BK; c += 32) mx = fmaxf(mx, ss[r * CU_BK + c]);
            mx = mt_warp_max(mx);
            const float mold = ms[r], mnew = fmaxf(mold, mx);
            float sum = 0.0f;
            for (int c = lane; c < CU_BK; c += 32) {
                const float s = ss[r * CU_BK + c];
                const float p = s == -INFINITY ? 0.0f : expf(s - mnew);
                ss[r * CU_BK + c] = p;
                sum += p;
            }
            sum = mt_warp_sum(sum);
            if (lane == 0) {
                const float alpha = mold == -INFINITY ? 0.0f : expf(mold - mnew);
                ls[r] = ls[r] * alpha + sum;
                ms[r] = mnew;
                al[r] = alpha;
            }
        }
        __syncthreads();
        for (int e = tid; e < CU_BQ * D; e += nth) {
            const int r = e / D, d = e % D;
            float acc = os[e] * al[r];
            for (int c = 0; c < nc; c++) acc += ss[r * CU_BK + c] * vs[c * D + d];
            os[e] = acc;
        }
    }
    __syncthreads();
    bf16 *o = out + (size_t)b * T * SO + (size_t)h * D;
    for (int e = tid; e < nr * D; e += nth) {
        const int r = e / D, d = e % D;
        o[(size_t)(r0 + r) * SO + d] = __float2bfloat16_rn(os[e] / ls[r]);
    }
    for (int r = tid; r < nr; r += nth) lse[(size_t)bh * T + r0 + r] = ms[r] + logf(ls[r]);
}

/* backward 1: delta = rowsum(dO * O). grid (ceil(T / 8), B*H), 8 warps, one row per warp */
__global__ void att_bwd_delta_kernel(float *delta, const bf16 *dout, const bf16 *out, int T, int H, int D) {
    const int lane = threadIdx.x & 31, t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), bh = blockIdx.y;
    if (t >= T) return;
    const int b = bh / H, h = bh % H, SO = H * D;
    const size_t row = ((size_t)b * T + t) * SO + (size_t)h * D;
    float acc = 0.0f;
    for (int d = lane; d < D; d += 32) acc += __bfloat162float(dout[row + d]) * __bfloat162float(out[row + d]);
    acc = mt_warp_sum(acc);
    if (lane == 0) delta[(size_t)bh * T + t] = acc;
}

/* backward 2: dQ of one query tile. grid (n_query_tiles, B*H) */
__global__ void att_bwd_dq_kernel(bf16 *dqkv, const float *lse, const float *delta, const bf16 *dout, const bf16 *qkv,
                                  int T, int H, int KV, int D, float scale) {
    extern __shared__ float sm[];
    float *qs = sm, *dos = qs + CU_BQ * D, *dqs = dos + CU_BQ * D, *ks = dqs + CU_BQ * D, *vs = ks + CU_BK * D;
    float *dss = vs + CU_BK * D, *lss = dss + CU_BQ * CU_BK, *dls = lss + CU_BQ;
    const int qt = blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D, SO = H * D, tid = threadIdx.x, nth = blockDim.x;
    const int r0 = qt * CU_BQ, nr = cu_min(CU_BQ, T - r0);
    const bf16 *base = qkv + (size_t)b * T * S3;
    const bf16 *q = base + (size_t)h * D, *k = base + (size_t)(H + g) * D, *v = base + (size_t)(H + KV + g) * D;
    const bf16 *dO = dout + (size_t)b * T * SO + (size_t)h * D;

    for (int e = tid; e < CU_BQ * D; e += nth) {
        const int r = e / D, d = e % D;
        qs[e] = r < nr ? __bfloat162float(q[(size_t)(r0 + r) * S3 + d]) : 0.0f;
        dos[e] = r < nr ? __bfloat162float(dO[(size_t)(r0 + r) * SO + d]) : 0.0f;
        dqs[e] = 0.0f;
    }
    for (int r = tid; r < CU_BQ; r += nth) {
        lss[r] = r < nr ? lse[(size_t)bh * T + r0 + r] : 0.0f;
        dls[r] = r < nr ? delta[(size_t)bh * T + r0 + r] : 0.0f;
    }
    const int kend = r0 + nr;
    for (int c0 = 0; c0 < kend; c0 += CU_BK) {
        const int nc = cu_min(CU_BK, kend - c0);
        __syncthreads();
        for (int e = tid; e < CU_BK * D; e += nth) {
            const int c = e / D, d = e % D;
            ks[e] = c < nc ? __bfloat162float(k[(size_t)(c0 + c) * S3 + d]) : 0.0f;
            vs[e] = c < nc ? __bfloat162float(v[(size_t)(c0 + c) * S3 + d]) : 0.0f;
        }
        __syncthreads();
        for (int e = tid; e < CU_BQ * CU_BK; e += nth) {
            const int r = e / CU_BK, c = e % CU_BK;
            float ds = 0.0f;
            if (r < nr && c < nc && c0 + c <= r0 + r) {
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < D; d++) s += qs[r * D + d] * ks[c * D + d], dp += dos[r * D + d] * vs[c * D + d];
                const float p = expf(s * scale - lss[r]);
                ds = p * (dp - dls[r]) * scale;
            }
            dss[e] = ds;
        }
        __syncthreads();
        for (int e = tid; e < CU_BQ * D; e += nth) {
            const int r = e / D, d = e % D;
            float acc = dqs[e];
            for (int c = 0; c < nc; c++) acc += dss[r * CU_BK + c] * ks[c * D + d];
            dqs[e] = acc;
        }
    }
    __syncthreads();
    bf16 *dq = dqkv + (size_t)b * T * S3 + (size_t)h * D;
    for (int e = tid; e < nr * D; e += nth) {
        const int r = e / D, d = e % D;
        dq[(size_t)(r0 + r) * S3 + d] = __float2bfloat16_rn(dqs[e]);
    }
}

/* backward 3: dK and dV of one key tile of kv head g. grid (n_key_tiles, B*KV) */
__global__ void att_bwd_dkv_kernel(bf16 *dqkv, const float *lse, const float *delta, const bf16 *dout,
                                   const bf16 *qkv, int T, int H, int KV, int D, float scale) {
    extern __shared__ float sm[];
    float *ks = sm, *vs = ks + CU_BK * D, *dks = vs + CU_BK * D, *dvs = dks + CU_BK * D, *qs = dvs + CU_BK * D;
    float *dos = qs + CU_BQ * D, *ps = dos + CU_BQ * D, *dss = ps + CU_BQ * CU_BK, *lss = dss + CU_BQ * CU_BK;
    float *dls = lss + CU_BQ;
    const int kt = blockIdx.x, bg = blockIdx.y, b = bg / KV, g = bg % KV, group = H / KV;
    const int S3 = (H + 2 * KV) * D, SO = H * D, tid = threadIdx.x, nth = blockDim.x;
    const int c0 = kt * CU_BK, nc = cu_min(CU_BK, T - c0);
    const bf16 *base = qkv + (size_t)b * T * S3;
    const bf16 *k = base + (size_t)(H + g) * D, *v = base + (size_t)(H + KV + g) * D;

    for (int e = tid; e < CU_BK * D; e += nth) {
        const int c = e / D, d = e % D;
        ks[e] = c < nc ? __bfloat162float(k[(size_t)(c0 + c) * S3 + d]) : 0.0f;
        vs[e] = c < nc ? __bfloat162float(v[(size_t)(c0 + c) * S3 + d]) : 0.0f;
        dks[e] = dvs[e] = 0.0f;
    }
    for (int h = g * group; h < (g + 1) * group; h++) {
        const int bh = b * H + h;
        const bf16 *q = base + (size_t)h * D, *dO = dout + (size_t)b * T * SO + (size_t)h * D;
        /* query tiles holding a row >= c0 */
        for (int r0 = c0 / CU_BQ * CU_BQ; r0 < T; r0 += CU_BQ) {
            const int nr = cu_min(CU_BQ, T - r0);
            __syncthreads(); /* the previous tile's qs, dos, ps, dss are no longer read */
            for (int e = tid; e < CU_BQ * D; e += nth) {
                const int r = e / D, d = e % D;
                qs[e] = r < nr ? __bfloat162float(q[(size_t)(r0 + r) * S3 + d]) : 0.0f;
                dos[e] = r < nr ? __bfloat162float(dO[(size_t)(r0 + r) * SO + d]) : 0.0f;
            }
            for (int r = tid; r < CU_BQ; r += nth) {
                lss[r] = r < nr ? lse[(size_t)bh * T + r0 + r] : 0.0f;
                dls[r] = r < nr ? delta[(size_t)bh * T + r0 + r] : 0.0f;
            }
            __syncthreads();
            for (int e = tid; e < CU_BQ * CU_BK; e += nth) {
                const int r = e / CU_BK, c = e % CU_BK;
                float p = 0.0f, ds = 0.0f;
                if (r < nr && c < nc && c0 + c <= r0 + r) {
                    float s = 0.0f, dp = 0.0f;
                    for (int d = 0; d < D; d++)
                        s += qs[r * D + d] * ks[c * D + d], dp += dos[r * D + d] * vs[c * D + d];
                    p = expf(s * scale - lss[r]);
                    ds = p * (dp - dls[r]) * scale;
                }
                ps[e] = p;
                dss[e] = ds;
            }
            __syncthreads();
            for (int e = tid; e < CU_BK * D; e += nth) {
                const int c = e / D, d = e % D;
                float dv = dvs[e], dk = dks[e];
                for (int r = 0; r < nr; r++) {
                    dv += ps[r * CU_BK + c] * dos[r * D + d];
                    dk += dss[r * CU_BK + c] * qs[r * D + d];
                }
                dvs[e] = dv;
                dks[e] = dk;
            }
        }
    }
    __syncthreads();
    bf16 *drow = dqkv + (size_t)b * T * S3;
    for (int e = tid; e < nc * D; e += nth) {
        const int c = e / D, d = e % D;
        drow[(size_t)(c0 + c) * S3 + (size_t)(H + g) * D + d] = __float2bfloat16_rn(dks[e]);
        drow[(size_t)(c0 + c) * S3 + (size_t)(H + KV + g) * D + d] = __float2bfloat16_rn(dvs[e]);
    }
}

static size_t fwd_smem_bytes(int D) {
    return sizeof(float) * ((size_t)(2 * CU_BQ + 2 * CU_BK) * D + CU_BQ * CU_BK + 3 * CU_BQ);
}
static size_t dq_smem_bytes(int D) {
    return sizeof(float) * ((size_t)(3 * CU_BQ + 2 * CU_BK) * D + CU_BQ * CU_BK + 2 * CU_BQ);
}
static size_t dkv_smem_bytes(int D) {
    return sizeof(float) * ((size_t)(2 * CU_BQ + 4 * CU_BK) * D + 2 * CU_BQ * CU_BK + 2 * CU_BQ);
}

/* Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KiB needs an opt-in). */
template <typename K> static mt_status att_smem(const char *op, K kernel, size_t bytes, int D) {
    int dev = 0, max_optin = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (bytes > (size_t)max_optin)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: head size %d needs %zu bytes of shared memory per block, the device "
                         "allows %d", op, D, bytes, max_optin);
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return MT_OK;
}

/* The tensor-core kernels (cuda_attention_mma.cu) run unless MT_CUDA_ATTENTION=fp32 asks for the
 * fp32 CUDA-core kernels below (an A/B switch for checks; the parity test runs both). */
static int att_tensor_cores(void) {
    const char *e = getenv("MT_CUDA_ATTENTION");
    return !(e && strcmp(e, "fp32") == 0);
}

static mt_status att_check(const char *op, int B, int T, int H, int KV, int D) {
    mt_status st = mt_op_check_attention("cuda", op, B, T, H, KV, D);
    if (st != MT_OK) return st;
    if ((long)B * H > 65535)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: B*H = %ld exceeds the grid's y limit 65535", op, (long)B * H);
    return MT_OK;
}

mt_status mt_cuda_attention_fwd(mt_backend *be, const mt_attention_fwd_args *a) {
    mt_status st = att_check("attention_fwd", a->B, a->T, a->H, a->KV, a->D);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D;
    if ((long)B * T == 0) return MT_OK;
    if (!a->out || !a->lse || !a->qkv) return mt_errorf(MT_ERR_INTERNAL, "cuda attention_fwd: NULL tensor");
    if (att_tensor_cores()) {
        int done = 0;
        if ((st = mt_cuda_attention_mma_fwd(be, a, &done)) != MT_OK || done) return st;
    }
    const size_t smem = fwd_smem_bytes(D);
    if ((st = att_smem("attention_fwd", att_fwd_kernel, smem, D)) != MT_OK) return st;
    const float scale = mt_attn_scale(a->scale, D);
    dim3 grid(mt_cuda_ceil_div((size_t)T, CU_BQ), (unsigned)(B * H));
    att_fwd_kernel<<<grid, ATT_THREADS, smem, mt_cuda_ctx_of(be)->stream>>>((bf16 *)a->out, (float *)a->lse,
                                                                            (const bf16 *)a->qkv, T, H, KV, D, scale);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_attention_bwd(mt_backend *be, const mt_attention_bwd_args *a) {
    mt_status st = att_check("attention_bwd", a->B, a->T, a->H, a->KV, a->D);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D;
    if ((long)B * T == 0) return MT_OK;
    if (!a->dqkv || !a->delta || !a->dout || !a->qkv || !a->out || !a->lse)
        return mt_errorf(MT_ERR_INTERNAL, "cuda attention_bwd: NULL tensor");
    cudaStream_t s = mt_cuda_ctx_of(be)->stream;
    const float scale = mt_attn_scale(a->scale, D);
    dim3 grid_d(mt_cuda_ceil_div((size_t)T, ATT_THREADS / 32), (unsigned)(B * H));
    att_bwd_delta_kernel<<<grid_d, ATT_THREADS, 0, s>>>((float *)a->delta, (const bf16 *)a->dout,
                                                        (const bf16 *)a->out, T, H, D);
    CUDA_CHECK_LAUNCH();
    if (att_tensor_cores()) {
        int done = 0;
        if ((st = mt_cuda_attention_mma_bwd(be, a, &done)) != MT_OK || done) return st;
    }
    const size_t smem_dq = dq_smem_bytes(D), smem_dkv = dkv_smem_bytes(D);
    if ((st = att_smem("attention_bwd", att_bwd_dq_kernel, smem_dq, D)) != MT_OK) return st;
    if ((st = att_smem("attention_bwd", att_bwd_dkv_kernel, smem_dkv, D)) != MT_OK) return st;
    dim3 grid_q(mt_cuda_ceil_div((size_t)T, CU_BQ), (unsigned)(B * H));
    att_bwd_dq_kernel<<<grid_q, ATT_THREADS, smem_dq, s>>>((bf16 *)a->dqkv, (const float *)a->lse,
                                                          (const float *)a->delta, (const bf16 *)a->dout,
                                                          (const bf16 *)a->qkv, T, H, KV, D, scale);
    CUDA_CHECK_LAUNCH();
    dim3 grid_kv(mt_cuda_ceil_div((size_t)T, CU_BK), (unsigned)(B * KV));
    att_bwd_dkv_kernel<<<grid_kv, ATT_THREADS, smem_dkv, s>>>((bf16 *)a->dqkv, (const float *)a->lse,
                                                             (const float *)a->delta, (const bf16 *)a->dout,
                                                             (const bf16 *)a->qkv, T, H, KV, D, scale);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
