/* generate_kv.c — the KV-cache decoder of generate.h: the training forward (model_fwd.c, every op on
 * the backend, the layer as pl.spec describes it) run on one token per step through a decode view
 * of the model (mt_model_view_open): a copy of its struct pointing at the same weights, with an
 * activation layout for one token, the token's position as the single chunk's position (the
 * embedding's position row and RoPE), and kv_cache set, so that each layer's attention
 * (mt_model_decode_attention) appends the token's K and V to the cache and attends over positions
 * [0, pos] with the backend's attention_block_fwd (the op context parallelism uses: query rows at
 * one global position, key rows at others). Mixture-of-experts layers route the one token
 * dropless (no capacity: a capacity per one-token "sequence" would be another model). */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "train/generate.h"
#include "train/model_internal.h"

mt_status mt_model_decode_attention(mt_model *m, int l, const void *qkv, void *out) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const size_t es = mt_dtype_bytes(m->act), kvw = (size_t)2 * pl->KV * pl->D;
    char *cache = (char *)m->kv_cache + (size_t)l * m->kv_len * kvw * es;
    /* this token's [k | v] columns (adjacent in the qkv row) into cache row pos */
    MT_CHECK(m->be->i->copy_d2d(m->be, cache + (size_t)m->kv_pos * kvw * es,
                                (const char *)qkv + (size_t)pl->H * pl->D * es, kvw * es));
    mt_attention_block_fwd_args a = {.out = out, .lse = m->kv_lse, .qkv = qkv, .kv = cache, .B = 1, .T = m->kv_len,
                                     .H = pl->H, .KV = pl->KV, .D = pl->D, .q0 = 0, .Tq = 1, .q_pos = m->kv_pos,
                                     .k0 = 0, .Tk = m->kv_pos + 1, .k_pos = 0, .merge = 0,
                                     .scale = m->attn_scale};
    MT_CHECK(MT_BE_CALL(m->be, attention_block_fwd, &a));
out:
    return st;
}

mt_status mt_kv_open(mt_kv_model *kv, const mt_model *m, int V) {
    mt_status st = MT_OK;
    memset(kv, 0, sizeof *kv);
    const mt_param_layout *pl = &m->pl;
    mt_backend *be = m->be;
    if (pl->tp != 1 || pl->pp != 1 || pl->cp != 1 || (pl->moe && pl->ep != 1) || !pl->has_embed || !pl->has_head)
        return mt_errorf(MT_ERR_CONFIG, "generate: the KV cache needs the whole model on one rank (tp = pp = cp = ep = 1)");
    if (!be->i->attention_block_fwd || !be->i->copy_d2d)
        return mt_errorf(MT_ERR_UNSUPPORTED, "generate: backend '%s' has no attention_block_fwd / copy_d2d for the KV "
                         "cache; use --no-kv-cache", be->i->name);
    kv->T = pl->T;
    kv->V = V;
    mt_model *d = &kv->dm;
    /* one token per forward; its position is the view's chunk position (mt_kv_step) */
    st = mt_model_view_open(d, m, 1);
    d->kv_cache = d->kv_lse = NULL;
    if (st != MT_OK) goto out;
    d->kv_len = pl->T;
    const size_t es = mt_dtype_bytes(d->act);
    const size_t cache = (size_t)pl->L * pl->T * 2 * pl->KV * pl->D * es;
    MT_CHECK(be->i->alloc(be, cache, &d->kv_cache));
    MT_CHECK(be->i->alloc(be, (size_t)pl->H * pl->T * 4, &d->kv_lse));
    kv->raw = malloc((size_t)pl->Vp_r * es);
    if (!kv->raw) st = mt_errorf(MT_ERR_OOM, "generate: a logits row of %d", pl->Vp_r);
out:
    if (st != MT_OK) mt_kv_close(kv);
    return st;
}

void mt_kv_close(mt_kv_model *kv) {
    mt_model *d = &kv->dm;
    mt_model_view_free(d);
    if (d->be) {
        if (d->kv_cache) d->be->i->free(d->be, d->kv_cache);
        if (d->kv_lse) d->be->i->free(d->be, d->kv_lse);
    }
    free(kv->raw);
    memset(kv, 0, sizeof *kv);
}

void mt_kv_reset(mt_kv_model *kv) { kv->n_past = 0; }

mt_status mt_kv_step(mt_kv_model *kv, int32_t tok, float *logits) {
    mt_status st = MT_OK;
    mt_model *d = &kv->dm;
    const mt_param_layout *pl = &d->pl;
    const int pos = kv->n_past;
    if (pos >= kv->T) return mt_errorf(MT_ERR_CONFIG, "generate: the KV cache is full (%d positions)", kv->T);
    if (tok < 0 || tok >= pl->V) return mt_errorf(MT_ERR_DATA, "generate: token id %d outside [0, %d)", tok, pl->V);
    if (pl->idx.wpe >= 0 && pos >= pl->max_pos)
        return mt_errorf(MT_ERR_CONFIG, "generate: position %d past model.max_position %d", pos, pl->max_pos);
    d->kv_pos = d->par.cp.chunk_pos[0] = d->par.tp.chunk_pos[0] = pos;
    MT_CHECK(d->be->i->copy_h2d(d->be, ACT(d, &d->acts, tokens), &tok, sizeof tok));
    mt_model_part part = mt_model_whole(d);
    part.head = logits != NULL;
    MT_CHECK(mt_model_forward(d, &d->acts, part));
    kv->n_past = pos + 1;
    if (!logits) goto out;
    MT_CHECK(d->be->i->copy_d2h(d->be, kv->raw, ACT(d, &d->acts, logits), (size_t)kv->V * mt_dtype_bytes(d->act)));
    if (d->act == MT_F32) {
        memcpy(logits, kv->raw, (size_t)kv->V * sizeof(float));
    } else {
        const uint16_t *b = kv->raw;
        for (int i = 0; i < kv->V; i++) logits[i] = mt_bf16_to_f32(b[i]);
    }
out:
    return st;
}
