/* test_indexed.c — Megatron indexed dataset: the writer reproduces a golden example (the
 * OpenAI GPT-2 ids of "Hello world", "I am a dog.", "The", each + <|endoftext|> 50256: a 102-byte
 * .idx and a 22-byte .bin, the layout of Megatron-LM's megatron/core/datasets/indexed_dataset.py)
 * byte for byte; the reader reads it back; every corruption class is MT_ERR_DATA naming the
 * file; missing files are MT_ERR_IO; truncation at every length and random byte flips never
 * crash; other dtypes, empty documents and many sequences round-trip. Guards: the
 * writer's temporaries carry its pid and a new writer removes only the dead-pid temporaries of
 * its own name; a file changed under an open dataset is found by mt_indexed_check_unchanged;
 * reading a truncated .bin ends the process with the SIGBUS message naming it (in a child); a
 * data.path that is a folder, the .bin, an --output-prefix or nothing gets its own message. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/data/data_path.h"
#include "core/data/indexed.h"
#include "test/test.h"
#include "test/test_files.h"

static char g_dir[] = "/tmp/mt_test_indexed_XXXXXX";

/* Golden example: the OpenAI GPT-2 encodings of "Hello world", "I am a dog." and "The", each
 * followed by <|endoftext|> (50256), as `preprocess --append-eod` writes them: uint16 tokens, a
 * 102-byte .idx (document_count 4, sequence_pointers [0, 6, 18]) and a 22-byte .bin. */
static const int32_t k_doc0[] = {15496, 995, 50256};
static const int32_t k_doc1[] = {40, 716, 257, 3290, 13, 50256};
static const int32_t k_doc2[] = {464, 50256};

static const uint8_t k_golden_idx[102] = {
    'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0,  /* magic */
    1, 0, 0, 0, 0, 0, 0, 0,                   /* version 1 */
    8,                                        /* dtype uint16 */
    3, 0, 0, 0, 0, 0, 0, 0,                   /* sequence_count */
    4, 0, 0, 0, 0, 0, 0, 0,                   /* document_count */
    3, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0,       /* sequence_lengths */
    0, 0, 0, 0, 0, 0, 0, 0,                   /* sequence_pointers */
    6, 0, 0, 0, 0, 0, 0, 0,
    18, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,                   /* document_indices */
    1, 0, 0, 0, 0, 0, 0, 0,
    2, 0, 0, 0, 0, 0, 0, 0,
    3, 0, 0, 0, 0, 0, 0, 0,
};
static const uint8_t k_golden_bin[22] = {
    0x88, 0x3c, 0xe3, 0x03, 0x50, 0xc4,             /* 15496 995 50256 */
    0x28, 0x00, 0xcc, 0x02, 0x01, 0x01, 0xda, 0x0c, 0x0d, 0x00, 0x50, 0xc4, /* 40 716 257 3290 13 50256 */
    0xd0, 0x01, 0x50, 0xc4,                         /* 464 50256 */
};

static void path_of(char *out, size_t n, const char *name, const char *ext) {
    snprintf(out, n, "%s/%s%s", g_dir, name, ext);
}

static int write_file(const char *path, const void *p, size_t n_bytes) {
    /* A fresh file, not a truncated one: ext4 flushes files replaced by truncation on close,
     * which made the fuzz loop slow. */
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = n_bytes ? fwrite(p, 1, n_bytes, f) : 0;
    fclose(f);
    return w == n_bytes;
}

/* The writer of dataset `name` left neither of its temporary files (NAME.idx.tmp.PID, .bin.tmp.PID). */
static void check_no_temporaries(const char *name) {
    char ext[64], p[600];
    for (int k = 0; k < 2; k++) {
        snprintf(ext, sizeof ext, ".%s.tmp.%ld", k ? "bin" : "idx", (long)getpid());
        path_of(p, sizeof p, name, ext);
        CHECKF(access(p, F_OK) != 0, "%s is left", p);
    }
}

