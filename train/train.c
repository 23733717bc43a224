/* train.c — one rank's training loop. Per iteration: zero grads; for each of this rank's
 * micro-batches, fetch its samples (a pure function of the consumed-samples count and the
 * rank's dp coordinate, so the data order is a property of the global batch, never of dp;
 * the ranks of a tp group read the same samples), forward + backward (tensor-parallel
 * collectives inside the model; pipeline parallelism: train/pipeline.c runs the schedule table,
 * stage 0 and the last stage reading the same samples for tokens and targets); then one call
 * synchronises the gradients per gradient class (parallel/grad_sync.h: tp-partial and embedding
 * pre-reductions, dp x cp allreduce in buckets or the distributed optimizer's reduce-scatter, the
 * squared norm and the loss summed over the world; with parallel.overlap_grad_reduce the buckets are
 * reduced on a communication thread during backward and the parameter gather overlaps the next
 * forward, through the model's part hook: parallel/grad_overlap.h); one host read of the two scalars; skip the
 * update if either is not finite; clip by the global norm; AdamW on this rank's optimizer shards;
 * with the distributed optimizer, allgather the updated parameters; log and TensorBoard events (one rank: Megatron's
 * last stage, tp 0, dp 0), with the measured pipeline bubble beside the formula's.
 * Per-phase timers (logging.timing_level, train/timers.h) and the profiler trace (logging.profile,
 * train/profile.h) hook in through one probe (core/timing.h) passed to the pipeline and grad sync.
 * With training.rerun_mode (Megatron's rerun state machine, train/rerun.h) the forward / backward
 * and gradient sync run in its loop: a rejected local loss or gradient norm reruns them on the same
 * data and weights, and its verdict may save the state before the iteration and end the job.
 * The trainer the loop runs on is built before it and freed after it in train_open.c (train_internal.h).
 * Rule: nothing is allocated inside the loop (test/unit/test_train_alloc.c counts). */
#include "train/train_internal.h"

#include <math.h>
#include <string.h>

#include "core/clock.h"
#include "core/device_peak.h"
#include "train/moe_bias.h"
#include "train/optim.h"
#include "train/stop_request.h"

/* Fills B rows of T+1 tokens for micro-batch `mb` of the global batch that starts at
 * `consumed` (Megatron's order: micro-batch-major, then dp rank, then row). */
typedef struct {
    const trainer *t;
    mt_blended_dataset *ds;
    int64_t consumed;
    mt_timing *tm;
} fetch_ctx;

/* Every token id of a fetched row is in the model's vocabulary: a .bin changed after its index was
 * written (or tokenised with another vocabulary) is named here, not as a row of the loss. */
static mt_status check_row(const fetch_ctx *f, int64_t sample, const int32_t *row) {
    const int V = f->t->model.pl.V, n = f->t->T + 1;
    for (int i = 0; i < n; i++) {
        if (row[i] >= 0 && row[i] < V) continue;
        int ds;
        int64_t j;
        mt_blended_dataset_source(f->ds, sample, &ds, &j);
        return mt_errorf(MT_ERR_DATA, "%s.bin: sample %lld (token %d of its row) holds id %d, outside the model's "
                         "vocabulary of %d tokens: the file changed after its .idx was written, or was tokenised "
                         "with another vocabulary; preprocess it again with the recipe's tokenizer",
                         mt_blended_dataset_prefix(f->ds, ds), (long long)j, i, row[i], V);
    }
    return MT_OK;
}

static mt_status fetch_cb(void *ctx, int mb, int32_t *tokens) {
    const fetch_ctx *f = ctx;
    const trainer *t = f->t;
    const double t0 = mt_timing_begin(f->tm, MT_TM_BATCH);
    for (int b = 0; b < t->B; b++) {
        int64_t sample = f->consumed + (int64_t)mb * t->B * t->dp + (int64_t)t->dp_rank * t->B + b;
        int32_t *row = tokens + (size_t)b * (t->T + 1);
        mt_status st = mt_blended_dataset_get(f->ds, sample, row);
        if (st == MT_OK) st = check_row(f, sample, row);
        if (st != MT_OK) return st;
    }
    mt_timing_end(f->tm, MT_TM_BATCH, t0, mb, -1);
    return MT_OK;
}

