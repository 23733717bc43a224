/* json_tree.c — recursive-descent JSON parser into an arena-backed tree (json_tree.h).
 * Children of a container are gathered on one growable node stack and copied into the arena
 * when the container closes, so a document costs one node per value plus its strings.
 * Rule kept: every byte is checked (grammar, UTF-8, escapes, depth, number range) and every
 * message carries path:line:col. */
#include "core/json_tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_read.h"
#include "core/json_string.h"

#define MAX_DEPTH 512
#define CHUNK_BYTES (1u << 20)

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
        size_t cap = n_bytes > CHUNK_BYTES ? n_bytes : CHUNK_BYTES;
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

static void arena_free(arena *a) {
    for (chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
}

/* ---- parser --------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *s;
    size_t n, i;
    int32_t line;
    size_t line_start;       /* offset of the current line's first byte */
    const char *name;
    arena *ar;
    mt_json_node *stack;     /* pending children */
    size_t n_stack, n_stack_capacity;
    char *buf;               /* string scratch */
    size_t n_buf, n_buf_capacity;
} parser;

static int32_t col_of(const parser *p, size_t i) { return (int32_t)(i - p->line_start + 1); }

static mt_status perr(const parser *p, const char *what) {
    if (p->i >= p->n) {
        return mt_errorf(MT_ERR_DATA, "%s:%d:%d: %s (the file ended)", p->name, p->line,
                         col_of(p, p->i), what);
    }
    unsigned c = p->s[p->i];
    if (c >= 0x20 && c < 0x7f) {
        return mt_errorf(MT_ERR_DATA, "%s:%d:%d: %s, found '%c'", p->name, p->line,
                         col_of(p, p->i), what, c);
    }
    return mt_errorf(MT_ERR_DATA, "%s:%d:%d: %s, found byte 0x%02x", p->name, p->line,
                     col_of(p, p->i), what, c);
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

static mt_status buf_put(parser *p, const void *src, size_t n) {
    if (p->n_buf + n + 1 > p->n_buf_capacity) {
        size_t cap = p->n_buf_capacity ? p->n_buf_capacity : 256;
        while (cap < p->n_buf + n + 1) cap *= 2;
        char *q = realloc(p->buf, cap);
        if (!q) return mt_errorf(MT_ERR_OOM, "%s: out of memory", p->name);
        p->buf = q;
        p->n_buf_capacity = cap;
    }
    memcpy(p->buf + p->n_buf, src, n);
    p->n_buf += n;
    return MT_OK;
}

static mt_status buf_sink(void *ctx, const void *bytes, size_t n) {
    return buf_put(ctx, bytes, n);
}

/* Parses a string at p->i (which is '"') into p->buf (NUL-terminated, n_buf bytes). The
 * decoding is json_string.c's; the messages here are this parser's (path:line:col). */
static mt_status parse_string(parser *p) {
    p->n_buf = 0;
    mt_json_str_fault f;
    mt_json_str_error e = mt_json_decode_string(p->s, p->n, &p->i, buf_sink, p, &f);
    if (e == MT_JSTR_OK) {
        /* Room for the NUL even for "" as the first string (p->buf is still NULL then). */
        mt_status st = buf_put(p, "", 0);
        if (st != MT_OK) return st;
        p->buf[p->n_buf] = 0;
        return MT_OK;
    }
    if (e == MT_JSTR_SINK) return f.sink_status;
    p->i = f.at;
    switch (e) {
    case MT_JSTR_UNTERMINATED: return perr(p, "unterminated string");
    case MT_JSTR_CONTROL: return perr(p, "raw control character in a string (escape it)");
    case MT_JSTR_BAD_UTF8: return perr(p, "invalid UTF-8 in a string");
    case MT_JSTR_UNTERMINATED_ESCAPE: return perr(p, "unterminated escape");
    case MT_JSTR_BAD_ESCAPE: return perr(p, "unknown escape");
    case MT_JSTR_BAD_HEX: return perr(p, "\\u needs 4 hex digits");
    case MT_JSTR_LONE_LOW: return perr(p, "unpaired low surrogate escape");
    case MT_JSTR_LONE_HIGH: return perr(p, "high surrogate escape not followed by a low one");
    default: return perr(p, "JSON string decoder error");
    }
}

static mt_status copy_buf(parser *p, const char **out, size_t *n_out) {
    char *q = arena_alloc(p->ar, p->n_buf + 1);
    if (!q) return mt_errorf(MT_ERR_OOM, "%s: out of memory", p->name);
    memcpy(q, p->buf, p->n_buf);
    q[p->n_buf] = 0;
    *out = q;
    *n_out = p->n_buf;
    return MT_OK;
}

static mt_status parse_number(parser *p, mt_json_node *nd) {
    size_t b = p->i;
    if (p->s[p->i] == '-') p->i++;
    if (p->i >= p->n) return perr(p, "expected a digit");
    if (p->s[p->i] == '0') {
        p->i++;
    } else if (p->s[p->i] >= '1' && p->s[p->i] <= '9') {
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    } else {
        return perr(p, "expected a digit");
    }
    int is_int = 1;
    if (p->i < p->n && p->s[p->i] == '.') {
        is_int = 0;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') {
            return perr(p, "expected a digit after '.'");
        }
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        is_int = 0;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') {
            return perr(p, "expected a digit in the exponent");
        }
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    char tmp[64];
    size_t len = p->i - b;
    char *num = len < sizeof tmp ? tmp : malloc(len + 1);
    if (!num) return mt_errorf(MT_ERR_OOM, "%s: out of memory", p->name);
    memcpy(num, p->s + b, len);
    num[len] = 0;
    nd->type = MT_JSON_NUMBER;
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

static int match_word(parser *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n) != 0) return 0;
    p->i += n;
    return 1;
}

