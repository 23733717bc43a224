/* protobuf_wire.h — a reader of the protocol-buffer wire format (varints, fixed 32/64-bit
 * values, length-delimited fields), enough to walk a message whose field numbers the caller
 * knows (a SentencePiece .model file). Every read is bounds-checked: a truncated varint, a
 * length past the end of its message, a wire type the format does not have (groups 3 and 4,
 * 6, 7) or a field number 0 is MT_ERR_DATA naming `what` (the file) and the byte offset.
 * Rule kept: no allocation; a reader is a window on the caller's bytes. */
#ifndef MT_PROTOBUF_WIRE_H
#define MT_PROTOBUF_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

enum { MT_PB_VARINT = 0, MT_PB_FIXED64 = 1, MT_PB_LEN = 2, MT_PB_FIXED32 = 5 };

typedef struct {
    const uint8_t *base; /* start of the whole buffer (for offsets in messages) */
    const uint8_t *p, *end;
    const char *what;    /* the file, for messages */
} mt_pb_reader;

/* A reader over bytes[0, n_bytes). */
void mt_pb_init(mt_pb_reader *r, const void *bytes, size_t n_bytes, const char *what);
/* 1 while bytes are left in this message. */
static inline int mt_pb_more(const mt_pb_reader *r) { return r->p < r->end; }
/* The next field's number and wire type (MT_PB_*). */
mt_status mt_pb_tag(mt_pb_reader *r, uint32_t *field, int *wire);
/* A varint value (any wire type check is the caller's: use mt_pb_expect). */
mt_status mt_pb_varint(mt_pb_reader *r, uint64_t *v);
/* A little-endian 32-bit value (float fields). */
mt_status mt_pb_fixed32(mt_pb_reader *r, uint32_t *v);
/* A length-delimited value: *bytes points into the buffer, *n_bytes its length. */
mt_status mt_pb_bytes(mt_pb_reader *r, const uint8_t **bytes, size_t *n_bytes);
/* A reader over a length-delimited value (an embedded message). */
mt_status mt_pb_sub(mt_pb_reader *r, mt_pb_reader *sub);
/* Skips a value of the given wire type. */
mt_status mt_pb_skip(mt_pb_reader *r, int wire);
/* MT_ERR_DATA unless wire == want: "FILE: byte N: field MSG.NAME (F) has wire type W, expected
 * WANT". */
mt_status mt_pb_expect(const mt_pb_reader *r, int wire, int want, const char *name, uint32_t field);
/* Byte offset of the read position in the whole buffer. */
static inline size_t mt_pb_offset(const mt_pb_reader *r) { return (size_t)(r->p - r->base); }

#endif
