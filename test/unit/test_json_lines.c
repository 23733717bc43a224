/* test_json_lines.c — the JSON-lines reader: every escape, \u and surrogate pairs to UTF-8,
 * raw UTF-8 kept and invalid UTF-8 rejected, nested values skipped, repeated and escaped
 * keys, malformed lines rejected with a column (and path:line through the reader), blank
 * lines and CRLF, missing / unreadable files. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/json_lines.h"
#include "core/json_tree.h"
#include "test/test.h"

/* Extracts one key from a NUL-terminated line. */
static mt_status get1(const char *line, const char *key, mt_json_string *v) {
    const char *keys[1] = {key};
    return mt_json_extract_strings(line, strlen(line), keys, 1, v);
}

static void expect_value(const char *line, const char *key, const char *want, size_t n_want) {
    mt_json_string v = {0};
    mt_status st = get1(line, key, &v);
    CHECKF(st == MT_OK, "%s: %s", line, mt_last_error());
    CHECKF(v.found, "%s: key %s not found", line, key);
    CHECKF(v.n_bytes == n_want && memcmp(v.bytes ? v.bytes : "", want, n_want) == 0,
           "%s: got %zu bytes '%s'", line, v.n_bytes, v.bytes ? v.bytes : "");
    mt_json_string_free(&v);
}

static void expect_malformed(const char *line, size_t n, const char *what) {
    mt_json_string v = {0};
    const char *keys[1] = {"text"};
    mt_status st = mt_json_extract_strings(line, n, keys, 1, &v);
    CHECKF(st == MT_ERR_DATA, "accepted malformed line (%s)", what);
    if (st == MT_ERR_DATA) CHECK_STR_CONTAINS(mt_last_error(), "column");
    mt_json_string_free(&v);
}

static void test_values(void) {
    expect_value("{\"text\": \"hello\"}", "text", "hello", 5);
    expect_value("  {\"text\":\"\"}  \r", "text", "", 0);
    expect_value("{\"text\": \"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"}", "text",
                 "a\"b\\c/d\be\ff\ng\rh\ti", 17);
    expect_value("{\"text\": \"\\u00e9\\u4E16\\u0041\"}", "text", "\xc3\xa9\xe4\xb8\x96" "A", 6);
    expect_value("{\"text\": \"\\ud83d\\ude00!\"}", "text", "\xf0\x9f\x98\x80!", 5);
    expect_value("{\"text\": \"\\uDBFF\\uDFFF\"}", "text", "\xf4\x8f\xbf\xbf", 4);
    expect_value("{\"text\": \"a\\u0000b\"}", "text", "a\0b", 3);
    expect_value("{\"text\": \"\\u07ff\\u0800\\uffff\"}", "text",
                 "\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf", 8);
    /* Raw UTF-8 passes through unchanged. */
    expect_value("{\"text\": \"h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80\"}", "text",
                 "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80", 18);
    /* Nested values of every type are skipped; only the top-level key counts. */
    expect_value("{\"meta\": {\"text\": \"inner\", \"a\": [1, 2.5e-3, -0, {\"b\": [[], {}]}]},"
                 " \"n\": -12.5E+3, \"t\": true, \"f\": false, \"z\": null, \"s\": \"x\\\"}\","
                 " \"text\": \"outer\", \"after\": [\"text\"]}",
                 "text", "outer", 5);
    /* Python's json.loads extensions that Megatron's preprocess accepts. */
    expect_value("{\"a\": NaN, \"b\": Infinity, \"c\": -Infinity, \"text\": \"ok\"}", "text", "ok", 2);
    /* A repeated key: the last one wins (as in Python). */
    expect_value("{\"text\": \"first\", \"text\": \"second\"}", "text", "second", 6);
    /* An escaped key matches its unescaped name. */
    expect_value("{\"t\\u0065xt\": \"esc\"}", "text", "esc", 3);
    /* A long value (grows the buffer many times). */
    {
        size_t n = 100000;
        char *line = malloc(n + 32);
        strcpy(line, "{\"text\": \"");
        size_t at = strlen(line);
        for (size_t i = 0; i < n; i++) line[at + i] = (char)('a' + i % 26);
        strcpy(line + at + n, "\"}");
        mt_json_string v = {0};
        CHECK(get1(line, "text", &v) == MT_OK);
        CHECK(v.n_bytes == n && v.bytes[n - 1] == (char)('a' + (n - 1) % 26));
        mt_json_string_free(&v);
        free(line);
    }

    /* Several keys at once; missing ones are reported as not found. */
    const char *keys[3] = {"title", "text", "url"};
    mt_json_string v[3] = {{0}, {0}, {0}};
    const char *line = "{\"text\": \"body\", \"id\": 7, \"title\": \"T\"}";
    CHECK(mt_json_extract_strings(line, strlen(line), keys, 3, v) == MT_OK);
    CHECK(v[0].found && strcmp(v[0].bytes, "T") == 0);
    CHECK(v[1].found && strcmp(v[1].bytes, "body") == 0);
    CHECK(!v[2].found);
    /* Reuse clears the previous values. */
    line = "{\"url\": \"u\"}";
    CHECK(mt_json_extract_strings(line, strlen(line), keys, 3, v) == MT_OK);
    CHECK(!v[0].found && !v[1].found && v[2].found && strcmp(v[2].bytes, "u") == 0);
    for (int k = 0; k < 3; k++) mt_json_string_free(&v[k]);
    /* No keys requested: a pure validator. */
    CHECK(mt_json_extract_strings("{\"a\": [1]}", 10, NULL, 0, NULL) == MT_OK);
    CHECK(mt_json_extract_strings("{\"a\": [1}", 9, NULL, 0, NULL) == MT_ERR_DATA);
}

