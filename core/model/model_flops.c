/* model_flops.c — the model's training FLOPs from its layout (pure): Megatron's formula
 * (Narayanan et al. 2021, appendix: 72 B s l h^2 (1 + s/6h + V/12hl) for GPT) generalised to GQA,
 * SwiGLU and MoE (with shared experts) by counting every GEMM's weights. The trainer's MFU / HFU and `mtrain plan`
 * both call it: the per-token pieces (mt_model_fwd_flops_per_token) are the one count; the
 * per-sequence and per-iteration totals, with or without recomputation, are sums of them.
 * Recomputation reruns forward work only, never the output layer's: full reruns each
 * recomputed layer's forward (Narayanan et al. 2021: 96 B s l h^2 (1 + s/6h + V/16lh), the
 * logits still 3 passes); selective reruns the attention core's forward, the QK^T and
 * attention-over-V products (Korthikanti et al. 2022, appendix A: the s^2 terms are the
 * recomputed FLOPs; 4 B s^2 h per layer). */
#include "core/model/model_layout.h"

/* the attention's projection weights one token meets: qkv and proj, or multi-latent attention's
 * down / up projections (Megatron's MLA term of num_floating_point_operations, norms aside) */
static double attn_weights(const mt_param_layout *pl) {
    const mt_layer_spec *s = &pl->spec;
    const double C = pl->C, H = pl->H;
    if (!s->mla) return (double)pl->qkv_rows * C + C * H * pl->D;
    const double dq = s->qk_dim + s->pos_dim;
    const double q = s->q_lora ? s->q_lora * (C + H * dq) : C * H * dq;
    return q + (double)(s->kv_lora + s->pos_dim) * C + (double)s->kv_lora * H * (s->qk_dim + s->v_dim) + C * pl->o_cols;
}

void mt_model_fwd_flops_per_token(const mt_param_layout *pl, int moe_experts, int moe_top_k,
                                  mt_model_fwd_flops *f) {
    const double T = pl->T, C = pl->C;
    /* weights touched per token by matmuls: qkv, proj (attention), fc, fcproj (MLP) */
    const double attn_lin = 2.0 * attn_weights(pl);
    const double mlp_one = 2.0 * ((double)pl->fc_rows * C + C * pl->F);
    /* a MoE layer runs top_k experts' MLPs (of the experts' width Fe), the router (C x E), and the shared
       experts' MLP (width Fs) with its gate (C) */
    const double Fe = pl->Fe > 0 ? pl->Fe : pl->F, efc = pl->efc_rows > 0 ? pl->efc_rows : pl->fc_rows;
    const double shared = moe_experts > 0 && pl->Fs > 0 ?
        2.0 * ((double)pl->fcs_rows * C + C * pl->Fs) + (pl->spec.moe_shared_gate ? 2.0 * C : 0.0) : 0.0;
    const double mlp = moe_experts > 0 ? moe_top_k * 2.0 * (efc * C + C * Fe) + 2.0 * C * moe_experts + shared
                                       : mlp_one;
    /* attention scores (q . k over the query / key head) and weighted sum (over the value head),
       counted over the full T x T square as Megatron does */
    const double dqk = pl->spec.mla ? pl->spec.qk_dim + pl->spec.pos_dim : pl->D;
    const double dv = pl->spec.mla ? pl->spec.v_dim : pl->D;
    f->attn_core = 2.0 * T * pl->H * (dqk + dv);
    f->layer = attn_lin + f->attn_core + mlp;
    f->dense_layer = attn_lin + f->attn_core + mlp_one;
    f->head = 2.0 * C * pl->Vp;
}

double mt_model_recompute_fwd_flops(const mt_model_fwd_flops *f, mt_recompute rc) {
    if (rc == MT_RECOMPUTE_FULL) return f->layer;
    if (rc == MT_RECOMPUTE_SELECTIVE) return f->attn_core;
    return 0.0;
}

double mt_model_flops_per_seq(const mt_param_layout *pl, mt_recompute rc) {
    mt_model_fwd_flops f;
    mt_model_fwd_flops_per_token(pl, pl->moe ? pl->E : 0, pl->moe ? pl->top_k : 1, &f);
    /* the whole model, on any stage: its MoE layers (all of them without dense ones) and its dense layers */
    const double Lm = pl->moe ? pl->n_kind_global[1] : pl->L_global, Ld = pl->L_global - Lm;
    const double layers = Lm * f.layer + Ld * f.dense_layer;
    const double rerun = Lm * mt_model_recompute_fwd_flops(&f, rc) +
                         Ld * (rc == MT_RECOMPUTE_FULL ? f.dense_layer : rc == MT_RECOMPUTE_SELECTIVE ? f.attn_core : 0);
    return pl->T * (3.0 * (layers + f.head) + rerun);
}

void mt_model_flops_per_iter(const mt_param_layout *pl, double n_seqs, double *model_flops, double *hardware_flops) {
    const double f0 = mt_model_flops_per_seq(pl, MT_RECOMPUTE_NONE);
    double hw = f0;
    if (pl->recompute > 0) { /* full: the first pl->recompute of each chunk's Lc layers rerun their forward */
        const double frac = pl->Lc > 0 ? (double)pl->recompute / pl->Lc : 0.0;
        hw = f0 + frac * (mt_model_flops_per_seq(pl, MT_RECOMPUTE_FULL) - f0);
    } else if (pl->recompute_attn) {
        hw = mt_model_flops_per_seq(pl, MT_RECOMPUTE_SELECTIVE);
    }
    if (model_flops) *model_flops = f0 * n_seqs;
    if (hardware_flops) *hardware_flops = hw * n_seqs;
}
