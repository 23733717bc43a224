/* cpu_ops_attention.c — rotary embedding and causal grouped-query attention on the CPU.
 * Attention materialises the (T, T) scores per (batch, head) with OpenBLAS sgemm, reading Q,
 * K, V straight out of the packed qkv rows through leading-dimension strides; rows are cut
 * into blocks of ATT_BLOCK so the GEMMs skip most of the masked upper triangle.
 * Work items are (batch, head) in the forward and (batch, kv head) in the backward, run in
 * parallel by OpenMP, each calling single-threaded OpenBLAS (the backend keeps OpenBLAS at one
 * thread).
 * Rules: dqkv is overwritten (=); probs keep the softmax with zeros above the diagonal; the
 * caller provides dprobs scratch, nothing is allocated; each item writes only its own memory
 * in a fixed order, so results are deterministic for any thread count. */
#include "core/cpu/cpu_backend.h"

#include <cblas.h>

#define ATT_BLOCK 256   /* query rows per GEMM block */
#define ROPE_MAX_HALF 1024 /* D / 2 limit: per-call frequency table on the stack */

/* ---- RoPE ---- */

mt_status mt_cpu_rope(mt_backend *be, const mt_rope_args *a) {
    const int nt = mt_cpu_nt(be);
    if (a->B < 0 || a->T < 0 || a->n_heads < 0 || a->D <= 0 || a->D % 2 != 0 || a->D / 2 > ROPE_MAX_HALF)
        return mt_errorf(MT_ERR_CONFIG, "cpu rope: bad shape B=%d T=%d heads=%d D=%d (D must be even and <= %d)",
                         a->B, a->T, a->n_heads, a->D, 2 * ROPE_MAX_HALF);
    if ((long)a->n_heads * a->D > a->row_stride)
        return mt_errorf(MT_ERR_CONFIG, "cpu rope: %d heads of %d exceed the row stride %d", a->n_heads, a->D,
                         a->row_stride);
    if (a->pos_offset < 0 || !(a->theta > 0.0f))
        return mt_errorf(MT_ERR_CONFIG, "cpu rope: pos_offset %d / theta %g invalid", a->pos_offset, (double)a->theta);
    const long rows = (long)a->B * a->T;
    if (rows == 0 || a->n_heads == 0) return MT_OK;
    if (!a->x) return mt_errorf(MT_ERR_INTERNAL, "cpu rope: NULL tensor");
    const int T = a->T, H = a->n_heads, D = a->D, half = D / 2, stride = a->row_stride;
    double inv_freq[ROPE_MAX_HALF];
    for (int i = 0; i < half; i++) inv_freq[i] = pow((double)a->theta, -2.0 * i / D);
    const float sign = a->inverse ? -1.0f : 1.0f;
    float *x = a->x;
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * H * D >= MT_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const double pos = (double)a->pos_offset + (double)(r % T);
        float c[ROPE_MAX_HALF], s[ROPE_MAX_HALF];
        for (int i = 0; i < half; i++) {
            const double ang = pos * inv_freq[i]; /* in double: exact enough for long contexts */
            c[i] = (float)cos(ang);
            s[i] = sign * (float)sin(ang);
        }
        float *row = x + r * stride;
        for (int h = 0; h < H; h++) {
            float *x0 = row + (size_t)h * D, *x1 = x0 + half;
            for (int i = 0; i < half; i++) {
                const float a0 = x0[i], a1 = x1[i];
                x0[i] = a0 * c[i] - a1 * s[i];
                x1[i] = a1 * c[i] + a0 * s[i];
            }
        }
    }
    return MT_OK;
}

/* ---- attention ---- */

static mt_status att_check(const char *op, int B, int T, int H, int KV, int D) {
    if (B < 0 || T < 0 || H <= 0 || KV <= 0 || D <= 0)
        return mt_errorf(MT_ERR_CONFIG, "cpu %s: bad shape B=%d T=%d H=%d KV=%d D=%d", op, B, T, H, KV, D);
    if (H % KV != 0)
        return mt_errorf(MT_ERR_CONFIG,
                         "cpu %s: %d query heads are not a multiple of %d kv heads (grouped-query attention "
                         "needs H %% KV == 0)",
                         op, H, KV);
    return MT_OK;
}

/* Softmax of row t of a (T, T) score block over columns 0..t, in place; zeros above. */
static inline void softmax_causal_row(float *p, int t, int T) {
    const int n = t + 1;
    const float mx = mt_cpu_max_f(p, (size_t)n);
    for (int j = 0; j < n; j++) p[j] = mt_cpu_expf(p[j] - mx);
    const float sum = (float)mt_cpu_sum_d(p, (size_t)n);
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) p[j] *= inv;
    for (int j = n; j < T; j++) p[j] = 0.0f;
}

