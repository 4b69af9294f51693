#include "data/byte_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace zaya {

namespace {

constexpr size_t kRawChunk = size_t(256) << 10;  // file bytes per read() (grows for a frame header that straddles it)

std::string hex_prefix(const char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(n, 4); ++i) {
    if (i) out += ' ';
    out += digits[uint8_t(p[i]) >> 4];
    out += digits[uint8_t(p[i]) & 15];
  }
  return out;
}

bool is_zstd_frame_magic(const char* p) {
  uint32_t m;
  std::memcpy(&m, p, 4);
  return m == ZSTD_MAGICNUMBER || (m & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

}  // namespace

Compression compression_of(const std::string& path) {
  if (path.ends_with(".gz")) return Compression::Gzip;
  if (path.ends_with(".zst") || path.ends_with(".zstd")) return Compression::Zstd;
  return Compression::None;
}

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::Gzip: return "gzip";
    case Compression::Zstd: return "zstd";
    default: return "none";
  }
}

ByteSource::ByteSource(std::string path) : path_(std::move(path)), comp_(compression_of(path_)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path_, ": cannot open (", std::strerror(errno), ")");
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  in_.resize(kRawChunk);
  if (comp_ == Compression::Gzip) {
    auto* z = new z_stream{};
    if (inflateInit2(z, 16 + MAX_WBITS) != Z_OK) {
      delete z;
      ::close(fd_);
      fail(path_, ": cannot start the gzip decoder");
    }
    z_ = z;
  } else if (comp_ == Compression::Zstd) {
    zstd_ = ZSTD_createDCtx();
    if (!zstd_) {
      ::close(fd_);
      fail(path_, ": cannot start the zstd decoder");
    }
  }
}

ByteSource::~ByteSource() {
  if (z_) {
    inflateEnd(static_cast<z_stream*>(z_));
    delete static_cast<z_stream*>(z_);
  }
  if (zstd_) ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(zstd_));
  if (fd_ >= 0) ::close(fd_);
}

bool ByteSource::fill_raw() {
  if (raw_eof_) return false;
  if (in_pos_ > 0) {  // keep unconsumed bytes at the front
    std::memmove(in_.data(), in_.data() + in_pos_, in_end_ - in_pos_);
    in_end_ -= in_pos_;
    in_pos_ = 0;
  }
  if (in_end_ == in_.size()) in_.resize(in_.size() * 2);
  ssize_t n;
  do {
    n = ::read(fd_, in_.data() + in_end_, in_.size() - in_end_);
  } while (n < 0 && errno == EINTR);
  if (n < 0) fail(path_, ": read error (", std::strerror(errno), ")");
  if (n == 0) {
    raw_eof_ = true;
    return false;
  }
  in_end_ += size_t(n);
  file_offset_ += uint64_t(n);
  return true;
}

size_t ByteSource::read(char* out, size_t cap) {
  if (cap == 0) return 0;
  if (comp_ == Compression::Gzip) return read_gzip(out, cap);
  if (comp_ == Compression::Zstd) return read_zstd(out, cap);
  // Plain: hand out buffered bytes, else read straight into the caller's buffer.
  if (in_pos_ < in_end_) {
    size_t n = std::min(cap, in_end_ - in_pos_);
    std::memcpy(out, in_.data() + in_pos_, n);
    in_pos_ += n;
    raw_read_ += n;
    return n;
  }
  ssize_t n;
  do {
    n = ::read(fd_, out, cap);
  } while (n < 0 && errno == EINTR);
  if (n < 0) fail(path_, ": read error (", std::strerror(errno), ")");
  raw_read_ += uint64_t(n);
  return size_t(n);
}

