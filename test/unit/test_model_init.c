/* test_model_init.c — the initial weights are a pure function of the recipe's seed: for a GPT
 * (tied embeddings, biases) and a Llama (GQA, SwiGLU) model, every parameter element equals,
 * bit for bit, the definition the weight init has always had —
 *   (float)(init_std * mt_rng_normal(seed, stream(name, layer), element))   normal tensors,
 *   (float)(init_std / sqrt(2 L) * mt_rng_normal(...))                      output projections,
 *   0 / 1                                                                   biases / norm gains,
 * drawn here one element at a time with libm — and the CPU backend with 1, 2 and 3 threads
 * gives the same bytes (the init splits each tensor over threads; a split must not change a bit).
 * Tolerance: none (a saved run's initial weights, and every trajectory test, depend on it). The
 * embedding (vocab 1000 x hidden 64) spans several of the init's per-thread pieces. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "core/rng.h"
#include "test/test.h"
#include "train/model.h"

static void set(mt_recipe *r, const char *key, const char *value) {
    CHECKF(mt_recipe_set(r, key, value, "test") == MT_OK, "%s = %s: %s", key, value, mt_last_error());
}

/* the number of parameter elements that differ from the one-element-at-a-time definition */
static size_t definition_mismatches(const mt_model *m, const mt_recipe *r) {
    const mt_param_layout *pl = &m->pl;
    const double out_scale = 1.0 / sqrt(2.0 * pl->L_global);
    size_t bad = 0;
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        const mt_param_tensor *t = &pl->t[ti];
        for (int l = 0; l < t->n_layers; l++) {
            const uint64_t stream =
                mt_hash_str(t->name) ^ ((uint64_t)mt_param_global_slice(pl, ti, l) * 0x9e3779b97f4a7c15ULL);
            const float *w = (const float *)m->params + mt_param_offset(pl, ti, l);
            for (size_t e = 0; e < (size_t)t->rows * t->cols; e++) {
                float want = 0.0f;
                switch (t->init) {
                case MT_INIT_ZERO: want = 0.0f; break;
                case MT_INIT_ONE: want = 1.0f; break;
                case MT_INIT_NORMAL: want = (float)(r->model.init_std * mt_rng_normal(r->training.seed, stream, e)); break;
                case MT_INIT_NORMAL_OUTPUT:
                    want = (float)(r->model.init_std * out_scale * mt_rng_normal(r->training.seed, stream, e));
                    break;
                }
                bad += memcmp(&want, &w[e], sizeof want) != 0;
            }
        }
    }
    return bad;
}

static void check_arch(const char *arch) {
    static mt_recipe r;
    mt_recipe_defaults(&r);
    set(&r, "model.arch", arch);
    set(&r, "model.layers", "2");
    set(&r, "model.hidden", "64");
    set(&r, "model.heads", "4");
    set(&r, "model.vocab", "1000");
    set(&r, "model.seq_length", "8");
    set(&r, "training.seed", "4321");
    if (!strcmp(arch, "llama")) {
        set(&r, "model.kv_heads", "2");
        set(&r, "model.ffn_hidden", "96");
    } else {
        set(&r, "model.tie_embeddings", "true");
    }
    set(&r, "training.micro_batch", "1");
    set(&r, "training.global_batch", "1");
    set(&r, "training.iters", "1");
    CHECKF(mt_recipe_validate(&r, 1) == MT_OK, "%s", mt_last_error());

    void *ref = NULL;
    size_t n_bytes = 0;
    for (int threads = 1; threads <= 3; threads++) {
        mt_backend be;
        CHECK(mt_backend_cpu_create(&be, threads) == MT_OK);
        mt_model m;
        mt_status st = mt_model_init(&m, &r, &be, 1, 1, 0);
        CHECKF(st == MT_OK, "%s: %s", arch, mt_last_error());
        if (st != MT_OK) {
            be.i->destroy(&be);
            continue;
        }
        if (threads == 1) {
            n_bytes = m.bytes_params;
            ref = malloc(n_bytes);
            memcpy(ref, m.params, n_bytes);
            const size_t bad = definition_mismatches(&m, &r);
            CHECKF(bad == 0, "%s: %zu of %zu weights differ from the element-by-element definition", arch, bad,
                   m.pl.n_params);
            printf("%s: %zu weights bitwise equal to the element-by-element definition\n", arch, m.pl.n_params);
        } else {
            CHECKF(ref && m.bytes_params == n_bytes && memcmp(ref, m.params, n_bytes) == 0,
                   "%s: the weights with %d threads differ from those with 1", arch, threads);
            printf("%s: %d threads give the same weights as 1\n", arch, threads);
        }
        mt_model_free(&m);
        be.i->destroy(&be);
    }
    free(ref);
}

int main(void) {
    check_arch("gpt");
    check_arch("llama");
    TEST_MAIN_END();
}
