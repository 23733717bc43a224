/* tokenizer_spm_load.c — reads a SentencePiece .model file (a ModelProto protocol buffer) into
 * the read-only spm_model of tokenizer_spm_internal.h, checking what SentencePiece's own loader
 * checks (non-empty pieces, none twice, one unknown piece, all 256 <0xXX> pieces under byte
 * fallback), reading the normalisation rules' precompiled character map when there is one
 * (tokenizer_spm_charsmap.c: nmt_nfkc and the other built-in rules; identity has none), and
 * refusing, by name, what is not implemented here: a denormaliser, the WORD and CHAR model
 * types, UNUSED pieces (a vocabulary restriction).
 * Fields read (sentencepiece_model.proto): ModelProto 1 pieces {1 piece, 2 score, 3 type},
 * 2 trainer_spec {3 model_type, 24 treat_whitespace_as_suffix, 35 byte_fallback,
 * 44 unk_surface, 46..48 bos/eos/pad_piece}, 3 normalizer_spec {2 precompiled_charsmap,
 * 3 add_dummy_prefix, 4 remove_extra_whitespaces, 5 escape_whitespaces},
 * 5 denormalizer_spec {2 precompiled_charsmap}; every other field is skipped.
 * Rule kept: every complaint names the file and says what to do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_read.h"
#include "core/free_all.h"
#include "core/data/protobuf_wire.h"
#include "core/data/tokenizer_spm_internal.h"

#define SPM_MAX_PIECES (1 << 24)

typedef struct {
    const uint8_t *p;
    size_t n;
} span;

/* What the file says, before the model is built. */
typedef struct {
    span *text;
    float *score;
    uint8_t *type;
    int32_t n, cap;
    int model_type, byte_fallback, ws_suffix;
    int add_dummy_prefix, remove_extra, escape_ws;
    span charsmap, denorm_charsmap;
    span unk_surface, bos, eos, pad;
} spm_raw;

static mt_status grow(spm_raw *w, const char *path) {
    if (w->n < w->cap) return MT_OK;
    if (w->n >= SPM_MAX_PIECES) {
        return mt_errorf(MT_ERR_DATA, "%s: more than %d pieces: not a SentencePiece model this "
                         "reader takes", path, SPM_MAX_PIECES);
    }
    int32_t cap = w->cap ? w->cap * 2 : 1024;
    span *t = realloc(w->text, (size_t)cap * sizeof *t);
    if (t) w->text = t;
    float *s = realloc(w->score, (size_t)cap * sizeof *s);
    if (s) w->score = s;
    uint8_t *y = realloc(w->type, (size_t)cap);
    if (y) w->type = y;
    if (!t || !s || !y) return mt_errorf(MT_ERR_OOM, "%s: out of memory for %d pieces", path, cap);
    w->cap = cap;
    return MT_OK;
}

static mt_status read_piece(mt_pb_reader *r, spm_raw *w) {
    mt_pb_reader sub;
    mt_status st = mt_pb_sub(r, &sub);
    if (st == MT_OK) st = grow(w, r->what);
    if (st != MT_OK) return st;
    span *t = &w->text[w->n];
    t->p = NULL;
    t->n = 0;
    w->score[w->n] = 0;
    w->type[w->n] = SPM_NORMAL;
    while (st == MT_OK && mt_pb_more(&sub)) {
        uint32_t f;
        int wire;
        uint64_t v;
        uint32_t bits;
        st = mt_pb_tag(&sub, &f, &wire);
        if (st != MT_OK) break;
        if (f == 1) {
            st = mt_pb_expect(&sub, wire, MT_PB_LEN, "SentencePiece.piece", f);
            if (st == MT_OK) st = mt_pb_bytes(&sub, &t->p, &t->n);
        } else if (f == 2) {
            st = mt_pb_expect(&sub, wire, MT_PB_FIXED32, "SentencePiece.score", f);
            if (st == MT_OK) st = mt_pb_fixed32(&sub, &bits);
            if (st == MT_OK) memcpy(&w->score[w->n], &bits, sizeof bits);
        } else if (f == 3) {
            st = mt_pb_expect(&sub, wire, MT_PB_VARINT, "SentencePiece.type", f);
            if (st == MT_OK) st = mt_pb_varint(&sub, &v);
            if (st == MT_OK && (v < SPM_NORMAL || v > SPM_BYTE)) {
                st = mt_errorf(MT_ERR_DATA, "%s: piece %d has type %llu, which SentencePiece does "
                               "not define (1..6)", r->what, w->n, (unsigned long long)v);
            }
            if (st == MT_OK) w->type[w->n] = (uint8_t)v;
        } else {
            st = mt_pb_skip(&sub, wire);
        }
    }
    if (st == MT_OK) w->n++;
    return st;
}

