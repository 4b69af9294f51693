// HfTokenizer: encoding (added tokens, normalizer, pre-tokenizer, word cuts, BPE with byte
// fallback) and decoding (the declared decoder chain). Parsing is in hf_tokenizer_load.cpp.
//
// BPE semantics follow the tokenizers library: the adjacent pair with the lowest merge rank
// is merged first, ties go to the leftmost pair; characters missing from the vocabulary
// never merge and come out as <0xXX> byte pieces (or unk without byte fallback).
#include "data/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <queue>
#include <sstream>

#include "core/error.h"
#include "data/hf_tokenizer_impl.h"

namespace zaya {

namespace {

constexpr size_t kCachedWordBytes = 64;    // longer words are rarely repeated
constexpr size_t kCacheEntries = 1 << 16;  // per thread; cleared when full
constexpr int kSmallWord = 48;             // symbols; longer words use the heap

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Words already encoded, per thread (encode() is const and called from parallel loops).
struct WordCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, SvHash, std::equal_to<>> map;
};
thread_local WordCache tl_cache;

// Scratch buffers of bpe(), per thread.
struct Scratch {
  std::vector<int32_t> ids, ranks, prev, next;
  std::vector<uint32_t> start, len;
};
thread_local Scratch tl_scratch;

// Length of the UTF-8 character at s[i]; 1 for an invalid or truncated sequence.
size_t utf8_len(std::string_view s, size_t i) {
  const unsigned char c = (unsigned char)s[i];
  size_t n = c < 0x80 ? 1 : c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (n == 1 || i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if (((unsigned char)s[i + k] & 0xC0) != 0x80) return 1;
  return n;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (s.find(from) == std::string::npos) return;
  std::string r;
  r.reserve(s.size() + s.size() / 4 * (to.size() > from.size() ? to.size() - from.size() : 0));
  size_t i = 0;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, i)) {
    r.append(s, i, p - i);
    r += to;
    i = p + from.size();
  }
  r.append(s, i, std::string::npos);
  s.swap(r);
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

// ---------------------------------------------------------------- BPE

void HfTokenizer::Impl::bpe(std::string_view word, std::vector<int32_t>& out) const {
  Scratch& s = tl_scratch;
  s.ids.clear();
  s.start.clear();
  s.len.clear();
  for (size_t i = 0; i < word.size();) {
    const unsigned char c = (unsigned char)word[i];
    size_t n = 1;
    int32_t id;
    if (c < 0x80) {
      id = ascii_ids[c];
    } else {
      n = utf8_len(word, i);
      auto it = piece_ids.find(word.substr(i, n));
      id = it == piece_ids.end() ? -1 : it->second;
    }
    s.ids.push_back(id);
    s.start.push_back(uint32_t(i));
    s.len.push_back(uint32_t(n));
    i += n;
  }
  const int n = int(s.ids.size());
  auto rank_of = [&](int32_t a, int32_t b) -> int32_t {
    if (a < 0 || b < 0) return INT32_MAX;
    const MergeTable::Entry* e = merges.find(a, b);
    return e ? e->rank : INT32_MAX;
  };
  int head = 0;
  s.next.resize(size_t(n));
  if (n <= kSmallWord) {
    // Few symbols: scan for the lowest-ranked pair, merge, repeat.
    int m = n;
    s.ranks.resize(size_t(n));
    for (int i = 0; i + 1 < m; ++i) s.ranks[size_t(i)] = rank_of(s.ids[size_t(i)], s.ids[size_t(i) + 1]);
    while (m > 1) {
      int best = -1;
      int32_t br = INT32_MAX;
      for (int i = 0; i + 1 < m; ++i)
        if (s.ranks[size_t(i)] < br) br = s.ranks[size_t(i)], best = i;
      if (best < 0) break;
      const size_t b = size_t(best);
      s.ids[b] = merges.find(s.ids[b], s.ids[b + 1])->result;
      s.len[b] += s.len[b + 1];
      for (size_t k = b + 1; k + 1 < size_t(m); ++k) {
        s.ids[k] = s.ids[k + 1], s.start[k] = s.start[k + 1], s.len[k] = s.len[k + 1];
        s.ranks[k] = s.ranks[k + 1];
      }
      --m;
      if (b > 0) s.ranks[b - 1] = rank_of(s.ids[b - 1], s.ids[b]);
      if (b + 1 < size_t(m)) s.ranks[b] = rank_of(s.ids[b], s.ids[b + 1]);
    }
    for (int i = 0; i < m; ++i) s.next[size_t(i)] = i + 1 < m ? i + 1 : -1;
  } else {
    // Many symbols: a linked list and a min-heap of (rank, position) candidates; a popped
    // candidate is stale when either symbol has changed since it was pushed.
    struct Cand {
      int32_t rank, pos, left, right;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    s.prev.resize(size_t(n));
    for (int i = 0; i < n; ++i) {
      s.prev[size_t(i)] = i - 1;
      s.next[size_t(i)] = i + 1 < n ? i + 1 : -1;
    }
    auto push = [&](int p) {
      const int q = s.next[size_t(p)];
      if (p < 0 || q < 0) return;
      const int32_t a = s.ids[size_t(p)], b = s.ids[size_t(q)];
      const int32_t r = rank_of(a, b);
      if (r != INT32_MAX) heap.push({r, p, a, b});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      const size_t p = size_t(c.pos);
      const int q = s.next[p];
      if (s.ids[p] != c.left || q < 0 || s.ids[size_t(q)] != c.right) continue;
      s.ids[p] = merges.find(c.left, c.right)->result;
      s.len[p] += s.len[size_t(q)];
      s.ids[size_t(q)] = -2;  // gone: matches no candidate
      s.next[p] = s.next[size_t(q)];
      if (s.next[p] >= 0) s.prev[size_t(s.next[p])] = int(p);
      if (s.prev[p] >= 0) push(s.prev[p]);
      push(int(p));
    }
  }
  bool last_unk = false;
  for (int i = head; i >= 0; i = s.next[size_t(i)]) {
    const int32_t id = s.ids[size_t(i)];
    if (id >= 0) {
      out.push_back(id);
      last_unk = false;
      continue;
    }
    const std::string_view ch = word.substr(s.start[size_t(i)], s.len[size_t(i)]);
    bool bytes_ok = byte_fallback;
    for (unsigned char b : ch) bytes_ok = bytes_ok && byte_ids[b] >= 0;
    if (bytes_ok) {
      for (unsigned char b : ch) out.push_back(byte_ids[b]);
      last_unk = false;
      continue;
    }
    ZAYA_CHECK(model_unk >= 0, path, ": text has a character outside the vocabulary and model.unk_token is not set");
    if (!(fuse_unk && last_unk)) out.push_back(model_unk);
    last_unk = true;
  }
}

void HfTokenizer::Impl::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() > kCachedWordBytes) return bpe(word, out);
  WordCache& cache = tl_cache;
  if (cache.owner != instance) {
    cache.map.clear();
    cache.owner = instance;
  }
  if (auto it = cache.map.find(word); it != cache.map.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t n0 = out.size();
  bpe(word, out);
  if (cache.map.size() >= kCacheEntries) cache.map.clear();
  cache.map.emplace(std::string(word), std::vector<int32_t>(out.begin() + std::ptrdiff_t(n0), out.end()));
}

// ---------------------------------------------------------------- sections and words

void HfTokenizer::Impl::encode_section(std::string_view text, std::vector<int32_t>& out) const {
  std::string s(text);
  for (const NormStep& n : normalizer) {
    if (n.kind == NormStep::Replace) replace_all(s, n.pattern, n.content);
    else if (!s.empty()) s.insert(0, n.content);
  }
  if (s.empty()) return;
  std::vector<std::string_view> pieces{s}, next;
  for (const SplitStep& st : pre_tokenizer) {
    next.clear();
    for (std::string_view p : pieces) {
      size_t seg = 0;  // start of the text not yet emitted
      auto emit = [&](size_t a, size_t b) {
        if (b > a) next.push_back(p.substr(a, b - a));
      };
      size_t pos = p.find(st.pattern);
      while (pos != std::string_view::npos) {
        size_t end = pos + st.pattern.size();
        if (st.behavior == SplitStep::Contiguous)
          while (p.compare(end, st.pattern.size(), st.pattern) == 0) end += st.pattern.size();
        switch (st.behavior) {
          case SplitStep::Removed: emit(seg, pos); seg = end; break;
          case SplitStep::Isolated:
          case SplitStep::Contiguous: emit(seg, pos); emit(pos, end); seg = end; break;
          case SplitStep::MergedWithPrevious: emit(seg, end); seg = end; break;
          case SplitStep::MergedWithNext: emit(seg, pos); seg = pos; break;
        }
        pos = p.find(st.pattern, end);
      }
      emit(seg, p.size());
    }
    pieces.swap(next);
  }
  for (std::string_view p : pieces) {
    if (ignore_merges)
      if (auto it = piece_ids.find(p); it != piece_ids.end()) {
        out.push_back(it->second);
        continue;
      }
    // Cut before each marker whose preceding character no token joins to it.
    size_t ws = 0;
    for (size_t pos = p.find(marker, 1); pos != std::string_view::npos; pos = p.find(marker, pos + marker.size())) {
      size_t c = pos - 1;
      while (c > ws && ((unsigned char)p[c] & 0xC0) == 0x80) --c;
      const std::string_view prev = p.substr(c, pos - c);
      if (pos <= ws || std::find(glue.begin(), glue.end(), prev) != glue.end()) continue;
      encode_word(p.substr(ws, pos - ws), out);
      ws = pos;
    }
    encode_word(p.substr(ws), out);
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  const Impl& im = *impl_;
  // Sections: raw text between added tokens, and the added tokens (leftmost-longest).
  struct Section {
    std::string_view text;
    int32_t added = -1;
  };
  std::vector<Section> sections;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    if (!im.trie_first[(unsigned char)text[i]]) {
      ++i;
      continue;
    }
    int32_t node = 0, match = -1;
    size_t match_end = i;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = im.trie_edges.find((uint64_t(node) << 8) | (unsigned char)text[j]);
      if (it == im.trie_edges.end()) break;
      node = it->second;
      if (im.trie_token[size_t(node)] >= 0) match = im.trie_token[size_t(node)], match_end = j + 1;
    }
    if (match < 0) {
      ++i;
      continue;
    }
    if (i > start) sections.push_back({text.substr(start, i - start)});
    sections.push_back({text.substr(i, match_end - i), match});
    i = start = match_end;
  }
  if (start < text.size()) sections.push_back({text.substr(start)});
  for (size_t k = 0; k < sections.size(); ++k) {  // lstrip / rstrip eat the neighbours' whitespace
    if (sections[k].added < 0) continue;
    const Impl::Added& a = im.added[size_t(sections[k].added)];
    if (a.lstrip && k > 0 && sections[k - 1].added < 0) {
      std::string_view& t = sections[k - 1].text;
      while (!t.empty() && is_ascii_space(t.back())) t.remove_suffix(1);
    }
    if (a.rstrip && k + 1 < sections.size() && sections[k + 1].added < 0) {
      std::string_view& t = sections[k + 1].text;
      while (!t.empty() && is_ascii_space(t.front())) t.remove_prefix(1);
    }
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  for (const Section& s : sections) {
    if (s.added >= 0) out.push_back(im.added[size_t(s.added)].id);
    else im.encode_section(s.text, out);
  }
  return out;
}

std::vector<int32_t> HfTokenizer::encode_with_specials(std::string_view text) const {
  std::vector<int32_t> ids;
  if (impl_->add_bos) ids.push_back(impl_->bos);
  std::vector<int32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (impl_->add_eos) ids.push_back(impl_->eos);
  return ids;
}

// ---------------------------------------------------------------- decoding

std::string HfTokenizer::decode(std::span<const int32_t> ids) const {
  const Impl& im = *impl_;
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    ZAYA_CHECK(id >= 0 && size_t(id) < im.pieces.size() && !im.pieces[size_t(id)].empty(), im.path,
               ": cannot decode id ", id, " at position ", i, ": not in the vocabulary (size ", im.pieces.size(), ")");
    toks.push_back(im.pieces[size_t(id)]);
  }
  if (!im.has_decoder) {
    std::string r;
    for (size_t i = 0; i < toks.size(); ++i) r += (i ? " " : "") + toks[i];
    return r;
  }
  for (const Impl::DecodeStep& d : im.decoder) {
    switch (d.kind) {
      case Impl::DecodeStep::Replace:
        for (std::string& t : toks) replace_all(t, d.pattern, d.content);
        break;
      case Impl::DecodeStep::ByteFallback: {  // runs of <0xXX> become their raw bytes
        std::vector<std::string> r;
        bool in_bytes = false;
        for (std::string& t : toks) {
          const bool is_byte = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
                               std::isxdigit((unsigned char)t[3]) && std::isxdigit((unsigned char)t[4]);
          if (is_byte) {
            const char b = char(std::stoi(t.substr(3, 2), nullptr, 16));
            if (!in_bytes) r.emplace_back();
            r.back() += b;
          } else {
            r.push_back(std::move(t));
          }
          in_bytes = is_byte;
        }
        toks.swap(r);
        break;
      }
      case Impl::DecodeStep::Fuse: {
        std::string all;
        for (const std::string& t : toks) all += t;
        toks.assign(1, std::move(all));
        break;
      }
      case Impl::DecodeStep::Strip:
        if (d.content.empty()) break;  // stripping "" changes nothing (and would never stop matching)
        for (std::string& t : toks) {
          for (int k = 0; k < d.start && t.compare(0, d.content.size(), d.content) == 0; ++k) t.erase(0, d.content.size());
          for (int k = 0; k < d.stop && t.size() >= d.content.size() &&
                          t.compare(t.size() - d.content.size(), d.content.size(), d.content) == 0;
               ++k)
            t.resize(t.size() - d.content.size());
        }
        break;
    }
  }
  std::string r;
  for (const std::string& t : toks) r += t;
  return r;
}

