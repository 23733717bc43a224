/* cuda_moe.cu — the mixture-of-experts ops on the GPU (backend.h: moe_route, moe_route_bwd,
 * moe_permute, moe_unpermute, moe_unpermute_bwd), bf16 rows, fp32 router maths; the reference is
 * core/cpu/cpu_ops_moe.c and the results must match it (the drop decisions exactly): the per-token
 * choice and weights are core/moe_rule.h's, the same code on both.
 * Rule: the routing order (which assignments are kept, and their rows) is sequential by
 * definition: the capacity pass runs one thread per (sequence, expert) in token order, the row
 * assignment one thread per expert in token order; only the per-token maths is parallel. */
#include "cuda/cuda_common.cuh"

extern "C" {
#include "core/moe_rule.h"
}

#define MOE_THREADS 256
#define MOE_MAX_K 64

static unsigned moe_blocks(size_t n) { return (unsigned)((n + MOE_THREADS - 1) / MOE_THREADS); }

/* per token: scores (softmax or sigmoid), the top-k choice (core/moe_rule.h), weights; lse for the
 * z-loss into lse_out; the aux loss's plain top k counted into auxcnt (integer atomics: exact) */
__global__ void moe_softmax_topk_kernel(const bf16 *logits, float *probs, int32_t *topi, float *topw, float *lse_out,
                                        float *div_out, int32_t *auxcnt, const float *bias, int N, int E, int k, int T, int pre_softmax,
                                        int score, int n_groups, int group_topk, int seq_aux, float scale) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    const bf16 *z = logits + (size_t)t * E;
    float *p = probs + (size_t)t * E;
    const int sig = score == MT_MOE_SCORE_SIGMOID;
    float mx = __bfloat162float(z[0]);
    for (int e = 1; e < E; e++) mx = fmaxf(mx, __bfloat162float(z[e]));
    float s = 0.f;
    for (int e = 0; e < E; e++) s += expf(__bfloat162float(z[e]) - mx);
    for (int e = 0; e < E; e++)
        p[e] = sig ? mt_moe_sigmoid(__bfloat162float(z[e])) : expf(__bfloat162float(z[e]) - mx) / s;
    lse_out[t] = mx + logf(s);
    int32_t ai[MOE_MAX_K];
    float div = 1.f;
    if (sig) {
        div = 0.f;
        for (int e = 0; e < E; e++) div += p[e];
        div += MT_MOE_SIGMOID_EPS;
    }
    div_out[t] = div;
    mt_moe_select(p, NULL, E, k, 1, 0, 0, div, ai);
    int32_t *ac = auxcnt + (seq_aux ? (size_t)(t / T) * E : 0);
    for (int j = 0; j < k; j++) atomicAdd(&ac[ai[j]], 1);
    int32_t *it = topi + (size_t)t * k;
    mt_moe_select(p, bias, E, k, n_groups, group_topk, !sig && !pre_softmax && n_groups > 1, 1.f, it);
    float *w = topw + (size_t)t * k;
    if (sig || pre_softmax) {
        mt_moe_weights(p, NULL, it, k, score, pre_softmax, scale, w);
    } else {
        float m2 = __bfloat162float(z[it[0]]), s2 = 0.f;
        for (int j = 1; j < k; j++) m2 = fmaxf(m2, __bfloat162float(z[it[j]]));
        for (int j = 0; j < k; j++) s2 += expf(__bfloat162float(z[it[j]]) - m2);
        for (int j = 0; j < k; j++) w[j] = scale * (expf(__bfloat162float(z[it[j]]) - m2) / s2);
    }
}

/* one thread per (sequence, expert): the capacity rule in token order (pos: 0 kept, -1 dropped) */
__global__ void moe_capacity_kernel(const int32_t *topi, float *topw, int32_t *pos, int N, int E, int k, int T, int cap) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int n_seq = (N + T - 1) / T;
    if (idx >= n_seq * E) return;
    const int sq = idx / E, e = idx % E;
    int kept = 0;
    for (int t = sq * T; t < (sq + 1) * T && t < N; t++)
        for (int j = 0; j < k; j++) {
            if (topi[(size_t)t * k + j] != e) continue;
            if (cap > 0 && kept >= cap) {
                pos[(size_t)t * k + j] = -1;
                topw[(size_t)t * k + j] = 0.f;
            } else {
                pos[(size_t)t * k + j] = 0;
                kept++;
            }
        }
}

