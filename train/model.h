/* model.h — the GPT / Llama model on one rank: parameters, gradients, optimizer state and
 * activations in one buffer each (offsets from model_layout), weight init from the seed,
 * and forward + backward of one micro-batch through the backend interface, with Megatron
 * tensor (and sequence) parallelism over a tp communicator (parallel/tp.h).
 * Files: model.c (init, glue, gradient bookkeeping), model_fwd.c, model_bwd.c.
 * Rule: nothing here reads device memory; the only host reads are the loss sum and the
 * gradient norm (mt_model_read_scalars). */
#ifndef MT_MODEL_H
#define MT_MODEL_H

#include <stdint.h>

#include "core/backend.h"
#include "core/model/model_layout.h"
#include "core/recipe/recipe.h"
#include "parallel/tp.h"

typedef struct {
    mt_backend *be;
    mt_param_layout pl;
    mt_act_layout al;
    mt_dtype act;
    int arch_llama;
    int ln;                /* layernorm (1) or rmsnorm (0) */
    int swiglu, rope, tied, bias;
    float norm_eps, rope_theta;
    size_t n_flat;         /* parameter buffer length: pl.n_elems padded to a multiple of n_shards*align */
    size_t opt_begin;      /* first element of the flat buffer this rank's optimizer owns */
    size_t opt_n;          /* elements it owns: n_flat / n_shards (ZeRO-1), n_flat otherwise */
    void *params;          /* (n_flat) act */
    void *grads;           /* (n_flat) f32 */
    void *master;          /* (opt_n) f32, element i of the flat buffer at master[i - opt_begin];
                              aliases params + opt_begin when act is f32 */
    void *adam_m, *adam_v; /* (opt_n) f32 */
    void *acts;            /* al.n_bytes; under pipeline parallelism the activation buffer of the
                              micro-batch being computed (core/pipeline.c swaps it per slot) */
    int act_l0;            /* first local layer of the activation buffer: al holds Lc layers under
                              pipeline parallelism (one chunk: core/pipeline.c sets it per F / B) */
    void *scalars;         /* (2) f32 in the first activation buffer: [loss sum, grad sq] */
    mt_tp tp;              /* tensor-parallel group, rank, SP flag, scratch, comm time (tp = 1: no group) */
    size_t bytes_params, bytes_grads, bytes_optim, bytes_acts; /* what was allocated */
} mt_model;

/* Allocates everything for micro-batches of B sequences and initialises the weights as full
 * tensors from `seed` (normal(0, init_std), output projections / sqrt(2 L), norms 1,
 * biases 0). The optimizer state covers shard `shard` of `n_shards` equal slices of the flat
 * parameter buffer (ZeRO-1: n_shards = dp; otherwise 1, 0). */
mt_status mt_model_init(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard);
/* The same as tensor-parallel rank tp_comm->rank of parallel.tensor = tp_comm->size ranks:
 * this rank's shards, initialised as the slices of the full tensors (the serial run's
 * weights). tp_comm NULL with parallel.tensor > 1 allocates tp rank 0's shard for memory
 * accounting only (stepping it is an error). */
mt_status mt_model_init_tp(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard,
                           mt_comm *tp_comm);
/* Pipeline stage `pp_stage` of parallel.pipeline (parallel/model_layout: its layers only, the
 * embedding on stage 0, the head on the last, a copy of wte there when tied), each weight drawn
 * as in the serial run (global layer index). pp = 1: the same as mt_model_init_tp. */
mt_status mt_model_init_stage(mt_model *m, const mt_recipe *r, mt_backend *be, int B, int n_shards, int shard,
                              mt_comm *tp_comm, int pp_stage);
void mt_model_free(mt_model *m);

/* Checks that the backend has every op this model calls (error names the missing ops). */
mt_status mt_model_check_backend(const mt_recipe *r, const mt_backend *be, char *missing, size_t n_bytes);

/* Zeroes the gradient buffer and the step's loss accumulator. */
mt_status mt_model_zero_grads(mt_model *m);
/* One micro-batch: tokens_host holds B rows of T+1 tokens (inputs t[0..T-1], targets
 * t[1..T]). Adds the sum of token losses to the loss accumulator. dloss scales the
 * gradient (1 / tokens per global batch). backward=0 for evaluation. */
mt_status mt_model_step_micro(mt_model *m, const int32_t *tokens_host, float dloss, int backward);
/* Pieces of a micro-batch step for the pipeline executor, on the current activation buffer
 * (m->acts): copy B rows of T+1 tokens in as inputs and targets; forward of local layers
 * [l0, l1) (embed: the embedding first, into resid[l0]; head: final norm and logits from
 * resid[l1]); the loss (vocab-parallel xent, its sum added to the accumulator, dlogits scaled
 * by dloss); backward of [l0, l1) (head: from dlogits; else from the gradient in dresid;
 * embed: the embedding gradients last). resid slice l0 receives a stage's input, resid slice
 * l1 is its output, dresid its input gradient after backward (mt_model_resid / _dresid). */
mt_status mt_model_load_micro(mt_model *m, const int32_t *tokens_host);
mt_status mt_model_forward_part(mt_model *m, int l0, int l1, int embed, int head);
mt_status mt_model_loss(mt_model *m, float dloss);
mt_status mt_model_backward_part(mt_model *m, int l0, int l1, int head, int embed);
void *mt_model_resid(mt_model *m, int l); /* (N_r, C) act residual stream entering local layer l */
void *mt_model_dresid(mt_model *m);       /* (N_r, C) act */
/* After the step's micro-batches: sums over the tp group the gradients that are partial sums
 * there (norm weights under sequence parallelism); nothing otherwise. */
mt_status mt_model_tp_sync_grads(mt_model *m);
/* scalars[1] = sum of grad^2 over flat elements [begin, begin + n) (on the device), counting
 * tensors replicated over tp on tp rank 0 only, so a sum over the tp group is the full norm,
 * and skipping pipeline copies (the last stage's tied wte), so a sum over stages is too. */
mt_status mt_model_grad_sq(mt_model *m, size_t begin, size_t n);
/* Device pointer to the two f32 scalars [loss sum, grad sq] (to reduce them across ranks). */
void *mt_model_scalars(mt_model *m);
/* Reads both scalars into host memory: the step's one synchronisation. */
mt_status mt_model_read_scalars(mt_model *m, float *loss_sum, float *grad_sq);

#endif
