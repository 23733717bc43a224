/* train.c — one rank's training loop. Per iteration: zero grads; for each of this rank's
 * micro-batches, fetch its samples (a pure function of the consumed-samples count and the
 * rank's dp coordinate, so the data order is a property of the global batch, never of dp;
 * the ranks of a tp group read the same samples), forward + backward (tensor-parallel
 * collectives inside the model); sum over tp the gradients that are partial there (norm
 * weights under sequence parallelism); reduce gradients across dp (allreduce in buckets, or
 * with the distributed optimizer a reduce-scatter so each rank holds its shard's sum); one
 * host read (loss sum and squared grad norm: the norm summed over tp with replicated tensors
 * counted once, then both reduced across dp; every tp rank holds the same loss); skip the
 * update if either is not finite; clip by the global norm; AdamW on this rank's optimizer
 * shard of its tp shard; with the distributed optimizer, allgather the updated parameters;
 * log (tp rank 0, dp rank 0 only). Time spent in tp and dp collectives is measured.
 * Pipeline parallelism (pp > 1): each rank holds one stage (core/pipeline.c runs the schedule
 * table over the micro-batches; stage 0 and the last stage read the same samples, for tokens and
 * targets); after backward the tied wte gradient is summed over the embedding group (first and
 * last stage), and the two step scalars are summed over the pp group (the loss lives on the last
 * stage, the other stages add 0; the grad norm counts the wte copy once). The last stage logs,
 * with the measured bubble beside the formula's. */
#include "train/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/data/blended_dataset.h"
#include "train/metrics.h"
#include "train/model.h"
#include "train/optim.h"
#include "train/pipeline.h"

