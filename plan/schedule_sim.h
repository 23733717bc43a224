/* schedule_sim.h — the pipeline-schedule simulator (plan/schedule_sim.c): runs the p stage tables
 * of parallel/schedule.h together, times them (the planner's timeline, plan/schedule_timeline.c)
 * and checks the tables' contract (parallel/schedule.h) point by point (test/unit/test_schedule.c
 * runs it over every schedule kind and shape). */
#ifndef MT_SCHEDULE_SIM_H
#define MT_SCHEDULE_SIM_H

#include "core/status.h"
#include "parallel/schedule.h"


typedef struct {
    double f, b;           /* time of one F / one B of one chunk */
    const double *f_stage; /* NULL, or p entries: per-stage F time, overrides f */
    const double *b_stage; /* NULL, or p entries: per-stage B time, overrides b */
    double p2p;            /* time a transfer takes once both ends are posted */
    int forward_only;      /* the tables come from mt_schedule_build_forward */
    const double *f_vstage; /* NULL, or p v entries: F time of chunk c on stage s at [c p + s]
                               (the virtual stage), overrides f and f_stage */
    const double *b_vstage; /* NULL, or p v entries: the same for B */
} mt_pp_sim_opts;
#define MT_PP_SIM_UNIT ((mt_pp_sim_opts){ 1.0, 1.0, NULL, NULL, 0.0, 0, NULL, NULL })

typedef struct {
    double busy;       /* time spent in F and B */
    double idle;       /* makespan - busy: waiting for peers, before the first and after the last step */
    double finish;     /* when the stage's last step ends */
    int max_in_flight; /* most (mb, chunk) held at once, from RECV_ACT (or F) to B (to F when
                          forward-only): the slots needed */
    int max_stashed;   /* most (mb, chunk) forwarded and not yet backwarded (Megatron's count; 0
                          forward-only) */
    int n_slots;       /* distinct slot values the table uses */
    int n_steps, n_groups;
} mt_pp_stage_stats;

typedef struct {
    double makespan; /* when the last stage finishes */
    double bubble;   /* sum over stages of idle / (p * makespan) */
    double bubble_max;
} mt_pp_sim_result;

/* Runs the p tables of one iteration together: each stage executes its steps in order; F and
 * B take their cost; a comm group is posted when the stage reaches it and completes when every
 * transfer in it has met its partner (the k-th send a->b pairs with the k-th recv on b from a;
 * a transfer ends p2p after both ends are posted), so a send blocks like a rendezvous.
 * Checks, returning MT_ERR_INTERNAL with a message naming stage, step and what is wrong:
 * step fields in range; partners agree (kind, mb, adjacent virtual stage, peers); F after its
 * activation arrived, B after its F and its gradient; SEND after the step that produced the
 * data; every (mb, chunk) forwarded and backwarded exactly once per stage; act-out / grad-out
 * never overwritten before sent; slots never shared by two live (mb, chunk); comm groups
 * numbered as documented; and deadlock (no stage can move: names where each one waits).
 * opts NULL: MT_PP_SIM_UNIT (F = B = 1, free transfers, training tables). stats: NULL or p
 * entries. start: NULL, or p arrays of n_steps[s] doubles that get each step's start time
 * (a transfer's: when its group was posted), for drawing the timeline. */
mt_status mt_schedule_simulate(int p, int m, int v, const mt_pp_step *const *tables, const int *n_steps,
                               const mt_pp_sim_opts *opts, mt_pp_sim_result *res, mt_pp_stage_stats *stats,
                               double *const *start);

#endif
