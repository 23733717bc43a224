/* train_open.c — what the training loop (train.c) runs on: mt_trainer_start builds it before the
 * loop (datasets, the model with this rank's shards and optimizer shards, gradient sync and its
 * overlap engine, pipeline executor, metrics and TensorBoard sinks, timers and profiler, the
 * checkpoint saver), prints the start line and resumes a checkpoint; mt_trainer_close frees it
 * all after the loop. */
#include "train/train_internal.h"

#include <stdlib.h>
#include <string.h>

#include "train/stop_request.h"

/* Megatron's test set: the split's third part, eval_iters batches at the end of training. None
 * when eval_iters is 0 or the split gives it no weight; a part with weight but no documents (a
 * small corpus) is noted and skipped, as Megatron builds no test dataset for it. */
static mt_status open_test_split(trainer *t) {
    const mt_recipe *r = t->r;
    int64_t b[4];
    if (r->logging.eval_iters <= 0 || mt_gpt_split_bounds(r->data.split, INT64_C(1) << 40, b) != MT_OK || b[3] <= b[2])
        return MT_OK;
    mt_status st;
    int32_t eod = -1;
    if (r->data.mock && (st = mt_train_mock_eod(r, &eod)) == MT_OK)
        st = mt_blended_dataset_open_mock(&t->test, r->data.split, MT_SPLIT_TEST, t->T, r->training.seed,
                                          r->logging.eval_iters * t->EG, eod);
    else if (!r->data.mock)
        st = mt_blended_dataset_open(&t->test, r->data.path, r->data.split, MT_SPLIT_TEST, t->T,
                                     r->training.seed, r->logging.eval_iters * t->EG, r->data.cache_path);
    if (st == MT_ERR_DATA) {
        if (t->ps->logger)
            fprintf(stderr, "mtrain: note: no test-set evaluation at the end: %s\n", mt_last_error());
        t->test = NULL;
        return MT_OK;
    }
    return st;
}

/* The model's part hook (model.h) -> the overlap engine (the part numbers are the same) */
static mt_status overlap_hook(void *ctx, int backward, int part) {
    mt_grad_overlap *ov = ctx;
    _Static_assert(MT_MODEL_PART_EMBED == MT_GO_EMBED && MT_MODEL_PART_HEAD == MT_GO_HEAD, "part numbers");
    return backward ? mt_grad_overlap_backward_done(ov, part) : mt_grad_overlap_forward_begin(ov, part);
}

/* Datasets, model (this rank's shards and optimizer shards), gradient sync, pipeline executor,
 * metrics sink, staging: everything the loop uses, allocated before it starts. */
