/* generate.h — `mtrain generate`: text from a trained checkpoint, one process, two decoding paths
 * that give the same tokens under greedy decoding:
 *   full recomputation: each step runs the training model's forward (micro-batch of one sequence,
 *     the current tokens padded to model.seq_length with the end-of-document id) on the backend and
 *     reads the logits row of the last real position back (causal attention: the padding never
 *     changes it);
 *   KV cache (generate_kv.c): the same training forward on the backend, one token per step (its
 *     embedding and RoPE at its position), each layer's attention reading the K and V of past
 *     positions from a cache instead of recomputing them: every layer variant the layer spec
 *     describes (norms, qk norms, GeLU / SwiGLU, mixture of experts) decodes as it trains.
 * Mixture-of-experts layers route dropless on both paths (no capacity: mt_model_create_for_use), so
 * the two give the same tokens.
 * Sampling: temperature (0 = greedy argmax), top-k, top-p (nucleus), each draw a pure function of
 * (seed, step) through the counter-based RNG (core/rng.h): the same seed gives the same text.
 * Rules kept: statuses, never exit; nothing here prints except to the streams given. */
#ifndef MT_GENERATE_H
#define MT_GENERATE_H

#include <stdint.h>
#include <stdio.h>

#include "core/backend.h"
#include "core/data/tokenizer.h"
#include "core/recipe/recipe.h"
#include "parallel/parallel_state.h"
#include "train/model.h"

/* ---- sampling (pure functions; tested by test/unit/test_generate.c) ---- */

typedef struct {
    float temperature;  /* <= 0: greedy (argmax) */
    int top_k;          /* keep the k most likely tokens; <= 0: all */
    float top_p;        /* keep the smallest most-likely set of probability >= top_p; >= 1: all */
    uint64_t seed;
} mt_sample_cfg;

/* The index of the largest of logits[0, V) (the first one on ties; NaN never wins). */
int mt_sample_argmax(const float *logits, int V);

/* The distribution sampling draws from: probs[i] = softmax(logits / temperature) restricted to the
 * top-k most likely tokens, then to the nucleus of mass top_p (always at least one token), then
 * renormalised; 0 outside. order (V ints, scratch) receives the token ids most likely first
 * (ties: lower id first). Returns the number of tokens kept (1 under greedy: the argmax, prob 1). */
int mt_sample_probs(const float *logits, int V, const mt_sample_cfg *c, float *probs, int *order);

/* One token drawn from mt_sample_probs' distribution with the uniform draw of (seed, step);
 * the argmax when temperature <= 0. probs (V floats) and order (V ints) are scratch. */
int mt_sample_token(const float *logits, int V, const mt_sample_cfg *c, uint64_t step, float *probs, int *order);

/* ---- the KV-cache decoder (generate_kv.c) ---- */

/* A decode view of the generator's model: the same weights and the same forward (the training
 * forward's ops on the backend, through the layer spec), run on one token at a time with an
 * activation buffer for one token, its position given to the embedding and RoPE, and attention
 * over a cache of every past position's keys and values (model.h: kv_cache). */
typedef struct {
    mt_model dm;        /* a copy of the model's struct pointing at its weights; never freed as a model */
    int T;              /* cache positions: model.seq_length */
    int V;              /* logits returned: the first V columns */
    void *raw;          /* (Vp) act host: one logits row read back */
    int n_past;         /* positions already in the cache */
} mt_kv_model;

/* Builds the decode view of m (the whole model on one rank, tp = pp = cp = 1) and allocates the
 * one-token activations and the cache for model.seq_length positions on m's backend. */
mt_status mt_kv_open(mt_kv_model *kv, const mt_model *m, int V);
void mt_kv_close(mt_kv_model *kv);
void mt_kv_reset(mt_kv_model *kv);
/* Feeds token `tok` at position kv->n_past (< seq_length) and, when logits is not NULL, writes the
 * next-token logits (V floats). */
mt_status mt_kv_step(mt_kv_model *kv, int32_t tok, float *logits);

/* ---- the generator ---- */

typedef struct {
    const mt_recipe *r;
    mt_backend *be;
    mt_model model;
    int have_model;
    mt_tokenizer *tok;
    int V;              /* sampled vocabulary: min(model.vocab, the tokenizer's ids) */
    int32_t *row;       /* (T+1) host: the tokens of the full-recomputation input */
    void *raw;          /* (Vp) act: one logits row read back */
    float *logits, *probs;
    int *order;
    mt_kv_model kv;
    int have_kv;
    int64_t iteration;  /* of the loaded checkpoint */
    char ckpt_path[4400];
} mt_generator;

/* Builds the model (one sequence per micro-batch, whole model), loads r->checkpoint.load (weights
 * only; any saved layout) and opens the recipe's tokenizer; use_kv also builds the KV-cache decode view.
 * log: where the checkpoint line goes (NULL = quiet). */
mt_status mt_generator_open(mt_generator *g, const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps,
                            int use_kv, FILE *log);
void mt_generator_close(mt_generator *g);

typedef enum { MT_GEN_STOP_MAX = 0, MT_GEN_STOP_EOD, MT_GEN_STOP_CONTEXT } mt_gen_stop;

typedef struct {
    int n_prompt, n_new;
    mt_gen_stop stop;
    double seconds;     /* decoding (prefill included) */
} mt_gen_report;

/* Generates after prompt[0, n_prompt) (1 <= n_prompt <= model.seq_length) up to max_new tokens,
 * stopping early at the end-of-document token (not kept) or when model.seq_length + 1 tokens exist
 * (the last one predicted from a full context). out (max_new ids) receives the new tokens; out_text,
 * when not NULL, receives each new token's text as it comes (flushed). */
mt_status mt_generate(mt_generator *g, const int32_t *prompt, int n_prompt, int max_new, const mt_sample_cfg *c,
                      int use_kv, int32_t *out, FILE *out_text, mt_gen_report *rep);

#endif
