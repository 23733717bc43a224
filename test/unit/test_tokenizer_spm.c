/* test_tokenizer_spm.c — the protobuf wire reader (core/data/protobuf_wire.c) and the
 * SentencePiece model loader and encoder (core/data/tokenizer_spm*.c) on hand-made inputs:
 *   - varints (one to ten bytes, the 64-bit limit), fixed 32-bit values, length-delimited
 *     fields and skipping; a truncated varint, a length past the end of its message (and a
 *     huge one), the group / undefined wire types and field number 0 are clear errors naming
 *     the file and byte offset;
 *   - a small BPE model written here loads, and encodes as worked out by hand from
 *     SentencePiece's rules (dummy prefix, whitespace runs, highest-score merge first, byte
 *     fallback, user-defined pieces kept whole); the unigram model picks the best-scoring
 *     path and merges a run of unknown characters into one unk id;
 *   - malformed models are refused with a reason naming the file: no unknown piece, a piece
 *     twice, an empty piece, a byte piece without byte_fallback, byte_fallback without all 256
 *     byte pieces, a field with the wrong wire type, a character map whose trie is too big;
 *   - a one-rule character map (A -> a, a hand-built double array) applies before segmentation;
 *   - every truncation of a valid model, and 2000 seeded random byte changes of it, either
 *     load or fail with MT_ERR_DATA / MT_ERR_UNSUPPORTED naming the file (never crash: the
 *     sanitizer builds run this too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/protobuf_wire.h"
#include "core/data/tokenizer.h"
#include "core/data/tokenizer_spm.h"
#include "test/test.h"

/* ---- a protobuf writer for the test inputs -------------------------------------------- */

typedef struct {
    uint8_t b[1 << 16];
    size_t n;
} pbuf;

static void put_varint(pbuf *p, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        p->b[p->n++] = c | (v ? 0x80 : 0);
    } while (v);
}
static void put_tag(pbuf *p, uint32_t f, int wire) { put_varint(p, (uint64_t)f << 3 | (uint64_t)wire); }
static void put_bytes(pbuf *p, uint32_t f, const void *s, size_t n) {
    put_tag(p, f, MT_PB_LEN);
    put_varint(p, n);
    memcpy(p->b + p->n, s, n);
    p->n += n;
}
static void put_sub(pbuf *p, uint32_t f, const pbuf *sub) { put_bytes(p, f, sub->b, sub->n); }
static void put_float(pbuf *p, uint32_t f, float v) {
    put_tag(p, f, MT_PB_FIXED32);
    memcpy(p->b + p->n, &v, 4);
    p->n += 4;
}
static void put_uint(pbuf *p, uint32_t f, uint64_t v) {
    put_tag(p, f, MT_PB_VARINT);
    put_varint(p, v);
}

/* One ModelProto.SentencePiece. */
static void put_piece(pbuf *m, const char *text, float score, int type) {
    pbuf s = {.n = 0};
    put_bytes(&s, 1, text, strlen(text));
    put_float(&s, 2, score);
    if (type != 1) put_uint(&s, 3, (uint64_t)type);
    put_sub(m, 1, &s);
}

/* trainer_spec and normalizer_spec: model type, byte fallback, identity normaliser. */
static void put_specs_map(pbuf *m, int model_type, int byte_fallback, int remove_extra, const void *charsmap,
                          size_t n_charsmap) {
    pbuf t = {.n = 0}, z = {.n = 0};
    put_uint(&t, 3, (uint64_t)model_type);
    put_uint(&t, 35, (uint64_t)byte_fallback);
    put_sub(m, 2, &t);
    put_bytes(&z, 1, charsmap ? "nmt_nfkc" : "identity", 8);
    if (charsmap) put_bytes(&z, 2, charsmap, n_charsmap);
    put_uint(&z, 4, (uint64_t)remove_extra);
    put_sub(m, 3, &z);
}
static void put_specs(pbuf *m, int model_type, int byte_fallback, int remove_extra, const char *charsmap) {
    put_specs_map(m, model_type, byte_fallback, remove_extra, charsmap, charsmap ? strlen(charsmap) : 0);
}

