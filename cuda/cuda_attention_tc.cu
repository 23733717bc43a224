/* cuda_attention_tc.cu — flash-style causal grouped-query attention on bf16 tensor cores (WMMA
 * 16x16x16 bf16 -> fp32, sm_80+), forward and backward, for head sizes D in {32, 64, 96, 128};
 * cuda_attention.cu dispatches here and keeps its fp32 CUDA-core kernels for every other D.
 * Same algorithm, tiles and conventions as the CPU twin (core/cpu/cpu_ops_attention.c) and the
 * fp32 port: qkv rows [q heads | k heads | v heads], query head h reads kv head h / (H / KV),
 * scale 1/sqrt(D), per query row only lse = m + log(l) (f32, (B, H, T)) is saved; the
 * backward recomputes p = exp(s - lse) tile by tile (FlashAttention-2, Dao 2023).
 * Layout: tiles of FA_BQ = 64 query rows x FA_BK = 64 key rows, one block of 4 warps per tile;
 * each warp owns 16 rows of the tile (query rows in the forward and dQ, key rows in dK/dV), so
 * between the block-wide loads of a tile every warp works on its own rows (only __syncwarp).
 *  forward, block per (query tile, batch*head), heaviest tiles first: Q tile in shared memory;
 *    per key tile: K, V -> shared; S = Q K^T (tensor cores, fp32); online softmax per row in
 *    fp32 (running max m, sum l; the output rows rescaled by exp(m_old - m_new)); P rounded to
 *    bf16; O += P V (tensor cores, O kept in fp32 shared memory); out = O / l, lse = m + log l.
 *  backward (no atomics; every output element has one writer, summed in a fixed order):
 *    delta = rowsum(dO * O) (cuda_attention.cu's kernel); dQ, block per (query tile, b*h):
 *    per key tile S = Q K^T, dP = dO V^T, dS = p (dP - delta) scale in bf16, dQ += dS K (dQ in
 *    register fragments); dK, dV, block per (key tile, b*kv head): per query head of the group
 *    and query tile at or below the diagonal, S^T = K Q^T, dP^T = V dO^T, P^T and dS^T in bf16,
 *    dV += P^T dO, dK += dS^T Q (register fragments).
 * Precision: products of bf16 in fp32 (tensor cores), softmax and statistics in fp32, P and dS
 * rounded to bf16 before their GEMMs as in FlashAttention-2. Shared memory at D = 128: forward
 * 110.8 KiB, dQ 111.5 KiB, dK/dV 120.5 KiB per block (A100 allows 163, H100 227 with opt-in).
 * Rule: qkv, out, dout, dqkv must be 16-byte aligned (uint4 loads); the caller checks. */
#include "cuda/cuda_common.cuh"

#include <mma.h>

using namespace nvcuda;

#define FA_BQ 64
#define FA_BK 64
#define FA_WARPS 4
#define FA_THREADS (32 * FA_WARPS)
#define FA_LDS (FA_BK + 4) /* fp32 score tile row stride (floats; pads shared-memory banks) */
#define FA_LDP (FA_BK + 8) /* bf16 probability tile row stride */

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_bt; /* a transposed row-major tile */
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

template <int D> struct fa_dims {
    static constexpr int LDH = D + 8; /* bf16 Q/K/V/dO tile row stride (elements) */
    static constexpr int LDO = D + 4; /* fp32 output / staging row stride */
    static constexpr int ND = D / 16; /* 16-wide column tiles of a head */
};

/* rows [0, n_rows) of a (n_rows, D) bf16 tile from global rows of stride `stride` elements;
 * rows >= n_valid are zero (so a padded key row never multiplies a NaN from outside) */
template <int D>
__device__ __forceinline__ void fa_load_tile(bf16 *dst, const bf16 *src, size_t stride, int n_valid, int n_rows) {
    constexpr int VPR = D / 8; /* 16-byte vectors per row */
    for (int e = threadIdx.x; e < n_rows * VPR; e += blockDim.x) {
        const int r = e / VPR, v = e % VPR;
        uint4 val = make_uint4(0u, 0u, 0u, 0u);
        if (r < n_valid) val = *reinterpret_cast<const uint4 *>(src + (size_t)r * stride + v * 8);
        *reinterpret_cast<uint4 *>(dst + r * fa_dims<D>::LDH + v * 8) = val;
    }
}

