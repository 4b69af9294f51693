// Megatron-LM indexed datasets ("MMIDIDX"): PREFIX.bin holds the tokens of every sequence
// back to back; PREFIX.idx describes them. Megatron-LM, GPT-NeoX and their ports keep
// tokenized corpora this way (megatron/core/datasets/indexed_dataset.py).
//
// PREFIX.idx, all integers little-endian:
//   offset  size  field
//        0     9  magic "MMIDIDX\0\0"
//        9     8  u64 version (1)
//       17     1  u8 token dtype code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//                 6 float64, 7 float32, 8 uint16
//       18     8  u64 sequence count S
//       26     8  u64 document-index count D (documents + 1)
//       34   4*S  int32 sequence lengths (tokens)
//            8*S  int64 sequence pointers (byte offsets into PREFIX.bin)
//            8*D  int64 document indices: 0, then the sequence count at each document's end
//           [S]   int8 sequence modes (multimodal datasets only; accepted and ignored)
//
// zaya writes one sequence per document (EOS appended by the caller, as Megatron's
// preprocess_data.py --append-eod does) in uint16 when the vocabulary is below 65,500 and
// int32 otherwise (Megatron's optimal_dtype). A source's token stream is the concatenation
// of the sequences in order: the same stream as zaya's own shards of the same corpus.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/io.h"

namespace zaya {

inline constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kMegatronVersion = 1;
inline constexpr size_t kMegatronHeaderBytes = 34;
inline constexpr uint8_t kMegatronUint16 = 8, kMegatronInt32 = 4;

// The dtype code Megatron picks for a vocabulary: uint16 below 65,500, else int32.
uint8_t megatron_dtype_for_vocab(uint64_t vocab_size);
// Name ("uint16") and byte size of a dtype code; size 0 for an unknown code.
const char* megatron_dtype_name(uint8_t code);
size_t megatron_dtype_size(uint8_t code);

// Streams documents into hidden temporaries beside PREFIX.bin / PREFIX.idx (core/io.h's
// AtomicFile); finish() writes the index and publishes both: PREFIX.idx last, after any old
// PREFIX.idx is removed, so a reader never pairs an index with data it does not describe. A
// killed or destroyed unfinished writer leaves only hidden temporaries (the destructor
// removes them). Holds 4 bytes per document in memory until finish().
class MegatronWriter {
 public:
  MegatronWriter(std::string prefix, uint32_t vocab_size);
  MegatronWriter(const MegatronWriter&) = delete;
  MegatronWriter& operator=(const MegatronWriter&) = delete;

  // One document = one sequence; tokens must be < vocab_size (error names the file and value).
  void add_document(std::span<const uint32_t> tokens);
  void finish();
  uint64_t tokens() const { return tokens_; }
  uint64_t documents() const { return lengths_.size(); }
  uint8_t dtype() const { return dtype_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  uint32_t vocab_;
  uint8_t dtype_;
  uint64_t tokens_ = 0;
  std::vector<int32_t> lengths_;
  std::unique_ptr<AtomicFile> bin_;  // null once finished
  std::vector<uint16_t> narrow_;     // uint16 staging for one document
};

// Writes a dataset of these documents in one call.
void write_megatron(const std::string& prefix, const std::vector<std::vector<uint32_t>>& documents,
                    uint32_t vocab_size);

// A dataset memory-mapped read-only and validated on open: magic, version, dtype, the
// header's counts against the .idx size, every sequence's length and pointer (back to back
// from byte 0, ending exactly at the .bin's size) and the document indices (from 0,
// non-decreasing, ending at the sequence count). Each problem is a one-line zaya::Error
// naming the file, e.g. "data/x.idx: sequence 12 ends at byte 4096 but data/x.bin holds 4000 bytes".
class MegatronDataset {
 public:
  explicit MegatronDataset(std::string prefix);

  const std::string& prefix() const { return prefix_; }
  std::string idx_path() const { return prefix_ + ".idx"; }
  std::string bin_path() const { return prefix_ + ".bin"; }
  uint8_t dtype() const { return dtype_; }
  uint64_t sequences() const { return sequences_; }
  uint64_t documents() const { return doc_entries_ - 1; }
  uint64_t tokens() const { return tokens_; }
  uint64_t sequence_length(uint64_t i) const;
  uint64_t sequence_start(uint64_t i) const;  // position of its first token in the stream
  // The index of the sequence holding stream position pos (< tokens()).
  uint64_t sequence_at(uint64_t pos) const;

  // Copies tokens [pos, pos + n) of the stream into out. Every token must be >= 0, fit in
  // int32 and, when vocab_limit > 0, be < vocab_limit: else an error naming the .bin, the
  // position, the sequence and the value.
  void read(uint64_t pos, uint64_t n, int32_t* out, uint32_t vocab_limit = 0) const;
  // Scans every token as read() checks it.
  void check_tokens(uint32_t vocab_limit) const;

 private:
  int64_t idx_i64(size_t offset) const;
  [[noreturn]] void bad_token(uint64_t pos, int64_t value, uint32_t vocab_limit) const;

  std::string prefix_;
  MappedFile idx_, bin_;
  uint8_t dtype_ = 0;
  size_t elem_ = 0;
  uint64_t sequences_ = 0, doc_entries_ = 0, tokens_ = 0;
};

}  // namespace zaya
