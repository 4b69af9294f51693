// Parquet, read side: the values of one top-level string column, streamed row group by row
// group and page by page. What FineWeb-style files use is supported: BYTE_ARRAY columns (UTF8 /
// STRING, JSON, ENUM or no logical type), required or optional; PLAIN and dictionary
// encodings (PLAIN_DICTIONARY, RLE_DICTIONARY); data pages v1 and v2; UNCOMPRESSED, SNAPPY,
// GZIP and ZSTD. Anything else (nested or repeated columns, other types, encodings and
// codecs, encrypted files) is a one-line error naming the file, the column and the feature;
// a corrupt or cut-short file is a one-line error naming the file and where.
//
// The file is read with pread: the footer once, then only this column's pages, one at a time,
// so memory holds one page and the chunk's dictionary (never the whole file); every size is
// checked against the file's before anything is allocated.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zaya {

// Parquet's RLE / bit-packed hybrid (definition levels, dictionary indices): runs of
// varint header (LSB 0: a repeated value of ceil(width/8) bytes, header >> 1 times; LSB 1:
// (header >> 1) groups of 8 values packed LSB first, `width` bits each).
class ParquetRleDecoder {
 public:
  ParquetRleDecoder() = default;
  ParquetRleDecoder(const uint8_t* data, size_t size, int bit_width);  // bit_width 0..32
  // The next value; throws zaya::Error ("... runs past its N bytes") when the data ends.
  uint32_t next();

 private:
  void next_run();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0, pos_ = 0;  // pos_: the next run header's byte
  int width_ = 0;
  uint64_t rle_left_ = 0;      // values left in the current repeated run
  uint32_t rle_value_ = 0;
  uint64_t packed_left_ = 0;   // values left in the current bit-packed run
  uint64_t packed_bit_ = 0;    // bit offset of its next value from data_
};

// Decompresses one page body of `codec` (parquet.thrift's CompressionCodec) into exactly
// `out_size` bytes; throws zaya::Error on an unsupported codec, corrupt data or a size that
// differs.
void parquet_decompress(int32_t codec, const uint8_t* src, size_t n, uint8_t* out, size_t out_size);
// The largest uncompressed size `n` compressed bytes of `codec` can hold (the codec's
// maximum ratio), or 0 for an unsupported codec; sizes claimed over it are corrupt.
uint64_t parquet_max_uncompressed(int32_t codec, uint64_t n);

struct ParquetFileMeta;
struct ParquetChunk;
struct ParquetPageHeader;

// Streams the values of one top-level string column (BYTE_ARRAY, UTF8/STRING or no logical type;
// required or optional) of a Parquet file, row group by row group and page by page, in row order,
// with memory bounded by one page and the chunk's dictionary (never the whole file).
class ParquetStringColumn {
 public:
  // Opens the file, reads and checks the footer, the schema and the column's chunks.
  ParquetStringColumn(const std::string& path, const std::string& column);
  ~ParquetStringColumn();
  ParquetStringColumn(const ParquetStringColumn&) = delete;
  ParquetStringColumn& operator=(const ParquetStringColumn&) = delete;

  uint64_t num_rows() const { return num_rows_; }  // from the file metadata
  // Next row's value: true and fills `value` (is_null=false), or is_null=true for a null
  // (value cleared); false at the end.
  bool next(std::string& value, bool& is_null);
  uint64_t row() const { return rows_ ? rows_ - 1 : 0; }  // 0-based index of the row next() returned last
  // How far into the file the reader is, for progress against the file's size: the end of
  // the last page read (0 before the first), the file's size once next() returned false.
  uint64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }
  const std::string& column() const { return column_; }

 private:
  void open_footer();
  void find_column(const ParquetFileMeta& m);
  void check_chunk(const ParquetChunk& c, size_t group, uint64_t footer_start) const;
  bool load_page();  // false at the end of the file
  void start_data_page(const ParquetPageHeader& h, const uint8_t* body, size_t n);
  void read_dictionary(const ParquetPageHeader& h, const uint8_t* body, size_t n);
  // Reads the page body into raw_, checks its CRC and decompresses it into page_ (v2: after
  // the `levels` uncompressed bytes); returns page_'s data.
  const uint8_t* page_body(const ParquetPageHeader& h, uint64_t at, size_t levels, bool compressed);
  void pread_exact(void* dst, size_t n, uint64_t offset, const char* what) const;
  [[noreturn]] void fail_page(const std::string& why) const;
  std::string where() const;  // "PATH: column "C": "

  std::string path_, column_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  uint64_t num_rows_ = 0;
  int max_def_ = 0;  // 1 for an optional column, 0 for a required one
  std::vector<std::unique_ptr<ParquetChunk>> chunks_;  // this column's, one per row group

  // Position: the row group, the next page header's offset, the chunk's end.
  size_t group_ = 0;
  bool in_chunk_ = false;
  uint64_t pos_ = 0, chunk_end_ = 0, page_at_ = 0;
  int64_t chunk_values_left_ = 0;
  bool data_seen_ = false;  // a data page was read in this chunk (a dictionary must precede)
  uint64_t rows_ = 0, bytes_read_ = 0;

  // The chunk's dictionary: its page's bytes and each entry's view into them.
  std::vector<uint8_t> dict_buf_;
  std::vector<std::string_view> dict_;
  bool has_dict_ = false;

  // The current data page.
  std::vector<uint8_t> raw_, page_;
  int64_t page_values_left_ = 0;
  ParquetRleDecoder def_;
  bool dict_page_ = false;  // values are dictionary indices (idx_) instead of PLAIN (plain_)
  ParquetRleDecoder idx_;
  const uint8_t* plain_ = nullptr;
  const uint8_t* plain_end_ = nullptr;
};

}  // namespace zaya
