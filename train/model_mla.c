/* model_mla.c — multi-latent attention (Megatron's MLASelfAttention, megatron/core/transformer/
 * multi_latent_attention.py; DeepSeek-V2/V3): the layer's queries, keys and values from the normed
 * input x1, and the attention output before the output projection.
 *   q  = x1 W_q                                  (q_lora = 0: linear_q_proj, split by heads; with
 *                                                 spec.mla_norm q = norm(x1) W_q: Megatron fuses a norm
 *                                                 into linear_q_proj then, mla_qk_norm_config.py)
 *   q  = norm(x1 W_qd) W_qu                      (linear_q_down_proj replicated, q_layernorm (only
 *                                                 with spec.mla_norm, as every norm below),
 *                                                 linear_q_up_proj split by heads)
 *   [c | k_pe] = x1 W_kvd                        (linear_kv_down_proj replicated)
 *   [k_nope | v] per head = norm(c) W_kvu        (kv_layernorm, linear_kv_up_proj split by heads)
 *   query head = [q_nope | rope(q_pe)], key head = [k_nope | rope(k_pe)] (k_pe shared by every head)
 * RoPE rotates the pos channels in adjacent pairs (2i, 2i + 1): Megatron's mla_rotary_interleaved
 * takes the even channels then the odd ones and rotates the halves, which gives the same values in
 * another channel order, the same for q and k, so the same scores; YaRN frequencies and its
 * concentration factor on cos / sin when the spec says (layer_spec.h).
 * The attention core runs on heads of D = max(qk + pos, v) channels: the qkv activation is the
 * standard [q heads | k heads | v heads] with the shorter parts zero-padded, so the backend's
 * attention (and the context-parallel ring, and the KV-cache decoder) serve unchanged; the output
 * projection reads the v_dim channels of each head (compacted into mla_o when v < D).
 * Tensor parallelism: the down projections see all N token rows (gathered under sequence
 * parallelism) on every rank and their outputs are the same on all; the up projections produce
 * this rank's heads. Backward: each rank's heads give a partial gradient of the latents, so the
 * replicated weights' gradients are partial sums over tp (summed by the grad sync, class
 * TP_PARTIAL) and each down projection's input gradient is reduced like a column-parallel layer's,
 * then taken through norm1 (its backward is linear in dout: one call per contribution adds up). */
#include "train/model_internal.h"

typedef struct {
    size_t es;
    int N, Hr, qk, pos, v, D, R, Dq, Dkv, ql, kl, C, norm;
    char *qc, *qcn, *kvc, *kvcn;
    float *qc_mean, *qc_rstd, *kvc_mean, *kvc_rstd;
    char *q, *kv, *kpe, *o, *dlat, *dc;
} mla_view;

static mla_view view_of(const mt_model *m, const mt_acts *A, int l) {
    const mt_param_layout *pl = &m->pl;
    const mt_layer_spec *s = &pl->spec;
    mla_view w;
    w.es = mt_dtype_bytes(m->act);
    w.N = m->al.N, w.Hr = pl->H_r, w.qk = s->qk_dim, w.pos = s->pos_dim, w.v = s->v_dim, w.D = pl->D;
    w.R = pl->qkv_rows_r, w.Dq = s->qk_dim + s->pos_dim, w.Dkv = s->qk_dim + s->v_dim;
    w.ql = s->q_lora, w.kl = s->kv_lora, w.C = pl->C, w.norm = s->mla_norm;
    const int ls = A->l0 + mt_act_slice(pl, l - A->l0);
    const size_t N = (size_t)w.N;
    /* with a q latent its norm runs on all N rows; without one, the norm fused into linear_q_proj runs on
       this rank's N_r rows of x1 (C wide) */
    const size_t qrows = w.ql ? N : (size_t)m->al.N_r, qw = w.ql ? (size_t)w.ql : (size_t)w.C;
    w.qc = ACT_L(m, A, mla_qc, ls, N * w.ql, w.es);
    w.qcn = ACT_L(m, A, mla_qcn, ls, qrows * qw, w.es);
    w.qc_mean = (float *)ACT_L(m, A, mla_qc_mean, ls, qrows, 4);
    w.qc_rstd = (float *)ACT_L(m, A, mla_qc_rstd, ls, qrows, 4);
    w.kvc = ACT_L(m, A, mla_kvc, ls, N * w.kl, w.es);
    w.kvcn = ACT_L(m, A, mla_kvcn, ls, N * w.kl, w.es);
    w.kvc_mean = (float *)ACT_L(m, A, mla_kvc_mean, ls, N, 4);
    w.kvc_rstd = (float *)ACT_L(m, A, mla_kvc_rstd, ls, N, 4);
    if (!w.norm) w.qcn = w.qc, w.kvcn = w.kvc; /* no latent norms: the up projections read the latents */
    w.q = ACT(m, A, mla_q), w.kv = ACT(m, A, mla_kv), w.kpe = ACT(m, A, mla_kpe), w.o = ACT(m, A, mla_o);
    w.dlat = ACT(m, A, mla_dlat), w.dc = ACT(m, A, mla_dc);
    return w;
}

