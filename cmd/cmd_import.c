/* cmd_import.c — `mtrain import --format hf --input HF_DIR --save CKPT --config RECIPE [--set k=v]`:
 * a Hugging Face GPT2LMHeadModel / LlamaForCausalLM / MixtralForCausalLM folder into an mtrain checkpoint folder
 * (core/ckpt/hf_import.h) for the recipe's model, to continue pretraining from released weights:
 * train with `--load CKPT --finetune` (or --no-load-optim) in any layout.
 * Rule kept: returns the exit code; cmd/mtrain.c exits. */
#include "cmd/recipe_args.h"
#include "cmd/cmd_import.h"

#include <stdio.h>
#include <string.h>

#include "core/ckpt/hf_import.h"
#include "core/recipe/recipe.h"

static void usage(FILE *f) {
    fprintf(f, "usage: mtrain import --format hf --input HF_DIR --save CKPT --config RECIPE [--set key=value ...]\n"
               "  HF_DIR: config.json + model.safetensors (or shards and model.safetensors.index.json) of a\n"
               "  GPT2LMHeadModel, LlamaForCausalLM or MixtralForCausalLM; RECIPE: the model it is (shapes,\n"
               "  experts and every field that changes the function are checked against config.json). Writes\n"
               "  CKPT/iter_0000000 (weights only) and its tracker; continue with\n"
               "  mtrain --config RECIPE --load CKPT --finetune (any tp / pp / ep / dp layout).\n");
}

int mt_cmd_import(int argc, char **argv) {
    const char *format = NULL, *input = NULL, *save = NULL, *config = NULL;
    static mt_recipe r;
    char *rest[256];
    int n_rest = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--format") && i + 1 < argc) {
            format = argv[++i];
        } else if (!strcmp(a, "--input") && i + 1 < argc) {
            input = argv[++i];
        } else if (!strcmp(a, "--save") && i + 1 < argc) {
            save = argv[++i];
        } else if ((!strcmp(a, "--config") || !strcmp(a, "-c")) && i + 1 < argc) {
            config = argv[++i];
        } else if (n_rest < 256) {
            rest[n_rest++] = argv[i];
        }
    }
    if (!format || !input || !save || !config) {
        usage(stderr);
        return 2;
    }
    if (strcmp(format, "hf")) {
        fprintf(stderr, "mtrain import: --format %s: the one format is hf (Hugging Face transformers)\n", format);
        return 2;
    }
    const int rc = mt_cmd_load_recipe("mtrain import", config, &n_rest, rest, &r);
    if (rc) return rc;
    mt_status st = MT_OK;
    int n = 0;
    double seconds = 0;
    mt_hf_import_opts o = {.input = input, .save = save};
    if (st == MT_OK) st = mt_hf_import(&o, &r, &n, &seconds);
    if (st != MT_OK) {
        fprintf(stderr, "mtrain import: error: %s\n", mt_last_error());
        return 1;
    }
    printf("mtrain import: %d tensors from %s into %s/iter_0000000 in %.2f s; train on with --load %s --finetune\n", n,
           input, save, seconds, save);
    return 0;
}
