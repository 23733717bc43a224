/* json_lines.c — JSON-lines reader: each line is parsed by the project's JSON parser
 * (json_tree.h, with MT_JSON_LINE | MT_JSON_PYTHON_LITERALS: RFC 8259 plus Python json.loads'
 * NaN / Infinity / -Infinity, since Megatron's preprocess reads its input with json.loads),
 * and the string values of the requested top-level keys are copied out. The grammar, the
 * UTF-8 / escape / depth checks and the "column C: what" messages are the parser's. */
#include "core/data/json_lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


void mt_json_string_free(mt_json_string *s) {
    free(s->bytes);
    memset(s, 0, sizeof *s);
}

static mt_status jstr_append(mt_json_string *s, const char *p, size_t n) {
    size_t need = s->n_bytes + n + 1;
    if (need > s->n_capacity) {
        size_t cap = s->n_capacity ? s->n_capacity : 256;
        while (cap < need) cap *= 2;
        char *q = realloc(s->bytes, cap);
        if (!q) return mt_errorf(MT_ERR_OOM, "JSON string of %zu bytes: out of memory", need);
        s->bytes = q;
        s->n_capacity = cap;
    }
    memcpy(s->bytes + s->n_bytes, p, n);
    s->n_bytes += n;
    s->bytes[s->n_bytes] = 0;
    return MT_OK;
}

static void jstr_clear(mt_json_string *s) {
    s->n_bytes = 0;
    if (s->bytes) s->bytes[0] = 0;
}

/* Copies the requested keys' values from the line's object. A member whose key is requested
 * must hold a string (every occurrence: a repeated key is checked each time, the last wins). */
static mt_status extract(const mt_json_node *obj, const char *const *keys, int n_keys,
                         mt_json_string *values) {
    for (size_t m = 0; m < obj->n_items; m++) {
        const mt_json_node *v = &obj->items[m];
        for (int k = 0; k < n_keys; k++) {
            if (strlen(keys[k]) != v->n_key_bytes || memcmp(keys[k], v->key, v->n_key_bytes)) {
                continue;
            }
            if (v->type != MT_JSON_STRING) {
                return mt_errorf(MT_ERR_DATA, "column %d: key \"%s\" holds %s; expected a string",
                                 v->col, keys[k], mt_json_type_name(v->type));
            }
            jstr_clear(&values[k]);
            values[k].found = 1;
            mt_status st = jstr_append(&values[k], v->str, v->n_str_bytes);
            if (st != MT_OK) return st;
        }
    }
    return MT_OK;
}

mt_status mt_json_extract_strings_with(mt_json_parser *parser, const char *line,
                                       size_t n_line_bytes, const char *const *keys,
                                       int n_keys, mt_json_string *values) {
    for (int k = 0; k < n_keys; k++) {
        jstr_clear(&values[k]);
        values[k].found = 0;
    }
    const mt_json_node *root = NULL;
    mt_status st = mt_json_parser_parse(parser, line, n_line_bytes, NULL, &root);
    if (st != MT_OK) return st;
    return extract(root, keys, n_keys, values);
}

mt_status mt_json_extract_strings(const char *line, size_t n_line_bytes,
                                  const char *const *keys, int n_keys,
                                  mt_json_string *values) {
    mt_json_parser *parser = NULL;
    mt_status st = mt_json_parser_new(&parser, MT_JSONL_PARSER_FLAGS);
    if (st != MT_OK) return st;
    st = mt_json_extract_strings_with(parser, line, n_line_bytes, keys, n_keys, values);
    mt_json_parser_free(parser);
    return st;
}

/* ---- reader --------------------------------------------------------------------------- */

void mt_jsonl_close(mt_jsonl_reader *r) {
    if (!r) return;
    if (r->f && r->owns_f) fclose(r->f);
    free(r->path);
    free(r->line);
    if (r->keys) {
        for (int k = 0; k < r->n_keys; k++) free(r->keys[k]);
        free(r->keys);
    }
    if (r->values) {
        for (int k = 0; k < r->n_keys; k++) mt_json_string_free(&r->values[k]);
        free(r->values);
    }
    mt_json_parser_free(r->parser);
    memset(r, 0, sizeof *r);
}

mt_status mt_jsonl_open(mt_jsonl_reader *r, const char *path, const char *const *keys,
                        int n_keys) {
    mt_status st = MT_OK;
    memset(r, 0, sizeof *r);
    int is_stdin = strcmp(path, "-") == 0;
    r->path = strdup(is_stdin ? "<stdin>" : path);
    r->keys = calloc((size_t)(n_keys > 0 ? n_keys : 1), sizeof *r->keys);
    r->values = calloc((size_t)(n_keys > 0 ? n_keys : 1), sizeof *r->values);
    if (!r->path || !r->keys || !r->values ||
        mt_json_parser_new(&r->parser, MT_JSONL_PARSER_FLAGS) != MT_OK) {
        st = mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
        goto out;
    }
    r->n_keys = n_keys;
    for (int k = 0; k < n_keys; k++) {
        r->keys[k] = strdup(keys[k]);
        if (!r->keys[k]) {
            st = mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
            goto out;
        }
    }
    if (is_stdin) {
        r->f = stdin;
    } else {
        r->f = fopen(path, "rb");
        if (!r->f) {
            st = mt_errorf(MT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
            goto out;
        }
        r->owns_f = 1;
    }
    struct stat sb;
    if (fstat(fileno(r->f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot read: is a directory", r->path);
        goto out;
    }
out:
    if (st != MT_OK) mt_jsonl_close(r);
    return st;
}

mt_status mt_jsonl_next(mt_jsonl_reader *r, int *eof) {
    *eof = 0;
    for (;;) {
        errno = 0;
        ssize_t got = getline(&r->line, &r->n_line_capacity, r->f);
        if (got < 0) {
            if (ferror(r->f)) {
                return mt_errorf(MT_ERR_IO, "%s: read failed after line %lld: %s", r->path,
                                 (long long)r->line_number, strerror(errno ? errno : EIO));
            }
            *eof = 1;
            return MT_OK;
        }
        r->line_number++;
        r->n_bytes_read += (uint64_t)got;
        size_t n = (size_t)got;
        if (n && r->line[n - 1] == '\n') n--;
        r->n_line_bytes = n;
        size_t i = 0;
        while (i < n && (r->line[i] == ' ' || r->line[i] == '\t' || r->line[i] == '\r')) i++;
        if (i == n) continue; /* blank line */
        mt_status st = mt_json_extract_strings_with(r->parser, r->line, n,
                                                    (const char *const *)r->keys, r->n_keys,
                                                    r->values);
        if (st != MT_OK) {
            return mt_error_context(st, "%s:%lld: ", r->path, (long long)r->line_number);
        }
        return MT_OK;
    }
}

const mt_json_string *mt_jsonl_value(const mt_jsonl_reader *r, int k) { return &r->values[k]; }
