/* plan_model.c — the numbers of one layout: parameter counts (total, active, per rank),
 * FLOPs, memory per rank, pipeline bubble, communication per group, and mt_plan_compute, which
 * runs them and the cost model (plan_cost.c) as named steps.
 * Rules: pure functions of (recipe, device, options); every formula is in docs/plan.md with
 * its source. Shapes, the padded vocabulary, the per-rank parameter tensors and the FLOPs come
 * from the trainer's own layout functions (core/model/model_layout.h: mt_param_layout_build,
 * mt_param_layout_build_stage, mt_model_fwd_flops_per_token; the vocabulary padding is
 * mt_recipe_padded_vocab's), so the weight, gradient and optimizer bytes equal what the
 * trainer allocates; the planner adds only what the trainer does not model (MoE experts,
 * bf16 mixed precision, recompute, pipeline schedules, communication). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/model_layout.h"
#include "plan/plan.h"
#include "plan/plan_internal.h"
#include "plan/schedule_timeline.h"

void mt_plan_opts_defaults(mt_plan_opts *o) {
    memset(o, 0, sizeof *o); /* every switch of the modelled software off: mtrain's own */
    o->mfu = 0.40;
    o->tflops = 0.0;
    o->step_ms = 0.0;
    o->gemm_eff = 0.0; /* 0 = the shape model (mt_plan_gemm_time at the sustained rate, docs/plan.md); X = the
                        * fixed factor X (the old model) */
    o->link_eff = 0.80;
    o->usable_frac = 0.90;
    o->megatron_activations = 0;
    o->unfused_attention = 0;
    o->dropout = 0.0;
    o->grad_reduce_bytes = 0.0;
    o->grad_accum_bytes = 0.0;
    o->bias_add_pass = o->bias_grad_pass = o->attn_copies = o->norm_bwd_unfused = o->nograd_fwd_unfused = 0;
    o->xent_logit_bytes = 0.0;
    o->opt_param_bytes = 0.0;
    o->grad_copy_bytes = 0.0;
}

static mt_status get_dims(const mt_recipe *r, mt_param_layout *pl, dims *d) {
    const mt_model_cfg *m = &r->model;
    memset(d, 0, sizeof *d);
    mt_status st = mt_param_layout_build(r, pl);
    if (st != MT_OK) return st;
    d->L = pl->L_global;
    d->C = pl->C;
    d->H = pl->H;
    d->KV = pl->KV;
    d->D = pl->D;
    d->F = pl->F;
    d->V = pl->V;
    d->Vp = pl->Vp;
    d->T = pl->T;
    d->max_pos = pl->max_pos;
    d->qkv_rows = pl->qkv_rows;
    d->fc_rows = pl->fc_rows;
    d->moe = m->moe.experts > 0;
    d->Fd = pl->F;
    d->fcd_rows = pl->fc_rows;
    d->moe_frac = d->moe ? (double)pl->n_kind_global[1] / pl->L_global : 0.0;
    if (d->moe) { /* F / fc_rows: one expert's */
        d->F = pl->Fe;
        d->fc_rows = pl->efc_rows;
    }
    d->E = d->moe ? m->moe.experts : 0;
    d->K = d->moe ? m->moe.top_k : 1;
    d->moe_cap = d->moe ? pl->moe_cap : 0;
    d->ep = d->moe && r->parallel.expert > 1 ? r->parallel.expert : 1;
    d->Fs = pl->Fs;
    d->fcs_rows = pl->fcs_rows;
    d->sgate = pl->spec.moe_shared_gate;
    d->ln = pl->idx.ln1_b >= 0;
    d->bias = pl->idx.qkv_b >= 0;
    d->tied = pl->idx.lm_head < 0;
    d->learned = pl->idx.wpe >= 0;
    mt_model_fwd_flops_per_token(pl, d->moe ? m->moe.experts : 0, d->moe ? m->moe.top_k : 1, &d->fwd);
    return MT_OK;
}

/* ---------- parameters ---------- */

typedef struct {
    double n_params, n_elems, n_expert_elems, n_expert, n_embed;
} pcount;

static void put(pcount *c, double n, int expert, int embed) {
    if (n <= 0) return;
    const double a = ceil(n / MT_PARAM_ALIGN) * MT_PARAM_ALIGN; /* model_layout.c: align_up per tensor */
    c->n_params += n;
    c->n_elems += a;
    if (expert) {
        c->n_expert_elems += a;
        c->n_expert += n;
    }
    if (embed) c->n_embed += n;
}

/* The parameters of one layout's tensors (a stage's, one tp rank's: Megatron's sharding, as
 * mt_param_layout_build_stage lays it out), each rounded up to MT_PARAM_ALIGN as the trainer
 * allocates them. full: the unsharded shapes instead of this rank's (MoE: all E experts, not this
 * ep rank's E / ep); unpadded: the vocabulary tensors with model.vocab rows (the published parameter
 * counts), not the padded ones. MoE expert tensors (experts_r > 0) count as experts, the router as
 * a replicated dense tensor: both straight from the layout. */
static void layout_params(const mt_param_layout *pl, const dims *d, int ep, int full, int unpadded, pcount *c) {
    const mt_param_index *ix = &pl->idx;
    (void)d;
    (void)ep;
    memset(c, 0, sizeof *c);
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        const mt_param_tensor *t = &pl->t[ti];
        const int vocab = ti == ix->wte || ti == ix->lm_head;
        double rows = full ? t->full_rows : t->rows;
        if (vocab && unpadded) rows = rows / pl->Vp * pl->V; /* rows: Vp (or Vp / tp) */
        double layers = t->n_layers;
        if (full && t->experts_r) layers = (double)t->n_layers / t->experts_r * pl->E;
        const double n = layers * rows * (full ? t->full_cols : t->cols);
        const int embed = (ti == ix->wte && !t->pp_copy) || ti == ix->wpe || ti == ix->lm_head;
        put(c, n, t->experts_r > 0, embed);
    }
}

