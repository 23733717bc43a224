#!/usr/bin/env python3
"""tfevents_read.py — an independent reader of TensorBoard event files, written from the formats:
TFRecord framing (uint64 length LE, uint32 masked CRC-32C of the length, data, uint32 masked
CRC-32C of the data; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8) and the protobuf wire
format of tensorflow's Event (wall_time double #1, step int64 #2, file_version string #3,
summary #5) / Summary (value #1) / Summary.Value (tag #1, simple_value float #2). Its own
CRC-32C (bit at a time) and its own protobuf decoding; no tensorflow, tensorboard or protobuf
package. Both CRCs of every record are verified: a mismatch is an error (exit 1).

Usage: tfevents_read.py FILE   -> one JSON line per record:
  {"wall_time": W, "step": S, "file_version": "..."}  or  {"wall_time": W, "step": S, "tag": T, "value": V}
(value: the float32 as a Python float, exact; step defaults to 0 when absent, as in proto3)."""
import json
import struct
import sys


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # RFC 3720 check value


def varint(buf, i):
    v, shift = 0, 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def fields(buf):
    """(field number, wire type, value) of each field of one message: ints for varints,
    bytes for fixed64 / fixed32 / length-delimited."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        if i > len(buf):
            raise ValueError("field %d runs past the end of its message" % num)
        yield num, wire, v


def decode_event(data):
    ev = {"wall_time": 0.0, "step": 0}
    for num, wire, v in fields(data):
        if num == 1 and wire == 1:
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif num == 2 and wire == 0:
            ev["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 3 and wire == 2:
            ev["file_version"] = v.decode()
        elif num == 5 and wire == 2:
            values = [val for n, w, val in fields(v) if n == 1 and w == 2]
            if len(values) != 1:
                raise ValueError("a summary with %d values (expected 1)" % len(values))
            for n, w, val in fields(values[0]):
                if n == 1 and w == 2:
                    ev["tag"] = val.decode()
                elif n == 2 and w == 5:
                    ev["value"] = struct.unpack("<f", val)[0]
    return ev


def records(blob, name):
    i = 0
    while i < len(blob):
        if len(blob) - i < 12:
            raise ValueError("%s: truncated record header at byte %d" % (name, i))
        head = blob[i:i + 8]
        (length,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", blob[i + 8:i + 12])
        if hcrc != masked(head):
            raise ValueError("%s: length CRC mismatch at byte %d" % (name, i))
        data = blob[i + 12:i + 12 + length]
        if len(data) != length or len(blob) < i + 16 + length:
            raise ValueError("%s: truncated record at byte %d" % (name, i))
        (dcrc,) = struct.unpack("<I", blob[i + 12 + length:i + 16 + length])
        if dcrc != masked(data):
            raise ValueError("%s: data CRC mismatch in the record at byte %d" % (name, i))
        yield data
        i += 16 + length


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tfevents_read.py EVENTS_FILE")
    with open(sys.argv[1], "rb") as f:
        blob = f.read()
    try:
        for data in records(blob, sys.argv[1]):
            print(json.dumps(decode_event(data)))
    except ValueError as e:
        print("tfevents_read.py: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
