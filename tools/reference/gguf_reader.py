#!/usr/bin/env python3
"""An independent GGUF reader, written from the GGUF specification (ggml's docs/gguf.md), to
check the files `zaya quantize` writes. Standard library only.

    python3 tools/reference/gguf_reader.py FILE [--json] [--check-zaya] [--dequant NAME]

It parses the header (magic "GGUF", version, tensor_count, metadata_kv_count), every
metadata key/value (all 13 value types, arrays included), every tensor info (name, n_dims,
dims innermost first, ggml type, offset), then checks the layout the spec requires:
general.alignment (default 32) a power of two, the data section starting at the first
aligned byte after the infos, every offset a multiple of the alignment, every tensor's
byte size (from the block size and bytes per block of its type) inside the file, no two
tensors overlapping. --check-zaya also checks the metadata a zaya model must carry.
--dequant NAME prints the first 8 values of a tensor decoded by this file's own decoders
(q8_0, q4_0, q4_k, q6_k, bf16, f32), for cross-checks. Exit status 1 and one line on stderr
for any violation. --json prints a summary as JSON.
"""
import json
import struct
import sys

# ggml types: name, elements per block, bytes per block.
GGML_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
              7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 10: ("Q2_K", 256, 84),
              11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
              15: ("Q8_K", 256, 292), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
              28: ("F64", 1, 8), 30: ("BF16", 1, 2)}
# Metadata value types: struct format (None: string / array).
VALUE_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 8: None, 9: None, 10: "<Q",
             11: "<q", 12: "<d"}


class GGUFError(Exception):
    pass


