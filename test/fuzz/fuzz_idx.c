/* fuzz_idx.c — libFuzzer harness for Megatron's indexed dataset reader (core/data/indexed.c:
 * mt_indexed_open of PREFIX.idx + PREFIX.bin). An input is split in two: a little-endian u32 n,
 * then n bytes of PREFIX.idx (n clamped to what follows), then PREFIX.bin (the rest); an input
 * shorter than 4 bytes is an .idx alone beside an empty .bin. Both files go into a private
 * mkdtemp folder under $TMPDIR (or /tmp), removed after each input.
 * Properties checked: no crash / leak / UB (under ASan+UBSan); a rejection is MT_ERR_DATA with a
 * message naming fuzz.idx or fuzz.bin; an accepted dataset matches the harness's own reading of
 * the bytes: the header's counts, sequence lengths >= 0 adding up to the token count, each
 * sequence's pointer and extent inside the .bin (the sequences fill it exactly), document ranges
 * starting at 0, monotone, contiguous and ending at the sequence count; every read (whole, part,
 * at most a few thousand sequences and 64 Ki tokens per input) gives the .bin's values widened to
 * int32 (float dtypes: MT_ERR_UNSUPPORTED; int64 values outside int32: MT_ERR_DATA), reads outside
 * a sequence are MT_ERR_INTERNAL, the max_token scan gives the .bin's largest value, and the files
 * check as unchanged.
 * The corpus (test/fuzz/corpus_idx/) was made with mt_indexed_writer_* for every integer dtype,
 * then patched by hand (float dtype codes, wrong magic / version / dtype, truncated and extra
 * bytes, counts that overflow, pointers past the .bin, document indices not monotone, zero-length
 * sequences, int64 values outside int32).
 * Built three ways, as fuzz_spm.c: FUZZ_TARGET=idx test/fuzz/run-fuzzer.sh (clang
 * -fsanitize=fuzzer), with -DMT_FUZZ_REPLAY_MAIN as a plain replay program, and #included by
 * test/unit/test_idx_fuzz_replay.c, which replays test/fuzz/corpus_idx/ in CI. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/data/indexed.h"
#include "test/fuzz/fuzz_file.h"

#define FUZZ_IDX_MAX_SEQUENCES 4096
#define FUZZ_IDX_MAX_TOKENS (1 << 16)

static int fuzz_idx_n_accepted; /* inputs the reader accepted (the replay test counts them) */

/* The two parts of an input. */
static void fuzz_idx_split(const uint8_t *data, size_t size, const uint8_t **idx, size_t *n_idx,
                           const uint8_t **bin, size_t *n_bin) {
    if (size < 4) {
        *idx = data, *n_idx = size, *bin = data + size, *n_bin = 0;
        return;
    }
    uint32_t n;
    memcpy(&n, data, 4); /* little-endian hosts only, as indexed.c */
    *idx = data + 4;
    *n_idx = n < size - 4 ? n : size - 4;
    *bin = *idx + *n_idx;
    *n_bin = size - 4 - *n_idx;
}

static int64_t fuzz_ld_i64(const uint8_t *p) { int64_t v; memcpy(&v, p, 8); return v; }
static int32_t fuzz_ld_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }

/* Item k of the .bin as the harness reads it (1: it fits an int32, the value in *v). */
static int fuzz_idx_item(const uint8_t *p, int dtype, int64_t *v) {
    switch (dtype) {
    case MT_INDEXED_DTYPE_U8: *v = p[0]; return 1;
    case MT_INDEXED_DTYPE_I8: *v = (int8_t)p[0]; return 1;
    case MT_INDEXED_DTYPE_U16: { uint16_t x; memcpy(&x, p, 2); *v = x; return 1; }
    case MT_INDEXED_DTYPE_I16: { int16_t x; memcpy(&x, p, 2); *v = x; return 1; }
    case MT_INDEXED_DTYPE_I32: *v = fuzz_ld_i32(p); return 1;
    case MT_INDEXED_DTYPE_I64: *v = fuzz_ld_i64(p); return *v >= INT32_MIN && *v <= INT32_MAX;
    }
    return 0;
}

