/* schedule.h — pipeline-parallel schedules as pure tables (the simulator that runs and checks them is
 * the planner's: plan/schedule_sim.h).
 *
 * A schedule is, per pipeline stage, the ordered list of steps that stage executes in one
 * iteration: forward / backward of one micro-batch on one model chunk, and the point-to-point
 * transfers of activations (downstream) and their gradients (upstream). Three kinds, as in
 * Megatron-Core (megatron/core/pipeline_parallel/schedules.py):
 *   MT_SCHED_AFAB         all forwards, then all backwards (GPipe); holds m micro-batches.
 *   MT_SCHED_1F1B         forward_backward_pipelining_without_interleaving: warm-up of
 *                         min(p - stage - 1, m) forwards, steady one-forward-one-backward,
 *                         cool-down backwards; holds at most min(p - stage, m).
 *   MT_SCHED_INTERLEAVED  forward_backward_pipelining_with_interleaving: v model chunks per
 *                         stage (chunk k of stage s = virtual stage k*p + s), micro-batches in
 *                         groups of p, warm-up min(2(p - stage - 1) + (v - 1)p, m v).
 *                         Needs m % p == 0 (Megatron's rule; see mt_schedule_check).
 * docs/pipeline.md gives the formulas, the bubble and how to read a table.
 *
 * Contract of a table (what the trainer may rely on; the simulator checks every point):
 *  - every (mb, chunk) is forwarded once and backwarded once on every stage; backwards of one
 *    chunk run in micro-batch order 0..m-1 in every schedule (the serial accumulation order);
 *  - virtual stage 0 (stage 0, chunk 0) reads its micro-batch from the data and has no
 *    RECV_ACT; the last virtual stage (stage p-1, chunk v-1) computes the loss in F, starts B
 *    from it, and has no SEND_ACT / RECV_GRAD; every other (mb, chunk) has all four transfers;
 *  - transfers carry no tags: messages between an ordered pair of stages are matched in order
 *    (NCCL and comm_shm both keep that order), and the k-th SEND from a to b carries exactly
 *    what the k-th RECV on b from a expects (same kind, same mb, adjacent virtual stage);
 *  - consecutive transfer steps with the same `group` must be issued between one
 *    group_start/group_end (they are Megatron's batched send_forward_recv_backward etc.);
 *    with that, the tables cannot deadlock even if every send blocks until its receive is
 *    posted (rendezvous) — the simulator proves it for each table it is given;
 *  - buffers: `slot` (0 .. mt_schedule_max_in_flight - 1) names the activation buffer of
 *    (mb, chunk) on this stage from its RECV_ACT (or F on virtual stage 0) to its B: RECV_ACT
 *    writes the slot's input, F stashes there, RECV_GRAD writes the slot's output gradient, B
 *    frees it. F writes its output into the stage's one "act-out" buffer and B its input
 *    gradient into the one "grad-out" buffer: each F's SEND_ACT comes before the next F and each
 *    B's SEND_GRAD before the next B, so one of each suffices. SEND_GRAD's slot is -1.
 * Forward-only tables (evaluation, mt_schedule_build_forward) have F and activation transfers
 * only; a slot is held from RECV_ACT to F, and SEND_ACT's slot is -1 (sent from act-out).
 *
 * Rules: builders are pure (no state, no allocation, no I/O) and write only into the caller's
 * array; errors are mt_status with a message naming the recipe key and the fix. The simulator
 * allocates its own working memory and frees it before returning. */
#ifndef MT_SCHEDULE_H
#define MT_SCHEDULE_H

#include "core/status.h"

typedef enum {
    MT_SCHED_AFAB = 0,    /* all-forward-all-backward (GPipe) */
    MT_SCHED_1F1B,        /* one-forward-one-backward (PipeDream-flush, Megatron default) */
    MT_SCHED_INTERLEAVED, /* interleaved 1F1B with v model chunks per stage */
    MT_SCHED_COUNT
} mt_sched;

typedef enum {
    MT_PP_FWD = 0,   /* forward of (mb, chunk) */
    MT_PP_BWD,       /* backward of (mb, chunk) */
    MT_PP_SEND_ACT,  /* send the output of F(mb, chunk) to the next virtual stage (peer) */
    MT_PP_RECV_ACT,  /* receive the input of F(mb, chunk) from the previous virtual stage (peer) */
    MT_PP_SEND_GRAD, /* send the input gradient of B(mb, chunk) to the previous virtual stage */
    MT_PP_RECV_GRAD, /* receive the output gradient of (mb, chunk) from the next virtual stage */
    MT_PP_OPS
} mt_pp_op;

