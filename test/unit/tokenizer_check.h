/* tokenizer_check.h — checks shared by the BPE tokenizer tests (test_tokenizer_bpe.c,
 * test_tokenizer_llama3.c): a pre-tokenizer's split against the expected pre-tokens, the
 * byte-level symbols and JSON strings of a synthetic vocabulary, and encodings compared with
 * expected ids (and decoded back). Include after test/test.h. */
#ifndef MT_TEST_TOKENIZER_CHECK_H
#define MT_TEST_TOKENIZER_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/data/tokenizer.h"

/* want: the pre-tokens of text under pretokenize, separated by '|' (text must not contain '|'). */
static inline void expect_split_with(int64_t (*pretokenize)(const char *, size_t, int64_t *, int64_t),
                                     const char *text, const char *want) {
    int64_t ends[256];
    int64_t n = pretokenize(text, strlen(text), ends, 256);
    char got[2048];
    size_t k = 0;
    int64_t b = 0;
    for (int64_t i = 0; i < n && k + 300 < sizeof got; i++) {
        if (i) got[k++] = '|';
        memcpy(got + k, text + b, (size_t)(ends[i] - b));
        k += (size_t)(ends[i] - b);
        b = ends[i];
    }
    got[k] = 0;
    CHECKF(n >= 0 && strcmp(got, want) == 0, "split of \"%s\": got \"%s\", want \"%s\"", text,
           got, want);
}

/* UTF-8 of the byte-level symbol of byte b (GPT-2's bytes_to_unicode). */
static inline int byte_symbol(int b, char *out) {
    int cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        cp = b;
    } else {
        int n = 0;
        for (int c = 0; c < b; c++) {
            if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
        }
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* s[0, n) as a JSON string literal: '"' and '\' escaped, control bytes as \u00XX. */
static inline void json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static inline void encode_str(mt_tokenizer *tok, const char *s, mt_token_buf *ids) {
    ids->n_ids = 0;
    mt_status st = mt_tokenizer_encode(tok, s, strlen(s), ids);
    CHECKF(st == MT_OK, "encode \"%s\": %s", s, mt_last_error());
}

/* text encodes to want[0, n_want) and decodes back to text. */
static inline void expect_ids(mt_tokenizer *tok, const char *text, const int32_t *want, int n_want) {
    mt_token_buf ids = {0};
    encode_str(tok, text, &ids);
    int same = ids.n_ids == n_want && (n_want == 0 || memcmp(ids.ids, want, (size_t)n_want * 4) == 0);
    char got[1024];
    size_t k = 0;
    for (int64_t i = 0; i < ids.n_ids && k + 16 < sizeof got; i++) {
        k += (size_t)snprintf(got + k, sizeof got - k, "%s%d", i ? "," : "", ids.ids[i]);
    }
    got[k] = 0;
    CHECKF(same, "\"%s\" -> [%s]", text, got);
    mt_byte_buf back = {0};
    CHECK(mt_tokenizer_decode(tok, ids.ids, ids.n_ids, &back) == MT_OK);
    CHECKF(back.n_bytes == strlen(text) && memcmp(back.bytes ? back.bytes : "", text, strlen(text)) == 0,
           "decode of \"%s\"", text);
    mt_byte_buf_free(&back);
    mt_token_buf_free(&ids);
}

/* Tokenizer `name` opened from files, with the vocabulary size and end-of-document id checked;
 * NULL (a failed check) when it does not open. */
static inline mt_tokenizer *open_checked(const char *name, const mt_tokenizer_files *files, int vocab, int eod) {
    mt_tokenizer *tok = NULL;
    mt_status st = mt_tokenizer_open(&tok, name, files);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return NULL;
    CHECK(mt_tokenizer_vocab_size(tok) == vocab);
    CHECK(mt_tokenizer_eod(tok) == eod);
    return tok;
}

#endif
