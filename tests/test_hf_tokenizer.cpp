// Hugging Face tokenizer.json: BPE merges and their order, byte fallback, added and special
// tokens, normalizer / pre-tokenizer / decoder steps, tokenizer_config.json, errors that name
// the file and field. Small hand-made files; the real Gemma3 file is checked against its
// JavaScript reference encoder by tests/hf_tokenizer_ref.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"

using namespace zaya;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string U = "\xe2\x96\x81";  // U+2581, SentencePiece's word marker

// A Gemma-like tokenizer.json: Replace " " -> U+2581, Split on " ", byte fallback, the
// decoder chain Replace / ByteFallback / Fuse, <bos>-adding template.
json base_json(const std::vector<std::string>& pieces, const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  int id = 0;
  for (const char* s : {"<pad>", "<eos>", "<bos>", "<unk>"}) vocab[s] = id++;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = id++;
  }
  for (const auto& p : pieces)
    if (!vocab.contains(p)) vocab[p] = id++;
  json m = json::array();
  for (const auto& [a, b] : merges) m.push_back({a, b});
  json added = json::array();
  for (int i = 0; i < 4; ++i)
    added.push_back({{"id", i}, {"content", std::vector<std::string>{"<pad>", "<eos>", "<bos>", "<unk>"}[size_t(i)]},
                     {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                     {"special", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", U}}},
          {"pre_tokenizer",
           {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", U}}}, {"content", " "}},
                                      {{"type", "ByteFallback"}},
                                      {{"type", "Fuse"}}})}}},
          {"model",
           {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true}, {"vocab", vocab},
            {"merges", m}}}};
}

std::unique_ptr<HfTokenizer> make(const json& j, const json& cfg = nullptr) {
  return HfTokenizer::from_json("t/tokenizer.json", j.dump(), cfg.is_null() ? std::string() : cfg.dump());
}

std::vector<std::string> pieces_of(const HfTokenizer& t, std::string_view text) {
  std::vector<std::string> r;
  for (int32_t id : t.encode(text)) r.push_back(t.id_to_piece(id));
  return r;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

using Pieces = std::vector<std::string>;

}  // namespace

TEST(HfTokenizer, MergesApplyInRankOrder) {
  const Pieces chars = {"a", "b", "c", "ab", "bc", "abc"};
  auto t1 = make(base_json(chars, {{"b", "c"}, {"a", "b"}, {"a", "bc"}}));
  EXPECT_EQ(pieces_of(*t1, "abc"), (Pieces{"abc"}));  // b+c first, then a+bc
  auto t2 = make(base_json(chars, {{"a", "b"}, {"b", "c"}}));
  EXPECT_EQ(pieces_of(*t2, "abc"), (Pieces{"ab", "c"}));  // a+b wins, ab+c is no merge
  auto t3 = make(base_json({"a", "aa"}, {{"a", "a"}}));
  EXPECT_EQ(pieces_of(*t3, "aaa"), (Pieces{"aa", "a"}));  // ties: leftmost first
  EXPECT_EQ(pieces_of(*t3, "aaaa"), (Pieces{"aa", "aa"}));
}

TEST(HfTokenizer, ByteFallbackAndUnknown) {
  auto t = make(base_json({"a"}, {}));
  EXPECT_EQ(pieces_of(*t, "a\xc3\xa9"), (Pieces{"a", "<0xC3>", "<0xA9>"}));  // é is not in the vocabulary
  EXPECT_EQ(t->decode(t->encode("a\xc3\xa9")), "a\xc3\xa9");
  json j = base_json({"a"}, {});
  j["model"]["byte_fallback"] = false;
  auto u = make(j);
  EXPECT_EQ(pieces_of(*u, "\xc3\xa9\xc3\xa9" "a"), (Pieces{"<unk>", "a"}));  // fused unknowns
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(pieces_of(*make(j), "\xc3\xa9\xc3\xa9"), (Pieces{"<unk>", "<unk>"}));
  // Invalid UTF-8 bytes fall back one by one and decode back to the same bytes.
  EXPECT_EQ(pieces_of(*t, "a\xff"), (Pieces{"a", "<0xFF>"}));
  EXPECT_EQ(t->decode(t->encode("a\xff\xc3")), "a\xff\xc3");
}

