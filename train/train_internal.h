/* train_internal.h — shared by train.c (the loop) and train_open.c (what the loop runs on: set up
 * before it, freed after it); not a public header (that is train.h). */
#ifndef MT_TRAIN_INTERNAL_H
#define MT_TRAIN_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "core/backend_timed.h"
#include "core/data/blended_dataset.h"
#include "parallel/grad_overlap.h"
#include "parallel/grad_sync.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/model.h"
#include "train/moe_stats.h"
#include "train/pipeline.h"
#include "train/profile.h"
#include "train/rerun.h"
#include "train/tensorboard.h"
#include "train/timers.h"
#include "train/train.h"
#include "train/train_fim.h"

/* Everything one rank's run holds. */
typedef struct {
    const mt_recipe *r;
    mt_backend *be;
    const mt_parallel_state *ps;
    mt_model model;
    int have_model;
    mt_grad_sync gs;
    mt_grad_overlap *ov;     /* parallel.overlap_grad_reduce: the overlap engine (NULL: off) */
    double ov_reduce_ms, ov_reduce_exposed_ms, ov_gather_ms, ov_gather_exposed_ms; /* the last iteration's */
    mt_pipeline pipe;
    mt_pipeline *pipe_exec;  /* &pipe when pp > 1 */
    mt_blended_dataset *train, *valid;
    mt_blended_dataset *test;  /* the split's test part, evaluated once at the end (eval_iters > 0) */
    mt_train_fim fim;          /* data.fim: the fill-in-the-middle transform the three read through */
    mt_metrics_sink sink;
    int have_sink;
    mt_tensorboard tb;       /* logging rank with logging.tensorboard_dir: the events file */
    int32_t *tokens;         /* (B, T+1) host staging */
    int B, T, G, dp, dp_rank, n_micro, distributed;
    int G_cur, n_micro_max;   /* this iteration's global batch; the most micro-batches a step runs (ramp-up, schedule) */
    int EG, n_micro_eval;     /* an evaluation iteration's sequences (training.eval_global_batch) and micro-batches */
    double tokens_per_iter;   /* of this iteration */
    mt_ckpt_saver saver;     /* checkpoint.dir set: the saves' snapshot and tables */
    mt_ckpt_state start;     /* where the loop starts (a loaded checkpoint's state, else zeros) */
    void *stop_flag;         /* (1) f32 backend scratch: the world's vote on stopping */
    int stop_check;          /* signals or a time limit can stop the run: vote every iteration */
    mt_profiler prof;        /* logging.profile: the trace's event buffer */
    mt_timers tm;            /* per-phase timers; tm.probe goes to the pipeline and grad sync */
    mt_op_timers ot;         /* logging.timing_level 3: the backend's ops timed into tm's op-class timers */
    mt_moe_stats moe;        /* MoE: the step's load-balancing loss and expert loads */
    mt_rerun rerun;          /* Megatron's rerun state machine: result validation, reruns, injected faults */
} trainer;

/* Opens the trainer, fills the report's sizes and FLOPs, prints the start line and resumes a
 * checkpoint. Whatever it returns, mt_trainer_close frees what was opened. */
mt_status mt_trainer_start(trainer *t, const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps, FILE *log,
                           mt_train_report *rep);
/* Frees everything (failed: the run ends on an error); the metrics file's close status. */
mt_status mt_trainer_close(trainer *t, int failed);

#endif
