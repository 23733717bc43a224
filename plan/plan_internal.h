/* plan_internal.h — what the planner's steps share between plan_model.c (counts, FLOPs, memory,
 * communication volumes) and plan_cost.c (the cost model: time per step): the model's dimensions
 * and the context of one mt_plan_compute. Not for use outside plan/. */
#ifndef MT_PLAN_INTERNAL_H
#define MT_PLAN_INTERNAL_H

#include "core/model/model_layout.h"
#include "plan/plan.h"

/* Model dimensions as doubles, read off the full-model layout (mt_param_layout_build: the
 * vocabulary padded for the recipe's tp); the MoE sizes from the recipe (fc_rows / F are one
 * expert's: model.moe.ffn_hidden). Mixed dense and MoE layers (model.moe.layer_freq / layer_pattern):
 * moe_frac of the layers are MoE layers, the others dense MLPs of Fd (fcd_rows); the activation
 * memory weighs the two kinds by it, the time model (plan_cost.c) times every layer as a MoE layer. */
typedef struct {
    double L, C, H, KV, D, F, V, Vp, T, max_pos, qkv_rows, fc_rows, E, K;
    double Fd, fcd_rows, moe_frac; /* the dense MLP's width and rows; the MoE layers' share (1: all, 0: dense) */
    double moe_cap, ep; /* MoE: capacity per expert per sequence (0: none), expert-parallel size */
    double Fs, fcs_rows; /* MoE shared experts: their width and fc rows (0: none) */
    int sgate;          /* ... and their sigmoid gate */
    int ln, bias, tied, learned, moe;
    mt_model_fwd_flops fwd; /* forward FLOPs per token (mt_model_fwd_flops_per_token) */
} dims;

/* What the steps of mt_plan_compute share: the inputs, the model's dimensions and the layout's
 * derived sizes. */
typedef struct {
    const mt_recipe *r;
    const mt_gpu_spec *gpu;
    const mt_plan_opts *o;
    mt_param_layout pl;      /* the full model's layout (mt_param_layout_build) */
    mt_param_layout pl0;     /* the first stage's (its model chunks and recompute counts: the FLOPs') */
    dims d;
    int t, pp, v, cp, dp, ep, m, bf16, megatron_acts, full;
    int rc_layers;           /* full recompute: layers of each model chunk that rerun their forward */
    double rc_frac;          /* rc_layers / layers per chunk (0 unless full) */
    double b;                /* micro-batch */
    double pbytes, obytes, abytes; /* bytes per parameter, optimizer state per parameter, activation element */
    double act_layer_none, act_layer_rc, act_layer; /* one layer, one micro-batch, this rank */
    double act_layer_none_rerun; /* the trainer's slice of the rerun layers under full recompute (both MLP kinds
                                    in a mixed model; else act_layer_none) */
    double s_loc, N, spdiv;  /* local sequence (T / cp), tokens per micro-batch on a rank, the sp divisor */
    double A;                /* one micro-batch's hidden states on this rank's sequence, bytes */
    double Ls;               /* layers per stage (uneven stages: the most any stage holds) */
    int uneven;              /* uneven pipeline stages (mt_recipe_uneven_stages) */
    double L_first, L_mid, L_last; /* layers of the first, a middle and the last stage (all Ls when even) */
    mt_gpu_spec shared_host; /* a probed host's rates blended for ranks computing at once (cost model) */
} plan_ctx;

/* Elements per dp gradient bucket: parallel.ddp_bucket_size, auto Megatron-Core's max(40M, 1M x the
 * reduce group's size) (param_and_grad_buffer.py; the trainer's too, parallel/grad_overlap.h). */
static inline double mt_plan_dp_bucket_elems(const mt_recipe *r) {
    const double dd = (double)r->parallel.data * r->parallel.context;
    return r->parallel.ddp_bucket_size > 0 ? (double)r->parallel.ddp_bucket_size : (dd > 40.0 ? 1e6 * dd : 40e6);
}
/* 1 when a group of `size` ranks `stride` apart spans nodes (plan_cost.c). */
int mt_plan_spans_nodes(const mt_gpu_spec *g, long stride, long size);
/* The cost model's terms of p (plan_cost.c; docs/plan.md, "Step time"): needs p's layout, FLOPs,
 * memory and communication volumes filled in. */
void mt_plan_cost_model(plan_ctx *x, mt_plan *p);

#endif
