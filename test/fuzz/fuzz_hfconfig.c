/* fuzz_hfconfig.c — libFuzzer harness for the Hugging Face config.json reader of `mtrain import`
 * (core/ckpt/hf_import.c: config.json checked against the recipe's model, the shape fields and every
 * field that changes the computed function, for GPT2LMHeadModel, LlamaForCausalLM and
 * MixtralForCausalLM). Every input is a candidate config.json, written into a private mkdtemp folder
 * under $TMPDIR (or /tmp), removed after each input; the folder holds no weights, so an import that
 * accepts the config stops at the missing model.safetensors. The reader is reached through
 * mt_hf_import (check_config is internal to it):
 *   - against three fixed tiny recipes (GPT-2, Llama, Mixtral shapes);
 *   - against the recipe the harness derives from the config itself (model_type, shapes, norm eps,
 *     RoPE theta, biases, tying, activation, head_dim, experts: each value given to mt_recipe_set as
 *     text), which the recipe validation accepts or refuses.
 * Properties checked: no crash / leak / UB (under ASan+UBSan); a config the JSON parser refuses is
 * MT_ERR_DATA naming config.json; every import ends in a clean refusal naming config.json
 * (MT_ERR_CONFIG, MT_ERR_UNSUPPORTED or MT_ERR_DATA) or, the config accepted, in MT_ERR_IO naming the
 * missing model.safetensors; a derived recipe is set and validated or refused with MT_ERR_CONFIG,
 * a validated one has positive dimensions, and its model is exportable or refused with
 * MT_ERR_UNSUPPORTED / MT_ERR_CONFIG; and, as an oracle, a config holding only fields the harness
 * maps (or that change nothing), its shape fields integers, is accepted against the recipe derived
 * from it whenever that recipe validates and exports.
 * The corpus (test/fuzz/corpus_hfconfig/) is hand-written: config.json of GPT-2, Llama and Mixtral
 * shapes (tiny numbers, as transformers writes them and as mtrain export writes them), and damaged
 * ones (bad JSON, wrong model_type, missing, non-integer, negative and huge sizes, unsupported
 * fields such as rope_scaling or shared experts).
 * Built three ways, as fuzz_spm.c: FUZZ_TARGET=hfconfig test/fuzz/run-fuzzer.sh (clang
 * -fsanitize=fuzzer), with -DMT_FUZZ_REPLAY_MAIN as a plain replay program, and #included by
 * test/unit/test_hfconfig_fuzz_replay.c, which replays test/fuzz/corpus_hfconfig/ in CI. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ckpt/hf_export.h"
#include "core/ckpt/hf_import.h"
#include "core/json_tree.h"
#include "core/recipe/recipe.h"
#include "test/fuzz/fuzz_file.h"

static int fuzz_hfc_n_accepted; /* inputs some import accepted (the replay test counts them) */
static int fuzz_hfc_n_derived;  /* inputs whose derived recipe validated and exports */
static char fuzz_hfc_last[1024]; /* the last import's message */

/* recipe keys set on every recipe (a one-iteration run of short sequences) */
static mt_status fuzz_hfc_base(mt_recipe *r, const char *arch) {
    mt_recipe_defaults(r);
    mt_status st = mt_recipe_set(r, "model.arch", arch, "fuzz");
    if (st == MT_OK) st = mt_recipe_set(r, "training.iters", "1", "fuzz");
    return st;
}

/* The fixed recipes: 0 gpt, 1 llama, 2 mixtral (tiny shapes). */
static mt_status fuzz_hfc_fixed(mt_recipe *r, int which) {
    static const char *const dims[][2] = {{"model.layers", "2"}, {"model.hidden", "16"}, {"model.heads", "4"},
                                          {"model.seq_length", "8"}, {"model.ffn_hidden", "64"},
                                          {"model.vocab", "37"}};
    mt_status st = fuzz_hfc_base(r, which ? "llama" : "gpt");
    for (size_t i = 0; st == MT_OK && i < sizeof dims / sizeof dims[0]; i++)
        st = mt_recipe_set(r, dims[i][0], dims[i][1], "fuzz");
    if (st == MT_OK && which) st = mt_recipe_set(r, "model.kv_heads", "2", "fuzz");
    if (st == MT_OK && which == 2) st = mt_recipe_set(r, "model.moe.experts", "4", "fuzz");
    if (st == MT_OK && which == 2) st = mt_recipe_set(r, "model.moe.top_k", "2", "fuzz");
    return st;
}

/* config.json key -> recipe key, per model_type; shape: the value must be an integer */
typedef struct {
    const char *hf, *key;
    int shape;
} fuzz_hfc_map;

