/* grad_sync.h — gradient synchronisation and the distributed optimizer's communication, per
 * gradient class (core/model/model_layout.h: mt_grad_class) over the groups of the parallel state:
 *   1. class pre-reductions, per tensor: TP_PARTIAL summed over tp, EMBEDDING over the embedding
 *      group (Megatron's _allreduce_word_embedding_grads);
 *   2. per gradient buffer (dense over dp x cp, expert over expert-dp), in buckets of at most
 *      MT_GRAD_BUCKET_ELEMS: an allreduce, or with the distributed optimizer a reduce-scatter that
 *      leaves each rank the sum of its own optimizer shard;
 *   3. the squared gradient norm: each rank adds a disjoint part (tensors replicated over tp on
 *      tp rank 0 only, pipeline copies not at all, its own shard or — without the distributed
 *      optimizer — everything on reduce-group rank 0), so one sum over the world is the norm;
 *      the loss travels in the same allreduce (every tp rank holds the same full sum: tp rank 0
 *      contributes it);
 *   4. after the optimizer step, with the distributed optimizer: the allgather of the updated
 *      parameters of each buffer.
 * With parallel.overlap_grad_reduce, steps 1-2 and 4 run bucket by bucket on a communication thread
 * during backward / the next forward (parallel/grad_overlap.h), with the same sums.
 * Timing: the wall time spent in step 2 and 4 collectives accumulates in comm_ms; with a timing
 * probe (tm) every collective is also a timer / trace event under Megatron's name (all-grads-sync,
 * grads-reduce-scatter, layernorm- / embedding-grads-all-reduce, params-all-gather).
 * Rule: the trainer calls these functions and no communicator itself for gradients. */
#ifndef MT_GRAD_SYNC_H
#define MT_GRAD_SYNC_H

#include "core/backend.h"
#include "core/timing.h"
#include "core/model/opt_layout.h"
#include "parallel/parallel_state.h"

/* allreduce chunk (elements) of the reduction after backward (the overlapped one uses parallel.ddp_bucket_size) */
#define MT_GRAD_BUCKET_ELEMS ((size_t)16 << 20)

typedef struct {
    const mt_param_layout *pl;
    const mt_opt_layout *ol;
    const mt_parallel_state *ps;
    mt_backend *be;
    int distributed;    /* the distributed optimizer (ZeRO-1) */
    double comm_ms;     /* time in gradient / parameter collectives (accumulated; the caller resets it) */
    mt_timing *tm;      /* per-phase timers (core/timing.h), one per collective; NULL = none */
    /* parallel.overlap_grad_reduce (parallel/grad_overlap.h): the engine, and the model's buffers it
       reduces / gathers on its thread (set by the trainer); ov = NULL: everything runs inline */
    struct mt_grad_overlap *ov;
    void *grads_base;   /* (ol.n_flat) f32 */
    void *params_base;  /* (ol.n_flat) act */
    mt_dtype act;
} mt_grad_sync;

/* The reduce group of gradient buffer b (dense: dp x cp, expert: expert-dp). */
mt_pgroup mt_grad_buffer_group(mt_grad_buffer_id b);
/* The optimizer sharding the parallel state implies: shards[b] = the reduce group's size with the
 * distributed optimizer (1 without), shard[b] = this rank's index in it. */
void mt_grad_sync_shards(const mt_parallel_state *ps, int distributed, int shards[MT_GBUFS], int shard[MT_GBUFS]);

void mt_grad_sync_init(mt_grad_sync *gs, const mt_param_layout *pl, const mt_opt_layout *ol,
                       const mt_parallel_state *ps, mt_backend *be, int distributed);
/* Step 1 only (also what a tp-only test needs): the class pre-reductions of grads (f32, flat). */
mt_status mt_grad_sync_classes(mt_grad_sync *gs, void *grads);
/* Steps 1-3: after the micro-batches (with gs->ov: the engine's finish, which ran step 2 bucket by
 * bucket during backward, instead of steps 1-2 here), grads (f32, flat) summed as above, and scalars (2 f32 on the
 * device: [loss sum, grad sq]) holding the job's loss sum and squared norm on every rank. */
mt_status mt_grad_sync_reduce(mt_grad_sync *gs, void *grads, void *scalars);
/* Step 3's norm part alone: scalars[1] = this rank's disjoint part of the squared norm. */
mt_status mt_grad_sync_norm_part(mt_grad_sync *gs, const void *grads, void *scalars);
/* Sums the two scalars over the world (the loss from tp rank 0; see above). Also used by
 * evaluation, whose scalars hold only a loss. */
mt_status mt_grad_sync_scalars(mt_grad_sync *gs, void *scalars);
/* Step 4: params (act dtype, flat) gathered from every rank's updated shard (distributed only). */
mt_status mt_grad_sync_gather_params(mt_grad_sync *gs, void *params, mt_dtype act);

#endif
