#include "data/shard.h"

#include <bit>
#include <cstring>

#include "core/error.h"

namespace zaya {

static_assert(std::endian::native == std::endian::little, "shards are little-endian; big-endian hosts unsupported");

namespace {

void put_u32(unsigned char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void put_u64(unsigned char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get_u32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void encode_header(const ShardHeader& h, unsigned char out[kShardHeaderBytes]) {
  std::memset(out, 0, kShardHeaderBytes);
  std::memcpy(out, kShardMagic, 8);
  put_u32(out + 8, h.version);
  put_u32(out + 12, h.dtype);
  put_u64(out + 16, h.token_count);
  put_u32(out + 24, h.vocab_size);
}

}  // namespace

// ---------------------------------------------------------------- writer

ShardWriter::ShardWriter(std::string path, uint32_t vocab_size) : path_(std::move(path)), vocab_(vocab_size) {
  ZAYA_CHECK(vocab_ > 0, path_, ": vocab size must be positive");
  file_ = std::make_unique<AtomicFile>(path_);
  unsigned char hdr[kShardHeaderBytes];
  encode_header(ShardHeader{kShardVersion, kShardDtypeU32, 0, vocab_}, hdr);  // count patched in finish()
  file_->write(hdr, sizeof hdr);
}

void ShardWriter::append(std::span<const uint32_t> tokens) {
  ZAYA_CHECK(file_, path_, ": append after finish");
  for (size_t i = 0; i < tokens.size(); ++i)
    ZAYA_CHECK(tokens[i] < vocab_, path_, ": token ", tokens[i], " at index ", count_ + i,
               " is out of the vocabulary (size ", vocab_, ")");
  if (tokens.empty()) return;
  file_->write(tokens.data(), tokens.size_bytes());
  count_ += tokens.size();
}

void ShardWriter::finish() {
  ZAYA_CHECK(file_, path_, ": finish called twice");
  unsigned char hdr[kShardHeaderBytes];
  encode_header(ShardHeader{kShardVersion, kShardDtypeU32, count_, vocab_}, hdr);
  file_->write_at(0, hdr, sizeof hdr);
  const std::unique_ptr<AtomicFile> f = std::move(file_);
  f->commit();
}

void write_shard(const std::string& path, std::span<const uint32_t> tokens, uint32_t vocab_size) {
  ShardWriter w(path, vocab_size);
  w.append(tokens);
  w.finish();
}

// ---------------------------------------------------------------- reader

ShardReader::ShardReader(std::string path) : path_(std::move(path)), file_(path_) {
  const size_t bytes = file_.size();
  if (bytes < kShardHeaderBytes)
    fail(path_, ": truncated shard: ", bytes, " bytes, shorter than the ", kShardHeaderBytes, "-byte header");
  const unsigned char* p = file_.data();
  if (std::memcmp(p, kShardMagic, 8) != 0) fail(path_, ": bad magic (not a zaya token shard; expected \"ZAYATOK1\")");
  header_.version = get_u32(p + 8);
  header_.dtype = get_u32(p + 12);
  header_.token_count = get_u64(p + 16);
  header_.vocab_size = get_u32(p + 24);
  ZAYA_CHECK(header_.version == kShardVersion, path_, ": unsupported shard version ", header_.version,
             " (this build reads version ", kShardVersion, ")");
  ZAYA_CHECK(header_.dtype == kShardDtypeU32, path_, ": unsupported token dtype code ", header_.dtype,
             " (1 = uint32 is the only one)");
  ZAYA_CHECK(header_.vocab_size > 0, path_, ": corrupt header: vocab size 0");
  const uint64_t payload = uint64_t(bytes - kShardHeaderBytes);
  if (header_.token_count > payload / 4)
    fail(path_, ": truncated shard: header says ", header_.token_count, " tokens but the file holds ", payload,
         " bytes after the header (", payload / 4, " tokens)");
  if (payload != header_.token_count * 4)
    fail(path_, ": corrupt shard: ", payload - header_.token_count * 4, " trailing bytes after the ",
         header_.token_count, " tokens the header declares");
  tokens_ = reinterpret_cast<const uint32_t*>(p + kShardHeaderBytes);
}

ShardReader::ShardReader(ShardReader&& o) noexcept
    : path_(std::move(o.path_)), header_(o.header_), file_(std::move(o.file_)), tokens_(o.tokens_) {
  o.header_ = ShardHeader{};
  o.tokens_ = nullptr;
}

ShardReader& ShardReader::operator=(ShardReader&& o) noexcept {
  if (this != &o) {
    path_ = std::move(o.path_);
    header_ = o.header_;
    file_ = std::move(o.file_);
    tokens_ = o.tokens_;
    o.header_ = ShardHeader{};
    o.tokens_ = nullptr;
  }
  return *this;
}

void ShardReader::check_tokens(uint32_t limit) const {
  uint32_t bound = header_.vocab_size;
  if (limit != 0 && limit < bound) bound = limit;
  const uint64_t n = header_.token_count;
  for (uint64_t i = 0; i < n; ++i)
    if (tokens_[i] >= bound)
      fail(path_, ": token ", tokens_[i], " at index ", i, " is out of the vocabulary (size ", bound, ")");
}

}  // namespace zaya
