/* moe_stats.c — the step's MoE statistics (see moe_stats.h). */
#include "train/moe_stats.h"

#include <stdlib.h>
#include <string.h>

mt_status mt_moe_stats_open(mt_moe_stats *s, const mt_model *m) {
    memset(s, 0, sizeof *s);
    if (!m->pl.moe) return MT_OK;
    s->E = m->pl.E;
    s->host = calloc(MT_MOE_STATS + 2 * (size_t)s->E, sizeof *s->host);
    s->load = calloc((size_t)s->E, sizeof *s->load);
    if (!s->host || !s->load) return mt_errorf(MT_ERR_OOM, "MoE statistics for %d experts", s->E);
    return MT_OK;
}

void mt_moe_stats_close(mt_moe_stats *s) {
    free(s->host);
    free(s->load);
    memset(s, 0, sizeof *s);
}

mt_status mt_moe_stats_collect(mt_moe_stats *s, mt_model *m, const mt_grad_sync *gs, int64_t n_micro) {
    if (!s->E) return MT_OK;
    mt_status st = MT_OK;
    const size_t n = MT_MOE_STATS + 2 * (size_t)s->E;
    const mt_group *w = mt_pstate_group(gs->ps, MT_PG_WORLD);
    if (w->size > 1) {
        if (mt_pstate_group(gs->ps, MT_PG_TP)->rank != 0) MT_CHECK(m->be->i->memset_zero(m->be, m->moe_stats, n * 4));
        MT_CHECK(w->comm->i->allreduce(w->comm, m->moe_stats, m->moe_stats, n, MT_F32, MT_RED_SUM));
    }
    MT_CHECK(m->be->i->copy_d2h(m->be, s->host, m->moe_stats, n * 4));
    const double pairs = (double)n_micro * m->pl.n_kind_global[1]; /* (micro-batch, MoE layer) pairs */
    s->lb_loss = pairs > 0 ? s->host[0] / pairs : 0;
    s->z_loss = pairs > 0 ? s->host[1] / pairs : 0;
    s->dropped = s->host[2];
    s->routed = s->host[3];
    for (int e = 0; e < s->E; e++) s->load[e] = s->routed > 0 ? s->host[MT_MOE_STATS + e] / s->routed : 0;
out:
    return st;
}