/* A varint (bool / enum) or string field of a spec message into *iv / *sv when f is wanted. */
static mt_status spec_field(mt_pb_reader *sub, uint32_t f, int wire, const char *name, int *iv,
                            span *sv) {
    uint64_t v;
    mt_status st = mt_pb_expect(sub, wire, iv ? MT_PB_VARINT : MT_PB_LEN, name, f);
    if (st != MT_OK) return st;
    if (sv) return mt_pb_bytes(sub, &sv->p, &sv->n);
    st = mt_pb_varint(sub, &v);
    if (st == MT_OK) *iv = v > 0x7fffffff ? 0x7fffffff : (int)v;
    return st;
}

/* The fields of the embedded message at r, each through one(). */
typedef mt_status (*field_fn)(mt_pb_reader *sub, uint32_t f, int wire, spm_raw *w);
static mt_status each_field(mt_pb_reader *r, spm_raw *w, field_fn one) {
    mt_pb_reader sub;
    mt_status st = mt_pb_sub(r, &sub);
    while (st == MT_OK && mt_pb_more(&sub)) {
        uint32_t f;
        int wire;
        st = mt_pb_tag(&sub, &f, &wire);
        if (st == MT_OK) st = one(&sub, f, wire, w);
    }
    return st;
}

static mt_status trainer_field(mt_pb_reader *sub, uint32_t f, int wire, spm_raw *w) {
    switch (f) {
    case 3: return spec_field(sub, f, wire, "TrainerSpec.model_type", &w->model_type, NULL);
    case 24: return spec_field(sub, f, wire, "TrainerSpec.treat_whitespace_as_suffix", &w->ws_suffix, NULL);
    case 35: return spec_field(sub, f, wire, "TrainerSpec.byte_fallback", &w->byte_fallback, NULL);
    case 44: return spec_field(sub, f, wire, "TrainerSpec.unk_surface", NULL, &w->unk_surface);
    case 46: return spec_field(sub, f, wire, "TrainerSpec.bos_piece", NULL, &w->bos);
    case 47: return spec_field(sub, f, wire, "TrainerSpec.eos_piece", NULL, &w->eos);
    case 48: return spec_field(sub, f, wire, "TrainerSpec.pad_piece", NULL, &w->pad);
    default: return mt_pb_skip(sub, wire);
    }
}

static mt_status normalizer_field(mt_pb_reader *sub, uint32_t f, int wire, spm_raw *w) {
    switch (f) {
    case 2: return spec_field(sub, f, wire, "NormalizerSpec.precompiled_charsmap", NULL, &w->charsmap);
    case 3: return spec_field(sub, f, wire, "NormalizerSpec.add_dummy_prefix", &w->add_dummy_prefix, NULL);
    case 4: return spec_field(sub, f, wire, "NormalizerSpec.remove_extra_whitespaces", &w->remove_extra, NULL);
    case 5: return spec_field(sub, f, wire, "NormalizerSpec.escape_whitespaces", &w->escape_ws, NULL);
    default: return mt_pb_skip(sub, wire);
    }
}

static mt_status denormalizer_field(mt_pb_reader *sub, uint32_t f, int wire, spm_raw *w) {
    if (f == 2) return spec_field(sub, f, wire, "denormalizer_spec.precompiled_charsmap", NULL, &w->denorm_charsmap);
    return mt_pb_skip(sub, wire);
}