mt_status mt_plan_count_params(const mt_recipe *r, mt_plan_params *out) {
    mt_param_layout pl;
    dims d;
    pcount c;
    memset(out, 0, sizeof *out);
    mt_status st = get_dims(r, &pl, &d);
    if (st != MT_OK) return st;
    layout_params(&pl, &d, 1, 1, 1, &c);
    out->n_params = c.n_params;
    out->n_embed = c.n_embed;
    out->n_expert = c.n_expert;
    out->n_active = d.moe ? c.n_params - c.n_expert + c.n_expert * d.K / d.E : c.n_params;
    return MT_OK;
}

/* ---------- FLOPs ---------- */

/* The model's own count (core/model/model_flops.c): 3 passes, plus the forward work that recompute
 * rc of every layer reruns (never the output layer's). */
double mt_plan_flops_per_seq(const mt_recipe *r, mt_recompute rc) {
    mt_param_layout pl;
    if (mt_param_layout_build(r, &pl) != MT_OK) return 0.0;
    return mt_model_flops_per_seq(&pl, rc);
}

/* ---------- activations ---------- */

/* Bytes one micro-batch leaves for the backward pass in one transformer layer on one rank,
 * bf16 mixed precision: Korthikanti et al. 2022, eq. (1)-(2) and Table 2, generalised.
 * Per token: replicated across tp = 2h (qkv input) + 4h (two norm inputs) + 2h (MLP input)
 * + 2h (two 1-byte dropout masks) [+ 2kh permuted tokens for MoE]; split by tp = 2h (Q) +
 * 4 kv_dim (K, V) + 2h (projection input) + k (2 fc_rows + 2F) (activation and fc2 inputs);
 * attention: 5 a s_k bytes (softmax 2, its dropout mask 1, dropout output 2), split by tp.
 * GPT (4h MLP, kv = h): 10h + 24h/t + 5as/t  -> s b h (10 + 24/t + 5as/(ht)).
 * sp: everything / t -> s b h (34 + 5as/h) / t. Selective drops the 5as term. Full keeps the
 * layer input only: 2 s b h (/ t with sp). s = T / cp (context parallelism splits queries).
 * fused: a fused (flash) attention kernel, as Megatron-Core runs with Transformer Engine, keeps no
 * scores: the 5as term becomes the kernel's fp32 logsumexp, 4 a bytes per token (/ t). Without dropout
 * (dropout 0, Llama's) no masks: PyTorch's dropout returns its input unchanged at p = 0
 * (aten/src/ATen/native/Dropout.cpp, _dropout_impl), so the replicated part is 8h.
 * fp8 (Transformer Engine, the default recipe): a linear layer keeps its input for the weight gradient as
 * the fp8 copy it cast for the forward GEMM, 1 byte instead of 2 (transformer_engine/pytorch/module/
 * linear.py: `saved_inputmat_t = inputmat_t` when fp8 and not override_linear_precision.wgrad; the
 * LayerNorm-fused modules keep their fp8 ln_out the same way): the QKV input, the MLP input and the fc2
 * input (F per token) halve; the projection's input is the attention output, which the fused attention
 * keeps in bf16 for its own backward, so the projection's fp8 copy (h) comes on top. */
static double act_layer_bf16(const dims *d, double b, int t, int sp, int cp, mt_recompute rc, int fused,
                             double dropout, int fp8) {
    const double s = d->T / cp, sk = d->T, h = d->C;
    if (rc == MT_RECOMPUTE_FULL) return 2.0 * s * b * h / (sp ? t : 1);
    /* a MoE layer's MLP terms (its routed copies) and a dense one's, weighed by the layers' kinds */
    const double fm = d->moe ? d->moe_frac : 0.0, fd = 1.0 - fm;
    double rep = (dropout > 0 ? 10.0 : 8.0) * h + fm * 2.0 * d->K * h - (fp8 ? 2.0 * h : 0.0);
    double split = 2.0 * h + 4.0 * d->KV * d->D + 2.0 * h + fm * d->K * (2.0 * d->fc_rows + 2.0 * d->F) +
                   fd * (2.0 * d->fcd_rows + 2.0 * d->Fd) + (fp8 ? h - fm * d->K * d->F - fd * d->Fd : 0.0);
    /* MoE shared experts (in the MoE layers): their fc output and activation (split over tp; their input is the
       router's), with the gate the reduced output it scales (a sequence-parallel tensor) */
    split += fm * 2.0 * (d->fcs_rows + d->Fs);
    rep += d->sgate ? fm * 2.0 * h : 0.0;
    double per_token = sp ? (rep + split) / t : rep + split / t;
    double score = fused ? 4.0 * d->H / t : rc == MT_RECOMPUTE_SELECTIVE ? 0.0 : 5.0 * d->H * sk / t;
    return s * b * (per_token + score);
}

/* The same for the trainer's own layout (core/model/model_layout.c, mt_act_layout_build), fp32:
 * resid, ln1, qkv, atty, resid_mid, ln2, fch, fch_act, 4 norm statistics per token, and the
 * flash attention's (B, H, T) f32 logsumexp (no T x T probabilities are kept). Selective keeps
 * the attention core's output (atty) and logsumexp in one shared slice (counted once per rank
 * below), so a layer drops both; full keeps the residual input only. */
/* MoE rows of one micro-batch on one rank (core/model/model_layout.c): S = routed copies this rank
 * sends (N k, or at most E x capacity rows), R = expert rows it computes (what ep sources can send
 * its E/ep experts: at most ep S). */
static void moe_rows(const dims *d, double b, double N, double *S, double *R) {
    const double Er = d->E / d->ep;
    double s_rows = N * d->K, per_src = N;
    if (d->moe_cap > 0) {
        per_src = b * d->moe_cap;
        if (d->E * per_src < s_rows) s_rows = d->E * per_src;
    }
    *S = s_rows;
    *R = fmin(d->ep * Er * per_src, d->ep * s_rows);
}