/* one thread per expert: counts; then (after a grid-wide order, run as a second launch) the rows */
__global__ void moe_count_kernel(const int32_t *topi, const int32_t *pos, int32_t *counts, int N, int E, int k) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    int kept = 0, routed = 0;
    for (size_t i = 0; i < (size_t)N * k; i++)
        if (topi[i] == e) {
            routed++;
            kept += pos[i] >= 0;
        }
    counts[e] = kept;
    counts[E + e] = routed;
}

__global__ void moe_rows_kernel(const int32_t *topi, int32_t *pos, const int32_t *counts, int N, int E, int k) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    int row = 0;
    for (int f = 0; f < e; f++) row += counts[f];
    for (size_t i = 0; i < (size_t)N * k; i++)
        if (topi[i] == e && pos[i] >= 0) pos[i] = row++;
}

/* one thread: the step's statistics (the CPU op's order of summation) */
__global__ void moe_stats_kernel(const float *probs, const float *lse, const float *div, const int32_t *counts,
                                 const int32_t *auxcnt,
                                 float *stats, int N, int E, int k, int T, int score, int seq_aux) {
    if (blockIdx.x || threadIdx.x) return;
    const int n_seq = (N + T - 1) / T, nb = seq_aux ? n_seq : 1, rows = seq_aux ? T : N;
    double aux = 0, z = 0;
    long long routed = 0, kept = 0;
    for (int b = 0; b < nb; b++) {
        double sb = 0;
        for (int e = 0; e < E; e++) {
            double ps = 0;
            for (int t = b * rows; t < (b + 1) * rows && t < N; t++) {
                const float pe = probs[(size_t)t * E + e];
                ps += score == MT_MOE_SCORE_SIGMOID && div[t] != 1.f ? pe / div[t] : pe;
            }
            sb += ps * auxcnt[(size_t)b * E + e];
        }
        aux += seq_aux ? sb * E / ((double)T * T * k) / n_seq : sb * E / ((double)N * N * k);
    }
    for (int e = 0; e < E; e++) {
        routed += counts[E + e];
        kept += counts[e];
        stats[4 + e] += (float)counts[E + e];
        stats[4 + E + e] += (float)counts[e];
    }
    for (int t = 0; t < N; t++) z += (double)lse[t] * lse[t];
    stats[0] += (float)aux;
    stats[1] += (float)(z / N);
    stats[2] += (float)(routed - kept);
    stats[3] += (float)routed;
}

/* one thread per expert: the expert bias's token counts (kept assignments) */
__global__ void moe_bias_count_kernel(const int32_t *counts, float *bias_cnt, int E) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < E) bias_cnt[e] += (float)counts[e];
}

mt_status mt_cuda_moe_route(mt_backend *be, const mt_moe_route_args *a) {
    const int N = a->N, E = a->E, k = a->k, T = a->T > 0 ? a->T : a->N;
    if (E <= 0 || k < 1 || k > E || k > MOE_MAX_K || N < 0)
        return mt_errorf(MT_ERR_INTERNAL, "cuda moe_route: %d experts, top %d, %d tokens", E, k, N);
    if (N == 0) return MT_OK;
    mt_cuda_ctx *c = mt_cuda_ctx_of(be);
    if (c->scratch_bytes < (size_t)2 * N * sizeof(float))
        return mt_errorf(MT_ERR_CUDA, "cuda moe_route: %d tokens need %zu bytes of scratch (have %zu)", N,
                         (size_t)2 * N * sizeof(float), c->scratch_bytes);
    if (a->n_groups > MT_MOE_MAX_GROUPS)
        return mt_errorf(MT_ERR_INTERNAL, "cuda moe_route: %d groups (at most %d)", a->n_groups, MT_MOE_MAX_GROUPS);
    float *lse = c->scratch, *div = lse + N; /* per token: logsumexp, the aux scores' divisor */
    const int n_seq = (N + T - 1) / T;
    CUDA_CHECK(cudaMemsetAsync(a->auxcnt, 0, (size_t)(a->seq_aux ? n_seq : 1) * E * sizeof(int32_t), c->stream));
    moe_softmax_topk_kernel<<<moe_blocks(N), MOE_THREADS, 0, c->stream>>>(
        (const bf16 *)a->logits, (float *)a->probs, (int32_t *)a->topi, (float *)a->topw, lse, div, (int32_t *)a->auxcnt,
        (const float *)a->bias, N, E, k, T, a->pre_softmax, a->score, a->n_groups, a->group_topk, a->seq_aux,
        mt_moe_scale(a->scale));
    CUDA_CHECK_LAUNCH();
    moe_capacity_kernel<<<moe_blocks((size_t)n_seq * E), MOE_THREADS, 0, c->stream>>>(
        (const int32_t *)a->topi, (float *)a->topw, (int32_t *)a->pos, N, E, k, T, a->cap);
    CUDA_CHECK_LAUNCH();
    moe_count_kernel<<<moe_blocks(E), MOE_THREADS, 0, c->stream>>>((const int32_t *)a->topi, (const int32_t *)a->pos,
                                                                   (int32_t *)a->counts, N, E, k);
    CUDA_CHECK_LAUNCH();
    moe_rows_kernel<<<moe_blocks(E), MOE_THREADS, 0, c->stream>>>((const int32_t *)a->topi, (int32_t *)a->pos,
                                                                  (const int32_t *)a->counts, N, E, k);
    CUDA_CHECK_LAUNCH();
    if (a->bias_cnt) {
        moe_bias_count_kernel<<<moe_blocks(E), MOE_THREADS, 0, c->stream>>>((const int32_t *)a->counts,
                                                                            (float *)a->bias_cnt, E);
        CUDA_CHECK_LAUNCH();
    }
    if (a->stats) {
        moe_stats_kernel<<<1, 1, 0, c->stream>>>((const float *)a->probs, lse, div, (const int32_t *)a->counts,
                                                 (const int32_t *)a->auxcnt, (float *)a->stats, N, E, k, T, a->score,
                                                 a->seq_aux);
        CUDA_CHECK_LAUNCH();
    }
    return MT_OK;
}

