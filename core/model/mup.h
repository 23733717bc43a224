/* mup.h — muP (maximal update parametrisation) as Megatron-Core defines it, as pure functions of
 * the recipe's model section and a parameter tensor of the layout. Megatron's definitions:
 *   width multiplier m = hidden_size / mup_base_hidden_size (base = hidden when not given)
 *     (transformer_config.py, TransformerConfig.__post_init__);
 *   softmax scale = (sqrt(mup_base_head_dim) or 1) / kv_channels^mup_attn_scale_power (same place;
 *     without muP the attention's 1 / sqrt(head_dim));
 *   logits times mup_output_mult, which is set to 1 / m when left at 1 and m != 1
 *     (language_module.py, LanguageModule._scale_logits);
 *   embeddings (word + position) times mup_embedding_mult (language_model_embedding.py, forward);
 *   init: hidden weights normal(0, init_std / sqrt(m)), output projections normal(0, init_std /
 *     (sqrt(2 L) sqrt(m))) (utils.py, mup_scaled_init_method_normal), the word and position
 *     embeddings and an untied output layer normal(0, init_std) (embedding_init_method; gpt_model.py);
 *   Adam: every matrix-like parameter that is not of the embedding class (word / position
 *     embeddings, output layer; LanguageModule.setup_embeddings_and_output_layer) gets max_lr and
 *     min_lr times 1 / m and eps times 1 / m; vector-like ones (biases, norm weights) and the
 *     embedding class keep the base values; with --decoupled-lr the embedding and output weights
 *     keep the decoupled lr (optimizer/__init__.py, get_mup_config_overrides; nothing when m = 1).
 * With muP off every function returns the non-muP value. */
#ifndef MT_MUP_H
#define MT_MUP_H

#include "core/model/model_layout.h"
#include "core/recipe/recipe.h"

/* m: hidden / base_hidden; 1 when muP is off */
double mt_mup_width_mult(const mt_model_cfg *c);
/* the attention's softmax scale for heads of head_dim channels */
double mt_mup_softmax_scale(const mt_model_cfg *c, int head_dim);
/* the logits' and the embedding output's multipliers (1: none) */
double mt_mup_output_mult(const mt_model_cfg *c);
double mt_mup_embedding_mult(const mt_model_cfg *c);
/* the word / position embedding or the output layer ("wte", "wpe", "lm_head") */
int mt_mup_is_embedding_class(const mt_param_tensor *t);
/* a matrix-like tensor outside the embedding class: the one whose Adam lr and eps muP scales */
int mt_mup_is_hidden(const mt_param_tensor *t);
/* the factor on lr, min_lr and eps of tensor t's Adam update (1 or 1 / m) */
double mt_mup_adam_mult(const mt_model_cfg *c, const mt_param_tensor *t);
/* the normal init's std of a tensor of init kind MT_INIT_NORMAL / MT_INIT_NORMAL_OUTPUT in a model
 * of `layers` layers (without muP: init_std, and init_std / sqrt(2 layers) for output projections) */
double mt_mup_init_std(const mt_model_cfg *c, const mt_param_tensor *t, int layers);

#endif
