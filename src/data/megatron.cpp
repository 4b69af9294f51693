#include "data/megatron.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace zaya {

static_assert(std::endian::native == std::endian::little, "Megatron datasets are little-endian");

uint8_t megatron_dtype_for_vocab(uint64_t vocab_size) { return vocab_size < 65500 ? kMegatronUint16 : kMegatronInt32; }

const char* megatron_dtype_name(uint8_t code) {
  static const char* const names[] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
  return code >= 1 && code <= 8 ? names[code] : "unknown";
}

size_t megatron_dtype_size(uint8_t code) {
  static const size_t sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
  return code <= 8 ? sizes[code] : 0;
}

// ---------------------------------------------------------------- writer

MegatronWriter::MegatronWriter(std::string prefix, uint32_t vocab_size)
    : prefix_(std::move(prefix)), vocab_(vocab_size), dtype_(megatron_dtype_for_vocab(vocab_size)) {
  ZAYA_CHECK(vocab_ > 0, prefix_, ".bin: vocab size must be positive");
  ZAYA_CHECK(vocab_ <= uint32_t(std::numeric_limits<int32_t>::max()) + 1u, prefix_, ".bin: vocab size ", vocab_,
             " does not fit Megatron's int32 tokens");
  bin_ = std::make_unique<AtomicFile>(prefix_ + ".bin");
}

void MegatronWriter::add_document(std::span<const uint32_t> tokens) {
  ZAYA_CHECK(bin_, prefix_, ".bin: add_document after finish");
  for (size_t i = 0; i < tokens.size(); ++i)
    ZAYA_CHECK(tokens[i] < vocab_, prefix_, ".bin: token ", tokens[i], " at index ", tokens_ + i,
               " is out of the vocabulary (size ", vocab_, ")");
  ZAYA_CHECK(tokens.size() <= size_t(std::numeric_limits<int32_t>::max()), prefix_, ".bin: a document of ",
             tokens.size(), " tokens exceeds Megatron's int32 sequence length");
  if (dtype_ == kMegatronUint16) {
    narrow_.assign(tokens.begin(), tokens.end());
    if (!narrow_.empty()) bin_->write(narrow_.data(), narrow_.size() * 2);
  } else if (!tokens.empty()) {
    bin_->write(tokens.data(), tokens.size_bytes());  // < 2^31: the same bytes as int32
  }
  lengths_.push_back(int32_t(tokens.size()));
  tokens_ += tokens.size();
}

void MegatronWriter::finish() {
  ZAYA_CHECK(bin_, prefix_, ".idx: finish called twice");
  const std::string idx_path = prefix_ + ".idx";
  AtomicFile idx(idx_path);
  const uint64_t seqs = lengths_.size(), doc_entries = seqs + 1, version = kMegatronVersion;
  unsigned char hdr[kMegatronHeaderBytes];
  std::memcpy(hdr, kMegatronMagic, 9);
  std::memcpy(hdr + 9, &version, 8);
  hdr[17] = dtype_;
  std::memcpy(hdr + 18, &seqs, 8);
  std::memcpy(hdr + 26, &doc_entries, 8);
  idx.write(hdr, sizeof hdr);
  if (seqs) idx.write(lengths_.data(), seqs * 4);
  // Pointers and document indices in blocks, so the index never needs them all in memory.
  std::vector<int64_t> block;
  const size_t kBlock = 1 << 16;
  int64_t ptr = 0;
  for (size_t i = 0; i < seqs; i += kBlock) {
    block.clear();
    for (size_t j = i; j < std::min<size_t>(seqs, i + kBlock); ++j) {
      block.push_back(ptr);
      ptr += int64_t(lengths_[j]) * int64_t(megatron_dtype_size(dtype_));
    }
    idx.write(block.data(), block.size() * 8);
  }
  for (uint64_t i = 0; i < doc_entries; i += kBlock) {  // one sequence per document: 0, 1, ..., seqs
    block.clear();
    for (uint64_t j = i; j < std::min<uint64_t>(doc_entries, i + kBlock); ++j) block.push_back(int64_t(j));
    idx.write(block.data(), block.size() * 8);
  }
  // An old index must not describe the new data, even for a moment: it goes first.
  if (::unlink(idx_path.c_str()) != 0 && errno != ENOENT)
    fail(idx_path, ": cannot remove the old index (", std::strerror(errno), ")");
  const std::unique_ptr<AtomicFile> bin = std::move(bin_);
  bin->commit();
  idx.commit();
}

