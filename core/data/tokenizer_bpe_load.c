/* tokenizer_bpe_load.c — builds the read-only BPE model of tokenizer_bpe.c from GPT-2's
 * vocab.json + merges.txt or from a Hugging Face tokenizer.json, checking everything:
 * every vocabulary entry is a string -> non-negative integer, no token or id twice, the 256
 * byte symbols present, every merge names two tokens whose concatenation is a token, and
 * (tokenizer.json) only the byte-level BPE features we implement are switched on.
 * Rule kept: every complaint names the file and line (the JSON parser keeps line numbers),
 * and says what to do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_read.h"
#include "core/free_all.h"
#include "core/json_tree.h"
#include "core/data/tokenizer_bpe.h"
#include "core/data/tokenizer_bpe_internal.h"

#define MAX_VOCAB (1 << 24)

/* ---- model basics --------------------------------------------------------------------- */

static uint32_t str_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a: only used while loading and for ignore_merges */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int32_t bpe_model_find(const bpe_model *m, const char *s, size_t n_bytes) {
    uint32_t h = str_hash(s, n_bytes) & m->str_map_mask;
    for (;;) {
        int32_t id = m->str_map[h];
        if (id < 0) return -1;
        size_t len = m->str_off[id + 1] - m->str_off[id];
        if (len == n_bytes && memcmp(m->str_blob + m->str_off[id], s, n_bytes) == 0) return id;
        h = (h + 1) & m->str_map_mask;
    }
}

static void model_free(bpe_model *m) {
    if (!m) return;
    MT_FREE_ALL(m->str_blob, m->str_off, m->present, m->dec_blob, m->dec_off, m->str_map,
                m->merge_a, m->merge_b, m->merge_res, m->pair_keys, m->pair_ranks, m->added_blob,
                m->added_off, m->added_id, m->name, m);
}

void bpe_model_unref(bpe_model *m) {
    if (m && atomic_fetch_sub(&m->n_refs, 1) == 1) model_free(m);
}

static uint32_t pow2_at_least(size_t n) {
    uint32_t c = 16;
    while (c < n) c *= 2;
    return c;
}

/* ---- vocabulary ----------------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t n;
    int32_t id;
    int32_t line;
} vocab_entry;

/* Writes the bytes token string s stands for (GPT-2's byte decoder; characters outside the
 * 256 byte symbols stand for their own UTF-8) to out (at least n bytes); returns the count. */
static size_t decode_token_string(const char *s, size_t n, char *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = u[i];
        size_t l = 1;
        if (cp >= 0xc0 && cp < 0xe0 && i + 1 < n) {
            cp = ((cp & 0x1f) << 6) | (u[i + 1] & 0x3f);
            l = 2;
        } else if (cp >= 0xe0) {
            l = cp >= 0xf0 ? 4 : 3;
            if (i + l > n) l = n - i;
        }
        int b = l <= 2 ? bpe_cp_to_byte(cp) : -1;
        if (b >= 0) {
            out[k++] = (char)b;
        } else {
            memcpy(out + k, s + i, l);
            k += l;
        }
        i += l;
    }
    return k;
}

