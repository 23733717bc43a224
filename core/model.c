/* model.c — GPT / Llama forward and backward of one micro-batch on one rank, written
 * against the backend table only (see backend.h for the op contracts).
 * Layer (pre-norm):  x1 = norm1(x); qkv = x1 Wqkv^T (+b); rope(q, k); a = attn(qkv);
 *                    xm = x + a Wproj^T (+b); x2 = norm2(xm); h = x2 Wfc^T (+b);
 *                    g = gelu(h) | swiglu(h); x' = xm + g Wfcproj^T (+b)
 * Head: y = normf(x_L); logits = y Wout^T (Wout = wte when tied); xent.
 * Backward keeps one residual-gradient buffer (dresid) that norm backwards add into. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define ACT(m, field) ((char *)(m)->acts + (m)->al.field)
/* slice l of a per-layer activation array whose one-layer slice has `per` elements of size `es` */
#define ACT_L(m, field, l, per, es) (ACT(m, field) + (size_t)(l) * (size_t)(per) * (es))

static void *P(const mt_model *m, int ti, int l) {
    return (char *)m->params + mt_param_offset(&m->pl, ti, l) * mt_dtype_bytes(m->act);
}
static void *G(const mt_model *m, int ti, int l) {
    return (char *)m->grads + mt_param_offset(&m->pl, ti, l) * 4;
}
static void *Popt(const mt_model *m, int ti, int l) { return ti < 0 ? NULL : P(m, ti, l); }
static void *Gopt(const mt_model *m, int ti, int l) { return ti < 0 ? NULL : G(m, ti, l); }

static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

mt_status mt_model_check_backend(const mt_recipe *r, const mt_backend *be, char *missing, size_t n_bytes) {
    const struct mt_backend_i *i = be->i;
    int ln = r->model.norm == MT_NORM_LAYERNORM, sw = r->model.activation == MT_ACT_SWIGLU;
    struct { const char *name; int needed; const void *fn; } ops[] = {
        {"matmul_fwd", 1, (const void *)i->matmul_fwd}, {"matmul_bwd", 1, (const void *)i->matmul_bwd},
        {"layernorm_fwd", ln, (const void *)i->layernorm_fwd}, {"layernorm_bwd", ln, (const void *)i->layernorm_bwd},
        {"rmsnorm_fwd", !ln, (const void *)i->rmsnorm_fwd}, {"rmsnorm_bwd", !ln, (const void *)i->rmsnorm_bwd},
        {"gelu_fwd", !sw, (const void *)i->gelu_fwd}, {"gelu_bwd", !sw, (const void *)i->gelu_bwd},
        {"swiglu_fwd", sw, (const void *)i->swiglu_fwd}, {"swiglu_bwd", sw, (const void *)i->swiglu_bwd},
        {"rope", r->model.position == MT_POS_ROPE, (const void *)i->rope},
        {"attention_fwd", 1, (const void *)i->attention_fwd}, {"attention_bwd", 1, (const void *)i->attention_bwd},
        {"embedding_fwd", 1, (const void *)i->embedding_fwd}, {"embedding_bwd", 1, (const void *)i->embedding_bwd},
        {"xent_fwd_bwd", 1, (const void *)i->xent_fwd_bwd}, {"add", 1, (const void *)i->add},
        {"sum", 1, (const void *)i->sum}, {"adamw", 1, (const void *)i->adamw},
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

/* Initialises every tensor as the full tensor from the seed: element e of layer l of tensor
 * `name` is normal(seed, stream(name, l), e) — the same value whatever the layout. */
static mt_status init_weights(mt_model *m, const mt_recipe *r) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    size_t max_slice = 0;
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        size_t n = (size_t)pl->t[ti].rows * pl->t[ti].cols;
        if (n > max_slice) max_slice = n;
    }
    float *host = malloc(max_slice * sizeof(float));
    uint16_t *host16 = m->act == MT_BF16 ? malloc(max_slice * 2) : NULL;
    if (!host || (m->act == MT_BF16 && !host16)) {
        st = mt_errorf(MT_ERR_OOM, "weight init: cannot allocate %zu bytes of host memory", max_slice * 4);
        goto out;
    }
    const double out_scale = 1.0 / sqrt(2.0 * pl->L);
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        const mt_param_tensor *t = &pl->t[ti];
        const size_t n = (size_t)t->rows * t->cols;
        for (int l = 0; l < t->n_layers; l++) {
            const uint64_t stream = mt_hash_str(t->name) ^ ((uint64_t)l * 0x9e3779b97f4a7c15ULL);
            for (size_t e = 0; e < n; e++) {
                switch (t->init) {
                case MT_INIT_ZERO: host[e] = 0.0f; break;
                case MT_INIT_ONE: host[e] = 1.0f; break;
                case MT_INIT_NORMAL:
                    host[e] = (float)(r->model.init_std * mt_rng_normal(r->training.seed, stream, e));
                    break;
                case MT_INIT_NORMAL_OUTPUT:
                    host[e] = (float)(r->model.init_std * out_scale * mt_rng_normal(r->training.seed, stream, e));
                    break;
                }
            }
            size_t off = mt_param_offset(pl, ti, l);
            if (m->act != MT_F32) { /* fp32 master weights: only this rank's optimizer shard */
                size_t lo = off > m->opt_begin ? off : m->opt_begin;
                size_t hi = off + n < m->opt_begin + m->opt_n ? off + n : m->opt_begin + m->opt_n;
                if (hi > lo)
                    MT_CHECK(m->be->i->copy_h2d(m->be, (char *)m->master + (lo - m->opt_begin) * 4, host + (lo - off),
                                                (hi - lo) * 4));
            }
            if (m->act == MT_BF16) {
                for (size_t e = 0; e < n; e++) host16[e] = f32_to_bf16(host[e]);
                MT_CHECK(m->be->i->copy_h2d(m->be, (char *)m->params + off * 2, host16, n * 2));
            } else {
                MT_CHECK(m->be->i->copy_h2d(m->be, (char *)m->params + off * 4, host, n * 4));
            }
        }
    }
