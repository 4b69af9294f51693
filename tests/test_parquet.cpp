// The Parquet reader's parts on constructed bytes (src/data/thrift_compact.h, parquet.h):
// Thrift compact varints, zigzag and field headers, the RLE / bit-packed hybrid, and whole
// small files built here field by field, read back exactly and, corrupted in each way a
// reader must catch, refused with one line naming the file. The reader against an
// independent writer is tests/parquet_oracle.sh.
#include <gtest/gtest.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/parquet.h"
#include "data/parquet_meta.h"
#include "data/thrift_compact.h"
#include "test_util.h"

namespace {

using zaya::ThriftReader;
using zaya::ThriftType;

// Thrift compact writer: just enough to build footers and page headers.
struct ThriftWriter {
  std::string out;
  std::vector<int16_t> last{0};
  void byte(uint8_t b) { out.push_back(char(b)); }
  void varint(uint64_t v) {
    while (v >= 0x80) { byte(uint8_t(v) | 0x80); v >>= 7; }
    byte(uint8_t(v));
  }
  void zz(int64_t v) { varint((uint64_t(v) << 1) ^ uint64_t(v >> 63)); }
  void field(int16_t id, ThriftType t) {
    const int delta = id - last.back();
    if (delta > 0 && delta <= 15) byte(uint8_t(delta << 4 | int(t)));
    else { byte(uint8_t(t)); zz(id); }
    last.back() = id;
  }
  void i32(int16_t id, int64_t v) { field(id, ThriftType::I32); zz(v); }
  void i64(int16_t id, int64_t v) { field(id, ThriftType::I64); zz(v); }
  void bin(int16_t id, const std::string& s) { field(id, ThriftType::Binary); varint(s.size()); out += s; }
  void boolean(int16_t id, bool v) { field(id, v ? ThriftType::True : ThriftType::False); }
  void begin(int16_t id) { field(id, ThriftType::Struct); last.push_back(0); }
  void begin_elem() { last.push_back(0); }  // a struct inside a list
  void end() { byte(0); last.pop_back(); }
  void list(int16_t id, ThriftType elem, size_t n) {
    field(id, ThriftType::List);
    if (n < 15) byte(uint8_t(n << 4 | int(elem)));
    else { byte(uint8_t(0xf0 | int(elem))); varint(n); }
  }
};

std::string le32(uint32_t v) { return std::string{char(v), char(v >> 8), char(v >> 16), char(v >> 24)}; }

// PLAIN BYTE_ARRAY values.
std::string plain(const std::vector<std::string>& vs) {
  std::string s;
  for (const auto& v : vs) s += le32(uint32_t(v.size())) + v;
  return s;
}

// Definition levels (0 null, 1 value) as one bit-packed run.
std::string def_levels(const std::vector<bool>& present) {
  std::string s;
  const size_t groups = (present.size() + 7) / 8;
  s.push_back(char(groups << 1 | 1));
  for (size_t g = 0; g < groups; ++g) {
    uint8_t b = 0;
    for (size_t i = 0; i < 8 && g * 8 + i < present.size(); ++i) b |= uint8_t(present[g * 8 + i]) << i;
    s.push_back(char(b));
  }
  return s;
}

struct Page {
  int type = 0;  // 0 data v1, 2 dictionary, 3 data v2
  std::string body;  // as stored (compressed)
  int64_t uncompressed = -1;  // -1: body's size
  int num_values = 0, encoding = 0, num_nulls = 0, def_bytes = 0;
  std::optional<uint32_t> crc;
};

std::string page_bytes(const Page& p) {
  ThriftWriter w;
  w.i32(1, p.type);
  w.i32(2, p.uncompressed >= 0 ? p.uncompressed : int64_t(p.body.size()));
  w.i32(3, int64_t(p.body.size()));
  if (p.crc) w.i32(4, int32_t(*p.crc));
  if (p.type == 0 || p.type == 2) {
    w.begin(p.type == 0 ? 5 : 7);
    w.i32(1, p.num_values);
    w.i32(2, p.encoding);
    if (p.type == 0) { w.i32(3, 3); w.i32(4, 3); }
    w.end();
  } else {
    w.begin(8);
    w.i32(1, p.num_values);
    w.i32(2, p.num_nulls);
    w.i32(3, p.num_values);
    w.i32(4, p.encoding);
    w.i32(5, p.def_bytes);
    w.i32(6, 0);
    w.boolean(7, true);
    w.end();
  }
  w.byte(0);
  return w.out + p.body;
}

struct Group {
  int64_t rows;
  std::vector<Page> pages;
  int codec = 0;
  int64_t offset_shift = 0, size_shift = 0;  // corrupt the chunk's place in the footer
};

// A file of two columns: "url" (its chunks point at garbage: zaya must never read them) and
// the optional "text"; `type` is text's physical type.
std::string parquet_file(const std::vector<Group>& groups, int type = 6) {
  std::string f = "PAR1";
  struct Placed { int64_t offset, size, values; };
  std::vector<Placed> placed;
  const int64_t garbage = 4;
  f += std::string(32, '\xee');
  for (const Group& g : groups) {
    const int64_t at = int64_t(f.size());
    for (const Page& p : g.pages) f += page_bytes(p);
    placed.push_back({at + g.offset_shift, int64_t(f.size()) - at + g.size_shift, g.rows});
  }
  ThriftWriter w;
  w.i32(1, 1);
  w.list(2, ThriftType::Struct, 3);
  w.begin_elem(); w.bin(4, "schema"); w.i32(5, 2); w.end();
  w.begin_elem(); w.i32(1, 6); w.i32(3, 1); w.bin(4, "url"); w.i32(6, 0); w.end();
  w.begin_elem(); w.i32(1, type); w.i32(3, 1); w.bin(4, "text"); w.i32(6, 0); w.end();
  int64_t rows = 0;
  for (const Group& g : groups) rows += g.rows;
  w.i64(3, rows);
  w.list(4, ThriftType::Struct, groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    w.begin_elem();
    w.list(1, ThriftType::Struct, 2);
    for (int c = 0; c < 2; ++c) {
      w.begin_elem();
      w.i64(2, 0);
      w.begin(3);
      w.i32(1, c == 0 ? 6 : type);
      w.list(2, ThriftType::I32, 1); w.zz(0);
      w.list(3, ThriftType::Binary, 1); w.varint(4); w.out += c == 0 ? "url!" : "text";
      w.i32(4, groups[i].codec);
      w.i64(5, placed[i].values);
      w.i64(6, placed[i].size);
      w.i64(7, c == 0 ? 1000 : placed[i].size);
      w.i64(9, c == 0 ? garbage : placed[i].offset);
      w.end();
      w.end();
    }
    w.i64(2, 0);
    w.i64(3, groups[i].rows);
    w.end();
  }
  w.bin(6, "zaya test");
  w.byte(0);
  return f + w.out + le32(uint32_t(w.out.size())) + "PAR1";
}

struct Dir {
  zaya::test_util::TempDir tmp{"Parquet", ::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::string write(const std::string& bytes, const std::string& name = "t.parquet") const {
    const std::string p = tmp / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

std::vector<std::optional<std::string>> read_all(const std::string& path, const std::string& column = "text") {
  zaya::ParquetStringColumn c(path, column);
  std::vector<std::optional<std::string>> out;
  std::string v;
  bool null = false;
  while (c.next(v, null)) {
    EXPECT_EQ(c.row(), out.size());
    out.push_back(null ? std::nullopt : std::optional(v));
  }
  EXPECT_EQ(out.size(), c.num_rows());
  return out;
}

// The error reading `path` throws ("" if none).
std::string read_error(const std::string& path, const std::string& column = "text") {
  try {
    read_all(path, column);
  } catch (const zaya::Error& e) {
    return e.what();
  }
  return "";
}

// One v1 PLAIN page of these values (nullopt: null).
Page plain_page(const std::vector<std::optional<std::string>>& vs) {
  std::vector<bool> present;
  std::vector<std::string> values;
  for (const auto& v : vs) {
    present.push_back(v.has_value());
    if (v) values.push_back(*v);
  }
  const std::string d = def_levels(present);
  Page p;
  p.body = le32(uint32_t(d.size())) + d + plain(values);
  p.num_values = int(vs.size());
  return p;
}

TEST(Parquet, ThriftVarintsZigzagAndFieldHeaders) {
  EXPECT_EQ(zaya::zigzag_decode(0), 0);
  EXPECT_EQ(zaya::zigzag_decode(1), -1);
  EXPECT_EQ(zaya::zigzag_decode(2), 1);
  EXPECT_EQ(zaya::zigzag_decode(4294967294u), 2147483647);
  EXPECT_EQ(zaya::zigzag_decode(4294967295u), -2147483648LL);
  ThriftWriter w;
  w.i32(1, -3);
  w.i64(2, int64_t(1) << 40);
  w.i32(200, 300);  // a long-form field id
  w.bin(201, "héllo");
  w.begin(202); w.i32(1, 7); w.list(2, ThriftType::I32, 20); for (int i = 0; i < 20; ++i) w.zz(i); w.end();
  w.boolean(203, false);
  w.byte(0);
  ThriftReader r(reinterpret_cast<const uint8_t*>(w.out.data()), w.out.size());
  int16_t id;
  ThriftType t;
  r.begin_struct();
  ASSERT_TRUE(r.next_field(id, t)); EXPECT_EQ(id, 1); EXPECT_EQ(r.i32(), -3);
  ASSERT_TRUE(r.next_field(id, t)); EXPECT_EQ(id, 2); EXPECT_EQ(r.i64(), int64_t(1) << 40);
  ASSERT_TRUE(r.next_field(id, t)); EXPECT_EQ(id, 200); EXPECT_EQ(r.int_field(t, "x"), 300);
  ASSERT_TRUE(r.next_field(id, t)); EXPECT_EQ(id, 201); EXPECT_EQ(r.binary(), "héllo");
  ASSERT_TRUE(r.next_field(id, t)); EXPECT_EQ(id, 202); r.skip(t);
  ASSERT_TRUE(r.next_field(id, t)); EXPECT_EQ(id, 203); EXPECT_FALSE(r.bool_value(t));
  EXPECT_FALSE(r.next_field(id, t));
  EXPECT_EQ(r.position(), w.out.size());
}

TEST(Parquet, ThriftRefusesTruncatedAndMalformedInput) {
  ThriftWriter w;
  w.bin(1, "0123456789");
  for (size_t cut = 0; cut < w.out.size(); ++cut) {
    ThriftReader r(reinterpret_cast<const uint8_t*>(w.out.data()), cut);
    int16_t id;
    ThriftType t;
    r.begin_struct();
    EXPECT_THROW({ if (r.next_field(id, t)) r.skip(t); }, zaya::ThriftTruncated) << cut;
  }
  const std::string long_varint(11, '\xff');
  ThriftReader r(reinterpret_cast<const uint8_t*>(long_varint.data()), long_varint.size());
  EXPECT_THROW(r.varint(), zaya::Error);
  // Structs nested 100 deep: an error, not a stack overflow.
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += char(0x1c);  // field 1, struct
  ThriftReader d(reinterpret_cast<const uint8_t*>(deep.data()), deep.size());
  EXPECT_THROW(d.skip(ThriftType::Struct), zaya::Error);
  // A list claiming more elements than bytes left.
  const std::string lst = "\xf5\xff\xff\xff\x0f";
  ThriftReader l(reinterpret_cast<const uint8_t*>(lst.data()), lst.size());
  EXPECT_THROW(l.skip(ThriftType::List), zaya::ThriftTruncated);
}

TEST(Parquet, RleHybridDecodesRunsAndBitPacking) {
  // The format spec's example: values 0..7 bit-packed at width 3 (one group), then a run of
  // nine 5s, then a bit-packed group with its padding bytes left out.
  const std::vector<uint8_t> data = {0x03, 0x88, 0xc6, 0xfa, 0x12, 0x05, 0x03, 0x01};
  zaya::ParquetRleDecoder d(data.data(), data.size(), 3);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(d.next(), i);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(d.next(), 5u);
  EXPECT_EQ(d.next(), 1u);   // the last group: 0x01 = value 1, then zeros
  EXPECT_EQ(d.next(), 0u);
  EXPECT_THROW(d.next(), zaya::Error);  // its next value's bits are past the data
  // Width 0: every value is 0, no bytes per value.
  const std::vector<uint8_t> zero = {0x08};
  zaya::ParquetRleDecoder z(zero.data(), zero.size(), 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(z.next(), 0u);
  EXPECT_THROW(z.next(), zaya::Error);
  // Width 20, one RLE run of a 3-byte value.
  const std::vector<uint8_t> wide = {0x04, 0x56, 0x34, 0x0b};
  zaya::ParquetRleDecoder wd(wide.data(), wide.size(), 20);
  EXPECT_EQ(wd.next(), 0x0b3456u);
  EXPECT_EQ(wd.next(), 0x0b3456u);
  EXPECT_THROW(wd.next(), zaya::Error);
  EXPECT_THROW(zaya::ParquetRleDecoder(zero.data(), zero.size(), 33), zaya::Error);
}

TEST(Parquet, ReadsPlainPagesWithNullsAcrossRowGroups) {
  Dir dir;
  const std::vector<std::optional<std::string>> a = {"first", std::nullopt, "", "multi\nline é 🙂"};
  const std::vector<std::optional<std::string>> b = {std::nullopt, std::nullopt, "x"};
  const std::vector<std::optional<std::string>> c = {std::string(3000, 'z'), "last"};
  const std::string path = dir.write(parquet_file({{7, {plain_page(a), plain_page(b)}}, {0, {}}, {2, {plain_page(c)}}}));
  zaya::ParquetStringColumn col(path, "text");
  EXPECT_EQ(col.num_rows(), 9u);
  const uint64_t size = std::filesystem::file_size(path);
  EXPECT_LT(col.bytes_read(), size);
  std::vector<std::optional<std::string>> want = a;
  want.insert(want.end(), b.begin(), b.end());
  want.insert(want.end(), c.begin(), c.end());
  std::string v;
  bool null = false;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(col.next(v, null));
    EXPECT_EQ(col.row(), i);
    EXPECT_EQ(null, !want[i].has_value()) << i;
    if (want[i]) {
      EXPECT_EQ(v, *want[i]) << i;
    }
  }
  EXPECT_FALSE(col.next(v, null));
  EXPECT_EQ(col.bytes_read(), size);
}

// A dictionary page and one RLE_DICTIONARY data page (v1 or v2) of indices `idx` at width 2.
std::vector<Page> dict_pages(const std::vector<uint32_t>& idx, bool v2) {
  Page d;
  d.type = 2;
  d.body = plain({"zero", "one", "two"});
  d.num_values = 3;
  Page p;
  p.type = v2 ? 3 : 0;
  p.encoding = 8;
  p.num_values = int(idx.size());
  std::string packed = {char(((idx.size() + 7) / 8) << 1 | 1)};
  for (size_t g = 0; g < (idx.size() + 7) / 8; ++g) {
    uint16_t bits = 0;
    for (size_t i = 0; i < 8 && g * 8 + i < idx.size(); ++i) bits |= uint16_t(idx[g * 8 + i] << (2 * i));
    packed += std::string{char(bits), char(bits >> 8)};
  }
  std::string levels = std::string{char(idx.size() << 1)} + "\x01";  // idx.size() present values
  if (v2) {
    p.def_bytes = int(levels.size());
    p.body = levels + "\x02" + packed;
  } else {
    p.body = le32(uint32_t(levels.size())) + levels + "\x02" + packed;
  }
  return {d, p};
}

TEST(Parquet, ReadsDictionaryPagesV1AndV2AndChecksCrc) {
  Dir dir;
  for (bool v2 : {false, true}) {
    auto pages = dict_pages({2, 0, 1, 1, 2, 0, 0, 2, 1}, v2);
    for (Page& p : pages) p.crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(p.body.data()), uInt(p.body.size())));
    const auto got = read_all(dir.write(parquet_file({{9, pages}})));
    const std::vector<std::optional<std::string>> want = {"two", "zero", "one", "one", "two", "zero", "zero", "two", "one"};
    EXPECT_EQ(got, want) << v2;
    pages[1].crc = *pages[1].crc ^ 1;
    EXPECT_NE(read_error(dir.write(parquet_file({{9, pages}}))).find("CRC mismatch"), std::string::npos);
  }
  // An index past the dictionary's 3 entries.
  const std::string e = read_error(dir.write(parquet_file({{4, dict_pages({0, 1, 3, 0}, false)}}), "bad-index.parquet"));
  EXPECT_NE(e.find("bad-index.parquet: column \"text\": row group 0, page at offset"), std::string::npos) << e;
  EXPECT_NE(e.find("row 2: dictionary index 3 is out of range"), std::string::npos) << e;
}

TEST(Parquet, ReadsSnappyZstdAndGzipPages) {
  Dir dir;
  const std::vector<std::optional<std::string>> vs = {"compressed", std::nullopt, std::string(5000, 'q') + "end"};
  const Page raw = plain_page(vs);
  for (int codec : {1, 2, 6}) {
    Page p = raw;
    std::string z;
    if (codec == 1) {
      snappy::Compress(raw.body.data(), raw.body.size(), &z);
    } else if (codec == 6) {
      z.resize(ZSTD_compressBound(raw.body.size()));
      z.resize(ZSTD_compress(z.data(), z.size(), raw.body.data(), raw.body.size(), 3));
    } else {
      z_stream s{};
      ASSERT_EQ(deflateInit2(&s, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);  // gzip header
      z.resize(deflateBound(&s, uLong(raw.body.size())) + 32);
      s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.body.data()));
      s.avail_in = uInt(raw.body.size());
      s.next_out = reinterpret_cast<Bytef*>(z.data());
      s.avail_out = uInt(z.size());
      ASSERT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
      z.resize(s.total_out);
      deflateEnd(&s);
    }
    p.body = z;
    p.uncompressed = int64_t(raw.body.size());
    Group g{3, {p}, codec};
    EXPECT_EQ(read_all(dir.write(parquet_file({g}))), vs) << codec;
    // The body cut by one byte (the header's size with it): a decompression error.
    g.pages[0].body.pop_back();
    const std::string e = read_error(dir.write(parquet_file({g}), "cut.parquet"));
    EXPECT_NE(e.find("cut.parquet: column \"text\": row group 0, page at offset"), std::string::npos) << codec << ": " << e;
    // An uncompressed size the codec cannot reach from these bytes: refused before allocating.
    g.pages[0] = p;
    g.pages[0].uncompressed = (int64_t(1) << 31) - 1;
    EXPECT_NE(read_error(dir.write(parquet_file({g}))).find("uncompressed (corrupt)"), std::string::npos) << codec;
  }
}

TEST(Parquet, RefusesCorruptAndUnsupportedFiles) {
  Dir dir;
  const std::string good = parquet_file({{2, {plain_page({"a", "b"})}}});
  EXPECT_EQ(read_all(dir.write(good)).size(), 2u);
  const std::string bad = dir.write("", "bad.parquet");
  auto err = [&](const std::string& bytes, const std::string& column = "text") {
    return read_error(dir.write(bytes, "bad.parquet"), column);
  };
  // One line that starts with the file's path and holds `want`.
  auto has = [&](const std::string& e, const std::string& want) -> ::testing::AssertionResult {
    if (e.rfind(bad + ": ", 0) == 0 && e.find(want) != std::string::npos && e.find('\n') == std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "'" << e << "' lacks '" << want << "'";
  };
  EXPECT_TRUE(has(err("PAR1"), "not a Parquet file"));
  EXPECT_TRUE(has(err(good.substr(0, good.size() / 2)), "not a Parquet file"));
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_TRUE(has(err(bad_magic), "no PAR1 magic"));
  std::string long_footer = good;
  long_footer.replace(good.size() - 8, 4, le32(1u << 30));
  EXPECT_TRUE(has(err(long_footer), "footer length"));
  std::string encrypted = good;
  encrypted.replace(good.size() - 4, 4, "PARE");
  EXPECT_TRUE(has(err(encrypted), "encrypted"));
  EXPECT_TRUE(has(err(good, "body"), "no column \"body\" (the file has: url, text)"));
  EXPECT_TRUE(has(err(parquet_file({{2, {plain_page({"a", "b"})}}}, 1)), "type INT32 is not supported"));
  EXPECT_TRUE(has(err(parquet_file({{2, {plain_page({"a", "b"})}, 4}})), "compression BROTLI is not supported"));
  EXPECT_TRUE(has(err(parquet_file({{2, {plain_page({"a", "b"})}, 0, 1 << 20}})), "outside the file's data"));
  EXPECT_TRUE(has(err(parquet_file({{2, {plain_page({"a", "b"})}, 0, 0, -3}})), "page at offset"));
  Page delta = plain_page({"a", "b"});
  delta.encoding = 6;
  EXPECT_TRUE(has(err(parquet_file({{2, {delta}}})), "column \"text\": encoding DELTA_LENGTH_BYTE_ARRAY is not supported"));
  // Fewer values in the pages than the row group holds; more in a page than it holds.
  EXPECT_TRUE(has(err(parquet_file({{3, {plain_page({"a", "b"})}}})), "values unread"));
  EXPECT_TRUE(has(err(parquet_file({{1, {plain_page({"a", "b"})}}})), "over the 1 left"));
  // A PLAIN length past the page's end; a dictionary page without its data page's dictionary.
  Page overrun = plain_page({"a", "b"});
  overrun.body.replace(overrun.body.size() - 5, 4, le32(1000));
  EXPECT_TRUE(has(err(parquet_file({{2, {overrun}}})), "row 1: PLAIN value of 1000 bytes runs past the page's end"));
  auto no_dict = dict_pages({0, 1}, false);
  EXPECT_TRUE(has(err(parquet_file({{2, {no_dict[1]}}})), "no dictionary page"));
}

}  // namespace
