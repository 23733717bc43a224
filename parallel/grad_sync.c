/* grad_sync.c — the gradient classes' communication (see grad_sync.h). */
#include "parallel/grad_sync.h"

#include "core/clock.h"
#include "parallel/grad_overlap.h"

mt_pgroup mt_grad_buffer_group(mt_grad_buffer_id b) { return b == MT_GBUF_EXPERT ? MT_PG_EDP : MT_PG_DP_CP; }

/* the reduce group of gradient buffer b on this rank */
static const mt_group *buffer_group(const mt_parallel_state *ps, int b) {
    return mt_pstate_group(ps, mt_grad_buffer_group((mt_grad_buffer_id)b));
}

void mt_grad_sync_shards(const mt_parallel_state *ps, int distributed, int shards[MT_GBUFS], int shard[MT_GBUFS]) {
    for (int b = 0; b < MT_GBUFS; b++) {
        const mt_group *g = buffer_group(ps, b);
        shards[b] = distributed ? g->size : 1;
        shard[b] = distributed ? g->rank : 0;
    }
}

void mt_grad_sync_init(mt_grad_sync *gs, const mt_param_layout *pl, const mt_opt_layout *ol,
                       const mt_parallel_state *ps, mt_backend *be, int distributed) {
    gs->pl = pl;
    gs->ol = ol;
    gs->ps = ps;
    gs->be = be;
    gs->distributed = distributed;
    gs->comm_ms = 0;
    gs->tm = NULL;
    gs->ov = NULL;
    gs->grads_base = gs->params_base = NULL;
    gs->act = MT_F32;
}

/* the group a class is summed over before its buffer's reduction (MT_PG_COUNT: none) */
static mt_pgroup class_pre_group(mt_grad_class c) {
    switch (c) {
    case MT_GRAD_TP_PARTIAL: return MT_PG_TP;
    case MT_GRAD_EMBEDDING: return MT_PG_EMB;
    default: return MT_PG_COUNT;
    }
}

mt_status mt_grad_sync_classes(mt_grad_sync *gs, void *grads) {
    mt_status st = MT_OK;
    for (int ti = 0; ti < gs->pl->n_tensors; ti++) {
        const mt_param_tensor *t = &gs->pl->t[ti];
        const mt_pgroup pg = class_pre_group(t->gclass);
        if (pg == MT_PG_COUNT) continue;
        const mt_group *g = mt_pstate_group(gs->ps, pg);
        if (g->size <= 1) continue;
        float *p = (float *)grads + t->offset;
        const mt_timer_id id = pg == MT_PG_TP ? MT_TM_LN_GRADS : MT_TM_EMB_GRADS;
        const double t0 = mt_timing_begin(gs->tm, id);
        MT_CHECK(g->comm->i->allreduce(g->comm, p, p, t->n, MT_F32, MT_RED_SUM));
        mt_timing_end(gs->tm, id, t0, -1, -1);
    }
out:
    return st;
}

static mt_status reduce_buffers(mt_grad_sync *gs, void *grads) {
    mt_status st = MT_OK;
    const double t0 = mt_clock_ms();
    for (int b = 0; b < MT_GBUFS; b++) {
        const mt_grad_region *r = &gs->ol->reg[b];
        const mt_group *g = buffer_group(gs->ps, b);
        if (r->n == 0 || g->size <= 1) continue;
        float *base = (float *)grads + r->begin;
        if (gs->distributed) {
            const double t1 = mt_timing_begin(gs->tm, MT_TM_GRADS_RS);
            MT_CHECK(g->comm->i->reduce_scatter(g->comm, base, (float *)grads + mt_opt_shard_lo(gs->ol, b), r->shard_n,
                                                MT_F32, MT_RED_SUM));
            mt_timing_end(gs->tm, MT_TM_GRADS_RS, t1, -1, -1);
            continue;
        }
        for (size_t off = 0; off < r->n; off += MT_GRAD_BUCKET_ELEMS) {
            const size_t n = r->n - off < MT_GRAD_BUCKET_ELEMS ? r->n - off : MT_GRAD_BUCKET_ELEMS;
            const double t1 = mt_timing_begin(gs->tm, MT_TM_GRADS_SYNC);
            MT_CHECK(g->comm->i->allreduce(g->comm, base + off, base + off, n, MT_F32, MT_RED_SUM));
            mt_timing_end(gs->tm, MT_TM_GRADS_SYNC, t1, -1, -1);
        }
    }
out:
    gs->comm_ms += mt_clock_ms() - t0;
    return st;
}

/* squares of grads[lo, hi) added into *sq (device) */
static mt_status add_squares(mt_grad_sync *gs, float *sq, const void *grads, size_t lo, size_t hi) {
    if (hi <= lo) return MT_OK;
    mt_sum_args sa = {.out = sq, .x = (const char *)grads + lo * 4, .n = hi - lo, .squares = 1};
    return MT_BE_CALL(gs->be, sum, &sa);
}

