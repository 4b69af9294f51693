// The content hashes of the documents kept so far, for exact deduplication: a flat
// open-addressing table of 128-bit hashes (16 bytes a slot, at most half full), so a corpus of
// N documents costs at most 64 N bytes, not a heap node per document.
#pragma once
#include <cstdint>
#include <vector>

#include "data/document.h"

namespace zaya {

class DedupSet {
 public:
  // Adds h; false when it was already there (a duplicate).
  bool insert(const DocHash& h) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    // The all-zero hash marks an empty slot; a document hashing to it is stored as 1.
    DocHash k = (h.lo | h.hi) ? h : DocHash{1, 0};
    for (size_t i = size_t(k.lo) & mask;; i = (i + 1) & mask) {
      DocHash& s = slots_[i];
      if (!(s.lo | s.hi)) {
        s = k;
        ++size_;
        return true;
      }
      if (s == k) return false;
    }
  }
  size_t size() const { return size_; }

 private:
  void grow() {
    std::vector<DocHash> old(slots_.empty() ? 0 : slots_.size());
    old.swap(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, DocHash{});
    size_ = 0;
    for (const DocHash& s : old)
      if (s.lo | s.hi) insert(s);
  }
  std::vector<DocHash> slots_;
  size_t size_ = 0;
};

}  // namespace zaya
