/* optim.h — learning-rate schedule (pure), gradient clipping factor (pure) and the AdamW
 * step over the model's parameter tensors (no weight decay on biases and norm weights). */
#ifndef MT_OPTIM_H
#define MT_OPTIM_H

#include <stdint.h>

#include "train/model.h"
#include "core/recipe/recipe.h"

/* Learning rate for iteration `it` (1-based), Megatron's OptimizerParamScheduler in steps: linear
 * warmup from 0 to lr over warmup_iters, then cosine / linear / constant / inverse-square-root
 * (lr * sqrt(warmup / it), floored at min_lr) / WSD (lr until the last wsd_decay_iters steps of
 * decay_iters, then linear / cosine / exponential / minus_sqrt down to min_lr) decay, reaching
 * min_lr at decay_iters; min_lr afterwards (constant stays at lr). */
double mt_lr_at(const mt_optimizer_cfg *o, int64_t it, int64_t train_iters);
/* The same at a fractional step: Megatron's scheduler counts samples, so under batch-size ramp-up
 * the step is consumed samples / global_batch (it equals the iteration without ramp-up). */
double mt_lr_at_step(const mt_optimizer_cfg *o, double step, int64_t train_iters);
/* Global-norm clipping factor: min(1, clip / (norm + 1e-6)); 1 when clip <= 0. */
double mt_clip_factor(double grad_norm, double clip);
/* One AdamW step over this rank's optimizer shard of the flat buffer (all of it without
 * ZeRO-1); `step` = number of this update, 1-based, for the bias corrections. */
mt_status mt_optim_step(mt_model *m, const mt_optimizer_cfg *o, int64_t step, double lr, double lr_embed,
                        double grad_scale);
/* Megatron's --decoupled-lr: the word embedding and the output layer ("wte", "lm_head"; one tensor
 * when tied) follow the same schedule shape between decoupled_lr and decoupled_min_lr; the
 * other parameters use mt_lr_at. Equals mt_lr_at when decoupled_lr is 0 (off). */
double mt_lr_decoupled_at(const mt_optimizer_cfg *o, double step, int64_t train_iters);
int mt_optim_is_embedding_or_output(const mt_param_tensor *t);

#endif