/* Whether tensor t's gradient counts in this rank's part of the norm: tensors replicated over tp
 * count on tp rank 0 only, a pipeline copy (the tied wte on the last stage) only on its owner. */
static int norm_counts(const mt_param_tensor *t, int tp_rank) {
    return !(t->shard == MT_SHARD_NONE && tp_rank != 0) && !t->pp_copy;
}

mt_status mt_grad_sync_norm_part(mt_grad_sync *gs, const void *grads, void *scalars) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = gs->pl;
    const int tp_rank = mt_pstate_group(gs->ps, MT_PG_TP)->rank;
    float *sq = (float *)scalars + 1;
    MT_CHECK(gs->be->i->memset_zero(gs->be, sq, 4));
    int skips = 0; /* some tensor this rank must leave out */
    for (int ti = 0; ti < pl->n_tensors; ti++) skips |= !norm_counts(&pl->t[ti], tp_rank);
    for (int b = 0; b < MT_GBUFS; b++) {
        const mt_grad_region *r = &gs->ol->reg[b];
        const mt_group *g = buffer_group(gs->ps, b);
        if (r->n == 0) continue;
        if (!gs->distributed && g->rank != 0) continue; /* replicas of the reduced sum: rank 0 counts */
        const size_t lo = gs->distributed ? mt_opt_shard_lo(gs->ol, (mt_grad_buffer_id)b) : r->begin;
        const size_t hi = lo + (gs->distributed ? r->shard_n : r->n);
        if (!skips) { /* the whole range at once (padding holds zeros) */
            MT_CHECK(add_squares(gs, sq, grads, lo, hi));
            continue;
        }
        for (int ti = 0; ti < pl->n_tensors; ti++) {
            const mt_param_tensor *t = &pl->t[ti];
            mt_opt_piece pc; /* the piece this rank owns (all of it without the distributed optimizer) */
            if ((int)mt_grad_class_buffer(t->gclass) != b || !norm_counts(t, tp_rank)) continue;
            if (mt_opt_piece_of(pl, gs->ol, ti, &pc)) MT_CHECK(add_squares(gs, sq, grads, pc.lo, pc.hi));
        }
    }
out:
    return st;
}

mt_status mt_grad_sync_scalars(mt_grad_sync *gs, void *scalars) {
    const mt_group *w = mt_pstate_group(gs->ps, MT_PG_WORLD);
    if (w->size <= 1) return MT_OK;
    mt_status st = MT_OK;
    if (mt_pstate_group(gs->ps, MT_PG_TP)->rank != 0) /* every tp rank holds the full loss sum */
        MT_CHECK(gs->be->i->memset_zero(gs->be, scalars, 4));
    const double t0 = mt_clock_ms(), t1 = mt_timing_begin(gs->tm, MT_TM_NORM_LOSS);
    st = w->comm->i->allreduce(w->comm, scalars, scalars, 2, MT_F32, MT_RED_SUM);
    mt_timing_end(gs->tm, MT_TM_NORM_LOSS, t1, -1, -1);
    gs->comm_ms += mt_clock_ms() - t0;
out:
    return st;
}

mt_status mt_grad_sync_reduce(mt_grad_sync *gs, void *grads, void *scalars) {
    mt_status st = MT_OK;
    if (gs->ov) {
        MT_CHECK(mt_grad_overlap_finish(gs->ov, grads));
    } else {
        MT_CHECK(mt_grad_sync_classes(gs, grads));
        MT_CHECK(reduce_buffers(gs, grads));
    }
    MT_CHECK(mt_grad_sync_norm_part(gs, grads, scalars));
    MT_CHECK(mt_grad_sync_scalars(gs, scalars));
out:
    return st;
}

mt_status mt_grad_sync_gather_params(mt_grad_sync *gs, void *params, mt_dtype act) {
    mt_status st = MT_OK;
    if (!gs->distributed) return MT_OK;
    const size_t ab = mt_dtype_bytes(act);
    const double t0 = mt_clock_ms();
    for (int b = 0; b < MT_GBUFS; b++) {
        const mt_grad_region *r = &gs->ol->reg[b];
        const mt_group *g = buffer_group(gs->ps, b);
        if (r->n == 0 || g->size <= 1) continue;
        char *p = params;
        const double t1 = mt_timing_begin(gs->tm, MT_TM_PARAMS_AG);
        MT_CHECK(g->comm->i->allgather(g->comm, p + mt_opt_shard_lo(gs->ol, b) * ab, p + r->begin * ab, r->shard_n, act));
        mt_timing_end(gs->tm, MT_TM_PARAMS_AG, t1, -1, -1);
    }
out:
    gs->comm_ms += mt_clock_ms() - t0;
    return st;
}
