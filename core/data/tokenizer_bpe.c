/* tokenizer_bpe.c — byte-level BPE encode/decode (the files are read by
 * tokenizer_bpe_load.c; Llama-3's pre-tokenizer is tokenizer_llama3.c): the hand-written GPT-2
 * pre-tokenizer, ignore_merges, a per-object word cache, and
 * two merge loops that both reproduce GPT-2's bpe() exactly — a simple one for short words
 * and a heap for long ones (lowest rank first; all occurrences of that pair merged left to
 * right before any pair the merges create is considered).
 * Rule kept: no allocation per word once the scratch buffers have grown; the cache is
 * bounded (cleared when full), so memory stays flat whatever the input. */
#include "core/data/tokenizer_bpe.h"
#include "core/free_all.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/tokenizer_bpe_internal.h"
#include "core/data/unicode_tables.h"

#define CACHE_SLOTS (1u << 16)       /* power of two */
#define CACHE_MAX_ENTRIES (1u << 15) /* cleared beyond this (load <= 1/2) */
#define CACHE_ARENA_BYTES (4u << 20)
#define CACHE_MAX_KEY 64             /* longer words are not cached */
#define DEFAULT_SMALL_WORD 48

/* ---- byte <-> unicode (GPT-2's bytes_to_unicode) --------------------------------------- */

uint32_t bpe_byte_to_cp(int b) {
    /* Printable bytes stand for themselves; the other 68 get 256, 257, ... in byte order. */
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        return (uint32_t)b;
    }
    int n = 0;
    for (int c = 0; c < b; c++) {
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
    }
    return 256u + (uint32_t)n;
}

static int g_cp_to_byte[512];
static pthread_once_t g_cp_once = PTHREAD_ONCE_INIT;

static void fill_cp_to_byte(void) {
    for (int i = 0; i < 512; i++) g_cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) g_cp_to_byte[bpe_byte_to_cp(b)] = b;
}

int bpe_cp_to_byte(uint32_t cp) {
    pthread_once(&g_cp_once, fill_cp_to_byte);
    return cp < 512 ? g_cp_to_byte[cp] : -1;
}

/* ---- pre-tokenizer -------------------------------------------------------------------- */