/* one warp: C (16 x 16*NT, fp32, row stride ldc) = A (16 x 16*KT, row-major, lda) B^T where B is
 * (16*NT x 16*KT) row-major (ldb): the scores of 16 rows against NT*16 rows */
template <int NT, int KT>
__device__ __forceinline__ void fa_warp_abt(float *c, int ldc, const bf16 *a, int lda, const bf16 *b, int ldb) {
#pragma unroll
    for (int j = 0; j < NT; j++) {
        frag_c acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            frag_a fa;
            frag_bt fb;
            wmma::load_matrix_sync(fa, a + kk * 16, lda);
            wmma::load_matrix_sync(fb, b + (size_t)j * 16 * ldb + kk * 16, ldb);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(c + j * 16, acc, ldc, wmma::mem_row_major);
    }
}

/* one warp: acc[j] += A (16 x 16*KT, row-major, lda) B[:, 16j : 16j+16] with B (16*KT x D)
 * row-major (ldb), for every column tile j of the head */
template <int ND, int KT>
__device__ __forceinline__ void fa_warp_ab_acc(frag_c (&acc)[ND], const bf16 *a, int lda, const bf16 *b, int ldb) {
#pragma unroll
    for (int kk = 0; kk < KT; kk++) {
        frag_a fa;
        wmma::load_matrix_sync(fa, a + kk * 16, lda);
#pragma unroll
        for (int j = 0; j < ND; j++) {
            frag_b fb;
            wmma::load_matrix_sync(fb, b + (size_t)kk * 16 * ldb + j * 16, ldb);
            wmma::mma_sync(acc[j], fa, fb, acc[j]);
        }
    }
}

/* one warp writes its 16 fp32 staging rows (row stride LDO) as bf16 to global rows of stride
 * `stride`, rows < n_valid only, times `scale_row[r]` when given */
template <int D>
__device__ __forceinline__ void fa_warp_store_rows(bf16 *dst, size_t stride, const float *stage, int n_valid,
                                                   const float *scale_row) {
    constexpr int VPR = D / 8;
    const int lane = threadIdx.x & 31;
    for (int e = lane; e < 16 * VPR; e += 32) {
        const int r = e / VPR, v = e % VPR;
        if (r >= n_valid) continue;
        const float sc = scale_row ? scale_row[r] : 1.0f;
        const float *s = stage + r * fa_dims<D>::LDO + v * 8;
        const uint4 u = make_uint4(mt_pack_bf16x2(s[0] * sc, s[1] * sc), mt_pack_bf16x2(s[2] * sc, s[3] * sc),
                                   mt_pack_bf16x2(s[4] * sc, s[5] * sc), mt_pack_bf16x2(s[6] * sc, s[7] * sc));
        *reinterpret_cast<uint4 *>(dst + (size_t)r * stride + v * 8) = u;
    }
}

/* ---- forward ---- */

template <int D> static constexpr size_t fa_fwd_smem() {
    return sizeof(bf16) * (size_t)(FA_BQ + 2 * FA_BK) * fa_dims<D>::LDH + sizeof(float) * FA_BQ * FA_LDS +
           sizeof(bf16) * FA_BQ * FA_LDP + sizeof(float) * (size_t)FA_BQ * fa_dims<D>::LDO + sizeof(float) * 3 * FA_BQ;
}

