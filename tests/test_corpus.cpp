// Corpus readers and `zaya prepare` on corpora as they ship: every format and compression gives
// the same documents and tokens, bad input is a one-line error that leaves nothing behind,
// dedup / empty / UTF-8 / bad-line handling is counted, output is the same at any thread count.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/byte_source.h"
#include "data/corpus.h"
#include "data/dedup_set.h"
#include "data/document.h"
#include "data/loader.h"
#include "data/megatron.h"
#include "data/prepare.h"
#include "test_util.h"

using namespace zaya;
using test_util::error_of;
using test_util::TempDir;
namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// gzip members (one per piece: a multi-member file when there are several).
std::string gzip(const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) {
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::string buf(deflateBound(&z, uLong(p.size())) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p.data()));
    z.avail_in = uInt(p.size());
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = uInt(buf.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    buf.resize(z.total_out);
    deflateEnd(&z);
    out += buf;
  }
  return out;
}

// zstd frames (one per piece).
std::string zstd(const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) {
    std::string buf(ZSTD_compressBound(p.size()), '\0');
    size_t n = ZSTD_compress(buf.data(), buf.size(), p.data(), p.size(), 3);
    EXPECT_FALSE(ZSTD_isError(n));
    buf.resize(n);
    out += buf;
  }
  return out;
}

// The documents a list of inputs holds, as prepare sees them (parsed, repaired).
std::vector<std::string> documents_of(const std::vector<std::string>& inputs, const std::string& key = "text") {
  CorpusReader reader(expand_corpus_inputs(inputs), {false, key});
  JsonTextExtractor json;
  TextKey k = parse_text_key(key);
  std::vector<std::string> docs;
  RawRecord rec;
  while (reader.next(rec)) {
    std::string text;
    if (rec.json) {
      repair_utf8(rec.text);
      std::string why = json.extract(rec.text, k, text);
      EXPECT_EQ(why, "") << reader.where(rec);
    } else {
      text = rec.text;
    }
    docs.push_back(text);
  }
  return docs;
}

// Hard documents: blank lines inside, CRLF-looking text, escapes, astral characters, > 1 MB.
std::vector<std::string> hard_documents() {
  std::string big(1100000, 'x');
  for (size_t i = 0; i < big.size(); i += 97) big[i] = '\n';
  return {"In the beginning God created the heaven and the earth.",
          "First paragraph.\n\nSecond paragraph after a blank line.\n\n\nThird.",
          "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xF0\x9F\x98\x80 emoji",
          "tab\tand \"quotes\" and back\\slash",
          "line one\r\nline two with CRLF inside the text",
          big};
}

// JSON lines of the documents; `escaped` writes non-ASCII as \u escapes (surrogate pairs for
// astral characters), as Python's json.dumps does by default.
std::string jsonl_of(const std::vector<std::string>& docs, bool escaped, const std::string& eol = "\n") {
  std::string out;
  for (const auto& d : docs) {
    nlohmann::json j = {{"id", out.size()}, {"text", d}};
    out += j.dump(-1, ' ', escaped) + eol;
  }
  return out;
}

}  // namespace

TEST(Corpus, EveryFormatAndCompressionGivesTheSameDocuments) {
  TempDir dir("corpus", "formats");
  const auto docs = hard_documents();
  const std::string plain = jsonl_of(docs, false), escaped = jsonl_of(docs, true);
  write_bytes(dir / "a.jsonl", plain);
  write_bytes(dir / "b.json", "\xEF\xBB\xBF" + escaped);  // a BOM, \u escapes
  write_bytes(dir / "c.jsonl", jsonl_of(docs, false, "\r\n"));
  write_bytes(dir / "d.jsonl.gz", gzip({plain}));
  write_bytes(dir / "e.jsonl.gz", gzip({plain.substr(0, 200), plain.substr(200)}));  // two members
  write_bytes(dir / "f.jsonl.zst", zstd({plain}));
  write_bytes(dir / "g.jsonl.zst", zstd({plain.substr(0, 300), plain.substr(300)}));  // two frames
  write_bytes(dir / "h.jsonl", "\n" + plain + "\n  \n");                           // blank lines between
  for (const char* name : {"a.jsonl", "b.json", "c.jsonl", "d.jsonl.gz", "e.jsonl.gz", "f.jsonl.zst", "g.jsonl.zst",
                           "h.jsonl"})
    EXPECT_EQ(documents_of({dir / name}), docs) << name;

  // Plain text: blank lines separate documents, in every compression; CRLF and a BOM are dropped.
  const std::string text = "\xEF\xBB\xBFone\r\ntwo\r\n\r\nthree  \n\n\n four\n";
  const std::vector<std::string> text_docs = {"one\ntwo", "three", " four"};
  write_bytes(dir / "t.txt", text);
  write_bytes(dir / "t2.txt.gz", gzip({text}));
  write_bytes(dir / "t3.txt.zst", zstd({text}));
  for (const char* name : {"t.txt", "t2.txt.gz", "t3.txt.zst"}) EXPECT_EQ(documents_of({dir / name}), text_docs) << name;
}

