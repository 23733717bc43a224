/* cpu_ops_attention.c — rotary embedding and flash-style causal grouped-query attention on the
 * CPU: the reference algorithm the CUDA kernel (cuda/cuda_attention.cu) ports tile for tile.
 * Attention never forms a (T, T) matrix. Q, K, V are read straight out of the packed qkv rows
 * through leading-dimension strides and cut into tiles of ATT_BQ query rows and ATT_BK key
 * rows; one (ATT_BQ, ATT_BK) f32 score tile per thread lives on that thread's stack.
 *  forward, per (batch, head, query tile): online softmax over the key tiles up to the causal
 *    limit (running max m, running sum l, output rows rescaled when m grows), out = o / l and
 *    lse = m + log l saved per query row;
 *  backward, per (batch, kv head): delta = rowsum(dO * O), then for each key tile, each query
 *    head of the group and each query tile at or below the diagonal, the probabilities are
 *    recomputed as p = exp(s - lse) and dV += p^T dO, dS = p (dO V^T - delta) / sqrt(D),
 *    dQ += dS K, dK += dS^T Q (FlashAttention-2's backward, Dao 2023, Algorithm 2).
 * Context parallelism (ring attention) runs the same two loop nests on one block of keys with
 * global position offsets (attention_block_fwd / _bwd): the causal limit becomes
 * key <= query + shift, and a forward block's (out, lse) is merged into the running ones by
 * their logsumexps; the serial ops are the blocks with shift 0 over all T keys. A block's keys
 * and values come packed ([k heads | v heads] rows, what travels over the ring); copy_rows packs
 * them out of qkv and puts their gradients back.
 * Tile GEMMs are single-threaded OpenBLAS sgemm calls inside OpenMP work items (the backend
 * keeps OpenBLAS at one thread). Rules: attention_bwd overwrites dqkv (=), the block backward
 * accumulates (+=); nothing is allocated (tile scratch is on the stack, up to 96 KiB for a
 * merging forward tile, delta is the caller's); each work item writes only its own memory
 * in a fixed order, so results are bitwise identical for any thread count. */
#include "core/cpu/cpu_backend.h"

#include <cblas.h>

/* Tile sizes. A (64, 128) f32 score tile is 32 KiB: it and the 64- / 128-row slices of Q, K,
 * V, dO (D = 64: 16 / 32 KiB each) stay in L2 while a tile is worked on; the backward's two
 * tiles (p and dS) take 64 KiB of stack. 128 keys per tile measured ~10% faster than 64 on the
 * 2-core bench machine (test/bench_attention.c: fewer, larger sgemm calls); the CUDA port
 * uses 32 x 32 (shared memory), the loop nest is the same. */
#define ATT_BQ 64 /* query rows per tile */
#define ATT_BK 128 /* key rows per tile */

/* ---- RoPE ---- */

mt_status mt_cpu_rope(mt_backend *be, const mt_rope_args *a) {
    const int nt = mt_cpu_nt(be);
    int empty = 1;
    mt_status st = mt_op_check_rope("cpu", a, &empty);
    if (st != MT_OK || empty) return st;
    const long rows = (long)a->B * a->T;
    const int T = a->T, H = a->n_heads, D = a->D, stride = a->row_stride;
    const int R = a->rot_dim > 0 ? a->rot_dim : D, half = R / 2;
    const int step = a->interleaved ? 2 : 1, pair = a->interleaved ? 1 : half; /* x0 = step * i, x1 = x0 + pair */
    double inv_freq[MT_ROPE_MAX_HALF];
    mt_rope_inv_freq(a, R, inv_freq);
    const float ms = a->yarn_mscale > 0.0f ? a->yarn_mscale : 1.0f; /* YaRN's factor on cos and sin */
    const float sign = a->inverse ? -1.0f : 1.0f;
    float *x = a->x;
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * H * D >= MT_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const double pos = (double)a->pos_offset + (double)(r % T);
        float c[MT_ROPE_MAX_HALF], s[MT_ROPE_MAX_HALF];
        for (int i = 0; i < half; i++) {
            const double ang = pos * inv_freq[i]; /* in double: exact enough for long contexts */
            c[i] = (float)cos(ang) * ms;
            s[i] = sign * (float)sin(ang) * ms;
        }
        float *row = x + r * stride;
        for (int h = 0; h < H; h++) {
            float *head = row + (size_t)h * D;
            for (int i = 0; i < half; i++) {
                float *x0 = head + (size_t)step * i, *x1 = x0 + pair;
                const float a0 = *x0, a1 = *x1;
                *x0 = a0 * c[i] - a1 * s[i];
                *x1 = a1 * c[i] + a0 * s[i];
            }
        }
    }
    return MT_OK;
}