/* N rows: cols elements at dst + dcol (row stride ds) <- src + scol (row stride ss) */
static mt_status copy_cols(mt_model *m, const mla_view *w, char *dst, int dcol, int ds, const char *src, int scol,
                           int ss, int cols) {
    mt_copy_rows_args c = {.dst = dst + (size_t)dcol * w->es, .src = src + (size_t)scol * w->es, .rows = w->N,
                           .cols = cols, .dst_stride = ds, .src_stride = ss};
    return MT_BE_CALL(m->be, copy_rows, &c);
}

/* RoPE (inverse: its transpose) of n_heads heads of `stride`-spaced channels whose first pos
 * channels rotate, starting at x, rows of row_stride: the q heads' pe part in qkv, or k_pe */
static mt_status rope(mt_model *m, void *x, int n_heads, int stride, int row_stride, int inverse) {
    const mt_layer_spec *s = &m->pl.spec;
    const mt_cp_shape sh = {.B = m->al.B, .T = m->al.T, .H = n_heads, .KV = 0, .D = stride, .qkv_rows = row_stride};
    const mt_rope_args how = {.theta = s->rope_theta, .inverse = inverse, .rot_dim = s->pos_dim, .interleaved = 1,
                              .yarn_factor = s->yarn_factor, .yarn_mscale = s->yarn_mscale,
                              .yarn_beta_fast = s->yarn_beta_fast, .yarn_beta_slow = s->yarn_beta_slow,
                              .yarn_orig_max = s->yarn_orig_max};
    return mt_cp_rope(&m->par.cp, &sh, x, &how);
}

static mt_status matmul(mt_model *m, void *out, const void *inp, const void *w, int M, int n_out, int K) {
    mt_matmul_fwd_args a = {.out = out, .inp = inp, .weight = w, .M = M, .N = n_out, .K = K};
    return MT_BE_CALL(m->be, matmul_fwd, &a);
}