size_t ByteSource::read_gzip(char* out, size_t cap) {
  auto* z = static_cast<z_stream*>(z_);
  z->next_out = reinterpret_cast<Bytef*>(out);
  z->avail_out = uInt(std::min<size_t>(cap, UINT32_MAX));
  const uInt want = z->avail_out;
  while (z->avail_out == want) {
    if (stream_done_) {  // a member starts here: the file's first, or one after another
      while (in_end_ - in_pos_ < 2 && fill_raw()) {
      }
      if (in_pos_ == in_end_) {
        if (!started_) fail(path_, ": named .gz but not gzip data (empty file)");
        return 0;  // the end, after whole members
      }
      const char* p = in_.data() + in_pos_;
      if (in_end_ - in_pos_ < 2 || uint8_t(p[0]) != 0x1f || uint8_t(p[1]) != 0x8b) {
        if (!started_)
          fail(path_, ": named .gz but not gzip data (starts with ", hex_prefix(p, in_end_ - in_pos_), ")");
        fail(path_, ": bytes after the end of the gzip stream at offset ", raw_read_, " are not gzip data");
      }
      if (started_) inflateReset(z);
      started_ = true;
      stream_done_ = false;
    }
    if (in_pos_ == in_end_ && !fill_raw())
      fail(path_, ": truncated gzip stream (the file ends at byte ", file_offset_, " inside compressed data)");
    z->next_in = reinterpret_cast<Bytef*>(in_.data() + in_pos_);
    z->avail_in = uInt(in_end_ - in_pos_);
    int rc = inflate(z, Z_NO_FLUSH);
    size_t used = (in_end_ - in_pos_) - z->avail_in;
    in_pos_ += used;
    raw_read_ += used;
    if (rc == Z_STREAM_END) {
      stream_done_ = true;
    } else if (rc == Z_BUF_ERROR) {
      if (!fill_raw() && in_pos_ == in_end_)
        fail(path_, ": truncated gzip stream (the file ends at byte ", file_offset_, " inside compressed data)");
    } else if (rc != Z_OK) {
      fail(path_, ": corrupt gzip data near byte ", raw_read_, " (", z->msg ? z->msg : zError(rc), ")");
    }
  }
  return want - z->avail_out;
}

size_t ByteSource::read_zstd(char* out, size_t cap) {
  auto* dctx = static_cast<ZSTD_DCtx*>(zstd_);
  ZSTD_outBuffer ob{out, cap, 0};
  while (ob.pos == 0) {
    if (in_pos_ == in_end_ && !fill_raw()) {
      if (!started_) fail(path_, ": named .zst but not zstd data (empty file)");
      if (!stream_done_)
        fail(path_, ": truncated zstd stream (the file ends at byte ", file_offset_, " inside a frame)");
      return 0;
    }
    if (stream_done_) {  // a frame starts here: check its magic number
      while (in_end_ - in_pos_ < 4 && fill_raw()) {
      }
      const char* p = in_.data() + in_pos_;
      if (in_end_ - in_pos_ < 4 || !is_zstd_frame_magic(p)) {
        if (!started_)
          fail(path_, ": named .zst but not zstd data (starts with ", hex_prefix(p, in_end_ - in_pos_), ")");
        fail(path_, ": bytes after the end of a zstd frame at offset ", raw_read_, " are not zstd data");
      }
      started_ = true;
      stream_done_ = false;
    }
    ZSTD_inBuffer ib{in_.data() + in_pos_, in_end_ - in_pos_, 0};
    size_t rc = ZSTD_decompressStream(dctx, &ob, &ib);
    in_pos_ += ib.pos;
    raw_read_ += ib.pos;
    if (ZSTD_isError(rc)) fail(path_, ": corrupt zstd data near byte ", raw_read_, " (", ZSTD_getErrorName(rc), ")");
    if (rc == 0) stream_done_ = true;  // a frame decoded and flushed whole
  }
  return ob.pos;
}

// ---------------------------------------------------------------- lines

LineReader::LineReader(std::string path) : src_(std::move(path)) { buf_.resize(size_t(256) << 10); }

bool LineReader::next(std::string_view& line) {
  size_t scan = begin_;
  while (true) {
    const char* nl = static_cast<const char*>(std::memchr(buf_.data() + scan, '\n', end_ - scan));
    if (nl) {
      size_t stop = size_t(nl - buf_.data());
      line = std::string_view(buf_.data() + begin_, stop - begin_);
      begin_ = stop + 1;
      break;
    }
    if (eof_) {
      if (begin_ == end_) return false;
      line = std::string_view(buf_.data() + begin_, end_ - begin_);
      begin_ = end_;
      break;
    }
    // Need more bytes: compact, grow when a single line fills the buffer, then read.
    size_t have = end_ - begin_;
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, have);
      begin_ = 0;
      end_ = have;
    }
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    scan = end_;
    size_t n = src_.read(buf_.data() + end_, buf_.size() - end_);
    if (n == 0) eof_ = true;
    end_ += n;
  }
  ++line_no_;
  if (first_) {
    first_ = false;
    if (line.size() >= 3 && std::memcmp(line.data(), "\xEF\xBB\xBF", 3) == 0) line.remove_prefix(3);
  }
  return true;
}

}  // namespace zaya
