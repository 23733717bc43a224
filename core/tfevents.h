/* tfevents.h — TensorBoard event records, encoded by hand (pure functions, no I/O): the
 * TFRecord framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data)
 * around a protobuf `Event` (tensorflow/core/util/event.proto) that carries either the
 * file_version string or a Summary with one scalar Value (summary.proto: tag, simple_value).
 * Field encodings follow proto3: wall_time double #1, step int64 #2 (omitted when 0, as proto3
 * omits defaults), file_version string #3, summary message #5; Summary.value #1; Value.tag #1,
 * Value.simple_value float #2. Every encoder returns the bytes written, 0 when `cap` is too small. */
#ifndef MT_TFEVENTS_H
#define MT_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#define MT_TFEVENTS_VERSION "brain.Event:2"
#define MT_TFRECORD_OVERHEAD 16 /* 8 length + 4 length CRC + 4 data CRC */

/* Base-128 varint of v (little-endian groups of 7 bits, high bit = more follow): 1..10 bytes. */
size_t mt_tfevents_varint(uint8_t *out, uint64_t v);
/* TFRecord's masked CRC-32C: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t mt_tfevents_masked_crc(const void *data, size_t n_bytes);
/* Event { wall_time, file_version: "brain.Event:2" }: the first record of every events file. */
size_t mt_tfevents_version_event(uint8_t *out, size_t cap, double wall_time);
/* Event { wall_time, step, summary { value { tag, simple_value } } }. */
size_t mt_tfevents_scalar_event(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                                float value);
/* One TFRecord around n_bytes of data: uint64 length LE, masked CRC of those 8 bytes (LE),
 * the data, masked CRC of the data (LE). */
size_t mt_tfevents_record(uint8_t *out, size_t cap, const uint8_t *data, size_t n_bytes);

#endif
