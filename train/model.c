/* model.c — the model's allocation, weight init (each rank draws its shard as the slice of
 * the full tensor from the seed; fp32 master weights only for its optimizer pieces) and the
 * micro-batch step (tokens in, forward, vocab-parallel cross-entropy, backward: model_fwd.c /
 * model_bwd.c). Rule: with tp = 1 nothing here communicates or copies beyond the serial model. */
#include "train/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model_internal.h"
#include "core/dtype.h"
#include "core/model/mup.h"
#include "core/rng.h"

mt_status mt_model_check_backend(const mt_recipe *r, const mt_backend *be, char *missing, size_t n_bytes) {
    const struct mt_backend_i *i = be->i;
    const mt_layer_spec spec = mt_layer_spec_of(r);
    int ln = mt_norm_is_layernorm(&spec.norm), sw = spec.mlp == MT_MLP_SWIGLU, r2 = spec.mlp == MT_MLP_SQUARED_RELU;
    int tp = r->parallel.tensor > 1, moe = spec.moe, cp = r->parallel.context > 1;
    int use[MT_OP_USE_COUNT] = {[MT_OP_USE_ALL] = 1, [MT_OP_USE_LAYERNORM] = ln, [MT_OP_USE_RMSNORM] = !ln,
                                [MT_OP_USE_GELU] = !sw && !r2, [MT_OP_USE_SWIGLU] = sw,
                                [MT_OP_USE_SQUARED_RELU] = r2, [MT_OP_USE_ROPE] = spec.rope || spec.mla,
                                [MT_OP_USE_TP] = tp, [MT_OP_USE_CP] = cp, [MT_OP_USE_MOE] = moe,
                                [MT_OP_USE_ROWS] = cp || spec.qk_norm || spec.mla};
    struct { const char *name; int needed; const void *fn; } ops[] = { /* the ops of core/backend.h's list */
#define MT_OP_NEED_(op, argt, cls, when) {#op, use[MT_OP_USE_##when], (const void *)i->op},
        MT_BACKEND_OPS(MT_OP_NEED_)
#undef MT_OP_NEED_
        {"copy_d2d", moe, (const void *)i->copy_d2d},
    };
    size_t used = 0;
    missing[0] = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        if (ops[k].needed && !ops[k].fn && used + 32 < n_bytes)
            used += (size_t)snprintf(missing + used, n_bytes - used, "%s%s", used ? ", " : "", ops[k].name);
    }
    if (used)
        return mt_errorf(MT_ERR_UNSUPPORTED, "backend '%s' cannot train this model yet: missing ops %s",
                         i->name, missing);
    return MT_OK;
}

/* Fills elements [lo, hi) of one layer slice of tensor ti (rows x cols, row-major; a tp rank's
 * shard) with their init values. Element e of the slice is full-tensor element
 * mt_param_full_index(row, col); along a row the full indices are consecutive within each
 * shard block, so each run of consecutive ones is drawn with one mt_rng_normal_fill call. */
static void init_range(const mt_model *m, int ti, uint64_t seed, uint64_t stream, double scale, float *dst, size_t lo,
                       size_t hi) {
    const mt_param_layout *pl = &m->pl;
    const mt_param_tensor *t = &pl->t[ti];
    if (t->init == MT_INIT_ZERO || t->init == MT_INIT_ONE) {
        const float v = t->init == MT_INIT_ONE ? 1.0f : 0.0f;
        for (size_t e = lo; e < hi; e++) dst[e] = v;
        return;
    }
    if (t->shard == MT_SHARD_NONE) {
        mt_rng_normal_fill(dst + lo, hi - lo, seed, stream, lo, scale);
        return;
    }
    const size_t cols = (size_t)t->cols;
    for (size_t e = lo; e < hi;) {
        const int row = (int)(e / cols);
        size_t c = e % cols, c_end = (size_t)(row + 1) * cols < hi ? cols : hi - (size_t)row * cols;
        while (c < c_end) { /* the longest run of consecutive full indices from column c */
            const size_t f0 = mt_param_full_index(pl, ti, m->par.tp.rank, row, (int)c);
            size_t run = 1;
            while (c + run < c_end && mt_param_full_index(pl, ti, m->par.tp.rank, row, (int)(c + run)) == f0 + run) run++;
            mt_rng_normal_fill(dst + (size_t)row * cols + c, run, seed, stream, f0, scale);
            c += run;
        }
        e = (size_t)row * cols + c_end;
    }
}

