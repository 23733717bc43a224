/* recipe_args.c — see recipe_args.h. */
#include "cmd/recipe_args.h"

#include <stdio.h>
#include <string.h>

#include "core/data/tokenizer.h"

/* A Hugging Face tokenizer.json implies the vocabulary size (every id it holds, added tokens too,
 * as Megatron's HuggingFaceTokenizer counts them), and so does a SentencePiece .model (its pieces,
 * plus the tokens Megatron's SentencePieceTokenizer adds): model.vocab from it when nothing set
 * it. Returns 1 with the reason in why when the file cannot be opened as that tokenizer. */
static int vocab_from_tokenizer_json(mt_recipe *r, char *why, size_t n_why) {
    const mt_tokenizer_kind k = r->data.tokenizer;
    if ((k != MT_TOK_HF && k != MT_TOK_SPM && k != MT_TOK_GPTSPM && k != MT_TOK_LLAMA2) || r->model.vocab > 0 ||
        !r->data.vocab[0])
        return 0;
    mt_tokenizer_files files = { .vocab_path = r->data.vocab, .merges_path = NULL, .json_path = r->data.vocab };
    mt_tokenizer *tok = NULL;
    if (mt_tokenizer_open(&tok, mt_recipe_tokenizer_name(k), &files) != MT_OK) {
        snprintf(why, n_why, "data.vocab (the vocabulary size comes from it): %s", mt_last_error());
        mt_clear_error();
        return 1;
    }
    char n[32];
    snprintf(n, sizeof n, "%d", (int)mt_tokenizer_vocab_size(tok));
    mt_tokenizer_free(tok);
    if (mt_recipe_set(r, "model.vocab", n, k == MT_TOK_HF ? "the tokenizer.json" : "the SentencePiece model") != MT_OK)
        mt_clear_error();
    return 0;
}

int mt_cmd_recipe_problems(const char *config, int *argc, char **argv, mt_recipe *r, char *report, size_t n_report,
                           int *file_ok) {
    report[0] = 0;
    *file_ok = 0;
    mt_recipe_defaults(r);
    if (config && mt_recipe_load_file(r, config) != MT_OK) {
        snprintf(report, n_report, "%s", mt_last_error());
        return 1;
    }
    /* no recipe file: the flags alone define the run, on Megatron's defaults */
    if (!config && mt_recipe_megatron_defaults(r) != MT_OK) {
        snprintf(report, n_report, "%s", mt_last_error());
        return 1;
    }
    *file_ok = 1;
    /* the flags' problems and the unknown arguments in one report */
    int bad_args = mt_recipe_apply_args(r, argc, argv) != MT_OK;
    if (bad_args) snprintf(report, n_report, "%s", mt_last_error());
    char why[1024];
    if (!bad_args && vocab_from_tokenizer_json(r, why, sizeof why)) {
        snprintf(report, n_report, "%s", why);
        bad_args = 1;
    }
    const int unknown = mt_recipe_unknown_args(*argc, argv) != MT_OK;
    if (unknown) {
        const size_t used = strlen(report);
        snprintf(report + used, n_report - used, "%s%s", used ? "\n" : "", mt_last_error());
    }
    return bad_args ? 1 : unknown ? 2 : 0;
}

int mt_cmd_load_recipe(const char *tool, const char *config, int *argc, char **argv, mt_recipe *r) {
    static char report[16384];
    int file_ok;
    const int rc = mt_cmd_recipe_problems(config, argc, argv, r, report, sizeof report, &file_ok);
    if (rc) fprintf(stderr, "%s: error: %s\n", tool, report);
    return rc;
}