/* mt_model_step_micro's pieces, timed: forward (+ loss) and backward of micro-batch mb */
static mt_status micro_step(trainer *t, int mb, float dloss, int backward) {
    mt_status st = MT_OK;
    mt_model *m = &t->model;
    mt_timing *tm = &t->tm.probe;
    double t0 = mt_timing_begin(tm, MT_TM_FWD);
    MT_CHECK(mt_model_load_micro(m, &m->acts, t->tokens));
    MT_CHECK(mt_model_forward(m, &m->acts, mt_model_whole(m)));
    MT_CHECK(mt_model_loss(m, &m->acts, dloss));
    mt_timing_end(tm, MT_TM_FWD, t0, mb, 0);
    if (!backward) goto out;
    t0 = mt_timing_begin(tm, MT_TM_BWD);
    MT_CHECK(mt_model_backward(m, &m->acts, mt_model_whole(m)));
    mt_timing_end(tm, MT_TM_BWD, t0, mb, 0);
out:
    return st;
}

/* Forward (+ backward) of every micro-batch of this rank for the batch starting at `consumed`. */
static mt_status run_batch(trainer *t, mt_blended_dataset *ds, int64_t consumed, float dloss, int backward) {
    mt_status st = MT_OK;
    fetch_ctx fc = {.t = t, .ds = ds, .consumed = consumed, .tm = &t->tm.probe};
    t->model.moe_dloss = dloss; /* MoE: the aux / z-loss gradients on every pipeline stage */
    if (t->pipe_exec) return mt_pipeline_run(t->pipe_exec, &t->model, fetch_cb, &fc, dloss, !backward);
    for (int mb = 0; mb < t->n_micro; mb++) {
        MT_CHECK(fetch_cb(&fc, mb, t->tokens));
        MT_CHECK(micro_step(t, mb, dloss, backward));
    }
out:
    return st;
}

/* This iteration's batch under batch-size ramp-up (Megatron's: a function of the samples consumed);
 * the pipeline's table is rebuilt in place when the micro-batch count changes. */
static mt_status set_batch(trainer *t, int64_t consumed) {
    t->G_cur = mt_recipe_global_batch_at(t->r, consumed);
    t->n_micro = t->G_cur / (t->B * t->dp);
    t->tokens_per_iter = (double)t->G_cur * t->T;
    return t->pipe_exec ? mt_pipeline_set_micro_batches(t->pipe_exec, t->n_micro) : MT_OK;
}

/* Megatron's evaluate(): eval_iters iterations of training.eval_global_batch sequences each
 * (eval_global_batch / (micro_batch * dp) micro-batches per rank, the forward table's), iteration e
 * reading samples [e * EG, (e + 1) * EG) of the split; the loss is the token mean over all of them. */
static mt_status evaluate(trainer *t, mt_blended_dataset *ds, double *loss) {
    mt_status st = MT_OK;
    const int64_t n_tok = (int64_t)t->r->logging.eval_iters * t->EG * t->T;
    float sum = 0, unused = 0;
    const int n_micro = t->n_micro;
    t->n_micro = t->n_micro_eval;
    mt_timers_pause(&t->tm); /* Megatron's timers leave evaluation out too */
    MT_CHECK(mt_model_zero_grads(&t->model));
    for (int64_t e = 0; e < t->r->logging.eval_iters; e++) MT_CHECK(run_batch(t, ds, e * t->EG, 0.0f, 0));
    t->n_micro = n_micro;
    MT_CHECK(mt_grad_sync_scalars(&t->gs, mt_model_scalars(&t->model)));
    MT_CHECK(mt_model_read_scalars(&t->model, &sum, &unused));
    *loss = (double)sum / (double)n_tok;
out:
    mt_timers_resume(&t->tm);
    return st;
}

/* One optimizer step's numbers. */
typedef struct {
    double loss, grad_norm, lr;
    int skipped;
    int rerun_save, exit_code; /* the rerun state machine's verdict: save the state before it, end the job */
} step_result;

/* One forward and backward of the batch at `consumed` and the gradient sync; with the rerun state
 * machine, this rank's loss (before the world sum) is validated first. */
