/* test_hf_export_semantics.c — the Hugging Face export mapping (core/ckpt/hf_export.h) keeps the
 * model's meaning: a small mtrain model (gpt; llama with GQA, untied; llama with biases; llama with q / k / v
 * biases alone, Qwen2ForCausalLM; llama with Llama 3.x's
 * RoPE scaling, and with linear position interpolation, config.json's rope_scaling) with random
 * weights everywhere (padding rows included) runs its forward on mtrain's CPU backend; its weights
 * go through the mapping, and a reference forward written from transformers' modeling code (GPT2:
 * Conv1D x W + b, gelu_new or relu2 (squared ReLU); Llama: x W^T, rotate_half RoPE, repeat_kv, silu(gate) * up,
 * RMSNorm)
 * on the mapped tensors alone gives the same loss. Negative controls (gate/up swapped, c_proj not
 * transposed, interleaved RoPE, gelu_new for relu2, RoPE without its scaling) must change it, so the comparison can fail. The mapping's names,
 * shapes and values, and the whole export from a save, are checked by test_hf_export.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/ckpt/hf_export.h"
#include "core/rng.h"
#include "test/test.h"
#include "test/unit/tiny_model.h"
#include "train/model.h"

typedef struct {
    const mt_hf_tensor *plan;
    float **data;
    int n;
} hf_state;

static const float *W(const hf_state *s, const char *fmt, int layer) {
    char name[MT_HF_NAME_MAX];
    snprintf(name, sizeof name, fmt, layer);
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->plan[i].name, name)) return s->data[i];
    fprintf(stderr, "reference: no tensor %s\n", name);
    exit(1);
}
static const float *Wopt(const hf_state *s, const char *fmt, int layer) {
    char name[MT_HF_NAME_MAX];
    snprintf(name, sizeof name, fmt, layer);
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->plan[i].name, name)) return s->data[i];
    return NULL;
}

/* y[o] = sum_i x[i] w[i][o] + b[o]: transformers' Conv1D, weight (in, out) */
static void conv1d(const double *x, const float *w, const float *b, int in, int out, double *y) {
    for (int o = 0; o < out; o++) {
        double a = b ? b[o] : 0.0;
        for (int i = 0; i < in; i++) a += x[i] * w[(size_t)i * out + o];
        y[o] = a;
    }
}
/* y[o] = sum_i w[o][i] x[i] + b[o]: nn.Linear, weight (out, in) */
static void linear(const double *x, const float *w, const float *b, int in, int out, double *y) {
    for (int o = 0; o < out; o++) {
        double a = b ? b[o] : 0.0;
        for (int i = 0; i < in; i++) a += w[(size_t)o * in + i] * x[i];
        y[o] = a;
    }
}
static void layer_norm(const double *x, const float *w, const float *b, int C, double eps, double *y) {
    double mu = 0, var = 0;
    for (int i = 0; i < C; i++) mu += x[i];
    mu /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mu) * (x[i] - mu);
    var /= C;
    for (int i = 0; i < C; i++) y[i] = (x[i] - mu) / sqrt(var + eps) * w[i] + (b ? b[i] : 0.0);
}
static void rms_norm(const double *x, const float *w, int C, double eps, double *y) {
    double ms = 0;
    for (int i = 0; i < C; i++) ms += x[i] * x[i];
    const double s = 1.0 / sqrt(ms / C + eps);
    for (int i = 0; i < C; i++) y[i] = w[i] * (x[i] * s);
}

typedef struct {
    int swap_gate_up, untransposed_proj, interleaved_rope, gelu_for_relu2, unscaled_rope;
} controls;

/* causal attention of T rows; q (T, H*D), k / v (T, KV*D): query head h reads kv head h / (H / KV) */
static void attention(const double *q, const double *k, const double *v, int T, int H, int KV, int D, double *out) {
    const int rep = H / KV;
    double *p = malloc((size_t)T * sizeof *p);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int g = h / rep;
            double mx = -INFINITY, sum = 0;
            for (int s = 0; s <= t; s++) {
                double a = 0;
                for (int d = 0; d < D; d++) a += q[(size_t)t * H * D + h * D + d] * k[(size_t)s * KV * D + g * D + d];
                p[s] = a / sqrt((double)D);
                if (p[s] > mx) mx = p[s];
            }
            for (int s = 0; s <= t; s++) sum += p[s] = exp(p[s] - mx);
            for (int d = 0; d < D; d++) {
                double a = 0;
                for (int s = 0; s <= t; s++) a += p[s] / sum * v[(size_t)s * KV * D + g * D + d];
                out[(size_t)t * H * D + h * D + d] = a;
            }
        }
    free(p);
}