TEST(HfTokenizer, NormalizerPreTokenizerAndDecoder) {
  auto t = make(base_json({"a", "b", U, U + "a", U + "b", "a" + U}, {{U, "a"}, {U, "b"}}));
  // " " becomes U+2581 and merges with the next word; the Split on " " is a no-op after it.
  EXPECT_EQ(pieces_of(*t, "a a b"), (Pieces{"a", U + "a", U + "b"}));
  EXPECT_EQ(t->decode(t->encode(" a  b ")), " a  b ");
  // A merge that joins a character to the marker ("a" + U) keeps that boundary uncut.
  auto g = make(base_json({"a", "b", U, "a" + U, "a" + U + "b"}, {{"a", U}, {"a" + U, "b"}}));
  EXPECT_EQ(pieces_of(*g, "a b"), (Pieces{"a" + U + "b"}));
  // Prepend normalizer and a Strip decoder (Llama style).
  json j = base_json({"a", U, U + "a"}, {{U, "a"}});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", U}},
                                                  {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", U}}})}};
  j["decoder"]["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  auto p = make(j);
  EXPECT_EQ(pieces_of(*p, "a a"), (Pieces{U + "a", U + "a"}));
  EXPECT_EQ(p->decode(p->encode("a a")), "a a");
  // Split behaviours (on a tokenizer without the normalizer).
  json s = base_json({"a", "b", "-"}, {});
  s["normalizer"] = nullptr;
  for (auto [beh, want] : std::vector<std::pair<std::string, Pieces>>{{"Removed", {"a", "b"}},
                                                                      {"Isolated", {"a", "-", "b"}},
                                                                      {"MergedWithNext", {"a", "-", "b"}}}) {
    s["pre_tokenizer"]["pattern"]["String"] = "-";
    s["pre_tokenizer"]["behavior"] = beh;
    EXPECT_EQ(pieces_of(*make(s), "a-b"), want) << beh;
  }
}

TEST(HfTokenizer, AddedAndSpecialTokensMatchBeforeBpe) {
  json j = base_json({"<", ">", "s", "x", "<s", "<s>", "a", U}, {{"<", "s"}, {"<s", ">"}});
  j["added_tokens"].push_back({{"id", 4000}, {"content", "<s>x"}, {"special", false}, {"normalized", false}});
  j["added_tokens"].push_back({{"id", 4001}, {"content", "\n"}, {"special", false}, {"normalized", false}});
  j["added_tokens"].push_back({{"id", 4002}, {"content", "<sep>"}, {"special", true}, {"lstrip", true},
                               {"rstrip", true}});
  auto t = make(j);
  EXPECT_EQ(t->encode("<bos>x"), (std::vector<int32_t>{2, t->piece_to_id("x")}));
  EXPECT_EQ(t->encode("<s>x<s>"), (std::vector<int32_t>{4000, t->piece_to_id("<s>")}));  // longest match, then BPE
  EXPECT_EQ(t->encode("x\n\nx"), (std::vector<int32_t>{t->piece_to_id("x"), 4001, 4001, t->piece_to_id("x")}));
  EXPECT_EQ(pieces_of(*t, "x  <sep>  x"), (Pieces{"x", "<sep>", "x"}));  // lstrip / rstrip
  EXPECT_EQ(pieces_of(*t, "<bo"), (Pieces{"<", "<0x62>", "<0x6F>"}));      // a prefix is not a match
  EXPECT_EQ(t->decode(t->encode("<bos>a <eos>\n")), "<bos>a <eos>\n");
  EXPECT_EQ(t->vocab_size(), 4003);
}

TEST(HfTokenizer, ConfigGivesBosEos) {
  auto t = make(base_json({"a"}, {}));  // no config: the template's <bos>, eos by name
  EXPECT_EQ(t->bos_id(), 2);
  EXPECT_EQ(t->eos_id(), 1);
  EXPECT_TRUE(t->adds_bos());
  EXPECT_EQ(t->encode_with_specials("a"), (std::vector<int32_t>{2, t->piece_to_id("a")}));
  EXPECT_EQ(t->document_prefix(), (std::vector<int32_t>{2}));  // prompts start as HF documents do
  json cfg = {{"add_bos_token", false}, {"add_eos_token", true}, {"bos_token", "<bos>"},
              {"eos_token", {{"__type", "AddedToken"}, {"content", "<pad>"}}}, {"pad_token", "<pad>"}};
  auto c = make(base_json({"a"}, {}), cfg);
  EXPECT_EQ(c->eos_id(), 0);
  EXPECT_EQ(c->pad_id(), 0);
  EXPECT_EQ(c->unk_id(), 3);
  EXPECT_EQ(c->encode_with_specials("a"), (std::vector<int32_t>{c->piece_to_id("a"), 0}));
  EXPECT_TRUE(c->document_prefix().empty());  // add_bos_token false
}

// The production BPE (word cuts, cache, small-word scan, heap for long words) against a
// direct transcription of the rule on strings, on random texts and random merges.
TEST(HfTokenizer, MatchesNaiveBpeOnRandomTexts) {
  std::mt19937 rng(5);
  const std::vector<std::string> alphabet = {"a", "b", " ", "c", U, "\xc3\xa9"};
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::string> pieces = alphabet;
  for (int k = 0; k < 60; ++k) {
    const std::string a = pieces[rng() % pieces.size()], b = pieces[rng() % pieces.size()];
    if (a.size() + b.size() > 12) continue;
    bool dup = false;
    for (auto& m : merges) dup = dup || (m.first == a && m.second == b);
    if (dup) continue;
    merges.push_back({a, b});
    if (std::find(pieces.begin(), pieces.end(), a + b) == pieces.end()) pieces.push_back(a + b);
  }
  json j = base_json(pieces, merges);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = nullptr;
  auto t = make(j);
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t i = 0; i < merges.size(); ++i) rank.emplace(merges[i], i);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> sym;
    const int n = 1 + int(rng() % (trial < 200 ? 20 : 150));
    for (int i = 0; i < n; ++i) sym.push_back(alphabet[rng() % (alphabet.size() - (trial % 2))]);
    std::string text;
    for (auto& s : sym) text += s;
    while (true) {  // lowest rank, leftmost
      size_t best = SIZE_MAX, at = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i)
        if (auto it = rank.find({sym[i], sym[i + 1]}); it != rank.end() && it->second < best) best = it->second, at = i;
      if (best == SIZE_MAX) break;
      sym[at] += sym[at + 1];
      sym.erase(sym.begin() + std::ptrdiff_t(at) + 1);
    }
    ASSERT_EQ(pieces_of(*t, text), sym) << "text " << text;
    std::string spaced = text;  // the decoder turns the marker into a space
    for (size_t p = spaced.find(U); p != std::string::npos; p = spaced.find(U)) spaced.replace(p, U.size(), " ");
    ASSERT_EQ(t->decode(t->encode(text)), spaced);
  }
}

