/* model_layout.c — the pure layout functions of model_layout.h. No allocation, no I/O:
 * the same recipe always gives the same offsets (exercised by test/unit/test_pp_layout.c,
 * test_tp_layers.c and test_plan.c).
 * With tp > 1 every sharded tensor gets its per-rank shape; mt_param_full_index maps a
 * shard's element back to the full tensor (the init and any resharding rely on it). */
#include "core/model/model_layout.h"

#include <math.h>
#include <string.h>

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Adds a tensor with full one-layer shape (rows, cols); `shard` splits rows or cols into
 * n_blocks blocks of sizes b0, b1, b2 (full), each divided by tp. */
static int add_tensor(mt_param_layout *pl, size_t *cursor, const char *name, int n_layers, int rows, int cols,
                      int decay, mt_init_kind init, mt_shard_kind shard, int n_blocks, int b0, int b1, int b2) {
    int i = pl->n_tensors++;
    mt_param_tensor *t = &pl->t[i];
    t->name = name;
    t->n_layers = n_layers;
    t->full_rows = rows;
    t->full_cols = cols;
    t->shard = pl->tp > 1 ? shard : MT_SHARD_NONE;
    t->n_blocks = t->shard == MT_SHARD_NONE ? 0 : n_blocks;
    t->block[0] = b0;
    t->block[1] = b1;
    t->block[2] = b2;
    t->rows = t->shard == MT_SHARD_ROWS ? rows / pl->tp : rows;
    t->cols = t->shard == MT_SHARD_COLS ? cols / pl->tp : cols;
    t->n = (size_t)n_layers * t->rows * t->cols;
    t->offset = *cursor;
    t->decay = decay;
    t->init = init;
    t->sp_partial = 0;
    t->stacked = 0; /* set by build for the per-layer tensors */
    t->pp_copy = 0;
    t->experts_r = 0;
    t->layers = MT_LAYERS_EVERY;
    *cursor = align_up(*cursor + t->n, MT_PARAM_ALIGN);
    pl->n_params += t->n;
    return i;
}

/* a replicated norm weight / bias: partial gradients under sequence parallelism */
static int add_norm(mt_param_layout *pl, size_t *cursor, const char *name, int n_layers, mt_init_kind init) {
    int i = add_tensor(pl, cursor, name, n_layers, 1, pl->C, 0, init, MT_SHARD_NONE, 0, 0, 0, 0);
    pl->t[i].sp_partial = pl->sp;
    return i;
}

/* the tensors of multi-latent attention (layer_spec.h; Megatron's MLASelfAttention: no biases in its
 * projections, its norms of the model's kind): the down projections and the latents' norms are
 * replicated over tp, their gradients partial (each rank backpropagates its own heads); the up
 * projections (or the plain q projection) are split by heads */
static void add_mla(mt_param_layout *pl, size_t *cursor, mt_init_kind one) {
    const mt_layer_spec *s = &pl->spec;
    mt_param_index *ix = &pl->idx;
    const int L = pl->L, C = pl->C, hq = pl->H * (s->qk_dim + s->pos_dim), hkv = pl->H * (s->qk_dim + s->v_dim);
    const int partial = pl->tp > 1;
    const mt_shard_kind NONE = MT_SHARD_NONE, ROWS = MT_SHARD_ROWS;
    const mt_init_kind W = MT_INIT_NORMAL, Z = MT_INIT_ZERO;
    const int nm = s->mla_norm, nb = s->mla_norm && s->norm.bias;
    int rep[6] = {-1, -1, -1, -1, -1, -1};
    if (s->q_lora) {
        rep[0] = ix->q_down_w = add_tensor(pl, cursor, "q_down_w", L, s->q_lora, C, 1, W, NONE, 0, 0, 0, 0);
        if (nm) rep[1] = ix->q_ln_w = add_tensor(pl, cursor, "q_ln_w", L, 1, s->q_lora, 0, one, NONE, 0, 0, 0, 0);
        if (nb) rep[2] = ix->q_ln_b = add_tensor(pl, cursor, "q_ln_b", L, 1, s->q_lora, 0, Z, NONE, 0, 0, 0, 0);
        ix->q_up_w = add_tensor(pl, cursor, "q_up_w", L, hq, s->q_lora, 1, W, ROWS, 1, hq, 0, 0);
    } else {
        /* --qk-layernorm without a q latent: Megatron fuses a norm of the model's kind into linear_q_proj
           (TE's LayerNormLinear: q = norm(x1) W_q, mla_qk_norm_config.py); it sees this rank's token rows,
           so its gradient is partial under sequence parallelism only, as norm1's */
        if (nm) ix->q_ln_w = add_norm(pl, cursor, "q_ln_w", L, one);
        if (nb) ix->q_ln_b = add_norm(pl, cursor, "q_ln_b", L, Z);
        ix->q_w = add_tensor(pl, cursor, "q_w", L, hq, C, 1, W, ROWS, 1, hq, 0, 0);
    }
    rep[3] = ix->kv_down_w = add_tensor(pl, cursor, "kv_down_w", L, s->kv_lora + s->pos_dim, C, 1, W, NONE, 0, 0, 0, 0);
    if (nm) rep[4] = ix->kv_ln_w = add_tensor(pl, cursor, "kv_ln_w", L, 1, s->kv_lora, 0, one, NONE, 0, 0, 0, 0);
    if (nb) rep[5] = ix->kv_ln_b = add_tensor(pl, cursor, "kv_ln_b", L, 1, s->kv_lora, 0, Z, NONE, 0, 0, 0, 0);
    ix->kv_up_w = add_tensor(pl, cursor, "kv_up_w", L, hkv, s->kv_lora, 1, W, ROWS, 1, hkv, 0, 0);
    for (int k = 0; k < 6; k++)
        if (rep[k] >= 0) pl->t[rep[k]].sp_partial = partial;
}