/* Fills the vocabulary tables from entries (ids checked unique, strings unique). */
static mt_status build_vocab(bpe_model *m, const vocab_entry *e, size_t n_entries,
                             const char *path) {
    mt_status st = MT_OK;
    int32_t *line_of = NULL;
    int32_t max_id = -1;
    size_t n_str_bytes = 0;
    for (size_t i = 0; i < n_entries; i++) {
        if (e[i].id > max_id) max_id = e[i].id;
        n_str_bytes += e[i].n;
    }
    m->n_vocab = max_id + 1;
    size_t nv = (size_t)m->n_vocab;
    m->str_off = calloc(nv + 1, sizeof *m->str_off);
    m->dec_off = calloc(nv + 1, sizeof *m->dec_off);
    m->present = calloc(nv ? nv : 1, 1);
    m->str_blob = malloc(n_str_bytes + 1);
    m->dec_blob = malloc(n_str_bytes + 1);
    line_of = calloc(nv ? nv : 1, sizeof *line_of);
    m->str_map_mask = pow2_at_least(2 * nv) - 1;
    m->str_map = malloc(((size_t)m->str_map_mask + 1) * sizeof *m->str_map);
    const char **by_id = calloc(nv ? nv : 1, sizeof *by_id);
    size_t *n_by_id = calloc(nv ? nv : 1, sizeof *n_by_id);
    if (!m->str_off || !m->dec_off || !m->present || !m->str_blob || !m->dec_blob || !line_of ||
        !m->str_map || !by_id || !n_by_id || n_str_bytes > UINT32_MAX / 2) {
        st = mt_errorf(MT_ERR_OOM, "%s: cannot hold a vocabulary of %zu tokens", path, n_entries);
        goto out;
    }
    for (size_t i = 0; i < n_entries; i++) {
        int32_t id = e[i].id;
        if (m->present[id]) {
            st = mt_errorf(MT_ERR_DATA,
                           "%s:%d: id %d is given to \"%.*s\" and, on line %d, to \"%.*s\"; "
                           "every id must be unique (is the file corrupt?)", path, e[i].line,
                           id, (int)(e[i].n > 40 ? 40 : e[i].n), e[i].s, line_of[id],
                           (int)(n_by_id[id] > 40 ? 40 : n_by_id[id]), by_id[id]);
            goto out;
        }
        m->present[id] = 1;
        by_id[id] = e[i].s;
        n_by_id[id] = e[i].n;
        line_of[id] = e[i].line;
    }
    /* Blobs in id order. */
    uint32_t so = 0, dof = 0;
    for (size_t id = 0; id < nv; id++) {
        m->str_off[id] = so;
        m->dec_off[id] = dof;
        if (!m->present[id]) continue;
        memcpy(m->str_blob + so, by_id[id], n_by_id[id]);
        so += (uint32_t)n_by_id[id];
        dof += (uint32_t)decode_token_string(by_id[id], n_by_id[id], m->dec_blob + dof);
    }
    m->str_off[nv] = so;
    m->dec_off[nv] = dof;
    memset(m->str_map, 0xff, ((size_t)m->str_map_mask + 1) * sizeof *m->str_map);
    for (size_t i = 0; i < n_entries; i++) {
        int32_t id = e[i].id;
        int32_t other = bpe_model_find(m, e[i].s, e[i].n);
        if (other >= 0) {
            st = mt_errorf(MT_ERR_DATA, "%s:%d: token \"%.*s\" appears twice (also on line %d)",
                           path, e[i].line, (int)(e[i].n > 40 ? 40 : e[i].n), e[i].s,
                           line_of[other]);
            goto out;
        }
        uint32_t h = str_hash(e[i].s, e[i].n) & m->str_map_mask;
        while (m->str_map[h] >= 0) h = (h + 1) & m->str_map_mask;
        m->str_map[h] = id;
    }
    for (int b = 0; b < 256; b++) {
        char sym[3];
        uint32_t cp = bpe_byte_to_cp(b);
        size_t n = 1;
        if (cp < 0x80) {
            sym[0] = (char)cp;
        } else {
            sym[0] = (char)(0xc0 | (cp >> 6));
            sym[1] = (char)(0x80 | (cp & 0x3f));
            n = 2;
        }
        m->byte_id[b] = bpe_model_find(m, sym, n);
        if (m->byte_id[b] < 0) {
            st = mt_errorf(MT_ERR_DATA,
                           "%s: the vocabulary lacks \"%.*s\", the symbol of byte 0x%02x: not a "
                           "byte-level BPE vocabulary (GPT-2 style vocabularies hold all 256)",
                           path, (int)n, sym, b);
            goto out;
        }
    }
out:
    free(line_of);
    free(by_id);
    free(n_by_id);
    return st;
}

