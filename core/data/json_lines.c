/* json_lines.c — JSON-lines reader: a recursive-descent validator over one line that copies
 * out the string values of requested top-level keys and skips the rest.
 * Grammar: RFC 8259, plus Python json.loads' NaN / Infinity / -Infinity literals (Megatron's
 * preprocess reads its input with json.loads). Strings must be valid UTF-8 and must not hold
 * raw control characters or unpaired surrogates (decoded by json_string.c). Nesting deeper than MT_JSON_MAX_DEPTH is an
 * error, so a hostile line cannot exhaust the stack. */
#include "core/data/json_lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json_string.h"

#define MT_JSON_MAX_DEPTH 512

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

typedef struct {
    const unsigned char *s;
    size_t n;
    size_t i;
} parser;

static mt_status perr(const parser *p, const char *what) {
    if (p->i >= p->n) return mt_errorf(MT_ERR_DATA, "column %zu: %s (line ended)", p->i + 1, what);
    unsigned c = p->s[p->i];
    if (c >= 0x20 && c < 0x7f) {
        return mt_errorf(MT_ERR_DATA, "column %zu: %s, found '%c'", p->i + 1, what, c);
    }
    return mt_errorf(MT_ERR_DATA, "column %zu: %s, found byte 0x%02x", p->i + 1, what, c);
}

static void skip_ws(parser *p) {
    while (p->i < p->n) {
        unsigned char c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->i++;
    }
}

static mt_status jstr_sink(void *ctx, const void *bytes, size_t n) {
    return jstr_append(ctx, bytes, n);
}

/* At '"': parses a string, appending its decoded bytes to out (NULL: validate only). The
 * decoding is json_string.c's; the messages here are this reader's ("column C: ..."). */
static mt_status parse_string(parser *p, mt_json_string *out) {
    mt_json_str_fault f;
    mt_json_str_error e = mt_json_decode_string(p->s, p->n, &p->i, out ? jstr_sink : NULL, out,
                                                &f);
    switch (e) {
    case MT_JSTR_OK: return MT_OK;
    case MT_JSTR_SINK: return f.sink_status;
    case MT_JSTR_UNTERMINATED:
        p->i = f.at;
        return perr(p, "unterminated string");
    case MT_JSTR_CONTROL:
        return mt_errorf(MT_ERR_DATA,
                         "column %zu: raw control character 0x%02x inside a string (JSON "
                         "needs it escaped, e.g. \\n)", f.at + 1, (unsigned)p->s[f.at]);
    case MT_JSTR_BAD_UTF8:
        return mt_errorf(MT_ERR_DATA, "column %zu: invalid UTF-8 byte 0x%02x in a string",
                         f.at + 1, (unsigned)p->s[f.at]);
    case MT_JSTR_UNTERMINATED_ESCAPE:
        p->i = f.at;
        return perr(p, "unterminated escape");
    case MT_JSTR_BAD_ESCAPE:
        p->i = f.at;
        return perr(p, "invalid escape (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
    case MT_JSTR_BAD_HEX:
        return mt_errorf(MT_ERR_DATA, "column %zu: \\u must be followed by 4 hex digits",
                         f.esc + 1);
    case MT_JSTR_LONE_LOW:
        return mt_errorf(MT_ERR_DATA, "column %zu: unpaired low surrogate \\u%04X", f.esc + 1,
                         f.cp);
    case MT_JSTR_LONE_HIGH:
        return mt_errorf(MT_ERR_DATA,
                         "column %zu: high surrogate \\u%04X is not followed by a low "
                         "surrogate \\uDC00..\\uDFFF", f.esc + 1, f.cp);
    }
    return mt_errorf(MT_ERR_INTERNAL, "column %zu: JSON string decoder error %d", p->i + 1,
                     (int)e);
}

static int match_word(parser *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i >= n && memcmp(p->s + p->i, w, n) == 0) {
        p->i += n;
        return 1;
    }
    return 0;
}