/* Class of the character at s[i] and its length; invalid UTF-8 is one "other" byte. */
static inline int char_class(const unsigned char *s, size_t n, size_t i, size_t *len,
                             const uint8_t *bmp) {
    unsigned c = s[i];
    if (c < 0x80) {
        *len = 1;
        return bmp[c];
    }
    uint32_t cp;
    size_t l;
    if (c >= 0xc2 && c <= 0xdf) { l = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { l = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { l = 4; cp = c & 0x07; }
    else { *len = 1; return MT_UCLASS_OTHER; }
    if (n - i < l) { *len = 1; return MT_UCLASS_OTHER; }
    for (size_t k = 1; k < l; k++) {
        unsigned d = s[i + k];
        if ((d & 0xc0) != 0x80) { *len = 1; return MT_UCLASS_OTHER; }
        cp = (cp << 6) | (d & 0x3f);
    }
    if ((l == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (l == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
        *len = 1;
        return MT_UCLASS_OTHER;
    }
    *len = l;
    return cp < 0x10000 ? bmp[cp] : mt_unicode_class(cp);
}

/* End of the pre-token that starts at s[i] (i < n): the first alternative of
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * that matches at i, as the regex engine's leftmost-first alternation picks it. */
static size_t pretoken_end(const unsigned char *s, size_t n, size_t i, const uint8_t *bmp) {
    unsigned c = s[i];
    if (c == '\'' && i + 1 < n) {
        unsigned d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < n) {
            unsigned e = s[i + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) {
                return i + 3;
            }
        }
    }
    size_t len;
    int k = char_class(s, n, i, &len, bmp);
    size_t j = i + len;
    if (c == ' ' && j < n) {
        size_t len2;
        int k2 = char_class(s, n, j, &len2, bmp);
        if (k2 != MT_UCLASS_SPACE) { /* " ?X+" with the optional space taken */
            k = k2;
            j += len2;
        }
    }
    if (k != MT_UCLASS_SPACE) {
        /* a run of one class: letters, numbers, or everything else that is not space */
        if (k == MT_UCLASS_LETTER) {
            while (j < n && (unsigned)((s[j] | 0x20) - 'a') < 26u) j++; /* ASCII */
        }
        while (j < n) {
            size_t l;
            if (char_class(s, n, j, &l, bmp) != k) break;
            j += l;
        }
        return j;
    }
    /* Whitespace: \s+(?!\S) takes the run but its last character when a non-space follows;
     * a single whitespace character before a non-space falls to \s+. */
    size_t last = i, n_chars = 1;
    while (j < n) {
        size_t l;
        if (char_class(s, n, j, &l, bmp) != MT_UCLASS_SPACE) break;
        last = j;
        j += l;
        n_chars++;
    }
    if (j == n || n_chars == 1) return j;
    return last;
}

/* The pre-token ends of text[0, n_text_bytes) under a pattern's end function (-1 past n_max_ends). */
static int64_t pretokenize(size_t (*end_of)(const unsigned char *s, size_t n, size_t i, const uint8_t *bmp),
                           const char *text, size_t n_text_bytes, int64_t *ends, int64_t n_max_ends) {
    const unsigned char *s = (const unsigned char *)text;
    const uint8_t *bmp = mt_unicode_bmp_classes();
    int64_t k = 0;
    for (size_t i = 0; i < n_text_bytes;) {
        size_t e = end_of(s, n_text_bytes, i, bmp);
        if (k >= n_max_ends) return -1;
        ends[k++] = (int64_t)e;
        i = e;
    }
    return k;
}

int64_t mt_bpe_pretokenize(const char *text, size_t n_text_bytes, int64_t *ends,
                           int64_t n_max_ends) {
    return pretokenize(pretoken_end, text, n_text_bytes, ends, n_max_ends);
}

int64_t mt_llama3_pretokenize(const char *text, size_t n_text_bytes, int64_t *ends,
                              int64_t n_max_ends) {
    return pretokenize(bpe_llama3_pretoken_end, text, n_text_bytes, ends, n_max_ends);
}

/* ---- per-object state ----------------------------------------------------------------- */

typedef struct {
    bpe_model *m;
    const uint8_t *bmp;
    /* word cache: slots hold 1 + the byte offset of an entry in the arena (0 = empty);
     * entry = u32 hash, u16 n_key, u16 n_ids, i32 ids[n_ids], key bytes (4-byte aligned) */
    uint32_t *cache_slots;
    uint8_t *cache_arena;
    size_t n_cache_arena_used;
    uint32_t n_cache_entries;
    int cache_on;
    int64_t n_hits, n_misses;
    int small_word_limit;
    /* scratch, grown as needed */
    int32_t *sym, *rank, *prev, *next;
    uint64_t *heap;
    int32_t *batch;
    size_t n_scratch;         /* capacity of each array above, in symbols */
    char *text;               /* ignore_merges lookup key */
    size_t n_text_capacity;
    unsigned char *seg;       /* add_prefix_space copy of a segment */
    size_t n_seg_capacity;
} bpe_ctx;

static uint64_t hash_bytes(const unsigned char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    if (n) {
        uint64_t v = 0;
        memcpy(&v, s, n);
        h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    }
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

static void cache_clear(bpe_ctx *x) {
    if (x->cache_slots) memset(x->cache_slots, 0, CACHE_SLOTS * sizeof *x->cache_slots);
    x->n_cache_arena_used = 0;
    x->n_cache_entries = 0;
}

/* Appends the cached ids of word w to out; 0 on a miss. */
static int cache_get(bpe_ctx *x, const unsigned char *w, size_t n, uint32_t h,
                     mt_token_buf *out) {
    uint32_t slot = h & (CACHE_SLOTS - 1);
    for (;;) {
        uint32_t v = x->cache_slots[slot];
        if (!v) return 0;
        const uint8_t *e = x->cache_arena + (v - 1);
        uint32_t eh;
        uint16_t nk, ni;
        memcpy(&eh, e, 4);
        memcpy(&nk, e + 4, 2);
        memcpy(&ni, e + 6, 2);
        if (eh == h && nk == n && memcmp(e + 8 + 4 * (size_t)ni, w, n) == 0) {
            memcpy(out->ids + out->n_ids, e + 8, 4 * (size_t)ni);
            out->n_ids += ni;
            return 1;
        }
        slot = (slot + 1) & (CACHE_SLOTS - 1);
    }
}

static void cache_put(bpe_ctx *x, const unsigned char *w, size_t n, uint32_t h,
                      const int32_t *ids, size_t n_ids) {
    size_t need = (8 + 4 * n_ids + n + 3) & ~(size_t)3;
    if (x->n_cache_entries >= CACHE_MAX_ENTRIES ||
        x->n_cache_arena_used + need > CACHE_ARENA_BYTES) {
        cache_clear(x);
    }
    uint8_t *e = x->cache_arena + x->n_cache_arena_used;
    uint16_t nk = (uint16_t)n, ni = (uint16_t)n_ids;
    memcpy(e, &h, 4);
    memcpy(e + 4, &nk, 2);
    memcpy(e + 6, &ni, 2);
    memcpy(e + 8, ids, 4 * n_ids);
    memcpy(e + 8 + 4 * n_ids, w, n);
    uint32_t slot = h & (CACHE_SLOTS - 1);
    while (x->cache_slots[slot]) slot = (slot + 1) & (CACHE_SLOTS - 1);
    x->cache_slots[slot] = (uint32_t)x->n_cache_arena_used + 1;
    x->n_cache_arena_used += need;
    x->n_cache_entries++;
}

static mt_status grow_scratch(bpe_ctx *x, size_t n) {
    if (n <= x->n_scratch) return MT_OK;
    size_t cap = x->n_scratch ? x->n_scratch : 256;
    while (cap < n) cap *= 2;
    int32_t *a = realloc(x->sym, cap * 4);
    if (a) x->sym = a;
    int32_t *b = realloc(x->rank, cap * 4);
    if (b) x->rank = b;
    int32_t *c = realloc(x->prev, cap * 4);
    if (c) x->prev = c;
    int32_t *d = realloc(x->next, cap * 4);
    if (d) x->next = d;
    int32_t *f = realloc(x->batch, cap * 4);
    if (f) x->batch = f;
    uint64_t *e = realloc(x->heap, cap * 3 * 8); /* n - 1 pairs, then <= 2 per merge */
    if (e) x->heap = e;
    if (!a || !b || !c || !d || !e || !f) {
        return mt_errorf(MT_ERR_OOM, "BPE: cannot hold a word of %zu bytes", n);
    }
    x->n_scratch = cap;
    return MT_OK;
}

/* ---- merge loops ---------------------------------------------------------------------- */

/* GPT-2's loop, literally: find the lowest-ranked pair, rewrite the word merging each of its
 * occurrences left to right, repeat. O(n^2) lookups: for short words. Returns the length. */
static int32_t merge_small(const bpe_model *m, int32_t *sym, int32_t n, int32_t *rank) {
    while (n > 1) {
        int32_t best = BPE_NO_RANK;
        for (int32_t i = 0; i + 1 < n; i++) {
            rank[i] = bpe_pair_rank(m, sym[i], sym[i + 1]);
            if (rank[i] < best) best = rank[i];
        }
        if (best == BPE_NO_RANK) break;
        int32_t res = m->merge_res[best], w = 0;
        for (int32_t i = 0; i < n; w++) {
            if (i + 1 < n && rank[i] == best) {
                sym[w] = res;
                i += 2;
            } else {
                sym[w] = sym[i];
                i++;
            }
        }
        n = w;
    }
    return n;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = v;
    return top;
}

/* The same result in O(n log n): symbols in a linked list (a merge keeps the left position),
 * a heap of (rank, position) entries, validated when popped. All entries of the lowest rank
 * are taken as one batch and applied in position order: that is GPT-2's left-to-right pass,
 * and pairs the batch creates wait for the next round as they do in GPT-2. */
static int32_t merge_heap(const bpe_model *m, bpe_ctx *x, int32_t n) {
    int32_t *sym = x->sym, *prev = x->prev, *next = x->next, *batch = x->batch;
    uint64_t *heap = x->heap;
    size_t n_heap = 0;
    for (int32_t i = 0; i < n; i++) {
        prev[i] = i - 1;
        next[i] = i + 1 < n ? i + 1 : -1;
    }
    for (int32_t i = 0; i + 1 < n; i++) {
        int32_t r = bpe_pair_rank(m, sym[i], sym[i + 1]);
        if (r != BPE_NO_RANK) heap_push(heap, &n_heap, ((uint64_t)r << 32) | (uint32_t)i);
    }
    while (n_heap > 0) {
        int32_t r = (int32_t)(heap[0] >> 32), n_batch = 0;
        while (n_heap > 0 && (int32_t)(heap[0] >> 32) == r) {
            batch[n_batch++] = (int32_t)(uint32_t)heap_pop(heap, &n_heap);
        }
        int32_t a = m->merge_a[r], b = m->merge_b[r], res = m->merge_res[r];
        for (int32_t k = 0; k < n_batch; k++) {
            int32_t p = batch[k];
            if (k > 0 && p == batch[k - 1]) continue; /* duplicate entry */
            int32_t q = next[p];
            if (sym[p] != a || q < 0 || sym[q] != b) continue; /* stale */
            sym[p] = res;
            sym[q] = -1;
            next[p] = next[q];
            if (next[q] >= 0) prev[next[q]] = p;
            if (prev[p] >= 0) {
                int32_t r2 = bpe_pair_rank(m, sym[prev[p]], res);
                if (r2 != BPE_NO_RANK) {
                    heap_push(heap, &n_heap, ((uint64_t)r2 << 32) | (uint32_t)prev[p]);
                }
            }
            if (next[p] >= 0) {
                int32_t r2 = bpe_pair_rank(m, res, sym[next[p]]);
                if (r2 != BPE_NO_RANK) heap_push(heap, &n_heap, ((uint64_t)r2 << 32) | (uint32_t)p);
            }
        }
    }
    int32_t w = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) sym[w++] = sym[i];
    return w;
}

/* ---- encode --------------------------------------------------------------------------- */

/* Appends the ids of one pre-token (out has room for n more ids). */
static mt_status encode_word(bpe_ctx *x, const unsigned char *w, size_t n, mt_token_buf *out) {
    const bpe_model *m = x->m;
    if (n == 1) {
        out->ids[out->n_ids++] = m->byte_id[w[0]];
        return MT_OK;
    }
    uint32_t h = 0;
    int cacheable = x->cache_on && n <= CACHE_MAX_KEY;
    if (cacheable) {
        h = (uint32_t)hash_bytes(w, n);
        if (cache_get(x, w, n, h, out)) {
            x->n_hits++;
            return MT_OK;
        }
        x->n_misses++;
    }
    if (m->ignore_merges) {
        /* tokenizer.json ignore_merges: a word that is itself a token is taken whole (after
         * the cache, which then holds that one id: a hit costs less than this lookup). */
        if (4 * n + 1 > x->n_text_capacity) {
            char *t = realloc(x->text, 4 * n + 1);
            if (!t) return mt_errorf(MT_ERR_OOM, "BPE: out of memory");
            x->text = t;
            x->n_text_capacity = 4 * n + 1;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t cp = m->byte_cp[w[i]];
            if (cp < 0x80) {
                x->text[k++] = (char)cp;
            } else {
                x->text[k++] = (char)(0xc0 | (cp >> 6));
                x->text[k++] = (char)(0x80 | (cp & 0x3f));
            }
        }
        int32_t id = bpe_model_find(m, x->text, k);
        if (id >= 0) {
            out->ids[out->n_ids++] = id;
            if (cacheable) cache_put(x, w, n, h, &id, 1);
            return MT_OK;
        }
    }
    mt_status st = grow_scratch(x, n);
    if (st != MT_OK) return st;
    if (n > INT32_MAX) return mt_errorf(MT_ERR_DATA, "BPE: a word of %zu bytes is too long", n);
    for (size_t i = 0; i < n; i++) x->sym[i] = m->byte_id[w[i]];
    int32_t n_sym = (int32_t)n <= x->small_word_limit ? merge_small(m, x->sym, (int32_t)n, x->rank)
                                                      : merge_heap(m, x, (int32_t)n);
    memcpy(out->ids + out->n_ids, x->sym, (size_t)n_sym * 4);
    out->n_ids += n_sym;
    if (cacheable) cache_put(x, w, n, h, x->sym, (size_t)n_sym);
    return MT_OK;
}

/* Encodes text with no added tokens in it. */
static mt_status encode_segment(bpe_ctx *x, const unsigned char *s, size_t n,
                                mt_token_buf *out) {
    const bpe_model *m = x->m;
    if (n == 0) return MT_OK;
    if (m->add_prefix_space && s[0] != ' ') {
        /* ByteLevel add_prefix_space: the segment is encoded as " " + text. */
        if (n + 1 > x->n_seg_capacity) {
            unsigned char *t = realloc(x->seg, n + 1);
            if (!t) return mt_errorf(MT_ERR_OOM, "BPE: cannot hold %zu bytes", n + 1);
            x->seg = t;
            x->n_seg_capacity = n + 1;
        }
        x->seg[0] = ' ';
        memcpy(x->seg + 1, s, n);
        s = x->seg;
        n++;
    }
    mt_status st = mt_token_buf_reserve(out, (int64_t)n);
    if (st != MT_OK) return st;
    for (size_t i = 0; i < n;) {
        size_t e = m->pretok == BPE_PRETOK_LLAMA3 ? bpe_llama3_pretoken_end(s, n, i, x->bmp)
                   : m->pretok == BPE_PRETOK_GPT2 ? pretoken_end(s, n, i, x->bmp)
                                                  : n;
        st = encode_word(x, s + i, e - i, out);
        if (st != MT_OK) return st;
        i = e;
    }
    return MT_OK;
}

/* Longest added token starting at s[i], or -1. */
static int32_t added_at(const bpe_model *m, const unsigned char *s, size_t n, size_t i) {
    for (int32_t k = m->added_first[s[i]]; k < m->added_first[s[i] + 1]; k++) {
        size_t len = m->added_off[k + 1] - m->added_off[k];
        if (len <= n - i && memcmp(m->added_blob + m->added_off[k], s + i, len) == 0) return k;
    }
    return -1;
}

static mt_status bpe_encode(const mt_tokenizer *tok, const char *text, size_t n_text_bytes,
                            mt_token_buf *out) {
    bpe_ctx *x = tok->ctx;
    const bpe_model *m = x->m;
    const unsigned char *s = (const unsigned char *)text;
    if (m->n_added == 0) return encode_segment(x, s, n_text_bytes, out);
    size_t seg = 0;
    for (size_t i = 0; i < n_text_bytes;) {
        int32_t k = m->added_first[s[i]] < m->added_first[s[i] + 1] ? added_at(m, s, n_text_bytes, i)
                                                                     : -1;
        if (k < 0) {
            i++;
            continue;
        }
        mt_status st = encode_segment(x, s + seg, i - seg, out);
        if (st == MT_OK) st = mt_token_buf_push(out, m->added_id[k]);
        if (st != MT_OK) return st;
        i += m->added_off[k + 1] - m->added_off[k];
        seg = i;
    }
    return encode_segment(x, s + seg, n_text_bytes - seg, out);
}

/* ---- decode, lifecycle ---------------------------------------------------------------- */

static mt_status bpe_decode(const mt_tokenizer *tok, const int32_t *ids, int64_t n_ids,
                            mt_byte_buf *out) {
    const bpe_model *m = ((const bpe_ctx *)tok->ctx)->m;
    for (int64_t i = 0; i < n_ids; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= m->n_vocab || !m->present[id]) {
            return mt_errorf(MT_ERR_DATA,
                             "%s tokenizer: cannot decode id %d at position %lld (not in the "
                             "vocabulary of %d ids)", m->name, id, (long long)i, m->n_vocab);
        }
        mt_status st = mt_byte_buf_append(out, m->dec_blob + m->dec_off[id],
                                          m->dec_off[id + 1] - m->dec_off[id]);
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

static void bpe_free(mt_tokenizer *tok) {
    if (!tok) return;
    bpe_ctx *x = tok->ctx;
    if (x) {
        bpe_model_unref(x->m);
        MT_FREE_ALL(x->cache_slots, x->cache_arena, x->sym, x->rank, x->prev, x->next, x->heap,
                    x->batch, x->text, x->seg, x);
    }
    free(tok);
}

static mt_status bpe_clone(const mt_tokenizer *tok, mt_tokenizer **out);

static const mt_tokenizer_i k_bpe_iface = MT_TOKENIZER_TABLE("gpt2bpe", bpe_);

mt_status bpe_tokenizer_new(mt_tokenizer **out, bpe_model *m) {
    *out = NULL;
    mt_tokenizer *tok = calloc(1, sizeof *tok);
    bpe_ctx *x = calloc(1, sizeof *x);
    if (x) {
        x->cache_slots = calloc(CACHE_SLOTS, sizeof *x->cache_slots);
        x->cache_arena = malloc(CACHE_ARENA_BYTES);
    }
    if (!tok || !x || !x->cache_slots || !x->cache_arena) {
        if (x) {
            free(x->cache_slots);
            free(x->cache_arena);
        }
        free(x);
        free(tok);
        bpe_model_unref(m);
        return mt_errorf(MT_ERR_OOM, "BPE tokenizer: out of memory");
    }
    x->m = m;
    x->bmp = mt_unicode_bmp_classes();
    x->cache_on = 1;
    x->small_word_limit = DEFAULT_SMALL_WORD;
    tok->iface = &k_bpe_iface;
    tok->vocab_size = m->n_vocab;
    tok->eod_id = m->eod;
    tok->ctx = x;
    *out = tok;
    return MT_OK;
}

static mt_status bpe_clone(const mt_tokenizer *tok, mt_tokenizer **out) {
    bpe_ctx *x = tok->ctx;
    atomic_fetch_add(&x->m->n_refs, 1);
    mt_status st = bpe_tokenizer_new(out, x->m);
    if (st == MT_OK) {
        bpe_ctx *y = (*out)->ctx;
        y->cache_on = x->cache_on;
        y->small_word_limit = x->small_word_limit;
    }
    return st;
}

void mt_bpe_set_small_word_limit(mt_tokenizer *tok, int n_symbols) {
    if (tok && tok->iface == &k_bpe_iface) ((bpe_ctx *)tok->ctx)->small_word_limit = n_symbols;
}

int32_t mt_bpe_token_id(const mt_tokenizer *tok, const char *token, int *unk_is_eod) {
    if (!tok || tok->iface != &k_bpe_iface) return -1;
    const bpe_model *m = ((const bpe_ctx *)tok->ctx)->m;
    *unk_is_eod = !strcmp(m->name, "gpt2bpe");
    return bpe_model_find(m, token, strlen(token));
}

void mt_bpe_set_cache(mt_tokenizer *tok, int enabled) {
    if (tok && tok->iface == &k_bpe_iface) {
        bpe_ctx *x = tok->ctx;
        x->cache_on = enabled != 0;
        cache_clear(x);
    }
}

void mt_bpe_cache_stats(const mt_tokenizer *tok, int64_t *n_hits, int64_t *n_misses) {
    *n_hits = *n_misses = 0;
    if (tok && tok->iface == &k_bpe_iface) {
        const bpe_ctx *x = tok->ctx;
        *n_hits = x->n_hits;
        *n_misses = x->n_misses;
    }
}