/* ---- device-side init (used only by a backend without host memory that offers
 * init_normal, i.e. CUDA: the CPU path below is unchanged) ----
 * Whether tensor ti's slice can be drawn on the device: a normal init, replicated or split by
 * rows (each shard row is a contiguous run of the full tensor). Column-split tensors stay on the
 * host path. */
static int init_on_device(const mt_model *m, const mt_param_tensor *t) {
    return !m->be->host_memory && m->be->i->init_normal && m->be->i->copy_d2d &&
           (t->init == MT_INIT_NORMAL || t->init == MT_INIT_NORMAL_OUTPUT) && t->shard != MT_SHARD_COLS;
}

/* Draws layer slice (ti, stream) into the f32 device buffer dev (n elements) with init_normal,
 * one call per run of shard rows that are consecutive in the full tensor, then copies this
 * rank's master piece and writes the compute-dtype params, as the host path does. */
static mt_status init_slice_on_device(mt_model *m, int ti, size_t off, uint64_t seed, uint64_t stream, double sd,
                                      float *dev) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const mt_param_tensor *t = &pl->t[ti];
    const size_t n = (size_t)t->rows * t->cols;
    for (int r0 = 0; r0 < t->rows;) {
        const size_t fe0 = t->shard == MT_SHARD_NONE ? 0 : mt_param_full_index(pl, ti, m->par.tp.rank, r0, 0);
        int r1 = t->shard == MT_SHARD_NONE ? t->rows : r0 + 1;
        while (r1 < t->rows && mt_param_full_index(pl, ti, m->par.tp.rank, r1, 0) == fe0 + (size_t)(r1 - r0) * t->cols) r1++;
        mt_init_normal_args ia = {.out = dev + (size_t)r0 * t->cols, .n = (size_t)(r1 - r0) * t->cols, .seed = seed,
                                  .stream = stream, .offset = fe0, .std = sd};
        MT_CHECK(m->be->i->init_normal(m->be, &ia));
        r0 = r1;
    }
    mt_opt_piece pc;
    if (!m->master_aliased && mt_opt_piece_in(pl, &m->ol, ti, off, off + n, &pc))
        MT_CHECK(m->be->i->copy_d2d(m->be, (char *)m->master + pc.opt * 4, dev + (pc.lo - off), (pc.hi - pc.lo) * 4));
    if (m->act == MT_F32) {
        MT_CHECK(m->be->i->copy_d2d(m->be, (char *)m->params + off * 4, dev, n * 4));
    } else {
        mt_cast_args ca = {.dst = (char *)m->params + off * mt_dtype_bytes(m->act), .src = dev, .n = n};
        MT_CHECK(MT_BE_CALL(m->be, cast_f32_to_act, &ca));
    }
out:
    return st;
}
/* ---- end of device-side init ---- */

/* Initialises every tensor as the full tensor from the seed: element e of layer l of tensor
 * `name` is normal(seed, stream(name, l), e) — the same value whatever the layout. A tp rank
 * draws exactly its shard's elements, e mapped to the full tensor (mt_param_full_index).
 * Every value is a pure function of (seed, stream, full index), so the threads' split of a slice
 * cannot change a bit. On a host-memory fp32 backend (the CPU's) the values are drawn straight
 * into the parameters, each page first touched by the thread that writes it; otherwise into a
 * host slice that is copied (and cast to bf16) to the device. */
