// Parsing tokenizer.json and tokenizer_config.json into HfTokenizer::Impl. Every refusal
// names the file and the JSON field at fault.
#include <algorithm>
#include <atomic>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/hf_tokenizer_impl.h"

namespace zaya {

namespace {

using json = nlohmann::json;

struct Ctx {
  const std::string& path;
  [[noreturn]] void bad(const std::string& field, const std::string& why) const {
    fail(path, ": field ", field, ": ", why);
  }
  const json& get(const json& obj, const std::string& key, const std::string& field) const {
    auto it = obj.find(key);
    if (it == obj.end()) bad(field + "." + key, "missing");
    return *it;
  }
  std::string str(const json& obj, const std::string& key, const std::string& field) const {
    const json& v = get(obj, key, field);
    if (!v.is_string()) bad(field + "." + key, "must be a string");
    return v.get<std::string>();
  }
  bool flag(const json& obj, const std::string& key, const std::string& field, bool dflt) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) bad(field + "." + key, "must be true or false");
    return it->get<bool>();
  }
  // {"String": "..."} patterns only: regex patterns need a regex engine matching Rust's.
  std::string pattern(const json& obj, const std::string& field) const {
    const json& p = get(obj, "pattern", field);
    if (p.is_object() && p.contains("String") && p["String"].is_string()) {
      std::string s = p["String"].get<std::string>();
      if (s.empty()) bad(field + ".pattern.String", "empty pattern");
      return s;
    }
    if (p.is_object() && p.contains("Regex")) bad(field + ".pattern", "Regex patterns are not supported");
    bad(field + ".pattern", "must be {\"String\": ...}");
  }
  std::string type(const json& obj, const std::string& field) const {
    if (!obj.is_object()) bad(field, "must be an object or null");
    return str(obj, "type", field);
  }
};

json parse_json(const std::string& name, std::string_view text) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(name, ": not valid JSON: ", e.what());
  }
}

void add_normalizer(const Ctx& c, HfTokenizer::Impl& im, const json& n, const std::string& field) {
  if (n.is_null()) return;
  const std::string t = c.type(n, field);
  if (t == "Sequence") {
    const json& list = c.get(n, "normalizers", field);
    if (!list.is_array()) c.bad(field + ".normalizers", "must be a list");
    for (size_t i = 0; i < list.size(); ++i) add_normalizer(c, im, list[i], cat(field, ".normalizers[", i, "]"));
  } else if (t == "Replace") {
    im.normalizer.push_back({HfTokenizer::Impl::NormStep::Replace, c.pattern(n, field), c.str(n, "content", field)});
  } else if (t == "Prepend") {
    im.normalizer.push_back({HfTokenizer::Impl::NormStep::Prepend, "", c.str(n, "prepend", field)});
  } else {
    c.bad(field + ".type", "normalizer \"" + t + "\" is not supported (Replace, Prepend, Sequence)");
  }
}

void add_pre_tokenizer(const Ctx& c, HfTokenizer::Impl& im, const json& p, const std::string& field) {
  if (p.is_null()) return;
  const std::string t = c.type(p, field);
  if (t == "Sequence") {
    const json& list = c.get(p, "pretokenizers", field);
    if (!list.is_array()) c.bad(field + ".pretokenizers", "must be a list");
    for (size_t i = 0; i < list.size(); ++i) add_pre_tokenizer(c, im, list[i], cat(field, ".pretokenizers[", i, "]"));
  } else if (t == "Split") {
    using S = HfTokenizer::Impl::SplitStep;
    if (c.flag(p, "invert", field, false)) c.bad(field + ".invert", "inverted Split is not supported");
    const std::string b = c.str(p, "behavior", field);
    S::Behavior beh;
    if (b == "Removed") beh = S::Removed;
    else if (b == "Isolated") beh = S::Isolated;
    else if (b == "MergedWithPrevious") beh = S::MergedWithPrevious;
    else if (b == "MergedWithNext") beh = S::MergedWithNext;
    else if (b == "Contiguous") beh = S::Contiguous;
    else c.bad(field + ".behavior", "unknown behavior \"" + b + "\"");
    im.pre_tokenizer.push_back({beh, c.pattern(p, field)});
  } else {
    c.bad(field + ".type", "pre-tokenizer \"" + t + "\" is not supported (Split, Sequence)");
  }
}