static const fuzz_hfc_map k_gpt2_map[] = {
    {"n_layer", "model.layers", 1},      {"n_embd", "model.hidden", 1},        {"n_head", "model.heads", 1},
    {"n_inner", "model.ffn_hidden", 0},  {"vocab_size", "model.vocab", 1},     {"n_positions", "model.max_position", 1},
    {"layer_norm_epsilon", "model.norm_eps", 0}, {"activation_function", "model.activation", 0},
};
static const fuzz_hfc_map k_llama_map[] = {
    {"num_hidden_layers", "model.layers", 1},
    {"hidden_size", "model.hidden", 1},
    {"num_attention_heads", "model.heads", 1},
    {"num_key_value_heads", "model.kv_heads", 1},
    {"intermediate_size", "model.ffn_hidden", 1},
    {"vocab_size", "model.vocab", 1},
    {"max_position_embeddings", "model.max_position", 1},
    {"rms_norm_eps", "model.norm_eps", 0},
    {"rope_theta", "model.rope_theta", 0},
    {"attention_bias", "model.bias", 0},
    {"tie_word_embeddings", "model.tie_embeddings", 0},
    {"head_dim", "model.head_dim", 0},
    {"num_local_experts", "model.moe.experts", 1}, /* Mixtral only */
    {"num_experts_per_tok", "model.moe.top_k", 1},  /* Mixtral only */
};
/* keys that change nothing mtrain computes (the oracle allows them) */
static const char *const k_neutral[] = {
    "architectures", "model_type", "torch_dtype", "bos_token_id", "eos_token_id", "use_cache", "initializer_range",
    "n_ctx", "resid_pdrop", "embd_pdrop", "attn_pdrop", "attention_dropout", "pretraining_tp", "transformers_version",
    "router_aux_loss_coef", "output_router_logits", "pad_token_id", "summary_type", "summary_use_proj",
    "reorder_and_upcast_attn", "use_sliding_window",
};

/* 1 when key is a field whose value here is the one every recipe of the arch computes (0 gpt,
 * 1 llama, 2 mixtral) */
static int fuzz_hfc_fixed_value(int arch, const char *key, const mt_json_node *v, const mt_json_node *root) {
    const int is_null = v->type == MT_JSON_NULL, num = v->type == MT_JSON_NUMBER;
    if (arch == 0)
        return (!strcmp(key, "scale_attn_weights") && v->type == MT_JSON_TRUE) ||
               (!strcmp(key, "tie_word_embeddings") && v->type == MT_JSON_TRUE) ||
               (!strcmp(key, "scale_attn_by_inverse_layer_idx") && v->type == MT_JSON_FALSE) ||
               (!strcmp(key, "add_cross_attention") && v->type == MT_JSON_FALSE);
    if ((!strcmp(key, "hidden_act") && v->type == MT_JSON_STRING && !strcmp(v->str, "silu")) ||
        (!strcmp(key, "rope_scaling") && is_null) || (!strcmp(key, "partial_rotary_factor") && num && v->number == 1))
        return 1;
    if (arch == 1 && !strcmp(key, "mlp_bias")) { /* as attention_bias (absent: false) */
        const mt_json_node *a = mt_json_get(root, "attention_bias");
        return (v->type == MT_JSON_TRUE || v->type == MT_JSON_FALSE) &&
               (v->type == MT_JSON_TRUE) == (a && a->type == MT_JSON_TRUE);
    }
    return arch == 2 && ((!strcmp(key, "sliding_window") && is_null) ||
                         (!strcmp(key, "router_jitter_noise") && num && v->number == 0) ||
                         (!strcmp(key, "norm_topk_prob") && v->type == MT_JSON_TRUE) ||
                         (!strcmp(key, "decoder_sparse_step") && num && v->number == 1));
}

/* a JSON value as recipe text ("" when it has none) */
static void fuzz_hfc_text(const mt_json_node *v, const char *key, char *out, size_t n) {
    out[0] = 0;
    if (v->type == MT_JSON_NUMBER && v->is_integer) snprintf(out, n, "%lld", (long long)v->integer);
    else if (v->type == MT_JSON_NUMBER) snprintf(out, n, "%.17g", v->number);
    else if (v->type == MT_JSON_TRUE || v->type == MT_JSON_FALSE) snprintf(out, n, "%s", v->type == MT_JSON_TRUE ? "true" : "false");
    else if (v->type == MT_JSON_STRING && !strcmp(key, "model.activation"))
        snprintf(out, n, "%s", !strcmp(v->str, "relu2") ? "squared_relu" : !strcmp(v->str, "gelu_new") ? "gelu" : v->str);
    else if (v->type == MT_JSON_STRING) snprintf(out, n, "%.200s", v->str);
}

