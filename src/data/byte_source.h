// A corpus file's bytes as a stream: decompressed when its name says so (`.gz`: gzip, `.zst`:
// zstd), read in large chunks, and split into lines of any length.
//
// Errors are one line naming the file: a compression suffix over bytes of another kind
// ("x.jsonl.gz: named .gz but not gzip data"), a stream that ends mid-frame (truncated), or
// corrupt compressed data with the offset where the decoder gave up.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zaya {

enum class Compression { None, Gzip, Zstd };

// By suffix: .gz -> Gzip, .zst / .zstd -> Zstd, anything else -> None.
Compression compression_of(const std::string& path);
const char* compression_name(Compression c);  // "none", "gzip", "zstd"

class ByteSource {
 public:
  explicit ByteSource(std::string path);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Up to `cap` decompressed bytes into `out`; 0 only at the end of the file.
  size_t read(char* out, size_t cap);
  uint64_t raw_bytes_read() const { return raw_read_; }  // of the file itself (compressed)
  const std::string& path() const { return path_; }
  Compression compression() const { return comp_; }

 private:
  bool fill_raw();  // more file bytes into in_; false at the end of the file
  size_t read_gzip(char* out, size_t cap);
  size_t read_zstd(char* out, size_t cap);

  std::string path_;
  Compression comp_;
  int fd_ = -1;
  std::vector<char> in_;             // compressed bytes read from the file
  size_t in_pos_ = 0, in_end_ = 0;   // unconsumed bytes: in_[in_pos_, in_end_)
  uint64_t raw_read_ = 0;            // file bytes consumed by the decoder (progress)
  uint64_t file_offset_ = 0;         // file bytes read into in_ so far
  bool raw_eof_ = false, stream_done_ = true, started_ = false;
  void* z_ = nullptr;    // z_stream
  void* zstd_ = nullptr;  // ZSTD_DCtx
};

// Lines of a ByteSource. A UTF-8 byte order mark at the start of the file is dropped; the
// '\n' is not part of a line (a '\r' before it is, callers decide); a last line without a
// '\n' still counts. Lines longer than the buffer grow it (no limit but memory).
class LineReader {
 public:
  explicit LineReader(std::string path);

  // The next line; the view stays valid until the next call. False at the end of the file.
  bool next(std::string_view& line);
  uint64_t line_number() const { return line_no_; }  // 1-based, of the line next() returned
  uint64_t raw_bytes_read() const { return src_.raw_bytes_read(); }
  const std::string& path() const { return src_.path(); }

 private:
  ByteSource src_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false, first_ = true;
  uint64_t line_no_ = 0;
};

}  // namespace zaya
