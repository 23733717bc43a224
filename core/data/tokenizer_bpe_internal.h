/* tokenizer_bpe_internal.h — the read-only BPE model shared by tokenizer_bpe.c (encode,
 * decode, GPT-2 pre-tokenizer, merge loops), tokenizer_llama3.c (Llama-3 pre-tokenizer) and
 * tokenizer_bpe_load.c (vocab.json, merges.txt, tokenizer.json). Not for use outside them.
 * Rule kept: once built, a bpe_model is immutable and shared by clones (refcounted). */
#ifndef MT_TOKENIZER_BPE_INTERNAL_H
#define MT_TOKENIZER_BPE_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/data/tokenizer.h"

#define BPE_NO_RANK INT32_MAX

/* How text is split into pre-tokens before the merges. */
enum {
    BPE_PRETOK_NONE = 0,   /* ByteLevel use_regex false and no Split: the text is one word */
    BPE_PRETOK_GPT2 = 1,   /* GPT-2's regex (tokenizer_bpe.c) */
    BPE_PRETOK_LLAMA3 = 2  /* Llama-3's regex (tokenizer_llama3.c) */
};

typedef struct {
    int32_t n_vocab;          /* ids are [0, n_vocab) */
    /* Token strings as written in the vocabulary (UTF-8 of the byte-mapped form). */
    char *str_blob;
    uint32_t *str_off;        /* [n_vocab + 1]; id i is str_blob[str_off[i], str_off[i+1]) */
    uint8_t *present;         /* [n_vocab]: 1 when the id has a token */
    /* Raw bytes each id decodes to. */
    char *dec_blob;
    uint32_t *dec_off;        /* [n_vocab + 1] */
    /* token string -> id (open addressing; -1 = empty) */
    int32_t *str_map;
    uint32_t str_map_mask;
    int32_t byte_id[256];     /* id of the one-byte symbol of each byte */
    uint16_t byte_cp[256];    /* bpe_byte_to_cp of each byte (for ignore_merges lookups) */
    /* merges by rank */
    int32_t n_merges;
    int32_t *merge_a, *merge_b, *merge_res;
    /* (a, b) pair -> rank (open addressing; UINT64_MAX = empty) */
    uint64_t *pair_keys;
    int32_t *pair_ranks;
    uint32_t pair_mask;
    /* Added tokens (tokenizer.json), matched in the text before pre-tokenization. */
    int32_t n_added;
    char *added_blob;
    uint32_t *added_off;      /* [n_added + 1] */
    int32_t *added_id;        /* [n_added], sorted by first byte, then longest first */
    int32_t added_first[257]; /* added tokens starting with byte b: [added_first[b], [b+1]) */
    int ignore_merges;        /* tokenizer.json model.ignore_merges */
    int add_prefix_space;     /* ByteLevel add_prefix_space */
    int pretok;               /* BPE_PRETOK_*: GPT-2's for vocab.json + merges.txt */
    int32_t eod;
    char *name;               /* "gpt2" or "hf" */
    atomic_int n_refs;
} bpe_model;

/* GPT-2's bytes_to_unicode: the code point each byte is written as in vocab/merges. */
uint32_t bpe_byte_to_cp(int byte);
/* Inverse for code points < 512; -1 when cp is not one of the 256. */
int bpe_cp_to_byte(uint32_t cp);

/* Lookup of a token string; -1 when absent. */
int32_t bpe_model_find(const bpe_model *m, const char *s, size_t n_bytes);
/* Rank of merging (a, b); BPE_NO_RANK when they do not merge. */
static inline int32_t bpe_pair_rank(const bpe_model *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & m->pair_mask;
    for (;;) {
        uint64_t k = m->pair_keys[h];
        if (k == key) return m->pair_ranks[h];
        if (k == UINT64_MAX) return BPE_NO_RANK;
        h = (h + 1) & m->pair_mask;
    }
}

/* End of the Llama-3 pre-token that starts at s[i] (i < n); bmp = mt_unicode_bmp_classes(). */
size_t bpe_llama3_pretoken_end(const unsigned char *s, size_t n, size_t i, const uint8_t *bmp);

void bpe_model_unref(bpe_model *m);
/* Wraps a loaded model (takes the reference) into a tokenizer object. */
mt_status bpe_tokenizer_new(mt_tokenizer **out, bpe_model *m);

#endif
