/* tokenizer_args.h — flag parsing shared by `mtrain preprocess` and `mtrain tokenize`: the
 * tokenizer-choosing flags (--tokenizer,
 * --vocab, --merges, --tokenizer-json and Megatron's spellings of them), with the rule that
 * picks the tokenizer when --tokenizer is not given. Rule kept: nothing here prints or exits;
 * the commands word their own messages. */
#ifndef MT_CMD_TOKENIZER_ARGS_H
#define MT_CMD_TOKENIZER_ARGS_H

#include "cmd/cmd_args.h"
#include "core/data/tokenizer.h"

/* Takes argv[*i] (and its value) when it is one of
 *   --tokenizer / --tokenizer-type NAME -> *tokenizer
 *   --vocab / --vocab-file FILE        -> files->vocab_path
 *   --merges / --merge-file FILE       -> files->merges_path
 *   --tokenizer-json FILE              -> files->json_path
 *   --tokenizer-model FILE             -> files->json_path, only when megatron_model_alias
 *                                         (preprocess takes it, as preprocess_data.py does)
 * and returns 1; returns 0 otherwise (*missing = 1 when it was one of them without a value). */
int mt_tokenizer_flag(int argc, char **argv, int *i, const char **tokenizer,
                      mt_tokenizer_files *files, int megatron_model_alias, int *missing);

/* The tokenizer to open: `name` when given, else "GPTSentencePieceTokenizer" with a file named
 * *.model, "hf" with another tokenizer.json, "gpt2bpe" with a vocabulary, else `fallback`
 * (which may be NULL). */
const char *mt_tokenizer_name_or_default(const char *name, const mt_tokenizer_files *files,
                                         const char *fallback);

#endif