// ---------------------------------------------------------------- loading and queries

HfTokenizer::~HfTokenizer() = default;

std::unique_ptr<HfTokenizer> HfTokenizer::from_json(const std::string& path, std::string_view tokenizer_json,
                                                    std::string_view config_json) {
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  t->impl_ = std::make_unique<Impl>();
  t->impl_->path = path;
  load_hf_tokenizer(*t->impl_, tokenizer_json, config_json);
  return t;
}

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::string& json_path) {
  namespace fs = std::filesystem;
  auto read = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    ZAYA_CHECK(f, p, ": cannot open");
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  ZAYA_CHECK(fs::is_regular_file(json_path), json_path, ": tokenizer.json not found");
  const fs::path cfg = fs::path(json_path).parent_path() / "tokenizer_config.json";
  return from_json(json_path, read(json_path), fs::is_regular_file(cfg) ? read(cfg.string()) : std::string());
}

int HfTokenizer::vocab_size() const { return int(impl_->pieces.size()); }
int HfTokenizer::bos_id() const { return impl_->bos; }
std::vector<int32_t> HfTokenizer::document_prefix() const {
  return impl_->add_bos && impl_->bos >= 0 ? std::vector<int32_t>{impl_->bos} : std::vector<int32_t>{};
}
int HfTokenizer::eos_id() const { return impl_->eos; }
int HfTokenizer::pad_id() const { return impl_->pad; }
int HfTokenizer::unk_id() const { return impl_->unk; }
bool HfTokenizer::adds_bos() const { return impl_->add_bos; }
bool HfTokenizer::adds_eos() const { return impl_->add_eos; }
std::string HfTokenizer::path() const { return impl_->path; }

std::string HfTokenizer::id_to_piece(int id) const {
  ZAYA_CHECK(id >= 0 && id < vocab_size(), impl_->path, ": piece id ", id, " out of range [0, ", vocab_size(), ")");
  return impl_->pieces[size_t(id)];
}

int HfTokenizer::piece_to_id(std::string_view piece) const {
  auto it = impl_->piece_ids.find(piece);
  return it == impl_->piece_ids.end() ? -1 : it->second;
}

}  // namespace zaya