/* A character map with one rule, A -> a: a darts-clone double array of 66 units (root at 0
 * with offset 1; 'A' at 1 ^ 0x41 = 64, with a leaf, offset 1; the leaf at 65 holding value 0,
 * the offset of "a" in the strings after the trie). */
static size_t one_rule_map(uint8_t *b) {
    uint32_t units[66] = {0};
    units[0] = 1u << 10;
    units[64] = 1u << 10 | 1u << 8 | 0x41;
    units[65] = 0x80000000u;
    const uint32_t trie_bytes = sizeof units;
    memcpy(b, &trie_bytes, 4);
    memcpy(b + 4, units, sizeof units);
    memcpy(b + 4 + sizeof units, "a", 2);
    return 4 + sizeof units + 2;
}

#define SP "\xe2\x96\x81" /* U+2581 */

/* BPE: <unk> <s> </s>, byte pieces when byte_fallback, then the pieces below. */
static void bpe_model(pbuf *m, int byte_fallback) {
    m->n = 0;
    put_piece(m, "<unk>", 0, 2);
    put_piece(m, "<s>", 0, 3);
    put_piece(m, "</s>", 0, 3);
    for (int b = 0; byte_fallback && b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        put_piece(m, name, 0, 6);
    }
    put_piece(m, "<sep>", 0, 4);      /* user-defined */
    put_piece(m, SP "a", -1, 1);
    put_piece(m, "ab", -2, 1);
    put_piece(m, SP "ab", -3, 1);
    put_piece(m, "bc", -0.5f, 1);     /* outscores ab: "abc" -> a bc */
    put_piece(m, SP SP, -4, 1);
    put_piece(m, SP, -5, 1);
    put_piece(m, "a", -6, 1);
    put_piece(m, "b", -7, 1);
    put_piece(m, "c", -8, 1);
    put_specs(m, 2, byte_fallback, 1, NULL);
}

static const char g_path[] = "test.model"; /* the name the models are opened under */

static mt_status open_model(mt_tokenizer **tok, const char *name, const pbuf *m) {
    return mt_tokenizer_spm_open_bytes(tok, name, m->b, m->n, g_path);
}

/* The ids of text with tokenizer `name` over m, as "1 2 3" (or "ERR: message"). */
static const char *ids_of(const pbuf *m, const char *name, const char *text) {
    static char out[4096];
    mt_tokenizer *tok = NULL;
    mt_status st = open_model(&tok, name, m);
    if (st != MT_OK) {
        snprintf(out, sizeof out, "ERR: %s", mt_last_error());
        mt_clear_error();
        return out;
    }
    mt_token_buf ids = {0};
    st = mt_tokenizer_encode(tok, text, strlen(text), &ids);
    size_t n = 0;
    out[0] = 0;
    for (int64_t i = 0; st == MT_OK && i < ids.n_ids; i++)
        n += (size_t)snprintf(out + n, sizeof out - n, i ? " %d" : "%d", ids.ids[i]);
    mt_token_buf_free(&ids);
    mt_tokenizer_free(tok);
    return out;
}

/* ---- the wire reader ------------------------------------------------------------------ */