static mt_status split_check(const char *what, int n, int tp) {
    if (n % tp)
        return mt_errorf(MT_ERR_CONFIG, "model layout: %s = %d does not split over parallel.tensor = %d; use a tp "
                         "that divides it (validate the recipe first: mtrain check)", what, n, tp);
    return MT_OK;
}

/* The layers of pipeline stage pl->stage (pp > 1): L, Lc, layer0, round and the chunks' lacks. Even:
 * L_global / pp each, chunks of L_global / (pp vpp). Uneven (Megatron's --decoder-first/last-pipeline-
 * num-layers, --account-for-embedding/loss-in-pipeline-split): the recipe's one split rule
 * (mt_recipe_chunk_layers); with interleaving only the embedding / loss rule, whose chunks are all
 * Lc = (L_global + 1 (+ 1)) / (pp vpp) places, the embedding's place in chunk 0 of stage 0 and the
 * loss's in the last chunk of the last stage (lack_first / lack_last). A split that does not add up
 * (a recipe the validator did not see) is refused, and so are first / last stage counts with
 * interleaving (Megatron's chunks of such a stage are not built here). */
static mt_status stage_layers(const mt_recipe *r, mt_param_layout *pl) {
    const int pp = pl->pp, vpp = pl->vpp, L = pl->L_global, s = pl->stage;
    const mt_parallel_cfg *pc = &r->parallel;
    if (!mt_recipe_uneven_stages(r)) {
        if (L % (pp * vpp))
            return mt_errorf(MT_ERR_CONFIG, "model.layers = %d does not split evenly into parallel.pipeline * "
                             "parallel.virtual_pipeline = %d * %d model chunks; pick pp * vpp dividing %d",
                             L, pp, vpp, L);
        pl->L = L / pp;
        pl->Lc = pl->L / vpp;
        pl->layer0 = s * pl->Lc;
        pl->round = L / vpp;
        return MT_OK;
    }
    if (vpp > 1 && (pc->first_stage_layers > 0 || pc->last_stage_layers > 0))
        return mt_errorf(MT_ERR_UNSUPPORTED, "model layout: parallel.first_stage_layers / last_stage_layers with "
                         "parallel.virtual_pipeline = %d are not supported; set virtual_pipeline: 1, or count the "
                         "embedding / loss as layers instead (embedding_in_split / loss_in_split)", vpp);
    const int n_split = L + (pc->embedding_in_split ? 1 : 0) + (pc->loss_in_split ? 1 : 0);
    if (vpp > 1 && (n_split % (pp * vpp) || n_split < pp * vpp))
        return mt_errorf(MT_ERR_CONFIG, "model layout: model.layers = %d with the embedding / loss counted = %d do "
                         "not split into parallel.pipeline x parallel.virtual_pipeline = %d x %d model chunks; choose "
                         "pp x vpp dividing %d (mtrain check names the rule)", L, n_split, pp, vpp, n_split);
    int sum = 0, empty = -1;
    for (int t = 0; t < pp; t++) {
        const int n = mt_recipe_stage_layers(r, t);
        if (n < 1 && empty < 0) empty = t;
        sum += n;
    }
    if (sum != L || empty >= 0)
        return mt_errorf(MT_ERR_CONFIG, "model layout: the uneven split of model.layers = %d over parallel.pipeline "
                         "= %d %s (parallel.first_stage_layers %d, last_stage_layers %d, embedding_in_split %d, "
                         "loss_in_split %d); fix the counts (mtrain check names the rule)", L, pp,
                         empty >= 0 ? "leaves a stage without layers" : "does not add up to the layers",
                         pc->first_stage_layers, pc->last_stage_layers, pc->embedding_in_split, pc->loss_in_split);
    pl->L = mt_recipe_stage_layers(r, s);
    pl->layer0 = mt_recipe_chunk_first_layer(r, s, 0);
    if (vpp == 1) {
        pl->Lc = pl->round = pl->L;
        return MT_OK;
    }
    pl->Lc = n_split / (pp * vpp);
    pl->round = pp * pl->Lc;
    pl->lack_first = pl->Lc - mt_recipe_chunk_layers(r, s, 0);
    pl->lack_last = pl->Lc - mt_recipe_chunk_layers(r, s, vpp - 1);
    for (int k = 0; k < vpp; k++) /* the layout's map (mt_param_global_layer) against the recipe's rule */
        if (mt_param_chunk_layers(pl, k) != mt_recipe_chunk_layers(r, s, k) ||
            (mt_param_chunk_layers(pl, k) > 0 &&
             mt_param_global_layer(pl, mt_param_chunk_l0(pl, k)) != mt_recipe_chunk_first_layer(r, s, k)))
            return mt_errorf(MT_ERR_INTERNAL, "model layout: stage %d chunk %d: %d layers from %d, the recipe's split "
                             "says %d from %d", s, k, mt_param_chunk_layers(pl, k),
                             mt_param_global_layer(pl, mt_param_chunk_l0(pl, k)), mt_recipe_chunk_layers(r, s, k),
                             mt_recipe_chunk_first_layer(r, s, k));
    return MT_OK;
}