static mt_status init_weights(mt_model *m, const mt_recipe *r) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const int direct = m->be->host_memory && m->act == MT_F32;
    size_t max_slice = 0;
    float *dev = NULL; /* device-side init scratch (f32, one slice), only when a tensor uses it */
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        size_t n = (size_t)pl->t[ti].rows * pl->t[ti].cols;
        if (n > max_slice) max_slice = n;
    }
    float *host = direct ? NULL : malloc(max_slice * sizeof(float));
    uint16_t *host16 = m->act == MT_BF16 ? malloc(max_slice * 2) : NULL;
    if ((!direct && !host) || (m->act == MT_BF16 && !host16)) {
        st = mt_errorf(MT_ERR_OOM, "weight init: cannot allocate %zu bytes of host memory", max_slice * 4);
        goto out;
    }
    const size_t chunk = 16384; /* elements per piece a thread draws */
    for (int ti = 0; ti < pl->n_tensors && !dev; ti++)
        if (init_on_device(m, &pl->t[ti])) MT_CHECK(m->be->i->alloc(m->be, max_slice * 4, (void **)&dev));
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        const mt_param_tensor *t = &pl->t[ti];
        const size_t n = (size_t)t->rows * t->cols;
        /* (float)(init_std * out_scale * x) multiplies left to right: one scale gives the same bits;
         * muP's width scaling divides it (core/model/mup.h) */
        const double scale = mt_mup_init_std(&r->model, t, pl->L_global);
        for (int l = 0; l < t->n_layers; l++) {
            const int gl = mt_param_global_slice(pl, ti, l); /* the serial run's layer (MoE: layer x expert) */
            const uint64_t stream = mt_hash_str(t->name) ^ ((uint64_t)gl * 0x9e3779b97f4a7c15ULL);
            const size_t off = mt_param_offset(pl, ti, l);
            if (init_on_device(m, t)) { /* device-side init: the same values (see init_slice_on_device) */
                MT_CHECK(init_slice_on_device(m, ti, off, r->training.seed, stream, scale, dev));
                continue;
            }
            float *dst = direct ? (float *)m->params + off : host;
            const long n_chunks = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (n_chunks > 1)
            for (long c = 0; c < n_chunks; c++) {
                const size_t lo = (size_t)c * chunk, hi = lo + chunk < n ? lo + chunk : n;
                init_range(m, ti, r->training.seed, stream, scale, dst, lo, hi);
            }
            mt_opt_piece pc; /* fp32 master weights: only this rank's optimizer piece of the slice */
            if (!m->master_aliased && mt_opt_piece_in(pl, &m->ol, ti, off, off + n, &pc))
                MT_CHECK(m->be->i->copy_h2d(m->be, (char *)m->master + pc.opt * 4, dst + (pc.lo - off),
                                            (pc.hi - pc.lo) * 4));
            if (direct) continue;
            if (m->act == MT_BF16) {
#pragma omp parallel for schedule(static) if (n >= 65536)
                for (size_t e = 0; e < n; e++) host16[e] = mt_f32_to_bf16(host[e]);
                MT_CHECK(m->be->i->copy_h2d(m->be, (char *)m->params + off * 2, host16, n * 2));
            } else {
                MT_CHECK(m->be->i->copy_h2d(m->be, (char *)m->params + off * 4, host, n * 4));
            }
        }
    }
out:
    if (dev) m->be->i->free(m->be, dev);
    free(host);
    free(host16);
    return st;
}

static mt_status init_shorthand(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard,
                                const mt_parallel_state *ps) {
    mt_model_shape s = {.B = B, .ps = ps};
    for (int b = 0; b < MT_GBUFS; b++) {
        s.shards[b] = n_shards;
        s.shard[b] = shard;
    }
    return mt_model_create(m, r, be, &s);
}

mt_status mt_model_init(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard) {
    return init_shorthand(m, r, be, B, n_shards, shard, NULL);
}

mt_status mt_model_init_ps(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard,
                           const mt_parallel_state *ps) {
    return init_shorthand(m, r, be, B, n_shards, shard, ps);
}

mt_status mt_model_init_stage(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard,
                              int stage) {
    mt_parallel_state ps; /* one rank placed on the stage */
    mt_pstate_single(&ps);
    ps.grid.pp = r->parallel.pipeline;
    ps.coord[MT_AX_PP] = stage;
    return init_shorthand(m, r, be, B, n_shards, shard, &ps);
}

