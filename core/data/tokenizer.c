/* tokenizer.c — token/byte buffers, the tokenizer factory (name -> implementation) and the
 * byte-level tokenizer: id = byte value 0..255, end-of-document = 256, vocabulary 257.
 * GPT-2 BPE lives in tokenizer_bpe.c, SentencePiece in tokenizer_spm.c.
 * Rule kept: every implementation lives behind mt_tokenizer_i; callers never switch on it. */
#include "core/data/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/tokenizer_bpe.h"
#include "core/data/tokenizer_spm.h"

#define MT_EOD_TEXT "<|endoftext|>"

/* ---- buffers -------------------------------------------------------------------------- */

mt_status mt_token_buf_reserve(mt_token_buf *b, int64_t n_more) {
    if (n_more < 0 || b->n_ids > INT64_MAX / 8 - n_more) {
        return mt_errorf(MT_ERR_OOM, "token buffer: cannot hold %lld more ids",
                         (long long)n_more);
    }
    int64_t need = b->n_ids + n_more;
    if (need <= b->n_capacity) return MT_OK;
    int64_t cap = b->n_capacity ? b->n_capacity : 1024;
    while (cap < need) cap *= 2;
    int32_t *p = realloc(b->ids, (size_t)cap * sizeof *p);
    if (!p) {
        return mt_errorf(MT_ERR_OOM, "token buffer: cannot grow to %lld ids", (long long)cap);
    }
    b->ids = p;
    b->n_capacity = cap;
    return MT_OK;
}

mt_status mt_token_buf_push(mt_token_buf *b, int32_t id) {
    if (b->n_ids == b->n_capacity) {
        mt_status st = mt_token_buf_reserve(b, 1);
        if (st != MT_OK) return st;
    }
    b->ids[b->n_ids++] = id;
    return MT_OK;
}

void mt_token_buf_free(mt_token_buf *b) {
    free(b->ids);
    memset(b, 0, sizeof *b);
}

mt_status mt_byte_buf_append(mt_byte_buf *b, const void *p, size_t n_bytes) {
    if (n_bytes > SIZE_MAX / 4 - b->n_bytes) {
        return mt_errorf(MT_ERR_OOM, "byte buffer: cannot hold %zu more bytes", n_bytes);
    }
    size_t need = b->n_bytes + n_bytes + 1; /* + NUL */
    if (need > b->n_capacity) {
        size_t cap = b->n_capacity ? b->n_capacity : 256;
        while (cap < need) cap *= 2;
        char *q = realloc(b->bytes, cap);
        if (!q) return mt_errorf(MT_ERR_OOM, "byte buffer: cannot grow to %zu bytes", cap);
        b->bytes = q;
        b->n_capacity = cap;
    }
    if (n_bytes) memcpy(b->bytes + b->n_bytes, p, n_bytes);
    b->n_bytes += n_bytes;
    b->bytes[b->n_bytes] = 0;
    return MT_OK;
}

void mt_byte_buf_free(mt_byte_buf *b) {
    free(b->bytes);
    memset(b, 0, sizeof *b);
}

/* ---- byte-level tokenizer ------------------------------------------------------------- */

static mt_status byte_encode(const mt_tokenizer *tok, const char *text, size_t n_text_bytes,
                             mt_token_buf *out) {
    (void)tok;
    mt_status st = mt_token_buf_reserve(out, (int64_t)n_text_bytes);
    if (st != MT_OK) return st;
    const unsigned char *s = (const unsigned char *)text;
    int32_t *dst = out->ids + out->n_ids;
    for (size_t i = 0; i < n_text_bytes; i++) dst[i] = s[i];
    out->n_ids += (int64_t)n_text_bytes;
    return MT_OK;
}

