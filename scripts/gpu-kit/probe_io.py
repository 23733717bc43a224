"""probe_io.py - the JSON-lines output the GPU check's PyTorch scripts share (torch_peer.py, fp8_gemm.py,
attn_rate.py): one object a line, keys sorted, on stdout and appended to an optional file. Standard library only."""

import json


def emit(rec, path):
    line = json.dumps(rec, sort_keys=True)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