/* Writes a dataset from raw bytes and tries to open it. */
static mt_status open_raw(const char *name, const uint8_t *idx, size_t n_idx, const uint8_t *bin,
                          size_t n_bin) {
    char prefix[512], p[600];
    path_of(prefix, sizeof prefix, name, "");
    path_of(p, sizeof p, name, ".idx");
    write_file(p, idx, n_idx);
    path_of(p, sizeof p, name, ".bin");
    write_file(p, bin, n_bin);
    mt_indexed ds;
    mt_clear_error();
    mt_status st = mt_indexed_open(&ds, prefix);
    if (st == MT_OK) {
        /* Anything that opens must be fully readable. */
        int32_t buf[64];
        for (int64_t i = 0; i < mt_indexed_n_sequences(&ds); i++) {
            int32_t len = mt_indexed_sequence_length(&ds, i);
            int is_float = ds.dtype_code == MT_INDEXED_DTYPE_F32 ||
                           ds.dtype_code == MT_INDEXED_DTYPE_F64;
            mt_status rst = len <= 64 ? mt_indexed_read(&ds, i, 0, len, buf) : MT_OK;
            CHECK(rst == MT_OK || (is_float && rst == MT_ERR_UNSUPPORTED));
        }
        mt_indexed_close(&ds);
    }
    return st;
}

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void put_i32(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }

/* One corruption: expects MT_ERR_DATA and a message naming `file_ext` and `field`. */
static void expect_corrupt(const char *name, const uint8_t *idx, size_t n_idx, const uint8_t *bin,
                           size_t n_bin, const char *file_ext, const char *field) {
    mt_status st = open_raw(name, idx, n_idx, bin, n_bin);
    CHECKF(st == MT_ERR_DATA, "%s: status %s (%s)", name, mt_status_name(st), mt_last_error());
    char want[600];
    path_of(want, sizeof want, name, file_ext);
    CHECK_STR_CONTAINS(mt_last_error(), want);
    CHECK_STR_CONTAINS(mt_last_error(), field);
}

static void test_golden_write_read(void) {
    char prefix[512], p[600];
    path_of(prefix, sizeof prefix, "golden", "");
    mt_indexed_writer w;
    CHECK(mt_indexed_dtype_for_vocab(50257) == MT_INDEXED_DTYPE_U16);
    CHECK(mt_indexed_dtype_for_vocab(65500) == MT_INDEXED_DTYPE_I32);
    CHECK(mt_indexed_dtype_for_vocab(257) == MT_INDEXED_DTYPE_U16);
    CHECK(mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_U16) == MT_OK);
    CHECK(mt_indexed_writer_add_document(&w, k_doc0, 3) == MT_OK);
    CHECK(mt_indexed_writer_add_document(&w, k_doc1, 6) == MT_OK);
    CHECK(mt_indexed_writer_add_document(&w, k_doc2, 2) == MT_OK);
    /* Nothing at the final names until finish. */
    path_of(p, sizeof p, "golden", ".idx");
    CHECK(access(p, F_OK) != 0);
    CHECK(mt_indexed_writer_finish(&w) == MT_OK);
    check_no_temporaries("golden");

    size_t n_idx = 0, n_bin = 0;
    path_of(p, sizeof p, "golden", ".idx");
    uint8_t *idx = test_read_file(p, &n_idx);
    path_of(p, sizeof p, "golden", ".bin");
    uint8_t *bin = test_read_file(p, &n_bin);
    CHECK(idx && n_idx == 102 && memcmp(idx, k_golden_idx, 102) == 0);
    CHECK(bin && n_bin == 22 && memcmp(bin, k_golden_bin, 22) == 0);
    if (idx && n_idx == 102) {
        for (size_t i = 0; i < 102; i++) {
            CHECKF(idx[i] == k_golden_idx[i], "idx byte %zu: %u vs %u", i, idx[i], k_golden_idx[i]);
        }
    }
    free(idx);
    free(bin);

    mt_indexed ds;
    CHECK(mt_indexed_open(&ds, prefix) == MT_OK);
    CHECK(mt_indexed_n_sequences(&ds) == 3);
    CHECK(mt_indexed_n_documents(&ds) == 3);
    CHECK(mt_indexed_n_tokens(&ds) == 11);
    CHECK(mt_indexed_sequence_length(&ds, 0) == 3);
    CHECK(mt_indexed_sequence_length(&ds, 1) == 6);
    CHECK(mt_indexed_sequence_length(&ds, 2) == 2);
    CHECK(mt_indexed_sequence_length(&ds, 3) == 0);
    int64_t first, end;
    mt_indexed_document_range(&ds, 1, &first, &end);
    CHECK(first == 1 && end == 2);
    int32_t t[8];
    CHECK(mt_indexed_read(&ds, 1, 0, 6, t) == MT_OK);
    CHECK(memcmp(t, k_doc1, sizeof k_doc1) == 0);
    CHECK(mt_indexed_read(&ds, 0, 1, 2, t) == MT_OK);
    CHECK(t[0] == 995 && t[1] == 50256);
    CHECK(mt_indexed_read(&ds, 2, 0, 2, t) == MT_OK);
    CHECK(t[0] == 464 && t[1] == 50256);
    CHECK(mt_indexed_read(&ds, 2, 1, 2, t) == MT_ERR_INTERNAL);
    CHECK(mt_indexed_read(&ds, 3, 0, 1, t) == MT_ERR_INTERNAL);
    CHECK(mt_indexed_read(&ds, -1, 0, 1, t) == MT_ERR_INTERNAL);
    mt_indexed_close(&ds);
}

