// What a pretraining pipeline does to one document's text: take it out of a JSON line by its
// key, repair invalid UTF-8, hash it for exact deduplication. Each function works on one
// document, so documents are processed in parallel (one JsonTextExtractor per thread).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zaya {

// `--text-key`: a field name, or a dotted path into nested objects ("meta.content").
struct TextKey {
  std::string dotted;
  std::vector<std::string> path;
};
TextKey parse_text_key(const std::string& dotted);  // error on an empty key or component

// Parses JSON lines with simdjson (a full parse: any syntax error anywhere in the line counts)
// and takes out the key's string value, unescaped. Not thread-safe: one per thread.
class JsonTextExtractor {
 public:
  JsonTextExtractor();
  ~JsonTextExtractor();
  JsonTextExtractor(const JsonTextExtractor&) = delete;
  JsonTextExtractor& operator=(const JsonTextExtractor&) = delete;

  // The key's string into `text`. Returns "" on success, else the reason without the file and
  // line: "malformed JSON (...)", "no key \"text\"", "\"text\" is a number, not a string".
  std::string extract(std::string_view line, const TextKey& key, std::string& text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True when s is valid UTF-8 (SIMD check).
bool is_valid_utf8(std::string_view s);
// Replaces every maximal invalid subsequence with U+FFFD (the Unicode "substitution of maximal
// subparts" practice, as Python's errors="replace" and the WHATWG decoder do) and returns how
// many replacements it made; 0 leaves s untouched.
size_t repair_utf8(std::string& s);

// 128-bit content hash (XXH3) for exact deduplication.
struct DocHash {
  uint64_t lo = 0, hi = 0;
  bool operator==(const DocHash& o) const { return lo == o.lo && hi == o.hi; }
};
DocHash hash_document(std::string_view text);
struct DocHashHasher {
  size_t operator()(const DocHash& h) const { return size_t(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull)); }
};

}  // namespace zaya