static mt_status trainer_open(trainer *t, const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps) {
    mt_status st = MT_OK;
    memset(t, 0, sizeof *t);
    t->r = r;
    t->be = be;
    t->ps = ps;
    t->B = r->training.micro_batch;
    t->T = r->model.seq_length;
    t->G = r->training.global_batch;
    t->dp = mt_pstate_group(ps, MT_PG_DP)->size;
    t->dp_rank = mt_pstate_group(ps, MT_PG_DP)->rank;
    t->distributed = r->parallel.distributed_optimizer && mt_pstate_group(ps, MT_PG_DP_CP)->size > 1;
    t->n_micro = t->n_micro_max = mt_recipe_global_batch_max(r) / (t->B * t->dp);
    t->EG = r->training.eval_global_batch;
    t->n_micro_eval = t->EG / (t->B * t->dp);
    t->G_cur = t->G;
    t->tokens_per_iter = (double)t->G * t->T;
    const int pp = ps->grid.pp;

    if (!r->data.path[0] && !r->data.mock)
        return mt_errorf(MT_ERR_CONFIG, "data.path is empty: set it to a preprocessed dataset prefix "
                                        "(e.g. data/kjv_text_document, made by scripts/fetch-corpus.sh), or "
                                        "data.mock: true (--mock-data) for synthetic documents");
    int32_t mock_eod = -1;
    if (r->data.mock) {
        MT_CHECK(mt_train_mock_eod(r, &mock_eod));
        MT_CHECK(mt_blended_dataset_open_mock(&t->train, r->data.split, MT_SPLIT_TRAIN, t->T, r->training.seed,
                                              mt_recipe_train_samples(r), mock_eod));
    } else
        MT_CHECK(mt_blended_dataset_open(&t->train, r->data.path, r->data.split, MT_SPLIT_TRAIN, t->T,
                                         r->training.seed, mt_recipe_train_samples(r), r->data.cache_path));
    { /* a data/model vocabulary mismatch before the first step (the first 16M tokens of each file) */
        char tok[32];
        MT_CHECK(mt_blended_dataset_check_vocab(t->train, r->model.vocab, (int64_t)1 << 24,
                                                mt_recipe_value_text(r, "data.tokenizer", tok, sizeof tok)));
    }
    if (r->logging.eval_interval > 0 && r->logging.eval_iters > 0 && r->data.mock)
        MT_CHECK(mt_blended_dataset_open_mock(&t->valid, r->data.split, MT_SPLIT_VALID, t->T, r->training.seed,
                                              r->logging.eval_iters * t->EG, mock_eod));
    else if (r->logging.eval_interval > 0 && r->logging.eval_iters > 0)
        MT_CHECK(mt_blended_dataset_open(&t->valid, r->data.path, r->data.split, MT_SPLIT_VALID, t->T,
                                         r->training.seed, r->logging.eval_iters * t->EG, r->data.cache_path));
    MT_CHECK(open_test_split(t));
    mt_blended_dataset *const fim_ds[3] = {t->train, t->valid, t->test};
    MT_CHECK(mt_train_fim_open(&t->fim, r, fim_ds, 3, ps->logger ? stderr : NULL));
    if (pp > 1 && r->training.steps.n == 0) /* Megatron's rule on m for the interleaved schedule, before anything is allocated: every
                 * micro-batch count the batch-size ramp-up goes through, then the full one (a step schedule's
                 * are checked from the loaded position, check_batches) */
        for (int64_t g = r->training.rampup_start > 0 ? r->training.rampup_start : t->G; g <= t->G;
             g += r->training.rampup_start > 0 ? r->training.rampup_increment : t->G)
            MT_CHECK(mt_schedule_check(mt_schedule_default(pp, r->parallel.virtual_pipeline), pp,
                                       (int)(g / (t->B * t->dp)), r->parallel.virtual_pipeline));
    mt_model_shape shape = {.B = t->B, .ps = ps};
    mt_grad_sync_shards(ps, t->distributed, shape.shards, shape.shard);
    MT_CHECK(mt_model_create(&t->model, r, be, &shape));
    t->have_model = 1;
    mt_grad_sync_init(&t->gs, &t->model.pl, &t->model.ol, ps, be, t->distributed);
    const int overlap = r->parallel.overlap_grad_reduce && (mt_pstate_group(ps, MT_PG_DP_CP)->size > 1 ||
                                                            (t->model.pl.moe && mt_pstate_group(ps, MT_PG_EDP)->size > 1));
    if (overlap && !be->host_memory && ps->logger) /* the engine's CUDA hook is not built yet (grad_overlap.h) */
        fprintf(stderr, "mtrain: note: parallel.overlap_grad_reduce / overlap_param_gather: not overlapped on the %s "
                "backend yet (stream-ordered NCCL collectives are needed); the gradients are reduced after backward, "
                "with the same results\n", be->i->name);
    if (overlap && be->host_memory) {
        t->gs.grads_base = t->model.grads;
        t->gs.params_base = t->model.params;
        t->gs.act = t->model.act;
        MT_CHECK(mt_grad_overlap_init(&t->ov, &t->gs, ps, r->parallel.ddp_bucket_size,
                                      r->parallel.overlap_param_gather));
        t->gs.ov = t->ov;
        t->model.part_hook = overlap_hook;
        t->model.part_hook_ctx = t->ov;
    }
    MT_CHECK(mt_moe_stats_open(&t->moe, &t->model));
    MT_CHECK(mt_rerun_init(&t->rerun, r, ps, be, t->model.pl.has_head)); /* the last stage's ranks hold the loss */
    if (pp > 1) {
        MT_CHECK(mt_pipeline_init(&t->pipe, &t->model, t->n_micro, t->valid || t->test ? t->n_micro_eval : t->n_micro, ps));
        t->pipe_exec = &t->pipe;
    }
    if (ps->logger) {
        MT_CHECK(mt_metrics_open(&t->sink, r->logging.metrics));
        t->have_sink = 1;
        t->sink.has_layout = 1; /* for readers of the file (mtrain plan --compare) */
        t->sink.layout = (mt_metrics_layout){.tp = ps->grid.tp, .pp = pp, .vpp = pp > 1 ? r->parallel.virtual_pipeline : 1,
                                             .cp = ps->grid.cp, .dp = t->dp, .ep = ps->grid.ep, .micro_batch = t->B,
                                             .n_micro = t->n_micro, .global_batch = mt_recipe_global_batch_max(r), .world = ps->size};
        const double mem = (double)(t->model.bytes_params + t->model.bytes_grads + t->model.bytes_optim +
                                    t->model.bytes_acts + (t->pipe_exec ? mt_pipeline_extra_bytes(t->pipe_exec, &t->model) : 0));
        MT_CHECK(mt_tensorboard_open(&t->tb, &r->logging, ps->size, mem));
    }
    if (ps->size > 1) snprintf(t->sink.prefix, sizeof t->sink.prefix, "%s ", ps->prefix);
    t->sink.throughput = r->logging.log_throughput;
    t->stop_check = r->checkpoint.exit_signal_handler || r->checkpoint.exit_duration_mins > 0;
    if (t->stop_check) {
        MT_CHECK(be->i->alloc(be, 4, &t->stop_flag));
        if (r->checkpoint.exit_signal_handler) mt_stop_request_install();
    }
    { /* an upper estimate of one iteration's trace events on this rank */
        const int64_t per_iter = (t->pipe_exec ? t->pipe.n_steps : 2 * t->n_micro) + t->n_micro +
                                 t->model.pl.n_tensors + 16 +
                                 MT_GBUFS * (int64_t)(t->model.ol.n_flat / MT_GRAD_BUCKET_ELEMS + 2);
        MT_CHECK(mt_profile_init(&t->prof, r, ps, be, per_iter));
        MT_CHECK(mt_timers_init(&t->tm, r, ps, be, &t->prof));
        if (t->tm.level >= 3) MT_CHECK(mt_op_timers_attach(be, &t->ot, &t->tm.probe));
        t->gs.tm = &t->tm.probe;
        if (t->pipe_exec) t->pipe.tm = &t->tm.probe;
    }
    t->tokens = malloc((size_t)t->B * (t->T + 1) * sizeof *t->tokens);
    if (!t->tokens) {
        st = mt_errorf(MT_ERR_OOM, "token staging buffer of %d x %d tokens", t->B, t->T + 1);
        goto out;
    }
out:
    return st;
}

