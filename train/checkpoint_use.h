/* checkpoint_use.h — a save opened to be used rather than resumed (mtrain generate, mtrain
 * logprobs): checkpoint.load resolved to one save, the save's tokenizer checked against the
 * recipe's and opened, the model built for inference, then the save's weights loaded without its
 * optimizer state. */
#ifndef MT_TRAIN_CHECKPOINT_USE_H
#define MT_TRAIN_CHECKPOINT_USE_H

#include "train/checkpoint.h"

/* Resolves r->checkpoint.load (set) to the folder of one save (path), checks its tokenizer
 * (mt_ckpt_check_tokenizer with tool and verb; log gets one line on the save) and opens the
 * recipe's tokenizer into *tok. MT_ERR_IO when checkpoint.load holds no save ("nothing to
 * <purpose>"). */
mt_status mt_ckpt_open_for_use(const mt_recipe *r, const char *tool, const char *verb, const char *purpose,
                               FILE *log, char *path, size_t path_bytes, int64_t *iteration, mt_tokenizer **tok);

/* The model of r for inference (no optimizer shards): mixture-of-experts layers route every token
 * (dropless). The capacity factor is a training rule (an expert's assignments past its capacity
 * within a sequence are dropped, so a token's output depends on the tokens routed before it); the
 * model a tool scores or samples, like the Hugging Face export (MixtralForCausalLM), has none. */
mt_status mt_model_create_for_use(mt_model *m, const mt_recipe *r, mt_backend *be, const mt_model_shape *s);

/* Loads the weights of the save at path into m (any saved layout); the optimizer state is not
 * read. */
mt_status mt_ckpt_load_weights(const mt_recipe *r, mt_model *m, const mt_parallel_state *ps, const char *path);

#endif