TEST(Corpus, DirectoriesAndDottedKeys) {
  TempDir dir("corpus", "dir");
  fs::create_directories(dir / "in");
  write_bytes(dir / "in/b.jsonl", "{\"meta\":{\"content\":\"second\"}}\n");
  write_bytes(dir / "in/a.jsonl.zst", zstd({"{\"meta\":{\"content\":\"first\"}}\n"}));
  write_bytes(dir / "in/notes.md", "not a corpus file");
  write_bytes(dir / "in/.hidden.jsonl", "{}\n");
  EXPECT_EQ(documents_of({dir / "in"}, "meta.content"), (std::vector<std::string>{"first", "second"}));
  auto files = expand_corpus_inputs({dir / "in"});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].compression, Compression::Zstd);
  EXPECT_EQ(files[0].format, CorpusFormat::JsonLines);

  JsonTextExtractor json;
  std::string text;
  EXPECT_NE(json.extract("{\"meta\":{\"other\":1}}", parse_text_key("meta.content"), text).find("no key \"meta.content\""),
            std::string::npos);
  EXPECT_NE(json.extract("{\"meta\":3}", parse_text_key("meta.content"), text).find("\"meta\" is a number"),
            std::string::npos);
  EXPECT_NE(json.extract("{\"text\":5}", parse_text_key("text"), text).find("\"text\" is a number, not a string"),
            std::string::npos);
  EXPECT_NE(json.extract("{\"text\":\"a\"", parse_text_key("text"), text).find("malformed JSON"), std::string::npos);
  EXPECT_NE(json.extract("{\"text\":\"a\", \"x\": [1,}", parse_text_key("text"), text).find("malformed JSON"),
            std::string::npos);  // a syntax error after the key still counts
  EXPECT_NE(json.extract("[1]", parse_text_key("text"), text).find("not a JSON object"), std::string::npos);
  EXPECT_EQ(json.extract("{\"text\":\"\\u00e9\\ud83d\\ude00\"}", parse_text_key("text"), text), "");
  EXPECT_EQ(text, "\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_NE(error_of([] { parse_text_key("a..b"); }).find("empty component"), std::string::npos);
  EXPECT_NE(error_of([&] { expand_corpus_inputs({dir / "in/notes.md"}); }).find("unsupported input"), std::string::npos);
  EXPECT_NE(error_of([&] { expand_corpus_inputs({dir / "missing.jsonl"}); }).find("missing.jsonl: input not found"),
            std::string::npos);
}

TEST(Corpus, RepairUtf8ReplacesMaximalSubparts) {
  // Expected values are Python's bytes.decode("utf-8", "replace").encode().
  struct Case {
    std::string in, out;
    size_t n;
  };
  const std::string R = "\xEF\xBF\xBD";
  std::vector<Case> cases = {
      {"plain", "plain", 0},
      {"a\xC3\xA9z", "a\xC3\xA9z", 0},
      {"a\xFFz", "a" + R + "z", 1},
      {"\xC3", R, 1},                              // truncated two-byte sequence
      {"\xE2\x82z", R + "z", 1},                   // truncated three-byte: one U+FFFD
      {"\xF0\x9F\x98", R, 1},                      // truncated four-byte
      {"\xED\xA0\x80", R + R + R, 3},              // a surrogate: each byte
      {"\xC0\xAF", R + R, 2},                      // overlong
      {"\xF4\x90\x80\x80", R + R + R + R, 4},      // above U+10FFFF
      {"\x80\x80", R + R, 2},                      // lone continuations
      {"ok\xE2\x82\xAC\xE2\x82", "ok\xE2\x82\xAC" + R, 1},
  };
  for (auto& c : cases) {
    std::string s = c.in;
    EXPECT_EQ(repair_utf8(s), c.n) << c.out;
    EXPECT_EQ(s, c.out);
    EXPECT_TRUE(is_valid_utf8(s));
  }
}