void add_decoder(const Ctx& c, HfTokenizer::Impl& im, const json& d, const std::string& field) {
  using D = HfTokenizer::Impl::DecodeStep;
  const std::string t = c.type(d, field);
  if (t == "Sequence") {
    const json& list = c.get(d, "decoders", field);
    if (!list.is_array()) c.bad(field + ".decoders", "must be a list");
    for (size_t i = 0; i < list.size(); ++i) add_decoder(c, im, list[i], cat(field, ".decoders[", i, "]"));
  } else if (t == "Replace") {
    im.decoder.push_back({D::Replace, c.pattern(d, field), c.str(d, "content", field)});
  } else if (t == "ByteFallback") {
    im.decoder.push_back({D::ByteFallback, "", ""});
  } else if (t == "Fuse") {
    im.decoder.push_back({D::Fuse, "", ""});
  } else if (t == "Strip") {
    D s{D::Strip, "", c.str(d, "content", field)};
    const json& st = c.get(d, "start", field);
    const json& sp = c.get(d, "stop", field);
    if (!st.is_number_unsigned() || st.get<uint64_t>() > (1u << 20)) c.bad(field + ".start", "must be a count <= 2^20");
    if (!sp.is_number_unsigned() || sp.get<uint64_t>() > (1u << 20)) c.bad(field + ".stop", "must be a count <= 2^20");
    s.start = st.get<int>();
    s.stop = sp.get<int>();
    im.decoder.push_back(s);
  } else {
    c.bad(field + ".type", "decoder \"" + t + "\" is not supported (Replace, ByteFallback, Fuse, Strip, Sequence)");
  }
}

// How far past the entries seen an id may lie (added tokens above the vocabulary, gaps).
constexpr size_t kIdSlack = 1 << 16;

void load_model(const Ctx& c, HfTokenizer::Impl& im, const json& m) {
  const std::string t = c.type(m, "model");
  if (t != "BPE") c.bad("model.type", "model \"" + t + "\" is not supported (BPE)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = m.find(k);
    if (it != m.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      c.bad(std::string("model.") + k, "not supported");
  }
  if (auto it = m.find("dropout"); it != m.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0))
    c.bad("model.dropout", "BPE dropout is not supported");
  im.byte_fallback = c.flag(m, "byte_fallback", "model", false);
  im.ignore_merges = c.flag(m, "ignore_merges", "model", false);
  im.fuse_unk = c.flag(m, "fuse_unk", "model", false);

  const json& vocab = c.get(m, "vocab", "model");
  if (!vocab.is_object()) c.bad("model.vocab", "must be an object of piece: id");
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > (1 << 26))
      c.bad("model.vocab[\"" + it.key() + "\"]", "id must be an integer in [0, 2^26]");
    const size_t id = it.value().get<size_t>();
    // Ids are dense in real vocabularies; a bound keeps a tiny file from allocating 2^26 pieces.
    if (id >= vocab.size() + kIdSlack)
      c.bad("model.vocab[\"" + it.key() + "\"]", cat("id ", id, " is far past the vocabulary's ", vocab.size(), " entries"));
    if (id >= im.pieces.size()) im.pieces.resize(id + 1);
    if (!im.pieces[id].empty()) c.bad("model.vocab[\"" + it.key() + "\"]", cat("id ", id, " is used twice"));
    if (it.key().empty()) c.bad("model.vocab", cat("empty piece for id ", id));
    im.pieces[id] = it.key();
  }
  if (im.pieces.empty()) c.bad("model.vocab", "empty");
}

// Merges refer to pieces, so the id map must exist before they are read.
void load_merges(const Ctx& c, HfTokenizer::Impl& im, const json& m) {
  const json& merges = c.get(m, "merges", "model");
  if (!merges.is_array()) c.bad("model.merges", "must be a list");
  im.merges.reserve(merges.size());
  auto id_of = [&](const std::string& s, size_t i) {
    auto it = im.piece_ids.find(s);
    if (it == im.piece_ids.end()) c.bad(cat("model.merges[", i, "]"), "piece \"" + s + "\" is not in model.vocab");
    return it->second;
  };
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& e = merges[i];
    std::string a, b;
    if (e.is_string()) {  // older format: "left right"
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        c.bad(cat("model.merges[", i, "]"), "\"" + s + "\" is not two pieces separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      c.bad(cat("model.merges[", i, "]"), "must be \"a b\" or [\"a\", \"b\"]");
    }
    const int32_t ia = id_of(a, i), ib = id_of(b, i), ir = id_of(a + b, i);
    im.merges.insert(ia, ib, int32_t(i), ir);
  }
}

