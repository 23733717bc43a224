/* tokenizer_spm.c — SentencePiece encoding and decoding over the model of
 * tokenizer_spm_load.c, written to give the ids SentencePiece's processor gives:
 *   normalise  (Normalizer::Normalize) each character replaced by its rule of the precompiled
 *              character map when the model has one (the longest rule source that matches);
 *              leading spaces dropped and
 *              runs of spaces made one when remove_extra_whitespaces; ' ' -> U+2581 when
 *              escape_whitespaces; U+2581 put before the text (after it with
 *              treat_whitespace_as_suffix) when add_dummy_prefix; trailing U+2581s dropped
 *              when remove_extra_whitespaces; each byte that does not start a valid UTF-8
 *              character becomes U+FFFD; user-defined pieces are copied as they are;
 *   BPE        the text split into characters (a user-defined piece is one frozen symbol),
 *              then repeatedly the adjacent pair whose concatenation is the piece with the
 *              highest score is merged, the leftmost among equal scores;
 *   unigram    the Viterbi best path over every piece that matches at each character
 *              (user-defined pieces score length * max_score - 0.1; a character no piece
 *              of one character covers is unknown, scoring min_score - 10), ties keeping the
 *              first path found, scores summed in float as SentencePiece does;
 *   unknown    with byte_fallback each byte of an unknown piece is its <0xXX> piece;
 *              without it a run of unknown pieces is one unk id.
 * Megatron's classes on top (tokenizer_spm.h). Rule kept: encode never allocates once the
 * scratch buffers (per tokenizer object) are big enough. */
#include "core/data/tokenizer_spm.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/tokenizer_spm_internal.h"

#define SPM_SPACE "\xe2\x96\x81"
#define SPM_N_SPECIAL 7

enum { KIND_SPM = 0, KIND_GPT = 1, KIND_LLAMA2 = 2 };

typedef struct { uint32_t start, len; int32_t prev, next; int freeze; } spm_sym;
typedef struct { float score; int32_t left, right; uint32_t size; } spm_pair;
typedef struct { float score; int32_t start, id; } spm_best;
typedef struct { uint32_t start, len; int32_t id; } spm_piece;

typedef struct {
    spm_model *m;
    int kind;
    /* SentencePieceTokenizer: the tokens cut out of the text, in Megatron's order */
    int n_special;
    char *special[SPM_N_SPECIAL];
    int32_t special_id[SPM_N_SPECIAL];
    /* scratch */
    mt_byte_buf norm;
    spm_sym *sym;
    spm_pair *heap;
    spm_best *best;
    spm_piece *pieces;
    size_t n_sym_cap, n_heap, n_heap_cap, n_best_cap, n_pieces, n_pieces_cap;
} spm_ctx;

static mt_status grow_array(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return MT_OK;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return mt_errorf(MT_ERR_OOM, "SentencePiece: out of memory for %zu entries", c);
    *p = q;
    *cap = c;
    return MT_OK;
}

/* ---- normalisation -------------------------------------------------------------------- */

/* Length of the longest user-defined piece at s[0, n), or 0. */
static size_t user_defined_at(const spm_model *m, const char *s, size_t n) {
    size_t best = 0;
    uint64_t h = SPM_HASH_SEED;
    for (size_t k = 0; k < n; k++) {
        h = spm_hash_step(h, (unsigned char)s[k]);
        const spm_slot *e = spm_find(m, spm_hash_fix(h), s, k + 1);
        if (!e || !e->is_prefix) break;
        if (e->id >= 0 && m->type[e->id] == SPM_USER_DEFINED) best = k + 1;
    }
    return best;
}

static mt_status put_ws(const spm_model *m, mt_byte_buf *out) {
    return m->escape_whitespaces ? mt_byte_buf_append(out, SPM_SPACE, 3)
                                 : mt_byte_buf_append(out, " ", 1);
}

/* NormalizePrefix: the normalised text of the character (or user-defined piece, or rule source)
 * at s[0, n) in *piece, *len; returns the bytes of s it stands for. */