/* transformers' RoPE frequencies as config.json's rope_scaling selects them (modeling_rope_utils.py):
 * _compute_default_rope_parameters, base^(-2i/D); "linear": divided by factor; "llama3"
 * (_compute_llama3_parameters): wavelen = 2 pi / f, kept where wavelen < orig / high_freq_factor,
 * divided by factor where wavelen > orig / low_freq_factor, else smoothed (1 - s) f / factor + s f with
 * s = (orig / wavelen - low) / (high - low). `unscaled` (a control) ignores rope_scaling. */
static double rope_freq(const mt_hf_model *m, int i, int D, int unscaled) {
    const double f = pow(m->rope_theta, -2.0 * i / D);
    if (unscaled) return f;
    if (m->rope_llama3) {
        const double wavelen = 2.0 * M_PI / f, orig = m->rope_orig_max;
        if (wavelen < orig / m->rope_high) return f;
        if (wavelen > orig / m->rope_low) return f / m->rope_factor;
        const double sm = (orig / wavelen - m->rope_low) / (m->rope_high - m->rope_low);
        return (1.0 - sm) * f / m->rope_factor + sm * f;
    }
    return m->rope_linear > 0 && m->rope_linear != 1.0f ? f / m->rope_linear : f;
}

/* transformers' apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, emb = cat(freqs, freqs) */
static void rope(double *x, int n_heads, int D, int pos, const mt_hf_model *m, int interleaved, int unscaled) {
    const double theta = m->rope_theta;
    const int half = D / 2;
    for (int h = 0; h < n_heads; h++) {
        double *y = x + (size_t)h * D, r[64], c[64], s[64];
        for (int i = 0; i < D; i++) {
            const double f = rope_freq(m, i % half, D, unscaled);
            c[i] = cos(pos * f);
            s[i] = sin(pos * f);
            r[i] = i < half ? -y[i + half] : y[i - half]; /* rotate_half */
        }
        if (interleaved) { /* the GPT-J / Meta convention, a control: must not match */
            for (int i = 0; i < half; i++) {
                const double a = y[2 * i], b = y[2 * i + 1], cc = cos(pos * pow(theta, -2.0 * i / D)),
                             ss = sin(pos * pow(theta, -2.0 * i / D));
                y[2 * i] = a * cc - b * ss;
                y[2 * i + 1] = b * cc + a * ss;
            }
            continue;
        }
        for (int i = 0; i < D; i++) y[i] = y[i] * c[i] + r[i] * s[i];
    }
}

