/* ep_dispatch.h — expert parallelism's layer: the token dispatch and combine of a mixture-of-
 * experts layer over the expert group (Megatron-Core's alltoall token dispatcher). The router,
 * the permutation into the dispatch layout and the experts' GEMMs are the model's
 * (train/model_moe.c); this layer moves rows between ep ranks:
 *   counts: each rank's kept rows per expert -> every rank learns how many rows it receives from
 *           each source for each of its E_r local experts (an all-to-all of counts), read to the
 *           host (the one synchronisation a MoE layer needs, as Megatron's .cpu() of
 *           tokens_per_expert) into the all-to-all tables;
 *   dispatch: rows all-to-all (dispatch layout -> received [source][expert]), then a reorder to
 *           expert-major / source-minor;
 *   combine: the reverse reorder and all-to-all.
 * With ep = 1 the counts are copied and nothing else is communicated (the model skips dispatch
 * and combine). The layer takes backend, group and shapes as arguments; its host tables are
 * allocated once by mt_ep_init. All-to-alls are timed into *clock. */
#ifndef MT_EP_DISPATCH_H
#define MT_EP_DISPATCH_H

#include <stdint.h>

#include "core/backend.h"
#include "parallel/comm_clock.h"
#include "parallel/parallel_state.h"

typedef struct {
    mt_backend *be;
    mt_comm *comm;         /* the expert-parallel group; NULL when ep = 1 */
    int ep, rank;          /* group size and this rank's index: it holds experts [rank E_r, (rank + 1) E_r) */
    int E, E_r, C;         /* experts, local experts, row width (elements) */
    int max_recv, max_send;/* rows the caller's received / dispatch buffers hold */
    mt_dtype act;
    int32_t *host;         /* (2E + ep E_r) i32 host: one layer's counts */
    size_t *tab;           /* (4 ep) host: all-to-all counts and displacements (elements) */
    mt_comm_clock *clock;  /* the all-to-alls' time (NULL: untimed) */
} mt_ep;

/* Fills e for E experts over group g (size 1: ep = 1) and allocates its host tables. Errors name a
 * group that does not match parallel.expert = ep. */
mt_status mt_ep_init(mt_ep *e, mt_backend *be, mt_dtype act, const mt_group *g, int ep, int E, int C, int max_recv,
                     int max_send);
void mt_ep_free(mt_ep *e);

/* Forward: counts (2E + ep E_r) i32 device memory holds this rank's kept rows per expert in [0, E);
 * receives in [2E, 2E + ep E_r) the rows each source sends to each local expert, and reads them
 * into the tables. */
mt_status mt_ep_exchange_counts(mt_ep *e, int32_t *counts);
/* Backward: the tables again from a layer's counts saved by the forward. */
mt_status mt_ep_read_counts(mt_ep *e, const int32_t *counts);
/* Rows of local expert le in the expert-major layout: the count, and the first in *r0. */
size_t mt_ep_expert_rows(const mt_ep *e, int le, size_t *r0);
/* ep > 1: rows from the dispatch layout `send` to this rank's experts, expert-major, in `dst`
 * (recv: scratch of max_recv rows). */
mt_status mt_ep_dispatch(mt_ep *e, const void *send, void *recv, void *dst);
/* ep > 1: the reverse: expert-major rows `src` back to their sources' dispatch layout in `dst`
 * (recv: scratch as above). */
mt_status mt_ep_combine(mt_ep *e, const void *src, void *recv, void *dst);

#endif