static size_t norm_prefix(const spm_model *m, const char *s, size_t n, const char **piece, size_t *len) {
    size_t used = m->n_user_defined ? user_defined_at(m, s, n) : 0;
    *piece = s;
    *len = used;
    if (!used && m->n_trie && (used = spm_charsmap_match(m, s, n, piece)) > 0) *len = strlen(*piece);
    if (!used) {
        used = *len = spm_valid_char_len((const unsigned char *)s, n);
        if (!used) {
            *piece = "\xef\xbf\xbd"; /* U+FFFD for one byte of invalid UTF-8 */
            *len = 3;
            used = 1;
        }
    }
    return used;
}

static mt_status normalize(const spm_model *m, const char *text, size_t n, mt_byte_buf *out) {
    out->n_bytes = 0;
    size_t i = 0, len, used;
    const char *piece;
    while (m->remove_extra_whitespaces && i < n) { /* leading characters that normalise to " " */
        used = norm_prefix(m, text + i, n - i, &piece, &len);
        if (len != 1 || *piece != ' ') break;
        i += used;
    }
    if (i == n) return MT_OK;
    mt_status st = MT_OK;
    if (!m->whitespace_as_suffix && m->add_dummy_prefix) st = put_ws(m, out);
    int prev_space = m->remove_extra_whitespaces;
    while (st == MT_OK && i < n) {
        used = norm_prefix(m, text + i, n - i, &piece, &len);
        if (prev_space) {
            while (len && *piece == ' ') piece++, len--;
        }
        if (len) {
            for (size_t k = 0; k < len && st == MT_OK; k++) {
                st = piece[k] == ' ' && m->escape_whitespaces ? put_ws(m, out)
                                                               : mt_byte_buf_append(out, piece + k, 1);
            }
            prev_space = piece[len - 1] == ' ';
        }
        i += used;
        if (!m->remove_extra_whitespaces) prev_space = 0;
    }
    if (st == MT_OK && m->remove_extra_whitespaces) {
        const size_t w = m->escape_whitespaces ? 3 : 1;
        const char *ws = m->escape_whitespaces ? SPM_SPACE : " ";
        while (out->n_bytes >= w && memcmp(out->bytes + out->n_bytes - w, ws, w) == 0) out->n_bytes -= w;
    }
    if (st == MT_OK && m->whitespace_as_suffix && m->add_dummy_prefix) st = put_ws(m, out);
    return st;
}

/* ---- segmentation --------------------------------------------------------------------- */

static mt_status add_piece(spm_ctx *c, uint32_t start, uint32_t len, int32_t id) {
    mt_status st = grow_array((void **)&c->pieces, &c->n_pieces_cap, c->n_pieces + 1, sizeof *c->pieces);
    if (st == MT_OK) c->pieces[c->n_pieces++] = (spm_piece){start, len, id};
    return st;
}

/* Pair a before b: higher score first, then the leftmost. */
static int pair_before(const spm_pair *a, const spm_pair *b) {
    return a->score != b->score ? a->score > b->score : a->left < b->left;
}

static void heap_push(spm_ctx *c, spm_pair p) {
    size_t i = c->n_heap++;
    while (i > 0 && pair_before(&p, &c->heap[(i - 1) / 2])) {
        c->heap[i] = c->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    c->heap[i] = p;
}

static spm_pair heap_pop(spm_ctx *c) {
    spm_pair top = c->heap[0], last = c->heap[--c->n_heap];
    size_t i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= c->n_heap) break;
        if (k + 1 < c->n_heap && pair_before(&c->heap[k + 1], &c->heap[k])) k++;
        if (!pair_before(&c->heap[k], &last)) break;
        c->heap[i] = c->heap[k];
        i = k;
    }
    if (c->n_heap) c->heap[i] = last;
    return top;
}

/* The segmentation piece with text s[0, n), or -1. */
static int32_t segment_piece(const spm_model *m, const char *s, size_t n) {
    uint64_t h = SPM_HASH_SEED;
    for (size_t k = 0; k < n; k++) h = spm_hash_step(h, (unsigned char)s[k]);
    const spm_slot *e = spm_find(m, spm_hash_fix(h), s, n);
    return e ? e->id : -1;
}