/* ---- attention ---- */

static inline int imin(int a, int b) { return a < b ? a : b; }

/* Number of keys of the tile [c0, c0 + nc) that query row t may see (causal: keys <= t). */
static inline int att_visible(int t, int c0, int nc) {
    const int n = t - c0 + 1;
    return n < 0 ? 0 : n > nc ? nc : n;
}

/* One query tile of one head: nr rows of q (row stride SQ) against the nk keys / values of a
 * block, k, v (stride SK), row r seeing keys j <= r + shift (shift = the tile's first query
 * position minus the block's first key position; the serial op: shift = r0, nk = T); writes the
 * tile's nr rows of o (stride SO) and lse[0 .. nr). A row that sees no key gets o = 0, lse = -inf. */
static void att_fwd_tile(const float *q, int SQ, const float *k, const float *v, int SK, float *o, int SO, float *lse,
                         int nr, int nk, int shift, int D, float scale) {
    float s[ATT_BQ * ATT_BK]; /* scores, then probabilities, of one (query tile, key tile) */
    float m[ATT_BQ], l[ATT_BQ];
    for (int r = 0; r < nr; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        memset(o + (size_t)r * SO, 0, (size_t)D * sizeof *o);
    }
    const int kend = imin(nk, nr + shift); /* the last row of the tile sees keys [0, kend) */
    for (int c0 = 0; c0 < kend; c0 += ATT_BK) {
        const int nc = imin(ATT_BK, kend - c0);
        /* s = scale * Q_i K_j^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, D, scale, q, SQ, k + (size_t)c0 * SK, SK, 0.0f, s,
                    ATT_BK);
        for (int r = 0; r < nr; r++) {
            float *sr = s + (size_t)r * ATT_BK;
            const int nv = att_visible(r + shift, c0, nc);
            if (nv == 0) { /* the whole tile is in this row's future */
                memset(sr, 0, (size_t)nc * sizeof *sr);
                continue;
            }
            const float tmax = mt_cpu_max_f(sr, (size_t)nv);
            const float mnew = tmax > m[r] ? tmax : m[r];
            const float alpha = m[r] == -INFINITY ? 0.0f : mt_cpu_expf(m[r] - mnew);
            for (int j = 0; j < nv; j++) sr[j] = mt_cpu_expf(sr[j] - mnew);
            for (int j = nv; j < nc; j++) sr[j] = 0.0f;
            l[r] = l[r] * alpha + (float)mt_cpu_sum_d(sr, (size_t)nv);
            m[r] = mnew;
            if (alpha != 1.0f) {
                float *orow = o + (size_t)r * SO;
                for (int d = 0; d < D; d++) orow[d] *= alpha;
            }
        }
        /* o = alpha o + P_ij V_j */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, D, nc, 1.0f, s, ATT_BK, v + (size_t)c0 * SK, SK,
                    1.0f, o, SO);
    }
    for (int r = 0; r < nr; r++) {
        if (!(l[r] > 0.0f)) { /* no visible key (block attention only): o stayed 0 */
            lse[r] = -INFINITY;
            continue;
        }
        const float inv = 1.0f / l[r];
        float *orow = o + (size_t)r * SO;
        for (int d = 0; d < D; d++) orow[d] *= inv;
        lse[r] = m[r] + logf(l[r]);
    }
}

