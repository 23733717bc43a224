/* model_fwd.c — GPT / Llama forward of one micro-batch on one rank, written against the
 * backend table and the tensor-parallel layers of parallel/tp.h (which are the plain ops at
 * tp = 1: no collective, no copy).
 * Layer (pre-norm):  x1 = norm1(x); qkv = col(x1, Wqkv) (+b); qk(q, k) (model_qk.c: rope); a = attn(qkv);
 *                    xm = x + row(a, Wproj) (+b); x2 = norm2(xm); h = col(x2, Wfc) (+b);
 *                    g = gelu(h) | swiglu(h) | squared_relu(h); x' = xm + row(g, Wfcproj) (+b)
 * Pipeline stages run a part: layers [l0, l1), the embedding and / or the head.
 * Head: y = normf(x_L); logits = col(y, Wout) (Wout = wte when tied); vocab-parallel xent.
 * muP (core/model/mup.h) multiplies the embedding output and the logits (m->embed_mult, logit_mult).
 * Tensor parallelism: col / row are Megatron's column- and row-parallel linears; attention
 * runs on this rank's H/tp query heads and KV/tp key/value heads (its qkv rows), the MLP on
 * F/tp hidden units, the logits on Vp/tp vocabulary columns. The residual stream x, xm and
 * the norms hold N_r token rows (all N, or 1/tp of them with sequence parallelism). */
#include "train/model_internal.h"

/* over the KV cache when decoding (generate_kv.c); else the ring over the cp group when cp > 1, else
 * the backend's op (parallel/cp_attention.c) */
mt_status mt_model_attention_fwd(mt_model *m, const mt_acts *A, int l, const void *qkv, void *out, void *lse) {
    if (m->kv_cache) return mt_model_decode_attention(m, l, qkv, out);
    const mt_cp_shape s = mt_model_attn_shape(m);
    return mt_cp_attention_fwd(&m->par.cp, &s, ACT(m, A, cp_kv), qkv, out, lse);
}

/* One layer l's forward from resid[l] to resid[l+1]. With full recompute (pl->recompute) every
 * activation but the residual stream lives in one shared slice: backward calls this again from
 * the saved input just before the layer's backward; the same ops on the same inputs give the same
 * bits, so resid[l+1] is rewritten with its own value. With selective recompute
 * (pl->recompute_attn) only the attention core's outputs share one slice (model_bwd.c reruns it). */
