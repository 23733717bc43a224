/* pipeline.h — the pipeline-parallel executor of one stage: runs a schedule table of
 * parallel/schedule.h (1F1B, interleaved 1F1B, AFAB, or the forward-only table for evaluation)
 * over the stage's model chunks, moving activations and their gradients over the pp
 * communicator (rank = stage) with one message size agreed at start-up (N_r x C in the compute
 * dtype, the same on every stage; never a shape on the wire).
 * Memory: one activation buffer per table slot (mt_schedule_max_in_flight of them: the bound the
 * schedule guarantees, p on stage 0 for 1F1B); buffer 0 is the model's own. Each buffer holds the
 * activations of all the stage's local layers, so a chunk uses 1/vpp of it (simple, and vpp
 * times more than needed under interleaving: see docs/pipeline.md).
 * Timing: F and B wall time (busy) and the wall time of the whole table; the bubble is
 * 1 - busy / table time, summed over the pp group (the mean over stages, as the simulator
 * reports it). With a timing probe (tm), each F / B (the same clock reads as busy) and each transfer
 * group (named by what it holds: forward-send-backward-recv, ...) is also a timer / trace event. Rule: statuses propagate; a dead peer surfaces as MT_ERR_PEER from the comm. */
#ifndef MT_PIPELINE_H
#define MT_PIPELINE_H

#include <stdint.h>

#include "core/timing.h"
#include "train/model.h"
#include "parallel/comm.h"
#include "parallel/parallel_state.h"
#include "parallel/schedule.h"

/* fills B rows of T+1 tokens of micro-batch mb of the current batch */
typedef mt_status (*mt_pp_fetch_fn)(void *ctx, int mb, int32_t *tokens);

typedef struct {
    mt_comm *comm;          /* pipeline group: rank = stage */
    mt_sched kind;
    int p, m, v, stage;
    int m_max, cap;         /* micro-batches the tables and slots were built for; table capacity */
    mt_pp_step *steps;      /* training table */
    int n_steps;
    mt_pp_step *fsteps;     /* forward-only table (evaluation) */
    int n_fsteps;
    int n_slots;            /* activation buffers */
    void **slot;            /* (n_slots) activation buffers; slot[0] = the model's */
    void *act_out, *grad_out; /* (N_r, C) act each */
    size_t n_act;           /* elements of one message: N_r * C */
    void *stats_dev;        /* (2) f32 device scratch for the bubble reduction */
    int32_t *tokens;        /* (B, T+1) host staging */
    double busy_ms, table_ms; /* of the last run */
    mt_timing *tm;          /* per-phase timers (core/timing.h): F, B, each transfer group; NULL = none */
    /* cost of each F and B by virtual stage, for `mtrain plan --compare`'s replay of the tables:
     * process CPU time on the CPU backend (contention on shared cores does not count), wall time
     * otherwise; sums since the last mt_pipeline_costs. (4 p v): [0, pv) F ms of chunk c at c p + s,
     * [pv, 2pv) B ms, [2pv, 3pv) F count, [3pv, 4pv) B count; this stage's entries only. */
    double *cost;
    float *cost_host;       /* (4 p v) staging of the reduction */
    double *cost_mean;      /* (2 p v) room for mt_pipeline_costs' result: F means, then B means */
    int cost_cpu;           /* 1: cost is CPU time */
} mt_pipeline;

/* Builds both tables for (kind from mt_schedule_default(p, v), p, v): the training table for m
 * micro-batches (the most a step runs), the forward-only one for m_eval (an evaluation iteration's,
 * training.eval_global_batch / (micro_batch * dp)), and allocates the slots; the p2p exchanges go
 * over the parallel state's pipeline group. Errors: mt_schedule_check's (naming the keys), OOM. */
mt_status mt_pipeline_init(mt_pipeline *pp, mt_model *model, int m, int m_eval, const mt_parallel_state *ps);
void mt_pipeline_free(mt_pipeline *pp, mt_model *model);
/* Rebuilds the training table in place for m <= the m of init micro-batches (batch-size ramp-up);
 * no allocation. The forward-only table keeps init's m_eval. */
mt_status mt_pipeline_set_micro_batches(mt_pipeline *pp, int m);
/* Runs one iteration's table (forward_only: the evaluation table, no backward). Losses are
 * summed into the model's scalars on the last stage; gradients accumulate (+=). */
mt_status mt_pipeline_run(mt_pipeline *pp, mt_model *model, mt_pp_fetch_fn fetch, void *ctx, float dloss,
                          int forward_only);
/* Bubble of the group over the given busy / table sums (collective over the pp group). */
mt_status mt_pipeline_bubble(mt_pipeline *pp, mt_backend *be, double busy_ms, double table_ms, double *bubble);
/* Mean F and B cost per micro-batch of every virtual stage (p v entries each, index c p + s; 0
 * where none ran) since the last call, over the pp group (collective); resets the sums. */
mt_status mt_pipeline_costs(mt_pipeline *pp, mt_backend *be, double *f_ms, double *b_ms);
/* Bytes of activation buffers beyond the model's own. */
size_t mt_pipeline_extra_bytes(const mt_pipeline *pp, const mt_model *model);

#endif