/* The layer kinds (mt_recipe_moe_layer; and the layers without RoPE) of the model and of the stage: each local
 * layer's slot in its kind's parameter stacks and, per model chunk, in its kind's activation arrays (under full
 * recompute the recompute slices, the rerun layers of a chunk sharing slice 0 as every other array does; set
 * pl->recompute first). */
static void layer_kinds(const mt_recipe *r, mt_param_layout *pl) {
    for (int g = 0; g < pl->L_global; g++) {
        pl->layer_moe[g] = (unsigned char)mt_recipe_moe_layer(r, g);
        pl->layer_no_rope[g] = (unsigned char)mt_recipe_no_rope_layer(r, g);
        pl->n_kind_global[pl->layer_moe[g]]++;
    }
    for (int k = 0; k < pl->vpp; k++) {
        const int l0 = pl->pp > 1 ? mt_param_chunk_l0(pl, k) : 0, n = pl->pp > 1 ? mt_param_chunk_layers(pl, k) : pl->L;
        int in_chunk[2] = {0, 0};
        for (int l = l0; l < l0 + n; l++) {
            const int kind = mt_param_layer_is_moe(pl, l);
            pl->slot_layer[kind][pl->n_kind[kind]] = (short)l;
            pl->slot[l] = (short)pl->n_kind[kind]++;
            pl->act_slot[l] = (short)(pl->recompute ? mt_act_slice(pl, l - l0) : in_chunk[kind]);
            in_chunk[kind]++;
        }
        for (int kind = 0; kind < 2; kind++)
            if (in_chunk[kind] > pl->act_kind[kind]) pl->act_kind[kind] = in_chunk[kind];
    }
    for (int kind = 0; kind < 2 && pl->recompute; kind++)
        if (pl->act_kind[kind] > 0) pl->act_kind[kind] = mt_act_slices(pl);
}