/* wm, wd: the weights of the MoE and the dense MLP's arrays (a layer's on average: the kinds' shares) */
static double act_layer_trainer_w(const dims *d, double b, int t, int sp, int cp, mt_recompute rc, double a,
                                  double wm, double wd) {
    const double s = d->T / cp, N = b * s, C = d->C;
    if (rc == MT_RECOMPUTE_FULL) return a * N * C / (sp ? t : 1);
    double rep = 4.0 * C; /* resid, ln1, resid_mid, ln2 */
    const int sel = rc == MT_RECOMPUTE_SELECTIVE;
    const double fm = d->moe ? wm : 0.0; /* the MoE arrays' weight; the dense MLP's fch, fch_act wd */
    double split = d->qkv_rows + (sel ? 0.0 : d->H * d->D) + (d->moe ? wd : 1.0) * (d->fcd_rows + d->Fd);
    /* + the two norms' fp32 mean and rstd (on 1/t of the tokens with sp) */
    double per_token = sp ? (a * (rep + split) + 16.0) / t : a * (rep + split / t) + 16.0;
    double lse = sel ? 0.0 : 4.0 * d->H / t;
    double bytes = N * (per_token + lse);
    if (d->moe) { /* the router's logits (a) and fp32 probabilities (E each) and 3 words per assignment per
                     token; per expert row the input and the two MLP activations, per sent copy its output,
                     and the per-expert counts (2E + ep E/ep words) */
        double S, R;
        moe_rows(d, b, N, &S, &R);
        bytes += fm * (N * ((a + 4.0) * d->E + 12.0 * d->K) + a * (R * (C + (d->fc_rows + d->F) / t) + S * C) +
                       4.0 * (2.0 * d->E + d->E));
        /* shared experts: fc output and activation on 1/t of the units; with the gate its input (the
           tp-partial output) and the fp32 gate values */
        bytes += fm * N * (a * (d->fcs_rows + d->Fs) / t + (d->sgate ? a * C + 4.0 : 0.0));
    }
    return bytes;
}
static double act_layer_trainer(const dims *d, double b, int t, int sp, int cp, mt_recompute rc, double a) {
    const double fm = d->moe ? d->moe_frac : 0.0;
    return act_layer_trainer_w(d, b, t, sp, cp, rc, a, fm, 1.0 - fm);
}

/* Bytes of one trainer activation buffer beyond its layers (mt_act_layout_build; a = bytes of an
 * activation: 4 on the CPU backend, 2 in bf16 on CUDA; statistics, losses and indices are 4): tokens,
 * targets and losses, the chunk's output residual, two scalars; on the stage with the head the final
 * norm (+ statistics), the logits and, with tp, the vocab-parallel cross-entropy's 3 statistics; one
 * layer's backward scratch (dresid, dln, dtmp, dqkv, datty, the attention's delta, and for a dense MLP
 * dfch and SwiGLU's dfch_act: GeLU's dGeLU runs in the GEMM's epilogue, or in place); with cp the K/V
 * ring (2 blocks) and dK/dV ring (3 blocks); with sp the gathered and sliced sequence; MoE's
 * per-micro-batch send/receive/expert rows and their gradients. Every in-flight micro-batch of a
 * pipeline stage has its own buffer. */
static double act_slot_trainer(const dims *d, double b, int t, int sp, int cp, int head, double a) {
    const double s = d->T / cp, N = b * s, C = d->C, Nr = sp ? N / t : N;
    double e = 12.0 * N + a * Nr * C + 8.0; /* tokens, targets, losses; resid; scalars */
    if (head) e += a * Nr * C + 8.0 * Nr + a * N * d->Vp / t + (t > 1 ? 12.0 * N : 0.0);
    e += a * (Nr * C + 2.0 * N * C + N * (d->qkv_rows + d->H * d->D) / t) + 4.0 * b * (d->H / t) * s;
    if (!d->moe || d->moe_frac < 1.0) e += a * N * (d->fcd_rows + (d->fcd_rows != d->Fd ? d->Fd : 0)) / t;
    if (cp > 1) e += a * 5.0 * N * 2.0 * (d->KV / t) * d->D;
    if (sp) e += a * (N * C + Nr * C);
    if (d->moe) {
        double S, R;
        moe_rows(d, b, N, &S, &R);
        e += a * (S * C + (d->ep > 1 ? R * C : 0.0) + R * C + R * (d->fc_rows + d->F) / t + N * d->E) +
             4.0 * (N * d->K + MT_MOE_STATS + 2.0 * d->E);
        /* shared experts: their output without the gate (one layer's), the gradients of their fc output and
           activation, the gate logits' fp32 gradient */
        if (d->Fs > 0) e += a * ((d->sgate ? 0.0 : N * C) + N * (d->fcs_rows + d->Fs) / t) + (d->sgate ? 4.0 * N : 0.0);
    }
    return e;
}

/* (layer, micro-batch) activation sets alive on stage k at the schedule's peak.
 * 1F1B (Narayanan et al. 2021): stage k runs p-k-1 warm-up forwards, so p-k micro-batches of
 * L/p layers are in flight (at most m). Interleaved (Megatron-Core
 * get_forward_backward_func, interleaved warm-up): (p-k-1)*2 + (v-1)*p + 1 chunk micro-batches
 * of L/(p v) layers (at most m v); for k = 0 that is L (1 + (p-1)/(p v)), Korthikanti's
 * interleaving penalty. */
static double layer_mbs_in_flight(int L, int p, int v, int m, int k) {
    if (p <= 1) return L;
    if (v <= 1) {
        double n = p - k;
        if (n > m) n = m;
        return n * ((double)L / p);
    }
    double n = (double)(p - k - 1) * 2 + (double)(v - 1) * p + 1;
    if (n > (double)m * v) n = (double)m * v;
    return n * ((double)L / ((double)p * v));
}

/* ---------- pipeline ---------- */

double mt_plan_bubble_fraction(int p, int m, int v) {
    if (p <= 1 || m <= 0) return 0.0;
    if (v < 1) v = 1;
    return (double)(p - 1) / ((double)v * m + p - 1);
}

double mt_plan_speedup(int p, int m, int v) {
    if (p <= 1 || m <= 0) return 1.0;
    if (v < 1) v = 1;
    return p / (1.0 + (double)(p - 1) / ((double)v * m));
}

double mt_plan_days_ctp(double c, double tokens, double n_params, int n_gpus, double flops_per_gpu) {
    if (n_gpus <= 0 || flops_per_gpu <= 0) return 0.0;
    return c * tokens * n_params / (n_gpus * flops_per_gpu) / 86400.0;
}

/* ---------- checks ---------- */

