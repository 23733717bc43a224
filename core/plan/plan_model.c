/* plan_model.c — the numbers of one layout: parameter counts (total, active, per rank),
 * FLOPs, memory per rank, pipeline bubble, communication per group and time.
 * Rules: pure functions of (recipe, device, options); every formula is in docs/plan.md with
 * its source. Shapes, the padded vocabulary, the per-rank parameter tensors and the FLOPs come
 * from the trainer's own layout functions (core/model/model_layout.h: mt_param_layout_build,
 * mt_param_layout_build_stage, mt_model_fwd_flops_per_token; the vocabulary padding is
 * mt_recipe_padded_vocab's), so the weight, gradient and optimizer bytes equal what the
 * trainer allocates; the planner adds only what the trainer does not model (MoE experts,
 * bf16 mixed precision, recompute, pipeline schedules, communication). */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "core/model/model_layout.h"
#include "core/plan/plan.h"

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

/* Model dimensions as doubles, read off the full-model layout (mt_param_layout_build: the
 * vocabulary padded for the recipe's tp); the MoE sizes from the recipe (fc_rows / F are one
 * expert's). */
typedef struct {
    double L, C, H, KV, D, F, V, Vp, T, max_pos, qkv_rows, fc_rows, E, K;
    double moe_cap, ep; /* MoE: capacity per expert per sequence (0: none), expert-parallel size */
    int ln, bias, tied, learned, moe;
    mt_model_fwd_flops fwd; /* forward FLOPs per token (mt_model_fwd_flops_per_token) */
} dims;

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
    d->E = d->moe ? m->moe.experts : 0;
    d->K = d->moe ? m->moe.top_k : 1;
    d->moe_cap = d->moe ? pl->moe_cap : 0;
    d->ep = d->moe && r->parallel.expert > 1 ? r->parallel.expert : 1;
    d->ln = pl->idx.ln1_b >= 0;
    d->bias = pl->idx.qkv_b >= 0;
    d->tied = pl->idx.lm_head < 0;
    d->learned = pl->idx.wpe >= 0;
    mt_model_fwd_flops_per_token(pl, d->moe ? m->moe.experts : 0, d->moe ? m->moe.top_k : 1, &d->fwd);
    return MT_OK;
}

/* ---------- GEMM cost (docs/plan.md, "GEMM efficiency") ---------- */

double mt_plan_gemm_time(const mt_gpu_spec *g, double peak_flops, double elem_bytes, double batch, double M, double N,
                         double K) {
    if (peak_flops <= 0 || M <= 0 || N <= 0 || K <= 0 || batch <= 0) return 0.0;
    double math = batch * 2.0 * M * N * K / peak_flops;
    if (g->n_sms > 0) {
        /* tile quantisation: every output tile does the full 128 x 256 x K work; wave
         * quantisation: the tiles run n_sms at a time, a partial wave costs a whole one */
        const double tiles = batch * ceil(M / MT_PLAN_TILE_M) * ceil(N / MT_PLAN_TILE_N);
        const double waves = ceil(tiles / g->n_sms);
        math = waves * 2.0 * MT_PLAN_TILE_M * MT_PLAN_TILE_N * K / (peak_flops / g->n_sms);
    }
    const double bw = mt_gpu_hbm_bw(g), mem = bw > 0 ? batch * (M * K + K * N + M * N) * elem_bytes / bw : 0.0;
    return fmax(math, mem);
}

double mt_plan_gemm_eff(const mt_gpu_spec *g, double peak_flops, double elem_bytes, double batch, double M, double N,
                        double K) {
    const double t = mt_plan_gemm_time(g, peak_flops, elem_bytes, batch, M, N, K);
    return t > 0 ? batch * 2.0 * M * N * K / (t * peak_flops) : 0.0;
}

/* ---------- time terms (docs/plan.md, "Step time") ---------- */

/* How one rank's device runs a GEMM: the shape model at the sustained rate (GPU), the probed
 * rate (a profiled host), or the fixed factor (--gemm-eff X, or a host without a profile). */
typedef struct {
    const mt_gpu_spec *g;
    double peak;       /* FLOP/s the shape model's math runs at: datasheet peak x sustained_frac */
    double eb;         /* bytes per activation element */
    double fixed_eff;  /* > 0: every GEMM at this fraction of the datasheet peak */
    double bw;         /* bytes/s of elementwise passes: HBM (datasheet) or the probed stream rate */
    double op_s;       /* fixed cost per op call (probed host; 0 on a GPU: launches overlap) */
    int threads;       /* host: threads per rank */
} cost_ctx;

/* Seconds to stream `bytes` (0 when the device's bandwidth is unknown: the host without a profile). */
static double bytes_time(const cost_ctx *c, double bytes) { return c->bw > 0 ? bytes / c->bw : 0.0; }

static double cost_gemm(const cost_ctx *c, double batch, double M, double N, double K) {
    const double fl = batch * 2.0 * M * N * K;
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0) return 0.0;
    if (c->g->probed) {
        const double r = mt_probe_gemm_rate(&c->g->probe, M, N, K, c->threads);
        return r > 0 ? fl / r + c->op_s : 0.0;
    }
    if (c->fixed_eff > 0) return fl / (c->peak / mt_gpu_sustained_frac(c->g) * c->fixed_eff);
    return mt_plan_gemm_time(c->g, c->peak, c->eb, batch, M, N, K);
}

/* One forward GEMM out[M x N] = in[M x K] W^T and its two backward ones (input gradient M x K by N,
 * weight gradient N x K by M): forward time into *tf, backward into *tb, the three's FLOPs into *fl. */
static void gemm_fb(const cost_ctx *c, double batch, double M, double N, double K, double *tf, double *tb,
                    double *fl) {
    *fl += 3.0 * batch * 2.0 * M * N * K;
    *tf += cost_gemm(c, batch, M, N, K);
    *tb += cost_gemm(c, batch, M, K, N) + cost_gemm(c, batch, N, K, M);
}

