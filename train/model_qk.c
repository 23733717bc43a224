/* model_qk.c — what happens to the queries and keys of a layer between the qkv projection and the
 * attention core, as the layer spec (pl.spec) says: the per-head norm (spec.qk_norm: a norm of the
 * model's kind over head_dim, its own weight and bias per layer for q and for k; or the weightless
 * L2 norm, RMSNorm applying the model's ones, with no weight gradient), then RoPE at the
 * tokens' positions (mt_model_rope: global positions under context parallelism, parallel/cp_attention.c),
 * except on the layers model.no_rope_layers names (Megatron's --no-rope-freq: those attend without it).
 * Forward in place on the layer's qkv activation; backward in place on dqkv (the gradient of the
 * attention core's input becomes the gradient of the projection's output).
 * The norm: each token's q heads (k heads) are a column block of its qkv row; copy_rows packs them
 * into the layer's qk_in activation as rows of D (the norm's input, kept for the backward), the norm
 * op writes them to scratch (dtmp) and copy_rows puts them back. Backward: the block of dqkv packed
 * into dln, the norm backward into zeroed dtmp (its input gradient is +=), copied back. */
#include "train/model_internal.h"

/* one of q (k = 0) or k (k = 1): its first column in a qkv row, its width, its heads, its tensors */
typedef struct {
    int col0, cols, heads, w, b;
    char *in;
    float *mean, *rstd;
} qk_block;

static qk_block block_of(const mt_model *m, const mt_acts *A, int l, int k) {
    const mt_param_layout *pl = &m->pl;
    const size_t es = mt_dtype_bytes(m->act), N = (size_t)m->al.N, rows = N * (pl->H_r + pl->KV_r);
    const int ls = A->l0 + mt_act_slice(pl, l - A->l0);
    qk_block q;
    q.heads = k ? pl->KV_r : pl->H_r;
    q.col0 = k ? pl->H_r * pl->D : 0;
    q.cols = q.heads * pl->D;
    q.w = k ? pl->idx.k_norm_w : pl->idx.q_norm_w;
    q.b = k ? pl->idx.k_norm_b : pl->idx.q_norm_b;
    const size_t row0 = k ? N * pl->H_r : 0; /* k rows follow the q rows */
    q.in = ACT_L(m, A, qk_in, ls, rows * pl->D, es) + row0 * pl->D * es;
    q.mean = (float *)ACT_L(m, A, qk_mean, ls, rows, 4) + row0;
    q.rstd = (float *)ACT_L(m, A, qk_rstd, ls, rows, 4) + row0;
    return q;
}

/* the column block of a (N, qkv_rows_r) matrix <-> N packed rows of `cols` */
static mt_status columns(mt_model *m, void *dst, const void *src, const qk_block *q, int to_qkv) {
    const size_t es = mt_dtype_bytes(m->act);
    const int stride = m->pl.qkv_rows_r;
    mt_copy_rows_args c = {.dst = to_qkv ? (char *)dst + (size_t)q->col0 * es : dst,
                           .src = to_qkv ? src : (const char *)src + (size_t)q->col0 * es,
                           .rows = m->al.N, .cols = q->cols,
                           .dst_stride = to_qkv ? stride : q->cols, .src_stride = to_qkv ? q->cols : stride};
    return MT_BE_CALL(m->be, copy_rows, &c);
}

/* out = the norm of q's packed rows (q->in) */
static mt_status norm_fwd(mt_model *m, void *out, const qk_block *q, int l) {
    const int rows = m->al.N * q->heads;
    if (m->pl.spec.qk_norm != MT_QK_NORM_L2)
        return mt_model_norm_rows_fwd(m, out, q->mean, q->rstd, q->in, P(m, q->w, l), P(m, q->b, l), rows, m->pl.D);
    mt_norm_fwd_args a = {.out = out, .rstd = q->rstd, .inp = q->in, .weight = m->norm_ones, .N = rows,
                          .C = m->pl.D, .eps = m->pl.spec.norm.eps};
    return MT_BE_CALL(m->be, rmsnorm_fwd, &a);
}

/* dinp += the norm's input gradient for dout; the learned norm's weight gradients += */
static mt_status norm_bwd(mt_model *m, void *dinp, const void *dout, const qk_block *q, int l) {
    const int rows = m->al.N * q->heads;
    if (m->pl.spec.qk_norm != MT_QK_NORM_L2)
        return mt_model_norm_rows_bwd(m, dinp, G(m, q->w, l), G(m, q->b, l), dout, q->in, P(m, q->w, l), q->mean,
                                      q->rstd, rows, m->pl.D);
    mt_norm_bwd_args a = {.dinp = dinp, .dout = dout, .inp = q->in, .weight = m->norm_ones, .rstd = q->rstd,
                          .N = rows, .C = m->pl.D};
    return MT_BE_CALL(m->be, rmsnorm_bwd, &a);
}

mt_status mt_model_qk_fwd(mt_model *m, const mt_acts *A, int l, void *qkv) {
    mt_status st = MT_OK;
    void *tmp = ACT(m, A, dtmp);
    for (int k = 0; m->pl.spec.qk_norm && k < 2; k++) {
        const qk_block q = block_of(m, A, l, k);
        MT_CHECK(columns(m, q.in, qkv, &q, 0));
        MT_CHECK(norm_fwd(m, tmp, &q, l));
        MT_CHECK(columns(m, qkv, tmp, &q, 1));
    }
    if (m->pl.spec.rope && !mt_param_layer_no_rope(&m->pl, l)) MT_CHECK(mt_model_rope(m, qkv, 0));
out:
    return st;
}

mt_status mt_model_qk_bwd(mt_model *m, const mt_acts *A, int l, void *dqkv) {
    mt_status st = MT_OK;
    if (m->pl.spec.rope && !mt_param_layer_no_rope(&m->pl, l)) MT_CHECK(mt_model_rope(m, dqkv, 1));
    void *tmp = ACT(m, A, dtmp), *dout = ACT(m, A, dln);
    for (int k = 0; m->pl.spec.qk_norm && k < 2; k++) {
        const qk_block q = block_of(m, A, l, k);
        MT_CHECK(columns(m, dout, dqkv, &q, 0));
        MT_CHECK(m->be->i->memset_zero(m->be, tmp, (size_t)m->al.N * q.cols * mt_dtype_bytes(m->act)));
        MT_CHECK(norm_bwd(m, tmp, dout, &q, l));
        MT_CHECK(columns(m, dqkv, tmp, &q, 1));
    }
out:
    return st;
}