TEST(Corpus, DedupSetFindsEveryDuplicate) {
  DedupSet set;
  for (uint64_t i = 0; i < 5000; ++i) EXPECT_TRUE(set.insert(hash_document(std::to_string(i))));
  for (uint64_t i = 0; i < 5000; i += 7) EXPECT_FALSE(set.insert(hash_document(std::to_string(i))));
  EXPECT_TRUE(set.insert({0, 0}));
  EXPECT_FALSE(set.insert({0, 0}));
  EXPECT_EQ(set.size(), 5001u);
}

TEST(Corpus, CompressionErrorsNameTheFile) {
  TempDir dir("corpus", "bad");
  const std::string plain = jsonl_of(hard_documents(), false);
  const std::string gz = gzip({plain}), zs = zstd({plain});
  write_bytes(dir / "cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  write_bytes(dir / "cut.jsonl.zst", zs.substr(0, zs.size() / 2));
  write_bytes(dir / "fake.jsonl.gz", plain);
  write_bytes(dir / "fake.jsonl.zst", plain);
  write_bytes(dir / "empty.jsonl.gz", "");
  std::string corrupt = gz;
  for (size_t i = 40; i < 80; ++i) corrupt[i] = char(corrupt[i] ^ 0x5a);
  write_bytes(dir / "corrupt.jsonl.gz", corrupt);
  write_bytes(dir / "tail.jsonl.gz", gz + "garbage");
  struct Case {
    const char* name;
    const char* says;
  };
  for (Case c : {Case{"cut.jsonl.gz", "truncated gzip stream"}, Case{"cut.jsonl.zst", "truncated zstd stream"},
                 Case{"fake.jsonl.gz", "named .gz but not gzip data"}, Case{"fake.jsonl.zst", "named .zst but not zstd data"},
                 Case{"empty.jsonl.gz", "not gzip data (empty file)"}, Case{"corrupt.jsonl.gz", "gzip"},
                 Case{"tail.jsonl.gz", "are not gzip data"}}) {
    std::string e = error_of([&] { documents_of({dir / c.name}); });
    EXPECT_NE(e.find(std::string(dir / c.name) + ": "), std::string::npos) << e;
    EXPECT_NE(e.find(c.says), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// ---------------------------------------------------------------- prepare on corpora

namespace {

struct PrepareFixture {
  TempDir dir{"prepare_corpus", "f"};
  PrepareOptions opt;
  PrepareFixture() {
    fs::create_directories(dir / "tok");
    test_util::write_byte_tokenizer(dir / "tok");
    opt.tokenizer = dir / "tok/tokenizer.json";
    opt.val_fraction = 0.3;
    opt.progress_seconds = 0;
  }
  PrepareResult run(const std::vector<std::string>& inputs, const std::string& out) {
    PrepareOptions o = opt;
    o.inputs = inputs;
    o.out_dir = dir / out;
    return prepare_corpus(o);
  }
  // Every output file of a prepare, by name (meta.json without its run-dependent fields).
  std::map<std::string, std::string> outputs(const std::string& out) {
    std::map<std::string, std::string> m;
    for (const auto& e : fs::directory_iterator(dir / out)) {
      std::string name = e.path().filename().string();
      if (name == "meta.json") continue;
      m[name] = read_bytes(e.path());
    }
    return m;
  }
};

std::vector<int32_t> stream_of(const std::vector<std::string>& shards) {
  TokenStream ts("t", shards, true);
  std::vector<int32_t> all(ts.size());
  if (!all.empty()) ts.read(0, ts.size(), all.data());
  return all;
}

}  // namespace

TEST(PrepareCorpus, FormatsGiveTheSameTokens) {
  PrepareFixture f;
  const auto docs = hard_documents();
  const std::string plain = jsonl_of(docs, false);
  write_bytes(f.dir / "c.jsonl", plain);
  write_bytes(f.dir / "c.json", jsonl_of(docs, true));
  write_bytes(f.dir / "c.jsonl.gz", gzip({plain}));
  write_bytes(f.dir / "c.jsonl.zst", zstd({plain}));
  PrepareResult ref = f.run({f.dir / "c.jsonl"}, "ref");
  EXPECT_EQ(ref.train.documents + ref.val.documents, docs.size());
  EXPECT_GT(ref.val.documents, 0u);
  for (const char* name : {"c.json", "c.jsonl.gz", "c.jsonl.zst"}) {
    std::string out = std::string("out_") + name;
    PrepareResult r = f.run({f.dir / name}, out);
    EXPECT_EQ(f.outputs(out), f.outputs("ref")) << name;
    EXPECT_EQ(r.train.tokens, ref.train.tokens);
  }
  // The byte tokenizer: a document's tokens are its bytes (+3), then EOS.
  std::vector<int32_t> all = stream_of(ref.train.shards);
  auto v = stream_of(ref.val.shards);
  all.insert(all.end(), v.begin(), v.end());
  uint64_t bytes = 0;
  for (const auto& d : docs) bytes += d.size() + 1;
  EXPECT_EQ(all.size(), bytes);
}

TEST(PrepareCorpus, SameBytesAtOneAndTwoThreads) {
  PrepareFixture f;
  std::string corpus;
  for (int i = 0; i < 3000; ++i)
    corpus += nlohmann::json({{"text", "document " + std::to_string(i % 2500) + std::string(size_t(i % 2500 % 37), 'z')}})
                  .dump() +
              "\n";
  write_bytes(f.dir / "c.jsonl.zst", zstd({corpus}));
  f.opt.threads = 1;
  f.opt.shard_tokens = 5000;
  PrepareResult one = f.run({f.dir / "c.jsonl.zst"}, "one");
  f.opt.threads = 2;
  PrepareResult two = f.run({f.dir / "c.jsonl.zst"}, "two");
  EXPECT_GT(one.train.shards.size(), 2u);
  EXPECT_EQ(f.outputs("one"), f.outputs("two"));
  EXPECT_EQ(one.counts.duplicates, 500u);
  EXPECT_EQ(two.counts.duplicates, 500u);
}

TEST(PrepareCorpus, FiltersAreCountedInMeta) {
  PrepareFixture f;
  write_bytes(f.dir / "c.jsonl",
              "{\"text\":\"alpha\"}\n"
              "{\"text\":\"beta\"}\n"
              "{\"text\":\"alpha\"}\n"          // duplicate
              "{\"text\":\"\"}\n"               // empty
              "{\"text\":\"bad \xFF byte\"}\n"  // invalid UTF-8
              "{\"text\":3}\n"                  // not a string
              "{\"txt\":\"x\"}\n"               // no key
              "{\"text\":\"unclosed\"\n"        // malformed
              "{\"text\":\"gamma\"}\n");
  std::string e = error_of([&] { f.run({f.dir / "c.jsonl"}, "strict"); });
  EXPECT_NE(e.find(std::string(f.dir / "c.jsonl") + ":6: \"text\" is a number, not a string"), std::string::npos) << e;
  EXPECT_NE(e.find("--skip-bad-lines"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(f.dir / "strict/meta.json"));
  EXPECT_FALSE(fs::exists(f.dir / "strict/train_000.bin"));
  EXPECT_FALSE(fs::exists(f.dir / "strict"));  // made by the run, so removed with its staging

  f.opt.skip_bad_lines = true;
  PrepareResult r = f.run({f.dir / "c.jsonl"}, "skip");
  EXPECT_EQ(r.counts.records, 9u);
  EXPECT_EQ(r.counts.bad_lines, 3u);
  EXPECT_EQ(r.counts.duplicates, 1u);
  EXPECT_EQ(r.counts.empty, 1u);
  EXPECT_EQ(r.counts.utf8_documents, 1u);
  EXPECT_EQ(r.counts.utf8_replacements, 1u);
  EXPECT_EQ(r.train.documents + r.val.documents, 4u);  // alpha, beta, bad byte, gamma
  auto meta = nlohmann::json::parse(read_bytes(r.meta_path));
  EXPECT_EQ(meta["filtered"]["bad_lines_skipped"], 3);
  EXPECT_EQ(meta["filtered"]["duplicates_dropped"], 1);
  EXPECT_EQ(meta["filtered"]["empty_skipped"], 1);
  EXPECT_EQ(meta["filtered"]["utf8_replacements"], 1);
  EXPECT_NE(meta["filtered"]["first_bad_line"].get<std::string>().find("c.jsonl:6:"), std::string::npos);
  EXPECT_EQ(meta["sources"][0]["format"], "jsonl");

  f.opt.dedup = false;
  PrepareResult all = f.run({f.dir / "c.jsonl"}, "nodedup");
  EXPECT_EQ(all.counts.duplicates, 0u);
  EXPECT_EQ(all.train.documents + all.val.documents, 5u);
}

TEST(PrepareCorpus, AFailedOrKilledRunLeavesThePreviousOutputWhole) {
  PrepareFixture f;
  write_bytes(f.dir / "good.jsonl", jsonl_of(hard_documents(), false));
  PrepareResult r = f.run({f.dir / "good.jsonl"}, "out");
  const auto before = f.outputs("out");
  const std::string meta = read_bytes(r.meta_path);
  // A run that fails late (a truncated file after a good one) changes nothing in OUT.
  std::string zs = zstd({jsonl_of(hard_documents(), false)});
  write_bytes(f.dir / "late.jsonl.zst", zs.substr(0, zs.size() - 10));
  std::string e = error_of([&] { f.run({f.dir / "good.jsonl", f.dir / "late.jsonl.zst"}, "out"); });
  EXPECT_NE(e.find("truncated zstd stream"), std::string::npos) << e;
  EXPECT_EQ(f.outputs("out"), before);
  EXPECT_EQ(read_bytes(r.meta_path), meta);
  // The staging directory of a killed run (its process gone) is removed by the next run.
  fs::create_directories(f.dir / "out/.prepare-999999999");
  write_bytes(f.dir / "out/.prepare-999999999/train_000.bin", "half");
  f.run({f.dir / "good.jsonl"}, "out");
  EXPECT_FALSE(fs::exists(f.dir / "out/.prepare-999999999"));
  EXPECT_EQ(f.outputs("out"), before);
}

TEST(PrepareCorpus, MegatronOutputHoldsTheSameTokens) {
  PrepareFixture f;
  write_bytes(f.dir / "c.jsonl", jsonl_of(hard_documents(), false));
  PrepareResult shards = f.run({f.dir / "c.jsonl"}, "shards");
  f.opt.output_format = "megatron";
  PrepareResult mg = f.run({f.dir / "c.jsonl"}, "mg");
  EXPECT_EQ(mg.train.tokens, shards.train.tokens);
  EXPECT_TRUE(fs::exists(f.dir / "mg/train_text_document.idx"));
  EXPECT_TRUE(fs::exists(f.dir / "mg/val_text_document.bin"));
  EXPECT_FALSE(fs::exists(f.dir / "mg/train_000.bin"));
  MegatronDataset ds(f.dir / "mg/train_text_document");
  EXPECT_EQ(ds.documents(), shards.train.documents);
  std::vector<int32_t> want = stream_of(shards.train.shards), got(want.size());
  ASSERT_EQ(ds.tokens(), want.size());
  ds.read(0, want.size(), got.data());
  EXPECT_EQ(got, want);
  auto meta = nlohmann::json::parse(read_bytes(mg.meta_path));
  EXPECT_EQ(meta["train"]["megatron_prefix"], "train_text_document");
  // Prepared again as shards into the same directory: the Megatron files go.
  f.opt.output_format = "shards";
  f.run({f.dir / "c.jsonl"}, "mg");
  EXPECT_FALSE(fs::exists(f.dir / "mg/train_text_document.idx"));
  EXPECT_TRUE(fs::exists(f.dir / "mg/train_000.bin"));
}
