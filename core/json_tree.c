/* json_tree.c — the JSON parser (json_tree.h): recursive descent into an arena-backed tree,
 * for whole documents (mt_json_doc) and, through a reusable mt_json_parser, for the lines of a
 * JSON-lines file (json_lines.c). Children of a container are gathered on one growable node stack and copied into the arena
 * when the container closes, so a document costs one node per value plus its strings.
 * Rule kept: every byte is checked (grammar, UTF-8, escapes, depth, number range) and every
 * message carries path:line:col. */
#include "core/json_tree.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_read.h"
#include "core/json_string.h"

#define MAX_DEPTH 512
#define CHUNK_BYTES (1u << 20)
#define MIN_CHUNK_BYTES (1u << 12)

/* ---- arena ---------------------------------------------------------------------------- */

typedef struct chunk {
    struct chunk *next;
    size_t n_used, n_capacity;
    _Alignas(16) unsigned char data[];
} chunk;

typedef struct {
    chunk *head;
} arena;

static void *arena_alloc(arena *a, size_t n_bytes) {
    n_bytes = (n_bytes + 15) & ~(size_t)15;
    if (!a->head || a->head->n_capacity - a->head->n_used < n_bytes) {
        /* Chunks double from MIN_CHUNK_BYTES up to CHUNK_BYTES: a one-line document costs
         * a few KB, a tokenizer.json MB-sized chunks. */
        size_t cap = a->head ? a->head->n_capacity * 2 : MIN_CHUNK_BYTES;
        if (cap > CHUNK_BYTES) cap = CHUNK_BYTES;
        if (cap < n_bytes) cap = n_bytes;
        chunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->n_used = 0;
        c->n_capacity = cap;
        a->head = c;
    }
    void *p = a->head->data + a->head->n_used;
    a->head->n_used += n_bytes;
    return p;
}

/* Keeps the newest (largest) chunk for the next parse and frees the rest, so a reused
 * parser's memory is bounded by its largest document. */