static mt_status print_start(const trainer *t, FILE *log) {
    mt_status st = MT_OK;
    const mt_recipe *r = t->r;
    const mt_model *m = &t->model;
    const mt_parallel_state *ps = t->ps;
    size_t n_full = 0; /* parameters of the whole model (the table holds this rank's shards) */
    mt_param_layout full_pl;
    MT_CHECK(mt_param_layout_build(r, &full_pl));
    for (int ti = 0; ti < full_pl.n_tensors; ti++)
        n_full += (size_t)full_pl.t[ti].n_layers * full_pl.t[ti].full_rows * full_pl.t[ti].full_cols;
    if (!log) goto out;
    const int tp = m->pl.tp, pp = ps->grid.pp;
    char shard[48] = "", eps[96] = "", mixed[48] = "";
    if (m->pl.moe && m->pl.n_kind_global[0] > 0) /* dense layers mixed in (model.moe.layer_freq / layer_pattern) */
        snprintf(mixed, sizeof mixed, " in %d of %d layers", m->pl.n_kind_global[1], m->pl.L_global);
    if (m->pl.moe) snprintf(eps, sizeof eps, ", %d experts top-%d%s, ep %d", m->pl.E, m->pl.top_k, mixed, m->pl.ep);
    if (tp > 1 || pp > 1)
        snprintf(shard, sizeof shard, "%zu on this %s; ", m->pl.n_params, pp > 1 ? "rank's stage" : "tp rank");
    char pps[224] = "";
    if (t->pipe_exec) {
        char vs[32] = "";
        if (t->pipe_exec->v > 1) snprintf(vs, sizeof vs, " x vpp %d", t->pipe_exec->v);
        char split[72] = ""; /* uneven stages: each stage's layers, "(layers 3/4)"; by chunk "(layers 0+1/1+1)" */
        const int v = t->pipe_exec->v;
        for (int s = 0, n = 0; mt_recipe_uneven_stages(r) && s < pp && n >= 0 && n < (int)sizeof split - 12; s++)
            for (int k = 0; k < v && n >= 0 && n < (int)sizeof split - 12; k++)
                n += snprintf(split + n, sizeof split - n, "%s%d%s", k ? "+" : s ? "/" : " (layers ",
                              v > 1 ? mt_recipe_chunk_layers(r, s, k) : mt_recipe_stage_layers(r, s),
                              s == pp - 1 && k == v - 1 ? ")" : "");
        snprintf(pps, sizeof pps, ", pp %d%s%s schedule %s with %d activation slot%s on this stage", pp, split, vs,
                 mt_schedule_name(t->pipe_exec->kind), t->pipe_exec->n_slots, t->pipe_exec->n_slots > 1 ? "s" : "");
    }
    char cps[80] = "";
    if (m->pl.cp > 1) snprintf(cps, sizeof cps, ", cp %d ring attention (%d tokens per rank)", m->pl.cp, m->al.T);
    fprintf(log,
            "%smtrain: %s, %zu parameters (%s%.1f MiB weights, %.1f MiB grads, %.1f MiB optimizer%s, "
            "%.1f MiB activations per rank), backend %s, %d rank%s (tp %d%s%s%s, dp %d%s), %lld iterations of %d "
            "sequences x %d tokens (%d micro-batches of %d per rank)\n",
            t->sink.prefix, r->model.arch == MT_ARCH_LLAMA ? "llama" : "gpt", n_full, shard,
            m->bytes_params / 1048576.0, m->bytes_grads / 1048576.0, m->bytes_optim / 1048576.0,
            t->distributed ? " (distributed)" : "", m->bytes_acts / 1048576.0,
            t->be->device_name ? t->be->device_name : t->be->i->name, ps->size, ps->size > 1 ? "s" : "", tp,
            m->pl.sp ? " sequence-parallel" : "", pps, cps, t->dp, eps, (long long)r->training.iters, t->G, t->T, t->n_micro,
            t->B);
    const mt_batch_steps *bs = &r->training.steps;
    for (int i = 0; i < bs->n; i++) /* Megatron's listing of the step schedule */
        fprintf(log, "%smtrain: step batch-size schedule: >= %lld tokens (%lld samples) -> global batch %d, %d "
                "micro-batches per rank\n", t->sink.prefix, (long long)bs->at[i] * t->T, (long long)bs->at[i],
                bs->batch[i], bs->batch[i] / (t->B * t->dp));
    if (t->ov) {
        char d[256];
        mt_grad_overlap_describe(t->ov, d, sizeof d);
        fprintf(log, "%smtrain: %s\n", t->sink.prefix, d);
    }
out:
    return st;
}

