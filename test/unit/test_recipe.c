/* test_recipe.c — the recipe: key table sanity, defaults, every shipped recipe in configs/
 * loads and validates, --set and each Megatron flag class, every load and validation error
 * class (status, key name and file:line in the message), nearest-key suggestions, blends,
 * arch defaults, auto values, write_yaml round trips, derived quantities, and that
 * docs/recipe.md holds the current mt_recipe_print_reference output; the input limits (a file
 * nested 100,000 deep, a file over the size limit, too many keys are refused with their
 * message); a short run's warmup longer than the run validates, and so does its saved recipe.
 * Run from the repo root. `test_recipe --print-reference` prints the reference (to refresh
 * the generated part of docs/recipe.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/recipe/recipe.h"
#include "test/recipe_same.h"
#include "core/recipe/recipe_internal.h"
#include "test/test.h"

static const char *const shipped[] = { "configs/gpt-tiny.yaml",  "configs/llama-tiny.yaml",
                                       "configs/gpt125m.yaml",   "configs/gpt350m.yaml",
                                       "configs/gpt1.3b.yaml",   "configs/gpt175b.yaml",
                                       "configs/llama3-8b.yaml", "configs/llama3-70b.yaml",
                                       "configs/mixtral-8x7b.yaml", NULL };

static mt_status load(mt_recipe *r, const char *yaml) {
    mt_recipe_defaults(r);
    return mt_recipe_load_string(r, yaml, strlen(yaml), "bad.yaml");
}

/* Loads yaml (and validates it with world when world > 0); expects status st and every
 * needle in the message. */
#define EXPECT_ERR(yaml, world, st, ...)                                                       \
    do {                                                                                       \
        mt_recipe r_;                                                                          \
        mt_status s_ = load(&r_, (yaml));                                                      \
        if (s_ == MT_OK && (world) > 0) s_ = mt_recipe_validate(&r_, (world));                 \
        CHECKF(s_ == (st), "status %s for:\n%s\nmessage: %s", mt_status_name(s_), (yaml),      \
               mt_last_error());                                                               \
        const char *needles_[] = { __VA_ARGS__, NULL };                                        \
        for (int i_ = 0; needles_[i_]; i_++) CHECK_STR_CONTAINS(mt_last_error(), needles_[i_]); \
    } while (0)

/* model last so tests can append model keys; appended lines start at line 8 */
#define BASE_MODEL "model:\n  layers: 4\n  hidden: 128\n  heads: 4\n  seq_length: 128\n"
#define BASE "training:\n  iters: 10\n" BASE_MODEL

/* write_yaml, then load the text into fresh defaults. */
static mt_status round_trip(const mt_recipe *r, mt_recipe *back) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return MT_ERR_IO;
    mt_recipe_write_yaml(f, r);
    fclose(f);
    mt_recipe_defaults(back);
    mt_status st = mt_recipe_load_string(back, text, n, "written.yaml");
    if (st != MT_OK) fprintf(stderr, "written yaml:\n%s\n", text);
    free(text);
    return st;
}

static void test_table(void) {
    static const char *const required[] = {
        "model.arch", "model.layers", "model.hidden", "model.heads", "model.kv_heads", "model.ffn_hidden",
        "model.vocab", "model.seq_length", "model.norm", "model.activation", "model.position",
        "model.tie_embeddings", "model.moe.experts", "model.moe.top_k", "model.moe.capacity_factor",
        "model.moe.aux_loss_coeff", "parallel.tensor", "parallel.pipeline", "parallel.virtual_pipeline",
        "parallel.data", "parallel.expert", "parallel.context", "parallel.sequence_parallel",
        "parallel.distributed_optimizer", "training.micro_batch", "training.global_batch", "training.iters",
        "training.tokens", "training.seed", "training.precision", "training.recompute", "optimizer.lr",
        "optimizer.min_lr", "optimizer.warmup_iters", "optimizer.decay", "optimizer.weight_decay",
        "optimizer.beta1", "optimizer.beta2", "optimizer.eps", "optimizer.clip_grad", "data.path",
        "data.split", "data.tokenizer", "data.vocab", "data.merges", "data.cache_path", "checkpoint.dir",
        "checkpoint.save_interval", "checkpoint.load", "logging.interval", "logging.eval_interval",
        "logging.eval_iters", "logging.metrics", "logging.tensorboard_dir", "model.max_position", "model.bias",
        "model.norm_eps", "model.rope_theta", "model.init_std", "parallel.timeout_s", "training.backend",
        "training.threads", "optimizer.decay_iters", "logging.peak_tflops", NULL };
    for (int i = 0; required[i]; i++) CHECKF(mt_recipe_key_find(required[i]) >= 0, "missing key %s", required[i]);
    CHECK(mt_recipe_key_count() == mt_recipe_n_keys && mt_recipe_n_keys <= MT_RECIPE_MAX_KEYS);
    CHECK(mt_recipe_key_find("model.hiden") == -1 && mt_recipe_key_find(NULL) == -1);
    CHECK(mt_recipe_key_name(-1) == NULL && !strcmp(mt_recipe_key_name(mt_recipe_key_find("model.heads")), "model.heads"));
    mt_recipe r;
    memset(&r, 0, sizeof r);
    for (int k = 0; k < mt_recipe_n_keys; k++) {
        const mt_recipe_key *key = &mt_recipe_keys[k];
        char err[256];
        if (key->flags & MT_KF_REQUIRED) CHECKF(!strcmp(key->def, "0"), "%s: required keys default to 0", key->name);
        else CHECKF(mt_recipe_parse_value(&r, k, key->def, err, sizeof err) == MT_OK, "%s default: %s", key->name, err);
        size_t want = key->type == MT_KEY_INT64 || key->type == MT_KEY_UINT64 ? 8
                      : key->type == MT_KEY_STRING                           ? key->n_bytes
                                                                             : 4;
        CHECKF(key->n_bytes == want, "%s: field size %zu for type %d", key->name, key->n_bytes, key->type);
        CHECKF(key->help && key->help[0] && key->unit, "%s: help", key->name);
        CHECKF(key->type != MT_KEY_ENUM || key->enum_names, "%s: enum names", key->name);
        for (int j = 0; j < k; j++) CHECKF(strcmp(key->name, mt_recipe_keys[j].name), "dup %s", key->name);
    }
    for (int i = 0; i < mt_recipe_n_aliases; i++) {
        int k = mt_recipe_key_find(mt_recipe_aliases[i].key);
        CHECKF(k >= 0, "alias %s -> %s", mt_recipe_aliases[i].flag, mt_recipe_aliases[i].key);
        char err[256];
        if (k >= 0 && mt_recipe_aliases[i].fixed)
            CHECKF(mt_recipe_parse_value(&r, k, mt_recipe_aliases[i].fixed, err, sizeof err) == MT_OK, "%s", err);
    }
}