/* grid (n_query_tiles, B*H), FA_THREADS threads, fa_fwd_smem<D>() bytes of dynamic shared memory */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    fa_fwd_kernel(bf16 *out, float *lse, const bf16 *qkv, int T, int H, int KV, float scale) {
    typedef fa_dims<D> dims;
    extern __shared__ __align__(128) unsigned char fa_smem[];
    bf16 *Qs = reinterpret_cast<bf16 *>(fa_smem), *Ks = Qs + FA_BQ * dims::LDH, *Vs = Ks + FA_BK * dims::LDH;
    float *Ss = reinterpret_cast<float *>(Vs + FA_BK * dims::LDH);
    bf16 *Ps = reinterpret_cast<bf16 *>(Ss + FA_BQ * FA_LDS);
    float *Os = reinterpret_cast<float *>(Ps + FA_BQ * FA_LDP);
    float *ms = Os + FA_BQ * dims::LDO, *ls = ms + FA_BQ, *inv_l = ls + FA_BQ;

    const int qt = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D, SO = H * D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, w0 = warp * 16;
    const int r0 = qt * FA_BQ, nr = min(FA_BQ, T - r0);
    const bf16 *base = qkv + (size_t)b * T * S3;
    const bf16 *q = base + (size_t)h * D, *k = base + (size_t)(H + g) * D, *v = base + (size_t)(H + KV + g) * D;

    fa_load_tile<D>(Qs, q + (size_t)r0 * S3, S3, nr, FA_BQ);
    for (int e = threadIdx.x; e < FA_BQ * dims::LDO; e += blockDim.x) Os[e] = 0.0f;
    for (int r = threadIdx.x; r < FA_BQ; r += blockDim.x) ms[r] = -INFINITY, ls[r] = 0.0f;
    const int kend = r0 + nr; /* the tile's last row sees keys [0, kend) */
    for (int c0 = 0; c0 < kend; c0 += FA_BK) {
        const int nc = min(FA_BK, kend - c0);
        __syncthreads(); /* every warp is done with the previous K, V tile */
        fa_load_tile<D>(Ks, k + (size_t)c0 * S3, S3, nc, FA_BK);
        fa_load_tile<D>(Vs, v + (size_t)c0 * S3, S3, nc, FA_BK);
        __syncthreads();
        /* S_w = Q_w K^T: this warp's 16 rows against the 64 keys */
        fa_warp_abt<FA_BK / 16, dims::ND>(Ss + w0 * FA_LDS, FA_LDS, Qs + w0 * dims::LDH, dims::LDH, Ks, dims::LDH);
        __syncwarp();
        /* online softmax over this tile, one row at a time, two columns per lane */
        for (int rr = 0; rr < 16; rr++) {
            const int r = w0 + rr, t = r0 + r;
            float s[FA_BK / 32];
            float mx = -INFINITY;
#pragma unroll
            for (int i = 0; i < FA_BK / 32; i++) {
                const int c = lane + 32 * i;
                s[i] = (r < nr && c < nc && c0 + c <= t) ? Ss[r * FA_LDS + c] * scale : -INFINITY;
                mx = fmaxf(mx, s[i]);
            }
            mx = mt_warp_max(mx);
            const float mold = ms[r], mnew = fmaxf(mold, mx);
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < FA_BK / 32; i++) {
                const float p = s[i] == -INFINITY ? 0.0f : expf(s[i] - mnew);
                Ps[r * FA_LDP + lane + 32 * i] = __float2bfloat16_rn(p);
                sum += p;
            }
            sum = mt_warp_sum(sum);
            const float alpha = mold == -INFINITY ? 0.0f : expf(mold - mnew);
            if (alpha != 1.0f)
                for (int d = lane; d < D; d += 32) Os[r * dims::LDO + d] *= alpha;
            __syncwarp(); /* every lane has read ms[r] before lane 0 rewrites it */
            if (lane == 0) {
                ls[r] = ls[r] * alpha + sum;
                ms[r] = mnew;
            }
        }
        __syncwarp();
        /* O_w += P_w V, O in fp32 shared memory */
#pragma unroll
        for (int j = 0; j < dims::ND; j++) {
            frag_c acc;
            wmma::load_matrix_sync(acc, Os + w0 * dims::LDO + j * 16, dims::LDO, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < FA_BK / 16; kk++) {
                frag_a fa;
                frag_b fb;
                wmma::load_matrix_sync(fa, Ps + w0 * FA_LDP + kk * 16, FA_LDP);
                wmma::load_matrix_sync(fb, Vs + kk * 16 * dims::LDH + j * 16, dims::LDH);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Os + w0 * dims::LDO + j * 16, acc, dims::LDO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    /* this warp's rows: out = O / l, lse = m + log l */
    if (lane < 16) {
        const int r = w0 + lane;
        inv_l[r] = ls[r] > 0.0f ? 1.0f / ls[r] : 0.0f;
        if (r < nr) lse[(size_t)bh * T + r0 + r] = ms[r] + logf(ls[r]);
    }
    __syncwarp();
    const int n_valid = min(16, nr - w0);
    if (n_valid > 0)
        fa_warp_store_rows<D>(out + (size_t)b * T * SO + (size_t)h * D + (size_t)(r0 + w0) * SO, SO,
                              Os + w0 * dims::LDO, n_valid, inv_l + w0);
}

/* ---- backward: dQ ---- */

template <int D> static constexpr size_t fa_dq_smem() {
    return sizeof(bf16) * (size_t)(2 * FA_BQ + 2 * FA_BK) * fa_dims<D>::LDH + sizeof(float) * 2 * FA_BQ * FA_LDS +
           sizeof(bf16) * FA_BQ * FA_LDP + sizeof(float) * 2 * FA_BQ;
}

/* grid (n_query_tiles, B*H) */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    fa_bwd_dq_kernel(bf16 *dqkv, const float *lse, const float *delta, const bf16 *dout, const bf16 *qkv, int T,
                     int H, int KV, float scale) {
    typedef fa_dims<D> dims;
    static_assert(FA_BQ * fa_dims<D>::LDO <= 2 * FA_BQ * FA_LDS, "dQ staging must fit in the score tiles");
    extern __shared__ __align__(128) unsigned char fa_smem[];
    bf16 *Qs = reinterpret_cast<bf16 *>(fa_smem), *dOs = Qs + FA_BQ * dims::LDH, *Ks = dOs + FA_BQ * dims::LDH;
    bf16 *Vs = Ks + FA_BK * dims::LDH;
    float *Ss = reinterpret_cast<float *>(Vs + FA_BK * dims::LDH), *dPs = Ss + FA_BQ * FA_LDS;
    bf16 *dSs = reinterpret_cast<bf16 *>(dPs + FA_BQ * FA_LDS);
    float *lss = reinterpret_cast<float *>(dSs + FA_BQ * FA_LDP), *dls = lss + FA_BQ;

    const int qt = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D, SO = H * D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, w0 = warp * 16;
    const int r0 = qt * FA_BQ, nr = min(FA_BQ, T - r0);
    const bf16 *base = qkv + (size_t)b * T * S3;
    const bf16 *q = base + (size_t)h * D, *k = base + (size_t)(H + g) * D, *v = base + (size_t)(H + KV + g) * D;
    const bf16 *dO = dout + (size_t)b * T * SO + (size_t)h * D;

    fa_load_tile<D>(Qs, q + (size_t)r0 * S3, S3, nr, FA_BQ);
    fa_load_tile<D>(dOs, dO + (size_t)r0 * SO, SO, nr, FA_BQ);
    for (int r = threadIdx.x; r < FA_BQ; r += blockDim.x) {
        lss[r] = r < nr ? lse[(size_t)bh * T + r0 + r] : 0.0f;
        dls[r] = r < nr ? delta[(size_t)bh * T + r0 + r] : 0.0f;
    }
    frag_c dq[dims::ND];
#pragma unroll
    for (int j = 0; j < dims::ND; j++) wmma::fill_fragment(dq[j], 0.0f);
    const int kend = r0 + nr;
    for (int c0 = 0; c0 < kend; c0 += FA_BK) {
        const int nc = min(FA_BK, kend - c0);
        __syncthreads();
        fa_load_tile<D>(Ks, k + (size_t)c0 * S3, S3, nc, FA_BK);
        fa_load_tile<D>(Vs, v + (size_t)c0 * S3, S3, nc, FA_BK);
        __syncthreads();
        fa_warp_abt<FA_BK / 16, dims::ND>(Ss + w0 * FA_LDS, FA_LDS, Qs + w0 * dims::LDH, dims::LDH, Ks, dims::LDH);
        fa_warp_abt<FA_BK / 16, dims::ND>(dPs + w0 * FA_LDS, FA_LDS, dOs + w0 * dims::LDH, dims::LDH, Vs, dims::LDH);
        __syncwarp();
        for (int rr = 0; rr < 16; rr++) {
            const int r = w0 + rr, t = r0 + r;
            const float lr = lss[r], dl = dls[r];
#pragma unroll
            for (int i = 0; i < FA_BK / 32; i++) {
                const int c = lane + 32 * i;
                float ds = 0.0f;
                if (r < nr && c < nc && c0 + c <= t) {
                    const float p = expf(Ss[r * FA_LDS + c] * scale - lr);
                    ds = p * (dPs[r * FA_LDS + c] - dl) * scale;
                }
                dSs[r * FA_LDP + c] = __float2bfloat16_rn(ds);
            }
        }
        __syncwarp();
        fa_warp_ab_acc<dims::ND, FA_BK / 16>(dq, dSs + w0 * FA_LDP, FA_LDP, Ks, dims::LDH);
    }
    __syncthreads(); /* the score tiles become the fp32 staging of dQ */
    float *stage = Ss + w0 * dims::LDO;
#pragma unroll
    for (int j = 0; j < dims::ND; j++) wmma::store_matrix_sync(stage + j * 16, dq[j], dims::LDO, wmma::mem_row_major);
    __syncwarp();
    const int n_valid = min(16, nr - w0);
    if (n_valid > 0)
        fa_warp_store_rows<D>(dqkv + (size_t)b * T * S3 + (size_t)h * D + (size_t)(r0 + w0) * S3, S3, stage, n_valid,
                              NULL);
}

/* ---- backward: dK, dV ---- */

#define FA_LDSQ (FA_BQ + 4) /* fp32 transposed score tile (key rows x query columns) row stride */
#define FA_LDPQ (FA_BQ + 8)

template <int D> static constexpr size_t fa_dkv_smem() {
    return sizeof(bf16) * (size_t)(2 * FA_BK + 2 * FA_BQ) * fa_dims<D>::LDH + sizeof(float) * 2 * FA_BK * FA_LDSQ +
           sizeof(bf16) * 2 * FA_BK * FA_LDPQ + sizeof(float) * 2 * FA_BQ;
}

/* grid (n_key_tiles, B*KV) */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    fa_bwd_dkv_kernel(bf16 *dqkv, const float *lse, const float *delta, const bf16 *dout, const bf16 *qkv, int T,
                      int H, int KV, float scale) {
    typedef fa_dims<D> dims;
    static_assert(FA_BK * fa_dims<D>::LDO <= 2 * FA_BK * FA_LDSQ, "dK/dV staging must fit in the score tiles");
    extern __shared__ __align__(128) unsigned char fa_smem[];
    bf16 *Ks = reinterpret_cast<bf16 *>(fa_smem), *Vs = Ks + FA_BK * dims::LDH, *Qs = Vs + FA_BK * dims::LDH;
    bf16 *dOs = Qs + FA_BQ * dims::LDH;
    float *STs = reinterpret_cast<float *>(dOs + FA_BQ * dims::LDH), *dPTs = STs + FA_BK * FA_LDSQ;
    bf16 *PTs = reinterpret_cast<bf16 *>(dPTs + FA_BK * FA_LDSQ), *dSTs = PTs + FA_BK * FA_LDPQ;
    float *lss = reinterpret_cast<float *>(dSTs + FA_BK * FA_LDPQ), *dls = lss + FA_BQ;

    /* key tile 0 is seen by every query tile: the heaviest tiles have the lowest index, so run first */
    const int kt = blockIdx.x, bg = blockIdx.y, b = bg / KV, g = bg % KV, group = H / KV;
    const int S3 = (H + 2 * KV) * D, SO = H * D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, w0 = warp * 16;
    const int c0 = kt * FA_BK, nc = min(FA_BK, T - c0);
    const bf16 *base = qkv + (size_t)b * T * S3;
    const bf16 *k = base + (size_t)(H + g) * D, *v = base + (size_t)(H + KV + g) * D;

    fa_load_tile<D>(Ks, k + (size_t)c0 * S3, S3, nc, FA_BK);
    fa_load_tile<D>(Vs, v + (size_t)c0 * S3, S3, nc, FA_BK);
    frag_c dk[dims::ND], dv[dims::ND];
#pragma unroll
    for (int j = 0; j < dims::ND; j++) wmma::fill_fragment(dk[j], 0.0f), wmma::fill_fragment(dv[j], 0.0f);
    for (int h = g * group; h < (g + 1) * group; h++) {
        const int bh = b * H + h;
        const bf16 *q = base + (size_t)h * D, *dO = dout + (size_t)b * T * SO + (size_t)h * D;
        /* query tiles holding a row >= c0 */
        for (int r0 = c0 / FA_BQ * FA_BQ; r0 < T; r0 += FA_BQ) {
            const int nr = min(FA_BQ, T - r0);
            __syncthreads(); /* every warp is done with the previous Q, dO tile */
            fa_load_tile<D>(Qs, q + (size_t)r0 * S3, S3, nr, FA_BQ);
            fa_load_tile<D>(dOs, dO + (size_t)r0 * SO, SO, nr, FA_BQ);
            for (int r = threadIdx.x; r < FA_BQ; r += blockDim.x) {
                lss[r] = r < nr ? lse[(size_t)bh * T + r0 + r] : 0.0f;
                dls[r] = r < nr ? delta[(size_t)bh * T + r0 + r] : 0.0f;
            }
            __syncthreads();
            /* S^T_w = K_w Q^T and dP^T_w = V_w dO^T: this warp's 16 keys against the 64 queries */
            fa_warp_abt<FA_BQ / 16, dims::ND>(STs + w0 * FA_LDSQ, FA_LDSQ, Ks + w0 * dims::LDH, dims::LDH, Qs,
                                              dims::LDH);
            fa_warp_abt<FA_BQ / 16, dims::ND>(dPTs + w0 * FA_LDSQ, FA_LDSQ, Vs + w0 * dims::LDH, dims::LDH, dOs,
                                              dims::LDH);
            __syncwarp();
            for (int cc = 0; cc < 16; cc++) {
                const int c = w0 + cc; /* key row within the tile */
#pragma unroll
                for (int i = 0; i < FA_BQ / 32; i++) {
                    const int r = lane + 32 * i; /* query row within the tile */
                    float p = 0.0f, ds = 0.0f;
                    if (c < nc && r < nr && c0 + c <= r0 + r) {
                        p = expf(STs[c * FA_LDSQ + r] * scale - lss[r]);
                        ds = p * (dPTs[c * FA_LDSQ + r] - dls[r]) * scale;
                    }
                    PTs[c * FA_LDPQ + r] = __float2bfloat16_rn(p);
                    dSTs[c * FA_LDPQ + r] = __float2bfloat16_rn(ds);
                }
            }
            __syncwarp();
            fa_warp_ab_acc<dims::ND, FA_BQ / 16>(dv, PTs + w0 * FA_LDPQ, FA_LDPQ, dOs, dims::LDH);
            fa_warp_ab_acc<dims::ND, FA_BQ / 16>(dk, dSTs + w0 * FA_LDPQ, FA_LDPQ, Qs, dims::LDH);
        }
    }
    __syncthreads(); /* the score tiles become the fp32 staging of dK, then dV (this warp's rows) */
    float *stage = STs + w0 * dims::LDO;
    bf16 *drow = dqkv + (size_t)b * T * S3 + (size_t)(c0 + w0) * S3;
    const int n_valid = min(16, nc - w0);
#pragma unroll
    for (int j = 0; j < dims::ND; j++) wmma::store_matrix_sync(stage + j * 16, dk[j], dims::LDO, wmma::mem_row_major);
    __syncwarp();
    if (n_valid > 0) fa_warp_store_rows<D>(drow + (size_t)(H + g) * D, S3, stage, n_valid, NULL);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < dims::ND; j++) wmma::store_matrix_sync(stage + j * 16, dv[j], dims::LDO, wmma::mem_row_major);
    __syncwarp();
    if (n_valid > 0) fa_warp_store_rows<D>(drow + (size_t)(H + KV + g) * D, S3, stage, n_valid, NULL);
}

/* ---- host side ---- */

template <int D> static mt_status fa_fwd(mt_backend *be, const mt_attention_fwd_args *a, int *done) {
    const size_t smem = fa_fwd_smem<D>();
    if (!mt_cuda_smem_optin(fa_fwd_kernel<D>, smem)) return MT_OK; /* *done stays 0: the fp32 path runs */
    dim3 grid(mt_cuda_ceil_div((size_t)a->T, FA_BQ), (unsigned)(a->B * a->H));
    fa_fwd_kernel<D><<<grid, FA_THREADS, smem, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (float *)a->lse, (const bf16 *)a->qkv, a->T, a->H, a->KV, mt_attn_scale(a->scale, D));
    CUDA_CHECK_LAUNCH();
    *done = 1;
    return MT_OK;
}

