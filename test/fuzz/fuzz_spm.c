/* fuzz_spm.c — libFuzzer harness for the SentencePiece model reader and encoder
 * (core/data/protobuf_wire.c, core/data/tokenizer_spm*.c). Every input is a candidate .model
 * file. Properties checked: no crash / leak / UB (under ASan+UBSan); a rejection is MT_ERR_DATA
 * or MT_ERR_UNSUPPORTED with a message naming the file; an accepted model gives, for fixed texts
 * (plain, whitespace runs, Megatron's special tokens, bytes that are not UTF-8), ids inside the
 * vocabulary under each of Megatron's three classes, the same ids from a clone, and ids that
 * decode without error.
 * Built three ways, as fuzz_safetensors.c: FUZZ_TARGET=spm test/fuzz/run-fuzzer.sh (clang
 * -fsanitize=fuzzer), with -DMT_FUZZ_REPLAY_MAIN as a plain replay program, and #included by
 * test/unit/test_spm_fuzz_replay.c, which replays test/fuzz/corpus_spm/ in CI. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/tokenizer.h"
#include "core/data/tokenizer_spm.h"
#include "test/fuzz/fuzz_file.h"

#define FUZZ_NAME "fuzz.model"

static const char *const k_texts[] = {
    "In the beginning God created the heaven and the earth.",
    "  two  spaces\tand a tab\nand a newline  ",
    "a<EOD>b<s>c</s><CLS><unk><0x41>",
    "\xff\xfe bytes \xc3 that \xe2\x82 are not UTF-8 \xf0\x9f\x98",
    "\xe2\x96\x81\xe2\x96\x81 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\xa6\x99",
    "",
};

/* The ids of every text, checked in range and decoded; 1 when something is wrong. */
static int fuzz_spm_texts(mt_tokenizer *tok, mt_token_buf *ids) {
    ids->n_ids = 0;
    for (size_t k = 0; k < sizeof k_texts / sizeof k_texts[0]; k++) {
        if (mt_tokenizer_encode(tok, k_texts[k], strlen(k_texts[k]), ids) != MT_OK) {
            fprintf(stderr, "fuzz: encode failed: %s\n", mt_last_error());
            return 1;
        }
    }
    for (int64_t i = 0; i < ids->n_ids; i++) {
        if (ids->ids[i] < 0 || ids->ids[i] >= tok->vocab_size) {
            fprintf(stderr, "fuzz: id %d outside the vocabulary of %d\n", ids->ids[i], tok->vocab_size);
            return 1;
        }
    }
    mt_byte_buf text = {0};
    const mt_status st = mt_tokenizer_decode(tok, ids->ids, ids->n_ids, &text);
    mt_byte_buf_free(&text);
    if (st != MT_OK) fprintf(stderr, "fuzz: decode failed: %s\n", mt_last_error());
    return st != MT_OK;
}

/* One class over the model: 1 when mishandled. */
static int fuzz_spm_class(const uint8_t *data, size_t size, const char *name) {
    mt_tokenizer *tok = NULL, *twin = NULL;
    mt_status st = mt_tokenizer_spm_open_bytes(&tok, name, data, size, FUZZ_NAME);
    if (st != MT_OK) {
        const int bad = (st != MT_ERR_DATA && st != MT_ERR_UNSUPPORTED) || !strstr(mt_last_error(), FUZZ_NAME);
        if (bad) fprintf(stderr, "fuzz: rejection %d without the file named: %s\n", st, mt_last_error());
        mt_clear_error();
        return bad;
    }
    mt_token_buf a = {0}, b = {0};
    int bad = fuzz_spm_texts(tok, &a);
    if (!bad && mt_tokenizer_clone(tok, &twin) == MT_OK) {
        bad = fuzz_spm_texts(twin, &b) || a.n_ids != b.n_ids ||
              memcmp(a.ids, b.ids, (size_t)a.n_ids * sizeof *a.ids) != 0;
        if (bad) fprintf(stderr, "fuzz: the clone gives other ids\n");
    }
    mt_tokenizer_free(twin);
    mt_tokenizer_free(tok);
    mt_token_buf_free(&a);
    mt_token_buf_free(&b);
    return bad;
}

/* 0 when the input was handled as it should be. */
static int fuzz_spm_one(const uint8_t *data, size_t size) {
    return fuzz_spm_class(data, size, "GPTSentencePieceTokenizer") ||
           fuzz_spm_class(data, size, "SentencePieceTokenizer") || fuzz_spm_class(data, size, "Llama2Tokenizer");
}

#ifndef MT_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_spm_one(data, size)) abort();
    return 0;
}
#endif

#ifdef MT_FUZZ_REPLAY_MAIN
/* Plain replay driver: fuzz_spm FILE... (e.g. a crash-* file from libFuzzer). */
int main(int argc, char **argv) { return fuzz_replay_files(argc, argv, fuzz_spm_one); }
#endif
