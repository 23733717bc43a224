/* safetensors.h — the safetensors file format (https://github.com/huggingface/safetensors):
 * a u64 little-endian header length N, N bytes of JSON, then the raw little-endian tensor data.
 * The JSON is an object: "__metadata__" (a string -> string map; we always write
 * {"format":"pt"}) and, per tensor, {"dtype":"F32"|"BF16"|..., "shape":[...],
 * "data_offsets":[begin,end]} with offsets relative to the first data byte.
 * The writer pads the header with spaces to a multiple of 8 and lays tensors out back to back in
 * the order given. The parser checks everything a reader relies on and names the file and the
 * entry at fault: a header length past the file, JSON that does not parse, an unknown dtype, a shape
 * whose size does not match its offsets, offsets past the data or overlapping, duplicate names.
 * Rule: the parser never trusts a length it has not checked against the bytes it was given. */
#ifndef MT_SAFETENSORS_H
#define MT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define MT_ST_MAX_DIMS 8
#define MT_ST_NAME_MAX 160
#define MT_ST_MAX_HEADER_BYTES ((uint64_t)100 << 20) /* the reference implementation's limit */

/* A tensor to write: name, dtype ("F32", "BF16", "F16", "F64", "I64", "I32", "I16", "I8", "U8",
 * "BOOL"), shape, and its bytes (n_bytes must equal the shape's element count x dtype size). */
typedef struct {
    const char *name;
    const char *dtype;
    int n_dims;
    int64_t shape[MT_ST_MAX_DIMS];
    const void *data;
    size_t n_bytes;
} mt_st_tensor;

/* Writes `path` (created or truncated, mode 0644): header, then each tensor's bytes in order.
 * Every write is checked (a full disk is MT_ERR_IO naming the file and "no space left on device");
 * with do_fsync the file is fsynced before closing. Outputs (each may be NULL): *crc the CRC-32C
 * of the whole file as written, *file_bytes its length, *data_start the file offset of the first
 * data byte (tensor k starts at data_start + the sum of the earlier n_bytes). On error the
 * partial file is removed. */
mt_status mt_st_write(const char *path, const mt_st_tensor *tensors, int n_tensors, int do_fsync, uint32_t *crc,
                      uint64_t *file_bytes, uint64_t *data_start);

/* One parsed entry. begin / end are absolute file offsets of its data. */
typedef struct {
    char name[MT_ST_NAME_MAX];
    char dtype[8];
    int elem_bytes;
    int n_dims;
    int64_t shape[MT_ST_MAX_DIMS];
    uint64_t begin, end;
} mt_st_entry;

typedef struct {
    mt_st_entry *entries; /* malloc'd, n_entries of them, in file order of their data */
    int n_entries;
    uint64_t data_start;  /* 8 + header length */
} mt_st_header;

/* Parses and checks the header of a safetensors file held in buf[0, n_bytes) (the whole file,
 * e.g. mmap'd). `name` is used in messages (the file's path). MT_ERR_DATA with
 * "NAME: <what is wrong> (<entry>)" on any inconsistency; MT_ERR_OOM. */
mt_status mt_st_parse(const uint8_t *buf, size_t n_bytes, const char *name, mt_st_header *h);
/* The entry called `tensor`, or NULL. */
const mt_st_entry *mt_st_find(const mt_st_header *h, const char *tensor);
void mt_st_header_free(mt_st_header *h);

#endif
