/* pipeline.c — executes a pipeline schedule table on one stage (see pipeline.h and the
 * pseudocode in docs/pipeline.md): F / B of (micro-batch, chunk) on the slot's activation
 * buffer, transfers in comm groups (group_start / group_end around each run of steps with one
 * group number). Chunk k of this stage holds local layers [k*Lc, (k+1)*Lc) (virtual stage
 * k*p + s; with the embedding / loss counted as layers the first and last virtual stages one fewer,
 * possibly none: mt_param_chunk_l0 / mt_param_chunk_layers); virtual stage 0 embeds the tokens, the
 * last virtual stage computes the loss.
 * Rule: every transfer is n_act elements of the compute dtype; no shapes are exchanged. */
#include "train/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

mt_status mt_pipeline_init(mt_pipeline *pp, mt_model *model, int m, int m_eval, const mt_parallel_state *ps) {
    mt_status st = MT_OK;
    mt_backend *be = model->be;
    mt_comm *comm = mt_pstate_group(ps, MT_PG_PP)->comm;
    memset(pp, 0, sizeof *pp);
    pp->comm = comm;
    pp->p = model->pl.pp;
    pp->v = model->pl.vpp;
    pp->m = m;
    pp->m_max = m;
    pp->stage = model->pl.stage;
    pp->kind = mt_schedule_default(pp->p, pp->v);
    if (!comm || comm->size != pp->p || comm->rank != pp->stage)
        return mt_errorf(MT_ERR_INTERNAL, "pipeline: pp communicator of %d ranks (rank %d) for stage %d of %d",
                         comm ? comm->size : 0, comm ? comm->rank : -1, pp->stage, pp->p);
    MT_CHECK(mt_schedule_check(pp->kind, pp->p, m, pp->v));
    if (mt_schedule_check(pp->kind, pp->p, m_eval, pp->v) != MT_OK)
        return mt_errorf(MT_ERR_CONFIG, "the evaluation's %d micro-batches (training.eval_global_batch / (micro_batch * "
                         "dp)): %s; set training.eval_global_batch (--eval-global-batch-size) to fit", m_eval, mt_last_error());
    const int cap_train = mt_schedule_max_steps(pp->kind, pp->p, m, pp->v);
    const int cap_eval = mt_schedule_max_steps(pp->kind, pp->p, m_eval, pp->v);
    const int cap = cap_train > cap_eval ? cap_train : cap_eval;
    pp->cap = cap;
    pp->steps = malloc((size_t)cap * sizeof *pp->steps);
    pp->fsteps = malloc((size_t)cap * sizeof *pp->fsteps);
    pp->tokens = malloc((size_t)model->al.B * (model->pl.T + 1) * sizeof(int32_t)); /* whole sequences */
    if (!pp->steps || !pp->fsteps || !pp->tokens) {
        st = mt_errorf(MT_ERR_OOM, "pipeline: schedule tables of %d steps", cap);
        goto out;
    }
    MT_CHECK(mt_schedule_build(pp->kind, pp->p, m, pp->v, pp->stage, pp->steps, cap, &pp->n_steps));
    MT_CHECK(mt_schedule_build_forward(pp->kind, pp->p, m_eval, pp->v, pp->stage, pp->fsteps, cap, &pp->n_fsteps, NULL));
    pp->n_slots = mt_schedule_max_in_flight(pp->kind, pp->p, m, pp->v, pp->stage);
    for (int i = 0; i < pp->n_fsteps; i++) /* forward-only slots are a subset (tested: 1) */
        if (pp->fsteps[i].slot + 1 > pp->n_slots) pp->n_slots = pp->fsteps[i].slot + 1;
    pp->slot = calloc((size_t)pp->n_slots, sizeof *pp->slot);
    if (!pp->slot) {
        st = mt_errorf(MT_ERR_OOM, "pipeline: %d slots", pp->n_slots);
        goto out;
    }
    pp->slot[0] = model->acts.base;
    for (int k = 1; k < pp->n_slots; k++) MT_CHECK(be->i->alloc(be, model->al.n_bytes, &pp->slot[k]));
    pp->n_act = (size_t)model->al.N_r * model->pl.C;
    const size_t act_bytes = pp->n_act * mt_dtype_bytes(model->act);
    MT_CHECK(be->i->alloc(be, act_bytes, &pp->act_out));
    MT_CHECK(be->i->alloc(be, act_bytes, &pp->grad_out));
    const size_t n_cost = 4 * (size_t)pp->p * pp->v;
    MT_CHECK(be->i->alloc(be, n_cost * sizeof(float) > 256 ? n_cost * sizeof(float) : 256, &pp->stats_dev));
    pp->cost = calloc(n_cost, sizeof *pp->cost);
    pp->cost_host = calloc(n_cost, sizeof *pp->cost_host);
    pp->cost_mean = calloc(n_cost / 2, sizeof *pp->cost_mean);
    if (!pp->cost || !pp->cost_host || !pp->cost_mean) {
        st = mt_errorf(MT_ERR_OOM, "pipeline: %zu cost sums", n_cost);
        goto out;
    }
    pp->cost_cpu = be->i->name && !strcmp(be->i->name, "cpu");
out:
    if (st != MT_OK) mt_pipeline_free(pp, model);
    return st;
}