static mt_status parse_model(const uint8_t *bytes, size_t n_bytes, const char *path, spm_raw *w) {
    mt_pb_reader r;
    mt_pb_init(&r, bytes, n_bytes, path);
    w->model_type = SPM_MODEL_UNIGRAM;
    w->add_dummy_prefix = w->remove_extra = w->escape_ws = 1;
    mt_status st = MT_OK;
    while (st == MT_OK && mt_pb_more(&r)) {
        uint32_t f;
        int wire;
        st = mt_pb_tag(&r, &f, &wire);
        if (st != MT_OK) break;
        if (f >= 1 && f <= 5 && f != 4) {
            st = mt_pb_expect(&r, wire, MT_PB_LEN, f == 1 ? "ModelProto.pieces" : f == 2
                              ? "ModelProto.trainer_spec" : "ModelProto.normalizer_spec", f);
            if (st != MT_OK) break;
        }
        if (f == 1) st = read_piece(&r, w);
        else if (f == 2) st = each_field(&r, w, trainer_field);
        else if (f == 3) st = each_field(&r, w, normalizer_field);
        else if (f == 5) st = each_field(&r, w, denormalizer_field);
        else st = mt_pb_skip(&r, wire);
    }
    return st;
}

/* ---- the built model ------------------------------------------------------------------ */

const spm_slot *spm_find(const spm_model *m, uint64_t hash, const char *s, size_t n) {
    for (uint32_t h = (uint32_t)hash & m->slot_mask;; h = (h + 1) & m->slot_mask) {
        const spm_slot *e = &m->slots[h];
        if (!e->hash) return NULL;
        if (e->hash == hash && e->len == n && memcmp(m->blob + e->off, s, n) == 0) return e;
    }
}

int32_t spm_piece_to_id(const spm_model *m, const char *s, size_t n) {
    uint64_t h = SPM_HASH_SEED;
    for (size_t i = 0; i < n; i++) h = spm_hash_step(h, (unsigned char)s[i]);
    const spm_slot *e = spm_find(m, spm_hash_fix(h), s, n);
    if (e && e->reserved >= 0) return e->reserved;
    if (e && e->id >= 0) return e->id;
    return m->unk_id;
}

