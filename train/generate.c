/* generate.c — sampling (temperature, top-k, top-p from the counter-based RNG), the generator's
 * setup (the model for micro-batches of one sequence, the checkpoint's weights, the tokenizer) and
 * the decoding loop over the two paths of generate.h: full recomputation on the backend, or the
 * KV cache of generate_kv.c (the same forward, one token per step). */
#include "train/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt/manifest.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "train/checkpoint_use.h"

/* ---- sampling ---- */

int mt_sample_argmax(const float *logits, int V) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i]))) best = i;
    return best;
}

/* qsort context: the values the ids of `order` are ranked by (C11 qsort has no context argument;
 * one generator per process, and sampling runs on one thread) */
static const float *g_rank_by;

static int by_value_desc(const void *pa, const void *pb) {
    const int a = *(const int *)pa, b = *(const int *)pb;
    const float va = g_rank_by[a], vb = g_rank_by[b];
    if (va > vb) return -1;
    if (va < vb) return 1;
    return a < b ? -1 : a > b;
}

int mt_sample_probs(const float *logits, int V, const mt_sample_cfg *c, float *probs, int *order) {
    if (V <= 0) return 0;
    if (!(c->temperature > 0.0f)) {
        const int best = mt_sample_argmax(logits, V);
        for (int i = 0; i < V; i++) probs[i] = 0.0f;
        probs[best] = 1.0f;
        order[0] = best;
        for (int i = 0, k = 1; i < V; i++)
            if (i != best) order[k++] = i;
        return 1;
    }
    /* softmax of logits / temperature, in double for the sum; NaN logits get probability 0 */
    float mx = -INFINITY;
    for (int i = 0; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < V; i++) {
        const double e = isnan(logits[i]) || logits[i] == -INFINITY ? 0.0
                                                                    : exp(((double)logits[i] - mx) / c->temperature);
        probs[i] = (float)e;
        sum += e;
    }
    if (!(sum > 0) || !isfinite(sum)) { /* every logit -inf / NaN, or an infinite one: fall back to argmax */
        mt_sample_cfg g = *c;
        g.temperature = 0.0f;
        return mt_sample_probs(logits, V, &g, probs, order);
    }
    for (int i = 0; i < V; i++) probs[i] = (float)(probs[i] / sum);
    for (int i = 0; i < V; i++) order[i] = i;
    g_rank_by = probs;
    qsort(order, (size_t)V, sizeof *order, by_value_desc);
    g_rank_by = NULL;
    int keep = V;
    if (c->top_k > 0 && c->top_k < keep) keep = c->top_k;
    if (c->top_p < 1.0f) {
        double cum = 0;
        int n = 0;
        while (n < keep) {
            cum += probs[order[n++]];
            if (cum >= (double)c->top_p) break;
        }
        keep = n > 0 ? n : 1;
    }
    double kept = 0;
    for (int i = 0; i < keep; i++) kept += probs[order[i]];
    for (int i = keep; i < V; i++) probs[order[i]] = 0.0f;
    if (!(kept > 0)) { /* the kept tokens underflowed: the most likely one */
        for (int i = 0; i < keep; i++) probs[order[i]] = 0.0f;
        probs[order[0]] = 1.0f;
        return 1;
    }
    for (int i = 0; i < keep; i++) probs[order[i]] = (float)(probs[order[i]] / kept);
    return keep;
}

int mt_sample_token(const float *logits, int V, const mt_sample_cfg *c, uint64_t step, float *probs, int *order) {
    if (!(c->temperature > 0.0f)) return mt_sample_argmax(logits, V);
    const int keep = mt_sample_probs(logits, V, c, probs, order);
    if (keep <= 1) return order[0];
    const double u = mt_rng_uniform(c->seed, mt_hash_str("generate.sample"), step);
    double cum = 0;
    for (int i = 0; i < keep; i++) {
        cum += probs[order[i]];
        if (u < cum) return order[i];
    }
    return order[keep - 1]; /* rounding: u above the last partial sum */
}