mt_status mt_pipeline_set_micro_batches(mt_pipeline *pp, int m) {
    if (m == pp->m) return MT_OK;
    if (m > pp->m_max || mt_schedule_max_steps(pp->kind, pp->p, m, pp->v) > pp->cap)
        return mt_errorf(MT_ERR_INTERNAL, "pipeline: %d micro-batches, more than the %d it was built for", m, pp->m_max);
    mt_status st = mt_schedule_check(pp->kind, pp->p, m, pp->v);
    if (st == MT_OK) st = mt_schedule_build(pp->kind, pp->p, m, pp->v, pp->stage, pp->steps, pp->cap, &pp->n_steps);
    if (st == MT_OK) pp->m = m;
    return st;
}

void mt_pipeline_free(mt_pipeline *pp, mt_model *model) {
    mt_backend *be = model->be;
    if (pp->slot) {
        for (int k = 1; k < pp->n_slots; k++)
            if (pp->slot[k]) be->i->free(be, pp->slot[k]);
    }
    if (pp->act_out) be->i->free(be, pp->act_out);
    if (pp->grad_out) be->i->free(be, pp->grad_out);
    if (pp->stats_dev) be->i->free(be, pp->stats_dev);
    free(pp->slot);
    free(pp->steps);
    free(pp->fsteps);
    free(pp->tokens);
    free(pp->cost);
    free(pp->cost_host);
    free(pp->cost_mean);
    memset(pp, 0, sizeof *pp);
}

size_t mt_pipeline_extra_bytes(const mt_pipeline *pp, const mt_model *model) {
    return (size_t)(pp->n_slots > 0 ? pp->n_slots - 1 : 0) * model->al.n_bytes +
           2 * pp->n_act * mt_dtype_bytes(model->act);
}

/* the part of the stage's model that step x runs: chunk x->chunk's layers, the embedding on the
 * first virtual stage, the head on the last */
static mt_model_part step_part(const mt_pipeline *pp, const mt_model *md, const mt_pp_step *x) {
    const int l0 = mt_param_chunk_l0(&md->pl, x->chunk);
    return (mt_model_part){.l0 = l0, .l1 = l0 + mt_param_chunk_layers(&md->pl, x->chunk),
                           .embed = pp->stage == 0 && x->chunk == 0,
                           .head = pp->stage == pp->p - 1 && x->chunk == pp->v - 1};
}

/* the activation buffer of step x: its slot, holding its chunk's layers (at most Lc) */
static mt_acts step_acts(const mt_pipeline *pp, const mt_model *md, const mt_pp_step *x) {
    return (mt_acts){.base = pp->slot[x->slot], .l0 = mt_param_chunk_l0(&md->pl, x->chunk)};
}

