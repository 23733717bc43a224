/* hf_import.h — a Hugging Face GPT2LMHeadModel / LlamaForCausalLM / MixtralForCausalLM folder (config.json and
 * model.safetensors, or shards behind model.safetensors.index.json) into an mtrain save, so that
 * training continues from released weights in any layout. The mapping is the export's
 * (hf_export.h: mt_hf_plan) run backwards: every HF tensor is put back into its block of its
 * mtrain tensor, transposed back for GPT-2's Conv1D. The recipe gives the model (its shape must be
 * config.json's: every mismatch is named with both values); the save is a one-rank save of weights
 * only (core/ckpt/ckpt_single.h), loaded with checkpoint.no_load_optim or --finetune.
 * Rule: every element of every mtrain tensor comes from exactly one HF tensor (vocabulary padding
 * rows are zeros); a missing, extra or misshapen HF tensor is an error naming it. */
#ifndef MT_HF_IMPORT_H
#define MT_HF_IMPORT_H

#include "core/recipe/recipe.h"
#include "core/status.h"

typedef struct {
    const char *input;   /* the Hugging Face model folder */
    const char *save;    /* the checkpoint folder to create (its iter_0000000 save) */
} mt_hf_import_opts;

/* r: the validated recipe of the model (parallel sizes are ignored: the save is one rank's). */
mt_status mt_hf_import(const mt_hf_import_opts *o, const mt_recipe *r, int *n_tensors, double *seconds);

#endif
