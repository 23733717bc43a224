/* test_hf_export.c — the Hugging Face export mapping (core/ckpt/hf_export.h).
 * 1. Pure mapping on arrays of known values (value = f(layer, row, col)): every output name and
 *    shape, GPT-2's Conv1D transposes, Llama's q/k/v row split with grouped-query attention,
 *    gate/up halves, the bias splits, vocabulary padding dropped; Mixtral's router and experts;
 *    bf16 rounding; sharding; sizes; config JSON; recipes transformers cannot express, named by key.
 * 2. A save written here by hand (bf16 `weight` pieces cut at flat ranges, fp32 `master` pieces
 *    cut by rows, as a bf16 run saves them): ckpt_global.h reads both kinds back exactly, whole and
 *    by layer ranges; the whole export (mt_hf_export) writes the master values, not the bf16
 *    weights; pieces that cover elements twice are an error that leaves no output folder.
 * That the mapped tensors give the model's own loss under transformers' conventions is checked by
 * test_hf_export_semantics.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/ckpt/ckpt_files.h"
#include "core/ckpt/ckpt_global.h"
#include "core/ckpt/hf_export.h"
#include "core/ckpt/safetensors.h"
#include "core/file_read.h"
#include "core/json_tree.h"
#include "core/rng.h"
#include "test/test.h"
#include "train/model.h"

/* ---------- 1. the pure mapping ---------- */

static mt_hf_model small(mt_arch arch) {
    mt_hf_model m = {.arch = arch, .L = 3, .C = 12, .H = 4, .KV = arch == MT_ARCH_LLAMA ? 2 : 4, .D = 3, .F = 20,
                     .V = 37, .max_pos = 9, .tied = arch == MT_ARCH_GPT, .bias = arch == MT_ARCH_GPT,
                     .norm_eps = 1e-5f, .rope_theta = 10000.0f, .init_std = 0.02f, .bos = 36, .eos = 36};
    return m;
}

static float val(int l, int r, int c) { return (float)(l * 1000000 + r * 1000 + c); }

/* a source tensor (layers, rows, cols) of known values */
static float *source(int64_t layers, int64_t rows, int64_t cols) {
    float *s = malloc((size_t)(layers * rows * cols) * sizeof *s);
    for (int64_t l = 0; l < layers; l++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) s[(l * rows + r) * cols + c] = val((int)l, (int)r, (int)c);
    return s;
}

static const mt_hf_tensor *find(const mt_hf_tensor *p, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(p[i].name, name)) return &p[i];
    return NULL;
}

/* extracts t from a known-values source whose rows are padded by `pad` (vocab tensors) */
static float *extract(const mt_hf_model *m, const mt_hf_tensor *t, int pad) {
    int64_t l, r, c;
    if (!mt_hf_source_shape(m, t->src, &l, &r, &c)) return NULL;
    r += pad;
    float *s = source(l, r, c), *o = malloc((size_t)t->nr * t->nc * sizeof *o);
    mt_hf_extract(t, s + (size_t)t->layer * r * c, c, o);
    free(s);
    return o;
}

/* out[i][j] of a 2-D HF tensor == source value at (layer, row(i, j), col(i, j)) */
#define CHECK_BLOCK(m, plan, n, name, pad, ROW, COL)                                                       \
    do {                                                                                                   \
        const mt_hf_tensor *t_ = find(plan, n, name);                                                     \
        CHECKF(t_ != NULL, "%s missing", name);                                                            \
        if (!t_) break;                                                                                    \
        float *o_ = extract(m, t_, pad);                                                                   \
        const int64_t R_ = t_->n_dims == 2 ? t_->shape[0] : 1, K_ = t_->n_dims == 2 ? t_->shape[1] : t_->shape[0]; \
        int bad_ = 0;                                                                                      \
        for (int64_t i = 0; i < R_; i++)                                                                   \
            for (int64_t j = 0; j < K_; j++)                                                               \
                bad_ += o_[i * K_ + j] != val(t_->layer, (int)(ROW), (int)(COL));                          \
        CHECKF(bad_ == 0, "%s: %d of %lld values are not the expected source elements", name, bad_,       \
               (long long)(R_ * K_));                                                                      \
        free(o_);                                                                                          \
    } while (0)

static void check_shape(const mt_hf_tensor *p, int n, const char *name, int n_dims, int64_t a, int64_t b) {
    const mt_hf_tensor *t = find(p, n, name);
    CHECKF(t != NULL, "%s missing", name);
    if (!t) return;
    CHECKF(t->n_dims == n_dims && t->shape[0] == a && (n_dims == 1 || t->shape[1] == b), "%s: shape (%lld, %lld)",
           name, (long long)t->shape[0], n_dims == 2 ? (long long)t->shape[1] : -1LL);
}

