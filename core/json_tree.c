/* json_tree.c — recursive-descent JSON parser into an arena-backed tree (json_tree.h).
 * Children of a container are gathered on one growable node stack and copied into the arena
 * when the container closes, so a document costs one node per value plus its strings.
 * Rule kept: every byte is checked (grammar, UTF-8, escapes, depth, number range) and every
 * message carries path:line:col. */
#include "json_tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static int hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = s[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (n < len) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
    if (cp >= 0xd800 && cp <= 0xdfff) return 0;
    return len;
}

/* Parses a string at p->i (which is '"') into p->buf (NUL-terminated, n_buf bytes). */
static mt_status parse_string(parser *p) {
    p->n_buf = 0;
    p->i++;
    for (;;) {
        size_t run = p->i;
        while (p->i < p->n && p->s[p->i] != '"' && p->s[p->i] != '\\' && p->s[p->i] >= 0x20 &&
               p->s[p->i] < 0x80) {
            p->i++;
        }
        if (p->i > run) {
            mt_status st = buf_put(p, p->s + run, p->i - run);
            if (st != MT_OK) return st;
        }
        if (p->i >= p->n) return perr(p, "unterminated string");
        unsigned char c = p->s[p->i];
        if (c == '"') {
            p->i++;
            break;
        }
        if (c < 0x20) return perr(p, "raw control character in a string (escape it)");
        if (c >= 0x80) {
            size_t len = utf8_len(p->s + p->i, p->n - p->i);
            if (!len) return perr(p, "invalid UTF-8 in a string");
            mt_status st = buf_put(p, p->s + p->i, len);
            if (st != MT_OK) return st;
            p->i += len;
            continue;
        }
        /* escape */
        if (p->i + 1 >= p->n) {
            p->i++;
            return perr(p, "unterminated escape");
        }
        char e = (char)p->s[p->i + 1], out;
        switch (e) {
        case '"': out = '"'; break;
        case '\\': out = '\\'; break;
        case '/': out = '/'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (p->i + 6 > p->n || !hex4(p->s + p->i + 2, &cp)) {
                p->i++;
                return perr(p, "\\u needs 4 hex digits");
            }
            p->i += 6;
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                p->i -= 6;
                return perr(p, "unpaired low surrogate escape");
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                    !hex4(p->s + p->i + 2, &lo) || lo < 0xdc00 || lo > 0xdfff) {
                    return perr(p, "high surrogate escape not followed by a low one");
                }
                p->i += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            unsigned char u[4];
            size_t nu;
            if (cp < 0x80) { u[0] = (unsigned char)cp; nu = 1; }
            else if (cp < 0x800) { u[0] = (unsigned char)(0xc0 | (cp >> 6)); u[1] = (unsigned char)(0x80 | (cp & 0x3f)); nu = 2; }
            else if (cp < 0x10000) { u[0] = (unsigned char)(0xe0 | (cp >> 12)); u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)); u[2] = (unsigned char)(0x80 | (cp & 0x3f)); nu = 3; }
            else { u[0] = (unsigned char)(0xf0 | (cp >> 18)); u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f)); u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)); u[3] = (unsigned char)(0x80 | (cp & 0x3f)); nu = 4; }
            mt_status st = buf_put(p, u, nu);
            if (st != MT_OK) return st;
            continue;
        }
        default:
            p->i++;
            return perr(p, "unknown escape");
        }
        mt_status st = buf_put(p, &out, 1);
        if (st != MT_OK) return st;
        p->i += 2;
    }
    p->buf[p->n_buf] = 0;
    return MT_OK;
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
    FILE *f = fopen(path, "rb");
    if (!f) return mt_errorf(MT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return mt_errorf(MT_ERR_IO, "%s: cannot read: not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    char *text = malloc(n + 1);
    if (!text) {
        fclose(f);
        return mt_errorf(MT_ERR_OOM, "%s: cannot hold %zu bytes", path, n);
    }
    size_t got = fread(text, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (got != n || bad) {
        free(text);
        return mt_errorf(MT_ERR_IO, "%s: read failed (%zu of %zu bytes)", path, got, n);
    }
    text[n] = 0;
    if (n == 0) {
        free(text);
        return mt_errorf(MT_ERR_DATA, "%s:1:1: the file is empty; expected JSON", path);
    }
    mt_status st = mt_json_doc_parse(doc, text, n, path);
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