/* Reads the string -> id object of a vocabulary (vocab.json, or tokenizer.json model.vocab). */
static mt_status vocab_from_json(bpe_model *m, const mt_json_node *obj, const char *path,
                                 const char *what) {
    vocab_entry *e = malloc((obj->n_items ? obj->n_items : 1) * sizeof *e);
    if (!e) return mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
    for (size_t i = 0; i < obj->n_items; i++) {
        const mt_json_node *v = &obj->items[i];
        if (v->type != MT_JSON_NUMBER || !v->is_integer || v->integer < 0 ||
            v->integer >= MAX_VOCAB) {
            mt_status st = mt_errorf(MT_ERR_DATA,
                                     "%s:%d: %s entry \"%.*s\" holds %s%s; expected a token id, "
                                     "an integer in [0, %d)", path, v->line, what,
                                     (int)(v->n_key_bytes > 40 ? 40 : v->n_key_bytes), v->key,
                                     mt_json_type_name(v->type),
                                     v->type == MT_JSON_NUMBER ? " out of range" : "",
                                     MAX_VOCAB);
            free(e);
            return st;
        }
        e[i].s = v->key;
        e[i].n = v->n_key_bytes;
        e[i].id = (int32_t)v->integer;
        e[i].line = v->line;
    }
    if (obj->n_items == 0) {
        free(e);
        return mt_errorf(MT_ERR_DATA, "%s:%d: the %s is empty", path, obj->line, what);
    }
    mt_status st = build_vocab(m, e, obj->n_items, path);
    free(e);
    return st;
}

/* ---- merges --------------------------------------------------------------------------- */

static mt_status merges_reserve(bpe_model *m, size_t n_merges, const char *path) {
    m->merge_a = malloc((n_merges ? n_merges : 1) * sizeof *m->merge_a);
    m->merge_b = malloc((n_merges ? n_merges : 1) * sizeof *m->merge_b);
    m->merge_res = malloc((n_merges ? n_merges : 1) * sizeof *m->merge_res);
    m->pair_mask = pow2_at_least(2 * n_merges) - 1;
    m->pair_keys = malloc(((size_t)m->pair_mask + 1) * sizeof *m->pair_keys);
    m->pair_ranks = malloc(((size_t)m->pair_mask + 1) * sizeof *m->pair_ranks);
    if (!m->merge_a || !m->merge_b || !m->merge_res || !m->pair_keys || !m->pair_ranks) {
        return mt_errorf(MT_ERR_OOM, "%s: cannot hold %zu merges", path, n_merges);
    }
    memset(m->pair_keys, 0xff, ((size_t)m->pair_mask + 1) * sizeof *m->pair_keys);
    return MT_OK;
}

/* Adds merge a + b as the next rank. A repeated pair takes the later rank, as Python's
 * dict(zip(merges, range(n))) in GPT-2 and Hugging Face's map both do. */
static mt_status merge_add(bpe_model *m, const char *a, size_t na, const char *b, size_t nb,
                           const char *path, int64_t line) {
    int32_t ia = bpe_model_find(m, a, na), ib = bpe_model_find(m, b, nb);
    if (ia < 0 || ib < 0) {
        const char *miss = ia < 0 ? a : b;
        size_t nm = ia < 0 ? na : nb;
        return mt_errorf(MT_ERR_DATA,
                         "%s:%lld: merge \"%.*s %.*s\": \"%.*s\" is not in the vocabulary "
                         "(do the merges and the vocabulary belong together?)", path,
                         (long long)line, (int)na, a, (int)nb, b, (int)nm, miss);
    }
    char buf[512];
    char *ab = na + nb <= sizeof buf ? buf : malloc(na + nb);
    if (!ab) return mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
    memcpy(ab, a, na);
    memcpy(ab + na, b, nb);
    int32_t res = bpe_model_find(m, ab, na + nb);
    if (ab != buf) free(ab);
    if (res < 0) {
        return mt_errorf(MT_ERR_DATA,
                         "%s:%lld: merge \"%.*s %.*s\": the merged token \"%.*s%.*s\" is not in "
                         "the vocabulary (do the merges and the vocabulary belong together?)",
                         path, (long long)line, (int)na, a, (int)nb, b, (int)na, a, (int)nb, b);
    }
    int32_t r = m->n_merges++;
    m->merge_a[r] = ia;
    m->merge_b[r] = ib;
    m->merge_res[r] = res;
    uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
    uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & m->pair_mask;
    while (m->pair_keys[h] != UINT64_MAX && m->pair_keys[h] != key) h = (h + 1) & m->pair_mask;
    m->pair_keys[h] = key;
    m->pair_ranks[h] = r;
    return MT_OK;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* merges.txt / vocab.bpe: the first line is skipped when it starts with "#version" (later
 * lines starting with '#' are merges: "# #" is one); blank lines are ignored; every other
 * line is two symbols separated by blanks. */
static mt_status merges_from_file(bpe_model *m, const char *path) {
    char *text = NULL;
    size_t n = 0;
    mt_status st = mt_read_whole_file(path, &text, &n);
    if (st != MT_OK) return st;
    size_t n_lines = 1;
    for (size_t i = 0; i < n; i++) n_lines += text[i] == '\n';
    st = merges_reserve(m, n_lines, path);
    int64_t line = 0;
    for (size_t i = 0; i < n && st == MT_OK;) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        line++;
        const char *s = text + i;
        size_t len = e - i;
        i = e + 1;
        if (line == 1 && len >= 8 && memcmp(s, "#version", 8) == 0) continue;
        const char *part[3];
        size_t n_part[3];
        int n_parts = 0;
        for (size_t k = 0; k < len;) {
            while (k < len && is_blank(s[k])) k++;
            if (k >= len) break;
            size_t b = k;
            while (k < len && !is_blank(s[k])) k++;
            if (n_parts < 3) {
                part[n_parts] = s + b;
                n_part[n_parts] = k - b;
            }
            n_parts++;
        }
        if (n_parts == 0) continue;
        if (n_parts != 2) {
            st = mt_errorf(MT_ERR_DATA,
                           "%s:%lld: expected a merge: two symbols separated by a space, found "
                           "%d field%s (GPT-2's merges file is vocab.bpe / merges.txt; is this "
                           "the right file?)", path, (long long)line, n_parts,
                           n_parts == 1 ? "" : "s");
            break;
        }
        st = merge_add(m, part[0], n_part[0], part[1], n_part[1], path, line);
    }
    free(text);
    return st;
}

