/* moe_bias.h — the router's expert bias (model.moe.expert_bias: DeepSeek-V3's aux-loss-free load
 * balancing, Megatron-Core's TopKRouter.expert_bias): per layer and expert an fp32 bias added to the
 * sigmoid scores for the top-k choice only. It is state, not a parameter: no gradient, moved once
 * per iteration by the token counts of the whole global batch, identical on every rank, and
 * carried by checkpoints (the manifest's expert_bias, core/ckpt/manifest.h). */
#ifndef MT_MOE_BIAS_H
#define MT_MOE_BIAS_H

#include "parallel/parallel_state.h"
#include "train/model.h"

/* Before an iteration's forward-backward pass: zero the counts (a rerun of the pass starts over). */
mt_status mt_moe_bias_begin(const mt_model *m);
/* After the pass: the kept assignments per layer and expert summed over the data x context
 * parallel group (all micro-batches, all data-parallel ranks: the global batch), then Megatron's
 * get_updated_expert_bias: bias += rate * sign(sum_e count / E - count), in fp32. */
mt_status mt_moe_bias_update(mt_model *m, const mt_parallel_state *ps);
/* The whole model's bias, (model.layers, E) f32 row-major, into all (every rank gets it: each
 * pipeline stage's layers come from its tp 0 / dp 0 / cp 0 rank, summed over the world with zeros
 * elsewhere, exact). A model without the bias: nothing. */
mt_status mt_moe_bias_gather(const mt_model *m, const mt_parallel_state *ps, float *all);
/* This rank's layers from the whole model's bias (model.layers, E) (a checkpoint's). */
mt_status mt_moe_bias_set(mt_model *m, const float *all);

#endif