/* the ones (mt_norm_ones_width): zero-centred gamma adds them to the norm weights (model_internal.h),
 * the L2 qk norm applies them as its weight (model_qk.c) */
static mt_status fill_norm_ones(mt_model *m) {
    const int C = mt_norm_ones_width(&m->pl);
    const size_t es = mt_dtype_bytes(m->act);
    void *host = malloc((size_t)C * es);
    if (!host) return mt_errorf(MT_ERR_OOM, "model init: %d norm ones", C);
    for (int i = 0; i < C; i++) {
        if (m->act == MT_F32)
            ((float *)host)[i] = 1.0f;
        else
            ((uint16_t *)host)[i] = mt_f32_to_bf16(1.0f);
    }
    m->norm_ones = ACT(m, &m->acts, norm_ones);
    m->norm_w1 = ACT(m, &m->acts, norm_w1);
    mt_status st = m->be->i->copy_h2d(m->be, m->norm_ones, host, (size_t)C * es);
    free(host);
    return st;
}

/* the owned optimizer shards form one contiguous flat range (f32 master weights can alias the
 * parameters there): at most one non-empty region */
static int one_region(const mt_opt_layout *ol) {
    int k = 0;
    for (int b = 0; b < MT_GBUFS; b++) k += ol->reg[b].n > 0;
    return k <= 1;
}

