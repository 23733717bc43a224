/* generate_kv.c — the host KV-cache forward of generate.h: one token's row through every layer in
 * fp32, from a host copy of the model's weights at the parameter layout's offsets (weights W of
 * y = x W^T, rows [Q; K; V] in qkv, [gate; up] in a SwiGLU fc), with the keys and values of past
 * positions kept per layer. The same math as train/model_fwd.c and the CPU ops (LayerNorm / RMSNorm
 * with double sums, tanh-GeLU, silu(gate) * up, rotate-half RoPE with rope_theta, causal softmax
 * attention scaled by 1/sqrt(D), query head h on kv head h / (H / KV)). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "train/generate.h"

static float *Wt(const mt_kv_model *kv, int ti, int l) {
    return ti < 0 ? NULL : kv->w + mt_param_offset(&kv->pl, ti, l);
}

mt_status mt_kv_open(mt_kv_model *kv, const mt_model *m, int V) {
    mt_status st = MT_OK;
    memset(kv, 0, sizeof *kv);
    kv->pl = m->pl;
    const mt_param_layout *pl = &kv->pl;
    if (pl->moe)
        return mt_errorf(MT_ERR_UNSUPPORTED, "generate: the KV-cache decoder has no mixture-of-experts layers yet "
                         "(model.moe.experts = %d); `mtrain logprobs` scores an MoE model with the training forward",
                         pl->E);
    if (pl->tp != 1 || pl->pp != 1 || !pl->has_embed || !pl->has_head)
        return mt_errorf(MT_ERR_CONFIG, "generate: the KV cache needs the whole model on one rank (tp 1, pp 1)");
    if (pl->H % pl->KV)
        return mt_errorf(MT_ERR_CONFIG, "generate: %d query heads are not a multiple of %d kv heads", pl->H, pl->KV);
    kv->wout = m->tied ? pl->idx.wte : pl->idx.lm_head;
    kv->V = V;
    if (kv->wout < 0 || pl->idx.wte < 0) return mt_errorf(MT_ERR_INTERNAL, "generate: the model has no output layer");
    if (pl->spec.rope && pl->D % 2) return mt_errorf(MT_ERR_CONFIG, "generate: RoPE needs an even head dim (D = %d)", pl->D);
    const size_t n = pl->n_elems, es = mt_dtype_bytes(m->act);
    const size_t kvd = (size_t)pl->KV * pl->D, cache = (size_t)pl->L * pl->T * kvd;
    const int wide = pl->fc_rows > pl->qkv_rows ? pl->fc_rows : pl->qkv_rows;
    const int widest = wide > pl->C ? wide : pl->C;
    kv->w = malloc(n * sizeof(float));
    kv->kc = malloc(cache * sizeof(float));
    kv->vc = malloc(cache * sizeof(float));
    float *s = malloc((size_t)(3 * pl->C + pl->qkv_rows + pl->H * pl->D + pl->fc_rows + pl->F + pl->T + widest) *
                      sizeof(float));
    if (!kv->w || !kv->kc || !kv->vc || !s) {
        free(s);
        st = mt_errorf(MT_ERR_OOM, "generate: host copy of %zu weights and a KV cache of %zu floats", n, 2 * cache);
        goto out;
    }
    kv->x = s;
    kv->x1 = kv->x + pl->C;
    kv->y = kv->x1 + pl->C;
    kv->qkv = kv->y + widest; /* y also holds the logits of one row chunk: at least C wide */
    kv->att = kv->qkv + pl->qkv_rows;
    kv->h = kv->att + pl->H * pl->D;
    kv->g = kv->h + pl->fc_rows;
    kv->sc = kv->g + pl->F;
    if (m->act == MT_F32) {
        MT_CHECK(m->be->i->copy_d2h(m->be, kv->w, m->params, n * sizeof(float)));
    } else {
        uint16_t *b = malloc(n * es);
        if (!b) {
            st = mt_errorf(MT_ERR_OOM, "generate: staging for %zu bf16 weights", n);
            goto out;
        }
        st = m->be->i->copy_d2h(m->be, b, m->params, n * es);
        if (st == MT_OK)
            for (size_t i = 0; i < n; i++) kv->w[i] = mt_bf16_to_f32(b[i]);
        free(b);
        if (st != MT_OK) goto out;
    }
