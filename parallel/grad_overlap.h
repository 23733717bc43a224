/* grad_overlap.h — overlapped gradient reduction and parameter gather (Megatron's
 * --overlap-grad-reduce / --overlap-param-gather / --ddp-bucket-size), on top of grad_sync.h.
 *
 * Buckets (mt_go_plan, pure: grad_overlap_plan.c). The gradients of one stage are walked in the
 * order backward finishes them — the head (final norm, output layer), then local layers L-1 .. 0
 * (every stacked tensor's slice of the layer), then the embedding — and cut into buckets of about
 * parallel.ddp_bucket_size elements (default Megatron's max(40M, 1M * reduce group size)): a bucket
 * closes once it holds that many, as Megatron's param_and_grad_buffer does walking parameters in
 * reverse. Our buffers are stacked per tensor (L, rows, cols), so a bucket is a list of flat ranges
 * (each a run of layers of one tensor), one list per gradient buffer (dense over dp x cp, expert over
 * expert-dp). Tensors whose class needs a pre-reduction on another group (tp-partial norms under SP,
 * the tied embedding over the embedding group) go to one tail bucket per buffer, reduced after the
 * main thread has run those pre-reductions at the end of backward.
 *
 * When is a gradient final? The model calls mt_grad_overlap_backward_done after each part's
 * backward (a layer, the head, the embedding); the engine counts the calls per part and a part is
 * final after this iteration's n_micro-th call: the last micro-batch's backward of that part, under
 * any pipeline schedule (1F1B, interleaved). A bucket whose parts are all final is queued at once.
 *
 * Communication thread. One per rank, with its OWN communicators split from the world for the
 * dp x cp and expert-dp groups at init: the parallel state's groups share communicators between
 * groups with the same ranks (dp may be the world one, which the main thread uses for the loss /
 * stop votes / timers), and a shared-memory communicator is used by one thread at a time, as a
 * NCCL communicator is. Separate communicators have separate segments and no shared mutable state
 * (comm_shm.h), so the thread's collectives never interleave with the main thread's tp / pp / ep /
 * cp ones. Every rank of a group queues the same buckets in the same order (the same schedule
 * table finishes the same parts in the same order), so the thread's collectives match up.
 *
 * Same numbers: a bucket's allreduce / reduce-scatter sums each element over the ranks in rank
 * order, as the non-overlapped path does for the whole buffer, and each rank keeps the contiguous
 * optimizer shard of opt_layout.h (per bucket, the part of each rank's shard that falls in the
 * bucket, padded to the largest, is one reduce-scatter): the gradients, the loss and the norm are
 * bitwise those of the non-overlapped run (test/e2e/overlap_equivalence.sh).
 *
 * Parameter gather (distributed optimizer): after the optimizer step the buckets' allgathers are
 * queued in forward order (tail, then the bucket of the embedding / layer 0 upward), and the
 * model calls mt_grad_overlap_forward_begin before a part's forward: it waits for the gathers of
 * that part's parameters only. Anything else that reads the parameters (a checkpoint save, the end
 * of training) calls mt_grad_overlap_wait_params first.
 *
 * Failure: an error on the thread (a dead or stuck peer: the communicator's timeout / liveness
 * checks) is kept with its message and returned by the next engine call on the main thread, so
 * the run exits non-zero naming the rank; mt_grad_overlap_free on an error path aborts the
 * thread's communicators (the family's abort: every peer's waits fail promptly) before joining.
 *
 * CUDA / NCCL hook: the thread exists because the shared-memory collectives are blocking host
 * code. With device buffers the same plan drives stream-ordered collectives instead: where
 * go_issue() queues a task, record an event on the compute stream, make a communication stream wait
 * on it and issue the bucket's ncclAllReduce / ncclReduceScatter / ncclAllGather there (on the
 * engine's own communicators, which the factory would split as NCCL communicators); where the main
 * thread waits (go_wait_until), make the compute stream wait on the bucket's completion event; the
 * model's part hooks and the plan stay as they are. Until then mt_grad_overlap_init refuses device
 * memory (no device pointers handed to host threads) and the trainer reduces after backward on such
 * a backend, with a note. */
#ifndef MT_GRAD_OVERLAP_H
#define MT_GRAD_OVERLAP_H

#include <stddef.h>
#include <stdint.h>

#include "parallel/grad_sync.h"

/* parts of a stage the model reports, besides local layer numbers 0 .. L-1 */
#define MT_GO_EMBED (-1)
#define MT_GO_HEAD (-2)

typedef struct {
    size_t lo, n; /* flat elements [lo, lo + n) of the params / grads */
} mt_go_range;