/* ---- setup ---- */

mt_status mt_generator_open(mt_generator *g, const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps,
                            int use_kv, FILE *log) {
    mt_status st = MT_OK;
    memset(g, 0, sizeof *g);
    g->r = r;
    g->be = be;
    if (!r->checkpoint.load[0])
        return mt_errorf(MT_ERR_CONFIG, "no checkpoint to generate with: pass --load DIR (a checkpoint folder --save "
                         "wrote, or one iter_* folder in it)");
    if (r->parallel.tensor > 1 || r->parallel.pipeline > 1 || r->parallel.context > 1 || r->parallel.expert > 1 ||
        ps->size > 1)
        return mt_errorf(MT_ERR_CONFIG, "mtrain generate runs as one process on one device (tp = pp = cp = ep = 1, "
                         "world size 1; this run has tp %d pp %d cp %d ep %d on %d rank(s)); a checkpoint saved "
                         "at any layout loads into it (the loader reshards)", r->parallel.tensor, r->parallel.pipeline,
                         r->parallel.context, r->parallel.expert, ps->size);
    const int T = r->model.seq_length;
    MT_CHECK(mt_ckpt_open_for_use(r, "mtrain generate", "generate", "generate with", log, g->ckpt_path,
                                  sizeof g->ckpt_path, &g->iteration, &g->tok));
    { /* ids past the tokenizer's decode to nothing: sample among the tokenizer's */
        const int nv = (int)mt_tokenizer_vocab_size(g->tok);
        g->V = nv < r->model.vocab ? nv : r->model.vocab;
    }

    mt_model_shape shape = {.B = 1, .ps = NULL}; /* one rank, the whole model */
    for (int b = 0; b < MT_GBUFS; b++) shape.shards[b] = 1, shape.shard[b] = 0; /* no optimizer shards */
    MT_CHECK(mt_model_create_for_use(&g->model, r, be, &shape));
    g->have_model = 1;
    MT_CHECK(mt_ckpt_load_weights(r, &g->model, ps, g->ckpt_path)); /* generation never steps the optimizer */
    const int Vp = g->model.pl.Vp_r;
    g->row = malloc((size_t)(T + 1) * sizeof *g->row);
    g->raw = malloc((size_t)Vp * mt_dtype_bytes(g->model.act));
    g->logits = malloc((size_t)Vp * sizeof *g->logits);
    g->probs = malloc((size_t)Vp * sizeof *g->probs);
    g->order = malloc((size_t)Vp * sizeof *g->order);
    if (!g->row || !g->raw || !g->logits || !g->probs || !g->order) {
        st = mt_errorf(MT_ERR_OOM, "generate: host staging for a vocabulary of %d", Vp);
        goto out;
    }
    if (use_kv) {
        MT_CHECK(mt_kv_open(&g->kv, &g->model, g->V));
        g->have_kv = 1;
    }
out:
    if (st != MT_OK) mt_generator_close(g);
    return st;
}

void mt_generator_close(mt_generator *g) {
    if (g->have_kv) mt_kv_close(&g->kv);
    if (g->have_model) mt_model_free(&g->model);
    if (g->tok) mt_tokenizer_free(g->tok);
    free(g->row);
    free(g->raw);
    free(g->logits);
    free(g->probs);
    free(g->order);
    g->have_kv = g->have_model = 0;
    g->tok = NULL;
    g->row = NULL;
    g->raw = g->logits = g->probs = NULL;
    g->order = NULL;
}

/* ---- decoding ---- */

/* Full recomputation: the model's forward over ids[0, n) padded to seq_length; the logits row of
 * position n - 1 (the first g->V columns) into g->logits. */