out:
    free(host);
    free(host16);
    return st;
}

mt_status mt_model_init(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard) {
    mt_status st = MT_OK;
    char missing[512];
    memset(m, 0, sizeof *m);
    m->be = be;
    m->act = be->act;
    m->ln = r->model.norm == MT_NORM_LAYERNORM;
    m->swiglu = r->model.activation == MT_ACT_SWIGLU;
    m->rope = r->model.position == MT_POS_ROPE;
    m->tied = r->model.tie_embeddings;
    m->bias = r->model.bias;
    m->norm_eps = r->model.norm_eps;
    m->rope_theta = r->model.rope_theta;
    MT_CHECK(mt_model_check_backend(r, be, missing, sizeof missing));
    MT_CHECK(mt_param_layout_build(r, &m->pl));
    mt_act_layout_build(&m->pl, B, m->act, &m->al);
    if (n_shards < 1 || shard < 0 || shard >= n_shards)
        return mt_errorf(MT_ERR_INTERNAL, "model init: optimizer shard %d of %d", shard, n_shards);
    const size_t unit = (size_t)n_shards * MT_PARAM_ALIGN;
    const size_t n = (m->pl.n_elems + unit - 1) / unit * unit;
    m->n_flat = n;
    m->opt_n = n / (size_t)n_shards;
    m->opt_begin = (size_t)shard * m->opt_n;
    m->bytes_params = n * mt_dtype_bytes(m->act);
    m->bytes_grads = n * 4;
    m->bytes_optim = 2 * m->opt_n * 4 + (m->act == MT_F32 ? 0 : m->opt_n * 4);
    m->bytes_acts = m->al.n_bytes;
    MT_CHECK(be->i->alloc(be, m->bytes_params, &m->params));
    MT_CHECK(be->i->alloc(be, m->bytes_grads, &m->grads));
    if (m->act == MT_F32) {
        m->master = (char *)m->params + m->opt_begin * 4;
    } else {
        MT_CHECK(be->i->alloc(be, m->opt_n * 4, &m->master));
    }
    MT_CHECK(be->i->alloc(be, m->opt_n * 4, &m->adam_m));
    MT_CHECK(be->i->alloc(be, m->opt_n * 4, &m->adam_v));
    MT_CHECK(be->i->alloc(be, m->bytes_acts, &m->acts));
    MT_CHECK(init_weights(m, r));
out:
    if (st != MT_OK) mt_model_free(m);
    return st;
}