/* ---- GPT-2 files ---------------------------------------------------------------------- */

/* The end of a load: the JSON document freed, then the model wrapped as a tokenizer, or freed
 * after an error. */
static mt_status load_done(mt_tokenizer **out, bpe_model *m, mt_json_doc *doc, mt_status st) {
    mt_json_doc_free(doc);
    if (st != MT_OK) {
        model_free(m);
        return st;
    }
    return bpe_tokenizer_new(out, m);
}

static bpe_model *model_new(const char *name) {
    bpe_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->name = strdup(name);
    if (!m->name) {
        free(m);
        return NULL;
    }
    atomic_init(&m->n_refs, 1);
    m->pretok = BPE_PRETOK_GPT2;
    m->eod = -1;
    for (int b = 0; b <= 256; b++) m->added_first[b] = 0;
    for (int b = 0; b < 256; b++) m->byte_cp[b] = (uint16_t)bpe_byte_to_cp(b);
    return m;
}

mt_status mt_tokenizer_gpt2_open(mt_tokenizer **out, const char *vocab_path,
                                 const char *merges_path) {
    mt_status st = MT_OK;
    mt_json_doc doc;
    memset(&doc, 0, sizeof doc);
    *out = NULL;
    bpe_model *m = model_new("gpt2bpe");
    if (!m) return mt_errorf(MT_ERR_OOM, "gpt2 tokenizer: out of memory");
    MT_CHECK(mt_json_doc_load(&doc, vocab_path));
    if (doc.root->type != MT_JSON_OBJECT) {
        st = mt_errorf(MT_ERR_DATA,
                       "%s:%d: expected a JSON object mapping tokens to ids (GPT-2's "
                       "encoder.json / vocab.json), found %s", vocab_path, doc.root->line,
                       mt_json_type_name(doc.root->type));
        goto out;
    }
    const mt_json_node *model = mt_json_get(doc.root, "model");
    if (model && model->type == MT_JSON_OBJECT) {
        st = mt_errorf(MT_ERR_DATA,
                       "%s:%d: this is a Hugging Face tokenizer.json, not a vocab.json: give it "
                       "with --tokenizer-json (tokenizer hf)", vocab_path, model->line);
        goto out;
    }
    MT_CHECK(vocab_from_json(m, doc.root, vocab_path, "vocabulary"));
    MT_CHECK(merges_from_file(m, merges_path));
    m->eod = bpe_model_find(m, "<|endoftext|>", 13);
    if (m->eod < 0) {
        st = mt_errorf(MT_ERR_DATA,
                       "%s: no \"<|endoftext|>\" token, which GPT-2 uses as end of document "
                       "(Megatron's GPT2BPETokenizer needs it)", vocab_path);
        goto out;
    }
out:
    return load_done(out, m, &doc, st);
}

