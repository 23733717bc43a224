/* model.h — the GPT / Llama model on one rank: parameters, gradients, optimizer state and one
 * activation buffer, each one allocation (offsets from core/model: the parameter, activation and
 * optimizer-shard layouts), weight init from the seed, and forward + backward of one micro-batch
 * through the backend interface.
 * Parallelism: the model is built from the parallel state (parallel/parallel_state.h) and holds
 * one communicating layer per axis (parallel/axis_layers.h: tensor-parallel linears, the
 * context-parallel attention ring, the expert-parallel token dispatch), each over its group and
 * timed into that group's clock; a pipeline stage builds only its layers. Nothing here names a
 * group: the layers do, in parallel/.
 * Activations are passed explicitly (mt_acts): the model's own buffer for plain micro-batch
 * steps; the pipeline executor passes the buffer of the slot it runs. Nothing here keeps a "current"
 * buffer.
 * Files: model.c (init, glue), model_fwd.c, model_bwd.c, model_qk.c (q / k between projection and
 * attention), model_moe.c (router and experts). The layer itself is pl.spec (core/model/layer_spec.h).
 * Rules: nothing here reads device memory except mt_model_read_scalars; nothing is allocated after
 * init (host staging included). Gradient reductions live in parallel/grad_sync.h. */
#ifndef MT_MODEL_H
#define MT_MODEL_H

#include <stdint.h>

#include "core/backend.h"
#include "core/model/model_layout.h"
#include "core/model/opt_layout.h"
#include "core/recipe/recipe.h"
#include "parallel/axis_layers.h"
#include "parallel/parallel_state.h"

/* One micro-batch's activation buffer (al.n_bytes of backend memory) and the first local layer
 * whose activations it holds: 0 without pipeline parallelism, a chunk's first layer with it. */
typedef struct {
    void *base;
    int l0;
} mt_acts;

/* Which part of the stage's model a forward or backward runs: local layers [l0, l1), starting
 * with the embedding (embed) and / or ending with the final norm and logits (head). */
typedef struct {
    int l0, l1;
    int embed, head;
} mt_model_part;

typedef struct {
    int B;                  /* sequences per micro-batch */
    int shards[MT_GBUFS];   /* distributed optimizer: shards per gradient buffer (1 without) */
    int shard[MT_GBUFS];    /* the one this rank owns */
    const mt_parallel_state *ps; /* this rank's groups (read at create only); NULL: one rank. With a
                               pipeline in the grid the model is this rank's stage. A tp or ep group
                               of size 1 whose axis is > 1 in the recipe builds that axis's rank 0
                               shard, for memory accounting only (stepping it is an error); cp needs
                               its group. */
} mt_model_shape;

typedef struct {
    mt_backend *be;
    mt_param_layout pl;
    mt_act_layout al;
    mt_opt_layout ol;      /* flat buffer length, optimizer shards (core/model/opt_layout.h) */
    mt_dtype act;
    int tied;              /* the output layer is the word embedding (the layer itself: pl.spec) */
    void *norm_ones, *norm_w1; /* zero-centred gamma (pl.spec.norm.one_plus): (max(C, D)) act ones, and
                              the scratch 1 + w of the norm being run; NULL otherwise */
    void *params;          /* (ol.n_flat) act */
    void *grads;           /* (ol.n_flat) f32 */
    void *master;          /* (ol.n_opt) f32: this rank's optimizer shards (mt_opt_piece gives the
                              index of a flat element); aliases params when act is f32 and one
                              region is the whole shard */
    void *adam_m, *adam_v; /* (ol.n_opt) f32 */
    int moments_zero;      /* adam_m / adam_v still all zero: no optimizer step taken, none loaded */
    int master_aliased;    /* master points into params (not a separate allocation) */
    mt_acts acts;          /* the model's own activation buffer (l0 = 0) */
    void *scalars;         /* (2) f32 in the model's activation buffer: [loss sum, grad sq] */
    int32_t *staging;      /* (2, N) i32 host: inputs and targets of a micro-batch before upload */
    mt_axis_layers par;    /* the communicating layer of each parallel axis, and the per-group clocks */
    size_t bytes_params, bytes_grads, bytes_optim, bytes_acts; /* what was allocated */
    /* mixture of experts (pl.moe; train/model_moe.c) */
    float moe_dloss;       /* the loss scale of the micro-batches being run (the aux / z-loss gradients use it) */
    float moe_aux_coeff, moe_z_coeff;
    int moe_pre_softmax;
    int recomputing;       /* 1 while backward reruns a layer's forward (full recompute): the MoE step statistics
                              are not counted twice */
    int moe_score, moe_groups, moe_group_topk, moe_seq_aux; /* the router's rules (recipe model.moe.*) */
    float moe_scale;       /* model.moe.topk_scaling_factor */
    int moe_probs_on_input; /* model.moe.apply_probs_on_input: expert(w x) combined with weight 1 */
    float moe_bias_rate;   /* model.moe.bias_update_rate */
    void *moe_bias;        /* (L, E) f32 in the model's activation buffer: the expert bias (model.moe.expert_bias;
                              NULL without): state, not a parameter (train/moe_bias.c) */
    void *moe_bias_cnt;    /* (L, E) f32 there: the step's kept assignments per layer and expert; NULL: not counted
                              (evaluation, logprobs, generate) */
    float *moe_bias_host;  /* (2, L, E) f32 host scratch of the bias update (train/moe_bias.c) */
    /* muP (core/model/mup.h): the attention's softmax scale (0: 1/sqrt(head_dim)), the logits'
     * and the embedding output's multipliers (1: none) */
    float attn_scale, logit_mult, embed_mult;
    double mup_width_mult; /* muP's m: Adam's lr and eps of the hidden matrices / m (train/optim.c); 1: off */
    void *moe_stats;       /* (MT_MOE_STATS + 2E) f32 in the model's activation buffer: the step's MoE sums */
    /* a hook per part of a forward / backward (overlapped gradient reduction, parallel/grad_overlap.h):
       called with backward = 1 after a part's backward added its gradients, backward = 0 before a
       part's forward reads its parameters; part = a local layer, MT_MODEL_PART_EMBED or _HEAD.
       NULL = none */
    mt_status (*part_hook)(void *ctx, int backward, int part);
    void *part_hook_ctx;
    /* decoding with a KV cache (train/generate_kv.c; NULL / 0 in training): each layer's attention
       appends the token's K / V at kv_pos and attends over positions [0, kv_pos] */
    void *kv_cache;        /* (L, kv_len, 2 KV D) act: [k heads | v heads] of past positions per layer */
    void *kv_lse;          /* (H, kv_len) f32 scratch */
    int kv_len, kv_pos;
} mt_model;