/* The step schedule's batches from the loaded position on (the consumed samples decide them): each a
 * multiple of micro_batch * dp, and under the interleaved pipeline schedule a micro-batch count it
 * can run (Megatron asserts both when it reaches them; here before the first iteration). */
static mt_status check_batches(const trainer *t) {
    mt_status st = MT_OK;
    const mt_recipe *r = t->r;
    const mt_batch_steps *bs = &r->training.steps;
    MT_CHECK(mt_recipe_batch_steps_check(r, t->dp, t->start.consumed_samples, t->start.iteration));
    for (int i = 0; t->pipe_exec && i < bs->n; i++)
        if (bs->batch[i] >= mt_recipe_global_batch_at(r, t->start.consumed_samples))
            MT_CHECK(mt_schedule_check(t->pipe_exec->kind, t->pipe_exec->p, bs->batch[i] / (t->B * t->dp), t->pipe_exec->v));
out:
    return st;
}

/* Loads checkpoint.load (or, after an automatic restart, the latest save in checkpoint.dir). */
static mt_status resume(trainer *t, FILE *log) {
    mt_status st = MT_OK;
    char path[4400], note[4600];
    int found = 0;
    MT_CHECK(mt_ckpt_resolve(t->r, path, sizeof path, &found, note, sizeof note));
    if (note[0] && log) fprintf(log, "%smtrain: %s\n", t->sink.prefix, note);
    if (found) MT_CHECK(mt_ckpt_load(t->r, &t->model, t->ps, path, &t->start, log));
    MT_CHECK(mt_rerun_load(&t->rerun, t->start.rerun_state)); /* a save for a rerun of its next iteration */
    if (t->start.iteration > t->r->training.iters)
        return mt_errorf(MT_ERR_CONFIG, "%s: saved at iteration %lld, past training.iters = %lld: raise "
                         "training.iters (--train-iters) to train further", path, (long long)t->start.iteration,
                         (long long)t->r->training.iters);
    MT_CHECK(check_batches(t));
out:
    return st;
}