static mt_status run_pass(trainer *t, int64_t consumed) {
    mt_status st = MT_OK;
    mt_model *m = &t->model;
    mt_timing *tm = &t->tm.probe;
    MT_CHECK(mt_model_zero_grads(m));
    MT_CHECK(mt_moe_bias_begin(m));
    if (t->ov) MT_CHECK(mt_grad_overlap_begin(t->ov, t->n_micro));
    const double t0 = mt_timing_begin(tm, MT_TM_FWD_BWD);
    MT_CHECK(run_batch(t, t->train, consumed, (float)(1.0 / t->tokens_per_iter), 1));
    mt_timing_end(tm, MT_TM_FWD_BWD, t0, -1, -1);
    mt_timers_add_comm(&t->tm, &m->par.clocks);
    float local_loss = 0, unused = 0;
    const int validate = mt_rerun_active(&t->rerun);
    if (validate) MT_CHECK(mt_model_read_scalars(m, &local_loss, &unused)); /* this rank's, before the world sum */
    if (validate && !t->ov) MT_CHECK(mt_rerun_validate(&t->rerun, local_loss, t->n_micro, m->grads, m->ol.n_flat));
    MT_CHECK(mt_grad_sync_reduce(&t->gs, m->grads, mt_model_scalars(m)));
    /* overlapped: the buckets were being reduced during backward, so the gradients are read once final */
    if (validate && t->ov) MT_CHECK(mt_rerun_validate(&t->rerun, local_loss, t->n_micro, m->grads, m->ol.n_flat));
out:
    return st;
}

static mt_status train_step(trainer *t, int64_t it, int64_t consumed, int64_t *n_steps, step_result *res) {
    mt_status st = MT_OK;
    mt_model *m = &t->model;
    float loss_sum = 0, grad_sq = 0;
    mt_timing *tm = &t->tm.probe;
    MT_CHECK(set_batch(t, consumed));
    for (;;) { /* Megatron's should_run_forward_backward loop: the initial run, and the rerun of a rejected result */
        int run = 0;
        MT_CHECK(mt_rerun_should_run(&t->rerun, it, &run));
        if (!run) break;
        MT_CHECK(run_pass(t, consumed));
    }
    mt_rerun_exit_decision(&t->rerun, &res->rerun_save, &res->exit_code);
    if (res->exit_code) goto out; /* no update: a save holds the state before this iteration */
    MT_CHECK(mt_model_read_scalars(m, &loss_sum, &grad_sq));
    MT_CHECK(mt_moe_stats_collect(&t->moe, m, &t->gs, t->G_cur / t->B));
    MT_CHECK(mt_moe_bias_update(m, t->gs.ps)); /* Megatron: in finalize_model_grads, skipped step or not */
    res->loss = (double)loss_sum / t->tokens_per_iter;
    res->grad_norm = sqrt((double)grad_sq);
    /* Megatron's scheduler steps by the samples of each batch: under ramp-up or a step schedule the
     * schedule's step is the samples consumed after this batch / global_batch (without, the iteration) */
    const int by_samples = t->r->training.rampup_start > 0 || t->r->training.steps.n > 0;
    const double lr_step = by_samples ? (double)(consumed + t->G_cur) / t->G : (double)it;
    res->lr = mt_lr_at_step(&t->r->optimizer, lr_step, t->r->training.iters);
    res->skipped = !isfinite(res->loss) || !isfinite(res->grad_norm);
    if (!res->skipped) {
        ++*n_steps;
        const double t1 = mt_timing_begin(tm, MT_TM_OPT);
        MT_CHECK(mt_optim_step(m, &t->r->optimizer, *n_steps, res->lr,
                               mt_lr_decoupled_at(&t->r->optimizer, lr_step, t->r->training.iters),
                               mt_clip_factor(res->grad_norm, t->r->optimizer.clip_grad)));
        mt_timing_end(tm, MT_TM_OPT, t1, -1, -1);
        if (mt_grad_overlap_gathers(t->ov)) /* during the next forward, bucket by bucket */
            MT_CHECK(mt_grad_overlap_gather_params(t->ov));
        else
            MT_CHECK(mt_grad_sync_gather_params(&t->gs, m->params, m->act));
    }
    if (t->ov)
        mt_grad_overlap_times(t->ov, &t->ov_reduce_ms, &t->ov_reduce_exposed_ms, &t->ov_gather_ms,
                              &t->ov_gather_exposed_ms);
    MT_CHECK(t->be->i->sync(t->be));
out:
    return st;
}

/* Running sums between log lines (Megatron's total_loss_dict: the loss over the window's
 * non-skipped iterations, skipped and nan counts, reset after each line) and over the timed
 * iterations (all but the first; the first alone when it is the only one). */