out:
    if (st != MT_OK) mt_kv_close(kv);
    return st;
}

void mt_kv_close(mt_kv_model *kv) {
    free(kv->w);
    free(kv->kc);
    free(kv->vc);
    free(kv->x); /* the one scratch allocation */
    kv->w = kv->kc = kv->vc = kv->x = NULL;
}

void mt_kv_reset(mt_kv_model *kv) { kv->n_past = 0; }

/* y[r] = W[r, :] . x + b[r] for r < rows; W (rows, cols) row-major; double sums */
static void matvec(float *y, const float *W, const float *b, const float *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        const float *w = W + (size_t)r * cols;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        int c = 0;
        for (; c + 4 <= cols; c += 4) {
            a0 += (double)w[c] * x[c];
            a1 += (double)w[c + 1] * x[c + 1];
            a2 += (double)w[c + 2] * x[c + 2];
            a3 += (double)w[c + 3] * x[c + 3];
        }
        for (; c < cols; c++) a0 += (double)w[c] * x[c];
        y[r] = (float)((a0 + a1) + (a2 + a3)) + (b ? b[r] : 0.0f);
    }
}

static void norm(const mt_kv_model *kv, float *out, const float *x, const float *w, const float *b) {
    const int C = kv->pl.C;
    double mu = 0, ss = 0;
    if (mt_norm_is_layernorm(&kv->pl.spec.norm)) {
        for (int i = 0; i < C; i++) mu += x[i];
        mu /= C;
    }
    for (int i = 0; i < C; i++) {
        const double d = (double)x[i] - mu;
        ss += d * d;
    }
    const float s = (float)(1.0 / sqrt(ss / C + (double)kv->pl.spec.norm.eps)), m = (float)mu;
    for (int i = 0; i < C; i++) out[i] = (x[i] - m) * s * w[i] + (b ? b[i] : 0.0f);
}

/* rotate-half RoPE of n_heads heads of D at position pos, as mt_cpu_rope */
static void rope(float *x, int n_heads, int D, int pos, float theta) {
    const int half = D / 2;
    for (int i = 0; i < half; i++) {
        const double ang = (double)pos * pow((double)theta, -2.0 * i / D);
        const float c = (float)cos(ang), s = (float)sin(ang);
        for (int h = 0; h < n_heads; h++) {
            float *x0 = x + (size_t)h * D, *x1 = x0 + half;
            const float a0 = x0[i], a1 = x1[i];
            x0[i] = a0 * c - a1 * s;
            x1[i] = a1 * c + a0 * s;
        }
    }
}

