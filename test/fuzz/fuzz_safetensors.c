/* fuzz_safetensors.c — libFuzzer harness for the safetensors parser and writer
 * (core/ckpt/safetensors.h) and CRC-32C (core/crc32c.h). Every input is a candidate file.
 * Properties checked: no crash / leak / UB (under ASan+UBSan); the SSE4.2 and table CRCs agree,
 * split or not; a rejection is MT_ERR_DATA (or MT_ERR_OOM) with a message starting with the file
 * name and leaves an empty header; an accepted header is consistent (entries sorted by data,
 * in range, not overlapping, size = shape x dtype, names unique and found); and, as an oracle,
 * its tensors written back with mt_st_write parse again to the same names, dtypes, shapes and
 * bytes, laid out back to back, with the writer's CRC equal to the file's.
 * Built three ways: FUZZ_TARGET=safetensors test/fuzz/run-fuzzer.sh (clang -fsanitize=fuzzer),
 * with -DMT_FUZZ_REPLAY_MAIN as a plain program that replays files (any compiler), and
 * #included by test/unit/test_safetensors_fuzz_replay.c, which replays
 * test/fuzz/corpus_safetensors/ in CI. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ckpt/safetensors.h"
#include "core/crc32c.h"
#include "core/crc32c_internal.h"
#include "test/fuzz/fuzz_file.h"

#define FUZZ_NAME "fuzz.safetensors"

static char fuzz_tmp_path[64];
static void fuzz_tmp_remove(void) {
    if (fuzz_tmp_path[0]) unlink(fuzz_tmp_path);
}

/* One scratch file per process for the write-back oracle (removed at exit). */
static const char *fuzz_tmp(void) {
    if (!fuzz_tmp_path[0]) {
        snprintf(fuzz_tmp_path, sizeof fuzz_tmp_path, "/tmp/mt_fuzz_st.XXXXXX");
        int fd = mkstemp(fuzz_tmp_path);
        if (fd < 0) {
            fuzz_tmp_path[0] = 0;
            return NULL;
        }
        close(fd);
        atexit(fuzz_tmp_remove);
    }
    return fuzz_tmp_path;
}

static int fuzz_consistent(const mt_st_header *h, size_t n_bytes) {
    if (h->data_start < 8 || h->data_start > n_bytes) return 0;
    for (int i = 0; i < h->n_entries; i++) {
        const mt_st_entry *e = &h->entries[i];
        uint64_t size = (uint64_t)e->elem_bytes;
        for (int d = 0; d < e->n_dims; d++) {
            if (e->shape[d] < 0) return 0;
            size *= (uint64_t)e->shape[d];
        }
        if (e->n_dims < 0 || e->n_dims > MT_ST_MAX_DIMS || e->elem_bytes <= 0) return 0;
        if (!memchr(e->name, 0, MT_ST_NAME_MAX) || !e->name[0]) return 0;
        if (e->begin < h->data_start || e->end < e->begin || e->end > n_bytes || e->end - e->begin != size) return 0;
        if (i && e->begin < h->entries[i - 1].end) return 0;
        if (mt_st_find(h, e->name) != e) return 0;
    }
    return 1;
}

