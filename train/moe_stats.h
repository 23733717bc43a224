/* moe_stats.h — the step's mixture-of-experts numbers for the log line and the metrics file:
 * Megatron's load_balancing_loss (the aux loss without its coefficient, averaged over MoE layers
 * and micro-batches), the z-loss, each expert's share of the routed assignments, and the
 * assignments dropped over capacity — summed over the job's ranks once per step. */
#ifndef MT_MOE_STATS_H
#define MT_MOE_STATS_H

#include "parallel/grad_sync.h"
#include "train/model.h"

typedef struct {
    int E;                 /* 0: a dense model (nothing to do) */
    float *host;           /* (MT_MOE_STATS + 2E) host copy of the reduced sums */
    double *load;          /* (E) share of the routed assignments per expert */
    double lb_loss, z_loss, dropped, routed;
} mt_moe_stats;

/* Host buffers for the model's experts (before the loop: nothing is allocated in it). */
mt_status mt_moe_stats_open(mt_moe_stats *s, const mt_model *m);
void mt_moe_stats_close(mt_moe_stats *s);
/* After the step's gradient sync: the model's sums over the world (tp rank 0's copy: every tp rank
 * routes the same tokens), read to the host; n_micro: micro-batches of the whole global batch. */
mt_status mt_moe_stats_collect(mt_moe_stats *s, mt_model *m, const mt_grad_sync *gs, int64_t n_micro);

#endif
