/* indexed.h — Megatron indexed dataset (.idx + .bin, "MMIDIDX" version 1): an mmap'd reader
 * that validates every field before anything is used, and a streaming writer that is byte
 * for byte compatible with Megatron's MMapIndexedDatasetBuilder.
 *
 * Layout of PREFIX.idx (little-endian, no padding; Megatron-LM's
 * megatron/core/datasets/indexed_dataset.py, dtype codes 1 u8, 2 i8, 3 i16, 4 i32, 5 i64,
 * 6 f64, 7 f32, 8 u16):
 *   char magic[9] = "MMIDIDX\0\0"; u64 version = 1; u8 dtype_code;
 *   u64 sequence_count; u64 document_count (= documents + 1);
 *   i32 sequence_lengths[sequence_count];      (tokens per sequence)
 *   i64 sequence_pointers[sequence_count];     (byte offsets into PREFIX.bin)
 *   i64 document_indices[document_count];      (0, then the sequence count after each document)
 * PREFIX.bin is the raw tokens of all sequences back to back, no header.
 *
 * Rules kept: no exit(); every failure returns MT_ERR_IO (a file could not be opened/read/
 * written, with strerror) or MT_ERR_DATA (the contents are wrong) with a message naming the
 * file and the field. Files are written to PREFIX.{bin,idx}.tmp.<pid> (core/data/tmpfiles.h),
 * fsynced and published.
 * Publishing rule (what makes a reader never pair one run's .idx with another's .bin): the
 * writer (which holds the name's lock, core/data/output_lock.h) removes PREFIX.idx, renames the
 * .bin into place, then the .idx. The reader opens the .idx, then the .bin, then checks that
 * PREFIX.idx is still the file it opened; if not (a publish ran in between), or if the .idx is
 * missing beside a .bin (mid-publish), it retries for a moment. Any pair it accepts was
 * complete at one instant: the .bin it opened is at least as new as the .idx, and the .idx
 * still being in place means no newer .bin had been renamed in since that .idx was published.
 * While reading, the mappings are registered with core/data/mapped_files.h: a file truncated
 * under a run gives a message naming it, and mt_indexed_check_unchanged finds any change. */
#ifndef MT_INDEXED_H
#define MT_INDEXED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/data/mapped_files.h"
#include "core/status.h"

/* Megatron's DType codes. */
enum {
    MT_INDEXED_DTYPE_U8 = 1,
    MT_INDEXED_DTYPE_I8 = 2,
    MT_INDEXED_DTYPE_I16 = 3,
    MT_INDEXED_DTYPE_I32 = 4,
    MT_INDEXED_DTYPE_I64 = 5,
    MT_INDEXED_DTYPE_F64 = 6,
    MT_INDEXED_DTYPE_F32 = 7,
    MT_INDEXED_DTYPE_U16 = 8
};

#define MT_INDEXED_HEADER_BYTES 34 /* 9 magic + 8 version + 1 dtype + 8 + 8 counts */

/* Bytes per item of a dtype code; 0 when the code is unknown. */
int mt_indexed_dtype_bytes(int dtype_code);
/* "uint16", "int32", ...; "unknown" for an unknown code. */
const char *mt_indexed_dtype_name(int dtype_code);
/* Megatron's DType.optimal_dtype: uint16 when vocab_size < 65500, else int32. */
int mt_indexed_dtype_for_vocab(int64_t vocab_size);

/* ---- reader ------------------------------------------------------------------------- */

typedef struct {
    char *idx_path;             /* PREFIX.idx (owned) */
    char *bin_path;             /* PREFIX.bin (owned) */
    const uint8_t *idx_map;     /* the whole .idx, mmap'd */
    size_t n_idx_bytes;
    const uint8_t *bin_map;     /* the whole .bin, mmap'd (NULL when it is empty) */
    size_t n_bin_bytes;
    int dtype_code;
    int n_item_bytes;           /* bytes per token */
    int64_t n_sequences;
    int64_t n_document_indices; /* document_count field = n_documents + 1 */
    int64_t n_tokens;           /* sum of sequence_lengths */
    /* Views into idx_map (not aligned: read through the accessors). */
    const uint8_t *lengths_raw;   /* i32[n_sequences] */
    const uint8_t *pointers_raw;  /* i64[n_sequences] */
    const uint8_t *doc_index_raw; /* i64[n_document_indices] */
    mt_file_id idx_id, bin_id;    /* the files as opened */
    int idx_slot, bin_slot;       /* mapped_files registrations + 1 (0: none) */
    int is_mock;                  /* mock_dataset.c: idx_map is malloc'd, no .bin; tokens generated */
    int32_t mock_eod;
} mt_indexed;