/* gradient allreduce bucket (elements): bounded so reduction can later overlap backward */
#define MT_GRAD_BUCKET_ELEMS ((size_t)16 << 20)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Fills B rows of T+1 tokens for micro-batch `mb` of the global batch that starts at
 * `consumed` (Megatron's order: micro-batch-major, then dp rank, then row). */
static mt_status fetch_micro(mt_blended_dataset *ds, int64_t consumed, int mb, int dp, int dp_rank, int B, int T,
                             int32_t *tokens) {
    for (int b = 0; b < B; b++) {
        int64_t sample = consumed + (int64_t)mb * B * dp + (int64_t)dp_rank * B + b;
        mt_status st = mt_blended_dataset_get(ds, sample, tokens + (size_t)b * (T + 1));
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

typedef struct {
    mt_blended_dataset *ds;
    int64_t consumed;
    int dp, dp_rank, B, T;
} fetch_ctx;

static mt_status fetch_cb(void *ctx, int mb, int32_t *tokens) {
    fetch_ctx *f = ctx;
    return fetch_micro(f->ds, f->consumed, mb, f->dp, f->dp_rank, f->B, f->T, tokens);
}

/* Sums the two step scalars over the pipeline group (pp > 1): the loss from the last stage,
 * the squared-norm parts of every stage. */
static mt_status reduce_scalars_pp(mt_model *m, mt_comm *pp) {
    if (!pp || pp->size == 1) return MT_OK;
    void *s = mt_model_scalars(m);
    return pp->i->allreduce(pp, s, s, 2, MT_F32, MT_RED_SUM);
}

/* wall time spent in dp collectives (this rank), for the communication statistics */
static double g_dp_comm_ms;

/* Sums the two step scalars (loss, grad sq) over the dp group. */
static mt_status reduce_scalars(mt_model *m, mt_comm *dp) {
    if (!dp || dp->size == 1) return MT_OK;
    void *s = mt_model_scalars(m);
    double t0 = now_ms();
    mt_status st = dp->i->allreduce(dp, s, s, 2, MT_F32, MT_RED_SUM);
    g_dp_comm_ms += now_ms() - t0;
    return st;
}

static mt_status evaluate(mt_model *m, mt_pipeline *pipe, const mt_recipe *r, mt_dist *d, mt_blended_dataset *valid,
                          int32_t *tokens, double *loss) {
    mt_status st = MT_OK;
    const int B = r->training.micro_batch, T = r->model.seq_length, G = r->training.global_batch;
    const int dp = d->dp ? d->dp->size : 1, dp_rank = d->dp ? d->dp->rank : 0;
    const int n_micro = G / (B * dp);
    const int64_t n_tok = (int64_t)r->logging.eval_iters * G * T;
    float sum = 0, unused = 0;
    MT_CHECK(mt_model_zero_grads(m));
    for (int64_t e = 0; e < r->logging.eval_iters; e++) {
        if (pipe) { /* the forward-only table */
            fetch_ctx fc = {.ds = valid, .consumed = e * G, .dp = dp, .dp_rank = dp_rank, .B = B, .T = T};
            MT_CHECK(mt_pipeline_run(pipe, m, fetch_cb, &fc, 0.0f, 1));
            continue;
        }
        for (int mb = 0; mb < n_micro; mb++) {
            MT_CHECK(fetch_micro(valid, e * G, mb, dp, dp_rank, B, T, tokens));
            MT_CHECK(mt_model_step_micro(m, tokens, 0.0f, 0));
        }
    }
    MT_CHECK(reduce_scalars_pp(m, d->pp));
    MT_CHECK(reduce_scalars(m, d->dp));
    MT_CHECK(mt_model_read_scalars(m, &sum, &unused));
    *loss = (double)sum / (double)n_tok;
out:
    return st;
}

/* After the micro-batches: gradients summed over dp, and this rank's part of the squared
 * norm in scalars[1] (the whole norm on dp rank 0 without the distributed optimizer, the
 * shard's part with it), so one allreduce of the scalars gives the global values. */
static mt_status sync_grads(mt_model *m, mt_comm *dp, int distributed, mt_comm *pp, mt_comm *emb) {
    mt_status st = MT_OK;
    MT_CHECK(mt_model_tp_sync_grads(m));
    if (emb && m->tied && m->pl.idx.wte >= 0) { /* Megatron's embedding-group allreduce */
        const mt_param_tensor *t = &m->pl.t[m->pl.idx.wte];
        float *g = (float *)m->grads + t->offset;
        MT_CHECK(emb->i->allreduce(emb, g, g, t->n, MT_F32, MT_RED_SUM));
    }
    double t0 = now_ms();
    if (dp && dp->size > 1) {
        if (distributed) {
            MT_CHECK(dp->i->reduce_scatter(dp, m->grads, (float *)m->grads + m->opt_begin, m->opt_n, MT_F32,
                                           MT_RED_SUM));
        } else {
            for (size_t off = 0; off < m->n_flat; off += MT_GRAD_BUCKET_ELEMS) {
                size_t n = m->n_flat - off < MT_GRAD_BUCKET_ELEMS ? m->n_flat - off : MT_GRAD_BUCKET_ELEMS;
                float *g = (float *)m->grads + off;
                MT_CHECK(dp->i->allreduce(dp, g, g, n, MT_F32, MT_RED_SUM));
            }
        }
    }
    g_dp_comm_ms += now_ms() - t0;
    if (distributed || !dp || dp->rank == 0) {
        MT_CHECK(mt_model_grad_sq(m, m->opt_begin, m->opt_n));
    } else {
        MT_CHECK(mt_model_grad_sq(m, 0, 0));
    }
    /* tp: each rank's shards (+ the replicas on tp rank 0); the loss is not summed over tp */
    MT_CHECK(mt_tp_allreduce_f32(&m->tp, (float *)mt_model_scalars(m) + 1, 1));
    MT_CHECK(reduce_scalars_pp(m, pp));
    MT_CHECK(reduce_scalars(m, dp));
out:
    return st;
}

mt_status mt_train(const mt_recipe *r, mt_backend *be, mt_dist *d, FILE *log, mt_train_report *rep) {
    mt_status st = MT_OK;
    mt_model model;
    mt_pipeline pipe;
    mt_pipeline *pp_exec = NULL;
    mt_blended_dataset *train = NULL, *valid = NULL;
    mt_metrics_sink sink;
    int32_t *tokens = NULL;
    int have_model = 0;
    memset(rep, 0, sizeof *rep);
    memset(&sink, 0, sizeof sink);
    rep->last_val_loss = NAN;

    const int B = r->training.micro_batch, T = r->model.seq_length, G = r->training.global_batch;
    const int dp = d->dp ? d->dp->size : 1, dp_rank = d->dp ? d->dp->rank : 0;
    const int distributed = r->parallel.distributed_optimizer && dp > 1;
    const int n_micro = G / (B * dp);
    const int64_t iters = r->training.iters;
    const double tokens_per_iter = (double)G * T;
    /* Megatron: the last pipeline stage of tp 0 / dp 0 logs */
    const int logger = d->coord[MT_AX_DP] == 0 && d->coord[MT_AX_TP] == 0 && d->coord[MT_AX_CP] == 0 &&
                       d->coord[MT_AX_PP] == d->grid.pp - 1;
    if (!logger) log = NULL;

    if (!r->data.path[0])
        return mt_errorf(MT_ERR_CONFIG, "data.path is empty: set it to a preprocessed dataset prefix "
                                        "(e.g. data/kjv_text_document, made by scripts/fetch-corpus.sh)");
    MT_CHECK(mt_blended_dataset_open(&train, r->data.path, r->data.split, MT_SPLIT_TRAIN, T, r->training.seed,
                                     iters * G, r->data.cache_path));
    if (r->logging.eval_interval > 0 && r->logging.eval_iters > 0)
        MT_CHECK(mt_blended_dataset_open(&valid, r->data.path, r->data.split, MT_SPLIT_VALID, T, r->training.seed,
                                         r->logging.eval_iters * G, r->data.cache_path));
    const int pp = d->grid.pp, stage = d->coord[MT_AX_PP];
    if (pp > 1 && (!d->pp || d->pp->size != pp)) {
        st = mt_errorf(MT_ERR_INTERNAL, "train: parallel.pipeline = %d without its communicator", pp);
        goto out;
    }
    if (pp > 1) /* Megatron's rule on m for the interleaved schedule, before anything is allocated */
        MT_CHECK(mt_schedule_check(mt_schedule_default(pp, r->parallel.virtual_pipeline), pp, n_micro,
                                   r->parallel.virtual_pipeline));
    MT_CHECK(mt_model_init_stage(&model, r, be, B, distributed ? dp : 1, distributed ? dp_rank : 0, d->tp,
                                 pp > 1 ? stage : -1));
    have_model = 1;
    if (pp > 1) {
        MT_CHECK(mt_pipeline_init(&pipe, &model, r, n_micro, d->pp));
        pp_exec = &pipe;
    }
    if (logger) MT_CHECK(mt_metrics_open(&sink, r->logging.metrics));
    if (d->size > 1) snprintf(sink.prefix, sizeof sink.prefix, "%s ", d->prefix);
    tokens = malloc((size_t)B * (T + 1) * sizeof *tokens);
    if (!tokens) {
        st = mt_errorf(MT_ERR_OOM, "token staging buffer");
        goto out;
    }
    rep->bytes_params = model.bytes_params;
    rep->bytes_grads = model.bytes_grads;
    rep->bytes_optim = model.bytes_optim;
    rep->bytes_acts = model.bytes_acts + (pp_exec ? mt_pipeline_extra_bytes(pp_exec, &model) : 0);
    rep->flops_per_iter = mt_model_flops_per_seq(&model.pl, r->training.recompute == MT_RECOMPUTE_FULL) * G;
    size_t n_full = 0; /* parameters of the whole model (the table holds this rank's shards) */
    mt_param_layout full_pl;
    MT_CHECK(mt_param_layout_build(r, &full_pl));
    for (int ti = 0; ti < full_pl.n_tensors; ti++)
        n_full += (size_t)full_pl.t[ti].n_layers * full_pl.t[ti].full_rows * full_pl.t[ti].full_cols;
    const int tp = model.pl.tp;
    char shard[48] = "";
    if (tp > 1 || pp > 1)
        snprintf(shard, sizeof shard, "%zu on this %s; ", model.pl.n_params, pp > 1 ? "rank's stage" : "tp rank");
    char pps[160] = "";
    if (pp_exec) {
        char vs[32] = "";
        if (pp_exec->v > 1) snprintf(vs, sizeof vs, " x vpp %d", pp_exec->v);
        snprintf(pps, sizeof pps, ", pp %d%s schedule %s with %d activation slot%s on this stage", pp, vs,
                 mt_schedule_name(pp_exec->kind), pp_exec->n_slots, pp_exec->n_slots > 1 ? "s" : "");
    }
    if (log)
        fprintf(log, "%smtrain: %s, %zu parameters (%s%.1f MiB weights, %.1f MiB grads, %.1f MiB optimizer%s, "
                     "%.1f MiB activations per rank), backend %s, %d rank%s (tp %d%s%s, dp %d), %lld iterations of %d "
                     "sequences x %d tokens (%d micro-batches of %d per rank)\n",
                sink.prefix, r->model.arch == MT_ARCH_LLAMA ? "llama" : "gpt", n_full, shard,
                model.bytes_params / 1048576.0, model.bytes_grads / 1048576.0, model.bytes_optim / 1048576.0,
                distributed ? " (distributed)" : "", model.bytes_acts / 1048576.0,
                be->device_name ? be->device_name : be->i->name, d->size, d->size > 1 ? "s" : "", tp,
                model.pl.sp ? " sequence-parallel" : "", pps, dp, (long long)iters, G, T, n_micro, B);

    const float dloss = (float)(1.0 / tokens_per_iter);
    const size_t act_bytes = mt_dtype_bytes(model.act);
    int64_t consumed = 0, skipped = 0, nan_iters = 0, step = 0;
    double window_ms = 0, timed_ms = 0, timed_tp_ms = 0, timed_dp_ms = 0;
    int64_t window_iters = 0, timed_iters = 0, timed_coll = 0;
    double window_busy = 0, window_table = 0; /* pipeline: F+B time and table time in the window */
    const double bubble_formula = pp_exec ? mt_schedule_bubble_formula(pp_exec->kind, pp, n_micro, pp_exec->v) : -1;
    g_dp_comm_ms = 0;
    for (int64_t it = 1; it <= iters; it++) {
        double t0 = now_ms();
        model.tp.comm_ms = 0;
        model.tp.n_coll = 0;
        g_dp_comm_ms = 0;
        MT_CHECK(mt_model_zero_grads(&model));
        if (pp_exec) {
            fetch_ctx fc = {.ds = train, .consumed = consumed, .dp = dp, .dp_rank = dp_rank, .B = B, .T = T};
            MT_CHECK(mt_pipeline_run(pp_exec, &model, fetch_cb, &fc, dloss, 0));
            window_busy += pp_exec->busy_ms;
            window_table += pp_exec->table_ms;
        } else {
            for (int mb = 0; mb < n_micro; mb++) {
                MT_CHECK(fetch_micro(train, consumed, mb, dp, dp_rank, B, T, tokens));
                MT_CHECK(mt_model_step_micro(&model, tokens, dloss, 1));
            }
        }
        MT_CHECK(sync_grads(&model, d->dp, distributed, d->pp, d->emb));
        float loss_sum = 0, grad_sq = 0;
        MT_CHECK(mt_model_read_scalars(&model, &loss_sum, &grad_sq));
        const double loss = (double)loss_sum / tokens_per_iter;
        const double grad_norm = sqrt((double)grad_sq);
        const double lr = mt_lr_at(&r->optimizer, it, iters);
        if (!isfinite(loss) || !isfinite(grad_norm)) {
            skipped++;
            nan_iters++;
        } else {
            step++;
            MT_CHECK(mt_optim_step(&model, &r->optimizer, step, lr, mt_clip_factor(grad_norm, r->optimizer.clip_grad)));
            if (distributed) {
                char *p = (char *)model.params;
                double ta = now_ms();
                MT_CHECK(d->dp->i->allgather(d->dp, p + model.opt_begin * act_bytes, p, model.opt_n, model.act));
                g_dp_comm_ms += now_ms() - ta;
            }
        }
        MT_CHECK(be->i->sync(be));
        consumed += G;
        const double dt = now_ms() - t0;
        window_ms += dt;
        window_iters++;
        if (it > 1) {
            timed_ms += dt;
            timed_iters++;
            timed_tp_ms += model.tp.comm_ms;
            timed_dp_ms += g_dp_comm_ms;
            timed_coll += model.tp.n_coll;
        }
        if (it == 1) rep->first_loss = loss;
        rep->last_loss = loss;
        rep->iters_done = it;
        if (r->logging.interval > 0 && (it % r->logging.interval == 0 || it == iters || it == 1)) {
            const double ms = window_ms / window_iters;
            double bubble = -1;
            if (pp_exec) { /* collective over the pp group: every stage reaches it at the same iteration */
                MT_CHECK(mt_pipeline_bubble(pp_exec, be, window_busy, window_table, &bubble));
                window_busy = window_table = 0;
            }
            mt_iter_metrics im = {.iteration = it, .train_iters = iters, .consumed_samples = consumed,
                                  .global_batch = G, .ms_per_iter = ms, .tokens_per_s = tokens_per_iter / (ms * 1e-3),
                                  .tflops = rep->flops_per_iter / d->size / (ms * 1e-3) / 1e12, .mfu = -1, .lr = lr,
                                  .lm_loss = loss, .grad_norm = grad_norm, .skipped = skipped, .nan_iters = nan_iters,
                                  .bubble = bubble, .bubble_formula = bubble_formula};
            const double peak = r->logging.peak_tflops > 0 ? r->logging.peak_tflops : be->peak_tflops;
            if (peak > 0) im.mfu = im.tflops / peak;
            mt_metrics_log_iter(log, &sink, &im);
            window_ms = 0;
            window_iters = 0;
        }
        if (valid && (it % r->logging.eval_interval == 0 || it == iters)) {
            double vl;
            MT_CHECK(evaluate(&model, pp_exec, r, d, valid, tokens, &vl));
            rep->last_val_loss = vl;
            mt_metrics_log_eval(log, &sink, it, vl);
        }
    }
    if (timed_iters > 0) {
        rep->mean_ms_per_iter = timed_ms / timed_iters;
        rep->tokens_per_s = tokens_per_iter / (rep->mean_ms_per_iter * 1e-3);
        rep->tp_comm_ms_per_iter = timed_tp_ms / timed_iters;
        rep->dp_comm_ms_per_iter = timed_dp_ms / timed_iters;
        if (log && d->size > 1)
            fprintf(log, "%smtrain: communication %.2f ms/iteration = %.1f%% of %.2f ms (tp %.2f ms in %.0f "
                         "collectives, dp %.2f ms), this rank, iterations after the first\n",
                    sink.prefix, rep->tp_comm_ms_per_iter + rep->dp_comm_ms_per_iter,
                    100.0 * (rep->tp_comm_ms_per_iter + rep->dp_comm_ms_per_iter) / rep->mean_ms_per_iter,
                    rep->mean_ms_per_iter, rep->tp_comm_ms_per_iter, (double)timed_coll / timed_iters,
                    rep->dp_comm_ms_per_iter);
    } else if (rep->iters_done > 0) {
        rep->mean_ms_per_iter = window_ms;
        rep->tokens_per_s = tokens_per_iter / (window_ms * 1e-3);
    }
out:
    free(tokens);
    mt_metrics_close(&sink);
    if (pp_exec) mt_pipeline_free(pp_exec, &model);
    if (have_model) mt_model_free(&model);
    mt_blended_dataset_close(valid);
    mt_blended_dataset_close(train);
    return st;
}