typedef struct {
    int buffer;          /* gradient buffer (mt_grad_buffer_id) */
    int tail;            /* needs the class pre-reductions first (queued at the end of backward) */
    int ev_lo, ev_hi;    /* the production events it needs, inclusive (mt_go_event) */
    int r0, n_r;         /* its ranges: plan->ranges[r0 .. r0 + n_r) */
    size_t n;            /* elements */
    int o0;              /* distributed: plan->own_off[o0 + r] .. [o0 + r + 1) index plan->own for owner r */
    size_t n_per;        /* distributed: the largest owner's elements (the padded reduce-scatter's count) */
} mt_go_bucket;

typedef struct {
    int L;               /* local layers */
    int n_events;        /* L + 2: event 0 = head, 1 + (L-1-l) = layer l, L + 1 = embedding */
    mt_go_bucket *b;
    int n_b;
    mt_go_range *ranges; /* every bucket's ranges */
    int n_ranges;
    mt_go_range *own;    /* distributed: each bucket's ranges cut by optimizer shard, grouped by owner */
    int *own_off;
    int n_own;
    int shards[MT_GBUFS];
    size_t max_n_per;    /* the largest n_per (staging size) */
} mt_go_plan;

/* The event index of a part (a layer, MT_GO_HEAD or MT_GO_EMBED). */
static inline int mt_go_event(int L, int part) {
    return part == MT_GO_HEAD ? 0 : part == MT_GO_EMBED ? L + 1 : 1 + (L - 1 - part);
}

/* Builds the buckets of layout pl / ol with buckets of bucket_elems[b] elements for buffer b;
 * pre_reduced[ti] = tensor ti goes to its buffer's tail bucket; has_embed / has_head: this stage's
 * ends (the word embedding's gradient is final after the embedding on the first stage, after the
 * head on the last). Errors: out of memory. */
mt_status mt_go_plan_build(mt_go_plan *p, const mt_param_layout *pl, const mt_opt_layout *ol,
                           const size_t bucket_elems[MT_GBUFS], const unsigned char *pre_reduced);
void mt_go_plan_free(mt_go_plan *p);

typedef struct mt_grad_overlap mt_grad_overlap;

/* Builds the plan, splits the engine's communicators from the world (collective over the world:
 * every rank calls it with the same recipe) and starts the thread. bucket_size 0 = auto.
 * param_gather: overlap the distributed optimizer's parameter allgather too. Errors: device memory
 * (see the CUDA hook above), a split, out of memory. */
mt_status mt_grad_overlap_init(mt_grad_overlap **out, mt_grad_sync *gs, const mt_parallel_state *ps,
                               int64_t bucket_size, int param_gather);
/* Stops the thread and frees everything; failed: the caller is on an error path (abort the
 * engine's communicators first, so a thread stuck in a collective returns). NULL is allowed. */
void mt_grad_overlap_free(mt_grad_overlap *ov, int failed);

/* An iteration's backward begins: n_micro backward calls per part make a gradient final. */
mt_status mt_grad_overlap_begin(mt_grad_overlap *ov, int n_micro);
/* The model's hooks: after a part's backward accumulated its gradients / before a part's forward. */
mt_status mt_grad_overlap_backward_done(mt_grad_overlap *ov, int part);
mt_status mt_grad_overlap_forward_begin(mt_grad_overlap *ov, int part);
/* After the last backward: the class pre-reductions, the tail buckets, and the wait for every
 * bucket (grad_sync's steps 1 and 2; mt_grad_sync_reduce calls it when gs->ov is set). */
mt_status mt_grad_overlap_finish(mt_grad_overlap *ov, void *grads);
/* After the optimizer step (distributed optimizer): queues every bucket's parameter allgather. */
mt_status mt_grad_overlap_gather_params(mt_grad_overlap *ov);
/* Waits for every queued parameter gather. */
mt_status mt_grad_overlap_wait_params(mt_grad_overlap *ov);
/* Whether the engine overlaps the parameter gather (else the caller gathers as before). */
int mt_grad_overlap_gathers(const mt_grad_overlap *ov);
/* One line for the start-up log: buckets, their size, what overlaps. */
void mt_grad_overlap_describe(const mt_grad_overlap *ov, char *buf, size_t n);
/* Times since the last call, ms: the thread's gradient collectives, the main thread's waits
 * for them; the thread's parameter gathers, the main thread's waits for those. */
void mt_grad_overlap_times(mt_grad_overlap *ov, double *reduce_ms, double *reduce_exposed_ms,
                           double *gather_ms, double *gather_exposed_ms);

#endif
