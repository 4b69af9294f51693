#!/usr/bin/env python3
"""An independent reader and writer of Megatron-LM indexed datasets (PREFIX.bin + PREFIX.idx,
"MMIDIDX"), written from the format's definition in Megatron-LM's
megatron/core/datasets/indexed_dataset.py, not from zaya's code; and a reader of zaya's token
shards written from docs/data.md. Python's standard library only.

  megatron_ref.py check PREFIX DATA_DIR SPLIT   the dataset zaya wrote holds, sequence by
                                                sequence, the documents of DATA_DIR's SPLIT
                                                shards (each ending with EOS), in Megatron's
                                                dtype for the vocabulary
  megatron_ref.py write DATA_DIR SPLIT PREFIX   writes DATA_DIR's SPLIT shards as a dataset,
                                                one sequence per document (cut after EOS)

Every check prints what differs and exits 1.
"""
import array
import json
import os
import struct
import sys

MAGIC = b"MMIDIDX\x00\x00"
# Megatron's DType codes; the ones that hold token ids, as array typecodes.
DTYPES = {1: ("B", 1), 2: ("b", 1), 3: ("h", 2), 4: ("i", 4), 5: ("q", 8), 8: ("H", 2)}
FLOAT_CODES = {6: "float64", 7: "float32"}


def die(msg):
    print("megatron_ref: FAIL: " + msg)
    sys.exit(1)


def le_array(typecode, raw):
    a = array.array(typecode)
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def optimal_code(vocab):
    """Megatron's choice: uint16 below 65,500 tokens, else int32."""
    return 8 if vocab < 65500 else 4


def read_megatron(prefix):
    """Returns (dtype code, list of sequences, document indices)."""
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    if len(idx) < 34:
        die(f"{prefix}.idx: {len(idx)} bytes, shorter than the 34-byte header")
    if idx[:9] != MAGIC:
        die(f"{prefix}.idx: magic {idx[:9]!r}, expected {MAGIC!r}")
    version, = struct.unpack_from("<Q", idx, 9)
    if version != 1:
        die(f"{prefix}.idx: version {version}, expected 1")
    code = idx[17]
    if code in FLOAT_CODES or code not in DTYPES:
        die(f"{prefix}.idx: dtype code {code} is not an integer token dtype")
    typecode, size = DTYPES[code]
    seqs, docs = struct.unpack_from("<QQ", idx, 18)
    want = 34 + 4 * seqs + 8 * seqs + 8 * docs
    if len(idx) != want:
        die(f"{prefix}.idx: {len(idx)} bytes, the header's counts ({seqs} sequences, {docs} document indices) need {want}")
    off = 34
    lengths = le_array("i", idx[off:off + 4 * seqs])
    off += 4 * seqs
    pointers = le_array("q", idx[off:off + 8 * seqs])
    off += 8 * seqs
    doc_idx = le_array("q", idx[off:off + 8 * docs])
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    sequences = []
    for i in range(seqs):
        start, n = pointers[i], lengths[i]
        if n < 0 or start < 0 or start + n * size > len(data):
            die(f"{prefix}: sequence {i} (pointer {start}, length {n}) lies outside the {len(data)}-byte .bin")
        sequences.append(le_array(typecode, data[start:start + n * size]).tolist())
    return code, sequences, list(doc_idx)


def write_megatron(prefix, documents, vocab):
    """One sequence per document, Megatron's dtype for the vocabulary."""
    code = optimal_code(vocab)
    typecode, size = DTYPES[code]
    lengths, pointers, pos = [], [], 0
    with open(prefix + ".bin", "wb") as f:
        for doc in documents:
            a = array.array(typecode, doc)
            if sys.byteorder != "little":
                a.byteswap()
            f.write(a.tobytes())
            lengths.append(len(doc))
            pointers.append(pos)
            pos += len(doc) * size
    doc_idx = list(range(len(documents) + 1))
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(struct.pack(f"<{len(lengths)}i", *lengths))
        f.write(struct.pack(f"<{len(pointers)}q", *pointers))
        f.write(struct.pack(f"<{len(doc_idx)}q", *doc_idx))


def read_shard(path):
    """A zaya token shard (docs/data.md): 64-byte header, then uint32 tokens."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 64 or raw[:8] != b"ZAYATOK1":
        die(f"{path}: not a zaya token shard")
    version, dtype, count, vocab = struct.unpack_from("<IIQI", raw, 8)
    if version != 1 or dtype != 1 or len(raw) != 64 + 4 * count:
        die(f"{path}: version {version}, dtype {dtype}, {count} tokens in {len(raw)} bytes")
    return le_array("I", raw[64:]).tolist(), vocab


def read_split(data_dir, split):
    with open(os.path.join(data_dir, "meta.json")) as f:
        meta = json.load(f)
    tokens, vocab = [], None
    for name in meta[split]["shards"]:
        t, v = read_shard(os.path.join(data_dir, name))
        tokens += t
        vocab = v
    return tokens, vocab, meta["tokenizer"]["eos_id"]


def documents_of(tokens, eos):
    docs, cur = [], []
    for t in tokens:
        cur.append(t)
        if t == eos:
            docs.append(cur)
            cur = []
    if cur:
        docs.append(cur)
    return docs


def check(prefix, data_dir, split):
    tokens, vocab, eos = read_split(data_dir, split)
    code, sequences, doc_idx = read_megatron(prefix)
    if code != optimal_code(vocab):
        die(f"{prefix}.idx: dtype code {code}, Megatron picks {optimal_code(vocab)} for vocabulary {vocab}")
    if doc_idx != list(range(len(sequences) + 1)):
        die(f"{prefix}.idx: document indices {doc_idx[:8]}... are not 0..{len(sequences)} (one sequence per document)")
    want = documents_of(tokens, eos)
    if len(sequences) != len(want):
        die(f"{prefix}: {len(sequences)} sequences, the shards hold {len(want)} documents")
    for i, (got, exp) in enumerate(zip(sequences, want)):
        if got != exp:
            die(f"{prefix}: sequence {i} differs from document {i} of the shards")
        if not got or got[-1] != eos:
            die(f"{prefix}: sequence {i} does not end with EOS {eos}")
    print(f"megatron_ref: {prefix}: {len(sequences)} sequences, {sum(map(len, sequences))} tokens, "
          f"dtype code {code}: equal to the {split} shards")


def write(data_dir, split, prefix):
    tokens, vocab, eos = read_split(data_dir, split)
    docs = documents_of(tokens, eos)
    write_megatron(prefix, docs, vocab)
    code, sequences, _ = read_megatron(prefix)
    if sequences != docs:
        die(f"{prefix}: the dataset written does not read back")
    print(f"megatron_ref: wrote {prefix}: {len(docs)} documents, {len(tokens)} tokens, dtype code {code}")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 5 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        die("usage: megatron_ref.py check PREFIX DATA_DIR SPLIT | write DATA_DIR SPLIT PREFIX")


if __name__ == "__main__":
    main()
