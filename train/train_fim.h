/* train_fim.h — data.fim (Megatron's --fim-data) for the trainer: the recipe's tokenizer, the
 * sentinel ids looked up in it, and the transform (core/data/fim.h) every dataset of the run
 * reads through (train, valid and test alike, as Megatron builds GPTFIMDataset for each split). */
#ifndef MT_TRAIN_FIM_H
#define MT_TRAIN_FIM_H

#include "core/data/blended_dataset.h"
#include "core/data/fim.h"
#include "core/recipe/recipe.h"

typedef struct {
    mt_tokenizer *tok;
    mt_fim *fim;
} mt_train_fim;

/* Off (zeroed) unless data.fim.enabled; then opens the tokenizer and the transform and attaches
 * it to each dataset given (NULL ones skipped). `log` (the logging rank's stderr, else NULL) gets
 * one line on the sentinels. */
mt_status mt_train_fim_open(mt_train_fim *tf, const mt_recipe *r, mt_blended_dataset *const *ds, int n_ds,
                            FILE *log);
void mt_train_fim_close(mt_train_fim *tf);

#endif
