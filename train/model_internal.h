/* model_internal.h — shared by model.c, model_fwd.c, model_bwd.c, model_qk.c, model_moe.c and generate_kv.c
 * (not a public header):
 * views into the model's buffers and the norm wrappers. Rule: only pointer arithmetic on the
 * layouts' offsets here; no device access. */
#ifndef MT_MODEL_INTERNAL_H
#define MT_MODEL_INTERNAL_H

#include "train/model.h"

/* field of activation buffer A (an mt_acts *) */
#define ACT(m, A, field) ((char *)(A)->base + (m)->al.field)
/* slice of local layer l of a per-layer activation array whose one-layer slice has `per`
 * elements of size `es`; the buffer starts at layer A->l0 */
#define ACT_L(m, A, field, l, per, es) (ACT(m, A, field) + (size_t)((l) - (A)->l0) * (size_t)(per) * (es))

static inline void *mt_model_P(const mt_model *m, int ti, int l) {
    return ti < 0 ? NULL : (char *)m->params + mt_param_offset(&m->pl, ti, l) * mt_dtype_bytes(m->act);
}
static inline void *mt_model_G(const mt_model *m, int ti, int l) {
    return ti < 0 ? NULL : (char *)m->grads + mt_param_offset(&m->pl, ti, l) * 4;
}
#define P(m, ti, l) mt_model_P((m), (ti), (l))
#define G(m, ti, l) mt_model_G((m), (ti), (l))

/* The weight a norm of the layer spec applies: w itself, or 1 + w under zero-centred gamma
 * (computed into the model's norm_w1 scratch with the backend's add, just before the one op that
 * reads it; the gradient with respect to 1 + w is the gradient with respect to w). */
static inline mt_status mt_model_norm_weight(mt_model *m, const void *w, int C, const void **applied) {
    *applied = w;
    if (!m->pl.spec.norm.one_plus) return MT_OK;
    mt_add_args ad = {.out = m->norm_w1, .a = w, .b = m->norm_ones, .n = (size_t)C};
    *applied = m->norm_w1;
    return MT_BE_CALL(m->be, add, &ad);
}

/* out = norm(inp) over N rows of C (the spec's kind; mean only for LayerNorm) */
static inline mt_status mt_model_norm_rows_fwd(mt_model *m, void *out, void *mean, void *rstd, const void *inp,
                                               const void *w, const void *b, int N, int C) {
    const int ln = mt_norm_is_layernorm(&m->pl.spec.norm);
    const void *wa = NULL;
    mt_status st = mt_model_norm_weight(m, w, C, &wa);
    if (st != MT_OK) return st;
    mt_norm_fwd_args a = {.out = out, .mean = ln ? mean : NULL, .rstd = rstd, .inp = inp,
                          .weight = wa, .bias = b, .N = N, .C = C, .eps = m->pl.spec.norm.eps};
    return ln ? MT_BE_CALL(m->be, layernorm_fwd, &a) : MT_BE_CALL(m->be, rmsnorm_fwd, &a);
}

static inline mt_status mt_model_norm_fwd(mt_model *m, void *out, void *mean, void *rstd, const void *inp,
                                          const void *w, const void *b, int N) {
    return mt_model_norm_rows_fwd(m, out, mean, rstd, inp, w, b, N, m->pl.C);
}

/* out_resid = a + b, then out = norm(out_resid): the backend's fused add_*norm_fwd when it has
 * one, else add then the norm (the same values on the CPU reference either way). */
static inline mt_status mt_model_add_norm_fwd(mt_model *m, void *out_resid, void *out, void *mean, void *rstd,
                                              const void *x, const void *y, const void *w, const void *b, int N) {
    const int ln = mt_norm_is_layernorm(&m->pl.spec.norm);
    mt_status (*fused)(mt_backend *, const mt_add_norm_fwd_args *) =
        ln ? m->be->i->add_layernorm_fwd : m->be->i->add_rmsnorm_fwd;
    if (!fused) {
        mt_add_args ad = {.out = out_resid, .a = x, .b = y, .n = (size_t)N * m->pl.C};
        mt_status st = MT_BE_CALL(m->be, add, &ad);
        if (st != MT_OK) return st;
        return mt_model_norm_fwd(m, out, mean, rstd, out_resid, w, b, N);
    }
    const void *wa = NULL;
    mt_status st = mt_model_norm_weight(m, w, m->pl.C, &wa);
    if (st != MT_OK) return st;
    mt_add_norm_fwd_args a = {.out_resid = out_resid, .out = out, .mean = ln ? mean : NULL, .rstd = rstd,
                              .a = x, .b = y, .weight = wa, .bias = b, .N = N, .C = m->pl.C,
                              .eps = m->pl.spec.norm.eps};
    return fused(m->be, &a);
}