void mt_model_free(mt_model *m) {
    if (!m->be) return;
    mt_backend *be = m->be;
    if (m->master && m->act != MT_F32) be->i->free(be, m->master);
    if (m->params) be->i->free(be, m->params);
    if (m->grads) be->i->free(be, m->grads);
    if (m->adam_m) be->i->free(be, m->adam_m);
    if (m->adam_v) be->i->free(be, m->adam_v);
    if (m->acts) be->i->free(be, m->acts);
    memset(m, 0, sizeof *m);
}

mt_status mt_model_zero_grads(mt_model *m) {
    mt_status st = MT_OK;
    MT_CHECK(m->be->i->memset_zero(m->be, m->grads, m->bytes_grads));
    MT_CHECK(m->be->i->memset_zero(m->be, ACT(m, scalars), 8));
out:
    return st;
}

static mt_status norm_fwd(mt_model *m, void *out, void *mean, void *rstd, const void *inp,
                          const void *w, const void *b, int N) {
    mt_norm_fwd_args a = {.out = out, .mean = m->ln ? mean : NULL, .rstd = rstd, .inp = inp,
                          .weight = w, .bias = b, .N = N, .C = m->pl.C, .eps = m->norm_eps};
    return m->ln ? MT_BE_CALL(m->be, layernorm_fwd, &a) : MT_BE_CALL(m->be, rmsnorm_fwd, &a);
}

static mt_status norm_bwd(mt_model *m, void *dinp, void *dw, void *db, const void *dout,
                          const void *inp, const void *w, const void *mean, const void *rstd, int N) {
    mt_norm_bwd_args a = {.dinp = dinp, .dweight = dw, .dbias = db, .dout = dout, .inp = inp,
                          .weight = w, .mean = mean, .rstd = rstd, .N = N, .C = m->pl.C};
    return m->ln ? MT_BE_CALL(m->be, layernorm_bwd, &a) : MT_BE_CALL(m->be, rmsnorm_bwd, &a);
}

static mt_status matmul_fwd(mt_model *m, void *out, const void *inp, const void *w, const void *b,
                            int M, int N, int K) {
    mt_matmul_fwd_args a = {.out = out, .inp = inp, .weight = w, .bias = b, .M = M, .N = N, .K = K};
    return MT_BE_CALL(m->be, matmul_fwd, &a);
}

static mt_status matmul_bwd(mt_model *m, void *dinp, void *dw, void *db, const void *dout,
                            const void *inp, const void *w, int M, int N, int K) {
    mt_matmul_bwd_args a = {.dinp = dinp, .dweight = dw, .dbias = db, .dout = dout, .inp = inp,
                            .weight = w, .M = M, .N = N, .K = K, .accumulate_dinp = 0};
    return MT_BE_CALL(m->be, matmul_bwd, &a);
}