/* Opens PREFIX.idx and PREFIX.bin and validates both completely (O(n_sequences)).
 * On failure *ds is left closed (safe to pass to mt_indexed_close). */
mt_status mt_indexed_open(mt_indexed *ds, const char *prefix);
void mt_indexed_close(mt_indexed *ds);
/* MT_OK when PREFIX.idx and PREFIX.bin are still the files opened (same device, inode, size and
 * modification time); otherwise MT_ERR_DATA / MT_ERR_IO naming the file and what changed.
 * Two stat calls: for checkpoints and validations, not for every read. */
mt_status mt_indexed_check_unchanged(const mt_indexed *ds);

int64_t mt_indexed_n_sequences(const mt_indexed *ds);
int64_t mt_indexed_n_documents(const mt_indexed *ds);
int64_t mt_indexed_n_tokens(const mt_indexed *ds);
/* Tokens in sequence i; 0 when i is outside [0, n_sequences). */
int32_t mt_indexed_sequence_length(const mt_indexed *ds, int64_t i);
/* Documents are ranges of sequences: document d holds sequences [first, end). */
void mt_indexed_document_range(const mt_indexed *ds, int64_t d, int64_t *first, int64_t *end);
/* Reads n_tokens tokens of sequence `sequence` starting at token `offset` into tokens[]
 * (widened to int32). MT_ERR_INTERNAL when the range is outside the sequence (a caller bug),
 * MT_ERR_UNSUPPORTED for float datasets, MT_ERR_DATA for int64 values outside int32. */
mt_status mt_indexed_read(const mt_indexed *ds, int64_t sequence, int64_t offset,
                          int64_t n_tokens, int32_t *tokens);

/* The largest token id among the first max_tokens tokens of the .bin (all when max_tokens < 0),
 * and how many were scanned; -1 for an empty file. One sequential pass over the mapping. */
mt_status mt_indexed_max_token(const mt_indexed *ds, int64_t max_tokens, int64_t *max_id, int64_t *scanned);

/* mock_dataset.c — Megatron's --mock-data (MockGPTLowLevelDataset): n_documents documents whose
 * lengths are uniform in [1, max_length) (drawn from the counter-based RNG of `seed`; Megatron's
 * numpy draws differ), document i being the ids 1, 2, ..., len-1 followed by eod. Nothing on disk;
 * reads generate the tokens. Largest id: max(max_length - 2, eod). */
mt_status mt_indexed_open_mock(mt_indexed *ds, int64_t n_documents, int32_t max_length, uint64_t seed, int32_t eod);

/* ---- writer ------------------------------------------------------------------------- */

typedef struct {
    char *bin_path, *idx_path;  /* final names */
    char *bin_tmp, *idx_tmp;    /* PREFIX.bin.tmp.<pid>, PREFIX.idx.tmp.<pid> */
    int bin_slot, idx_slot;     /* tmpfiles registrations + 1 (0: none) */
    FILE *bin;                  /* token bytes */
    FILE *idx;                  /* placeholder header, then sequence_lengths as they come */
    FILE *doc;                  /* document_indices[1..] (an unlinked temp file) */
    int dtype_code;
    int n_item_bytes;
    int64_t n_sequences;
    int64_t n_documents;
    int64_t n_bin_bytes;
} mt_indexed_writer;

/* Starts PREFIX.bin.tmp.<pid> / PREFIX.idx.tmp.<pid> (registered for removal on SIGINT /
 * SIGTERM / SIGHUP), after removing the temporaries of PREFIX left by dead processes.
 * dtype_code: u8, i8, i16, i32, i64 or u16.
 * Memory use is constant: lengths and document indices stream to disk. The caller holds the
 * name's lock (output_lock.h) when other writers may run. */
mt_status mt_indexed_writer_open(mt_indexed_writer *w, const char *prefix, int dtype_code);
/* Appends one document as one sequence (Megatron's preprocess without sentence splitting).
 * n_tokens == 0 records an empty document with no sequence, as Megatron does.
 * MT_ERR_DATA when a token does not fit the dtype. */
mt_status mt_indexed_writer_add_document(mt_indexed_writer *w, const int32_t *tokens,
                                         int64_t n_tokens);
/* Writes the index, fsyncs, publishes both files (the rule above) and frees the writer. On
 * failure the temporaries are removed (as by abort). */
mt_status mt_indexed_writer_finish(mt_indexed_writer *w);
/* Closes and removes the temporaries, frees the writer. Safe on a zeroed writer. */
void mt_indexed_writer_abort(mt_indexed_writer *w);

#endif