mt_status mt_model_layer_forward(mt_model *m, const mt_acts *A, int l) {
    mt_status st = MT_OK;
    mt_tp *tp = &m->par.tp;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int N = m->al.N, Nr = m->al.N_r, C = pl->C;
    const size_t a = mt_dtype_bytes(m->act);
    const size_t NrC = (size_t)Nr * C;
    const mt_layer_acts v = mt_layer_acts_of(m, A, l);
    const int ls = v.ls;
    void *x = v.x, *x1 = v.x1, *qkv = v.qkv, *lse = v.lse, *atty = v.atty, *xm = v.xm, *x2 = v.x2, *h = v.h,
         *g = v.g;
    void *xo = ACT_L(m, A, resid, l + 1, NrC, a);
    void *part = ACT(m, A, dtmp); /* row-parallel outputs before the reduction and residual add */
    void *y = NULL;

    MT_CHECK(mt_model_norm_fwd(m, x1, ACT_L(m, A, ln1_mean, ls, Nr, 4), ACT_L(m, A, ln1_rstd, ls, Nr, 4), x,
                               P(m, ix->ln1_w, l), P(m, ix->ln1_b, l), Nr));
    const void *o = atty; /* the output projection's input */
    if (pl->spec.mla) { /* multi-latent attention (model_mla.c) */
        MT_CHECK(mt_mla_qkv_fwd(m, A, l, x1, qkv));
        MT_CHECK(mt_model_attention_fwd(m, A, l, qkv, atty, lse));
        MT_CHECK(mt_mla_out(m, A, atty, &o));
    } else {
        MT_CHECK(mt_tp_column_fwd(tp, qkv, x1, P(m, ix->qkv_w, l), P(m, ix->qkv_b, l), pl->qkv_rows_r, C));
        MT_CHECK(mt_model_qk_fwd(m, A, l, qkv)); /* RoPE (and whatever else the spec puts there) */
        MT_CHECK(mt_model_attention_fwd(m, A, l, qkv, atty, lse));
    }
    MT_CHECK(mt_tp_row_fwd(tp, part, &y, o, P(m, ix->proj_w, l), P(m, ix->proj_b, l), C, pl->o_cols_r));
    /* xm = x + y and x2 = norm2(xm) in one op (fused residual add + norm) */
    MT_CHECK(mt_model_add_norm_fwd(m, xm, x2, ACT_L(m, A, ln2_mean, ls, Nr, 4), ACT_L(m, A, ln2_rstd, ls, Nr, 4), x, y,
                                   P(m, ix->ln2_w, l), P(m, ix->ln2_b, l), Nr));
    if (mt_param_layer_is_moe(pl, l)) { /* the MLP is a mixture of experts (model_moe.c) */
        MT_CHECK(mt_moe_forward(m, A, l, x2, xm, xo));
        goto out;
    }
    const int ds = mt_param_layer_slot(pl, l); /* the layer's slice of the dense MLP's stacks */
    if (m->pl.spec.mlp != MT_MLP_GELU) { /* h = x2 Wfc^T + b, then the activation (model_internal.h) */
        MT_CHECK(mt_tp_column_fwd(tp, h, x2, P(m, ix->fc_w, ds), P(m, ix->fc_b, ds), pl->fc_rows_r, C));
        MT_CHECK(mt_model_mlp_act_fwd(m, g, h, N, pl->F_r));
    } else { /* h = x2 Wfc^T + b, g = gelu(h): one op (bias + GeLU in the GEMM's epilogue) */
        MT_CHECK(mt_tp_column_gelu_fwd(tp, g, h, x2, P(m, ix->fc_w, ds), P(m, ix->fc_b, ds), pl->fc_rows_r, C));
    }
    MT_CHECK(mt_tp_row_fwd(tp, part, &y, g, P(m, ix->fcproj_w, ds), P(m, ix->fcproj_b, ds), C, pl->F_r));
    mt_add_args ad2 = {.out = xo, .a = xm, .b = y, .n = NrC};
    MT_CHECK(MT_BE_CALL(m->be, add, &ad2));
out:
    return st;
}

mt_status mt_model_forward(mt_model *m, const mt_acts *A, mt_model_part part) {
    mt_status st = MT_OK;
    mt_tp *tp = &m->par.tp;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int B = m->al.B, T = m->al.T, Nr = m->al.N_r, C = pl->C;
    const size_t a = mt_dtype_bytes(m->act);
    const size_t NrC = (size_t)Nr * C;
    const int32_t *tokens = (const int32_t *)ACT(m, A, tokens);

    if (part.embed) {
        MT_CHECK(mt_model_part_hook(m, 0, MT_MODEL_PART_EMBED));
        MT_CHECK(mt_tp_embedding_fwd(tp, ACT_L(m, A, resid, part.l0, NrC, a), tokens, P(m, ix->wte, 0),
                                     P(m, ix->wpe, 0), B, T, tp->rank * pl->Vp_r, pl->Vp_r));
        MT_CHECK(mt_model_scale(m, ACT_L(m, A, resid, part.l0, NrC, a), NrC, m->embed_mult)); /* muP */
    }

    for (int l = part.l0; l < part.l1; l++) {
        MT_CHECK(mt_model_part_hook(m, 0, l));
        MT_CHECK(mt_model_layer_forward(m, A, l));
    }

    if (!part.head) goto out;
    MT_CHECK(mt_model_part_hook(m, 0, MT_MODEL_PART_HEAD));
    MT_CHECK(mt_model_norm_fwd(m, ACT(m, A, lnf), ACT(m, A, lnf_mean), ACT(m, A, lnf_rstd),
                               ACT_L(m, A, resid, part.l1, NrC, a), P(m, ix->lnf_w, 0), P(m, ix->lnf_b, 0), Nr));
    const int wout = m->tied ? ix->wte : ix->lm_head;
    MT_CHECK(mt_tp_column_fwd(tp, ACT(m, A, logits), ACT(m, A, lnf), P(m, wout, 0), NULL, pl->Vp_r, C));
    MT_CHECK(mt_model_scale(m, ACT(m, A, logits), (size_t)m->al.N * pl->Vp_r, m->logit_mult)); /* muP */
out:
    return st;
}