/* ---- Hugging Face tokenizer.json ------------------------------------------------------ */

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define LLAMA3_PATTERN                                                                       \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"                 \
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static int json_is(const mt_json_node *n, const char *s) {
    return n && n->type == MT_JSON_STRING && strcmp(n->str, s) == 0;
}

static int json_bool(const mt_json_node *n, int dflt) {
    if (!n || n->type == MT_JSON_NULL) return dflt;
    return n->type == MT_JSON_TRUE;
}

static mt_status unsupported(const char *path, const mt_json_node *n, const char *what) {
    return mt_errorf(MT_ERR_UNSUPPORTED,
                     "%s:%d: %s; only byte-level BPE tokenizers (GPT-2 style: ByteLevel "
                     "pre-tokenizer and decoder, no normalizer) are supported", path,
                     n ? n->line : 1, what);
}

/* The pre-tokenizers we implement: ByteLevel alone (GPT-2's regex when use_regex, else none),
 * or Sequence [Split(pattern, Isolated, not inverted), ByteLevel(use_regex false)] with the
 * pattern exactly GPT-2's or Llama-3's. Any other pattern is refused: we do not run arbitrary
 * regexes, each supported one is hand-written (tokenizer_bpe.c, tokenizer_llama3.c). */
static mt_status hf_pre_tokenizer(bpe_model *m, const mt_json_node *pt, const char *path) {
    char what[400];
    if (!pt || pt->type == MT_JSON_NULL) {
        return unsupported(path, pt, "pre_tokenizer is null (no ByteLevel byte mapping)");
    }
    const mt_json_node *type = mt_json_get(pt, "type");
    if (json_is(type, "ByteLevel")) {
        m->add_prefix_space = json_bool(mt_json_get(pt, "add_prefix_space"), 0);
        m->pretok = json_bool(mt_json_get(pt, "use_regex"), 1) ? BPE_PRETOK_GPT2 : BPE_PRETOK_NONE;
        return MT_OK;
    }
    if (json_is(type, "Sequence")) {
        const mt_json_node *list = mt_json_get(pt, "pretokenizers");
        if (list && list->type == MT_JSON_ARRAY && list->n_items == 2) {
            const mt_json_node *split = &list->items[0], *bl = &list->items[1];
            const mt_json_node *pat = mt_json_get(mt_json_get(split, "pattern"), "Regex");
            const mt_json_node *behavior = mt_json_get(split, "behavior");
            int kind = json_is(pat, GPT2_PATTERN)     ? BPE_PRETOK_GPT2
                       : json_is(pat, LLAMA3_PATTERN) ? BPE_PRETOK_LLAMA3
                                                      : BPE_PRETOK_NONE;
            if (json_is(mt_json_get(split, "type"), "Split") && kind != BPE_PRETOK_NONE &&
                (!behavior || json_is(behavior, "Isolated")) &&
                !json_bool(mt_json_get(split, "invert"), 0) &&
                json_is(mt_json_get(bl, "type"), "ByteLevel") &&
                !json_bool(mt_json_get(bl, "use_regex"), 1)) {
                m->add_prefix_space = json_bool(mt_json_get(bl, "add_prefix_space"), 0);
                m->pretok = kind;
                return MT_OK;
            }
            if (pat && pat->type == MT_JSON_STRING && kind == BPE_PRETOK_NONE) {
                snprintf(what, sizeof what, "pre_tokenizer splits with the pattern \"%.200s\", "
                         "which is neither GPT-2's nor Llama-3's (the only two implemented)",
                         pat->str);
                return unsupported(path, pat, what);
            }
        }
        return unsupported(path, pt, "pre_tokenizer is a Sequence other than [Split(GPT-2's or "
                           "Llama-3's pattern, behavior Isolated), ByteLevel(use_regex false)]");
    }
    snprintf(what, sizeof what, "pre_tokenizer type \"%.60s\"",
             type && type->type == MT_JSON_STRING ? type->str : "?");
    return unsupported(path, pt, what);
}