mt_status mt_cpu_attention_fwd(mt_backend *be, const mt_attention_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_attention("cpu", "attention_fwd", a->B, a->T, a->H, a->KV, a->D);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D;
    if ((long)B * T == 0) return MT_OK;
    if (!a->out || !a->lse || !a->qkv) return mt_errorf(MT_ERR_INTERNAL, "cpu attention_fwd: NULL tensor");
    const int S3 = (H + 2 * KV) * D, SO = H * D, group = H / KV;
    const float scale = mt_attn_scale(a->scale, D);
    const float *qkv = a->qkv;
    float *out = a->out, *lse = a->lse;
    /* one (batch, head, query tile) per work item, the last (heaviest) tiles first; dynamic
     * scheduling only changes which thread runs an item, never what it computes */
    const int n_qt = (T + ATT_BQ - 1) / ATT_BQ;
    const long n_items = (long)B * H * n_qt;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if ((double)B * H * T * T * D >= MT_CPU_PAR_MIN)
    for (long it = 0; it < n_items; it++) {
        const int qt = n_qt - 1 - (int)(it / ((long)B * H)), bh = (int)(it % ((long)B * H));
        const int b = bh / H, h = bh % H, r0 = qt * ATT_BQ;
        const float *base = qkv + (size_t)b * T * S3;
        att_fwd_tile(base + (size_t)r0 * S3 + (size_t)h * D, S3, base + (size_t)(H + h / group) * D,
                     base + (size_t)(H + KV + h / group) * D, S3, out + ((size_t)b * T + r0) * SO + (size_t)h * D, SO,
                     lse + (size_t)bh * T + r0, imin(ATT_BQ, T - r0), T, r0, D, scale);
    }
    return MT_OK;
}

/* Backward of one (batch, kv head g) over a block: the query heads h0 .. h0 + group - 1, Tq query
 * rows (q, dq: row 0 of the block, head 0; stride SQ; dO, O: stride SO; lse, delta: head stride
 * T) against Tk keys (k, v, dk, dv: the group's columns at the block's row 0, stride SK), row i
 * seeing keys j <= i + shift. delta rows are set, dq / dk / dv accumulated (+=), in a fixed order. */
