/* train_fim.c — data.fim for the trainer (train_fim.h): tokenizer, sentinel ids, transform. */
#include "train/train_fim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"

/* The recipe holds fp32; Megatron's rates are Python floats (doubles). Every rate written with up
 * to 7 significant digits comes back as the double of its decimal (0.1f -> 0.1), so the draws'
 * thresholds are Megatron's. */
static double recipe_rate(float f) {
    char b[32];
    snprintf(b, sizeof b, "%.7g", (double)f);
    return strtod(b, NULL);
}

static mt_status lookup(const mt_tokenizer *tok, const char *key, const char *token, int32_t *id, int *n_unknown,
                        char *unknown, size_t n_unknown_bytes) {
    int unk = 0;
    mt_status st = mt_fim_token_id(tok, token, id, &unk);
    if (st != MT_OK) return mt_error_context(st, "%s: ", key);
    if (unk) {
        const size_t used = strlen(unknown);
        snprintf(unknown + used, n_unknown_bytes - used, "%s%s", used ? ", " : "", token);
        (*n_unknown)++;
    }
    return MT_OK;
}

mt_status mt_train_fim_open(mt_train_fim *tf, const mt_recipe *r, mt_blended_dataset *const *ds, int n_ds,
                            FILE *log) {
    memset(tf, 0, sizeof *tf);
    if (!r->data.fim.enabled) return MT_OK;
    mt_status st = mt_recipe_tokenizer_open(r, &tf->tok);
    if (st != MT_OK) return mt_error_context(st, "data.fim.enabled: ");
    const char *keys[5] = {"data.fim.prefix_token", "data.fim.middle_token", "data.fim.suffix_token",
                           "data.fim.pad_token", "data.fim.eod_token"};
    const char *tokens[5] = {r->data.fim.prefix_token, r->data.fim.middle_token, r->data.fim.suffix_token,
                             r->data.fim.pad_token, r->data.fim.eod_token};
    int32_t id[6] = {0, 0, 0, 0, 0, -1};
    char unknown[400] = "";
    int n_unknown = 0;
    for (int i = 0; i < 5 && st == MT_OK; i++)
        st = lookup(tf->tok, keys[i], tokens[i], &id[i], &n_unknown, unknown, sizeof unknown);
    if (st == MT_OK && r->data.fim.split_sample[0])
        st = lookup(tf->tok, "data.fim.split_sample", r->data.fim.split_sample, &id[5], &n_unknown, unknown,
                    sizeof unknown);
    if (st != MT_OK) return st;
    const mt_fim_cfg cfg = {.rate = recipe_rate(r->data.fim.rate), .spm_rate = recipe_rate(r->data.fim.spm_rate),
                            .fragment_rate = recipe_rate(r->data.fim.fragment_rate), .prefix_id = id[0],
                            .middle_id = id[1], .suffix_id = id[2], .pad_id = id[3], .eod_id = id[4],
                            .split_id = id[5], .no_prefix = r->data.fim.no_prefix[0] ? r->data.fim.no_prefix : NULL,
                            .seed = (uint32_t)r->training.seed};
    if ((st = mt_fim_open(&tf->fim, &cfg, tf->tok)) != MT_OK) return st;
    for (int i = 0; i < n_ds; i++) mt_blended_dataset_set_fim(ds[i], tf->fim);
    if (log)
        fprintf(log, "mtrain: data.fim: rate %g, spm_rate %g; sentinels prefix %d middle %d suffix %d pad %d, "
                "segments cut at %d%s%s%s\n", cfg.rate, cfg.spm_rate, id[0], id[1], id[2], id[3], id[4],
                n_unknown ? " (" : "", unknown, n_unknown ? ": no tokens of the vocabulary, so <|endoftext|>, as "
                "Megatron's Hugging Face GPT-2 tokenizer maps them)" : "");
    return MT_OK;
}

void mt_train_fim_close(mt_train_fim *tf) {
    mt_fim_close(tf->fim);
    mt_tokenizer_free(tf->tok);
    memset(tf, 0, sizeof *tf);
}