static mt_status build(const mt_recipe *r, int use_pp, int stage, mt_param_layout *pl) {
    const mt_model_cfg *m = &r->model;
    mt_status st = MT_OK;
    memset(pl, 0, sizeof *pl);
    memset(&pl->idx, -1, sizeof pl->idx);
    pl->spec = mt_layer_spec_of(r);
    pl->L = m->layers;
    pl->C = m->hidden;
    pl->H = m->heads;
    pl->KV = m->kv_heads > 0 ? m->kv_heads : m->heads;
    pl->D = mt_recipe_head_dim(r);
    pl->F = m->ffn_hidden > 0 ? m->ffn_hidden : 4 * m->hidden;
    pl->V = m->vocab;
    pl->Vp = mt_recipe_padded_vocab(r);
    pl->T = m->seq_length;
    pl->max_pos = m->max_position > 0 ? m->max_position : m->seq_length;
    if (pl->spec.mla) { /* heads wide enough for [q_nope | q_pe] and for v; no grouped-query attention */
        const mt_layer_spec *sp = &pl->spec;
        pl->KV = pl->H;
        pl->D = sp->qk_dim + sp->pos_dim > sp->v_dim ? sp->qk_dim + sp->pos_dim : sp->v_dim;
    }
    pl->qkv_rows = (pl->H + 2 * pl->KV) * pl->D;
    pl->o_cols = pl->H * (pl->spec.mla ? pl->spec.v_dim : pl->D);
    pl->fc_rows = pl->spec.mlp == MT_MLP_SWIGLU ? 2 * pl->F : pl->F;
    if (pl->L <= 0 || pl->C <= 0 || pl->H <= 0 || pl->D <= 0 || (!m->head_dim && pl->C % pl->H) || pl->V <= 0 || pl->T <= 0)
        return mt_errorf(MT_ERR_CONFIG, "model layout: invalid model dimensions (validate the recipe first)");
    const int tp = r->parallel.tensor > 0 ? r->parallel.tensor : 1;
    pl->tp = tp;
    pl->sp = tp > 1 && r->parallel.sequence_parallel;
    pl->cp = r->parallel.context > 0 ? r->parallel.context : 1;
    MT_CHECK(split_check("model.heads", pl->H, tp));
    MT_CHECK(split_check("model.kv_heads", pl->KV, tp));
    MT_CHECK(split_check("model.ffn_hidden", pl->F, tp));
    MT_CHECK(split_check("the padded vocabulary", pl->Vp, tp));
    pl->H_r = pl->H / tp;
    pl->KV_r = pl->KV / tp;
    pl->F_r = pl->F / tp;
    pl->Vp_r = pl->Vp / tp;
    pl->qkv_rows_r = (pl->H_r + 2 * pl->KV_r) * pl->D;
    pl->o_cols_r = pl->o_cols / tp;
    pl->fc_rows_r = pl->spec.mlp == MT_MLP_SWIGLU ? 2 * pl->F_r : pl->F_r;
    pl->L_global = pl->L;
    pl->pp = use_pp && r->parallel.pipeline > 1 ? r->parallel.pipeline : 1;
    pl->vpp = pl->pp > 1 && r->parallel.virtual_pipeline > 1 ? r->parallel.virtual_pipeline : 1;
    pl->stage = pl->pp > 1 ? stage : 0;
    if (pl->pp > 1) {
        if (stage < 0 || stage >= pl->pp)
            return mt_errorf(MT_ERR_INTERNAL, "model layout: pipeline stage %d of %d", stage, pl->pp);
        MT_CHECK(stage_layers(r, pl));
    } else {
        pl->Lc = pl->round = pl->L;
    }
    if (pl->L_global > MT_LAYERS_MAX)
        return mt_errorf(MT_ERR_CONFIG, "model layout: model.layers = %d, at most %d", pl->L_global, MT_LAYERS_MAX);
    pl->has_embed = pl->stage == 0;
    pl->has_head = pl->stage == pl->pp - 1;
    if (r->training.recompute == MT_RECOMPUTE_FULL) {
        const int n = r->training.recompute_method == MT_RECOMPUTE_BLOCK ? r->training.recompute_num_layers : pl->Lc;
        pl->recompute = n < pl->Lc ? n : pl->Lc;
    }
    pl->recompute_attn = r->training.recompute == MT_RECOMPUTE_SELECTIVE;
    layer_kinds(r, pl);

    if (m->moe.experts > 0) {
        const int ep = r->parallel.expert > 0 ? r->parallel.expert : 1;
        pl->moe = 1;
        pl->E = m->moe.experts;
        pl->ep = ep;
        pl->top_k = m->moe.top_k;
        if (pl->E % ep || pl->top_k < 1 || pl->top_k > pl->E)
            return mt_errorf(MT_ERR_CONFIG, "model layout: model.moe.experts = %d with top_k %d does not split over "
                             "parallel.expert = %d (validate the recipe first: mtrain check)", pl->E, pl->top_k, ep);
        pl->E_r = pl->E / ep;
        pl->Fe = mt_recipe_moe_ffn_hidden(r) > 0 ? mt_recipe_moe_ffn_hidden(r) : pl->F;
        MT_CHECK(split_check("model.moe.ffn_hidden", pl->Fe, tp));
        pl->Fe_r = pl->Fe / tp;
        pl->efc_rows = pl->spec.mlp == MT_MLP_SWIGLU ? 2 * pl->Fe : pl->Fe;
        pl->efc_rows_r = pl->spec.mlp == MT_MLP_SWIGLU ? 2 * pl->Fe_r : pl->Fe_r;
        if (m->moe.shared_ffn > 0) {
            pl->Fs = m->moe.shared_ffn;
            MT_CHECK(split_check("model.moe.shared_ffn", pl->Fs, tp));
            pl->Fs_r = pl->Fs / tp;
            pl->fcs_rows = pl->spec.mlp == MT_MLP_SWIGLU ? 2 * pl->Fs : pl->Fs;
            pl->fcs_rows_r = pl->spec.mlp == MT_MLP_SWIGLU ? 2 * pl->Fs_r : pl->Fs_r;
        }
        pl->moe_expert_bias = m->moe.expert_bias;
        if (m->moe.capacity_factor > 0) {
            const double c = ceil((double)m->moe.capacity_factor * pl->T * pl->top_k / pl->E - 1e-9);
            pl->moe_cap = c < 1 ? 1 : c > pl->T ? pl->T : (int)c;
        }
    }
    const int L = pl->L, C = pl->C, bias = pl->spec.bias, nb = pl->spec.norm.bias;
    const int q = pl->H * pl->D, kv = pl->KV * pl->D, F = pl->F, nfb = pl->spec.mlp == MT_MLP_SWIGLU ? 2 : 1;
    const mt_shard_kind ROWS = MT_SHARD_ROWS, COLS = MT_SHARD_COLS, NONE = MT_SHARD_NONE;
    mt_param_index *ix = &pl->idx;
    const mt_init_kind one = pl->spec.norm.one_plus ? MT_INIT_ZERO : MT_INIT_ONE; /* a norm weight's start */
    size_t cur = 0;
    if (pl->has_embed || (m->tie_embeddings && pl->has_head)) {
        ix->wte = add_tensor(pl, &cur, "wte", 1, pl->Vp, C, 1, MT_INIT_NORMAL, ROWS, 1, pl->Vp, 0, 0);
        pl->t[ix->wte].pp_copy = !pl->has_embed;
    }
    if (!pl->spec.rope && pl->has_embed)
        ix->wpe = add_tensor(pl, &cur, "wpe", 1, pl->max_pos, C, 1, MT_INIT_NORMAL, NONE, 0, 0, 0, 0);
    ix->ln1_w = add_norm(pl, &cur, "ln1_w", L, one);
    if (nb) ix->ln1_b = add_norm(pl, &cur, "ln1_b", L, MT_INIT_ZERO);
    if (pl->spec.mla) {
        add_mla(pl, &cur, one);
    } else {
        ix->qkv_w = add_tensor(pl, &cur, "qkv_w", L, pl->qkv_rows, C, 1, MT_INIT_NORMAL, ROWS, 3, q, kv, kv);
        if (pl->spec.qkv_bias) ix->qkv_b = add_tensor(pl, &cur, "qkv_b", L, 1, pl->qkv_rows, 0, MT_INIT_ZERO, COLS, 3, q, kv, kv);
    }
    if (pl->spec.qk_norm == MT_QK_NORM_LEARNED) { /* per-head norms: every tp rank's heads add to the gradient */
        const char *name[4] = {"q_norm_w", "q_norm_b", "k_norm_w", "k_norm_b"};
        int *at[4] = {&ix->q_norm_w, &ix->q_norm_b, &ix->k_norm_w, &ix->k_norm_b};
        for (int k = 0; k < 4; k++) {
            if (k % 2 && !nb) continue;
            *at[k] = add_tensor(pl, &cur, name[k], L, 1, pl->D, 0, k % 2 ? MT_INIT_ZERO : one, NONE, 0, 0, 0, 0);
            pl->t[*at[k]].sp_partial = pl->tp > 1;
        }
    }
    ix->proj_w = add_tensor(pl, &cur, "proj_w", L, C, pl->o_cols, 1, MT_INIT_NORMAL_OUTPUT, COLS, 1, pl->o_cols, 0, 0);
    if (bias) ix->proj_b = add_tensor(pl, &cur, "proj_b", L, 1, C, 0, MT_INIT_ZERO, NONE, 0, 0, 0, 0);
    ix->ln2_w = add_norm(pl, &cur, "ln2_w", L, one);
    if (nb) ix->ln2_b = add_norm(pl, &cur, "ln2_b", L, MT_INIT_ZERO);
    /* a MoE model's dense MLP tensors are stacked over its dense layers, the router and experts over its
       MoE layers; a stage without layers of a kind has none of its tensors */
    const int Ld = pl->n_kind[0], Lm = pl->n_kind[1];
    const mt_layers_of dense_of = pl->moe ? MT_LAYERS_DENSE : MT_LAYERS_EVERY;
    if (pl->moe && Lm > 0) {
        ix->router_w = add_tensor(pl, &cur, "router_w", Lm, pl->E, C, 1, MT_INIT_NORMAL, NONE, 0, 0, 0, 0);
        pl->t[ix->router_w].layers = MT_LAYERS_MOE;
        if (pl->Fs) { /* the shared experts: a dense tensor-parallel MLP without biases (Megatron asserts none) */
            const int Fs = pl->Fs;
            ix->sfc_w = add_tensor(pl, &cur, "shared_fc_w", Lm, pl->fcs_rows, C, 1, MT_INIT_NORMAL, ROWS, nfb, Fs, Fs, 0);
            ix->sfcproj_w = add_tensor(pl, &cur, "shared_fcproj_w", Lm, C, Fs, 1, MT_INIT_NORMAL_OUTPUT, COLS, 1, Fs, 0, 0);
            pl->t[ix->sfc_w].layers = pl->t[ix->sfcproj_w].layers = MT_LAYERS_MOE;
            if (pl->spec.moe_shared_gate) { /* (1, C): a matrix to Megatron, so decayed */
                ix->sgate_w = add_tensor(pl, &cur, "shared_gate_w", Lm, 1, C, 1, MT_INIT_NORMAL, NONE, 0, 0, 0, 0);
                pl->t[ix->sgate_w].layers = MT_LAYERS_MOE;
            }
        }
    }
    if (Ld > 0) {
        ix->fc_w = add_tensor(pl, &cur, "fc_w", Ld, pl->fc_rows, C, 1, MT_INIT_NORMAL, ROWS, nfb, F, F, 0);
        if (bias) ix->fc_b = add_tensor(pl, &cur, "fc_b", Ld, 1, pl->fc_rows, 0, MT_INIT_ZERO, COLS, nfb, F, F, 0);
        ix->fcproj_w = add_tensor(pl, &cur, "fcproj_w", Ld, C, F, 1, MT_INIT_NORMAL_OUTPUT, COLS, 1, F, 0, 0);
        if (bias) ix->fcproj_b = add_tensor(pl, &cur, "fcproj_b", Ld, 1, C, 0, MT_INIT_ZERO, NONE, 0, 0, 0, 0);
        const int dn[4] = {ix->fc_w, ix->fc_b, ix->fcproj_w, ix->fcproj_b};
        for (int k = 0; k < 4; k++)
            if (dn[k] >= 0) pl->t[dn[k]].layers = dense_of;
    }
    if (pl->has_head) {
        ix->lnf_w = add_norm(pl, &cur, "lnf_w", 1, one);
        if (nb) ix->lnf_b = add_norm(pl, &cur, "lnf_b", 1, MT_INIT_ZERO);
        if (!m->tie_embeddings)
            ix->lm_head = add_tensor(pl, &cur, "lm_head", 1, pl->Vp, C, 1, MT_INIT_NORMAL, ROWS, 1, pl->Vp, 0, 0);
    }
    if (pl->moe && Lm > 0) { /* the expert gradient buffer: its tensors together, after every dense one */
        const int n = Lm * pl->E_r, Fe = pl->Fe, er = pl->efc_rows;
        ix->efc_w = add_tensor(pl, &cur, "expert_fc_w", n, er, C, 1, MT_INIT_NORMAL, ROWS, nfb, Fe, Fe, 0);
        if (bias) ix->efc_b = add_tensor(pl, &cur, "expert_fc_b", n, 1, er, 0, MT_INIT_ZERO, COLS, nfb, Fe, Fe, 0);
        ix->efcproj_w = add_tensor(pl, &cur, "expert_fcproj_w", n, C, Fe, 1, MT_INIT_NORMAL_OUTPUT, COLS, 1, Fe, 0, 0);
        if (bias) ix->efcproj_b = add_tensor(pl, &cur, "expert_fcproj_b", n, 1, C, 0, MT_INIT_ZERO, NONE, 0, 0, 0, 0);
        const int ex[4] = {ix->efc_w, ix->efc_b, ix->efcproj_w, ix->efcproj_b};
        for (int k = 0; k < 4; k++)
            if (ex[k] >= 0) pl->t[ex[k]].experts_r = pl->E_r, pl->t[ex[k]].layers = MT_LAYERS_MOE;
    }
    pl->n_elems = cur;
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        mt_param_tensor *t = &pl->t[ti];
        t->stacked = ti != ix->wte && ti != ix->wpe && ti != ix->lnf_w && ti != ix->lnf_b && ti != ix->lm_head;
        t->gclass = MT_GRAD_DENSE;
        if (t->sp_partial) t->gclass = MT_GRAD_TP_PARTIAL;
        if (ti == ix->wte && m->tie_embeddings && pl->pp > 1) t->gclass = MT_GRAD_EMBEDDING;
        if (t->experts_r) t->gclass = MT_GRAD_EXPERT;
    }