static mt_status push_node(parser *p, const mt_json_node *nd) {
    if (p->n_stack == p->n_stack_capacity) {
        size_t cap = p->n_stack_capacity ? p->n_stack_capacity * 2 : 256;
        mt_json_node *q = realloc(p->stack, cap * sizeof *q);
        if (!q) return mt_errorf(MT_ERR_OOM, "%s: out of memory", p->name);
        p->stack = q;
        p->n_stack_capacity = cap;
    }
    p->stack[p->n_stack++] = *nd;
    return MT_OK;
}

/* Parses one value at p->i into *nd (its children are moved into the arena). */
static mt_status parse_value(parser *p, mt_json_node *nd, int depth) {
    memset(nd, 0, sizeof *nd);
    nd->line = p->line;
    nd->col = col_of(p, p->i);
    if (p->i >= p->n) return perr(p, "expected a value");
    unsigned char c = p->s[p->i];
    mt_status st = MT_OK;
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
    if (c != '{' && c != '[') return perr(p, "expected a value");
    if (depth >= MAX_DEPTH) return perr(p, "nested deeper than 512 levels");
    int is_object = c == '{';
    char close = is_object ? '}' : ']';
    nd->type = is_object ? MT_JSON_OBJECT : MT_JSON_ARRAY;
    size_t base = p->n_stack;
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
    size_t n_items = p->n_stack - base;
    nd->items = arena_alloc(p->ar, n_items * sizeof *nd->items);
    if (!nd->items) return mt_errorf(MT_ERR_OOM, "%s: out of memory", p->name);
    memcpy(nd->items, p->stack + base, n_items * sizeof *nd->items);
    nd->n_items = n_items;
    p->n_stack = base;
    return MT_OK;
}

void mt_json_doc_free(mt_json_doc *doc) {
    if (!doc) return;
    if (doc->arena) arena_free(doc->arena);
    free(doc->path);
    memset(doc, 0, sizeof *doc);
}

mt_status mt_json_doc_parse(mt_json_doc *doc, const char *text, size_t n_text_bytes,
                            const char *name) {
    mt_status st = MT_OK;
    memset(doc, 0, sizeof *doc);
    parser p;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)text;
    p.n = n_text_bytes;
    p.line = 1;
    p.name = name;
    doc->path = strdup(name);
    p.ar = calloc(1, sizeof *p.ar);
    doc->arena = p.ar;
    if (!doc->path || !p.ar) {
        st = mt_errorf(MT_ERR_OOM, "%s: out of memory", name);
        goto out;
    }
    /* A UTF-8 byte order mark is tolerated, as Python's json.load(open(..., 'utf-8-sig')). */
    if (p.n >= 3 && memcmp(p.s, "\xef\xbb\xbf", 3) == 0) p.i = 3;
    skip_ws(&p);
    mt_json_node *root = arena_alloc(p.ar, sizeof *root);
    if (!root) {
        st = mt_errorf(MT_ERR_OOM, "%s: out of memory", name);
        goto out;
    }
    MT_CHECK(parse_value(&p, root, 0));
    skip_ws(&p);
    if (p.i < p.n) {
        st = perr(&p, "unexpected text after the JSON value");
        goto out;
    }
    doc->root = root;
out:
    free(p.stack);
    free(p.buf);
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
