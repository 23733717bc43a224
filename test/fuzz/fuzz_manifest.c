/* fuzz_manifest.c — libFuzzer harness for the checkpoint manifest parser (core/ckpt/manifest.h).
 * Every input is a candidate manifest.json. Properties: no crash / leak / UB (ASan + UBSan); a
 * rejection is MT_ERR_DATA (or MT_ERR_OOM) with a message starting with the file name; an accepted
 * manifest keeps every promise the loader relies on (each piece's file index in range, its box
 * inside its tensor's shape, its flat range inside its box, bytes = elements x dtype size, offset +
 * bytes inside the file, each kind's pieces adding up to the tensor's elements); and, as an
 * oracle, writing it back with mt_manifest_write and parsing that gives the same manifest.
 * Built as FUZZ_TARGET=manifest test/fuzz/run-fuzzer.sh, and #included (MT_FUZZ_NO_ENTRY) by
 * test/unit/test_manifest_fuzz_replay.c, which replays test/fuzz/corpus_manifest/ in CI. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt/manifest.h"

#define FUZZ_MANIFEST_NAME "fuzz/manifest.json"

/* 0 when an accepted manifest breaks a promise of manifest.h */
static int fuzz_manifest_consistent(const mt_manifest *m) {
    for (size_t k = 0; k < m->n_pieces; k++) {
        const mt_manifest_piece *p = &m->pieces[k];
        if (p->tensor < 0 || p->tensor >= m->n_tensors || p->file < 0 || p->file >= m->n_files) return 0;
        const int64_t *s = m->tensors[p->tensor].shape;
        const mt_ckpt_box *b = &p->box;
        if (b->l0 < 0 || b->nl < 1 || b->l0 + b->nl > s[0] || b->r0 < 0 || b->nr < 1 || b->r0 + b->nr > s[1] ||
            b->c0 < 0 || b->nc < 1 || b->c0 + b->nc > s[2])
            return 0;
        if (b->n != (size_t)b->nl * b->nr * b->nc || p->f0 >= p->f1 || p->f1 > b->n) return 0;
        const uint64_t es = !strcmp(p->dtype, "BF16") ? 2 : 4;
        if (p->n_bytes != (p->f1 - p->f0) * es) return 0;
        if (p->offset > m->files[p->file].bytes || p->n_bytes > m->files[p->file].bytes - p->offset) return 0;
    }
    for (int t = 0; t < m->n_tensors; t++) {
        uint64_t sum[MT_CK_KINDS] = {0};
        for (size_t k = 0; k < m->n_pieces; k++)
            if (m->pieces[k].tensor == t) sum[m->pieces[k].kind] += m->pieces[k].f1 - m->pieces[k].f0;
        const uint64_t n = (uint64_t)m->tensors[t].shape[0] * m->tensors[t].shape[1] * m->tensors[t].shape[2];
        for (int k = 0; k < MT_CK_KINDS; k++)
            if (sum[k] && sum[k] != n) return 0;
        if (!sum[MT_CK_WEIGHT]) return 0;
    }
    return 1;
}

static int fuzz_manifest_same(const mt_manifest *a, const mt_manifest *b) {
    if (a->iteration != b->iteration || a->consumed_samples != b->consumed_samples || a->seed != b->seed ||
        a->optimizer_steps != b->optimizer_steps || a->lr != b->lr || a->n_files != b->n_files ||
        a->n_tensors != b->n_tensors || a->n_pieces != b->n_pieces || strcmp(a->recipe_yaml, b->recipe_yaml) ||
        strcmp(a->tokenizer_vocab, b->tokenizer_vocab) || memcmp(&a->layout, &b->layout, sizeof a->layout))
        return 0;
    for (int i = 0; i < a->n_files; i++)
        if (strcmp(a->files[i].name, b->files[i].name) || a->files[i].bytes != b->files[i].bytes ||
            a->files[i].crc32c != b->files[i].crc32c)
            return 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (strcmp(a->tensors[i].name, b->tensors[i].name) || memcmp(a->tensors[i].shape, b->tensors[i].shape, 24))
            return 0;
    for (size_t k = 0; k < a->n_pieces; k++) {
        const mt_manifest_piece *p = &a->pieces[k], *q = &b->pieces[k];
        if (p->tensor != q->tensor || p->kind != q->kind || p->file != q->file || p->offset != q->offset ||
            p->n_bytes != q->n_bytes || strcmp(p->entry, q->entry) || p->f0 != q->f0 || p->f1 != q->f1 ||
            p->box.l0 != q->box.l0 || p->box.nl != q->box.nl || p->box.r0 != q->box.r0 || p->box.nr != q->box.nr ||
            p->box.c0 != q->box.c0 || p->box.nc != q->box.nc)
            return 0;
    }
    return 1;
}

/* 0: handled as it should be; 1: a property failed (message in *why) */
static int fuzz_manifest_one(const uint8_t *data, size_t size, const char **why) {
    mt_manifest m, again;
    mt_status st = mt_manifest_parse((const char *)data, size, FUZZ_MANIFEST_NAME, &m);
    if (st != MT_OK) {
        if (st != MT_ERR_DATA && st != MT_ERR_OOM) return *why = "rejected with a status other than DATA / OOM", 1;
        if (strncmp(mt_last_error(), FUZZ_MANIFEST_NAME, strlen(FUZZ_MANIFEST_NAME)))
            return *why = "error message does not start with the file name", 1;
        if (m.pieces || m.files || m.tensors || m.recipe_yaml) return *why = "rejected but not emptied", 1;
        return 0;
    }
    int bad = 0;
    if (!fuzz_manifest_consistent(&m)) bad = 1, *why = "accepted an inconsistent manifest";
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!bad && f) {
        if (mt_manifest_write(f, &m) != MT_OK) bad = 1, *why = "accepted manifest does not write back";
        fclose(f);
        f = NULL;
        if (!bad) {
            if (mt_manifest_parse(text, n, FUZZ_MANIFEST_NAME, &again) != MT_OK) {
                bad = 1, *why = "written-back manifest does not parse";
            } else {
                if (!fuzz_manifest_same(&m, &again)) bad = 1, *why = "written-back manifest differs";
                mt_manifest_free(&again);
            }
        }
    }
    if (f) fclose(f);
    free(text);
    mt_manifest_free(&m);
    return bad;
}

#ifndef MT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *why = NULL;
    if (fuzz_manifest_one(data, size, &why)) {
        fprintf(stderr, "fuzz_manifest: %s\n", why);
        abort();
    }
    return 0;
}
#endif