void write_megatron(const std::string& prefix, const std::vector<std::vector<uint32_t>>& documents,
                    uint32_t vocab_size) {
  MegatronWriter w(prefix, vocab_size);
  for (const auto& d : documents) w.add_document(d);
  w.finish();
}

// ---------------------------------------------------------------- reader

int64_t MegatronDataset::idx_i64(size_t offset) const {
  int64_t v;
  std::memcpy(&v, idx_.data() + offset, 8);
  return v;
}

MegatronDataset::MegatronDataset(std::string prefix) : prefix_(std::move(prefix)) {
  const std::string ip = idx_path(), bp = bin_path();
  idx_ = MappedFile(ip);
  const size_t isize = idx_.size();
  if (isize < kMegatronHeaderBytes)
    fail(ip, ": truncated index: ", isize, " bytes, shorter than the ", kMegatronHeaderBytes, "-byte header");
  const uint8_t* p = idx_.data();
  if (std::memcmp(p, kMegatronMagic, 9) != 0)
    fail(ip, ": bad magic (not a Megatron indexed dataset; expected \"MMIDIDX\\0\\0\")");
  uint64_t version;
  std::memcpy(&version, p + 9, 8);
  ZAYA_CHECK(version == kMegatronVersion, ip, ": unsupported index version ", version, " (this build reads version 1)");
  dtype_ = p[17];
  elem_ = megatron_dtype_size(dtype_);
  ZAYA_CHECK(elem_ != 0, ip, ": unknown dtype code ", int(dtype_), " (Megatron's codes are 1 to 8)");
  ZAYA_CHECK(dtype_ != 6 && dtype_ != 7, ip, ": dtype ", megatron_dtype_name(dtype_), " (code ", int(dtype_),
             ") does not hold token ids");
  std::memcpy(&sequences_, p + 18, 8);
  std::memcpy(&doc_entries_, p + 26, 8);

  // The arrays the header declares, in bytes, without overflow: S <= isize/12, D <= isize/8.
  const uint64_t room = isize - kMegatronHeaderBytes;
  if (sequences_ > room / 12 || doc_entries_ > room / 8 || sequences_ * 12 + doc_entries_ * 8 > room)
    fail(ip, ": truncated index: the header declares ", sequences_, " sequences and ", doc_entries_,
         " document indices but the file holds ", isize, " bytes");
  const uint64_t arrays = sequences_ * 12 + doc_entries_ * 8;
  if (room != arrays && room != arrays + sequences_)  // + S: the modes of a multimodal dataset
    fail(ip, ": ", room - arrays, " trailing bytes after the ", sequences_, " sequences and ", doc_entries_,
         " document indices the header declares");
  ZAYA_CHECK(doc_entries_ >= 1, ip, ": no document indices (the list starts with 0)");

  bin_ = MappedFile(bp);
  const uint64_t bsize = bin_.size();
  const size_t lens = kMegatronHeaderBytes, ptrs = lens + 4 * sequences_, docs = ptrs + 8 * sequences_;
  uint64_t end = 0;  // byte where the previous sequence ends
  for (uint64_t i = 0; i < sequences_; ++i) {
    int32_t len;
    std::memcpy(&len, p + lens + 4 * i, 4);
    const int64_t ptr = idx_i64(ptrs + 8 * i);
    ZAYA_CHECK(len >= 0, ip, ": sequence ", i, " has negative length ", len);
    if (ptr < 0 || uint64_t(ptr) != end)
      fail(ip, ": sequence ", i, " starts at byte ", ptr, " but ",
           i == 0 ? std::string("the first must start at byte 0") : cat("sequence ", i - 1, " ends at byte ", end),
           " (sequences lie back to back)");
    if (uint64_t(len) * elem_ > bsize - end)
      fail(ip, ": sequence ", i, " ends at byte ", end + uint64_t(len) * elem_, " but ", bp, " holds ", bsize, " bytes");
    end += uint64_t(len) * elem_;
  }
  if (end != bsize) fail(bp, ": holds ", bsize, " bytes but ", ip, " accounts for ", end);
  tokens_ = end / elem_;
  int64_t prev = 0;
  for (uint64_t d = 0; d < doc_entries_; ++d) {
    const int64_t v = idx_i64(docs + 8 * d);
    if (d == 0 && v != 0) fail(ip, ": document index 0 is ", v, ", not 0");
    if (v < prev) fail(ip, ": document index ", d, " (", v, ") is below the one before it (", prev, ")");
    if (uint64_t(v) > sequences_) fail(ip, ": document index ", d, " (", v, ") passes the sequence count ", sequences_);
    prev = v;
  }
  if (uint64_t(prev) != sequences_)
    fail(ip, ": the last document index is ", prev, " but the dataset holds ", sequences_, " sequences");
}