size_t spm_valid_char_len(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    uint32_t cp;
    if (n >= 2 && (s[0] & 0xe0) == 0xc0) {
        cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
        return (s[1] & 0xc0) == 0x80 && cp >= 0x80 ? 2 : 0;
    }
    if (n >= 3 && (s[0] & 0xf0) == 0xe0) {
        cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
        return (s[1] & 0xc0) == 0x80 && (s[2] & 0xc0) == 0x80 && cp >= 0x800 &&
               (cp < 0xd800 || cp >= 0xe000) ? 3 : 0;
    }
    if (n >= 4 && (s[0] & 0xf8) == 0xf0) {
        cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
             (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
        return (s[1] & 0xc0) == 0x80 && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 &&
               cp >= 0x10000 && cp <= 0x10ffff ? 4 : 0;
    }
    return 0;
}

/* The slot for blob[off, off + len) with this hash, made empty-valued when new. */
static spm_slot *slot_for(spm_model *m, uint64_t hash, uint32_t off, uint32_t len) {
    for (uint32_t h = (uint32_t)hash & m->slot_mask;; h = (h + 1) & m->slot_mask) {
        spm_slot *e = &m->slots[h];
        if (!e->hash) {
            *e = (spm_slot){.hash = hash, .off = off, .len = len, .id = -1, .reserved = -1};
            return e;
        }
        if (e->hash == hash && e->len == len && memcmp(m->blob + e->off, m->blob + off, len) == 0)
            return e;
    }
}

static int is_segment_piece(int type) { return type == SPM_NORMAL || type == SPM_USER_DEFINED; }

/* "<0xXX>" (upper-case hex, as SentencePiece writes it) -> 0..255, else -1. */
static int piece_byte(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    const char *a = memchr(hex, s[3], 16), *b = memchr(hex, s[4], 16);
    return a && b && s[3] && s[4] ? (int)((a - hex) * 16 + (b - hex)) : -1;
}

/* The table of pieces and prefixes, the byte pieces, the unknown piece. */
static mt_status build_table(spm_model *m) {
    const char *path = m->path;
    size_t n_keys = 0;
    for (int32_t i = 0; i < m->n_pieces; i++) n_keys += is_segment_piece(m->type[i]) ? m->off[i + 1] - m->off[i] : 1;
    uint32_t cap = 64;
    while (cap < 2 * n_keys) cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return mt_errorf(MT_ERR_OOM, "%s: out of memory for the piece table", path);
    m->slot_mask = cap - 1;
    m->unk_id = -1;
    for (int b = 0; b < 256; b++) m->byte_id[b] = -1;
    for (int32_t i = 0; i < m->n_pieces; i++) {
        const uint32_t off = m->off[i], len = m->off[i + 1] - off;
        const char *s = m->blob + off;
        const int t = m->type[i];
        uint64_t h = SPM_HASH_SEED;
        spm_slot *e = NULL;
        for (uint32_t k = 0; k < len; k++) {
            h = spm_hash_step(h, (unsigned char)s[k]);
            if (is_segment_piece(t)) {
                e = slot_for(m, spm_hash_fix(h), off, k + 1);
                e->is_prefix = 1;
            }
        }
        if (!is_segment_piece(t)) e = slot_for(m, spm_hash_fix(h), off, len);
        int32_t *slot_id = is_segment_piece(t) ? &e->id : &e->reserved;
        if (*slot_id >= 0) {
            return mt_errorf(MT_ERR_DATA, "%s: piece %d '%.*s' is already defined (piece %d): a "
                             "corrupt SentencePiece model", path, i, (int)len, s, *slot_id);
        }
        *slot_id = i;
        if (t == SPM_NORMAL) {
            if (m->score[i] < m->min_score) m->min_score = m->score[i];
            if (m->score[i] > m->max_score) m->max_score = m->score[i];
        } else if (t == SPM_USER_DEFINED) {
            m->n_user_defined++;
        } else if (t == SPM_UNKNOWN) {
            if (m->unk_id >= 0) {
                return mt_errorf(MT_ERR_DATA, "%s: pieces %d and %d are both of type UNKNOWN: a "
                                 "SentencePiece model has one", path, m->unk_id, i);
            }
            m->unk_id = i;
        } else if (t == SPM_BYTE) {
            const int b = piece_byte(s, len);
            if (!m->byte_fallback) {
                return mt_errorf(MT_ERR_DATA, "%s: byte piece %d '%.*s' is found although "
                                 "byte_fallback is false: a corrupt SentencePiece model", path, i,
                                 (int)len, s);
            }
            if (b < 0) {
                return mt_errorf(MT_ERR_DATA, "%s: byte piece %d '%.*s' is not of the form <0xXX>",
                                 path, i, (int)len, s);
            }
            m->byte_id[b] = i;
        } else if (t == SPM_UNUSED) {
            return mt_errorf(MT_ERR_UNSUPPORTED, "%s: piece %d '%.*s' is UNUSED (a vocabulary "
                             "restriction, SetVocabulary): not implemented here; save the model "
                             "without the restriction", path, i, (int)len, s);
        }
    }
    if (m->unk_id < 0) return mt_errorf(MT_ERR_DATA, "%s: no piece of type UNKNOWN: a SentencePiece model needs its unk piece", path);
    for (int b = 0; m->byte_fallback && b < 256; b++) {
        if (m->byte_id[b] < 0) {
            return mt_errorf(MT_ERR_DATA, "%s: byte_fallback is true but there is no piece <0x%02X>: "
                             "a SentencePiece model with byte fallback has all 256", path, b);
        }
    }
    return MT_OK;
}

static char *span_dup(span s, const char *fallback) {
    const char *p = s.p ? (const char *)s.p : fallback;
    const size_t n = s.p ? s.n : strlen(fallback);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = 0;
    }
    return d;
}

/* SentencePieceProcessor's bos_id() and friends: the piece of that name when it is CONTROL. */
static int32_t control_id(const spm_model *m, const char *name) {
    const int32_t id = spm_piece_to_id(m, name, strlen(name));
    return m->type[id] == SPM_CONTROL ? id : -1;
}

/* What is not implemented, refused by name. */
static mt_status check_supported(const spm_raw *w, const char *path) {
    if (w->model_type != SPM_MODEL_UNIGRAM && w->model_type != SPM_MODEL_BPE) {
        return mt_errorf(MT_ERR_UNSUPPORTED, "%s: model_type %s is not implemented (unigram and "
                         "BPE are)", path, w->model_type == SPM_MODEL_WORD ? "WORD"
                         : w->model_type == SPM_MODEL_CHAR ? "CHAR" : "(unknown)");
    }
    if (w->denorm_charsmap.n) {
        return mt_errorf(MT_ERR_UNSUPPORTED, "%s: the model has a denormaliser (a precompiled "
                         "character map for decoding), which is not implemented", path);
    }
    if (w->n == 0) return mt_errorf(MT_ERR_DATA, "%s: no pieces: not a SentencePiece model", path);
    return MT_OK;
}