static double lerp_threads(double v1, double vn, int n_probe, int threads) {
    if (n_probe <= 1 || vn <= 0) return v1 > 0 ? v1 : vn;
    if (v1 <= 0) return vn;
    const double x = (double)(threads - 1) / (n_probe - 1);
    return v1 + (vn - v1) * fmin(1.0, fmax(0.0, x));
}

double mt_probe_gemm_rate(const mt_device_probe *pr, double M, double N, double K, int threads) {
    if (pr->n_gemm <= 0) return 0.0;
    /* by log2 of the GEMM's work M N K, piecewise linear between the probed shapes (sorted by it),
     * clamped at the ends */
    double x = log2(M * N * K), best_lo = -1e300, best_hi = 1e300;
    int lo = -1, hi = -1;
    for (int i = 0; i < pr->n_gemm; i++) {
        const double xi = log2(pr->gemm_mnk[i][0] * pr->gemm_mnk[i][1] * pr->gemm_mnk[i][2]);
        if (xi <= x && xi > best_lo) best_lo = xi, lo = i;
        if (xi >= x && xi < best_hi) best_hi = xi, hi = i;
    }
    if (lo < 0) lo = hi;
    if (hi < 0) hi = lo;
    const double r_lo = lerp_threads(pr->gemm_flops_1t[lo], pr->gemm_flops_nt[lo], pr->threads, threads);
    const double r_hi = lerp_threads(pr->gemm_flops_1t[hi], pr->gemm_flops_nt[hi], pr->threads, threads);
    if (lo == hi || best_hi <= best_lo) return r_lo;
    const double w = (x - best_lo) / (best_hi - best_lo);
    return r_lo + (r_hi - r_lo) * w;
}

/* The rate of an op that runs a share of its time at r_shared and the rest at r_alone. */
static double blend_rate(double r_alone, double r_shared, double share) {
    if (r_alone <= 0 || r_shared <= 0) return r_shared > 0 ? r_shared : r_alone;
    return 1.0 / (share / r_shared + (1.0 - share) / r_alone);
}

static double probe_stream_bw(const mt_device_probe *pr, int threads) {
    return 1e9 * lerp_threads(pr->stream_gbs_1t, pr->stream_gbs_nt, pr->threads, threads);
}

static double probe_attn_rate(const mt_device_probe *pr, int threads) {
    return lerp_threads(pr->attn_flops_1t, pr->attn_flops_nt, pr->threads, threads);
}

/* Bytes per token that one layer's forward elementwise and norm passes move on a rank: two norms
 * (read x, write y), two residual adds (read 2, write 1; with dropout the fused bias-dropout-add also
 * writes a 1-byte mask), the MLP activation (GELU reads F, writes F; SwiGLU reads 2F, writes F, per
 * routed copy), rotary embeddings on Q and K. Replicated tensors split over tp with sp. */
static double layer_elem_fwd_bytes(const dims *d, int t, int sp, double eb, double dropout) {
    const double rep = sp ? t : 1, C = d->C, Fl = d->K * d->F / t, swi = d->fc_rows > d->F;
    double b = eb * ((2.0 * 2.0 * C + 2.0 * 3.0 * C) / rep + (swi ? 3.0 : 2.0) * Fl);
    if (!d->learned) b += eb * 2.0 * (d->H + d->KV) * d->D / t; /* rope on q, k */
    if (dropout > 0) b += 2.0 * C / rep;                         /* masks */
    return b;
}

/* Forward + backward bytes per token of one layer's elementwise passes (backward: each norm reads x
 * and dy and adds into the residual gradient, 4 passes; the activation reads x and dy and writes dx;
 * dropout reads dy and its mask, writes dx), and the op calls of the forward and the backward. */
static double layer_elem_bytes(const dims *d, int t, int sp, double eb, double dropout, double n_ops[2]) {
    const double rep = sp ? t : 1, C = d->C, Fl = d->K * d->F / t, swi = d->fc_rows > d->F;
    double bwd = eb * (2.0 * 4.0 * C / rep + (swi ? 5.0 : 3.0) * Fl);
    if (!d->learned) bwd += eb * 2.0 * (d->H + d->KV) * d->D / t;
    if (dropout > 0) bwd += 2.0 * (2.0 * eb * C + C) / rep;
    /* op calls besides the GEMMs and the attention (counted with them): forward 2 norms, 2 adds, the
     * activation (+ rope); backward 2 norms, the activation, the residual gradient copy (+ rope) */
    n_ops[0] = 5.0 + (d->learned ? 0.0 : 1.0);
    n_ops[1] = 4.0 + (d->learned ? 0.0 : 1.0);
    return layer_elem_fwd_bytes(d, t, sp, eb, dropout) + bwd;
}

/* Bytes per token of one layer's passes that the modelled software makes besides mtrain's (mt_plan_opts:
 * Megatron-LM 2021 on PyTorch 1.8, docs/plan.md "Calibration"), forward and backward, with rcf of the layers
 * running their forward twice (full recompute: the first without autograd). */
