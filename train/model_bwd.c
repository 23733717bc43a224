/* model_bwd.c — GPT / Llama backward of one micro-batch on one rank (the reverse of
 * model_fwd.c), starting from the logits gradient the cross-entropy left in place.
 * One residual-gradient buffer (dresid, N_r rows) that the norm backwards add into. Each
 * tensor-parallel layer applies the dual of its forward collective: a column-parallel layer
 * reduces its input gradient (allreduce, or reduce-scatter under SP) before the norm
 * backward; a row-parallel layer gathers its output gradient (SP) before its GEMMs.
 * Pipeline stages run a part: layers [l0, l1), from the head's dlogits or from a gradient
 * received into dresid, down to the embedding or to dresid (sent to the previous stage).
 * Rules (backend.h): weight gradients +=, activation gradients =. */
#include "train/model_internal.h"

/* the attention half of an MLA layer: dresid holds dL/dxm; the output projection (from the compact
 * output when v < D), the attention core, then model_mla.c down to norm1 */
static mt_status mla_backward(mt_model *m, const mt_acts *A, int l, const mt_layer_acts *v, void *dresid) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const void *o = NULL;
    void *datty = ACT(m, A, datty), *dO = pl->spec.v_dim == pl->D ? datty : ACT(m, A, mla_q);
    MT_CHECK(mt_mla_out(m, A, v->atty, &o));
    MT_CHECK(mt_tp_row_bwd(&m->par.tp, dO, G(m, ix->proj_w, l), G(m, ix->proj_b, l), dresid, o, P(m, ix->proj_w, l),
                           pl->C, pl->o_cols_r));
    if (dO != datty) MT_CHECK(mt_mla_out_bwd(m, dO, datty));
    MT_CHECK(mt_model_attention_bwd(m, A, v->qkv, v->atty, v->lse, datty, ACT(m, A, dqkv)));
    MT_CHECK(mt_mla_qkv_bwd(m, A, l, v->x1, ACT(m, A, dqkv), dresid));
out:
    return st;
}