/* The recipe config.json describes, set into r. *oracle: 1 when the config holds only mapped or
 * neutral keys, with integer shapes (then it must be accepted against r once r validates). A recipe
 * key refusing its value is MT_ERR_CONFIG (returned). */
static mt_status fuzz_hfc_derive(const mt_json_node *root, mt_recipe *r, int *oracle) {
    *oracle = 0;
    const mt_json_node *mt = mt_json_get(root, "model_type");
    const int gpt = mt && mt->type == MT_JSON_STRING && !strcmp(mt->str, "gpt2");
    const int llama = mt && mt->type == MT_JSON_STRING && !strcmp(mt->str, "llama");
    const int mixtral = mt && mt->type == MT_JSON_STRING && !strcmp(mt->str, "mixtral");
    if (!gpt && !llama && !mixtral) return fuzz_hfc_fixed(r, 0);
    mt_status st = fuzz_hfc_base(r, gpt ? "gpt" : "llama");
    /* transformers' defaults where the config says nothing (GPT2Config, LlamaConfig, MixtralConfig) */
    if (st == MT_OK) st = mt_recipe_set(r, "model.norm_eps", llama ? "1e-6" : "1e-5", "fuzz");
    if (st == MT_OK && !gpt) st = mt_recipe_set(r, "model.rope_theta", mixtral ? "1000000" : "10000", "fuzz");
    if (st == MT_OK && !gpt) st = mt_recipe_set(r, "model.bias", "false", "fuzz");
    if (st == MT_OK && !gpt) st = mt_recipe_set(r, "model.tie_embeddings", "false", "fuzz");
    const fuzz_hfc_map *map = gpt ? k_gpt2_map : k_llama_map;
    const size_t n_map = gpt ? sizeof k_gpt2_map / sizeof k_gpt2_map[0]
                             : sizeof k_llama_map / sizeof k_llama_map[0] - (mixtral ? 0 : 2);
    int clean = 1;
    int64_t max_pos = 0;
    char text[256];
    for (size_t i = 0; st == MT_OK && i < n_map; i++) {
        const mt_json_node *v = mt_json_get(root, map[i].hf);
        if (!v || v->type == MT_JSON_NULL) {
            clean &= !map[i].shape || !strcmp(map[i].hf, "n_inner");
            continue;
        }
        if (map[i].shape) clean &= v->type == MT_JSON_NUMBER && v->is_integer;
        if (!strcmp(map[i].key, "model.max_position") && v->is_integer) max_pos = v->integer;
        fuzz_hfc_text(v, map[i].key, text, sizeof text);
        if (text[0]) st = mt_recipe_set(r, map[i].key, text, "fuzz");
        else clean = 0;
        /* GPT-2's other activations (e.g. "gelu", the erf form) are no mtrain activation; Mixtral
         * without experts is no Mixtral */
        if (!strcmp(map[i].key, "model.activation"))
            clean &= v->type == MT_JSON_STRING && (!strcmp(v->str, "gelu_new") || !strcmp(v->str, "relu2"));
        if (!strcmp(map[i].key, "model.moe.experts")) clean &= v->is_integer && v->integer > 0;
    }
    /* short sequences, within the learned positions */
    snprintf(text, sizeof text, "%lld", (long long)(max_pos > 0 && max_pos < 8 ? max_pos : 8));
    if (st == MT_OK) st = mt_recipe_set(r, "model.seq_length", text, "fuzz");
    /* the oracle only for configs of mapped and neutral keys, each once */
    for (size_t k = 0; clean && root->type == MT_JSON_OBJECT && k < root->n_items; k++) {
        const char *key = root->items[k].key;
        int known = mt_json_get(root, key) == &root->items[k];
        int found = 0;
        for (size_t i = 0; known && !found && i < n_map; i++) found = !strcmp(key, map[i].hf);
        for (size_t i = 0; known && !found && i < sizeof k_neutral / sizeof k_neutral[0]; i++) found = !strcmp(key, k_neutral[i]);
        found = found || (known && fuzz_hfc_fixed_value(gpt ? 0 : llama ? 1 : 2, key, &root->items[k], root));
        clean = known && found && strlen(key) == root->items[k].n_key_bytes;
    }
    *oracle = clean && root->type == MT_JSON_OBJECT;
    return st;
}

/* One import of dir (config.json, no weights) for recipe r; 1 when mishandled. *accepted: the
 * config passed (the import stopped at the weights). */