__global__ void moe_route_bwd_kernel(bf16 *dlogits, const bf16 *logits, const float *probs, const int32_t *topi,
                                     const int32_t *auxcnt, const float *dw, int N, int E, int k, int T, int pre_softmax,
                                     int score, int seq_aux, float scale, float aux_c, float z_c) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    const bf16 *z = logits + (size_t)t * E;
    const float *p = probs + (size_t)t * E, *g = dw + (size_t)t * k;
    const int32_t *it = topi + (size_t)t * k, *ac = auxcnt + (seq_aux ? (size_t)(t / T) * E : 0);
    bf16 *dz = dlogits + (size_t)t * E;
    float mx = __bfloat162float(z[0]), s = 0.f, dot = 0.f;
    for (int e = 1; e < E; e++) mx = fmaxf(mx, __bfloat162float(z[e]));
    for (int e = 0; e < E; e++) s += expf(__bfloat162float(z[e]) - mx);
    const float lse = mx + logf(s);
    if (score == MT_MOE_SCORE_SIGMOID) {
        double ds[MOE_MAX_K], gq = 0;
        float D = 0.f;
        for (int e = 0; e < E; e++) D += p[e];
        D += MT_MOE_SIGMOID_EPS;
        for (int e = 0; e < E; e++) gq += (double)aux_c * ac[e] * p[e] / D;
        mt_moe_sigmoid_weights_bwd(p, it, k, scale, g, ds);
        for (int e = 0; e < E; e++) {
            double ge = ((double)aux_c * ac[e] - gq) / D;
            for (int j = 0; j < k; j++) ge += it[j] == e ? ds[j] : 0.0;
            const float pe = expf(__bfloat162float(z[e]) - lse);
            dz[e] = __float2bfloat16((float)(ge * p[e] * (1.0 - p[e])) + z_c * lse * pe);
        }
        return;
    }
    for (int e = 0; e < E; e++) {
        float ge = aux_c * ac[e];
        if (pre_softmax)
            for (int j = 0; j < k; j++) ge += it[j] == e ? scale * g[j] : 0.f;
        dot += p[e] * ge;
    }
    float w[MOE_MAX_K];
    float wd = 0.f;
    if (!pre_softmax) {
        float m2 = __bfloat162float(z[it[0]]), s2 = 0.f;
        for (int j = 1; j < k; j++) m2 = fmaxf(m2, __bfloat162float(z[it[j]]));
        for (int j = 0; j < k; j++) s2 += expf(__bfloat162float(z[it[j]]) - m2);
        for (int j = 0; j < k; j++) {
            w[j] = expf(__bfloat162float(z[it[j]]) - m2) / s2;
            wd += w[j] * g[j];
        }
    }
    for (int e = 0; e < E; e++) {
        float ge = aux_c * ac[e];
        if (pre_softmax)
            for (int j = 0; j < k; j++) ge += it[j] == e ? scale * g[j] : 0.f;
        float d = p[e] * (ge - dot) + z_c * lse * p[e];
        if (!pre_softmax)
            for (int j = 0; j < k; j++) d += it[j] == e ? scale * w[j] * (g[j] - wd) : 0.f;
        dz[e] = __float2bfloat16(d);
    }
}