static void test_gpt_mapping(void) {
    const mt_hf_model m = small(MT_ARCH_GPT);
    const int n = mt_hf_plan(&m, NULL, 0);
    CHECK(n == 2 + 12 * m.L + 2);
    mt_hf_tensor *p = calloc((size_t)n, sizeof *p);
    CHECK(mt_hf_plan(&m, p, n) == n);
    for (int i = 0; i < n; i++) {
        CHECKF(find(p, i, p[i].name) == NULL, "%s listed twice", p[i].name);
        CHECKF(strncmp(p[i].name, "lm_head", 7), "tied GPT-2 has no %s", p[i].name);
    }
    const int C = 12, F = 20, V = 37;
    check_shape(p, n, "transformer.wte.weight", 2, V, C);
    check_shape(p, n, "transformer.wpe.weight", 2, 9, C);
    check_shape(p, n, "transformer.h.2.ln_1.weight", 1, C, 0);
    check_shape(p, n, "transformer.h.2.attn.c_attn.weight", 2, C, 3 * C);
    check_shape(p, n, "transformer.h.2.attn.c_attn.bias", 1, 3 * C, 0);
    check_shape(p, n, "transformer.h.0.attn.c_proj.weight", 2, C, C);
    check_shape(p, n, "transformer.h.1.mlp.c_fc.weight", 2, C, F);
    check_shape(p, n, "transformer.h.1.mlp.c_fc.bias", 1, F, 0);
    check_shape(p, n, "transformer.h.1.mlp.c_proj.weight", 2, F, C);
    check_shape(p, n, "transformer.h.1.mlp.c_proj.bias", 1, C, 0);
    check_shape(p, n, "transformer.ln_f.bias", 1, C, 0);
    CHECK(find(p, n, "transformer.h.3.ln_1.weight") == NULL);
    /* values: wte rows [0, V) of a padded (V + 91)-row source; Conv1D weights are W^T */
    CHECK_BLOCK(&m, p, n, "transformer.wte.weight", 91, i, j);
    CHECK_BLOCK(&m, p, n, "transformer.wpe.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "transformer.h.2.attn.c_attn.weight", 0, j, i);
    CHECK_BLOCK(&m, p, n, "transformer.h.1.attn.c_attn.bias", 0, 0, j);
    CHECK_BLOCK(&m, p, n, "transformer.h.0.attn.c_proj.weight", 0, j, i);
    CHECK_BLOCK(&m, p, n, "transformer.h.2.mlp.c_fc.weight", 0, j, i);
    CHECK_BLOCK(&m, p, n, "transformer.h.2.mlp.c_proj.weight", 0, j, i);
    CHECK_BLOCK(&m, p, n, "transformer.h.1.ln_2.bias", 0, 0, j);
    CHECK_BLOCK(&m, p, n, "transformer.ln_f.weight", 0, 0, j);
    const mt_hf_tensor *t = find(p, n, "transformer.h.2.mlp.c_fc.weight");
    CHECK(t && !strcmp(t->src, "fc_w") && t->layer == 2);
    free(p);
}

static void test_llama_mapping(int bias, int tied) {
    mt_hf_model m = small(MT_ARCH_LLAMA);
    m.bias = bias;
    m.tied = tied;
    const int n = mt_hf_plan(&m, NULL, 0);
    CHECKF(n == 1 + m.L * (bias ? 16 : 9) + 1 + !tied, "%d tensors", n);
    mt_hf_tensor *p = calloc((size_t)n, sizeof *p);
    CHECK(mt_hf_plan(&m, p, n) == n);
    for (int i = 0; i < n; i++) CHECKF(find(p, i, p[i].name) == NULL, "%s listed twice", p[i].name);
    const int C = 12, Q = 12, K = 6, F = 20, V = 37;
    check_shape(p, n, "model.embed_tokens.weight", 2, V, C);
    check_shape(p, n, "model.layers.1.input_layernorm.weight", 1, C, 0);
    check_shape(p, n, "model.layers.1.self_attn.q_proj.weight", 2, Q, C);
    check_shape(p, n, "model.layers.1.self_attn.k_proj.weight", 2, K, C);
    check_shape(p, n, "model.layers.1.self_attn.v_proj.weight", 2, K, C);
    check_shape(p, n, "model.layers.1.self_attn.o_proj.weight", 2, C, Q);
    check_shape(p, n, "model.layers.2.mlp.gate_proj.weight", 2, F, C);
    check_shape(p, n, "model.layers.2.mlp.up_proj.weight", 2, F, C);
    check_shape(p, n, "model.layers.2.mlp.down_proj.weight", 2, C, F);
    check_shape(p, n, "model.norm.weight", 1, C, 0);
    CHECK((find(p, n, "lm_head.weight") != NULL) == !tied);
    CHECK((find(p, n, "model.layers.0.self_attn.k_proj.bias") != NULL) == bias);
    CHECK(find(p, n, "model.wpe.weight") == NULL && find(p, n, "model.layers.0.input_layernorm.bias") == NULL);
    /* q / k / v are the row blocks [Q all heads; K all kv heads; V all kv heads]; gate / up the halves */
    CHECK_BLOCK(&m, p, n, "model.embed_tokens.weight", 91, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.2.self_attn.q_proj.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.2.self_attn.k_proj.weight", 0, Q + i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.2.self_attn.v_proj.weight", 0, Q + K + i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.1.self_attn.o_proj.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.1.mlp.gate_proj.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.1.mlp.up_proj.weight", 0, F + i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.0.mlp.down_proj.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.0.post_attention_layernorm.weight", 0, 0, j);
    if (!tied) CHECK_BLOCK(&m, p, n, "lm_head.weight", 91, i, j);
    if (bias) {
        CHECK_BLOCK(&m, p, n, "model.layers.1.self_attn.q_proj.bias", 0, 0, j);
        CHECK_BLOCK(&m, p, n, "model.layers.1.self_attn.k_proj.bias", 0, 0, Q + j);
        CHECK_BLOCK(&m, p, n, "model.layers.1.self_attn.v_proj.bias", 0, 0, Q + K + j);
        CHECK_BLOCK(&m, p, n, "model.layers.1.self_attn.o_proj.bias", 0, 0, j);
        CHECK_BLOCK(&m, p, n, "model.layers.2.mlp.gate_proj.bias", 0, 0, j);
        CHECK_BLOCK(&m, p, n, "model.layers.2.mlp.up_proj.bias", 0, 0, F + j);
        CHECK_BLOCK(&m, p, n, "model.layers.2.mlp.down_proj.bias", 0, 0, j);
    }
    free(p);
}

static uint16_t bf(float f) {
    uint16_t o;
    mt_hf_convert(&f, 1, MT_BF16, &o);
    return o;
}
static float bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_convert(void) {
    CHECK(bf(1.0f) == 0x3f80);
    CHECK(bf(-2.0f) == 0xc000);
    CHECK(bf(bits(0x3f808000)) == 0x3f80); /* exactly half way, even below: stays */
    CHECK(bf(bits(0x3f818000)) == 0x3f82); /* half way, odd below: up to even */
    CHECK(bf(bits(0x3f808001)) == 0x3f81); /* just above half way: up */
    CHECK(bf(bits(0x3f807fff)) == 0x3f80); /* just below: down */
    CHECK(bf(bits(0xbf818000)) == 0xbf82); /* negative, same rule on the magnitude */
    CHECK(bf(INFINITY) == 0x7f80 && bf(-INFINITY) == 0xff80);
    const uint16_t nan = bf(NAN);
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f));
    float in[3] = {1.5f, -0.25f, 3.0f}, out[3];
    mt_hf_convert(in, 3, MT_F32, out);
    CHECK(!memcmp(in, out, sizeof in));
}

