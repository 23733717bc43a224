/* mock_dataset.c — the in-memory indexed dataset behind Megatron's --mock-data: the document
 * lengths of MockGPTLowLevelDataset (uniform in [1, max_length), here from the counter-based RNG,
 * so they are the same on every rank and every run of a seed) in an allocated stand-in for the
 * .idx arrays; mt_indexed_read generates each document's tokens (1, 2, ..., len-1, eod). */
#include <stdlib.h>
#include <string.h>

#include "core/data/indexed.h"
#include "core/rng.h"

mt_status mt_indexed_open_mock(mt_indexed *ds, int64_t n_documents, int32_t max_length, uint64_t seed, int32_t eod) {
    memset(ds, 0, sizeof *ds);
    if (n_documents < 1 || max_length < 2)
        return mt_errorf(MT_ERR_CONFIG, "mock data: %lld documents of lengths [1, %d): need at least 1 document and "
                         "a maximum length of 2", (long long)n_documents, max_length);
    const size_t n_bytes = (size_t)n_documents * 4 + (size_t)n_documents * 8 + (size_t)(n_documents + 1) * 8;
    uint8_t *m = calloc(1, n_bytes);
    ds->idx_path = strdup("mock-data (Megatron's --mock-data)");
    ds->bin_path = strdup("mock-data (Megatron's --mock-data)");
    if (!m || !ds->idx_path || !ds->bin_path) {
        free(m);
        mt_indexed_close(ds);
        return mt_errorf(MT_ERR_OOM, "mock data: %lld documents", (long long)n_documents);
    }
    ds->is_mock = 1;
    ds->mock_eod = eod;
    ds->idx_map = m;
    ds->n_idx_bytes = n_bytes;
    ds->dtype_code = MT_INDEXED_DTYPE_I32;
    ds->n_item_bytes = 4;
    ds->n_sequences = n_documents;
    ds->n_document_indices = n_documents + 1;
    ds->lengths_raw = m;
    ds->pointers_raw = m + (size_t)n_documents * 4;
    ds->doc_index_raw = ds->pointers_raw + (size_t)n_documents * 8;
    const uint64_t stream = mt_hash_str("mock-data.lengths");
    int64_t pointer = 0;
    for (int64_t i = 0; i < n_documents; i++) {
        const int32_t len = 1 + (int32_t)(mt_rng_u64(seed, stream, (uint64_t)i) % (uint64_t)(max_length - 1));
        memcpy((uint8_t *)ds->lengths_raw + 4 * i, &len, 4);
        memcpy((uint8_t *)ds->pointers_raw + 8 * i, &pointer, 8);
        const int64_t d = i;
        memcpy((uint8_t *)ds->doc_index_raw + 8 * i, &d, 8);
        pointer += (int64_t)len * 4;
        ds->n_tokens += len;
    }
    memcpy((uint8_t *)ds->doc_index_raw + 8 * n_documents, &n_documents, 8);
    return MT_OK;
}