static mt_status build(const spm_raw *w, const char *path, spm_model *m) {
    size_t n_text = 0;
    for (int32_t i = 0; i < w->n; i++) {
        if (!w->text[i].n) {
            return mt_errorf(MT_ERR_DATA, "%s: piece %d is empty: a SentencePiece piece must not "
                             "be", path, i);
        }
        n_text += w->text[i].n;
    }
    if (n_text >= UINT32_MAX) return mt_errorf(MT_ERR_DATA, "%s: pieces too long", path);
    m->n_pieces = w->n;
    m->blob = malloc(n_text + 1);
    m->off = malloc(((size_t)w->n + 1) * sizeof *m->off);
    m->score = malloc((size_t)w->n * sizeof *m->score);
    m->type = malloc((size_t)w->n);
    m->unk_surface = span_dup(w->unk_surface, " \xe2\x81\x87 ");
    m->bos_piece = span_dup(w->bos, "<s>");
    m->eos_piece = span_dup(w->eos, "</s>");
    m->pad_piece = span_dup(w->pad, "<pad>");
    if (!m->blob || !m->off || !m->score || !m->type || !m->unk_surface || !m->bos_piece ||
        !m->eos_piece || !m->pad_piece) {
        return mt_errorf(MT_ERR_OOM, "%s: out of memory for %d pieces", path, w->n);
    }
    uint32_t at = 0;
    for (int32_t i = 0; i < w->n; i++) {
        m->off[i] = at;
        memcpy(m->blob + at, w->text[i].p, w->text[i].n);
        at += (uint32_t)w->text[i].n;
    }
    m->off[w->n] = at;
    memcpy(m->score, w->score, (size_t)w->n * sizeof *m->score);
    memcpy(m->type, w->type, (size_t)w->n);
    m->model_type = w->model_type;
    m->byte_fallback = w->byte_fallback != 0;
    m->whitespace_as_suffix = w->ws_suffix != 0;
    m->add_dummy_prefix = w->add_dummy_prefix != 0;
    m->remove_extra_whitespaces = w->remove_extra != 0;
    m->escape_whitespaces = w->escape_ws != 0;
    m->min_score = 3.40282347e38f;   /* FLT_MAX and FLT_MIN, SentencePiece's starting values */
    m->max_score = 1.17549435e-38f;
    mt_status st = build_table(m);
    if (st == MT_OK && w->charsmap.n) st = spm_charsmap_load(m, w->charsmap.p, w->charsmap.n, path);
    if (st != MT_OK) return st;
    m->bos_id = control_id(m, m->bos_piece);
    m->eos_id = control_id(m, m->eos_piece);
    m->pad_id = control_id(m, m->pad_piece);
    return MT_OK;
}

void spm_model_release(spm_model *m) {
    if (!m || atomic_fetch_sub(&m->n_refs, 1) > 1) return;
    MT_FREE_ALL(m->blob, m->off, m->score, m->type, m->unk_surface, m->bos_piece, m->eos_piece,
                m->pad_piece, m->slots, m->trie, m->norm, m->path, m);
}

mt_status spm_model_parse(const void *bytes, size_t n_bytes, const char *path, spm_model **out) {
    *out = NULL;
    mt_status st = MT_OK;
    spm_raw w = {0};
    spm_model *m = calloc(1, sizeof *m);
    if (!m) st = mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
    if (st == MT_OK) {
        atomic_init(&m->n_refs, 1);
        m->path = malloc(strlen(path) + 1);
        if (m->path) strcpy(m->path, path);
        else st = mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
    }
    if (st == MT_OK) st = parse_model(bytes, n_bytes, path, &w);
    if (st == MT_OK) st = check_supported(&w, path);
    if (st == MT_OK) st = build(&w, path, m);
    free(w.text);
    free(w.score);
    free(w.type);
    if (st != MT_OK) {
        spm_model_release(m);
        return st;
    }
    *out = m;
    return MT_OK;
}

mt_status spm_model_load(const char *path, spm_model **out) {
    *out = NULL;
    char *bytes = NULL;
    size_t n_bytes = 0;
    mt_status st = mt_read_whole_file(path, &bytes, &n_bytes);
    if (st != MT_OK) return mt_error_context(st, "SentencePiece model: ");
    st = spm_model_parse(bytes, n_bytes, path, out);
    free(bytes);
    return st;
}