typedef struct {
    double window_ms, window_busy, window_table; /* pipeline: F+B time and table time in the window */
    int64_t window_iters;
    double window_loss;                          /* sum over the window's non-skipped iterations */
    int64_t window_skipped, window_nan;
    double timed_ms, timed_grad_ms;
    mt_comm_clocks timed_clocks;                 /* the model layers' collectives, per group */
    double timed_ov[4];                          /* overlap: reduce, its exposed wait, gather, its exposed wait */
    int64_t timed_iters;
    double first_ms, first_grad_ms;              /* the first iteration of this run */
    mt_comm_clocks first_clocks;
    int64_t nan_total;                           /* nan iterations of this run */
} loop_stats;

static void print_comm_summary(const trainer *t, FILE *log, const loop_stats *ls, mt_train_report *rep) {
    const int timed = ls->timed_iters > 0;
    if (!timed && ls->first_ms <= 0) return;
    /* one iteration alone: its own time, start-up costs included */
    const double n = timed ? (double)ls->timed_iters : 1.0;
    const mt_comm_clocks *clocks = timed ? &ls->timed_clocks : &ls->first_clocks;
    rep->mean_ms_per_iter = (timed ? ls->timed_ms : ls->first_ms) / n;
    rep->tokens_per_s = t->tokens_per_iter / (rep->mean_ms_per_iter * 1e-3);
    for (int g = 0; g < MT_PG_COUNT; g++) rep->comm_ms_per_iter[g] = clocks->g[g].ms / n;
    rep->grad_comm_ms_per_iter = (timed ? ls->timed_grad_ms : ls->first_grad_ms) / n;
    if (!timed) return;
    mt_comm_clocks_print(log, t->sink.prefix, t->ps, clocks, ls->timed_grad_ms, n, rep->mean_ms_per_iter);
    if (log && t->ov && ls->timed_ov[0] > 0) {
        const double red = ls->timed_ov[0] / n, rex = ls->timed_ov[1] / n;
        const double hid = red > rex ? red - rex : 0;
        fprintf(log, "%smtrain: overlapped gradient reduction %.2f ms/iteration on the communication thread, "
                "%.2f ms exposed after backward (%.1f%% hidden)", t->sink.prefix, red, rex, 100.0 * hid / red);
        if (ls->timed_ov[2] > 0) {
            const double ga = ls->timed_ov[2] / n, gex = ls->timed_ov[3] / n;
            fprintf(log, "; parameter gather %.2f ms/iteration, %.2f ms exposed in forward (%.1f%% hidden)", ga, gex,
                    100.0 * (ga > gex ? ga - gex : 0) / ga);
        }
        fprintf(log, ", this rank, iterations after the first\n");
    }
}

/* Whether the job stops after this iteration: a stop signal on any rank, or the time limit on
 * any rank (one max over the world, so every rank stops at the same iteration). 0 = go on, else
 * the signal number, or -1 for the time limit. */
static mt_status stop_vote(trainer *t, double start_s, int *stop) {
    mt_status st = MT_OK;
    const mt_recipe *r = t->r;
    float v = 0;
    const int sig = mt_stop_request_signal();
    if (sig) v = (float)sig;
    else if (r->checkpoint.exit_duration_mins > 0 && (mt_clock_s() - start_s) / 60.0 > r->checkpoint.exit_duration_mins)
        v = 1000.0f;
    const mt_group *w = mt_pstate_group(t->ps, MT_PG_WORLD);
    if (w->size > 1) {
        MT_CHECK(t->be->i->copy_h2d(t->be, t->stop_flag, &v, 4));
        MT_CHECK(w->comm->i->allreduce(w->comm, t->stop_flag, t->stop_flag, 1, MT_F32, MT_RED_MAX));
        MT_CHECK(t->be->i->copy_d2h(t->be, &v, t->stop_flag, 4));
    }
    *stop = v >= 1000.0f ? -1 : (int)v;
out:
    return st;
}

/* Where the loop stands: the counters a checkpoint saves, and the run's constants. */
typedef struct {
    int64_t first_it, consumed, skipped, n_steps;
    double start_s;          /* mt_clock_s() at the loop's start (the time limit) */
    double bubble_formula;   /* the schedule's bubble fraction (-1: no pipeline) */
} loop_pos;

/* The sums of one iteration that took dt ms: the log window's and, after the first, the timed ones
 * (the step's collective clocks included). */