static void test_malformed(void) {
#define BAD(s, what) expect_malformed(s, sizeof(s) - 1, what)
    BAD("", "empty");
    BAD("   ", "blank");
    BAD("{", "open brace");
    BAD("{\"text\": \"abc}", "unterminated string");
    BAD("{\"text\" \"a\"}", "missing colon");
    BAD("{\"text\": }", "missing value");
    BAD("{text: \"a\"}", "unquoted key");
    BAD("{'text': 'a'}", "single quotes");
    BAD("[1, 2]", "top-level array");
    BAD("\"text\"", "top-level string");
    BAD("{\"text\": \"a\"} x", "trailing text");
    BAD("{\"text\": \"a\"}{}", "two objects");
    BAD("{\"a\": 1,}", "trailing comma");
    BAD("{\"a\": [1,]}", "trailing comma in array");
    BAD("{\"a\": 1 \"b\": 2}", "missing comma");
    BAD("{\"a\": tru}", "bad literal");
    BAD("{\"a\": nul}", "bad literal");
    BAD("{\"a\": 01}", "leading zero");
    BAD("{\"a\": 1.}", "bare dot");
    BAD("{\"a\": .5}", "leading dot");
    BAD("{\"a\": 1e}", "empty exponent");
    BAD("{\"a\": -}", "bare minus");
    BAD("{\"a\": +1}", "plus sign");
    BAD("{\"text\": \"a\\x\"}", "bad escape");
    BAD("{\"text\": \"a\\u12\"}", "short \\u");
    BAD("{\"text\": \"a\\u12G4\"}", "non-hex \\u");
    BAD("{\"text\": \"\\ud83d\"}", "lone high surrogate");
    BAD("{\"text\": \"\\ud83dx\"}", "high surrogate then text");
    BAD("{\"text\": \"\\ud83d\\u0041\"}", "high surrogate then non-surrogate");
    BAD("{\"text\": \"\\ude00\"}", "lone low surrogate");
    BAD("{\"text\": \"a\tb\"}", "raw tab");
    BAD("{\"text\": \"a\x01" "b\"}", "raw control");
    BAD("{\"text\": \"\xff\"}", "invalid UTF-8 byte");
    BAD("{\"text\": \"\xc0\x80\"}", "overlong NUL");
    BAD("{\"text\": \"\xe0\x80\xaf\"}", "overlong 3-byte");
    BAD("{\"text\": \"\xed\xa0\x80\"}", "encoded surrogate");
    BAD("{\"text\": \"\xf4\x90\x80\x80\"}", "above U+10FFFF");
    BAD("{\"text\": \"\xe4\xb8\"}", "truncated sequence");
    BAD("{\"text\": \"\xc3\"", "truncated at end");
    BAD("{\"text\": 5}", "number for a requested key");
    BAD("{\"text\": [\"a\"]}", "array for a requested key");
    BAD("{\"text\": null}", "null for a requested key");
    BAD("{\"a\": \"x\\", "backslash at end");
    /* A NUL byte outside a string. */
    expect_malformed("{\"a\": 1\0}", 9, "NUL byte");
    /* Nesting deep enough to overflow a naive recursive parser: an error, not a crash. */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 16);
    strcpy(deep, "{\"a\": ");
    size_t at = strlen(deep);
    for (size_t i = 0; i < depth; i++) deep[at++] = '[';
    for (size_t i = 0; i < depth; i++) deep[at++] = ']';
    deep[at++] = '}';
    expect_malformed(deep, at, "deep nesting");
    CHECK_STR_CONTAINS(mt_last_error(), "nested deeper");
    free(deep);
    /* The value of the key is named when it has the wrong type. */
    mt_json_string v = {0};
    CHECK(get1("{\"text\": 12}", "text", &v) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "\"text\"");
    CHECK_STR_CONTAINS(mt_last_error(), "number");
    CHECK(get1("{\"text\": \"a\\qb\"}", "text", &v) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "column 13");
    mt_json_string_free(&v);
