/* ckpt_read.h — opening one file of a save for reading, with every check before a byte of it is
 * used: it exists, its size and CRC-32C are the manifest's, its safetensors header parses, and
 * every piece the manifest places in it is an entry there at the manifest's offset, with the
 * manifest's size and dtype. The loader and `mtrain checkpoint inspect` both open files here.
 * Rule: errors name the file and the fix (load another iteration). */
#ifndef MT_CKPT_READ_H
#define MT_CKPT_READ_H

#include <stddef.h>
#include <stdint.h>

#include "core/ckpt/manifest.h"
#include "core/ckpt/safetensors.h"

typedef struct {
    const uint8_t *data;   /* the whole file, mapped read-only */
    size_t n_bytes;
    mt_st_header hdr;
    int open;              /* checks passed */
} mt_ckpt_file;

/* Copying a piece's elements out (an mt_ckpt_run_fn for mt_ckpt_intersect): from src (the piece's
 * first byte; F32, or BF16 widened) into dst, marking each destination element in seen and counting
 * the elements some earlier piece already wrote (a consistent save has none). */
typedef struct {
    const uint8_t *src;
    int bf16;
    float *dst;
    uint8_t *seen;
    uint64_t twice;
} mt_ckpt_copy;
void mt_ckpt_copy_run(void *ctx, size_t src_elem, size_t dst_elem, size_t n);

/* Opens file fi of the save in folder dir (manifest mf). Safe to call again (no-op once open). */
mt_status mt_ckpt_file_open(const char *dir, const mt_manifest *mf, int fi, mt_ckpt_file *f);
void mt_ckpt_file_close(mt_ckpt_file *f);

#endif