static void count_iteration(trainer *t, loop_stats *ls, const loop_pos *lp, int64_t it, double dt,
                            const step_result *res) {
    if (t->pipe_exec) {
        ls->window_busy += t->pipe_exec->busy_ms;
        ls->window_table += t->pipe_exec->table_ms;
    }
    ls->window_ms += dt;
    ls->window_iters++;
    if (it > lp->first_it) {
        ls->timed_ms += dt;
        ls->timed_iters++;
        mt_comm_clocks_add(&ls->timed_clocks, &t->model.par.clocks);
        ls->timed_grad_ms += t->gs.comm_ms;
        ls->timed_ov[0] += t->ov_reduce_ms;
        ls->timed_ov[1] += t->ov_reduce_exposed_ms;
        ls->timed_ov[2] += t->ov_gather_ms;
        ls->timed_ov[3] += t->ov_gather_exposed_ms;
    } else {
        ls->first_ms = dt;
        ls->first_clocks = t->model.par.clocks;
        ls->first_grad_ms = t->gs.comm_ms;
    }
    /* Megatron's training_log: a skipped iteration's loss stays out of the sum; it is a nan
     * iteration when its loss is not finite */
    const int is_nan = res->skipped && !isfinite(res->loss);
    if (!res->skipped) ls->window_loss += res->loss;
    ls->window_skipped += res->skipped;
    ls->window_nan += is_nan;
    ls->nan_total += is_nan;
}

/* The interval part of a printed line: window averages, the measured pipeline bubble and
 * per-stage costs, the gathered timers. Collective over the pp group (and the world when timing). */
static mt_status interval_metrics(trainer *t, loop_stats *ls, int reset, int64_t it, double flops_rank,
                                  double model_flops_rank, double peak, mt_iter_metrics *im) {
    mt_status st = MT_OK;
    const double ms = ls->window_ms / ls->window_iters;
    const int64_t advanced = ls->window_iters - ls->window_skipped;
    if (t->pipe_exec) { /* every stage reaches it at the same iteration */
        MT_CHECK(mt_pipeline_bubble(t->pipe_exec, t->be, ls->window_busy, ls->window_table, &im->bubble));
        if (reset) ls->window_busy = ls->window_table = 0;
        mt_pipeline *pe = t->pipe_exec; /* the F / B cost per virtual stage, for plan --compare */
        const int pv = pe->p * pe->v;
        MT_CHECK(mt_pipeline_costs(pe, t->be, pe->cost_mean, pe->cost_mean + pv));
        im->n_vstages = pv;
        im->pp_f_ms = pe->cost_mean;
        im->pp_b_ms = pe->cost_mean + pv;
        im->pp_clock = pe->cost_cpu ? "cpu" : "wall";
    }
    MT_CHECK(mt_timers_gather(&t->tm, ls->window_iters)); /* collective when timing; printed by the caller */
    im->n_timers = MT_TM_COUNT;
    im->timer_names = t->tm.names;
    im->timer_min_ms = t->tm.lo_ms;
    im->timer_max_ms = t->tm.hi_ms;
    im->timer_ran = t->tm.ran;
    im->interval_iters = ls->window_iters;
    im->interval_skipped = ls->window_skipped;
    im->interval_nan = ls->window_nan;
    im->interval_lm_loss = ls->window_loss / (double)(advanced > 1 ? advanced : 1);
    im->interval_ms = ms;
    im->interval_tokens_per_s = t->tokens_per_iter / (ms * 1e-3);
    im->interval_tflops = flops_rank / (ms * 1e-3) / 1e12;
    im->interval_mfu = mt_flops_utilisation(model_flops_rank, ms * 1e-3, 1, peak);
    im->eta_s = (double)(t->r->training.iters - it) * ms * 1e-3;
out:
    return st;
}

/* The iteration's metrics record, TensorBoard events, and every logging.interval iterations (at
 * the last and the first too) the printed line with the window's averages and the timers. */