#define FUZZ_IDX_FAIL(...) \
    do { fprintf(stderr, "fuzz: " __VA_ARGS__); fprintf(stderr, "\n"); return 1; } while (0)

static int fuzz_idx_names_file(const char *msg) { return strstr(msg, "fuzz.idx") || strstr(msg, "fuzz.bin"); }

/* Reads of sequence i (length len, at byte ptr of the .bin) against the bytes; 1 when wrong. */
static int fuzz_idx_reads(const mt_indexed *ds, int64_t i, int32_t len, int64_t ptr, const uint8_t *bin,
                          int32_t *tok) {
    const int is_float = ds->dtype_code == MT_INDEXED_DTYPE_F32 || ds->dtype_code == MT_INDEXED_DTYPE_F64;
    const int nb = ds->n_item_bytes;
    int fits = 1;
    int64_t v = 0;
    for (int64_t k = 0; k < len && !is_float; k++) fits &= fuzz_idx_item(bin + ptr + k * nb, ds->dtype_code, &v);
    mt_clear_error();
    mt_status st = mt_indexed_read(ds, i, 0, len, tok);
    if (is_float || !fits) {
        /* a float dataset is no token ids; an int64 value outside int32 is a data error, when read */
        const mt_status want = is_float ? MT_ERR_UNSUPPORTED : MT_ERR_DATA;
        if ((len > 0 && st != want) || (len == 0 && st != MT_OK && st != want) ||
            (st != MT_OK && !strstr(mt_last_error(), "fuzz.bin")))
            FUZZ_IDX_FAIL("sequence %lld (%s): read gave %s: %s", (long long)i, mt_indexed_dtype_name(ds->dtype_code),
                          mt_status_name(st), mt_last_error());
        return 0;
    }
    if (st != MT_OK) FUZZ_IDX_FAIL("sequence %lld: read failed: %s", (long long)i, mt_last_error());
    for (int64_t k = 0; k < len; k++) {
        fuzz_idx_item(bin + ptr + k * nb, ds->dtype_code, &v);
        if (tok[k] != v) FUZZ_IDX_FAIL("sequence %lld token %lld: read %d, the .bin holds %lld", (long long)i,
                                       (long long)k, tok[k], (long long)v);
    }
    if (len >= 2) { /* a part: tokens [1, len - 1) */
        int32_t *part = tok + len;
        if (mt_indexed_read(ds, i, 1, len - 2, part) != MT_OK || memcmp(part, tok + 1, (size_t)(len - 2) * 4))
            FUZZ_IDX_FAIL("sequence %lld: tokens [1, %d) read alone differ", (long long)i, len - 1);
    }
    /* a caller bug: past the end of the sequence */
    if (mt_indexed_read(ds, i, 0, (int64_t)len + 1, tok) != MT_ERR_INTERNAL ||
        mt_indexed_read(ds, i, (int64_t)len + 1, 0, tok) != MT_ERR_INTERNAL)
        FUZZ_IDX_FAIL("sequence %lld: a read past its %d tokens was not refused", (long long)i, len);
    mt_clear_error();
    return 0;
}

