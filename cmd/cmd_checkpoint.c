/* cmd_checkpoint.c — `mtrain checkpoint inspect DIR [--iteration N]`: what a save holds (iteration,
 * consumed samples, the layout it was saved at, model, tokenizer, learning-rate schedule, every
 * tensor with its global shape, kinds and bytes) and a verification of every file (size, CRC-32C,
 * safetensors header, every piece's entry). DIR is a checkpoint folder (the tracker's save, or
 * --iteration N) or one iter_* folder. Exit 0 when everything verifies, 1 otherwise.
 * Rule kept: returns the exit code; cmd/mtrain.c exits. */
#include "cmd/cmd_checkpoint.h"
#include "cmd/cmd_args.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt/ckpt_files.h"
#include "core/ckpt/ckpt_read.h"
#include "core/ckpt/manifest.h"

static void usage(FILE *f) {
    fprintf(f, "usage: mtrain checkpoint inspect DIR [--iteration N]\n"
               "  DIR: a checkpoint folder (--save / checkpoint.dir: the tracker's save, or --iteration N)\n"
               "  or one save's iter_NNNNNNN folder. Prints what the save holds and verifies every file\n"
               "  (size, CRC-32C, safetensors header, each piece). Exit 0: the save is complete and intact.\n");
}

static int inspect(const char *dir, int64_t iteration) {
    char path[MT_CKPT_PATH_MAX];
    if (mt_ckpt_is_save_dir(dir)) {
        snprintf(path, sizeof path, "%s", dir);
    } else {
        if (iteration <= 0 && mt_ckpt_read_tracker(dir, &iteration) != MT_OK) return mt_cmd_fail("mtrain checkpoint");
        mt_ckpt_iter_path(dir, iteration, NULL, path, sizeof path);
    }
    mt_manifest mf;
    if (mt_manifest_load(path, &mf) != MT_OK) return mt_cmd_fail("mtrain checkpoint");
    const mt_manifest_layout *y = &mf.layout;
    printf("checkpoint %s\n", path);
    printf("  iteration %" PRId64 " of %" PRId64 ", %" PRId64 " consumed samples, %" PRId64 " optimizer steps, %" PRId64
           " skipped, seed %" PRIu64 "\n", mf.iteration, mf.train_iters, mf.consumed_samples, mf.optimizer_steps,
           mf.skipped_iterations, mf.seed);
    printf("  saved at %d rank(s): tp %d x pp %d (vpp %d) x dp %d, cp %d, ep %d%s%s\n", y->world_size, y->tensor,
           y->pipeline, y->virtual_pipeline, y->data, y->context, y->expert,
           y->sequence_parallel ? ", sequence parallel" : "", y->distributed_optimizer ? ", distributed optimizer" : "");
    printf("  model %s, vocabulary %d, weights %s; tokenizer %s%s%s (crc32c %08x)\n", mf.arch, mf.vocab, mf.weight_dtype,
           mf.tokenizer, mf.tokenizer_vocab[0] ? " " : "", mf.tokenizer_vocab, mf.tokenizer_crc32c);
    printf("  learning rate %.6g at save (max %.6g, min %.6g, warmup %" PRId64 ", %s decay over %" PRId64 ")\n", mf.lr,
           mf.max_lr, mf.min_lr, mf.warmup_iters, mf.decay_style, mf.decay_iters);
    printf("  %d tensors, %zu pieces:\n", mf.n_tensors, mf.n_pieces);
    uint64_t params = 0;
    for (int ti = 0; ti < mf.n_tensors; ti++) {
        const mt_manifest_tensor *t = &mf.tensors[ti];
        uint64_t bytes[MT_CK_KINDS] = {0};
        int pieces = 0;
        for (size_t k = 0; k < mf.n_pieces; k++)
            if (mf.pieces[k].tensor == ti) bytes[mf.pieces[k].kind] += mf.pieces[k].n_bytes, pieces++;
        params += (uint64_t)t->shape[0] * t->shape[1] * t->shape[2];
        char kinds[128] = "";
        size_t used = 0;
        for (int k = 0; k < MT_CK_KINDS; k++)
            if (bytes[k])
                used += (size_t)snprintf(kinds + used, sizeof kinds - used, "%s%s %.2f MiB", used ? ", " : "",
                                         mt_ckpt_kind_name(k), bytes[k] / 1048576.0);
        printf("    %-10s (%" PRId64 ", %" PRId64 ", %" PRId64 ")%s  %d pieces: %s\n", t->name, t->shape[0], t->shape[1],
               t->shape[2], t->stacked ? " per layer" : "", pieces, kinds);
    }
    printf("  %" PRIu64 " parameters (padding rows included)\n", params);
    int bad = 0;
    uint64_t total = 0;
    for (int fi = 0; fi < mf.n_files; fi++) {
        mt_ckpt_file f;
        memset(&f, 0, sizeof f);
        if (mt_ckpt_file_open(path, &mf, fi, &f) != MT_OK) {
            fprintf(stderr, "mtrain checkpoint: error: %s\n", mt_last_error());
            bad++;
        } else {
            total += f.n_bytes;
            printf("  %s  %" PRIu64 " bytes  crc32c %08x  %d entries  ok\n", mf.files[fi].name, mf.files[fi].bytes,
                   mf.files[fi].crc32c, f.hdr.n_entries);
        }
        mt_ckpt_file_close(&f);
    }
    if (bad) {
        fprintf(stderr, "mtrain checkpoint: %d of %d files failed verification: this save cannot be loaded\n", bad,
                mf.n_files);
    } else {
        printf("verified: %d files, %.1f MiB, every size, checksum and entry matches the manifest\n", mf.n_files,
               total / 1048576.0);
    }
    mt_manifest_free(&mf);
    return bad ? 1 : 0;
}

int mt_cmd_checkpoint(int argc, char **argv) {
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (strcmp(argv[0], "inspect")) {
        fprintf(stderr, "mtrain checkpoint: unknown action '%s'\n", argv[0]);
        usage(stderr);
        return 2;
    }
    const char *dir = NULL;
    int64_t iteration = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iteration") && i + 1 < argc) {
            char *end = NULL;
            iteration = strtoll(argv[++i], &end, 10);
            if (*end || iteration <= 0) {
                fprintf(stderr, "mtrain checkpoint: --iteration %s: expected a positive iteration number\n", argv[i]);
                return 2;
            }
        } else if (!dir && argv[i][0] != '-') {
            dir = argv[i];
        } else {
            fprintf(stderr, "mtrain checkpoint: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }
    return inspect(dir, iteration);
}