static mt_status log_iteration(trainer *t, FILE *log, loop_stats *ls, const loop_pos *lp, int64_t it, double dt,
                               const step_result *res, const mt_train_report *rep) {
    mt_status st = MT_OK;
    const mt_recipe *r = t->r;
    const int64_t iters = r->training.iters;
    const mt_tb_step tbs = {.iteration = it, .consumed_samples = lp->consumed, .global_batch = t->G_cur, .lr = res->lr,
                            .lm_loss = res->loss, .grad_norm = res->grad_norm, .skipped = res->skipped};
    MT_CHECK(mt_tensorboard_log_step(&t->tb, &tbs));
    /* every iteration goes to the metrics file; the line is printed every logging.interval
     * iterations, at the last one and at the first (Megatron's is_first_iteration: printed,
     * the window kept, so the first interval's averages still cover all of it) */
    const int print_line = r->logging.interval > 0 && (it % r->logging.interval == 0 || it == iters || it == lp->first_it);
    const int reset = print_line && !(it == lp->first_it && it % r->logging.interval != 0 && it != iters);
    const double peak = r->logging.peak_tflops > 0 ? r->logging.peak_tflops : t->be->peak_tflops;
    const double flops_rank = rep->flops_per_iter * t->G_cur / t->G / t->ps->size; /* this iteration's batch */
    mt_iter_metrics im = {.iteration = it, .train_iters = iters, .consumed_samples = lp->consumed,
                          .global_batch = t->G_cur, .ms_per_iter = dt, .tokens_per_s = t->tokens_per_iter / (dt * 1e-3),
                          .tflops = flops_rank / (dt * 1e-3) / 1e12, .mfu = -1, .lr = res->lr, .lm_loss = res->loss,
                          .grad_norm = res->grad_norm, .skipped = lp->skipped, .nan_iters = ls->nan_total,
                          .bubble = -1, .bubble_formula = lp->bubble_formula, .interval_mfu = -1};
    const double model_flops_rank = rep->model_flops_per_iter * t->G_cur / t->G / t->ps->size;
    im.mfu = mt_flops_utilisation(model_flops_rank, dt * 1e-3, 1, peak);
    im.n_experts = t->moe.E; /* MoE: this iteration's load-balancing loss, expert loads, drops */
    im.load_balancing_loss = t->moe.lb_loss;
    im.expert_load = t->moe.load;
    im.dropped_tokens = t->moe.dropped;
    if (print_line) MT_CHECK(interval_metrics(t, ls, reset, it, flops_rank, model_flops_rank, peak, &im));
    MT_CHECK(mt_metrics_log_iter(print_line ? log : NULL, &t->sink, &im));
    if (print_line) {
        const mt_iter_metrics tbm = mt_metrics_interval_view(&im);
        MT_CHECK(mt_tensorboard_log_timing(&t->tb, &tbm, it == lp->first_it));
        mt_timers_print(&t->tm, log, t->sink.prefix); /* gathered above */
    }
    if (reset) {
        ls->window_ms = ls->window_loss = 0;
        ls->window_iters = ls->window_skipped = ls->window_nan = 0;
    }
    MT_CHECK(mt_profile_flush(&t->prof, it, 0, log, t->sink.prefix)); /* collective after profile_end */
out:
    return st;
}

/* Periodic validation, then the caller's hook. */
static mt_status after_iteration(trainer *t, FILE *log, const loop_pos *lp, int64_t it, const mt_train_hooks *hooks,
                                 mt_train_report *rep) {
    mt_status st = MT_OK;
    const mt_recipe *r = t->r;
    if (t->valid && (it % r->logging.eval_interval == 0 || it == r->training.iters)) {
        double vl;
        MT_CHECK(mt_blended_dataset_check_files(t->train)); /* a dataset rewritten under the run */
        MT_CHECK(mt_blended_dataset_check_files(t->valid));
        MT_CHECK(evaluate(t, t->valid, &vl));
        rep->last_val_loss = vl;
        /* the last iteration's is Megatron's end-of-training "on validation set" evaluation */
        MT_CHECK(mt_metrics_log_eval_kind(log, &t->sink, it,
                                          it == r->training.iters ? MT_EVAL_VALID_END : MT_EVAL_VALID, vl));
        MT_CHECK(mt_tensorboard_log_eval(&t->tb, it, lp->consumed, vl));
    }
    if (hooks && hooks->on_iteration) {
        MT_CHECK(mt_grad_overlap_wait_params(t->ov)); /* a hook may read the parameters */
        MT_CHECK(hooks->on_iteration(hooks->ctx, it));
    }
out:
    return st;
}

/* Saves `cs` (asynchronously when `async`, else finished before it returns) and counts it in `rep`. */
static mt_status save_state(trainer *t, FILE *log, const mt_ckpt_state *cs, int async, mt_train_report *rep) {
    mt_status st = MT_OK;
    int done = 0;
    MT_CHECK(mt_grad_overlap_wait_params(t->ov)); /* the save reads every parameter */
    MT_CHECK(mt_blended_dataset_check_files(t->train)); /* never save a run fed a changed file */
    MT_CHECK(mt_blended_dataset_check_files(t->valid));
    MT_CHECK(mt_ckpt_save_begin(&t->saver, t->r, &t->model, t->ps, cs, async, log));
    if (!async) MT_CHECK(mt_ckpt_save_poll(&t->saver, t->ps, 1, log, &done));
    rep->saved_iteration = cs->iteration;
    rep->save_seconds += t->saver.stall_seconds;
    rep->n_saves++;
out:
    return st;
}