static double gelu_new(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double silu(double x) { return x / (1.0 + exp(-x)); }
/* transformers' ReLUSquaredActivation (activation_function "relu2"): square(relu(x)) */
static double relu2(double x) { return x > 0 ? x * x : 0.0; }

/* mean token loss of B rows of T+1 tokens through the HF model in s */
static double hf_loss(const hf_state *s, const mt_hf_model *m, const int32_t *tokens, int B, int T, controls ctl) {
    const int C = m->C, H = m->H, KV = m->KV, D = m->D, F = m->F, V = m->V, Q = H * D, K = KV * D;
    const int gpt = m->arch == MT_ARCH_GPT;
    double *x = calloc((size_t)T * C, 8), *a = calloc((size_t)C, 8), *q = calloc((size_t)T * 3 * Q, 8);
    double *k = calloc((size_t)T * Q, 8), *v = calloc((size_t)T * Q, 8), *att = calloc((size_t)T * Q, 8);
    double *o = calloc((size_t)C, 8), *f = calloc((size_t)2 * F, 8), *g = calloc((size_t)F, 8);
    double *logit = calloc((size_t)V, 8), loss = 0;
    for (int b = 0; b < B; b++) {
        const int32_t *tk = tokens + (size_t)b * (T + 1);
        const float *emb = W(s, gpt ? "transformer.wte.weight" : "model.embed_tokens.weight", 0);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++)
                x[(size_t)t * C + i] =
                    emb[(size_t)tk[t] * C + i] + (gpt ? W(s, "transformer.wpe.weight", 0)[(size_t)t * C + i] : 0.0);
        for (int l = 0; l < m->L; l++) {
            for (int t = 0; t < T; t++) {
                double *xt = x + (size_t)t * C;
                if (gpt) {
                    layer_norm(xt, W(s, "transformer.h.%d.ln_1.weight", l), W(s, "transformer.h.%d.ln_1.bias", l), C,
                               m->norm_eps, a);
                    double qkv[3 * 64];
                    conv1d(a, W(s, "transformer.h.%d.attn.c_attn.weight", l),
                           W(s, "transformer.h.%d.attn.c_attn.bias", l), C, 3 * C, qkv);
                    memcpy(q + (size_t)t * Q, qkv, (size_t)Q * 8); /* split(n_embd): q, k, v */
                    memcpy(k + (size_t)t * K, qkv + Q, (size_t)K * 8);
                    memcpy(v + (size_t)t * K, qkv + 2 * Q, (size_t)K * 8);
                } else {
                    rms_norm(xt, W(s, "model.layers.%d.input_layernorm.weight", l), C, m->norm_eps, a);
                    linear(a, W(s, "model.layers.%d.self_attn.q_proj.weight", l),
                           Wopt(s, "model.layers.%d.self_attn.q_proj.bias", l), C, Q, q + (size_t)t * Q);
                    linear(a, W(s, "model.layers.%d.self_attn.k_proj.weight", l),
                           Wopt(s, "model.layers.%d.self_attn.k_proj.bias", l), C, K, k + (size_t)t * K);
                    linear(a, W(s, "model.layers.%d.self_attn.v_proj.weight", l),
                           Wopt(s, "model.layers.%d.self_attn.v_proj.bias", l), C, K, v + (size_t)t * K);
                    rope(q + (size_t)t * Q, H, D, t, m, ctl.interleaved_rope, ctl.unscaled_rope);
                    rope(k + (size_t)t * K, KV, D, t, m, ctl.interleaved_rope, ctl.unscaled_rope);
                }
            }
            attention(q, k, v, T, H, KV, D, att);
            for (int t = 0; t < T; t++) {
                double *xt = x + (size_t)t * C;
                if (gpt) {
                    const float *pw = W(s, "transformer.h.%d.attn.c_proj.weight", l);
                    if (ctl.untransposed_proj)
                        linear(att + (size_t)t * Q, pw, W(s, "transformer.h.%d.attn.c_proj.bias", l), Q, C, o);
                    else
                        conv1d(att + (size_t)t * Q, pw, W(s, "transformer.h.%d.attn.c_proj.bias", l), Q, C, o);
                    for (int i = 0; i < C; i++) xt[i] += o[i];
                    layer_norm(xt, W(s, "transformer.h.%d.ln_2.weight", l), W(s, "transformer.h.%d.ln_2.bias", l), C,
                               m->norm_eps, a);
                    conv1d(a, W(s, "transformer.h.%d.mlp.c_fc.weight", l), W(s, "transformer.h.%d.mlp.c_fc.bias", l), C,
                           F, f);
                    for (int i = 0; i < F; i++)
                        g[i] = m->squared_relu && !ctl.gelu_for_relu2 ? relu2(f[i]) : gelu_new(f[i]);
                    conv1d(g, W(s, "transformer.h.%d.mlp.c_proj.weight", l),
                           W(s, "transformer.h.%d.mlp.c_proj.bias", l), F, C, o);
                } else {
                    linear(att + (size_t)t * Q, W(s, "model.layers.%d.self_attn.o_proj.weight", l),
                           Wopt(s, "model.layers.%d.self_attn.o_proj.bias", l), Q, C, o);
                    for (int i = 0; i < C; i++) xt[i] += o[i];
                    rms_norm(xt, W(s, "model.layers.%d.post_attention_layernorm.weight", l), C, m->norm_eps, a);
                    const char *gn = ctl.swap_gate_up ? "model.layers.%d.mlp.up_proj" : "model.layers.%d.mlp.gate_proj";
                    const char *un = ctl.swap_gate_up ? "model.layers.%d.mlp.gate_proj" : "model.layers.%d.mlp.up_proj";
                    char wn[96], bn[96];
                    snprintf(wn, sizeof wn, "%s.weight", gn);
                    snprintf(bn, sizeof bn, "%s.bias", gn);
                    linear(a, W(s, wn, l), Wopt(s, bn, l), C, F, f);
                    snprintf(wn, sizeof wn, "%s.weight", un);
                    snprintf(bn, sizeof bn, "%s.bias", un);
                    linear(a, W(s, wn, l), Wopt(s, bn, l), C, F, f + F);
                    for (int i = 0; i < F; i++) g[i] = silu(f[i]) * f[F + i];
                    linear(g, W(s, "model.layers.%d.mlp.down_proj.weight", l),
                           Wopt(s, "model.layers.%d.mlp.down_proj.bias", l), F, C, o);
                }
                for (int i = 0; i < C; i++) xt[i] += o[i];
            }
        }
        for (int t = 0; t < T; t++) {
            if (gpt)
                layer_norm(x + (size_t)t * C, W(s, "transformer.ln_f.weight", 0), W(s, "transformer.ln_f.bias", 0), C,
                           m->norm_eps, a);
            else
                rms_norm(x + (size_t)t * C, W(s, "model.norm.weight", 0), C, m->norm_eps, a);
            const float *head = m->tied ? emb : W(s, "lm_head.weight", 0);
            linear(a, head, NULL, C, V, logit);
            double mx = -INFINITY, sum = 0;
            for (int i = 0; i < V; i++) mx = logit[i] > mx ? logit[i] : mx;
            for (int i = 0; i < V; i++) sum += exp(logit[i] - mx);
            loss += log(sum) + mx - logit[tk[t + 1]];
        }
    }
    free(x), free(a), free(q), free(k), free(v), free(att), free(o), free(f), free(g), free(logit);
    return loss / (B * T);
}

