/* plan_search.c — `mtrain plan --search`: every valid layout of the recipe's model on N GPUs,
 * those that fit ranked by the cost model's time per token (docs/plan.md), the top ten kept
 * with a one-line reason each, and a paragraph on why the first wins.
 * Rules: a candidate is valid when mt_recipe_validate (the trainer's own checks) and
 * mt_plan_check accept it; the model, global batch, sequence and context parallelism stay
 * as the recipe has them. No I/O. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

static double per_token(const mt_plan *p) { return p->t_step_s / p->tokens_iter; }

static int better(const mt_plan *a, const mt_plan *b) {
    const double x = per_token(a), y = per_token(b);
    if (x != y) return x < y;
    return a->need_bytes < b->need_bytes;
}

static void reason(mt_plan_candidate *c) {
    const mt_plan *p = &c->plan;
    const double T = p->t_step_s > 0 ? p->t_step_s : 1;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    snprintf(c->reason, sizeof c->reason,
             "compute %.0f%% (matmul eff %.0f%%), bubble %.1f%%, tp %.1f%%%s, pp %.1f%%%s, dp %.1f%%%s, "
             "ep %.1f%%, cp %.1f%%, optimizer %.1f%%; memory %.1f of %.1f GiB usable",
             100 * p->t_compute_s / T, 100 * p->gemm_eff, 100 * p->t_bubble_s / T, 100 * p->tp_comm.exposed_s / T,
             p->tp > 1 ? (p->tp_comm.network ? " net" : " nvlink") : "", 100 * p->pp_comm.exposed_s / T,
             p->pp > 1 ? (p->pp_comm.network ? " net" : " nvlink") : "", 100 * p->t_dp_s / T,
             p->dp * p->cp > 1 ? (p->dp_comm.network ? " net" : " nvlink") : "", 100 * p->ep_comm.exposed_s / T,
             100 * p->cp_comm.exposed_s / T, 100 * p->t_opt_s / T, p->need_bytes / gib, p->usable_bytes / gib);
}

/* The components of the step time, named, for "why #1 wins". */
static void parts(const mt_plan *p, double v[10]) {
    v[0] = p->t_gemm_s;
    v[8] = p->t_attn_s;
    v[9] = p->t_elem_s;
    v[1] = p->t_bubble_s;
    v[2] = p->tp_comm.exposed_s;
    v[3] = p->pp_comm.exposed_s;
    v[4] = p->t_dp_s;
    v[5] = p->ep_comm.exposed_s;
    v[6] = p->cp_comm.exposed_s;
    v[7] = p->t_opt_s;
}
static const char *const k_part_names[10] = { "GEMMs", "pipeline bubble", "tensor-parallel communication",
                                             "pipeline send/recv", "data-parallel gradient sync",
                                             "expert all-to-all", "context-parallel exchange", "optimizer step",
                                             "attention core", "elementwise and norm passes" };

static void explain(mt_plan_search_result *s, const mt_plan *recipe_plan, int recipe_valid, int recipe_fits) {
    char l1[160], l2[160];
    size_t used = 0;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const mt_plan *a = &s->top[0].plan;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (used < sizeof s->why) {                                                                \
            int w_ = snprintf(s->why + used, sizeof s->why - used, __VA_ARGS__);                  \
            if (w_ > 0) used += (size_t)w_;                                                        \
        }                                                                                          \
    } while (0)
    mt_plan_layout_str(a, l1, sizeof l1);
    ADD("#1 (%s) has the lowest estimated step time, %.2f s (%.0f tokens/s, MFU %.1f%%), and needs %.1f of "
        "%.1f GiB usable.", l1, a->t_step_s, a->tokens_iter / a->t_step_s, 100 * a->mfu_est, a->need_bytes / gib,
        a->usable_bytes / gib);
    if (s->n_top > 1) {
        const mt_plan *b = &s->top[1].plan;
        double va[10], vb[10];
        parts(a, va);
        parts(b, vb);
        /* saving of #1 per component, #2 scaled to #1's tokens per step */
        double g[10];
        int i1 = -1, i2 = -1;
        for (int i = 0; i < 10; i++) {
            g[i] = vb[i] * (a->tokens_iter / b->tokens_iter) - va[i];
            if (g[i] <= 0) continue;
            if (i1 < 0 || g[i] > g[i1]) {
                i2 = i1;
                i1 = i;
            } else if (i2 < 0 || g[i] > g[i2]) {
                i2 = i;
            }
        }
        mt_plan_layout_str(b, l2, sizeof l2);
        ADD(" #2 (%s) is %.1f%% slower per token", l2, 100 * (per_token(b) / per_token(a) - 1));
        if (i1 >= 0) {
            ADD(": it spends more on %s (%.2f s vs %.2f s)", k_part_names[i1], vb[i1], va[i1]);
            if (i2 >= 0) ADD(" and %s (%.2f s vs %.2f s)", k_part_names[i2], vb[i2], va[i2]);
        }
        ADD(".");
    }
    if (s->have_faster_nofit) {
        mt_plan_layout_str(&s->faster_nofit.plan, l2, sizeof l2);
        ADD(" %ld faster layout%s do%s not fit: the fastest, %s (%.2f s), needs %.1f GiB.", s->n_faster_nofit,
            s->n_faster_nofit == 1 ? "" : "s", s->n_faster_nofit == 1 ? "es" : "", l2,
            s->faster_nofit.plan.t_step_s, s->faster_nofit.plan.need_bytes / gib);
    }
    if (recipe_valid) {
        mt_plan_layout_str(recipe_plan, l2, sizeof l2);
        if (recipe_fits) {
            ADD(" The recipe's own layout (%s) ranks #%d at %.2f s per step", l2, s->recipe_rank,
                recipe_plan->t_step_s);
            if (s->recipe_rank != 1) { /* where #1 gains on it, largest terms first (per #1's tokens) */
                double va[10], vr[10], g[10];
                int used_i[10] = { 0 }, n_said = 0;
                parts(a, va);
                parts(recipe_plan, vr);
                for (int i = 0; i < 10; i++) g[i] = vr[i] * (a->tokens_iter / recipe_plan->tokens_iter) - va[i];
                for (int k = 0; k < 3; k++) {
                    int best = -1;
                    for (int i = 0; i < 10; i++)
                        if (!used_i[i] && g[i] > 0 && (best < 0 || g[i] > g[best])) best = i;
                    if (best < 0 || g[best] < 0.01 * a->t_step_s) break;
                    used_i[best] = 1;
                    ADD("%s %s %.2f s vs %.2f s", n_said ? "," : "; #1 saves on", k_part_names[best], vr[best],
                        va[best]);
                    n_said++;
                }
            }
            ADD(".");
        }
        else
            ADD(" The recipe's own layout (%s) does not fit (needs %.1f GiB).", l2, recipe_plan->need_bytes / gib);
    } else {
        ADD(" The recipe's own layout is not valid on %d GPUs.", s->n_gpus);
    }
