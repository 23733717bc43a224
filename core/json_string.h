/* json_string.h — JSON string literals (RFC 8259) both ways. The decoder of the JSON parser
 * (json_tree.c, which also serves the JSON-lines reader): escapes, \uXXXX with
 * surrogate pairs to UTF-8, raw UTF-8 validated (no overlong forms, no encoded surrogates,
 * nothing above U+10FFFF), raw control characters rejected. The decoder reports what went
 * wrong and where (mt_json_str_fault) and leaves the wording to the parser. The encoder is the
 * one every JSON writer uses (manifests, HF configs, safetensors headers, plans, logprobs). */
#ifndef MT_JSON_STRING_H
#define MT_JSON_STRING_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

/* Receives decoded bytes in order; a non-MT_OK return (its message already set) stops the
 * decoder, which then returns MT_JSTR_SINK with that status in fault->sink_status. */
typedef mt_status (*mt_json_str_sink)(void *ctx, const void *bytes, size_t n);

typedef enum {
    MT_JSTR_OK = 0,
    MT_JSTR_SINK,                /* the sink failed (fault->sink_status) */
    MT_JSTR_UNTERMINATED,        /* input ended inside the string: at = n */
    MT_JSTR_CONTROL,             /* raw byte < 0x20: at = that byte */
    MT_JSTR_BAD_UTF8,            /* invalid UTF-8 sequence: at = its first byte */
    MT_JSTR_UNTERMINATED_ESCAPE, /* input ended after a backslash: at = n */
    MT_JSTR_BAD_ESCAPE,          /* backslash + a letter that is no escape: at = the letter */
    MT_JSTR_BAD_HEX,             /* \u not followed by 4 hex digits: at = the 'u' */
    MT_JSTR_LONE_LOW,            /* \uDC00..\uDFFF first: at = its backslash */
    MT_JSTR_LONE_HIGH,           /* \uD800..\uDBFF not followed by a low surrogate escape:
                                    at = just after the high one (where the low should be) */
} mt_json_str_error;

typedef struct {
    size_t at;              /* offset of the offending byte (see mt_json_str_error) */
    size_t esc;             /* offset of the backslash of the escape at fault (escape errors) */
    unsigned cp;            /* the surrogate (MT_JSTR_LONE_LOW / MT_JSTR_LONE_HIGH) */
    mt_status sink_status;  /* MT_JSTR_SINK */
} mt_json_str_fault;

/* Decodes the string literal whose opening '"' is at s[*i] (s has n bytes). Decoded UTF-8 goes
 * to sink(ctx, ...) (sink NULL: validate only). On MT_JSTR_OK *i is just past the closing
 * quote; on an error *i is unspecified and *fault says where. */
mt_json_str_error mt_json_decode_string(const unsigned char *s, size_t n, size_t *i,
                                        mt_json_str_sink sink, void *ctx,
                                        mt_json_str_fault *fault);

/* Encodes s[0, n) as a JSON string literal, quotes included, to sink(ctx, ...): '"' and '\\'
 * escaped, \n \r \t as such, the other control bytes and DEL as \u00XX, every other byte (UTF-8
 * included) as it is. Returns the first non-MT_OK status of the sink. */
mt_status mt_json_encode_string(const char *s, size_t n, mt_json_str_sink sink, void *ctx);
/* mt_json_encode_string to f: s[0, n) / the NUL-terminated s (NULL writes ""). Errors show in
 * ferror(f). */
void mt_json_write_string_n(FILE *f, const char *s, size_t n);
void mt_json_write_string(FILE *f, const char *s);

#endif
