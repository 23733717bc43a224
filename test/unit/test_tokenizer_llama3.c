/* test_tokenizer_llama3.c — Llama-3's tokenizer (tokenizer_llama3.c + the BPE of
 * tokenizer_bpe.c). Always (no files needed): the pre-tokenizer splits of Llama-3's regex on
 * hand-written cases worked out from the regex's meaning (case-insensitive contractions, the
 * one-character prefix of a letter run, \p{N}{1,3}, punctuation taking trailing newlines,
 * \s*[\r\n]+, \s+(?!\S), Unicode White_Space against Python's isspace, invalid UTF-8 as maximal
 * subparts); a synthetic tokenizer.json with the Llama-3 pre-tokenizer loads and splits that
 * way, and one whose Split is not exactly Llama-3's or GPT-2's is refused with the reason.
 * With data/llama3-tokenizer.json (scripts/fetch-llama3-tokenizer.sh data; else exit 77 after
 * the checks above): vocabulary 128256, eod 128001, ids of the npm package's own test vectors,
 * special tokens split out and decoded, the cache / heap / simple merge loops and a clone give
 * the same ids over data/kjv.jsonl, random bytes round-trip, and the throughput (printed). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/data/json_lines.h"
#include "core/data/tokenizer.h"
#include "core/data/tokenizer_bpe.h"
#include "test/test.h"
#include "test/test_files.h"
#include "test/unit/tokenizer_check.h"

static char g_dir[] = "/tmp/mt_test_llama3_XXXXXX";

/* ---- pre-tokenizer -------------------------------------------------------------------- */

/* want: pre-tokens separated by '|' (text must not contain '|'). */
static void expect_split(const char *text, const char *want) { expect_split_with(mt_llama3_pretokenize, text, want); }

static void test_pretokenize(void) {
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d): any case, tried first */
    expect_split("I'm", "I|'m");
    expect_split("it'S THEY'RE we'Ve", "it|'S| THEY|'RE| we|'Ve");
    expect_split("'LL'd'T'rE'vE", "'LL|'d|'T|'rE|'vE");
    expect_split("'sam", "'s|am");
    /* U+017F LATIN SMALL LETTER LONG S folds to s */
    expect_split("x'\xc5\xbf" "a", "x|'\xc5\xbf|a");
    /* not a contraction: the apostrophe is the prefix of the letter run */
    expect_split("'xyz", "'xyz");
    expect_split("'lx", "'lx");
    expect_split(" 'x", " '|x"); /* " ?[^\s\p{L}\p{N}]+" takes " '" before x can */
    /* [^\r\n\p{L}\p{N}]?\p{L}+ : one prefix character that is not a newline/letter/number */
    expect_split("Hello world", "Hello| world");
    expect_split("hello!world", "hello|!world");
    expect_split("a\tb", "a|\tb");
    expect_split("a\nb", "a|\n|b");
    expect_split("a\r\nb", "a|\r\n|b");
    expect_split("1abc", "1|abc");
    expect_split("a\xe3\x80\x80" "b", "a|\xe3\x80\x80" "b"); /* U+3000 is \s, not \r\n */
    expect_split("...abc", "...|abc"); /* the punctuation alternative matched first: greedy */
    expect_split(" h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c", " h\xc3\xa9llo| \xe4\xb8\x96\xe7\x95\x8c");
    /* \p{N}{1,3} */
    expect_split("1234567", "123|456|7");
    expect_split("abc12345def", "abc|123|45|def");
    expect_split(" 123", " |123");
    expect_split("x\xc2\xb2\xc2\xb3\xe2\x81\xb4\xe2\x81\xb5", "x|\xc2\xb2\xc2\xb3\xe2\x81\xb4|\xe2\x81\xb5");
    expect_split("\xe2\x85\xab" "1", "\xe2\x85\xab" "1"); /* U+216B ROMAN NUMERAL TWELVE is Nl */
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    expect_split(" ?!  ...", " ?!| | ...");
    expect_split("x!!\n\ny", "x|!!\n\n|y");
    expect_split("x! \ny", "x|!| \n|y");
    expect_split("{\r\n}", "{\r\n|}");
    /* \s*[\r\n]+ : up to the run's last newline */
    expect_split("a\n\n  b", "a|\n\n| | b");
    expect_split("a  \n  b", "a|  \n| | b");
    expect_split("a \r\n\r\n", "a| \r\n\r\n");
    /* \s+(?!\S) and \s+ */
    expect_split("x   ", "x|   ");
    expect_split("   ", "   ");
    expect_split("a  b", "a| | b");
    expect_split("\t\tx", "\t|\tx");
    expect_split("a\t!", "a|\t|!");
    /* \s is Unicode White_Space: U+001C..U+001F are not (Python's isspace says they are),
     * U+0085 and U+2028 are (and are not \r\n) */
    expect_split("a\x1c" "b", "a|\x1c" "b");
    expect_split("a\x1f\x1f" "b", "a|\x1f\x1f|b");
    expect_split("a\xc2\x85" "b", "a|\xc2\x85" "b");
    expect_split("a\xe2\x80\xa8\nb", "a|\xe2\x80\xa8\n|b");
    /* invalid UTF-8: each maximal ill-formed subsequence is one "other" character */
    expect_split("\xe2\x82" "abc", "\xe2\x82" "abc");
    expect_split("\xe0\x80" "abc", "\xe0\x80|abc");       /* E0 needs A0..BF: two characters */
    expect_split("\xff" "abc", "\xff" "abc");
    expect_split("\xf0\x9f\x98x", "\xf0\x9f\x98x");        /* a cut-off 4-byte sequence */
    expect_split("\xed\xa0\x80x", "\xed\xa0\x80|x");       /* a surrogate: three characters */
    expect_split("a\xc3", "a|\xc3");
    expect_split(" \xff" "x", " \xff|x");
    /* the count limit */
    int64_t ends[2];
    CHECK(mt_llama3_pretokenize("a b c", 5, ends, 2) == -1);
    CHECK(mt_llama3_pretokenize("", 0, ends, 2) == 0);
}