/* Returns 0 when every property holds; otherwise prints why and returns 1. */
static int fuzz_safetensors_one(const uint8_t *data, size_t n_bytes) {
    uint32_t hw = mt_crc32c(0, data, n_bytes), sw = mt_crc32c_sw(0, data, n_bytes);
    size_t cut = n_bytes / 3;
    if (hw != sw || mt_crc32c_sw(mt_crc32c(0, data, cut), data + cut, n_bytes - cut) != hw) {
        fprintf(stderr, "fuzz: CRC paths differ on %zu bytes: hw %08x sw %08x\n", n_bytes, hw, sw);
        return 1;
    }
    mt_st_header h;
    mt_clear_error();
    mt_status st = mt_st_parse(data, n_bytes, FUZZ_NAME, &h);
    if (st != MT_OK) {
        if ((st != MT_ERR_DATA && st != MT_ERR_OOM) || strncmp(mt_last_error(), FUZZ_NAME ": ", strlen(FUZZ_NAME) + 2) ||
            h.entries || h.n_entries) {
            fprintf(stderr, "fuzz: rejection %s without the file name or with entries left: %s\n", mt_status_name(st),
                    mt_last_error());
            return 1;
        }
        return 0;
    }
    if (!fuzz_consistent(&h, n_bytes)) {
        fprintf(stderr, "fuzz: accepted an inconsistent header (%d entries)\n", h.n_entries);
        mt_st_header_free(&h);
        return 1;
    }
    /* oracle: write the tensors back (in data order) and parse the result */
    int bad = 0;
    mt_st_tensor *t = calloc(h.n_entries ? (size_t)h.n_entries : 1, sizeof *t);
    const char *path = fuzz_tmp();
    if (!t || !path) goto done;
    for (int i = 0; i < h.n_entries; i++) {
        const mt_st_entry *e = &h.entries[i];
        t[i] = (mt_st_tensor){e->name, e->dtype, e->n_dims, {0}, data + e->begin, (size_t)(e->end - e->begin)};
        memcpy(t[i].shape, e->shape, sizeof t[i].shape);
    }
    uint32_t crc = 0;
    uint64_t file_bytes = 0, data_start = 0;
    if ((st = mt_st_write(path, t, h.n_entries, 0, &crc, &file_bytes, &data_start)) != MT_OK) {
        fprintf(stderr, "fuzz: a parsed header does not write back: %s\n", mt_last_error());
        bad = 1;
        goto done;
    }
    size_t n_back = 0;
    uint8_t *back = fuzz_read_file(path, &n_back);
    mt_st_header h2;
    if (!back || n_back != file_bytes || data_start % 8 || mt_crc32c(0, back, n_back) != crc) {
        fprintf(stderr, "fuzz: written file: %zu bytes (writer: %llu), data at %llu, CRC %08x (writer: %08x)\n", n_back,
                (unsigned long long)file_bytes, (unsigned long long)data_start, back ? mt_crc32c(0, back, n_back) : 0, crc);
        bad = 1;
    } else if ((st = mt_st_parse(back, n_back, "written", &h2)) != MT_OK) {
        fprintf(stderr, "fuzz: written file does not parse: %s\n", mt_last_error());
        bad = 1;
    } else {
        uint64_t at = data_start;
        bad = h2.n_entries != h.n_entries || h2.data_start != data_start;
        for (int i = 0; !bad && i < h.n_entries; i++) {
            const mt_st_entry *a = &h.entries[i], *b = mt_st_find(&h2, a->name);
            bad = !b || strcmp(a->dtype, b->dtype) || a->n_dims != b->n_dims || a->elem_bytes != b->elem_bytes ||
                  memcmp(a->shape, b->shape, sizeof a->shape) || b->begin != at || b->end - b->begin != a->end - a->begin ||
                  memcmp(back + b->begin, data + a->begin, (size_t)(a->end - a->begin));
            if (bad) fprintf(stderr, "fuzz: tensor '%s' differs after the write-back\n", a->name);
            at += a->end - a->begin;
        }
        if (!bad && at != n_back) bad = 1, fprintf(stderr, "fuzz: written file has %zu bytes, data ends at %llu\n",
                                                   n_back, (unsigned long long)at);
        mt_st_header_free(&h2);
    }
    free(back);
done:
    free(t);
    mt_st_header_free(&h);
    return bad;
}

/* libFuzzer's entry; with -DMT_FUZZ_REPLAY_MAIN a plain replay driver: fuzz_safetensors FILE... (e.g. a
 * crash-* file from libFuzzer) */
FUZZ_ENTRY_POINTS(fuzz_safetensors_one)