/* F of (mb, chunk) */
static mt_status run_fwd(mt_pipeline *pp, mt_model *md, const mt_pp_step *x, mt_pp_fetch_fn fetch, void *ctx,
                         float dloss) {
    mt_status st = MT_OK;
    const mt_model_part part = step_part(pp, md, x);
    const mt_acts a = step_acts(pp, md, x);
    if (part.embed || part.head) { /* tokens for the embedding, targets for the loss: the same samples */
        MT_CHECK(fetch(ctx, x->mb, pp->tokens));
        MT_CHECK(mt_model_load_micro(md, &a, pp->tokens));
    }
    MT_CHECK(mt_model_forward(md, &a, part));
    if (part.head) {
        MT_CHECK(mt_model_loss(md, &a, dloss));
    } else {
        MT_CHECK(md->be->i->copy_d2d(md->be, pp->act_out, mt_model_resid(md, &a, part.l1),
                                     pp->n_act * mt_dtype_bytes(md->act)));
    }
out:
    return st;
}

/* B of (mb, chunk) */
static mt_status run_bwd(mt_pipeline *pp, mt_model *md, const mt_pp_step *x) {
    mt_status st = MT_OK;
    const mt_model_part part = step_part(pp, md, x);
    const mt_acts a = step_acts(pp, md, x);
    MT_CHECK(mt_model_backward(md, &a, part));
    if (!part.embed)
        MT_CHECK(md->be->i->copy_d2d(md->be, pp->grad_out, mt_model_dresid(md, &a), pp->n_act * mt_dtype_bytes(md->act)));
out:
    return st;
}

/* Megatron's name for a transfer group holding kinds (bit 0 send act, 1 recv act, 2 send grad,
 * 3 recv grad) */
static mt_timer_id group_timer(unsigned k) {
    switch (k) {
    case 1u: return MT_TM_FWD_SEND;
    case 2u: return MT_TM_FWD_RECV;
    case 4u: return MT_TM_BWD_SEND;
    case 8u: return MT_TM_BWD_RECV;
    case 3u: return MT_TM_FS_FR;
    case 9u: return MT_TM_FS_BR;
    case 6u: return MT_TM_BS_FR;
    case 12u: return MT_TM_BS_BR;
    default: return MT_TM_FB_SR;
    }
}

/* process CPU time in ms (the cost clock on the CPU backend) */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

