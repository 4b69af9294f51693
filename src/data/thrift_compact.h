// Thrift compact protocol, read side: what Parquet's footer and page headers are written in.
// A ThriftReader walks a byte range with every read bounds-checked; running off the end
// throws ThriftTruncated (the caller may read more bytes and try again), anything else
// malformed throws zaya::Error. Messages say what was wrong, never which file: the caller
// adds that.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace zaya {

// The input ended inside a value.
struct ThriftTruncated : Error {
  using Error::Error;
};

// Compact protocol type ids (the low nibble of a field header, a list's element type).
enum class ThriftType : uint8_t {
  Stop = 0, True = 1, False = 2, Byte = 3, I16 = 4, I32 = 5, I64 = 6, Double = 7,
  Binary = 8, List = 9, Set = 10, Map = 11, Struct = 12,
};

// Zigzag decoding: 0, -1, 1, -2, ... from 0, 1, 2, 3, ...
inline int64_t zigzag_decode(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

class ThriftReader {
 public:
  ThriftReader(const uint8_t* data, size_t size) : p_(data), begin_(data), end_(data + size) {}

  size_t position() const { return size_t(p_ - begin_); }

  uint64_t varint();  // ULEB128, at most 10 bytes
  int32_t i32();      // zigzag varint that must fit 32 bits
  int64_t i64();
  std::string_view binary();  // varint length + bytes (a view into the input)

  // Structs: begin_struct() before a struct's fields, then next_field() until it returns
  // false (the STOP byte; the struct is left). A field's value is read with the getter its
  // type calls for, or skipped with skip(type). Booleans are in the field header: bool_value().
  void begin_struct();
  bool next_field(int16_t& id, ThriftType& type);
  bool bool_value(ThriftType type) const;  // a field of type True / False
  // A list or set header: its element count (checked against the bytes left, at least one
  // byte per element) and element type.
  uint32_t list_begin(ThriftType& elem);
  void skip(ThriftType type);

  // The field's value as an integer whatever its integer type (i8, i16, i32); error otherwise.
  int32_t int_field(ThriftType type, const char* name);
  int64_t i64_field(ThriftType type, const char* name);

 private:
  uint8_t byte();
  void skip_depth(ThriftType type, int depth);
  void need(size_t n) const;

  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  // Field ids of the enclosing structs (the compact protocol codes ids as deltas).
  static constexpr int kMaxDepth = 64;
  int16_t last_id_[kMaxDepth] = {};
  int depth_ = -1;
};

}  // namespace zaya