static int is_digit(parser *p) { return p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9'; }

static mt_status parse_number(parser *p) {
    if (p->i < p->n && p->s[p->i] == '-') {
        p->i++;
        if (match_word(p, "Infinity")) return MT_OK;
    }
    if (!is_digit(p)) return perr(p, "expected a digit");
    if (p->s[p->i] == '0') {
        p->i++;
    } else {
        while (is_digit(p)) p->i++;
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (!is_digit(p)) return perr(p, "expected a digit after '.'");
        while (is_digit(p)) p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (!is_digit(p)) return perr(p, "expected a digit in the exponent");
        while (is_digit(p)) p->i++;
    }
    return MT_OK;
}

static mt_status skip_value(parser *p, int depth);

/* At '{' or '['. At depth 0 (the line's object) requested keys are captured. */
static mt_status parse_container(parser *p, int depth, const char *const *keys, int n_keys,
                                 mt_json_string *values, mt_json_string *key_buf) {
    if (depth >= MT_JSON_MAX_DEPTH) {
        return mt_errorf(MT_ERR_DATA, "column %zu: nested deeper than %d levels", p->i + 1,
                         MT_JSON_MAX_DEPTH);
    }
    int is_object = p->s[p->i] == '{';
    char close = is_object ? '}' : ']';
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == (unsigned char)close) {
        p->i++;
        return MT_OK;
    }
    for (;;) {
        mt_status st;
        if (is_object) {
            if (p->i >= p->n || p->s[p->i] != '"') return perr(p, "expected a \"key\"");
            int want = -1;
            if (depth == 0 && n_keys > 0) {
                jstr_clear(key_buf);
                st = parse_string(p, key_buf);
                if (st != MT_OK) return st;
                for (int k = 0; k < n_keys; k++) {
                    if (strlen(keys[k]) == key_buf->n_bytes &&
                        memcmp(keys[k], key_buf->bytes, key_buf->n_bytes) == 0) {
                        want = k;
                    }
                }
            } else {
                st = parse_string(p, NULL);
                if (st != MT_OK) return st;
            }
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return perr(p, "expected ':' after a key");
            p->i++;
            skip_ws(p);
            if (want >= 0) {
                if (p->i >= p->n || p->s[p->i] != '"') {
                    const char *kind = "a value that is not a string";
                    if (p->i < p->n) {
                        switch (p->s[p->i]) {
                        case '{': kind = "an object"; break;
                        case '[': kind = "an array"; break;
                        case 'n': kind = "null"; break;
                        case 't': case 'f': kind = "a boolean"; break;
                        default: kind = "a number"; break;
                        }
                    }
                    return mt_errorf(MT_ERR_DATA,
                                     "column %zu: key \"%s\" holds %s; expected a string",
                                     p->i + 1, keys[want], kind);
                }
                jstr_clear(&values[want]); /* a repeated key: the last one wins */
                values[want].found = 1;
                st = parse_string(p, &values[want]);
            } else {
                st = skip_value(p, depth + 1);
            }
            if (st != MT_OK) return st;
        } else {
            st = skip_value(p, depth + 1);
            if (st != MT_OK) return st;
        }
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            skip_ws(p);
            continue;
        }
        if (p->i < p->n && p->s[p->i] == (unsigned char)close) {
            p->i++;
            return MT_OK;
        }
        return perr(p, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static mt_status skip_value(parser *p, int depth) {
    if (p->i >= p->n) return perr(p, "expected a value");
    switch (p->s[p->i]) {
    case '"': return parse_string(p, NULL);
    case '{': case '[': return parse_container(p, depth, NULL, 0, NULL, NULL);
    case 't': if (match_word(p, "true")) return MT_OK; break;
    case 'f': if (match_word(p, "false")) return MT_OK; break;
    case 'n': if (match_word(p, "null")) return MT_OK; break;
    case 'N': if (match_word(p, "NaN")) return MT_OK; break;
    case 'I': if (match_word(p, "Infinity")) return MT_OK; break;
    default:
        if (p->s[p->i] == '-' || (p->s[p->i] >= '0' && p->s[p->i] <= '9')) return parse_number(p);
    }
    return perr(p, "expected a value");
}

mt_status mt_json_extract_strings(const char *line, size_t n_line_bytes,
                                  const char *const *keys, int n_keys,
                                  mt_json_string *values) {
    parser p = {(const unsigned char *)line, n_line_bytes, 0};
    mt_json_string key_buf = {0};
    for (int k = 0; k < n_keys; k++) {
        jstr_clear(&values[k]);
        values[k].found = 0;
    }
    skip_ws(&p);
    mt_status st;
    if (p.i >= p.n || p.s[p.i] != '{') {
        st = perr(&p, "expected a JSON object '{'");
        goto out;
    }
    st = parse_container(&p, 0, keys, n_keys, values, &key_buf);
    if (st != MT_OK) goto out;
    skip_ws(&p);
    if (p.i < p.n) st = perr(&p, "unexpected text after the object");
out:
    mt_json_string_free(&key_buf);
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
    if (!r->path || !r->keys || !r->values) {
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
        mt_status st = mt_json_extract_strings(r->line, n, (const char *const *)r->keys,
                                               r->n_keys, r->values);
        if (st != MT_OK) {
            return mt_error_context(st, "%s:%lld: ", r->path, (long long)r->line_number);
        }
        return MT_OK;
    }
}

const mt_json_string *mt_jsonl_value(const mt_jsonl_reader *r, int k) { return &r->values[k]; }