/* Checkpoints and stops (Megatron: save every save_interval, at the end, and before any exit);
 * *stop_now = 1 when the job stops after this iteration. */
static mt_status save_and_stop(trainer *t, FILE *log, const loop_pos *lp, int64_t it, mt_train_report *rep,
                               int *stop_now) {
    mt_status st = MT_OK;
    const mt_recipe *r = t->r;
    const mt_parallel_state *ps = t->ps;
    const int64_t iters = r->training.iters;
    int stop = 0;
    *stop_now = 0;
    if (t->stop_check) MT_CHECK(stop_vote(t, lp->start_s, &stop));
    const mt_checkpoint_cfg *ck = &r->checkpoint;
    const int exit_now = stop != 0 || (ck->exit_interval > 0 && it % ck->exit_interval == 0);
    int done = 0;
    if (t->saver.pending) { /* an asynchronous save finishes once every rank's file is written */
        const double stalled = t->saver.stall_seconds;
        MT_CHECK(mt_ckpt_save_poll(&t->saver, ps, 0, log, &done));
        rep->save_seconds += t->saver.stall_seconds - (done ? 0 : stalled);
    }
    /* Megatron's train loop also saves when the next iteration's micro-batch count differs (ramp-up, schedule) */
    const int batch_change = it < iters && mt_recipe_global_batch_at(r, lp->consumed) != t->G_cur;
    if (ck->dir[0] && ((ck->save_interval > 0 && it % ck->save_interval == 0) || it == iters || exit_now ||
                       batch_change)) {
        const mt_ckpt_state cs = {.iteration = it, .consumed_samples = lp->consumed, .optimizer_steps = lp->n_steps,
                                  .skipped_iterations = lp->skipped};
        const int last = it == iters || exit_now; /* the job ends: nothing to overlap with */
        MT_CHECK(save_state(t, log, &cs, ck->async_save && !last, rep));
    }
    if (exit_now) {
        rep->stop_signal = stop > 0 ? stop : 0;
        rep->stop_reason = stop > 0 ? MT_STOP_SIGNAL : stop < 0 ? MT_STOP_DURATION : MT_STOP_INTERVAL;
        if (log)
            fprintf(log, "%smtrain: stopping after iteration %lld: %s%s\n", t->sink.prefix, (long long)it,
                    stop > 0 ? strsignal(stop) : stop < 0 ? "checkpoint.exit_duration_mins reached"
                                                          : "checkpoint.exit_interval reached",
                    ck->dir[0] ? ", checkpoint saved" : " (no checkpoint.dir: nothing saved)");
        if (log) fflush(log); /* before the teardown, which a launcher may cut short */
        *stop_now = 1;
    }
out:
    return st;
}

/* The rerun state machine's end of the job at iteration `it`: with a reproduced rejected result, the
 * state before the iteration is saved with the machine's (its resume reruns `it` elsewhere). */
static mt_status rerun_exit(trainer *t, FILE *log, const loop_pos *lp, int64_t it, const step_result *res,
                            mt_train_report *rep) {
    mt_status st = MT_OK;
    const mt_checkpoint_cfg *ck = &t->r->checkpoint;
    rep->exit_code = res->exit_code;
    rep->stop_reason = MT_STOP_RERUN;
    rep->iters_done = it - 1;
    if (res->rerun_save) {
        mt_ckpt_state cs = {.iteration = it - 1, .consumed_samples = lp->consumed, .optimizer_steps = lp->n_steps,
                            .skipped_iterations = lp->skipped};
        MT_CHECK(mt_rerun_state_text(&t->rerun, cs.rerun_state, sizeof cs.rerun_state)); /* collective */
        int done = 0;
        if (ck->dir[0] && t->saver.pending) MT_CHECK(mt_ckpt_save_poll(&t->saver, t->ps, 1, log, &done));
        if (ck->dir[0]) MT_CHECK(save_state(t, log, &cs, 0, rep));
    }
    if (log)
        fprintf(log, "%smtrain: stopping at iteration %lld: result validation (rerun state machine)%s, exit code %d\n",
                t->sink.prefix, (long long)it,
                !res->rerun_save ? "" : ck->dir[0] ? ", checkpoint of the state before it saved"
                                                   : " (no checkpoint.dir: nothing saved to resume from)",
                res->exit_code);
    if (log) fflush(log);
out:
    return st;
}