static void test_corruptions(void) {
    uint8_t idx[102], bin[24];
    memcpy(bin, k_golden_bin, 22);
    bin[22] = bin[23] = 0;

    /* The pristine copy opens. */
    CHECK(open_raw("ok", k_golden_idx, 102, k_golden_bin, 22) == MT_OK);

    expect_corrupt("trunc_idx", k_golden_idx, 101, k_golden_bin, 22, ".idx", "truncated");
    expect_corrupt("trunc_idx_hdr", k_golden_idx, 20, k_golden_bin, 22, ".idx", "truncated");
    expect_corrupt("trunc_bin", k_golden_idx, 102, k_golden_bin, 21, ".bin", "truncated");
    expect_corrupt("long_bin", k_golden_idx, 102, bin, 24, ".bin", "size");

    memcpy(idx, k_golden_idx, 102);
    idx[0] = 'X';
    expect_corrupt("magic", idx, 102, k_golden_bin, 22, ".idx", "magic");

    memcpy(idx, k_golden_idx, 102);
    put_u64(idx + 9, 2);
    expect_corrupt("version", idx, 102, k_golden_bin, 22, ".idx", "version");

    memcpy(idx, k_golden_idx, 102);
    idx[17] = 0;
    expect_corrupt("dtype0", idx, 102, k_golden_bin, 22, ".idx", "dtype");
    idx[17] = 9;
    expect_corrupt("dtype9", idx, 102, k_golden_bin, 22, ".idx", "dtype");

    /* One or two fields of the golden .idx patched (offset, bytes 4 or 8, value): header counts
     * that disagree with the .idx size, lengths that disagree with the .bin (the pointers no
     * longer line up), non-monotonic pointers ([0, 18, 6]), document_indices that do not start
     * at 0, decrease, or do not end at sequence_count. */
    static const struct {
        const char *name;
        struct { int off, bytes; int64_t v; } patch[2]; /* bytes 0: no second patch */
        const char *file, *needle;
    } patched[] = {
        {"seq_count", {{18, 8, 1000}}, ".idx", "1000 sequences"},
        {"seq_count_huge", {{18, 8, (int64_t)(UINT64_MAX / 4)}}, ".idx", "truncated"},
        {"doc_count", {{26, 8, 3}}, ".idx", "extra"},
        {"length", {{34 + 4, 4, 7}}, ".idx", "sequence_pointers[2]"},
        {"last_length", {{34 + 8, 4, 3}}, ".bin", "truncated"},
        {"neg_length", {{34, 4, -3}}, ".idx", "sequence_lengths[0]"},
        {"pointers", {{46 + 8, 8, 18}, {46 + 16, 8, 6}}, ".idx", "sequence_pointers[1]"},
        {"pointer0", {{46, 8, 2}}, ".idx", "sequence_pointers[0]"},
        {"doc_start", {{70, 8, 1}}, ".idx", "document_indices[0]"},
        {"doc_order", {{70 + 8, 8, 2}, {70 + 16, 8, 1}}, ".idx", "document_indices[2]"},
        {"doc_end", {{70 + 24, 8, 2}}, ".idx", "document_indices[3]"},
    };
    for (size_t k = 0; k < sizeof patched / sizeof patched[0]; k++) {
        memcpy(idx, k_golden_idx, 102);
        for (int q = 0; q < 2; q++) {
            const int off = patched[k].patch[q].off;
            if (patched[k].patch[q].bytes == 4) put_i32(idx + off, (int32_t)patched[k].patch[q].v);
            if (patched[k].patch[q].bytes == 8) put_u64(idx + off, (uint64_t)patched[k].patch[q].v);
        }
        expect_corrupt(patched[k].name, idx, 102, k_golden_bin, 22, patched[k].file, patched[k].needle);
    }

    /* Missing files: MT_ERR_IO with the path and strerror. */
    char prefix[512], p[600];
    path_of(prefix, sizeof prefix, "missing", "");
    mt_indexed ds;
    CHECK(mt_indexed_open(&ds, prefix) == MT_ERR_IO);
    path_of(p, sizeof p, "missing", ".idx");
    CHECK_STR_CONTAINS(mt_last_error(), p);
    CHECK_STR_CONTAINS(mt_last_error(), strerror(ENOENT));
    path_of(p, sizeof p, "nobin", ".idx");
    write_file(p, k_golden_idx, 102);
    path_of(prefix, sizeof prefix, "nobin", "");
    CHECK(mt_indexed_open(&ds, prefix) == MT_ERR_IO);
    path_of(p, sizeof p, "nobin", ".bin");
    CHECK_STR_CONTAINS(mt_last_error(), p);
    mt_indexed_close(&ds); /* closing a failed open is safe */
}