static void test_shards(void) {
    int s[8];
    const uint64_t a[] = {4, 4, 4};
    CHECK(mt_hf_shard_plan(a, 3, 8, s) == 2 && s[0] == 0 && s[1] == 0 && s[2] == 1);
    CHECK(mt_hf_shard_plan(a, 3, 12, s) == 1 && s[2] == 0); /* an exact fit stays in one */
    const uint64_t b[] = {3, 10, 3, 3};                      /* 10 > max: alone */
    CHECK(mt_hf_shard_plan(b, 4, 8, s) == 3 && s[0] == 0 && s[1] == 1 && s[2] == 2 && s[3] == 2);
    const uint64_t c[] = {10, 10};
    CHECK(mt_hf_shard_plan(c, 2, 8, s) == 2 && s[0] == 0 && s[1] == 1);
    CHECK(mt_hf_shard_plan(a, 3, MT_HF_DEFAULT_SHARD_BYTES, s) == 1);
    uint64_t v = 0;
    CHECK(mt_hf_parse_size("5GB", &v) == MT_OK && v == 5000000000ull);
    CHECK(mt_hf_parse_size("2GiB", &v) == MT_OK && v == 2ull << 30);
    CHECK(mt_hf_parse_size("500mb", &v) == MT_OK && v == 500000000ull);
    CHECK(mt_hf_parse_size("64KiB", &v) == MT_OK && v == 65536);
    CHECK(mt_hf_parse_size("1000000", &v) == MT_OK && v == 1000000);
    CHECK(mt_hf_parse_size("0", &v) == MT_ERR_CONFIG);
    CHECK(mt_hf_parse_size("-3MB", &v) == MT_ERR_CONFIG);
    CHECK(mt_hf_parse_size("5XB", &v) == MT_ERR_CONFIG);
    CHECK(mt_hf_parse_size("lots", &v) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "--max-shard-size lots");
}

static char *text_of(mt_status (*fn)(FILE *, const mt_hf_model *, const char *), const mt_hf_model *m,
                     const char *arg) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    CHECK(fn(f, m, arg) == MT_OK);
    fclose(f);
    return buf;
}

static void float_text(float v, const char *want) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    mt_hf_json_float(f, v);
    fclose(f);
    CHECKF(!strcmp(buf, want), "%g written as %s, expected %s", (double)v, buf, want);
    free(buf);
}

static const mt_json_node *get(const mt_json_node *o, const char *k, mt_json_type type) {
    const mt_json_node *x = mt_json_get(o, k);
    CHECKF(x && x->type == type, "config key %s missing or a %s", k, x ? mt_json_type_name(x->type) : "nothing");
    return x;
}

/* m's config.json (float32) parsed into d, its model_type and single architecture checked; the text (free
 * it after mt_json_doc_free) */
static char *config_doc(const mt_hf_model *m, mt_json_doc *d, const char *model_type, const char *arch) {
    char *text = text_of(mt_hf_write_config, m, "float32");
    CHECK(mt_json_doc_parse(d, text, strlen(text), model_type) == MT_OK);
    CHECK(!strcmp(get(d->root, "model_type", MT_JSON_STRING)->str, model_type));
    const mt_json_node *a = get(d->root, "architectures", MT_JSON_ARRAY);
    CHECK(a && a->n_items == 1 && a->items[0].type == MT_JSON_STRING && !strcmp(a->items[0].str, arch));
    return text;
}

static void check_int(const mt_json_node *o, const char *k, int64_t want) {
    const mt_json_node *x = get(o, k, MT_JSON_NUMBER);
    CHECKF(x && x->is_integer && x->integer == want, "config %s: expected %lld", k, (long long)want);
}

static void test_config(void) {
    float_text(1e-5f, "1e-05");
    float_text(1e-6f, "1e-06");
    float_text(0.02f, "0.02");
    float_text(10000.0f, "10000.0");
    float_text(500000.0f, "500000.0");
    mt_hf_model g = small(MT_ARCH_GPT), l = small(MT_ARCH_LLAMA);
    char *gt = text_of(mt_hf_write_config, &g, "float32"), *lt = text_of(mt_hf_write_config, &l, "bfloat16");
    mt_json_doc gd, ld;
    CHECK(mt_json_doc_parse(&gd, gt, strlen(gt), "gpt config") == MT_OK);
    CHECK(mt_json_doc_parse(&ld, lt, strlen(lt), "llama config") == MT_OK);
    const mt_json_node *a = mt_json_get(gd.root, "architectures");
    CHECK(a && a->type == MT_JSON_ARRAY && a->n_items == 1 && !strcmp(a->items[0].str, "GPT2LMHeadModel"));
    CHECK(!strcmp(get(gd.root, "model_type", MT_JSON_STRING)->str, "gpt2"));
    CHECK(!strcmp(get(gd.root, "activation_function", MT_JSON_STRING)->str, "gelu_new"));
    {   /* a squared-ReLU gpt: transformers' "relu2" (ReLUSquaredActivation) */
        mt_hf_model r2 = g;
        r2.squared_relu = 1;
        char *rt = text_of(mt_hf_write_config, &r2, "float32");
        mt_json_doc rd;
        CHECK(mt_json_doc_parse(&rd, rt, strlen(rt), "relu2 config") == MT_OK);
        CHECK(!strcmp(get(rd.root, "activation_function", MT_JSON_STRING)->str, "relu2"));
        mt_json_doc_free(&rd);
        free(rt);
    }
    static const struct { const char *key; int value; } g_ints[] = {
        {"vocab_size", 37}, {"n_positions", 9}, {"n_ctx", 9},   {"n_embd", 12},
        {"n_layer", 3},     {"n_head", 4},      {"n_inner", 20}, {"eos_token_id", 36},
    }, l_ints[] = {
        {"num_key_value_heads", 2}, {"num_attention_heads", 4}, {"intermediate_size", 20},
        {"max_position_embeddings", 9},
    };
    for (size_t k = 0; k < sizeof g_ints / sizeof g_ints[0]; k++) check_int(gd.root, g_ints[k].key, g_ints[k].value);
    CHECK((float)get(gd.root, "layer_norm_epsilon", MT_JSON_NUMBER)->number == 1e-5f);
    CHECK(get(gd.root, "resid_pdrop", MT_JSON_NUMBER)->number == 0.0);
    get(gd.root, "tie_word_embeddings", MT_JSON_TRUE);
    CHECK(!strcmp(get(gd.root, "torch_dtype", MT_JSON_STRING)->str, "float32"));
    a = mt_json_get(ld.root, "architectures");
    CHECK(a && a->n_items == 1 && !strcmp(a->items[0].str, "LlamaForCausalLM"));
    CHECK(!strcmp(get(ld.root, "model_type", MT_JSON_STRING)->str, "llama"));
    CHECK(!strcmp(get(ld.root, "hidden_act", MT_JSON_STRING)->str, "silu"));
    for (size_t k = 0; k < sizeof l_ints / sizeof l_ints[0]; k++) check_int(ld.root, l_ints[k].key, l_ints[k].value);
    CHECK(get(ld.root, "rope_theta", MT_JSON_NUMBER)->number == 10000.0);
    get(ld.root, "tie_word_embeddings", MT_JSON_FALSE);
    get(ld.root, "attention_bias", MT_JSON_FALSE);
    get(ld.root, "mlp_bias", MT_JSON_FALSE);
    CHECK(!strcmp(get(ld.root, "torch_dtype", MT_JSON_STRING)->str, "bfloat16"));
    mt_json_doc_free(&gd);
    mt_json_doc_free(&ld);
    free(gt);
    free(lt);
    char *tt = NULL;
    size_t tn = 0;
    FILE *tf = open_memstream(&tt, &tn);
    CHECK(mt_hf_write_tokenizer_config(tf, &g, "GPT2Tokenizer", "<|endoftext|>") == MT_OK);
    fclose(tf);
    mt_json_doc td;
    CHECK(mt_json_doc_parse(&td, tt, tn, "tokenizer config") == MT_OK);
    CHECK(!strcmp(get(td.root, "tokenizer_class", MT_JSON_STRING)->str, "GPT2Tokenizer"));
    CHECK(!strcmp(get(td.root, "eos_token", MT_JSON_STRING)->str, "<|endoftext|>"));
    CHECK(!strcmp(get(td.root, "bos_token", MT_JSON_STRING)->str, "<|endoftext|>"));
    CHECK(!strcmp(get(td.root, "unk_token", MT_JSON_STRING)->str, "<|endoftext|>"));
    check_int(td.root, "model_max_length", 9);
    mt_json_doc_free(&td);
    free(tt);
}

