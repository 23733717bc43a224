/* tiny_model.h — the tiny models of the C tests: a recipe of 2 layers, hidden 16, 4 heads and a
 * vocabulary of 37 (the arch's defaults otherwise), more keys set and checked in one call,
 * micro-batches of B validated for one rank, the model built on a one-thread CPU backend, and the
 * parameter layout of a config file.
 * Include after test/test.h. */
#ifndef MT_TEST_TINY_MODEL_H
#define MT_TEST_TINY_MODEL_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/backend.h"
#include "core/model/model_layout.h"
#include "core/recipe/recipe.h"
#include "train/model.h"

/* Sets r's keys kv[i] = {key, value}, each checked. */
static inline void set_recipe_keys(mt_recipe *r, const char *const (*kv)[2], size_t n) {
    for (size_t i = 0; i < n; i++)
        CHECKF(mt_recipe_set(r, kv[i][0], kv[i][1], "test") == MT_OK, "%s = %s: %s", kv[i][0], kv[i][1],
               mt_last_error());
}

/* Sets r's keys from the text "key=value[,key=value...]" (NULL or "": none), each checked; 0 when an item
 * has no '=' (checked too). */
static inline int set_recipe_csv(mt_recipe *r, const char *keys) {
    char kv[1024];
    snprintf(kv, sizeof kv, "%s", keys ? keys : "");
    for (char *save = NULL, *s = strtok_r(kv, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(s, '=');
        CHECKF(eq != NULL, "'%s' is not key=value", s);
        if (!eq) return 0;
        *eq = 0;
        CHECKF(mt_recipe_set(r, s, eq + 1, "test") == MT_OK, "%s = %s: %s", s, eq + 1, mt_last_error());
    }
    return 1;
}

/* Sets r's key to the integer v (checked). */
static inline void set_recipe_int(mt_recipe *r, const char *key, long long v) {
    char s[24];
    snprintf(s, sizeof s, "%lld", v);
    const char *const kv[][2] = {{key, s}};
    set_recipe_keys(r, kv, 1);
}

/* r = the defaults with arch, 2 layers, hidden 16, 4 heads, vocabulary 37 and seq_length T. */
static inline void tiny_recipe(mt_recipe *r, const char *arch, int T) {
    char t[16];
    snprintf(t, sizeof t, "%d", T);
    mt_recipe_defaults(r);
    const char *const kv[][2] = {{"model.arch", arch}, {"model.layers", "2"}, {"model.hidden", "16"},
                                 {"model.heads", "4"}, {"model.vocab", "37"}, {"model.seq_length", t}};
    set_recipe_keys(r, kv, sizeof kv / sizeof kv[0]);
}

/* Micro and global batch B, one iteration, validated for one rank (checked); its status. */
static inline mt_status tiny_batch_validate(mt_recipe *r, int B) {
    char b[16];
    snprintf(b, sizeof b, "%d", B);
    const char *const kv[][2] = {{"training.micro_batch", b}, {"training.global_batch", b}, {"training.iters", "1"}};
    set_recipe_keys(r, kv, sizeof kv / sizeof kv[0]);
    mt_status st = mt_recipe_validate(r, 1);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    return st;
}

/* A one-thread CPU backend in *be and the model of r for micro-batches of B on it (checked). */
static inline mt_status tiny_model_open(mt_model *m, mt_backend *be, const mt_recipe *r, int B) {
    CHECK(mt_backend_cpu_create(be, 1) == MT_OK);
    mt_status st = mt_model_init(m, r, be, B, 1, 0);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    return st;
}

/* The recipe of a config file (run from the repo root), validated for one rank, and its parameter
 * layout (each step checked). */
static inline void config_layout(mt_recipe *r, const char *config, mt_param_layout *pl) {
    mt_recipe_defaults(r);
    CHECKF(mt_recipe_load_file(r, config) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_recipe_validate(r, 1) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_param_layout_build(r, pl) == MT_OK, "%s", mt_last_error());
}

#endif