/* dinp += d norm (N rows of C); dw, db += */
static inline mt_status mt_model_norm_rows_bwd(mt_model *m, void *dinp, void *dw, void *db, const void *dout,
                                               const void *inp, const void *w, const void *mean, const void *rstd,
                                               int N, int C) {
    const void *wa = NULL;
    mt_status st = mt_model_norm_weight(m, w, C, &wa);
    if (st != MT_OK) return st;
    mt_norm_bwd_args a = {.dinp = dinp, .dweight = dw, .dbias = db, .dout = dout, .inp = inp,
                          .weight = wa, .mean = mean, .rstd = rstd, .N = N, .C = C};
    return mt_norm_is_layernorm(&m->pl.spec.norm) ? MT_BE_CALL(m->be, layernorm_bwd, &a)
                                                   : MT_BE_CALL(m->be, rmsnorm_bwd, &a);
}

static inline mt_status mt_model_norm_bwd(mt_model *m, void *dinp, void *dw, void *db, const void *dout,
                                          const void *inp, const void *w, const void *mean, const void *rstd, int N) {
    return mt_model_norm_rows_bwd(m, dinp, dw, db, dout, inp, w, mean, rstd, N, m->pl.C);
}

/* Local layer l's activations (forward writes them, backward reads them): the residual stream's
 * x = resid[l] and xm, and the rest in slice ls (mt_act_slice: one shared slice under full
 * recompute); the attention core's outputs in slice la (mt_act_attn_slice: shared under selective). */
typedef struct {
    int ls, la;
    void *x, *x1, *qkv, *lse, *atty, *xm, *x2, *h, *g;
} mt_layer_acts;

static inline mt_layer_acts mt_layer_acts_of(const mt_model *m, const mt_acts *A, int l) {
    const mt_param_layout *pl = &m->pl;
    const size_t a = mt_dtype_bytes(m->act), NrC = (size_t)m->al.N_r * pl->C, N = (size_t)m->al.N;
    mt_layer_acts v;
    v.ls = A->l0 + mt_act_slice(pl, l - A->l0);
    v.la = A->l0 + mt_act_attn_slice(pl, l - A->l0);
    v.x = ACT_L(m, A, resid, l, NrC, a);
    v.x1 = ACT_L(m, A, ln1, v.ls, NrC, a);
    v.qkv = ACT_L(m, A, qkv, v.ls, N * pl->qkv_rows_r, a);
    v.lse = ACT_L(m, A, lse, v.la, (size_t)m->al.B * pl->H_r * m->al.T, 4);
    v.atty = ACT_L(m, A, atty, v.la, N * pl->H_r * pl->D, a);
    v.xm = ACT_L(m, A, resid_mid, v.ls, NrC, a);
    v.x2 = ACT_L(m, A, ln2, v.ls, NrC, a);
    /* a MoE model's dense layers: their own slices of the dense MLP's arrays (act_slot); its MoE layers none */
    const int hs = pl->moe ? A->l0 + pl->act_slot[l] : v.ls;
    v.h = ACT_L(m, A, fch, hs, N * pl->fc_rows_r, a);
    v.g = ACT_L(m, A, fch_act, hs, N * pl->F_r, a);
    return v;
}

/* The MLP's activation of the layer spec over M rows of F hidden units (the dense MLP's F_r, an expert's
 * Fe_r), g (M, F) from h (M, F or 2F): gelu(h), swiglu(h) (h's rows [gate | up]) or squared_relu(h). The
 * dense GeLU layer instead runs the fused GEMM + GeLU of the tensor-parallel layer (model_fwd.c /
 * model_bwd.c); MoE experts and the others call these. */
static inline mt_status mt_model_mlp_act_fwd(mt_model *m, void *g, const void *h, int M, int F) {
    if (m->pl.spec.mlp == MT_MLP_SWIGLU) {
        mt_swiglu_fwd_args sa = {.out = g, .inp = h, .N = M, .F = F};
        return MT_BE_CALL(m->be, swiglu_fwd, &sa);
    }
    mt_gelu_fwd_args ea = {.out = g, .inp = h, .n = (size_t)M * F};
    return m->pl.spec.mlp == MT_MLP_SQUARED_RELU ? MT_BE_CALL(m->be, squared_relu_fwd, &ea)
                                                 : MT_BE_CALL(m->be, gelu_fwd, &ea);
}
/* dh (M, F or 2F) = from dg (M, F) through the activation at h; dh may be dg when not gated (in place) */
static inline mt_status mt_model_mlp_act_bwd(mt_model *m, void *dh, const void *dg, const void *h, int M, int F) {
    if (m->pl.spec.mlp == MT_MLP_SWIGLU) {
        mt_swiglu_bwd_args sa = {.dinp = dh, .dout = dg, .inp = h, .N = M, .F = F};
        return MT_BE_CALL(m->be, swiglu_bwd, &sa);
    }
    mt_gelu_bwd_args ea = {.dinp = dh, .dout = dg, .inp = h, .n = (size_t)M * F};
    return m->pl.spec.mlp == MT_MLP_SQUARED_RELU ? MT_BE_CALL(m->be, squared_relu_bwd, &ea)
                                                 : MT_BE_CALL(m->be, gelu_bwd, &ea);
}

