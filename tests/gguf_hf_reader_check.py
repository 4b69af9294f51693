#!/usr/bin/env python3
"""Hugging Face's GGUF reader against tools/reference/gguf_reader.py on one file
(tests/gguf_hf_reader.sh): the two independent readers must find the same GGUF version,
tensor count, metadata (every key, every value: strings and integers equal, floats equal as
fp32, arrays element by element) and tensor infos (name, dims, ggml type, offset, in order),
and the same start of the data section. Also checks what a zaya file must say: the
architecture, the quantization type and the tokenizer's vocabulary size given on the command
line (0: no tokenizer in the file).

    python3 tests/gguf_hf_reader_check.py FILE HF.json TYPE VOCAB

One line; exit status 1 on any difference.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools", "reference"))
import gguf_reader  # noqa: E402


def same(a, b):
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) or isinstance(b, float):
        f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]  # noqa: E731
        return f32(float(a)) == f32(float(b)) or (a != a and b != b)
    return a == b


def main():
    path, hf_json, qtype, vocab = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    g, _ = gguf_reader.read(path)
    hf = json.load(open(hf_json))
    errs = []
    hm = dict(hf["metadata"])
    for k, want in (("version", g["version"]), ("tensor_count", len(g["tensors"])), ("kv_count", len(g["metadata"]))):
        if hm.pop(k, None) != want:
            errs.append(f"{k}: HF reader {hf['metadata'].get(k)!r}, ours {want!r}")
    if set(hm) != set(g["metadata"]):
        errs.append(f"metadata keys differ: only HF {sorted(set(hm) - set(g['metadata']))}, "
                    f"only ours {sorted(set(g['metadata']) - set(hm))}")
    for k in sorted(set(hm) & set(g["metadata"])):
        if not same(hm[k], g["metadata"][k]):
            errs.append(f"metadata {k}: HF reader {str(hm[k])[:60]}, ours {str(g['metadata'][k])[:60]}")
    if len(hf["tensors"]) != len(g["tensors"]):
        errs.append(f"{len(hf['tensors'])} tensors against {len(g['tensors'])}")
    for a, b in zip(hf["tensors"], g["tensors"]):
        if (a["name"], a["shape"], a["dtype"], a["offset"]) != (b["name"], b["dims"], b["type_id"], b["offset"]):
            errs.append(f"tensor {b['name']}: HF reader {a}, ours {b['dims']} type {b['type_id']} offset {b['offset']}")
    if hf["tensorDataOffset"] != g["data_start"]:
        errs.append(f"data section at {hf['tensorDataOffset']} against {g['data_start']}")
    m = g["metadata"]
    if m.get("general.architecture") != "zaya" or m.get("zaya.quantize.type") != qtype:
        errs.append(f"architecture {m.get('general.architecture')!r}, type {m.get('zaya.quantize.type')!r}: "
                    f"expected 'zaya', {qtype!r}")
    if len(m.get("tokenizer.ggml.tokens", [])) != vocab or (vocab == 0 and "tokenizer.ggml.model" in m):
        errs.append(f"{len(m.get('tokenizer.ggml.tokens', []))} tokenizer tokens, expected {vocab}")
    types = sorted({t["type"] for t in g["tensors"]})
    if errs:
        print(f"FAIL {path}: " + "; ".join(errs[:5]))
        return 1
    print(f"PASS {path}: {len(g['tensors'])} tensors ({', '.join(types)}), {len(g['metadata'])} metadata keys, "
          f"data at {g['data_start']}: Hugging Face's reader and ours agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