/* ---- a synthetic tokenizer.json ------------------------------------------------------- */

/* 256 byte symbols + "ab", "abc", "Ġa" (ids 256..258) with merges a b, ab c, Ġ a; the Split
 * pattern given as its JSON text; <|end_of_text|> added as 300. */
static void write_synthetic(const char *path, const char *pattern_json, const char *behavior,
                            int invert) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fprintf(f, "{\"added_tokens\": [{\"id\": 300, \"content\": \"<|end_of_text|>\", "
               "\"special\": true}],\n \"normalizer\": null,\n"
               " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [\n"
               "  {\"type\": \"Split\", \"pattern\": {\"Regex\": %s}, \"behavior\": \"%s\", "
               "\"invert\": %s},\n"
               "  {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
               "\"use_regex\": false}]},\n"
               " \"decoder\": {\"type\": \"ByteLevel\"},\n"
               " \"model\": {\"type\": \"BPE\", \"ignore_merges\": true, \"vocab\": {",
            pattern_json, behavior, invert ? "true" : "false");
    for (int b = 0; b < 256; b++) {
        char sym[2];
        int n = byte_symbol(b, sym);
        if (b) fputc(',', f);
        json_str(f, sym, (size_t)n);
        fprintf(f, ": %d", b);
    }
    fputs(", \"ab\": 256, \"abc\": 257, \"\xc4\xa0" "a\": 258},\n"
          "  \"merges\": [\"a b\", \"ab c\", \"\xc4\xa0 a\"]}}\n", f);
    fclose(f);
}

#define LLAMA3_PATTERN_JSON                                                                 \
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}|"      \
    " ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\""