int32_t token_id(const Ctx& c, const HfTokenizer::Impl& im, const json& v, const std::string& field) {
  if (v.is_null()) return -1;
  std::string s;
  if (v.is_string()) s = v.get<std::string>();
  else if (v.is_object() && v.contains("content") && v["content"].is_string()) s = v["content"].get<std::string>();
  else c.bad(field, "must be a token string or an AddedToken object");
  auto it = im.piece_ids.find(s);
  if (it == im.piece_ids.end()) c.bad(field, "token \"" + s + "\" is not in the vocabulary");
  return it->second;
}

void build_trie(HfTokenizer::Impl& im) {
  im.trie_token.assign(1, -1);
  for (size_t k = 0; k < im.added.size(); ++k) {
    int32_t node = 0;
    for (unsigned char ch : im.added[k].content) {
      const uint64_t key = (uint64_t(node) << 8) | ch;
      auto it = im.trie_edges.find(key);
      if (it == im.trie_edges.end()) {
        it = im.trie_edges.emplace(key, int32_t(im.trie_token.size())).first;
        im.trie_token.push_back(-1);
      }
      node = it->second;
    }
    im.trie_token[size_t(node)] = int32_t(k);
    im.trie_first[(unsigned char)im.added[k].content[0]] = true;
  }
}

// The word-cut rule (see Impl::marker): every character some merge result places right
// before the first character of the marker.
void build_word_cuts(const HfTokenizer::Impl& im_const, HfTokenizer::Impl& im) {
  std::string m = " ";
  for (const auto& n : im_const.normalizer)
    if (n.kind == HfTokenizer::Impl::NormStep::Replace && n.pattern == " " && !n.content.empty()) m = n.content;
  size_t len = 1;  // the marker is the first UTF-8 character of m
  const unsigned char l = (unsigned char)m[0];
  if (l >= 0xF0) len = 4;
  else if (l >= 0xE0) len = 3;
  else if (l >= 0xC0) len = 2;
  im.marker = m.substr(0, std::min(len, m.size()));
  for (const std::string& p : im.pieces) {  // pieces cover every merge result
    for (size_t pos = p.find(im.marker, 1); pos != std::string::npos; pos = p.find(im.marker, pos + 1)) {
      size_t s = pos - 1;
      while (s > 0 && (static_cast<unsigned char>(p[s]) & 0xC0) == 0x80) --s;
      std::string prev = p.substr(s, pos - s);
      if (std::find(im.glue.begin(), im.glue.end(), prev) == im.glue.end()) im.glue.push_back(prev);
    }
  }
}

}  // namespace

