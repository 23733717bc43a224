/* recipe_args.c — see recipe_args.h. */
#include "cmd/recipe_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt/ckpt_files.h"
#include "core/ckpt/manifest.h"
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

/* Megatron's --use-checkpoint-args (load_args_from_checkpoint): the model from the recipe the save
 * in --load holds (its manifest). The shape keys only where the command line left them unset, the
 * kind keys (model.arch and the keys of the model's function) always, as Megatron's _set_arg and
 * _set_arg(force=True) split them; the layout and the
 * tokenizer stay the command line's. No save there yet: the command line's model, with a note. */
static const char *const ckpt_shape_keys[] = {"model.layers", "model.hidden", "model.ffn_hidden", "model.seq_length",
                                              "model.heads", "model.head_dim", "model.max_position", "model.vocab",
                                              NULL};

static int has_arg(int argc, char **argv, const char *flag) {
    for (int i = 0; i < argc; i++)
        if (argv[i] && !strcmp(argv[i], flag)) return 1;
    return 0;
}

static mt_status model_from_checkpoint(mt_recipe *r) {
    const char *root = r->checkpoint.load;
    char dir[MT_CKPT_PATH_MAX], v[256];
    int64_t it = 0;
    if (!root[0]) {
        snprintf(r->notes + strlen(r->notes), sizeof r->notes - strlen(r->notes),
                 "--use-checkpoint-args: no --load, the command line's model (as Megatron)\n");
        return MT_OK;
    }
    if (mt_ckpt_is_save_dir(root)) snprintf(dir, sizeof dir, "%s", root);
    else if (mt_ckpt_read_tracker(root, &it) == MT_OK) mt_ckpt_iter_path(root, it, "", dir, sizeof dir);
    else {
        mt_clear_error();
        snprintf(r->notes + strlen(r->notes), sizeof r->notes - strlen(r->notes),
                 "--use-checkpoint-args: no save in %.200s yet, the command line's model (as Megatron)\n", root);
        return MT_OK;
    }
    mt_manifest mf;
    memset(&mf, 0, sizeof mf);
    mt_status st = mt_manifest_load(dir, &mf);
    mt_recipe *saved = st == MT_OK ? malloc(sizeof *saved) : NULL;
    if (st == MT_OK && !saved) st = mt_errorf(MT_ERR_OOM, "--use-checkpoint-args: the save's recipe");
    if (st == MT_OK && !mf.recipe_yaml) st = mt_errorf(MT_ERR_DATA, "--use-checkpoint-args: %s holds no recipe", dir);
    if (st == MT_OK) {
        mt_recipe_defaults(saved);
        st = mt_recipe_load_string(saved, mf.recipe_yaml, strlen(mf.recipe_yaml), dir);
    }
    /* the kind keys: model.arch, then every key of the model's function (MT_KF_FUNCTION in the key table) */
    for (int id = -1; st == MT_OK && id < mt_recipe_key_count(); id++) {
        const char *k = id < 0 ? "model.arch" : mt_recipe_key_name(id);
        if ((id < 0 || mt_recipe_key_changes_function(id)) && mt_recipe_value_text(saved, k, v, sizeof v))
            st = mt_recipe_set(r, k, v, "--use-checkpoint-args");
    }
    for (const char *const *k = ckpt_shape_keys; st == MT_OK && *k; k++)
        if (!mt_recipe_key_is_set(r, mt_recipe_key_find(*k)) && mt_recipe_value_text(saved, *k, v, sizeof v))
            st = mt_recipe_set(r, *k, v, "--use-checkpoint-args");
    free(saved);
    mt_manifest_free(&mf);
    return st;
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
    const int from_ckpt = has_arg(*argc, argv, "--use-checkpoint-args");
    int bad_args = mt_recipe_apply_args(r, argc, argv) != MT_OK;
    if (!bad_args && from_ckpt && model_from_checkpoint(r) != MT_OK) bad_args = 1;
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
