"""An independent reader of zaya's TensorBoard event files (tests/tensorboard.sh).

    python3 tests/tensorboard_reader.py EVENTS METRICS_JSONL     check EVENTS against METRICS_JSONL
    python3 tests/tensorboard_reader.py --corrupt EVENTS         must reject a copy with one byte flipped

The Event and Summary messages are built here with Debian's python3-protobuf from descriptors
written after tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto
(the fields a scalar summary uses, at their numbers there); the TFRecord framing and its
masked CRC32C (Castagnoli) are read by this file's own code, written from the format's
description, bit by bit. Every record's CRCs must match, every event must parse and serialise
back to the same bytes (so no field is unknown or misencoded), the first event must carry the
file version, and each step / eval record of metrics.jsonl must have one event with its step
and exactly its scalars as float32.
"""
import json
import math
import struct
import sys

sys.path.insert(0, "tests/lib")
from checks import check  # noqa: E402

from google.protobuf import descriptor_pb2, descriptor_pool  # noqa: E402

try:
    from google.protobuf.message_factory import GetMessageClass  # protobuf >= 4.22
except ImportError:  # Debian 12's 3.21 / 4.21
    from google.protobuf import message_factory

    def GetMessageClass(desc):
        return message_factory.MessageFactory(desc.file.pool).GetPrototype(desc)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


check(crc32c(b"123456789") == 0xE3069283, "crc32c check value")  # the CRC-32C catalogue's


def messages():
    f = descriptor_pb2.FileDescriptorProto(name="tb_check.proto", package="tbcheck", syntax="proto3")
    F = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL, oneof_index=0)
    value.oneof_decl.add(name="value")
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, type_name=".tbcheck.Value",
                      label=F.LABEL_REPEATED)
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, type_name=".tbcheck.Summary",
                    label=F.LABEL_OPTIONAL, oneof_index=0)
    event.oneof_decl.add(name="what")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return GetMessageClass(pool.FindMessageTypeByName("tbcheck.Event"))


Event = messages()


def records(data):
    """The TFRecords of data; exits 1 on a short record or a CRC mismatch."""
    out, pos = [], 0
    while pos < len(data):
        check(pos + 12 <= len(data), f"record at {pos}: truncated header")
        head = data[pos:pos + 8]
        (n,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        check(hcrc == masked(crc32c(head)), f"record at {pos}: length CRC mismatch")
        check(pos + 12 + n + 4 <= len(data), f"record at {pos}: truncated data")
        body = data[pos + 12:pos + 12 + n]
        (dcrc,) = struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])
        check(dcrc == masked(crc32c(body)), f"record at {pos}: data CRC mismatch")
        out.append(body)
        pos += 16 + n
    return out


def events(path):
    evs = []
    for i, body in enumerate(records(open(path, "rb").read())):
        e = Event()
        e.ParseFromString(body)
        check(e.SerializeToString() == body, f"event {i}: does not serialise back to its bytes")
        evs.append(e)
    return evs


def f32(x):
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


def expected(r):
    """The scalars zaya writes for one metrics record."""
    want = {}
    if r.get("type") == "step":
        for key in ("loss", "lr", "grad_norm", "tokens_per_s"):
            want[f"train/{key}"] = r[key]
        for l, ld in enumerate(r["layers"]):
            want[f"router/layer{l}/entropy"] = ld["entropy"]
            want[f"router/layer{l}/skip"] = ld["skip"]
    elif r.get("type") == "eval":
        want["val/loss"] = r["val_loss"]
        want["val/ppl"] = r["val_ppl"]
    return want


def main():
    if sys.argv[1] == "--corrupt":
        data = bytearray(open(sys.argv[2], "rb").read())
        data[len(data) // 2] ^= 0x10
        open(sys.argv[2] + ".bad", "wb").write(data)
        events(sys.argv[2] + ".bad")  # exits 1 on the CRC mismatch
        print("FAIL: a flipped byte passed the CRC checks", file=sys.stderr)
        sys.exit(2)
    evs = events(sys.argv[1])
    recs = [r for r in map(json.loads, open(sys.argv[2])) if r.get("type") in ("step", "eval")]
    check(len(evs) >= 1 and evs[0].WhichOneof("what") == "file_version"
          and evs[0].file_version == "brain.Event:2", "first event: no file_version brain.Event:2")
    scal = evs[1:]
    check(len(scal) == len(recs), f"{len(scal)} scalar events for {len(recs)} step/eval records")
    times = [e.wall_time for e in evs]
    check(all(math.isfinite(t) and t > 1.5e9 for t in times), "wall_time not a Unix time")
    check(all(a <= b for a, b in zip(times, times[1:])), "wall_time goes backwards")
    n_values = 0
    for e, r in zip(scal, recs):
        check(e.WhichOneof("what") == "summary", f"step {r['step']}: event without a summary")
        check(e.step == r["step"], f"event step {e.step} != record step {r['step']}")
        got = {v.tag: v.simple_value for v in e.summary.value}
        check(len(got) == len(e.summary.value), f"step {e.step}: a tag twice")
        want = {k: f32(v) for k, v in expected(r).items()}
        check(set(got) == set(want), f"step {e.step} ({r['type']}): tags {sorted(got)} != {sorted(want)}")
        for tag, v in want.items():
            check(math.isfinite(v) and got[tag] == v, f"step {e.step} {tag}: {got[tag]!r} != {v!r}")
            n_values += 1
    steps = sum(r["type"] == "step" for r in recs)
    print(f"tensorboard: {len(evs)} events ({steps} steps, {len(recs) - steps} evals, {n_values} scalars) "
          "match metrics.jsonl, every CRC checked")


if __name__ == "__main__":
    main()
