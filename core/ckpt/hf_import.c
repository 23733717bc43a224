/* hf_import.c — mt_hf_import of hf_import.h: config.json checked against the recipe (Mixtral's
 * router and expert fields too), the weight
 * files mapped and their headers parsed (core/ckpt/safetensors.h), each tensor of the export plan
 * found, converted to fp32 (F32, BF16, F16) and inserted into its mtrain tensor, coverage counted,
 * then one one-rank save written. */
#include "core/ckpt/hf_import.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ckpt/ckpt_single.h"
#include "core/ckpt/hf_export.h"
#include "core/ckpt/safetensors.h"
#include "core/clock.h"
#include "core/file_read.h"
#include "core/json_tree.h"
#include "core/model/model_layout.h"

#define MAX_FILES 256

typedef struct {
    char name[256];
    const uint8_t *data;
    size_t n_bytes;
    mt_st_header hdr;
} hf_file;

typedef struct {
    const char *dir;
    hf_file files[MAX_FILES];
    int n_files;
} hf_model_files;

static mt_status map_one(hf_model_files *h, const char *name) {
    for (int i = 0; i < h->n_files; i++)
        if (!strcmp(h->files[i].name, name)) return MT_OK;
    if (h->n_files == MAX_FILES) return mt_errorf(MT_ERR_UNSUPPORTED, "%s: more than %d weight files", h->dir, MAX_FILES);
    hf_file *f = &h->files[h->n_files];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", h->dir, name);
    int fd;
    struct stat sb;
    mt_status opened = mt_open_regular(path, &fd, &sb, NULL);
    if (opened != MT_OK) return opened;
    if (sb.st_size < 8) {
        close(fd);
        return mt_errorf(MT_ERR_DATA, "%s: %lld bytes: not a safetensors file", path, (long long)sb.st_size);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return mt_errorf(MT_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    f->data = p;
    f->n_bytes = (size_t)sb.st_size;
    h->n_files++;
    return mt_st_parse(f->data, f->n_bytes, path, &f->hdr);
}

static void unmap_all(hf_model_files *h) {
    for (int i = 0; i < h->n_files; i++) {
        if (h->files[i].data) munmap((void *)h->files[i].data, h->files[i].n_bytes);
        mt_st_header_free(&h->files[i].hdr);
    }
    h->n_files = 0;
}

/* model.safetensors, or every file the index names */
static mt_status open_weights(hf_model_files *h) {
    mt_status st = MT_OK;
    char path[4400];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", h->dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return map_one(h, "model.safetensors");
    mt_json_doc doc;
    MT_CHECK(mt_json_doc_load(&doc, path));
    const mt_json_node *wm = mt_json_get(doc.root, "weight_map");
    if (!wm || wm->type != MT_JSON_OBJECT) {
        st = mt_errorf(MT_ERR_DATA, "%s: no \"weight_map\" object", path);
    } else {
        for (size_t i = 0; i < wm->n_items && st == MT_OK; i++) {
            const mt_json_node *v = &wm->items[i];
            if (v->type != MT_JSON_STRING || strchr(v->str, '/') || v->str[0] == '.')
                st = mt_errorf(MT_ERR_DATA, "%s: weight_map[\"%s\"] is not a file name in the folder", path, v->key);
            else
                st = map_one(h, v->str);
        }
    }
    mt_json_doc_free(&doc);
out:
    return st;
}

static const mt_st_entry *find_entry(const hf_model_files *h, const char *name, const hf_file **file) {
    for (int i = 0; i < h->n_files; i++) {
        const mt_st_entry *e = mt_st_find(&h->files[i].hdr, name);
        if (e) {
            *file = &h->files[i];
            return e;
        }
    }
    return NULL;
}

static float half_to_f32(uint16_t x) {
    const int s = x >> 15, e = (x >> 10) & 31, m = x & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return s ? -v : v;
}

/* The config.json fields that change the computed function (beyond the shapes): each must say
 * what the recipe computes (absent = transformers' default), else the import is refused naming
 * the field, its value and the recipe key that would match it; mtrain never scores a model other
 * than the one the file describes. */
typedef enum {
    F_NUMBER,
    F_BOOL,
    F_STRING,
    F_NULL,
    F_NONE,   /* absent, null, 0, false or an empty list: a feature the file does not use */
    F_AT_LEAST /* absent, null or a number >= want (a window no sequence of the model reaches) */
} field_kind;
typedef struct {
    const char *hf;      /* config.json key */
    field_kind kind;
    double want;         /* F_NUMBER: the recipe's value; F_BOOL: 0 / 1 */
    double dflt;         /* transformers' default when the key is absent (F_NUMBER, F_BOOL) */
    const char *want_s;  /* F_STRING: the accepted value (the default too unless dflt is 1) */
    const char *key;     /* the recipe key, for the message ("" = none can express another value) */
} fn_field;

static void json_value_text(const mt_json_node *v, char *out, size_t n) {
    if (!v) snprintf(out, n, "absent");
    else if (v->type == MT_JSON_NULL) snprintf(out, n, "null");
    else if (v->type == MT_JSON_TRUE || v->type == MT_JSON_FALSE) snprintf(out, n, v->type == MT_JSON_TRUE ? "true" : "false");
    else if (v->type == MT_JSON_NUMBER) snprintf(out, n, "%.9g", v->number);
    else if (v->type == MT_JSON_STRING) snprintf(out, n, "\"%.100s\"", v->str);
    else snprintf(out, n, "%s", v->type == MT_JSON_OBJECT ? "an object" : "a list");
}

static mt_status check_fn_field(const mt_json_node *root, const fn_field *f, const char *path, const char *recipe) {
    const mt_json_node *v = mt_json_get(root, f->hf);
    int ok;
    switch (f->kind) {
    case F_NUMBER: {
        const double got = !v ? f->dflt : v->type == MT_JSON_NUMBER ? v->number : NAN;
        ok = (float)got == (float)f->want; /* the recipe holds floats: compare at float precision */
        break;
    }
    case F_BOOL: {
        const int got = !v ? (int)f->dflt : v->type == MT_JSON_TRUE ? 1 : v->type == MT_JSON_FALSE ? 0 : -1;
        ok = got == (int)f->want;
        break;
    }
    case F_STRING: ok = !v ? f->dflt == 0 : v->type == MT_JSON_STRING && !strcmp(v->str, f->want_s); break;
    case F_NONE:
        ok = !v || v->type == MT_JSON_NULL || v->type == MT_JSON_FALSE || (v->type == MT_JSON_NUMBER && v->number == 0) ||
             (v->type == MT_JSON_ARRAY && v->n_items == 0);
        break;
    case F_AT_LEAST: ok = !v || v->type == MT_JSON_NULL || (v->type == MT_JSON_NUMBER && v->number >= f->want); break;
    default: ok = !v || v->type == MT_JSON_NULL; break;
    }
    if (ok) return MT_OK;
    char got[160], want[64];
    json_value_text(v, got, sizeof got);
    if (f->kind == F_NUMBER) snprintf(want, sizeof want, "%.7g", f->want); /* the recipe's float, as written */
    else if (f->kind == F_BOOL) snprintf(want, sizeof want, "%s", f->want ? "true" : "false");
    else if (f->kind == F_STRING) snprintf(want, sizeof want, "\"%s\"", f->want_s);
    else if (f->kind == F_NONE) snprintf(want, sizeof want, "%s", f->want_s);
    else if (f->kind == F_AT_LEAST) snprintf(want, sizeof want, "null (or at least %.0f)", f->want);
    else snprintf(want, sizeof want, "null");
    if (f->key[0])
        return mt_errorf(MT_ERR_CONFIG, "%s: %s is %s, the recipe %s computes %s (%s): the imported model would score "
                         "differently from the Hugging Face one; set %s to match (--set %s=...)", path, f->hf, got,
                         recipe, want, f->key, f->key, f->key);
    return mt_errorf(MT_ERR_UNSUPPORTED, "%s: %s is %s; mtrain computes only %s: this model cannot be imported", path,
                     f->hf, got, want);
}

static mt_status check_table(const mt_json_node *root, const fn_field *f, size_t n, const char *path,
                             const char *recipe) {
    for (size_t i = 0; i < n; i++) {
        mt_status st = check_fn_field(root, &f[i], path, recipe);
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

/* A RoPE record's kind and parameters (config.json's rope_scaling, or the newer rope_parameters) against
 * the recipe's: no record, null or rope_type "default" is plain RoPE; "llama3" is Llama 3.x's frequency
 * scaling (model.rope_scaling and its four keys; transformers requires all four in the record); "linear"
 * is position interpolation by its factor (model.rotary_interpolation). Another kind is refused. `name`
 * is the record's key, for the messages. */
static mt_status check_rope_kind(const mt_json_node *rs, const char *name, const mt_hf_model *m, const char *path,
                                 const char *recipe) {
    const mt_json_node *t = NULL;
    if (rs && rs->type == MT_JSON_OBJECT) {
        t = mt_json_get(rs, "rope_type");
        if (!t || t->type == MT_JSON_NULL) t = mt_json_get(rs, "type"); /* older transformers' key */
    } else if (rs && rs->type != MT_JSON_NULL) {
        return mt_errorf(MT_ERR_CONFIG, "%s: %s is not an object or null: not a config.json of transformers", path, name);
    }
    if (t && t->type != MT_JSON_STRING)
        return mt_errorf(MT_ERR_CONFIG, "%s: %s.rope_type is not a string: not a config.json of transformers", path, name);
    const char *kind = t ? t->str : "default";
    const int llama3 = !strcmp(kind, "llama3"), linear = !strcmp(kind, "linear");
    if (!llama3 && !linear && strcmp(kind, "default"))
        return mt_errorf(MT_ERR_UNSUPPORTED, "%s: %s.rope_type is \"%.60s\"; mtrain computes RoPE plain, with Llama "
                         "3.x's scaling (\"llama3\", model.rope_scaling) or with linear position interpolation "
                         "(\"linear\", model.rotary_interpolation): this model cannot be imported", path, name, kind);
    const double linear_want = m->rope_linear > 0.0f ? m->rope_linear : 1.0;
    if (llama3 != m->rope_llama3)
        return mt_errorf(MT_ERR_CONFIG, "%s: %s is %s, the recipe %s computes RoPE %s Llama 3.x's frequency scaling "
                         "(model.rope_scaling): the imported model would score differently from the Hugging Face one; "
                         "set model.rope_scaling: %s (--set model.rope_scaling=%s)", path, name,
                         llama3 ? "Llama 3.x's (rope_type \"llama3\")" : t ? "not Llama 3.x's" : "absent", recipe,
                         m->rope_llama3 ? "with" : "without", llama3 ? "true" : "false", llama3 ? "true" : "false");
    if (!linear && linear_want != 1.0)
        return mt_errorf(MT_ERR_CONFIG, "%s: %s has no linear interpolation, the recipe %s divides RoPE positions by "
                         "%g (model.rotary_interpolation): the imported model would score differently from the Hugging "
                         "Face one; set model.rotary_interpolation: 1", path, name, recipe, linear_want);
    mt_status st = MT_OK;
    if (llama3) {
        const fn_field f[] = {
            {"factor", F_NUMBER, m->rope_factor, NAN, NULL, "model.rope_scaling_factor"},
            {"low_freq_factor", F_NUMBER, m->rope_low, NAN, NULL, "model.rope_low_freq_factor"},
            {"high_freq_factor", F_NUMBER, m->rope_high, NAN, NULL, "model.rope_high_freq_factor"},
            {"original_max_position_embeddings", F_NUMBER, m->rope_orig_max, NAN, NULL, "model.rope_original_max_position"},
        };
        st = check_table(rs, f, sizeof f / sizeof f[0], path, recipe);
    } else if (linear) {
        const fn_field f[] = {{"factor", F_NUMBER, linear_want, NAN, NULL, "model.rotary_interpolation"}};
        st = check_table(rs, f, 1, path, recipe);
    }
    if (st != MT_OK) {
        char where[64];
        snprintf(where, sizeof where, "%s: ", name);
        return mt_error_context(st, where);
    }
    return MT_OK;
}

/* transformers' newer RoPE record, {"rope_type": ..., "rope_theta": ..., its scaling's parameters} in place
 * of the top-level rope_theta / rope_scaling, at the recipe's theta and scaling. *theta_dflt becomes its
 * rope_theta (what the top-level key means when absent); *seen tells that the record held the RoPE kind. */
static mt_status check_rope_parameters(const mt_json_node *root, const mt_hf_model *m, const char *path,
                                       const char *recipe, double *theta_dflt, int *seen) {
    const mt_json_node *rp = mt_json_get(root, "rope_parameters");
    *seen = 0;
    if (!rp || rp->type == MT_JSON_NULL) return MT_OK;
    if (rp->type != MT_JSON_OBJECT)
        return mt_errorf(MT_ERR_CONFIG, "%s: rope_parameters is not an object: not a config.json of transformers", path);
    *seen = 1;
    const mt_json_node *t = mt_json_get(rp, "rope_theta");
    if (t && t->type == MT_JSON_NUMBER) *theta_dflt = t->number;
    const fn_field f[] = {
        {"rope_theta", F_NUMBER, m->rope_theta, *theta_dflt, NULL, "model.rope_theta"},
        {"partial_rotary_factor", F_NUMBER, 1, 1, NULL, ""},
    };
    mt_status st = check_table(rp, f, sizeof f / sizeof f[0], path, recipe);
    if (st != MT_OK) return mt_error_context(st, "rope_parameters: ");
    return check_rope_kind(rp, "rope_parameters", m, path, recipe);
}

static mt_status check_fn_fields(const mt_json_node *root, const mt_hf_model *m, const char *path, const char *recipe) {
    double theta_dflt = m->E > 0 && !m->Fs ? 1e6 : 10000.0; /* MixtralConfig's default; LlamaConfig's, Qwen2MoeConfig's */
    if (m->arch == MT_ARCH_LLAMA) {
        int in_parameters = 0;
        mt_status st = check_rope_parameters(root, m, path, recipe, &theta_dflt, &in_parameters);
        if (st != MT_OK) return st;
        /* the top-level rope_scaling: the kind, unless rope_parameters held it and this is null or absent */
        const mt_json_node *rs = mt_json_get(root, "rope_scaling");
        if (!in_parameters || (rs && rs->type != MT_JSON_NULL)) st = check_rope_kind(rs, "rope_scaling", m, path, recipe);
        if (st != MT_OK) return st;
    }
    const fn_field gpt[] = {
        {"layer_norm_epsilon", F_NUMBER, m->norm_eps, 1e-5, NULL, "model.norm_eps"},
        /* GPT2Config's default gelu_new; relu2 for a squared-ReLU recipe (an absent key is gelu_new) */
        {"activation_function", F_STRING, 0, m->squared_relu, m->squared_relu ? "relu2" : "gelu_new",
         "model.activation"},
        {"scale_attn_weights", F_BOOL, 1, 1, NULL, ""},
        {"scale_attn_by_inverse_layer_idx", F_BOOL, 0, 0, NULL, ""},
        {"tie_word_embeddings", F_BOOL, 1, 1, NULL, ""},
        {"add_cross_attention", F_BOOL, 0, 0, NULL, ""},
    };
    const fn_field attention[] = { /* Llama's and Mixtral's alike (rope_theta: the class's default) */
        {"rope_theta", F_NUMBER, m->rope_theta, theta_dflt, NULL, "model.rope_theta"},
        {"partial_rotary_factor", F_NUMBER, 1, 1, NULL, ""},
        {"hidden_act", F_STRING, 0, 0, "silu", ""},
        {"head_dim", F_NUMBER, m->D, m->D, NULL, ""},
    };
    const fn_field llama[] = {
        {"rms_norm_eps", F_NUMBER, m->norm_eps, 1e-6, NULL, "model.norm_eps"},
        {"attention_bias", F_BOOL, m->bias, 0, NULL, "model.bias"},
        {"mlp_bias", F_BOOL, m->bias, 0, NULL, "model.bias"},
    };
    /* MixtralConfig's defaults differ from Llama's (rms_norm_eps 1e-5, rope_theta 1e6); the router
     * fields of other sparse models are refused unless they say what Mixtral computes */
    const char *none_shared = "0 or absent (Mixtral has no shared experts)", *all_sparse = "0 or absent (every "
                              "Mixtral layer is sparse)";
    const fn_field mixtral[] = {
        {"rms_norm_eps", F_NUMBER, m->norm_eps, 1e-5, NULL, "model.norm_eps"},
        {"sliding_window", F_AT_LEAST, m->max_pos, 0, NULL, ""},
        {"router_jitter_noise", F_NUMBER, 0, 0, NULL, ""},
        {"norm_topk_prob", F_BOOL, 1, 1, NULL, ""},
        {"scoring_func", F_STRING, 0, 0, "softmax", ""},
        {"topk_method", F_STRING, 0, 0, "greedy", ""},
        {"routed_scaling_factor", F_NUMBER, 1, 1, NULL, ""},
        {"n_shared_experts", F_NONE, 0, 0, none_shared, ""},
        {"num_shared_experts", F_NONE, 0, 0, none_shared, ""},
        {"shared_expert_intermediate_size", F_NONE, 0, 0, none_shared, ""},
        {"first_k_dense_replace", F_NONE, 0, 0, all_sparse, ""},
        {"mlp_only_layers", F_NONE, 0, 0, "[] or absent (every Mixtral layer is sparse)", ""},
        {"decoder_sparse_step", F_NUMBER, 1, 1, NULL, ""},
    };
    if (m->arch != MT_ARCH_LLAMA) return check_table(root, gpt, sizeof gpt / sizeof gpt[0], path, recipe);
    const mt_status st = check_table(root, attention, sizeof attention / sizeof attention[0], path, recipe);
    if (st != MT_OK) return st;
    /* Qwen2Config (biases on q / k / v alone, by its class; rms_norm_eps 1e-6): no sliding window */
    const fn_field qwen2[] = {
        {"rms_norm_eps", F_NUMBER, m->norm_eps, 1e-6, NULL, "model.norm_eps"},
        {"use_sliding_window", F_BOOL, 0, 0, NULL, ""},
    };
    /* Qwen2MoeConfig (gated shared experts, biases on q / k / v; transformers' defaults: rms_norm_eps 1e-6,
       norm_topk_prob false, moe_intermediate_size 1408, shared_expert_intermediate_size 5632), every layer sparse */
    const fn_field qwen2_moe[] = {
        {"rms_norm_eps", F_NUMBER, m->norm_eps, 1e-6, NULL, "model.norm_eps"},
        {"moe_intermediate_size", F_NUMBER, m->F, 1408, NULL, "model.moe.ffn_hidden"},
        {"shared_expert_intermediate_size", F_NUMBER, m->Fs, 5632, NULL, "model.moe.shared_ffn"},
        {"norm_topk_prob", F_BOOL, m->norm_topk, 0, NULL, "model.moe.pre_softmax"},
        {"qkv_bias", F_BOOL, m->qkv_bias, 1, NULL, "model.qkv_bias"},
        {"decoder_sparse_step", F_NUMBER, 1, 1, NULL, ""},
        {"mlp_only_layers", F_NONE, 0, 0, "[] or absent (every layer sparse)", ""},
        {"use_sliding_window", F_BOOL, 0, 0, NULL, ""},
    };
    if (m->E > 0 && m->Fs > 0) return check_table(root, qwen2_moe, sizeof qwen2_moe / sizeof qwen2_moe[0], path, recipe);
    if (m->E > 0) return check_table(root, mixtral, sizeof mixtral / sizeof mixtral[0], path, recipe);
    if (m->qkv_bias) return check_table(root, qwen2, sizeof qwen2 / sizeof qwen2[0], path, recipe);
    return check_table(root, llama, sizeof llama / sizeof llama[0], path, recipe);
}

/* config.json against the model the recipe describes */
static mt_status check_config(const char *dir, const mt_hf_model *m, const char *recipe) {
    mt_status st = MT_OK;
    char path[4400];
    snprintf(path, sizeof path, "%s/config.json", dir);
    mt_json_doc doc;
    MT_CHECK(mt_json_doc_load(&doc, path));
    const mt_json_node *root = doc.root;
    const mt_json_node *mt = mt_json_get(root, "model_type");
    const char *want_type = m->E > 0 ? (m->Fs > 0 ? "qwen2_moe" : "mixtral")
                            : m->arch != MT_ARCH_LLAMA ? "gpt2" : m->qkv_bias ? "qwen2" : "llama";
    if (!mt || mt->type != MT_JSON_STRING || strcmp(mt->str, want_type)) {
        st = mt_errorf(MT_ERR_CONFIG, "%s: model_type is %s%s%s; the recipe %s (%s) needs \"%s\"", path,
                       mt && mt->type == MT_JSON_STRING ? "\"" : "", mt && mt->type == MT_JSON_STRING ? mt->str : "missing",
                       mt && mt->type == MT_JSON_STRING ? "\"" : "", recipe,
                       m->E > 0 ? "model.arch, model.moe.experts, model.moe.shared_ffn"
                       : m->arch == MT_ARCH_LLAMA ? "model.arch, model.qkv_bias"
                                                                  : "model.arch",
                       want_type);
        goto done;
    }
    const int gpt = m->arch != MT_ARCH_LLAMA;
    struct {
        const char *hf, *key;
        int want;
    } f[] = {{gpt ? "n_layer" : "num_hidden_layers", "model.layers", m->L},
             {gpt ? "n_embd" : "hidden_size", "model.hidden", m->C},
             {gpt ? "n_head" : "num_attention_heads", "model.heads", m->H},
             {gpt ? NULL : "num_key_value_heads", "model.kv_heads", m->KV},
             {gpt ? "n_inner" : "intermediate_size", "model.ffn_hidden", m->F},
             {"vocab_size", "model.vocab", m->V},
             {gpt ? "n_positions" : "max_position_embeddings", "model.max_position", m->max_pos},
             {m->E > 0 ? (m->Fs > 0 ? "num_experts" : "num_local_experts") : NULL, "model.moe.experts", m->E},
             {m->E > 0 ? "num_experts_per_tok" : NULL, "model.moe.top_k", m->top_k}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].hf) continue;
        const mt_json_node *v = mt_json_get(root, f[i].hf);
        if (gpt && !strcmp(f[i].hf, "n_inner") && (!v || v->type == MT_JSON_NULL)) {
            if (m->F == 4 * m->C) continue; /* GPT-2's default 4 x n_embd */
        }
        /* transformers' LlamaConfig / MixtralConfig: num_key_value_heads absent (or null) = num_attention_heads */
        if (!gpt && !strcmp(f[i].hf, "num_key_value_heads") && (!v || v->type == MT_JSON_NULL))
            v = mt_json_get(root, "num_attention_heads");
        if (!v || !v->is_integer || v->integer != f[i].want) {
            char got[160];
            json_value_text(v, got, sizeof got);
            st = mt_errorf(MT_ERR_CONFIG, "%s: %s is %s%s, the recipe %s has %s = %d: give a recipe of this model", path,
                           f[i].hf, got, v && !v->is_integer && v->type == MT_JSON_NUMBER ? " (not an integer)" : "",
                           recipe, f[i].key, f[i].want);
            goto done;
        }
    }
    if (!gpt) {
        const mt_json_node *t = mt_json_get(root, "tie_word_embeddings");
        const int tied = t && t->type == MT_JSON_TRUE;
        if (tied != m->tied) {
            st = mt_errorf(MT_ERR_CONFIG, "%s: tie_word_embeddings is %s, the recipe %s has model.tie_embeddings = %s",
                           path, tied ? "true" : "false", recipe, m->tied ? "true" : "false");
            goto done;
        }
    }
    st = check_fn_fields(root, m, path, recipe);
done:
    mt_json_doc_free(&doc);
out:
    return st;
}

/* "[127]", "[128, 1]" */
static void shape_text(const int64_t *shape, int n_dims, char *out, size_t n) {
    size_t len = (size_t)snprintf(out, n, "[");
    for (int d = 0; d < n_dims && len < n; d++)
        len += (size_t)snprintf(out + len, n - len, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (len < n) snprintf(out + len, n - len, "]");
}

/* buffers some exporters store beside the weights (GPT-2's causal mask, Llama's RoPE frequencies):
 * not parameters, recomputed by every implementation */
static int is_buffer(const char *name) {
    static const char *const ends[] = {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        const size_t k = strlen(ends[i]);
        if (n >= k && !strcmp(name + n - k, ends[i])) return 1;
    }
    return 0;
}

/* every tensor of the weight files is one the plan reads (or a buffer): a weight mtrain would
 * drop means a model it does not compute */
static mt_status check_no_unknown(const hf_model_files *h, const mt_hf_tensor *plan, int n_plan, int tied) {
    for (int i = 0; i < h->n_files; i++)
        for (int j = 0; j < h->files[i].hdr.n_entries; j++) {
            const char *name = h->files[i].hdr.entries[j].name;
            int known = is_buffer(name) || (tied && !strcmp(name, "lm_head.weight"));
            for (int k = 0; k < n_plan && !known; k++) known = !strcmp(plan[k].name, name);
            if (!known)
                return mt_errorf(MT_ERR_DATA, "%s/%s: tensor %s is not part of the model the recipe describes (it "
                                 "would be ignored, and the imported model would compute something else): remove it, "
                                 "or give a recipe of this model", h->dir, h->files[i].name, name);
        }
    return MT_OK;
}

mt_status mt_hf_import(const mt_hf_import_opts *o, const mt_recipe *r_in, int *n_tensors, double *seconds) {
    mt_status st = MT_OK;
    const double t0 = mt_clock_s();
    mt_recipe r; /* about 20 KB, on the stack: no static, so the function stays reentrant */
    mt_hf_model m;
    mt_param_layout pl;
    hf_model_files h;
    memset(&h, 0, sizeof h);
    h.dir = o->input;
    float *tensors[MT_MAX_PARAM_TENSORS] = {0};
    uint8_t *seen[MT_MAX_PARAM_TENSORS] = {0};
    mt_hf_tensor *plan = NULL;
    float *scratch = NULL;
    r = *r_in; /* one rank: the layout of the save */
    r.parallel.tensor = r.parallel.pipeline = r.parallel.virtual_pipeline = r.parallel.context = 1;
    r.parallel.expert = 1;
    r.parallel.data = 1;
    r.parallel.sequence_parallel = 0;
    r.parallel.distributed_optimizer = 0;
    MT_CHECK(mt_recipe_validate(&r, 1));
    MT_CHECK(mt_hf_model_from_recipe(&r, &m));
    MT_CHECK(check_config(o->input, &m, r.origin.file[0] ? r.origin.file : "recipe"));
    MT_CHECK(mt_param_layout_build(&r, &pl));
    MT_CHECK(open_weights(&h));
    for (int ti = 0; ti < pl.n_tensors; ti++) {
        const size_t n = (size_t)pl.t[ti].n_layers * pl.t[ti].full_rows * pl.t[ti].full_cols;
        tensors[ti] = calloc(n ? n : 1, sizeof(float));
        seen[ti] = calloc(n ? n : 1, 1);
        if (!tensors[ti] || !seen[ti]) {
            st = mt_errorf(MT_ERR_OOM, "import: tensor %s (%zu elements)", pl.t[ti].name, n);
            goto out;
        }
    }
    const int n_plan = mt_hf_plan(&m, NULL, 0);
    plan = calloc((size_t)n_plan, sizeof *plan);
    if (!plan) {
        st = mt_errorf(MT_ERR_OOM, "import: %d tensors", n_plan);
        goto out;
    }
    mt_hf_plan(&m, plan, n_plan);
    size_t max_n = 0;
    for (int k = 0; k < n_plan; k++)
        if ((size_t)plan[k].nr * plan[k].nc > max_n) max_n = (size_t)plan[k].nr * plan[k].nc;
    scratch = malloc((max_n ? max_n : 1) * sizeof *scratch);
    if (!scratch) {
        st = mt_errorf(MT_ERR_OOM, "import: %zu floats", max_n);
        goto out;
    }
    int n_found = 0;
    for (int k = 0; k < n_plan; k++) {
        const mt_hf_tensor *t = &plan[k];
        const hf_file *file = NULL;
        const mt_st_entry *e = find_entry(&h, t->name, &file);
        if (!e) {
            st = mt_errorf(MT_ERR_DATA, "%s: no tensor %s in the weight files: not a %s checkpoint of this shape",
                           o->input, t->name, m.E > 0 ? "MixtralForCausalLM"
                                              : m.arch == MT_ARCH_LLAMA ? "LlamaForCausalLM" : "GPT2LMHeadModel");
            goto out;
        }
        int shape_ok = e->n_dims == t->n_dims;
        for (int d = 0; shape_ok && d < t->n_dims; d++) shape_ok = e->shape[d] == t->shape[d];
        if (!shape_ok) {
            char got[96], want[96];
            shape_text(e->shape, e->n_dims, got, sizeof got);
            shape_text(t->shape, t->n_dims, want, sizeof want);
            st = mt_errorf(MT_ERR_DATA, "%s/%s: tensor %s has shape %s, expected %s", o->input, file->name, t->name, got,
                           want);
            goto out;
        }
        const size_t n = (size_t)t->nr * t->nc;
        const uint8_t *src = file->data + e->begin;
        if (!strcmp(e->dtype, "F32")) {
            memcpy(scratch, src, n * 4);
        } else if (!strcmp(e->dtype, "BF16") || !strcmp(e->dtype, "F16")) {
            const int bf = !strcmp(e->dtype, "BF16");
            for (size_t i = 0; i < n; i++) {
                uint16_t b;
                memcpy(&b, src + 2 * i, 2);
                scratch[i] = bf ? mt_bf16_to_f32(b) : half_to_f32(b);
            }
        } else {
            st = mt_errorf(MT_ERR_UNSUPPORTED, "%s/%s: tensor %s is %s; import reads F32, BF16 and F16", o->input,
                           file->name, t->name, e->dtype);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            if (!isfinite(scratch[i])) {
                st = mt_errorf(MT_ERR_DATA, "%s/%s: tensor %s holds %s at element %zu: the weights are damaged (or "
                               "overflowed when converted); import refuses non-finite weights", o->input, file->name,
                               t->name, isnan(scratch[i]) ? "NaN" : "an infinity", i);
                goto out;
            }
        int ti = -1;
        for (int j = 0; j < pl.n_tensors; j++)
            if (!strcmp(pl.t[j].name, t->src)) ti = j;
        if (ti < 0) {
            st = mt_errorf(MT_ERR_INTERNAL, "import: the plan's source %s is not in the layout", t->src);
            goto out;
        }
        const size_t slice = (size_t)pl.t[ti].full_rows * pl.t[ti].full_cols;
        uint64_t twice = 0;
        mt_hf_insert(t, scratch, pl.t[ti].full_cols, tensors[ti] + (size_t)t->layer * slice,
                     seen[ti] + (size_t)t->layer * slice, &twice);
        if (twice) {
            st = mt_errorf(MT_ERR_INTERNAL, "import: %s overlaps another tensor's block of %s", t->name, t->src);
            goto out;
        }
        n_found++;
    }
    MT_CHECK(check_no_unknown(&h, plan, n_plan, m.tied));
    /* coverage: everything but the vocabulary padding came from exactly one HF tensor */
    for (int ti = 0; ti < pl.n_tensors; ti++) {
        const mt_param_tensor *t = &pl.t[ti];
        const int vocab = ti == pl.idx.wte || ti == pl.idx.lm_head;
        for (int l = 0; l < t->n_layers; l++)
            for (int i = 0; i < (vocab ? pl.V : t->full_rows); i++)
                for (int j = 0; j < t->full_cols; j++)
                    if (!seen[ti][((size_t)l * t->full_rows + i) * t->full_cols + j]) {
                        st = mt_errorf(MT_ERR_DATA, "%s: no Hugging Face tensor fills %s[%d][%d][%d]", o->input, t->name,
                                       l, i, j);
                        goto out;
                    }
    }
    MT_CHECK(mt_ckpt_save_single(o->save, &r, &pl, 0, (const float *const *)tensors));
    *n_tensors = n_found;
    *seconds = mt_clock_s() - t0;
out:
    for (int ti = 0; ti < MT_MAX_PARAM_TENSORS; ti++) {
        free(tensors[ti]);
        free(seen[ti]);
    }
    free(plan);
    free(scratch);
    unmap_all(&h);
    return st;
}
