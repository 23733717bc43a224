/* ckpt_global.h — one logical tensor of a save as a whole (unsharded) fp32 array, read from its
 * pieces whatever layout saved them: what export to other formats and tools read. Files are opened
 * through ckpt_read.h (size, CRC-32C, header, entries checked); every element must come from
 * exactly one piece. */
#ifndef MT_CKPT_GLOBAL_H
#define MT_CKPT_GLOBAL_H

#include "core/ckpt/ckpt_read.h"
#include "core/ckpt/manifest.h"

typedef struct {
    char dir[4200];
    mt_manifest mf;
    mt_ckpt_file *files; /* one per manifest file, opened on first use */
} mt_ckpt_reader;

/* Opens the save in folder `path` (one iter_* folder, or a checkpoint folder: its tracker's save). */
mt_status mt_ckpt_reader_open(mt_ckpt_reader *rd, const char *path);
void mt_ckpt_reader_close(mt_ckpt_reader *rd);
/* Tensor `name`, kind `kind`, as shape[0] x shape[1] x shape[2] floats (row-major) into out (the
 * caller sizes it from mt_manifest_tensor_find / .shape). MT_ERR_DATA when a piece is missing or an
 * element is covered twice; MT_ERR_CONFIG when the save has no such tensor or kind. */
mt_status mt_ckpt_read_global(mt_ckpt_reader *rd, const char *name, mt_ckpt_kind kind, float *out);
/* The same for layers [l0, l0 + n_layers) of the tensor only (n_layers x shape[1] x shape[2] floats):
 * a stacked tensor read a slice at a time (an expert tensor's slice is one expert of one layer). */
mt_status mt_ckpt_read_layers(mt_ckpt_reader *rd, const char *name, mt_ckpt_kind kind, int l0, int n_layers,
                              float *out);

#endif
