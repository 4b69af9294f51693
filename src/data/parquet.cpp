// ParquetStringColumn (parquet.h): the footer and schema at open, then this column's pages
// one at a time. Layout: "PAR1", the column chunks, the footer (FileMetaData, Thrift compact),
// its 4-byte little-endian length, "PAR1". A chunk is an optional dictionary page, then data
// pages, each a Thrift PageHeader followed by its (compressed) body.
#include "data/parquet.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "data/parquet_meta.h"

namespace zaya {

namespace {

constexpr uint64_t kMaxPage = uint64_t(1) << 30;  // larger pages are corrupt (the format's sizes are i32)
constexpr size_t kHeaderWindow = 1024;            // first read of a page header; grown on demand

uint32_t load_le32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

bool is_string_type(const ParquetSchemaElement& e) {
  // LogicalType STRING / ENUM / JSON, ConvertedType UTF8 / ENUM / JSON, or none.
  const bool logical_ok = e.logical_type < 0 || e.logical_type == 1 || e.logical_type == 4 || e.logical_type == 12;
  const bool converted_ok = e.converted_type < 0 || e.converted_type == 0 || e.converted_type == 4 || e.converted_type == 19;
  return logical_ok && converted_ok;
}

}  // namespace

std::string ParquetStringColumn::where() const { return cat(path_, ": column \"", column_, "\": "); }

void ParquetStringColumn::fail_page(const std::string& why) const {
  fail(where(), "row group ", group_, ", page at offset ", page_at_, ": ", why);
}

void ParquetStringColumn::pread_exact(void* dst, size_t n, uint64_t offset, const char* what) const {
  uint8_t* d = static_cast<uint8_t*>(dst);
  while (n) {
    const ssize_t r = ::pread(fd_, d, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    ZAYA_CHECK(r > 0, path_, ": cannot read ", what, " at offset ", offset, " (", r < 0 ? std::strerror(errno) : "file ends early", ")");
    d += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
}

ParquetStringColumn::ParquetStringColumn(const std::string& path, const std::string& column) : path_(path), column_(column) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZAYA_CHECK(fd_ >= 0, path, ": cannot open (", std::strerror(errno), ")");
  try {
    struct stat st {};
    ZAYA_CHECK(::fstat(fd_, &st) == 0, path, ": cannot stat (", std::strerror(errno), ")");
    ZAYA_CHECK(S_ISREG(st.st_mode), path, ": not a regular file");
    file_size_ = uint64_t(st.st_size);
    open_footer();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

ParquetStringColumn::~ParquetStringColumn() {
  if (fd_ >= 0) ::close(fd_);
}

void ParquetStringColumn::open_footer() {
  ZAYA_CHECK(file_size_ >= 12, path_, ": not a Parquet file (", file_size_, " bytes, too short for its header and footer)");
  uint8_t head[4], tail[8];
  pread_exact(head, 4, 0, "the header");
  pread_exact(tail, 8, file_size_ - 8, "the footer");
  ZAYA_CHECK(std::memcmp(tail + 4, "PARE", 4) != 0, path_, ": encrypted Parquet files are not supported (footer magic PARE)");
  ZAYA_CHECK(std::memcmp(head, "PAR1", 4) == 0 && std::memcmp(tail + 4, "PAR1", 4) == 0, path_,
             ": not a Parquet file (no PAR1 magic at its start and end; cut short?)");
  const uint64_t footer_len = load_le32(tail);
  ZAYA_CHECK(footer_len <= file_size_ - 12, path_, ": footer length ", footer_len, " is over the file's ", file_size_,
             " bytes (cut short or corrupt)");
  const uint64_t footer_start = file_size_ - 8 - footer_len;
  std::vector<uint8_t> footer(footer_len);
  pread_exact(footer.data(), footer.size(), footer_start, "the footer");
  ParquetFileMeta m;
  try {
    m = parse_parquet_footer(footer.data(), footer.size());
  } catch (const Error& e) {
    fail(path_, ": corrupt footer (", e.what(), ")");
  }
  ZAYA_CHECK(!m.encrypted, path_, ": encrypted Parquet files are not supported");
  ZAYA_CHECK(m.num_rows >= 0, path_, ": footer num_rows is negative");
  num_rows_ = uint64_t(m.num_rows);
  find_column(m);
  uint64_t rows = 0;
  for (size_t g = 0; g < chunks_.size(); ++g) {
    check_chunk(*chunks_[g], g, footer_start);
    rows += uint64_t(chunks_[g]->num_rows);
  }
  ZAYA_CHECK(rows == num_rows_, path_, ": the row groups hold ", rows, " rows, the footer says ", num_rows_);
}

void ParquetStringColumn::find_column(const ParquetFileMeta& m) {
  // Walk the schema depth first: top-level fields are the root's children; leaves are
  // numbered in this order, which is the order of the row groups' column chunks.
  const auto& s = m.schema;
  size_t i = 1, leaf = 0;
  int64_t found_leaf = -1;
  std::string names;
  const ParquetSchemaElement* field = nullptr;
  for (int32_t top = 0; top < s[0].num_children; ++top) {
    ZAYA_CHECK(i < s.size(), path_, ": corrupt schema (the root has ", s[0].num_children, " fields, the schema lists ",
               s.size() - 1, " elements)");
    const ParquetSchemaElement& e = s[i];
    // Count the leaves under this field (a group's subtree).
    const size_t leaf_start = leaf;
    uint64_t pending = 1;
    while (pending) {
      ZAYA_CHECK(i < s.size(), path_, ": corrupt schema (a group's children run past its end)");
      --pending;
      if (s[i].num_children == 0) ++leaf;
      pending += uint64_t(s[i].num_children);
      ++i;
    }
    names += cat(names.empty() ? "" : ", ", e.name);
    if (e.name == column_ && !field) {
      field = &e;
      found_leaf = int64_t(leaf_start);
    }
  }
  ZAYA_CHECK(field, path_, ": no column \"", column_, "\" (the file has: ", names.empty() ? "no columns" : names, ")");
  const ParquetSchemaElement& e = *field;
  ZAYA_CHECK(e.num_children == 0, where(), "nested columns (a group: struct, list or map) are not supported");
  ZAYA_CHECK(e.repetition != int32_t(ParquetRepetition::Repeated), where(),
             "repeated columns (lists) are not supported");
  ZAYA_CHECK(e.type == int32_t(ParquetType::ByteArray), where(), "type ", parquet_type_name(e.type),
             " is not supported (BYTE_ARRAY strings are)");
  ZAYA_CHECK(is_string_type(e), where(), "a BYTE_ARRAY of logical type ", e.logical_type >= 0 ? e.logical_type : e.converted_type,
             " is not text (STRING/UTF8, JSON, ENUM or none are supported)");
  max_def_ = e.repetition == int32_t(ParquetRepetition::Optional) ? 1 : 0;
  for (size_t g = 0; g < m.row_groups.size(); ++g) {
    const auto& rg = m.row_groups[g];
    ZAYA_CHECK(size_t(found_leaf) < rg.size(), path_, ": corrupt footer (row group ", g, " has ", rg.size(),
               " column chunks, the schema has ", leaf, " columns)");
    chunks_.push_back(std::make_unique<ParquetChunk>(rg[size_t(found_leaf)]));
  }
}

void ParquetStringColumn::check_chunk(const ParquetChunk& c, size_t g, uint64_t footer_start) const {
  const std::string at = cat(where(), "row group ", g, ": ");
  ZAYA_CHECK(!c.encrypted, at, "encrypted columns are not supported");
  ZAYA_CHECK(!c.external, at, "column chunks in other files (file_path) are not supported");
  ZAYA_CHECK(c.has_meta, at, "corrupt footer (the column chunk has no metadata)");
  ZAYA_CHECK(c.type == int32_t(ParquetType::ByteArray), at, "corrupt footer (chunk type ", parquet_type_name(c.type),
             ", the schema says BYTE_ARRAY)");
  ZAYA_CHECK(parquet_max_uncompressed(c.codec, 1) > 0, at, "compression ", parquet_codec_name(c.codec),
             " is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)");
  ZAYA_CHECK(c.num_values == c.num_rows, at, "corrupt footer (", c.num_values, " values in a flat column of ", c.num_rows, " rows)");
  const int64_t start = c.dictionary_page_offset > 0 && c.dictionary_page_offset < c.data_page_offset
                            ? c.dictionary_page_offset : c.data_page_offset;
  ZAYA_CHECK(start >= 4 && c.total_compressed_size >= 0 && uint64_t(start) <= footer_start &&
                 uint64_t(c.total_compressed_size) <= footer_start - uint64_t(start),
             at, "column chunk at offset ", start, " of ", c.total_compressed_size, " bytes is outside the file's data (",
             footer_start, " bytes before the footer; cut short or corrupt)");
}

bool ParquetStringColumn::next(std::string& value, bool& is_null) {
  while (page_values_left_ == 0) {
    if (!load_page()) return false;
  }
  --page_values_left_;
  --chunk_values_left_;
  ++rows_;
  try {
    if (max_def_ && def_.next() == 0) {
      is_null = true;
      value.clear();
      return true;
    }
    is_null = false;
    if (dict_page_) {
      const uint32_t i = idx_.next();
      if (i >= dict_.size()) fail("dictionary index ", i, " is out of range (the dictionary has ", dict_.size(), " entries)");
      value.assign(dict_[i]);
    } else {
      if (plain_end_ - plain_ < 4) fail("PLAIN values run past the page's end");
      const uint32_t n = load_le32(plain_);
      plain_ += 4;
      if (uint64_t(plain_end_ - plain_) < n) fail("PLAIN value of ", n, " bytes runs past the page's end");
      value.assign(reinterpret_cast<const char*>(plain_), n);
      plain_ += n;
    }
  } catch (const Error& e) {
    fail_page(cat("row ", row(), ": ", e.what()));
  }
  return true;
}

const uint8_t* ParquetStringColumn::page_body(const ParquetPageHeader& h, uint64_t at, size_t levels, bool compressed) {
  const size_t n = size_t(h.compressed_size), out = size_t(h.uncompressed_size);
  if (levels > n || levels > out) fail_page(cat("levels of ", levels, " bytes are over the page's ", n, " bytes"));
  const int32_t codec = compressed ? chunks_[group_]->codec : int32_t(ParquetCodec::Uncompressed);
  if (out > kMaxPage || out - levels > parquet_max_uncompressed(codec, n - levels))
    fail_page(cat("page of ", n, " bytes claims ", out, " uncompressed (corrupt)"));
  raw_.resize(n);
  pread_exact(raw_.data(), n, at, "a page");
  if (h.has_crc && uint32_t(crc32(0, raw_.data(), uInt(n))) != h.crc) fail_page("CRC mismatch (corrupt page)");
  page_.resize(out);
  std::copy(raw_.begin(), raw_.begin() + ptrdiff_t(levels), page_.begin());
  try {
    parquet_decompress(codec, raw_.data() + levels, n - levels, page_.data() + levels, out - levels);
  } catch (const Error& e) {
    fail_page(e.what());
  }
  return page_.data();
}

bool ParquetStringColumn::load_page() {
  for (;;) {
    if (!in_chunk_ || chunk_values_left_ == 0) {
      if (in_chunk_) ++group_;
      if (group_ >= chunks_.size()) {
        bytes_read_ = file_size_;
        return false;
      }
      const ParquetChunk& c = *chunks_[group_];
      pos_ = uint64_t(c.dictionary_page_offset > 0 && c.dictionary_page_offset < c.data_page_offset ? c.dictionary_page_offset
                                                                                                    : c.data_page_offset);
      chunk_end_ = pos_ + uint64_t(c.total_compressed_size);
      chunk_values_left_ = c.num_values;
      in_chunk_ = true;
      data_seen_ = has_dict_ = false;
      dict_.clear();
      dict_buf_.clear();
      continue;  // an empty chunk moves on to the next row group
    }
    page_at_ = pos_;
    if (pos_ >= chunk_end_)
      fail_page(cat("the column chunk ends with ", chunk_values_left_, " of its ", chunks_[group_]->num_values, " values unread"));
    // The header: read a window, larger while it runs past it.
    ParquetPageHeader h;
    std::vector<uint8_t>& win = raw_;
    for (size_t w = kHeaderWindow;; w *= 8) {
      const size_t len = size_t(std::min<uint64_t>(w, chunk_end_ - pos_));
      win.resize(len);
      pread_exact(win.data(), len, pos_, "a page header");
      try {
        h = parse_parquet_page_header(win.data(), len);
        break;
      } catch (const ThriftTruncated& e) {
        if (len == chunk_end_ - pos_) fail_page(cat("corrupt page header (", e.what(), ")"));
      } catch (const Error& e) {
        fail_page(cat("corrupt page header (", e.what(), ")"));
      }
    }
    const uint64_t body_at = pos_ + h.header_size;
    if (uint64_t(h.compressed_size) > chunk_end_ - body_at)
      fail_page(cat("page of ", h.compressed_size, " bytes runs past its column chunk's end (corrupt or cut short)"));
    pos_ = body_at + uint64_t(h.compressed_size);
    bytes_read_ = pos_;
    switch (ParquetPageType(h.type)) {
      case ParquetPageType::Dictionary: {
        if (has_dict_ || data_seen_) fail_page("a dictionary page after the chunk's first page");
        const uint8_t* body = page_body(h, body_at, 0, true);
        read_dictionary(h, body, size_t(h.uncompressed_size));
        continue;
      }
      case ParquetPageType::Data: {
        const uint8_t* body = page_body(h, body_at, 0, true);
        start_data_page(h, body, size_t(h.uncompressed_size));
        break;
      }
      case ParquetPageType::DataV2: {
        if (h.def_bytes < 0 || h.rep_bytes < 0) fail_page("data page v2 without level sizes");
        const size_t levels = size_t(h.def_bytes) + size_t(h.rep_bytes);
        const uint8_t* body = page_body(h, body_at, levels, h.is_compressed);
        start_data_page(h, body, size_t(h.uncompressed_size));
        break;
      }
      case ParquetPageType::Index:
        continue;
      default:
        fail_page(cat("unknown page type ", h.type));
    }
    if (page_values_left_ > 0) return true;
  }
}

void ParquetStringColumn::read_dictionary(const ParquetPageHeader& h, const uint8_t* body, size_t n) {
  if (h.encoding != int32_t(ParquetEncoding::Plain) && h.encoding != int32_t(ParquetEncoding::PlainDictionary))
    fail_page(cat("dictionary encoding ", parquet_encoding_name(h.encoding), " is not supported (PLAIN is)"));
  if (h.num_values < 0 || uint64_t(h.num_values) > n / 4)
    fail_page(cat("dictionary of ", h.num_values, " entries does not fit its ", n, " bytes"));
  dict_buf_.assign(body, body + n);
  dict_.clear();
  dict_.reserve(size_t(h.num_values));
  size_t p = 0;
  for (int32_t i = 0; i < h.num_values; ++i) {
    if (n - p < 4) fail_page(cat("dictionary entry ", i, " runs past the page's end"));
    const uint32_t len = load_le32(dict_buf_.data() + p);
    p += 4;
    if (n - p < len) fail_page(cat("dictionary entry ", i, " of ", len, " bytes runs past the page's end"));
    dict_.emplace_back(reinterpret_cast<const char*>(dict_buf_.data() + p), len);
    p += len;
  }
  has_dict_ = true;
}

void ParquetStringColumn::start_data_page(const ParquetPageHeader& h, const uint8_t* body, size_t n) {
  data_seen_ = true;
  if (h.num_values < 0) fail_page("data page without num_values");
  if (h.num_values > chunk_values_left_)
    fail_page(cat("data page of ", h.num_values, " values, over the ", chunk_values_left_, " left in the column chunk"));
  if (h.type == int32_t(ParquetPageType::DataV2) && h.num_rows >= 0 && h.num_rows != h.num_values)
    fail_page(cat("data page v2 of ", h.num_values, " values in ", h.num_rows, " rows (a flat column has one per row)"));
  const uint8_t* p = body;
  const uint8_t* end = body + n;
  if (h.type == int32_t(ParquetPageType::Data)) {
    if (max_def_) {
      if (h.def_encoding != int32_t(ParquetEncoding::Rle))
        fail_page(cat("definition level encoding ", parquet_encoding_name(h.def_encoding), " is not supported (RLE is)"));
      if (end - p < 4) fail_page("definition levels run past the page's end");
      const uint32_t len = load_le32(p);
      p += 4;
      if (uint64_t(end - p) < len) fail_page(cat("definition levels of ", len, " bytes run past the page's end"));
      def_ = ParquetRleDecoder(p, len, 1);
      p += len;
    }
  } else {
    p += h.rep_bytes;  // none in a flat column
    def_ = ParquetRleDecoder(p, size_t(h.def_bytes), 1);
    p += h.def_bytes;
    if (!max_def_ && h.num_nulls > 0) fail_page(cat(h.num_nulls, " nulls in a required column"));
  }
  switch (ParquetEncoding(h.encoding)) {
    case ParquetEncoding::Plain:
      dict_page_ = false;
      plain_ = p;
      plain_end_ = end;
      break;
    case ParquetEncoding::PlainDictionary:
    case ParquetEncoding::RleDictionary: {
      if (!has_dict_) fail_page("a dictionary-encoded page, but the column chunk has no dictionary page");
      dict_page_ = true;
      if (h.num_values > 0) {  // an all-null page may hold no index bytes
        if (p >= end && max_def_ == 0) fail_page("dictionary indices missing");
        const int width = p < end ? *p : 0;
        if (width > 32) fail_page(cat("dictionary index bit width ", width, " is over 32"));
        idx_ = p < end ? ParquetRleDecoder(p + 1, size_t(end - p - 1), width) : ParquetRleDecoder();
      }
      break;
    }
    default:
      fail(where(), "encoding ", parquet_encoding_name(h.encoding), " is not supported (PLAIN and dictionary are)");
  }
  page_values_left_ = h.num_values;
}

}  // namespace zaya
