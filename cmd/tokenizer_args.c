/* tokenizer_args.c — the tokenizer flags shared by cmd_preprocess.c and
 * cmd_tokenize.c (tokenizer_args.h). */
#include "cmd/tokenizer_args.h"

#include <string.h>

/* argv[*i] is `name` or (unless *missing was just set) `alias` (NULL: none). */
static const char *value_of(int argc, char **argv, int *i, const char *name, const char *alias,
                            int *missing) {
    const char *v = mt_flag_value(argc, argv, i, name, missing);
    if (!v && alias && !*missing) v = mt_flag_value(argc, argv, i, alias, missing);
    return v;
}

int mt_tokenizer_flag(int argc, char **argv, int *i, const char **tokenizer,
                      mt_tokenizer_files *files, int megatron_model_alias, int *missing) {
    const char *v;
    if ((v = value_of(argc, argv, i, "--tokenizer", "--tokenizer-type", missing))) {
        *tokenizer = v;
    } else if ((v = value_of(argc, argv, i, "--vocab", "--vocab-file", missing))) {
        files->vocab_path = v;
    } else if ((v = value_of(argc, argv, i, "--merges", "--merge-file", missing))) {
        files->merges_path = v;
    } else if ((v = value_of(argc, argv, i, "--tokenizer-json",
                             megatron_model_alias ? "--tokenizer-model" : NULL, missing))) {
        files->json_path = v;
    } else {
        return 0;
    }
    return 1;
}

const char *mt_tokenizer_name_or_default(const char *name, const mt_tokenizer_files *files,
                                         const char *fallback) {
    if (name) return name;
    if (files->json_path) {
        /* a SentencePiece .model: its ids as they are (Megatron's GPTSentencePieceTokenizer) */
        const size_t n = strlen(files->json_path);
        return n >= 6 && !strcmp(files->json_path + n - 6, ".model") ? "GPTSentencePieceTokenizer" : "hf";
    }
    return files->vocab_path ? "gpt2bpe" : fallback;
}