/* An accepted dataset against the bytes it came from; 1 when a property fails. */
static int fuzz_idx_accepted(const mt_indexed *ds, const uint8_t *idx, size_t n_idx, const uint8_t *bin,
                             size_t n_bin) {
    const int nb = mt_indexed_dtype_bytes(ds->dtype_code);
    if (nb <= 0 || nb != ds->n_item_bytes || n_idx < MT_INDEXED_HEADER_BYTES || ds->dtype_code != idx[17])
        FUZZ_IDX_FAIL("accepted dtype %d (%d bytes) from an .idx of %zu bytes", ds->dtype_code, ds->n_item_bytes, n_idx);
    if (ds->n_idx_bytes != n_idx || ds->n_bin_bytes != n_bin)
        FUZZ_IDX_FAIL("mapped %zu + %zu bytes, wrote %zu + %zu", ds->n_idx_bytes, ds->n_bin_bytes, n_idx, n_bin);
    const int64_t n_seq = mt_indexed_n_sequences(ds), n_doc = mt_indexed_n_documents(ds);
    if (n_seq < 0 || n_doc < 0 || n_seq != fuzz_ld_i64(idx + 18) || n_doc + 1 != fuzz_ld_i64(idx + 26) ||
        (uint64_t)MT_INDEXED_HEADER_BYTES + 12 * (uint64_t)n_seq + 8 * (uint64_t)(n_doc + 1) != n_idx)
        FUZZ_IDX_FAIL("accepted %lld sequences and %lld documents from an .idx of %zu bytes", (long long)n_seq,
                      (long long)n_doc, n_idx);
    const uint8_t *lens = idx + MT_INDEXED_HEADER_BYTES, *ptrs = lens + 4 * n_seq, *docs = ptrs + 8 * n_seq;
    /* lengths and pointers: each sequence inside the .bin, back to back, filling it */
    int64_t n_tokens = 0, end = 0;
    for (int64_t i = 0; i < n_seq; i++) {
        const int32_t len = mt_indexed_sequence_length(ds, i);
        const int64_t ptr = fuzz_ld_i64(ptrs + 8 * i);
        if (len < 0 || len != fuzz_ld_i32(lens + 4 * i))
            FUZZ_IDX_FAIL("sequence %lld: length %d (the .idx says %d)", (long long)i, len, fuzz_ld_i32(lens + 4 * i));
        if (ptr != end || ptr < 0 || (uint64_t)ptr + (uint64_t)len * (uint64_t)nb > n_bin)
            FUZZ_IDX_FAIL("sequence %lld: %d tokens at byte %lld, outside the %zu-byte .bin (or not where %lld ends)",
                          (long long)i, len, (long long)ptr, n_bin, (long long)(i - 1));
        n_tokens += len;
        end = ptr + (int64_t)len * nb;
    }
    if (n_tokens != mt_indexed_n_tokens(ds) || (uint64_t)end != n_bin)
        FUZZ_IDX_FAIL("%lld tokens (reader: %lld) ending at byte %lld of a %zu-byte .bin", (long long)n_tokens,
                      (long long)mt_indexed_n_tokens(ds), (long long)end, n_bin);
    if (mt_indexed_sequence_length(ds, -1) != 0 || mt_indexed_sequence_length(ds, n_seq) != 0)
        FUZZ_IDX_FAIL("a length outside [0, %lld) is not 0", (long long)n_seq);
    /* documents: ranges from 0, monotone, contiguous, ending at the sequence count */
    int64_t prev_end = 0;
    for (int64_t d = 0; d < n_doc && d < FUZZ_IDX_MAX_SEQUENCES; d++) {
        int64_t first, last;
        mt_indexed_document_range(ds, d, &first, &last);
        if (first != prev_end || last < first || last > n_seq || first != fuzz_ld_i64(docs + 8 * d) ||
            last != fuzz_ld_i64(docs + 8 * (d + 1)))
            FUZZ_IDX_FAIL("document %lld: sequences [%lld, %lld) of %lld (the previous one ended at %lld)",
                          (long long)d, (long long)first, (long long)last, (long long)n_seq, (long long)prev_end);
        prev_end = last;
    }
    if (n_doc <= FUZZ_IDX_MAX_SEQUENCES && prev_end != n_seq)
        FUZZ_IDX_FAIL("the documents end at sequence %lld of %lld", (long long)prev_end, (long long)n_seq);
    int64_t f = 1, l = 1;
    mt_indexed_document_range(ds, n_doc, &f, &l);
    if (f != 0 || l != 0) FUZZ_IDX_FAIL("document %lld (past the end): [%lld, %lld)", (long long)n_doc, (long long)f,
                                        (long long)l);
    /* reads, bounded */
    int32_t *tok = malloc(2 * (size_t)FUZZ_IDX_MAX_TOKENS * sizeof *tok + 16);
    if (!tok) FUZZ_IDX_FAIL("out of memory");
    int64_t budget = FUZZ_IDX_MAX_TOKENS;
    for (int64_t i = 0; i < n_seq && i < FUZZ_IDX_MAX_SEQUENCES; i++) {
        const int32_t len = mt_indexed_sequence_length(ds, i);
        if (len > budget - 1) break;
        budget -= len;
        if (fuzz_idx_reads(ds, i, len, fuzz_ld_i64(ptrs + 8 * i), bin, tok)) {
            free(tok);
            return 1;
        }
    }
    if (mt_indexed_read(ds, n_seq, 0, 0, tok) != MT_ERR_INTERNAL || mt_indexed_read(ds, -1, 0, 0, tok) != MT_ERR_INTERNAL) {
        free(tok);
        FUZZ_IDX_FAIL("a read of sequence -1 or %lld was not refused", (long long)n_seq);
    }
    free(tok);
    mt_clear_error();
    /* the max_token scan: all of the .bin, and its first 3 items */
    const int is_float = ds->dtype_code == MT_INDEXED_DTYPE_F32 || ds->dtype_code == MT_INDEXED_DTYPE_F64;
    for (int64_t cap = -1; cap <= 3; cap += 4) {
        int64_t max_id = -2, scanned = -2, want_max = -1, v = 0;
        const int64_t n_items = (int64_t)n_bin / nb, want_n = cap >= 0 && n_items > cap ? cap : n_items;
        mt_status st = mt_indexed_max_token(ds, cap, &max_id, &scanned);
        if (is_float) {
            if (st != MT_ERR_UNSUPPORTED) FUZZ_IDX_FAIL("max_token of a float dataset gave %s", mt_status_name(st));
            mt_clear_error();
            continue;
        }
        for (int64_t k = 0; k < want_n; k++) {
            if (ds->dtype_code == MT_INDEXED_DTYPE_I64) v = fuzz_ld_i64(bin + 8 * k);
            else fuzz_idx_item(bin + k * nb, ds->dtype_code, &v);
            if (v > want_max) want_max = v;
        }
        if (st != MT_OK || scanned != want_n || max_id != want_max)
            FUZZ_IDX_FAIL("max_token(%lld): %s, %lld over %lld items; the .bin's first %lld items: %lld", (long long)cap,
                          mt_status_name(st), (long long)max_id, (long long)scanned, (long long)want_n,
                          (long long)want_max);
    }
    if (mt_indexed_check_unchanged(ds) != MT_OK) FUZZ_IDX_FAIL("unchanged files check: %s", mt_last_error());
    return 0;
}