/* After the loop: the last gathers and save, the test set, the summaries. */
static mt_status finish_run(trainer *t, FILE *log, const loop_stats *ls, mt_train_report *rep) {
    mt_status st = MT_OK;
    const int64_t iters = t->r->training.iters;
    MT_CHECK(mt_grad_overlap_wait_params(t->ov)); /* the last update's gathers, before anything ends */
    if (t->saver.pending) { /* a loop that ended early with a save in flight */
        int done = 0;
        MT_CHECK(mt_ckpt_save_poll(&t->saver, t->ps, 1, log, &done));
    }
    MT_CHECK(mt_profile_flush(&t->prof, rep->iters_done, 1, log, t->sink.prefix)); /* the loop ended before profile_end */
    if (t->test && rep->iters_done == iters && rep->stop_reason == MT_STOP_NONE) {
        /* Megatron's do_test: once, after training (not after a stop), on the split's test part */
        double tl;
        MT_CHECK(mt_blended_dataset_check_files(t->test));
        MT_CHECK(evaluate(t, t->test, &tl));
        MT_CHECK(mt_metrics_log_eval_kind(log, &t->sink, iters, MT_EVAL_TEST, tl));
    }
    print_comm_summary(t, log, ls, rep);
    if (t->tm.level >= 3 && log) {
        char who[32];
        snprintf(who, sizeof who, "rank %d", t->ps->rank);
        mt_op_timers_print(&t->ot, log, t->sink.prefix, who, rep->iters_done - rep->start_iteration);
    }
out:
    return st;
}

mt_status mt_train(const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps, FILE *log,
                   const mt_train_hooks *hooks, mt_train_report *rep) {
    mt_status st = MT_OK;
    trainer t;
    memset(rep, 0, sizeof *rep);
    rep->last_val_loss = NAN;
    if (!ps->logger) log = NULL;
    MT_CHECK(mt_trainer_start(&t, r, be, ps, log, rep));
    loop_pos lp = {.first_it = t.start.iteration + 1, .consumed = t.start.consumed_samples,
                   .skipped = t.start.skipped_iterations, .n_steps = t.start.optimizer_steps, .start_s = mt_clock_s()};
    lp.bubble_formula =
        t.pipe_exec ? mt_schedule_bubble_formula(t.pipe_exec->kind, ps->grid.pp, t.n_micro, t.pipe_exec->v) : -1;
    rep->start_iteration = t.start.iteration;
    loop_stats ls;
    memset(&ls, 0, sizeof ls);
    if (r->checkpoint.exit_signal_handler) mt_stop_request_arm(); /* the loop reads stop requests from here */
    for (int64_t it = lp.first_it; it <= r->training.iters; it++) {
        const double t0 = mt_clock_ms();
        mt_comm_clocks_reset(&t.model.par.clocks); /* every group's clock, and the gradient sync's */
        t.gs.comm_ms = 0;
        mt_timers_iteration(&t.tm, it);
        step_result res = {0};
        MT_CHECK(train_step(&t, it, lp.consumed, &lp.n_steps, &res));
        if (res.exit_code) { /* the rerun state machine ends the job */
            MT_CHECK(rerun_exit(&t, log, &lp, it, &res, rep));
            break;
        }
        mt_timers_step_done(&t.tm); /* saves, evaluation, logging: not the step's */
        lp.skipped += res.skipped;
        lp.consumed += t.G_cur;
        const double dt = mt_clock_ms() - t0;
        count_iteration(&t, &ls, &lp, it, dt, &res);
        if (it == lp.first_it) rep->first_loss = res.loss;
        rep->last_loss = res.loss;
        rep->iters_done = it;
        MT_CHECK(log_iteration(&t, log, &ls, &lp, it, dt, &res, rep));
        MT_CHECK(after_iteration(&t, log, &lp, it, hooks, rep));
        int stop_now = 0;
        MT_CHECK(save_and_stop(&t, log, &lp, it, rep, &stop_now));
        if (stop_now) break;
    }
    MT_CHECK(finish_run(&t, log, &ls, rep));
out:;
    const mt_status close_st = mt_trainer_close(&t, st != MT_OK);
    return st != MT_OK ? st : close_st; /* the first error wins */
}