template <int D> static mt_status fa_bwd(mt_backend *be, const mt_attention_bwd_args *a, int *done) {
    const size_t smem_dq = fa_dq_smem<D>(), smem_dkv = fa_dkv_smem<D>();
    if (!mt_cuda_smem_optin(fa_bwd_dq_kernel<D>, smem_dq) || !mt_cuda_smem_optin(fa_bwd_dkv_kernel<D>, smem_dkv)) return MT_OK;
    cudaStream_t s = mt_cuda_ctx_of(be)->stream;
    const float scale = mt_attn_scale(a->scale, D);
    dim3 grid_q(mt_cuda_ceil_div((size_t)a->T, FA_BQ), (unsigned)(a->B * a->H));
    fa_bwd_dq_kernel<D><<<grid_q, FA_THREADS, smem_dq, s>>>((bf16 *)a->dqkv, (const float *)a->lse,
                                                            (const float *)a->delta, (const bf16 *)a->dout,
                                                            (const bf16 *)a->qkv, a->T, a->H, a->KV, scale);
    CUDA_CHECK_LAUNCH();
    dim3 grid_kv(mt_cuda_ceil_div((size_t)a->T, FA_BK), (unsigned)(a->B * a->KV));
    fa_bwd_dkv_kernel<D><<<grid_kv, FA_THREADS, smem_dkv, s>>>((bf16 *)a->dqkv, (const float *)a->lse,
                                                               (const float *)a->delta, (const bf16 *)a->dout,
                                                               (const bf16 *)a->qkv, a->T, a->H, a->KV, scale);
    CUDA_CHECK_LAUNCH();
    *done = 1;
    return MT_OK;
}