static uint64_t g_rng = 0x1234567887654321ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void test_fuzz(void) {
    /* Every truncation of the .idx is rejected as data, never a crash. */
    int n_bad = 0;
    for (size_t n = 0; n < 102; n++) {
        mt_status st = open_raw("fuzz_trunc", k_golden_idx, n, k_golden_bin, 22);
        if (st != MT_ERR_DATA) n_bad++;
    }
    CHECKF(n_bad == 0, "%d truncations not rejected as MT_ERR_DATA", n_bad);
    /* Truncations of the .bin too. */
    n_bad = 0;
    for (size_t n = 0; n < 22; n++) {
        if (open_raw("fuzz_trunc_bin", k_golden_idx, 102, k_golden_bin, n) != MT_ERR_DATA) n_bad++;
    }
    CHECKF(n_bad == 0, "%d .bin truncations not rejected", n_bad);
    /* Random byte flips: MT_OK or MT_ERR_DATA only (open_raw reads everything that opens). */
    uint8_t idx[102], bin[22];
    int n_ok = 0, n_data = 0, n_other = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(idx, k_golden_idx, 102);
        memcpy(bin, k_golden_bin, 22);
        int n_flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < n_flips; k++) {
            if (rnd() % 8 == 0) bin[rnd() % 22] ^= (uint8_t)(1 + rnd() % 255);
            else idx[rnd() % 102] ^= (uint8_t)(1 << (rnd() % 8));
        }
        size_t n_idx = rnd() % 4 == 0 ? (size_t)(rnd() % 103) : 102;
        mt_status st = open_raw("fuzz_flip", idx, n_idx, bin, 22);
        if (st == MT_OK) n_ok++;
        else if (st == MT_ERR_DATA) n_data++;
        else n_other++;
    }
    CHECKF(n_other == 0, "%d fuzzed opens returned neither ok nor data error", n_other);
    CHECK(n_data > 2000);
    printf("fuzz: %d opened, %d rejected\n", n_ok, n_data);
}

