/* timers.h — Megatron's per-phase timers (--timing-log-level 0|1|2, --timing-log-option
 * minmax|max|all) and the owner of the timing probe (core/timing.h) that train.c, pipeline.c and
 * parallel/grad_sync.c call. Each iteration a timer adds the wall time of its phase on this rank; at
 * every log line one allgather of the timer vector over the world (Megatron's timers.log gathers a
 * [world, timers] tensor the same way) gives each timer's min and max over the ranks that ran it,
 * averaged over the log interval's iterations, printed by the logging rank as Megatron does:
 *     (min, max) time across ranks (ms):
 *         forward-backward ...............................: (30.12, 41.20)
 * followed by `straggler: rank R forward-backward X ms vs fastest Y ms (+Z%)` (world > 1).
 * Levels (logging.timing_level): 1 = forward-backward, batch-generator, the gradient and parameter
 * collectives, optimizer; 2 = also forward-compute, backward-compute, the pipeline transfers and the
 * tp collectives; 3 (mtrain's own) = also the op timers, every backend op's time by class (gemm-ops,
 * attention-ops, norm-ops, elementwise-ops, optimizer-ops, memory-ops; core/backend_timed.h, attached
 * by train.c). A phase's end waits for the device (backend sync) only while the timer is active,
 * as Megatron's timers synchronise CUDA. Timers never touch data: numerics are the same at any level.
 * While the profiler records an iteration (train/profile.h) every probe is active and each phase
 * also becomes a trace event. Rule: nothing is allocated after mt_timers_init. */
#ifndef MT_TIMERS_H
#define MT_TIMERS_H

#include <stdint.h>
#include <stdio.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "core/timing.h"
#include "parallel/comm_clock.h"
#include "parallel/parallel_state.h"
#include "train/profile.h"

typedef struct {
    mt_timing probe;                  /* first: the callbacks cast back */
    int level;                        /* logging.timing_level */
    mt_timing_option option;
    unsigned char timed[MT_TM_COUNT]; /* the timer's level <= level */
    double acc[MT_TM_COUNT];          /* ms in the current log interval */
    int paused;
    int between;                      /* after an iteration's step, until the next one begins */
    int64_t iteration;
    mt_profiler *prof;                /* NULL: no profiler */
    mt_backend *be;
    const mt_parallel_state *ps;
    void *dev;                        /* ((1 + world) * MT_TM_COUNT) f32 backend: the gather */
    float *host;                      /* the same on the host */
    char *text;                       /* (text_bytes) the printed block */
    size_t text_bytes;
    /* the last mt_timers_gather: per iteration ms, min and max over the ranks that ran the timer
     * (ran[i] of them; 0 = not timed or not run); names[i] = mt_timer_name(i). For the metrics file. */
    double lo_ms[MT_TM_COUNT], hi_ms[MT_TM_COUNT];
    int ran[MT_TM_COUNT];
    const char *names[MT_TM_COUNT];
    double norm;                      /* iterations the last gather averaged over */
} mt_timers;

/* prof may be NULL. Level 0 without a profiler allocates nothing. */
mt_status mt_timers_init(mt_timers *tm, const mt_recipe *r, const mt_parallel_state *ps, mt_backend *be,
                         mt_profiler *prof);
void mt_timers_free(mt_timers *tm);
/* Iteration `it` begins: which probes are active (timed ones, all of them while profiling). */
void mt_timers_iteration(mt_timers *tm, int64_t it);
/* Iteration's step done: nothing is timed until the next mt_timers_iteration (checkpoint saves,
 * evaluation, the log line's own gathers are not part of a step). */
void mt_timers_step_done(mt_timers *tm);
/* Evaluation: nothing is timed or recorded between pause and resume. */
void mt_timers_pause(mt_timers *tm);
void mt_timers_resume(mt_timers *tm);
/* Adds ms measured elsewhere to a timer, if it is timed. */
static inline void mt_timers_add(mt_timers *tm, mt_timer_id id, double ms) {
    if (tm->timed[id] && !tm->paused) tm->acc[id] += ms;
}
/* Adds the model layers' collective time of one step (per group, parallel/comm_clock.h) to the
 * timer that reports it: the tensor-parallel group's to tp-collectives. */
static inline void mt_timers_add_comm(mt_timers *tm, const mt_comm_clocks *c) {
    mt_timers_add(tm, MT_TM_TP, c->g[MT_PG_TP].ms);
}
/* At a log line, on every rank (collective over the world when level > 0): the block over the
 * interval's n_iters iterations on `log` (the logging rank; NULL elsewhere); resets the timers. */
mt_status mt_timers_log(mt_timers *tm, FILE *log, const char *prefix, int64_t n_iters);
/* mt_timers_log in two halves: gather (the collective; fills lo_ms / hi_ms / ran and resets the
 * timers) and print (the block of the last gather on `log`, NULL = none), so the metrics record of
 * the log line can carry the gathered timers before the block is printed. */
mt_status mt_timers_gather(mt_timers *tm, int64_t n_iters);
void mt_timers_print(mt_timers *tm, FILE *log, const char *prefix);

#endif
