/* tokenizer_spm_internal.h — the read-only SentencePiece model shared by tokenizer_spm_load.c
 * (reads the .model protobuf, checks it, builds the lookup table) and tokenizer_spm.c
 * (normalisation, BPE and unigram segmentation, byte fallback, decode, Megatron's three
 * tokenizer classes). Not for use outside them.
 * Rule kept: once built, an spm_model is immutable and shared by clones (refcounted). */
#ifndef MT_TOKENIZER_SPM_INTERNAL_H
#define MT_TOKENIZER_SPM_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* ModelProto.SentencePiece.Type */
enum { SPM_NORMAL = 1, SPM_UNKNOWN = 2, SPM_CONTROL = 3, SPM_USER_DEFINED = 4, SPM_UNUSED = 5,
       SPM_BYTE = 6 };
/* TrainerSpec.ModelType */
enum { SPM_MODEL_UNIGRAM = 1, SPM_MODEL_BPE = 2, SPM_MODEL_WORD = 3, SPM_MODEL_CHAR = 4 };

/* One string of the lookup table: every piece of the segmentation set (NORMAL, USER_DEFINED)
 * and every prefix of one, plus the reserved pieces (UNKNOWN, CONTROL, BYTE). */
typedef struct {
    uint64_t hash;     /* 0 = empty slot */
    uint32_t off, len; /* the string: blob[off, off + len) */
    int32_t id;        /* the segmentation piece with this text, or -1 (a prefix only) */
    int32_t reserved;  /* the reserved piece with this text, or -1 */
    int32_t is_prefix; /* 1 when it is a prefix of (or is) a segmentation piece */
} spm_slot;

typedef struct {
    int32_t n_pieces;
    char *blob;                /* piece texts */
    uint32_t *off;             /* [n_pieces + 1]: piece i is blob[off[i], off[i + 1]) */
    float *score;              /* [n_pieces] */
    uint8_t *type;             /* [n_pieces] SPM_* */
    int model_type;            /* SPM_MODEL_UNIGRAM or SPM_MODEL_BPE */
    int byte_fallback, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    int whitespace_as_suffix;
    int32_t unk_id;            /* the UNKNOWN piece */
    int32_t bos_id, eos_id, pad_id; /* as SentencePieceProcessor's bos_id() ...: -1 when absent */
    int32_t byte_id[256];      /* <0xXX> pieces (byte_fallback), else -1 */
    int n_user_defined;        /* USER_DEFINED pieces: matched whole before segmentation */
    float min_score, max_score; /* over NORMAL pieces (unigram's unknown and user scores) */
    char *unk_surface;         /* what decode writes for the unknown piece */
    char *bos_piece, *eos_piece, *pad_piece; /* the trainer spec's names of them */
    spm_slot *slots;
    uint32_t slot_mask;
    /* the precompiled character map (tokenizer_spm_charsmap.c); n_trie = 0 without one */
    uint32_t *trie;
    uint32_t n_trie;
    char *norm;                /* NUL-terminated replacements, n_norm bytes (+ a final NUL) */
    size_t n_norm;
    char *path;
    atomic_int n_refs;
} spm_model;

/* FNV-1a over bytes, continued from h (start with SPM_HASH_SEED). Never returns 0. */
#define SPM_HASH_SEED 14695981039346656037ull
static inline uint64_t spm_hash_step(uint64_t h, unsigned char c) {
    return (h ^ c) * 1099511628211ull;
}
static inline uint64_t spm_hash_fix(uint64_t h) { return h ? h : 1; }

/* The slot holding text s[0, n) (hash = its spm_hash), or NULL. */
const spm_slot *spm_find(const spm_model *m, uint64_t hash, const char *s, size_t n);
/* SentencePiece's PieceToId: the reserved piece, else the segmentation piece, else unk. */
int32_t spm_piece_to_id(const spm_model *m, const char *s, size_t n);
/* Bytes of the UTF-8 character starting with byte c (SentencePiece's OneCharLen). */
static inline size_t spm_one_char_len(unsigned char c) {
    static const uint8_t k[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return k[c >> 4];
}
/* Length of the valid UTF-8 character at s[0, n) (SentencePiece's DecodeUTF8), or 0. */
size_t spm_valid_char_len(const unsigned char *s, size_t n);

/* The character map of NormalizerSpec.precompiled_charsmap, checked and copied into m. */
mt_status spm_charsmap_load(spm_model *m, const uint8_t *p, size_t n, const char *path);
/* Bytes of the longest rule source at s[0, n) (0: none), its replacement in *repl. */
size_t spm_charsmap_match(const spm_model *m, const char *s, size_t n, const char **repl);

mt_status spm_model_load(const char *path, spm_model **out);
/* The model in bytes[0, n_bytes); `path` names it in messages. */
mt_status spm_model_parse(const void *bytes, size_t n_bytes, const char *path, spm_model **out);
void spm_model_release(spm_model *m);

#endif
