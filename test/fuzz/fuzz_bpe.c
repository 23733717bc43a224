/* fuzz_bpe.c — libFuzzer harness for the byte-level BPE loaders and encoder (core/data/tokenizer_bpe.c,
 * tokenizer_bpe_load.c, tokenizer_llama3.c). Every input is tried two ways, each through files in a
 * private mkdtemp folder under $TMPDIR (or /tmp), removed after each input (the loaders take paths):
 *   GPT-2: the bytes before the first NUL are fuzz-vocab.json, those after it fuzz-merges.txt (no
 *     NUL: an empty merges file), opened with mt_tokenizer_gpt2_open;
 *   Hugging Face: the whole input is fuzz-tokenizer.json, opened with mt_tokenizer_hf_open (GPT-2's
 *     or Llama-3's pre-tokenizer).
 * Properties checked: no crash / leak / UB (under ASan+UBSan); a rejection is MT_ERR_DATA or
 * MT_ERR_UNSUPPORTED with a message naming the file; an accepted tokenizer gives, for fixed texts
 * (plain, contractions, digits, whitespace runs, long words for the heap merge loop, special
 * tokens, bytes that are not UTF-8), ids inside its vocabulary that decode without error, the same
 * ids a second time (the word cache), from a clone, from a clone using the heap merge loop only
 * without the cache and from one using the simple loop only; GPT-2's files decode them back to the
 * very text, and so does a tokenizer.json without added tokens (or to " " + the text under
 * ByteLevel's add_prefix_space).
 * The corpus (test/fuzz/corpus_bpe/) is hand-written: seed-gpt2-* vocab.json NUL merges.txt pairs
 * (256 byte symbols + a few dozen tokens), seed-json-* tokenizer.json files (GPT-2 and Llama-3
 * pre-tokenizers, added tokens), and damaged ones of both (bad JSON, duplicate ids and tokens,
 * ids out of range, merges naming unknown tokens, huge numbers, bytes that are not UTF-8).
 * Built three ways, as fuzz_spm.c: FUZZ_TARGET=bpe test/fuzz/run-fuzzer.sh (clang
 * -fsanitize=fuzzer), with -DMT_FUZZ_REPLAY_MAIN as a plain replay program, and #included by
 * test/unit/test_bpe_fuzz_replay.c, which replays test/fuzz/corpus_bpe/ in CI. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/data/tokenizer.h"
#include "core/data/tokenizer_bpe.h"
#include "core/json_tree.h"
#include "test/fuzz/fuzz_file.h"

static int fuzz_bpe_n_gpt2, fuzz_bpe_n_json; /* inputs each loader accepted (the replay test counts them) */

static const char *const k_bpe_texts[] = {
    "In the beginning God created the heaven and the earth.",
    "I'm sure they'll've said: 'S 'T 'RE don't DON'T",
    "  two  spaces\tand a tab\nand a newline  \r\n\r\n x",
    "12 123 1234567 \xc2\xb2\xc2\xb3 3.14159 \xd9\xa3\xd9\xa4",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa the",
    "thethethethethethethethethethethethethethethethethethethethethethethethethethethethethethethe",
    "a<|endoftext|>b<|end_of_text|>c<|eot_id|><|x|></s><eos> God",
    "\xff\xfe bytes \xc3 that \xe2\x82 are not UTF-8 \xf0\x9f\x98 \xed\xa0\x80",
    "h\xc3\xa9llo \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\xa6\x99 \xe2\x96\x81 \xc4\xa0the \xc2\xa0\xe3\x80\x80",
    "",
};
#define FUZZ_BPE_N_TEXTS (sizeof k_bpe_texts / sizeof k_bpe_texts[0])

/* The ids of every text into ids (ends[k]: where text k's end); 1 when an encode fails or an id is
 * outside the vocabulary. */