static void note(char *buf, size_t n_bytes, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *buf, size_t n_bytes, const char *fmt, ...) {
    size_t used = strlen(buf);
    if (used + 2 >= n_bytes) return;
    if (used) buf[used++] = '\n', buf[used] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, n_bytes - used, fmt, ap);
    va_end(ap);
}

mt_status mt_plan_check(const mt_recipe *r, int n_gpus, const mt_gpu_spec *gpu) {
    char msg[2048] = "";
    const int tp = r->parallel.tensor, pp = r->parallel.pipeline, v = r->parallel.virtual_pipeline;
    const int m = mt_recipe_micro_batches(r);
    if (!gpu->is_host) {
        const int node = gpu->gpus_per_node;
        if (n_gpus > node && n_gpus % node)
            note(msg, sizeof msg, "--gpus: %d GPUs are not whole nodes of %d %s; use a multiple of %d", n_gpus, node,
                 gpu->name, node);
        if (tp > node)
            note(msg, sizeof msg, "parallel.tensor: tp = %d spans nodes of %d GPUs; tensor parallelism needs "
                 "NVLink: use tp <= %d and raise parallel.pipeline instead", tp, node, node);
    }
    if (v > 1 && pp > 1 && r->parallel.data > 0 && r->training.global_batch > 0 && m % pp)
        note(msg, sizeof msg, "parallel.virtual_pipeline: the interleaved schedule needs the micro-batches per "
             "step (%d = global_batch / (micro_batch * dp)) to be a multiple of parallel.pipeline = %d; change "
             "training.global_batch or training.micro_batch, or set virtual_pipeline: 1", m, pp);
    if (mt_recipe_check_sp_split(r) != MT_OK) note(msg, sizeof msg, "%s", mt_last_error());
    if (msg[0]) return mt_errorf(MT_ERR_CONFIG, "%s", msg);
    return MT_OK;
}

/* ---------- the plan ---------- */

/* ---------- the plan of one layout, in steps ---------- */

/* The layout's fields of p, the model's dimensions and the mode's byte sizes. */
static mt_status plan_layout(plan_ctx *x, int n_gpus, mt_plan *p) {
    const mt_recipe *r = x->r;
    const mt_parallel_cfg *pc = &r->parallel;
    const mt_model_cfg *mc = &r->model;
    x->t = pc->tensor;
    x->pp = pc->pipeline;
    x->v = pc->virtual_pipeline > 0 ? pc->virtual_pipeline : 1;
    x->cp = pc->context;
    x->dp = pc->data;
    x->ep = pc->expert;
    if (x->t < 1 || x->pp < 1 || x->cp < 1 || x->dp < 1 || x->ep < 1 || mc->layers <= 0 || mc->hidden <= 0 ||
        mc->heads <= 0 || mc->seq_length <= 0)
        return mt_errorf(MT_ERR_CONFIG, "plan: the recipe is not validated (validate it for %d ranks first)", n_gpus);
    mt_status st = get_dims(r, &x->pl, &x->d);
    if (st != MT_OK) return st;
    const dims *d = &x->d;
    p->n_gpus = n_gpus;
    p->tp = x->t;
    p->pp = x->pp;
    p->vpp = x->v;
    p->cp = x->cp;
    p->dp = x->dp;
    p->ep = d->moe ? x->ep : 1;
    p->edp = d->moe ? x->dp * x->cp / p->ep : x->dp * x->cp;
    p->micro_batch = r->training.micro_batch;
    p->global_batch = mt_recipe_global_batch_max(r); /* a ramp-up's or step schedule's last: most of the run */
    p->n_micro = mt_recipe_micro_batches(r);
    p->seq_length = r->model.seq_length;
    p->sp = pc->sequence_parallel && x->t > 1;
    p->dist_opt = pc->distributed_optimizer;
    p->n_layers_stage = r->model.layers / x->pp;
    p->n_layers_first = p->n_layers_mid = p->n_layers_last = p->n_layers_stage;
    p->uneven = x->pp > 1 && mt_recipe_uneven_stages(r);
    if (p->uneven) {
        p->n_layers_first = mt_recipe_stage_layers(r, 0);
        p->n_layers_last = mt_recipe_stage_layers(r, x->pp - 1);
        p->n_layers_mid = x->pp > 2 ? mt_recipe_stage_layers(r, 1) : p->n_layers_first;
        p->n_layers_stage = p->n_layers_mid > p->n_layers_first ? p->n_layers_mid : p->n_layers_first;
        if (p->n_layers_last > p->n_layers_stage) p->n_layers_stage = p->n_layers_last;
    }
    x->uneven = p->uneven;
    x->L_first = p->n_layers_first;
    x->L_mid = p->n_layers_mid;
    x->L_last = p->n_layers_last;
    p->recompute = r->training.recompute;
    p->mode = r->training.precision == MT_PREC_BF16 && r->training.backend != MT_BACKEND_CPU ? MT_PLAN_MIXED_BF16
                                                                                             : MT_PLAN_TRAINER_FP32;
    p->gpu = *x->gpu;
    p->peak_flops = (p->mode == MT_PLAN_MIXED_BF16 ? x->gpu->peak_bf16_tflops : x->gpu->peak_fp32_tflops) * 1e12;
    p->iters = r->training.iters;
    p->tokens = r->training.tokens;
    x->m = p->n_micro;
    x->b = p->micro_batch;
    x->bf16 = p->mode == MT_PLAN_MIXED_BF16;
    x->full = p->recompute == MT_RECOMPUTE_FULL;
    /* fp32 trainer: Adam m, v; the master weights alias the weights when one gradient buffer holds them
     * all (mt_model_create), so a MoE model (dense + expert buffers) keeps a separate master copy */
    x->pbytes = x->bf16 ? 2.0 : 4.0;
    x->obytes = x->bf16 || d->moe ? 12.0 : 8.0;
    x->abytes = x->pbytes;
    x->s_loc = d->T / x->cp;
    x->N = x->b * x->s_loc;
    x->spdiv = p->sp ? x->t : 1;
    x->A = x->N * d->C * x->abytes;
    x->Ls = p->n_layers_stage;
    /* full recompute reruns rc_frac of each model chunk's layers (all: uniform; the first
       training.recompute_num_layers: block); the stage layout's own count (mt_param_layout_build_stage) */
    st = mt_param_layout_build_stage(r, 0, &x->pl0);
    if (st != MT_OK) return st;
    x->rc_layers = x->full ? x->pl0.recompute : 0;
    x->rc_frac = x->full && x->pl0.Lc > 0 ? (double)x->rc_layers / x->pl0.Lc : 0.0;

    st = mt_plan_count_params(r, &p->params);
    if (st != MT_OK) return st;
    pcount c;
    layout_params(&x->pl, d, 1, 1, 0, &c);
    p->n_params_padded = c.n_params;
    return MT_OK;
}