static void test_roundtrips(void) {
    char prefix[512];
    mt_indexed ds;
    int32_t out[16];
    /* Every integer dtype, with values at its limits. */
    struct { int code; int32_t vals[3]; int32_t bad; } cases[] = {
        {MT_INDEXED_DTYPE_U8, {0, 7, 255}, 256},
        {MT_INDEXED_DTYPE_I8, {-128, 0, 127}, 128},
        {MT_INDEXED_DTYPE_I16, {-32768, 5, 32767}, 32768},
        {MT_INDEXED_DTYPE_U16, {0, 1, 65535}, -1},
        {MT_INDEXED_DTYPE_I32, {INT32_MIN, 0, INT32_MAX}, 0},
        {MT_INDEXED_DTYPE_I64, {INT32_MIN, 9, INT32_MAX}, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[64];
        snprintf(name, sizeof name, "dtype%d", cases[c].code);
        path_of(prefix, sizeof prefix, name, "");
        mt_indexed_writer w;
        CHECK(mt_indexed_writer_open(&w, prefix, cases[c].code) == MT_OK);
        CHECK(mt_indexed_writer_add_document(&w, cases[c].vals, 3) == MT_OK);
        if (cases[c].bad) {
            CHECK(mt_indexed_writer_add_document(&w, &cases[c].bad, 1) == MT_ERR_DATA);
            CHECK_STR_CONTAINS(mt_last_error(), mt_indexed_dtype_name(cases[c].code));
        }
        CHECK(mt_indexed_writer_finish(&w) == MT_OK);
        CHECK(mt_indexed_open(&ds, prefix) == MT_OK);
        CHECK(ds.dtype_code == cases[c].code);
        CHECK(mt_indexed_n_sequences(&ds) == 1);
        CHECK(mt_indexed_read(&ds, 0, 0, 3, out) == MT_OK);
        CHECK(memcmp(out, cases[c].vals, sizeof cases[c].vals) == 0);
        mt_indexed_close(&ds);
    }
    /* Float dtypes are not token types. */
    mt_indexed_writer w;
    path_of(prefix, sizeof prefix, "f32", "");
    CHECK(mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_F32) == MT_ERR_UNSUPPORTED);
    CHECK(mt_indexed_writer_open(&w, prefix, 42) == MT_ERR_UNSUPPORTED);

    /* Empty documents: a document without a sequence, as Megatron records it. */
    path_of(prefix, sizeof prefix, "empty_docs", "");
    CHECK(mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_U16) == MT_OK);
    CHECK(mt_indexed_writer_add_document(&w, NULL, 0) == MT_OK);
    CHECK(mt_indexed_writer_add_document(&w, k_doc2, 2) == MT_OK);
    CHECK(mt_indexed_writer_add_document(&w, NULL, 0) == MT_OK);
    CHECK(mt_indexed_writer_finish(&w) == MT_OK);
    CHECK(mt_indexed_open(&ds, prefix) == MT_OK);
    CHECK(mt_indexed_n_documents(&ds) == 3 && mt_indexed_n_sequences(&ds) == 1);
    int64_t first, end;
    mt_indexed_document_range(&ds, 0, &first, &end);
    CHECK(first == 0 && end == 0);
    mt_indexed_document_range(&ds, 1, &first, &end);
    CHECK(first == 0 && end == 1);
    mt_indexed_document_range(&ds, 2, &first, &end);
    CHECK(first == 1 && end == 1);
    mt_indexed_close(&ds);

    /* A dataset with no documents at all. */
    path_of(prefix, sizeof prefix, "nothing", "");
    CHECK(mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_U16) == MT_OK);
    CHECK(mt_indexed_writer_finish(&w) == MT_OK);
    CHECK(mt_indexed_open(&ds, prefix) == MT_OK);
    CHECK(mt_indexed_n_documents(&ds) == 0 && mt_indexed_n_sequences(&ds) == 0);
    mt_indexed_close(&ds);

    /* Many sequences (more than the writer's 2048-entry chunks), random lengths. */
    path_of(prefix, sizeof prefix, "many", "");
    CHECK(mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_I32) == MT_OK);
    int32_t doc[300];
    int64_t n_total = 0;
    const int n_docs = 5000;
    for (int d = 0; d < n_docs; d++) {
        int n = 1 + d % 300;
        for (int i = 0; i < n; i++) doc[i] = (int32_t)(n_total + i);
        n_total += n;
        CHECK(mt_indexed_writer_add_document(&w, doc, n) == MT_OK);
    }
    CHECK(mt_indexed_writer_finish(&w) == MT_OK);
    CHECK(mt_indexed_open(&ds, prefix) == MT_OK);
    CHECK(mt_indexed_n_sequences(&ds) == n_docs);
    CHECK(mt_indexed_n_tokens(&ds) == n_total);
    int64_t expect = 0;
    int n_wrong = 0;
    for (int d = 0; d < n_docs; d++) {
        int n = mt_indexed_sequence_length(&ds, d);
        if (n != 1 + d % 300 || mt_indexed_read(&ds, d, 0, n, doc) != MT_OK) n_wrong++;
        for (int i = 0; i < n; i++) n_wrong += doc[i] != (int32_t)(expect + i);
        expect += n;
    }
    CHECK(n_wrong == 0);
    mt_indexed_close(&ds);

    /* abort leaves nothing behind. */
    char p[600];
    path_of(prefix, sizeof prefix, "aborted", "");
    CHECK(mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_U16) == MT_OK);
    CHECK(mt_indexed_writer_add_document(&w, k_doc0, 3) == MT_OK);
    mt_indexed_writer_abort(&w);
    check_no_temporaries("aborted");
    path_of(p, sizeof p, "aborted", ".idx");
    CHECK(access(p, F_OK) != 0);

    /* Writing into a folder that does not exist: MT_ERR_IO naming the file. */
    CHECK(mt_indexed_writer_open(&w, "/nonexistent-dir/x", MT_INDEXED_DTYPE_U16) == MT_ERR_IO);
    CHECK_STR_CONTAINS(mt_last_error(), "/nonexistent-dir/x.bin.tmp");
}

