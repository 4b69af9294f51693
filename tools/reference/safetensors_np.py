"""Minimal safetensors reader/writer on top of json + numpy (no `safetensors` package needed).

File layout (https://github.com/huggingface/safetensors): an 8-byte little-endian u64 N, then N bytes
of JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
then the raw little-endian tensor bytes; offsets are relative to the start of the data block.

Supported dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL.
BF16 has no numpy dtype: it is read as uint16 and widened to float32 by a 16-bit shift, and written
from float32 with round-to-nearest-even (NaN stays NaN).
"""
import json
import struct

import numpy as np

_NP_OF = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_,
}
_CODE_OF = {np.dtype(v).str: k for k, v in _NP_OF.items()}


def bf16_bits_to_f32(bits):
    """uint16 array of bf16 bit patterns -> float32 array (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even; NaN kept quiet NaN."""
    x = np.array(x, dtype=np.float32)  # contiguous copy, shape kept (also 0-d)
    u = x.view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded = np.where(nan, ((u >> 16) | 0x0040).astype(np.uint16), rounded)
    return rounded


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    return header, 8 + n


def load(path, bf16_as="float32"):
    """Returns {name: numpy array}. BF16 tensors come back as float32 (or raw uint16 bits if
    bf16_as == "bits"). Metadata is dropped; use read_header() for it."""
    header, base = read_header(path)
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape = info["dtype"], tuple(info["shape"])
        b, e = info["data_offsets"]
        raw = data[base + b: base + e]
        if dt == "BF16":
            arr = np.frombuffer(raw, dtype="<u2").reshape(shape)
            arr = arr.copy() if bf16_as == "bits" else bf16_bits_to_f32(arr)
        elif dt in _NP_OF:
            arr = np.frombuffer(raw, dtype=np.dtype(_NP_OF[dt]).newbyteorder("<")).reshape(shape)
            arr = arr.astype(_NP_OF[dt])  # native byte order, writable copy
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        expect = int(np.prod(shape, dtype=np.int64)) * arr.dtype.itemsize if dt != "BF16" else \
            int(np.prod(shape, dtype=np.int64)) * 2
        if e - b != expect:
            raise ValueError(f"{path}: tensor {name}: {e - b} bytes for shape {shape} {dt}")
        out[name] = arr
    return out


def save(path, tensors, bf16=(), metadata=None):
    """Writes {name: numpy array}. Names listed in `bf16` (or all names if bf16 is True) are stored
    as BF16 (converted from float32 with round-to-nearest-even)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        if bf16 is True or name in bf16:
            code, raw = "BF16", f32_to_bf16_bits(arr.astype(np.float32)).astype("<u2").tobytes()
        else:
            key = arr.dtype.newbyteorder("<").str if arr.dtype.byteorder != "|" else arr.dtype.str
            if key not in _CODE_OF:
                raise ValueError(f"tensor {name}: unsupported numpy dtype {arr.dtype}")
            code = _CODE_OF[key]
            raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)  # keep the data block 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for raw in blobs:
            f.write(raw)


def _selftest():
    import os
    import tempfile
    rng = np.random.default_rng(0)
    t = {
        "f64": rng.standard_normal((3, 4)), "f32": rng.standard_normal(5).astype(np.float32),
        "f16": rng.standard_normal((2, 2)).astype(np.float16), "i64": np.arange(6).reshape(2, 3),
        "i32": np.arange(4, dtype=np.int32), "bf": np.array([1.0, -2.5, 3.0e38, 1 + 2 ** -8,
                                                            1 + 3 * 2 ** -8], np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        save(p, t, bf16=("bf",), metadata={"format": "pt"})
        back = load(p)
    for k, v in t.items():
        if k == "bf":
            # 1+2^-8 and 1+3*2^-8 are ties: they round to the even neighbours 1.0 and 1+2^-6
            want = np.array([1.0, -2.5, bf16_bits_to_f32(f32_to_bf16_bits(np.float32([3.0e38])))[0],
                             1.0, 1 + 2 ** -6], np.float32)
            assert np.array_equal(back[k], want), (back[k], want)
        else:
            assert back[k].dtype == v.dtype and np.array_equal(back[k], v), k
    return True


if __name__ == "__main__":
    _selftest()
    print("safetensors_np selftest ok")