out:
    return st;
}

mt_status mt_param_layout_build(const mt_recipe *r, mt_param_layout *pl) { return build(r, 0, 0, pl); }

mt_status mt_param_layout_build_stage(const mt_recipe *r, int stage, mt_param_layout *pl) {
    return build(r, 1, stage, pl);
}

void mt_param_layout_place_buffers(mt_param_layout *pl, const int shards[2]) {
    size_t dense_end = 0, exp_lo = (size_t)-1;
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        const mt_param_tensor *t = &pl->t[ti];
        if (t->gclass == MT_GRAD_EXPERT) {
            if (t->offset < exp_lo) exp_lo = t->offset;
        } else if (t->offset + t->n > dense_end) {
            dense_end = t->offset + t->n;
        }
    }
    if (exp_lo == (size_t)-1) return;
    const size_t unit = (size_t)(shards[0] > 0 ? shards[0] : 1) * MT_PARAM_ALIGN;
    const size_t start = align_up(dense_end, unit);
    if (start <= exp_lo) return;
    const size_t delta = start - exp_lo; /* a multiple of MT_PARAM_ALIGN: both are */
    for (int ti = 0; ti < pl->n_tensors; ti++)
        if (pl->t[ti].gclass == MT_GRAD_EXPERT) pl->t[ti].offset += delta;
    pl->n_elems += delta;
}