/* Mixtral: the router's gate (E, C) is router_w's layer; experts.e.w1 / w3 are the halves of
 * expert_fc_w slice l*E + e, w2 is expert_fcproj_w's; no dense MLP tensor; config.json is MixtralConfig */
static void test_mixtral_mapping(void) {
    mt_hf_model m = small(MT_ARCH_LLAMA);
    m.E = 3;
    m.top_k = 2;
    m.aux_coeff = 0.01f;
    const int n = mt_hf_plan(&m, NULL, 0), E = 3, C = 12, F = 20;
    CHECKF(n == 3 + m.L * (7 + 3 * E), "%d tensors", n);
    mt_hf_tensor *p = calloc((size_t)n, sizeof *p);
    CHECK(mt_hf_plan(&m, p, n) == n);
    for (int i = 0; i < n; i++) {
        CHECKF(find(p, i, p[i].name) == NULL, "%s listed twice", p[i].name);
        CHECKF(!strstr(p[i].name, ".mlp."), "a dense MLP tensor %s", p[i].name);
    }
    check_shape(p, n, "model.layers.2.block_sparse_moe.gate.weight", 2, E, C);
    check_shape(p, n, "model.layers.1.block_sparse_moe.experts.2.w1.weight", 2, F, C);
    check_shape(p, n, "model.layers.1.block_sparse_moe.experts.2.w3.weight", 2, F, C);
    check_shape(p, n, "model.layers.1.block_sparse_moe.experts.2.w2.weight", 2, C, F);
    CHECK(find(p, n, "model.layers.0.block_sparse_moe.experts.3.w1.weight") == NULL);
    CHECK_BLOCK(&m, p, n, "model.layers.2.block_sparse_moe.gate.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.1.block_sparse_moe.experts.2.w1.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.1.block_sparse_moe.experts.2.w3.weight", 0, F + i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.2.block_sparse_moe.experts.0.w2.weight", 0, i, j);
    const mt_hf_tensor *t = find(p, n, "model.layers.1.block_sparse_moe.experts.2.w3.weight");
    CHECK(t && !strcmp(t->src, "expert_fc_w") && t->layer == 1 * E + 2);
    int64_t l, r, c;
    CHECK(mt_hf_source_shape(&m, "expert_fcproj_w", &l, &r, &c) && l == m.L * E && r == C && c == F);
    CHECK(!mt_hf_source_shape(&m, "fc_w", &l, &r, &c));
    free(p);
    mt_json_doc d;
    char *text = config_doc(&m, &d, "mixtral", "MixtralForCausalLM");
    check_int(d.root, "num_local_experts", 3);
    check_int(d.root, "num_experts_per_tok", 2);
    get(d.root, "sliding_window", MT_JSON_NULL);
    CHECK(get(d.root, "router_jitter_noise", MT_JSON_NUMBER)->number == 0);
    CHECK(mt_json_get(d.root, "attention_bias") == NULL && mt_json_get(d.root, "mlp_bias") == NULL);
    mt_json_doc_free(&d);
    free(text);
}

/* Qwen2-MoE (gated shared experts): mlp.gate = router_w, mlp.experts.e.gate_proj / up_proj / down_proj = the
 * expert_fc_w halves / expert_fcproj_w of slice l*E + e, mlp.shared_expert.gate_proj / up_proj = the halves of
 * shared_fc_w layer l, down_proj = shared_fcproj_w, mlp.shared_expert_gate = shared_gate_w; q / k / v biases;
 * config.json is Qwen2MoeConfig (norm_topk_prob from the router) */
static void test_qwen2_moe_mapping(void) {
    mt_hf_model m = small(MT_ARCH_LLAMA);
    m.E = 3;
    m.top_k = 2;
    m.Fs = 8;
    m.qkv_bias = 1;
    m.norm_topk = 0;
    const int n = mt_hf_plan(&m, NULL, 0), E = 3, C = 12, F = 20, Fs = 8;
    CHECKF(n == 3 + m.L * (10 + 3 * E + 4), "%d tensors", n);
    mt_hf_tensor *p = calloc((size_t)n, sizeof *p);
    CHECK(mt_hf_plan(&m, p, n) == n);
    for (int i = 0; i < n; i++) {
        CHECKF(find(p, i, p[i].name) == NULL, "%s listed twice", p[i].name);
        CHECKF(!strstr(p[i].name, "block_sparse_moe"), "a Mixtral tensor %s", p[i].name);
    }
    check_shape(p, n, "model.layers.2.mlp.gate.weight", 2, E, C);
    check_shape(p, n, "model.layers.1.mlp.experts.2.up_proj.weight", 2, F, C);
    check_shape(p, n, "model.layers.1.mlp.shared_expert.gate_proj.weight", 2, Fs, C);
    check_shape(p, n, "model.layers.1.mlp.shared_expert.up_proj.weight", 2, Fs, C);
    check_shape(p, n, "model.layers.1.mlp.shared_expert.down_proj.weight", 2, C, Fs);
    check_shape(p, n, "model.layers.0.mlp.shared_expert_gate.weight", 2, 1, C);
    CHECK(find(p, n, "model.layers.0.self_attn.q_proj.bias") != NULL);
    CHECK_BLOCK(&m, p, n, "model.layers.1.mlp.experts.2.up_proj.weight", 0, F + i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.2.mlp.experts.0.down_proj.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.1.mlp.shared_expert.gate_proj.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.1.mlp.shared_expert.up_proj.weight", 0, Fs + i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.2.mlp.shared_expert.down_proj.weight", 0, i, j);
    CHECK_BLOCK(&m, p, n, "model.layers.2.mlp.shared_expert_gate.weight", 0, i, j);
    const mt_hf_tensor *t = find(p, n, "model.layers.1.mlp.shared_expert.up_proj.weight");
    CHECK(t && !strcmp(t->src, "shared_fc_w") && t->layer == 1);
    t = find(p, n, "model.layers.1.mlp.experts.2.gate_proj.weight");
    CHECK(t && !strcmp(t->src, "expert_fc_w") && t->layer == 1 * E + 2);
    int64_t l, r, c;
    CHECK(mt_hf_source_shape(&m, "shared_fc_w", &l, &r, &c) && l == m.L && r == 2 * Fs && c == C);
    CHECK(mt_hf_source_shape(&m, "shared_fcproj_w", &l, &r, &c) && l == m.L && r == C && c == Fs);
    CHECK(mt_hf_source_shape(&m, "shared_gate_w", &l, &r, &c) && l == m.L && r == 1 && c == C);
    free(p);
    mt_json_doc d;
    char *text = config_doc(&m, &d, "qwen2_moe", "Qwen2MoeForCausalLM");
    check_int(d.root, "num_experts", 3);
    check_int(d.root, "num_experts_per_tok", 2);
    check_int(d.root, "moe_intermediate_size", F);
    check_int(d.root, "shared_expert_intermediate_size", Fs);
    check_int(d.root, "decoder_sparse_step", 1);
    get(d.root, "norm_topk_prob", MT_JSON_FALSE);
    get(d.root, "qkv_bias", MT_JSON_TRUE);
    mt_json_doc_free(&d);
    free(text);
}

/* a recipe transformers cannot express (refused): MT_ERR_UNSUPPORTED naming key; else accepted.
 * experts > 0: a mixture-of-experts model (top 2) */
static void check_refused_moe(const char *arch, int experts, const char *key, const char *value, int refused) {
    static mt_recipe r;
    mt_recipe_defaults(&r);
    CHECK(mt_recipe_set(&r, "model.arch", arch, "test") == MT_OK);
    if (experts > 0) {
        char e[16];
        snprintf(e, sizeof e, "%d", experts);
        CHECK(mt_recipe_set(&r, "model.moe.experts", e, "test") == MT_OK);
        CHECK(mt_recipe_set(&r, "model.moe.top_k", "2", "test") == MT_OK);
    }
    const char *dims[][2] = {{"model.layers", "2"}, {"model.hidden", "16"}, {"model.heads", "4"},
                             {"model.seq_length", "8"}, {"model.ffn_hidden", "64"}, {"model.vocab", "37"},
                             {"training.iters", "1"}};
    for (int i = 0; i < 7; i++) CHECK(mt_recipe_set(&r, dims[i][0], dims[i][1], "test") == MT_OK);
    if (key) CHECK(mt_recipe_set(&r, key, value, "test") == MT_OK);
    mt_status vs = mt_recipe_validate(&r, 1);
    CHECKF(vs == MT_OK, "%s", mt_last_error());
    mt_hf_model m;
    mt_status st = mt_hf_model_from_recipe(&r, &m);
    if (!refused) {
        CHECKF(st == MT_OK, "%s %s: %s", arch, key ? key : "", mt_last_error());
        return;
    }
    CHECKF(st == MT_ERR_UNSUPPORTED, "%s %s=%s accepted", arch, key, value);
    if (st != MT_OK) CHECK_STR_CONTAINS(mt_last_error(), key);
    if (st != MT_OK && experts > 0)
        CHECK_STR_CONTAINS(mt_last_error(), r.model.moe.shared_ffn > 0 ? "Qwen2MoeForCausalLM cannot express"
                                                                        : "MixtralForCausalLM cannot express");
}

static void check_refused(const char *arch, const char *key, const char *value, int refused) {
    check_refused_moe(arch, 0, key, value, refused);
}

static void test_refusals(void) {
    check_refused("gpt", NULL, NULL, 0);
    check_refused("llama", NULL, NULL, 0);
    check_refused("llama", "model.bias", "true", 0);          /* attention_bias / mlp_bias: expressible */
    check_refused("llama", "model.tie_embeddings", "true", 0); /* tie_word_embeddings: expressible */
    check_refused("gpt", "model.tie_embeddings", "false", 1);
    check_refused("gpt", "model.bias", "false", 1);
    check_refused("gpt", "model.position", "rope", 1);
    check_refused("gpt", "model.norm", "rmsnorm", 1);
    check_refused("gpt", "model.activation", "swiglu", 1);
    check_refused("gpt", "model.activation", "squared_relu", 0); /* GPT-2's activation_function "relu2" */
    check_refused("llama", "model.activation", "squared_relu", 1); /* Llama's MLP is gated */
    check_refused("gpt", "model.kv_heads", "2", 1);
    check_refused("llama", "model.norm", "layernorm", 1);
    check_refused("llama", "model.activation", "gelu", 1);
    check_refused("llama", "model.position", "learned", 1);
    check_refused("llama", "model.qk_layernorm", "true", 1); /* no q_norm / k_norm in Llama or GPT-2 */
    check_refused("gpt", "model.qk_layernorm", "true", 1);
    check_refused("llama", "model.qk_l2_norm", "true", 1); /* transformers' Llama 4 field: export not implemented */
    check_refused("llama", "model.no_rope_layers", "2", 1);
    check_refused("gpt", "model.mup.enabled", "true", 1); /* muP's softmax scale 1 / head_dim: no field */
    check_refused("gpt", "model.mla.enabled", "true", 1); /* transformers' DeepseekV3 layout: export not implemented */
    check_refused("llama", "model.norm_1p", "true", 0);      /* exported as 1 + w */
    /* Mixtral: the renormalised top-k router, bias-free SwiGLU experts in every layer */
    check_refused_moe("llama", 4, NULL, NULL, 0);
    check_refused_moe("llama", 4, "model.moe.capacity_factor", "1.0", 0); /* a training rule: exported dropless */
    check_refused_moe("llama", 4, "model.tie_embeddings", "true", 0);
    check_refused_moe("llama", 4, "model.moe.pre_softmax", "true", 1);
    check_refused_moe("llama", 4, "model.bias", "true", 1);
    check_refused_moe("llama", 4, "model.moe.layer_freq", "2", 1);       /* layer 1 of 2 dense */
    check_refused_moe("llama", 4, "model.moe.layer_pattern", "01", 1);   /* a dense first layer */
    check_refused_moe("llama", 4, "model.moe.layer_pattern", "[1]*2", 0); /* every layer sparse */
    check_refused_moe("llama", 4, "model.moe.ffn_hidden", "32", 1);      /* experts narrower than intermediate_size */
    check_refused_moe("llama", 4, "model.moe.ffn_hidden", "64", 0);
    check_refused_moe("llama", 4, "model.moe.shared_gate", "false", 0); /* no shared experts: Mixtral */
    {   /* shared experts: Qwen2-MoE's, which always gates them; gated, with either router, they export */
        static mt_recipe r;
        mt_hf_model m;
        const char *const kv[][2] = {{"model.arch", "llama"}, {"model.moe.experts", "4"}, {"model.moe.top_k", "2"},
                                     {"model.layers", "2"}, {"model.hidden", "16"}, {"model.heads", "4"},
                                     {"model.seq_length", "8"}, {"model.vocab", "37"}, {"training.iters", "1"},
                                     {"model.ffn_hidden", "64"}, {"model.moe.shared_ffn", "32"},
                                     {"model.qkv_bias", "true"}};
        for (int pass = 0; pass < 3; pass++) {
            mt_recipe_defaults(&r);
            for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
                CHECK(mt_recipe_set(&r, kv[i][0], kv[i][1], "t") == MT_OK);
            if (pass > 0) CHECK(mt_recipe_set(&r, "model.moe.shared_gate", "true", "t") == MT_OK);
            if (pass > 1) CHECK(mt_recipe_set(&r, "model.moe.pre_softmax", "true", "t") == MT_OK);
            CHECKF(mt_recipe_validate(&r, 1) == MT_OK, "%s", mt_last_error());
            const mt_status st = mt_hf_model_from_recipe(&r, &m);
            if (pass == 0) {
                CHECK(st == MT_ERR_UNSUPPORTED);
                CHECK_STR_CONTAINS(mt_last_error(), "model.moe.shared_gate");
                CHECK_STR_CONTAINS(mt_last_error(), "Qwen2MoeForCausalLM cannot express");
            } else {
                CHECKF(st == MT_OK, "%s", mt_last_error());
                CHECK(m.Fs == 32 && m.qkv_bias && m.norm_topk == (pass == 1));
            }
        }
    }
    check_refused_moe("llama", 4, "model.activation", "gelu", 1);
    check_refused_moe("llama", 4, "model.qk_layernorm", "true", 1);
    check_refused_moe("gpt", 4, "model.arch", "gpt", 1);
}

/* zero-centred gamma: the norm weights (and only they) export as 1 + w and import back to w, exactly
 * for these small integers */
static void test_norm_1p(void) {
    for (int arch = 0; arch < 2; arch++) {
        mt_hf_model m = small(arch ? MT_ARCH_LLAMA : MT_ARCH_GPT);
        m.norm_1p = 1;
        const int n = mt_hf_plan(&m, NULL, 0);
        mt_hf_tensor *p = calloc((size_t)n, sizeof *p);
        mt_hf_plan(&m, p, n);
        int n_offset = 0;
        for (int i = 0; i < n; i++) {
            const int norm_w = !strcmp(p[i].src, "ln1_w") || !strcmp(p[i].src, "ln2_w") || !strcmp(p[i].src, "lnf_w");
            CHECKF(p[i].offset == (norm_w ? 1.0f : 0.0f), "%s: offset %g", p[i].name, p[i].offset);
            n_offset += norm_w;
            if (!norm_w) continue;
            float in[12], out[12], back[12];
            uint8_t seen[12] = {0};
            uint64_t twice = 0;
            for (int c = 0; c < m.C; c++) in[c] = (float)(c - 6) / 8;
            mt_hf_extract(&p[i], in, m.C, out);
            for (int c = 0; c < m.C; c++) CHECK(out[c] == 1.0f + in[c]);
            mt_hf_insert(&p[i], out, m.C, back, seen, &twice);
            for (int c = 0; c < m.C; c++) CHECK(back[c] == in[c]);
        }
        CHECK(n_offset == 2 * m.L + 1);
        free(p);
    }
}

/* ---------- 2. a hand-written save: ckpt_global.h and the whole export ---------- */

typedef struct {
    char root[256], iter[300];
    mt_recipe r;
    mt_param_layout pl;
    mt_manifest mf;
    float *master[MT_MAX_PARAM_TENSORS];
    uint16_t *weight[MT_MAX_PARAM_TENSORS];
} hand_save;

static int write_manifest(const hand_save *h) {
    char path[400];
    snprintf(path, sizeof path, "%s/manifest.json", h->iter);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    const int ok = mt_manifest_write(f, &h->mf) == MT_OK;
    return fclose(f) == 0 && ok;
}

/* a one-file save of a small gpt: every tensor's weight as two flat halves (BF16), its master as
 * two row boxes (F32) where it has two rows or more */
static int hand_save_make(hand_save *h) {
    memset(h, 0, sizeof *h);
    snprintf(h->root, sizeof h->root, "/tmp/mtrain-test-hf-XXXXXX");
    if (!mkdtemp(h->root)) return 0;
    mt_ckpt_iter_path(h->root, 7, NULL, h->iter, sizeof h->iter);
    if (mkdir(h->iter, 0755)) return 0;
    mt_recipe_defaults(&h->r);
    const char *kv[][2] = {{"model.arch", "gpt"},      {"model.layers", "2"},  {"model.hidden", "16"},
                           {"model.heads", "4"},       {"model.vocab", "37"},  {"model.seq_length", "8"},
                           {"training.micro_batch", "1"}, {"training.global_batch", "1"}, {"training.iters", "7"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (mt_recipe_set(&h->r, kv[i][0], kv[i][1], "test") != MT_OK) return 0;
    if (mt_recipe_validate(&h->r, 1) != MT_OK || mt_param_layout_build(&h->r, &h->pl) != MT_OK) return 0;
    mt_manifest *m = &h->mf;
    const int nt = h->pl.n_tensors;
    m->tensors = calloc((size_t)nt, sizeof *m->tensors);
    m->pieces = calloc((size_t)nt * 4, sizeof *m->pieces);
    m->files = calloc(1, sizeof *m->files);
    mt_st_tensor *sts = calloc((size_t)nt * 4, sizeof *sts);
    char (*entry)[48] = calloc((size_t)nt * 4, sizeof *entry);
    for (int ti = 0; ti < nt; ti++) {
        mt_manifest_tensor *t = &m->tensors[m->n_tensors++];
        snprintf(t->name, sizeof t->name, "%s", h->pl.t[ti].name);
        mt_ckpt_global_shape(&h->pl, ti, t->shape);
        t->stacked = h->pl.t[ti].stacked;
        const int L = (int)t->shape[0], R = (int)t->shape[1], C = (int)t->shape[2];
        const size_t n = (size_t)L * R * C, half = n / 2;
        h->master[ti] = malloc(n * 4);
        h->weight[ti] = malloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            h->master[ti][i] = (float)(0.3 * mt_rng_normal(91, (uint64_t)ti, i)) + (R == 1 ? 1.0f : 0.0f);
            h->weight[ti][i] = mt_f32_to_bf16(h->master[ti][i]);
        }
        const mt_ckpt_box whole = {.n = n, .l0 = 0, .nl = L, .r0 = 0, .nr = R, .c0 = 0, .nc = C};
        for (int k = 0; k < 2; k++) { /* weight: flat [0, half), [half, n) of the whole box */
            mt_manifest_piece *q = &m->pieces[m->n_pieces];
            *q = (mt_manifest_piece){.tensor = ti, .kind = MT_CK_WEIGHT, .file = 0, .box = whole,
                                     .f0 = k ? half : 0, .f1 = k ? n : half};
            snprintf(q->dtype, sizeof q->dtype, "BF16");
            snprintf(entry[m->n_pieces], 48, "w%d.%d", ti, k);
            sts[m->n_pieces] = (mt_st_tensor){.name = entry[m->n_pieces], .dtype = "BF16", .n_dims = 1,
                                              .shape = {(int64_t)(q->f1 - q->f0)}, .data = h->weight[ti] + q->f0,
                                              .n_bytes = (q->f1 - q->f0) * 2};
            m->n_pieces++;
        }
        const int parts = R >= 2 ? 2 : 1;
        for (int k = 0; k < parts; k++) { /* master: row boxes */
            const int r0 = k * (R / 2), nr = parts == 1 ? R : k ? R - R / 2 : R / 2;
            mt_manifest_piece *q = &m->pieces[m->n_pieces];
            const size_t pn = (size_t)L * nr * C;
            *q = (mt_manifest_piece){.tensor = ti, .kind = MT_CK_MASTER, .file = 0, .f0 = 0, .f1 = pn,
                                     .box = {.n = pn, .l0 = 0, .nl = L, .r0 = r0, .nr = nr, .c0 = 0, .nc = C}};
            snprintf(q->dtype, sizeof q->dtype, "F32");
            snprintf(entry[m->n_pieces], 48, "m%d.%d", ti, k);
            float *data = malloc(pn * 4); /* the box's elements in row-major order */
            for (int l = 0; l < L; l++)
                memcpy(data + (size_t)l * nr * C, h->master[ti] + ((size_t)l * R + r0) * C, (size_t)nr * C * 4);
            sts[m->n_pieces] = (mt_st_tensor){.name = entry[m->n_pieces], .dtype = "F32", .n_dims = 1,
                                              .shape = {(int64_t)pn}, .data = data, .n_bytes = pn * 4};
            m->n_pieces++;
        }
    }
    char path[400];
    snprintf(path, sizeof path, "%s/rank_00000.safetensors", h->iter);
    uint32_t crc = 0;
    uint64_t bytes = 0, start = 0;
    int ok = mt_st_write(path, sts, (int)m->n_pieces, 0, &crc, &bytes, &start) == MT_OK;
    for (size_t k = 0; k < m->n_pieces; k++) {
        snprintf(m->pieces[k].entry, sizeof m->pieces[k].entry, "%s", entry[k]);
        m->pieces[k].offset = start;
        m->pieces[k].n_bytes = sts[k].n_bytes;
        start += sts[k].n_bytes;
        if (m->pieces[k].kind == MT_CK_MASTER) free((void *)sts[k].data);
    }
    free(sts);
    free(entry);
    snprintf(m->files[0].name, sizeof m->files[0].name, "rank_00000.safetensors");
    m->files[0].bytes = bytes;
    m->files[0].crc32c = crc;
    m->n_files = 1;
    m->iteration = m->train_iters = 7;
    m->layout = (mt_manifest_layout){.world_size = 1, .tensor = 1, .pipeline = 1, .virtual_pipeline = 1, .data = 1,
                                     .context = 1, .expert = 1};
    snprintf(m->decay_style, sizeof m->decay_style, "cosine");
    snprintf(m->weight_dtype, sizeof m->weight_dtype, "BF16");
    snprintf(m->arch, sizeof m->arch, "gpt");
    snprintf(m->tokenizer, sizeof m->tokenizer, "byte");
    m->vocab = 37;
    size_t yn = 0;
    FILE *yf = open_memstream(&m->recipe_yaml, &yn);
    mt_recipe_write_yaml(yf, &h->r);
    fclose(yf);
    return ok && write_manifest(h) && mt_ckpt_write_tracker(h->root, 7, 0) == MT_OK;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void hand_save_free(hand_save *h) {
    for (int ti = 0; ti < MT_MAX_PARAM_TENSORS; ti++) free(h->master[ti]), free(h->weight[ti]);
    mt_manifest_free(&h->mf);
    const char *suffix[] = {"", ".out", ".out2"}; /* .out2 exists only when its check failed */
    for (int i = 0; i < 3; i++) {
        char p[300];
        struct stat sb;
        snprintf(p, sizeof p, "%s%s", h->root, suffix[i]);
        if (!stat(p, &sb) && nftw(p, rm_entry, 8, FTW_DEPTH | FTW_PHYS)) fprintf(stderr, "could not remove %s\n", p);
    }
}

static void test_hand_save(void) {
    static hand_save h;
    CHECKF(hand_save_make(&h), "making the save: %s", mt_last_error());
    /* ckpt_global.h reads both kinds back, whatever the cut */
    mt_ckpt_reader rd;
    mt_status st = mt_ckpt_reader_open(&rd, h.root);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    CHECK(rd.mf.iteration == 7 && !strcmp(rd.dir, h.iter));
    int master_differs = 0;
    for (int ti = 0; ti < h.pl.n_tensors; ti++) {
        const int64_t *s = rd.mf.tensors[ti].shape;
        const size_t n = (size_t)(s[0] * s[1] * s[2]);
        float *a = malloc(n * 4), *w = malloc(n * 4);
        CHECK(mt_ckpt_read_global(&rd, rd.mf.tensors[ti].name, MT_CK_MASTER, a) == MT_OK);
        CHECK(mt_ckpt_read_global(&rd, rd.mf.tensors[ti].name, MT_CK_WEIGHT, w) == MT_OK);
        int bad_m = 0, bad_w = 0;
        for (size_t i = 0; i < n; i++) {
            bad_m += a[i] != h.master[ti][i];
            bad_w += w[i] != mt_bf16_to_f32(h.weight[ti][i]);
            master_differs += w[i] != a[i];
        }
        CHECKF(!bad_m && !bad_w, "%s: %d master, %d weight values differ", rd.mf.tensors[ti].name, bad_m, bad_w);
        /* a layer range (the export's read: one slice at a time) is that range of the whole */
        const size_t slice = (size_t)(s[1] * s[2]);
        for (int l = 0; l < s[0]; l += 2) {
            const int nl = l + 2 <= s[0] ? 2 : 1;
            CHECK(mt_ckpt_read_layers(&rd, rd.mf.tensors[ti].name, MT_CK_MASTER, l, nl, w) == MT_OK);
            CHECKF(!memcmp(w, a + (size_t)l * slice, (size_t)nl * slice * 4), "%s: layers [%d, %d) differ",
                   rd.mf.tensors[ti].name, l, l + nl);
        }
        CHECK(mt_ckpt_read_layers(&rd, rd.mf.tensors[ti].name, MT_CK_MASTER, (int)s[0], 1, w) == MT_ERR_INTERNAL);
        free(a);
        free(w);
    }
    CHECK(master_differs > 1000); /* so that reading the wrong kind shows below */
    float dummy[4];
    CHECK(mt_ckpt_read_global(&rd, "nope", MT_CK_WEIGHT, dummy) == MT_ERR_CONFIG);
    CHECK(mt_ckpt_read_global(&rd, "wte", MT_CK_EXP_AVG, dummy) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "no exp_avg pieces");
    mt_ckpt_reader_close(&rd);
    /* the whole export: the master values */
    char out[300];
    snprintf(out, sizeof out, "%s.out", h.root);
    const mt_hf_export_opts o = {.load = h.root, .output = out, .dtype = MT_F32};
    mt_hf_export_stats es;
    st = mt_hf_export(&o, &es);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    CHECK(es.iteration == 7 && es.n_files == 1 && es.note[0]);
    char path[400], *file = NULL;
    size_t fn = 0;
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    mt_st_header sh = {0};
    CHECK(mt_read_whole_file(path, &file, &fn) == MT_OK);
    CHECK(file && mt_st_parse((const uint8_t *)file, fn, path, &sh) == MT_OK);
    mt_hf_model hm;
    CHECK(mt_hf_model_from_recipe(&h.r, &hm) == MT_OK);
    const int np = mt_hf_plan(&hm, NULL, 0);
    mt_hf_tensor *plan = calloc((size_t)np, sizeof *plan);
    mt_hf_plan(&hm, plan, np);
    CHECK(sh.n_entries == np && es.n_tensors == np);
    int bad = 0;
    for (int i = 0; i < np && file; i++) {
        const mt_st_entry *e = mt_st_find(&sh, plan[i].name);
        int ti = -1;
        for (int k = 0; k < h.pl.n_tensors; k++)
            if (!strcmp(h.pl.t[k].name, plan[i].src)) ti = k;
        const size_t n = (size_t)plan[i].nr * plan[i].nc;
        if (!e || ti < 0 || strcmp(e->dtype, "F32") || e->end - e->begin != n * 4) {
            bad++;
            continue;
        }
        float *want = malloc(n * 4);
        const int64_t *s = h.mf.tensors[ti].shape;
        mt_hf_extract(&plan[i], h.master[ti] + (size_t)plan[i].layer * s[1] * s[2], s[2], want);
        bad += memcmp(want, file + e->begin, n * 4) != 0;
        free(want);
    }
    CHECKF(bad == 0, "%d exported tensors are not the master values", bad);
    free(plan);
    free(file);
    mt_st_header_free(&sh);
    /* master pieces covering rows twice (each kind still adds up): an error, nothing left at the output */
    const int wte = mt_manifest_tensor_find(&h.mf, "wte");
    for (size_t k = 0; k < h.mf.n_pieces; k++)
        if (h.mf.pieces[k].tensor == wte && h.mf.pieces[k].kind == MT_CK_MASTER) h.mf.pieces[k].box.r0 = 0;
    CHECK(write_manifest(&h));
    CHECK(mt_ckpt_reader_open(&rd, h.root) == MT_OK);
    float *a = malloc((size_t)h.mf.tensors[wte].shape[1] * h.mf.tensors[wte].shape[2] * 4);
    CHECK(mt_ckpt_read_global(&rd, "wte", MT_CK_MASTER, a) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "twice");
    free(a);
    mt_ckpt_reader_close(&rd);
    char out2[310];
    snprintf(out2, sizeof out2, "%s.out2", h.root);
    const mt_hf_export_opts o2 = {.load = h.root, .output = out2, .dtype = MT_BF16};
    CHECK(mt_hf_export(&o2, &es) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "wte");
    struct stat sb;
    char tmp2[320];
    snprintf(tmp2, sizeof tmp2, "%s.tmp", out2);
    CHECK(stat(out2, &sb) != 0 && stat(tmp2, &sb) != 0);
    hand_save_free(&h);
}

int main(void) {
    test_gpt_mapping();
    test_llama_mapping(0, 0);
    test_llama_mapping(1, 0);
    test_llama_mapping(0, 1);
    test_mixtral_mapping();
    test_qwen2_moe_mapping();
    test_convert();
    test_shards();
    test_config();
    test_refusals();
    test_norm_1p();
    test_hand_save();
    TEST_MAIN_END();
}