static mt_status full_logits(mt_generator *g, const int32_t *ids, int n) {
    mt_status st = MT_OK;
    mt_model *m = &g->model;
    const int T = g->r->model.seq_length, Vp = m->pl.Vp_r;
    memcpy(g->row, ids, (size_t)n * sizeof *ids);
    const int32_t pad = mt_tokenizer_eod(g->tok);
    for (int i = n; i <= T; i++) g->row[i] = pad;
    MT_CHECK(mt_model_load_micro(m, &m->acts, g->row));
    MT_CHECK(mt_model_forward(m, &m->acts, mt_model_whole(m)));
    const size_t es = mt_dtype_bytes(m->act);
    const char *src = (const char *)m->acts.base + m->al.logits + (size_t)(n - 1) * Vp * es;
    MT_CHECK(g->be->i->copy_d2h(g->be, g->raw, src, (size_t)Vp * es));
    if (m->act == MT_F32) {
        memcpy(g->logits, g->raw, (size_t)g->V * sizeof(float));
    } else {
        const uint16_t *b = g->raw;
        for (int i = 0; i < g->V; i++) g->logits[i] = mt_bf16_to_f32(b[i]);
    }
out:
    return st;
}

static mt_status put_text(mt_generator *g, const int32_t *ids, int n, FILE *f) {
    mt_byte_buf b = {0};
    mt_status st = mt_tokenizer_decode(g->tok, ids, n, &b);
    if (st == MT_OK && b.n_bytes) {
        fwrite(b.bytes, 1, b.n_bytes, f);
        fflush(f);
    }
    mt_byte_buf_free(&b);
    return st;
}

mt_status mt_generate(mt_generator *g, const int32_t *prompt, int n_prompt, int max_new, const mt_sample_cfg *c,
                      int use_kv, int32_t *out, FILE *out_text, mt_gen_report *rep) {
    mt_status st = MT_OK;
    const int T = g->r->model.seq_length;
    int32_t *ids = NULL;
    memset(rep, 0, sizeof *rep);
    rep->n_prompt = n_prompt;
    if (n_prompt < 1 || n_prompt > T)
        return mt_errorf(MT_ERR_CONFIG, "generate: the prompt has %d tokens: need 1 to model.seq_length = %d", n_prompt,
                         T);
    if (max_new < 0) return mt_errorf(MT_ERR_CONFIG, "generate: max_new %d < 0", max_new);
    if (use_kv && !g->have_kv) return mt_errorf(MT_ERR_INTERNAL, "generate: the KV model was not opened");
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= g->V)
            return mt_errorf(MT_ERR_DATA, "generate: prompt token %d is id %d, outside [0, %d)", i, (int)prompt[i], g->V);
    ids = malloc((size_t)(T + 1) * sizeof *ids);
    if (!ids) return mt_errorf(MT_ERR_OOM, "generate: %d token ids", T + 1);
    memcpy(ids, prompt, (size_t)n_prompt * sizeof *ids);
    int n = n_prompt;
    const int32_t eod = mt_tokenizer_eod(g->tok);
    const double t0 = mt_clock_s();
    rep->stop = MT_GEN_STOP_MAX;
    if (use_kv) { /* prefill: every prompt token but the last goes into the cache without logits */
        mt_kv_reset(&g->kv);
        for (int i = 0; i < n_prompt - 1; i++) MT_CHECK(mt_kv_step(&g->kv, ids[i], NULL));
    }
    while (rep->n_new < max_new) {
        if (n > T) { /* model.seq_length + 1 tokens: the last one was predicted from a full context */
            rep->stop = MT_GEN_STOP_CONTEXT;
            break;
        }
        if (use_kv) MT_CHECK(mt_kv_step(&g->kv, ids[n - 1], g->logits));
        else MT_CHECK(full_logits(g, ids, n));
        const int32_t t = mt_sample_token(g->logits, g->V, c, (uint64_t)n, g->probs, g->order);
        if (t == eod) {
            rep->stop = MT_GEN_STOP_EOD;
            break;
        }
        ids[n++] = t;
        out[rep->n_new++] = t;
        if (out_text) MT_CHECK(put_text(g, &t, 1, out_text));
    }
    rep->seconds = mt_clock_s() - t0;
out:
    free(ids);
    return st;
}