/* the global slot of local slot s of a stacked tensor of kind `of`: its global layer, or the count of
 * the model's layers of its kind before that layer */
static int global_slot(const mt_param_layout *pl, mt_layers_of of, int s) {
    if (of == MT_LAYERS_EVERY) return mt_param_global_layer(pl, s);
    const int kind = of == MT_LAYERS_MOE, g = mt_param_global_layer(pl, pl->slot_layer[kind][s]);
    int n = 0;
    for (int k = 0; k < g; k++) n += pl->layer_moe[k] == kind;
    return n;
}

int mt_param_global_slice(const mt_param_layout *pl, int ti, int s) {
    const mt_param_tensor *t = &pl->t[ti];
    if (!t->stacked) return s;
    if (!t->experts_r) return global_slot(pl, t->layers, s);
    return global_slot(pl, t->layers, s / t->experts_r) * pl->E + pl->ep_rank * t->experts_r + s % t->experts_r;
}

int mt_param_global_layers(const mt_param_layout *pl, int ti) {
    const mt_param_tensor *t = &pl->t[ti];
    if (!t->stacked) return 1;
    return t->layers == MT_LAYERS_EVERY ? pl->L_global : pl->n_kind_global[t->layers == MT_LAYERS_MOE];
}

/* local index k along a sharded axis of blocks -> full index */
static int full_along(const mt_param_tensor *t, int tp, int tp_rank, int k) {
    int full_base = 0;
    for (int b = 0; b < t->n_blocks; b++) {
        const int part = t->block[b] / tp;
        if (k < part) return full_base + tp_rank * part + k;
        k -= part;
        full_base += t->block[b];
    }
    return -1; /* outside the shard: a caller bug */
}

