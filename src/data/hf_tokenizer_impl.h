// The state of a loaded tokenizer.json, shared by the loader (hf_tokenizer_load.cpp) and
// the encoder / decoder (hf_tokenizer.cpp). Internal to src/train.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/hf_tokenizer.h"

namespace zaya {

// (left id, right id) -> (rank, merged id): open addressing, linear probing; the BPE inner
// loop does one lookup per candidate pair, so this sits on the hot path.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0, result = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, Entry{});
    mask_ = cap - 1;
  }
  // Returns false when the pair is already present (the first rank is kept, as in HF).
  bool insert(int32_t a, int32_t b, int32_t rank, int32_t result) {
    const uint64_t k = key(a, b);
    for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = {k, rank, result};
        return true;
      }
      if (slots_[i].key == k) return false;
    }
  }
  const Entry* find(int32_t a, int32_t b) const {
    const uint64_t k = key(a, b);
    for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == k) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static size_t hash(uint64_t k) {
    const uint64_t h = k * 0x9E3779B97F4A7C15ull;
    return size_t(h ^ (h >> 32));
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
};

struct HfTokenizer::Impl {
  std::string path;
  uint64_t instance = 0;  // unique per load: keys the per-thread word cache

  // Vocabulary (model vocab and added tokens), by id; holes are empty strings.
  std::vector<std::string> pieces;
  std::unordered_map<std::string_view, int32_t> piece_ids;  // views into `pieces`
  int32_t ascii_ids[128];                                   // one-byte pieces, -1 if absent

  // BPE model.
  MergeTable merges;
  bool byte_fallback = false, ignore_merges = false, fuse_unk = false;
  int32_t byte_ids[256];  // <0xXX> pieces, -1 if absent
  int32_t model_unk = -1;

  // Added tokens, matched leftmost-longest on the raw text by a byte trie.
  struct Added {
    std::string content;
    int32_t id = -1;
    bool special = false, lstrip = false, rstrip = false;
  };
  std::vector<Added> added;
  std::unordered_map<uint64_t, int32_t> trie_edges;  // (node << 8 | byte) -> child node
  std::vector<int32_t> trie_token;                     // node -> index into `added`, or -1
  bool trie_first[256] = {};                           // bytes an added token can start with

  struct NormStep {
    enum Kind { Replace, Prepend } kind;
    std::string pattern, content;
  };
  std::vector<NormStep> normalizer;

  struct SplitStep {
    enum Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous } behavior;
    std::string pattern;
  };
  std::vector<SplitStep> pre_tokenizer;

  struct DecodeStep {
    enum Kind { Replace, ByteFallback, Fuse, Strip } kind;
    std::string pattern, content;
    int start = 0, stop = 0;
  };
  std::vector<DecodeStep> decoder;
  bool has_decoder = false;

  // Word cutting: a word may end before `marker` unless the character before it is one that
  // some merge result puts right in front of `marker` (`glue`); no token can span such a cut.
  std::string marker;
  std::vector<std::string> glue;

  int32_t bos = -1, eos = -1, pad = -1, unk = -1;
  bool add_bos = false, add_eos = false;

  // Encoding steps (hf_tokenizer.cpp).
  void encode_section(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void bpe(std::string_view word, std::vector<int32_t>& out) const;
};

// Parses tokenizer.json (+ tokenizer_config.json) into `im` (hf_tokenizer_load.cpp).
void load_hf_tokenizer(HfTokenizer::Impl& im, std::string_view tokenizer_json, std::string_view config_json);

}  // namespace zaya
