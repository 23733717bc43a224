/* cmd_export.c — `mtrain export --load CKPT --format hf --output DIR [--dtype fp32|bf16]
 * [--iteration N] [--max-shard-size BYTES] [--force]`: a save of any layout as a Hugging Face
 * transformers folder (core/ckpt/hf_export.h). Exit 0 on success, 1 when the export fails
 * (nothing is left at DIR), 2 on a usage error.
 * Rule kept: returns the exit code; cmd/mtrain.c exits. */
#include "cmd/cmd_export.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt/hf_export.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtrain export --load CKPT --output DIR [--format hf] [--dtype fp32|bf16] [--iteration N]\n"
            "                     [--max-shard-size BYTES] [--force]\n"
            "  Writes the weights of a save (any tp / pp / ep / dp layout) as a Hugging Face transformers model\n"
            "  folder: config.json (GPT2LMHeadModel for arch gpt, LlamaForCausalLM for arch llama,\n"
            "  MixtralForCausalLM for llama with model.moe.experts > 0, Qwen2MoeForCausalLM with gated shared\n"
            "  experts, routing dropless), generation_config.json,\n"
            "  model.safetensors (model-0000K-of-0000N.safetensors + model.safetensors.index.json past\n"
            "  --max-shard-size) and the tokenizer files (gpt2bpe: vocab.json, merges.txt; hf: tokenizer.json).\n"
            "  --load CKPT           a checkpoint folder (its latest save, or --iteration N) or one iter_* folder\n"
            "  --output DIR          the folder to create; written as DIR.tmp, renamed when complete\n"
            "  --format hf           the output format (default hf, the only one)\n"
            "  --dtype fp32|bf16     dtype of the weights written (default fp32; bf16 rounds to nearest even)\n"
            "  --max-shard-size N    bytes per weight file: 5GB (default, as save_pretrained), 500MB, 2GiB, 1000000\n"
            "  --force               replace DIR when it exists and is not empty (only once the new one is complete)\n");
}

static int bad_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "mtrain export: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

int mt_cmd_export(int argc, char **argv) {
    mt_hf_export_opts o = {.dtype = MT_F32};
    const char *format = "hf";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--force")) {
            o.force = 1;
            continue;
        }
        const int takes = !strcmp(a, "--load") || !strcmp(a, "--output") || !strcmp(a, "--format") ||
                          !strcmp(a, "--dtype") || !strcmp(a, "--iteration") || !strcmp(a, "--max-shard-size");
        if (!takes) return bad_usage("unexpected argument '%s'", a);
        if (i + 1 >= argc) return bad_usage("%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--load")) {
            o.load = v;
        } else if (!strcmp(a, "--output")) {
            o.output = v;
        } else if (!strcmp(a, "--format")) {
            format = v;
        } else if (!strcmp(a, "--dtype")) {
            if (!strcmp(v, "fp32") || !strcmp(v, "float32"))
                o.dtype = MT_F32;
            else if (!strcmp(v, "bf16") || !strcmp(v, "bfloat16"))
                o.dtype = MT_BF16;
            else
                return bad_usage("--dtype %s: expected fp32 or bf16", v);
        } else if (!strcmp(a, "--iteration")) {
            char *end = NULL;
            o.iteration = strtoll(v, &end, 10);
            if (!*v || *end || o.iteration <= 0)
                return bad_usage("--iteration %s: expected a positive iteration number", v);
        } else if (mt_hf_parse_size(v, &o.max_shard_bytes) != MT_OK) {
            return bad_usage("%s", mt_last_error());
        }
    }
    if (strcmp(format, "hf")) return bad_usage("--format %s: unknown format; the one format is hf (Hugging Face)", format);
    if (!o.load) return bad_usage("%s", "--load CKPT is required");
    if (!o.output) return bad_usage("%s", "--output DIR is required");
    mt_hf_export_stats s;
    if (mt_hf_export(&o, &s) != MT_OK) {
        fprintf(stderr, "mtrain export: error: %s\n", mt_last_error());
        fprintf(stderr, "mtrain export: nothing was written to %s\n", o.output);
        return 1;
    }
    if (s.note[0]) printf("mtrain export: note: %s\n", s.note);
    const double mb = (double)s.bytes / 1e6;
    printf("exported %s iteration %" PRId64 " (%s) to %s: %d tensors in %d weight file%s, %s, %" PRIu64
           " weight bytes, %.2f MB written in %.2f s (%.1f MB/s)\n", s.save, s.iteration, s.arch, o.output, s.n_tensors,
           s.n_files, s.n_files == 1 ? "" : "s", o.dtype == MT_F32 ? "fp32" : "bf16", s.tensor_bytes, mb, s.seconds,
           s.seconds > 0 ? mb / s.seconds : 0.0);
    return 0;
}