static void test_defaults(void) {
    mt_recipe r;
    mt_recipe_defaults(&r);
    CHECK(r.model.arch == MT_ARCH_GPT && r.model.layers == 0 && r.model.norm == MT_NORM_LAYERNORM);
    CHECK(r.model.tie_embeddings == 1 && r.model.bias == 1 && r.model.moe.experts == 0 && r.model.moe.top_k == 2);
    CHECK_NEAR(r.model.norm_eps, 1e-5, 0, 1e-6);
    CHECK_NEAR(r.model.rope_theta, 10000, 0, 0);
    CHECK_NEAR(r.model.init_std, 0.02, 0, 1e-6);
    CHECK(r.parallel.tensor == 1 && r.parallel.pipeline == 1 && r.parallel.virtual_pipeline == 1);
    CHECK(r.parallel.data == 0 && r.parallel.expert == 1 && r.parallel.context == 1);
    CHECK(r.parallel.sequence_parallel == 0 && r.parallel.distributed_optimizer == 0 && r.parallel.timeout_s == 300);
    CHECK(r.training.micro_batch == 1 && r.training.global_batch == 0 && r.training.iters == 0);
    CHECK(r.training.tokens == 0 && r.training.seed == 1234 && r.training.precision == MT_PREC_FP32);
    CHECK(r.training.recompute == MT_RECOMPUTE_NONE && r.training.backend == MT_BACKEND_AUTO && r.training.threads == 0);
    CHECK_NEAR(r.optimizer.lr, 1e-4, 0, 1e-6);
    CHECK(r.optimizer.min_lr == 0 && r.optimizer.warmup_iters == 0 && r.optimizer.decay == MT_DECAY_COSINE);
    CHECK_NEAR(r.optimizer.weight_decay, 0.01, 0, 1e-6);
    CHECK_NEAR(r.optimizer.beta1, 0.9, 0, 1e-6);
    CHECK_NEAR(r.optimizer.beta2, 0.95, 0, 1e-6);
    CHECK_NEAR(r.optimizer.eps, 1e-8, 0, 1e-6);
    CHECK_NEAR(r.optimizer.clip_grad, 1.0, 0, 0);
    CHECK(!strcmp(r.data.split, "969,30,1") && r.data.tokenizer == MT_TOK_BYTE && r.data.path[0] == 0);
    CHECK(r.logging.interval == 1 && r.logging.eval_interval == 0 && r.logging.eval_iters == 10);
    char buf[256];
    CHECK_STR_CONTAINS(mt_recipe_where(&r, "model.hidden", buf, sizeof buf), "default");

    /* a minimal recipe resolves every auto value */
    CHECK(load(&r, BASE) == MT_OK);
    CHECKF(mt_recipe_validate(&r, 1) == MT_OK, "%s", mt_last_error());
    CHECK(r.model.vocab == 257 && r.model.kv_heads == 4 && r.model.ffn_hidden == 512 && r.model.max_position == 128);
    CHECK(r.parallel.data == 1 && r.training.global_batch == 1 && r.training.tokens == 10 * 128);
    CHECK(r.optimizer.decay_iters == 10);
    CHECK(!mt_recipe_key_is_set(&r, mt_recipe_key_find("model.vocab")));
    CHECK(mt_recipe_key_is_set(&r, mt_recipe_key_find("model.hidden")));
    CHECK_STR_CONTAINS(mt_recipe_where(&r, "model.hidden", buf, sizeof buf), "bad.yaml:5");
    CHECK_STR_CONTAINS(mt_recipe_where(&r, "parallel.data", buf, sizeof buf), "derived");
    /* validating again with another world size derives dp and global_batch again */
    CHECKF(mt_recipe_validate(&r, 4) == MT_OK, "%s", mt_last_error());
    CHECK(r.parallel.data == 4 && r.training.global_batch == 4 && r.training.tokens == 10 * 4 * 128);
    /* training length from tokens */
    CHECK(load(&r, "model: {layers: 2, hidden: 64, heads: 2, seq_length: 100}\ntraining: {tokens: 1001, global_batch: 2}\n") == MT_OK);
    CHECKF(mt_recipe_validate(&r, 1) == MT_OK, "%s", mt_last_error());
    CHECK(r.training.iters == 6 && r.training.tokens == 1001);
    mt_recipe back;
    CHECK(round_trip(&r, &back) == MT_OK && recipe_same_values(&r, &back));
    CHECKF(mt_recipe_validate(&back, 1) == MT_OK, "%s", mt_last_error());
    /* an empty recipe is fine to load */
    CHECK(load(&r, "") == MT_OK && load(&r, "# only a comment\n") == MT_OK && load(&r, "~\n") == MT_OK);
    CHECK(load(&r, "model:\nparallel: ~\n") == MT_OK);
}

static void test_shipped(void) {
    for (int i = 0; shipped[i]; i++) {
        mt_recipe r, back;
        mt_recipe_defaults(&r);
        mt_status st = mt_recipe_load_file(&r, shipped[i]);
        CHECKF(st == MT_OK, "%s: %s", shipped[i], mt_last_error());
        if (st != MT_OK) continue;
        CHECKF(round_trip(&r, &back) == MT_OK && recipe_same_values(&r, &back), "%s: round trip before validate", shipped[i]);
        int dp = r.parallel.data > 0 ? r.parallel.data : 1;
        int world = r.parallel.tensor * r.parallel.pipeline * r.parallel.context * dp;
        st = mt_recipe_validate(&r, world);
        CHECKF(st == MT_OK, "%s (world %d): %s", shipped[i], world, mt_last_error());
        CHECKF(round_trip(&r, &back) == MT_OK && recipe_same_values(&r, &back), "%s: round trip after validate", shipped[i]);
        CHECKF(mt_recipe_validate(&back, world) == MT_OK, "%s: revalidate: %s", shipped[i], mt_last_error());
        CHECK(recipe_same_values(&r, &back));
        CHECKF(mt_recipe_micro_batches(&r) * r.training.micro_batch * r.parallel.data == r.training.global_batch,
               "%s", shipped[i]);
        CHECK(mt_recipe_head_dim(&r) * r.model.heads == r.model.hidden);
    }
    mt_recipe r;
    mt_recipe_defaults(&r);
    CHECK(mt_recipe_load_file(&r, "configs/gpt-tiny.yaml") == MT_OK && mt_recipe_validate(&r, 1) == MT_OK);
    CHECK(r.model.layers == 4 && r.model.hidden == 128 && r.model.heads == 4 && r.model.vocab == 257);
    CHECK(r.training.micro_batch == 8 && r.training.global_batch == 8 && r.training.iters == 300);
    CHECK(!strcmp(r.data.path, "data/kjv_text_document") && r.logging.interval == 10);
    CHECK(r.model.norm == MT_NORM_LAYERNORM && r.model.position == MT_POS_LEARNED && r.model.ffn_hidden == 512);
    CHECK(mt_recipe_padded_vocab(&r) == 384);
    mt_recipe_defaults(&r);
    CHECK(mt_recipe_load_file(&r, "configs/llama-tiny.yaml") == MT_OK && mt_recipe_validate(&r, 1) == MT_OK);
    CHECK(r.model.norm == MT_NORM_RMSNORM && r.model.activation == MT_ACT_SWIGLU && r.model.position == MT_POS_ROPE);
    CHECK(!r.model.tie_embeddings && !r.model.bias && r.model.kv_heads == 2 && r.model.ffn_hidden == 344);
    mt_recipe_defaults(&r); /* data: auto recipes also take a whole node */
    CHECK(mt_recipe_load_file(&r, "configs/gpt125m.yaml") == MT_OK && mt_recipe_validate(&r, 8) == MT_OK);
    CHECK(r.parallel.data == 8 && mt_recipe_micro_batches(&r) == 8 && mt_recipe_padded_vocab(&r) == 50304);
    mt_recipe_defaults(&r);
    CHECK(mt_recipe_load_file(&r, "configs/gpt175b.yaml") == MT_OK && mt_recipe_validate(&r, 1536) == MT_OK);
    CHECK(r.training.iters == 95368 && r.training.tokens == 300000000000LL);
    mt_recipe_defaults(&r);
    CHECK(mt_recipe_load_file(&r, "configs/mixtral-8x7b.yaml") == MT_OK);
    CHECK(r.model.moe.experts == 8 && r.model.moe.top_k == 2 && r.parallel.expert == 8);
    CHECK(mt_recipe_load_file(&r, "configs/no-such.yaml") == MT_ERR_IO);
    CHECK_STR_CONTAINS(mt_last_error(), "configs/no-such.yaml");
}

