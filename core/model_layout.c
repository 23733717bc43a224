/* model_layout.c — the pure layout functions of model_layout.h. No allocation, no I/O:
 * the same recipe always gives the same offsets (tested in test/unit/test_model_layout.c). */
#include "model_layout.h"

#include <string.h>

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static int add_tensor(mt_param_layout *pl, size_t *cursor, const char *name, int n_layers,
                      int rows, int cols, int decay, mt_init_kind init) {
    int i = pl->n_tensors++;
    mt_param_tensor *t = &pl->t[i];
    t->name = name;
    t->n_layers = n_layers;
    t->rows = rows;
    t->cols = cols;
    t->n = (size_t)n_layers * rows * cols;
    t->offset = *cursor;
    t->decay = decay;
    t->init = init;
    *cursor = align_up(*cursor + t->n, MT_PARAM_ALIGN);
    pl->n_params += t->n;
    return i;
}

mt_status mt_param_layout_build(const mt_recipe *r, mt_param_layout *pl) {
    const mt_model_cfg *m = &r->model;
    memset(pl, 0, sizeof *pl);
    memset(&pl->idx, -1, sizeof pl->idx);
    pl->L = m->layers;
    pl->C = m->hidden;
    pl->H = m->heads;
    pl->KV = m->kv_heads > 0 ? m->kv_heads : m->heads;
    pl->D = m->hidden / m->heads;
    pl->F = m->ffn_hidden > 0 ? m->ffn_hidden : 4 * m->hidden;
    pl->V = m->vocab;
    pl->Vp = mt_recipe_padded_vocab(r);
    pl->T = m->seq_length;
    pl->max_pos = m->max_position > 0 ? m->max_position : m->seq_length;
    pl->qkv_rows = (pl->H + 2 * pl->KV) * pl->D;
    pl->fc_rows = m->activation == MT_ACT_SWIGLU ? 2 * pl->F : pl->F;
    if (pl->L <= 0 || pl->C <= 0 || pl->H <= 0 || pl->C % pl->H || pl->V <= 0 || pl->T <= 0)
        return mt_errorf(MT_ERR_CONFIG, "model layout: invalid model dimensions (validate the recipe first)");

    const int L = pl->L, C = pl->C, bias = m->bias, ln = m->norm == MT_NORM_LAYERNORM;
    mt_param_index *ix = &pl->idx;
    size_t cur = 0;
    ix->wte = add_tensor(pl, &cur, "wte", 1, pl->Vp, C, 1, MT_INIT_NORMAL);
    if (m->position == MT_POS_LEARNED)
        ix->wpe = add_tensor(pl, &cur, "wpe", 1, pl->max_pos, C, 1, MT_INIT_NORMAL);
    ix->ln1_w = add_tensor(pl, &cur, "ln1_w", L, 1, C, 0, MT_INIT_ONE);
    if (ln) ix->ln1_b = add_tensor(pl, &cur, "ln1_b", L, 1, C, 0, MT_INIT_ZERO);
    ix->qkv_w = add_tensor(pl, &cur, "qkv_w", L, pl->qkv_rows, C, 1, MT_INIT_NORMAL);
    if (bias) ix->qkv_b = add_tensor(pl, &cur, "qkv_b", L, 1, pl->qkv_rows, 0, MT_INIT_ZERO);
    ix->proj_w = add_tensor(pl, &cur, "proj_w", L, C, pl->H * pl->D, 1, MT_INIT_NORMAL_OUTPUT);
    if (bias) ix->proj_b = add_tensor(pl, &cur, "proj_b", L, 1, C, 0, MT_INIT_ZERO);
    ix->ln2_w = add_tensor(pl, &cur, "ln2_w", L, 1, C, 0, MT_INIT_ONE);
    if (ln) ix->ln2_b = add_tensor(pl, &cur, "ln2_b", L, 1, C, 0, MT_INIT_ZERO);
    ix->fc_w = add_tensor(pl, &cur, "fc_w", L, pl->fc_rows, C, 1, MT_INIT_NORMAL);
    if (bias) ix->fc_b = add_tensor(pl, &cur, "fc_b", L, 1, pl->fc_rows, 0, MT_INIT_ZERO);
    ix->fcproj_w = add_tensor(pl, &cur, "fcproj_w", L, C, pl->F, 1, MT_INIT_NORMAL_OUTPUT);
    if (bias) ix->fcproj_b = add_tensor(pl, &cur, "fcproj_b", L, 1, C, 0, MT_INIT_ZERO);
    ix->lnf_w = add_tensor(pl, &cur, "lnf_w", 1, 1, C, 0, MT_INIT_ONE);
    if (ln) ix->lnf_b = add_tensor(pl, &cur, "lnf_b", 1, 1, C, 0, MT_INIT_ZERO);
    if (!m->tie_embeddings)
        ix->lm_head = add_tensor(pl, &cur, "lm_head", 1, pl->Vp, C, 1, MT_INIT_NORMAL);
    pl->n_elems = cur;
    return MT_OK;
}

void mt_act_layout_build(const mt_param_layout *pl, int B, mt_dtype act, mt_act_layout *al) {
    const size_t a = mt_dtype_bytes(act), f = 4;
    const size_t N = (size_t)B * pl->T, L = pl->L, C = pl->C;
    const size_t probs = (size_t)B * pl->H * pl->T * pl->T;
    size_t cur = 0;
#define PLACE(field, bytes)              \
    do {                                 \
        al->field = cur;                 \
        cur = align_up(cur + (bytes), 256); \
    } while (0)
    memset(al, 0, sizeof *al);
    al->B = B;
    al->T = pl->T;
    al->N = (int)N;
    PLACE(tokens, N * 4);
    PLACE(targets, N * 4);
    PLACE(resid, (L + 1) * N * C * a);
    PLACE(ln1, L * N * C * a);
    PLACE(ln1_mean, L * N * f);
    PLACE(ln1_rstd, L * N * f);
    PLACE(qkv, L * N * pl->qkv_rows * a);
    PLACE(probs, L * probs * f);
    PLACE(atty, L * N * C * a);
    PLACE(resid_mid, L * N * C * a);
    PLACE(ln2, L * N * C * a);
    PLACE(ln2_mean, L * N * f);
    PLACE(ln2_rstd, L * N * f);
    PLACE(fch, L * N * pl->fc_rows * a);
    PLACE(fch_act, L * N * pl->F * a);
    PLACE(lnf, N * C * a);
    PLACE(lnf_mean, N * f);
    PLACE(lnf_rstd, N * f);
    PLACE(logits, N * pl->Vp * a);
    PLACE(losses, N * f);
    PLACE(scalars, 2 * f);
    PLACE(dresid, N * C * a);
    PLACE(dln, N * C * a);
    PLACE(dtmp, N * C * a);
    PLACE(dqkv, N * pl->qkv_rows * a);
    PLACE(datty, N * C * a);
    PLACE(dprobs, probs * f);
    PLACE(dfch, N * pl->fc_rows * a);
    PLACE(dfch_act, N * pl->F * a);
#undef PLACE
    al->n_bytes = cur;
}