size_t mt_param_full_index(const mt_param_layout *pl, int ti, int tp_rank, int i, int j) {
    const mt_param_tensor *t = &pl->t[ti];
    if (t->shard == MT_SHARD_ROWS) i = full_along(t, pl->tp, tp_rank, i);
    if (t->shard == MT_SHARD_COLS) j = full_along(t, pl->tp, tp_rank, j);
    return (size_t)i * t->full_cols + (size_t)j;
}

void mt_act_layout_build(const mt_param_layout *pl, int B, mt_dtype act, mt_act_layout *al) {
    const size_t a = mt_dtype_bytes(act), f = 4;
    const int tp = pl->tp > 0 ? pl->tp : 1;
    /* a pipeline stage's buffer holds one model chunk (one in-flight micro-batch of one chunk) */
    const int cp = pl->cp > 0 ? pl->cp : 1, T = pl->T / cp; /* this rank's tokens per sequence */
    const size_t N = (size_t)B * T, Lres = pl->pp > 1 ? pl->Lc : pl->L, C = pl->C;
    /* full recompute: the residual stream keeps every layer's input; the rest is one layer's worth
       (the layer being run or recomputed); selective: the attention core's outputs are one layer's worth */
    const size_t L = (size_t)mt_act_slices(pl);
    const int head = pl->pp <= 1 || pl->has_head; /* the loss lives on the last stage only */
    const size_t Nr = pl->sp ? N / tp : N; /* N % tp is checked by mt_model_init */
    const size_t HD = (size_t)pl->H_r * pl->D;
    const size_t lse = (size_t)B * pl->H_r * T; /* one f32 per query row and head: no T x T buffer */
    size_t cur = 0;
#define PLACE(field, bytes)              \
    do {                                 \
        al->field = cur;                 \
        cur = align_up(cur + (bytes), 256); \
    } while (0)
    memset(al, 0, sizeof *al);
    al->B = B;
    al->T = T;
    al->N = (int)N;
    al->N_r = (int)Nr;
    PLACE(tokens, N * 4);
    PLACE(targets, N * 4);
    PLACE(resid, (Lres + 1) * Nr * C * a);
    PLACE(ln1, L * Nr * C * a);
    PLACE(ln1_mean, L * Nr * f);
    PLACE(ln1_rstd, L * Nr * f);
    PLACE(qkv, L * N * pl->qkv_rows_r * a);
    const size_t qk_rows = pl->spec.qk_norm ? N * (pl->H_r + pl->KV_r) : 0;
    PLACE(qk_in, L * qk_rows * pl->D * a);
    PLACE(qk_mean, L * qk_rows * f);
    PLACE(qk_rstd, L * qk_rows * f);
    const size_t La = (size_t)mt_act_attn_slices(pl); /* selective recompute: one shared slice */
    PLACE(lse, La * lse * f);
    PLACE(atty, La * N * HD * a);
    PLACE(resid_mid, L * Nr * C * a);
    PLACE(ln2, L * Nr * C * a);
    PLACE(ln2_mean, L * Nr * f);
    PLACE(ln2_rstd, L * Nr * f);
    /* MoE layers keep their MLP activations per expert row; a MoE model's dense layers have act_kind[0]
       slices of the dense MLP's (act_slot; under full recompute the recompute slices) */
    const size_t dense_mlp = pl->moe ? (pl->act_kind[0] > 0) : 1, Ld = pl->moe ? (size_t)pl->act_kind[0] : L;
    PLACE(fch, Ld * N * pl->fc_rows_r * a);
    PLACE(fch_act, Ld * N * pl->F_r * a);
    PLACE(lnf, head ? Nr * C * a : 0);
    PLACE(lnf_mean, head ? Nr * f : 0);
    PLACE(lnf_rstd, head ? Nr * f : 0);
    PLACE(logits, head ? N * pl->Vp_r * a : 0);
    PLACE(losses, N * f);
    if (tp > 1) PLACE(xent_stats, head ? 3 * N * f : 0);
    PLACE(scalars, 2 * f);
    PLACE(dresid, Nr * C * a);
    /* the qk norm's backward packs a layer's q (k) heads into them: H_r * D columns, more than C
       when the head size is not hidden / heads */
    const size_t wide = HD > C ? HD : C;
    PLACE(dln, N * wide * a);
    PLACE(dtmp, N * wide * a);
    PLACE(dqkv, N * pl->qkv_rows_r * a);
    PLACE(datty, N * HD * a);
    PLACE(delta, lse * f);
    PLACE(dfch, dense_mlp * N * pl->fc_rows_r * a);
    /* SwiGLU's d(gate * up) before its backward; GeLU needs none (dGeLU in the GEMM's epilogue, or in place) */
    PLACE(dfch_act, (pl->fc_rows_r != pl->F_r ? dense_mlp : 0) * N * pl->F_r * a);
    if (cp > 1) {
        const size_t kv = (size_t)2 * pl->KV_r * pl->D; /* packed [k | v] row */
        PLACE(cp_kv, 2 * N * kv * a);
        PLACE(cp_dkv, 3 * N * kv * a);
    }
    if (pl->sp) {
        PLACE(sp_full, N * C * a);
        PLACE(sp_slice, Nr * C * a);
    }
    if (pl->moe) {
        const size_t E = pl->E, k = pl->top_k, Er = pl->E_r, ep = pl->ep;
        size_t S = N * k, per_src = N; /* rows one source sends one expert at most */
        if (pl->moe_cap > 0) {
            per_src = (size_t)B * pl->moe_cap;
            if (E * per_src < S) S = E * per_src;
        }
        size_t R = ep * Er * per_src;
        if (ep * S < R) R = ep * S;
        al->moe_S = (int)S;
        al->moe_R = (int)R;
        const size_t Lm = (size_t)pl->act_kind[1]; /* the MoE layers' slices (act_slot) */
        PLACE(moe_logits, Lm * N * E * a);
        PLACE(moe_probs, Lm * N * E * f);
        PLACE(moe_topi, Lm * N * k * 4);
        PLACE(moe_topw, Lm * N * k * f);
        PLACE(moe_pos, Lm * N * k * 4);
        PLACE(moe_counts, Lm * (2 * E + ep * Er) * 4);
        PLACE(moe_xin, Lm * R * C * a);
        PLACE(moe_h, Lm * R * pl->efc_rows_r * a);
        PLACE(moe_g, Lm * R * pl->Fe_r * a);
        PLACE(moe_ysend, Lm * S * C * a);
        PLACE(moe_send, S * C * a);
        PLACE(moe_recv, ep > 1 ? R * C * a : 0);
        PLACE(moe_ye, R * C * a);
        PLACE(moe_dh, R * pl->efc_rows_r * a);
        PLACE(moe_dg, R * pl->Fe_r * a);
        PLACE(moe_dlogits, N * E * a);
        PLACE(moe_dw, N * k * f);
        PLACE(moe_stats, (MT_MOE_STATS + 2 * E) * f);
        if (pl->Fs) {
            const size_t gate = pl->spec.moe_shared_gate;
            PLACE(moe_sh, Lm * N * pl->fcs_rows_r * a);
            PLACE(moe_sg, Lm * N * pl->Fs_r * a);
            PLACE(moe_sy, (gate ? Lm : 1) * N * C * a);
            PLACE(moe_sgate, gate * Lm * N * f);
            PLACE(moe_sdh, N * pl->fcs_rows_r * a);
            PLACE(moe_sdg, N * pl->Fs_r * a);
            PLACE(moe_sdz, gate * N * f);
        }
        PLACE(moe_auxcnt, Lm * B * E * 4); /* the MoE layers' slices (act_slot) */
        PLACE(moe_bias, pl->moe_expert_bias ? (size_t)pl->L * E * 4 : 0);
        PLACE(moe_bias_cnt, pl->moe_expert_bias ? (size_t)pl->L * E * 4 : 0);
    }
    if (pl->spec.mla) {
        const mt_layer_spec *sp = &pl->spec;
        const size_t qr = (size_t)sp->q_lora, kr = (size_t)sp->kv_lora, lat = qr > kr ? qr : kr, nm = sp->mla_norm;
        PLACE(mla_qc, L * N * qr * a);
        /* the q latent's norm, or without a q latent the norm fused into linear_q_proj: this rank's rows of x1 */
        const size_t qrows = qr ? N : Nr, qw = qr ? qr : C;
        PLACE(mla_qcn, nm * L * qrows * qw * a);
        PLACE(mla_qc_mean, nm * L * qrows * f);
        PLACE(mla_qc_rstd, nm * L * qrows * f);
        PLACE(mla_dxq, !qr && nm ? Nr * C * a : 0);
        PLACE(mla_kvc, L * N * kr * a);
        PLACE(mla_kvcn, nm * L * N * kr * a);
        PLACE(mla_kvc_mean, nm * L * N * f);
        PLACE(mla_kvc_rstd, nm * L * N * f);
        PLACE(mla_q, N * pl->H_r * (sp->qk_dim + sp->pos_dim) * a);
        PLACE(mla_kv, N * pl->H_r * (sp->qk_dim + sp->v_dim) * a);
        PLACE(mla_kpe, N * sp->pos_dim * a);
        PLACE(mla_o, N * pl->o_cols_r * a);
        PLACE(mla_dlat, N * lat * a);
        PLACE(mla_dc, N * lat * a);
    }
    if (mt_layer_spec_norm_ones(&pl->spec)) { /* one width serves every norm: the layer's, the qk and MLA ones */
        const size_t W = (size_t)mt_norm_ones_width(pl);
        PLACE(norm_ones, W * a);
        PLACE(norm_w1, pl->spec.norm.one_plus ? W * a : 0);
    }
#undef PLACE
    al->n_bytes = cur;
}