/* The MoE shared experts of layer l (model_moe_shared.c), called by model_moe.c: forward out (N, C, partial
 * over tp) += shared(xf) (xf the gathered norm2 output, all N rows); backward in two parts, because under
 * sequence parallelism the output gradient dY and the input xf are gathered into the same buffer in turn:
 * the output side from dY (N, C), then the input side adding its partial gradient into dln (N, C). */
mt_status mt_moe_shared_forward(mt_model *m, const mt_acts *A, int l, const void *xf, void *out);
mt_status mt_moe_shared_backward_out(mt_model *m, const mt_acts *A, int l, const void *dY);
mt_status mt_moe_shared_backward_in(mt_model *m, const mt_acts *A, int l, const void *xf, void *dln);

/* the part hook (model.h), when set */
static inline mt_status mt_model_part_hook(mt_model *m, int backward, int part) {
    return m->part_hook ? m->part_hook(m->part_hook_ctx, backward, part) : MT_OK;
}
/* this rank's attention shapes, for the context-parallel layer (parallel/cp_attention.h) */
static inline mt_cp_shape mt_model_attn_shape(const mt_model *m) {
    const mt_param_layout *pl = &m->pl;
    return (mt_cp_shape){.B = m->al.B, .T = m->al.T, .H = pl->H_r, .KV = pl->KV_r, .D = pl->D,
                         .qkv_rows = pl->qkv_rows_r, .scale = m->attn_scale};
}
/* x (n act elements) *= s in place, nothing when s = 1: muP's logit and embedding multipliers */
static inline mt_status mt_model_scale(mt_model *m, void *x, size_t n, float s) {
    if (s == 1.0f) return MT_OK;
    mt_scale_args a = {.x = x, .n = n, .s = s};
    return MT_BE_CALL(m->be, scale, &a);
}
/* RoPE of the local rows (B sequences of the cp layer's chunks) at their global positions. */
static inline mt_status mt_model_rope(mt_model *m, void *x, int inverse) {
    const mt_cp_shape s = mt_model_attn_shape(m);
    const mt_layer_spec *sp = &m->pl.spec;
    const mt_rope_args how = {.theta = sp->rope_theta, .inverse = inverse, .rot_dim = sp->rope_dim,
                              .interleaved = sp->rope_interleaved, .llama3_factor = sp->llama3_factor,
                              .llama3_low = sp->llama3_low, .llama3_high = sp->llama3_high,
                              .llama3_orig_max = sp->llama3_orig_max, .pos_interp = sp->rope_interp};
    return mt_cp_rope(&m->par.cp, &s, x, &how);
}
/* The attention core's backward, dqkv (=) from dout and the saved out / lse: the ring over the cp
 * group when cp > 1 (dK / dV partials travelling home), else the backend's op. */
static inline mt_status mt_model_attention_bwd(mt_model *m, const mt_acts *A, const void *qkv, const void *out,
                                               const void *lse, const void *dout, void *dqkv) {
    const mt_cp_shape s = mt_model_attn_shape(m);
    return mt_cp_attention_bwd(&m->par.cp, &s, ACT(m, A, cp_kv), ACT(m, A, cp_dkv), ACT(m, A, delta), qkv, out, lse,
                               dout, dqkv);
}

/* The attention core's forward of local layer l, out / lse from qkv: over the KV cache when decoding,
 * the ring over the cp group when cp > 1, else the backend's op (model_fwd.c; backward reruns it
 * under selective recompute). */
mt_status mt_model_attention_fwd(mt_model *m, const mt_acts *A, int l, const void *qkv, void *out, void *lse);
/* Decoding (generate_kv.c): layer l's K / V of the one token in qkv into the cache, out = attention of
 * its queries over the cached positions [0, kv_pos]. */
mt_status mt_model_decode_attention(mt_model *m, int l, const void *qkv, void *out);

/* Local layer l's queries and keys between the qkv projection and the attention core (model_qk.c):
 * the forward transforms them in place in qkv, the backward takes dqkv back through it in place. */
mt_status mt_model_qk_fwd(mt_model *m, const mt_acts *A, int l, void *qkv);
mt_status mt_model_qk_bwd(mt_model *m, const mt_acts *A, int l, void *dqkv);

/* Multi-latent attention (model_mla.c): local layer l's qkv (heads of D, zero-padded) from x1; its
 * backward from dqkv down to norm1, adding into dresid (norm1's backward runs there, once per input
 * projection); the output projection's input (atty's v channels of each head) and the gradient back. */
mt_status mt_mla_qkv_fwd(mt_model *m, const mt_acts *A, int l, const void *x1, void *qkv);
mt_status mt_mla_qkv_bwd(mt_model *m, const mt_acts *A, int l, const void *x1, void *dqkv, void *dresid);
mt_status mt_mla_out(mt_model *m, const mt_acts *A, const void *atty, const void **o);
mt_status mt_mla_out_bwd(mt_model *m, const void *dO, void *datty);

/* one layer's forward, resid[l] -> resid[l+1] (model_fwd.c); backward reruns it under full recompute */
mt_status mt_model_layer_forward(mt_model *m, const mt_acts *A, int l);

#endif
