/* tokenizer_bpe_internal.h — the read-only BPE model shared by tokenizer_bpe.c (encode,
 * decode, pre-tokenizer, merge loops) and tokenizer_bpe_load.c (vocab.json, merges.txt,
 * tokenizer.json). Not for use outside these two files.
 * Rule kept: once built, a bpe_model is immutable and shared by clones (refcounted). */
#ifndef MT_TOKENIZER_BPE_INTERNAL_H
#define MT_TOKENIZER_BPE_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/data/tokenizer.h"

#define BPE_NO_RANK INT32_MAX

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
    int use_regex;            /* ByteLevel use_regex (1 for GPT-2) */
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

void bpe_model_unref(bpe_model *m);
/* Wraps a loaded model (takes the reference) into a tokenizer object. */
mt_status bpe_tokenizer_new(mt_tokenizer **out, bpe_model *m);

#endif