static void arena_reset(arena *a) {
    if (!a->head) return;
    for (chunk *c = a->head->next, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    a->head->next = NULL;
    a->head->n_used = 0;
}

static void arena_free(arena *a) {
    for (chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
}

/* ---- parser --------------------------------------------------------------------------- */

/* What survives between parses (mt_json_parser): the arena and the scratch buffers. */
struct mt_json_parser {
    unsigned flags;
    arena *ar;
    mt_json_node *stack;     /* pending children */
    size_t n_stack, n_stack_capacity;
    char *buf;               /* string scratch */
    size_t n_buf, n_buf_capacity;
};

/* One parse: the cursor over the text plus the persistent state. */
typedef struct {
    const unsigned char *s;
    size_t n, i;
    int32_t line;
    size_t line_start;       /* offset of the current line's first byte */
    const char *name;
    unsigned flags;
    struct mt_json_parser *st;
} parser;

static int32_t col_of(const parser *p, size_t i) { return (int32_t)(i - p->line_start + 1); }

/* The error at offset `at` (on the current line): "name:line:col: what" for a document,
 * "column C: what" for one JSON line (MT_JSON_LINE; the caller adds "path:line: "). With
 * `found`, what is followed by the byte found there (or that the input ended). */
static mt_status perr_at(const parser *p, size_t at, int found, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mt_status perr_at(const parser *p, size_t at, int found, const char *fmt, ...) {
    char what[256], tail[48] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int one_line = (p->flags & MT_JSON_LINE) != 0;
    if (found && at >= p->n) {
        snprintf(tail, sizeof tail, one_line ? " (line ended)" : " (the file ended)");
    } else if (found) {
        unsigned c = p->s[at];
        if (c >= 0x20 && c < 0x7f) snprintf(tail, sizeof tail, ", found '%c'", c);
        else snprintf(tail, sizeof tail, ", found byte 0x%02x", c);
    }
    if (one_line) return mt_errorf(MT_ERR_DATA, "column %d: %s%s", col_of(p, at), what, tail);
    return mt_errorf(MT_ERR_DATA, "%s:%d:%d: %s%s", p->name, p->line, col_of(p, at), what, tail);
}

static mt_status perr(const parser *p, const char *what) { return perr_at(p, p->i, 1, "%s", what); }

static mt_status oom(const parser *p) {
    return mt_errorf(MT_ERR_OOM, "%s: out of memory", p->name ? p->name : "JSON");
}

static void skip_ws(parser *p) {
    while (p->i < p->n) {
        unsigned char c = p->s[p->i];
        if (c == '\n') {
            p->line++;
            p->line_start = p->i + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            break;
        }
        p->i++;
    }
}

static mt_status buf_sink(void *ctx, const void *src, size_t n) {
    struct mt_json_parser *q = ctx;
    if (q->n_buf + n + 1 > q->n_buf_capacity) {
        size_t cap = q->n_buf_capacity ? q->n_buf_capacity : 256;
        while (cap < q->n_buf + n + 1) cap *= 2;
        char *b = realloc(q->buf, cap);
        if (!b) return mt_errorf(MT_ERR_OOM, "JSON string of %zu bytes: out of memory", q->n_buf + n);
        q->buf = b;
        q->n_buf_capacity = cap;
    }
    memcpy(q->buf + q->n_buf, src, n);
    q->n_buf += n;
    return MT_OK;
}

/* Parses a string at p->i (which is '"') into the scratch buffer (NUL-terminated, n_buf
 * bytes). The decoding is json_string.c's; the messages are this parser's. */
static mt_status parse_string(parser *p) {
    struct mt_json_parser *q = p->st;
    q->n_buf = 0;
    mt_json_str_fault f;
    mt_json_str_error e = mt_json_decode_string(p->s, p->n, &p->i, buf_sink, q, &f);
    switch (e) {
    case MT_JSTR_OK: {
        /* Room for the NUL even for "" as the first string (buf is still NULL then). */
        mt_status st = buf_sink(q, "", 0);
        if (st != MT_OK) return st;
        q->buf[q->n_buf] = 0;
        return MT_OK;
    }
    case MT_JSTR_SINK: return f.sink_status;
    case MT_JSTR_UNTERMINATED: return perr_at(p, f.at, 1, "unterminated string");
    case MT_JSTR_CONTROL:
        return perr_at(p, f.at, 0, "raw control character 0x%02x inside a string (JSON needs "
                       "it escaped, e.g. \\n)", (unsigned)p->s[f.at]);
    case MT_JSTR_BAD_UTF8:
        return perr_at(p, f.at, 0, "invalid UTF-8 byte 0x%02x in a string", (unsigned)p->s[f.at]);
    case MT_JSTR_UNTERMINATED_ESCAPE: return perr_at(p, f.at, 1, "unterminated escape");
    case MT_JSTR_BAD_ESCAPE:
        return perr_at(p, f.at, 1, "invalid escape (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t "
                       "\\uXXXX)");
    case MT_JSTR_BAD_HEX: return perr_at(p, f.esc, 0, "\\u must be followed by 4 hex digits");
    case MT_JSTR_LONE_LOW: return perr_at(p, f.esc, 0, "unpaired low surrogate \\u%04X", f.cp);
    case MT_JSTR_LONE_HIGH:
        return perr_at(p, f.esc, 0, "high surrogate \\u%04X is not followed by a low surrogate "
                       "\\uDC00..\\uDFFF", f.cp);
    }
    return mt_errorf(MT_ERR_INTERNAL, "JSON string decoder error %d", (int)e);
}

static mt_status copy_buf(parser *p, const char **out, size_t *n_out) {
    struct mt_json_parser *q = p->st;
    char *b = arena_alloc(q->ar, q->n_buf + 1);
    if (!b) return oom(p);
    memcpy(b, q->buf, q->n_buf + 1);
    *out = b;
    *n_out = q->n_buf;
    return MT_OK;
}

static int match_word(parser *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n) != 0) return 0;
    p->i += n;
    return 1;
}

static int at_digit(const parser *p) {
    return p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9';
}

static mt_status parse_number(parser *p, mt_json_node *nd) {
    size_t b = p->i;
    nd->type = MT_JSON_NUMBER;
    if (p->s[p->i] == '-') {
        p->i++;
        if ((p->flags & MT_JSON_PYTHON_LITERALS) && match_word(p, "Infinity")) {
            nd->number = -HUGE_VAL;
            return MT_OK;
        }
    }
    if (!at_digit(p)) return perr(p, "expected a digit");
    if (p->s[p->i] == '0') {
        p->i++;
    } else {
        while (at_digit(p)) p->i++;
    }
    int is_int = 1;
    if (p->i < p->n && p->s[p->i] == '.') {
        is_int = 0;
        p->i++;
        if (!at_digit(p)) return perr(p, "expected a digit after '.'");
        while (at_digit(p)) p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        is_int = 0;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (!at_digit(p)) return perr(p, "expected a digit in the exponent");
        while (at_digit(p)) p->i++;
    }
    char tmp[64];
    size_t len = p->i - b;
    char *num = len < sizeof tmp ? tmp : malloc(len + 1);
    if (!num) return oom(p);
    memcpy(num, p->s + b, len);
    num[len] = 0;
    nd->number = strtod(num, NULL);
    if (is_int) {
        errno = 0;
        long long v = strtoll(num, NULL, 10);
        if (errno == 0) {
            nd->is_integer = 1;
            nd->integer = v;
        }
    }
    if (num != tmp) free(num);
    return MT_OK;
}

static mt_status push_node(parser *p, const mt_json_node *nd) {
    struct mt_json_parser *q = p->st;
    if (q->n_stack == q->n_stack_capacity) {
        size_t cap = q->n_stack_capacity ? q->n_stack_capacity * 2 : 64;
        mt_json_node *b = realloc(q->stack, cap * sizeof *b);
        if (!b) return oom(p);
        q->stack = b;
        q->n_stack_capacity = cap;
    }
    q->stack[q->n_stack++] = *nd;
    return MT_OK;
}

/* Parses one value at p->i into *nd (its children are moved into the arena). */
static mt_status parse_value(parser *p, mt_json_node *nd, int depth) {
    struct mt_json_parser *q = p->st;
    memset(nd, 0, sizeof *nd);
    nd->line = p->line;
    nd->col = col_of(p, p->i);
    if (p->i >= p->n) return perr(p, "expected a value");
    unsigned char c = p->s[p->i];
    mt_status st = MT_OK;
    if (depth == 0 && (p->flags & MT_JSON_LINE) && c != '{') {
        return perr(p, "expected a JSON object '{'");
    }
    if (c == '"') {
        st = parse_string(p);
        if (st != MT_OK) return st;
        nd->type = MT_JSON_STRING;
        return copy_buf(p, &nd->str, &nd->n_str_bytes);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, nd);
    if (c == 't' && match_word(p, "true")) { nd->type = MT_JSON_TRUE; return MT_OK; }
    if (c == 'f' && match_word(p, "false")) { nd->type = MT_JSON_FALSE; return MT_OK; }
    if (c == 'n' && match_word(p, "null")) { nd->type = MT_JSON_NULL; return MT_OK; }
    if ((p->flags & MT_JSON_PYTHON_LITERALS) && ((c == 'N' && match_word(p, "NaN")) ||
                                                 (c == 'I' && match_word(p, "Infinity")))) {
        nd->type = MT_JSON_NUMBER;
        nd->number = c == 'N' ? NAN : HUGE_VAL;
        return MT_OK;
    }
    if (c != '{' && c != '[') return perr(p, "expected a value");
    if (depth >= MAX_DEPTH) {
        return perr_at(p, p->i, 0, "nested deeper than %d levels", MAX_DEPTH);
    }
    int is_object = c == '{';
    char close = is_object ? '}' : ']';
    nd->type = is_object ? MT_JSON_OBJECT : MT_JSON_ARRAY;
    size_t base = q->n_stack;
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == (unsigned char)close) {
        p->i++;
        return MT_OK;
    }
    for (;;) {
        mt_json_node child;
        const char *key = NULL;
        size_t n_key = 0;
        if (is_object) {
            if (p->i >= p->n || p->s[p->i] != '"') return perr(p, "expected a \"key\"");
            st = parse_string(p);
            if (st != MT_OK) return st;
            st = copy_buf(p, &key, &n_key);
            if (st != MT_OK) return st;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return perr(p, "expected ':' after a key");
            p->i++;
            skip_ws(p);
        }
        st = parse_value(p, &child, depth + 1);
        if (st != MT_OK) return st;
        child.key = key;
        child.n_key_bytes = n_key;
        st = push_node(p, &child);
        if (st != MT_OK) return st;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            skip_ws(p);
            continue;
        }
        if (p->i < p->n && p->s[p->i] == (unsigned char)close) {
            p->i++;
            break;
        }
        return perr(p, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    size_t n_items = q->n_stack - base;
    nd->items = arena_alloc(q->ar, n_items * sizeof *nd->items);
    if (!nd->items) return oom(p);
    memcpy(nd->items, q->stack + base, n_items * sizeof *nd->items);
    nd->n_items = n_items;
    q->n_stack = base;
    return MT_OK;
}

/* Parses text[start, n) as one JSON value (whitespace around it allowed) into q's arena. */
static mt_status parse_text(struct mt_json_parser *q, const char *text, size_t n, size_t start,
                            const char *name, const mt_json_node **root_out) {
    parser p = {(const unsigned char *)text, n, start, 1, 0, name, q->flags, q};
    q->n_stack = 0;
    *root_out = NULL;
    skip_ws(&p);
    mt_json_node *root = arena_alloc(q->ar, sizeof *root);
    if (!root) return oom(&p);
    mt_status st = parse_value(&p, root, 0);
    if (st != MT_OK) return st;
    skip_ws(&p);
    if (p.i < p.n) {
        return perr(&p, (q->flags & MT_JSON_LINE) ? "unexpected text after the object"
                                                  : "unexpected text after the JSON value");
    }
    *root_out = root;
    return MT_OK;
}

mt_status mt_json_parser_new(mt_json_parser **out, unsigned flags) {
    *out = NULL;
    mt_json_parser *q = calloc(1, sizeof *q);
    if (q) q->ar = calloc(1, sizeof *q->ar);
    if (!q || !q->ar) {
        free(q);
        return mt_errorf(MT_ERR_OOM, "JSON parser: out of memory");
    }
    q->flags = flags;
    *out = q;
    return MT_OK;
}

void mt_json_parser_free(mt_json_parser *q) {
    if (!q) return;
    if (q->ar) arena_free(q->ar);
    free(q->stack);
    free(q->buf);
    free(q);
}

mt_status mt_json_parser_parse(mt_json_parser *q, const char *text, size_t n_text_bytes,
                               const char *name, const mt_json_node **root) {
    arena_reset(q->ar);
    return parse_text(q, text, n_text_bytes, 0, name, root);
}

void mt_json_doc_free(mt_json_doc *doc) {
    if (!doc) return;
    if (doc->arena) arena_free(doc->arena);
    free(doc->path);
    memset(doc, 0, sizeof *doc);
}

mt_status mt_json_doc_parse(mt_json_doc *doc, const char *text, size_t n_text_bytes,
                            const char *name) {
    memset(doc, 0, sizeof *doc);
    mt_json_parser *q = NULL;
    mt_status st = mt_json_parser_new(&q, 0);
    if (st != MT_OK) return st;
    doc->path = strdup(name);
    if (!doc->path) {
        mt_json_parser_free(q);
        return mt_errorf(MT_ERR_OOM, "%s: out of memory", name);
    }
    /* A UTF-8 byte order mark is tolerated, as Python's json.load(open(..., 'utf-8-sig')). */
    size_t start = n_text_bytes >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    const mt_json_node *root = NULL;
    st = parse_text(q, text, n_text_bytes, start, name, &root);
    /* The tree lives in the arena, which the document takes over. */
    doc->arena = q->ar;
    q->ar = NULL;
    mt_json_parser_free(q);
    doc->root = (mt_json_node *)root;
    if (st != MT_OK) mt_json_doc_free(doc);
    return st;
}

mt_status mt_json_doc_load(mt_json_doc *doc, const char *path) {
    memset(doc, 0, sizeof *doc);
    char *text;
    size_t n;
    mt_status st = mt_read_whole_file(path, &text, &n);
    if (st != MT_OK) return st;
    if (n == 0) {
        free(text);
        return mt_errorf(MT_ERR_DATA, "%s:1:1: the file is empty; expected JSON", path);
    }
    st = mt_json_doc_parse(doc, text, n, path);
    free(text);
    return st;
}

const mt_json_node *mt_json_get(const mt_json_node *obj, const char *key) {
    if (!obj || obj->type != MT_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    const mt_json_node *found = NULL;
    for (size_t i = 0; i < obj->n_items; i++) {
        const mt_json_node *m = &obj->items[i];
        if (m->n_key_bytes == n && memcmp(m->key, key, n) == 0) found = m;
    }
    return found;
}

const char *mt_json_type_name(mt_json_type t) {
    switch (t) {
    case MT_JSON_NULL: return "null";
    case MT_JSON_FALSE: case MT_JSON_TRUE: return "a boolean";
    case MT_JSON_NUMBER: return "a number";
    case MT_JSON_STRING: return "a string";
    case MT_JSON_ARRAY: return "an array";
    case MT_JSON_OBJECT: return "an object";
    }
    return "?";
}