static int cmp_added(const void *pa, const void *pb, void *ctx) {
    const bpe_model *m = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    unsigned char ca = (unsigned char)m->added_blob[m->added_off[a]];
    unsigned char cb = (unsigned char)m->added_blob[m->added_off[b]];
    if (ca != cb) return ca < cb ? -1 : 1;
    uint32_t la = m->added_off[a + 1] - m->added_off[a], lb = m->added_off[b + 1] - m->added_off[b];
    if (la != lb) return la > lb ? -1 : 1; /* longest first */
    return a < b ? -1 : (a > b);
}

/* added_tokens: [{id, content, ...}]: matched in the text before pre-tokenization. */
static mt_status hf_added(bpe_model *m, const mt_json_node *list, const char *path) {
    mt_status st = MT_OK;
    if (!list || list->type == MT_JSON_NULL) return MT_OK;
    if (list->type != MT_JSON_ARRAY) {
        return mt_errorf(MT_ERR_DATA, "%s:%d: added_tokens is %s, expected an array", path,
                         list->line, mt_json_type_name(list->type));
    }
    size_t n = list->n_items, n_bytes = 0;
    int32_t max_id = m->n_vocab - 1;
    for (size_t i = 0; i < n; i++) {
        const mt_json_node *t = &list->items[i];
        const mt_json_node *id = mt_json_get(t, "id"), *content = mt_json_get(t, "content");
        if (!id || id->type != MT_JSON_NUMBER || !id->is_integer || id->integer < 0 ||
            id->integer >= MAX_VOCAB || !content || content->type != MT_JSON_STRING ||
            content->n_str_bytes == 0) {
            return mt_errorf(MT_ERR_DATA,
                             "%s:%d: added_tokens entry %zu needs an integer \"id\" in [0, %d) "
                             "and a non-empty string \"content\"", path, t->line, i, MAX_VOCAB);
        }
        n_bytes += content->n_str_bytes;
        if (id->integer > max_id) max_id = (int32_t)id->integer;
    }
    if (n == 0) return MT_OK;
    /* Ids past the vocabulary: grow the id tables (present = 0 until set below). */
    if (max_id >= m->n_vocab) {
        size_t nv = (size_t)max_id + 1;
        uint32_t *so = realloc(m->str_off, (nv + 1) * sizeof *so);
        if (so) m->str_off = so;
        uint32_t *dof = realloc(m->dec_off, (nv + 1) * sizeof *dof);
        if (dof) m->dec_off = dof;
        uint8_t *pr = realloc(m->present, nv);
        if (pr) m->present = pr;
        if (!so || !dof || !pr) return mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
        for (size_t id = (size_t)m->n_vocab + 1; id <= nv; id++) {
            m->str_off[id] = m->str_off[m->n_vocab];
            m->dec_off[id] = m->dec_off[m->n_vocab];
        }
        memset(m->present + m->n_vocab, 0, nv - (size_t)m->n_vocab);
        m->n_vocab = (int32_t)nv;
    }
    m->added_blob = malloc(n_bytes + 1);
    m->added_off = malloc((n + 1) * sizeof *m->added_off);
    m->added_id = malloc(n * sizeof *m->added_id);
    int32_t *order = malloc(n * sizeof *order);
    /* decoded bytes of added ids are appended to dec_blob */
    size_t n_dec = m->dec_off[m->n_vocab];
    char *dec = realloc(m->dec_blob, n_dec + n_bytes + 1);
    if (dec) m->dec_blob = dec;
    if (!m->added_blob || !m->added_off || !m->added_id || !order || !dec) {
        free(order);
        return mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
    }
    uint32_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const mt_json_node *content = mt_json_get(&list->items[i], "content");
        m->added_off[i] = off;
        memcpy(m->added_blob + off, content->str, content->n_str_bytes);
        off += (uint32_t)content->n_str_bytes;
        order[i] = (int32_t)i;
    }
    m->added_off[n] = off;
    m->n_added = (int32_t)n;
    /* An added token's id decodes to its content (through the byte map, as HF's ByteLevel
     * decoder does). Ids the vocabulary already has keep their vocabulary entry. */
    for (size_t i = 0; i < n; i++) {
        int32_t id = (int32_t)mt_json_get(&list->items[i], "id")->integer;
        if (m->present[id]) continue;
        /* Rebuild the offsets of the id range: added ids are rare, so a shift is fine. */
        uint32_t len = (uint32_t)decode_token_string(m->added_blob + m->added_off[i],
                                                     m->added_off[i + 1] - m->added_off[i],
                                                     m->dec_blob + n_dec);
        /* Move the decoded bytes to the position of id: ids after it shift by len. */
        uint32_t at = m->dec_off[id];
        memmove(m->dec_blob + at + len, m->dec_blob + at, n_dec - at);
        decode_token_string(m->added_blob + m->added_off[i],
                            m->added_off[i + 1] - m->added_off[i], m->dec_blob + at);
        for (int32_t k = id + 1; k <= m->n_vocab; k++) m->dec_off[k] += len;
        n_dec += len;
        m->present[id] = 1;
    }
    /* Sort by first byte, longest first, and index by first byte. */
    qsort_r(order, n, sizeof *order, cmp_added, m);
    char *blob = malloc(n_bytes + 1);
    uint32_t *offs = malloc((n + 1) * sizeof *offs);
    if (!blob || !offs) {
        free(blob);
        free(offs);
        free(order);
        return mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
    }
    off = 0;
    int32_t *ids = malloc(n * sizeof *ids);
    if (!ids) {
        st = mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
    } else {
        for (size_t k = 0; k < n; k++) {
            int32_t i = order[k];
            uint32_t len = m->added_off[i + 1] - m->added_off[i];
            offs[k] = off;
            memcpy(blob + off, m->added_blob + m->added_off[i], len);
            off += len;
            ids[k] = (int32_t)mt_json_get(&list->items[i], "id")->integer;
        }
        offs[n] = off;
        free(m->added_blob);
        free(m->added_off);
        free(m->added_id);
        m->added_blob = blob;
        m->added_off = offs;
        m->added_id = ids;
        blob = NULL;
        offs = NULL;
        int32_t k = 0;
        for (int b = 0; b < 256; b++) {
            m->added_first[b] = k;
            while (k < m->n_added && (unsigned char)m->added_blob[m->added_off[k]] == b) k++;
        }
        m->added_first[256] = k;
    }
    free(blob);
    free(offs);
    free(order);
    return st;
}