mt_status mt_cuda_moe_route_bwd(mt_backend *be, const mt_moe_route_bwd_args *a) {
    const int N = a->N, E = a->E, k = a->k, T = a->T > 0 ? a->T : a->N;
    if (E <= 0 || k < 1 || k > E || k > MOE_MAX_K)
        return mt_errorf(MT_ERR_INTERNAL, "cuda moe_route_bwd: %d experts, top %d", E, k);
    if (N == 0) return MT_OK;
    const int n_seq = (N + T - 1) / T;
    const float aux_c = a->seq_aux ? (float)((double)a->aux_scale * E / ((double)T * T * k) / n_seq)
                                   : (float)((double)a->aux_scale * E / ((double)N * N * k));
    const float z_c = 2.0f * a->z_scale / N;
    moe_route_bwd_kernel<<<moe_blocks(N), MOE_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->dlogits, (const bf16 *)a->logits, (const float *)a->probs, (const int32_t *)a->topi,
        (const int32_t *)a->auxcnt, (const float *)a->dw, N, E, k, T, a->pre_softmax, a->score, a->seq_aux,
        mt_moe_scale(a->scale),
        aux_c, z_c);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

/* one block per token row: copies / weighted sums over its k assignments */
__global__ void moe_permute_kernel(bf16 *out, const bf16 *x, const int32_t *pos, int k, int C) {
    const int t = blockIdx.x;
    for (int j = 0; j < k; j++) {
        const int32_t p = pos[(size_t)t * k + j];
        if (p < 0) continue;
        for (int c = threadIdx.x; c < C; c += blockDim.x) out[(size_t)p * C + c] = x[(size_t)t * C + c];
    }
}

__global__ void moe_unpermute_kernel(bf16 *out, const bf16 *y, const int32_t *pos, const float *w, int k, int C) {
    const int t = blockIdx.x;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = 0.f;
        for (int j = 0; j < k; j++) {
            const int32_t p = pos[(size_t)t * k + j];
            if (p >= 0) acc += (w ? w[(size_t)t * k + j] : 1.f) * __bfloat162float(y[(size_t)p * C + c]);
        }
        out[(size_t)t * C + c] = __float2bfloat16(acc);
    }
}

__global__ void moe_unpermute_bwd_kernel(bf16 *dy, float *dw, const bf16 *dout, const bf16 *y, const int32_t *pos,
                                         const float *w, int k, int C) {
    const int t = blockIdx.x;
    __shared__ float red[MOE_THREADS];
    for (int j = 0; j < k; j++) {
        const size_t tj = (size_t)t * k + j;
        const int32_t p = pos[tj];
        if (p < 0) {
            if (dw && threadIdx.x == 0) dw[tj] = 0.f;
            continue;
        }
        float s = 0.f;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            const float g = __bfloat162float(dout[(size_t)t * C + c]);
            if (dw) s += g * __bfloat162float(y[(size_t)p * C + c]);
            if (dy) dy[(size_t)p * C + c] = __float2bfloat16(w[tj] * g);
        }
        if (!dw) continue; /* the same for the whole block: no thread is left at the barriers below */
        red[threadIdx.x] = s;
        __syncthreads();
        for (int h = blockDim.x / 2; h > 0; h >>= 1) {
            if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
            __syncthreads();
        }
        if (threadIdx.x == 0) dw[tj] = red[0];
        __syncthreads();
    }
}

mt_status mt_cuda_moe_permute(mt_backend *be, const mt_moe_permute_args *a) {
    if (a->N <= 0) return MT_OK;
    moe_permute_kernel<<<a->N, MOE_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>((bf16 *)a->out, (const bf16 *)a->x,
                                                                           (const int32_t *)a->pos, a->k, a->C);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_moe_unpermute(mt_backend *be, const mt_moe_unpermute_args *a) {
    if (a->N <= 0) return MT_OK;
    moe_unpermute_kernel<<<a->N, MOE_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (const bf16 *)a->y, (const int32_t *)a->pos, (const float *)a->w, a->k, a->C);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_moe_unpermute_bwd(mt_backend *be, const mt_moe_unpermute_bwd_args *a) {
    if (a->N <= 0) return MT_OK;
    moe_unpermute_bwd_kernel<<<a->N, MOE_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->dy, (float *)a->dw, (const bf16 *)a->dout, (const bf16 *)a->y, (const int32_t *)a->pos,
        (const float *)a->w, a->k, a->C);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