static double layer_sw_extra_bytes(const dims *d, int t, int sp, double eb, double dropout, double rcf,
                                   const mt_plan_opts *o) {
    const double rep = sp ? t : 1, h = d->C / rep, q = d->qkv_rows / t, a = d->H * d->D / t;
    const double kv = d->KV * d->D / t, fc = d->K * d->fc_rows / t, fwds = 1.0 + rcf;
    double b = 0;
    if (d->bias && o->bias_add_pass) b += fwds * 2.0 * q * eb;              /* output.add_(bias): read, write */
    if (d->bias && o->bias_grad_pass) b += (q + h + fc + h) * eb;           /* sum over tokens of each dy */
    if (o->attn_copies) b += fwds * 2.0 * a * eb + 2.0 * q * eb + 2.0 * (a + kv) * eb; /* permute; cat; dQ, dK */
    if (o->norm_bwd_unfused) b += 2.0 * (5.0 - 4.0 + 3.0) * h * eb; /* 2 norms: 2 kernels (5h) + sum (3h), not 4h */
    if (o->nograd_fwd_unfused && dropout > 0) b += rcf * 2.0 * 4.0 * h * eb; /* 2 bias-dropout-adds: 7h, not 3h */
    return b;
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

/* Extra forward work of recomputation per token per layer: selective recomputes the
 * attention core, full the whole layer (not the output layer: Megatron's 96 B s l h^2
 * (1 + s/(6h) + V/(16 l h)) keeps the logits at 3 passes). */
static double recompute_flops_token(const dims *d, mt_recompute rc) {
    if (rc == MT_RECOMPUTE_FULL) return d->fwd.layer;
    if (rc == MT_RECOMPUTE_SELECTIVE) return d->fwd.attn_core;
    return 0.0;
}

static double flops_per_seq(const dims *d, mt_recompute rc) {
    return d->T * (3.0 * (d->L * d->fwd.layer + d->fwd.head) + d->L * recompute_flops_token(d, rc));
}

double mt_plan_flops_per_seq(const mt_recipe *r, mt_recompute rc) {
    mt_param_layout pl;
    dims d;
    if (get_dims(r, &pl, &d) != MT_OK) return 0.0;
    return flops_per_seq(&d, rc);
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
 * layer input only: 2 s b h (/ t with sp). s = T / cp (context parallelism splits queries). */
static double act_layer_bf16(const dims *d, double b, int t, int sp, int cp, mt_recompute rc) {
    const double s = d->T / cp, sk = d->T, h = d->C;
    if (rc == MT_RECOMPUTE_FULL) return 2.0 * s * b * h / (sp ? t : 1);
    double rep = 10.0 * h + (d->moe ? 2.0 * d->K * h : 0.0);
    double split = 2.0 * h + 4.0 * d->KV * d->D + 2.0 * h + d->K * (2.0 * d->fc_rows + 2.0 * d->F);
    double per_token = sp ? (rep + split) / t : rep + split / t;
    double score = rc == MT_RECOMPUTE_SELECTIVE ? 0.0 : 5.0 * d->H * sk / t;
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

static double act_layer_trainer(const dims *d, double b, int t, int sp, int cp, mt_recompute rc, double a) {
    const double s = d->T / cp, N = b * s, C = d->C;
    if (rc == MT_RECOMPUTE_FULL) return a * N * C / (sp ? t : 1);
    double rep = 4.0 * C; /* resid, ln1, resid_mid, ln2 */
    const int sel = rc == MT_RECOMPUTE_SELECTIVE;
    double split = d->qkv_rows + (sel ? 0.0 : d->H * d->D) + (d->moe ? 0.0 : d->fc_rows + d->F);
    /* + the two norms' fp32 mean and rstd (on 1/t of the tokens with sp) */
    double per_token = sp ? (a * (rep + split) + 16.0) / t : a * (rep + split / t) + 16.0;
    double lse = sel ? 0.0 : 4.0 * d->H / t;
    double bytes = N * (per_token + lse);
    if (d->moe) { /* the router's logits (a) and fp32 probabilities (E each) and 3 words per assignment per
                     token; per expert row the input and the two MLP activations, per sent copy its output,
                     and the per-expert counts (2E + ep E/ep words) */
        double S, R;
        moe_rows(d, b, N, &S, &R);
        bytes += N * ((a + 4.0) * d->E + 12.0 * d->K) + a * (R * (C + (d->fc_rows + d->F) / t) + S * C) +
                 4.0 * (2.0 * d->E + d->E);
    }
    return bytes;
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
    if (!d->moe) e += a * N * (d->fc_rows + (d->fc_rows != d->F ? d->F : 0)) / t;
    if (cp > 1) e += a * 5.0 * N * 2.0 * (d->KV / t) * d->D;
    if (sp) e += a * (N * C + Nr * C);
    if (d->moe) {
        double S, R;
        moe_rows(d, b, N, &S, &R);
        e += a * (S * C + (d->ep > 1 ? R * C : 0.0) + R * C + R * (d->fc_rows + d->F) / t + N * d->E) +
             4.0 * (N * d->K + MT_MOE_STATS + 2.0 * d->E);
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

/* Group of `size` ranks `stride` apart in Megatron's rank order (tp fastest): within a node
 * when it fits in one. */
static int spans_nodes(const mt_gpu_spec *g, long stride, long size) {
    return size > 1 && !g->is_host && stride * size > g->gpus_per_node;
}

/* p2p: point-to-point messages (pipeline, ring attention), else collectives. */
static void comm_time_kind(mt_plan_comm *c, const mt_gpu_spec *g, const mt_plan_opts *o, int p2p) {
    if (g->probed) {
        /* measured: the shared-memory communicator's latency and bus bandwidth; a collective's latency as
         * the probe met it after a compute phase on both ranks (the wait for the slower one included),
         * a message's without (its receiver's wait is the schedule's, counted in the bubble) */
        const double alpha = !p2p && g->probe.coll_alpha_s > 0 ? g->probe.coll_alpha_s : g->probe.comm_alpha_s;
        c->exposed_s = g->probe.comm_gbs > 0 ? c->n_ops * alpha + c->bytes / (g->probe.comm_gbs * 1e9) : 0.0;
        return;
    }
    const double bw = (c->network ? g->net_gbs : g->nvlink_gbs) * 1e9 * o->link_eff;
    const double alpha = c->network ? 25e-6 : 10e-6;
    c->exposed_s = bw > 0 ? c->n_ops * alpha + c->bytes / bw : 0.0;
}

static void comm_time(mt_plan_comm *c, const mt_gpu_spec *g, const mt_plan_opts *o) { comm_time_kind(c, g, o, 0); }

mt_status mt_plan_compute(const mt_recipe *r, int n_gpus, const mt_gpu_spec *gpu, const mt_plan_opts *o, mt_plan *p) {
    dims d;
    mt_param_layout pl, stage_pl;
    memset(p, 0, sizeof *p);
    const mt_parallel_cfg *pc = &r->parallel;
    const int t = pc->tensor, pp = pc->pipeline, v = pc->virtual_pipeline > 0 ? pc->virtual_pipeline : 1;
    const int cp = pc->context, dp = pc->data, ep = pc->expert;
    const mt_model_cfg *mc = &r->model;
    if (t < 1 || pp < 1 || cp < 1 || dp < 1 || ep < 1 || mc->layers <= 0 || mc->hidden <= 0 || mc->heads <= 0 ||
        mc->seq_length <= 0)
        return mt_errorf(MT_ERR_CONFIG, "plan: the recipe is not validated (validate it for %d ranks first)", n_gpus);
    mt_status st = get_dims(r, &pl, &d);
    if (st != MT_OK) return st;
    p->n_gpus = n_gpus;
    p->tp = t;
    p->pp = pp;
    p->vpp = v;
    p->cp = cp;
    p->dp = dp;
    p->ep = d.moe ? ep : 1;
    p->edp = d.moe ? dp * cp / p->ep : dp * cp;
    p->micro_batch = r->training.micro_batch;
    p->global_batch = r->training.global_batch;
    p->n_micro = mt_recipe_micro_batches(r);
    p->seq_length = r->model.seq_length;
    p->sp = pc->sequence_parallel && t > 1;
    p->dist_opt = pc->distributed_optimizer;
    p->n_layers_stage = r->model.layers / pp;
    p->recompute = r->training.recompute;
    p->mode = r->training.precision == MT_PREC_BF16 && r->training.backend != MT_BACKEND_CPU ? MT_PLAN_MIXED_BF16
                                                                                             : MT_PLAN_TRAINER_FP32;
    p->gpu = *gpu;
    p->peak_flops = (p->mode == MT_PLAN_MIXED_BF16 ? gpu->peak_bf16_tflops : gpu->peak_fp32_tflops) * 1e12;
    p->iters = r->training.iters;
    p->tokens = r->training.tokens;
    const int m = p->n_micro;
    const double b = p->micro_batch;
    const int bf16 = p->mode == MT_PLAN_MIXED_BF16;
    /* fp32 trainer: Adam m, v; the master weights alias the weights when one gradient buffer holds them
     * all (mt_model_create), so a MoE model (dense + expert buffers) keeps a separate master copy */
    const double pbytes = bf16 ? 2.0 : 4.0, obytes = bf16 || d.moe ? 12.0 : 8.0, abytes = pbytes;

    /* parameters */
    st = mt_plan_count_params(r, &p->params);
    if (st != MT_OK) return st;
    {
        pcount c;
        layout_params(&pl, &d, 1, 1, 0, &c);
        p->n_params_padded = c.n_params;
    }

    /* FLOPs */
    p->tokens_iter = (double)p->global_batch * d.T;
    p->flops_model_iter = p->global_batch * flops_per_seq(&d, MT_RECOMPUTE_NONE);
    /* full recompute reruns rc_frac of each model chunk's layers (all: uniform; the first
       training.recompute_num_layers: block) */
    const int Lc_rc = r->model.layers / (pp * v) > 0 ? r->model.layers / (pp * v) : 1;
    int rc_layers = 0;
    if (p->recompute == MT_RECOMPUTE_FULL) {
        rc_layers = r->training.recompute_method == MT_RECOMPUTE_BLOCK ? r->training.recompute_num_layers : Lc_rc;
        if (rc_layers > Lc_rc) rc_layers = Lc_rc;
    }
    const double rc_frac = p->recompute == MT_RECOMPUTE_FULL ? (double)rc_layers / Lc_rc : 0.0;
    p->flops_hw_iter = p->recompute == MT_RECOMPUTE_FULL
                           ? p->global_batch * (flops_per_seq(&d, MT_RECOMPUTE_NONE) +
                                                rc_frac * (flops_per_seq(&d, MT_RECOMPUTE_FULL) -
                                                           flops_per_seq(&d, MT_RECOMPUTE_NONE)))
                           : p->global_batch * flops_per_seq(&d, p->recompute);
    p->flops_full_iter = p->global_batch * flops_per_seq(&d, MT_RECOMPUTE_FULL);

    /* activations per layer, every (recompute, sp) variant: mtrain's trainer layout, or in bf16 on request
       Megatron-LM's (Korthikanti et al.: dropout masks and the attention scores of a non-flash softmax) */
    const int megatron_acts = bf16 && o->megatron_activations;
    for (int rc = 0; rc < 3; rc++)
        for (int s = 0; s < 2; s++)
            p->act_layer_bytes[rc][s] = megatron_acts ? act_layer_bf16(&d, b, t, s && t > 1, cp, (mt_recompute)rc)
                                                      : act_layer_trainer(&d, b, t, s && t > 1, cp, (mt_recompute)rc, abytes);
    const double act_layer_none = p->act_layer_bytes[MT_RECOMPUTE_NONE][p->sp];
    const double act_layer_rc = p->act_layer_bytes[p->recompute][p->sp];
    /* block recompute: the other layers keep everything */
    const double act_layer = p->recompute == MT_RECOMPUTE_FULL ? rc_frac * act_layer_rc + (1 - rc_frac) * act_layer_none
                                                                : act_layer_rc;

    /* memory per rank, first and last stage */
    const double s_loc = d.T / cp, N = b * s_loc, spdiv = p->sp ? t : 1;
    for (int which = 0; which < 2; which++) {
        mt_plan_rank *rk = which ? &p->last : &p->first;
        const int k = which ? pp - 1 : 0;
        pcount c;
        st = mt_param_layout_build_stage(r, k, &stage_pl);
        if (st != MT_OK) return st;
        layout_params(&stage_pl, &d, p->ep, 0, 0, &c);
        rk->stage = k;
        rk->n_params = c.n_params;
        rk->n_elems = c.n_elems;
        rk->n_expert_elems = c.n_expert_elems;
        /* The distributed optimizer shards a flat buffer padded to a multiple of
         * shards * MT_PARAM_ALIGN elements, each shard owning an equal slice (mt_model_init):
         * dense parameters over dp*cp, experts over the expert data-parallel group. */
        const double dd = (double)dp * cp, de = p->edp, ua = MT_PARAM_ALIGN;
        const double n_dense = c.n_elems - c.n_expert_elems, n_exp = c.n_expert_elems;
        const double flat_dense = ceil(n_dense / (dd * ua)) * dd * ua, flat_exp = ceil(n_exp / (de * ua)) * de * ua;
        const double n_buf = p->dist_opt ? flat_dense + flat_exp : c.n_elems;
        rk->weights_bytes = pbytes * n_buf;
        rk->grads_bytes = 4.0 * n_buf; /* fp32 gradients (Megatron's main_grad buffer) */
        rk->optim_nodist_bytes = obytes * c.n_elems;
        rk->optim_dist_bytes = obytes * (flat_dense / dd + flat_exp / de);
        rk->optim_bytes = p->dist_opt ? rk->optim_dist_bytes : rk->optim_nodist_bytes;
        rk->n_layer_mbs = layer_mbs_in_flight(r->model.layers, pp, v, m, k);
        double acts = rk->n_layer_mbs * act_layer;
        const double mbs = ceil(rk->n_layer_mbs / p->n_layers_stage);
        if (megatron_acts) {
            /* the layer being recomputed: its activations beyond its input (counted above) */
            if (rc_layers > 0) acts += act_layer_none - act_layer_rc;
            /* Megatron theoretical_memory_usage.py: tokens (8 s b) and the embedding dropout
             * mask (s b h) per in-flight micro-batch; output: final-norm and output-layer
             * inputs (2 + 2 bytes) and the fp32 logits 4 s b Vp / t. */
            if (k == 0) acts += mbs * (8.0 * N + N * d.C / spdiv);
            if (k == pp - 1) acts += 4.0 * N * d.C / spdiv + 4.0 * N * d.Vp / t;
        } else {
            /* the trainer: one activation buffer per in-flight chunk micro-batch (train/pipeline.c,
             * mt_schedule_max_in_flight slots), each with its fixed part, and in the layers beyond
             * the kept inputs one layer's worth when recomputing (full: the layer being rerun;
             * selective: the one shared slice of the attention core's outputs); a pipeline stage
             * also keeps the activation it sends and the gradient it sends back */
            const double Lchunk = (double)r->model.layers / ((double)pp * v);
            const double slots = pp > 1 ? rk->n_layer_mbs / Lchunk : 1.0;
            double per_slot = act_slot_trainer(&d, b, t, p->sp, cp, k == pp - 1, abytes);
            if (rc_layers > 0 || p->recompute == MT_RECOMPUTE_SELECTIVE) per_slot += act_layer_none - act_layer_rc;
            acts += slots * per_slot;
            if (pp > 1) acts += 2.0 * abytes * (N / spdiv) * d.C;
        }
        rk->acts_bytes = acts;
        rk->total_bytes = rk->weights_bytes + rk->grads_bytes + rk->optim_bytes + rk->acts_bytes;
    }
    p->worst_stage = p->last.total_bytes > p->first.total_bytes ? pp - 1 : 0;
    p->need_bytes = fmax(p->first.total_bytes, p->last.total_bytes);
    p->capacity_bytes = gpu->mem_bytes;
    p->usable_bytes = gpu->mem_bytes * o->usable_frac;
    p->fits = p->capacity_bytes > 0 && p->need_bytes <= p->usable_bytes;

    /* pipeline */
    p->bubble = mt_plan_bubble_fraction(pp, m, v);
    p->bubble_ratio = pp > 1 && m > 0 ? (double)(pp - 1) / ((double)v * m) : 0.0;
    p->speedup = mt_plan_speedup(pp, m, v);

    /* communication per rank per iteration (bytes sent; ring: allreduce 2(g-1)/g of the
     * buffer, allgather / reduce-scatter (g-1)/g) */
    const double A = N * d.C * abytes; /* one micro-batch's hidden states on this rank's sequence */
    const double Ls = p->n_layers_stage;
    const int full = p->recompute == MT_RECOMPUTE_FULL;
    if (t > 1) {
        /* per layer: 2 fwd + 2 bwd allreduce (or sp's allgather + reduce-scatter, same bytes),
         * 2 more when full recompute reruns the forward; plus the embedding (fwd) and the
         * output layer's input gradient (bwd) on the first / last stage */
        double ops_mb = Ls * (4.0 + (full ? 2.0 : 0.0)) + (pp == 1 ? 2.0 : 1.0);
        p->tp_comm.n_ops = ops_mb * m;
        p->tp_comm.bytes = p->tp_comm.n_ops * 2.0 * (t - 1) / t * A;
        p->tp_comm.network = spans_nodes(gpu, 1, t);
    }
    if (cp > 1) {
        /* ring attention: the K,V chunk passes every other rank in the forward; K,V and dK,dV
         * in the backward (3x the forward bytes) */
        const double kv = 2.0 * N * d.KV * d.D / t * abytes;
        p->cp_comm.n_ops = 3.0 * (cp - 1) * Ls * m;
        p->cp_comm.bytes = p->cp_comm.n_ops * kv;
        p->cp_comm.network = spans_nodes(gpu, t, cp);
    }
    if (pp > 1) {
        /* per micro-batch and model chunk: activations forward, gradients backward; split over
         * tp (sequence parallel, or Megatron's scatter-gather of the replicated tensor) */
        p->pp_comm.n_ops = 2.0 * m * v;
        p->pp_comm.bytes = p->pp_comm.n_ops * A / t;
        p->pp_comm.network = spans_nodes(gpu, (long)t * cp * dp, pp);
    }
    const mt_plan_rank *wr = p->worst_stage ? &p->last : &p->first;
    {
        const double dd = (double)dp * cp, de = p->edp;
        const double n_dense = wr->n_elems - wr->n_expert_elems, n_exp = wr->n_expert_elems;
        const double gb = o->grad_reduce_bytes > 0 ? o->grad_reduce_bytes : 4.0; /* fp32 main grads */
        if (p->dist_opt) { /* reduce-scatter fp32 grads, allgather updated params */
            p->dp_comm.bytes = (dd - 1) / dd * (gb + pbytes) * n_dense + (de - 1) / de * (gb + pbytes) * n_exp;
            p->dp_comm.n_ops = 2.0 * ceil(wr->n_elems / 40e6); /* Megatron buckets of 40M elements */
        } else {
            p->dp_comm.bytes = 2.0 * (dd - 1) / dd * gb * n_dense + 2.0 * (de - 1) / de * gb * n_exp;
            p->dp_comm.n_ops = ceil(wr->n_elems / 40e6);
        }
        if (dd <= 1 && de <= 1) p->dp_comm.n_ops = 0;
        p->dp_comm.network = spans_nodes(gpu, t, (long)dp * cp);
    }
    if (d.moe && p->ep > 1) {
        /* dispatch + combine, forward and backward (+2 with full recompute): each rank's s b k
         * routed token copies of h values, (ep-1)/ep of them leave the rank */
        const double toks = N * d.K / spdiv;
        p->ep_comm.n_ops = (4.0 + (full ? 2.0 : 0.0)) * Ls * m;
        p->ep_comm.bytes = p->ep_comm.n_ops * (p->ep - 1.0) / p->ep * toks * d.C * abytes;
        p->ep_comm.network = spans_nodes(gpu, t, p->ep);
    }

    /* time at the given utilisation; c T P / (n X) counts the active parameters (MoE: top_k experts) */
    const double n = n_gpus;
    if (p->peak_flops > 0) {
        p->step_s_mfu = p->flops_model_iter / (n * p->peak_flops * o->mfu);
        p->days_mfu = p->step_s_mfu * (double)p->iters / 86400.0;
        p->days_6tp_mfu = mt_plan_days_ctp(6.0, (double)p->tokens, p->params.n_active, n_gpus, p->peak_flops * o->mfu);
    }
    if (o->tflops > 0) {
        p->step_s_tflops = p->flops_hw_iter / (n * o->tflops * 1e12);
        p->days_tflops = p->step_s_tflops * (double)p->iters / 86400.0;
        p->days_ctp_tflops = mt_plan_days_ctp(full ? 8.0 : 6.0, (double)p->tokens, p->params.n_active, n_gpus,
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

    /* cost model (docs/plan.md, "Step time"): GEMMs by shape at the sustained rate (or the probed rate),
     * the attention core, elementwise and norm passes by bytes, communication by algorithm
     * (alpha + bytes / beta, not overlapped), the pipeline bubble, unoverlapped dp, the optimizer by bytes */
    if (p->peak_flops > 0 || gpu->probed) {
        cost_ctx c;
        c.threads = 1;
        if (gpu->is_host) { /* mtrain launch gives each local rank cores / ranks threads (at least 1), or
                             * training.threads when set (train/backend_select.c, cpu_threads) */
            const int cores = gpu->probed && gpu->probe.threads > 0 ? gpu->probe.threads : gpu->gpus_per_node;
            c.threads = n_gpus > 1 ? (cores / n_gpus > 0 ? cores / n_gpus : 1) : cores;
            if (r->training.threads > 0) c.threads = r->training.threads;
        }
        /* a multi-rank run on a probed host: while the ranks compute at once each gets what one of 2
         * concurrently measuring ranks got, while it computes alone (the pipeline's fill and drain) what
         * one rank alone gets. Share of the step with every stage busy: 1 without a pipeline, else
         * (m - p + 1) / (m + p - 1) of 1F1B (0 when m < p: the stages never all work at once). Each op's
         * time is the share-weighted mix, i.e. its rate the harmonic blend. */
        mt_gpu_spec shared_host;
        const mt_device_probe *q = &gpu->probe;
        if (gpu->probed && n_gpus > 1 && q->gemm_flops_2r[0] > 0 && q->stream_gbs_2r > 0 && q->attn_flops_2r > 0) {
            const double share = pp > 1 ? fmax(0.0, (double)m - pp + 1) / ((double)m + pp - 1) : 1.0;
            shared_host = *gpu;
            mt_device_probe *w = &shared_host.probe;
            for (int i = 0; i < w->n_gemm; i++)
                w->gemm_flops_1t[i] = w->gemm_flops_nt[i] =
                    blend_rate(lerp_threads(q->gemm_flops_1t[i], q->gemm_flops_nt[i], q->threads, c.threads),
                               q->gemm_flops_2r[i], share);
            w->stream_gbs_1t = w->stream_gbs_nt =
                blend_rate(lerp_threads(q->stream_gbs_1t, q->stream_gbs_nt, q->threads, c.threads), q->stream_gbs_2r,
                           share);
            w->attn_flops_1t = w->attn_flops_nt =
                blend_rate(lerp_threads(q->attn_flops_1t, q->attn_flops_nt, q->threads, c.threads), q->attn_flops_2r,
                           share);
            c.g = &shared_host;
        } else {
            c.g = gpu;
        }
        c.peak = p->peak_flops * mt_gpu_sustained_frac(gpu);
        c.eb = abytes;
        p->threads_rank = c.threads;
        c.fixed_eff = 0.0;
        if (!gpu->probed && (o->gemm_eff > 0 || gpu->n_sms <= 0)) { /* the fixed factor (--gemm-eff, or the host) */
            const double ge = o->gemm_eff > 0 ? o->gemm_eff : 0.70;
            c.fixed_eff = ge * N / (N + 384.0) * (d.C / t) / (d.C / t + 192.0);
        }
        c.bw = gpu->probed ? probe_stream_bw(&c.g->probe, c.threads) : mt_gpu_hbm_bw(gpu);
        c.op_s = gpu->probed ? gpu->probe.op_overhead_s : 0.0;
        const double rcf = p->recompute == MT_RECOMPUTE_FULL ? rc_frac : 0.0; /* layers rerunning their forward */
        const int rc_attn = p->recompute == MT_RECOMPUTE_SELECTIVE || rcf > 0;

        /* GEMMs of one layer on this rank, forward (f) and the two backward ones (b) */
        const double Ne = d.moe ? p->ep * N * d.K / d.E : N, ne = d.moe ? d.E / p->ep : 1;
        double gf = 0, gb = 0, flops_l = 0;
        gemm_fb(&c, 1, N, d.qkv_rows / t, d.C, &gf, &gb, &flops_l);
        gemm_fb(&c, 1, N, d.C, d.H * d.D / t, &gf, &gb, &flops_l);
        gemm_fb(&c, ne, Ne, d.fc_rows / t, d.C, &gf, &gb, &flops_l);
        gemm_fb(&c, ne, Ne, d.C, d.F / t, &gf, &gb, &flops_l);
        if (d.moe) gemm_fb(&c, 1, N, d.E, d.C, &gf, &gb, &flops_l); /* router */
        const double t_gemm_l = gf * (1.0 + rcf) + gb;

        /* attention core: scores s x (s cp) by D and context s x D by (s cp), per (sequence, head) */
        const double bh = b * d.H / t;
        double af = 0, ab = 0, aflops = 0, t_attn_l;
        if (gpu->probed) { /* the backend's own kernel at its probed rate (Megatron's FLOPs, fwd + bwd) */
            const double r = probe_attn_rate(&c.g->probe, c.threads);
            const double acct = N * 3.0 * d.fwd.attn_core / t;
            t_attn_l = r > 0 ? acct / r * (1.0 + (rc_attn ? 1.0 / 3.0 : 0.0)) : 0.0;
        } else {
            gemm_fb(&c, bh, s_loc, d.T, d.D, &af, &ab, &aflops);
            gemm_fb(&c, bh, s_loc, d.D, d.T, &af, &ab, &aflops);
            if (o->unfused_attention) {
                t_attn_l = af * (1.0 + (rc_attn ? 1.0 : 0.0)) + ab;
            } else { /* flash-style: the causal half; backward 5 GEMMs against the forward's 2 (recomputes S) */
                t_attn_l = 0.5 * af * (1.0 + 2.5 + (rc_attn ? 1.0 : 0.0));
            }
        }
        p->gemm_eff = c.peak > 0 && gf + gb + af + ab > 0 ? (flops_l + aflops) / ((gf + gb + af + ab) * p->peak_flops) : 0.0;
        if (c.fixed_eff > 0) p->gemm_eff = c.fixed_eff;
        p->gemm_rate = gf + gb + af + ab > 0 ? (flops_l + aflops) / (gf + gb + af + ab) : 0.0;
        if (gpu->probed) p->gemm_rate = gf + gb > 0 ? flops_l / (gf + gb) : 0.0;

        /* elementwise and norm passes of one layer, by bytes (and, on a probed host, per op call) */
        double ops_l[2] = { 0, 0 };
        const double elem_tok = layer_elem_bytes(&d, t, p->sp, abytes, o->dropout, ops_l);
        double elem_l = N * (elem_tok + (rcf > 0 ? rcf * layer_elem_fwd_bytes(&d, t, p->sp, abytes, o->dropout) : 0));
        elem_l += N * layer_sw_extra_bytes(&d, t, p->sp, abytes, o->dropout, rcf, o);
        if (o->unfused_attention && !gpu->probed) {
            /* softmax (+ dropout) over the materialised scores. Megatron's causal kernel
             * (scaled_upper_triang_masked_softmax.h) loads only each row's causal half and writes the whole row:
             * forward reads 1/2 and writes 1, backward reads 1/2 of dy and of y and writes 1. Dropout (PyTorch's
             * _fused_dropout, its masked-scale backward) passes the whole square. */
            const double E = bh * s_loc * d.T, drop = o->dropout > 0 ? 2.0 * abytes + 1.0 : 0.0;
            elem_l += E * ((1.5 * abytes + drop) * (1.0 + (rc_attn ? 1.0 : 0.0)) + 2.0 * abytes + drop);
        }
        const double t_elem_l = bytes_time(&c, elem_l) + (ops_l[0] * (1.0 + rcf) + ops_l[1]) * c.op_s;

        /* the output layer (last stage) and the embedding (first stage) */
        double hf = 0, hb = 0, hflops = 0;
        gemm_fb(&c, 1, N, d.Vp / t, d.C, &hf, &hb, &hflops);
        const double xent = o->xent_logit_bytes > 0 ? o->xent_logit_bytes : 16.0 + 2.0 * abytes; /* per logit */
        const double head_elem = N * (6.0 * d.C / (p->sp ? t : 1) * abytes + (d.Vp / t) * xent);
        const double t_head = hf + hb + bytes_time(&c, head_elem) + 6.0 * c.op_s;
        const double emb_elem = N * d.C * (4.0 * abytes + 8.0);
        const double t_emb = bytes_time(&c, emb_elem) + 3.0 * c.op_s;

        const double t_layer = t_gemm_l + t_attn_l + t_elem_l;
        const double comp_first = Ls * t_layer + t_emb, comp_last = Ls * t_layer + t_head;
        /* a separate gradient-accumulation pass over the stage's parameters in every micro-batch but the first
         * (opts; the first backward's gradient is stored as it is: PyTorch's AccumulateGrad steals it) */
        const double t_acc = o->grad_accum_bytes > 0 && c.bw > 0
                                 ? o->grad_accum_bytes * wr->n_elems * (m - 1.0) / m / c.bw : 0.0;
        const double comp_mb = (pp == 1 ? Ls * t_layer + t_emb + t_head : fmax(comp_first, comp_last)) + t_acc;
        const double head_share = pp == 1 || comp_last >= comp_first ? 1.0 : 0.0;
        p->t_gemm_s = m * (Ls * t_gemm_l + head_share * (hf + hb));
        p->t_attn_s = m * Ls * t_attn_l;
        p->t_compute_s = comp_mb * m;
        p->t_elem_s = p->t_compute_s - p->t_gemm_s - p->t_attn_s; /* with the gradient-accumulation pass */
        const double attn_mb = Ls * t_attn_l;
        comm_time(&p->tp_comm, gpu, o);
        comm_time_kind(&p->cp_comm, gpu, o, 1);
        comm_time_kind(&p->pp_comm, gpu, o, 1);
        if (pp > 1 && t > 1 && !gpu->is_host) {
            /* scatter/gather (Narayanan et al. 2021, §4.1): each received 1/t piece is allgathered over the tp
             * group (NVLink) to rebuild the replicated tensor, once per message: the interleaved schedule's v-fold
             * messages pay it v times */
            mt_plan_comm ag = { p->pp_comm.n_ops * (t - 1.0) / t * A, p->pp_comm.n_ops, 0, 0.0 };
            comm_time(&ag, gpu, o);
            p->pp_comm.exposed_s += ag.exposed_s;
        }
        comm_time(&p->ep_comm, gpu, o);
        comm_time(&p->dp_comm, gpu, o);
        /* tied embeddings with a pipeline: after the backward the first and the last stage allreduce the
         * word-embedding gradient (Vp/t x h) between them, before the optimizer (Megatron-LM 2021,
         * megatron/training.py train_step: all_reduce(word_embeddings_weight grad, embedding group)) */
        if (pp > 1 && d.tied) {
            const double gb = o->grad_reduce_bytes > 0 ? o->grad_reduce_bytes : 4.0;
            mt_plan_comm emb = { d.Vp / t * d.C * gb, 1.0, spans_nodes(gpu, (long)t * cp * dp, pp), 0.0 };
            comm_time(&emb, gpu, o);
            p->t_emb_ar_s = emb.exposed_s;
        }
        /* ring attention overlaps its transfers with the attention compute */
        p->cp_comm.exposed_s = fmax(0.0, p->cp_comm.exposed_s - attn_mb * m);
        const double t_mb = comp_mb + (p->tp_comm.exposed_s + p->cp_comm.exposed_s + p->pp_comm.exposed_s +
                                       p->ep_comm.exposed_s) / m;
        p->t_mb_s = t_mb;
        p->t_bubble_s = pp > 1 ? t_mb * (pp - 1.0) / v : 0.0;
        /* not overlapped (Megatron's default without --overlap-grad-reduce); with the embedding allreduce */
        p->t_dp_s = p->dp_comm.exposed_s + p->t_emb_ar_s;
        if (o->grad_copy_bytes > 0 && (dp > 1 || cp > 1) && c.bw > 0) /* the reduction's buffer copies (opts) */
            p->t_dp_s += o->grad_copy_bytes * wr->n_elems / c.bw;
        /* AdamW streams master, m, v (read + write), the gradient (read), the param (write) of the parameters
         * this rank updates; zeroing the gradient buffer and the gradient norm (clipping) pass all of it */
        const double opt_elems = p->dist_opt ? (wr->n_elems - wr->n_expert_elems) / ((double)dp * cp) +
                                                   wr->n_expert_elems / p->edp
                                             : wr->n_elems;
        const double opt_bytes = o->opt_param_bytes > 0 ? opt_elems * o->opt_param_bytes
                                                        : opt_elems * (bf16 ? 30.0 : 28.0) + wr->n_elems * 8.0;
        p->t_opt_s = c.bw > 0 ? opt_bytes / c.bw + 4.0 * c.op_s : 0.0;
        p->t_grad_zero_s = c.bw > 0 && o->opt_param_bytes <= 0 ? wr->n_elems * 4.0 / c.bw + c.op_s : 0.0;
        p->t_step_s = t_mb * m + p->t_bubble_s + p->t_dp_s + p->t_opt_s;
        p->mfu_est = p->peak_flops > 0 ? p->flops_model_iter / (n * p->peak_flops * p->t_step_s) : 0.0;
    }

    /* notes */
    if (p->mode == MT_PLAN_TRAINER_FP32 && r->training.precision == MT_PREC_BF16)
        note(p->notes, sizeof p->notes, "training.precision=bf16 on the CPU backend computes in fp32: planned as fp32");
    if (!gpu->is_host && t > gpu->gpus_per_node)
        note(p->notes, sizeof p->notes, "tp = %d spans nodes: its allreduces go over the network", t);
    if (pp > 1 && m < pp)
        note(p->notes, sizeof p->notes, "%d micro-batches for %d pipeline stages: the pipeline never fills "
             "(bubble %.0f%%); raise training.global_batch or lower training.micro_batch", m, pp, 100 * p->bubble);
    if (pp > 1 && d.tied)
        note(p->notes, sizeof p->notes, "tied embeddings with pp > 1: the last stage holds a copy of the "
             "embedding (Megatron), its gradient is allreduced with the first stage's");
    if (p->recompute == MT_RECOMPUTE_NONE && act_layer > 0) {
        const double score = p->act_layer_bytes[MT_RECOMPUTE_NONE][p->sp] - p->act_layer_bytes[MT_RECOMPUTE_SELECTIVE][p->sp];
        if (score > 0.3 * act_layer)
            note(p->notes, sizeof p->notes, "%.0f%% of the activations are attention scores (the 5 a s^2 b term): "
                 "training.recompute=selective (or a fused attention kernel) drops them for ~%.1f%% more FLOPs",
                 100 * score / act_layer, 100 * (p->flops_full_iter > 0 ? (p->global_batch * flops_per_seq(&d, MT_RECOMPUTE_SELECTIVE)) / p->flops_model_iter - 1 : 0));
    }
    if (gpu->is_host && p->capacity_bytes <= 0)
        note(p->notes, sizeof p->notes, "the host's memory size is unknown: no fit verdict");
    return MT_OK;
}