#undef ADD
}

static void divisors(int n, int *out, int *n_out, int max_out) {
    *n_out = 0;
    for (int d = 1; d <= n && *n_out < max_out; d++)
        if (n % d == 0) out[(*n_out)++] = d;
}

typedef struct {
    double *v;
    size_t n, cap;
} dvec;

static int dvec_push(dvec *a, double x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 1024;
        double *v = realloc(a->v, cap * sizeof *v);
        if (!v) return 0;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 1;
}

mt_status mt_plan_search(const mt_recipe *r, int n_gpus, const mt_gpu_spec *gpu, const mt_plan_opts *o,
                         mt_plan_search_result *res) {
    static const int k_tp[] = { 1, 2, 4, 8 }, k_mb[] = { 1, 2, 4, 8 };
    mt_status st = MT_OK;
    mt_recipe *c = malloc(sizeof *c);
    mt_plan *p = malloc(sizeof *p), *rp = malloc(sizeof *rp);
    dvec fit = { 0 }, nofit = { 0 };
    int pps[64], n_pp, vs[64], n_v, eps[64], n_ep;
    memset(res, 0, sizeof *res);
    res->n_gpus = n_gpus;
    res->gpu = *gpu;
    if (!c || !p || !rp) {
        st = mt_errorf(MT_ERR_OOM, "plan --search: out of memory");
        goto out;
    }
    if (n_gpus < 1) {
        st = mt_errorf(MT_ERR_CONFIG, "plan --search: --gpus must be at least 1");
        goto out;
    }
    const int L = r->model.layers, cp = r->parallel.context > 0 ? r->parallel.context : 1;
    const int moe = r->model.moe.experts > 0, node = gpu->is_host ? 1 << 30 : gpu->gpus_per_node;
    /* uneven stages: with the embedding / loss counted as layers, every pp dividing the layers plus them
     * (each pp > 1 with the recipe's keys); with first / last stage layers given, the recipe's own pp keeps
     * them and the others split evenly */
    const mt_parallel_cfg *rpc = &r->parallel;
    const int split_extra = (rpc->embedding_in_split ? 1 : 0) + (rpc->loss_in_split ? 1 : 0);
    const int fixed_ends = rpc->first_stage_layers > 0 || rpc->last_stage_layers > 0;
    divisors(L + split_extra > 0 ? L + split_extra : 1, pps, &n_pp, 64);
    if (fixed_ends && rpc->pipeline > 1 && L % rpc->pipeline && n_pp < 64) pps[n_pp++] = rpc->pipeline;

    /* the recipe's own layout on n_gpus, for the comparison */
    int recipe_valid = 0;
    *c = *r;
    c->parallel.data = 0; /* its tp, pp, cp with dp = n_gpus / (tp pp cp) */
    if (mt_recipe_validate(c, n_gpus) == MT_OK && mt_plan_check(c, n_gpus, gpu) == MT_OK &&
        mt_plan_compute(c, n_gpus, gpu, o, rp) == MT_OK)
        recipe_valid = 1;
    mt_clear_error();

    for (size_t it = 0; it < sizeof k_tp / sizeof k_tp[0]; it++) {
        const int tp = k_tp[it];
        if (tp > node) continue;
        for (int ip = 0; ip < n_pp; ip++) {
            const int pp = pps[ip];
            if (n_gpus % ((long)tp * pp * cp)) continue;
            const int dp = n_gpus / (tp * pp * cp);
            const int uneven = pp > 1 && (split_extra ? 1 : fixed_ends && pp == rpc->pipeline);
            if (pp > 1 && (!uneven || split_extra)) divisors((L + (uneven ? split_extra : 0)) / pp, vs, &n_v, 64);
            else vs[0] = 1, n_v = 1; /* first / last stage counts: 1F1B */
            if (moe) {
                divisors(r->model.moe.experts, eps, &n_ep, 64);
            } else {
                eps[0] = 1;
                n_ep = 1;
            }
            for (int iv = 0; iv < n_v; iv++)
                for (int ie = 0; ie < n_ep; ie++) {
                    if (((long)dp * cp) % eps[ie]) continue;
                    for (size_t im = 0; im < sizeof k_mb / sizeof k_mb[0]; im++)
                        for (int rc = 0; rc < 3; rc++)
                            for (int sp = 0; sp <= (tp > 1); sp++)
                                for (int dopt = 0; dopt <= ((long)dp * cp > 1); dopt++) {
                                    *c = *r;
                                    c->parallel.tensor = tp;
                                    c->parallel.pipeline = pp;
                                    c->parallel.virtual_pipeline = vs[iv];
                                    c->parallel.data = 0; /* auto: n_gpus / (tp pp cp) */
                                    c->parallel.expert = eps[ie];
                                    c->parallel.sequence_parallel = sp;
                                    c->parallel.distributed_optimizer = dopt;
                                    c->training.micro_batch = k_mb[im];
                                    c->training.recompute = (mt_recompute)rc;
                                    if (!uneven) {
                                        c->parallel.first_stage_layers = c->parallel.last_stage_layers = 0;
                                        c->parallel.embedding_in_split = c->parallel.loss_in_split = 0;
                                    }
                                    res->n_tried++;
                                    if (mt_recipe_validate(c, n_gpus) != MT_OK || mt_plan_check(c, n_gpus, gpu) != MT_OK) {
                                        if (!res->first_problem[0])
                                            snprintf(res->first_problem, sizeof res->first_problem, "%s",
                                                     mt_last_error());
                                        continue;
                                    }
                                    MT_CHECK(mt_plan_compute(c, n_gpus, gpu, o, p));
                                    res->n_valid++;
                                    if (p->t_step_s <= 0) continue; /* no peak known: nothing to rank */
                                    if (!res->have_smallest || p->need_bytes < res->smallest.plan.need_bytes) {
                                        res->smallest.plan = *p;
                                        res->have_smallest = 1;
                                    }
                                    if (!p->fits) {
                                        if (!dvec_push(&nofit, per_token(p))) goto oom;
                                        if (!res->have_faster_nofit || better(p, &res->faster_nofit.plan)) {
                                            res->faster_nofit.plan = *p;
                                            res->have_faster_nofit = 1;
                                        }
                                        continue;
                                    }
                                    res->n_fit++;
                                    if (!dvec_push(&fit, per_token(p))) goto oom;
                                    /* insert into the sorted top list */
                                    int pos = res->n_top;
                                    while (pos > 0 && better(p, &res->top[pos - 1].plan)) pos--;
                                    if (pos >= MT_PLAN_TOP) continue;
                                    int last = res->n_top < MT_PLAN_TOP ? res->n_top : MT_PLAN_TOP - 1;
                                    memmove(&res->top[pos + 1], &res->top[pos], (size_t)(last - pos) * sizeof res->top[0]);
                                    res->top[pos].plan = *p;
                                    if (res->n_top < MT_PLAN_TOP) res->n_top++;
                                }
                }
        }
    }
    mt_clear_error();
    for (int i = 0; i < res->n_top; i++) reason(&res->top[i]);
    if (res->have_smallest) reason(&res->smallest);
    if (res->n_top > 0) {
        const double best = per_token(&res->top[0].plan);
        res->n_faster_nofit = 0;
        for (size_t i = 0; i < nofit.n; i++) res->n_faster_nofit += nofit.v[i] < best;
        if (res->n_faster_nofit == 0) res->have_faster_nofit = 0;
        else reason(&res->faster_nofit);
        if (recipe_valid && rp->fits && rp->t_step_s > 0) {
            res->recipe_rank = 1;
            for (size_t i = 0; i < fit.n; i++) res->recipe_rank += fit.v[i] < per_token(rp);
            res->recipe_step_s = rp->t_step_s;
        }
        explain(res, rp, recipe_valid, recipe_valid && rp->fits);
    }
    goto out;
oom:
    st = mt_errorf(MT_ERR_OOM, "plan --search: out of memory");
out:
    free(fit.v);
    free(nofit.v);
    free(c);
    free(p);
    free(rp);
    return st;
}
