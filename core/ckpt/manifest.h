/* manifest.h — a checkpoint's table of contents, manifest.json in each iter_NNNNNNN/ folder:
 * what was saved (iteration, consumed samples, optimizer steps, the learning-rate schedule, seed,
 * the layout at save time, the tokenizer, the resolved recipe as YAML), every file with its size
 * and CRC-32C, and every logical tensor with its global shape and the pieces that hold it (kind,
 * file, byte offset, safetensors entry, dtype, global box, flat range). The writer is rank 0's;
 * the parser checks every field a loader relies on against the rest of the manifest (pieces
 * inside their tensor's shape, byte sizes matching dtype x elements, each kind's pieces adding
 * up to its tensor's elements) and names the file and field at fault.
 * Rule: a manifest that parses is one a loader can follow without further bounds checks,
 * except the files' contents (sizes, checksums, safetensors headers), checked when mapped. */
#ifndef MT_MANIFEST_H
#define MT_MANIFEST_H

#include <stdint.h>
#include <stdio.h>

#include "core/ckpt/ckpt_layout.h"
#include "core/status.h"

#define MT_MANIFEST_FORMAT "mtrain-checkpoint"
#define MT_MANIFEST_VERSION 1
#define MT_MANIFEST_NAME "manifest.json"
#define MT_RERUN_STATE_MAX 4096 /* the rerun state machine's text in a manifest */
#define MT_CKPT_TRACKER "latest_checkpointed_iteration.txt" /* Megatron's tracker file name */

typedef struct {
    char name[64];
    uint64_t bytes;
    uint32_t crc32c;
} mt_manifest_file;

typedef struct {
    char name[32];
    int64_t shape[3];         /* (layers, rows, cols): see ckpt_layout.h */
    int stacked;
} mt_manifest_tensor;

typedef struct {
    int tensor;               /* index into tensors */
    mt_ckpt_kind kind;
    int file;                 /* index into files */
    uint64_t offset, n_bytes; /* absolute byte range in the file */
    char dtype[8];            /* "F32" | "BF16" */
    char entry[48];           /* safetensors entry name */
    mt_ckpt_box box;          /* global (local_off unused) */
    uint64_t f0, f1;
} mt_manifest_piece;

typedef struct {
    int world_size, tensor, pipeline, virtual_pipeline, data, context, expert;
    int sequence_parallel, distributed_optimizer;
} mt_manifest_layout;

typedef struct {
    int64_t iteration, consumed_samples, optimizer_steps, skipped_iterations, train_iters;
    uint64_t seed;
    /* learning-rate schedule at save time (Megatron's opt_param_scheduler state) */
    double lr, max_lr, min_lr;
    int64_t warmup_iters, decay_iters;
    char decay_style[16];
    mt_manifest_layout layout;
    char weight_dtype[8];     /* compute dtype the weights were saved in */
    int vocab;                /* real vocabulary (rows past it are padding) */
    char arch[16];
    char tokenizer[16];       /* byte | gpt2bpe | hf */
    char tokenizer_vocab[1024], tokenizer_merges[1024];
    uint32_t tokenizer_crc32c; /* of the vocab then merges files' bytes; 0 = none */
    char *recipe_yaml;        /* malloc'd */
    char rerun_state[MT_RERUN_STATE_MAX]; /* a save for Megatron's rerun of its next iteration (train/rerun.h), "" = none */
    mt_manifest_file *files;
    int n_files;
    mt_manifest_tensor *tensors;
    int n_tensors;
    mt_manifest_piece *pieces;
    size_t n_pieces;
    /* the router's expert bias (model.moe.expert_bias; NULL = none): state, not a tensor of the layout,
       (expert_bias_layers = model.layers, expert_bias_experts) f32, written as the floats' bit patterns
       (exact); malloc'd */
    float *expert_bias;
    int expert_bias_layers, expert_bias_experts;
} mt_manifest;

/* Fills what comes from the recipe alone: train_iters, seed, the schedule (but lr at the save),
 * weight_dtype ("F32" | "BF16"), vocab, arch, the tokenizer and its CRC-32C, the recipe as YAML
 * (manifest_describe.c). MT_ERR_OOM. */
mt_status mt_manifest_describe(mt_manifest *m, const mt_recipe *r, const char *weight_dtype, int vocab);
/* Writes m as JSON. Returns MT_ERR_IO when a write fails (the caller owns the file). */
mt_status mt_manifest_write(FILE *f, const mt_manifest *m);
/* Parses manifest text (name for messages) into m (free with mt_manifest_free). MT_ERR_DATA
 * "NAME: field: problem" on anything missing, mistyped or inconsistent. */
mt_status mt_manifest_parse(const char *text, size_t n_bytes, const char *name, mt_manifest *m);
/* Reads and parses DIR/manifest.json. */
mt_status mt_manifest_load(const char *dir, mt_manifest *m);
void mt_manifest_free(mt_manifest *m);
/* Index of the tensor called name, -1 if none. */
int mt_manifest_tensor_find(const mt_manifest *m, const char *name);

#endif