mt_status mt_kv_step(mt_kv_model *kv, int32_t tok, float *logits) {
    const mt_param_layout *pl = &kv->pl;
    const mt_param_index *ix = &pl->idx;
    const int C = pl->C, H = pl->H, KV = pl->KV, D = pl->D, F = pl->F, T = pl->T, pos = kv->n_past;
    const int group = H / KV, kvd = KV * D;
    if (pos >= T) return mt_errorf(MT_ERR_CONFIG, "generate: the KV cache is full (%d positions)", T);
    if (tok < 0 || tok >= pl->V) return mt_errorf(MT_ERR_DATA, "generate: token id %d outside [0, %d)", tok, pl->V);
    if (ix->wpe >= 0 && pos >= pl->max_pos)
        return mt_errorf(MT_ERR_CONFIG, "generate: position %d past model.max_position %d", pos, pl->max_pos);
    float *x = kv->x, *x1 = kv->x1, *y = kv->y, *qkv = kv->qkv, *att = kv->att, *h = kv->h, *g = kv->g, *sc = kv->sc;
    const float *e = Wt(kv, ix->wte, 0) + (size_t)tok * C;
    const float *p = ix->wpe >= 0 ? Wt(kv, ix->wpe, 0) + (size_t)pos * C : NULL;
    for (int i = 0; i < C; i++) x[i] = e[i] + (p ? p[i] : 0.0f);
    const float scale = 1.0f / sqrtf((float)D);
    for (int l = 0; l < pl->L; l++) {
        norm(kv, x1, x, Wt(kv, ix->ln1_w, l), Wt(kv, ix->ln1_b, l));
        matvec(qkv, Wt(kv, ix->qkv_w, l), Wt(kv, ix->qkv_b, l), x1, pl->qkv_rows, C);
        if (pl->spec.rope) rope(qkv, H + KV, D, pos, pl->spec.rope_theta); /* q heads then k heads */
        float *kl = kv->kc + (size_t)l * T * kvd, *vl = kv->vc + (size_t)l * T * kvd;
        memcpy(kl + (size_t)pos * kvd, qkv + (size_t)H * D, (size_t)kvd * sizeof(float));
        memcpy(vl + (size_t)pos * kvd, qkv + (size_t)(H + KV) * D, (size_t)kvd * sizeof(float));
        for (int hh = 0; hh < H; hh++) {
            const float *q = qkv + (size_t)hh * D;
            const int kh = hh / group;
            float mx = -INFINITY;
            for (int j = 0; j <= pos; j++) {
                const float *k = kl + (size_t)j * kvd + (size_t)kh * D;
                double d = 0;
                for (int i = 0; i < D; i++) d += (double)q[i] * k[i];
                sc[j] = (float)d * scale;
                if (sc[j] > mx) mx = sc[j];
            }
            double sum = 0;
            for (int j = 0; j <= pos; j++) {
                sc[j] = expf(sc[j] - mx);
                sum += sc[j];
            }
            const float inv = (float)(1.0 / sum);
            float *o = att + (size_t)hh * D;
            for (int i = 0; i < D; i++) o[i] = 0.0f;
            for (int j = 0; j <= pos; j++) {
                const float *v = vl + (size_t)j * kvd + (size_t)kh * D;
                const float pj = sc[j] * inv;
                for (int i = 0; i < D; i++) o[i] += pj * v[i];
            }
        }
        matvec(y, Wt(kv, ix->proj_w, l), Wt(kv, ix->proj_b, l), att, C, H * D);
        for (int i = 0; i < C; i++) x[i] += y[i]; /* xm */
        norm(kv, x1, x, Wt(kv, ix->ln2_w, l), Wt(kv, ix->ln2_b, l));
        matvec(h, Wt(kv, ix->fc_w, l), Wt(kv, ix->fc_b, l), x1, pl->fc_rows, C);
        if (pl->spec.mlp == MT_MLP_SWIGLU) {
            for (int j = 0; j < F; j++) {
                const float a = h[j];
                g[j] = a / (1.0f + expf(-a)) * h[F + j];
            }
        } else {
            for (int j = 0; j < F; j++) {
                const float a = h[j], u = 0.7978845608028654f * (a + 0.044715f * a * a * a);
                g[j] = a / (1.0f + expf(-2.0f * u)); /* a * sigmoid(2u) = a * 0.5 (1 + tanh u) */
            }
        }
        matvec(y, Wt(kv, ix->fcproj_w, l), Wt(kv, ix->fcproj_b, l), g, C, F);
        for (int i = 0; i < C; i++) x[i] += y[i];
    }
    kv->n_past = pos + 1;
    if (!logits) return MT_OK;
    norm(kv, x1, x, Wt(kv, ix->lnf_w, 0), Wt(kv, ix->lnf_b, 0));
    matvec(logits, Wt(kv, kv->wout, 0), NULL, x1, kv->V, C);
    return MT_OK;
}
