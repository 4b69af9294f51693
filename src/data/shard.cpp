#include "data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "core/error.h"

namespace zaya {

static_assert(std::endian::native == std::endian::little, "shards are little-endian; big-endian hosts unsupported");

namespace {

std::string errno_text() { return std::strerror(errno); }

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

std::string temp_name(const std::string& path) { return cat(path, ".tmp.", ::getpid()); }

void flush_sync_close(std::FILE* f, const std::string& path) {
  ZAYA_CHECK(std::fflush(f) == 0, path, ": write failed: ", errno_text());
  ZAYA_CHECK(::fsync(::fileno(f)) == 0, path, ": fsync failed: ", errno_text());
  ZAYA_CHECK(std::fclose(f) == 0, path, ": close failed: ", errno_text());
}

}  // namespace

void fsync_parent_dir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: some filesystems refuse to open directories
  ::fsync(fd);
  ::close(fd);
}

// ---------------------------------------------------------------- writer

ShardWriter::ShardWriter(std::string path, uint32_t vocab_size)
    : path_(std::move(path)), tmp_path_(temp_name(path_)), vocab_(vocab_size) {
  ZAYA_CHECK(vocab_ > 0, path_, ": vocab size must be positive");
  f_ = std::fopen(tmp_path_.c_str(), "wb");
  ZAYA_CHECK(f_, tmp_path_, ": cannot create: ", errno_text());
  unsigned char hdr[kShardHeaderBytes];
  encode_header(ShardHeader{kShardVersion, kShardDtypeU32, 0, vocab_}, hdr);  // count patched in finish()
  ZAYA_CHECK(std::fwrite(hdr, 1, sizeof hdr, f_) == sizeof hdr, tmp_path_, ": write failed: ", errno_text());
}

ShardWriter::~ShardWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_path_.c_str());
  }
}

void ShardWriter::append(std::span<const uint32_t> tokens) {
  ZAYA_CHECK(f_, path_, ": append after finish");
  for (size_t i = 0; i < tokens.size(); ++i)
    ZAYA_CHECK(tokens[i] < vocab_, path_, ": token ", tokens[i], " at index ", count_ + i,
               " is out of the vocabulary (size ", vocab_, ")");
  if (tokens.empty()) return;
  ZAYA_CHECK(std::fwrite(tokens.data(), 4, tokens.size(), f_) == tokens.size(), tmp_path_,
             ": write failed: ", errno_text());
  count_ += tokens.size();
}

void ShardWriter::finish() {
  ZAYA_CHECK(f_, path_, ": finish called twice");
  unsigned char hdr[kShardHeaderBytes];
  encode_header(ShardHeader{kShardVersion, kShardDtypeU32, count_, vocab_}, hdr);
  ZAYA_CHECK(std::fseek(f_, 0, SEEK_SET) == 0, tmp_path_, ": seek failed: ", errno_text());
  ZAYA_CHECK(std::fwrite(hdr, 1, sizeof hdr, f_) == sizeof hdr, tmp_path_, ": write failed: ", errno_text());
  std::FILE* f = f_;
  f_ = nullptr;
  try {
    flush_sync_close(f, tmp_path_);
  } catch (...) {
    std::remove(tmp_path_.c_str());
    throw;
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    std::string why = errno_text();
    std::remove(tmp_path_.c_str());
    fail(path_, ": cannot rename from ", tmp_path_, ": ", why);
  }
  fsync_parent_dir(path_);
}

void write_shard(const std::string& path, std::span<const uint32_t> tokens, uint32_t vocab_size) {
  ShardWriter w(path, vocab_size);
  w.append(tokens);
  w.finish();
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  std::string tmp = temp_name(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  ZAYA_CHECK(f, tmp, ": cannot create: ", errno_text());
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::string why = errno_text();
    std::fclose(f);
    std::remove(tmp.c_str());
    fail(tmp, ": write failed: ", why);
  }
  try {
    flush_sync_close(f, tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    std::remove(tmp.c_str());
    fail(path, ": cannot rename from ", tmp, ": ", why);
  }
  fsync_parent_dir(path);
}

// ---------------------------------------------------------------- reader

ShardReader::ShardReader(std::string path) : path_(std::move(path)) {
  int fd = ::open(path_.c_str(), O_RDONLY);
  ZAYA_CHECK(fd >= 0, path_, ": cannot open shard: ", errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string why = errno_text();
    ::close(fd);
    fail(path_, ": cannot stat shard: ", why);
  }
  size_t bytes = size_t(st.st_size);
  if (bytes < kShardHeaderBytes) {
    ::close(fd);
    fail(path_, ": truncated shard: ", bytes, " bytes, shorter than the ", kShardHeaderBytes, "-byte header");
  }
  void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  std::string why = errno_text();
  ::close(fd);
  ZAYA_CHECK(m != MAP_FAILED, path_, ": cannot map shard: ", why);
  map_ = m;
  map_bytes_ = bytes;
  try {
    auto* p = static_cast<const unsigned char*>(m);
    if (std::memcmp(p, kShardMagic, 8) != 0)
      fail(path_, ": bad magic (not a zaya token shard; expected \"ZAYATOK1\")");
    header_.version = get_u32(p + 8);
    header_.dtype = get_u32(p + 12);
    header_.token_count = get_u64(p + 16);
    header_.vocab_size = get_u32(p + 24);
    ZAYA_CHECK(header_.version == kShardVersion, path_, ": unsupported shard version ", header_.version,
               " (this build reads version ", kShardVersion, ")");
    ZAYA_CHECK(header_.dtype == kShardDtypeU32, path_, ": unsupported token dtype code ", header_.dtype,
               " (1 = uint32 is the only one)");
    ZAYA_CHECK(header_.vocab_size > 0, path_, ": corrupt header: vocab size 0");
    uint64_t payload = uint64_t(bytes - kShardHeaderBytes);
    if (header_.token_count > payload / 4)
      fail(path_, ": truncated shard: header says ", header_.token_count, " tokens but the file holds ", payload,
           " bytes after the header (", payload / 4, " tokens)");
    if (payload != header_.token_count * 4)
      fail(path_, ": corrupt shard: ", payload - header_.token_count * 4, " trailing bytes after the ",
           header_.token_count, " tokens the header declares");
  } catch (...) {
    close();
    throw;
  }
  tokens_ = reinterpret_cast<const uint32_t*>(static_cast<const unsigned char*>(m) + kShardHeaderBytes);
}

void ShardReader::close() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  tokens_ = nullptr;
}

ShardReader::~ShardReader() { close(); }

ShardReader::ShardReader(ShardReader&& o) noexcept
    : path_(std::move(o.path_)), header_(o.header_), map_(o.map_), map_bytes_(o.map_bytes_), tokens_(o.tokens_) {
  o.map_ = nullptr;
  o.map_bytes_ = 0;
  o.tokens_ = nullptr;
}

ShardReader& ShardReader::operator=(ShardReader&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    header_ = o.header_;
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    tokens_ = o.tokens_;
    o.map_ = nullptr;
    o.map_bytes_ = 0;
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