/* FLOPs per iteration: the model's own count (core/model/model_flops.c) over the global batch. */
static void plan_flops(const plan_ctx *x, mt_plan *p) {
    p->tokens_iter = (double)p->global_batch * x->d.T;
    mt_model_flops_per_iter(&x->pl0, p->global_batch, &p->flops_model_iter, &p->flops_hw_iter);
    p->flops_full_iter = mt_model_flops_per_seq(&x->pl0, MT_RECOMPUTE_FULL) * p->global_batch;
}

/* Whether the layers' linear GEMMs run in fp8 (Megatron's --fp8-format with Transformer Engine): asked
 * for, a device with an fp8 peak, bf16 mixed precision, not a probed host. */
static int plan_fp8(const plan_ctx *x) {
    return x->o->fp8 && x->gpu->peak_fp8_tflops > 0 && x->bf16 && !x->gpu->probed;
}

/* Activations per layer, every (recompute, sp) variant: mtrain's trainer layout, or in bf16 on request
 * Megatron-LM's (Korthikanti et al.: dropout masks, and the attention scores when the modelled software's
 * softmax is unfused, mt_plan_opts.unfused_attention). */
static void plan_layer_activations(plan_ctx *x, mt_plan *p) {
    const dims *d = &x->d;
    x->megatron_acts = x->bf16 && x->o->megatron_activations;
    for (int rc = 0; rc < 3; rc++)
        for (int s = 0; s < 2; s++)
            p->act_layer_bytes[rc][s] =
                x->megatron_acts ? act_layer_bf16(d, x->b, x->t, s && x->t > 1, x->cp, (mt_recompute)rc,
                                                  !x->o->unfused_attention, x->o->dropout, plan_fp8(x))
                                 : act_layer_trainer(d, x->b, x->t, s && x->t > 1, x->cp, (mt_recompute)rc, x->abytes);
    x->act_layer_none = p->act_layer_bytes[MT_RECOMPUTE_NONE][p->sp];
    /* the trainer's slice of the layers full recompute reruns holds both kinds' MLP arrays in a model that mixes
       dense and MoE layers (core/model/model_layout.c: each kind's arrays in the recompute slices) */
    x->act_layer_none_rerun = !x->megatron_acts && d->moe && d->moe_frac < 1.0
                                  ? act_layer_trainer_w(d, x->b, x->t, p->sp && x->t > 1, x->cp, MT_RECOMPUTE_NONE,
                                                        x->abytes, 1.0, 1.0)
                                  : x->act_layer_none;
    x->act_layer_rc = p->act_layer_bytes[p->recompute][p->sp];
    /* block recompute: the other layers keep everything */
    x->act_layer = x->full ? x->rc_frac * x->act_layer_rc + (1 - x->rc_frac) * x->act_layer_none : x->act_layer_rc;
}

/* Activations of stage k's rank at the peak of the schedule beyond its layers' (n_layer_mbs x act_layer). */
static double stage_extra_acts(const plan_ctx *x, const mt_plan *p, const mt_plan_rank *rk, int k, int L_k) {
    const dims *d = &x->d;
    const double N = x->N, spdiv = x->spdiv;
    double acts = 0.0;
    if (x->megatron_acts) {
        const double mbs = ceil(rk->n_layer_mbs / L_k);
        /* the layer being recomputed: its activations beyond its input (counted above) */
        if (x->rc_layers > 0) acts += x->act_layer_none - x->act_layer_rc;
        /* Megatron theoretical_memory_usage.py: tokens (8 s b) and the embedding dropout
         * mask (s b h) per in-flight micro-batch; output: final-norm and output-layer
         * inputs (2 + 2 bytes) and the fp32 logits 4 s b Vp / t. */
        if (k == 0) acts += mbs * (8.0 * N + N * d->C / spdiv);
        if (k == x->pp - 1) acts += 4.0 * N * d->C / spdiv + 4.0 * N * d->Vp / x->t;
        return acts;
    }
    /* the trainer: one activation buffer per in-flight chunk micro-batch (train/pipeline.c,
     * mt_schedule_max_in_flight slots), each with its fixed part, and in the layers beyond
     * the kept inputs one layer's worth when recomputing (full: the layer being rerun;
     * selective: the one shared slice of the attention core's outputs); a pipeline stage
     * also keeps the activation it sends and the gradient it sends back */
    const double Lchunk = (double)L_k * x->pp / ((double)x->pp * x->v);
    const double slots = x->pp > 1 ? rk->n_layer_mbs / Lchunk : 1.0;
    double per_slot = act_slot_trainer(d, x->b, x->t, p->sp, x->cp, k == x->pp - 1, x->abytes);
    if (x->rc_layers > 0) per_slot += x->act_layer_none_rerun - x->act_layer_rc;
    else if (p->recompute == MT_RECOMPUTE_SELECTIVE) per_slot += x->act_layer_none - x->act_layer_rc;
    acts += slots * per_slot;
    if (x->pp > 1) acts += 2.0 * x->abytes * (N / spdiv) * d->C;
    return acts;
}