static mt_status forward(mt_model *m) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int B = m->al.B, T = m->al.T, N = m->al.N, C = pl->C, L = pl->L;
    const size_t a = mt_dtype_bytes(m->act);
    const size_t NC = (size_t)N * C;

    mt_embedding_fwd_args emb = {.out = ACT(m, resid), .tokens = (const int32_t *)ACT(m, tokens),
                                 .wte = P(m, ix->wte, 0), .wpe = Popt(m, ix->wpe, 0), .B = B, .T = T,
                                 .C = C, .vocab_start = 0, .n_vocab = pl->Vp, .pos_offset = 0};
    MT_CHECK(MT_BE_CALL(m->be, embedding_fwd, &emb));

    for (int l = 0; l < L; l++) {
        void *x = ACT_L(m, resid, l, NC, a);
        void *x1 = ACT_L(m, ln1, l, NC, a);
        void *qkv = ACT_L(m, qkv, l, (size_t)N * pl->qkv_rows, a);
        void *probs = ACT_L(m, probs, l, (size_t)B * pl->H * T * T, 4);
        void *atty = ACT_L(m, atty, l, NC, a);
        void *xm = ACT_L(m, resid_mid, l, NC, a);
        void *x2 = ACT_L(m, ln2, l, NC, a);
        void *h = ACT_L(m, fch, l, (size_t)N * pl->fc_rows, a);
        void *g = ACT_L(m, fch_act, l, (size_t)N * pl->F, a);
        void *xo = ACT_L(m, resid, l + 1, NC, a);
        void *tmp = ACT(m, dtmp); /* projection outputs before the residual add */

        MT_CHECK(norm_fwd(m, x1, ACT_L(m, ln1_mean, l, N, 4), ACT_L(m, ln1_rstd, l, N, 4), x,
                          P(m, ix->ln1_w, l), Popt(m, ix->ln1_b, l), N));
        MT_CHECK(matmul_fwd(m, qkv, x1, P(m, ix->qkv_w, l), Popt(m, ix->qkv_b, l), N, pl->qkv_rows, C));
        if (m->rope) {
            mt_rope_args ra = {.x = qkv, .B = B, .T = T, .n_heads = pl->H + pl->KV, .D = pl->D,
                               .row_stride = pl->qkv_rows, .pos_offset = 0, .theta = m->rope_theta,
                               .inverse = 0};
            MT_CHECK(MT_BE_CALL(m->be, rope, &ra));
        }
        mt_attention_fwd_args at = {.out = atty, .probs = probs, .qkv = qkv, .B = B, .T = T,
                                    .H = pl->H, .KV = pl->KV, .D = pl->D};
        MT_CHECK(MT_BE_CALL(m->be, attention_fwd, &at));
        MT_CHECK(matmul_fwd(m, tmp, atty, P(m, ix->proj_w, l), Popt(m, ix->proj_b, l), N, C, pl->H * pl->D));
        mt_add_args ad1 = {.out = xm, .a = x, .b = tmp, .n = NC};
        MT_CHECK(MT_BE_CALL(m->be, add, &ad1));

        MT_CHECK(norm_fwd(m, x2, ACT_L(m, ln2_mean, l, N, 4), ACT_L(m, ln2_rstd, l, N, 4), xm,
                          P(m, ix->ln2_w, l), Popt(m, ix->ln2_b, l), N));
        MT_CHECK(matmul_fwd(m, h, x2, P(m, ix->fc_w, l), Popt(m, ix->fc_b, l), N, pl->fc_rows, C));
        if (m->swiglu) {
            mt_swiglu_fwd_args sa = {.out = g, .inp = h, .N = N, .F = pl->F};
            MT_CHECK(MT_BE_CALL(m->be, swiglu_fwd, &sa));
        } else {
            mt_gelu_fwd_args ga = {.out = g, .inp = h, .n = (size_t)N * pl->F};
            MT_CHECK(MT_BE_CALL(m->be, gelu_fwd, &ga));
        }
        MT_CHECK(matmul_fwd(m, tmp, g, P(m, ix->fcproj_w, l), Popt(m, ix->fcproj_b, l), N, C, pl->F));
        mt_add_args ad2 = {.out = xo, .a = xm, .b = tmp, .n = NC};
        MT_CHECK(MT_BE_CALL(m->be, add, &ad2));
    }

    MT_CHECK(norm_fwd(m, ACT(m, lnf), ACT(m, lnf_mean), ACT(m, lnf_rstd), ACT_L(m, resid, L, NC, a),
                      P(m, ix->lnf_w, 0), Popt(m, ix->lnf_b, 0), N));
    const int wout = m->tied ? ix->wte : ix->lm_head;
    MT_CHECK(matmul_fwd(m, ACT(m, logits), ACT(m, lnf), P(m, wout, 0), NULL, N, pl->Vp, C));
out:
    return st;
}