static void att_bwd_group(const float *q, float *dq, const float *k, const float *v, float *dk, float *dv,
                          const float *dout, const float *out, const float *lse_all, float *delta_all, int T, int SQ,
                          int SK, int SO, int h0, int group, int Tq, int Tk, int shift, int D, float scale) {
    float p[ATT_BQ * ATT_BK], ds[ATT_BQ * ATT_BK]; /* probabilities; dP then dS */
    /* delta_t = dO_t . O_t, per query head of the group */
    for (int h = h0; h < h0 + group; h++) {
        const float *dO = dout + (size_t)h * D, *O = out + (size_t)h * D;
        float *delta = delta_all + (size_t)h * T;
        for (int t = 0; t < Tq; t++) {
            double acc = 0.0;
            for (int d = 0; d < D; d++) acc += (double)dO[(size_t)t * SO + d] * O[(size_t)t * SO + d];
            delta[t] = (float)acc;
        }
    }
    for (int c0 = 0; c0 < Tk; c0 += ATT_BK) {
        const int nc = imin(ATT_BK, Tk - c0);
        const float *kj = k + (size_t)c0 * SK, *vj = v + (size_t)c0 * SK;
        float *dkj = dk + (size_t)c0 * SK, *dvj = dv + (size_t)c0 * SK;
        for (int h = h0; h < h0 + group; h++) {
            const float *qh = q + (size_t)h * D, *dO = dout + (size_t)h * D;
            float *dqh = dq + (size_t)h * D;
            const float *lse = lse_all + (size_t)h * T, *delta = delta_all + (size_t)h * T;
            for (int r0 = 0; r0 < Tq; r0 += ATT_BQ) {
                const int nr = imin(ATT_BQ, Tq - r0);
                if (r0 + nr - 1 + shift < c0) continue; /* no row of the tile sees these keys */
                const float *qi = qh + (size_t)r0 * SQ, *dOi = dO + (size_t)r0 * SO;
                /* p = exp(scale Q_i K_j^T - lse), 0 in the future */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, D, scale, qi, SQ, kj, SK, 0.0f, p, ATT_BK);
                for (int r = 0; r < nr; r++) {
                    float *pr = p + (size_t)r * ATT_BK;
                    const int nv = att_visible(r0 + r + shift, c0, nc);
                    const float lr = lse[r0 + r];
                    for (int j = 0; j < nv; j++) pr[j] = mt_cpu_expf(pr[j] - lr);
                    for (int j = nv; j < nc; j++) pr[j] = 0.0f;
                }
                /* dV_j += P^T dO_i */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, D, nr, 1.0f, p, ATT_BK, dOi, SO, 1.0f, dvj,
                            SK);
                /* dP = dO_i V_j^T;  dS = P (dP - delta) * scale */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, D, 1.0f, dOi, SO, vj, SK, 0.0f, ds, ATT_BK);
                for (int r = 0; r < nr; r++) {
                    const float *pr = p + (size_t)r * ATT_BK;
                    float *dsr = ds + (size_t)r * ATT_BK;
                    const float dl = delta[r0 + r];
                    for (int j = 0; j < nc; j++) dsr[j] = pr[j] * (dsr[j] - dl) * scale;
                }
                /* dQ_i += dS K_j;  dK_j += dS^T Q_i */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, D, nc, 1.0f, ds, ATT_BK, kj, SK, 1.0f,
                            dqh + (size_t)r0 * SQ, SQ);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, D, nr, 1.0f, ds, ATT_BK, qi, SQ, 1.0f, dkj,
                            SK);
            }
        }
    }
}

mt_status mt_cpu_attention_bwd(mt_backend *be, const mt_attention_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_attention("cpu", "attention_bwd", a->B, a->T, a->H, a->KV, a->D);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D;
    if ((long)B * T == 0) return MT_OK;
    if (!a->dqkv || !a->delta || !a->dout || !a->qkv || !a->out || !a->lse)
        return mt_errorf(MT_ERR_INTERNAL, "cpu attention_bwd: NULL tensor");
    const int S3 = (H + 2 * KV) * D, SO = H * D, group = H / KV;
    const float scale = mt_attn_scale(a->scale, D);
    const float *qkv = a->qkv, *dout = a->dout, *out = a->out, *lse = a->lse;
    float *dqkv = a->dqkv, *delta = a->delta;
    /* one (batch, kv head) per work item: dK and dV of that kv head accumulate over the query
     * heads of its group, dQ of those heads over the key tiles, in a fixed order; no two items
     * write the same memory */
    const int n_items = B * KV;
#pragma omp parallel for schedule(static) num_threads(nt) if ((double)B * H * T * T * D >= MT_CPU_PAR_MIN)
    for (int bg = 0; bg < n_items; bg++) {
        const int b = bg / KV, g = bg % KV;
        const size_t base = (size_t)b * T * S3;
        float *dk = dqkv + base + (size_t)(H + g) * D, *dv = dqkv + base + (size_t)(H + KV + g) * D;
        for (int t = 0; t < T; t++) {
            memset(dk + (size_t)t * S3, 0, (size_t)D * sizeof *dk);
            memset(dv + (size_t)t * S3, 0, (size_t)D * sizeof *dv);
            for (int h = g * group; h < (g + 1) * group; h++) memset(dqkv + base + (size_t)t * S3 + (size_t)h * D, 0,
                                                                      (size_t)D * sizeof *dqkv);
        }
        att_bwd_group(qkv + base, dqkv + base, qkv + base + (size_t)(H + g) * D, qkv + base + (size_t)(H + KV + g) * D,
                      dk, dv, dout + (size_t)b * T * SO, out + (size_t)b * T * SO, lse + (size_t)b * H * T,
                      delta + (size_t)b * H * T, T, S3, S3, SO, g * group, group, T, T, 0, D, scale);
    }
    return MT_OK;
}