static int fuzz_bpe_encode_all(mt_tokenizer *tok, mt_token_buf *ids, int64_t *ends) {
    ids->n_ids = 0;
    for (size_t k = 0; k < FUZZ_BPE_N_TEXTS; k++) {
        if (mt_tokenizer_encode(tok, k_bpe_texts[k], strlen(k_bpe_texts[k]), ids) != MT_OK) {
            fprintf(stderr, "fuzz: encode of text %zu failed: %s\n", k, mt_last_error());
            return 1;
        }
        ends[k] = ids->n_ids;
    }
    for (int64_t i = 0; i < ids->n_ids; i++) {
        if (ids->ids[i] < 0 || ids->ids[i] >= tok->vocab_size) {
            fprintf(stderr, "fuzz: id %d outside the vocabulary of %d\n", ids->ids[i], tok->vocab_size);
            return 1;
        }
    }
    return 0;
}

static int fuzz_bpe_same(const mt_token_buf *a, const mt_token_buf *b, const char *what) {
    if (a->n_ids == b->n_ids && !memcmp(a->ids, b->ids, (size_t)a->n_ids * sizeof *a->ids)) return 0;
    fprintf(stderr, "fuzz: %s gives other ids (%lld ids, not %lld)\n", what, (long long)b->n_ids, (long long)a->n_ids);
    return 1;
}

/* An accepted tokenizer; 1 when a property fails. round_trip: decode must give each text back (1), or
 * it or " " + it when it does not start with a space (2: ByteLevel's add_prefix_space may be on). */
static int fuzz_bpe_accepted(mt_tokenizer *tok, int round_trip) {
    mt_token_buf a = {0}, b = {0};
    mt_byte_buf text = {0};
    mt_tokenizer *twin[3] = {NULL, NULL, NULL};
    int64_t ends[FUZZ_BPE_N_TEXTS], ends_b[FUZZ_BPE_N_TEXTS];
    int bad = tok->vocab_size <= 0 || tok->eod_id < 0 || tok->eod_id >= tok->vocab_size;
    if (bad) fprintf(stderr, "fuzz: vocab_size %d, eod %d\n", tok->vocab_size, tok->eod_id);
    bad = bad || fuzz_bpe_encode_all(tok, &a, ends);
    /* decoding: every id, each text back (GPT-2's byte-level BPE round-trips any bytes) */
    if (!bad && mt_tokenizer_decode(tok, a.ids, a.n_ids, &text) != MT_OK)
        bad = 1, fprintf(stderr, "fuzz: decode failed: %s\n", mt_last_error());
    for (size_t k = 0; !bad && round_trip && k < FUZZ_BPE_N_TEXTS; k++) {
        const int64_t from = k ? ends[k - 1] : 0;
        text.n_bytes = 0;
        const char *t = k_bpe_texts[k];
        const size_t n = strlen(t);
        if (mt_tokenizer_decode(tok, a.ids + from, ends[k] - from, &text) != MT_OK)
            bad = 1, fprintf(stderr, "fuzz: text %zu: decode failed: %s\n", k, mt_last_error());
        const int same = !bad && text.n_bytes == n && !memcmp(text.bytes, t, n);
        const int prefixed = !bad && round_trip == 2 && n && t[0] != ' ' && text.n_bytes == n + 1 &&
                             text.bytes[0] == ' ' && !memcmp(text.bytes + 1, t, n);
        if (!bad && !same && !prefixed)
            bad = 1, fprintf(stderr, "fuzz: text %zu does not decode back to itself (%zu bytes, not %zu)\n", k,
                             text.n_bytes, n);
    }
    /* the second time through the word cache */
    if (!bad) bad = fuzz_bpe_encode_all(tok, &b, ends_b) || fuzz_bpe_same(&a, &b, "the second encode");
    /* clones: as is, heap loop only without the cache, simple loop only */
    for (int c = 0; c < 3 && !bad; c++) {
        if (mt_tokenizer_clone(tok, &twin[c]) != MT_OK) {
            fprintf(stderr, "fuzz: clone failed: %s\n", mt_last_error());
            bad = 1;
            break;
        }
        if (c == 1) mt_bpe_set_small_word_limit(twin[c], 0), mt_bpe_set_cache(twin[c], 0);
        if (c == 2) mt_bpe_set_small_word_limit(twin[c], 1 << 30);
        static const char *const what[] = {"a clone", "the heap merge loop", "the simple merge loop"};
        bad = fuzz_bpe_encode_all(twin[c], &b, ends_b) || fuzz_bpe_same(&a, &b, what[c]);
    }
    for (int c = 0; c < 3; c++) mt_tokenizer_free(twin[c]);
    mt_token_buf_free(&a);
    mt_token_buf_free(&b);
    mt_byte_buf_free(&text);
    return bad;
}

