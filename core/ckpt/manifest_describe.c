/* manifest_describe.c — mt_manifest_describe of manifest.h: the part of a manifest that comes from
 * the recipe alone (seed, schedule, model, tokenizer identity, the recipe's text), shared by the
 * training save (train/checkpoint_save.c) and the one-rank save of tools (ckpt_single.c). */
#include <stdlib.h>
#include <string.h>

#include "core/ckpt/manifest.h"
#include "core/crc32c.h"
#include "core/file_read.h"

/* the tokenizer's identity: CRC-32C of its vocab and merges files (0 when there are none) */
static uint32_t tokenizer_crc(const mt_recipe *r) {
    uint32_t crc = 0;
    const char *files[2] = {r->data.vocab, r->data.merges};
    for (int i = 0; i < 2; i++) {
        if (!files[i][0]) continue;
        char *text = NULL;
        size_t n = 0;
        if (mt_read_whole_file(files[i], &text, &n) == MT_OK) crc = mt_crc32c(crc, text, n);
        free(text);
    }
    mt_clear_error();
    return crc;
}

mt_status mt_manifest_describe(mt_manifest *mf, const mt_recipe *r, const char *weight_dtype, int vocab) {
    const mt_optimizer_cfg *o = &r->optimizer;
    mf->train_iters = r->training.iters;
    mf->seed = (uint64_t)r->training.seed;
    mf->max_lr = o->lr;
    mf->min_lr = o->min_lr;
    mf->warmup_iters = o->warmup_iters;
    mf->decay_iters = o->decay_iters > 0 ? o->decay_iters : r->training.iters;
    mt_recipe_value_text(r, "optimizer.decay", mf->decay_style, sizeof mf->decay_style);
    snprintf(mf->weight_dtype, sizeof mf->weight_dtype, "%s", weight_dtype);
    mf->vocab = vocab;
    snprintf(mf->arch, sizeof mf->arch, "%s", r->model.arch == MT_ARCH_LLAMA ? "llama" : "gpt");
    snprintf(mf->tokenizer, sizeof mf->tokenizer, "%s", mt_recipe_tokenizer_name(r->data.tokenizer));
    snprintf(mf->tokenizer_vocab, sizeof mf->tokenizer_vocab, "%s", r->data.vocab);
    snprintf(mf->tokenizer_merges, sizeof mf->tokenizer_merges, "%s", r->data.merges);
    mf->tokenizer_crc32c = tokenizer_crc(r);
    char *yaml = NULL;
    size_t yaml_n = 0;
    FILE *yf = open_memstream(&yaml, &yaml_n);
    if (!yf) return mt_errorf(MT_ERR_OOM, "checkpoint manifest: recipe text");
    mt_recipe_write_yaml(yf, r);
    fclose(yf);
    free(mf->recipe_yaml);
    mf->recipe_yaml = yaml;
    return MT_OK;
}