/* ---- guards ------------------------------------------------------------------------------ */

static int exists(const char *path) { return access(path, F_OK) == 0; }

static long dead_pid(void) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    int status;
    waitpid(c, &status, 0);
    return (long)c;
}

static void make_golden(const char *name, char *prefix, size_t n) {
    char p[600];
    path_of(prefix, n, name, "");
    path_of(p, sizeof p, name, ".idx");
    CHECK(write_file(p, k_golden_idx, sizeof k_golden_idx));
    path_of(p, sizeof p, name, ".bin");
    CHECK(write_file(p, k_golden_bin, sizeof k_golden_bin));
}

static void test_tmp_names_and_stale(void) {
    char prefix[512], p[700], dead[700], dead_idx[700], live[700], other[700], odd[700];
    path_of(prefix, sizeof prefix, "stale", "");
    long dpid = dead_pid();
    snprintf(dead, sizeof dead, "%s.bin.tmp.%ld", prefix, dpid);
    snprintf(dead_idx, sizeof dead_idx, "%s.idx.tmp.%ld", prefix, dpid);
    snprintf(live, sizeof live, "%s.bin.tmp.%ld", prefix, (long)getppid());
    snprintf(odd, sizeof odd, "%s.bin.tmp.x%ld", prefix, dpid);
    path_of(other, sizeof other, "stale_other", "");
    snprintf(other + strlen(other), sizeof other - strlen(other), ".bin.tmp.%ld", dpid);
    CHECK(write_file(dead, "x", 1) && write_file(dead_idx, "x", 1) && write_file(live, "x", 1) &&
          write_file(odd, "x", 1) && write_file(other, "x", 1));
    mt_indexed_writer w;
    CHECK(mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_U16) == MT_OK);
    snprintf(p, sizeof p, "%s.bin.tmp.%ld", prefix, (long)getpid());
    CHECKF(exists(p), "the writer's temporary %s carries its pid", p);
    snprintf(p, sizeof p, "%s.idx.tmp.%ld", prefix, (long)getpid());
    CHECK(exists(p));
    CHECKF(!exists(dead) && !exists(dead_idx), "dead pid %ld's temporaries removed", dpid);
    CHECK(exists(live));  /* a live owner */
    CHECK(exists(odd));   /* not our pattern */
    CHECK(exists(other)); /* another name */
    mt_indexed_writer_abort(&w);
    snprintf(p, sizeof p, "%s.bin.tmp.%ld", prefix, (long)getpid());
    CHECK(!exists(p));
    unlink(live);
    unlink(odd);
    unlink(other);
}

static void test_check_unchanged(void) {
    char prefix[512], bin[600], idx[600];
    make_golden("changed", prefix, sizeof prefix);
    path_of(bin, sizeof bin, "changed", ".bin");
    path_of(idx, sizeof idx, "changed", ".idx");
    mt_indexed ds;
    CHECK(mt_indexed_open(&ds, prefix) == MT_OK);
    CHECK(mt_indexed_check_unchanged(&ds) == MT_OK);
    FILE *f = fopen(bin, "ab"); /* grown in place */
    CHECK(f && fwrite("zz", 1, 2, f) == 2);
    if (f) fclose(f);
    mt_status st = mt_indexed_check_unchanged(&ds);
    CHECKF(st == MT_ERR_DATA && strstr(mt_last_error(), bin) &&
           strstr(mt_last_error(), "changed while training read it") &&
           strstr(mt_last_error(), "22 bytes, now 24"), "%s", mt_last_error());
    CHECK(write_file(bin, k_golden_bin, sizeof k_golden_bin)); /* same size: time, or inode */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.new", idx);
    CHECK(write_file(tmp, k_golden_idx, sizeof k_golden_idx) && rename(tmp, idx) == 0);
    st = mt_indexed_check_unchanged(&ds);
    CHECKF(st == MT_ERR_DATA && strstr(mt_last_error(), idx) &&
           strstr(mt_last_error(), "replaced by another file"), "%s", mt_last_error());
    unlink(bin);
    CHECK(mt_indexed_check_unchanged(&ds) != MT_OK);
    mt_indexed_close(&ds);
}

