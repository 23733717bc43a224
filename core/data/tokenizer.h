/* tokenizer.h — the tokenizer interface: a const table of functions plus an opaque context
 * (ggml-backend style), so preprocess, training and sampling do not care which tokenizer
 * they hold. Implementations: "byte" (tokenizer.c: id = byte value, eod = 256, vocab 257),
 * byte-level BPE from GPT-2's vocab.json + merges.txt and from a Hugging Face tokenizer.json
 * with GPT-2's or Llama-3's pre-tokenizer (tokenizer_bpe*.c, tokenizer_llama3.c), and
 * SentencePiece .model files as Megatron's three SentencePiece classes use them
 * (tokenizer_spm*.c), all opened through mt_tokenizer_open's name switch.
 * Rules kept: encode/decode append to growable buffers (caller owns them, reuses them across
 * documents: no allocation per document once they are big enough); statuses, never exit;
 * one tokenizer object per thread (they may cache): mt_tokenizer_clone makes another that
 * shares the read-only tables. */
#ifndef MT_TOKENIZER_H
#define MT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Growable array of token ids. Zero-initialise; free with mt_token_buf_free. */
typedef struct {
    int32_t *ids;
    int64_t n_ids;
    int64_t n_capacity;
} mt_token_buf;

mt_status mt_token_buf_reserve(mt_token_buf *b, int64_t n_more);
mt_status mt_token_buf_push(mt_token_buf *b, int32_t id);
void mt_token_buf_free(mt_token_buf *b);

/* Growable byte string (always NUL-terminated after a successful append; may hold NULs). */
typedef struct {
    char *bytes;
    size_t n_bytes;
    size_t n_capacity;
} mt_byte_buf;

mt_status mt_byte_buf_append(mt_byte_buf *b, const void *p, size_t n_bytes);
void mt_byte_buf_free(mt_byte_buf *b);

typedef struct mt_tokenizer mt_tokenizer;

typedef struct {
    const char *name;
    /* Appends the ids of text[0, n_text_bytes) to out (never the eod token). */
    mt_status (*encode)(const mt_tokenizer *tok, const char *text, size_t n_text_bytes,
                        mt_token_buf *out);
    /* Appends the bytes of ids to out. The eod id decodes to "<|endoftext|>". MT_ERR_DATA
     * for an id outside [0, vocab_size). */
    mt_status (*decode)(const mt_tokenizer *tok, const int32_t *ids, int64_t n_ids,
                        mt_byte_buf *out);
    void (*free)(mt_tokenizer *tok);
    /* A new object for another thread, sharing what is read-only. */
    mt_status (*clone)(const mt_tokenizer *tok, mt_tokenizer **out);
} mt_tokenizer_i;

/* A tokenizer's table from its functions P##encode, P##decode, P##free, P##clone */
#define MT_TOKENIZER_TABLE(NAME, P) \
    { .name = NAME, .encode = P##encode, .decode = P##decode, .free = P##free, .clone = P##clone }

struct mt_tokenizer {
    const mt_tokenizer_i *iface;
    int32_t vocab_size;  /* real vocabulary size (before any padding to 128*tp) */
    int32_t eod_id;      /* end-of-document token */
    void *ctx;           /* implementation state */
};

/* Where a tokenizer gets its files from (ignored by "byte"). */
typedef struct {
    const char *vocab_path;   /* GPT-2: encoder.json / vocab.json; hf: tokenizer.json when
                                 json_path is not given (the recipe's data.vocab) */
    const char *merges_path;  /* GPT-2: vocab.bpe / merges.txt */
    const char *json_path;    /* hf: tokenizer.json; SentencePiece: the .model (else vocab_path) */
} mt_tokenizer_files;

/* Opens the tokenizer called `name`: "byte"; "gpt2" (aliases "gpt2bpe", "GPT2BPETokenizer")
 * from files->vocab_path + merges_path; "hf" (alias "HuggingFaceTokenizer") from a
 * byte-level BPE tokenizer.json (GPT-2 or Llama-3, told apart by its pre-tokenizer);
 * "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer" (aliases "spm",
 * "gptspm", "llama2": tokenizer_spm.h) from a SentencePiece .model.
 * files may be NULL for "byte". */
mt_status mt_tokenizer_open(mt_tokenizer **out, const char *name,
                            const mt_tokenizer_files *files);
void mt_tokenizer_free(mt_tokenizer *tok);
/* Another object with the same behaviour, for use on another thread. */
mt_status mt_tokenizer_clone(const mt_tokenizer *tok, mt_tokenizer **out);

/* The byte-level tokenizer, directly. */
mt_status mt_tokenizer_byte_open(mt_tokenizer **out);
#define MT_BYTE_TOKENIZER_EOD 256
#define MT_BYTE_TOKENIZER_VOCAB 257

static inline mt_status mt_tokenizer_encode(const mt_tokenizer *tok, const char *text,
                                            size_t n_text_bytes, mt_token_buf *out) {
    return tok->iface->encode(tok, text, n_text_bytes, out);
}
static inline mt_status mt_tokenizer_decode(const mt_tokenizer *tok, const int32_t *ids,
                                            int64_t n_ids, mt_byte_buf *out) {
    return tok->iface->decode(tok, ids, n_ids, out);
}
static inline int32_t mt_tokenizer_vocab_size(const mt_tokenizer *tok) {
    return tok->vocab_size;
}
static inline int32_t mt_tokenizer_eod(const mt_tokenizer *tok) { return tok->eod_id; }
static inline const char *mt_tokenizer_name(const mt_tokenizer *tok) {
    return tok->iface->name;
}

#endif
