#!/usr/bin/env python3
"""test/st_edit.py — edits a safetensors file in place for the import fault tests
(test/e2e/faults_import.sh). Usage:
  st_edit.py FILE add NAME        adds an F32 tensor NAME of shape [4] (zeros)
  st_edit.py FILE nan NAME        sets element 0 of tensor NAME to NaN (F32, BF16 or F16)
  st_edit.py FILE shrink NAME     drops the last element of the 1-D tensor NAME
  st_edit.py FILE rename NAME NEW renames tensor NAME to NEW
The file is rewritten whole: 8-byte header length, JSON header, data in the header's order."""
import json
import struct
import sys


def main():
    path, op, name = sys.argv[1:4]
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = hdr.pop("__metadata__", None)
    blobs = {k: bytearray(data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in hdr.items()}
    if op == "add":
        hdr[name] = {"dtype": "F32", "shape": [4]}
        blobs[name] = bytearray(16)
    elif op == "nan":
        dt = hdr[name]["dtype"]
        nan = {"F32": struct.pack("<f", float("nan")), "BF16": b"\xc0\x7f", "F16": b"\x00\x7e"}[dt]
        blobs[name][0:len(nan)] = nan
    elif op == "rename":
        new = sys.argv[4]
        hdr = {new if k == name else k: v for k, v in hdr.items()}
        blobs[new] = blobs.pop(name)
    elif op == "shrink":
        e = hdr[name]
        assert len(e["shape"]) == 1, "shrink: a 1-D tensor"
        width = {"F32": 4, "BF16": 2, "F16": 2}[e["dtype"]]
        e["shape"] = [e["shape"][0] - 1]
        blobs[name] = blobs[name][:-width]
    off = 0
    out = {}
    if meta is not None:
        out["__metadata__"] = meta
    for k in hdr:
        out[k] = {"dtype": hdr[k]["dtype"], "shape": hdr[k]["shape"], "data_offsets": [off, off + len(blobs[k])]}
        off += len(blobs[k])
    h = json.dumps(out, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for k in hdr:
            f.write(blobs[k])


main()
