/* plan_cost.c — the planner's cost model: the time of one training step of a layout, term by term
 * (docs/plan.md, "Step time"): GEMMs by shape at the sustained rate (or a probed host's rate), the
 * attention core, elementwise and norm passes by bytes, communication by algorithm, the pipeline
 * bubble, the data-parallel reduction and the optimizer by bytes. plan_model.c fills in the counts
 * it reads (plan_internal.h). Rule: pure functions of (recipe, device, options). */
#include <math.h>
#include <string.h>

#include "plan/plan_internal.h"

/* ---------- GEMM cost (docs/plan.md, "GEMM efficiency") ---------- */

double mt_plan_gemm_time(const mt_gpu_spec *g, double peak_flops, double elem_bytes, double batch, double M, double N,
                         double K) {
    if (peak_flops <= 0 || M <= 0 || N <= 0 || K <= 0 || batch <= 0) return 0.0;
    double math = batch * 2.0 * M * N * K / peak_flops;
    if (g->n_sms > 0) {
        /* tile quantisation: every output tile does the full 128 x 256 x K work, plus its fixed
         * prologue / epilogue cost of tile_k0 K-steps (docs/plan.md, "GEMM efficiency by shape"); wave
         * quantisation: the tiles run n_sms at a time, a partial wave costs a whole one */
        const double tiles = batch * ceil(M / MT_PLAN_TILE_M) * ceil(N / MT_PLAN_TILE_N);
        const double waves = ceil(tiles / g->n_sms), k0 = g->tile_k0[elem_bytes <= 1.0 ? 1 : 0];
        math = waves * 2.0 * MT_PLAN_TILE_M * MT_PLAN_TILE_N * (K + k0) / (peak_flops / g->n_sms);
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
 * writes a 1-byte mask), the MLP activation (GELU or squared ReLU reads F, writes F; SwiGLU reads 2F, writes F, per
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

/* Bytes per token of one layer's fp8 casts (Transformer Engine's Linear: `fp8_cast_transpose_fused`
 * casts each GEMM input to fp8 and writes its transpose for the weight-gradient GEMM, read 2 write 1 + 1;
 * the backward casts each output gradient the same way): forward the inputs of QKV, projection, FC1,
 * FC2 (K of each forward GEMM), backward their output gradients (N of each). fwd_only: the forward's.
 * With current scaling (--fp8-recipe tensorwise) each cast input is first read once more for its amax
 * (Float8CurrentScalingQuantizer: "computed directly by scanning the input"): 6 bytes an element, not 4. */
static double layer_fp8_cast_bytes(const dims *d, int t, int fwd_only, int recipe) {
    const double per = recipe == MT_FP8_TENSORWISE ? 6.0 : 4.0;
    const double fwd = per * (d->C + d->H * d->D / t + d->C + d->K * d->F / t);
    const double bwd = per * (d->qkv_rows / t + d->C + d->K * d->fc_rows / t + d->C);
    return fwd + (fwd_only ? 0.0 : bwd);
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

/* ---------- communication ---------- */

/* Group of `size` ranks `stride` apart in Megatron's rank order (tp fastest): within a node
 * when it fits in one. */
int mt_plan_spans_nodes(const mt_gpu_spec *g, long stride, long size) {
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

/* ---------- the step ---------- */

/* How one rank runs its ops (cost_ctx): threads per rank on a host, a probed host's rates blended for
 * ranks computing at once, the GEMM rate or fixed factor, the streaming bandwidth. */
static void cost_setup(plan_ctx *x, const mt_plan *p, cost_ctx *c) {
    const mt_gpu_spec *gpu = x->gpu;
    const int n_gpus = p->n_gpus, pp = x->pp, m = x->m;
    c->threads = 1;
    if (gpu->is_host) { /* mtrain launch gives each local rank cores / ranks threads (at least 1), or
                         * training.threads when set (train/backend_select.c, cpu_threads) */
        const int cores = gpu->probed && gpu->probe.threads > 0 ? gpu->probe.threads : gpu->gpus_per_node;
        c->threads = n_gpus > 1 ? (cores / n_gpus > 0 ? cores / n_gpus : 1) : cores;
        if (x->r->training.threads > 0) c->threads = x->r->training.threads;
    }
    /* a multi-rank run on a probed host: while the ranks compute at once each gets what one of 2
     * concurrently measuring ranks got, while it computes alone (the pipeline's fill and drain) what
     * one rank alone gets. Share of the step with every stage busy: 1 without a pipeline, else
     * (m - p + 1) / (m + p - 1) of 1F1B (0 when m < p: the stages never all work at once). Each op's
     * time is the share-weighted mix, i.e. its rate the harmonic blend. */
    const mt_device_probe *q = &gpu->probe;
    if (gpu->probed && n_gpus > 1 && q->gemm_flops_2r[0] > 0 && q->stream_gbs_2r > 0 && q->attn_flops_2r > 0) {
        const double share = pp > 1 ? fmax(0.0, (double)m - pp + 1) / ((double)m + pp - 1) : 1.0;
        x->shared_host = *gpu;
        mt_device_probe *w = &x->shared_host.probe;
        for (int i = 0; i < w->n_gemm; i++)
            w->gemm_flops_1t[i] = w->gemm_flops_nt[i] =
                blend_rate(lerp_threads(q->gemm_flops_1t[i], q->gemm_flops_nt[i], q->threads, c->threads),
                           q->gemm_flops_2r[i], share);
        w->stream_gbs_1t = w->stream_gbs_nt =
            blend_rate(lerp_threads(q->stream_gbs_1t, q->stream_gbs_nt, q->threads, c->threads), q->stream_gbs_2r,
                       share);
        w->attn_flops_1t = w->attn_flops_nt =
            blend_rate(lerp_threads(q->attn_flops_1t, q->attn_flops_nt, q->threads, c->threads), q->attn_flops_2r,
                       share);
        c->g = &x->shared_host;
    } else {
        c->g = gpu;
    }
    c->peak = p->peak_flops * mt_gpu_sustained_frac(gpu);
    c->eb = x->abytes;
    c->fixed_eff = 0.0;
    if (!gpu->probed && (x->o->gemm_eff > 0 || gpu->n_sms <= 0)) { /* the fixed factor (--gemm-eff, or the host) */
        const double ge = x->o->gemm_eff > 0 ? x->o->gemm_eff : 0.70;
        c->fixed_eff = ge * x->N / (x->N + 384.0) * (x->d.C / x->t) / (x->d.C / x->t + 192.0);
    }
    c->bw = gpu->probed ? probe_stream_bw(&c->g->probe, c->threads) : mt_gpu_hbm_bw(gpu);
    c->op_s = gpu->probed ? gpu->probe.op_overhead_s : 0.0;
}

/* One transformer layer's compute on one rank for one micro-batch, forward and backward with the
 * recompute's rerun forward: GEMMs, the attention core, elementwise and norm passes. */
enum { G_QKV, G_PROJ, G_FC1, G_FC2, G_N };   /* the layer's four GEMMs */
enum { G_FWD, G_DGRAD, G_WGRAD };            /* each one's forward, input-gradient and weight-gradient GEMM */
typedef struct {
    double gemm, attn, elem; /* seconds, forward + backward (+ the recomputed forward) */
    double fwd;              /* of which the forward alone (no recomputation): the param-gather window */
    double g[G_N][3];        /* each GEMM's three times (--tp-comm-overlap pairs them with the collectives) */
} layer_time;

/* The three GEMMs of out[M x N] = in[M x K] W^T (forward, input gradient M x K by N, weight gradient
 * N x K by M), the times gemm_fb sums. */
static void gemm_3(const cost_ctx *c, double batch, double M, double N, double K, double out[3]) {
    out[G_FWD] = cost_gemm(c, batch, M, N, K);
    out[G_DGRAD] = cost_gemm(c, batch, M, K, N);
    out[G_WGRAD] = cost_gemm(c, batch, N, K, M);
}

/* c runs the attention core; cl the linear GEMMs (c, or its fp8 twin). */
static layer_time layer_compute(const plan_ctx *x, mt_plan *p, const cost_ctx *c, const cost_ctx *cl) {
    const dims *d = &x->d;
    const mt_plan_opts *o = x->o;
    const int t = x->t, probed = x->gpu->probed;
    const double N = x->N, rcf = x->rc_frac; /* layers rerunning their forward */
    const int rc_attn = p->recompute == MT_RECOMPUTE_SELECTIVE || rcf > 0;
    layer_time lt;

    /* GEMMs of one layer on this rank, forward (f) and the two backward ones (b); the MLP's, the mean over the
       layers' kinds: a MoE layer's experts (ne batched GEMMs of Ne rows), router and shared experts (all N
       tokens, tensor-parallel as the dense MLP), a dense layer's MLP of Fd */
    const double Ne = d->moe ? p->ep * N * d->K / d->E : N, ne = d->moe ? d->E / p->ep : 1;
    const double fm = d->moe ? d->moe_frac : 0.0, fd = 1.0 - fm;
    double gf = 0, gb = 0, flops_l = 0;
    gemm_fb(cl, 1, N, d->qkv_rows / t, d->C, &gf, &gb, &flops_l);
    gemm_fb(cl, 1, N, d->C, d->H * d->D / t, &gf, &gb, &flops_l);
    double mf = 0, mb = 0, mfl = 0, df = 0, db = 0, dfl = 0;
    if (fm > 0) {
        gemm_fb(cl, ne, Ne, d->fc_rows / t, d->C, &mf, &mb, &mfl);
        gemm_fb(cl, ne, Ne, d->C, d->F / t, &mf, &mb, &mfl);
        gemm_fb(cl, 1, N, d->E, d->C, &mf, &mb, &mfl); /* router */
        if (d->Fs > 0) {
            gemm_fb(cl, 1, N, d->fcs_rows / t, d->C, &mf, &mb, &mfl);
            gemm_fb(cl, 1, N, d->C, d->Fs / t, &mf, &mb, &mfl);
        }
    }
    if (fd > 0) {
        gemm_fb(cl, 1, N, d->fcd_rows / t, d->C, &df, &db, &dfl);
        gemm_fb(cl, 1, N, d->C, d->Fd / t, &df, &db, &dfl);
    }
    gf += fm * mf + fd * df;
    gb += fm * mb + fd * db;
    flops_l += fm * mfl + fd * dfl;
    lt.gemm = gf * (1.0 + rcf) + gb;
    gemm_3(cl, 1, N, d->qkv_rows / t, d->C, lt.g[G_QKV]);
    gemm_3(cl, 1, N, d->C, d->H * d->D / t, lt.g[G_PROJ]);
    double e1[3] = {0, 0, 0}, e2[3] = {0, 0, 0}, s1[3] = {0, 0, 0}, s2[3] = {0, 0, 0}, d1[3] = {0, 0, 0},
           d2[3] = {0, 0, 0};
    if (fm > 0) {
        gemm_3(cl, ne, Ne, d->fc_rows / t, d->C, e1);
        gemm_3(cl, ne, Ne, d->C, d->F / t, e2);
        if (d->Fs > 0) {
            gemm_3(cl, 1, N, d->fcs_rows / t, d->C, s1);
            gemm_3(cl, 1, N, d->C, d->Fs / t, s2);
        }
    }
    if (fd > 0) {
        gemm_3(cl, 1, N, d->fcd_rows / t, d->C, d1);
        gemm_3(cl, 1, N, d->C, d->Fd / t, d2);
    }
    for (int i = 0; i < 3; i++) {
        lt.g[G_FC1][i] = fm * (e1[i] + s1[i]) + fd * d1[i];
        lt.g[G_FC2][i] = fm * (e2[i] + s2[i]) + fd * d2[i];
    }
    double attn_fwd = 0.0;

    /* attention core: scores s x (s cp) by D and context s x D by (s cp), per (sequence, head) */
    const double bh = x->b * d->H / t;
    double af = 0, ab = 0, aflops = 0;
    if (probed) { /* the backend's own kernel at its probed rate (Megatron's FLOPs, fwd + bwd) */
        const double r = probe_attn_rate(&c->g->probe, c->threads);
        const double acct = N * 3.0 * d->fwd.attn_core / t;
        lt.attn = r > 0 ? acct / r * (1.0 + (rc_attn ? 1.0 / 3.0 : 0.0)) : 0.0;
        attn_fwd = r > 0 ? acct / r / 3.0 : 0.0;
    } else {
        /* a fused kernel (flash) runs at the device's published attention rate when it has one, its K
         * loop over the whole key sequence (no per-tile K cost); an unfused one is batched GEMMs. Both go
         * through mt_plan_gemm_time's roofline, whose bytes include the s x T score tile (M x N): a fused
         * kernel keeps it on chip, so for it the roofline, not the rate, usually sets the time (at head
         * dim 128 about 128 FLOP per byte of achievable HBM bandwidth; docs/plan.md, "GEMM efficiency by
         * shape", says why it is kept) */
        mt_gpu_spec ga = *c->g;
        cost_ctx ca = *c;
        if (!o->unfused_attention) {
            ga.tile_k0[0] = ga.tile_k0[1] = 0.0;
            if (ga.attn_frac > 0) ca.peak = p->peak_flops * ga.attn_frac;
            ca.g = &ga;
        }
        gemm_fb(&ca, bh, x->s_loc, d->T, d->D, &af, &ab, &aflops);
        gemm_fb(&ca, bh, x->s_loc, d->D, d->T, &af, &ab, &aflops);
        if (o->unfused_attention) {
            lt.attn = af * (1.0 + (rc_attn ? 1.0 : 0.0)) + ab;
            attn_fwd = af;
        } else { /* flash-style: the causal half; backward 5 GEMMs against the forward's 2 (recomputes S) */
            lt.attn = 0.5 * af * (1.0 + 2.5 + (rc_attn ? 1.0 : 0.0));
            attn_fwd = 0.5 * af;
        }
    }
    p->gemm_eff = c->peak > 0 && gf + gb + af + ab > 0 ? (flops_l + aflops) / ((gf + gb + af + ab) * p->peak_flops) : 0.0;
    if (cl != c && c->peak > 0) /* fp8: each GEMM against the peak of its own precision */
        p->gemm_eff = (flops_l + aflops) / ((gf + gb) * p->peak_fp8_flops + (af + ab) * p->peak_flops);
    if (c->fixed_eff > 0) p->gemm_eff = c->fixed_eff;
    p->gemm_rate = gf + gb + af + ab > 0 ? (flops_l + aflops) / (gf + gb + af + ab) : 0.0;
    if (probed) p->gemm_rate = gf + gb > 0 ? flops_l / (gf + gb) : 0.0;

    /* elementwise and norm passes of one layer, by bytes (and, on a probed host, per op call) */
    double ops_l[2] = { 0, 0 };
    const double elem_tok = layer_elem_bytes(d, t, p->sp, x->abytes, o->dropout, ops_l);
    double elem_l = N * (elem_tok + (rcf > 0 ? rcf * layer_elem_fwd_bytes(d, t, p->sp, x->abytes, o->dropout) : 0));
    elem_l += N * layer_sw_extra_bytes(d, t, p->sp, x->abytes, o->dropout, rcf, o);
    if (cl != c)
        elem_l += N * (layer_fp8_cast_bytes(d, t, 0, o->fp8_recipe) + rcf * layer_fp8_cast_bytes(d, t, 1, o->fp8_recipe));
    if (o->unfused_attention && !probed) {
        /* softmax (+ dropout) over the materialised scores. Megatron's causal kernel
         * (scaled_upper_triang_masked_softmax.h) loads only each row's causal half and writes the whole row:
         * forward reads 1/2 and writes 1, backward reads 1/2 of dy and of y and writes 1. Dropout (PyTorch's
         * _fused_dropout, its masked-scale backward) passes the whole square. */
        const double E = bh * x->s_loc * d->T, drop = o->dropout > 0 ? 2.0 * x->abytes + 1.0 : 0.0;
        elem_l += E * ((1.5 * x->abytes + drop) * (1.0 + (rc_attn ? 1.0 : 0.0)) + 2.0 * x->abytes + drop);
    }
    lt.elem = bytes_time(c, elem_l) + (ops_l[0] * (1.0 + rcf) + ops_l[1]) * c->op_s;
    lt.fwd = gf + attn_fwd + bytes_time(c, N * layer_elem_fwd_bytes(d, t, p->sp, x->abytes, o->dropout)) +
             ops_l[0] * c->op_s;
    return lt;
}

/* ---------- overlap (docs/plan.md, "Overlap") ---------- */

double mt_plan_overlap_exposed(double comm_s, double compute_s, double n_chunks) {
    if (comm_s <= 0) return 0.0;
    if (compute_s <= 0) return comm_s;
    const double rest = fmax(0.0, comm_s - compute_s);
    return n_chunks > 0 ? rest + fmin(comm_s, compute_s) / n_chunks : rest;
}

double mt_plan_chunk_reduce_exposed(double total_s, int v, double slot_s) {
    if (total_s <= 0) return 0.0;
    if (v < 1) v = 1;
    const double msg = total_s / v, slot = fmax(0.0, slot_s);
    double done = 0.0; /* when the link finishes the messages released so far */
    for (int k = 1; k <= v; k++) done = fmax(done, k * slot) + msg;
    return done - v * slot;
}

double mt_plan_chunk_gather_exposed(double total_s, int v, double slot_s) {
    if (total_s <= 0) return 0.0;
    if (v < 1) v = 1;
    const double msg = total_s / v, slot = fmax(0.0, slot_s);
    double link = 0.0, start_prev = 0.0, end_prev = 0.0; /* the link's free time; chunk c-1's first-round span */
    for (int c = 0; c < v; c++) {
        const double release = c < 2 ? 0.0 : start_prev; /* chunks 0 and 1 at the start, then one ahead */
        link = fmax(link, release) + msg;                /* chunk c's parameters gathered */
        const double start = fmax(c == 0 ? 0.0 : end_prev, link);
        start_prev = start;
        end_prev = start + slot;
    }
    return end_prev - v * slot;
}

/* --tp-comm-overlap (Megatron-Core with Transformer Engine's userbuffers, sequence parallel): per layer
 * and micro-batch each all-gather / reduce-scatter (c_h: half an allreduce's time) beside the GEMM
 * TE pairs it with (base.py's default methods): forward, the all-gathers before QKV and FC1 by ring
 * exchange (tp splits), the reduce-scatters after PROJ and FC2 pipelined (4 splits, on 16 SMs);
 * backward, the all-gathers of the output gradient before PROJ's and FC2's input-gradient GEMMs (ring
 * exchange), the reduce-scatters of QKV's and FC1's input gradient in bulk beside their weight-gradient
 * GEMMs (16 SMs). A GEMM beside an overlap on SMs runs on n_sms - 16: slower by n_sms / (n_sms - 16).
 * Returns the exposed communication of one layer, its forward (fwd) and backward parts; *slow_s the
 * compute the SM sharing adds. */
static double tp_overlap_layer(const layer_time *lt, double c_h, int t, double slow, double *fwd_s, double *slow_s) {
    const double (*g)[3] = lt->g, ps = MT_PLAN_TE_PIPELINE_SPLITS;
    *fwd_s = mt_plan_overlap_exposed(c_h, g[G_QKV][G_FWD], t) + mt_plan_overlap_exposed(c_h, g[G_PROJ][G_FWD] * slow, ps) +
             mt_plan_overlap_exposed(c_h, g[G_FC1][G_FWD], t) + mt_plan_overlap_exposed(c_h, g[G_FC2][G_FWD] * slow, ps);
    const double bwd = mt_plan_overlap_exposed(c_h, g[G_PROJ][G_DGRAD], t) +
                       mt_plan_overlap_exposed(c_h, g[G_FC2][G_DGRAD], t) +
                       mt_plan_overlap_exposed(c_h, g[G_QKV][G_WGRAD] * slow, 0) +
                       mt_plan_overlap_exposed(c_h, g[G_FC1][G_WGRAD] * slow, 0);
    *slow_s = (slow - 1.0) * (g[G_PROJ][G_FWD] + g[G_FC2][G_FWD] + g[G_QKV][G_WGRAD] + g[G_FC1][G_WGRAD]);
    return *fwd_s + bwd;
}

/* The tp term under --tp-comm-overlap: the layers' collectives overlapped (tp_overlap_layer, the
 * recomputed forward's again with full recompute), the embedding's and output layer's not. Returns
 * the compute the SM sharing adds per micro-batch. */
static double tp_comm_overlap(const plan_ctx *x, mt_plan *p, const layer_time *lt) {
    const int t = x->t;
    if (!x->o->tp_comm_overlap || t < 2 || !p->sp || p->tp_comm.n_ops <= 0 || x->gpu->is_host || x->gpu->n_sms <= 16)
        return 0.0;
    const double rfull = x->full ? 1.0 : 0.0, ops_layer = 4.0 + 2.0 * rfull; /* as plan_comm_volumes counts them */
    const double c_op = p->tp_comm.exposed_s / p->tp_comm.n_ops, c_h = 0.5 * c_op;
    const double slow = x->gpu->n_sms / (x->gpu->n_sms - (double)MT_PLAN_TE_OVERLAP_SMS);
    double fwd = 0, slow_s = 0;
    const double layer = tp_overlap_layer(lt, c_h, t, slow, &fwd, &slow_s);
    const double ops_other = p->tp_comm.n_ops / x->m - x->Ls * ops_layer; /* embedding, output layer */
    p->ovl_tp_comm = 1;
    p->tp_unoverlapped_s = p->tp_comm.exposed_s;
    p->tp_comm.exposed_s = x->m * (x->Ls * (layer + rfull * fwd) + ops_other * c_op);
    p->tp_gemm_slow_s = x->m * x->Ls * slow_s * (1.0 + rfull);
    return x->Ls * slow_s * (1.0 + rfull);
}

/* The pp term under overlap_p2p_comm (Megatron-Core schedules.py, forward_backward_pipelining_with_interleaving:
 * the next transfer is posted before a model chunk's forward or backward and waited for after it): each
 * activation message hides behind one chunk's forward, each gradient message behind one chunk's backward,
 * exposed(message, chunk, 0) = max(0, message - chunk). Interleaved schedule only (Megatron forces it off
 * otherwise); the pipeline's fill and drain stay in the bubble term. */
static void p2p_overlap(const plan_ctx *x, mt_plan *p, const layer_time *lt) {
    if (!x->o->p2p_overlap || x->pp < 2 || x->v < 2 || p->pp_comm.n_ops <= 0) return;
    const double msg = p->pp_comm.exposed_s / p->pp_comm.n_ops, n_half = 0.5 * p->pp_comm.n_ops;
    const double layers_chunk = x->Ls / x->v, t_layer = lt->gemm + lt->attn + lt->elem;
    const double chunk_f = layers_chunk * lt->fwd, chunk_b = layers_chunk * (t_layer - lt->fwd);
    p->ovl_p2p = 1;
    p->pp_unoverlapped_s = p->pp_comm.exposed_s;
    p->pp_comm.exposed_s = n_half * (mt_plan_overlap_exposed(msg, chunk_f, 0) + mt_plan_overlap_exposed(msg, chunk_b, 0));
}

/* The dp term under parallel.overlap_grad_reduce / overlap_param_gather (Megatron-Core's
 * DistributedDataParallel, param_and_grad_buffer.py): the worst stage's gradients cut into n buckets
 * (parallel.ddp_bucket_size, auto max(40M, 1M x dp cp) elements); a bucket's reduce-scatter
 * (allreduce without the distributed optimizer) starts when its last gradient is final, in the last
 * micro-batch's backward, so the reduction overlaps that backward (w_bwd) and the last bucket's stays
 * exposed; the updated parameters' all-gathers run bucket by bucket before the next forward needs
 * them, overlapping the first micro-batch's forward (w_fwd) but the first bucket. Both are
 * mt_plan_overlap_exposed with n buckets. */
static void dp_overlap(const plan_ctx *x, mt_plan *p, const mt_plan_rank *wr, double w_fwd, double w_bwd) {
    const mt_recipe *r = x->r;
    const int ovl_g = r->parallel.overlap_grad_reduce, ovl_p = r->parallel.overlap_param_gather && p->dist_opt;
    if ((!ovl_g && !ovl_p) || p->dp_comm.n_ops <= 0) return;
    const double bucket = mt_plan_dp_bucket_elems(r);
    const double gb = x->o->grad_reduce_bytes > 0 ? x->o->grad_reduce_bytes : 4.0;
    mt_plan_comm rs = p->dp_comm, ag = p->dp_comm;
    if (p->dist_opt) { /* the bytes split by element size, the operations half each */
        rs.bytes = p->dp_comm.bytes * gb / (gb + x->pbytes);
        ag.bytes = p->dp_comm.bytes - rs.bytes;
        rs.n_ops = ag.n_ops = 0.5 * p->dp_comm.n_ops;
        comm_time(&ag, x->gpu, x->o);
    } else {
        ag.bytes = ag.n_ops = ag.exposed_s = 0.0;
    }
    comm_time(&rs, x->gpu, x->o);
    p->ovl_grad_reduce = ovl_g;
    p->ovl_param_gather = ovl_p;
    p->n_buckets = fmax(1.0, ceil(wr->n_elems / bucket));
    p->t_fwd_mb_s = w_fwd;
    p->t_bwd_mb_s = w_bwd;
    p->dp_rs_s = rs.exposed_s;
    p->dp_ag_s = ag.exposed_s;
    if (x->v > 1) { /* per model chunk, through the last round of backwards / the first round of forwards:
                      * min(m, pp) micro-batches of each chunk (the schedule's group), 1/v of the stage each */
        const double group = fmin((double)x->m, (double)x->pp);
        p->dp_rs_exposed_s = ovl_g ? mt_plan_chunk_reduce_exposed(rs.exposed_s, x->v, group * w_bwd / x->v) : rs.exposed_s;
        p->dp_ag_exposed_s = ovl_p ? mt_plan_chunk_gather_exposed(ag.exposed_s, x->v, group * w_fwd / x->v) : ag.exposed_s;
    } else {
        p->dp_rs_exposed_s = ovl_g ? mt_plan_overlap_exposed(rs.exposed_s, w_bwd, p->n_buckets) : rs.exposed_s;
        p->dp_ag_exposed_s = ovl_p ? mt_plan_overlap_exposed(ag.exposed_s, w_fwd, p->n_buckets) : ag.exposed_s;
    }
    p->dp_comm.exposed_s = p->dp_rs_exposed_s + p->dp_ag_exposed_s;
}

/* Exposed communication times per group (alpha + bytes / beta, not overlapped; ring attention hides
 * behind the attention compute), the tied embedding's allreduce. */
static void plan_comm_times(const plan_ctx *x, mt_plan *p, double attn_mb) {
    const mt_gpu_spec *gpu = x->gpu;
    const mt_plan_opts *o = x->o;
    const int t = x->t, pp = x->pp;
    comm_time(&p->tp_comm, gpu, o);
    comm_time_kind(&p->cp_comm, gpu, o, 1);
    comm_time_kind(&p->pp_comm, gpu, o, 1);
    if (pp > 1 && t > 1 && !gpu->is_host) {
        /* scatter/gather (Narayanan et al. 2021, §4.1): each received 1/t piece is allgathered over the tp
         * group (NVLink) to rebuild the replicated tensor, once per message: the interleaved schedule's v-fold
         * messages pay it v times */
        mt_plan_comm ag = { p->pp_comm.n_ops * (t - 1.0) / t * x->A, p->pp_comm.n_ops, 0, 0.0 };
        comm_time(&ag, gpu, o);
        p->pp_comm.exposed_s += ag.exposed_s;
    }
    comm_time(&p->ep_comm, gpu, o);
    comm_time(&p->dp_comm, gpu, o);
    /* tied embeddings with a pipeline: after the backward the first and the last stage allreduce the
     * word-embedding gradient (Vp/t x h) between them, before the optimizer (Megatron-LM 2021,
     * megatron/training.py train_step: all_reduce(word_embeddings_weight grad, embedding group)) */
    if (pp > 1 && x->d.tied) {
        const double gb = o->grad_reduce_bytes > 0 ? o->grad_reduce_bytes : 4.0;
        mt_plan_comm emb = { x->d.Vp / t * x->d.C * gb, 1.0, mt_plan_spans_nodes(gpu, (long)t * x->cp * x->dp, pp), 0.0 };
        comm_time(&emb, gpu, o);
        p->t_emb_ar_s = emb.exposed_s;
    }
    /* ring attention overlaps its transfers with the attention compute */
    p->cp_comm.exposed_s = fmax(0.0, p->cp_comm.exposed_s - attn_mb * x->m);
}

/* The cost model (docs/plan.md, "Step time"): GEMMs by shape at the sustained rate (or the probed rate),
 * the attention core, elementwise and norm passes by bytes, communication by algorithm (alpha + bytes /
 * beta, not overlapped), the pipeline bubble, unoverlapped dp, the optimizer by bytes. */
void mt_plan_cost_model(plan_ctx *x, mt_plan *p) {
    const dims *d = &x->d;
    const mt_plan_opts *o = x->o;
    const int t = x->t, pp = x->pp, m = x->m, bf16 = x->bf16;
    const double N = x->N, Ls = x->Ls, abytes = x->abytes;
    cost_ctx c;
    cost_setup(x, p, &c);
    p->threads_rank = c.threads;
    /* fp8 (Transformer Engine): the layers' linear GEMMs at the fp8 peak with 1-byte operands */
    cost_ctx c8 = c;
    p->peak_fp8_flops = x->gpu->peak_fp8_tflops * 1e12;
    p->fp8 = o->fp8 && p->peak_fp8_flops > 0 && x->bf16 && !x->gpu->probed;
    if (p->fp8) {
        c8.peak = p->peak_fp8_flops * mt_gpu_sustained_frac(x->gpu);
        c8.eb = 1.0;
    }
    const layer_time lt = layer_compute(x, p, &c, p->fp8 ? &c8 : &c);

    /* the output layer (last stage) and the embedding (first stage) */
    double hf = 0, hb = 0, hflops = 0;
    gemm_fb(&c, 1, N, d->Vp / t, d->C, &hf, &hb, &hflops);
    const double xent = o->xent_logit_bytes > 0 ? o->xent_logit_bytes : 16.0 + 2.0 * abytes; /* per logit */
    const double head_elem = N * (6.0 * d->C / (p->sp ? t : 1) * abytes + (d->Vp / t) * xent);
    const double t_head = hf + hb + bytes_time(&c, head_elem) + 6.0 * c.op_s;
    const double emb_elem = N * d->C * (4.0 * abytes + 8.0);
    const double t_emb = bytes_time(&c, emb_elem) + 3.0 * c.op_s;

    const mt_plan_rank *wr = p->worst_stage ? &p->last : &p->first;
    const double t_layer = lt.gemm + lt.attn + lt.elem;
    /* uneven stages: each its own layers (the middle ones too); the slowest sets the pace */
    const double comp_first = x->L_first * t_layer + t_emb, comp_last = x->L_last * t_layer + t_head;
    const double comp_mid = x->uneven && pp > 2 ? x->L_mid * t_layer : 0.0;
    /* a separate gradient-accumulation pass over the stage's parameters in every micro-batch but the first
     * (opts; the first backward's gradient is stored as it is: PyTorch's AccumulateGrad steals it) */
    const double t_acc = o->grad_accum_bytes > 0 && c.bw > 0 ? o->grad_accum_bytes * wr->n_elems * (m - 1.0) / m / c.bw
                                                             : 0.0;
    double comp_mb = (pp == 1 ? Ls * t_layer + t_emb + t_head : fmax(fmax(comp_first, comp_last), comp_mid)) + t_acc;
    const double head_share = pp == 1 || (comp_last >= comp_first && comp_last >= comp_mid) ? 1.0 : 0.0;
    const double Lw = pp == 1 || !x->uneven ? Ls /* the slowest stage's layers */
                      : head_share > 0 ? x->L_last : comp_first >= comp_mid ? x->L_first : x->L_mid;
    p->t_gemm_s = m * (Lw * lt.gemm + head_share * (hf + hb));
    p->t_attn_s = m * Lw * lt.attn;
    p->t_compute_s = comp_mb * m;
    p->t_elem_s = p->t_compute_s - p->t_gemm_s - p->t_attn_s; /* with the gradient-accumulation pass */
    plan_comm_times(x, p, Lw * lt.attn);
    const double slow_mb = tp_comm_overlap(x, p, &lt); /* the GEMMs beside SM-held overlaps */
    p2p_overlap(x, p, &lt);
    if (slow_mb > 0) {
        comp_mb += slow_mb;
        p->t_compute_s = comp_mb * m;
        p->t_gemm_s += m * slow_mb;
    }
    dp_overlap(x, p, wr, Lw * lt.fwd, Lw * (t_layer - lt.fwd));
    const double t_mb = comp_mb + (p->tp_comm.exposed_s + p->cp_comm.exposed_s + p->pp_comm.exposed_s +
                                   p->ep_comm.exposed_s) / m;
    p->t_mb_s = t_mb;
    /* uneven stages: the simulated makespan (plan_model.c) beyond m slowest-stage micro-batches */
    p->t_bubble_s = pp <= 1 ? 0.0 : x->uneven ? t_mb * (p->bubble_sim_makespan - m) : t_mb * (pp - 1.0) / x->v;
    /* not overlapped (Megatron's default without --overlap-grad-reduce); with the embedding allreduce */
    p->t_dp_s = p->dp_comm.exposed_s + p->t_emb_ar_s;
    if (o->grad_copy_bytes > 0 && (x->dp > 1 || x->cp > 1) && c.bw > 0) /* the reduction's buffer copies (opts) */
        p->t_dp_s += o->grad_copy_bytes * wr->n_elems / c.bw;
    /* AdamW streams master, m, v (read + write), the gradient (read), the param (write) of the parameters
     * this rank updates; zeroing the gradient buffer and the gradient norm (clipping) pass all of it */
    const double opt_elems = p->dist_opt ? (wr->n_elems - wr->n_expert_elems) / ((double)x->dp * x->cp) +
                                               wr->n_expert_elems / p->edp
                                         : wr->n_elems;
    const double opt_bytes = o->opt_param_bytes > 0 ? opt_elems * o->opt_param_bytes
                                                    : opt_elems * (bf16 ? 30.0 : 28.0) + wr->n_elems * 8.0;
    p->t_opt_s = c.bw > 0 ? opt_bytes / c.bw + 4.0 * c.op_s : 0.0;
    p->t_grad_zero_s = c.bw > 0 && o->opt_param_bytes <= 0 ? wr->n_elems * 4.0 / c.bw + c.op_s : 0.0;
    p->t_step_s = t_mb * m + p->t_bubble_s + p->t_dp_s + p->t_opt_s;
    p->mfu_est = p->peak_flops > 0 ? p->flops_model_iter / (p->n_gpus * p->peak_flops * p->t_step_s) : 0.0;
    p->mfu_fp8_est = p->fp8 ? p->flops_model_iter / (p->n_gpus * p->peak_fp8_flops * p->t_step_s) : 0.0;
}