class Reader:
    def __init__(self, data):
        self.d, self.at = data, 0

    def take(self, n, what):
        if self.at + n > len(self.d):
            raise GGUFError(f"truncated reading {what} at byte {self.at}")
        b = self.d[self.at:self.at + n]
        self.at += n
        return b

    def unpack(self, fmt, what):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what):
        n = self.unpack("<Q", what + " length")
        return self.take(n, what).decode("utf-8")

    def value(self, vtype, what):
        if vtype == 8:
            return self.string(what)
        if vtype == 9:
            etype = self.unpack("<I", what + " array type")
            n = self.unpack("<Q", what + " array length")
            if etype not in VALUE_FMT:
                raise GGUFError(f"{what}: array element type {etype}")
            return [self.value(etype, what) for _ in range(n)]
        if vtype not in VALUE_FMT:
            raise GGUFError(f"{what}: value type {vtype}")
        v = self.unpack(VALUE_FMT[vtype], what)
        if vtype == 7 and self.d[self.at - 1] > 1:
            raise GGUFError(f"{what}: bool byte {self.d[self.at - 1]}")
        return v


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if r.take(4, "magic") != b"GGUF":
        raise GGUFError("magic is not GGUF")
    version = r.unpack("<I", "version")
    if version not in (2, 3):
        raise GGUFError(f"version {version}")
    n_tensors = r.unpack("<Q", "tensor_count")
    n_kv = r.unpack("<Q", "metadata_kv_count")
    meta, types = {}, {}
    for _ in range(n_kv):
        key = r.string("key")
        vtype = r.unpack("<I", f"type of {key}")
        if key in meta:
            raise GGUFError(f"duplicate key {key}")
        meta[key] = r.value(vtype, key)
        types[key] = vtype
    align = meta.get("general.alignment", 32)
    if "general.alignment" in meta and types["general.alignment"] != 4:
        raise GGUFError("general.alignment is not a uint32")
    if align <= 0 or align & (align - 1):
        raise GGUFError(f"alignment {align} is not a power of two")
    tensors = []
    for _ in range(n_tensors):
        name = r.string("tensor name")
        if len(name.encode()) >= 64:
            raise GGUFError(f"tensor name {name!r} is 64 bytes or longer")
        nd = r.unpack("<I", f"n_dims of {name}")
        dims = [r.unpack("<Q", f"dims of {name}") for _ in range(nd)]
        ttype = r.unpack("<I", f"type of {name}")
        offset = r.unpack("<Q", f"offset of {name}")
        if ttype not in GGML_TYPES:
            raise GGUFError(f"{name}: unknown ggml type {ttype}")
        tname, block, bbytes = GGML_TYPES[ttype]
        if dims[0] % block:
            raise GGUFError(f"{name}: dims[0]={dims[0]} not a multiple of the {tname} block {block}")
        numel = 1
        for d in dims:
            numel *= d
        tensors.append({"name": name, "dims": dims, "type": tname, "type_id": ttype, "offset": offset,
                        "nbytes": numel // block * bbytes})
    data_start = (r.at + align - 1) // align * align
    end = 0
    for t in sorted(tensors, key=lambda t: t["offset"]):
        if t["offset"] % align:
            raise GGUFError(f"{t['name']}: offset {t['offset']} not aligned to {align}")
        if t["offset"] < end:
            raise GGUFError(f"{t['name']}: overlaps the tensor before it")
        end = t["offset"] + t["nbytes"]
        if data_start + end > len(data):
            raise GGUFError(f"{t['name']}: runs past the end of the file")
    return {"version": version, "alignment": align, "data_start": data_start, "file_size": len(data),
            "metadata": meta, "metadata_types": types, "tensors": tensors}, data


def f16(b):
    return struct.unpack("<e", b)[0]


def dequant(t, data, data_start, count):
    """The first `count` values of tensor t, decoded from the format definitions."""
    base = data_start + t["offset"]
    out, typ = [], t["type"]
    i = 0
    while len(out) < count:
        if typ == "F32":
            out.append(struct.unpack_from("<f", data, base + 4 * i)[0])
        elif typ == "BF16":
            out.append(struct.unpack("<f", b"\0\0" + data[base + 2 * i:base + 2 * i + 2])[0])
        elif typ == "Q8_0":
            b = base + 34 * i
            d = f16(data[b:b + 2])
            out += [d * v for v in struct.unpack_from("<32b", data, b + 2)]
        elif typ == "Q4_0":
            b = base + 18 * i
            d = f16(data[b:b + 2])
            qs = data[b + 2:b + 18]
            out += [d * ((q & 15) - 8) for q in qs] + [d * ((q >> 4) - 8) for q in qs]
        elif typ == "Q4_K":
            b = base + 144 * i
            d, dmin = f16(data[b:b + 2]), f16(data[b + 2:b + 4])
            s, qs = data[b + 4:b + 16], data[b + 16:b + 144]
            for j in range(8):
                if j < 4:
                    sc, mn = s[j] & 63, s[j + 4] & 63
                else:
                    sc, mn = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
                chunk = qs[32 * (j // 2):32 * (j // 2) + 32]
                out += [d * sc * ((q >> 4) if j % 2 else (q & 15)) - dmin * mn for q in chunk]
        elif typ == "Q6_K":
            b = base + 210 * i
            ql, qh = data[b:b + 128], data[b + 128:b + 192]
            sc = struct.unpack_from("<16b", data, b + 192)
            d = f16(data[b + 208:b + 210])
            vals = [0.0] * 256
            for e in range(256):
                half, r = divmod(e, 128)
                quarter, l = divmod(r, 32)
                byte = ql[64 * half + l + (32 if quarter in (1, 3) else 0)]
                lo = (byte >> 4) if quarter >= 2 else (byte & 15)
                hi = (qh[32 * half + l] >> (2 * quarter)) & 3
                vals[e] = d * sc[e // 16] * ((lo | (hi << 4)) - 32)
            out += vals
        else:
            raise GGUFError(f"no decoder for {typ}")
        i += 1
    return out[:count]


ZAYA_KEYS = {"general.architecture": 8, "general.name": 8, "general.file_type": 4, "general.quantization_version": 4,
             "general.alignment": 4, "zaya.context_length": 4, "zaya.embedding_length": 4, "zaya.block_count": 4,
             "zaya.attention.head_count": 4, "zaya.attention.head_count_kv": 4, "zaya.config": 8,
             "tokenizer.ggml.model": 8, "tokenizer.ggml.tokens": 9}


def check_zaya(g):
    m, ty = g["metadata"], g["metadata_types"]
    for k, t in ZAYA_KEYS.items():
        if k not in m:
            raise GGUFError(f"missing metadata {k}")
        if ty[k] != t:
            raise GGUFError(f"metadata {k} has value type {ty[k]}, expected {t}")
    if m["general.architecture"] != "zaya":
        raise GGUFError(f"general.architecture is {m['general.architecture']!r}")
    cfg = json.loads(m["zaya.config"])
    if cfg.get("hidden_size") != m["zaya.embedding_length"]:
        raise GGUFError("zaya.embedding_length differs from zaya.config's hidden_size")
    emb = [t for t in g["tensors"] if t["name"] == "token_embd.weight"]
    if not emb or emb[0]["dims"] != [cfg["hidden_size"], cfg["vocab_size"]]:
        raise GGUFError("token_embd.weight missing or not [hidden_size, vocab_size]")


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    path = args[0]
    try:
        g, data = read(path)
        if "--check-zaya" in args:
            check_zaya(g)
        if "--dequant" in args:
            name = args[args.index("--dequant") + 1]
            t = [t for t in g["tensors"] if t["name"] == name]
            if not t:
                raise GGUFError(f"no tensor {name}")
            print(json.dumps(dequant(t[0], data, g["data_start"], 8)))
            return 0
    except (GGUFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    if "--json" in args:
        meta = {k: (v if not isinstance(v, list) or len(v) <= 16 else {"array_len": len(v), "head": v[:4]})
                for k, v in g["metadata"].items()}
        print(json.dumps({"version": g["version"], "alignment": g["alignment"], "data_start": g["data_start"],
                          "file_size": g["file_size"], "metadata": meta, "tensors": g["tensors"]}))
    else:
        print(f"{path}: GGUF v{g['version']}, {len(g['metadata'])} keys, {len(g['tensors'])} tensors, "
              f"data at {g['data_start']}, alignment {g['alignment']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