/* Opening: the trainer, its report's sizes and FLOPs, the start line, a resumed checkpoint. */
mt_status mt_trainer_start(trainer *t, const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps, FILE *log,
                           mt_train_report *rep) {
    mt_status st = MT_OK;
    MT_CHECK(trainer_open(t, r, be, ps));
    rep->bytes_params = t->model.bytes_params;
    rep->bytes_grads = t->model.bytes_grads;
    rep->bytes_optim = t->model.bytes_optim;
    rep->bytes_acts = t->model.bytes_acts + (t->pipe_exec ? mt_pipeline_extra_bytes(t->pipe_exec, &t->model) : 0);
    /* TFLOP/s on the iteration line counts recomputation (Megatron's convention, hardware FLOPs);
     * MFU counts the model's FLOPs only (PaLM's definition), so recompute never raises it */
    mt_model_flops_per_iter(&t->model.pl, (double)t->G, &rep->model_flops_per_iter, &rep->flops_per_iter);
    MT_CHECK(print_start(t, log));
    if (r->checkpoint.dir[0]) { /* a run that cannot save learns it now, not at its first save */
        MT_CHECK(mt_ckpt_saver_prepare(&t->saver, &t->model, ps));
        MT_CHECK(mt_ckpt_dir_open(&t->saver, r, ps, be, log));
    }
    MT_CHECK(resume(t, log));
out:
    return st;
}

/* Frees everything; the metrics file's close status (a full disk shows here last) */
mt_status mt_trainer_close(trainer *t, int failed) {
    mt_status st = MT_OK;
    mt_grad_overlap_free(t->ov, failed); /* first: its thread reads and writes the model's buffers */
    t->ov = NULL;
    mt_op_timers_detach(t->be); /* the backend outlives the trainer: its own table back */
    free(t->tokens);
    mt_timers_free(&t->tm);
    mt_profile_free(&t->prof);
    mt_moe_stats_close(&t->moe);
    mt_rerun_free(&t->rerun);
    mt_stop_request_restore();
    if (t->stop_flag) t->be->i->free(t->be, t->stop_flag);
    mt_ckpt_saver_free(&t->saver, t->be);
    if (t->have_sink) st = mt_metrics_close(&t->sink);
    const mt_status tb_st = mt_tensorboard_close(&t->tb);
    if (st == MT_OK) st = tb_st;
    if (t->pipe_exec) mt_pipeline_free(t->pipe_exec, &t->model);
    if (t->have_model) mt_model_free(&t->model);
    mt_blended_dataset_close(t->test);
    mt_blended_dataset_close(t->valid);
    mt_blended_dataset_close(t->train);
    mt_train_fim_close(&t->fim);
    return st;
}