static mt_status backward(mt_model *m) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int B = m->al.B, T = m->al.T, N = m->al.N, C = pl->C, L = pl->L;
    const size_t a = mt_dtype_bytes(m->act);
    const size_t NC = (size_t)N * C;
    void *dresid = ACT(m, dresid), *dln = ACT(m, dln);

    const int wout = m->tied ? ix->wte : ix->lm_head;
    MT_CHECK(matmul_bwd(m, dln, G(m, wout, 0), NULL, ACT(m, logits), ACT(m, lnf), P(m, wout, 0), N, pl->Vp, C));
    MT_CHECK(m->be->i->memset_zero(m->be, dresid, NC * a));
    MT_CHECK(norm_bwd(m, dresid, G(m, ix->lnf_w, 0), Gopt(m, ix->lnf_b, 0), dln, ACT_L(m, resid, L, NC, a),
                      P(m, ix->lnf_w, 0), ACT(m, lnf_mean), ACT(m, lnf_rstd), N));

    for (int l = L - 1; l >= 0; l--) {
        void *x = ACT_L(m, resid, l, NC, a);
        void *x1 = ACT_L(m, ln1, l, NC, a);
        void *qkv = ACT_L(m, qkv, l, (size_t)N * pl->qkv_rows, a);
        void *probs = ACT_L(m, probs, l, (size_t)B * pl->H * T * T, 4);
        void *atty = ACT_L(m, atty, l, NC, a);
        void *xm = ACT_L(m, resid_mid, l, NC, a);
        void *x2 = ACT_L(m, ln2, l, NC, a);
        void *h = ACT_L(m, fch, l, (size_t)N * pl->fc_rows, a);
        void *g = ACT_L(m, fch_act, l, (size_t)N * pl->F, a);

        /* MLP: dresid holds dL/dx' */
        MT_CHECK(matmul_bwd(m, ACT(m, dfch_act), G(m, ix->fcproj_w, l), Gopt(m, ix->fcproj_b, l), dresid, g,
                            P(m, ix->fcproj_w, l), N, C, pl->F));
        if (m->swiglu) {
            mt_swiglu_bwd_args sa = {.dinp = ACT(m, dfch), .dout = ACT(m, dfch_act), .inp = h, .N = N, .F = pl->F};
            MT_CHECK(MT_BE_CALL(m->be, swiglu_bwd, &sa));
        } else {
            mt_gelu_bwd_args ga = {.dinp = ACT(m, dfch), .dout = ACT(m, dfch_act), .inp = h, .n = (size_t)N * pl->F};
            MT_CHECK(MT_BE_CALL(m->be, gelu_bwd, &ga));
        }
        MT_CHECK(matmul_bwd(m, dln, G(m, ix->fc_w, l), Gopt(m, ix->fc_b, l), ACT(m, dfch), x2, P(m, ix->fc_w, l),
                            N, pl->fc_rows, C));
        MT_CHECK(norm_bwd(m, dresid, G(m, ix->ln2_w, l), Gopt(m, ix->ln2_b, l), dln, xm, P(m, ix->ln2_w, l),
                          ACT_L(m, ln2_mean, l, N, 4), ACT_L(m, ln2_rstd, l, N, 4), N));
        /* attention: dresid holds dL/dxm */
        MT_CHECK(matmul_bwd(m, ACT(m, datty), G(m, ix->proj_w, l), Gopt(m, ix->proj_b, l), dresid, atty,
                            P(m, ix->proj_w, l), N, C, pl->H * pl->D));
        mt_attention_bwd_args ab = {.dqkv = ACT(m, dqkv), .dprobs = ACT(m, dprobs), .dout = ACT(m, datty),
                                    .qkv = qkv, .probs = probs, .B = B, .T = T, .H = pl->H, .KV = pl->KV,
                                    .D = pl->D};
        MT_CHECK(MT_BE_CALL(m->be, attention_bwd, &ab));
        if (m->rope) {
            mt_rope_args ra = {.x = ACT(m, dqkv), .B = B, .T = T, .n_heads = pl->H + pl->KV, .D = pl->D,
                               .row_stride = pl->qkv_rows, .pos_offset = 0, .theta = m->rope_theta,
                               .inverse = 1};
            MT_CHECK(MT_BE_CALL(m->be, rope, &ra));
        }
        MT_CHECK(matmul_bwd(m, dln, G(m, ix->qkv_w, l), Gopt(m, ix->qkv_b, l), ACT(m, dqkv), x1,
                            P(m, ix->qkv_w, l), N, pl->qkv_rows, C));
        MT_CHECK(norm_bwd(m, dresid, G(m, ix->ln1_w, l), Gopt(m, ix->ln1_b, l), dln, x, P(m, ix->ln1_w, l),
                          ACT_L(m, ln1_mean, l, N, 4), ACT_L(m, ln1_rstd, l, N, 4), N));
    }

    mt_embedding_bwd_args eb = {.dwte = G(m, ix->wte, 0), .dwpe = Gopt(m, ix->wpe, 0), .dout = dresid,
                                .tokens = (const int32_t *)ACT(m, tokens), .B = B, .T = T, .C = C,
                                .vocab_start = 0, .n_vocab = pl->Vp, .pos_offset = 0};
    MT_CHECK(MT_BE_CALL(m->be, embedding_bwd, &eb));