#define MT_MODEL_PART_EMBED (-1)
#define MT_MODEL_PART_HEAD (-2)

/* Allocates everything for micro-batches of s->B sequences and initialises the weights as full
 * tensors from `seed` (normal(0, init_std), output projections / sqrt(2 L), norms 1, biases 0):
 * a tp rank draws exactly its shard (the serial run's values), a pipeline stage its layers (by
 * global layer index). The optimizer state covers this rank's shards (s->shards / s->shard). */
mt_status mt_model_create(mt_model *m, const mt_recipe *r, mt_backend *be, const mt_model_shape *s);
/* Shorthands (tests): the whole model on one rank; this rank of a parallel state; pipeline stage
 * `stage` on one rank (memory accounting). n_shards / shard apply to every gradient buffer. */
mt_status mt_model_init(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard);
mt_status mt_model_init_ps(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard,
                           const mt_parallel_state *ps);
mt_status mt_model_init_stage(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard,
                              int stage);
void mt_model_free(mt_model *m);

/* A view of m for forward passes over sequences of T tokens (one micro-batch of one sequence):
 * a copy of m's struct that shares its weights, with its own activation buffer laid out for T,
 * one chunk at position 0 (a caller may move it: the KV-cache decoder does), no recompute and
 * dropless experts. For the whole model on one rank (tp = pp = cp = 1). mt_model_view_free
 * frees the buffer only (after a failed open too). Used by generate_kv.c (T = 1) and
 * logprobs_view.c (T = 64, 128, ...). */
mt_status mt_model_view_open(mt_model *d, const mt_model *m, int T);
void mt_model_view_free(mt_model *d);

/* Checks that the backend has every op this model calls (error names the missing ops). */
mt_status mt_model_check_backend(const mt_recipe *r, const mt_backend *be, char *missing, size_t n_bytes);

/* Zeroes the gradient buffer and the step's scalars. */
mt_status mt_model_zero_grads(mt_model *m);
/* One micro-batch on the model's own buffer: tokens_host holds B rows of T+1 tokens (inputs
 * t[0..T-1], targets t[1..T]). Adds the sum of token losses to the loss accumulator. dloss scales
 * the gradient (1 / tokens per global batch). backward=0 for evaluation. Whole model only. */
mt_status mt_model_step_micro(mt_model *m, const int32_t *tokens_host, float dloss, int backward);
/* The whole stage: layers [0, L), with the embedding on the first stage and the head on the last. */
mt_model_part mt_model_whole(const mt_model *m);
/* Pieces of a micro-batch step (the pipeline executor's), on activation buffer `a`: copy B rows of
 * T+1 tokens in as inputs and targets; forward of a part (the embedding first into resid[l0];
 * the head: final norm and logits from resid[l1]); the loss (vocab-parallel xent, its sum added to
 * the accumulator, dlogits scaled by dloss); backward of the same part (from dlogits with the head,
 * else from the gradient in dresid; the embedding gradients last). resid slice l0 receives a
 * stage's input, slice l1 is its output, dresid its input gradient after backward. */
mt_status mt_model_load_micro(mt_model *m, const mt_acts *a, const int32_t *tokens_host);
mt_status mt_model_forward(mt_model *m, const mt_acts *a, mt_model_part part);
mt_status mt_model_loss(mt_model *m, const mt_acts *a, float dloss);
mt_status mt_model_backward(mt_model *m, const mt_acts *a, mt_model_part part);
void *mt_model_resid(const mt_model *m, const mt_acts *a, int l); /* (N_r, C) act entering local layer l */
void *mt_model_dresid(const mt_model *m, const mt_acts *a);       /* (N_r, C) act */
/* Device pointer to the two f32 scalars [loss sum, grad sq] (to reduce them across ranks). */
void *mt_model_scalars(mt_model *m);
/* Reads both scalars into host memory: the step's one synchronisation. */
mt_status mt_model_read_scalars(mt_model *m, float *loss_sum, float *grad_sq);

/* MoE layer l (train/model_moe.c): forward xo = xm + moe(x2) (x2, xm, xo: N_r rows), and its backward:
 * dresid holds dL/dxo; *dx receives dL/dx2 (N_r rows, reduced over tp) for the norm backward. */
mt_status mt_moe_forward(mt_model *m, const mt_acts *A, int l, const void *x2, const void *xm, void *xo);
mt_status mt_moe_backward(mt_model *m, const mt_acts *A, int l, const void *x2, void **dx);

#endif