static void test_wire(void) {
    const uint8_t v[] = {0x01, 0x96, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    mt_pb_reader r;
    uint64_t x = 0;
    mt_pb_init(&r, v, sizeof v, "v.bin");
    CHECK(mt_pb_varint(&r, &x) == MT_OK && x == 1);
    CHECK(mt_pb_varint(&r, &x) == MT_OK && x == 150);
    CHECK(mt_pb_varint(&r, &x) == MT_OK && x == UINT64_MAX && !mt_pb_more(&r));
    /* eleven bytes, or a tenth byte above 1: more than 64 bits */
    const uint8_t big[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02};
    mt_pb_init(&r, big, sizeof big, "big.bin");
    CHECK(mt_pb_varint(&r, &x) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "big.bin: byte 0: a varint longer than 64 bits");
    mt_pb_init(&r, big, 3, "cut.bin");
    CHECK(mt_pb_varint(&r, &x) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "cut.bin: byte 0: truncated varint");
    /* tags: field 0, wire types 3, 4, 6, 7 */
    const uint8_t tags[][1] = {{0x02}, {0x0b}, {0x0c}, {0x0e}, {0x0f}};
    const char *why[] = {"field number 0", "wire type 3 (start-group)", "wire type 4 (end-group)",
                         "wire type 6 (undefined)", "wire type 7 (undefined)"};
    for (int i = 0; i < 5; i++) {
        uint32_t f;
        int w;
        mt_pb_init(&r, tags[i], 1, "t.model");
        CHECK(mt_pb_tag(&r, &f, &w) == MT_ERR_DATA);
        CHECK_STR_CONTAINS(mt_last_error(), "t.model: byte 0: ");
        CHECK_STR_CONTAINS(mt_last_error(), why[i]);
    }
    /* lengths: past the end, huge */
    const uint8_t past[] = {0x0a, 0x05, 'a', 'b'};
    uint32_t f;
    int w;
    const uint8_t *b;
    size_t n;
    mt_pb_init(&r, past, sizeof past, "p.model");
    CHECK(mt_pb_tag(&r, &f, &w) == MT_OK && f == 1 && w == MT_PB_LEN);
    CHECK(mt_pb_bytes(&r, &b, &n) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "p.model: byte 1: a length-delimited field of 5 bytes runs past the end");
    const uint8_t huge[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    mt_pb_init(&r, huge, sizeof huge, "h.model");
    CHECK(mt_pb_tag(&r, &f, &w) == MT_OK && mt_pb_skip(&r, w) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "runs past the end of its message");
    /* fixed values and skipping each wire type */
    const uint8_t mix[] = {0x08, 0x96, 0x01, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x1a, 0x02, 'h', 'i',
                           0x25, 0x00, 0x00, 0x80, 0x3f, 0x2d, 0x01};
    mt_pb_init(&r, mix, sizeof mix, "m.bin");
    int n_fields = 0;
    uint32_t bits = 0;
    while (mt_pb_more(&r)) {
        if (mt_pb_tag(&r, &f, &w) != MT_OK) break;
        if (f == 4) {
            CHECK(mt_pb_fixed32(&r, &bits) == MT_OK && bits == 0x3f800000u);
        } else if (f == 5) {
            CHECK(mt_pb_fixed32(&r, &bits) == MT_ERR_DATA);
            CHECK_STR_CONTAINS(mt_last_error(), "m.bin: byte 22: a 32-bit value of 4 bytes runs past the end");
            break;
        } else {
            CHECK(mt_pb_skip(&r, w) == MT_OK);
        }
        n_fields++;
    }
    CHECK(n_fields == 4);
    mt_clear_error();
}

/* ---- the model ------------------------------------------------------------------------ */

static void test_encode(void) {
    pbuf m;
    bpe_model(&m, 1);
    const int o = 256; /* byte pieces 3..258 */
    char want[256];
    /* <unk> <s> </s> bytes: <sep> 259, ▁a 260, ab 261, ▁ab 262, bc 263, ▁▁ 264, ▁ 265, a 266, b 267, c 268 */
    CHECK(!strcmp(ids_of(&m, "gptspm", "ab"), "262"));                 /* ▁ a b -> ▁a b -> ▁ab */
    CHECK(!strcmp(ids_of(&m, "gptspm", "abc"), "260 263"));            /* bc (-0.5) before ▁a (-1) */
    CHECK(!strcmp(ids_of(&m, "gptspm", "  ab   ab  "), "262 262"));    /* leading/trailing/extra spaces go */
    snprintf(want, sizeof want, "260 %d 262", 3 + 'x');               /* x: no piece -> byte <0x78> */
    CHECK(!strcmp(ids_of(&m, "gptspm", "ax ab"), want));
    snprintf(want, sizeof want, "265 %d %d %d", 3 + 0xef, 3 + 0xbf, 3 + 0xbd); /* a bad byte is U+FFFD */
    CHECK(!strcmp(ids_of(&m, "gptspm", "\xff"), want));
    CHECK(!strcmp(ids_of(&m, "gptspm", "a<sep>b"), "260 259 267"));   /* user-defined kept whole */
    CHECK(!strcmp(ids_of(&m, "gptspm", ""), ""));
    CHECK(!strcmp(ids_of(&m, "llama2", "ab"), "1 262"));
    CHECK(!strcmp(ids_of(&m, "llama2", ""), "1"));
    /* SentencePieceTokenizer: <CLS> <SEP> <EOD> <MASK> <PAD> after the pieces, <s> </s> kept */
    const int n = 3 + o + 10;
    snprintf(want, sizeof want, "262 %d 262 1 260", n + 2);
    CHECK(!strcmp(ids_of(&m, "spm", "ab<EOD>ab<s>a"), want));
    mt_tokenizer *tok = NULL;
    CHECK(open_model(&tok, "spm", &m) == MT_OK);
    CHECK(tok && tok->vocab_size == n + 5 && tok->eod_id == n + 2);
    mt_tokenizer_free(tok);
    CHECK(open_model(&tok, "Llama2Tokenizer", &m) == MT_OK);
    CHECK(tok && tok->vocab_size == n && tok->eod_id == 2);
    /* decode: dummy prefix dropped, bytes joined, control pieces silent */
    const int32_t ids[] = {1, 262, 265, 3 + 'x', 3 + 0xc3, 3 + 0xa9, 2};
    mt_byte_buf text = {0};
    CHECK(tok && mt_tokenizer_decode(tok, ids, 7, &text) == MT_OK && !strcmp(text.bytes, "ab x\xc3\xa9"));
    mt_byte_buf_free(&text);
    mt_tokenizer_free(tok);

    /* unigram, no byte fallback: best path; unknown characters in a run are one unk */
    m.n = 0;
    put_piece(&m, "<unk>", 0, 2);
    put_piece(&m, "<s>", 0, 3);
    put_piece(&m, "</s>", 0, 3);
    put_piece(&m, SP, -1, 1);       /* 3 */
    put_piece(&m, "a", -2, 1);      /* 4 */
    put_piece(&m, "b", -2, 1);      /* 5 */
    put_piece(&m, "ab", -5, 1);     /* 6: worse than a + b (-4) */
    put_piece(&m, SP "ab", -2, 1);  /* 7: better than ▁ + a + b (-5) */
    put_specs(&m, 1, 0, 1, NULL);
    CHECK(!strcmp(ids_of(&m, "gptspm", "ab"), "7"));
    CHECK(!strcmp(ids_of(&m, "gptspm", "ab ab"), "7 7"));
    CHECK(!strcmp(ids_of(&m, "gptspm", "b ab"), "3 5 7"));
    CHECK(!strcmp(ids_of(&m, "gptspm", "axyzb"), "3 4 0 5"));         /* x y z: one unk */

    /* a character map: A normalises to a before segmentation */
    uint8_t map[300];
    const size_t n_map = one_rule_map(map);
    bpe_model(&m, 1);
    put_specs_map(&m, 2, 1, 1, map, n_map);
    CHECK(!strcmp(ids_of(&m, "gptspm", "Abc"), "260 263"));
    CHECK(!strcmp(ids_of(&m, "gptspm", "AAb"), "260 261"));
    snprintf(want, sizeof want, "262 %d", 3 + 'B');                    /* no rule for B */
    CHECK(!strcmp(ids_of(&m, "gptspm", "AbB"), want));
    map[0] = 0xff; /* a trie larger than the map */
    put_specs_map(&m, 2, 1, 1, map, n_map);
    CHECK_STR_CONTAINS(ids_of(&m, "gptspm", "a"), "precompiled_charsmap says its trie has");
}

/* Each malformed model and the words its error must hold. */
static void test_refusals(void) {
    pbuf m;
    /* two pieces (text, type) and the trainer spec (byte_fallback), and the words of the error */
    const struct {
        const char *a;
        int ta;
        const char *b;
        int tb, byte_fallback;
        const char *want;
    } two[] = {
        {"a", 1, "b", 1, 0, "no piece of type UNKNOWN"},
        {"<unk>", 2, "<unk>", 2, 0, "piece 1 '<unk>' is already defined (piece 0)"},
        {"<unk>", 2, "", 1, 0, "piece 1 is empty"},
        {"<unk>", 2, "<0x41>", 6, 0, "byte piece 1 '<0x41>' is found although byte_fallback is false"},
        {"<unk>", 2, "<0x00>", 6, 1, "there is no piece <0x01>"},
        {"<unk>", 2, "<0x4g>", 6, 1, "byte piece 1 '<0x4g>' is not of the form <0xXX>"},
        {"<unk>", 2, "a", 5, 0, "piece 1 'a' is UNUSED"},
    };
    for (size_t k = 0; k < sizeof two / sizeof two[0]; k++) {
        m.n = 0;
        put_piece(&m, two[k].a, 0, two[k].ta);
        put_piece(&m, two[k].b, 0, two[k].tb);
        put_specs(&m, 2, two[k].byte_fallback, 1, NULL);
        CHECK_STR_CONTAINS(ids_of(&m, "gptspm", "a"), two[k].want);
    }
    /* pieces given as a varint */
    m.n = 0;
    put_uint(&m, 1, 5);
    CHECK_STR_CONTAINS(ids_of(&m, "gptspm", "a"), "field ModelProto.pieces (1) has wire type varint, expected length-delimited");
    /* a character map too short for its header; the WORD model type; a Llama2Tokenizer without <s> */
    bpe_model(&m, 0);
    put_specs(&m, 2, 0, 1, "\x04");
    CHECK_STR_CONTAINS(ids_of(&m, "gptspm", "a"), "precompiled_charsmap of 1 bytes is too short for its header");
    bpe_model(&m, 0);
    put_specs(&m, 3, 0, 1, NULL);
    CHECK_STR_CONTAINS(ids_of(&m, "gptspm", "a"), "model_type WORD is not implemented");
    m.n = 0;
    put_piece(&m, "<unk>", 0, 2);
    put_piece(&m, "</s>", 0, 3);
    CHECK_STR_CONTAINS(ids_of(&m, "llama2", "a"), "needs the control pieces '<s>' (bos) and '</s>'");
    CHECK_STR_CONTAINS(ids_of(&m, "llama2", "a"), g_path);
}

/* Every truncation and 2000 random byte changes: a clean load or a clean refusal. */
static void test_damage(void) {
    pbuf good, m;
    uint8_t map[300];
    bpe_model(&good, 1);
    put_specs_map(&good, 2, 1, 1, map, one_rule_map(map)); /* the character map gets damaged too */
    int n_ok = 0, n_bad = 0;
    uint32_t s = 12345;
    for (size_t k = 0; k < good.n + 2000; k++) {
        m = good;
        if (k < good.n) {
            m.n = k;
        } else {
            for (int j = 0; j < 3; j++) {
                s = s * 1664525u + 1013904223u;
                m.b[(s >> 8) % m.n] = (uint8_t)(s >> 24);
            }
        }
        mt_tokenizer *tok = NULL;
        mt_status st = open_model(&tok, "gptspm", &m);
        if (st == MT_OK) {
            mt_token_buf ids = {0};
            CHECK(mt_tokenizer_encode(tok, "ab x\xff", 5, &ids) == MT_OK);
            for (int64_t i = 0; i < ids.n_ids; i++) CHECK(ids.ids[i] >= 0 && ids.ids[i] < tok->vocab_size);
            mt_token_buf_free(&ids);
            mt_tokenizer_free(tok);
            n_ok++;
        } else {
            CHECKF((st == MT_ERR_DATA || st == MT_ERR_UNSUPPORTED) && strstr(mt_last_error(), g_path),
                   "status %d: %s", st, mt_last_error());
            mt_clear_error();
            n_bad++;
        }
    }
    CHECKF(n_ok > 0 && n_bad > 1000, "%d loaded, %d refused", n_ok, n_bad);
    printf("damaged models: %d loaded and encoded, %d refused cleanly\n", n_ok, n_bad);
}

int main(void) {
    test_wire();
    test_encode();
    test_refusals();
    test_damage();
    TEST_MAIN_END();
}