mt_status mt_mla_qkv_fwd(mt_model *m, const mt_acts *A, int l, const void *x1, void *qkv) {
    mt_status st = MT_OK;
    mt_tp *tp = &m->par.tp;
    const mt_param_index *ix = &m->pl.idx;
    const mla_view w = view_of(m, A, l);
    const int N = w.N, Hr = w.Hr, C = w.C;
    if (w.ql) {
        MT_CHECK(mt_tp_column_fwd(tp, w.qc, x1, P(m, ix->q_down_w, l), NULL, w.ql, C));
        if (w.norm)
            MT_CHECK(mt_model_norm_rows_fwd(m, w.qcn, w.qc_mean, w.qc_rstd, w.qc, P(m, ix->q_ln_w, l),
                                            P(m, ix->q_ln_b, l), N, w.ql));
        MT_CHECK(matmul(m, w.q, w.qcn, P(m, ix->q_up_w, l), N, Hr * w.Dq, w.ql));
    } else if (w.norm) { /* Megatron's norm fused into linear_q_proj: q = norm(x1) W_q */
        MT_CHECK(mt_model_norm_rows_fwd(m, w.qcn, w.qc_mean, w.qc_rstd, x1, P(m, ix->q_ln_w, l), P(m, ix->q_ln_b, l),
                                        m->al.N_r, C));
        MT_CHECK(mt_tp_column_fwd(tp, w.q, w.qcn, P(m, ix->q_w, l), NULL, Hr * w.Dq, C));
    } else {
        MT_CHECK(mt_tp_column_fwd(tp, w.q, x1, P(m, ix->q_w, l), NULL, Hr * w.Dq, C));
    }
    const char *wkvd = P(m, ix->kv_down_w, l); /* rows [0, kv_lora): the latent; the next pos rows: k_pe */
    MT_CHECK(mt_tp_column_fwd(tp, w.kvc, x1, wkvd, NULL, w.kl, C));
    MT_CHECK(mt_tp_column_fwd(tp, w.kpe, x1, wkvd + (size_t)w.kl * C * w.es, NULL, w.pos, C));
    if (w.norm)
        MT_CHECK(mt_model_norm_rows_fwd(m, w.kvcn, w.kvc_mean, w.kvc_rstd, w.kvc, P(m, ix->kv_ln_w, l),
                                        P(m, ix->kv_ln_b, l), N, w.kl));
    MT_CHECK(matmul(m, w.kv, w.kvcn, P(m, ix->kv_up_w, l), N, Hr * w.Dkv, w.kl));
    MT_CHECK(rope(m, w.q + (size_t)w.qk * w.es, Hr, w.Dq, Hr * w.Dq, 0));
    MT_CHECK(rope(m, w.kpe, 1, w.pos, w.pos, 0));
    if (w.Dq < w.D || w.v < w.D) MT_CHECK(m->be->i->memset_zero(m->be, qkv, (size_t)N * w.R * w.es));
    char *out = qkv;
    for (int h = 0; h < Hr; h++) {
        const int q0 = h * w.D, k0 = (Hr + h) * w.D, v0 = (2 * Hr + h) * w.D;
        MT_CHECK(copy_cols(m, &w, out, q0, w.R, w.q, h * w.Dq, Hr * w.Dq, w.Dq));
        MT_CHECK(copy_cols(m, &w, out, k0, w.R, w.kv, h * w.Dkv, Hr * w.Dkv, w.qk));
        MT_CHECK(copy_cols(m, &w, out, k0 + w.qk, w.R, w.kpe, 0, w.pos, w.pos));
        MT_CHECK(copy_cols(m, &w, out, v0, w.R, w.kv, h * w.Dkv + w.qk, Hr * w.Dkv, w.v));
    }
out:
    return st;
}

/* dln1 contribution of one column-parallel input GEMM: reduce dx_part, then norm1's backward adds
 * its share into dresid (and norm1's weight gradients) */
typedef struct {
    void *dresid;
    const void *x;        /* resid[l], norm1's input */
    int l, ls;
} ln1_ctx;

static mt_status ln1_back(mt_model *m, const mt_acts *A, const ln1_ctx *c, const void *dx) {
    const mt_param_index *ix = &m->pl.idx;
    const int Nr = m->al.N_r;
    return mt_model_norm_bwd(m, c->dresid, G(m, ix->ln1_w, c->l), G(m, ix->ln1_b, c->l), dx, c->x,
                             P(m, ix->ln1_w, c->l), ACT_L(m, A, ln1_mean, c->ls, Nr, 4),
                             ACT_L(m, A, ln1_rstd, c->ls, Nr, 4), Nr);
}