void load_hf_tokenizer(HfTokenizer::Impl& im, std::string_view tokenizer_json, std::string_view config_json) {
  static std::atomic<uint64_t> next_instance{1};
  im.instance = next_instance++;
  const Ctx c{im.path};
  const json root = parse_json(im.path, tokenizer_json);
  if (!root.is_object()) c.bad("(top level)", "must be an object");

  load_model(c, im, c.get(root, "model", ""));
  const json& added = root.contains("added_tokens") ? root["added_tokens"] : json::array();
  if (!added.is_array()) c.bad("added_tokens", "must be a list");
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string f = cat("added_tokens[", i, "]");
    const json& a = added[i];
    if (!a.is_object()) c.bad(f, "must be an object");
    HfTokenizer::Impl::Added t;
    t.content = c.str(a, "content", f);
    if (t.content.empty()) c.bad(f + ".content", "empty");
    const json& id = c.get(a, "id", f);
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 26))
      c.bad(f + ".id", "must be an integer in [0, 2^26]");
    t.id = id.get<int32_t>();
    if (size_t(t.id) >= im.pieces.size() + kIdSlack)
      c.bad(f + ".id", cat("id ", t.id, " is far past the vocabulary's ", im.pieces.size(), " pieces"));
    t.special = c.flag(a, "special", f, false);
    t.lstrip = c.flag(a, "lstrip", f, false);
    t.rstrip = c.flag(a, "rstrip", f, false);
    if (size_t(t.id) >= im.pieces.size()) im.pieces.resize(size_t(t.id) + 1);
    if (!im.pieces[size_t(t.id)].empty() && im.pieces[size_t(t.id)] != t.content)
      c.bad(f + ".id", cat("id ", t.id, " is \"", im.pieces[size_t(t.id)], "\" in model.vocab, not \"", t.content, "\""));
    im.pieces[size_t(t.id)] = t.content;
    im.added.push_back(std::move(t));
  }
  // The id map points into `pieces`, which no longer grows.
  im.piece_ids.reserve(im.pieces.size());
  for (size_t i = 0; i < im.pieces.size(); ++i)
    if (!im.pieces[i].empty()) im.piece_ids.emplace(im.pieces[i], int32_t(i));
  const json& m = root["model"];
  load_merges(c, im, m);

  std::fill(std::begin(im.ascii_ids), std::end(im.ascii_ids), -1);
  for (int b = 0; b < 128; ++b)
    if (auto it = im.piece_ids.find(std::string(1, char(b))); it != im.piece_ids.end()) im.ascii_ids[b] = it->second;
  std::fill(std::begin(im.byte_ids), std::end(im.byte_ids), -1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (auto it = im.piece_ids.find(name); it != im.piece_ids.end()) im.byte_ids[b] = it->second;
  }
  if (auto it = m.find("unk_token"); it != m.end()) im.model_unk = token_id(c, im, *it, "model.unk_token");
  build_trie(im);

  if (root.contains("normalizer")) add_normalizer(c, im, root["normalizer"], "normalizer");
  if (root.contains("pre_tokenizer")) add_pre_tokenizer(c, im, root["pre_tokenizer"], "pre_tokenizer");
  if (root.contains("decoder") && !root["decoder"].is_null()) {
    im.has_decoder = true;
    add_decoder(c, im, root["decoder"], "decoder");
  }
  build_word_cuts(im, im);

  // bos / eos: the post-processor's template first, tokenizer_config.json over it.
  if (root.contains("post_processor") && root["post_processor"].is_object()) {
    const json& pp = root["post_processor"];
    if (pp.value("type", "") == "TemplateProcessing" && pp.contains("single") && pp["single"].is_array()) {
      const json& single = pp["single"];
      for (size_t i = 0; i < single.size(); ++i) {
        if (!single[i].is_object() || !single[i].contains("SpecialToken")) continue;
        const std::string f = cat("post_processor.single[", i, "].SpecialToken");
        const int32_t id = token_id(c, im, c.get(single[i]["SpecialToken"], "id", f), f + ".id");
        if (i == 0) im.bos = id, im.add_bos = true;
        else im.eos = id, im.add_eos = true;
      }
    }
  }
  im.unk = im.model_unk;
  if (!config_json.empty()) {
    const std::string cpath = im.path + " (tokenizer_config.json)";
    const Ctx cc{cpath};
    const json cfg = parse_json(cpath, config_json);
    if (!cfg.is_object()) cc.bad("(top level)", "must be an object");
    if (cfg.contains("bos_token")) im.bos = token_id(cc, im, cfg["bos_token"], "bos_token");
    if (cfg.contains("eos_token")) im.eos = token_id(cc, im, cfg["eos_token"], "eos_token");
    if (cfg.contains("pad_token")) im.pad = token_id(cc, im, cfg["pad_token"], "pad_token");
    if (cfg.contains("unk_token")) im.unk = token_id(cc, im, cfg["unk_token"], "unk_token");
    im.add_bos = cc.flag(cfg, "add_bos_token", "", im.add_bos);
    im.add_eos = cc.flag(cfg, "add_eos_token", "", im.add_eos);
  }
  if (im.eos < 0)  // no config: the usual names
    for (const char* name : {"<eos>", "</s>", "<|endoftext|>"})
      if (auto it = im.piece_ids.find(name); it != im.piece_ids.end() && im.eos < 0) im.eos = it->second;
  if (im.add_bos && im.bos < 0) c.bad("add_bos_token", "set but there is no bos_token");
  if (im.add_eos && im.eos < 0) c.bad("add_eos_token", "set but there is no eos_token");
}

}  // namespace zaya