static mt_status maybe_pair(spm_ctx *c, const char *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0 || c->sym[left].freeze || c->sym[right].freeze) return MT_OK;
    const uint32_t size = c->sym[left].len + c->sym[right].len;
    const int32_t id = segment_piece(c->m, s + c->sym[left].start, size);
    if (id < 0) return MT_OK;
    mt_status st = grow_array((void **)&c->heap, &c->n_heap_cap, c->n_heap + 1, sizeof *c->heap);
    if (st == MT_OK) heap_push(c, (spm_pair){c->m->score[id], left, right, size});
    return st;
}

static mt_status encode_bpe(spm_ctx *c, const char *s, size_t n) {
    const spm_model *m = c->m;
    mt_status st = grow_array((void **)&c->sym, &c->n_sym_cap, n, sizeof *c->sym);
    int32_t n_sym = 0;
    for (size_t pos = 0; st == MT_OK && pos < n; n_sym++) {
        size_t len = m->n_user_defined ? user_defined_at(m, s + pos, n - pos) : 0;
        const int freeze = len > 0;
        if (!len) len = spm_one_char_len((unsigned char)s[pos]);
        if (len > n - pos) len = n - pos;
        c->sym[n_sym] = (spm_sym){(uint32_t)pos, (uint32_t)len, n_sym - 1,
                                  pos + len < n ? n_sym + 1 : -1, freeze};
        pos += len;
    }
    c->n_heap = 0;
    for (int32_t i = 1; st == MT_OK && i < n_sym; i++) st = maybe_pair(c, s, i - 1, i);
    while (st == MT_OK && c->n_heap) {
        const spm_pair top = heap_pop(c);
        spm_sym *l = &c->sym[top.left], *r = &c->sym[top.right];
        if (!l->len || !r->len || l->len + r->len != top.size) continue;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) c->sym[r->next].prev = top.left;
        r->len = 0;
        st = maybe_pair(c, s, l->prev, top.left);
        if (st == MT_OK) st = maybe_pair(c, s, top.left, l->next);
    }
    for (int32_t i = 0; st == MT_OK && i >= 0 && n_sym; i = c->sym[i].next) {
        const spm_sym *y = &c->sym[i];
        st = add_piece(c, y->start, y->len, spm_piece_to_id(m, s + y->start, y->len));
    }
    return st;
}

static mt_status encode_unigram(spm_ctx *c, const char *s, size_t n) {
    const spm_model *m = c->m;
    mt_status st = grow_array((void **)&c->best, &c->n_best_cap, n + 1, sizeof *c->best);
    if (st != MT_OK) return st;
    spm_best *best = c->best;
    for (size_t i = 0; i <= n; i++) best[i] = (spm_best){0, -1, -1};
    const float unk_score = m->min_score - 10.0f;
    for (size_t at = 0; at < n;) {
        const float till = best[at].score;
        int single = 0;
        size_t mblen = spm_one_char_len((unsigned char)s[at]);
        if (mblen > n - at) mblen = n - at;
        uint64_t h = SPM_HASH_SEED;
        for (size_t end = at; end < n;) {
            h = spm_hash_step(h, (unsigned char)s[end++]);
            const spm_slot *e = spm_find(m, spm_hash_fix(h), s + at, end - at);
            if (!e || !e->is_prefix) break;
            if (e->id < 0) continue;
            const size_t length = end - at;
            const double score = m->type[e->id] == SPM_USER_DEFINED
                                     ? (double)((float)length * m->max_score) - 0.1
                                     : (double)m->score[e->id];
            const double cand = score + (double)till;
            if (best[end].start == -1 || cand > (double)best[end].score) {
                best[end] = (spm_best){(float)cand, (int32_t)at, e->id};
            }
            if (length == mblen) single = 1;
        }
        if (!single) {
            const float cand = unk_score + till;
            spm_best *t = &best[at + mblen];
            if (t->start == -1 || cand > t->score) *t = (spm_best){cand, (int32_t)at, m->unk_id};
        }
        at += mblen;
    }
    const size_t first = c->n_pieces;
    for (size_t end = n; st == MT_OK && end > 0; end = (size_t)best[end].start) {
        st = add_piece(c, (uint32_t)best[end].start, (uint32_t)(end - (size_t)best[end].start), best[end].id);
    }
    for (size_t a = first, b = c->n_pieces; a + 1 < b; a++, b--) { /* backtracked: reverse */
        spm_piece t = c->pieces[a];
        c->pieces[a] = c->pieces[b - 1];
        c->pieces[b - 1] = t;
    }
    return st;
}