static mt_status column_back(mt_model *m, const mt_acts *A, const ln1_ctx *c, void *dw, const void *dout,
                             const void *x1, const void *w, int n_out) {
    mt_status st = MT_OK;
    void *dx = NULL;
    MT_CHECK(mt_tp_column_bwd(&m->par.tp, ACT(m, A, dln), &dx, dw, NULL, dout, x1, w, n_out, m->pl.C));
    MT_CHECK(ln1_back(m, A, c, dx));
out:
    return st;
}

/* linear_q_proj with its fused norm (no q latent): the column-parallel backward on the normed rows, the
 * norm's backward into mla_dxq (zeroed: norm backwards add), then norm1's */
static mt_status q_normed_back(mt_model *m, const mt_acts *A, const mla_view *w, const ln1_ctx *c, const void *x1) {
    mt_status st = MT_OK;
    const mt_param_index *ix = &m->pl.idx;
    const int Nr = m->al.N_r, l = c->l;
    void *dx = NULL, *dxq = ACT(m, A, mla_dxq);
    MT_CHECK(mt_tp_column_bwd(&m->par.tp, ACT(m, A, dln), &dx, G(m, ix->q_w, l), NULL, w->q, w->qcn, P(m, ix->q_w, l),
                              w->Hr * w->Dq, w->C));
    MT_CHECK(m->be->i->memset_zero(m->be, dxq, (size_t)Nr * w->C * w->es));
    MT_CHECK(mt_model_norm_rows_bwd(m, dxq, G(m, ix->q_ln_w, l), G(m, ix->q_ln_b, l), dx, x1, P(m, ix->q_ln_w, l),
                                    w->qc_mean, w->qc_rstd, Nr, w->C));
    MT_CHECK(ln1_back(m, A, c, dxq));
out:
    return st;
}

/* an up projection's backward: d(lat) = dout W (partial over tp), dW += dout^T lat; with the latent
 * norms d(lat) goes to dlat and the norm's backward into dc (zeroed first: norm backwards add),
 * without them straight to dc */
static mt_status up_back(mt_model *m, const mla_view *w, int l, int wi, int lnw, int lnb, const void *dout,
                         const void *lat, const void *lat_in, const float *mean, const float *rstd, int n_out, int K) {
    mt_status st = MT_OK;
    mt_matmul_bwd_args b = {.dinp = w->norm ? w->dlat : w->dc, .dweight = G(m, wi, l), .dout = dout, .inp = lat,
                            .weight = P(m, wi, l), .M = w->N, .N = n_out, .K = K};
    MT_CHECK(MT_BE_CALL(m->be, matmul_bwd, &b));
    if (!w->norm) goto out;
    MT_CHECK(m->be->i->memset_zero(m->be, w->dc, (size_t)w->N * K * w->es));
    MT_CHECK(mt_model_norm_rows_bwd(m, w->dc, G(m, lnw, l), G(m, lnb, l), w->dlat, lat_in, P(m, lnw, l), mean, rstd,
                                    w->N, K));
out:
    return st;
}