static void test_load_errors(void) {
    EXPECT_ERR("model:\n  layers: 4\n  hiden: 128\n", 0, MT_ERR_CONFIG, "bad.yaml:3", "model.hiden",
               "did you mean 'model.hidden'?");
    EXPECT_ERR("modle:\n  layers: 4\n", 0, MT_ERR_CONFIG, "bad.yaml:1", "unknown section 'modle'",
               "did you mean 'model'?");
    EXPECT_ERR("training:\n  lr: 3e-4\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "'training.lr'", "did you mean 'optimizer.lr'?");
    EXPECT_ERR("hidden: 3\n", 0, MT_ERR_CONFIG, "bad.yaml:1", "did you mean 'model.hidden'?");
    EXPECT_ERR("model:\n  zzzzqqqq: 1\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "unknown key 'model.zzzzqqqq'", "docs/recipe.md");
    EXPECT_ERR("model:\n  moe:\n    expert: 8\n", 0, MT_ERR_CONFIG, "bad.yaml:3", "did you mean 'model.moe.experts'?");
    /* wrong types */
    EXPECT_ERR("model:\n  hidden: abc\n", 0, MT_ERR_CONFIG, "bad.yaml:2: model.hidden: expected an integer, got 'abc'");
    EXPECT_ERR("model:\n\n  layers: 1.5\n", 0, MT_ERR_CONFIG, "bad.yaml:3", "model.layers", "expected an integer, got '1.5'");
    EXPECT_ERR("training:\n  iters: 99999999999999999999\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "training.iters", "out of range");
    EXPECT_ERR("training:\n  iters: 0x10\n", 0, MT_ERR_CONFIG, "training.iters", "expected an integer");
    EXPECT_ERR("training:\n  iters: 1_000\n", 0, MT_ERR_CONFIG, "training.iters", "expected an integer");
    EXPECT_ERR("optimizer:\n  lr: fast\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "optimizer.lr", "expected a number");
    EXPECT_ERR("optimizer:\n  lr: .nan\n", 0, MT_ERR_CONFIG, "optimizer.lr", "expected a number");
    EXPECT_ERR("optimizer:\n  lr: 1e999\n", 0, MT_ERR_CONFIG, "optimizer.lr", "out of range");
    EXPECT_ERR("parallel:\n  sequence_parallel: maybe\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "parallel.sequence_parallel",
               "expected true or false");
    EXPECT_ERR("training:\n  seed: -1\n", 0, MT_ERR_CONFIG, "training.seed", "non-negative");
    /* ranges */
    EXPECT_ERR("parallel:\n  tensor: 0\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "parallel.tensor", "out of range", "minimum 1");
    EXPECT_ERR("model:\n  heads: -4\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "model.heads", "out of range");
    EXPECT_ERR("optimizer:\n  beta2: 1.0\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "optimizer.beta2", "out of range");
    EXPECT_ERR("optimizer:\n  eps: 0\n", 0, MT_ERR_CONFIG, "optimizer.eps", "out of range");
    EXPECT_ERR("optimizer:\n  eps: 1e-300\n", 0, MT_ERR_CONFIG, "optimizer.eps", "out of range");
    /* enums */
    EXPECT_ERR("model:\n  arch: bert\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "model.arch", "unknown value 'bert'",
               "allowed: gpt, llama");
    EXPECT_ERR("model:\n  norm: batchnorm\n", 0, MT_ERR_CONFIG, "allowed: layernorm, rmsnorm");
    EXPECT_ERR("optimizer:\n  decay: step\n", 0, MT_ERR_CONFIG, "allowed: cosine, linear, constant");
    EXPECT_ERR("training:\n  recompute: some\n", 0, MT_ERR_CONFIG, "allowed: none, selective, full");
    EXPECT_ERR("training:\n  precision: fp16\n", 0, MT_ERR_CONFIG, "allowed: fp32, bf16");
    EXPECT_ERR("data:\n  tokenizer: sp\n", 0, MT_ERR_CONFIG, "allowed: byte, gpt2bpe, hf");
    EXPECT_ERR("training:\n  backend: rocm\n", 0, MT_ERR_CONFIG, "allowed: auto, cpu, cuda");
    /* duplicates */
    EXPECT_ERR("model:\n  layers: 4\n  layers: 5\n", 0, MT_ERR_CONFIG, "bad.yaml:3", "model.layers", "duplicate key",
               "line 2");
    EXPECT_ERR("model:\n  layers: 4\ntraining:\n  iters: 3\nmodel:\n  hidden: 8\n", 0, MT_ERR_CONFIG, "bad.yaml:5",
               "model", "duplicate section", "line 1");
    EXPECT_ERR("model:\n  moe: {experts: 2}\n  moe.experts: 3\n", 0, MT_ERR_CONFIG, "bad.yaml:3", "duplicate key");
    /* YAML syntax */
    EXPECT_ERR("model:\n  layers: 4\n hidden: 3\n", 0, MT_ERR_CONFIG, "bad.yaml:3", "YAML syntax error");
    EXPECT_ERR("model: [1, 2\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "YAML syntax error");
    EXPECT_ERR("model:\n  layers: \"4\n", 0, MT_ERR_CONFIG, "bad.yaml:", "YAML syntax error");
    EXPECT_ERR("model:\n  layers: 4\n---\nmodel:\n  layers: 5\n", 0, MT_ERR_CONFIG, "bad.yaml:4", "second YAML document");
    EXPECT_ERR("a\xff\xfe: 1\n", 0, MT_ERR_CONFIG, "bad.yaml", "UTF-8");
    /* lists and mappings where a value is expected, and the reverse */
    EXPECT_ERR("model:\n  layers: [4, 5]\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "model.layers", "expected a single value, got a list");
    EXPECT_ERR("model:\n  layers:\n    a: 1\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "model.layers", "got a mapping");
    EXPECT_ERR("model: 12\n", 0, MT_ERR_CONFIG, "bad.yaml:1", "model", "is a section");
    EXPECT_ERR("model:\n  - layers\n", 0, MT_ERR_CONFIG, "bad.yaml:1", "model", "is a section");
    EXPECT_ERR("- model\n", 0, MT_ERR_CONFIG, "bad.yaml:1", "expected a mapping of sections");
    EXPECT_ERR("model:\n  [a]: 1\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "plain name");
    EXPECT_ERR("model:\n  layers:\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "model.layers", "no value");
    /* accepted spellings */
    mt_recipe r;
    CHECK(load(&r, "parallel:\n  sequence_parallel: yes\n  distributed_optimizer: 1\n  data: auto\n") == MT_OK);
    CHECK(r.parallel.sequence_parallel == 1 && r.parallel.distributed_optimizer == 1 && r.parallel.data == 0);
    CHECK(load(&r, "parallel: {sequence_parallel: No, distributed_optimizer: off, data: 4}\n") == MT_OK);
    CHECK(r.parallel.sequence_parallel == 0 && r.parallel.distributed_optimizer == 0 && r.parallel.data == 4);
    CHECK(load(&r, "optimizer: {lr: 3e-4}\ntraining: {tokens: 300e9, iters: \"12\"}\nmodel: {arch: LLAMA}\n") == MT_OK);
    CHECK_NEAR(r.optimizer.lr, 3e-4, 0, 1e-7);
    CHECK(r.training.tokens == 300000000000LL && r.training.iters == 12 && r.model.arch == MT_ARCH_LLAMA);
    CHECK(load(&r, "model.hidden: 64\nmodel:\n  moe.experts: 4\ncheckpoint:\n  load:\n") == MT_OK);
    CHECK(r.model.hidden == 64 && r.model.moe.experts == 4 && r.checkpoint.load[0] == 0);
    char big[2000];
    snprintf(big, sizeof big, "checkpoint:\n  dir: %01100d\n", 7);
    EXPECT_ERR(big, 0, MT_ERR_CONFIG, "bad.yaml:2", "checkpoint.dir", "longer than the 1023 allowed");
    /* anchors and aliases are plain YAML and work */
    CHECK(load(&r, "model: &m {layers: 2}\nparallel: {tensor: 2, pipeline: 2}\n") == MT_OK && r.model.layers == 2);
}

static void test_blend(void) {
    mt_recipe r;
    CHECK(load(&r, "data:\n  path: [0.3, a/b_text_document, 0.7, c]\n") == MT_OK);
    CHECK(!strcmp(r.data.path, "0.3 a/b_text_document 0.7 c"));
    CHECK(load(&r, "data:\n  path:\n    - {weight: 1, path: x}\n    - weight: 2\n      path: y\n") == MT_OK);
    CHECK(!strcmp(r.data.path, "1 x 2 y"));
    CHECK(load(&r, "data:\n  path: [only]\n") == MT_OK && !strcmp(r.data.path, "only"));
    CHECK(load(&r, "data:\n  path: \"0.5 p 0.5 q\"\n") == MT_OK && !strcmp(r.data.path, "0.5 p 0.5 q"));
    EXPECT_ERR("data:\n  path: [0.3, a, 0.7]\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "data.path", "pairs");
    EXPECT_ERR("data:\n  path: [x, a, 0.7, b]\n", 0, MT_ERR_CONFIG, "bad.yaml:2", "data.path", "blend weight 'x'");
    EXPECT_ERR("data:\n  path: []\n", 0, MT_ERR_CONFIG, "data.path", "empty list");
    EXPECT_ERR("data:\n  path:\n    - {weight: 1, file: x}\n", 0, MT_ERR_CONFIG, "bad.yaml:3", "unexpected key 'file'");
    EXPECT_ERR("data:\n  path:\n    - {weight: 1}\n", 0, MT_ERR_CONFIG, "needs both weight and path");
    EXPECT_ERR("data:\n  path: [1, \"a b\"]\n", 0, MT_ERR_CONFIG, "has spaces");
    EXPECT_ERR("data:\n  path: [[1], a]\n", 0, MT_ERR_CONFIG, "plain values");
    EXPECT_ERR("data:\n  path: [{weight: 1, path: a}, b]\n", 0, MT_ERR_CONFIG, "mixes");
    EXPECT_ERR(BASE "data:\n  path: \"0.3 a 0.7\"\n", 1, MT_ERR_CONFIG, "bad.yaml:9", "data.path", "weight/path pairs");
    EXPECT_ERR(BASE "data:\n  split: \"90,x\"\n", 1, MT_ERR_CONFIG, "bad.yaml:9", "data.split");
    CHECK(load(&r, BASE "data:\n  split: \"0.9, 0.05, 0.05\"\n") == MT_OK && mt_recipe_validate(&r, 1) == MT_OK);
}

static void test_validate_errors(void) {
    /* layout */
    EXPECT_ERR(BASE "parallel:\n  tensor: 2\n  data: 2\n", 8, MT_ERR_CONFIG, "bad.yaml:10", "parallel.data",
               "2*1*1*2 = 4 ranks but the world has 8", "set parallel.data: 4");
    EXPECT_ERR(BASE "parallel:\n  tensor: 4\n", 6, MT_ERR_CONFIG, "parallel.data", "auto needs the world size (6 ranks)",
               "parallel.tensor: line 9");
    EXPECT_ERR(BASE "parallel:\n  tensor: 8\n", 8, MT_ERR_CONFIG, "bad.yaml:6", "model.heads", "parallel.tensor = 8 (line 9)",
               "1, 2, 4");
    EXPECT_ERR(BASE "  kv_heads: 3\n", 1, MT_ERR_CONFIG, "bad.yaml:8", "model.kv_heads", "does not divide model.heads");
    EXPECT_ERR(BASE "  kv_heads: 2\nparallel:\n  tensor: 4\n", 4, MT_ERR_CONFIG, "bad.yaml:8", "model.kv_heads",
               "do not split over parallel.tensor = 4");
    EXPECT_ERR("model:\n  layers: 4\n  hidden: 100\n  heads: 3\n  seq_length: 8\ntraining: {iters: 1}\n", 1,
               MT_ERR_CONFIG, "bad.yaml:3", "model.hidden", "not divisible by model.heads = 3 (line 4)");
    EXPECT_ERR(BASE "parallel:\n  pipeline: 3\n", 3, MT_ERR_CONFIG, "bad.yaml:4", "model.layers",
               "parallel.pipeline = 3 stages (line 9)");
    EXPECT_ERR(BASE "parallel:\n  pipeline: 2\n  virtual_pipeline: 4\n", 2, MT_ERR_CONFIG, "bad.yaml:10",
               "parallel.virtual_pipeline", "pp*vpp = 2*4");
    EXPECT_ERR(BASE "parallel:\n  virtual_pipeline: 2\n", 1, MT_ERR_CONFIG, "parallel.virtual_pipeline", "pipeline");
    EXPECT_ERR("training:\n  iters: 10\n  micro_batch: 2\n  global_batch: 6\n" BASE_MODEL, 2, MT_ERR_CONFIG,
               "bad.yaml:4", "training.global_batch", "micro_batch*dp = 2*2 = 4", "training.micro_batch: line 3");
    EXPECT_ERR(BASE "  ffn_hidden: 6\nparallel: {tensor: 4}\n", 4, MT_ERR_CONFIG, "bad.yaml:8", "model.ffn_hidden");
    /* moe */
    EXPECT_ERR(BASE "  moe:\n    experts: 6\nparallel:\n  expert: 4\n", 4, MT_ERR_CONFIG, "bad.yaml:9",
               "model.moe.experts", "parallel.expert = 4 (line 11)");
    EXPECT_ERR(BASE "  moe:\n    experts: 2\n    top_k: 3\n", 1, MT_ERR_CONFIG, "bad.yaml:10", "model.moe.top_k");
    EXPECT_ERR(BASE "  moe:\n    experts: 2\n    layer_pattern: \"011\"\n", 1, MT_ERR_CONFIG, "bad.yaml:10",
               "model.moe.layer_pattern", "gives 3 layers");
    EXPECT_ERR(BASE "  moe:\n    experts: 2\n    layer_pattern: \"[0]+[1\"\n", 1, MT_ERR_CONFIG, "bad.yaml:10",
               "model.moe.layer_pattern", "is not one 0 / 1 per layer");
    EXPECT_ERR(BASE "parallel:\n  expert: 2\n", 2, MT_ERR_CONFIG, "bad.yaml:9", "parallel.expert", "dense");
    /* layers without RoPE (Megatron's --no-rope-freq) */
    EXPECT_ERR(BASE "  position: rope\n  no_rope_layers: \"3\"\n", 1, MT_ERR_CONFIG, "bad.yaml:9",
               "model.no_rope_layers", "3 does not divide model.layers = 4");
    EXPECT_ERR(BASE "  position: rope\n  no_rope_layers: \"[0]*3\"\n", 1, MT_ERR_CONFIG, "bad.yaml:9",
               "model.no_rope_layers", "gives 3 layers, model.layers is 4");
    EXPECT_ERR(BASE "  position: rope\n  no_rope_layers: \"2x\"\n", 1, MT_ERR_CONFIG, "bad.yaml:9",
               "model.no_rope_layers", "is neither N");
    EXPECT_ERR(BASE "  no_rope_layers: \"2\"\n", 1, MT_ERR_CONFIG, "bad.yaml:8", "model.no_rope_layers",
               "no RoPE to skip");
    /* the router rules of Megatron's TopKRouter: bad values name their key */
    EXPECT_ERR(BASE "  moe: {experts: 8, top_k: 2, apply_probs_on_input: true}\n", 1, MT_ERR_CONFIG,
               "model.moe.apply_probs_on_input", "top_k = 2");
    EXPECT_ERR(BASE "  moe: {experts: 8, top_k: 2, num_groups: 3, group_topk: 1}\n", 1, MT_ERR_CONFIG,
               "model.moe.num_groups", "do not split the 8 experts");
    EXPECT_ERR(BASE "  moe: {experts: 8, top_k: 4, num_groups: 2, group_topk: 3}\n", 1, MT_ERR_CONFIG,
               "model.moe.group_topk", "only model.moe.num_groups = 2");
    EXPECT_ERR(BASE "  moe: {experts: 8, top_k: 2, num_groups: 4, group_topk: 3}\n", 1, MT_ERR_CONFIG,
               "model.moe.group_topk", "top_k = 2");
    EXPECT_ERR(BASE "  moe: {experts: 8, top_k: 4, num_groups: 4, group_topk: 1}\n", 1, MT_ERR_CONFIG,
               "model.moe.top_k", "from 1 kept groups of 2 experts");
    EXPECT_ERR(BASE "  moe: {experts: 8, top_k: 2, group_topk: 1}\n", 1, MT_ERR_CONFIG, "model.moe.group_topk",
               "needs num_groups > 1");
    EXPECT_ERR(BASE "  moe: {experts: 8, top_k: 2, expert_bias: true}\n", 1, MT_ERR_CONFIG, "model.moe.expert_bias",
               "score_function: sigmoid");
    EXPECT_ERR(BASE "  moe: {experts: 8, score_function: sqrtsoftplus}\n", 1, MT_ERR_CONFIG,
               "model.moe.score_function");
    EXPECT_ERR(BASE "  moe: {experts: 8, topk_scaling_factor: 0}\n", 1, MT_ERR_CONFIG, "model.moe.topk_scaling_factor");
    {
        mt_recipe r;
        CHECK(load(&r, BASE "  moe: {experts: 8, top_k: 4, score_function: sigmoid, expert_bias: true, num_groups: 4, "
                            "group_topk: 2, topk_scaling_factor: 2.5, load_balancing: seq_aux_loss}\n") == MT_OK);
        CHECK(mt_recipe_validate(&r, 1) == MT_OK);
        CHECK(r.model.moe.score_function == 1 && r.model.moe.expert_bias && r.model.moe.num_groups == 4 &&
              r.model.moe.group_topk == 2 && r.model.moe.topk_scaling_factor == 2.5f &&
              r.model.moe.load_balancing == MT_MOE_LB_SEQ_AUX && r.model.moe.bias_update_rate == 1e-3f);
    }
    EXPECT_ERR(BASE "  moe: {experts: 4}\nparallel: {expert: 4, tensor: 2, data: 2}\n", 4, MT_ERR_CONFIG,
               "bad.yaml:9", "parallel.expert", "must divide dp*cp");
    /* sequence / context parallel */
    EXPECT_ERR(BASE "parallel:\n  sequence_parallel: true\n", 1, MT_ERR_CONFIG, "bad.yaml:9",
               "parallel.sequence_parallel", "needs parallel.tensor > 1", "sequence_parallel: false");
    EXPECT_ERR("model: {layers: 2, hidden: 64, heads: 4, seq_length: 130}\ntraining: {iters: 1}\n"
               "parallel: {tensor: 4, sequence_parallel: true}\n", 4, MT_ERR_CONFIG, "bad.yaml:1", "model.seq_length",
               "not divisible by parallel.tensor = 4", "sequence_parallel: false");
    /* the rule itself (mt_recipe_check_sp_split, shared by the validator, the planner and the
     * trainer): seq_length % tp under sequence parallelism, nothing otherwise */
    {
        mt_recipe sr;
        mt_recipe_defaults(&sr);
        sr.model.seq_length = 130;
        sr.parallel.tensor = 4;
        sr.parallel.sequence_parallel = 1;
        CHECK(mt_recipe_check_sp_split(&sr) == MT_ERR_CONFIG);
        CHECK_STR_CONTAINS(mt_last_error(), "model.seq_length: 130 is not divisible by parallel.tensor = 4");
        CHECK_STR_CONTAINS(mt_last_error(), "e.g. 132");
        sr.model.seq_length = 128;
        CHECK(mt_recipe_check_sp_split(&sr) == MT_OK);
        sr.model.seq_length = 130;
        sr.parallel.sequence_parallel = 0;
        CHECK(mt_recipe_check_sp_split(&sr) == MT_OK);
        sr.parallel.sequence_parallel = 1;
        sr.parallel.tensor = 1;
        CHECK(mt_recipe_check_sp_split(&sr) == MT_OK);
    }
    EXPECT_ERR("model: {layers: 2, hidden: 64, heads: 4, seq_length: 130}\ntraining: {iters: 1}\n"
               "parallel: {context: 2}\n", 2, MT_ERR_CONFIG, "model.seq_length", "2*parallel.context");
    /* optimizer and lengths */
    EXPECT_ERR(BASE "optimizer:\n  lr: 1e-4\n  min_lr: 1e-3\n", 1, MT_ERR_CONFIG, "bad.yaml:10", "optimizer.min_lr",
               "optimizer.lr = 0.0001 (line 9)");
    EXPECT_ERR(BASE "optimizer:\n  warmup_iters: 5\n  decay_iters: 4\n", 1, MT_ERR_CONFIG, "optimizer.warmup_iters",
               "decay_iters = 4 (line 10)");
    EXPECT_ERR("model: {layers: 2, hidden: 64, heads: 4, seq_length: 8}\n", 1, MT_ERR_CONFIG, "training.iters",
               "set training.iters or training.tokens");
    EXPECT_ERR("training:\n  iters: 10\n  tokens: 5\n" BASE_MODEL, 1, MT_ERR_CONFIG, "bad.yaml:3", "training.tokens",
               "set only one");
    /* required and derived-from-arch */
    EXPECT_ERR("model: {hidden: 64, heads: 4, seq_length: 8}\ntraining: {iters: 1}\n", 1, MT_ERR_CONFIG, "model.layers",
               "not set", "default");
    EXPECT_ERR(BASE "  arch: llama\n", 1, MT_ERR_CONFIG, "model.ffn_hidden", "about 8/3*hidden = 344");
    EXPECT_ERR(BASE "data:\n  tokenizer: hf\n", 1, MT_ERR_CONFIG, "model.vocab", "hf tokenizer");
    EXPECT_ERR(BASE "  vocab: 100\ndata:\n  path: d\n", 1, MT_ERR_CONFIG, "bad.yaml:8", "model.vocab", "257");
    EXPECT_ERR(BASE "  vocab: 1000\ndata:\n  tokenizer: gpt2bpe\n  path: d\n", 1, MT_ERR_CONFIG, "bad.yaml:8",
               "model.vocab", "50257");
    {   /* without data any vocab goes (gradient tests use tiny ones) */
        mt_recipe r;
        CHECK(load(&r, BASE "  vocab: 37\n") == MT_OK && mt_recipe_validate(&r, 1) == MT_OK);
    }
    EXPECT_ERR(BASE "  max_position: 64\n", 1, MT_ERR_CONFIG, "bad.yaml:8", "model.max_position", "fewer than");
    EXPECT_ERR("model: {layers: 2, hidden: 12, heads: 4, seq_length: 8, position: rope}\ntraining: {iters: 1}\n", 1,
               MT_ERR_CONFIG, "bad.yaml:1", "model.position", "even head dimension");
    EXPECT_ERR(BASE "logging:\n  eval_interval: 5\n  eval_iters: 0\n", 1, MT_ERR_CONFIG, "bad.yaml:10", "logging.eval_iters",
               "(line 9)");
    EXPECT_ERR(BASE "checkpoint:\n  save_interval: 5\n", 1, MT_ERR_CONFIG, "bad.yaml:9", "checkpoint.save_interval",
               "checkpoint.dir");
    /* several problems at once, one per line */
    EXPECT_ERR(BASE "parallel:\n  tensor: 8\n  sequence_parallel: true\noptimizer:\n  min_lr: 1\n", 8, MT_ERR_CONFIG,
               "model.heads", "optimizer.min_lr", "\n");
    mt_recipe r;
    CHECK(load(&r, BASE) == MT_OK);
    CHECK(mt_recipe_validate(&r, 0) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "world size 0");
    /* values assigned in C are range-checked too */
    CHECK(load(&r, BASE) == MT_OK);
    r.parallel.tensor = -3;
    CHECK(mt_recipe_validate(&r, 1) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "parallel.tensor");
    CHECK(load(&r, BASE) == MT_OK);
    r.model.norm = (mt_norm)7;
    CHECK(mt_recipe_validate(&r, 1) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "model.norm");
}

static void test_arch_defaults(void) {
    mt_recipe r;
    CHECK(load(&r, BASE "  arch: llama\n  ffn_hidden: 344\n") == MT_OK);
    CHECK(r.model.norm == MT_NORM_LAYERNORM); /* loading does not change other keys */
    CHECK(mt_recipe_validate(&r, 1) == MT_OK);
    CHECK(r.model.norm == MT_NORM_RMSNORM && r.model.activation == MT_ACT_SWIGLU && r.model.position == MT_POS_ROPE);
    CHECK(r.model.tie_embeddings == 0 && r.model.bias == 0);
    /* switching back to gpt and validating again restores the gpt defaults */
    CHECK(mt_recipe_set(&r, "model.arch", "gpt", NULL) == MT_OK && mt_recipe_validate(&r, 1) == MT_OK);
    CHECK(r.model.norm == MT_NORM_LAYERNORM && r.model.activation == MT_ACT_GELU && r.model.position == MT_POS_LEARNED);
    CHECK(r.model.tie_embeddings == 1 && r.model.bias == 1);
    /* explicit choices win */
    CHECK(load(&r, BASE "  arch: llama\n  ffn_hidden: 344\n  norm: layernorm\n  tie_embeddings: true\n") == MT_OK);
    CHECK(mt_recipe_validate(&r, 1) == MT_OK);
    CHECK(r.model.norm == MT_NORM_LAYERNORM && r.model.tie_embeddings == 1 && r.model.activation == MT_ACT_SWIGLU);
    CHECK(load(&r, BASE "  arch: gpt\n  position: rope\n  bias: false\n") == MT_OK && mt_recipe_validate(&r, 1) == MT_OK);
    CHECK(r.model.position == MT_POS_ROPE && r.model.bias == 0 && r.model.norm == MT_NORM_LAYERNORM);
    /* a value assigned in C (no origin) that differs from the default is kept */
    CHECK(load(&r, BASE) == MT_OK);
    r.model.norm = MT_NORM_RMSNORM;
    CHECK(mt_recipe_validate(&r, 1) == MT_OK && r.model.norm == MT_NORM_RMSNORM);
    /* --set model.arch=llama via flags */
    CHECK(load(&r, BASE "  ffn_hidden: 344\n") == MT_OK);
    char a0[] = "mtrain", a1[] = "--set", a2[] = "model.arch=llama";
    char *argv[] = { a0, a1, a2, NULL };
    int argc = 3;
    CHECK(mt_recipe_apply_args(&r, &argc, argv) == MT_OK && argc == 1);
    CHECK(mt_recipe_validate(&r, 1) == MT_OK && r.model.norm == MT_NORM_RMSNORM);
}

static void test_args(void) {
    mt_recipe r;
    char buf[512];
    CHECK(load(&r, BASE) == MT_OK);
    /* --set forms */
    CHECK(mt_recipe_set(&r, "model.hidden", "256", NULL) == MT_OK && r.model.hidden == 256);
    CHECK_STR_CONTAINS(mt_recipe_where(&r, "model.hidden", buf, sizeof buf), "--set model.hidden=256");
    CHECK(mt_recipe_set(&r, "model.heads", "x7", NULL) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "--set model.heads=x7: model.heads: expected an integer");
    CHECK(mt_recipe_set(&r, "model.hiden", "3", NULL) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "--set model.hiden=3: unknown key 'model.hiden'; did you mean 'model.hidden'?");
    CHECK(mt_recipe_set(&r, "model", "3", NULL) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "is a section");
    {
        char *v[] = { "prog", "--set", "model.layers=8", "--set", "optimizer.lr", "3e-4", "--set=training.seed=7",
                      "pos", "--unknown", "x", "--set", "data.path=0.5 a 0.5 b", NULL };
        int c = 12;
        CHECKF(mt_recipe_apply_args(&r, &c, v) == MT_OK, "%s", mt_last_error());
        CHECK(r.model.layers == 8 && r.training.seed == 7 && !strcmp(r.data.path, "0.5 a 0.5 b"));
        CHECK_NEAR(r.optimizer.lr, 3e-4, 0, 1e-7);
        CHECK(c == 4 && !strcmp(v[0], "prog") && !strcmp(v[1], "pos") && !strcmp(v[2], "--unknown") &&
              !strcmp(v[3], "x") && v[4] == NULL);
    }
    /* aliases: integer with space and '=', switch, enum, float, string, multi-word data path */
    {
        char *v[] = { "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size=2",
                      "--virtual-pipeline-model-parallel-size", "2", "--context-parallel-size", "1",
                      "--expert-model-parallel-size", "1", "--sequence-parallel", "--use-distributed-optimizer",
                      "--micro-batch-size", "2", "--global-batch-size=8", "--seq-length", "64", "--train-iters", "20",
                      "--lr", "6e-4", "--min-lr=6e-5", "--lr-warmup-iters", "2", "--lr-decay-style", "linear",
                      "--lr-decay-iters", "15", "--weight-decay", "0.1", "--adam-beta1", "0.8", "--adam-beta2", "0.99",
                      "--adam-eps", "1e-6", "--clip-grad", "0.5", "--seed", "42", "--num-layers", "8",
                      "--hidden-size", "256", "--num-attention-heads", "8", "--group-query-attention", "--num-query-groups", "4",
                      "--ffn-hidden-size", "1024", "--max-position-embeddings", "64", "--vocab-size", "50304",
                      "--data-path", "0.4", "x", "0.6", "y", "--split", "98,1,1", "--vocab-file", "v.json",
                      "--merge-file", "m.txt", "--save", "ck", "--load", "ck0", "--save-interval", "5",
                      "--log-interval", "2", "--eval-interval", "10", "--eval-iters", "3", "--bf16",
                      "--recompute-granularity", "full", "--backend", "cpu", "--threads", "3", "--metrics", "m.jsonl",
                      "--tensorboard-dir", "tb", "--config", "c.yaml", NULL };
        int c = 0;
        while (v[c]) c++;
        CHECKF(mt_recipe_apply_args(&r, &c, v) == MT_OK, "%s", mt_last_error());
        CHECK(c == 2 && !strcmp(v[0], "--config") && !strcmp(v[1], "c.yaml"));
        CHECK(r.parallel.tensor == 2 && r.parallel.pipeline == 2 && r.parallel.virtual_pipeline == 2);
        CHECK(r.parallel.sequence_parallel == 1 && r.parallel.distributed_optimizer == 1);
        CHECK(r.training.micro_batch == 2 && r.training.global_batch == 8 && r.model.seq_length == 64);
        CHECK(r.training.iters == 20 && r.optimizer.warmup_iters == 2 && r.optimizer.decay == MT_DECAY_LINEAR);
        CHECK(r.optimizer.decay_iters == 15 && r.training.seed == 42 && r.model.layers == 8 && r.model.hidden == 256);
        CHECK_NEAR(r.optimizer.lr, 6e-4, 0, 1e-6);
        CHECK_NEAR(r.optimizer.min_lr, 6e-5, 0, 1e-6);
        CHECK_NEAR(r.optimizer.beta1, 0.8, 0, 1e-6);
        CHECK_NEAR(r.optimizer.beta2, 0.99, 0, 1e-6);
        CHECK_NEAR(r.optimizer.eps, 1e-6, 0, 1e-6);
        CHECK_NEAR(r.optimizer.clip_grad, 0.5, 0, 0);
        CHECK_NEAR(r.optimizer.weight_decay, 0.1, 0, 1e-6);
        CHECK(r.model.heads == 8 && r.model.kv_heads == 4 && r.model.ffn_hidden == 1024 && r.model.max_position == 64);
        CHECK(r.data.tokenizer == MT_TOK_GPT2BPE); /* --vocab-file + --merge-file: Megatron's GPT-2 BPE */
        CHECK(r.model.vocab == 50304 && !strcmp(r.data.path, "0.4 x 0.6 y") && !strcmp(r.data.split, "98,1,1"));
        CHECK(!strcmp(r.data.vocab, "v.json") && !strcmp(r.data.merges, "m.txt") && !strcmp(r.checkpoint.dir, "ck"));
        CHECK(!strcmp(r.checkpoint.load, "ck0") && r.checkpoint.save_interval == 5 && r.logging.interval == 2);
        CHECK(r.logging.eval_interval == 10 && r.logging.eval_iters == 3 && r.training.precision == MT_PREC_BF16);
        CHECK(r.training.recompute == MT_RECOMPUTE_FULL && r.training.backend == MT_BACKEND_CPU && r.training.threads == 3);
        CHECK(!strcmp(r.logging.metrics, "m.jsonl") && !strcmp(r.logging.tensorboard_dir, "tb"));
        CHECK_STR_CONTAINS(mt_recipe_where(&r, "parallel.tensor", buf, sizeof buf), "--tensor-model-parallel-size 2");
        CHECK(!strcmp(mt_recipe_where(&r, "parallel.sequence_parallel", buf, sizeof buf), "--sequence-parallel"));
        CHECK_STR_CONTAINS(mt_recipe_where(&r, "model.hidden", buf, sizeof buf), "--hidden-size 256");
        CHECKF(mt_recipe_validate(&r, 8) == MT_OK, "%s", mt_last_error());
        CHECK(r.parallel.data == 2);
        /* a validation message names the flag that set the bad value */
        char *w[] = { "--num-attention-heads", "6", "--num-query-groups=6", NULL };
        c = 3;
        CHECK(mt_recipe_apply_args(&r, &c, w) == MT_OK && c == 0);
        CHECK(mt_recipe_validate(&r, 8) == MT_ERR_CONFIG);
        CHECK_STR_CONTAINS(mt_last_error(), "--hidden-size 256: model.hidden: 256 is not divisible by model.heads = 6 "
                                            "(--num-attention-heads 6)");
    }
    /* more switches, "--" ends the options */
    {
        char *v[] = { "--fp32", "--swiglu", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
                      "--num-experts", "4", "--moe-router-topk=1", "--", "--lr", "1", NULL };
        int c = 10;
        CHECK(mt_recipe_apply_args(&r, &c, v) == MT_OK);
        CHECK(r.training.precision == MT_PREC_FP32 && r.model.activation == MT_ACT_SWIGLU && !r.model.tie_embeddings);
        CHECK(!r.model.bias && r.model.moe.experts == 4 && r.model.moe.top_k == 1);
        CHECK(c == 3 && !strcmp(v[0], "--") && !strcmp(v[1], "--lr") && !strcmp(v[2], "1"));
    }
    /* --moe-layer-freq: an integer is model.moe.layer_freq (layer i is MoE when i % N == 0), a pattern with
     * dense layers model.moe.layer_pattern; --moe-ffn-hidden-size the experts' width, the dense one kept */
    {
        mt_recipe q;
        mt_recipe_defaults(&q);
        char *v[] = { "--num-layers", "4", "--num-experts", "4", "--ffn-hidden-size", "96", "--moe-ffn-hidden-size", "32",
                      "--moe-layer-freq", "([0]+[1]*3)", NULL };
        int c = 10;
        CHECKF(mt_recipe_apply_args(&q, &c, v) == MT_OK && c == 0, "%s", mt_last_error());
        CHECK(!strcmp(q.model.moe.layer_pattern, "([0]+[1]*3)") && q.model.moe.ffn_hidden == 32 && q.model.ffn_hidden == 96);
        CHECK(!mt_recipe_moe_layer(&q, 0) && mt_recipe_moe_layer(&q, 1) && mt_recipe_moe_layer(&q, 3));
        CHECK(mt_recipe_moe_layers(&q, 0, 4) == 3 && mt_recipe_moe_ffn_hidden(&q) == 32);
        mt_recipe_defaults(&q);
        char *w[] = { "--num-layers", "6", "--num-experts", "4", "--moe-layer-freq", "2", "--moe-ffn-hidden-size", "32", NULL };
        c = 8;
        CHECKF(mt_recipe_apply_args(&q, &c, w) == MT_OK && c == 0, "%s", mt_last_error());
        CHECK(q.model.moe.layer_freq == 2 && !q.model.moe.layer_pattern[0] && q.model.moe.ffn_hidden == 32);
        CHECK(mt_recipe_moe_layer(&q, 0) && !mt_recipe_moe_layer(&q, 1) && mt_recipe_moe_layer(&q, 4));
        CHECK(mt_recipe_moe_layers(&q, 1, 5) == 2);
        unsigned char bits[8];
        CHECK(mt_recipe_moe_pattern_parse("0110", bits, 8) == 4 && !bits[0] && bits[1] && bits[2] && !bits[3]);
        CHECK(mt_recipe_moe_pattern_parse("[0, 1]*2+[1]", bits, 8) == 5 && !bits[2] && bits[3] && bits[4]);
        CHECK(mt_recipe_moe_pattern_parse("[0]*9", bits, 8) == -2 && mt_recipe_moe_pattern_parse("0x1", bits, 8) == -1);
        /* Megatron's groups: "([1]*3+[0]*1)*2" = 1,1,1,0,1,1,1,0; a shell's quotes; N * [..]; a bad tail */
        CHECK(mt_recipe_moe_pattern_parse("([1]*3+[0]*1)*2", bits, 8) == 8 && bits[0] && !bits[3] && bits[4] && !bits[7]);
        CHECK(mt_recipe_moe_pattern_parse("'([0]+[1]*2)'", bits, 8) == 3 && !bits[0] && bits[2]);
        CHECK(mt_recipe_moe_pattern_parse("2*[0,1]+([1]*0)", bits, 8) == 4 && !bits[2] && bits[3]);
        CHECK(mt_recipe_moe_pattern_parse("([0]+[1]", bits, 8) == -1 && mt_recipe_moe_pattern_parse("[0]*", bits, 8) == -1);
        CHECK(mt_recipe_moe_pattern_parse("[2]", bits, 8) == -1 && mt_recipe_moe_pattern_parse("[]", bits, 8) == -1);
    }
    /* --squared-relu: model.activation squared_relu, set by the flag; with --swiglu refused (Megatron
     * asserts not both) */
    {
        char *v[] = { "--squared-relu", NULL };
        int c = 1;
        CHECK(mt_recipe_set(&r, "model.activation", "gelu", "test") == MT_OK);
        CHECKF(mt_recipe_apply_args(&r, &c, v) == MT_OK && c == 0, "%s", mt_last_error());
        CHECK(r.model.activation == MT_ACT_SQUARED_RELU);
        CHECK_STR_CONTAINS(mt_recipe_where(&r, "model.activation", buf, sizeof buf), "--squared-relu");
        char *w[] = { "--swiglu", "--squared-relu", NULL };
        c = 2;
        CHECK(mt_recipe_apply_args(&r, &c, w) == MT_ERR_CONFIG);
        CHECK_STR_CONTAINS(mt_last_error(), "--squared-relu");
        CHECK_STR_CONTAINS(mt_last_error(), "not with --swiglu");
    }
    /* an error names the flag; the flag and its value are taken (the report holds it, not the
     * unknown arguments), and the flags after it are still applied */
    {
        char *v[] = { "--tensor-model-parallel-size", "3x", "--num-layers", "5", NULL };
        int c = 4;
        CHECK(mt_recipe_apply_args(&r, &c, v) == MT_ERR_CONFIG && c == 0 && r.model.layers == 5);
        CHECK_STR_CONTAINS(mt_last_error(), "--tensor-model-parallel-size 3x: parallel.tensor: expected an integer");
    }
    /* each of these errors names the flag */
    static const struct { const char *argv[4]; const char *needle; } bad_args[] = {
        {{"--tensor-model-parallel-size", "3x"}, "--tensor-model-parallel-size 3x: parallel.tensor: expected an integer"},
        {{"--tensor-model-parallel-size", "0"}, "--tensor-model-parallel-size 0: parallel.tensor: out of range"},
        {{"--lr"}, "--lr: optimizer.lr: needs a value"},
        {{"--bf16=yes"}, "takes no value"},
        {{"--set"}, "--set: needs key=value"},
        {{"--set", "model.layers"}, "model.layers: no value"},
        {{"--set", "parallel.tensr=2"}, "did you mean 'parallel.tensor'?"},
        {{"--lr-decay-style", "step"}, "--lr-decay-style step: optimizer.decay: unknown value 'step'; allowed: cosine"},
        {{"--data-path", "--lr", "1e-3"}, "--data-path: data.path: needs a value"},
    };
    for (size_t k = 0; k < sizeof bad_args / sizeof bad_args[0]; k++) {
        char *v[4] = {NULL, NULL, NULL, NULL};
        int c = 0;
        while (c < 3 && bad_args[k].argv[c]) {
            v[c] = (char *)bad_args[k].argv[c];
            c++;
        }
        CHECK(mt_recipe_apply_args(&r, &c, v) == MT_ERR_CONFIG);
        CHECK_STR_CONTAINS(mt_last_error(), bad_args[k].needle);
    }
    {   /* a flag overrides the file, and the origin follows */
        CHECK(load(&r, BASE "parallel:\n  tensor: 2\n") == MT_OK);
        CHECK_STR_CONTAINS(mt_recipe_where(&r, "parallel.tensor", buf, sizeof buf), "bad.yaml:9");
        char *v[] = { "--tensor-model-parallel-size=4", NULL };
        int c = 1;
        CHECK(mt_recipe_apply_args(&r, &c, v) == MT_OK && r.parallel.tensor == 4);
        CHECK(!strcmp(mt_recipe_where(&r, "parallel.tensor", buf, sizeof buf), "--tensor-model-parallel-size 4"));
        int argc0 = 0;
        CHECK(mt_recipe_apply_args(&r, &argc0, v) == MT_OK && argc0 == 0);
    }
}

/* A warmup longer than a short run validates (the lr never reaches its peak), and so does the
 * recipe written from it (a checkpoint's saved recipe, where decay_iters = iters is written out);
 * a decay horizon set apart from the run's length still bounds the warmup. */
static void test_warmup_short_run(void) {
    mt_recipe r, back;
    CHECKF(load(&r, "training:\n  iters: 4\n" BASE_MODEL "optimizer:\n  warmup_iters: 30\n") == MT_OK, "%s",
           mt_last_error());
    CHECKF(mt_recipe_validate(&r, 1) == MT_OK, "warmup 30 of a 4-iteration run: %s", mt_last_error());
    CHECK(r.optimizer.decay_iters == 4);
    CHECK(round_trip(&r, &back) == MT_OK && recipe_same_values(&r, &back));
    CHECKF(mt_recipe_validate(&back, 1) == MT_OK, "the saved recipe of that run: %s", mt_last_error());
    CHECK(back.optimizer.warmup_iters == 30 && back.optimizer.decay_iters == 4);
    /* that saved recipe run for 2 iterations (--train-iters 2), and for 31 (past the warmup:
     * its written-out decay_iters 4 is now shorter than the warmup) */
    CHECKF(mt_recipe_set(&back, "training.iters", "2", "--train-iters") == MT_OK, "%s", mt_last_error());
    CHECKF(mt_recipe_validate(&back, 1) == MT_OK, "the saved recipe with --train-iters 2: %s", mt_last_error());
    CHECKF(mt_recipe_set(&back, "training.iters", "31", "--train-iters") == MT_OK, "%s", mt_last_error());
    CHECK(mt_recipe_validate(&back, 1) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "optimizer.warmup_iters");
    EXPECT_ERR("training:\n  iters: 40\n" BASE_MODEL "optimizer:\n  warmup_iters: 30\n  decay_iters: 20\n", 1,
               MT_ERR_CONFIG, "optimizer.warmup_iters", "exceed optimizer.decay_iters = 20");
}

/* The parser's limits: refused with their messages (which makes them quick; not timed here). */
static void test_limits(void) {
    mt_recipe r;
    /* 100,000 nested flow lists: refused at level 65, line 1 */
    size_t n = 100000;
    char *deep = malloc(n + 1);
    CHECK(deep != NULL);
    if (!deep) return;
    memset(deep, '[', n);
    deep[n] = 0;
    mt_recipe_defaults(&r);
    mt_status st = mt_recipe_load_string(&r, deep, n, "deep.yaml");
    CHECKF(st == MT_ERR_CONFIG, "100,000-deep lists: %s", mt_status_name(st));
    CHECK_STR_CONTAINS(mt_last_error(), "deep.yaml:1:");
    CHECK_STR_CONTAINS(mt_last_error(), "nested more than 64 levels");
    free(deep);
    /* 100 nested block mappings: refused at the 65th, on its line */
    char block[16384];
    size_t used = 0;
    for (int d = 0; d < 100; d++) used += (size_t)snprintf(block + used, sizeof block - used, "%*sa%d:\n", 2 * d, "", d);
    CHECK(used < sizeof block);
    EXPECT_ERR(block, 0, MT_ERR_CONFIG, "bad.yaml:65:", "nested more than 64 levels");
    /* 64 levels is within the limit (the loader's own error follows) */
    EXPECT_ERR("model:\n  moe: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
               "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n", 0, MT_ERR_CONFIG, "model.moe: is a section");
    /* more keys and values than the limit */
    size_t cap = 50001 * 16;
    char *keys = malloc(cap);
    CHECK(keys != NULL);
    if (!keys) return;
    used = 0;
    for (int k = 0; k < 50001; k++) used += (size_t)snprintf(keys + used, cap - used, "k%d: 0\n", k);
    mt_recipe_defaults(&r);
    st = mt_recipe_load_string(&r, keys, used, "keys.yaml");
    CHECKF(st == MT_ERR_CONFIG, "50,001 keys: %s", mt_status_name(st));
    /* the mapping, 49,999 pairs, then line 50,000: its value is node 100,001 */
    CHECK_STR_CONTAINS(mt_last_error(), "keys.yaml:50000:");
    CHECK_STR_CONTAINS(mt_last_error(), "more than 100000 keys and values");
    free(keys);
    /* a text over the size limit, and a (sparse) 1 GiB file: refused before reading it */
    size_t big = MT_RECIPE_MAX_BYTES + 1;
    char *text = malloc(big);
    CHECK(text != NULL);
    if (text) {
        memset(text, ' ', big);
        mt_recipe_defaults(&r);
        CHECK(mt_recipe_load_string(&r, text, big, "big.yaml") == MT_ERR_CONFIG);
        CHECK_STR_CONTAINS(mt_last_error(), "big.yaml: recipe: 4194305 bytes, more than the limit of 4194304 bytes");
        free(text);
    }
    char path[] = "/tmp/mt_test_recipe_big_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(ftruncate(fd, (off_t)1 << 30) == 0);
        close(fd);
        mt_recipe_defaults(&r);
        CHECK(mt_recipe_load_file(&r, path) == MT_ERR_CONFIG);
        CHECK_STR_CONTAINS(mt_last_error(), path);
        CHECK_STR_CONTAINS(mt_last_error(), "1073741824 bytes, more than the limit of 4194304 bytes (4 MiB)");
        unlink(path);
    }
}

static void test_derived(void) {
    mt_recipe r;
    mt_recipe_defaults(&r);
    /* vocabulary, tensor parallel size -> the padded vocabulary (a multiple of 128 * tp) */
    static const int padded[][3] = {
        {50257, 1, 50304}, {50257, 8, 51200}, {50257, 2, 50432}, {128256, 8, 129024}, {257, 1, 384},
    };
    for (size_t i = 0; i < sizeof padded / sizeof padded[0]; i++) {
        r.model.vocab = padded[i][0];
        r.parallel.tensor = padded[i][1];
        CHECKF(mt_recipe_padded_vocab(&r) == padded[i][2], "vocab %d, tp %d: padded %d, expected %d", padded[i][0],
               padded[i][1], mt_recipe_padded_vocab(&r), padded[i][2]);
    }
    r.model.hidden = 768;
    r.model.heads = 12;
    CHECK(mt_recipe_head_dim(&r) == 64);
    r.training.global_batch = 512;
    r.training.micro_batch = 8;
    r.parallel.data = 8;
    CHECK(mt_recipe_micro_batches(&r) == 8);
    r.parallel.data = 0;
    CHECK(mt_recipe_micro_batches(&r) == 64);
}

/* training.batch_schedule's parser against Megatron's rules, written out here: the 15B release
 * recipe's '0:384 200B:768 400B:1152' at T 4096 is 384 from 0, 768 from 200e9 / 4096 = 48828125
 * samples, 1152 from 97656250; suffixes in either case, commas as separators, sorted by threshold;
 * refused: a first threshold above 0 samples, thresholds equal once in samples, a falling batch,
 * an entry without ':'. Iterations for --train-samples: Megatron's loop (one more while < N). */
static void test_batch_schedule(void) {
    mt_batch_steps s;
    CHECK(mt_recipe_batch_steps_parse("0:384 200B:768 400B:1152", 4096, &s) == MT_OK);
    CHECK(s.n == 3 && s.at[0] == 0 && s.at[1] == 48828125 && s.at[2] == 97656250 && s.batch[0] == 384 &&
          s.batch[1] == 768 && s.batch[2] == 1152);
    CHECK(mt_recipe_batch_steps_parse("2.5k:16,0:8", 10, &s) == MT_OK && s.n == 2 && s.at[1] == 250 && s.batch[0] == 8);
    CHECK(mt_recipe_batch_steps_parse("0:1 1M:2 1T:4", 1, &s) == MT_OK && s.at[2] == 1000000000000LL);
    CHECK(mt_recipe_batch_steps_parse("4096:8", 4096, &s) == MT_ERR_CONFIG && strstr(mt_last_error(), "first"));
    CHECK(mt_recipe_batch_steps_parse("100:8", 4096, &s) == MT_OK); /* 100 tokens = 0 samples */
    CHECK(mt_recipe_batch_steps_parse("0:8 100:16", 4096, &s) == MT_ERR_CONFIG && strstr(mt_last_error(), "strictly"));
    CHECK(mt_recipe_batch_steps_parse("0:16 1M:8", 4096, &s) == MT_ERR_CONFIG && strstr(mt_last_error(), "falls"));
    CHECK(mt_recipe_batch_steps_parse("0:8 1M", 4096, &s) == MT_ERR_CONFIG && strstr(mt_last_error(), "'1M'"));
    CHECK(mt_recipe_batch_steps_parse("", 4096, &s) == MT_ERR_CONFIG);
    mt_recipe r;
    mt_recipe_defaults(&r);
    CHECK(mt_recipe_batch_steps_parse("0:2 1280:4 3.84K:8", 128, &r.training.steps) == MT_OK);
    int64_t c = 0, it = 0;
    mt_recipe_batch_walk(&r, &c, &it, INT64_MAX, 100); /* 5 x 2, 5 x 4, then 8s: 30, 38, ..., 102 */
    CHECKF(it == 19 && c == 102, "walk to 100 samples: %lld iterations, %lld samples", (long long)it, (long long)c);
    CHECK(mt_recipe_global_batch_at(&r, 9) == 2 && mt_recipe_global_batch_at(&r, 10) == 4 &&
          mt_recipe_global_batch_at(&r, 30) == 8 && mt_recipe_global_batch_max(&r) == 8);
    r.training.iters = 12; /* the run reaches 8 at iteration 11: an 8 not divisible by 3 is caught */
    r.training.micro_batch = 1;
    CHECK(mt_recipe_batch_steps_check(&r, 2, 0, 0) == MT_OK && mt_recipe_batch_steps_check(&r, 3, 30, 10) != MT_OK);
    r.training.iters = 10; /* ... but not by a run that ends before it */
    CHECK(mt_recipe_batch_steps_check(&r, 4, 10, 5) == MT_OK && mt_recipe_batch_steps_check(&r, 4, 0, 0) != MT_OK);
}

static void test_round_trip_odd_values(void) {
    mt_recipe r, back;
    CHECKF(load(&r, BASE "data:\n  path: \"we\\\"ird\\\\ \\t path: #x\"\n  cache_path: \"~\"\n"
                   "optimizer:\n  lr: 0.1\n  eps: 1.17549435e-38\n  beta2: 0.999999940395\n"
                   "training.seed: 18446744073709551615\n") == MT_OK, "%s", mt_last_error());
    CHECK(r.training.seed == UINT64_MAX && !strcmp(r.data.cache_path, "~"));
    CHECK(round_trip(&r, &back) == MT_OK && recipe_same_values(&r, &back));
}

/* docs/recipe.md holds the generated reference between two markers. */
static void test_reference_doc(void) {
    char *ref = NULL, *doc = NULL;
    size_t n_ref = 0;
    FILE *f = open_memstream(&ref, &n_ref);
    mt_recipe_print_reference(f);
    fclose(f);
    for (int k = 0; k < mt_recipe_n_keys; k++) {
        char name[80];
        snprintf(name, sizeof name, "| `%s` |", mt_recipe_keys[k].name);
        CHECK_STR_CONTAINS(ref, name);
    }
    f = fopen("docs/recipe.md", "rb");
    CHECKF(f != NULL, "docs/recipe.md missing (run from the repo root)");
    if (f) {
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        doc = calloc((size_t)n + 1, 1);
        CHECK(fread(doc, 1, (size_t)n, f) == (size_t)n);
        fclose(f);
        const char *begin = "<!-- BEGIN mt_recipe_print_reference -->\n";
        const char *end = "<!-- END mt_recipe_print_reference -->";
        char *b = strstr(doc, begin), *e = strstr(doc, end);
        CHECKF(b && e && e > b, "docs/recipe.md lacks the generated-block markers");
        if (b && e && e > b) {
            b += strlen(begin);
            CHECKF((size_t)(e - b) == n_ref && !memcmp(b, ref, n_ref),
                   "docs/recipe.md is stale: regenerate with build/test/unit/test_recipe --print-reference");
        }
    }
    free(doc);
    free(ref);
}

/* a key renamed since: the saved recipes of older builds (manifest.json) still load */
static void test_renamed_keys(void) {
    static mt_recipe r;
    mt_recipe_defaults(&r);
    const char y[] = "logging:\n  tensorboard: tb_old\n";
    CHECKF(mt_recipe_load_string(&r, y, sizeof y - 1, "old.yaml") == MT_OK, "%s", mt_last_error());
    CHECK(!strcmp(r.logging.tensorboard_dir, "tb_old"));
}

int main(int argc, char **argv) {
    test_renamed_keys();
    if (argc > 1 && !strcmp(argv[1], "--print-reference")) {
        mt_recipe_print_reference(stdout);
        return 0;
    }
    test_table();
    test_defaults();
    test_shipped();
    test_load_errors();
    test_blend();
    test_validate_errors();
    test_arch_defaults();
    test_args();
    test_derived();
    test_batch_schedule();
    test_warmup_short_run();
    test_limits();
    test_round_trip_odd_values();
    test_reference_doc();
    TEST_MAIN_END();
}
