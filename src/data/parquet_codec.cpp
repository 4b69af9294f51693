// Parquet page decoding that needs no file: the RLE / bit-packed hybrid and the codecs
// (parquet.h).
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <climits>

#include "core/error.h"
#include "data/parquet.h"
#include "data/parquet_meta.h"

namespace zaya {

ParquetRleDecoder::ParquetRleDecoder(const uint8_t* data, size_t size, int bit_width)
    : data_(data), size_(size), width_(bit_width) {
  ZAYA_CHECK(bit_width >= 0 && bit_width <= 32, "RLE bit width ", bit_width, " is not in 0..32");
}

void ParquetRleDecoder::next_run() {
  uint64_t h = 0;
  for (int shift = 0;; shift += 7) {
    ZAYA_CHECK(pos_ < size_, "RLE data runs past its ", size_, " bytes");
    ZAYA_CHECK(shift < 64, "RLE run header over 64 bits");
    const uint8_t b = data_[pos_++];
    h |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  if (h & 1) {
    // Groups of 8 values; the last run's padding bytes may be left out, so each value's
    // bits are checked as it is read.
    const uint64_t groups = h >> 1;
    packed_left_ = groups * 8;
    packed_bit_ = uint64_t(pos_) * 8;
    const uint64_t bytes = groups * uint64_t(width_);
    pos_ = bytes > size_ - pos_ ? size_ : pos_ + size_t(bytes);
  } else {
    rle_left_ = h >> 1;
    const int nbytes = (width_ + 7) / 8;
    ZAYA_CHECK(size_t(nbytes) <= size_ - pos_, "RLE data runs past its ", size_, " bytes");
    uint32_t v = 0;
    for (int i = 0; i < nbytes; ++i) v |= uint32_t(data_[pos_ + size_t(i)]) << (8 * i);
    pos_ += size_t(nbytes);
    rle_value_ = v;
  }
}

uint32_t ParquetRleDecoder::next() {
  while (rle_left_ == 0 && packed_left_ == 0) next_run();
  if (rle_left_) {
    --rle_left_;
    return rle_value_;
  }
  --packed_left_;
  const uint64_t bit = packed_bit_;
  packed_bit_ += uint64_t(width_);
  if (width_ == 0) return 0;
  const uint64_t last = (bit + uint64_t(width_) - 1) / 8;  // the last byte this value touches
  ZAYA_CHECK(last < size_, "RLE data runs past its ", size_, " bytes");
  uint64_t w = 0;
  for (uint64_t b = bit / 8, i = 0; b <= last; ++b, ++i) w |= uint64_t(data_[b]) << (8 * i);
  w >>= bit % 8;
  return uint32_t(w & ((uint64_t(1) << width_) - 1));
}

uint64_t parquet_max_uncompressed(int32_t codec, uint64_t n) {
  switch (ParquetCodec(codec)) {
    case ParquetCodec::Uncompressed: return n;
    case ParquetCodec::Snappy: return n * 32 + 64;      // a 2-byte copy emits at most 64 bytes
    case ParquetCodec::Gzip: return n * 1032 + 1024;    // deflate's maximum ratio
    case ParquetCodec::Zstd: return n * 32768 + 65536;  // a 4-byte RLE block emits 128 KiB
    default: return 0;
  }
}

namespace {

void inflate_gzip(const uint8_t* src, size_t n, uint8_t* out, size_t out_size) {
  z_stream z{};
  ZAYA_CHECK(inflateInit2(&z, 15 + 32) == Z_OK, "gzip: inflateInit failed");  // gzip or zlib header
  z.next_in = const_cast<uint8_t*>(src);
  z.next_out = out;
  size_t in_left = n, out_left = out_size;
  int rc = Z_OK;
  for (;;) {
    const uInt in_step = uInt(std::min<size_t>(in_left, UINT_MAX)), out_step = uInt(std::min<size_t>(out_left, UINT_MAX));
    z.avail_in = in_step;
    z.avail_out = out_step;
    rc = inflate(&z, Z_NO_FLUSH);
    in_left -= in_step - z.avail_in;
    out_left -= out_step - z.avail_out;
    if (rc == Z_STREAM_END) {
      if (in_left == 0 || out_left == 0) break;
      // Concatenated gzip members.
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    if (rc != Z_OK || (z.avail_in == in_step && z.avail_out == out_step)) break;  // error or no progress
  }
  inflateEnd(&z);
  ZAYA_CHECK(rc == Z_STREAM_END, "gzip data is corrupt or cut short (", rc == Z_OK || rc == Z_BUF_ERROR ? "ends early" : "bad data", ")");
  ZAYA_CHECK(out_left == 0, "gzip data holds ", out_size - out_left, " bytes, the page header says ", out_size);
}

}  // namespace

void parquet_decompress(int32_t codec, const uint8_t* src, size_t n, uint8_t* out, size_t out_size) {
  switch (ParquetCodec(codec)) {
    case ParquetCodec::Uncompressed:
      ZAYA_CHECK(n == out_size, "uncompressed page holds ", n, " bytes, the page header says ", out_size);
      if (n) std::copy(src, src + n, out);
      return;
    case ParquetCodec::Snappy: {
      size_t len = 0;
      const char* s = reinterpret_cast<const char*>(src);
      ZAYA_CHECK(snappy::GetUncompressedLength(s, n, &len), "snappy data is corrupt (bad length header)");
      ZAYA_CHECK(len == out_size, "snappy data holds ", len, " bytes, the page header says ", out_size);
      ZAYA_CHECK(snappy::RawUncompress(s, n, reinterpret_cast<char*>(out)), "snappy data is corrupt");
      return;
    }
    case ParquetCodec::Gzip:
      inflate_gzip(src, n, out, out_size);
      return;
    case ParquetCodec::Zstd: {
      // A stack buffer of one byte keeps `out` valid when out_size is 0.
      uint8_t none = 0;
      const size_t r = ZSTD_decompress(out_size ? out : &none, out_size, src, n);
      ZAYA_CHECK(!ZSTD_isError(r), "zstd data is corrupt (", ZSTD_getErrorName(r), ")");
      ZAYA_CHECK(r == out_size, "zstd data holds ", r, " bytes, the page header says ", out_size);
      return;
    }
    default:
      fail("compression ", parquet_codec_name(codec), " is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)");
  }
}

}  // namespace zaya