/* ---- one block of context-parallel (ring) attention (backend.h) ---- */

#define ATT_MAX_D 256 /* head size limit of the merging forward (its tile output lives on the stack) */

static mt_status att_block_check(const char *op, int B, int T, int H, int KV, int D, int q0, int Tq, int k0, int Tk,
                                 int q_pos, int k_pos) {
    mt_status st = mt_op_check_attention("cpu", op, B, T, H, KV, D);
    if (st != MT_OK) return st;
    if (q0 < 0 || Tq < 0 || q0 + Tq > T || k0 < 0 || Tk < 0 || k0 + Tk > T || q_pos < 0 || k_pos < 0 || D > ATT_MAX_D)
        return mt_errorf(MT_ERR_CONFIG, "cpu %s: query rows [%d, %d) / key rows [%d, %d) outside the %d rows, or "
                         "positions %d / %d negative, or head size %d above %d", op, q0, q0 + Tq, k0, k0 + Tk, T,
                         q_pos, k_pos, D, ATT_MAX_D);
    return MT_OK;
}

mt_status mt_cpu_attention_block_fwd(mt_backend *be, const mt_attention_block_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = att_block_check("attention_block_fwd", a->B, a->T, a->H, a->KV, a->D, a->q0, a->Tq, a->k0, a->Tk,
                                   a->q_pos, a->k_pos);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D, Tq = a->Tq, Tk = a->Tk;
    if ((long)B * Tq == 0) return MT_OK;
    if (!a->out || !a->lse || !a->qkv || !a->kv) return mt_errorf(MT_ERR_INTERNAL, "cpu attention_block_fwd: NULL tensor");
    const int S3 = (H + 2 * KV) * D, SK = 2 * KV * D, SO = H * D, group = H / KV, merge = a->merge;
    const float scale = mt_attn_scale(a->scale, D);
    const float *qkv = a->qkv, *kv = a->kv;
    float *out = a->out, *lse = a->lse;
    const int n_qt = (Tq + ATT_BQ - 1) / ATT_BQ;
    const long n_items = (long)B * H * n_qt;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if ((double)B * H * Tq * Tk * D >= MT_CPU_PAR_MIN)
    for (long it = 0; it < n_items; it++) {
        const int qt = n_qt - 1 - (int)(it / ((long)B * H)), bh = (int)(it % ((long)B * H));
        const int b = bh / H, h = bh % H, ri = qt * ATT_BQ, nr = imin(ATT_BQ, Tq - ri);
        const float *q = qkv + ((size_t)b * T + a->q0 + ri) * S3 + (size_t)h * D;
        const float *kb = kv + ((size_t)b * T + a->k0) * SK;
        const float *k = kb + (size_t)(h / group) * D, *v = kb + (size_t)(KV + h / group) * D;
        float *o = out + ((size_t)b * T + a->q0 + ri) * SO + (size_t)h * D;
        float *l = lse + (size_t)bh * T + a->q0 + ri;
        const int shift = a->q_pos + ri - a->k_pos;
        if (!merge) {
            att_fwd_tile(q, S3, k, v, SK, o, SO, l, nr, Tk, shift, D, scale);
            continue;
        }
        float ob[ATT_BQ * ATT_MAX_D], lb[ATT_BQ]; /* the block's own softmax of this tile */
        att_fwd_tile(q, S3, k, v, SK, ob, D, lb, nr, Tk, shift, D, scale);
        for (int r = 0; r < nr; r++) { /* two softmaxes over disjoint keys, weighted by their sums */
            const float la = l[r], lbr = lb[r], mx = la > lbr ? la : lbr;
            if (mx == -INFINITY) continue; /* neither saw a key */
            const float wa = mt_cpu_expf(la - mx), wb = mt_cpu_expf(lbr - mx), sum = wa + wb;
            const float ca = wa / sum, cb = wb / sum;
            float *orow = o + (size_t)r * SO;
            const float *brow = ob + (size_t)r * D;
            for (int d = 0; d < D; d++) orow[d] = ca * orow[d] + cb * brow[d];
            l[r] = mx + logf(sum);
        }
    }
    return MT_OK;
}