/* SentencePieceProcessor's Encode of text[0, n) into out. */
static mt_status encode_ids(spm_ctx *c, const char *text, size_t n, mt_token_buf *out) {
    const spm_model *m = c->m;
    mt_status st = normalize(m, text, n, &c->norm);
    if (st != MT_OK || c->norm.n_bytes == 0) return st;
    c->n_pieces = 0;
    st = m->model_type == SPM_MODEL_BPE ? encode_bpe(c, c->norm.bytes, c->norm.n_bytes)
                                        : encode_unigram(c, c->norm.bytes, c->norm.n_bytes);
    int prev_unk = 0;
    for (size_t i = 0; st == MT_OK && i < c->n_pieces; i++) {
        const spm_piece *p = &c->pieces[i];
        const int unk = m->type[p->id] == SPM_UNKNOWN;
        if (unk && m->byte_fallback) {
            st = mt_token_buf_reserve(out, p->len);
            for (uint32_t k = 0; st == MT_OK && k < p->len; k++)
                out->ids[out->n_ids++] = m->byte_id[(unsigned char)c->norm.bytes[p->start + k]];
        } else if (!(unk && prev_unk)) {
            st = mt_token_buf_push(out, p->id);
        }
        prev_unk = unk;
    }
    return st;
}

/* ---- the mt_tokenizer interface ------------------------------------------------------- */

/* Where the next special token starts in s[0, n) (n when none); *which = its index, the first
 * in Megatron's order among those starting at the same place. */
static size_t next_special(const spm_ctx *c, const char *s, size_t n, int *which) {
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < c->n_special; k++) {
            const size_t len = strlen(c->special[k]);
            if (len <= n - i && s[i] == c->special[k][0] && memcmp(s + i, c->special[k], len) == 0) {
                *which = k;
                return i;
            }
        }
    }
    return n;
}

static mt_status spm_encode(const mt_tokenizer *tok, const char *text, size_t n_text_bytes,
                            mt_token_buf *out) {
    spm_ctx *c = tok->ctx;
    if (c->kind == KIND_LLAMA2) {
        mt_status st = mt_token_buf_push(out, c->m->bos_id);
        if (st != MT_OK) return st;
    }
    if (c->kind != KIND_SPM) return encode_ids(c, text, n_text_bytes, out);
    for (;;) {
        int k = -1;
        const size_t at = next_special(c, text, n_text_bytes, &k);
        mt_status st = encode_ids(c, text, at, out);
        if (st != MT_OK || k < 0) return st;
        st = mt_token_buf_push(out, c->special_id[k]);
        if (st != MT_OK) return st;
        const size_t skip = at + strlen(c->special[k]);
        text += skip;
        n_text_bytes -= skip;
    }
}

/* A run of <0xXX> pieces: the bytes, each that does not start a valid character as U+FFFD.
 * Unless `last`, stops before a character that may go on past the run; returns the bytes used. */
static size_t put_bytes(const unsigned char *b, size_t n, int last, mt_byte_buf *out, mt_status *st) {
    size_t i = 0;
    while (*st == MT_OK && i < n && (last || n - i >= 4)) {
        const size_t len = spm_valid_char_len(b + i, n - i);
        *st = len ? mt_byte_buf_append(out, b + i, len) : mt_byte_buf_append(out, "\xef\xbf\xbd", 3);
        i += len ? len : 1;
    }
    return i;
}

/* One piece's text: U+2581 -> ' ', the leading one of the first piece dropped (the dummy
 * prefix), as SentencePieceProcessor::Decode does. */