/* Memory of one rank of stage k (0 = first, pp-1 = last) into rk. */
static mt_status plan_rank_memory(const plan_ctx *x, const mt_plan *p, int k, mt_plan_rank *rk) {
    mt_param_layout stage_pl;
    pcount c;
    mt_status st = mt_param_layout_build_stage(x->r, k, &stage_pl);
    if (st != MT_OK) return st;
    layout_params(&stage_pl, &x->d, p->ep, 0, 0, &c);
    rk->stage = k;
    rk->n_params = c.n_params;
    rk->n_elems = c.n_elems;
    rk->n_expert_elems = c.n_expert_elems;
    /* The distributed optimizer shards a flat buffer padded to a multiple of
     * shards * MT_PARAM_ALIGN elements, each shard owning an equal slice (mt_model_init):
     * dense parameters over dp*cp, experts over the expert data-parallel group. */
    const double dd = (double)x->dp * x->cp, de = p->edp, ua = MT_PARAM_ALIGN;
    const double n_dense = c.n_elems - c.n_expert_elems, n_exp = c.n_expert_elems;
    const double flat_dense = ceil(n_dense / (dd * ua)) * dd * ua, flat_exp = ceil(n_exp / (de * ua)) * de * ua;
    const double n_buf = p->dist_opt ? flat_dense + flat_exp : c.n_elems;
    rk->weights_bytes = x->pbytes * n_buf;
    /* Megatron's main_grad buffer: fp32, or the reduction's dtype when the modelled run reduces in 2 bytes
     * (Megatron's grad_reduce_in_fp32 off: the buffer takes the parameters' dtype) */
    rk->grads_bytes = (x->bf16 && x->o->grad_reduce_bytes > 0 ? x->o->grad_reduce_bytes : 4.0) * n_buf;
    rk->optim_nodist_bytes = x->obytes * c.n_elems;
    rk->optim_dist_bytes = x->obytes * (flat_dense / dd + flat_exp / de);
    rk->optim_bytes = p->dist_opt ? rk->optim_dist_bytes : rk->optim_nodist_bytes;
    int L_k = k == 0 ? p->n_layers_first : k == x->pp - 1 ? p->n_layers_last : p->n_layers_mid;
    /* interleaved with the embedding / loss counted: the trainer's slots hold a whole chunk's Lc layers
     * whichever chunk runs in them (train/pipeline.c), so its stage is planned as vpp * Lc layers */
    if (x->v > 1 && p->uneven && !x->megatron_acts) L_k = stage_pl.Lc * x->v;
    rk->n_layer_mbs = layer_mbs_in_flight(L_k * x->pp, x->pp, x->v, x->m, k);
    rk->acts_bytes = rk->n_layer_mbs * x->act_layer + stage_extra_acts(x, p, rk, k, L_k);
    rk->total_bytes = rk->weights_bytes + rk->grads_bytes + rk->optim_bytes + rk->acts_bytes;
    return MT_OK;
}

/* Uneven stages: the bubble from the schedule the trainer's tables give (mt_pp_timeline_build, timed by
 * plan/schedule_sim.c) with each stage's forward FLOPs (mt_pp_vstage_flops; B = 2 F), the same numbers
 * `--timeline` draws. Megatron's bubble time over ideal time is then the makespan over m slowest-stage
 * micro-batches, less one; the speed-up the whole work over that makespan. */
static mt_status plan_uneven_bubble(const plan_ctx *x, mt_plan *p) {
    const int pp = x->pp, v = x->v, n_vs = pp * v;
    double *f = malloc(2 * (size_t)n_vs * sizeof *f);
    if (!f) return mt_errorf(MT_ERR_OOM, "plan: %d virtual pipeline stages", n_vs);
    double *b = f + n_vs, worst = 0.0, total = 0.0;
    mt_status st = mt_pp_vstage_flops(x->r, f, n_vs);
    for (int s = 0; st == MT_OK && s < pp; s++) { /* a stage's work: its chunks' (virtual stages k pp + s) */
        double stage = 0.0;
        for (int k = 0; k < v; k++) {
            b[k * pp + s] = 2.0 * f[k * pp + s];
            stage += f[k * pp + s] + b[k * pp + s];
        }
        worst = fmax(worst, stage);
        total += stage;
    }
    mt_pp_timeline tl;
    if (st == MT_OK) st = mt_pp_timeline_build(mt_schedule_default(pp, v), pp, x->m, v, f, b, &tl);
    free(f);
    if (st != MT_OK) return st;
    p->bubble = tl.bubble;
    p->bubble_sim_makespan = tl.makespan / worst;
    p->bubble_ratio = p->bubble_sim_makespan / x->m - 1.0;
    p->speedup = total * x->m / tl.makespan;
    mt_pp_timeline_free(&tl);
    return MT_OK;
}

/* Memory per rank of the first and the last stage, the verdict, and the pipeline's bubble. */
static mt_status plan_memory(const plan_ctx *x, mt_plan *p) {
    mt_status st = plan_rank_memory(x, p, 0, &p->first);
    if (st == MT_OK) st = plan_rank_memory(x, p, x->pp - 1, &p->last);
    if (st != MT_OK) return st;
    p->worst_stage = p->last.total_bytes > p->first.total_bytes ? x->pp - 1 : 0;
    p->need_bytes = fmax(p->first.total_bytes, p->last.total_bytes);
    p->capacity_bytes = x->gpu->mem_bytes;
    p->usable_bytes = x->gpu->mem_bytes * x->o->usable_frac;
    p->fits = p->capacity_bytes > 0 && p->need_bytes <= p->usable_bytes;

    p->bubble = mt_plan_bubble_fraction(x->pp, x->m, x->v);
    p->bubble_ratio = x->pp > 1 && x->m > 0 ? (double)(x->pp - 1) / ((double)x->v * x->m) : 0.0;
    p->speedup = mt_plan_speedup(x->pp, x->m, x->v);
    return p->uneven ? plan_uneven_bubble(x, p) : MT_OK;
}

/* Communication per rank per iteration (bytes sent; ring: allreduce 2(g-1)/g of the buffer,
 * allgather / reduce-scatter (g-1)/g). */
