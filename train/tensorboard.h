/* tensorboard.h — TensorBoard event files as Megatron writes them with --tensorboard-dir: one
 * file per run, `events.out.tfevents.<%010d unix seconds>.<hostname>.<pid>.<counter>` (the
 * name torch.utils.tensorboard's SummaryWriter gives it), written by the logging rank only,
 * with Megatron's tag names and "vs samples" twins (steps = consumed samples). Which scalars,
 * and when, is decided here; the bytes come from core/tfevents.h. */
#ifndef MT_TENSORBOARD_H
#define MT_TENSORBOARD_H

#include <stdint.h>
#include <stdio.h>

#include "core/recipe/recipe.h"
#include "core/status.h"
#include "train/metrics.h"

typedef struct {
    FILE *file;                 /* NULL = off */
    char path[MT_PATH_MAX + 128];
    const mt_logging_cfg *cfg;
    int world_size;
    double mem_bytes;           /* this rank's allocations (fixed before the loop), for mem-* */
} mt_tensorboard;

/* One optimizer step's numbers, for the per-iteration scalars. */
typedef struct {
    int64_t iteration, consumed_samples; /* consumed: after this iteration, as Megatron counts */
    int global_batch;
    double lr, lm_loss, grad_norm;
    int skipped;                         /* non-finite loss or grad norm: no 'lm loss' (as Megatron) */
} mt_tb_step;

/* Creates logging.tensorboard_dir (mkdir -p) and the events file there, and writes the
 * file_version record; tensorboard_dir "" = off (MT_OK, tb->file NULL). MT_ERR_IO naming the
 * folder or file. */
mt_status mt_tensorboard_open(mt_tensorboard *tb, const mt_logging_cfg *cfg, int world_size, double mem_bytes);
/* Every iteration: 'learning-rate', 'batch-size', 'lm loss', 'loss-scale', 'world-size',
 * 'grad-norm', 'mem-*' (each per its flag, see tensorboard.c) when iteration % interval == 0. */
mt_status mt_tensorboard_log_step(mt_tensorboard *tb, const mt_tb_step *s);
/* With each log line: the timing scalars ('iteration-time', 'throughput', mtrain's own), then a
 * flush. `first` = the first iteration of this run (Megatron writes no iteration-time then). */
mt_status mt_tensorboard_log_timing(mt_tensorboard *tb, const mt_iter_metrics *m, int first);
/* After a validation: 'lm loss validation' (+ 'ppl' with its flag) and their "vs samples", flushed. */
mt_status mt_tensorboard_log_eval(mt_tensorboard *tb, int64_t iteration, int64_t consumed_samples, double loss);
/* Flushes and closes; MT_ERR_IO naming the file when data was lost. Closing a closed or never
 * opened writer is MT_OK. */
mt_status mt_tensorboard_close(mt_tensorboard *tb);

#endif
