/* ckpt_single.h — writing a save from whole (unsharded) weights, as one rank of a one-rank job
 * would have saved them: one safetensors file whose pieces are whole tensors, the manifest, the
 * tracker. For tools that make checkpoints without training (mtrain import from Hugging Face):
 * the loader reshards such a save into any layout like any other. Weights only (no optimizer
 * state: load it with checkpoint.no_load_optim / --finetune). Published atomically, as a save is. */
#ifndef MT_CKPT_SINGLE_H
#define MT_CKPT_SINGLE_H

#include <stdint.h>

#include "core/model/model_layout.h"
#include "core/recipe/recipe.h"

/* Saves iteration `iteration` into checkpoint folder root for recipe r (validated, one rank:
 * parallel sizes 1) whose whole-model layout is pl: tensors[ti] holds tensor ti of pl as
 * n_layers x full_rows x full_cols fp32 values. */
mt_status mt_ckpt_save_single(const char *root, const mt_recipe *r, const mt_param_layout *pl, int64_t iteration,
                              const float *const *tensors);

#endif