mt_status mt_mla_qkv_bwd(mt_model *m, const mt_acts *A, int l, const void *x1, void *dqkv, void *dresid) {
    mt_status st = MT_OK;
    const mt_param_index *ix = &m->pl.idx;
    const mla_view w = view_of(m, A, l);
    const int Hr = w.Hr;
    const size_t NrC = (size_t)m->al.N_r * w.C;
    const ln1_ctx c = {.dresid = dresid, .x = ACT_L(m, A, resid, l, NrC, w.es), .l = l,
                       .ls = A->l0 + mt_act_slice(&m->pl, l - A->l0)};
    /* the gradients of the up projections' outputs and of the shared k_pe, out of dqkv's heads */
    char *d = dqkv;
    for (int h = 0; h < Hr; h++) {
        const int q0 = h * w.D, k0 = (Hr + h) * w.D, v0 = (2 * Hr + h) * w.D;
        MT_CHECK(copy_cols(m, &w, w.q, h * w.Dq, Hr * w.Dq, d, q0, w.R, w.Dq));
        MT_CHECK(copy_cols(m, &w, w.kv, h * w.Dkv, Hr * w.Dkv, d, k0, w.R, w.qk));
        MT_CHECK(copy_cols(m, &w, w.kv, h * w.Dkv + w.qk, Hr * w.Dkv, d, v0, w.R, w.v));
        /* k_pe's gradient: the sum over the heads (head h's part packed into dc, then added) */
        MT_CHECK(copy_cols(m, &w, h ? w.dc : w.kpe, 0, w.pos, d, k0 + w.qk, w.R, w.pos));
        if (h) {
            mt_add_args ad = {.out = w.kpe, .a = w.kpe, .b = w.dc, .n = (size_t)w.N * w.pos};
            MT_CHECK(MT_BE_CALL(m->be, add, &ad));
        }
    }
    MT_CHECK(rope(m, w.q + (size_t)w.qk * w.es, Hr, w.Dq, Hr * w.Dq, 1));
    MT_CHECK(rope(m, w.kpe, 1, w.pos, w.pos, 1));
    /* keys and values: kv up projection, kv norm, the kv down projection's two row blocks */
    MT_CHECK(up_back(m, &w, l, ix->kv_up_w, ix->kv_ln_w, ix->kv_ln_b, w.kv, w.kvcn, w.kvc, w.kvc_mean, w.kvc_rstd,
                     Hr * w.Dkv, w.kl));
    const char *wkvd = P(m, ix->kv_down_w, l);
    float *gkvd = G(m, ix->kv_down_w, l);
    MT_CHECK(column_back(m, A, &c, gkvd, w.dc, x1, wkvd, w.kl));
    MT_CHECK(column_back(m, A, &c, gkvd + (size_t)w.kl * w.C, w.kpe, x1, wkvd + (size_t)w.kl * w.C * w.es, w.pos));
    /* queries */
    if (w.ql) {
        MT_CHECK(up_back(m, &w, l, ix->q_up_w, ix->q_ln_w, ix->q_ln_b, w.q, w.qcn, w.qc, w.qc_mean, w.qc_rstd,
                         Hr * w.Dq, w.ql));
        MT_CHECK(column_back(m, A, &c, G(m, ix->q_down_w, l), w.dc, x1, P(m, ix->q_down_w, l), w.ql));
    } else if (w.norm) {
        MT_CHECK(q_normed_back(m, A, &w, &c, x1));
    } else {
        MT_CHECK(column_back(m, A, &c, G(m, ix->q_w, l), w.q, x1, P(m, ix->q_w, l), Hr * w.Dq));
    }
out:
    return st;
}

/* the output projection's input: atty's first v channels of each head (atty itself when v = D) */
mt_status mt_mla_out(mt_model *m, const mt_acts *A, const void *atty, const void **o) {
    const mt_param_layout *pl = &m->pl;
    *o = atty;
    if (pl->spec.v_dim == pl->D) return MT_OK;
    mt_copy_rows_args c = {.dst = ACT(m, A, mla_o), .src = atty, .rows = m->al.N * pl->H_r, .cols = pl->spec.v_dim,
                           .dst_stride = pl->spec.v_dim, .src_stride = pl->D};
    *o = c.dst;
    return MT_BE_CALL(m->be, copy_rows, &c);
}

/* the compact output gradient dO (N, H_r v) into datty's heads, their padding 0 (v < D) */
mt_status mt_mla_out_bwd(mt_model *m, const void *dO, void *datty) {
    const mt_param_layout *pl = &m->pl;
    const size_t n = (size_t)m->al.N * pl->H_r * pl->D * mt_dtype_bytes(m->act);
    mt_status st = m->be->i->memset_zero(m->be, datty, n);
    if (st != MT_OK) return st;
    mt_copy_rows_args c = {.dst = datty, .src = dO, .rows = m->al.N * pl->H_r, .cols = pl->spec.v_dim,
                           .dst_stride = pl->D, .src_stride = pl->spec.v_dim};
    return MT_BE_CALL(m->be, copy_rows, &c);
}