mt_status mt_model_create(mt_model *m, const mt_recipe *r, mt_backend *be, const mt_model_shape *s) {
    mt_status st = MT_OK;
    char missing[512];
    const int B = s->B;
    memset(m, 0, sizeof *m);
    m->be = be;
    m->act = be->act;
    m->tied = r->model.tie_embeddings;
    MT_CHECK(mt_model_check_backend(r, be, missing, sizeof missing));
    mt_parallel_state one; /* no state given: one rank (every group of size 1) */
    const mt_parallel_state *ps = s->ps;
    if (!ps) {
        mt_pstate_single(&one);
        ps = &one;
    }
    if (ps->grid.pp <= 1) {
        MT_CHECK(mt_param_layout_build(r, &m->pl));
    } else {
        MT_CHECK(mt_param_layout_build_stage(r, ps->coord[MT_AX_PP], &m->pl));
    }
    const mt_group *tp_g = mt_pstate_group(ps, MT_PG_TP);
    if (tp_g->size > 1 && tp_g->size != m->pl.tp)
        return mt_errorf(MT_ERR_INTERNAL, "model init: tp group of %d ranks for parallel.tensor = %d", tp_g->size,
                         m->pl.tp);
    MT_CHECK(mt_recipe_check_sp_split(r)); /* the one sequence-parallel rule (core/recipe) */
    if (m->pl.moe) {
        m->pl.ep_rank = mt_pstate_group(ps, MT_PG_EP)->size > 1 ? mt_pstate_group(ps, MT_PG_EP)->rank : 0;
        m->moe_aux_coeff = r->model.moe.aux_loss_coeff;
        m->moe_z_coeff = r->model.moe.z_loss_coeff;
        m->moe_pre_softmax = r->model.moe.pre_softmax;
        if (r->model.moe.load_balancing == MT_MOE_LB_NONE) m->moe_aux_coeff = 0;
        m->moe_seq_aux = r->model.moe.load_balancing == MT_MOE_LB_SEQ_AUX;
        m->moe_score = r->model.moe.score_function;
        m->moe_scale = r->model.moe.topk_scaling_factor;
        m->moe_probs_on_input = r->model.moe.apply_probs_on_input;
        m->moe_groups = r->model.moe.num_groups > 1 && r->model.moe.group_topk > 0 ? r->model.moe.num_groups : 0;
        m->moe_group_topk = m->moe_groups ? r->model.moe.group_topk : 0;
        m->moe_bias_rate = r->model.moe.bias_update_rate;
    }
    m->attn_scale = r->model.mup.enabled ? (float)mt_mup_softmax_scale(&r->model, m->pl.D) : 0.0f;
    /* multi-latent attention: Megatron's softmax_scale = mscale^2 / sqrt(qk_head_dim + qk_pos_emb_head_dim)
       (MLASelfAttention; mscale = YaRN's from rotary_scaling_factor and mscale_all_dim, 1 without them), not
       1 / sqrt of the core's padded head size */
    if (m->pl.spec.mla)
        m->attn_scale = m->pl.spec.softmax_mscale / sqrtf((float)(m->pl.spec.qk_dim + m->pl.spec.pos_dim));
    m->logit_mult = (float)mt_mup_output_mult(&r->model);
    m->embed_mult = (float)mt_mup_embedding_mult(&r->model);
    m->mup_width_mult = mt_mup_width_mult(&r->model);
    MT_CHECK(mt_cp_init(&m->par.cp, be, m->act, mt_pstate_group(ps, MT_PG_CP), m->pl.cp, m->pl.T));
    m->par.cp.clock = &m->par.clocks.g[MT_PG_CP];
    mt_act_layout_build(&m->pl, B, m->act, &m->al);
    mt_param_layout_place_buffers(&m->pl, s->shards);
    MT_CHECK(mt_opt_layout_build(&m->pl, s->shards, s->shard, &m->ol));
    const size_t n = m->ol.n_flat, n_opt = m->ol.n_opt;
    m->master_aliased = m->act == MT_F32 && one_region(&m->ol);
    m->bytes_params = n * mt_dtype_bytes(m->act);
    m->bytes_grads = n * 4;
    m->bytes_optim = 2 * n_opt * 4 + (m->master_aliased ? 0 : n_opt * 4);
    m->bytes_acts = m->al.n_bytes;
    MT_CHECK(be->i->alloc(be, m->bytes_params, &m->params));
    MT_CHECK(be->i->alloc(be, m->bytes_grads, &m->grads));
    if (m->master_aliased) {
        size_t lo = 0;
        for (int b = 0; b < MT_GBUFS; b++)
            if (m->ol.reg[b].n > 0) lo = mt_opt_shard_lo(&m->ol, (mt_grad_buffer_id)b);
        m->master = (char *)m->params + lo * 4;
    } else {
        MT_CHECK(be->i->alloc(be, n_opt * 4, &m->master));
    }
    MT_CHECK(be->i->alloc(be, n_opt * 4, &m->adam_m));
    MT_CHECK(be->i->alloc(be, n_opt * 4, &m->adam_v));
    /* Every backend's alloc returns zeroed memory (the CPU's untouched mmap'd pages, cpu_backend.c).
     * Until the first step (or a load) the moments are known zero: that step reads them as 0 and
     * only writes them (mt_adamw_args.moments_zero), so each of their pages takes one fault, by a
     * write, inside the step, instead of a read fault and then a copy-on-write fault. */
    m->moments_zero = 1;
    MT_CHECK(be->i->alloc(be, m->bytes_acts, &m->acts.base));
    m->acts.l0 = 0;
    m->scalars = ACT(m, &m->acts, scalars);
    if (mt_layer_spec_norm_ones(&m->pl.spec)) MT_CHECK(fill_norm_ones(m));
    if (m->pl.moe) {
        m->moe_stats = ACT(m, &m->acts, moe_stats);
        if (m->pl.moe_expert_bias) { /* zero until a step moves it or a checkpoint loads it */
            m->moe_bias = ACT(m, &m->acts, moe_bias);
            m->moe_bias_cnt = ACT(m, &m->acts, moe_bias_cnt);
            MT_CHECK(be->i->memset_zero(be, m->moe_bias, (size_t)m->pl.L * m->pl.E * 4));
            MT_CHECK(be->i->memset_zero(be, m->moe_bias_cnt, (size_t)m->pl.L * m->pl.E * 4));
        }
        MT_CHECK(mt_ep_init(&m->par.ep, be, m->act, mt_pstate_group(ps, MT_PG_EP), m->pl.ep, m->pl.E, m->pl.C,
                            m->al.moe_R, m->al.moe_S));
        m->par.ep.clock = &m->par.clocks.g[MT_PG_EP];
    }
    if (m->moe_bias && !(m->moe_bias_host = malloc((size_t)2 * m->pl.L * m->pl.E * sizeof *m->moe_bias_host))) {
        st = mt_errorf(MT_ERR_OOM, "model init: the expert bias's host copy (%d layers x %d experts)", m->pl.L, m->pl.E);
        goto out;
    }
    m->staging = malloc((size_t)m->al.N * 2 * sizeof *m->staging);
    if (!m->staging) {
        st = mt_errorf(MT_ERR_OOM, "model init: micro-batch staging of %d tokens", m->al.N);
        goto out;
    }
    MT_CHECK(mt_tp_init(&m->par.tp, be, tp_g->size > 1 ? tp_g->comm : NULL, m->pl.sp, m->al.N, m->pl.C,
                        m->pl.sp ? ACT(m, &m->acts, sp_full) : NULL, m->pl.sp ? ACT(m, &m->acts, sp_slice) : NULL));
    m->par.tp.clock = &m->par.clocks.g[MT_PG_TP];
    m->par.tp.n_chunks = m->par.cp.n_chunks; /* the embedding places the local chunks at their global positions */
    m->par.tp.chunk_len = m->par.cp.chunk_len;
    for (int c = 0; c < m->par.cp.n_chunks; c++) m->par.tp.chunk_pos[c] = m->par.cp.chunk_pos[c];
    MT_CHECK(init_weights(m, r));
out:
    if (st != MT_OK) mt_model_free(m);
    return st;
}

