// Token shards: the binary files `zaya prepare` writes and the DataLoader reads.
//
// Layout (all integers little-endian):
//   offset  size  field
//        0     8  magic "ZAYATOK1"
//        8     4  u32 version (1)
//       12     4  u32 token dtype code (1 = uint32)
//       16     8  u64 token count
//       24     4  u32 vocabulary size (every token is < this)
//       28    36  reserved, written as zeros, ignored by readers
//       64  4*count  the tokens, uint32; documents are separated by (end with) EOS
//
// A shard is written as an atomic file (core/io.h), so a reader never sees a half-written
// file under the final name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/io.h"

namespace zaya {

inline constexpr char kShardMagic[8] = {'Z', 'A', 'Y', 'A', 'T', 'O', 'K', '1'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint32_t kShardDtypeU32 = 1;
inline constexpr size_t kShardHeaderBytes = 64;

struct ShardHeader {
  uint32_t version = kShardVersion;
  uint32_t dtype = kShardDtypeU32;
  uint64_t token_count = 0;
  uint32_t vocab_size = 0;
};

// Streams tokens into an atomic file for `path`; finish() writes the header and publishes
// it. Destroying an unfinished writer removes the temporary file.
class ShardWriter {
 public:
  ShardWriter(std::string path, uint32_t vocab_size);
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends tokens; each must be < vocab_size (checked: error names the file and value).
  void append(std::span<const uint32_t> tokens);
  void finish();
  uint64_t token_count() const { return count_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint32_t vocab_;
  uint64_t count_ = 0;
  std::unique_ptr<AtomicFile> file_;  // null once finished
};

// Memory-maps a shard read-only and validates its header and length on open; every
// problem is a one-line zaya::Error naming the file and what is wrong.
class ShardReader {
 public:
  explicit ShardReader(std::string path);
  ShardReader(ShardReader&& o) noexcept;
  ShardReader& operator=(ShardReader&& o) noexcept;
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const ShardHeader& header() const { return header_; }
  uint64_t size() const { return header_.token_count; }
  uint32_t vocab_size() const { return header_.vocab_size; }
  std::span<const uint32_t> tokens() const { return {tokens_, size_t(header_.token_count)}; }
  const std::string& path() const { return path_; }
  // Scans every token; throws naming the file, the index and the value of the first one
  // that is >= vocab_size (or >= limit, when limit is non-zero and smaller).
  void check_tokens(uint32_t limit = 0) const;

 private:
  std::string path_;
  ShardHeader header_;
  MappedFile file_;
  const uint32_t* tokens_ = nullptr;
};

// Writes one shard in a single call.
void write_shard(const std::string& path, std::span<const uint32_t> tokens, uint32_t vocab_size);

}  // namespace zaya