static int fuzz_hfc_import(const char *dir, const mt_recipe *r, int *accepted) {
    char save[600];
    snprintf(save, sizeof save, "%s/save", dir);
    mt_hf_import_opts o = {.input = dir, .save = save};
    int n_tensors = 0;
    double seconds = 0;
    mt_clear_error();
    const mt_status st = mt_hf_import(&o, r, &n_tensors, &seconds);
    const char *e = mt_last_error();
    *accepted = st == MT_ERR_IO && strstr(e, "model.safetensors") != NULL;
    const int refused = (st == MT_ERR_CONFIG || st == MT_ERR_UNSUPPORTED || st == MT_ERR_DATA) && strstr(e, "config.json");
    if (*accepted || refused) {
        snprintf(fuzz_hfc_last, sizeof fuzz_hfc_last, "%s", e);
        mt_clear_error();
        return 0;
    }
    fprintf(stderr, "fuzz: import gave %s: %s\n", mt_status_name(st), e);
    return 1;
}

/* 0 when the input was handled as it should be. */
static int fuzz_hfconfig_one(const uint8_t *data, size_t size) {
    static mt_recipe r; /* ~20 KB */
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/mt_fuzz_hfconfig.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    int bad = 0, accepted = 0, any = 0;
    mt_json_doc doc;
    memset(&doc, 0, sizeof doc);
    if (fuzz_write_file(path, data, size)) {
        perror(path);
        bad = 1;
        goto out;
    }
    for (int which = 0; which < 3 && !bad; which++) {
        if (fuzz_hfc_fixed(&r, which) != MT_OK) {
            fprintf(stderr, "fuzz: fixed recipe %d: %s\n", which, mt_last_error());
            bad = 1;
            break;
        }
        bad = fuzz_hfc_import(dir, &r, &accepted);
        any |= accepted;
    }
    mt_status st = mt_json_doc_load(&doc, path);
    if (st != MT_OK) {
        if (st != MT_ERR_DATA || !strstr(mt_last_error(), "config.json"))
            bad = 1, fprintf(stderr, "fuzz: JSON refusal %s: %s\n", mt_status_name(st), mt_last_error());
        if (any) bad = 1, fprintf(stderr, "fuzz: an import accepted a config.json that does not parse\n");
        mt_clear_error();
        goto out;
    }
    int oracle = 0;
    st = fuzz_hfc_derive(doc.root, &r, &oracle);
    if (st == MT_OK) st = mt_recipe_validate(&r, 1);
    if (st != MT_OK) {
        if (st != MT_ERR_CONFIG) bad = 1, fprintf(stderr, "fuzz: recipe refusal %s: %s\n", mt_status_name(st), mt_last_error());
        mt_clear_error();
        goto out;
    }
    const mt_model_cfg *c = &r.model;
    if (c->layers <= 0 || c->hidden <= 0 || c->heads <= 0 || c->kv_heads <= 0 || c->ffn_hidden <= 0 || c->vocab <= 0 ||
        c->seq_length <= 0 || c->max_position <= 0 || (c->moe.experts > 0 && c->moe.top_k <= 0)) {
        fprintf(stderr, "fuzz: a validated recipe has L %d C %d H %d KV %d F %d V %d T %d P %d E %d k %d\n", c->layers,
                c->hidden, c->heads, c->kv_heads, c->ffn_hidden, c->vocab, c->seq_length, c->max_position,
                c->moe.experts, c->moe.top_k);
        bad = 1;
        goto out;
    }
    mt_hf_model m;
    st = mt_hf_model_from_recipe(&r, &m);
    if (st != MT_OK) {
        if (st != MT_ERR_UNSUPPORTED && st != MT_ERR_CONFIG)
            bad = 1, fprintf(stderr, "fuzz: model refusal %s: %s\n", mt_status_name(st), mt_last_error());
        mt_clear_error();
        goto out;
    }
    fuzz_hfc_n_derived++;
    bad = fuzz_hfc_import(dir, &r, &accepted);
    any |= accepted;
    if (!bad && oracle && !accepted) {
        fprintf(stderr, "fuzz: config.json refused against the recipe derived from it: %s\n", fuzz_hfc_last);
        bad = 1;
    }
out:
    fuzz_hfc_n_accepted += any;
    mt_json_doc_free(&doc);
    unlink(path);
    rmdir(dir);
    return bad;
}

/* libFuzzer's entry; with -DMT_FUZZ_REPLAY_MAIN a plain replay driver: fuzz_hfconfig FILE... (e.g. an
 * hfconfig-crash-* file from libFuzzer) */
FUZZ_ENTRY_POINTS(fuzz_hfconfig_one)
