/* json_string.c — JSON string literals (json_string.h): mt_json_decode_string, the decoder
 * of the JSON parser (json_tree.c), with its helpers (hex digits, UTF-8 encode and validate),
 * and mt_json_encode_string, the encoder of every JSON writer. Plain runs go to the sink in one
 * call both ways. */
#include "core/json_string.h"

#include <string.h>

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

static size_t utf8_put(unsigned cp, unsigned char *o) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the valid UTF-8 sequence at s[0..n) (lead byte >= 0x80), 0 if invalid:
 * no overlong forms, no encoded surrogates, nothing above U+10FFFF. */
static size_t utf8_valid_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c == 0xe0) { len = 3; lo = 0xa0; }
    else if (c >= 0xe1 && c <= 0xec) len = 3;
    else if (c == 0xed) { len = 3; hi = 0x9f; }
    else if (c >= 0xee && c <= 0xef) len = 3;
    else if (c == 0xf0) { len = 4; lo = 0x90; }
    else if (c >= 0xf1 && c <= 0xf3) len = 4;
    else if (c == 0xf4) { len = 4; hi = 0x8f; }
    else return 0;
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < len; k++) {
        if (s[k] < 0x80 || s[k] > 0xbf) return 0;
    }
    return len;
}

#define PUT(src, len)                                             \
    do {                                                          \
        if (sink) {                                               \
            mt_status put_st_ = sink(ctx, (src), (len));          \
            if (put_st_ != MT_OK) {                               \
                fault->sink_status = put_st_;                     \
                return MT_JSTR_SINK;                              \
            }                                                     \
        }                                                         \
    } while (0)

#define FAIL(err, where)                                          \
    do {                                                          \
        fault->at = (where);                                      \
        return (err);                                             \
    } while (0)

mt_json_str_error mt_json_decode_string(const unsigned char *s, size_t n, size_t *i,
                                        mt_json_str_sink sink, void *ctx,
                                        mt_json_str_fault *fault) {
    size_t p = *i + 1; /* past the opening quote */
    for (;;) {
        /* A run of plain ASCII in one go. */
        size_t run = p;
        while (run < n) {
            unsigned char c = s[run];
            if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
            run++;
        }
        if (run > p) PUT(s + p, run - p);
        p = run;
        if (p >= n) FAIL(MT_JSTR_UNTERMINATED, n);
        unsigned char c = s[p];
        if (c == '"') {
            *i = p + 1;
            return MT_JSTR_OK;
        }
        if (c < 0x20) FAIL(MT_JSTR_CONTROL, p);
        if (c >= 0x80) {
            size_t len = utf8_valid_len(s + p, n - p);
            if (len == 0) FAIL(MT_JSTR_BAD_UTF8, p);
            PUT(s + p, len);
            p += len;
            continue;
        }
        /* Backslash escape. */
        fault->esc = p;
        if (p + 1 >= n) FAIL(MT_JSTR_UNTERMINATED_ESCAPE, p + 1);
        unsigned char e = s[p + 1], ch;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': ch = 0; break;
        default: FAIL(MT_JSTR_BAD_ESCAPE, p + 1);
        }
        if (e != 'u') {
            PUT(&ch, 1);
            p += 2;
            continue;
        }
        unsigned cp, lo;
        if (p + 6 > n || !hex4(s + p + 2, &cp)) FAIL(MT_JSTR_BAD_HEX, p + 1);
        fault->cp = cp;
        if (cp >= 0xdc00 && cp <= 0xdfff) FAIL(MT_JSTR_LONE_LOW, p);
        p += 6;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (p + 6 > n || s[p] != '\\' || s[p + 1] != 'u' || !hex4(s + p + 2, &lo) ||
                lo < 0xdc00 || lo > 0xdfff) {
                FAIL(MT_JSTR_LONE_HIGH, p);
            }
            p += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        unsigned char u[4];
        size_t nu = utf8_put(cp, u);
        PUT(u, nu);
    }
}

#define SINK(p, n)                                                \
    do {                                                          \
        mt_status sink_st_ = sink(ctx, (p), (n));                 \
        if (sink_st_ != MT_OK) return sink_st_;                   \
    } while (0)

mt_status mt_json_encode_string(const char *s, size_t n, mt_json_str_sink sink, void *ctx) {
    SINK("\"", 1);
    size_t run = 0; /* start of the pending run of bytes written as they are */
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"': memcpy(esc, "\\\"", 3); break;
        case '\\': memcpy(esc, "\\\\", 3); break;
        case '\n': memcpy(esc, "\\n", 3); break;
        case '\r': memcpy(esc, "\\r", 3); break;
        case '\t': memcpy(esc, "\\t", 3); break;
        default:
            if (c >= 0x20 && c != 0x7f) continue;
            snprintf(esc, sizeof esc, "\\u%04x", c);
        }
        if (i > run) SINK(s + run, i - run);
        SINK(esc, strlen(esc));
        run = i + 1;
    }
    if (n > run) SINK(s + run, n - run);
    return sink(ctx, "\"", 1);
}

static mt_status file_sink(void *ctx, const void *bytes, size_t n) {
    fwrite(bytes, 1, n, (FILE *)ctx);
    return MT_OK;
}

void mt_json_write_string_n(FILE *f, const char *s, size_t n) { (void)mt_json_encode_string(s, n, file_sink, f); }

void mt_json_write_string(FILE *f, const char *s) { mt_json_write_string_n(f, s ? s : "", s ? strlen(s) : 0); }