/* bias: 0 none, 1 on every linear layer (model.bias), 2 on q / k / v alone (model.qkv_bias, Qwen2); act: NULL,
 * or the model.activation to set (gpt's squared_relu exports as GPT-2's "relu2"); scaling (llama):
 * 1 Llama 3.x's RoPE scaling, 2 linear position interpolation */
static void check_semantics_scaled(const char *arch, int bias, const char *act, int scaling) {
    static mt_recipe r;
    const int B = 2, T = 7, V = 37;
    tiny_recipe(&r, arch, T);
    if (act) CHECK(mt_recipe_set(&r, "model.activation", act, "test") == MT_OK);
    CHECK(mt_recipe_set(&r, "model.norm_eps", "1e-5", "test") == MT_OK);
    const int llama = !strcmp(arch, "llama");
    if (llama) {
        CHECK(mt_recipe_set(&r, "model.kv_heads", "2", "test") == MT_OK);
        CHECK(mt_recipe_set(&r, "model.ffn_hidden", "24", "test") == MT_OK);
        CHECK(mt_recipe_set(&r, "model.rope_theta", "100", "test") == MT_OK); /* large angles at 7 positions */
        if (bias == 1) CHECK(mt_recipe_set(&r, "model.bias", "true", "test") == MT_OK);
        /* an original context of 8 positions puts the tiny head's 2 frequencies (wavelengths 6.3 and 63) in
           the blended and the divided bands of the scaling */
        if (scaling == 1) {
            CHECK(mt_recipe_set(&r, "model.rope_scaling", "true", "test") == MT_OK);
            CHECK(mt_recipe_set(&r, "model.rope_scaling_factor", "4", "test") == MT_OK);
            CHECK(mt_recipe_set(&r, "model.rope_original_max_position", "8", "test") == MT_OK);
        } else if (scaling == 2) {
            CHECK(mt_recipe_set(&r, "model.rotary_interpolation", "3", "test") == MT_OK);
        }
        if (bias == 2) CHECK(mt_recipe_set(&r, "model.qkv_bias", "true", "test") == MT_OK);
    }
    mt_status st = tiny_batch_validate(&r, B);
    mt_backend be;
    mt_model m;
    if ((st = tiny_model_open(&m, &be, &r, B)) != MT_OK) return;
    /* random values everywhere (norm weights around 1), the padding rows included */
    const size_t n = m.pl.n_elems;
    float *p = calloc(n, 4);
    for (int ti = 0; ti < m.pl.n_tensors; ti++) {
        const mt_param_tensor *t = &m.pl.t[ti];
        const int norm = !strcmp(t->name, "ln1_w") || !strcmp(t->name, "ln2_w") || !strcmp(t->name, "lnf_w");
        for (size_t i = 0; i < t->n; i++)
            p[t->offset + i] = (norm ? 1.0f : 0.0f) + 0.3f * (float)mt_rng_normal(77, (uint64_t)ti, i);
    }
    be.i->copy_h2d(&be, m.params, p, n * 4);
    int32_t tokens[2 * 8];
    for (int i = 0; i < B * (T + 1); i++) tokens[i] = (int32_t)(mt_rng_u64(5, 1, i) % V);
    float loss_sum = 0, gsq = 0;
    CHECK(mt_model_zero_grads(&m) == MT_OK);
    st = mt_model_step_micro(&m, tokens, 1.0f / (B * T), 0);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    CHECK(mt_model_read_scalars(&m, &loss_sum, &gsq) == MT_OK);
    const double mt_loss = loss_sum / (B * T);
    /* the mapping, from the model's (whole, tp 1) tensors */
    mt_hf_model hm;
    st = mt_hf_model_from_recipe(&r, &hm);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    const int np = mt_hf_plan(&hm, NULL, 0);
    mt_hf_tensor *plan = calloc((size_t)np, sizeof *plan);
    float **data = calloc((size_t)np, sizeof *data);
    mt_hf_plan(&hm, plan, np);
    int srcs_ok = 1;
    for (int i = 0; i < np; i++) {
        int ti = -1;
        for (int k = 0; k < m.pl.n_tensors; k++)
            if (!strcmp(m.pl.t[k].name, plan[i].src)) ti = k;
        int64_t sl, sr, sc;
        srcs_ok &= ti >= 0 && mt_hf_source_shape(&hm, plan[i].src, &sl, &sr, &sc) && sl == m.pl.t[ti].n_layers &&
                   sc == m.pl.t[ti].full_cols && sr <= m.pl.t[ti].full_rows;
        if (ti < 0) continue;
        const mt_param_tensor *t = &m.pl.t[ti];
        data[i] = malloc((size_t)plan[i].nr * plan[i].nc * 4);
        mt_hf_extract(&plan[i], p + t->offset + (size_t)plan[i].layer * t->rows * t->cols, t->cols, data[i]);
    }
    CHECKF(srcs_ok, "%s: a source tensor of the plan is missing from the model or of another shape", arch);
    for (int k = 0; k < m.pl.n_tensors; k++) { /* every model tensor is exported */
        int used = 0;
        for (int i = 0; i < np; i++) used |= !strcmp(m.pl.t[k].name, plan[i].src);
        CHECKF(used, "%s: model tensor %s is not exported", arch, m.pl.t[k].name);
    }
    const hf_state s = {plan, data, np};
    const double ref = hf_loss(&s, &hm, tokens, B, T, (controls){0, 0, 0, 0, 0});
    printf("%s%s%s%s%s: mtrain loss %.7f, transformers-convention reference %.7f\n", arch,
           bias == 2 ? " (q / k / v biases: Qwen2)" : bias ? " (biases)" : "",
           act ? " " : "", act ? act : "", scaling == 1 ? " (rope_scaling llama3)" : scaling == 2 ? " (rope_scaling linear)" : "",
           mt_loss, ref);
    CHECK_NEAR(mt_loss, ref, 2e-5, 1e-5);
    /* the comparison can fail: each control breaks one convention */
    const controls ctl[] = {{.swap_gate_up = 1}, {.interleaved_rope = 1}, {.untransposed_proj = 1},
                            {.gelu_for_relu2 = 1}, {.unscaled_rope = 1}};
    for (int c = 0; c < 5; c++) {
        if (c == 4 ? !scaling : llama ? c >= 2 : c < 2 || (c == 3 && !hm.squared_relu)) continue;
        const double bad = hf_loss(&s, &hm, tokens, B, T, ctl[c]);
        printf("%s control %d: %.7f\n", arch, c, bad);
        CHECKF(fabs(bad - ref) > 1e-3, "%s control %d does not change the loss (%.7f vs %.7f)", arch, c, bad, ref);
    }
    for (int i = 0; i < np; i++) free(data[i]);
    free(data);
    free(plan);
    free(p);
    mt_model_free(&m);
    mt_backend_destroy(&be);
}

static void check_semantics(const char *arch, int bias, const char *act) { check_semantics_scaled(arch, bias, act, 0); }

int main(void) {
    check_semantics_scaled("llama", 0, NULL, 1);
    check_semantics_scaled("llama", 0, NULL, 2);
    check_semantics("gpt", 0, NULL);
    check_semantics("gpt", 0, "squared_relu");
    check_semantics("llama", 0, NULL);
    check_semantics("llama", 1, NULL);
    check_semantics("llama", 2, NULL); /* q / k / v biases alone */
    TEST_MAIN_END();
}
