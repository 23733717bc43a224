/* tfevents.c — hand-written protobuf and TFRecord encoding of TensorBoard scalar events (see
 * tfevents.h for the wire layout). Rule: pure byte building into caller buffers, bounds checked
 * on every append; no allocation, no I/O. */
#include "core/tfevents.h"

#include <string.h>

#include "core/crc32c.h"

size_t mt_tfevents_varint(uint8_t *out, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

uint32_t mt_tfevents_masked_crc(const void *data, size_t n_bytes) {
    const uint32_t crc = mt_crc32c(0, data, n_bytes);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* A bounded output cursor: `bad` is set once anything did not fit. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int bad;
} cursor;

static void put(cursor *c, const void *src, size_t n) {
    if (c->bad || n > c->cap - c->n) {
        c->bad = 1;
        return;
    }
    memcpy(c->p + c->n, src, n);
    c->n += n;
}

static void put_varint(cursor *c, uint64_t v) {
    uint8_t b[10];
    put(c, b, mt_tfevents_varint(b, v));
}

static void put_le(cursor *c, uint64_t v, int n_bytes) {
    uint8_t b[8];
    for (int i = 0; i < n_bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(c, b, (size_t)n_bytes);
}

/* key = field number << 3 | wire type (0 varint, 1 64-bit, 2 length-delimited, 5 32-bit) */
static void put_key(cursor *c, unsigned field, unsigned wire) { put_varint(c, (uint64_t)(field << 3 | wire)); }

static void put_double(cursor *c, unsigned field, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    put_key(c, field, 1);
    put_le(c, bits, 8);
}

static void put_bytes(cursor *c, unsigned field, const void *s, size_t n) {
    put_key(c, field, 2);
    put_varint(c, n);
    put(c, s, n);
}

size_t mt_tfevents_version_event(uint8_t *out, size_t cap, double wall_time) {
    cursor c = {out, 0, cap, 0};
    put_double(&c, 1, wall_time);
    put_bytes(&c, 3, MT_TFEVENTS_VERSION, strlen(MT_TFEVENTS_VERSION));
    return c.bad ? 0 : c.n;
}

size_t mt_tfevents_scalar_event(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                                float value) {
    /* inside out: Value, then Summary { value = 1 }, then the Event around it */
    uint8_t val[320], sum[336];
    cursor v = {val, 0, sizeof val, 0};
    put_bytes(&v, 1, tag, strlen(tag));
    uint32_t bits;
    memcpy(&bits, &value, 4);
    put_key(&v, 2, 5);
    put_le(&v, bits, 4);
    if (v.bad) return 0;
    cursor s = {sum, 0, sizeof sum, 0};
    put_bytes(&s, 1, val, v.n);
    if (s.bad) return 0;
    cursor c = {out, 0, cap, 0};
    put_double(&c, 1, wall_time);
    if (step != 0) {
        put_key(&c, 2, 0);
        put_varint(&c, (uint64_t)step); /* int64: two's complement, negative = 10 bytes */
    }
    put_bytes(&c, 5, sum, s.n);
    return c.bad ? 0 : c.n;
}

size_t mt_tfevents_record(uint8_t *out, size_t cap, const uint8_t *data, size_t n_bytes) {
    if (cap < MT_TFRECORD_OVERHEAD || n_bytes > cap - MT_TFRECORD_OVERHEAD) return 0;
    cursor c = {out, 0, cap, 0};
    put_le(&c, (uint64_t)n_bytes, 8);
    put_le(&c, mt_tfevents_masked_crc(out, 8), 4);
    put(&c, data, n_bytes);
    put_le(&c, mt_tfevents_masked_crc(data, n_bytes), 4);
    return c.bad ? 0 : c.n;
}