void mt_model_free(mt_model *m) {
    if (!m->be) return;
    mt_backend *be = m->be;
    if (m->master && !m->master_aliased) be->i->free(be, m->master);
    if (m->params) be->i->free(be, m->params);
    if (m->grads) be->i->free(be, m->grads);
    if (m->adam_m) be->i->free(be, m->adam_m);
    if (m->adam_v) be->i->free(be, m->adam_v);
    if (m->acts.base) be->i->free(be, m->acts.base);
    free(m->staging);
    free(m->moe_bias_host);
    mt_ep_free(&m->par.ep);
    memset(m, 0, sizeof *m);
}

mt_status mt_model_zero_grads(mt_model *m) {
    mt_status st = MT_OK;
    MT_CHECK(m->be->i->memset_zero(m->be, m->grads, m->bytes_grads));
    MT_CHECK(m->be->i->memset_zero(m->be, m->scalars, 8));
    if (m->moe_stats) MT_CHECK(m->be->i->memset_zero(m->be, m->moe_stats, (MT_MOE_STATS + 2 * (size_t)m->pl.E) * 4));
out:
    return st;
}

mt_status mt_model_load_micro(mt_model *m, const mt_acts *a, const int32_t *tokens_host) {
    mt_status st = MT_OK;
    /* host rows hold the whole sequence (pl.T + 1 tokens); this rank takes its chunks (all of it at cp = 1) */
    const mt_cp *cp = &m->par.cp;
    const int B = m->al.B, T = m->al.T, Tg = m->pl.T, N = m->al.N, Tc = cp->chunk_len;
    int32_t *inp = m->staging, *tgt = m->staging + N;
    for (int b = 0; b < B; b++) {
        for (int c = 0; c < cp->n_chunks; c++) {
            const int32_t *src = tokens_host + (size_t)b * (Tg + 1) + cp->chunk_pos[c];
            memcpy(inp + (size_t)b * T + (size_t)c * Tc, src, (size_t)Tc * 4);
            memcpy(tgt + (size_t)b * T + (size_t)c * Tc, src + 1, (size_t)Tc * 4);
        }
    }
    MT_CHECK(m->be->i->copy_h2d(m->be, ACT(m, a, tokens), inp, (size_t)N * 4));
    MT_CHECK(m->be->i->copy_h2d(m->be, ACT(m, a, targets), tgt, (size_t)N * 4));
out:
    return st;
}