/* A load's outcome; 1 when mishandled. */
static int fuzz_bpe_outcome(mt_status st, mt_tokenizer *tok, const char *file_a, const char *file_b, int round_trip,
                            int *n_accepted) {
    if (st != MT_OK) {
        const char *e = mt_last_error();
        const int bad = (st != MT_ERR_DATA && st != MT_ERR_UNSUPPORTED) || tok ||
                        !(strstr(e, file_a) || (file_b && strstr(e, file_b)));
        if (bad) fprintf(stderr, "fuzz: rejection %s without the file named: %s\n", mt_status_name(st), e);
        mt_clear_error();
        return bad;
    }
    ++*n_accepted;
    const int bad = fuzz_bpe_accepted(tok, round_trip);
    mt_tokenizer_free(tok);
    return bad;
}

/* 0 when the input was handled as it should be. */
static int fuzz_bpe_one(const uint8_t *data, size_t size) {
    const char *tmp = getenv("TMPDIR");
    char dir[512], vocab[600], merges[600], json[600];
    snprintf(dir, sizeof dir, "%s/mt_fuzz_bpe.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    snprintf(vocab, sizeof vocab, "%s/fuzz-vocab.json", dir);
    snprintf(merges, sizeof merges, "%s/fuzz-merges.txt", dir);
    snprintf(json, sizeof json, "%s/fuzz-tokenizer.json", dir);
    const uint8_t *nul = memchr(data, 0, size);
    const size_t n_vocab = nul ? (size_t)(nul - data) : size;
    int bad = 0;
    if (fuzz_write_file(vocab, data, n_vocab) || fuzz_write_file(merges, data + n_vocab + !!nul, size - n_vocab - !!nul) ||
        fuzz_write_file(json, data, size)) {
        perror(dir);
        bad = 1;
        goto out;
    }
    mt_tokenizer *tok = NULL;
    mt_clear_error();
    mt_status st = mt_tokenizer_gpt2_open(&tok, vocab, merges);
    bad = fuzz_bpe_outcome(st, tok, "fuzz-vocab.json", "fuzz-merges.txt", 1, &fuzz_bpe_n_gpt2);
    tok = NULL;
    st = mt_tokenizer_hf_open(&tok, json);
    /* a tokenizer.json without added tokens round-trips too (an added token decodes to its content,
     * or to the vocabulary's entry of its id, not to the text that matched it) */
    mt_json_doc doc;
    int no_added = 0;
    if (st == MT_OK && mt_json_doc_parse(&doc, (const char *)data, size, "fuzz-tokenizer.json") == MT_OK) {
        const mt_json_node *added = mt_json_get(doc.root, "added_tokens");
        no_added = !added || added->type == MT_JSON_NULL || (added->type == MT_JSON_ARRAY && added->n_items == 0);
        mt_json_doc_free(&doc);
    }
    bad |= fuzz_bpe_outcome(st, tok, "fuzz-tokenizer.json", NULL, no_added ? 2 : 0, &fuzz_bpe_n_json);
out:
    unlink(vocab);
    unlink(merges);
    unlink(json);
    rmdir(dir);
    return bad;
}

/* libFuzzer's entry; with -DMT_FUZZ_REPLAY_MAIN a plain replay driver: fuzz_bpe FILE... (e.g. a
 * bpe-crash-* file from libFuzzer) */
FUZZ_ENTRY_POINTS(fuzz_bpe_one)