mt_status mt_model_backward(mt_model *m, const mt_acts *A, mt_model_part part) {
    mt_status st = MT_OK;
    const int l0 = part.l0, l1 = part.l1, embed = part.embed, head = part.head;
    mt_tp *tp = &m->par.tp;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int B = m->al.B, T = m->al.T, N = m->al.N, Nr = m->al.N_r, C = pl->C;
    const size_t a = mt_dtype_bytes(m->act);
    const size_t NrC = (size_t)Nr * C;
    void *dresid = ACT(m, A, dresid), *dln = ACT(m, A, dln), *dx = NULL;

    if (head) {
        const int wout = m->tied ? ix->wte : ix->lm_head;
        MT_CHECK(mt_model_scale(m, ACT(m, A, logits), (size_t)N * pl->Vp_r, m->logit_mult)); /* muP's multiplier */
        MT_CHECK(mt_tp_column_bwd(tp, dln, &dx, G(m, wout, 0), NULL, ACT(m, A, logits), ACT(m, A, lnf), P(m, wout, 0),
                                  pl->Vp_r, C));
        MT_CHECK(m->be->i->memset_zero(m->be, dresid, NrC * a));
        MT_CHECK(mt_model_norm_bwd(m, dresid, G(m, ix->lnf_w, 0), G(m, ix->lnf_b, 0), dx,
                                   ACT_L(m, A, resid, l1, NrC, a), P(m, ix->lnf_w, 0), ACT(m, A, lnf_mean),
                                   ACT(m, A, lnf_rstd), Nr));
        MT_CHECK(mt_model_part_hook(m, 1, MT_MODEL_PART_HEAD));
    } /* else dresid holds dL/dx of resid[l1] (received from the next pipeline stage) */

    for (int l = l1 - 1; l >= l0; l--) {
        /* full recompute: rerun the layer's forward from its saved input into the shared slice */
        if (l - A->l0 < pl->recompute) {
            m->recomputing = 1;
            st = mt_model_layer_forward(m, A, l);
            m->recomputing = 0;
            if (st != MT_OK) goto out;
        }
        const mt_layer_acts v = mt_layer_acts_of(m, A, l);
        const int ls = v.ls;
        void *x = v.x, *x1 = v.x1, *qkv = v.qkv, *lse = v.lse, *atty = v.atty, *xm = v.xm, *x2 = v.x2, *h = v.h,
             *g = v.g;

        /* MLP: dresid holds dL/dx' */
        if (mt_param_layer_is_moe(pl, l)) { /* mixture of experts (model_moe.c): dx = dL/dx2 */
            MT_CHECK(mt_moe_backward(m, A, l, x2, &dx));
            goto mlp_done;
        }
        const int ds = mt_param_layer_slot(pl, l); /* the layer's slice of the dense MLP's stacks */
        if (m->pl.spec.mlp != MT_MLP_GELU) { /* dg = dresid Wfcproj, then back through the activation: SwiGLU
                                                  from its own dg buffer, squared ReLU in place in dfch */
            void *dg = m->pl.spec.mlp == MT_MLP_SWIGLU ? ACT(m, A, dfch_act) : ACT(m, A, dfch);
            MT_CHECK(mt_tp_row_bwd(tp, dg, G(m, ix->fcproj_w, ds), G(m, ix->fcproj_b, ds), dresid, g,
                                   P(m, ix->fcproj_w, ds), C, pl->F_r));
            MT_CHECK(mt_model_mlp_act_bwd(m, ACT(m, A, dfch), dg, h, N, pl->F_r));
        } else { /* dfch = (dresid Wfcproj) * gelu'(h): one op (dGeLU in the dinp GEMM's epilogue) */
            MT_CHECK(mt_tp_row_dgelu_bwd(tp, ACT(m, A, dfch), G(m, ix->fcproj_w, ds),
                                         G(m, ix->fcproj_b, ds), dresid, g, h, P(m, ix->fcproj_w, ds), C, pl->F_r));
        }
        MT_CHECK(mt_tp_column_bwd(tp, dln, &dx, G(m, ix->fc_w, ds), G(m, ix->fc_b, ds), ACT(m, A, dfch), x2,
                                  P(m, ix->fc_w, ds), pl->fc_rows_r, C));
    mlp_done:
        MT_CHECK(mt_model_norm_bwd(m, dresid, G(m, ix->ln2_w, l), G(m, ix->ln2_b, l), dx, xm, P(m, ix->ln2_w, l),
                                   ACT_L(m, A, ln2_mean, ls, Nr, 4), ACT_L(m, A, ln2_rstd, ls, Nr, 4), Nr));
        /* attention: dresid holds dL/dxm. Selective recompute: rerun the attention core from the
           saved qkv (after RoPE) into the shared slice: the same op on the same input, the same bits */
        if (pl->recompute_attn) MT_CHECK(mt_model_attention_fwd(m, A, l, qkv, atty, lse));
        if (pl->spec.mla) { /* multi-latent attention (model_mla.c) */
            MT_CHECK(mla_backward(m, A, l, &v, dresid));
            MT_CHECK(mt_model_part_hook(m, 1, l));
            continue;
        }
        MT_CHECK(mt_tp_row_bwd(tp, ACT(m, A, datty), G(m, ix->proj_w, l), G(m, ix->proj_b, l), dresid, atty,
                               P(m, ix->proj_w, l), C, pl->o_cols_r));
        MT_CHECK(mt_model_attention_bwd(m, A, qkv, atty, lse, ACT(m, A, datty), ACT(m, A, dqkv)));
        MT_CHECK(mt_model_qk_bwd(m, A, l, ACT(m, A, dqkv)));
        MT_CHECK(mt_tp_column_bwd(tp, dln, &dx, G(m, ix->qkv_w, l), G(m, ix->qkv_b, l), ACT(m, A, dqkv), x1,
                                  P(m, ix->qkv_w, l), pl->qkv_rows_r, C));
        MT_CHECK(mt_model_norm_bwd(m, dresid, G(m, ix->ln1_w, l), G(m, ix->ln1_b, l), dx, x, P(m, ix->ln1_w, l),
                                   ACT_L(m, A, ln1_mean, ls, Nr, 4), ACT_L(m, A, ln1_rstd, ls, Nr, 4), Nr));
        MT_CHECK(mt_model_part_hook(m, 1, l));
    }

    if (embed) {
        MT_CHECK(mt_model_scale(m, dresid, NrC, m->embed_mult)); /* muP's multiplier */
        MT_CHECK(mt_tp_embedding_bwd(tp, G(m, ix->wte, 0), G(m, ix->wpe, 0), dresid, (const int32_t *)ACT(m, A, tokens), B,
                                 T, tp->rank * pl->Vp_r, pl->Vp_r));
        MT_CHECK(mt_model_part_hook(m, 1, MT_MODEL_PART_EMBED));
    }
out:
    return st;
}
