/* train_support.c — what the trainer can do today, checked before anything is allocated, so a
 * recipe asking for a feature that is not built yet fails at once with a message naming the
 * key, instead of silently training something else. `mtrain plan` and `mtrain check` accept
 * every key; only training refuses. */
#include <stdio.h>

#include "core/data/tokenizer.h"
#include "core/recipe/recipe.h"
#include "train/train.h"

mt_status mt_train_check_supported(const mt_recipe *r, char *note, size_t note_bytes) {
    char where[256];
    note[0] = 0;
#define REFUSE(key, cond, what)                                                                             \
    do {                                                                                                    \
        if (cond) {                                                                                         \
            mt_recipe_where(r, key, where, sizeof where);                                                   \
            return mt_errorf(MT_ERR_UNSUPPORTED, "%s: %s (%s): %s is not implemented in the trainer yet; "    \
                             "`mtrain plan` models it, training needs it removed", where, key, what, what); \
        }                                                                                                   \
    } while (0)
    REFUSE("parallel.context", r->parallel.context > 1 && r->model.moe.experts > 0,
           "context parallelism with MoE layers (model.moe.experts > 0)");
    REFUSE("model.moe.top_k", r->model.moe.experts > 0 && r->model.moe.top_k > 64, "top_k above 64");
    REFUSE("training.recompute_num_layers", r->training.recompute == MT_RECOMPUTE_FULL &&
           r->training.recompute_method == MT_RECOMPUTE_UNIFORM && r->training.recompute_num_layers != 1,
           "uniform full recompute in units of more than one layer (use 1, or training.recompute_method block)");
#undef REFUSE
    (void)note_bytes; /* no accepted-but-not-applied key today (selective recompute is real: model_bwd.c) */
    return MT_OK;
}

mt_status mt_train_mock_eod(const mt_recipe *r, int32_t *eod) {
    switch (r->data.tokenizer) {
    case MT_TOK_BYTE: *eod = 256; break;
    case MT_TOK_GPT2BPE: *eod = 50256; break;
    case MT_TOK_NULL: *eod = r->model.vocab - 1; break;
    default: { /* hf, SentencePiece: the file's own end-of-document token (Llama-3: 128001) */
        mt_tokenizer_files files = {.vocab_path = r->data.vocab[0] ? r->data.vocab : NULL};
        mt_tokenizer *tok = NULL;
        const char *name = mt_recipe_tokenizer_name(r->data.tokenizer);
        mt_status st = mt_tokenizer_open(&tok, name, &files);
        if (st != MT_OK) return mt_error_context(st, "data.mock with data.tokenizer %s (its eod id): ", name);
        *eod = mt_tokenizer_eod(tok);
        mt_tokenizer_free(tok);
    }
    }
    /* Megatron's mock documents hold the ids 1 .. 4094 and eod */
    if (r->model.vocab < 4095 || *eod >= r->model.vocab)
        return mt_errorf(MT_ERR_CONFIG, "data.mock: the mock documents hold the ids 1 to 4094 and eod %d (Megatron's "
                         "MockGPTLowLevelDataset), but model.vocab is %d; set --vocab-size to at least %d",
                         *eod, r->model.vocab, *eod >= 4095 ? *eod + 1 : 4095);
    return MT_OK;
}
