/* comm_clock.h — time spent in collectives, one clock per process group of the parallel state.
 * The model's communicating layers (parallel/tp_layers.c, cp_attention.c, ep_dispatch.c) each
 * hold a pointer to the clock of the group they talk over and add every collective's wall time
 * and count to it; the trainer resets, sums and reports all clocks in one place, by group id,
 * without naming an axis. A layer whose clock pointer is NULL is not timed. */
#ifndef MT_COMM_CLOCK_H
#define MT_COMM_CLOCK_H

#include <stdint.h>
#include <stdio.h>

#include "core/clock.h"
#include "parallel/parallel_state.h"

typedef struct {
    double ms;        /* wall time inside the group's collectives (accumulated) */
    int64_t n_calls;  /* collectives issued */
} mt_comm_clock;

typedef struct {
    mt_comm_clock g[MT_PG_COUNT]; /* indexed by mt_pgroup */
} mt_comm_clocks;

/* Adds the time since t0_ms (an mt_clock_ms() reading) and one call to c (NULL: nothing). */
static inline void mt_comm_clock_stop(mt_comm_clock *c, double t0_ms) {
    if (!c) return;
    c->ms += mt_clock_ms() - t0_ms;
    c->n_calls++;
}

void mt_comm_clocks_reset(mt_comm_clocks *c);
/* sum += c, group by group */
void mt_comm_clocks_add(mt_comm_clocks *sum, const mt_comm_clocks *c);
/* The model layers' time in all groups together (ms). */
double mt_comm_clocks_total_ms(const mt_comm_clocks *c);

/* The end-of-run lines about communication, from clocks summed over n_iters iterations of mean_ms
 * each, and grad_ms: the gradient synchronisation's time over them (parallel/grad_sync.h). A group
 * whose layer has a line of its own (the expert all-to-all, the cp ring) gets it when the group has
 * more than one rank; then one line with the tensor-parallel layers' time and the gradient
 * synchronisation's, when the job has more than one rank. Nothing when log is NULL. */
void mt_comm_clocks_print(FILE *log, const char *prefix, const mt_parallel_state *ps, const mt_comm_clocks *sum,
                          double grad_ms, double n_iters, double mean_ms);

#endif