static void plan_comm_volumes(const plan_ctx *x, mt_plan *p) {
    const dims *d = &x->d;
    const mt_gpu_spec *gpu = x->gpu;
    const int t = x->t, cp = x->cp, pp = x->pp, dp = x->dp, m = x->m;
    const double A = x->A, Ls = x->Ls, N = x->N;
    if (t > 1) {
        /* per layer: 2 fwd + 2 bwd allreduce (or sp's allgather + reduce-scatter, same bytes),
         * 2 more when full recompute reruns the forward; plus the embedding (fwd) and the
         * output layer's input gradient (bwd) on the first / last stage */
        double ops_mb = Ls * (4.0 + (x->full ? 2.0 : 0.0)) + (pp == 1 ? 2.0 : 1.0);
        p->tp_comm.n_ops = ops_mb * m;
        p->tp_comm.bytes = p->tp_comm.n_ops * 2.0 * (t - 1) / t * A;
        p->tp_comm.network = mt_plan_spans_nodes(gpu, 1, t);
    }
    if (cp > 1) {
        /* ring attention: the K,V chunk passes every other rank in the forward; K,V and dK,dV
         * in the backward (3x the forward bytes) */
        const double kv = 2.0 * N * d->KV * d->D / t * x->abytes;
        p->cp_comm.n_ops = 3.0 * (cp - 1) * Ls * m;
        p->cp_comm.bytes = p->cp_comm.n_ops * kv;
        p->cp_comm.network = mt_plan_spans_nodes(gpu, t, cp);
    }
    if (pp > 1) {
        /* per micro-batch and model chunk: activations forward, gradients backward; split over
         * tp (sequence parallel, or Megatron's scatter-gather of the replicated tensor) */
        p->pp_comm.n_ops = 2.0 * m * x->v;
        p->pp_comm.bytes = p->pp_comm.n_ops * A / t;
        p->pp_comm.network = mt_plan_spans_nodes(gpu, (long)t * cp * dp, pp);
    }
    const mt_plan_rank *wr = p->worst_stage ? &p->last : &p->first;
    const double dd = (double)dp * cp, de = p->edp;
    const double n_dense = wr->n_elems - wr->n_expert_elems, n_exp = wr->n_expert_elems;
    const double gb = x->o->grad_reduce_bytes > 0 ? x->o->grad_reduce_bytes : 4.0; /* fp32 main grads */
    const double bucket = mt_plan_dp_bucket_elems(x->r);
    if (p->dist_opt) { /* reduce-scatter fp32 grads, allgather updated params */
        p->dp_comm.bytes = (dd - 1) / dd * (gb + x->pbytes) * n_dense + (de - 1) / de * (gb + x->pbytes) * n_exp;
        p->dp_comm.n_ops = 2.0 * ceil(wr->n_elems / bucket); /* Megatron's buckets */
    } else {
        p->dp_comm.bytes = 2.0 * (dd - 1) / dd * gb * n_dense + 2.0 * (de - 1) / de * gb * n_exp;
        p->dp_comm.n_ops = ceil(wr->n_elems / bucket);
    }
    if (dd <= 1 && de <= 1) p->dp_comm.n_ops = 0;
    p->dp_comm.network = mt_plan_spans_nodes(gpu, t, (long)dp * cp);
    if (d->moe && p->ep > 1) {
        /* dispatch + combine, forward and backward (+2 with full recompute): each rank's s b k
         * routed token copies of h values, (ep-1)/ep of them leave the rank */
        const double toks = N * d->K / x->spdiv;
        p->ep_comm.n_ops = (4.0 + (x->full ? 2.0 : 0.0)) * ceil(Ls * d->moe_frac) * m; /* the MoE layers' */
        p->ep_comm.bytes = p->ep_comm.n_ops * (p->ep - 1.0) / p->ep * toks * d->C * x->abytes;
        p->ep_comm.network = mt_plan_spans_nodes(gpu, t, p->ep);
    }
}

/* Time and days at the given utilisation, TFLOP/s or step time; c T P / (n X) counts the active
 * parameters (MoE: top_k experts). */
static void plan_time_at_rates(const plan_ctx *x, mt_plan *p) {
    const mt_plan_opts *o = x->o;
    const double n = p->n_gpus;
    if (p->peak_flops > 0) {
        p->step_s_mfu = p->flops_model_iter / (n * p->peak_flops * o->mfu);
        p->days_mfu = p->step_s_mfu * (double)p->iters / 86400.0;
        p->days_6tp_mfu = mt_plan_days_ctp(6.0, (double)p->tokens, p->params.n_active, p->n_gpus, p->peak_flops * o->mfu);
    }
    if (o->tflops > 0) {
        p->step_s_tflops = p->flops_hw_iter / (n * o->tflops * 1e12);
        p->days_tflops = p->step_s_tflops * (double)p->iters / 86400.0;
        p->days_ctp_tflops = mt_plan_days_ctp(x->full ? 8.0 : 6.0, (double)p->tokens, p->params.n_active, p->n_gpus,
                                              o->tflops * 1e12);
    }
    if (o->step_ms > 0) {
        const double st = o->step_ms * 1e-3;
        if (p->peak_flops > 0) {
            p->mfu_step = p->flops_model_iter / (n * p->peak_flops * st);
            p->hfu_step = p->flops_hw_iter / (n * p->peak_flops * st);
        }
        p->days_step = st * (double)p->iters / 86400.0;
    }
}

/* Warnings, one per line, into p->notes. */
/* Which of Megatron's activation terms (act_layer_bf16) dominate one (layer, micro-batch) of this layout:
 * a note with each group's share, so a layout that does not fit says what to cut. */
static void note_act_terms(const plan_ctx *x, mt_plan *p) {
    const dims *d = &x->d;
    if (!x->megatron_acts || p->recompute == MT_RECOMPUTE_FULL) return;
    const int t = x->t, sp = p->sp;
    const double rep_div = sp ? t : 1, h = d->C;
    const int f8 = plan_fp8(x); /* fp8 copies of the GEMM inputs (act_layer_bf16) */
    const double fm = d->moe ? d->moe_frac : 0.0, fd = 1.0 - fm; /* the layers' kinds (act_layer_bf16) */
    const double inputs = (8.0 * h + fm * 2.0 * d->K * h - (f8 ? 2.0 * h : 0.0)) / rep_div;
    const double masks = x->o->dropout > 0 ? 2.0 * h / rep_div : 0.0;
    const double attn = (2.0 * h + 4.0 * d->KV * d->D + 2.0 * h + (f8 ? h : 0.0)) / t;
    const double mlp = (fm * d->K * (2.0 * d->fc_rows + 2.0 * d->F - (f8 ? d->F : 0.0)) +
                        fd * (2.0 * d->fcd_rows + 2.0 * d->Fd - (f8 ? d->Fd : 0.0))) / t;
    const double score = !x->o->unfused_attention ? 4.0 * d->H / t
                         : p->recompute == MT_RECOMPUTE_SELECTIVE ? 0.0 : 5.0 * d->H * d->T / t;
    const double all = inputs + masks + attn + mlp + score;
    if (all <= 0) return;
    note(p->notes, sizeof p->notes, "activations per (layer, micro-batch), Megatron's count: MLP %.0f%%, attention "
         "Q/K/V + projection input %.0f%%, norm and GEMM inputs %.0f%%, dropout masks %.0f%%, %s %.0f%%",
         100 * mlp / all, 100 * attn / all, 100 * inputs / all, 100 * masks / all,
         x->o->unfused_attention ? "attention scores" : "attention logsumexp", 100 * score / all);
}

