/* protobuf_wire.c — the protocol-buffer wire reader of protobuf_wire.h. */
#include "core/data/protobuf_wire.h"

static const char *wire_name(int wire) {
    switch (wire) {
    case MT_PB_VARINT: return "varint";
    case MT_PB_FIXED64: return "64-bit";
    case MT_PB_LEN: return "length-delimited";
    case MT_PB_FIXED32: return "32-bit";
    case 3: return "start-group";
    case 4: return "end-group";
    default: return "undefined";
    }
}

void mt_pb_init(mt_pb_reader *r, const void *bytes, size_t n_bytes, const char *what) {
    r->base = bytes;
    r->p = bytes;
    r->end = r->p + n_bytes;
    r->what = what;
}

mt_status mt_pb_varint(mt_pb_reader *r, uint64_t *v) {
    const size_t at = mt_pb_offset(r);
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) {
            return mt_errorf(MT_ERR_DATA, "%s: byte %zu: truncated varint (the file ends inside "
                             "it): not a complete protobuf file", r->what, at);
        }
        const uint8_t b = *r->p++;
        if (shift == 63 && (b & 0x7e)) break;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return MT_OK;
        }
    }
    return mt_errorf(MT_ERR_DATA, "%s: byte %zu: a varint longer than 64 bits: not a protobuf "
                     "file (or a corrupt one)", r->what, at);
}

mt_status mt_pb_tag(mt_pb_reader *r, uint32_t *field, int *wire) {
    const size_t at = mt_pb_offset(r);
    uint64_t t = 0;
    mt_status st = mt_pb_varint(r, &t);
    if (st != MT_OK) return st;
    *wire = (int)(t & 7);
    if (t >> 3 == 0 || t >> 3 > 0x1fffffff) {
        return mt_errorf(MT_ERR_DATA, "%s: byte %zu: field number %llu is not a valid protobuf "
                         "field: not a protobuf file (or a corrupt one)", r->what, at,
                         (unsigned long long)(t >> 3));
    }
    *field = (uint32_t)(t >> 3);
    if (*wire != MT_PB_VARINT && *wire != MT_PB_FIXED64 && *wire != MT_PB_LEN &&
        *wire != MT_PB_FIXED32) {
        return mt_errorf(MT_ERR_DATA, "%s: byte %zu: field %u has wire type %d (%s), which this "
                         "reader does not take: not a SentencePiece model (or a corrupt one)",
                         r->what, at, *field, *wire, wire_name(*wire));
    }
    return MT_OK;
}

static mt_status need(const mt_pb_reader *r, uint64_t n, const char *kind, size_t at) {
    if (n > (uint64_t)(r->end - r->p)) {
        return mt_errorf(MT_ERR_DATA, "%s: byte %zu: %s of %llu bytes runs past the end of its "
                         "message (%zu bytes left): the file is truncated or corrupt", r->what,
                         at, kind, (unsigned long long)n, (size_t)(r->end - r->p));
    }
    return MT_OK;
}

mt_status mt_pb_fixed32(mt_pb_reader *r, uint32_t *v) {
    mt_status st = need(r, 4, "a 32-bit value", mt_pb_offset(r));
    if (st != MT_OK) return st;
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
         (uint32_t)r->p[3] << 24;
    r->p += 4;
    return MT_OK;
}

mt_status mt_pb_bytes(mt_pb_reader *r, const uint8_t **bytes, size_t *n_bytes) {
    const size_t at = mt_pb_offset(r);
    uint64_t n = 0;
    mt_status st = mt_pb_varint(r, &n);
    if (st == MT_OK) st = need(r, n, "a length-delimited field", at);
    if (st != MT_OK) return st;
    *bytes = r->p;
    *n_bytes = (size_t)n;
    r->p += n;
    return MT_OK;
}

mt_status mt_pb_sub(mt_pb_reader *r, mt_pb_reader *sub) {
    const uint8_t *b;
    size_t n;
    mt_status st = mt_pb_bytes(r, &b, &n);
    if (st != MT_OK) return st;
    sub->base = r->base;
    sub->p = b;
    sub->end = b + n;
    sub->what = r->what;
    return MT_OK;
}

mt_status mt_pb_skip(mt_pb_reader *r, int wire) {
    uint64_t v;
    const uint8_t *b;
    size_t n;
    switch (wire) {
    case MT_PB_VARINT: return mt_pb_varint(r, &v);
    case MT_PB_LEN: return mt_pb_bytes(r, &b, &n);
    case MT_PB_FIXED32:
    case MT_PB_FIXED64: {
        const size_t k = wire == MT_PB_FIXED32 ? 4 : 8;
        mt_status st = need(r, k, wire == MT_PB_FIXED32 ? "a 32-bit value" : "a 64-bit value",
                            mt_pb_offset(r));
        if (st == MT_OK) r->p += k;
        return st;
    }
    default:
        return mt_errorf(MT_ERR_DATA, "%s: byte %zu: wire type %d (%s) cannot be skipped",
                         r->what, mt_pb_offset(r), wire, wire_name(wire));
    }
}

mt_status mt_pb_expect(const mt_pb_reader *r, int wire, int want, const char *name, uint32_t field) {
    if (wire == want) return MT_OK;
    return mt_errorf(MT_ERR_DATA, "%s: byte %zu: field %s (%u) has wire type %s, expected %s: not a "
                     "SentencePiece model (or a corrupt one)", r->what, mt_pb_offset(r), name, field,
                     wire_name(wire), wire_name(want));
}