mt_status mt_cpu_attention_fwd(mt_backend *be, const mt_attention_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = att_check("attention_fwd", a->B, a->T, a->H, a->KV, a->D);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D;
    if ((long)B * T == 0) return MT_OK;
    if (!a->out || !a->probs || !a->qkv) return mt_errorf(MT_ERR_INTERNAL, "cpu attention_fwd: NULL tensor");
    const int S3 = (H + 2 * KV) * D, SO = H * D, group = H / KV;
    const float scale = 1.0f / sqrtf((float)D);
    const float *qkv = a->qkv;
    float *out = a->out, *probs = a->probs;
    /* one (batch, head) per work item; its GEMMs run single-threaded inside the item */
    const int n_items = B * H;
#pragma omp parallel for schedule(static) num_threads(nt) if ((double)n_items * T * T * D >= MT_CPU_PAR_MIN)
    for (int bh = 0; bh < n_items; bh++) {
        const int b = bh / H, h = bh % H;
        const float *q = qkv + (size_t)b * T * S3 + (size_t)h * D;
        const float *k = qkv + (size_t)b * T * S3 + (size_t)(H + h / group) * D;
        const float *v = qkv + (size_t)b * T * S3 + (size_t)(H + KV + h / group) * D;
        float *P = probs + (size_t)bh * T * T;
        float *o = out + (size_t)b * T * SO + (size_t)h * D;
        for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
            const int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T;
            /* scores of rows [r0, r1) against keys [0, r1): the rest is masked */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, D, scale, q + (size_t)r0 * S3, S3, k,
                        S3, 0.0f, P + (size_t)r0 * T, T);
            for (int t = r0; t < r1; t++) softmax_causal_row(P + (size_t)t * T, t, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, D, r1, 1.0f, P + (size_t)r0 * T, T, v, S3,
                        0.0f, o + (size_t)r0 * SO, SO);
        }
    }
    return MT_OK;
}

/* dS = P * (dP - sum_j P dP) * scale on columns 0..t of row t, in place in dP; zeros above. */
static inline void softmax_bwd_row(float *dp, const float *p, int t, int T, float scale) {
    const int n = t + 1;
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) acc[l] += (double)p[j + l] * dp[j + l];
    for (; j < n; j++) acc[j & 7] += (double)p[j] * dp[j];
    const float dot = (float)(((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])));
    for (j = 0; j < n; j++) dp[j] = p[j] * (dp[j] - dot) * scale;
    for (j = n; j < T; j++) dp[j] = 0.0f;
}

mt_status mt_cpu_attention_bwd(mt_backend *be, const mt_attention_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = att_check("attention_bwd", a->B, a->T, a->H, a->KV, a->D);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D;
    if ((long)B * T == 0) return MT_OK;
    if (!a->dqkv || !a->dprobs || !a->dout || !a->qkv || !a->probs)
        return mt_errorf(MT_ERR_INTERNAL, "cpu attention_bwd: NULL tensor");
    const int S3 = (H + 2 * KV) * D, SO = H * D, group = H / KV;
    const float scale = 1.0f / sqrtf((float)D);
    const float *qkv = a->qkv, *dout = a->dout, *probs = a->probs;
    float *dqkv = a->dqkv, *dprobs = a->dprobs;
    /* one (batch, kv head) per work item: dK and dV of that kv head accumulate over the query
     * heads of its group in a fixed order, so no two items write the same memory */
    const int n_items = B * KV;
#pragma omp parallel for schedule(static) num_threads(nt) if ((double)B * H * T * T * D >= MT_CPU_PAR_MIN)
    for (int bg = 0; bg < n_items; bg++) {
        const int b = bg / KV, g = bg % KV;
        const size_t base = (size_t)b * T * S3;
        const float *k = qkv + base + (size_t)(H + g) * D, *v = qkv + base + (size_t)(H + KV + g) * D;
        float *dk = dqkv + base + (size_t)(H + g) * D, *dv = dqkv + base + (size_t)(H + KV + g) * D;
        for (int t = 0; t < T; t++) {
            memset(dk + (size_t)t * S3, 0, (size_t)D * sizeof *dk);
            memset(dv + (size_t)t * S3, 0, (size_t)D * sizeof *dv);
        }
        for (int h = g * group; h < (g + 1) * group; h++) {
            const float *q = qkv + base + (size_t)h * D;
            float *dq = dqkv + base + (size_t)h * D;
            const float *dO = dout + (size_t)b * T * SO + (size_t)h * D;
            const float *P = probs + ((size_t)b * H + h) * T * T;
            float *dS = dprobs + ((size_t)b * H + h) * T * T;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                const int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, nr = r1 - r0;
                /* dP = dO V^T (rows [r0, r1), keys [0, r1)) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, r1, D, 1.0f, dO + (size_t)r0 * SO, SO, v, S3,
                            0.0f, dS + (size_t)r0 * T, T);
                /* dV[0:r1] += P[r0:r1, 0:r1]^T dO[r0:r1]; P is 0 above the diagonal */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, D, nr, 1.0f, P + (size_t)r0 * T, T,
                            dO + (size_t)r0 * SO, SO, 1.0f, dv, S3);
                /* softmax backward, scale folded in: dS = P (dP - rowsum(P dP)) / sqrt(D) */
                for (int t = r0; t < r1; t++) softmax_bwd_row(dS + (size_t)t * T, P + (size_t)t * T, t, T, scale);
                /* dQ = dS K;  dK[0:r1] += dS^T Q */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, D, r1, 1.0f, dS + (size_t)r0 * T, T, k, S3,
                            0.0f, dq + (size_t)r0 * S3, S3);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, D, nr, 1.0f, dS + (size_t)r0 * T, T,
                            q + (size_t)r0 * S3, S3, 1.0f, dk, S3);
            }
        }
    }
    return MT_OK;
}