out:
    return st;
}

mt_status mt_model_step_micro(mt_model *m, const int32_t *tokens_host, float dloss, int do_backward) {
    mt_status st = MT_OK;
    const int B = m->al.B, T = m->al.T, N = m->al.N;
    int32_t *inp = malloc((size_t)N * 4 * 2);
    if (!inp) return mt_errorf(MT_ERR_OOM, "micro-batch staging: out of host memory");
    int32_t *tgt = inp + N;
    for (int b = 0; b < B; b++) {
        memcpy(inp + (size_t)b * T, tokens_host + (size_t)b * (T + 1), (size_t)T * 4);
        memcpy(tgt + (size_t)b * T, tokens_host + (size_t)b * (T + 1) + 1, (size_t)T * 4);
    }
    MT_CHECK(m->be->i->copy_h2d(m->be, ACT(m, tokens), inp, (size_t)N * 4));
    MT_CHECK(m->be->i->copy_h2d(m->be, ACT(m, targets), tgt, (size_t)N * 4));
    MT_CHECK(forward(m));
    mt_xent_args xa = {.logits = ACT(m, logits), .losses = ACT(m, losses),
                       .targets = (const int32_t *)ACT(m, targets), .N = N, .V = m->pl.V, .Vp = m->pl.Vp,
                       .dloss = dloss};
    MT_CHECK(MT_BE_CALL(m->be, xent_fwd_bwd, &xa));
    mt_sum_args sa = {.out = ACT(m, scalars), .x = ACT(m, losses), .n = (size_t)N, .squares = 0};
    MT_CHECK(MT_BE_CALL(m->be, sum, &sa));
    if (do_backward) MT_CHECK(backward(m));
out:
    free(inp);
    return st;
}

mt_status mt_model_grad_sq(mt_model *m, size_t begin, size_t n) {
    mt_status st = MT_OK;
    float *sq = (float *)ACT(m, scalars) + 1;
    MT_CHECK(m->be->i->memset_zero(m->be, sq, 4));
    mt_sum_args sa = {.out = sq, .x = (char *)m->grads + begin * 4, .n = n, .squares = 1};
    MT_CHECK(MT_BE_CALL(m->be, sum, &sa));
out:
    return st;
}

void *mt_model_scalars(mt_model *m) { return ACT(m, scalars); }

mt_status mt_model_read_scalars(mt_model *m, float *loss_sum, float *grad_sq) {
    float s[2];
    mt_status st = m->be->i->copy_d2h(m->be, s, ACT(m, scalars), 8);
    *loss_sum = s[0];
    *grad_sq = s[1];
    return st;
}

double mt_model_flops_per_seq(const mt_param_layout *pl, int recompute_full) {
    const double T = pl->T, C = pl->C, L = pl->L;
    /* weights touched per token by matmuls: qkv, proj, fc, fcproj per layer + output layer */
    const double per_layer = (double)pl->qkv_rows * C + C * pl->H * pl->D + (double)pl->fc_rows * C + C * pl->F;
    const double matmul = 2.0 * T * (L * per_layer + (double)pl->Vp * C);
    /* attention scores and weighted sum, counted over the full T x T square as Megatron does */
    const double attn = L * 2.0 * 2.0 * T * T * pl->H * pl->D;
    const double fwd = matmul + attn;
    return fwd * (recompute_full ? 4.0 : 3.0);
}