mt_status mt_pipeline_run(mt_pipeline *pp, mt_model *md, mt_pp_fetch_fn fetch, void *ctx, float dloss,
                          int forward_only) {
    mt_status st = MT_OK;
    const mt_pp_step *steps = forward_only ? pp->fsteps : pp->steps;
    const int n = forward_only ? pp->n_fsteps : pp->n_steps;
    mt_comm *c = pp->comm;
    const mt_dtype dt = md->act;
    double t_begin = mt_clock_ms(), busy = 0, g0 = -1;
    unsigned g_kinds = 0; /* what the open transfer group holds (group_timer's bits) */
    for (int i = 0; i < n; i++) {
        const mt_pp_step *x = &steps[i];
        if (x->op == MT_PP_FWD || x->op == MT_PP_BWD) {
            const double c0 = pp->cost_cpu ? cpu_ms() : 0;
            double t0 = mt_clock_ms();
            if (x->op == MT_PP_FWD) {
                MT_CHECK(run_fwd(pp, md, x, fetch, ctx, forward_only ? 0.0f : dloss));
            } else {
                MT_CHECK(run_bwd(pp, md, x));
            }
            MT_CHECK(md->be->i->sync(md->be)); /* device time counts as busy, not as waiting */
            const double t1 = mt_clock_ms();
            busy += t1 - t0;
            if (!forward_only) { /* this step's cost, by virtual stage */
                const int pv = pp->p * pp->v, vs = x->chunk * pp->p + pp->stage, b = x->op == MT_PP_BWD;
                pp->cost[b * pv + vs] += pp->cost_cpu ? cpu_ms() - c0 : t1 - t0;
                pp->cost[(2 + b) * pv + vs] += 1;
            }
            mt_timing_span(pp->tm, x->op == MT_PP_FWD ? MT_TM_FWD : MT_TM_BWD, t0, t1, x->mb, x->chunk);
            continue;
        }
        if (i == 0 || steps[i - 1].group != x->group) {
            g0 = mt_timing_begin(pp->tm, MT_TM_FWD_SEND);
            g_kinds = 0;
            MT_CHECK(c->i->group_start(c));
        }
        g_kinds |= 1u << (x->op == MT_PP_SEND_ACT ? 0 : x->op == MT_PP_RECV_ACT ? 1 : x->op == MT_PP_SEND_GRAD ? 2 : 3);
        const mt_acts a = step_acts(pp, md, x);
        switch (x->op) {
        case MT_PP_SEND_ACT: MT_CHECK(c->i->send(c, pp->act_out, pp->n_act, dt, x->peer)); break;
        case MT_PP_SEND_GRAD: MT_CHECK(c->i->send(c, pp->grad_out, pp->n_act, dt, x->peer)); break;
        case MT_PP_RECV_ACT: MT_CHECK(c->i->recv(c, mt_model_resid(md, &a, a.l0), pp->n_act, dt, x->peer)); break;
        case MT_PP_RECV_GRAD:
            MT_CHECK(c->i->recv(c, mt_model_dresid(md, &a), pp->n_act, dt, x->peer));
            break;
        default: st = mt_errorf(MT_ERR_INTERNAL, "pipeline: step %d has op %d", i, (int)x->op); goto out;
        }
        if (i + 1 == n || steps[i + 1].group != x->group) {
            MT_CHECK(c->i->group_end(c));
            mt_timing_end(pp->tm, group_timer(g_kinds), g0, x->mb, x->chunk);
        }
    }
out:
    /* a failed group is left open: cmd/ aborts the communicators on any error */
    pp->busy_ms = busy;
    pp->table_ms = mt_clock_ms() - t_begin;
    return st;
}

mt_status mt_pipeline_bubble(mt_pipeline *pp, mt_backend *be, double busy_ms, double table_ms, double *bubble) {
    mt_status st = MT_OK;
    float s[2] = {(float)busy_ms, (float)table_ms};
    MT_CHECK(be->i->copy_h2d(be, pp->stats_dev, s, sizeof s));
    MT_CHECK(pp->comm->i->allreduce(pp->comm, pp->stats_dev, pp->stats_dev, 2, MT_F32, MT_RED_SUM));
    MT_CHECK(be->i->copy_d2h(be, s, pp->stats_dev, sizeof s));
    *bubble = s[1] > 0 ? 1.0 - (double)s[0] / (double)s[1] : 0.0;
out:
    return st;
}

mt_status mt_pipeline_costs(mt_pipeline *pp, mt_backend *be, double *f_ms, double *b_ms) {
    mt_status st = MT_OK;
    const int pv = pp->p * pp->v, n = 4 * pv;
    for (int i = 0; i < n; i++) pp->cost_host[i] = (float)pp->cost[i];
    memset(pp->cost, 0, (size_t)n * sizeof *pp->cost);
    MT_CHECK(be->i->copy_h2d(be, pp->stats_dev, pp->cost_host, (size_t)n * sizeof(float)));
    MT_CHECK(pp->comm->i->allreduce(pp->comm, pp->stats_dev, pp->stats_dev, (size_t)n, MT_F32, MT_RED_SUM));
    MT_CHECK(be->i->copy_d2h(be, pp->cost_host, pp->stats_dev, (size_t)n * sizeof(float)));
    for (int i = 0; i < pv; i++) {
        const float *c = pp->cost_host;
        f_ms[i] = c[2 * pv + i] > 0 ? c[i] / c[2 * pv + i] : 0;
        b_ms[i] = c[3 * pv + i] > 0 ? c[pv + i] / c[3 * pv + i] : 0;
    }
out:
    return st;
}