static mt_status byte_decode(const mt_tokenizer *tok, const int32_t *ids, int64_t n_ids,
                             mt_byte_buf *out) {
    (void)tok;
    for (int64_t i = 0; i < n_ids; i++) {
        mt_status st;
        if (ids[i] >= 0 && ids[i] < 256) {
            unsigned char c = (unsigned char)ids[i];
            st = mt_byte_buf_append(out, &c, 1);
        } else if (ids[i] == MT_BYTE_TOKENIZER_EOD) {
            st = mt_byte_buf_append(out, MT_EOD_TEXT, strlen(MT_EOD_TEXT));
        } else {
            return mt_errorf(MT_ERR_DATA,
                             "byte tokenizer: cannot decode id %d at position %lld (vocabulary "
                             "is 0..%d)", ids[i], (long long)i, MT_BYTE_TOKENIZER_VOCAB - 1);
        }
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

static void byte_free(mt_tokenizer *tok) { free(tok); }

static mt_status byte_clone(const mt_tokenizer *tok, mt_tokenizer **out) {
    (void)tok;
    return mt_tokenizer_byte_open(out);
}

static const mt_tokenizer_i k_byte_iface = MT_TOKENIZER_TABLE("byte", byte_);

mt_status mt_tokenizer_byte_open(mt_tokenizer **out) {
    *out = NULL;
    mt_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return mt_errorf(MT_ERR_OOM, "byte tokenizer: out of memory");
    tok->iface = &k_byte_iface;
    tok->vocab_size = MT_BYTE_TOKENIZER_VOCAB;
    tok->eod_id = MT_BYTE_TOKENIZER_EOD;
    *out = tok;
    return MT_OK;
}

/* ---- factory -------------------------------------------------------------------------- */

mt_status mt_tokenizer_open(mt_tokenizer **out, const char *name,
                            const mt_tokenizer_files *files) {
    *out = NULL;
    const mt_tokenizer_files none = {0};
    if (!files) files = &none;
    if (strcmp(name, "byte") == 0) return mt_tokenizer_byte_open(out);
    if (strcmp(name, "gpt2") == 0 || strcmp(name, "gpt2bpe") == 0 ||
        strcmp(name, "GPT2BPETokenizer") == 0) {
        if (!files->vocab_path || !files->vocab_path[0] || !files->merges_path ||
            !files->merges_path[0]) {
            return mt_errorf(MT_ERR_CONFIG,
                             "tokenizer '%s' needs its vocabulary and merges files: give "
                             "--vocab vocab.json --merges merges.txt (data.vocab, data.merges "
                             "in a recipe); scripts/fetch-gpt2-tokenizer.sh DIR fetches "
                             "GPT-2's", name);
        }
        return mt_tokenizer_gpt2_open(out, files->vocab_path, files->merges_path);
    }
    if (strcmp(name, "hf") == 0 || strcmp(name, "HuggingFaceTokenizer") == 0) {
        const char *json = files->json_path && files->json_path[0] ? files->json_path
                                                                   : files->vocab_path;
        if (!json || !json[0]) {
            return mt_errorf(MT_ERR_CONFIG,
                             "tokenizer '%s' needs a tokenizer.json: give --tokenizer-json "
                             "FILE (data.vocab in a recipe)", name);
        }
        return mt_tokenizer_hf_open(out, json);
    }
    if (mt_tokenizer_spm_name(name)) {
        const char *model = files->json_path && files->json_path[0] ? files->json_path
                                                                    : files->vocab_path;
        if (!model || !model[0]) {
            return mt_errorf(MT_ERR_CONFIG,
                             "tokenizer '%s' needs a SentencePiece model: give --tokenizer-model "
                             "FILE.model (data.vocab in a recipe)", name);
        }
        return mt_tokenizer_spm_open(out, name, model);
    }
    return mt_errorf(MT_ERR_CONFIG, "tokenizer '%s': unknown (known: byte, gpt2bpe, hf, "
                     "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer)", name);
}

mt_status mt_tokenizer_clone(const mt_tokenizer *tok, mt_tokenizer **out) {
    *out = NULL;
    return tok->iface->clone(tok, out);
}

void mt_tokenizer_free(mt_tokenizer *tok) {
    if (tok) tok->iface->free(tok);
}