static mt_status put_piece(const spm_model *m, const char *p, size_t n, int *bos_ws, size_t n_out_start,
                           mt_byte_buf *out) {
    int seen = 0;
    if (*bos_ws && (m->add_dummy_prefix || m->remove_extra_whitespaces) && n >= 3 && !memcmp(p, SPM_SPACE, 3)) {
        p += 3;
        n -= 3;
        seen = !m->remove_extra_whitespaces;
    }
    mt_status st = MT_OK;
    for (size_t i = 0; st == MT_OK && i < n;) {
        const int ws = n - i >= 3 && !memcmp(p + i, SPM_SPACE, 3);
        st = ws ? mt_byte_buf_append(out, " ", 1) : mt_byte_buf_append(out, p + i, 1);
        i += ws ? 3 : 1;
    }
    if (seen || out->n_bytes > n_out_start) *bos_ws = 0;
    return st;
}

static mt_status spm_decode(const mt_tokenizer *tok, const int32_t *ids, int64_t n_ids, mt_byte_buf *out) {
    const spm_ctx *c = tok->ctx;
    const spm_model *m = c->m;
    const size_t start = out->n_bytes;
    unsigned char run[256];
    size_t n_run = 0;
    int bos_ws = 1;
    mt_status st = MT_OK;
    for (int64_t i = 0; st == MT_OK && i < n_ids; i++) {
        const int32_t id = ids[i];
        if (id < 0 || id >= tok->vocab_size) {
            return mt_errorf(MT_ERR_DATA, "SentencePiece tokenizer: cannot decode id %d at position %lld "
                             "(vocabulary is 0..%d)", id, (long long)i, tok->vocab_size - 1);
        }
        if (id < m->n_pieces && m->type[id] == SPM_BYTE) {
            for (int b = 0; b < 256; b++)
                if (m->byte_id[b] == id) run[n_run++] = (unsigned char)b;
            if (n_run == sizeof run) {
                const size_t used = put_bytes(run, n_run, 0, out, &st);
                memmove(run, run + used, n_run - used);
                n_run -= used;
            }
            continue;
        }
        if (n_run) put_bytes(run, n_run, 1, out, &st), n_run = 0;
        if (st != MT_OK) break;
        if (out->n_bytes > start) bos_ws = 0;
        if (id >= m->n_pieces) { /* a token Megatron's class added after the pieces */
            for (int k = 0; k < c->n_special; k++)
                if (c->special_id[k] == id) st = mt_byte_buf_append(out, c->special[k], strlen(c->special[k]));
        } else if (m->type[id] == SPM_UNKNOWN) {
            st = mt_byte_buf_append(out, m->unk_surface, strlen(m->unk_surface));
        } else if (m->type[id] != SPM_CONTROL) {
            st = put_piece(m, m->blob + m->off[id], m->off[id + 1] - m->off[id], &bos_ws, start, out);
        }
    }
    if (st == MT_OK && n_run) put_bytes(run, n_run, 1, out, &st);
    return st;
}

static void ctx_free(spm_ctx *c) {
    if (!c) return;
    spm_model_release(c->m);
    for (int k = 0; k < c->n_special; k++) free(c->special[k]);
    mt_byte_buf_free(&c->norm);
    free(c->sym);
    free(c->heap);
    free(c->best);
    free(c->pieces);
    free(c);
}

static void spm_free(mt_tokenizer *tok) {
    if (!tok) return;
    ctx_free(tok->ctx);
    free(tok);
}

static mt_status spm_clone(const mt_tokenizer *tok, mt_tokenizer **out);

static const mt_tokenizer_i k_spm_iface[3] = {
    MT_TOKENIZER_TABLE("SentencePieceTokenizer", spm_),
    MT_TOKENIZER_TABLE("GPTSentencePieceTokenizer", spm_),
    MT_TOKENIZER_TABLE("Llama2Tokenizer", spm_),
};

/* Megatron's _SentencePieceTokenizer._initalize: the special tokens and their ids (a piece's
 * id when the model has it, else the next id after the vocabulary). */