mt_status mt_model_loss(mt_model *m, const mt_acts *a, float dloss) {
    mt_status st = MT_OK;
    const int N = m->al.N;
    m->moe_dloss = dloss;
    MT_CHECK(mt_tp_xent(&m->par.tp, ACT(m, a, logits), ACT(m, a, losses), ACT(m, a, xent_stats), (const int32_t *)ACT(m, a, targets),
                        N, m->pl.V, m->pl.Vp, m->par.tp.rank * m->pl.Vp_r, m->pl.Vp_r, dloss));
    /* every tp rank holds the same full per-token losses: each sums them (the trainer reduces
     * the loss over the world from tp rank 0: parallel/grad_sync.h) */
    mt_sum_args sa = {.out = m->scalars, .x = ACT(m, a, losses), .n = (size_t)N, .squares = 0};
    MT_CHECK(MT_BE_CALL(m->be, sum, &sa));
out:
    return st;
}

void *mt_model_resid(const mt_model *m, const mt_acts *a, int l) {
    return ACT_L(m, a, resid, l, (size_t)m->al.N_r * m->pl.C, mt_dtype_bytes(m->act));
}
void *mt_model_dresid(const mt_model *m, const mt_acts *a) { return ACT(m, a, dresid); }

mt_model_part mt_model_whole(const mt_model *m) {
    return (mt_model_part){.l0 = 0, .l1 = m->pl.L, .embed = m->pl.has_embed, .head = m->pl.has_head};
}

mt_status mt_model_step_micro(mt_model *m, const int32_t *tokens_host, float dloss, int do_backward) {
    mt_status st = MT_OK;
    if (m->pl.tp > 1 && !m->par.tp.comm)
        return mt_errorf(MT_ERR_INTERNAL, "model step: parallel.tensor = %d but the parallel state has no tp group "
                                          "(a memory-accounting model: mt_model_init_ps)", m->pl.tp);
    if (m->pl.pp > 1)
        return mt_errorf(MT_ERR_INTERNAL, "model step: a pipeline stage runs micro-batches through train/pipeline.c");
    m->moe_dloss = dloss;
    MT_CHECK(mt_model_load_micro(m, &m->acts, tokens_host));
    MT_CHECK(mt_model_forward(m, &m->acts, mt_model_whole(m)));
    MT_CHECK(mt_model_loss(m, &m->acts, dloss));
    if (do_backward) MT_CHECK(mt_model_backward(m, &m->acts, mt_model_whole(m)));
out:
    return st;
}

void *mt_model_scalars(mt_model *m) { return m->scalars; }

mt_status mt_model_read_scalars(mt_model *m, float *loss_sum, float *grad_sq) {
    float s[2];
    mt_status st = m->be->i->copy_d2h(m->be, s, m->scalars, 8);
    *loss_sum = s[0];
    *grad_sq = s[1];
    return st;
}

mt_status mt_model_view_open(mt_model *d, const mt_model *m, int T) {
    *d = *m;
    d->part_hook = NULL;
    d->pl.T = T;
    d->pl.recompute = d->pl.recompute_attn = 0;
    d->pl.moe_cap = 0;
    mt_act_layout_build(&d->pl, 1, d->act, &d->al);
    d->acts.base = NULL;
    d->acts.l0 = 0;
    d->par.cp.n_chunks = 1;
    d->par.cp.chunk_len = T;
    d->par.cp.chunk_pos[0] = 0;
    d->par.tp.N = d->al.N;
    d->par.tp.n_chunks = 1;
    d->par.tp.chunk_len = T;
    d->par.tp.chunk_pos[0] = 0;
    mt_status st = d->be->i->alloc(d->be, d->al.n_bytes, &d->acts.base);
    if (st != MT_OK) return st;
    d->scalars = ACT(d, &d->acts, scalars);
    if (d->pl.moe) d->moe_stats = ACT(d, &d->acts, moe_stats);
    d->moe_bias_cnt = NULL; /* a view routes with the model's bias and counts nothing */
    if (d->pl.spec.norm.one_plus) d->norm_w1 = ACT(d, &d->acts, norm_w1); /* the ones stay the model's own */
    return MT_OK;
}

void mt_model_view_free(mt_model *d) {
    if (d->be && d->acts.base) d->be->i->free(d->be, d->acts.base);
    d->acts.base = NULL;
}
