/* train.h — the training loop of one rank: data -> micro-batches -> forward/backward ->
 * gradient sync -> clip -> AdamW -> log, with periodic validation. */
#ifndef MT_TRAIN_H
#define MT_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "parallel/parallel_state.h"

typedef struct {
    int64_t iters_done;
    double first_loss, last_loss;   /* lm loss of the first and last iteration */
    double mean_ms_per_iter;        /* over iterations after the first */
    double tokens_per_s;            /* over iterations after the first */
    double flops_per_iter;          /* training FLOPs per iteration done by the hardware: with recomputation
                                       (Megatron's formula and its TFLOP/s convention) */
    double model_flops_per_iter;    /* the same without recomputation: the numerator of MFU */
    double comm_ms_per_iter[MT_PG_COUNT]; /* this rank's time in the model layers' collectives per group
                                       (mt_pgroup), iterations after the first (the only one when alone) */
    double grad_comm_ms_per_iter;   /* the same in the gradient synchronisation (parallel/grad_sync.h) */
    double last_val_loss;           /* NAN if no validation ran */
    size_t bytes_params, bytes_grads, bytes_optim, bytes_acts;
    int64_t start_iteration;        /* iterations a loaded checkpoint had done (0: fresh start) */
    int64_t saved_iteration;        /* the last checkpoint saved (0: none) */
    int n_saves;
    double save_seconds;            /* the training stall of all saves together */
    int stop_reason;                /* mt_stop_reason: why the loop ended before training.iters */
    int stop_signal;                /* MT_STOP_SIGNAL: which signal */
    int exit_code;                  /* MT_STOP_RERUN: the rerun state machine's exit code (train/rerun.h) */
} mt_train_report;

typedef enum { MT_STOP_NONE = 0, MT_STOP_SIGNAL, MT_STOP_DURATION, MT_STOP_INTERVAL, MT_STOP_RERUN } mt_stop_reason;

/* Optional callbacks into the loop (tests, tools): on_iteration runs at the end of every
 * iteration, after logging; a non-OK status stops training with that status. */
typedef struct {
    mt_status (*on_iteration)(void *ctx, int64_t iteration);
    void *ctx;
} mt_train_hooks;

/* MT_ERR_UNSUPPORTED naming the key when the recipe asks for something the trainer cannot do
 * yet (context, expert parallelism, MoE); `note` gets a
 * line to print for accepted-but-not-applied keys (none today); full recompute of MoE
 * layers and uniform recompute units of more than one layer are refused. */
mt_status mt_train_check_supported(const mt_recipe *r, char *note, size_t note_bytes);
/* The end-of-document id of data.mock's documents: the recipe's tokenizer's (the hf tokenizer.json
 * is opened for it; null: model.vocab - 1); MT_ERR_CONFIG when the mock ids do not fit model.vocab. */
mt_status mt_train_mock_eod(const mt_recipe *r, int32_t *eod);

/* Trains the validated recipe on the backend as this rank of the job (ps set up by
 * mt_pstate_setup). Log lines go to `log` on the logging rank (ps->logger; NULL = silent).
 * hooks may be NULL. */
mt_status mt_train(const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps, FILE *log,
                   const mt_train_hooks *hooks, mt_train_report *rep);

#endif
