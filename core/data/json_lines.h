/* json_lines.h — a small streaming JSON-lines reader: one JSON object per line, parsed by
 * the project's one JSON parser (core/json_tree.h); pulls the string values of chosen
 * top-level keys (fully unescaped to UTF-8, \uXXXX and surrogate pairs included); everything
 * else on the line is validated by the same parser. Memory is bounded by the longest line,
 * never by the file.
 * Rules kept: a malformed line is MT_ERR_DATA with "path:line: column C: what" and the reader
 * stays usable (the caller may skip the line); an I/O failure is MT_ERR_IO and final. */
#ifndef MT_JSON_LINES_H
#define MT_JSON_LINES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/json_tree.h"
#include "core/status.h"

/* The parser flags of a JSON line (Python's NaN / Infinity literals accepted, as Megatron's
 * json.loads does). */
#define MT_JSONL_PARSER_FLAGS (MT_JSON_LINE | MT_JSON_PYTHON_LITERALS)

/* One extracted value: UTF-8 bytes (NUL-terminated; may contain NUL from \u0000). */
typedef struct {
    char *bytes;
    size_t n_bytes;
    size_t n_capacity;
    int found;  /* the key was present at top level (with a string value) */
} mt_json_string;

void mt_json_string_free(mt_json_string *s);

/* Parses one line (must be exactly one JSON object plus optional whitespace). For each
 * keys[k] present at the top level, values[k] receives its string value (the last one if the
 * key repeats); found = 0 for absent keys. A requested key whose value is not a string is an
 * error. Errors: MT_ERR_DATA "column C: ..." (C counts bytes from 1), MT_ERR_OOM. */
mt_status mt_json_extract_strings(const char *line, size_t n_line_bytes,
                                  const char *const *keys, int n_keys,
                                  mt_json_string *values);

/* The same with a parser made with MT_JSONL_PARSER_FLAGS and kept by the caller (one per
 * thread), so that lines after the first allocate nothing. */
mt_status mt_json_extract_strings_with(mt_json_parser *parser, const char *line,
                                       size_t n_line_bytes, const char *const *keys,
                                       int n_keys, mt_json_string *values);

typedef struct {
    FILE *f;
    int owns_f;                 /* 0 for stdin */
    char *path;                 /* for messages ("-" shown as "<stdin>") */
    char *line;                 /* getline buffer */
    size_t n_line_capacity;
    size_t n_line_bytes;        /* of the current line, without its newline */
    int64_t line_number;        /* 1-based number of the current line */
    uint64_t n_bytes_read;      /* bytes consumed so far, newlines included */
    int n_keys;
    char **keys;
    mt_json_string *values;     /* [n_keys] */
    mt_json_parser *parser;
} mt_jsonl_reader;

/* Opens path ("-" = stdin) to extract keys[0..n_keys). MT_ERR_IO names the file. */
mt_status mt_jsonl_open(mt_jsonl_reader *r, const char *path, const char *const *keys,
                        int n_keys);
/* Reads the next non-blank line and extracts the keys. At end of input returns MT_OK with
 * *eof = 1. MT_ERR_DATA: the line is malformed (message "path:line: ..."); the next call
 * continues with the following line. MT_ERR_IO: reading failed. */
mt_status mt_jsonl_next(mt_jsonl_reader *r, int *eof);
/* The value of keys[k] on the current line (found = 0 when the line lacks it). */
const mt_json_string *mt_jsonl_value(const mt_jsonl_reader *r, int k);
void mt_jsonl_close(mt_jsonl_reader *r);

#endif