static void test_synthetic(void) {
    const char *good = test_path(g_dir, "synthetic.json");
    write_synthetic(good, LLAMA3_PATTERN_JSON, "Isolated", 0);
    mt_tokenizer *tok = NULL;
    mt_tokenizer_files files = {good, NULL, NULL};
    mt_status st = mt_tokenizer_open(&tok, "hf", &files);
    CHECKF(st == MT_OK, "synthetic Llama-3 tokenizer.json: %s", mt_last_error());
    if (st == MT_OK) {
        CHECK(mt_tokenizer_vocab_size(tok) == 301 && mt_tokenizer_eod(tok) == 300);
        mt_token_buf ids = {0};
        /* "\tabc" is one pre-token (tab prefix): bytes \t a b c -> \t, abc */
        encode_str(tok, "\tabc", &ids);
        CHECK(ids.n_ids == 2 && ids.ids[0] == '\t' && ids.ids[1] == 257);
        /* "1abc": the number is not a prefix; " a" merges to 258; the added token splits */
        encode_str(tok, "1abc a<|end_of_text|>ab", &ids);
        CHECK(ids.n_ids == 5 && ids.ids[0] == '1' && ids.ids[1] == 257 && ids.ids[2] == 258 &&
              ids.ids[3] == 300 && ids.ids[4] == 256);
        mt_token_buf_free(&ids);
    }
    mt_tokenizer_free(tok);
    /* refused: another pattern (named), a non-Isolated behavior, an inverted split */
    const char *other = test_path(g_dir, "other.json");
    write_synthetic(other, "\"\\\\p{L}+| ?[0-9]+\"", "Isolated", 0);
    files.vocab_path = other;
    CHECK(mt_tokenizer_open(&tok, "hf", &files) == MT_ERR_UNSUPPORTED && tok == NULL);
    CHECK_STR_CONTAINS(mt_last_error(), "\\p{L}+| ?[0-9]+");
    CHECK_STR_CONTAINS(mt_last_error(), "neither GPT-2's nor Llama-3's");
    CHECK_STR_CONTAINS(mt_last_error(), other);
    const char *removed = test_path(g_dir, "removed.json");
    write_synthetic(removed, LLAMA3_PATTERN_JSON, "Removed", 0);
    files.vocab_path = removed;
    CHECK(mt_tokenizer_open(&tok, "hf", &files) == MT_ERR_UNSUPPORTED && tok == NULL);
    CHECK_STR_CONTAINS(mt_last_error(), "Isolated");
    const char *inverted = test_path(g_dir, "inverted.json");
    write_synthetic(inverted, LLAMA3_PATTERN_JSON, "Isolated", 1);
    files.vocab_path = inverted;
    CHECK(mt_tokenizer_open(&tok, "hf", &files) == MT_ERR_UNSUPPORTED && tok == NULL);
}

/* ---- with Llama-3's tokenizer.json ---------------------------------------------------- */

/* The npm package llama3-tokenizer-js's own test vectors. */
static void golden(mt_tokenizer *tok) {
    static const struct { const char *text; int n; int32_t ids[4]; } g[] = {
        {"grabbed", 2, {59312, 2788}},
        {" grabbed", 1, {30418}},
        {"           grabbed", 2, {1881, 30418}},
        {"\n", 1, {198}},
        {" \n", 1, {720}},
        {"ax\n####\nboo", 4, {710, 198, 71050, 34093}},
        {"\xe9\x95\x87", 1, {104643}},
        {"\xf0\x9f\xa6\x99", 3, {9468, 99, 247}},
        {"Hello world!", 3, {9906, 1917, 0}},
        {"a<|end_of_text|>b", 3, {64, 128001, 65}},
    };
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) expect_ids(tok, g[k].text, g[k].ids, g[k].n);
}

/* Encodes every document with each tokenizer; all must agree and round-trip. */
static void corpus_checks(mt_tokenizer *const *toks, int n_toks, const char *corpus) {
    mt_jsonl_reader r;
    const char *keys[1] = {"text"};
    if (mt_jsonl_open(&r, corpus, keys, 1) != MT_OK) {
        printf("note: %s unreadable (%s): corpus checks skipped\n", corpus, mt_last_error());
        return;
    }
    mt_token_buf a = {0}, b = {0};
    mt_byte_buf back = {0};
    int64_t n_docs = 0, n_bytes = 0, n_ids = 0, n_differ = 0, n_bad_rt = 0;
    double t_first = 0;
    for (;;) {
        int eof = 0;
        if (mt_jsonl_next(&r, &eof) != MT_OK || eof) break;
        const mt_json_string *v = mt_jsonl_value(&r, 0);
        if (!v->found) continue;
        double t0 = test_now_s();
        a.n_ids = 0;
        CHECK(mt_tokenizer_encode(toks[0], v->bytes, v->n_bytes, &a) == MT_OK);
        t_first += test_now_s() - t0;
        for (int k = 1; k < n_toks; k++) {
            b.n_ids = 0;
            CHECK(mt_tokenizer_encode(toks[k], v->bytes, v->n_bytes, &b) == MT_OK);
            if (b.n_ids != a.n_ids || memcmp(a.ids, b.ids, (size_t)a.n_ids * 4) != 0) n_differ++;
        }
        back.n_bytes = 0;
        CHECK(mt_tokenizer_decode(toks[0], a.ids, a.n_ids, &back) == MT_OK);
        if (back.n_bytes != v->n_bytes || memcmp(back.bytes, v->bytes, v->n_bytes) != 0) n_bad_rt++;
        n_docs++;
        n_bytes += (int64_t)v->n_bytes;
        n_ids += a.n_ids;
    }
    mt_jsonl_close(&r);
    CHECKF(n_differ == 0, "%lld documents encode differently across cache / loops / clone",
           (long long)n_differ);
    CHECKF(n_bad_rt == 0, "%lld documents do not round-trip", (long long)n_bad_rt);
    printf("%s: %lld documents, %lld bytes, %lld ids; one thread: %.1f MB/s\n", corpus,
           (long long)n_docs, (long long)n_bytes, (long long)n_ids,
           t_first > 0 ? (double)n_bytes / 1e6 / t_first : 0.0);
    mt_token_buf_free(&a);
    mt_token_buf_free(&b);
    mt_byte_buf_free(&back);
}

