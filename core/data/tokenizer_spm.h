/* tokenizer_spm.h — SentencePiece tokenizers (tokenizer_spm.c) over a .model file, as
 * Megatron's three classes use them:
 *   "SentencePieceTokenizer" (alias "spm"): the pieces, then <CLS> <SEP> <EOD> <MASK> and the
 *       pad/bos/eos pieces (<PAD> <BOS> <EOS> when the model has none) added after them unless
 *       the model has them; those tokens are cut out of the text and the pieces between them
 *       encoded separately; eod = <EOD>;
 *   "GPTSentencePieceTokenizer" (alias "gptspm"): the model's ids as they are; eod = eos (</s>);
 *   "Llama2Tokenizer" (alias "llama2"): every document starts with bos (<s>); eod = eos.
 * Unigram and BPE models, byte fallback, user-defined pieces; normalisation by the model's
 * precompiled character map (nmt_nfkc ...) or none (identity). */
#ifndef MT_TOKENIZER_SPM_H
#define MT_TOKENIZER_SPM_H

#include "core/data/tokenizer.h"

/* 1 when name is one of the names above. */
int mt_tokenizer_spm_name(const char *name);
/* Opens the tokenizer `name` (mt_tokenizer_spm_name) over the .model file at model_path. */
mt_status mt_tokenizer_spm_open(mt_tokenizer **out, const char *name, const char *model_path);
/* The same over a model already in memory (bytes[0, n_bytes), named `what` in messages). */
mt_status mt_tokenizer_spm_open_bytes(mt_tokenizer **out, const char *name, const void *bytes, size_t n_bytes,
                                      const char *what);

#endif