static mt_status add_specials(spm_ctx *c, int32_t *vocab) {
    const spm_model *m = c->m;
    const char *names[SPM_N_SPECIAL] = {
        "<CLS>", "<SEP>", "<EOD>", "<MASK>", m->pad_id >= 0 ? m->pad_piece : "<PAD>",
        m->bos_id >= 0 ? m->bos_piece : "<BOS>", m->eos_id >= 0 ? m->eos_piece : "<EOS>"};
    for (int k = 0; k < SPM_N_SPECIAL; k++) {
        int dup = 0;
        for (int j = 0; j < c->n_special; j++) dup |= !strcmp(c->special[j], names[k]);
        if (dup) continue;
        const size_t len = strlen(names[k]);
        uint64_t h = SPM_HASH_SEED;
        for (size_t i = 0; i < len; i++) h = spm_hash_step(h, (unsigned char)names[k][i]);
        const spm_slot *e = spm_find(m, spm_hash_fix(h), names[k], len);
        const int32_t have = e ? (e->id > e->reserved ? e->id : e->reserved) : -1;
        c->special[c->n_special] = malloc(len + 1);
        if (!c->special[c->n_special]) return mt_errorf(MT_ERR_OOM, "SentencePiece: out of memory");
        memcpy(c->special[c->n_special], names[k], len + 1);
        c->special_id[c->n_special++] = have >= 0 ? have : (*vocab)++;
    }
    return MT_OK;
}

static mt_status make(spm_model *m, int kind, mt_tokenizer **out) {
    *out = NULL;
    mt_tokenizer *tok = calloc(1, sizeof *tok);
    spm_ctx *c = calloc(1, sizeof *c);
    if (!tok || !c) {
        free(tok);
        free(c);
        spm_model_release(m);
        return mt_errorf(MT_ERR_OOM, "SentencePiece tokenizer: out of memory");
    }
    c->m = m;
    c->kind = kind;
    tok->iface = &k_spm_iface[kind];
    tok->ctx = c;
    tok->vocab_size = m->n_pieces;
    mt_status st = MT_OK;
    if (kind == KIND_SPM) {
        st = add_specials(c, &tok->vocab_size);
        tok->eod_id = c->special_id[2]; /* <EOD> */
    } else {
        tok->eod_id = m->eos_id;
        if (m->eos_id < 0 || (kind == KIND_LLAMA2 && m->bos_id < 0)) {
            st = mt_errorf(MT_ERR_DATA, "%s: %s needs the control pieces '%s' (bos) and '%s' (eos, "
                           "the end of document); the model has %s", m->path, tok->iface->name,
                           m->bos_piece, m->eos_piece, m->eos_id < 0 ? "no eos" : "no bos");
        }
    }
    if (st != MT_OK) {
        spm_free(tok);
        return st;
    }
    *out = tok;
    return MT_OK;
}

static mt_status spm_clone(const mt_tokenizer *tok, mt_tokenizer **out) {
    const spm_ctx *c = tok->ctx;
    atomic_fetch_add(&c->m->n_refs, 1);
    return make(c->m, c->kind, out);
}

static int kind_of(const char *name) {
    if (!strcmp(name, "SentencePieceTokenizer") || !strcmp(name, "spm")) return KIND_SPM;
    if (!strcmp(name, "GPTSentencePieceTokenizer") || !strcmp(name, "gptspm")) return KIND_GPT;
    if (!strcmp(name, "Llama2Tokenizer") || !strcmp(name, "llama2")) return KIND_LLAMA2;
    return -1;
}

int mt_tokenizer_spm_name(const char *name) { return kind_of(name) >= 0; }

/* bytes == NULL: read the file at path. */
static mt_status open_model(mt_tokenizer **out, const char *name, const void *bytes, size_t n_bytes,
                            const char *path) {
    *out = NULL;
    const int kind = kind_of(name);
    if (kind < 0) return mt_errorf(MT_ERR_CONFIG, "tokenizer '%s' is not a SentencePiece one", name);
    spm_model *m = NULL;
    mt_status st = bytes ? spm_model_parse(bytes, n_bytes, path, &m) : spm_model_load(path, &m);
    if (st != MT_OK) return st;
    return make(m, kind, out);
}

mt_status mt_tokenizer_spm_open(mt_tokenizer **out, const char *name, const char *model_path) {
    return open_model(out, name, NULL, 0, model_path);
}

mt_status mt_tokenizer_spm_open_bytes(mt_tokenizer **out, const char *name, const void *bytes, size_t n_bytes,
                                      const char *what) {
    return open_model(out, name, bytes ? bytes : "", n_bytes, what);
}