static void random_bytes(mt_tokenizer *tok) {
    uint64_t s = 0x243F6A8885A308D3ull;
    char buf[512];
    mt_token_buf ids = {0};
    mt_byte_buf back = {0};
    int n_bad = 0;
    for (int t = 0; t < 2000; t++) {
        size_t n = 0, len = (size_t)(t % 97) * 5 + 1;
        for (; n < len && n < sizeof buf; n++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            /* mostly letters, spaces, newlines, apostrophes, digits; some high bytes */
            static const char pool[] = "aAbB'sSrRe \n\r\t09.!";
            buf[n] = (s >> 60) < 12 ? pool[(s >> 8) % (sizeof pool - 1)] : (char)(s >> 24);
        }
        ids.n_ids = 0;
        back.n_bytes = 0;
        if (mt_tokenizer_encode(tok, buf, n, &ids) != MT_OK ||
            mt_tokenizer_decode(tok, ids.ids, ids.n_ids, &back) != MT_OK || back.n_bytes != n ||
            memcmp(back.bytes, buf, n) != 0) {
            n_bad++;
        }
    }
    CHECKF(n_bad == 0, "%d random byte strings do not round-trip", n_bad);
    mt_token_buf_free(&ids);
    mt_byte_buf_free(&back);
}

int main(void) {
    if (!test_tmpdir_make(g_dir)) return 1;
    test_pretokenize();
    test_synthetic();

    const char *json = getenv("MT_LLAMA3_JSON") ? getenv("MT_LLAMA3_JSON")
                                                : "data/llama3-tokenizer.json";
    int have = test_file_exists(json);
    if (have) {
        mt_tokenizer *toks[3] = {NULL, NULL, NULL};
        const mt_tokenizer_files files = {NULL, NULL, json};
        mt_tokenizer *tok = open_checked("hf", &files, 128256, 128001);
        if (tok) {
            golden(tok);
            mt_byte_buf b = {0};
            int32_t bos = 128000, bad = 128256;
            CHECK(mt_tokenizer_decode(tok, &bos, 1, &b) == MT_OK &&
                  strcmp(b.bytes, "<|begin_of_text|>") == 0);
            CHECK(mt_tokenizer_decode(tok, &bad, 1, &b) == MT_ERR_DATA);
            CHECK_STR_CONTAINS(mt_last_error(), "128256");
            mt_byte_buf_free(&b);
            /* a clone without the cache and with the heap loop for every word, and one with
             * the simple loop for every word */
            toks[0] = tok;
            CHECK(mt_tokenizer_clone(tok, &toks[1]) == MT_OK);
            CHECK(mt_tokenizer_clone(tok, &toks[2]) == MT_OK);
            if (toks[1] && toks[2]) {
                mt_bpe_set_cache(toks[1], 0);
                mt_bpe_set_small_word_limit(toks[1], 0);
                mt_bpe_set_cache(toks[2], 0);
                mt_bpe_set_small_word_limit(toks[2], 1 << 30);
                golden(toks[1]);
                golden(toks[2]);
                corpus_checks(toks, 3, "data/kjv.jsonl");
            }
            random_bytes(tok);
        }
        mt_tokenizer_free(toks[1]);
        mt_tokenizer_free(toks[2]);
        mt_tokenizer_free(tok);
    }
    test_tmpdir_remove(g_dir);
    if (!have && mt_test_failures == 0) {
        printf("%s: %d checks passed without Llama-3's tokenizer.json\n", __FILE__, mt_test_checks);
        printf("skip: %s missing: run scripts/fetch-llama3-tokenizer.sh data (needs npm, node)\n",
               json);
        return 77;
    }
    TEST_MAIN_END();
}