mt_status mt_tokenizer_hf_open(mt_tokenizer **out, const char *path) {
    mt_status st = MT_OK;
    mt_json_doc doc;
    memset(&doc, 0, sizeof doc);
    *out = NULL;
    char what[300];
    bpe_model *m = model_new("hf");
    if (!m) return mt_errorf(MT_ERR_OOM, "hf tokenizer: out of memory");
    MT_CHECK(mt_json_doc_load(&doc, path));
    const mt_json_node *model = mt_json_get(doc.root, "model");
    if (!model || model->type != MT_JSON_OBJECT) {
        st = mt_errorf(MT_ERR_DATA,
                       "%s:%d: no \"model\" object: not a Hugging Face tokenizer.json (for "
                       "GPT-2's vocab.json + merges.txt use --vocab and --merges)", path,
                       doc.root->line);
        goto out;
    }
    const mt_json_node *type = mt_json_get(model, "type");
    if (type && !json_is(type, "BPE")) {
        snprintf(what, sizeof what, "model.type is \"%.60s\", not \"BPE\"",
                 type->type == MT_JSON_STRING ? type->str : mt_json_type_name(type->type));
        st = unsupported(path, type, what);
        goto out;
    }
    if (json_bool(mt_json_get(model, "byte_fallback"), 0)) {
        st = unsupported(path, mt_json_get(model, "byte_fallback"),
                         "model.byte_fallback is set (a SentencePiece-style BPE)");
        goto out;
    }
    const char *affix[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const mt_json_node *a = mt_json_get(model, affix[k]);
        if (a && !(a->type == MT_JSON_NULL || (a->type == MT_JSON_STRING && !a->n_str_bytes))) {
            snprintf(what, sizeof what, "model.%s is set", affix[k]);
            st = unsupported(path, a, what);
            goto out;
        }
    }
    const mt_json_node *norm = mt_json_get(doc.root, "normalizer");
    if (norm && norm->type != MT_JSON_NULL) {
        const mt_json_node *nt = mt_json_get(norm, "type");
        snprintf(what, sizeof what, "a normalizer (%.60s) is set",
                 nt && nt->type == MT_JSON_STRING ? nt->str : "?");
        st = unsupported(path, norm, what);
        goto out;
    }
    MT_CHECK(hf_pre_tokenizer(m, mt_json_get(doc.root, "pre_tokenizer"), path));
    const mt_json_node *dec = mt_json_get(doc.root, "decoder");
    if (dec && dec->type != MT_JSON_NULL && !json_is(mt_json_get(dec, "type"), "ByteLevel")) {
        st = unsupported(path, dec, "the decoder is not ByteLevel");
        goto out;
    }
    m->ignore_merges = json_bool(mt_json_get(model, "ignore_merges"), 0);
    const mt_json_node *vocab = mt_json_get(model, "vocab");
    if (!vocab || vocab->type != MT_JSON_OBJECT) {
        st = mt_errorf(MT_ERR_DATA, "%s:%d: model.vocab is %s, expected an object of token -> "
                       "id", path, vocab ? vocab->line : model->line,
                       vocab ? mt_json_type_name(vocab->type) : "missing");
        goto out;
    }
    MT_CHECK(vocab_from_json(m, vocab, path, "model.vocab"));
    const mt_json_node *merges = mt_json_get(model, "merges");
    if (!merges || merges->type != MT_JSON_ARRAY) {
        st = mt_errorf(MT_ERR_DATA, "%s:%d: model.merges is %s, expected an array", path,
                       merges ? merges->line : model->line,
                       merges ? mt_json_type_name(merges->type) : "missing");
        goto out;
    }
    MT_CHECK(merges_reserve(m, merges->n_items, path));
    for (size_t i = 0; i < merges->n_items; i++) {
        const mt_json_node *g = &merges->items[i];
        if (g->type == MT_JSON_STRING) {
            /* "a b": exactly one space (tokens of byte-level BPE hold no spaces) */
            const char *sp = memchr(g->str, ' ', g->n_str_bytes);
            if (!sp || sp == g->str || sp + 1 == g->str + g->n_str_bytes ||
                memchr(sp + 1, ' ', g->n_str_bytes - (size_t)(sp + 1 - g->str))) {
                st = mt_errorf(MT_ERR_DATA, "%s:%d: model.merges[%zu] \"%.60s\": expected two "
                               "tokens separated by one space", path, g->line, i, g->str);
                goto out;
            }
            MT_CHECK(merge_add(m, g->str, (size_t)(sp - g->str), sp + 1,
                               g->n_str_bytes - (size_t)(sp + 1 - g->str), path, g->line));
        } else if (g->type == MT_JSON_ARRAY && g->n_items == 2 &&
                   g->items[0].type == MT_JSON_STRING && g->items[1].type == MT_JSON_STRING) {
            MT_CHECK(merge_add(m, g->items[0].str, g->items[0].n_str_bytes, g->items[1].str,
                               g->items[1].n_str_bytes, path, g->line));
        } else {
            st = mt_errorf(MT_ERR_DATA, "%s:%d: model.merges[%zu] is %s; expected \"a b\" or "
                           "[\"a\", \"b\"]", path, g->line, i, mt_json_type_name(g->type));
            goto out;
        }
    }
    MT_CHECK(hf_added(m, mt_json_get(doc.root, "added_tokens"), path));
    static const char *const eod_names[] = {"<|endoftext|>", "<|end_of_text|>", "</s>",
                                            "<|im_end|>", "<eos>"};
    for (size_t k = 0; k < sizeof eod_names / sizeof eod_names[0] && m->eod < 0; k++) {
        size_t len = strlen(eod_names[k]);
        for (int32_t a = 0; a < m->n_added && m->eod < 0; a++) {
            if (m->added_off[a + 1] - m->added_off[a] == len &&
                memcmp(m->added_blob + m->added_off[a], eod_names[k], len) == 0) {
                m->eod = m->added_id[a];
            }
        }
        if (m->eod < 0) m->eod = bpe_model_find(m, eod_names[k], len);
    }
    if (m->eod < 0) {
        st = mt_errorf(MT_ERR_DATA, "%s: no end-of-document token (looked for <|endoftext|>, "
                       "<|end_of_text|>, </s>, <|im_end|>, <eos>)", path);
        goto out;
    }
out:
    return load_done(out, m, &doc, st);
}