static void test_sigbus_message(void) {
    char buf[600];
    size_t n = mt_mapped_format_fault(buf, sizeof buf, "d/x.bin", 4096, 8192);
    CHECKF(n == strlen(buf) && strstr(buf, "mtrain: error: d/x.bin changed or was truncated while "
                                          "training read it (SIGBUS at offset 4096 of the 8192"),
           "%s", buf);
    char small[20];
    CHECK(mt_mapped_format_fault(small, sizeof small, "d/x.bin", 1, 2) == sizeof small - 1);

    char prefix[512], bin[600];
    make_golden("sigbus", prefix, sizeof prefix);
    path_of(bin, sizeof bin, "sigbus", ".bin");
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stderr);
    pid_t c = fork();
    if (c == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        mt_indexed ds;
        int32_t t[6];
        if (mt_indexed_open(&ds, prefix) != MT_OK) _exit(3);
        if (truncate(bin, 0) != 0) _exit(4);
        mt_indexed_read(&ds, 1, 0, 6, t); /* faults */
        _exit(5);
    }
    close(fds[1]);
    char out[2048];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof out - 1 && (r = read(fds[0], out + got, sizeof out - 1 - got)) > 0) got += (size_t)r;
    out[got] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(c, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 1, "child status %d", status);
    CHECKF(strstr(out, bin) && strstr(out, "SIGBUS at offset 6 of the 22 bytes"), "%s", out);
}

static void test_data_path_messages(void) {
    char prefix[512], p[700];
    make_golden("dp_text_document", prefix, sizeof prefix);
    CHECK(mt_data_path_check(prefix) == MT_OK);
    char folder[600], inner[700];
    path_of(folder, sizeof folder, "dp_folder", "");
    CHECK(mkdir(folder, 0755) == 0);
    snprintf(inner, sizeof inner, "%s/c_text_document.idx", folder);
    CHECK(write_file(inner, k_golden_idx, sizeof k_golden_idx));
    snprintf(inner, sizeof inner, "%s/c_text_document", folder);
    CHECK(mt_data_path_check(folder) == MT_ERR_CONFIG);
    CHECKF(strstr(mt_last_error(), "is a folder") && strstr(mt_last_error(), inner), "%s",
           mt_last_error());
    CHECK(mt_data_path_check(g_dir) == MT_ERR_CONFIG);
    snprintf(p, sizeof p, "%s.bin", prefix);
    CHECK(mt_data_path_check(p) == MT_ERR_CONFIG);
    char want[800];
    snprintf(want, sizeof want, "names the .bin file: data.path is the prefix without extension, '%s'", prefix);
    CHECKF(strstr(mt_last_error(), want), "%s", mt_last_error());
    path_of(p, sizeof p, "dp", "");
    CHECK(mt_data_path_check(p) == MT_ERR_CONFIG);
    snprintf(want, sizeof want, "write '%s'", prefix);
    CHECKF(strstr(mt_last_error(), want), "%s", mt_last_error());
    path_of(p, sizeof p, "dp_absent", "");
    CHECK(mt_data_path_check(p) == MT_ERR_IO);
    CHECKF(strstr(mt_last_error(), "no dataset there"), "%s", mt_last_error());
    snprintf(p, sizeof p, "%s/no/such/folder/x", g_dir);
    CHECK(mt_data_path_check(p) == MT_ERR_IO);
    CHECKF(strstr(mt_last_error(), "no folder"), "%s", mt_last_error());
}

int main(void) {
    if (!test_tmpdir_make(g_dir)) return 1;
    test_golden_write_read();
    test_corruptions();
    test_fuzz();
    test_roundtrips();
    test_tmp_names_and_stale();
    test_check_unchanged();
    test_sigbus_message();
    test_data_path_messages();
    test_tmpdir_remove(g_dir);
    TEST_MAIN_END();
}
