/* moe_bias.c — the expert bias's update and its copies to and from the whole model (moe_bias.h).
 * Rule (Megatron's _update_router_expert_bias / get_updated_expert_bias): counts are the kept
 * assignments (after the capacity rule) of training forwards only; the sign of (mean - count)
 * does not change when every rank of a group holds the same count, so summing over dp x cp (not
 * tp: every tp rank routes the same tokens here) gives Megatron's update. Host maths on L x E
 * floats, through the scratch allocated with the model (nothing allocated in the loop). */
#include "train/moe_bias.h"

#include <string.h>

#include "core/moe_rule.h"

mt_status mt_moe_bias_begin(const mt_model *m) {
    if (!m->moe_bias) return MT_OK;
    return m->be->i->memset_zero(m->be, m->moe_bias_cnt, (size_t)m->pl.L * m->pl.E * 4);
}

mt_status mt_moe_bias_update(mt_model *m, const mt_parallel_state *ps) {
    if (!m->moe_bias) return MT_OK;
    mt_status st = MT_OK;
    const int L = m->pl.L, E = m->pl.E;
    const size_t n = (size_t)L * E;
    const mt_group *g = mt_pstate_group(ps, MT_PG_DP_CP);
    if (g->size > 1) MT_CHECK(g->comm->i->allreduce(g->comm, m->moe_bias_cnt, m->moe_bias_cnt, n, MT_F32, MT_RED_SUM));
    float *cnt = m->moe_bias_host, *bias = m->moe_bias_host + n;
    MT_CHECK(m->be->i->copy_d2h(m->be, cnt, m->moe_bias_cnt, n * 4));
    MT_CHECK(m->be->i->copy_d2h(m->be, bias, m->moe_bias, n * 4));
    for (int l = 0; l < L; l++) mt_moe_bias_step(cnt + (size_t)l * E, bias + (size_t)l * E, E, m->moe_bias_rate);
    MT_CHECK(m->be->i->copy_h2d(m->be, m->moe_bias, bias, n * 4));
    MT_CHECK(mt_moe_bias_begin(m));
out:
    return st;
}

mt_status mt_moe_bias_gather(const mt_model *m, const mt_parallel_state *ps, float *all) {
    if (!m->moe_bias) return MT_OK;
    mt_status st = MT_OK;
    const int E = m->pl.E, Lg = m->pl.L_global;
    const size_t n = (size_t)m->pl.L * E, n_all = (size_t)Lg * E;
    memset(all, 0, n_all * sizeof *all);
    const int owner = mt_pstate_group(ps, MT_PG_TP)->rank == 0 && mt_pstate_group(ps, MT_PG_DP_CP)->rank == 0;
    if (owner) {
        MT_CHECK(m->be->i->copy_d2h(m->be, m->moe_bias_host, m->moe_bias, n * 4));
        for (int l = 0; l < m->pl.L; l++)
            memcpy(all + (size_t)mt_param_global_layer(&m->pl, l) * E, m->moe_bias_host + (size_t)l * E,
                   (size_t)E * sizeof *all);
    }
    const mt_group *w = mt_pstate_group(ps, MT_PG_WORLD);
    if (w->size > 1) { /* through the backend: the communicator reduces device buffers */
        void *dev = m->moe_bias_cnt; /* (L, E) scratch between steps: too small for all layers, so in slices */
        for (size_t o = 0; o < n_all; o += n) {
            const size_t k = n_all - o < n ? n_all - o : n;
            MT_CHECK(m->be->i->copy_h2d(m->be, dev, all + o, k * 4));
            MT_CHECK(w->comm->i->allreduce(w->comm, dev, dev, k, MT_F32, MT_RED_SUM));
            MT_CHECK(m->be->i->copy_d2h(m->be, all + o, dev, k * 4));
        }
        MT_CHECK(mt_moe_bias_begin(m));
    }
out:
    return st;
}

mt_status mt_moe_bias_set(mt_model *m, const float *all) {
    if (!m->moe_bias) return MT_OK;
    const int E = m->pl.E;
    for (int l = 0; l < m->pl.L; l++)
        memcpy(m->moe_bias_host + (size_t)l * E, all + (size_t)mt_param_global_layer(&m->pl, l) * E,
               (size_t)E * sizeof *all);
    return m->be->i->copy_h2d(m->be, m->moe_bias, m->moe_bias_host, (size_t)m->pl.L * E * 4);
}