mt_status mt_cuda_attention_tc_fwd(mt_backend *be, const mt_attention_fwd_args *a, int *done) {
    *done = 0;
    if (!mt_cuda_aligned16(a->qkv) || !mt_cuda_aligned16(a->out)) return MT_OK;
    switch (a->D) {
    case 32: return fa_fwd<32>(be, a, done);
    case 64: return fa_fwd<64>(be, a, done);
    case 96: return fa_fwd<96>(be, a, done);
    case 128: return fa_fwd<128>(be, a, done);
    default: return MT_OK;
    }
}

/* the caller has computed delta; this writes all of dqkv (q, k and v parts) */
mt_status mt_cuda_attention_tc_bwd(mt_backend *be, const mt_attention_bwd_args *a, int *done) {
    *done = 0;
    if (!mt_cuda_aligned16(a->qkv) || !mt_cuda_aligned16(a->dqkv) || !mt_cuda_aligned16(a->dout)) return MT_OK;
    switch (a->D) {
    case 32: return fa_bwd<32>(be, a, done);
    case 64: return fa_bwd<64>(be, a, done);
    case 96: return fa_bwd<96>(be, a, done);
    case 128: return fa_bwd<128>(be, a, done);
    default: return MT_OK;
    }
}

int mt_cuda_attention_tc_supports(int D) { return D == 32 || D == 64 || D == 96 || D == 128; }