mt_status mt_cpu_attention_block_bwd(mt_backend *be, const mt_attention_block_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = att_block_check("attention_block_bwd", a->B, a->T, a->H, a->KV, a->D, a->q0, a->Tq, a->k0, a->Tk,
                                   a->q_pos, a->k_pos);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D, Tq = a->Tq, Tk = a->Tk;
    if ((long)B * Tq * Tk == 0) return MT_OK;
    if (!a->dqkv || !a->dkv || !a->delta || !a->dout || !a->qkv || !a->kv || !a->out || !a->lse)
        return mt_errorf(MT_ERR_INTERNAL, "cpu attention_block_bwd: NULL tensor");
    const int S3 = (H + 2 * KV) * D, SK = 2 * KV * D, SO = H * D, group = H / KV, shift = a->q_pos - a->k_pos;
    const float scale = mt_attn_scale(a->scale, D);
    const float *qkv = a->qkv, *kv = a->kv, *dout = a->dout, *out = a->out, *lse = a->lse;
    float *dqkv = a->dqkv, *dkv = a->dkv, *delta = a->delta;
    /* one (batch, kv head) per work item, as in attention_bwd: items write disjoint columns */
    const int n_items = B * KV;
#pragma omp parallel for schedule(static) num_threads(nt) if ((double)B * H * Tq * Tk * D >= MT_CPU_PAR_MIN)
    for (int bg = 0; bg < n_items; bg++) {
        const int b = bg / KV, g = bg % KV;
        const size_t qb = ((size_t)b * T + a->q0) * S3, kb = ((size_t)b * T + a->k0) * SK;
        const size_t ob = ((size_t)b * T + a->q0) * SO, lb = (size_t)b * H * T + a->q0;
        att_bwd_group(qkv + qb, dqkv + qb, kv + kb + (size_t)g * D, kv + kb + (size_t)(KV + g) * D,
                      dkv + kb + (size_t)g * D, dkv + kb + (size_t)(KV + g) * D, dout + ob, out + ob, lse + lb,
                      delta + lb, T, S3, SK, SO, g * group, group, Tq, Tk, shift, D, scale);
    }
    return MT_OK;
}

mt_status mt_cpu_copy_rows(mt_backend *be, const mt_copy_rows_args *a) {
    (void)be;
    if (a->rows < 0 || a->cols < 0 || a->dst_stride < a->cols || a->src_stride < a->cols)
        return mt_errorf(MT_ERR_CONFIG, "cpu copy_rows: %d rows of %d with strides %d / %d", a->rows, a->cols,
                         a->dst_stride, a->src_stride);
    if ((long)a->rows * a->cols == 0) return MT_OK;
    if (!a->dst || !a->src) return mt_errorf(MT_ERR_INTERNAL, "cpu copy_rows: NULL tensor");
    float *dst = a->dst;
    const float *src = a->src;
    for (int r = 0; r < a->rows; r++)
        memcpy(dst + (size_t)r * a->dst_stride, src + (size_t)r * a->src_stride, (size_t)a->cols * sizeof *dst);
    return MT_OK;
}