/* 0 when the input was handled as it should be. */
static int fuzz_idx_one(const uint8_t *data, size_t size) {
    const uint8_t *idx, *bin;
    size_t n_idx, n_bin;
    fuzz_idx_split(data, size, &idx, &n_idx, &bin, &n_bin);
    const char *tmp = getenv("TMPDIR");
    char dir[512], prefix[600], idx_path[640], bin_path[640];
    snprintf(dir, sizeof dir, "%s/mt_fuzz_idx.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    snprintf(prefix, sizeof prefix, "%s/fuzz", dir);
    snprintf(idx_path, sizeof idx_path, "%s.idx", prefix);
    snprintf(bin_path, sizeof bin_path, "%s.bin", prefix);
    int bad = 0;
    if (fuzz_write_file(idx_path, idx, n_idx) || fuzz_write_file(bin_path, bin, n_bin)) {
        perror(dir);
        bad = 1;
        goto out;
    }
    mt_indexed ds;
    mt_clear_error();
    mt_status st = mt_indexed_open(&ds, prefix);
    if (st != MT_OK) {
        bad = st != MT_ERR_DATA || !fuzz_idx_names_file(mt_last_error()) || ds.idx_map || ds.bin_map || ds.idx_path;
        if (bad) fprintf(stderr, "fuzz: rejection %s without the file named (or not closed): %s\n",
                         mt_status_name(st), mt_last_error());
        mt_clear_error();
        goto out;
    }
    fuzz_idx_n_accepted++;
    bad = fuzz_idx_accepted(&ds, idx, n_idx, bin, n_bin);
    mt_indexed_close(&ds);
out:
    unlink(idx_path);
    unlink(bin_path);
    rmdir(dir);
    return bad;
}

/* libFuzzer's entry; with -DMT_FUZZ_REPLAY_MAIN a plain replay driver: fuzz_idx FILE... (e.g. an
 * idx-crash-* file from libFuzzer) */
FUZZ_ENTRY_POINTS(fuzz_idx_one)