static void plan_notes(const plan_ctx *x, mt_plan *p) {
    note_act_terms(x, p);
    const mt_gpu_spec *gpu = x->gpu;
    const int t = x->t, pp = x->pp, m = x->m;
    if (p->mode == MT_PLAN_TRAINER_FP32 && x->r->training.precision == MT_PREC_BF16)
        note(p->notes, sizeof p->notes, "training.precision=bf16 on the CPU backend computes in fp32: planned as fp32");
    if (!gpu->is_host && t > gpu->gpus_per_node)
        note(p->notes, sizeof p->notes, "tp = %d spans nodes: its allreduces go over the network", t);
    if (pp > 1 && m < pp)
        note(p->notes, sizeof p->notes, "%d micro-batches for %d pipeline stages: the pipeline never fills "
             "(bubble %.0f%%); raise training.global_batch or lower training.micro_batch", m, pp, 100 * p->bubble);
    if (pp > 1 && x->d.tied)
        note(p->notes, sizeof p->notes, "tied embeddings with pp > 1: the last stage holds a copy of the "
             "embedding (Megatron), its gradient is allreduced with the first stage's");
    if (p->recompute == MT_RECOMPUTE_NONE && x->act_layer > 0) {
        const double score = p->act_layer_bytes[MT_RECOMPUTE_NONE][p->sp] - p->act_layer_bytes[MT_RECOMPUTE_SELECTIVE][p->sp];
        const double sel = mt_model_flops_per_seq(&x->pl, MT_RECOMPUTE_SELECTIVE) * p->global_batch;
        if (score > 0.3 * x->act_layer)
            note(p->notes, sizeof p->notes, "%.0f%% of the activations are attention scores (the 5 a s^2 b term): "
                 "training.recompute=selective (or a fused attention kernel) drops them for ~%.1f%% more FLOPs",
                 100 * score / x->act_layer, 100 * (p->flops_full_iter > 0 ? sel / p->flops_model_iter - 1 : 0));
    }
    if (gpu->is_host && p->capacity_bytes <= 0)
        note(p->notes, sizeof p->notes, "the host's memory size is unknown: no fit verdict");
    if (p->ovl_grad_reduce || p->ovl_param_gather)
        note(p->notes, sizeof p->notes, "overlap: dp reduce %.3f s -> %.3f s exposed%s, param all-gather %.3f s -> %.3f s "
             "exposed%s (%.0f buckets; windows: backward %.3f s, forward %.3f s of one micro-batch%s)", p->dp_rs_s,
             p->dp_rs_exposed_s, p->ovl_grad_reduce ? "" : " (overlap_grad_reduce off)", p->dp_ag_s, p->dp_ag_exposed_s,
             p->ovl_param_gather ? "" : " (overlap_param_gather off)", p->n_buckets, p->t_bwd_mb_s, p->t_fwd_mb_s,
             p->vpp > 1 ? "; interleaved: per model chunk, through the last round of backwards and the first of forwards"
                        : "");
    if (p->ovl_p2p)
        note(p->notes, sizeof p->notes, "overlap: pipeline transfers %.3f s -> %.3f s exposed (overlap_p2p_comm, behind "
             "each model chunk's forward / backward)", p->pp_unoverlapped_s, p->pp_comm.exposed_s);
    else if (x->o->p2p_overlap && x->pp > 1)
        note(p->notes, sizeof p->notes, "--overlap-p2p-communication applies to the interleaved schedule only "
             "(virtual_pipeline > 1), as in Megatron: planned without it");
    if (p->fp8)
        note(p->notes, sizeof p->notes, "fp8: the layers' linear GEMMs at %.0f TFLOP/s peak (attention, output layer and "
             "elementwise passes in bf16); MFU is against the bf16 peak, %.1f%% against the fp8 peak",
             p->peak_fp8_flops / 1e12, 100 * p->mfu_fp8_est);
    else if (x->o->fp8)
        note(p->notes, sizeof p->notes, "--fp8: %s has no fp8 peak (or the recipe is not bf16): planned without it",
             gpu->name);
    if (p->ovl_tp_comm)
        note(p->notes, sizeof p->notes, "overlap: tp collectives %.3f s -> %.3f s exposed (--tp-comm-overlap), the GEMMs "
             "beside SM-held overlaps %.3f s slower (%d of %d SMs)", p->tp_unoverlapped_s, p->tp_comm.exposed_s,
             p->tp_gemm_slow_s, MT_PLAN_TE_OVERLAP_SMS, gpu->n_sms);
    else if (x->o->tp_comm_overlap && (t < 2 || !p->sp))
        note(p->notes, sizeof p->notes, "--tp-comm-overlap needs tp > 1 with parallel.sequence_parallel (Megatron's "
             "rule): planned without it");
}

mt_status mt_plan_compute(const mt_recipe *r, int n_gpus, const mt_gpu_spec *gpu, const mt_plan_opts *o, mt_plan *p) {
    plan_ctx ctx = { .r = r, .gpu = gpu, .o = o }, *x = &ctx;
    memset(p, 0, sizeof *p);
    mt_status st = plan_layout(x, n_gpus, p);
    if (st == MT_OK) {
        plan_flops(x, p);
        plan_layer_activations(x, p);
        st = plan_memory(x, p);
    }
    if (st == MT_OK) {
        plan_comm_volumes(x, p);
        plan_time_at_rates(x, p);
        if (p->peak_flops > 0 || gpu->probed) mt_plan_cost_model(x, p);
        plan_notes(x, p);
    }
    return st;
}
