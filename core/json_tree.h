/* json_tree.h — a whole-document JSON parser (RFC 8259) into a read-only tree whose every
 * node remembers its line and column, so that callers can report "file:line: what" about a
 * value, not only about a syntax error. Used for tokenizer files (GPT-2 vocab.json, Hugging
 * Face tokenizer.json) and, through a reusable mt_json_parser, for each line of a JSON-lines
 * file (json_lines.h): this is the project's one JSON grammar.
 * Rules kept: one arena per document (freed at once); nothing is trusted: strings must be
 * valid UTF-8 (escapes included, surrogates paired), nesting is bounded, numbers are checked;
 * errors are MT_ERR_DATA "path:line:col: what" (MT_ERR_IO when the file cannot be read). */
#ifndef MT_JSON_TREE_H
#define MT_JSON_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum {
    MT_JSON_NULL = 0,
    MT_JSON_FALSE,
    MT_JSON_TRUE,
    MT_JSON_NUMBER,
    MT_JSON_STRING,
    MT_JSON_ARRAY,
    MT_JSON_OBJECT
} mt_json_type;

typedef struct mt_json_node mt_json_node;
struct mt_json_node {
    mt_json_type type;
    int32_t line, col;        /* 1-based position of the value's first byte */
    int is_integer;           /* NUMBER written without fraction/exponent, fits int64 */
    int64_t integer;          /* NUMBER when is_integer */
    double number;            /* NUMBER */
    const char *str;          /* STRING: UTF-8, NUL-terminated (may hold NUL) */
    size_t n_str_bytes;
    const char *key;          /* set on members of an OBJECT: the member's name */
    size_t n_key_bytes;
    mt_json_node *items;      /* ARRAY elements / OBJECT members, in file order */
    size_t n_items;
};

typedef struct {
    mt_json_node *root;
    char *path;               /* for messages */
    void *arena;              /* private */
} mt_json_doc;

/* Reads and parses a whole file. On failure doc is left empty (safe to free). */
mt_status mt_json_doc_load(mt_json_doc *doc, const char *path);
/* Parses text[0, n_text_bytes); name is used in messages. */
mt_status mt_json_doc_parse(mt_json_doc *doc, const char *text, size_t n_text_bytes,
                            const char *name);
void mt_json_doc_free(mt_json_doc *doc);

/* A parser reused for many small documents (the lines of a JSON-lines file): its arena and
 * scratch buffers are kept between parses, so a warm parse allocates nothing. Not shared
 * between threads (one per thread). */
typedef struct mt_json_parser mt_json_parser;

enum {
    /* The text is one line of a JSON-lines file: the value must be an object, no byte order
     * mark, and messages say "column C: what" (the caller adds "path:line: "). */
    MT_JSON_LINE = 1u << 0,
    /* Python json.loads' NaN, Infinity and -Infinity (NUMBER nodes, not integers). */
    MT_JSON_PYTHON_LITERALS = 1u << 1,
};

mt_status mt_json_parser_new(mt_json_parser **out, unsigned flags);
void mt_json_parser_free(mt_json_parser *p);
/* Parses text[0, n_text_bytes) (name is used in messages unless MT_JSON_LINE). *root stays
 * valid until the next parse or mt_json_parser_free; NULL on failure. */
mt_status mt_json_parser_parse(mt_json_parser *p, const char *text, size_t n_text_bytes,
                               const char *name, const mt_json_node **root);

/* Member `key` of an object (the last one if repeated); NULL when absent or not an object. */
const mt_json_node *mt_json_get(const mt_json_node *obj, const char *key);
/* "null", "a string", "an object", ... for messages. */
const char *mt_json_type_name(mt_json_type t);

#endif