typedef struct {
    mt_pp_op op;
    int mb;    /* micro-batch, 0 .. m-1 */
    int chunk; /* model chunk on this stage, 0 .. v-1: layers of virtual stage chunk*p + stage.
                  For transfers, the chunk on THIS stage the data belongs to (a RECV_ACT on stage
                  0 from stage p-1 is labelled with the chunk that will consume it) */
    int peer;  /* transfers: pipeline stage at the other end (0 .. p-1); -1 for F and B */
    int group; /* transfers: comm group number on this stage, increasing from 0; a group is the
                  run of consecutive steps with one number; -1 for F and B */
    int slot;  /* activation buffer of (mb, chunk), see above; -1 for SEND_GRAD */
} mt_pp_step;

static inline int mt_pp_op_is_comm(mt_pp_op op) { return op >= MT_PP_SEND_ACT && op < MT_PP_OPS; }
static inline int mt_pp_op_is_send(mt_pp_op op) { return op == MT_PP_SEND_ACT || op == MT_PP_SEND_GRAD; }

const char *mt_schedule_name(mt_sched kind); /* "afab", "1f1b", "interleaved" */
const char *mt_pp_op_name(mt_pp_op op);      /* "F", "B", "send_act", "recv_act", "send_grad", "recv_grad" */

/* The schedule a recipe gets: interleaved when v > 1, else 1F1B. */
mt_sched mt_schedule_default(int p, int v);

/* Validates (kind, p, m, v) as a recipe would give them; MT_ERR_CONFIG with a message naming
 * parallel.pipeline / parallel.virtual_pipeline / training.global_batch and the fix:
 *   p >= 1, m >= 1, v >= 1; v > 1 only with MT_SCHED_INTERLEAVED and p > 1;
 *   MT_SCHED_INTERLEAVED: m % p == 0 (micro-batches go in groups of p, as in Megatron's
 *   check that num_microbatches is divisible by the pipeline size); 6 m v fits an int.
 * MT_ERR_INTERNAL for an unknown kind. */
mt_status mt_schedule_check(mt_sched kind, int p, int m, int v);

/* Steps of the longest stage table (size of the steps array for any stage), 0 when the
 * arguments are invalid. Stage s has exactly 6 m v - 2 m ([s == 0] + [s == p-1]) steps. */
int mt_schedule_max_steps(mt_sched kind, int p, int m, int v);

/* Activation buffers stage `stage` needs at once (the slots of its table), 0 when invalid:
 *   AFAB m;  1F1B min(p - stage, m);  INTERLEAVED see docs/pipeline.md (computed exactly by
 *   running the generator without storing the table). */
int mt_schedule_max_in_flight(mt_sched kind, int p, int m, int v, int stage);

/* Forwards a stage runs before its first backward (Megatron's num_warmup_microbatches). */
int mt_schedule_warmup(mt_sched kind, int p, int m, int v, int stage);

/* The bubble formula: idle share of a stage when F and B cost the same on every stage and
 * transfers are free: (p-1)/(m+p-1) for AFAB and 1F1B, (p-1)/(v m + p-1) interleaved. */
double mt_schedule_bubble_formula(mt_sched kind, int p, int m, int v);

/* Writes stage `stage`'s table into steps[0 .. *n_steps). max_steps: capacity of steps
 * (mt_schedule_max_steps suffices). Errors: mt_schedule_check's; MT_ERR_INTERNAL when stage is
 * outside 0..p-1 or steps is too small (nothing useful is left in steps then). */
mt_status mt_schedule_build(mt_sched kind, int p, int m, int v, int stage, mt_pp_step *steps, int max_steps,
                            int *n_steps);

/* Forward-only table for evaluation (Megatron's forward_only=True: every forward is warm-up):
 * AFAB and 1F1B give recv, F, send per micro-batch; interleaved keeps the virtual order and its
 * batched send_forward_recv_forward groups (recv, F, send each blocking on its own deadlocks
 * there for every p >= 2). Stage s has 3 m v - m ([s == 0] + [s == p-1]) steps. *n_slots (may be NULL): input
 * buffers held at once (1 on every stage with these schedules; tested for p <= 8, m <= 32).
 * mt_schedule_max_steps is a large enough array. */
mt_status mt_schedule_build_forward(mt_sched kind, int p, int m, int v, int stage, mt_pp_step *steps, int max_steps,
                                    int *n_steps, int *n_slots);

/* "F mb3 c1 s2", "send_act mb3 c1 ->1 g7"; returns snprintf's count. */
int mt_pp_step_format(const mt_pp_step *st, char *buf, int n_buf);

#endif