TEST(HfTokenizer, EncodesFromManyThreads) {
  auto t = make(base_json({"a", "b", U, U + "a", "ab"}, {{U, "a"}, {"a", "b"}}));
  const std::string text = "ab a b ab aab ba a";
  const auto want = t->encode(text);
  std::vector<std::thread> th;
  std::vector<int> ok(4, 0);
  for (int k = 0; k < 4; ++k)
    th.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i) ok[size_t(k)] += t->encode(text) == want;
    });
  for (auto& x : th) x.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ok[size_t(k)], 200);
}

TEST(HfTokenizer, BadInputNamesFileAndField) {
  auto err = [](const json& j) { return error_of([&] { make(j); }); };
  EXPECT_NE(error_of([] { HfTokenizer::from_json("t/tokenizer.json", "{not json"); }).find("t/tokenizer.json: not valid JSON"),
            std::string::npos);
  json j = base_json({"a", "b"}, {{"a", "b"}});
  EXPECT_NE(err(j).find("model.merges[0]"), std::string::npos) << err(j);  // "ab" is not in the vocabulary
  j = base_json({"a"}, {});
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(err(j).find("t/tokenizer.json: field model.type"), std::string::npos) << err(j);
  j = base_json({"a"}, {});
  j["normalizer"]["pattern"] = {{"Regex", "\\s+"}};
  EXPECT_NE(err(j).find("field normalizer.pattern: Regex"), std::string::npos) << err(j);
  j = base_json({"a"}, {});
  j["decoder"]["decoders"][1]["type"] = "ByteLevel";
  EXPECT_NE(err(j).find("field decoder.decoders[1].type"), std::string::npos) << err(j);
  j = base_json({"a"}, {});
  j["model"].erase("vocab");
  EXPECT_NE(err(j).find("field model.vocab: missing"), std::string::npos) << err(j);
  j = base_json({"a"}, {});
  j["added_tokens"][0]["id"] = "zero";
  EXPECT_NE(err(j).find("field added_tokens[0].id"), std::string::npos) << err(j);
  const std::string e = error_of([] { make(base_json({"a"}, {}), json{{"bos_token", "<nope>"}}); });
  EXPECT_NE(e.find("tokenizer_config.json): field bos_token: token \"<nope>\""), std::string::npos) << e;
  auto t = make(base_json({"a"}, {}));
  const std::string d = error_of([&] { t->decode(std::vector<int32_t>{0, 99999}); });
  EXPECT_NE(d.find("cannot decode id 99999 at position 1"), std::string::npos) << d;
}

TEST(HfTokenizer, LoadTokenizerDispatchAndModelDirectory) {
  const fs::path dir = fs::temp_directory_path() / ("zaya_test_hf_tok_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_EQ(find_model_tokenizer(dir.string()), "");
  std::ofstream(dir / "tokenizer.model") << "not used";
  EXPECT_EQ(find_model_tokenizer(dir.string()), (dir / "tokenizer.model").string());
  std::ofstream(dir / "tokenizer.json") << base_json({"a"}, {}).dump(1);
  std::ofstream(dir / "tokenizer_config.json") << json{{"eos_token", "<pad>"}}.dump();
  EXPECT_EQ(find_model_tokenizer(dir.string()), (dir / "tokenizer.json").string());
  auto t = load_tokenizer((dir / "tokenizer.json").string());
  EXPECT_EQ(t->kind(), "tokenizer.json");
  EXPECT_EQ(t->eos_id(), 0);  // from tokenizer_config.json next to it
  fs::copy_file(dir / "tokenizer.json", dir / "copy.model");  // recognised by content
  EXPECT_EQ(load_tokenizer((dir / "copy.model").string())->kind(), "tokenizer.json");
  fs::remove_all(dir);
}
