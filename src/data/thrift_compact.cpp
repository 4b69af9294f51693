// Thrift compact protocol decoding (see thrift_compact.h). The format: varints are ULEB128,
// signed integers zigzag-coded; a field header is one byte, the id's delta from the previous
// field's in the high nibble (0: the id follows as a zigzag varint) and the type in the low
// one; a list header holds the size in its high nibble (15: a varint follows).
#include "data/thrift_compact.h"

namespace zaya {

void ThriftReader::need(size_t n) const {
  if (size_t(end_ - p_) < n) throw ThriftTruncated(cat("thrift data ends at byte ", position(), " inside a value"));
}

uint8_t ThriftReader::byte() {
  need(1);
  return *p_++;
}

uint64_t ThriftReader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    const uint8_t b = byte();
    if (shift == 63 && b > 1) fail("thrift varint over 64 bits at byte ", position() - 1);
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  fail("thrift varint over 10 bytes at byte ", position());
}

int32_t ThriftReader::i32() {
  const int64_t v = zigzag_decode(varint());
  if (v < INT32_MIN || v > INT32_MAX) fail("thrift i32 out of range: ", v);
  return int32_t(v);
}

int64_t ThriftReader::i64() { return zigzag_decode(varint()); }

std::string_view ThriftReader::binary() {
  const uint64_t n = varint();
  if (n > uint64_t(end_ - p_)) throw ThriftTruncated(cat("thrift binary of ", n, " bytes runs past the end of the data"));
  std::string_view s(reinterpret_cast<const char*>(p_), size_t(n));
  p_ += n;
  return s;
}

void ThriftReader::begin_struct() {
  if (depth_ + 1 >= kMaxDepth) fail("thrift structs nested over ", kMaxDepth, " deep");
  last_id_[++depth_] = 0;
}

bool ThriftReader::next_field(int16_t& id, ThriftType& type) {
  ZAYA_CHECK(depth_ >= 0, "thrift: next_field outside a struct");
  const uint8_t h = byte();
  const uint8_t t = h & 0x0f;
  if (t == 0) {
    --depth_;
    return false;
  }
  if (t > uint8_t(ThriftType::Struct)) fail("thrift field of unknown type ", int(t), " at byte ", position() - 1);
  type = ThriftType(t);
  const int delta = h >> 4;
  if (delta) {
    id = int16_t(last_id_[depth_] + delta);
  } else {
    const int64_t v = zigzag_decode(varint());
    if (v < INT16_MIN || v > INT16_MAX) fail("thrift field id out of range: ", v);
    id = int16_t(v);
  }
  last_id_[depth_] = id;
  return true;
}

bool ThriftReader::bool_value(ThriftType type) const {
  if (type != ThriftType::True && type != ThriftType::False) fail("thrift: a boolean field has type ", int(type));
  return type == ThriftType::True;
}

uint32_t ThriftReader::list_begin(ThriftType& elem) {
  const uint8_t h = byte();
  uint64_t n = h >> 4;
  if (n == 15) n = varint();
  const uint8_t t = h & 0x0f;
  if (t == 0 || t > uint8_t(ThriftType::Struct)) fail("thrift list of unknown element type ", int(t));
  elem = ThriftType(t);
  // Every element takes at least one byte, so a count over the bytes left is corrupt.
  if (n > uint64_t(end_ - p_)) throw ThriftTruncated(cat("thrift list of ", n, " elements runs past the end of the data"));
  return uint32_t(n);
}

int32_t ThriftReader::int_field(ThriftType type, const char* name) {
  if (type == ThriftType::Byte) return int8_t(byte());
  if (type == ThriftType::I16 || type == ThriftType::I32) return i32();
  fail("thrift field ", name, " has type ", int(type), ", not an integer");
}

int64_t ThriftReader::i64_field(ThriftType type, const char* name) {
  if (type == ThriftType::I64) return i64();
  return int_field(type, name);
}

void ThriftReader::skip(ThriftType type) { skip_depth(type, 0); }

void ThriftReader::skip_depth(ThriftType type, int depth) {
  if (depth > kMaxDepth) fail("thrift values nested over ", kMaxDepth, " deep");
  switch (type) {
    case ThriftType::True:
    case ThriftType::False:
      return;  // in the field header (list elements are read as bytes below)
    case ThriftType::Byte:
      byte();
      return;
    case ThriftType::I16:
    case ThriftType::I32:
    case ThriftType::I64:
      varint();
      return;
    case ThriftType::Double:
      need(8);
      p_ += 8;
      return;
    case ThriftType::Binary:
      binary();
      return;
    case ThriftType::List:
    case ThriftType::Set: {
      ThriftType elem;
      const uint32_t n = list_begin(elem);
      for (uint32_t i = 0; i < n; ++i) {
        if (elem == ThriftType::True || elem == ThriftType::False) byte();
        else skip_depth(elem, depth + 1);
      }
      return;
    }
    case ThriftType::Map: {
      const uint64_t n = varint();
      if (n == 0) return;
      if (n > uint64_t(end_ - p_)) throw ThriftTruncated(cat("thrift map of ", n, " entries runs past the end of the data"));
      const uint8_t kv = byte();
      const ThriftType k = ThriftType(kv >> 4), v = ThriftType(kv & 0x0f);
      if (kv >> 4 == 0 || kv >> 4 > 12 || (kv & 0x0f) == 0 || (kv & 0x0f) > 12) fail("thrift map of unknown types ", int(kv));
      for (uint64_t i = 0; i < n; ++i) {
        for (ThriftType t : {k, v}) {
          if (t == ThriftType::True || t == ThriftType::False) byte();
          else skip_depth(t, depth + 1);
        }
      }
      return;
    }
    case ThriftType::Struct: {
      begin_struct();
      int16_t id;
      ThriftType t;
      while (next_field(id, t)) skip_depth(t, depth + 1);
      return;
    }
    case ThriftType::Stop:
      break;
  }
  fail("thrift: cannot skip a value of type ", int(type));
}

}  // namespace zaya