#undef BAD
}

static void test_reader(void) {
    char dir[] = "/tmp/mt_test_jsonl_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/in.jsonl", dir);
    FILE *f = fopen(path, "wb");
    fputs("{\"text\": \"one\"}\n"          /* 1 */
          "{\"text\": \"two\"\n"           /* 2: malformed */
          "\n"                             /* 3: blank, skipped */
          "   \t\r\n"                      /* 4: blank, skipped */
          "{\"id\": 3}\r\n"                /* 5: no key (CRLF) */
          "{\"text\": \"\\u00e9\"}\r\n"    /* 6 */
          "{\"text\": \"last\"}",          /* 7: no final newline */
          f);
    fclose(f);

    const char *keys[1] = {"text"};
    mt_jsonl_reader r;
    int eof = 0;
    CHECK(mt_jsonl_open(&r, path, keys, 1) == MT_OK);
    CHECK(mt_jsonl_next(&r, &eof) == MT_OK && !eof);
    CHECK(r.line_number == 1 && strcmp(mt_jsonl_value(&r, 0)->bytes, "one") == 0);
    CHECK(mt_jsonl_next(&r, &eof) == MT_ERR_DATA);
    char want[300];
    snprintf(want, sizeof want, "%s:2: column", path);
    CHECK_STR_CONTAINS(mt_last_error(), want);
    CHECK(mt_jsonl_next(&r, &eof) == MT_OK && !eof);
    CHECK(r.line_number == 5 && !mt_jsonl_value(&r, 0)->found);
    CHECK(mt_jsonl_next(&r, &eof) == MT_OK && !eof);
    CHECK(r.line_number == 6 && strcmp(mt_jsonl_value(&r, 0)->bytes, "\xc3\xa9") == 0);
    CHECK(mt_jsonl_next(&r, &eof) == MT_OK && !eof);
    CHECK(r.line_number == 7 && strcmp(mt_jsonl_value(&r, 0)->bytes, "last") == 0);
    CHECK(mt_jsonl_next(&r, &eof) == MT_OK && eof);
    CHECK(mt_jsonl_next(&r, &eof) == MT_OK && eof);
    CHECK(r.n_bytes_read > 0);
    mt_jsonl_close(&r);

    /* Missing file and a directory: MT_ERR_IO naming the path. */
    snprintf(path, sizeof path, "%s/missing.jsonl", dir);
    CHECK(mt_jsonl_open(&r, path, keys, 1) == MT_ERR_IO);
    CHECK_STR_CONTAINS(mt_last_error(), path);
    CHECK_STR_CONTAINS(mt_last_error(), "No such file");
    CHECK(mt_jsonl_open(&r, dir, keys, 1) == MT_ERR_IO);
    CHECK_STR_CONTAINS(mt_last_error(), "directory");
    mt_jsonl_close(&r); /* safe after a failed open */

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* One grammar: the reader is the document parser in line mode; the document parser itself stays
 * strict RFC 8259 (no NaN), locates errors by path:line:col, and a reused parser gives the
 * same answers line after line. */
static void test_shared_parser(void) {
    mt_json_doc doc;
    const char *nan_doc = "{\"a\": NaN}";
    CHECK(mt_json_doc_parse(&doc, nan_doc, strlen(nan_doc), "x.json") == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "x.json:1:7:");
    mt_json_doc_free(&doc);
    const char *esc = "{\n\"a\": \"\\q\"}";
    CHECK(mt_json_doc_parse(&doc, esc, strlen(esc), "y.json") == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "y.json:2:8: invalid escape");
    mt_json_doc_free(&doc);
    mt_json_parser *parser = NULL;
    CHECK(mt_json_parser_new(&parser, MT_JSONL_PARSER_FLAGS) == MT_OK);
    const char *keys[1] = {"text"};
    mt_json_string v = {0};
    for (int rep = 0; rep < 3; rep++) {
        const char *good = "{\"n\": -Infinity, \"text\": \"x\\u00e9\"}";
        CHECK(mt_json_extract_strings_with(parser, good, strlen(good), keys, 1, &v) == MT_OK);
        CHECK(v.found && strcmp(v.bytes, "x\xc3\xa9") == 0);
        const char *bad = "{\"text\": 1, \"text\": \"late\"}";
        CHECK(mt_json_extract_strings_with(parser, bad, strlen(bad), keys, 1, &v) == MT_ERR_DATA);
        CHECK_STR_CONTAINS(mt_last_error(), "column 10: key \"text\" holds a number");
    }
    mt_json_string_free(&v);
    mt_json_parser_free(parser);
}

int main(void) {
    test_values();
    test_shared_parser();
    test_malformed();
    test_reader();
    TEST_MAIN_END();
}