uint64_t MegatronDataset::sequence_length(uint64_t i) const {
  ZAYA_CHECK(i < sequences_, idx_path(), ": sequence ", i, " out of range (", sequences_, " sequences)");
  int32_t len;
  std::memcpy(&len, idx_.data() + kMegatronHeaderBytes + 4 * i, 4);
  return uint64_t(len);
}

uint64_t MegatronDataset::sequence_start(uint64_t i) const {
  ZAYA_CHECK(i < sequences_, idx_path(), ": sequence ", i, " out of range (", sequences_, " sequences)");
  return uint64_t(idx_i64(kMegatronHeaderBytes + 4 * sequences_ + 8 * i)) / elem_;
}

uint64_t MegatronDataset::sequence_at(uint64_t pos) const {
  ZAYA_CHECK(pos < tokens_, bin_path(), ": position ", pos, " passes the end (", tokens_, " tokens)");
  // The last sequence starting at or before pos that is not empty (pointers are non-decreasing).
  uint64_t lo = 0, hi = sequences_;  // invariant: start(lo) <= pos < start(hi) (start(S) = tokens)
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (sequence_start(mid) <= pos) lo = mid;
    else hi = mid;
  }
  return lo;
}

void MegatronDataset::bad_token(uint64_t pos, int64_t value, uint32_t vocab_limit) const {
  const std::string where = cat(bin_path(), ": token ", value, " at position ", pos, " (sequence ", sequence_at(pos), ")");
  if (value < 0) fail(where, " is negative");
  if (vocab_limit > 0) fail(where, " is out of the vocabulary (size ", vocab_limit, ")");
  fail(where, " does not fit int32");
}

void MegatronDataset::read(uint64_t pos, uint64_t n, int32_t* out, uint32_t vocab_limit) const {
  ZAYA_CHECK(pos <= tokens_ && n <= tokens_ - pos, bin_path(), ": read of ", n, " tokens at ", pos,
             " passes the end (", tokens_, " tokens)");
  const int64_t limit = vocab_limit > 0 ? int64_t(vocab_limit) : int64_t(std::numeric_limits<int32_t>::max()) + 1;
  auto copy = [&]<class T>(T) {
    const T* src = reinterpret_cast<const T*>(bin_.data()) + pos;  // mmap is page-aligned; offsets are multiples
    for (uint64_t j = 0; j < n; ++j) {
      const int64_t v = int64_t(src[j]);
      if (v < 0 || v >= limit) bad_token(pos + j, v, vocab_limit);
      out[j] = int32_t(v);
    }
  };
  if (n == 0) return;
  switch (dtype_) {
    case 1: return copy(uint8_t{});
    case 2: return copy(int8_t{});
    case 3: return copy(int16_t{});
    case 4: return copy(int32_t{});
    case 5: return copy(int64_t{});
    case 8: return copy(uint16_t{});
    default: fail(idx_path(), ": dtype code ", int(dtype_), " does not hold token ids");
  }
}

void MegatronDataset::check_tokens(uint32_t vocab_limit) const {
  std::vector<int32_t> buf(1 << 16);
  for (uint64_t pos = 0; pos < tokens_; pos += buf.size())
    read(pos, std::min<uint64_t>(buf.size(), tokens_ - pos), buf.data(), vocab_limit);
}

}  // namespace zaya
