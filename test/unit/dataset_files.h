/* dataset_files.h — indexed datasets written by the data tests (test_gpt_dataset.c,
 * test_blended_dataset.c): documents of pseudo-random lengths whose tokens count up, so a
 * sample's tokens say where in the dataset it came from. */
#ifndef MT_TEST_DATASET_FILES_H
#define MT_TEST_DATASET_FILES_H

#include <stdint.h>
#include <stdlib.h>

#include "core/data/indexed.h"

/* A dataset of n_docs int32 documents of pseudo-random lengths 1..max_len (the draws of seed)
 * written at prefix; token = base + the token's position in the whole dataset. 1 when written. */
static inline int test_write_dataset(const char *prefix, int n_docs, int max_len, int32_t base, uint64_t seed) {
    mt_indexed_writer w;
    if (mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_I32) != MT_OK) return 0;
    int32_t *doc = malloc((size_t)max_len * sizeof *doc);
    int32_t pos = 0;
    uint64_t x = seed;
    for (int d = 0; d < n_docs; d++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int n = 1 + (int)((x >> 33) % (uint64_t)max_len);
        for (int i = 0; i < n; i++) doc[i] = base + pos++;
        if (mt_indexed_writer_add_document(&w, doc, n) != MT_OK) return 0;
    }
    free(doc);
    return mt_indexed_writer_finish(&w) == MT_OK;
}

#endif
